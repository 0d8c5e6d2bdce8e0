// map.cu: the genotype-to-phenotype mapper on the GPU, one thread per genome.
//
// Twin of the CPU reference Mapper::map (src/genome/map.rs), which it matches exactly: validity
// and reason, codons used, PonyGE2's depth and node counts (also as reached at a failure), and
// the derivation. The host side is src/backend/cuda/map.rs.
//
// The rule table (RuleTable::to_device_blob, layout at the top of src/grammar/compile.rs) lives
// in constant memory, grove_table, which the host fills before launching. Threads of a warp
// read different rules, which constant memory serves one address at a time, so when
// table_words > 0 each block first copies the table into shared memory and reads it there
// (the body is inlined once per address space). Each thread keeps an
// explicit stack of (symbol, depth) in local memory, GROVE_MAP_STACK entries. The CPU stack has
// no bound, so a genome whose stack would overflow stops with GROVE_MAP_STACK_OVERFLOW and the
// host maps it again on the CPU: every result the caller sees is the CPU's.
//
// Layouts: genomes [P x capacity] u32 (row i holds genome i, len[i] codons); out [P]
// GroveMapOut; derivation [P x max_derivation] u32, row i's first out[i].n_derivation entries
// written (the rest untouched). A derivation longer than max_derivation stops the mapping with
// GROVE_MAP_DERIVATION_FULL, as Mapper::with_max_derivation does on the CPU.

#include "rng.cuh"

#define GROVE_MAP_STACK 256        // (symbol, depth) entries per thread
#define GROVE_TABLE_BYTES 65536    // TABLE_LIMIT_BYTES

// Status codes (MapStatus in src/backend/cuda/kernels.rs).
#define GROVE_MAP_VALID 0
#define GROVE_MAP_OUT_OF_CODONS 1
#define GROVE_MAP_TOO_DEEP 2
#define GROVE_MAP_TOO_MANY_NODES 3
#define GROVE_MAP_DERIVATION_FULL 4
#define GROVE_MAP_STACK_OVERFLOW 5

#include "grove_common.h"

// Mirrors MapParams in src/backend/cuda/kernels.rs.
struct GroveMapParams {
    unsigned n_genomes;       // P
    unsigned capacity;        // row stride of genomes
    unsigned max_wraps;       // extra passes over a genome
    unsigned lazy;            // 1: single-production rules read no codon
    unsigned max_depth;       // deeper is invalid
    unsigned max_nodes;       // more nodes is invalid
    unsigned max_derivation;  // row stride of derivation; longer stops with DERIVATION_FULL
    unsigned table_words;     // 4-byte words staged in shared memory; 0: read constant memory
};
GROVE_CHECK_LAYOUT(GroveMapParams);

// Mirrors MapOut in src/backend/cuda/kernels.rs: one genome's outcome.
struct GroveMapOut {
    unsigned status;        // GROVE_MAP_*
    unsigned used_codons;   // codons read
    unsigned depth;         // PonyGE2 depth (root 1, leaf rows count)
    unsigned nodes;         // PonyGE2 node count
    unsigned n_derivation;  // derivation entries written
};
GROVE_CHECK_LAYOUT(GroveMapOut);

// The table's sections (TableHeader, RuleEntry, ProductionEntry in src/grammar/compile.rs).
struct GroveTableHeader {
    unsigned n_rules, n_productions, n_children, n_symbols, n_codon;
    unsigned off_productions, off_children, off_symbols;
};
struct GroveRule {
    unsigned short first_production, n_productions, min_depth, flags;
};
struct GroveProduction {
    unsigned short first_symbol, n_symbols, first_child, n_children, min_depth, flags;
};
GROVE_CHECK_LAYOUT(GroveTableHeader);
GROVE_CHECK_LAYOUT(GroveRule);
GROVE_CHECK_LAYOUT(GroveProduction);
#define GROVE_MAP_MAX(a, b) ((a) > (b) ? (a) : (b))
#define GROVE_PRODUCTION_LEAF_ROW 2

// The rule table blob, 4-byte words so that every section is aligned.
__constant__ unsigned grove_table[GROVE_TABLE_BYTES / 4];

// Maps genome i reading the table at base (constant or shared memory). Derivation entry j goes to
// dout[j * stride]; codon-value entries get value_flag or'ed in (0 for grove_map; the tree builder
// marks them with the top bit). A stack that would outgrow GROVE_MAP_STACK stops with
// GROVE_MAP_STACK_OVERFLOW, counts as reached (Mapper::with_max_stack on the CPU).
static __device__ __forceinline__ GroveMapOut grove_map_one(const char* base, const GroveMapParams& p, unsigned i,
                                                            const unsigned* __restrict__ genomes,
                                                            const unsigned* __restrict__ lens,
                                                            unsigned* __restrict__ dout, unsigned long long stride,
                                                            unsigned value_flag) {
    const GroveTableHeader* h = (const GroveTableHeader*)base;
    const GroveRule* rules = (const GroveRule*)(base + sizeof(GroveTableHeader));
    const GroveProduction* prods = (const GroveProduction*)(base + h->off_productions);
    const unsigned short* children = (const unsigned short*)(base + h->off_children);
    const int* codon = (const int*)(base + ((h->off_symbols + 2 * h->n_symbols + 3) & ~3u));

    const unsigned* g = genomes + (unsigned long long)i * p.capacity;
    const unsigned len = lens[i];
    unsigned long long budget64 = (unsigned long long)len * ((unsigned long long)p.max_wraps + 1);
    const unsigned budget = budget64 > 0xffffffffull ? 0xffffffffu : (unsigned)budget64;

    unsigned short ssym[GROVE_MAP_STACK];
    unsigned sdepth[GROVE_MAP_STACK];
    int top = 1;
    ssym[0] = 1u << 14;  // the start rule, a non-terminal
    sdepth[0] = 1;
    unsigned used = 0, nodes = 0, depth = 0, pos = 0, nd = 0, status = GROVE_MAP_VALID;
    while (top > 0) {
        --top;
        const unsigned sym = ssym[top], d = sdepth[top];
        const unsigned index = sym & 0x3fffu;
        if ((sym >> 14) == 1) {
            const GroveRule rule = rules[index];
            const unsigned n = rule.n_productions;
            unsigned choice = 0;
            if (!(p.lazy && n == 1)) {
                if (used >= budget) { status = GROVE_MAP_OUT_OF_CODONS; break; }
                const unsigned c = g[pos];
                ++used;
                if (++pos == len) pos = 0;
                choice = c % n;
            }
            const unsigned pi = rule.first_production + choice;
            if (nd == p.max_derivation) { status = GROVE_MAP_DERIVATION_FULL; break; }
            dout[stride * nd++] = pi;
            ++nodes;
            const GroveProduction prod = prods[pi];
            const unsigned nk = prod.n_children;
            if (nk == 0) {
                // PonyGE2 raises the depth when a subtree finishes: only childless expansions
                // (which finish at once) can raise it (see map.rs).
                const unsigned leaf = (prod.flags & GROVE_PRODUCTION_LEAF_ROW) ? 1u : 0u;
                nodes += leaf;
                depth = GROVE_MAP_MAX(depth, d + leaf);
            } else {
                if (top + (int)nk > GROVE_MAP_STACK) { status = GROVE_MAP_STACK_OVERFLOW; break; }
                for (unsigned k = 0; k < nk; ++k) {
                    ssym[top + k] = children[prod.first_child + nk - 1 - k];
                    sdepth[top + k] = d + 1;
                }
                top += (int)nk;
            }
        } else {
            // A codon value: a node with one terminal leaf.
            if (used >= budget) { status = GROVE_MAP_OUT_OF_CODONS; break; }
            const unsigned c = g[pos];
            ++used;
            if (++pos == len) pos = 0;
            const unsigned count = (unsigned)codon[2 * index + 1];
            if (nd == p.max_derivation) { status = GROVE_MAP_DERIVATION_FULL; break; }
            dout[stride * nd++] = (c % count) | value_flag;
            nodes += 2;
            depth = GROVE_MAP_MAX(depth, d + 1);
        }
        if (depth > p.max_depth) { status = GROVE_MAP_TOO_DEEP; break; }
        if (nodes > p.max_nodes) { status = GROVE_MAP_TOO_MANY_NODES; break; }
    }
    GroveMapOut o;
    o.status = status;
    o.used_codons = used;
    o.depth = depth;
    o.nodes = nodes;
    o.n_derivation = nd;
    return o;
}

