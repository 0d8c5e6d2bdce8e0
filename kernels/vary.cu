// vary.cu: variation on the GPU, twin of src/program/vary.rs (tree operators, breed),
// src/program/init.rs (random subtrees) and src/genome/vary.rs (GE crossover, int-flip).
//
// One thread per offspring. Every operator is written as its Rust twin is, step for step: the
// same draws from the same counter-addressed streams in the same order (rng.cuh), every tree
// change through one subtree-exchange function (grove_exchange, EvoGP IV-B), and the same
// fallbacks (an oversized child, or one that lost an output slot with no node to carry it,
// is a copy of its parent). The host side is src/backend/cuda/vary.rs; parity tests are
// tests/cuda_vary.rs.
//
// Layouts. A population is structure-of-arrays [P x L]: op u8, value f32, size u16, out u8,
// and len u16 [P]; prefix order, node i's subtree is i .. i + size[i], padding zero (see
// src/program/tree.rs). Scratch: a population of [2P x L] (row k: child k's crossover result
// before mutation; row P + k: new material for child k's mutation) and pending u32 [P x L]
// (the generator's stack of open child depths, then the size computation's stack).
// Every row of every population and scratch buffer is zero after its length (allocation
// zeroes, and every writer keeps it so: these kernels, map.cu's tree writer, uploads of
// validated populations), so writing a tree of length n over one of length old only zeroes
// old's tail [n, old), not the whole row.
// Pairs: [P x 2] u32 parent indices (recipient, donor). Outcome codes: see GROVE_BRED_*.

#include "grove_common.h"
#include "rng.cuh"

// Most entries of BreedConfig's crossover and mutation lists.
#define GROVE_MAX_CROSSOVERS 8
#define GROVE_MAX_MUTATIONS 16

// Outcome (vary::Outcome) codes.
#define GROVE_CHANGED 0u
#define GROVE_UNCHANGED 1u
#define GROVE_OVERSIZED 2u
#define GROVE_NO_ROOM_FOR_OUTPUTS 3u

// Population methods (init::InitMethod).
#define GROVE_INIT_GROW 0u
#define GROVE_INIT_FULL 1u
#define GROVE_INIT_HALF_AND_HALF 2u

// Operator codes: crossovers (vary::Crossover) then mutations (vary::Mutation).
#define GROVE_X_ONE_POINT 0u
#define GROVE_X_LEAF_BIASED 1u
#define GROVE_M_SUBTREE 2u
#define GROVE_M_HOIST 3u
#define GROVE_M_POINT 4u
#define GROVE_M_MULTI_POINT 5u
#define GROVE_M_INSERT 6u
#define GROVE_M_DELETE 7u
#define GROVE_M_CONSTANT 8u
#define GROVE_M_MULTI_CONSTANT 9u

// Mirrors VaryParams in src/backend/cuda/kernels.rs: the tree spec, the operator settings and
// the breeding mix, resolved on the host (grow's leaf probability and the cumulative weights
// are computed there once, as the CPU computes them).
struct GroveVaryParams {
    unsigned n_children;      // P of the children
    unsigned max_len;         // L
    unsigned n_outputs;       // output slots (0: single output)
    unsigned seed_lo;         // the run's seed, low word
    unsigned seed_hi;         // high word
    unsigned generation;      // the generation the children belong to
    unsigned n_functions;     // entries of functions[]
    unsigned n_vars;          // variable leaves 0 .. n_vars
    unsigned n_constants;     // entries of constants[]
    unsigned has_range;       // 1: constants may come from [range_lo, range_hi)
    float range_lo;
    float range_hi;
    float p_const;            // TreeSpec::p_const
    float p_leaf_grow;        // TreeSpec::grow_leaf_prob()
    float p_out;              // TreeSpec::p_out
    float p_leaf;             // VaryConfig::p_leaf (leaf-biased crossover)
    unsigned subtree_lo;      // VaryConfig::subtree_depth
    unsigned subtree_hi;
    float p_point;            // VaryConfig::p_point
    float sigma;              // VaryConfig::sigma
    float p_constant;         // VaryConfig::p_constant
    float p_crossover;        // BreedConfig::p_crossover
    float p_mutation;         // BreedConfig::p_mutation
    unsigned n_crossovers;    // entries of cum_x / kind_x
    unsigned n_mutations;     // entries of cum_m / kind_m
    unsigned op;              // grove_vary_op: the operator (GROVE_X_* or GROVE_M_*)
    float cum_x[GROVE_MAX_CROSSOVERS];   // cumulative crossover weights, ending at 1
    unsigned kind_x[GROVE_MAX_CROSSOVERS];  // GROVE_X_* of each entry
    float cum_m[GROVE_MAX_MUTATIONS];    // cumulative mutation weights, ending at 1
    unsigned kind_m[GROVE_MAX_MUTATIONS];   // GROVE_M_* of each entry
    unsigned init_method;     // grove_init_trees: GROVE_INIT_* (TreeSpec::method)
    unsigned min_depth;       // TreeSpec::min_depth
    unsigned max_depth;       // TreeSpec::max_depth
};
GROVE_CHECK_LAYOUT(GroveVaryParams);

// Mirrors GeParams in src/backend/cuda/params.rs: GE variation (genome::vary::GeVaryConfig).
struct GroveGeParams {
    unsigned n_pairs;         // grove_ge_crossover: pairs of parents (threads)
    unsigned capacity;        // row stride of every genome array, codons
    unsigned first_row;       // child row of pair 0's first child (after the elite)
    unsigned n_rows;          // rows of the children's arrays; rows at or past it are not written
    unsigned seed_lo;
    unsigned seed_hi;
    unsigned generation;
    unsigned within_used;     // 1: int-flip only the used codons
    float p_crossover;        // GeVaryConfig::crossover
    float p_mutation;         // GeVaryConfig::mutation
    unsigned codon_size;      // codons are drawn from 0 .. codon_size
    unsigned used_stride;     // genome i's used codons are used[i * used_stride] (1: a plain
                              // array; 5: the used_codons of GroveMapOut records)
    unsigned per_used;        // int-flip's rate per codon: 0 p_mutation, 1 one over the codons it
                              // may change, 2 the larger of the two
};
GROVE_CHECK_LAYOUT(GroveGeParams);

// ---------------------------------------------------------------------------------------------
// Opcodes: an unknown code reads as a constant, as Op::from_code(c).unwrap_or(Op::Const) does on
// the CPU (and its arity, grove_common.h's grove_arity, is a leaf's 0).

__device__ __forceinline__ unsigned grove_decode(unsigned code) {
    switch (code) {
        case GROVE_OP_VAR: return GROVE_OP_VAR;
#define GROVE_DECODE_CASE(c, arity, expr) case c: return c;
        GROVE_FOR_EACH_OP(GROVE_DECODE_CASE)
#undef GROVE_DECODE_CASE
        default: return GROVE_OP_CONST;
    }
}

