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

#define GROVE_MAP_STACK 256        // (symbol, depth) entries per thread
#define GROVE_TABLE_BYTES 65536    // TABLE_LIMIT_BYTES

// Status codes (MapStatus in src/backend/cuda/kernels.rs).
#define GROVE_MAP_VALID 0
#define GROVE_MAP_OUT_OF_CODONS 1
#define GROVE_MAP_TOO_DEEP 2
#define GROVE_MAP_TOO_MANY_NODES 3
#define GROVE_MAP_DERIVATION_FULL 4
#define GROVE_MAP_STACK_OVERFLOW 5

// Compile-time field offsets (NVRTC has no <cstddef>; __INTADDR__ is its front end's builtin).
#define GROVE_OFFSETOF(S, f) ((unsigned long long)__INTADDR__(&(((S*)0)->f)))

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
static_assert(sizeof(GroveMapParams) == 32, "GroveMapParams must match MapParams");
static_assert(GROVE_OFFSETOF(GroveMapParams, n_genomes) == 0, "layout");
static_assert(GROVE_OFFSETOF(GroveMapParams, capacity) == 4, "layout");
static_assert(GROVE_OFFSETOF(GroveMapParams, max_wraps) == 8, "layout");
static_assert(GROVE_OFFSETOF(GroveMapParams, lazy) == 12, "layout");
static_assert(GROVE_OFFSETOF(GroveMapParams, max_depth) == 16, "layout");
static_assert(GROVE_OFFSETOF(GroveMapParams, max_nodes) == 20, "layout");
static_assert(GROVE_OFFSETOF(GroveMapParams, max_derivation) == 24, "layout");
static_assert(GROVE_OFFSETOF(GroveMapParams, table_words) == 28, "layout");

// Mirrors MapOut in src/backend/cuda/kernels.rs: one genome's outcome.
struct GroveMapOut {
    unsigned status;        // GROVE_MAP_*
    unsigned used_codons;   // codons read
    unsigned depth;         // PonyGE2 depth (root 1, leaf rows count)
    unsigned nodes;         // PonyGE2 node count
    unsigned n_derivation;  // derivation entries written
};
static_assert(sizeof(GroveMapOut) == 20, "GroveMapOut must match MapOut");
static_assert(GROVE_OFFSETOF(GroveMapOut, status) == 0, "layout");
static_assert(GROVE_OFFSETOF(GroveMapOut, used_codons) == 4, "layout");
static_assert(GROVE_OFFSETOF(GroveMapOut, depth) == 8, "layout");
static_assert(GROVE_OFFSETOF(GroveMapOut, nodes) == 12, "layout");
static_assert(GROVE_OFFSETOF(GroveMapOut, n_derivation) == 16, "layout");

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
static_assert(sizeof(GroveTableHeader) == 32, "TableHeader");
static_assert(sizeof(GroveRule) == 8, "RuleEntry");
static_assert(sizeof(GroveProduction) == 12, "ProductionEntry");
#define GROVE_PRODUCTION_LEAF_ROW 2

// The rule table blob, 4-byte words so that every section is aligned.
__constant__ unsigned grove_table[GROVE_TABLE_BYTES / 4];

// Maps genome i reading the table at base (constant or shared memory).
static __device__ __forceinline__ void grove_map_one(const char* base, const GroveMapParams& p, unsigned i,
                                                     const unsigned* __restrict__ genomes,
                                                     const unsigned* __restrict__ lens,
                                                     GroveMapOut* __restrict__ out,
                                                     unsigned* __restrict__ derivation) {
    const GroveTableHeader* h = (const GroveTableHeader*)base;
    const GroveRule* rules = (const GroveRule*)(base + sizeof(GroveTableHeader));
    const GroveProduction* prods = (const GroveProduction*)(base + h->off_productions);
    const unsigned short* children = (const unsigned short*)(base + h->off_children);
    const int* codon = (const int*)(base + ((h->off_symbols + 2 * h->n_symbols + 3) & ~3u));

    const unsigned* g = genomes + (size_t)i * p.capacity;
    unsigned* dout = derivation + (size_t)i * p.max_derivation;
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
                const unsigned c = __ldg(g + pos);
                ++used;
                if (++pos == len) pos = 0;
                choice = c % n;
            }
            const unsigned pi = rule.first_production + choice;
            if (nd == p.max_derivation) { status = GROVE_MAP_DERIVATION_FULL; break; }
            dout[nd++] = pi;
            ++nodes;
            const GroveProduction prod = prods[pi];
            const unsigned nk = prod.n_children;
            if (nk == 0) {
                // PonyGE2 raises the depth when a subtree finishes: only childless expansions
                // (which finish at once) can raise it (see map.rs).
                const unsigned leaf = (prod.flags & GROVE_PRODUCTION_LEAF_ROW) ? 1u : 0u;
                nodes += leaf;
                depth = max(depth, d + leaf);
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
            const unsigned c = __ldg(g + pos);
            ++used;
            if (++pos == len) pos = 0;
            const unsigned count = (unsigned)codon[2 * index + 1];
            if (nd == p.max_derivation) { status = GROVE_MAP_DERIVATION_FULL; break; }
            dout[nd++] = c % count;
            nodes += 2;
            depth = max(depth, d + 1);
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
    out[i] = o;
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
        if (i < p.n_genomes) grove_map_one((const char*)grove_table_shared, p, i, genomes, lens, out, derivation);
    } else if (i < p.n_genomes) {
        grove_map_one((const char*)grove_table, p, i, genomes, lens, out, derivation);
    }
}
