// select.cu: selection on the GPU, twin of src/select.rs: the pool of valid individuals,
// tournaments (with and without replacement), a full ranking (elitism, truncation) and
// truncation selection. Fitness is f64 [P], minimised; NaN reads as +inf (select::key); an
// individual with a non-finite key is invalid and never in the pool. The host side is
// src/backend/cuda/select.rs; parity tests are tests/cuda_vary.rs.

#include "grove_common.h"
#include "rng.cuh"
#include "order.cuh"
#include "scan.cuh"

// Most contestants of a tournament without replacement (its chosen positions are a local list).
#define GROVE_MAX_DISTINCT 64
// Threads of the one block of grove_valid_pool (a power of two).
// Fitness values staged per block by grove_rank.
#define GROVE_RANK_TILE 256

// Mirrors SelectParams in src/backend/cuda/kernels.rs.
struct GroveSelectParams {
    unsigned n;            // P: individuals (entries of fitness)
    unsigned n_slots;      // selections this launch makes (threads)
    unsigned slot_offset;  // slot s of this launch is selection slot_offset + s (its stream)
    unsigned k;            // tournament size
    unsigned distinct;     // 1: tournament without replacement
    unsigned n_top;        // truncation: choose among the first n_top of the ranking
    unsigned seed_lo;
    unsigned seed_hi;
    unsigned generation;
    unsigned n_cases;      // lexicase: cases (columns of errors)
};
GROVE_CHECK_LAYOUT(GroveSelectParams);

// select::beats: strictly lower key, ties to the lower index.
__device__ __forceinline__ bool grove_beats(const double* fit, unsigned a, unsigned b) {
    const double fa = grove_key(fit[a]), fb = grove_key(fit[b]);
    return fa < fb || (fa == fb && a < b);
}


// select::valid_indices: pool = the indices with a finite key, in order; n_valid[0] = their
// number. Three launches over tiles of GROVE_TILE indices (scan.cuh): grove_valid_count (a
// block per tile), grove_valid_scan (one block), grove_valid_pool (a block per tile).

__device__ __forceinline__ bool grove_valid(const double* fit, unsigned i) { return isfinite(grove_key(fit[i])); }

extern "C" __global__ void grove_valid_count(GroveSelectParams p, const double* fit, unsigned long long* tiles) {
    const unsigned lo = grove_tile_first();
    unsigned long long c = 0;
    for (unsigned j = 0; j < GROVE_TILE_ITEMS; ++j) c += lo + j < p.n && grove_valid(fit, lo + j);
    unsigned long long total;
    grove_block_scan(c, total);
    if (threadIdx.x == 0) tiles[blockIdx.x] = total;
}

// tiles: counts to offsets; n_valid[0] = the total. One block of GROVE_TILE_THREADS threads.
extern "C" __global__ void grove_valid_scan(GroveSelectParams p, unsigned long long* tiles, unsigned* n_valid) {
    const unsigned n_tiles = (p.n + GROVE_TILE - 1) / GROVE_TILE;
    const unsigned long long total = grove_tiles_scan(tiles, n_tiles);
    if (threadIdx.x == 0) n_valid[0] = (unsigned)total;
}

extern "C" __global__ void grove_valid_pool(GroveSelectParams p, const double* fit, const unsigned long long* tiles,
                                            unsigned* pool) {
    const unsigned lo = grove_tile_first();
    bool keep[GROVE_TILE_ITEMS];
    unsigned long long c = 0;
    for (unsigned j = 0; j < GROVE_TILE_ITEMS; ++j) {
        keep[j] = lo + j < p.n && grove_valid(fit, lo + j);
        c += keep[j];
    }
    unsigned long long total;
    unsigned at = (unsigned)(tiles[blockIdx.x] + grove_block_scan(c, total));
    for (unsigned j = 0; j < GROVE_TILE_ITEMS; ++j)
        if (keep[j]) pool[at++] = lo + j;
}

// select::tournament (distinct == 0) or select::tournament_distinct (distinct == 1) for slot
// slot_offset + s, stream (seed, generation, slot, Select), contestants from the pool
// (all individuals if it is empty). winners[s] = the winner.
extern "C" __global__ void grove_tournament(GroveSelectParams p, const double* fit, const unsigned* pool,
                                            const unsigned* n_valid, unsigned* winners) {
    const unsigned s = blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= p.n_slots) return;
    const unsigned nv = n_valid[0];
    const bool all = nv == 0;
    const unsigned n = all ? p.n : nv;
    GroveStream rng = grove_stream(p.seed_lo, p.seed_hi, p.generation, p.slot_offset + s, GROVE_PURPOSE_SELECT);
    unsigned best;
    if (!p.distinct) {
        const unsigned r0 = grove_below(rng, n);
        best = all ? r0 : pool[r0];
        const unsigned k = p.k > 1 ? p.k : 1;
        for (unsigned i = 1; i < k; ++i) {
            const unsigned r = grove_below(rng, n);
            const unsigned c = all ? r : pool[r];
            if (grove_beats(fit, c, best)) best = c;
        }
    } else {
        unsigned chosen[GROVE_MAX_DISTINCT];
        unsigned k = p.k < 1 ? 1 : p.k;
        if (k > n) k = n;
        unsigned m = 0;
        while (m < k) {
            const unsigned r = grove_below(rng, n);
            bool seen = false;
            for (unsigned i = 0; i < m; ++i) seen |= chosen[i] == r;
            if (!seen) chosen[m++] = r;
        }
        best = all ? chosen[0] : pool[chosen[0]];
        for (unsigned i = 1; i < m; ++i) {
            const unsigned c = all ? chosen[i] : pool[chosen[i]];
            if (grove_beats(fit, c, best)) best = c;
        }
    }
    winners[s] = best;
}