__device__ __forceinline__ bool grove_is_function(unsigned code) { return grove_arity(code) > 0u; }
__device__ __forceinline__ bool grove_is_const(unsigned code) { return grove_decode(code) == GROVE_OP_CONST; }

// ---------------------------------------------------------------------------------------------
// Lanes. A group of GROVE_LANES lanes (a warp) makes one child: every lane takes the same
// decisions, drawing the same numbers from the same stream, and the lanes share the work on
// nodes (copies, scans, counts). Writes follow two rules:
// - a parallel step (grove_copy, grove_exchange, grove_zero_from, ...) writes node k from lane
//   k % GROVE_LANES and is fenced by grove_sync before and after;
// - a sequential step that reads what it writes (drawing a new tree, mutating a node) is taken
//   by lane 0 alone, which then hands its stream to the others (grove_share); a step that only
//   writes draws on every lane and writes from lane 0.
// The fences make every write visible to every lane before any lane reads it.

// Lanes per child (LANES in src/backend/cuda/kernels.rs): a power of two, at most 32.
#define GROVE_LANES 32
#include "lanes.cuh"

// ---------------------------------------------------------------------------------------------
// Trees and rows.

// A tree, read-only (TreeRef): len nodes at these addresses.
struct GroveTree {
    const unsigned char* op;
    const float* value;
    const unsigned short* size;
    const unsigned char* out;
    unsigned len;
};

// A row to write (RowMut): max_len slots and the length.
struct GroveRow {
    unsigned char* op;
    float* value;
    unsigned short* size;
    unsigned char* out;
    unsigned short* len;
    unsigned max_len;
};

// The arrays of a population on the device.
struct GrovePop {
    unsigned char* op;
    float* value;
    unsigned short* size;
    unsigned char* out;
    unsigned short* len;
};

// A population as five kernel parameters, and back.
#define GROVE_POP_PARAMS(n) \
    unsigned char *n##_op, float *n##_value, unsigned short *n##_size, unsigned char *n##_out, unsigned short *n##_len
#define GROVE_POP(n) {n##_op, n##_value, n##_size, n##_out, n##_len}

__device__ __forceinline__ GroveRow grove_row(GrovePop p, unsigned i, unsigned max_len) {
    const unsigned long long a = (unsigned long long)i * max_len;
    GroveRow r = {p.op + a, p.value + a, p.size + a, p.out + a, p.len + i, max_len};
    return r;
}

__device__ __forceinline__ GroveTree grove_tree(GrovePop p, unsigned i, unsigned max_len) {
    const unsigned long long a = (unsigned long long)i * max_len;
    GroveTree t = {p.op + a, p.value + a, p.size + a, p.out + a, p.len[i]};
    return t;
}

__device__ __forceinline__ GroveTree grove_row_tree(GroveRow r) {
    GroveTree t = {r.op, r.value, r.size, r.out, *r.len};
    return t;
}

// TreeRef::subtree: node i's subtree, itself a tree (sizes are relative).
__device__ __forceinline__ GroveTree grove_subtree(GroveTree t, unsigned i) {
    GroveTree s = {t.op + i, t.value + i, t.size + i, t.out + i, t.size[i]};
    return s;
}

// One node, as the four arrays hold it.
struct GroveNode {
    unsigned char op, out;
    unsigned short size;
    float value;
};

__device__ __forceinline__ GroveNode grove_load(GroveTree t, unsigned j) {
    GroveNode v = {t.op[j], t.out[j], t.size[j], t.value[j]};
    return v;
}

__device__ __forceinline__ void grove_store(GroveRow r, unsigned k, GroveNode v) {
    r.op[k] = v.op;
    r.value[k] = v.value;
    r.size[k] = v.size;
    r.out[k] = v.out;
}

// Nodes the lanes load before they store: every lane has this many loads in flight (the rows
// may overlap as far as the compiler knows, so it would not reorder them itself).
#define GROVE_BATCH 4

// Row r's nodes [from, to) zero and its length n (to is r's old length: the slots after it are
// zero already). Parallel.
__device__ void grove_zero_tail(GroveLanes g, GroveRow r, unsigned from, unsigned to, unsigned n) {
    for (unsigned k = from + g.lane; k < to; k += GROVE_LANES) {
        r.op[k] = 0;
        r.value[k] = 0.0f;
        r.size[k] = 0;
        r.out[k] = 0;
    }
    if (g.lane == 0) *r.len = (unsigned short)n;
}

// RowMut::zero_from: length n, every slot from n on zero, after a writer that may have put
// nodes as far as `hi` (a failed draw of a tree; n when nothing went past n): writes
// [n, max(old len, hi)) only. Parallel.
__device__ void grove_zero_from(GroveLanes g, GroveRow r, unsigned n, unsigned hi) {
    const unsigned old = *r.len;
    grove_sync(g);
    grove_zero_tail(g, r, n, old > hi ? old : hi, n);
    grove_sync(g);
}

// The node at slot k of vary::exchange's child (see grove_exchange).
__device__ __forceinline__ GroveNode grove_exchanged(GroveTree r, unsigned at, GroveTree d, unsigned removed, unsigned added,
                                                     unsigned k) {
    if (k < at) {
        GroveNode v = grove_load(r, k);
        const unsigned s = v.size;
        v.size = (unsigned short)(k + s > at ? s - removed + added : s);
        return v;
    }
    if (k < at + added) return grove_load(d, k - at);
    return grove_load(r, k - added + removed);
}

// RowMut::copy_from (a copy is the exchange of nothing at the end). Parallel.
__device__ void grove_copy(GroveLanes g, GroveRow r, GroveTree t) {
    const unsigned old = *r.len, len = t.len;
    grove_sync(g);
    for (unsigned base = 0; base < len; base += GROVE_BATCH * GROVE_LANES) {
        GroveNode v[GROVE_BATCH];
#pragma unroll
        for (unsigned u = 0; u < GROVE_BATCH; ++u) {
            const unsigned k = base + u * GROVE_LANES + g.lane;
            if (k < len) v[u] = grove_load(t, k);
        }
#pragma unroll
        for (unsigned u = 0; u < GROVE_BATCH; ++u) {
            const unsigned k = base + u * GROVE_LANES + g.lane;
            if (k < len) grove_store(r, k, v[u]);
        }
    }
    grove_zero_tail(g, r, len, old, len);
    grove_sync(g);
}