extern "C" __global__ void grove_map(GroveMapParams p, const unsigned* __restrict__ genomes,
                                     const unsigned* __restrict__ lens, GroveMapOut* __restrict__ out,
                                     unsigned* __restrict__ derivation) {
    extern __shared__ unsigned grove_table_shared[];
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (p.table_words > 0) {
        // table_words is the same for every thread, so every thread reaches the barrier.
        for (unsigned w = threadIdx.x; w < p.table_words; w += blockDim.x) grove_table_shared[w] = grove_table[w];
        __syncthreads();
        if (i < p.n_genomes)
            out[i] = grove_map_one((const char*)grove_table_shared, p, i, genomes, lens,
                                   derivation + (unsigned long long)i * p.max_derivation, 1, 0);
    } else if (i < p.n_genomes) {
        out[i] = grove_map_one((const char*)grove_table, p, i, genomes, lens,
                               derivation + (unsigned long long)i * p.max_derivation, 1, 0);
    }
}

// ---------------------------------------------------------------------------------------------
// Trees straight from genomes: grove_map_trees maps genome i (grove_map_one, the loops' bounds)
// and builds its tree into row i of a population, twin of backend::cpu::breed::map_population (Mapper with
// with_max_stack and with_max_derivation, then genome::build::build_tree and
// Population::set_tree): by the phenotype's text (grove_build_text, build_text_tree) or by the
// derivation's nesting (build_derivation_tree), as p.reading says. The node templates (Templates::to_device_blob, layout in
// src/grammar/template.rs) follow the rule table in the same constant blob, at templates_at.
//
// Scratch: derivation and span [max_derivation x P] u32, entry j of genome i at j * P + i (so a
// warp's threads touch neighbouring words). Codon-value entries carry GROVE_CODON_VALUE.
// Population: op u8, value f32, size u16, out u8 [P x L] and len u16 [P], rows zero after len.

#define GROVE_BUILD_FRAMES 1024  // genome::build::BUILD_FRAMES
#define GROVE_SPELL_FRAMES 32    // genome::build::SPELL_FRAMES
#define GROVE_SPELL_CHARS 64     // genome::build::SPELL_CHARS
#define GROVE_CODON_VALUE 0x80000000u

// Build outcomes after the map statuses (BuildStatus in src/backend/cuda/kernels.rs).
#define GROVE_BUILD_TOO_LONG 6
#define GROVE_BUILD_BAD_SPELLING 7
#define GROVE_BUILD_FRAMES_FULL 8

// template::item_kind, PART_CHILD and TEXT_POISON.
#define GROVE_ITEM_NODE 0
#define GROVE_ITEM_HOLE 1
#define GROVE_ITEM_OP_FROM 2
#define GROVE_ITEM_OUTPUT 3
#define GROVE_ITEM_SPELLED_CONST 4
#define GROVE_ITEM_SPELLED_VAR 5
#define GROVE_ITEM_SPELLED_SLOT 6
#define GROVE_MAX_SLOTS 16  // program::tree::MAX_SLOTS: constant slots c[0] to c[15]
#define GROVE_PART_CHILD 0x80000000u

// template::token_kind.
#define GROVE_TOKEN_NODE 0
#define GROVE_TOKEN_SPELLED_CONST 1
#define GROVE_TOKEN_SPELLED_VAR 2
#define GROVE_TOKEN_SPELLED_SLOT 3
#define GROVE_TOKEN_HOLE 4
#define GROVE_TOKEN_BINARY 5
#define GROVE_TOKEN_BINARY_FROM 6
#define GROVE_TOKEN_PREFIX 7
#define GROVE_TOKEN_CALL 8
#define GROVE_TOKEN_CALL_FROM 9
#define GROVE_TOKEN_OUT 10
#define GROVE_TOKEN_OPEN 11
#define GROVE_TOKEN_CLOSE 12
#define GROVE_TOKEN_COMMA 13

// MapTreesParams::reading (template::Reading).
#define GROVE_READING_DERIVATION 0
#define GROVE_READING_TEXT 1
#define GROVE_TEXT_POISON 0xffff0000u

// Mirrors MapTreesParams in src/backend/cuda/kernels.rs.
struct GroveMapTreesParams {
    GroveMapParams map;     // max_derivation: scratch rows; table_words: staged words
    unsigned templates_at;  // byte offset of the templates in the table
    unsigned max_len;       // L
    unsigned build;         // 1: build trees; 0: map only (status and used codons)
    unsigned reading;       // GROVE_READING_*: how a derivation becomes a tree
};
GROVE_CHECK_LAYOUT(GroveMapTreesParams);

// The templates' header (14 words).
struct GroveTplHeader {
    unsigned n_productions, n_items, n_parts, n_terminals, n_set_values, n_vars, n_outputs;
    unsigned off_items, off_parts, off_terminals, off_sets, off_chars;
    unsigned n_tokens, off_tokens;
};
static_assert(sizeof(GroveTplHeader) == 56, "template header");

// The tables a builder thread reads, all in one address space.
struct GroveTables {
    const GroveProduction* prods;
    const unsigned short* children;
    const unsigned short* symbols;
    const int* codon;
    const GroveTplHeader* th;
    const unsigned* tprods;  // [n_productions x 3]: items, operator (| lbp << 8 | rbp << 16), tokens
    const unsigned* items;   // [n_items x 2]
    const unsigned* tokens;  // [n_tokens x 2]
    const unsigned* parts;
    const unsigned* terms;
    const unsigned* sets;
    const char* chars;
};

static __device__ __forceinline__ GroveTables grove_tables(const char* base, unsigned templates_at) {
    const GroveTableHeader* h = (const GroveTableHeader*)base;
    GroveTables t;
    t.prods = (const GroveProduction*)(base + h->off_productions);
    t.children = (const unsigned short*)(base + h->off_children);
    t.symbols = (const unsigned short*)(base + h->off_symbols);
    t.codon = (const int*)(base + ((h->off_symbols + 2 * h->n_symbols + 3) & ~3u));
    const char* tb = base + templates_at;
    t.th = (const GroveTplHeader*)tb;
    t.tprods = (const unsigned*)(tb + sizeof(GroveTplHeader));
    t.items = (const unsigned*)(tb + t.th->off_items);
    t.tokens = (const unsigned*)(tb + t.th->off_tokens);
    t.parts = (const unsigned*)(tb + t.th->off_parts);
    t.terms = (const unsigned*)(tb + t.th->off_terminals);
    t.sets = (const unsigned*)(tb + t.th->off_sets);
    t.chars = tb + t.th->off_chars;
    return t;
}

// Appends a text entry (offset | length << 16) to buf; false on poison or past the cap.
static __device__ __forceinline__ bool grove_append_text(const GroveTables& t, unsigned entry, char* buf, unsigned& len) {
    if (entry == GROVE_TEXT_POISON) return false;
    const unsigned off = entry & 0xffffu, n = entry >> 16;
    if (len + n > GROVE_SPELL_CHARS) return false;
    for (unsigned k = 0; k < n; ++k) buf[len++] = t.chars[off + k];
    return true;
}