// select::elite(fit, P): ranked[r] = the individual of rank r, ordered by total_cmp of the key,
// ties by index (invalid ones last). Each thread counts the individuals before its own, fitness
// staged through shared memory in tiles: O(P^2) comparisons (1e10 at P = 1e5; not yet timed).
extern "C" __global__ void grove_rank(GroveSelectParams p, const double* fit, unsigned* ranked) {
    __shared__ long long tile[GROVE_RANK_TILE];
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    const long long mine = i < p.n ? grove_total_order(grove_key(fit[i])) : 0;
    unsigned rank = 0;
    for (unsigned base = 0; base < p.n; base += GROVE_RANK_TILE) {
        __syncthreads();
        for (unsigned t = threadIdx.x; t < GROVE_RANK_TILE; t += blockDim.x) {
            const unsigned j = base + t;
            tile[t] = j < p.n ? grove_total_order(grove_key(fit[j])) : 0;
        }
        __syncthreads();
        const unsigned m = p.n - base < GROVE_RANK_TILE ? p.n - base : GROVE_RANK_TILE;
        for (unsigned t = 0; t < m; ++t) {
            const long long o = tile[t];
            rank += (o < mine || (o == mine && base + t < i)) ? 1u : 0u;
        }
    }
    if (i < p.n) ranked[rank] = i;
}

// select::truncation for slot slot_offset + s: uniform among ranked[0 .. n_top] (the host
// computes n_top = clamp(ceil(P * rate), 1, P) in f64, as the CPU does).
extern "C" __global__ void grove_truncation(GroveSelectParams p, const unsigned* ranked, unsigned* winners) {
    const unsigned s = blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= p.n_slots) return;
    GroveStream rng = grove_stream(p.seed_lo, p.seed_hi, p.generation, p.slot_offset + s, GROVE_PURPOSE_SELECT);
    winners[s] = ranked[grove_below(rng, p.n_top)];
}

// select::epsilon_lexicase for slot slot_offset + s, stream (seed, generation, slot, Select):
// errors [P x n_cases] f64, eps [n_cases] (select::lexicase_epsilons, from the host), the pool
// as grove_valid_pool leaves it. Thread s keeps its candidates in cand[s * P ..] (filtered in
// place, order kept, as Vec::retain) and its case order in order[s * n_cases ..]; winners[s].
extern "C" __global__ void grove_lexicase(GroveSelectParams p, const double* errors, const double* eps,
                                          const unsigned* pool, const unsigned* n_valid, unsigned* order,
                                          unsigned* cand, unsigned* winners) {
    const unsigned s = blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= p.n_slots) return;
    const unsigned nv = n_valid[0], C = p.n_cases;
    unsigned* mine = cand + (unsigned long long)s * p.n;
    unsigned* ord = order + (unsigned long long)s * C;
    unsigned m = nv == 0 ? p.n : nv;
    for (unsigned i = 0; i < m; ++i) mine[i] = nv == 0 ? i : pool[i];
    for (unsigned c = 0; c < C; ++c) ord[c] = c;
    GroveStream rng = grove_stream(p.seed_lo, p.seed_hi, p.generation, p.slot_offset + s, GROVE_PURPOSE_SELECT);
    for (unsigned t = 0; t < C && m > 1; ++t) {
        const unsigned r = t + grove_below(rng, C - t);
        const unsigned tmp = ord[t];
        ord[t] = ord[r];
        ord[r] = tmp;
        const unsigned c = ord[t];
        double best = __longlong_as_double(0x7FF0000000000000ll);
        for (unsigned i = 0; i < m; ++i) {
            const double e = grove_key(errors[(unsigned long long)mine[i] * C + c]);
            if (e < best) best = e;
        }
        const double threshold = __dadd_rn(best, eps[c]);
        unsigned kept = 0;
        for (unsigned i = 0; i < m; ++i) {
            const unsigned j = mine[i];
            if (grove_key(errors[(unsigned long long)j * C + c]) <= threshold) mine[kept++] = j;
        }
        m = kept;
    }
    winners[s] = mine[m > 1 ? grove_below(rng, m) : 0];
}