// vary::exchange: child = recipient[..at] ++ donor ++ recipient[at + size[at]..], the sizes of
// at's ancestors changed by donor.len - size[at], padding zero. False (nothing written) if it
// does not fit. Parallel: each slot of the child is read from where it comes from.
__device__ bool grove_exchange(GroveLanes g, GroveRow c, GroveTree r, unsigned at, GroveTree d) {
    const unsigned n = r.len, removed = r.size[at], added = d.len, len = n - removed + added;
    if (len > c.max_len) return false;
    const unsigned old = *c.len;
    grove_sync(g);
    for (unsigned base = 0; base < len; base += GROVE_BATCH * GROVE_LANES) {
        GroveNode v[GROVE_BATCH];
#pragma unroll
        for (unsigned u = 0; u < GROVE_BATCH; ++u) {
            const unsigned k = base + u * GROVE_LANES + g.lane;
            if (k < len) v[u] = grove_exchanged(r, at, d, removed, added, k);
        }
#pragma unroll
        for (unsigned u = 0; u < GROVE_BATCH; ++u) {
            const unsigned k = base + u * GROVE_LANES + g.lane;
            if (k < len) grove_store(c, k, v[u]);
        }
    }
    grove_zero_tail(g, c, len, old, len);
    grove_sync(g);
    return true;
}

// Node kinds the operators count and pick from.
#define GROVE_KIND_FUNCTION 0u
#define GROVE_KIND_LEAF 1u
#define GROVE_KIND_CONST 2u

__device__ __forceinline__ bool grove_is_kind(unsigned code, unsigned kind) {
    return kind == GROVE_KIND_CONST ? grove_is_const(code) : grove_is_function(code) == (kind == GROVE_KIND_FUNCTION);
}

// vary::count: nodes of `kind`.
__device__ unsigned grove_count(GroveLanes g, GroveTree t, unsigned kind) {
    unsigned n = 0;
    for (unsigned i = g.lane; i < t.len; i += GROVE_LANES) n += grove_is_kind(t.op[i], kind);
    return grove_sum(g, n);
}

// vary::nth: position of the k-th node of `kind`; 0 if there is none.
__device__ unsigned grove_nth(GroveLanes g, GroveTree t, unsigned k, unsigned kind) {
    for (unsigned base = 0; base < t.len; base += GROVE_LANES) {
        const unsigned i = base + g.lane;
        const unsigned bits = grove_ballot(g, i < t.len && grove_is_kind(t.op[i], kind));
        const unsigned n = (unsigned)__popc(bits);
        if (k < n) return base + grove_nth_bit(g, bits, k);
        k -= n;
    }
    return 0;
}

// ---------------------------------------------------------------------------------------------
// Output slots (init::place_slot and vary::finish).

// init::place_slot on out[..n]: slot `slot` on the r-th node (r = below(free)) that is not an
// output node. False, with no draw, when every node is one.
__device__ bool grove_place_slot(GroveLanes g, unsigned char* out, unsigned n, unsigned slot, GroveStream& s) {
    grove_sync(g);
    unsigned free = 0;
    for (unsigned i = g.lane; i < n; i += GROVE_LANES) free += out[i] == 0;
    free = grove_sum(g, free);
    if (free == 0) return false;
    unsigned r = grove_below(s, free);
    for (unsigned base = 0; base < n; base += GROVE_LANES) {
        const unsigned i = base + g.lane;
        const unsigned bits = grove_ballot(g, i < n && out[i] == 0);
        const unsigned c = (unsigned)__popc(bits);
        if (r < c) {
            const unsigned at = base + grove_nth_bit(g, bits, r);
            if (g.lane == 0) out[at] = (unsigned char)(slot + 1);
            break;
        }
        r -= c;
    }
    grove_sync(g);
    return true;
}

// vary::slots: the slots with an output node, as 4 x 64 bits.
__device__ void grove_slots(GroveLanes g, GroveTree t, unsigned long long set[4]) {
    unsigned long long s0 = 0ull, s1 = 0ull, s2 = 0ull, s3 = 0ull;
    for (unsigned i = g.lane; i < t.len; i += GROVE_LANES) {
        const unsigned o = t.out[i];
        if (o > 0) {
            const unsigned long long bit = 1ull << ((o - 1) % 64);
            const unsigned w = (o - 1) / 64;
            s0 |= w == 0 ? bit : 0ull;
            s1 |= w == 1 ? bit : 0ull;
            s2 |= w == 2 ? bit : 0ull;
            s3 |= w == 3 ? bit : 0ull;
        }
    }
    set[0] = grove_or(g, s0);
    set[1] = grove_or(g, s1);
    set[2] = grove_or(g, s2);
    set[3] = grove_or(g, s3);
}

// vary::same: bitwise equality.
__device__ bool grove_same(GroveLanes g, GroveTree a, GroveTree b) {
    if (a.len != b.len) return false;
    bool differ = false;
    for (unsigned i = g.lane; i < a.len; i += GROVE_LANES) {
        differ |= a.op[i] != b.op[i] || a.size[i] != b.size[i] || a.out[i] != b.out[i] ||
                  __float_as_uint(a.value[i]) != __float_as_uint(b.value[i]);
    }
    return grove_ballot(g, differ) == 0;
}

// vary::keep.
__device__ unsigned grove_keep(GroveLanes g, GroveTree parent, GroveRow child, unsigned outcome) {
    grove_copy(g, child, parent);
    return outcome;
}

// vary::finish.
__device__ unsigned grove_finish(GroveLanes g, GroveTree parent, GroveRow child, bool fitted, GroveStream& s) {
    if (!fitted) return grove_keep(g, parent, child, GROVE_OVERSIZED);
    grove_sync(g);
    unsigned long long had[4], has[4];
    grove_slots(g, parent, had);
    grove_slots(g, grove_row_tree(child), has);
    const unsigned n = *child.len;
    for (unsigned w = 0; w < 4; ++w) {
        unsigned long long lost = had[w] & ~has[w];
        while (lost != 0ull) {
            const unsigned slot = w * 64 + (unsigned)(__ffsll((long long)lost) - 1);
            lost &= lost - 1ull;
            if (!grove_place_slot(g, child.out, n, slot, s)) return grove_keep(g, parent, child, GROVE_NO_ROOM_FOR_OUTPUTS);
        }
    }
    return grove_same(g, parent, grove_row_tree(child)) ? GROVE_UNCHANGED : GROVE_CHANGED;
}

// ---------------------------------------------------------------------------------------------
// New material (init.rs): leaves and random trees.

// What the operators read besides the trees.
struct GroveSpec {
    const GroveVaryParams* p;
    const unsigned char* functions;  // [n_functions] opcodes, the spec's order
    const float* constants;          // [n_constants]
};