// Appends a codon-value or terminal symbol's text (genome::build::spell's leaf): d is the
// derivation entry's value for codon symbols.
static __device__ bool grove_append_leaf(const GroveTables& t, unsigned sym, unsigned d, char* buf, unsigned& len) {
    const unsigned kind = sym >> 14, index = sym & 0x3fffu;
    if (kind == 0) return grove_append_text(t, t.terms[index], buf, len);
    if (kind == 3) return grove_append_text(t, t.sets[(unsigned)t.codon[2 * index] + d], buf, len);
    // A codon range: lo + d in decimal, as Rust's i64 to_string.
    long long v = (long long)t.codon[2 * index] + (long long)d;
    char digits[24];
    unsigned n = 0;
    const bool neg = v < 0;
    unsigned long long u = neg ? (unsigned long long)(-v) : (unsigned long long)v;
    do {
        digits[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u > 0);
    if (len + n + (neg ? 1u : 0u) > GROVE_SPELL_CHARS) return false;
    if (neg) buf[len++] = '-';
    while (n > 0) buf[len++] = digits[--n];
    return true;
}

// Child k of derivation entry e (entries after e, skipping whole sub-derivations).
static __device__ __forceinline__ unsigned grove_child(const unsigned* span, unsigned long long P, unsigned e, unsigned k) {
    unsigned c = e + 1;
    for (unsigned j = 0; j < k; ++j) c += span[c * P];
    return c;
}

// genome::build::spell: literal text and the text children derive, into buf (len chars). False: a
// bad spelling (poison, past GROVE_SPELL_CHARS, or deeper than GROVE_SPELL_FRAMES).
static __device__ bool grove_spell(const GroveTables& t, const unsigned* der, const unsigned* span, unsigned long long P,
                                   unsigned e, unsigned parts_word, char* buf, unsigned& len) {
    len = 0;
    const GroveProduction pe = t.prods[der[e * P]];
    const unsigned first = parts_word & 0xffffu, n = parts_word >> 16;
    for (unsigned j = 0; j < n; ++j) {
        const unsigned w = t.parts[first + j];
        if (!(w & GROVE_PART_CHILD)) {
            if (!grove_append_text(t, w, buf, len)) return false;
            continue;
        }
        const unsigned k = w & 0xffffu;
        const unsigned c = grove_child(span, P, e, k);
        const unsigned sym = t.children[pe.first_child + k];
        if ((sym >> 14) != 1) {
            if (!grove_append_leaf(t, sym, der[c * P] & ~GROVE_CODON_VALUE, buf, len)) return false;
            continue;
        }
        // Open productions with their next symbol; the derivation read in order from c. A
        // non-terminal that is its production's last symbol replaces the production.
        unsigned fq[GROVE_SPELL_FRAMES], fj[GROVE_SPELL_FRAMES];
        int top = 0;
        fq[0] = der[c * P];
        fj[0] = 0;
        unsigned next = c + 1;
        while (top >= 0) {
            const GroveProduction q = t.prods[fq[top]];
            const unsigned jj = fj[top];
            if (jj == q.n_symbols) {
                --top;
                continue;
            }
            fj[top] = jj + 1;
            const unsigned s = t.symbols[q.first_symbol + jj];
            const unsigned kind = s >> 14;
            if (kind == 0) {
                if (!grove_append_leaf(t, s, 0, buf, len)) return false;
            } else if (kind == 1) {
                const unsigned q2 = der[(unsigned long long)next * P];
                ++next;
                if (jj + 1 == q.n_symbols) {
                    fq[top] = q2;
                    fj[top] = 0;
                } else if (top + 1 == GROVE_SPELL_FRAMES) {
                    return false;
                } else {
                    ++top;
                    fq[top] = q2;
                    fj[top] = 0;
                }
            } else {
                if (!grove_append_leaf(t, s, der[(unsigned long long)next * P] & ~GROVE_CODON_VALUE, buf, len)) return false;
                ++next;
            }
        }
    }
    return true;
}

// genome::build::parse_unsigned: an optional '+', then at least one digit; false past max.
static __device__ bool grove_parse_unsigned(const char* b, unsigned n, unsigned long long max, unsigned long long& v) {
    unsigned i = (n > 0 && b[0] == '+') ? 1u : 0u;
    if (i == n) return false;
    v = 0;
    for (; i < n; ++i) {
        const unsigned c = (unsigned)(b[i] - '0');
        if (c > 9) return false;
        if (v > (max - c) / 10) return false;
        v = v * 10 + c;
    }
    return true;
}

// template::pow10: binary powering in f64.
static __device__ double grove_pow10(unsigned n) {
    double r = 1.0, a = 10.0;
    for (;;) {
        if (n & 1u) r = r * a;
        n >>= 1;
        if (n == 0) return r;
        a = a * a;
    }
}

// template::read_number over buf[0..n]; false where it answers None.
static __device__ bool grove_read_number(const char* b, unsigned n, float& out) {
    unsigned long long mant = 0;
    int exp = 0;
    unsigned digits = 0, i = 0;
    bool seen_dot = false;
    for (; i < n; ++i) {
        const char c = b[i];
        if (c >= '0' && c <= '9') {
            if (digits < 19) {
                mant = mant * 10 + (unsigned)(c - '0');
                if (mant > 0) ++digits;
                if (seen_dot) --exp;
            } else if (!seen_dot) {
                ++exp;
            }
        } else if (c == '.' && !seen_dot) {
            seen_dot = true;
        } else if (c == 'e' || c == 'E') {
            break;
        } else {
            return false;
        }
    }
    if (i == 0 || (i == 1 && seen_dot)) return false;
    if (i < n) {
        // parse_i32 of the rest: an optional sign, then at least one digit, within i32.
        unsigned j = i + 1;
        bool neg = false;
        if (j < n && (b[j] == '-' || b[j] == '+')) {
            neg = b[j] == '-';
            ++j;
        }
        if (j == n) return false;
        long long v = 0;
        for (; j < n; ++j) {
            const unsigned c = (unsigned)(b[j] - '0');
            if (c > 9) return false;
            v = v * 10 + c;
            if (v > 2147483648ll) return false;
        }
        if (neg) v = -v;
        if (v > 2147483647ll) return false;
        // saturating_add
        long long s = (long long)exp + v;
        exp = s > 2147483647ll ? 2147483647 : (s < -2147483648ll ? (int)-2147483648ll : (int)s);
    }
    const double m = (double)mant;
    const unsigned mag = exp >= 0 ? (unsigned)exp : (unsigned)(-(long long)exp);
    const double p10 = grove_pow10(mag < 400u ? mag : 400u);
    const double v = exp >= 0 ? m * p10 : m / p10;
    out = (float)v;
    return true;
}

// genome::build::spelled_node: the node a spelled token's text buf[0..nc) makes (a constant, a
// variable index below n_vars, a constant slot's index below GROVE_MAX_SLOTS); false on a bad
// spelling.
static __device__ bool grove_spelled_node(unsigned kind, const char* buf, unsigned nc, unsigned n_vars, unsigned& code, float& v) {
    unsigned long long k;
    if (kind == GROVE_TOKEN_SPELLED_VAR) {
        if (!grove_parse_unsigned(buf, nc, 0xffffffffull, k) || (n_vars > 0 && k >= n_vars)) return false;
        code = GROVE_OP_VAR;
        v = (float)(unsigned)k;
    } else if (kind == GROVE_TOKEN_SPELLED_SLOT) {
        if (!grove_parse_unsigned(buf, nc, GROVE_MAX_SLOTS - 1, k)) return false;
        code = GROVE_OP_SLOT;
        v = (float)(unsigned)k;
    } else {
        if (!grove_read_number(buf, nc, v)) return false;
        code = GROVE_OP_CONST;
    }
    return true;
}

// The production a child chose for an operator (through unit productions that delegate to their
// only child, the next entry): its operator word (code | lbp << 8 | rbp << 16).
static __device__ __forceinline__ unsigned grove_chosen_op(const GroveTables& t, const unsigned* der, unsigned long long P, unsigned c) {
    while (t.tprods[3 * der[(unsigned long long)c * P] + 1] == 0xffffffffu) ++c;
    return t.tprods[3 * der[(unsigned long long)c * P] + 1];
}

#define GROVE_PENDING_GROUP 0x80000000u  // a pending group (| commas); else an operator (code | lbp << 8)

// genome::build::build_text_tree: the derivation's tokens read from the last to the first and
// parsed by binding power (a shunting-yard run backwards), the nodes emitted in reverse prefix
// order into the row from its end (node j at L - 1 - j), then moved to its start. st holds the
// open productions from its bottom (entry << 16 | tokens left) and the waiting operators from
// its top, GROVE_BUILD_FRAMES words in all. Writes the node count to n (0 on failure, the
// written nodes zeroed again) and returns the status.
static __device__ unsigned grove_build_text(const GroveTables& t, const unsigned* der, const unsigned* span, unsigned long long P,
                                            unsigned char* op, float* value, unsigned char* outs, unsigned L, unsigned* st,
                                            char* buf, unsigned& n) {
    unsigned nf = 0, no = 0;  // open productions, waiting operators
    unsigned w = 0, avail = 0;  // nodes written, operands on the output
    unsigned status = GROVE_MAP_VALID;
    st[nf++] = t.tprods[3 * der[0] + 2] >> 16;  // entry 0, all its tokens left
    if (st[0] == 0) status = GROVE_BUILD_BAD_SPELLING;
#define GROVE_EMIT(CODE, V)                                                       \
    do {                                                                          \
        const unsigned a_ = grove_arity(CODE);                                    \
        if (avail < a_) { status = GROVE_BUILD_BAD_SPELLING; goto done; }         \
        if (w >= L) { status = GROVE_BUILD_TOO_LONG; goto done; }                 \
        avail = avail - a_ + 1;                                                   \
        op[L - 1 - w] = (unsigned char)(CODE);                                    \
        value[L - 1 - w] = (V);                                                   \
        outs[L - 1 - w] = 0;                                                      \
        ++w;                                                                      \
    } while (0)
// Emits waiting operators while COND (over lbp) holds, down to a group.
#define GROVE_UNWIND(COND)                                                                          \
    while (no > 0 && !(st[GROVE_BUILD_FRAMES - no] & GROVE_PENDING_GROUP)) {                       \
        const unsigned lbp = (st[GROVE_BUILD_FRAMES - no] >> 8) & 0xffu;                           \
        (void)lbp;                                                                                  \
        if (!(COND)) break;                                                                         \
        const unsigned code_ = st[GROVE_BUILD_FRAMES - no] & 0xffu;                                \
        --no;                                                                                       \
        GROVE_EMIT(code_, 0.0f);                                                                    \
    }
    while (status == GROVE_MAP_VALID && nf > 0) {
        const unsigned e = st[nf - 1] >> 16, left = st[nf - 1] & 0xffffu;
        if (left == 0) {
            --nf;
            continue;
        }
        st[nf - 1] = (e << 16) | (left - 1);
        const unsigned tw = t.tprods[3 * der[(unsigned long long)e * P] + 2];
        if ((tw >> 16) == 0) { status = GROVE_BUILD_BAD_SPELLING; goto done; }
        const unsigned idx = (tw & 0xffffu) + left - 1;
        const unsigned w0 = t.tokens[2 * idx], w1 = t.tokens[2 * idx + 1];
        const unsigned kind = w0 & 0xffu;
        switch (kind) {
            case GROVE_TOKEN_HOLE: {
                const unsigned c = grove_child(span, P, e, w0 >> 16);
                const unsigned nt = t.tprods[3 * der[(unsigned long long)c * P] + 2] >> 16;
                if (nt == 0) {
                    status = GROVE_BUILD_BAD_SPELLING;
                    goto done;
                }
                if (left == 1) {
                    st[nf - 1] = (c << 16) | nt;
                } else if (nf + no >= GROVE_BUILD_FRAMES) {
                    status = GROVE_BUILD_FRAMES_FULL;
                    goto done;
                } else {
                    st[nf++] = (c << 16) | nt;
                }
                break;
            }
            case GROVE_TOKEN_NODE:
                GROVE_EMIT((w0 >> 8) & 0xffu, __uint_as_float(w1));
                break;
            case GROVE_TOKEN_SPELLED_CONST:
            case GROVE_TOKEN_SPELLED_VAR:
            case GROVE_TOKEN_SPELLED_SLOT: {
                unsigned nc, code = 0;
                float v = 0.0f;
                if (!grove_spell(t, der, span, P, e, w1, buf, nc) || !grove_spelled_node(kind, buf, nc, t.th->n_vars, code, v)) {
                    status = GROVE_BUILD_BAD_SPELLING;
                    goto done;
                }
                GROVE_EMIT(code, v);
                break;
            }
            case GROVE_TOKEN_BINARY:
            case GROVE_TOKEN_BINARY_FROM: {
                unsigned code, lbp_new, rbp_new;
                if (kind == GROVE_TOKEN_BINARY) {
                    code = (w0 >> 8) & 0xffu;
                    lbp_new = w1 & 0xffu;
                    rbp_new = (w1 >> 8) & 0xffu;
                } else {
                    const unsigned ow = grove_chosen_op(t, der, P, grove_child(span, P, e, w0 >> 16));
                    code = ow & 0xffu;
                    lbp_new = (ow >> 8) & 0xffu;
                    rbp_new = (ow >> 16) & 0xffu;
                }
                GROVE_UNWIND(lbp >= rbp_new);
                if (nf + no >= GROVE_BUILD_FRAMES) { status = GROVE_BUILD_FRAMES_FULL; goto done; }
                ++no;
                st[GROVE_BUILD_FRAMES - no] = code | (lbp_new << 8);
                break;
            }
            case GROVE_TOKEN_PREFIX: {
                const unsigned rbp_new = w1 & 0xffu;
                GROVE_UNWIND(lbp >= rbp_new);
                GROVE_EMIT((w0 >> 8) & 0xffu, 0.0f);
                break;
            }
            case GROVE_TOKEN_CLOSE:
                if (nf + no >= GROVE_BUILD_FRAMES) { status = GROVE_BUILD_FRAMES_FULL; goto done; }
                ++no;
                st[GROVE_BUILD_FRAMES - no] = GROVE_PENDING_GROUP;
                break;
            case GROVE_TOKEN_COMMA:
                GROVE_UNWIND(true);
                if (no == 0) { status = GROVE_BUILD_BAD_SPELLING; goto done; }
                st[GROVE_BUILD_FRAMES - no] += 1u;
                break;
            default: {  // OPEN, CALL, CALL_FROM, OUT: close the group
                GROVE_UNWIND(true);
                if (no == 0) { status = GROVE_BUILD_BAD_SPELLING; goto done; }
                const unsigned commas = st[GROVE_BUILD_FRAMES - no] & ~GROVE_PENDING_GROUP;
                --no;
                if (kind == GROVE_TOKEN_OPEN) {
                    if (commas != 0) { status = GROVE_BUILD_BAD_SPELLING; goto done; }
                } else if (kind == GROVE_TOKEN_CALL || kind == GROVE_TOKEN_CALL_FROM) {
                    const unsigned code = kind == GROVE_TOKEN_CALL ? (w0 >> 8) & 0xffu : grove_chosen_op(t, der, P, grove_child(span, P, e, w0 >> 16)) & 0xffu;
                    if (commas + 1 != grove_arity(code)) { status = GROVE_BUILD_BAD_SPELLING; goto done; }
                    GROVE_EMIT(code, 0.0f);
                } else if (kind == GROVE_TOKEN_OUT) {
                    unsigned nc;
                    unsigned long long k;
                    if (commas != 0 || w == 0 || !grove_spell(t, der, span, P, e, w1, buf, nc) || !grove_parse_unsigned(buf, nc, ~0ull, k) ||
                        k >= t.th->n_outputs) {
                        status = GROVE_BUILD_BAD_SPELLING;
                        goto done;
                    }
                    // The group's root, emitted last; an inner out(…) marked it first.
                    if (outs[L - w] == 0) outs[L - w] = (unsigned char)(k + 1);
                } else {
                    status = GROVE_BUILD_BAD_SPELLING;
                    goto done;
                }
                break;
            }
        }
    }
    if (status == GROVE_MAP_VALID) {
        GROVE_UNWIND(true);
        if (no != 0 || avail != 1) status = GROVE_BUILD_BAD_SPELLING;
    }
done:
#undef GROVE_UNWIND
#undef GROVE_EMIT
    if (status != GROVE_MAP_VALID) {
        for (unsigned k = L - w; k < L; ++k) {
            op[k] = 0;
            value[k] = 0.0f;
            outs[k] = 0;
        }
        n = 0;
        return status;
    }
    // The nodes to the row's start, in prefix order; what they leave behind zeroed.
    for (unsigned k = 0; k < w; ++k) {
        op[k] = op[L - w + k];
        value[k] = value[L - w + k];
        outs[k] = outs[L - w + k];
    }
    for (unsigned k = (w > L - w ? w : L - w); k < L; ++k) {
        op[k] = 0;
        value[k] = 0.0f;
        outs[k] = 0;
    }
    n = w;
    return status;
}

// Maps genome i and builds its tree (see above). Returns the status; used codons in used.
static __device__ unsigned grove_map_tree_one(const char* base, const GroveMapTreesParams& p, unsigned i,
                                              const unsigned* __restrict__ genomes, const unsigned* __restrict__ lens,
                                              unsigned* __restrict__ der, unsigned* __restrict__ span,
                                              unsigned char* __restrict__ op, float* __restrict__ value,
                                              unsigned short* __restrict__ size, unsigned char* __restrict__ outs,
                                              unsigned short* __restrict__ len, unsigned& used) {
    const unsigned long long P = p.map.n_genomes;
    der += i;
    span += i;
    const GroveMapOut m = grove_map_one(base, p.map, i, genomes, lens, der, P, GROVE_CODON_VALUE);
    used = m.used_codons;
    if (!p.build) return m.status;
    const unsigned L = p.max_len;
    const unsigned long long row = (unsigned long long)i * L;
    const unsigned old_len = len[i];
    unsigned status = m.status, n = 0;
    if (status == GROVE_MAP_VALID) {
        const GroveTables t = grove_tables(base, p.templates_at);
        // Sub-derivation sizes, backwards.
        for (int e = (int)m.n_derivation - 1; e >= 0; --e) {
            const unsigned d = der[(unsigned long long)e * P];
            unsigned s = 1;
            if (!(d & GROVE_CODON_VALUE)) {
                const unsigned nk = t.prods[d].n_children;
                unsigned c = (unsigned)e + 1;
                for (unsigned k = 0; k < nk; ++k) {
                    const unsigned sc = span[(unsigned long long)c * P];
                    s += sc;
                    c += sc;
                }
            }
            span[(unsigned long long)e * P] = s;
        }
        unsigned frames[GROVE_BUILD_FRAMES];
        char buf[GROVE_SPELL_CHARS];
        if (p.reading == GROVE_READING_TEXT) {
            status = grove_build_text(t, der, span, P, op + row, value + row, outs + row, L, frames, buf, n);
        } else {
        // genome::build::build_derivation_tree: open templates (entry << 16 | next item), the
        // innermost out(K, …) mark waiting for the next node.
        int top = 0;
        frames[0] = 0;
        unsigned mark = 0;
        while (top >= 0) {
            const unsigned e = frames[top] >> 16, it = frames[top] & 0xffffu;
            const unsigned pw = t.tprods[3 * der[(unsigned long long)e * P]];
            const unsigned first = pw & 0xffffu, n_items = pw >> 16;
            if (n_items == 0) { status = GROVE_BUILD_BAD_SPELLING; break; }
            if (it == n_items) { --top; continue; }
            if (n >= L) { status = GROVE_BUILD_TOO_LONG; break; }
            frames[top] = (e << 16) | (it + 1);
            const unsigned w0 = t.items[2 * (first + it)], w1 = t.items[2 * (first + it) + 1];
            const unsigned kind = w0 & 0xffu;
            unsigned code = 0;
            float v = 0.0f;
            if (kind == GROVE_ITEM_OUTPUT) {
                unsigned nc;
                unsigned long long k;
                if (!grove_spell(t, der, span, P, e, w1, buf, nc) || !grove_parse_unsigned(buf, nc, ~0ull, k) ||
                    k >= t.th->n_outputs) {
                    status = GROVE_BUILD_BAD_SPELLING;
                    break;
                }
                mark = (unsigned)k + 1;
                continue;
            } else if (kind == GROVE_ITEM_HOLE) {
                const unsigned c = grove_child(span, P, e, w0 >> 16);
                if (it + 1 == n_items) {
                    frames[top] = c << 16;
                } else if (top + 1 == GROVE_BUILD_FRAMES) {
                    status = GROVE_BUILD_FRAMES_FULL;
                    break;
                } else {
                    frames[++top] = c << 16;
                }
                continue;
            } else if (kind == GROVE_ITEM_NODE) {
                code = (w0 >> 8) & 0xffu;
                v = __uint_as_float(w1);
            } else if (kind == GROVE_ITEM_OP_FROM) {
                unsigned c = grove_child(span, P, e, w0 >> 16);
                // A unit production delegates to its only child, the next entry.
                while (t.tprods[3 * der[(unsigned long long)c * P] + 1] == 0xffffffffu) ++c;
                code = t.tprods[3 * der[(unsigned long long)c * P] + 1] & 0xffu;
            } else {
                unsigned nc;
                if (!grove_spell(t, der, span, P, e, w1, buf, nc)) { status = GROVE_BUILD_BAD_SPELLING; break; }
                if (kind == GROVE_ITEM_SPELLED_VAR) {
                    unsigned long long k;
                    if (!grove_parse_unsigned(buf, nc, 0xffffffffull, k) || (t.th->n_vars > 0 && k >= t.th->n_vars)) {
                        status = GROVE_BUILD_BAD_SPELLING;
                        break;
                    }
                    code = GROVE_OP_VAR;
                    v = (float)(unsigned)k;
                } else if (kind == GROVE_ITEM_SPELLED_SLOT) {
                    unsigned long long k;
                    if (!grove_parse_unsigned(buf, nc, GROVE_MAX_SLOTS - 1, k)) {
                        status = GROVE_BUILD_BAD_SPELLING;
                        break;
                    }
                    code = GROVE_OP_SLOT;
                    v = (float)(unsigned)k;
                } else {
                    if (!grove_read_number(buf, nc, v)) { status = GROVE_BUILD_BAD_SPELLING; break; }
                    code = GROVE_OP_CONST;
                }
            }
            op[row + n] = (unsigned char)code;
            value[row + n] = v;
            outs[row + n] = (unsigned char)mark;
            mark = 0;
            ++n;
        }
        }
    }
    if (status != GROVE_MAP_VALID) {
        // An empty row (Population::clear): zero what the build or the old tree wrote.
        const unsigned z = n > old_len ? n : old_len;
        for (unsigned k = 0; k < z; ++k) {
            op[row + k] = 0;
            value[row + k] = 0.0f;
            size[row + k] = 0;
            outs[row + k] = 0;
        }
        len[i] = 0;
        return status;
    }
    // Subtree sizes backwards (Population::set_tree), then zero the old tree's tail.
    for (int j = (int)n - 1; j >= 0; --j) {
        const unsigned a = grove_arity(op[row + j]);
        unsigned s = 1, c = (unsigned)j + 1;
        for (unsigned k = 0; k < a; ++k) {
            const unsigned sc = size[row + c];
            s += sc;
            c += sc;
        }
        size[row + j] = (unsigned short)s;
    }
    for (unsigned k = n; k < old_len; ++k) {
        op[row + k] = 0;
        value[row + k] = 0.0f;
        size[row + k] = 0;
        outs[row + k] = 0;
    }
    len[i] = (unsigned short)n;
    return status;
}

// backend::cpu::breed::map_population on the device: genome i's tree into row i (when p.build), status[i]
// (GROVE_MAP_* or GROVE_BUILD_*) and used[i], its codons read.
extern "C" __global__ void grove_map_trees(GroveMapTreesParams p, const unsigned* __restrict__ genomes,
                                           const unsigned* __restrict__ lens, unsigned* __restrict__ der,
                                           unsigned* __restrict__ span, unsigned char* __restrict__ op,
                                           float* __restrict__ value, unsigned short* __restrict__ size,
                                           unsigned char* __restrict__ outs, unsigned short* __restrict__ len,
                                           unsigned* __restrict__ status, unsigned* __restrict__ used) {
    extern __shared__ unsigned grove_table_shared[];
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned u = 0, st = 0;
    if (p.map.table_words > 0) {
        for (unsigned w = threadIdx.x; w < p.map.table_words; w += blockDim.x) grove_table_shared[w] = grove_table[w];
        __syncthreads();
        if (i >= p.map.n_genomes) return;
        st = grove_map_tree_one((const char*)grove_table_shared, p, i, genomes, lens, der, span, op, value, size, outs, len, u);
    } else {
        if (i >= p.map.n_genomes) return;
        st = grove_map_tree_one((const char*)grove_table, p, i, genomes, lens, der, span, op, value, size, outs, len, u);
    }
    status[i] = st;
    used[i] = u;
}

// ---------------------------------------------------------------------------------------------
// The first generation: genome::init::init_genomes on the device, one thread per genome, row i
// drawing from stream (seed, 0, i, Init). Random: `length` codons below codon_size. Sensible:
// genome::init::sensible_genome (ramped half-and-half over derivation trees: depth min_depth +
// (i / 2) % (max_depth - min_depth + 1), full for odd rows), then a random tail of
// (float)len * tail_fraction codons. Codons past the capacity are drawn but not kept, as
// Genomes::set cuts them. A derivation whose pending symbols would outgrow GROVE_MAP_STACK
// sets flag[i] and leaves the row to the host (the CPU reference has no bound).

// Mirrors InitParams in src/backend/cuda/kernels.rs.
struct GroveInitParams {
    unsigned n;             // P
    unsigned capacity;      // row stride
    unsigned seed_lo, seed_hi;
    unsigned sensible;      // 0 random, 1 sensible
    unsigned length;        // random: codons per genome (before the capacity cut)
    unsigned codon_size;    // codons below this
    unsigned min_depth;     // sensible: the ramp
    unsigned max_depth;
    float tail_fraction;    // sensible: random codons after, as a fraction of the used ones
    unsigned lazy;          // 1: single-production rules read no codon
    unsigned table_words;   // words staged in shared memory; 0: constant memory
};
GROVE_CHECK_LAYOUT(GroveInitParams);

#define GROVE_PRODUCTION_RECURSIVE 1

// Keeps codon c at position n of the row when it fits; counts it either way.
static __device__ __forceinline__ void grove_init_put(unsigned* row, unsigned capacity, unsigned& n, unsigned c) {
    if (n < capacity) row[n] = c;
    ++n;
}

// init::grow_derivation's choice of a production of a rule with np productions from first, used
// at depth d under max_depth: uniformly among those that fit (a production of min depth m used at
// depth d reaches d - 1 + m), with full only the recursive ones among them when there are any;
// where none fits, the first of least min depth (one draw either way, as the CPU's).
static __device__ __forceinline__ unsigned grove_grow_choice(const GroveProduction* prods, unsigned first, unsigned np,
                                                             unsigned d, unsigned max_depth, bool full, GroveStream& s) {
    unsigned n_fit = 0, n_rec = 0;
    for (unsigned k = 0; k < np; ++k) {
        const GroveProduction q = prods[first + k];
        if ((unsigned long long)(d - 1) + q.min_depth <= max_depth) {
            ++n_fit;
            if (q.flags & GROVE_PRODUCTION_RECURSIVE) ++n_rec;
        }
    }
    const bool rec_only = full && n_rec > 0;
    unsigned choice = 0;
    if (n_fit == 0) {
        unsigned best = 0xffffffffu;
        for (unsigned k = 0; k < np; ++k) {
            if (prods[first + k].min_depth < best) {
                best = prods[first + k].min_depth;
                choice = k;
            }
        }
        (void)grove_below(s, 1u);
        return choice;
    }
    unsigned j = grove_below(s, rec_only ? n_rec : n_fit);
    for (unsigned k = 0; k < np; ++k) {
        const GroveProduction q = prods[first + k];
        const bool fits = (unsigned long long)(d - 1) + q.min_depth <= max_depth && (!rec_only || (q.flags & GROVE_PRODUCTION_RECURSIVE));
        if (fits) {
            if (j == 0) return k;
            --j;
        }
    }
    return choice;
}

static __device__ void grove_init_one(const char* base, const GroveInitParams& p, unsigned i, unsigned* __restrict__ codons,
                                      unsigned* __restrict__ lens, unsigned* __restrict__ flag) {
    GroveStream s = grove_stream(p.seed_lo, p.seed_hi, 0u, i, GROVE_PURPOSE_INIT);
    unsigned* row = codons + (unsigned long long)i * p.capacity;
    unsigned n = 0;
    flag[i] = 0;
    if (!p.sensible) {
        const unsigned len = p.length < p.capacity ? p.length : p.capacity;
        for (unsigned k = 0; k < len; ++k) grove_init_put(row, p.capacity, n, grove_below(s, p.codon_size));
    } else {
        const GroveTableHeader* h = (const GroveTableHeader*)base;
        const GroveRule* rules = (const GroveRule*)(base + sizeof(GroveTableHeader));
        const GroveProduction* prods = (const GroveProduction*)(base + h->off_productions);
        const unsigned short* children = (const unsigned short*)(base + h->off_children);
        const unsigned depths = (p.max_depth > p.min_depth ? p.max_depth - p.min_depth : 0u) + 1u;
        unsigned max_depth = p.min_depth + (i / 2) % depths;
        const bool full = i % 2 == 1;
        const unsigned start_min = rules[0].min_depth;
        if (max_depth < start_min) max_depth = start_min;
        unsigned short ssym[GROVE_MAP_STACK];
        unsigned sdepth[GROVE_MAP_STACK];
        int top = 1;
        ssym[0] = 1u << 14;
        sdepth[0] = 1;
        while (top > 0) {
            --top;
            const unsigned sym = ssym[top], d = sdepth[top];
            if ((sym >> 14) != 1) {
                grove_init_put(row, p.capacity, n, grove_below(s, p.codon_size));
                continue;
            }
            const GroveRule rule = rules[sym & 0x3fffu];
            const unsigned first = rule.first_production, np = rule.n_productions;
            const unsigned choice = grove_grow_choice(prods, first, np, d, max_depth, full, s);
            if (!(p.lazy && np == 1)) {
                const unsigned per = p.codon_size / np;
                grove_init_put(row, p.capacity, n, choice + np * grove_below(s, per > 1 ? per : 1u));
            }
            const GroveProduction q = prods[first + choice];
            if (top + (int)q.n_children > GROVE_MAP_STACK) {
                flag[i] = 1;
                lens[i] = 0;
                return;
            }
            for (unsigned k = 0; k < q.n_children; ++k) {
                ssym[top + k] = children[q.first_child + q.n_children - 1 - k];
                sdepth[top + k] = d + 1;
            }
            top += (int)q.n_children;
        }
        // Rust's saturating `as usize`: NaN and negatives give 0.
        const float t = __fmul_rn((float)n, p.tail_fraction);
        const unsigned tail = t > 0.0f ? (t < 4294967040.0f ? (unsigned)t : 0xffffffffu) : 0u;
        for (unsigned k = 0; k < tail; ++k) grove_init_put(row, p.capacity, n, grove_below(s, p.codon_size));
    }
    const unsigned len = n < p.capacity ? n : p.capacity;
    for (unsigned k = len; k < p.capacity; ++k) row[k] = 0;
    lens[i] = len;
}

// init_genomes into codons [P x capacity] and lens [P]; flag[i] = 1 where the host must make row i.
extern "C" __global__ void grove_init_genomes(GroveInitParams p, unsigned* __restrict__ codons, unsigned* __restrict__ lens,
                                              unsigned* __restrict__ flag) {
    extern __shared__ unsigned grove_table_shared[];
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (p.table_words > 0) {
        for (unsigned w = threadIdx.x; w < p.table_words; w += blockDim.x) grove_table_shared[w] = grove_table[w];
        __syncthreads();
        if (i < p.n) grove_init_one((const char*)grove_table_shared, p, i, codons, lens, flag);
    } else if (i < p.n) {
        grove_init_one((const char*)grove_table, p, i, codons, lens, flag);
    }
}

// ---------------------------------------------------------------------------------------------
// GE subtree crossover, twin of genome::subtree::subtree_crossover as the GE loops call it
// (backend::cpu::breed's crossover): one thread per pair j, parents pairs[2j], pairs[2j + 1],
// stream (seed, generation, j, Crossover), children to rows first_row + 2j and + 1 where below
// n_rows, zero-padded (Genomes::set). Parents and children are mapped with grove_map_one and
// the loops' bounds (Grammar::mapper: GROVE_MAP_STACK pending symbols, max_derivation
// entries), so validity is the CPU mapper's.
//
// Scratch of thread j: scratch_stride words at j * scratch_stride (CudaEngine sizes it as
// 8 max_derivation + 2 capacity): der [D] (the derivation being mapped), per parent sym,
// start, end [D] (genome::map::DerivationNode's fields the operator reads), labels [D] (also
// derivation_nodes' size stack), then the two children [capacity] each (a child is built and
// mapped there before its row is written, as child 1 of the last pair may have no row).

// Mirrors SubtreeParams in src/backend/cuda/params.rs.
struct GroveSubtreeParams {
    GroveMapParams map;       // the loops' mapper; capacity: every genome array's row stride
    unsigned n_pairs;         // pairs of parents (threads)
    unsigned first_row;       // child row of pair 0's first child (after the elite)
    unsigned n_rows;          // rows of the children's arrays; rows at or past it are not written
    unsigned seed_lo;
    unsigned seed_hi;
    unsigned generation;
    float p_crossover;        // GeVaryConfig::crossover
    unsigned scratch_stride;  // scratch words per thread
};
GROVE_CHECK_LAYOUT(GroveSubtreeParams);

#define GROVE_SUBTREE_TRIES 8  // genome::subtree::TRIES

// genome::map::derivation_nodes of the complete derivation der[0 .. nd): per node its symbol,
// the codons read before it (start) and once its subtree was complete (end), and where depth
// is not null its depth (the root 1). Children counts
// wait in end until the backward pass replaces them; sz (nd words) is that pass's size stack.
// Returns the number of nodes (nd for a complete derivation).
static __device__ unsigned grove_derivation_nodes(const char* base, unsigned lazy, const unsigned* der, unsigned nd,
                                                  unsigned* sym, unsigned* start, unsigned* end, unsigned* sz,
                                                  unsigned* depth) {
    const GroveTableHeader* h = (const GroveTableHeader*)base;
    const GroveRule* rules = (const GroveRule*)(base + sizeof(GroveTableHeader));
    const GroveProduction* prods = (const GroveProduction*)(base + h->off_productions);
    const unsigned short* children = (const unsigned short*)(base + h->off_children);
    // The walk pushes what the mapper pushed, in its order, so it never holds more than the
    // mapper did (at most GROVE_MAP_STACK); the check only keeps a bad input in bounds.
    unsigned short ssym[GROVE_MAP_STACK];
    unsigned sdep[GROVE_MAP_STACK];
    int top = 1;
    ssym[0] = 1u << 14;
    sdep[0] = 1;
    unsigned used = 0, n = 0;
    for (unsigned k = 0; k < nd && top > 0; ++k) {
        --top;
        const unsigned s = ssym[top], d = sdep[top];
        sym[k] = s;
        start[k] = used;
        if (depth) depth[k] = d;
        ++n;
        if ((s >> 14) == 1) {
            used += (lazy && rules[s & 0x3fffu].n_productions == 1) ? 0u : 1u;
            const GroveProduction prod = prods[der[k]];
            const unsigned nk = prod.n_children;
            end[k] = nk;
            if (top + (int)nk > GROVE_MAP_STACK) return 0;
            for (unsigned c = 0; c < nk; ++c) {
                ssym[top + c] = children[prod.first_child + nk - 1 - c];
                sdep[top + c] = d + 1;
            }
            top += (int)nk;
        } else {
            used += 1;
            end[k] = 0;
        }
    }
    // Sizes from the last node back: a node's children are the sizes on top of the stack.
    unsigned st = 0;
    for (unsigned i = n; i-- > 0;) {
        unsigned size = 1;
        for (unsigned c = 0, nk = end[i]; c < nk; ++c) size += st > 0 ? sz[--st] : 0u;
        sz[st++] = size;
        const unsigned next = i + size;
        end[i] = next < n ? start[next] : used;
    }
    return n;
}

// The (start, end) span of the j-th node (in prefix order) with symbol `label` among nodes
// whose span ends within the genome (end <= len), as subtree_crossover's pick.
static __device__ __forceinline__ void grove_nth_node(const unsigned* sym, const unsigned* start, const unsigned* end, unsigned n,
                                                      unsigned len, unsigned label, unsigned j, unsigned& s0, unsigned& s1) {
    for (unsigned k = 0; k < n; ++k) {
        if (end[k] <= len && sym[k] == label) {
            if (j == 0) {
                s0 = start[k];
                s1 = end[k];
                return;
            }
            --j;
        }
    }
}

static __device__ __forceinline__ unsigned grove_count_nodes(const unsigned* sym, const unsigned* end, unsigned n, unsigned len,
                                                             unsigned label) {
    unsigned c = 0;
    for (unsigned k = 0; k < n; ++k) c += (end[k] <= len && sym[k] == label) ? 1u : 0u;
    return c;
}

// out = a[.. a0] ++ b[b0 .. b1] ++ a[a1 .. la] (splice); the caller checked it fits.
static __device__ __forceinline__ void grove_splice(const unsigned* a, unsigned la, unsigned a0, unsigned a1, const unsigned* b,
                                                    unsigned b0, unsigned b1, unsigned* out) {
    unsigned n = 0;
    for (unsigned k = 0; k < a0; ++k) out[n++] = a[k];
    for (unsigned k = b0; k < b1; ++k) out[n++] = b[k];
    for (unsigned k = a1; k < la; ++k) out[n++] = a[k];
}

static __device__ void grove_subtree_crossover_one(const char* base, const GroveSubtreeParams& p, unsigned j,
                                                   const unsigned* __restrict__ pairs, const unsigned* __restrict__ codons,
                                                   const unsigned* __restrict__ len, unsigned* __restrict__ child_codons,
                                                   unsigned* __restrict__ child_len, unsigned* __restrict__ scratch) {
    const unsigned cap = p.map.capacity, D = p.map.max_derivation;
    unsigned* w = scratch + (unsigned long long)j * p.scratch_stride;
    unsigned* der = w;
    unsigned *sa = w + D, *sta = w + 2ull * D, *ea = w + 3ull * D;
    unsigned *sb = w + 4ull * D, *stb = w + 5ull * D, *eb = w + 6ull * D;
    unsigned* lab = w + 7ull * D;
    unsigned* c0 = w + 8ull * D;
    unsigned* c1 = c0 + cap;
    const unsigned ia = pairs[2 * j], ib = pairs[2 * j + 1];
    const unsigned* ga = codons + (unsigned long long)ia * cap;
    const unsigned* gb = codons + (unsigned long long)ib * cap;
    const unsigned la = len[ia], lb = len[ib];
    GroveStream s = grove_stream(p.seed_lo, p.seed_hi, p.generation, j, GROVE_PURPOSE_CROSSOVER);
    bool crossed = false;
    unsigned n0 = 0, n1 = 0;
    if (grove_chance(s, p.p_crossover)) {
        unsigned na = 0, nb = 0, nl = 0;
        const GroveMapOut ma = grove_map_one(base, p.map, ia, codons, len, der, 1, 0);
        if (ma.status == GROVE_MAP_VALID) {
            na = grove_derivation_nodes(base, p.map.lazy, der, ma.n_derivation, sa, sta, ea, lab, nullptr);
            const GroveMapOut mb = grove_map_one(base, p.map, ib, codons, len, der, 1, 0);
            if (mb.status == GROVE_MAP_VALID) {
                nb = grove_derivation_nodes(base, p.map.lazy, der, mb.n_derivation, sb, stb, eb, lab, nullptr);
                // The labels of A's nodes within its genome, distinct and in increasing order,
                // kept where B has a node of it within its genome.
                for (unsigned k = 0; k < na; ++k) {
                    if (ea[k] > la) continue;
                    const unsigned x = sa[k];
                    unsigned at = 0;
                    while (at < nl && lab[at] < x) ++at;
                    if (at < nl && lab[at] == x) continue;
                    for (unsigned m = nl; m > at; --m) lab[m] = lab[m - 1];
                    lab[at] = x;
                    ++nl;
                }
                unsigned kept = 0;
                for (unsigned m = 0; m < nl; ++m) {
                    if (grove_count_nodes(sb, eb, nb, lb, lab[m]) > 0) lab[kept++] = lab[m];
                }
                nl = kept;
            }
        }
        for (unsigned t = 0; nl > 0 && t < GROVE_SUBTREE_TRIES; ++t) {
            const unsigned label = lab[grove_below(s, nl)];
            unsigned a0 = 0, a1 = 0, b0 = 0, b1 = 0;
            grove_nth_node(sa, sta, ea, na, la, label, grove_below(s, grove_count_nodes(sa, ea, na, la, label)), a0, a1);
            grove_nth_node(sb, stb, eb, nb, lb, label, grove_below(s, grove_count_nodes(sb, eb, nb, lb, label)), b0, b1);
            n0 = a0 + (b1 - b0) + (la - a1);
            n1 = b0 + (a1 - a0) + (lb - b1);
            // genome::subtree's acceptable: fits the capacity and maps validly, both children.
            if (n0 > cap || n1 > cap) continue;
            grove_splice(ga, la, a0, a1, gb, b0, b1, c0);
            grove_splice(gb, lb, b0, b1, ga, a0, a1, c1);
            if (grove_map_one(base, p.map, 0, c0, &n0, der, 1, 0).status != GROVE_MAP_VALID) continue;
            if (grove_map_one(base, p.map, 0, c1, &n1, der, 1, 0).status != GROVE_MAP_VALID) continue;
            crossed = true;
            break;
        }
    }
    for (unsigned k = 0; k < 2; ++k) {
        const unsigned row = p.first_row + 2 * j + k;
        if (row >= p.n_rows) break;
        // The children, or the parents copied (cut to the capacity, as Genomes::set does).
        const unsigned* src = crossed ? (k == 0 ? c0 : c1) : (k == 0 ? ga : gb);
        unsigned n = crossed ? (k == 0 ? n0 : n1) : (k == 0 ? la : lb);
        if (n > cap) n = cap;
        unsigned* out = child_codons + (unsigned long long)row * cap;
        for (unsigned c = 0; c < n; ++c) out[c] = src[c];
        for (unsigned c = n; c < cap; ++c) out[c] = 0;
        child_len[row] = n;
    }
}

extern "C" __global__ void grove_ge_subtree_crossover(GroveSubtreeParams p, const unsigned* __restrict__ pairs,
                                                      const unsigned* __restrict__ codons, const unsigned* __restrict__ len,
                                                      unsigned* __restrict__ child_codons, unsigned* __restrict__ child_len,
                                                      unsigned* __restrict__ scratch) {
    extern __shared__ unsigned grove_table_shared[];
    const unsigned j = blockIdx.x * blockDim.x + threadIdx.x;
    if (p.map.table_words > 0) {
        for (unsigned w = threadIdx.x; w < p.map.table_words; w += blockDim.x) grove_table_shared[w] = grove_table[w];
        __syncthreads();
        if (j < p.n_pairs) grove_subtree_crossover_one((const char*)grove_table_shared, p, j, pairs, codons, len, child_codons, child_len, scratch);
    } else if (j < p.n_pairs) {
        grove_subtree_crossover_one((const char*)grove_table, p, j, pairs, codons, len, child_codons, child_len, scratch);
    }
}

// ---------------------------------------------------------------------------------------------
// GE subtree mutation, twin of genome::subtree::subtree_mutate as the GE loops call it
// (backend::cpu::breed's mutate): one thread per row first_row + t below n_rows, in place, stream
// (seed, generation, row, Mutate). The row is mapped with the loops' bounds; a node whose span
// lies within the genome is drawn, and its span is replaced by a fresh random derivation of its
// symbol grown at its depth (genome::init::grow_derivation: productions that fit max_depth, at
// most the codons left by the capacity, at most GROVE_MAP_STACK pending symbols), until a child
// maps validly or GROVE_SUBTREE_TRIES attempts fail (the row is then left as it was).
//
// Scratch of thread t: scratch_stride words at t * scratch_stride (subtree_mutate_scratch_words:
// 6 max_derivation + 2 capacity + 1): der [D], sym, start, end, depth [D], the size stack [D],
// the fresh codons [capacity + 1] (a grow stops one past its budget) and the child [capacity].

// Mirrors SubtreeMutateParams in src/backend/cuda/params.rs.
struct GroveSubtreeMutateParams {
    GroveMapParams map;       // the loops' mapper; capacity: the row stride, n_genomes: P
    unsigned first_row;       // rows before it (the elite) are not mutated
    unsigned n_rows;          // rows first_row .. n_rows are
    unsigned seed_lo;
    unsigned seed_hi;
    unsigned generation;
    float p_mutation;         // GeVaryConfig::mutation
    unsigned codon_size;      // GeVaryConfig::codon_size
    unsigned scratch_stride;  // scratch words per thread
};
GROVE_CHECK_LAYOUT(GroveSubtreeMutateParams);

// grow_derivation (full off) of symbol sym at depth d0 into out; false once more than budget
// codons would be written or more than GROVE_MAP_STACK symbols would be pending. n: codons out.
static __device__ bool grove_grow_derivation(const char* base, unsigned lazy, unsigned sym0, unsigned d0, unsigned max_depth,
                                             unsigned codon_size, unsigned budget, GroveStream& s, unsigned* out, unsigned& n) {
    const GroveTableHeader* h = (const GroveTableHeader*)base;
    const GroveRule* rules = (const GroveRule*)(base + sizeof(GroveTableHeader));
    const GroveProduction* prods = (const GroveProduction*)(base + h->off_productions);
    const unsigned short* children = (const unsigned short*)(base + h->off_children);
    unsigned short ssym[GROVE_MAP_STACK];
    unsigned sdepth[GROVE_MAP_STACK];
    int top = 1;
    ssym[0] = (unsigned short)sym0;
    sdepth[0] = d0;
    n = 0;
    while (top > 0) {
        --top;
        const unsigned sym = ssym[top], d = sdepth[top];
        if ((sym >> 14) != 1) {
            out[n++] = grove_below(s, codon_size);
        } else {
            const GroveRule rule = rules[sym & 0x3fffu];
            const unsigned first = rule.first_production, np = rule.n_productions;
            const unsigned choice = grove_grow_choice(prods, first, np, d, max_depth, false, s);
            if (!(lazy && np == 1)) {
                const unsigned per = codon_size / np;
                out[n++] = choice + np * grove_below(s, per > 1 ? per : 1u);
            }
            const GroveProduction q = prods[first + choice];
            if (top + (int)q.n_children > GROVE_MAP_STACK) return false;
            for (unsigned k = 0; k < q.n_children; ++k) {
                ssym[top + k] = children[q.first_child + q.n_children - 1 - k];
                sdepth[top + k] = d + 1;
            }
            top += (int)q.n_children;
        }
        if (n > budget) return false;
    }
    return true;
}

static __device__ void grove_subtree_mutate_one(const char* base, const GroveSubtreeMutateParams& p, unsigned t,
                                                unsigned* __restrict__ codons, unsigned* __restrict__ len,
                                                unsigned* __restrict__ scratch) {
    const unsigned cap = p.map.capacity, D = p.map.max_derivation;
    const unsigned row = p.first_row + t;
    unsigned* w = scratch + (unsigned long long)t * p.scratch_stride;
    unsigned* der = w;
    unsigned *sym = w + D, *start = w + 2ull * D, *end = w + 3ull * D, *depth = w + 4ull * D, *sz = w + 5ull * D;
    unsigned* fresh = w + 6ull * D;
    unsigned* child = fresh + cap + 1;
    GroveStream s = grove_stream(p.seed_lo, p.seed_hi, p.generation, row, GROVE_PURPOSE_MUTATE);
    if (!grove_chance(s, p.p_mutation)) return;
    unsigned* g = codons + (unsigned long long)row * cap;
    const unsigned lg = len[row];
    const GroveMapOut m = grove_map_one(base, p.map, row, codons, len, der, 1, 0);
    if (m.status != GROVE_MAP_VALID) return;
    const unsigned nn = grove_derivation_nodes(base, p.map.lazy, der, m.n_derivation, sym, start, end, sz, depth);
    // Only nodes whose span lies within the genome (with wraps a subtree may read past its end).
    unsigned na = 0;
    for (unsigned k = 0; k < nn; ++k) {
        if (end[k] > lg) continue;
        sym[na] = sym[k];
        start[na] = start[k];
        end[na] = end[k];
        depth[na] = depth[k];
        ++na;
    }
    if (na == 0) return;
    for (unsigned tr = 0; tr < GROVE_SUBTREE_TRIES; ++tr) {
        const unsigned k = grove_below(s, na);
        const unsigned kept = lg - (end[k] - start[k]);
        const unsigned budget = cap > kept ? cap - kept : 0u;
        unsigned nf = 0;
        if (!grove_grow_derivation(base, p.map.lazy, sym[k], depth[k], p.map.max_depth, p.codon_size, budget, s, fresh, nf)) continue;
        unsigned nc = kept + nf;
        if (nc > cap) continue;
        grove_splice(g, lg, start[k], end[k], fresh, 0, nf, child);
        if (grove_map_one(base, p.map, 0, child, &nc, der, 1, 0).status != GROVE_MAP_VALID) continue;
        // As Genomes::set: the new length, zero after it.
        for (unsigned c = 0; c < nc; ++c) g[c] = child[c];
        for (unsigned c = nc; c < cap; ++c) g[c] = 0;
        len[row] = nc;
        return;
    }
}

extern "C" __global__ void grove_ge_subtree_mutate(GroveSubtreeMutateParams p, unsigned* __restrict__ codons,
                                                   unsigned* __restrict__ len, unsigned* __restrict__ scratch) {
    extern __shared__ unsigned grove_table_shared[];
    const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned n = p.n_rows > p.first_row ? p.n_rows - p.first_row : 0u;
    if (p.map.table_words > 0) {
        for (unsigned w = threadIdx.x; w < p.map.table_words; w += blockDim.x) grove_table_shared[w] = grove_table[w];
        __syncthreads();
        if (t < n) grove_subtree_mutate_one((const char*)grove_table_shared, p, t, codons, len, scratch);
    } else if (t < n) {
        grove_subtree_mutate_one((const char*)grove_table, p, t, codons, len, scratch);
    }
}