// TreeSpec::random_leaf, into (op, value).
__device__ void grove_random_leaf(const GroveSpec& spec, GroveStream& s, unsigned& op, float& value) {
    const GroveVaryParams& p = *spec.p;
    const bool has_const = p.n_constants > 0 || p.has_range;
    bool constant;
    if (p.n_vars == 0) constant = true;
    else if (!has_const) constant = false;
    else constant = grove_chance(s, p.p_const);
    if (!constant) {
        op = GROVE_OP_VAR;
        value = __uint2float_rn(grove_below(s, p.n_vars));
        return;
    }
    op = GROVE_OP_CONST;
    const unsigned m = p.n_constants;
    bool from_range;
    unsigned u = 0;
    if (!p.has_range) {
        from_range = false;
        u = grove_below(s, m);
    } else if (m == 0) {
        from_range = true;
    } else {
        u = grove_below(s, m + 1);
        from_range = u >= m;
    }
    if (from_range) {
        const float width = __fsub_rn(p.range_hi, p.range_lo);
        value = __fadd_rn(p.range_lo, __fmul_rn(width, grove_unit_f32(s)));
    } else {
        value = spec.constants[u];
    }
}

// init::attempt into row `d` (op, value, out = 0; sizes later), using pending as the stack of
// open child depths. False if it ran over budget. The CPU pushes a function's children and then
// checks; here the check comes first, with no draw in between, so the stack never outgrows
// budget (<= L) and the outcome is the same. Lane 0's alone.
__device__ bool grove_attempt(const GroveSpec& spec, bool grow, unsigned min, unsigned depth, unsigned budget,
                              GroveStream& s, GroveRow d, unsigned* pending, unsigned& n_nodes, unsigned& hi) {
    const GroveVaryParams& p = *spec.p;
    n_nodes = 0;
    unsigned top = 0;
    pending[top++] = 0;
    const unsigned nf = p.n_functions;
    while (top > 0) {
        const unsigned t = pending[--top];
        const bool leaf = nf == 0 || t >= depth || (grow && t >= min && grove_chance(s, p.p_leaf_grow));
        unsigned op;
        float value = 0.0f;
        unsigned arity = 0;
        if (leaf) {
            grove_random_leaf(spec, s, op, value);
        } else {
            op = spec.functions[grove_below(s, nf)];
            arity = grove_arity(op);
        }
        if (n_nodes + 1 + top + arity > budget) return false;
        d.op[n_nodes] = (unsigned char)op;
        d.value[n_nodes] = value;
        d.out[n_nodes] = 0;
        ++n_nodes;
        hi = hi > n_nodes ? hi : n_nodes;
        for (unsigned c = 0; c < arity; ++c) pending[top++] = t + 1;
    }
    return true;
}

// tree::subtree_sizes of nodes 0..n of `d`, by a backward walk with `stack`. Lane 0's alone.
__device__ void grove_sizes(GroveRow d, unsigned n, unsigned* stack) {
    unsigned top = 0;
    for (unsigned i = n; i-- > 0;) {
        const unsigned k = grove_arity(d.op[i]);
        unsigned sz = 1;
        for (unsigned c = 0; c < k; ++c) sz += stack[--top];
        d.size[i] = (unsigned short)sz;
        stack[top++] = sz;
    }
}

// init::random_tree into `d` (sizes and padding included): returns the length.
__device__ unsigned grove_random_tree(GroveLanes g, const GroveSpec& spec, bool grow, unsigned min_depth, unsigned depth,
                                      unsigned budget, GroveStream& s, GroveRow d, unsigned* pending) {
    unsigned n = 0, hi = 0;  // hi: the most nodes any attempt wrote
    grove_sync(g);
    if (g.lane == 0) {
        unsigned d_ = depth < budget - 1 ? depth : budget - 1;
        bool gr = grow;
        while (!grove_attempt(spec, gr, min_depth < d_ ? min_depth : d_, d_, budget, s, d, pending, n, hi)) {
            if (!gr) gr = true;
            else --d_;
        }
        grove_sizes(d, n, pending);
    }
    n = grove_share(g, n);
    hi = grove_share(g, hi);
    grove_share(g, s);
    grove_zero_from(g, d, n, hi);
    return n;
}

// init::extra_outputs on the nodes of `d` (all of them new, none an output node yet), by
// lane 0.
__device__ void grove_extra_outputs(GroveLanes g, const GroveSpec& spec, GroveRow d, unsigned n, GroveStream& s) {
    const GroveVaryParams& p = *spec.p;
    if (p.n_outputs == 0 || !(p.p_out > 0.0f)) return;
    grove_sync(g);
    if (g.lane == 0) {
        for (unsigned i = 0; i < n; ++i) {
            if (d.out[i] == 0 && grove_chance(s, p.p_out)) d.out[i] = (unsigned char)(grove_below(s, p.n_outputs) + 1);
        }
    }
    grove_share(g, s);
    grove_sync(g);
}

// ---------------------------------------------------------------------------------------------
// The operators (vary.rs, same names).

__device__ unsigned grove_one_point_crossover(GroveLanes g, GroveTree r, GroveTree d, GroveRow c, GroveStream& s) {
    if (r.len == 0 || d.len == 0) return grove_keep(g, r, c, GROVE_UNCHANGED);
    const unsigned i = grove_below(s, r.len);
    const unsigned j = grove_below(s, d.len);
    const bool fitted = grove_exchange(g, c, r, i, grove_subtree(d, j));
    return grove_finish(g, r, c, fitted, s);
}

// vary::biased_point.
__device__ unsigned grove_biased_point(GroveLanes g, GroveTree t, float p_leaf, GroveStream& s) {
    const bool want_leaf = grove_chance(s, p_leaf);
    const unsigned functions = grove_count(g, t, GROVE_KIND_FUNCTION);
    const bool leaf = want_leaf || functions == 0;
    const unsigned k = grove_below(s, leaf ? t.len - functions : functions);
    return grove_nth(g, t, k, leaf ? GROVE_KIND_LEAF : GROVE_KIND_FUNCTION);
}

__device__ unsigned grove_leaf_biased_crossover(GroveLanes g, GroveTree r, GroveTree d, GroveRow c, GroveStream& s,
                                                const GroveSpec& spec) {
    if (r.len == 0 || d.len == 0) return grove_keep(g, r, c, GROVE_UNCHANGED);
    const unsigned i = grove_biased_point(g, r, spec.p->p_leaf, s);
    const unsigned j = grove_biased_point(g, d, spec.p->p_leaf, s);
    const bool fitted = grove_exchange(g, c, r, i, grove_subtree(d, j));
    return grove_finish(g, r, c, fitted, s);
}

// `fresh`: a scratch row for the new subtree; `pending`: the generator's stack.
__device__ unsigned grove_subtree_mutation(GroveLanes g, GroveTree t, GroveRow c, GroveStream& s, const GroveSpec& spec,
                                           GroveRow fresh, unsigned* pending) {
    if (t.len == 0) return grove_keep(g, t, c, GROVE_UNCHANGED);
    const GroveVaryParams& p = *spec.p;
    const unsigned i = grove_below(s, t.len);
    const unsigned lo = p.subtree_lo, hi = p.subtree_hi;
    const unsigned depth = lo + grove_below(s, hi - lo + 1);
    const unsigned total = c.max_len + t.size[i];
    const unsigned room = total > t.len ? total - t.len : 0;
    const unsigned n = grove_random_tree(g, spec, true, lo, depth, room > 1 ? room : 1, s, fresh, pending);
    grove_extra_outputs(g, spec, fresh, n, s);
    const bool fitted = grove_exchange(g, c, t, i, grove_row_tree(fresh));
    return grove_finish(g, t, c, fitted, s);
}

__device__ unsigned grove_hoist_mutation(GroveLanes g, GroveTree t, GroveRow c, GroveStream& s) {
    const unsigned functions = grove_count(g, t, GROVE_KIND_FUNCTION);
    if (functions == 0) return grove_keep(g, t, c, GROVE_UNCHANGED);
    const unsigned i = grove_nth(g, t, grove_below(s, functions), GROVE_KIND_FUNCTION);
    const unsigned j = i + 1 + grove_below(s, (unsigned)t.size[i] - 1);
    const bool fitted = grove_exchange(g, c, t, i, grove_subtree(t, j));
    return grove_finish(g, t, c, fitted, s);
}

// vary::mutate_node on node i of row `c`. Lane 0's alone.
__device__ bool grove_mutate_node(GroveRow c, unsigned i, GroveStream& s, const GroveSpec& spec) {
    const unsigned op = grove_decode(c.op[i]);
    const unsigned arity = grove_arity(op);
    if (arity == 0) {
        for (int attempt = 0; attempt < 4; ++attempt) {
            unsigned lop;
            float lv;
            grove_random_leaf(spec, s, lop, lv);
            if (lop != op || __float_as_uint(lv) != __float_as_uint(c.value[i])) {
                c.op[i] = (unsigned char)lop;
                c.value[i] = lv;
                return true;
            }
        }
        return false;
    }
    const unsigned nf = spec.p->n_functions;
    unsigned n = 0;
    for (unsigned f = 0; f < nf; ++f) n += grove_arity(spec.functions[f]) == arity && spec.functions[f] != op;
    if (n == 0) return false;
    unsigned k = grove_below(s, n);
    for (unsigned f = 0; f < nf; ++f) {
        const unsigned fg = spec.functions[f];
        if (grove_arity(fg) == arity && fg != op) {
            if (k == 0) {
                c.op[i] = (unsigned char)fg;
                break;
            }
            --k;
        }
    }
    return true;
}

__device__ unsigned grove_point_mutation(GroveLanes g, GroveTree t, GroveRow c, GroveStream& s, const GroveSpec& spec) {
    grove_copy(g, c, t);
    if (t.len == 0) return GROVE_UNCHANGED;
    const unsigned i = grove_below(s, t.len);
    if (g.lane == 0) grove_mutate_node(c, i, s, spec);
    grove_share(g, s);
    return grove_finish(g, t, c, true, s);
}

__device__ unsigned grove_multi_point_mutation(GroveLanes g, GroveTree t, GroveRow c, GroveStream& s, const GroveSpec& spec) {
    grove_copy(g, c, t);
    if (g.lane == 0) {
        for (unsigned i = 0; i < t.len; ++i) {
            if (grove_chance(s, spec.p->p_point)) grove_mutate_node(c, i, s, spec);
        }
    }
    grove_share(g, s);
    return grove_finish(g, t, c, true, s);
}

// `fresh`: a scratch row for [function, children...].
__device__ unsigned grove_insert_mutation(GroveLanes g, GroveTree t, GroveRow c, GroveStream& s, const GroveSpec& spec,
                                          GroveRow fresh) {
    const unsigned nf = spec.p->n_functions;
    if (t.len == 0 || nf == 0) return grove_keep(g, t, c, GROVE_UNCHANGED);
    const unsigned i = grove_below(s, t.len);
    const unsigned f = spec.functions[grove_below(s, nf)];
    const unsigned arity = grove_arity(f);
    const unsigned pos = grove_below(s, arity);
    if (t.len + arity > c.max_len) return grove_keep(g, t, c, GROVE_OVERSIZED);
    // The donor: f over its children, the old subtree at `pos`, new leaves elsewhere (drawn in
    // child order, before and after the subtree). Sizes as Population::set_tree computes them:
    // the old subtree's are relative already.
    const GroveTree sub = grove_subtree(t, i);
    grove_sync(g);
    const bool writes = g.lane == 0;
    if (writes) {
        fresh.op[0] = (unsigned char)f;
        fresh.value[0] = 0.0f;
        fresh.out[0] = 0;
    }
    unsigned n = 1;
    for (unsigned ch = 0; ch < arity; ++ch) {
        if (ch == pos) {
            grove_sync(g);
            for (unsigned k = g.lane; k < sub.len; k += GROVE_LANES) {
                fresh.op[n + k] = sub.op[k];
                fresh.value[n + k] = sub.value[k];
                fresh.size[n + k] = sub.size[k];
                fresh.out[n + k] = sub.out[k];
            }
            grove_sync(g);
            n += sub.len;
        } else {
            unsigned lop;
            float lv;
            grove_random_leaf(spec, s, lop, lv);
            if (writes) {
                fresh.op[n] = (unsigned char)lop;
                fresh.value[n] = lv;
                fresh.size[n] = 1;
                fresh.out[n] = 0;
            }
            ++n;
        }
    }
    if (writes) fresh.size[0] = (unsigned short)n;
    grove_zero_from(g, fresh, n, n);
    const bool fitted = grove_exchange(g, c, t, i, grove_row_tree(fresh));
    return grove_finish(g, t, c, fitted, s);
}

__device__ unsigned grove_delete_mutation(GroveLanes g, GroveTree t, GroveRow c, GroveStream& s) {
    const unsigned functions = grove_count(g, t, GROVE_KIND_FUNCTION);
    if (functions == 0) return grove_keep(g, t, c, GROVE_UNCHANGED);
    const unsigned i = grove_nth(g, t, grove_below(s, functions), GROVE_KIND_FUNCTION);
    const unsigned arity = grove_arity(t.op[i]);
    unsigned j = i + 1;
    const unsigned skip = grove_below(s, arity);
    for (unsigned k = 0; k < skip; ++k) j += t.size[j];
    const bool fitted = grove_exchange(g, c, t, i, grove_subtree(t, j));
    return grove_finish(g, t, c, fitted, s);
}

// vary::perturb: c + sigma * normal(), c if that is not finite.
__device__ float grove_perturb(float c, GroveStream& s, float sigma) {
    const float z = grove_normal(s);
    const float v = __fadd_rn(c, __fmul_rn(sigma, z));
    return isfinite(v) ? v : c;
}

__device__ unsigned grove_constant_mutation(GroveLanes g, GroveTree t, GroveRow c, GroveStream& s, const GroveSpec& spec) {
    grove_copy(g, c, t);
    const unsigned n = grove_count(g, t, GROVE_KIND_CONST);
    if (n == 0) return GROVE_UNCHANGED;
    const unsigned i = grove_nth(g, t, grove_below(s, n), GROVE_KIND_CONST);
    const float v = grove_perturb(t.value[i], s, spec.p->sigma);
    if (g.lane == 0) c.value[i] = v;
    return grove_finish(g, t, c, true, s);
}

// The constants (opcode GROVE_OP_CONST) are found a chunk at a time by ballot and visited in
// order, each drawing as on the CPU.
__device__ unsigned grove_multi_constant_mutation(GroveLanes g, GroveTree t, GroveRow c, GroveStream& s, const GroveSpec& spec) {
    grove_copy(g, c, t);
    for (unsigned base = 0; base < t.len; base += GROVE_LANES) {
        const unsigned k = base + g.lane;
        unsigned bits = grove_ballot(g, k < t.len && t.op[k] == GROVE_OP_CONST);
        while (bits != 0u) {
            const unsigned i = base + (unsigned)__ffs(bits) - 1u;
            bits &= bits - 1u;
            if (grove_chance(s, spec.p->p_constant)) {
                const float v = grove_perturb(t.value[i], s, spec.p->sigma);
                if (g.lane == 0) c.value[i] = v;
            }
        }
    }
    return grove_finish(g, t, c, true, s);
}

// Crossover::apply.
__device__ __forceinline__ unsigned grove_apply_crossover(GroveLanes g, unsigned kind, GroveTree a, GroveTree b, GroveRow c, GroveStream& s,
                                          const GroveSpec& spec) {
    return kind == GROVE_X_LEAF_BIASED ? grove_leaf_biased_crossover(g, a, b, c, s, spec) : grove_one_point_crossover(g, a, b, c, s);
}

// Mutation::apply.
__device__ __forceinline__ unsigned grove_apply_mutation(GroveLanes g, unsigned kind, GroveTree t, GroveRow c, GroveStream& s, const GroveSpec& spec,
                                         GroveRow fresh, unsigned* pending) {
    switch (kind) {
        case GROVE_M_SUBTREE: return grove_subtree_mutation(g, t, c, s, spec, fresh, pending);
        case GROVE_M_HOIST: return grove_hoist_mutation(g, t, c, s);
        case GROVE_M_POINT: return grove_point_mutation(g, t, c, s, spec);
        case GROVE_M_MULTI_POINT: return grove_multi_point_mutation(g, t, c, s, spec);
        case GROVE_M_INSERT: return grove_insert_mutation(g, t, c, s, spec, fresh);
        case GROVE_M_DELETE: return grove_delete_mutation(g, t, c, s);
        case GROVE_M_CONSTANT: return grove_constant_mutation(g, t, c, s, spec);
        default: return grove_multi_constant_mutation(g, t, c, s, spec);
    }
}

// vary::pick: the first entry whose cumulative weight exceeds u, else the last.
__device__ unsigned grove_pick(const float* cum, unsigned n, float u) {
    for (unsigned i = 0; i < n; ++i)
        if (u < cum[i]) return i;
    return n - 1;
}

// ---------------------------------------------------------------------------------------------
// Kernels. The tree kernels run a group of GROVE_LANES threads per child (or tree): child k
// is group k of the launch (grove_group_index), and only its lane 0 writes per-child results.
// Their parameters are __grid_constant__: the operators read them through a pointer
// (GroveSpec), which would otherwise copy all 308 bytes to every thread's local memory.

// One operator (GroveVaryParams::op) for every child k: recipient pairs[2k], donor pairs[2k+1]
// (crossovers) or parent pairs[2k] (mutations), on child k's crossover or mutation stream
// (vary::crossover_stream, mutation_stream). outcome[k]: GROVE_CHANGED .. NO_ROOM_FOR_OUTPUTS.
// Twin of Crossover::apply / Mutation::apply.
extern "C" __global__ void grove_vary_op(const __grid_constant__ GroveVaryParams p, const unsigned* pairs, const unsigned char* functions,
                                         const float* constants, GROVE_POP_PARAMS(parents_pop), GROVE_POP_PARAMS(children_pop),
                                         GROVE_POP_PARAMS(scratch_pop), unsigned* pending, unsigned* outcome) {
    const GroveLanes g = grove_lanes();
    const unsigned k = grove_group_index();
    if (k >= p.n_children) return;
    const GroveSpec spec = {&p, functions, constants};
    const GrovePop parents = GROVE_POP(parents_pop), children = GROVE_POP(children_pop), scratch = GROVE_POP(scratch_pop);
    const unsigned L = p.max_len;
    const GroveTree a = grove_tree(parents, pairs[2 * k], L), b = grove_tree(parents, pairs[2 * k + 1], L);
    const GroveRow c = grove_row(children, k, L);
    unsigned* stack = pending + (unsigned long long)k * L;
    unsigned o;
    if (p.op <= GROVE_X_LEAF_BIASED) {
        GroveStream s = grove_stream(p.seed_lo, p.seed_hi, p.generation, k, GROVE_PURPOSE_CROSSOVER);
        o = grove_apply_crossover(g, p.op, a, b, c, s, spec);
    } else {
        GroveStream s = grove_stream(p.seed_lo, p.seed_hi, p.generation, k, GROVE_PURPOSE_MUTATE);
        o = grove_apply_mutation(g, p.op, a, c, s, spec, grove_row(scratch, p.n_children + k, L), stack);
    }
    if (g.lane == 0) outcome[k] = o;
}

// Twin of vary::breed for child k: crossover stream draws chance(p_crossover) and, if it
// crosses, one unit_f32 to pick the crossover; mutation stream likewise; a child neither
// crossed nor mutated is a copy of pairs[2k]. Crossed and mutated: the crossover's child goes
// to scratch row k and is mutated into the child row. bred[k] packs what happened
// (GROVE_BRED_* below); counts[0..4] count crossover outcomes and counts[4..8] mutation
// outcomes (integer atomics: the totals do not depend on the order).
// bred[k] = (crossover entry + 1 or 0) | crossover outcome << 8 | (mutation entry + 1 or 0) << 16
//           | mutation outcome << 24, entries indexing BreedConfig's lists.
// At most 64 registers (8 blocks of 128 threads per SM): twice the resident warps of the
// unbounded 128, for a few spills; measured faster (W2 breeding 71 -> 59 ms over 11
// generations on an H200, docs/benchmarks.md).
#define GROVE_BREED_BOUNDS __launch_bounds__(128, 8)
extern "C" __global__ void GROVE_BREED_BOUNDS grove_breed_trees(const __grid_constant__ GroveVaryParams p, const unsigned* pairs, const unsigned char* functions,
                                             const float* constants, GROVE_POP_PARAMS(parents_pop), GROVE_POP_PARAMS(children_pop),
                                             GROVE_POP_PARAMS(scratch_pop), unsigned* pending, unsigned* bred, unsigned* counts) {
    const GroveLanes g = grove_lanes();
    const unsigned k = grove_group_index();
    if (k >= p.n_children) return;
    const GroveSpec spec = {&p, functions, constants};
    const GrovePop parents = GROVE_POP(parents_pop), children = GROVE_POP(children_pop), scratch = GROVE_POP(scratch_pop);
    const unsigned L = p.max_len;
    GroveStream xs = grove_stream(p.seed_lo, p.seed_hi, p.generation, k, GROVE_PURPOSE_CROSSOVER);
    GroveStream ms = grove_stream(p.seed_lo, p.seed_hi, p.generation, k, GROVE_PURPOSE_MUTATE);
    int x = -1, m = -1;
    if (grove_chance(xs, p.p_crossover)) x = (int)grove_pick(p.cum_x, p.n_crossovers, grove_unit_f32(xs));
    if (grove_chance(ms, p.p_mutation)) m = (int)grove_pick(p.cum_m, p.n_mutations, grove_unit_f32(ms));
    const GroveTree a = grove_tree(parents, pairs[2 * k], L), b = grove_tree(parents, pairs[2 * k + 1], L);
    const GroveRow c = grove_row(children, k, L);
    const GroveRow fresh = grove_row(scratch, p.n_children + k, L);
    unsigned* stack = pending + (unsigned long long)k * L;
    // One call of each operator (so that both inline: their streams stay in registers).
    const GroveRow mid = grove_row(scratch, k, L);
    unsigned xo = 0, mo = 0;
    if (x >= 0) xo = grove_apply_crossover(g, p.kind_x[x], a, b, m >= 0 ? mid : c, xs, spec);
    if (m >= 0) mo = grove_apply_mutation(g, p.kind_m[m], x >= 0 ? grove_row_tree(mid) : a, c, ms, spec, fresh, stack);
    if (x < 0 && m < 0) grove_copy(g, c, a);
    if (g.lane != 0) return;
    bred[k] = (unsigned)(x + 1) | xo << 8 | (unsigned)(m + 1) << 16 | mo << 24;
    if (x >= 0) atomicAdd(&counts[xo], 1u);
    if (m >= 0) atomicAdd(&counts[4 + mo], 1u);
}

// init::init_population on the device: tree i (group i) from stream (seed, 0, i, Init), with
// TreeSpec::method_for(i), init::random_tree within L written straight into row i, then
// init::place_outputs. n_children is P.
extern "C" __global__ void grove_init_trees(const __grid_constant__ GroveVaryParams p, const unsigned char* functions, const float* constants,
                                            GROVE_POP_PARAMS(pop), unsigned* pending) {
    const GroveLanes g = grove_lanes();
    const unsigned i = grove_group_index();
    if (i >= p.n_children) return;
    const GroveSpec spec = {&p, functions, constants};
    const GrovePop pop = GROVE_POP(pop);
    const unsigned L = p.max_len;
    const unsigned ramp = p.max_depth - p.min_depth + 1;
    bool grow;
    unsigned depth;
    if (p.init_method == GROVE_INIT_HALF_AND_HALF) {
        grow = i % 2 == 1;
        depth = p.min_depth + i / 2 % ramp;
    } else {
        grow = p.init_method == GROVE_INIT_GROW;
        depth = p.min_depth + i % ramp;
    }
    GroveStream s = grove_stream(p.seed_lo, p.seed_hi, 0u, i, GROVE_PURPOSE_INIT);
    const GroveRow row = grove_row(pop, i, L);
    const unsigned n = grove_random_tree(g, spec, grow, p.min_depth, depth, L, s, row, pending + (unsigned long long)i * L);
    // place_outputs: min(n, k) slots from a random start, each on a free node, then extras.
    const unsigned k = p.n_outputs;
    if (k == 0) return;
    const unsigned r = grove_below(s, k);
    for (unsigned j = 0; j < (n < k ? n : k); ++j) grove_place_slot(g, row.out, n, (r + j) % k, s);
    grove_extra_outputs(g, spec, row, n, s);
}

// Row r < n of dst becomes row idx[r] of src (elites into the next generation). One block per
// row.
extern "C" __global__ void grove_gather_trees(unsigned n, unsigned max_len, const unsigned* idx, GROVE_POP_PARAMS(src),
                                          GROVE_POP_PARAMS(dst)) {
    const unsigned r = blockIdx.x;
    if (r >= n) return;
    const GrovePop src = GROVE_POP(src), dst = GROVE_POP(dst);
    const unsigned long long from = (unsigned long long)idx[r] * max_len, to = (unsigned long long)r * max_len;
    for (unsigned k = threadIdx.x; k < max_len; k += blockDim.x) {
        dst.op[to + k] = src.op[from + k];
        dst.value[to + k] = src.value[from + k];
        dst.size[to + k] = src.size[from + k];
        dst.out[to + k] = src.out[from + k];
    }
    if (threadIdx.x == 0) dst.len[r] = src.len[idx[r]];
}

// Row idx[r] of dst becomes row r of src, for r < n (migrants over an island's worst rows;
// twin of Population::copy_row). The idx entries are distinct. One block per row.
extern "C" __global__ void grove_scatter_trees(unsigned n, unsigned max_len, const unsigned* idx, GROVE_POP_PARAMS(src),
                                           GROVE_POP_PARAMS(dst)) {
    const unsigned r = blockIdx.x;
    if (r >= n) return;
    const GrovePop src = GROVE_POP(src), dst = GROVE_POP(dst);
    const unsigned long long from = (unsigned long long)r * max_len, to = (unsigned long long)idx[r] * max_len;
    for (unsigned k = threadIdx.x; k < max_len; k += blockDim.x) {
        dst.op[to + k] = src.op[from + k];
        dst.value[to + k] = src.value[from + k];
        dst.size[to + k] = src.size[from + k];
        dst.out[to + k] = src.out[from + k];
    }
    if (threadIdx.x == 0) dst.len[idx[r]] = src.len[r];
}

// ---------------------------------------------------------------------------------------------
// GE variation (genome/vary.rs). Genomes: codons [rows x capacity] u32, zero after each
// length; len [rows] u32.

// genome::vary::crossover for pair j: parents pairs[2j], pairs[2j+1]; stream (seed,
// generation, j, Crossover); children to rows first_row + 2j and + 1 where below n_rows, each
// zero-padded (Genomes::set).
extern "C" __global__ void grove_ge_crossover(GroveGeParams p, const unsigned* pairs, const unsigned* codons,
                                              const unsigned* len, const unsigned* used, unsigned* child_codons,
                                              unsigned* child_len) {
    const unsigned j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= p.n_pairs) return;
    const unsigned cap = p.capacity;
    const unsigned ia = pairs[2 * j], ib = pairs[2 * j + 1];
    const unsigned* ga = codons + (unsigned long long)ia * cap;
    const unsigned* gb = codons + (unsigned long long)ib * cap;
    const unsigned la = len[ia], lb = len[ib];
    GroveStream s = grove_stream(p.seed_lo, p.seed_hi, p.generation, j, GROVE_PURPOSE_CROSSOVER);
    // Parent a's first pa codons then parent b's from pb (no crossover: pa = la, pb = lb).
    unsigned pa = la, pb = lb;
    const bool cross = grove_chance(s, p.p_crossover) && la > 0 && lb > 0;
    if (cross) {
        const unsigned ua = used[(unsigned long long)ia * p.used_stride], ub = used[(unsigned long long)ib * p.used_stride];
        unsigned hi = ua < 1 ? 1 : ua;
        if (hi > la) hi = la;
        pa = 1 + grove_below(s, hi);
        hi = ub < 1 ? 1 : ub;
        if (hi > lb) hi = lb;
        pb = 1 + grove_below(s, hi);
    }
    for (unsigned w = 0; w < 2; ++w) {
        const unsigned row = p.first_row + 2 * j + w;
        if (row >= p.n_rows) break;
        // Child 0: a[..pa] ++ b[pb..]; child 1: b[..pb] ++ a[pa..]; without crossover each
        // parent is copied (its head is all of it, the other's tail empty).
        const unsigned* head = w == 0 ? ga : gb;
        const unsigned* tail = w == 0 ? gb : ga;
        const unsigned nh = w == 0 ? pa : pb;
        const unsigned ts = cross ? (w == 0 ? pb : pa) : 0;
        const unsigned te = cross ? (w == 0 ? lb : la) : 0;
        unsigned* out = child_codons + (unsigned long long)row * cap;
        unsigned n = 0;
        for (unsigned k = 0; k < nh && n < cap; ++k) out[n++] = head[k];
        for (unsigned k = ts; k < te && n < cap; ++k) out[n++] = tail[k];
        child_len[row] = n;
        for (unsigned k = n; k < cap; ++k) out[k] = 0;
    }
}

// genome::vary::int_flip of rows first_row .. n_rows: row k's first min(used[k], len[k])
// codons (all len[k] without within_used), stream (seed, generation, k, Mutate), each at
// p_mutation, or (per_used 1) 1 / limit, rounded as the CPU's f32 `1.0 / limit as f32`, or
// (per_used 2) the larger of the two (GeVaryConfig::int_flip_rate).
extern "C" __global__ void grove_ge_int_flip(GroveGeParams p, const unsigned* used, unsigned* codons, const unsigned* len) {
    const unsigned k = p.first_row + blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= p.n_rows) return;
    const unsigned n = len[k], u = used[(unsigned long long)k * p.used_stride];
    const unsigned limit = p.within_used ? (u < n ? u : n) : n;
    GroveStream s = grove_stream(p.seed_lo, p.seed_hi, p.generation, k, GROVE_PURPOSE_MUTATE);
    unsigned* g = codons + (unsigned long long)k * p.capacity;
    if (limit == 0) return;
    const float inv = __fdiv_rn(1.0f, __uint2float_rn(limit));
    const float rate = p.per_used == 1u ? inv : (p.per_used == 2u ? fmaxf(inv, p.p_mutation) : p.p_mutation);
    for (unsigned c = 0; c < limit; ++c) {
        if (grove_chance(s, rate)) g[c] = grove_below(s, p.codon_size);
    }
}

// Row r < n of dst becomes row idx[r] of src. One block per row.
extern "C" __global__ void grove_gather_genomes(unsigned n, unsigned capacity, const unsigned* idx, const unsigned* src,
                                                const unsigned* src_len, unsigned* dst, unsigned* dst_len) {
    const unsigned r = blockIdx.x;
    if (r >= n) return;
    const unsigned long long from = (unsigned long long)idx[r] * capacity, to = (unsigned long long)r * capacity;
    for (unsigned k = threadIdx.x; k < capacity; k += blockDim.x) dst[to + k] = src[from + k];
    if (threadIdx.x == 0) dst_len[r] = src_len[idx[r]];
}

// Genome idx[r] of dst becomes genome r of src, for r < n (migrants; twin of Genomes::set).
// The idx entries are distinct. One block per row.
extern "C" __global__ void grove_scatter_genomes(unsigned n, unsigned capacity, const unsigned* idx, const unsigned* src,
                                                 const unsigned* src_len, unsigned* dst, unsigned* dst_len) {
    const unsigned r = blockIdx.x;
    if (r >= n) return;
    const unsigned long long from = (unsigned long long)r * capacity, to = (unsigned long long)idx[r] * capacity;
    for (unsigned k = threadIdx.x; k < capacity; k += blockDim.x) dst[to + k] = src[from + k];
    if (threadIdx.x == 0) dst_len[idx[r]] = src_len[r];
}

// Test kernel for rng.cuh: for stream i (seed, generation, i, purpose), 16 words into
// out[16 i ..]: 4 next_u32, 4 below(bound), 4 unit_f32 bits, 4 normal bits, drawn in that
// order from the one stream (Rust twin: tests/cuda_vary.rs).
extern "C" __global__ void grove_rng_draws(unsigned n_streams, unsigned seed_lo, unsigned seed_hi, unsigned generation,
                                           unsigned purpose, unsigned bound, unsigned* out) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_streams) return;
    GroveStream s = grove_stream(seed_lo, seed_hi, generation, i, purpose);
    unsigned* o = out + 16ull * i;
    for (int k = 0; k < 4; ++k) o[k] = grove_next_u32(s);
    for (int k = 0; k < 4; ++k) o[4 + k] = grove_below(s, bound);
    for (int k = 0; k < 4; ++k) o[8 + k] = __float_as_uint(grove_unit_f32(s));
    for (int k = 0; k < 4; ++k) o[12 + k] = __float_as_uint(grove_normal(s));
}
