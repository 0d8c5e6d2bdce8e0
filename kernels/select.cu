// select.cu: selection on the GPU, twin of src/select.rs: the pool of valid individuals,
// tournaments (with and without replacement), a full ranking (elitism, truncation) and
// truncation selection. Fitness is f64 [P], minimised; NaN reads as +inf (select::key); an
// individual with a non-finite key is invalid and never in the pool. The host side is
// src/backend/cuda/select.rs; parity tests are tests/cuda_vary.rs.

#include "grove_common.h"
#include "rng.cuh"
#include "order.cuh"
#include "scan.cuh"

// Lanes of a lexicase selection (lanes.cuh).
#define GROVE_LANES 32
#include "lanes.cuh"

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
    unsigned stride;       // lexicase: row stride of the candidate buffer
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

// With `group` (not null: select::parent_pool's unique representatives, grove_unique_groups),
// only the individuals that represent their group are in the pool.
__device__ __forceinline__ bool grove_valid(const double* fit, const unsigned* group, unsigned i) {
    return isfinite(grove_key(fit[i])) && (group == nullptr || group[i] == i);
}

extern "C" __global__ void grove_valid_count(GroveSelectParams p, const double* fit, const unsigned* group, unsigned long long* tiles) {
    const unsigned lo = grove_tile_first();
    unsigned long long c = 0;
    for (unsigned j = 0; j < GROVE_TILE_ITEMS; ++j) c += lo + j < p.n && grove_valid(fit, group, lo + j);
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

extern "C" __global__ void grove_valid_pool(GroveSelectParams p, const double* fit, const unsigned* group,
                                            const unsigned long long* tiles, unsigned* pool) {
    const unsigned lo = grove_tile_first();
    bool keep[GROVE_TILE_ITEMS];
    unsigned long long c = 0;
    for (unsigned j = 0; j < GROVE_TILE_ITEMS; ++j) {
        keep[j] = lo + j < p.n && grove_valid(fit, group, lo + j);
        c += keep[j];
    }
    unsigned long long total;
    unsigned at = (unsigned)(tiles[blockIdx.x] + grove_block_scan(c, total));
    for (unsigned j = 0; j < GROVE_TILE_ITEMS; ++j)
        if (keep[j]) pool[at++] = lo + j;
}

// select::parent_pool's representatives (Diversity::Unique): group[i] is the valid individual
// of fewest nodes, then lowest index, whose fitness equals i's bit for bit (i itself for an
// invalid one). Two launches, a thread per individual: grove_unique_insert puts each valid
// fitness's bits in an open table of 2^bits slots (keys: the bits themselves, so exact; the
// empty key is all ones, a NaN, which no valid fitness has) and keeps the least (size << 32 |
// index) of each; grove_unique_groups reads it back.
#define GROVE_UNIQUE_EMPTY 0xFFFFFFFFFFFFFFFFull

__device__ __forceinline__ unsigned grove_unique_first_slot(unsigned long long k, unsigned mask) {
    k ^= k >> 33;
    k *= 0xFF51AFD7ED558CCDull;
    k ^= k >> 33;
    return (unsigned)k & mask;
}

extern "C" __global__ void grove_unique_insert(GroveSelectParams p, const double* fit, const unsigned short* lens, unsigned bits,
                                               unsigned long long* keys, unsigned long long* vals) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= p.n || !isfinite(grove_key(fit[i]))) return;
    const unsigned long long k = (unsigned long long)__double_as_longlong(fit[i]);
    const unsigned mask = (1u << bits) - 1;
    unsigned slot = grove_unique_first_slot(k, mask);
    for (;;) {
        const unsigned long long old = atomicCAS(&keys[slot], GROVE_UNIQUE_EMPTY, k);
        if (old == GROVE_UNIQUE_EMPTY || old == k) break;
        slot = (slot + 1) & mask;
    }
    atomicMin(&vals[slot], ((unsigned long long)lens[i] << 32) | i);
}

extern "C" __global__ void grove_unique_groups(GroveSelectParams p, const double* fit, unsigned bits,
                                               const unsigned long long* keys, const unsigned long long* vals, unsigned* group) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= p.n) return;
    if (!isfinite(grove_key(fit[i]))) {
        group[i] = i;
        return;
    }
    const unsigned long long k = (unsigned long long)__double_as_longlong(fit[i]);
    const unsigned mask = (1u << bits) - 1;
    unsigned slot = grove_unique_first_slot(k, mask);
    while (keys[slot] != k) slot = (slot + 1) & mask;
    group[i] = (unsigned)(vals[slot] & 0xFFFFFFFFull);
}

// select::run_tournament: k contestants drawn with replacement from the pool (all n
// individuals when it is empty), the one that `better` prefers to every later challenger wins.
template <class Better>
__device__ unsigned grove_draw_tournament(GroveStream& rng, unsigned k, const unsigned* pool, bool all, unsigned n, Better better) {
    const unsigned r0 = grove_below(rng, n);
    unsigned best = all ? r0 : pool[r0];
    for (unsigned i = 1; i < (k > 1 ? k : 1); ++i) {
        const unsigned r = grove_below(rng, n);
        const unsigned c = all ? r : pool[r];
        if (better(c, best)) best = c;
    }
    return best;
}

struct GroveBeats {
    const double* fit;
    __device__ bool operator()(unsigned a, unsigned b) const { return grove_beats(fit, a, b); }
};

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
        best = grove_draw_tournament(rng, p.k, pool, all, n, GroveBeats{fit});
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

// Lexicase selection. The per-case errors are f64 [P x n_cases] (row i individual i's, NaN read
// as +inf), the pool as grove_valid_pool leaves it (every individual when none is valid).

// select::EPSILON_SAMPLE: the most individuals whose errors set the epsilons.
#define GROVE_EPSILON_SAMPLE 1024
// Threads of a grove_lexicase_epsilons block (a power of two, at most GROVE_EPSILON_SAMPLE / 2).
#define GROVE_EPSILON_THREADS 256

// select::epsilon_sample, one thread: the pool itself where it holds at most
// GROVE_EPSILON_SAMPLE, else that many draws below(pool size) from the stream (seed,
// generation, 0, Epsilon); sample[0 .. count[0]] the individuals.
extern "C" __global__ void grove_epsilon_sample(GroveSelectParams p, const unsigned* pool, const unsigned* n_valid, unsigned* sample,
                                                unsigned* count) {
    if (blockIdx.x * blockDim.x + threadIdx.x != 0) return;
    const unsigned nv = n_valid[0], m = nv == 0 ? p.n : nv;
    if (m <= GROVE_EPSILON_SAMPLE) {
        for (unsigned j = 0; j < m; ++j) sample[j] = nv == 0 ? j : pool[j];
        count[0] = m;
        return;
    }
    GroveStream rng = grove_stream(p.seed_lo, p.seed_hi, p.generation, 0, GROVE_PURPOSE_EPSILON);
    for (unsigned j = 0; j < GROVE_EPSILON_SAMPLE; ++j) {
        const unsigned r = grove_below(rng, m);
        sample[j] = nv == 0 ? r : pool[r];
    }
    count[0] = GROVE_EPSILON_SAMPLE;
}

// Sorts v[0 .. GROVE_EPSILON_SAMPLE] ascending (a bitonic network; the values are finite or
// +inf, never NaN), the block's threads sharing the compare-exchanges. Starts and ends with a
// barrier.
__device__ __forceinline__ void grove_sort_sample(double* v) {
    for (unsigned size = 2; size <= GROVE_EPSILON_SAMPLE; size <<= 1) {
        for (unsigned stride = size >> 1; stride > 0; stride >>= 1) {
            __syncthreads();
            for (unsigned t = threadIdx.x; t < GROVE_EPSILON_SAMPLE / 2; t += blockDim.x) {
                const unsigned i = 2 * t - (t & (stride - 1)), j = i + stride;
                const double a = v[i], b = v[j];
                if ((a > b) == ((i & size) == 0)) {
                    v[i] = b;
                    v[j] = a;
                }
            }
        }
    }
    __syncthreads();
}

// The median of the sorted v[0 .. n], n >= 1: the middle value, or the mean of the middle two.
__device__ __forceinline__ double grove_sorted_median(const double* v, unsigned n) {
    const unsigned m = n / 2;
    return n % 2 == 1 ? v[m] : __dadd_rn(v[m - 1], v[m]) / 2.0;
}

// select::lexicase_epsilons, a block of GROVE_EPSILON_THREADS threads per case: the median
// absolute deviation of the sample's finite errors on case blockIdx.x (0 when none is finite)
// into eps.
extern "C" __global__ void grove_lexicase_epsilons(GroveSelectParams p, const double* errors, const unsigned* sample,
                                                   const unsigned* count, double* eps) {
    __shared__ double v[GROVE_EPSILON_SAMPLE];
    __shared__ unsigned n_finite;
    const double inf = __longlong_as_double(0x7FF0000000000000ll);
    const unsigned c = blockIdx.x, m = count[0];
    if (threadIdx.x == 0) n_finite = 0;
    __syncthreads();
    unsigned mine = 0;
    for (unsigned j = threadIdx.x; j < GROVE_EPSILON_SAMPLE; j += blockDim.x) {
        const double e = j < m ? errors[(unsigned long long)sample[j] * p.n_cases + c] : inf;
        const bool finite = isfinite(e);
        v[j] = finite ? e : inf;
        mine += finite;
    }
    atomicAdd(&n_finite, mine);
    grove_sort_sample(v);
    const unsigned n = n_finite;
    if (n == 0) {
        if (threadIdx.x == 0) eps[c] = 0.0;
        return;
    }
    const double med = grove_sorted_median(v, n);
    __syncthreads();
    for (unsigned j = threadIdx.x; j < GROVE_EPSILON_SAMPLE; j += blockDim.x) v[j] = j < n ? fabs(__dsub_rn(v[j], med)) : inf;
    grove_sort_sample(v);
    if (threadIdx.x == 0) eps[c] = grove_sorted_median(v, n);
}

// Lexicase's clones: group[i] is the lowest index whose errors equal individual i's on every
// case, bit for bit, or i itself where that one's row hashes alike but differs. Two launches,
// a thread per individual: grove_error_groups_insert puts each row's 64-bit hash in an open
// table of 2^bits slots (keys 0 = empty; vals the lowest index with that hash), then
// grove_error_groups_verify compares each row with its hash's lowest index. A selection whose
// candidates are all in one group can stop filtering: the cases left change nothing.
__device__ __forceinline__ unsigned long long grove_row_hash(const double* errors, unsigned i, unsigned C) {
    unsigned long long h = 0xCBF29CE484222325ull;
    for (unsigned c = 0; c < C; ++c) {
        h ^= (unsigned long long)__double_as_longlong(errors[(unsigned long long)i * C + c]);
        h *= 0x100000001B3ull;
        h ^= h >> 29;
    }
    return h == 0 ? 1 : h;
}

__device__ __forceinline__ unsigned grove_hash_slot(const unsigned long long* keys, unsigned long long h, unsigned mask) {
    unsigned slot = (unsigned)(h ^ (h >> 32)) & mask;
    while (keys[slot] != h) slot = (slot + 1) & mask;
    return slot;
}

extern "C" __global__ void grove_error_groups_insert(GroveSelectParams p, const double* errors, unsigned bits,
                                                     unsigned long long* keys, unsigned* vals) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= p.n) return;
    const unsigned long long h = grove_row_hash(errors, i, p.n_cases);
    const unsigned mask = (1u << bits) - 1;
    unsigned slot = (unsigned)(h ^ (h >> 32)) & mask;
    for (;;) {
        const unsigned long long k = atomicCAS(&keys[slot], 0ull, h);
        if (k == 0 || k == h) break;
        slot = (slot + 1) & mask;
    }
    atomicMin(&vals[slot], i);
}

extern "C" __global__ void grove_error_groups_verify(GroveSelectParams p, const double* errors, unsigned bits,
                                                     const unsigned long long* keys, const unsigned* vals, unsigned* group) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= p.n) return;
    const unsigned C = p.n_cases;
    const unsigned rep = vals[grove_hash_slot(keys, grove_row_hash(errors, i, C), (1u << bits) - 1)];
    bool same = true;
    for (unsigned c = 0; c < C && same; ++c)
        same = __double_as_longlong(errors[(unsigned long long)i * C + c]) == __double_as_longlong(errors[(unsigned long long)rep * C + c]);
    group[i] = same ? rep : i;
}

// select::epsilon_lexicase for slot slot_offset + g, a group of GROVE_LANES lanes per
// selection g (stream (seed, generation, slot, Select), eps from grove_lexicase_epsilons).
// Every lane holds the same stream and takes the same decisions; the lanes share the
// candidates. The candidates start as the pool in order where it holds at most p.k (or p.k is
// 0), else as the p.k draws of the slot's group (select::lexicase_candidates: the stream
// (seed, generation, slot / p.k, LexicasePool)): draw j is word j % 4 of that stream's block
// j / 4, so lane l computes blocks l, l + GROVE_LANES, ... itself and the first case's filter
// needs no list of them. grove_lexicase_staged is the faster kernel where a group's candidates'
// errors fit in a block's shared memory; this one serves the rest. Its survivors, in order, go to cand[g * p.stride ..] (p.stride >= the candidates),
// where the later filters compact them in place (Vec::retain), until at most GROVE_LANES are
// left: then lane l holds the l-th in registers and a filter is one ballot. The case order is
// a lazy Fisher-Yates that lane 0 keeps, in shared memory where the cases fit
// (GROVE_LEX_CASES), else in order[g * p.n_cases ..]. A filter that removes no one may have
// left clones only (group[]); the cases left then keep them all, so the stream skips their
// draws. winners[g].
#define GROVE_LEX_CASES 1024
#define GROVE_LEX_GROUPS 4
#define GROVE_LEX_BOUNDS __launch_bounds__(GROVE_LANES * GROVE_LEX_GROUPS)

// Candidate j of the first filter's list: pool position j, or draw j's.
__device__ __forceinline__ unsigned grove_lex_pool(const unsigned* pool, unsigned nv, unsigned r) { return nv == 0 ? r : pool[r]; }

extern "C" __global__ void GROVE_LEX_BOUNDS
grove_lexicase(GroveSelectParams p, const double* errors, const double* eps, const unsigned* pool, const unsigned* n_valid,
               const unsigned* group, unsigned* order, unsigned* cand, unsigned* winners) {
    __shared__ unsigned shared_order[GROVE_LEX_GROUPS * GROVE_LEX_CASES];
    const GroveLanes g = grove_lanes();
    const unsigned sel = grove_group_index();
    if (sel >= p.n_slots) return;
    const double inf = __longlong_as_double(0x7FF0000000000000ll);
    const unsigned nv = n_valid[0], C = p.n_cases, m0 = nv == 0 ? p.n : nv;
    const bool drawn = p.k != 0 && m0 > p.k;
    const unsigned width = drawn ? p.k : m0;
    GroveStream rng = grove_stream(p.seed_lo, p.seed_hi, p.generation, p.slot_offset + sel, GROVE_PURPOSE_SELECT);
    const GroveStream drawer = grove_stream(p.seed_lo, p.seed_hi, p.generation, drawn ? (p.slot_offset + sel) / p.k : 0u, GROVE_PURPOSE_LEXICASE_POOL);
    unsigned* ord = C <= GROVE_LEX_CASES ? shared_order + (threadIdx.x / GROVE_LANES) * GROVE_LEX_CASES : order + (unsigned long long)sel * C;
    unsigned* list = cand + (unsigned long long)sel * p.stride;
    if (width > 1)
        for (unsigned c = g.lane; c < C; c += GROVE_LANES) ord[c] = c;
    grove_sync(g);
    unsigned m = width;
    // Register phase (m <= GROVE_LANES after a filter): lane l's candidate and whether it lives.
    unsigned mine = 0u, alive = 0u;
    bool in_registers = false;
    for (unsigned t = 0; t < C && m > 1; ++t) {
        const unsigned r = t + grove_below(rng, C - t);
        unsigned c = 0u;
        if (g.lane == 0) {
            c = ord[r];
            ord[r] = ord[t];
        }
        c = grove_share(g, c);
        const unsigned long long row = c;
        unsigned kept;
        if (in_registers) {
            const double e = (alive >> g.lane) & 1u ? grove_key(errors[(unsigned long long)mine * C + row]) : inf;
            const double threshold = __dadd_rn(grove_min(g, e), eps[c]);
            alive = grove_ballot(g, ((alive >> g.lane) & 1u) != 0u && e <= threshold);
            kept = (unsigned)__popc(alive);
        } else {
            // Two passes over the list: the best error, then the survivors compacted in order.
            // The first filter reads its candidates from the pool (or the draws) itself.
            const bool source = t == 0;
            double best = inf;
            for (unsigned base = 0; base < m; base += 4u * GROVE_LANES) {
                const unsigned j0 = base + 4u * g.lane;
                unsigned w[4];
                if (source && drawn && j0 < m) grove_block_at(drawer, j0 / 4u, w);
                for (unsigned u = 0; u < 4u; ++u) {
                    const unsigned j = j0 + u;
                    if (j >= m) break;
                    const unsigned i = !source ? list[j] : grove_lex_pool(pool, nv, drawn ? __umulhi(w[u], m0) : j);
                    best = fmin(best, grove_key(errors[(unsigned long long)i * C + row]));
                }
            }
            const double threshold = __dadd_rn(grove_min(g, best), eps[c]);
            kept = 0u;
            for (unsigned base = 0; base < m; base += 4u * GROVE_LANES) {
                const unsigned j0 = base + 4u * g.lane;
                unsigned w[4], id[4], keep[4];
                if (source && drawn && j0 < m) grove_block_at(drawer, j0 / 4u, w);
                for (unsigned u = 0; u < 4u; ++u) {
                    const unsigned j = j0 + u;
                    keep[u] = 0u;
                    if (j < m) {
                        id[u] = !source ? list[j] : grove_lex_pool(pool, nv, drawn ? __umulhi(w[u], m0) : j);
                        keep[u] = grove_key(errors[(unsigned long long)id[u] * C + row]) <= threshold;
                    }
                }
                // Every lane has read its entries before any is overwritten (kept <= base).
                grove_sync(g);
                const unsigned below = g.lane == 0 ? 0u : 0xffffffffu >> (32u - g.lane);
                unsigned at = kept, total = 0u;
                for (unsigned u = 0; u < 4u; ++u) {
                    const unsigned bits = grove_ballot(g, keep[u] != 0u);
                    at += (unsigned)__popc(bits & below);
                    total += (unsigned)__popc(bits);
                }
                for (unsigned u = 0; u < 4u; ++u)
                    if (keep[u]) list[at++] = id[u];
                kept += total;
                grove_sync(g);
            }
            if (kept <= GROVE_LANES) {
                in_registers = true;
                mine = g.lane < kept ? list[g.lane] : 0u;
                alive = kept == 32u ? 0xffffffffu : (1u << kept) - 1u;
            }
        }
        // A case that removed no one may have left clones only: if every candidate is in one
        // group, the cases left keep them all, so only their draws are made.
        bool clones = kept == m && kept > 1;
        if (clones) {
            if (in_registers) {
                const unsigned g0 = group[grove_from(g, mine, (unsigned)__ffs(alive) - 1u)];
                clones = grove_ballot(g, ((alive >> g.lane) & 1u) != 0u && group[mine] != g0) == 0u;
            } else {
                const unsigned g0 = group[list[0]];
                bool differ = false;
                for (unsigned j = g.lane; j < kept; j += GROVE_LANES) differ = differ || group[list[j]] != g0;
                clones = grove_ballot(g, differ) == 0u;
            }
        }
        m = kept;
        if (clones) {
            grove_seek(rng, C);
            break;
        }
    }
    // The pick: the k-th candidate left (k = below(m) where m > 1).
    const unsigned k = m > 1 ? grove_below(rng, m) : 0u;
    if (in_registers) {
        if (g.lane == grove_nth_bit(g, alive, k)) winners[sel] = mine;
    } else if (g.lane == 0 && width > 1) {
        winners[sel] = list[k];
    } else if (g.lane == 0) {
        // One candidate: no case was read.
        unsigned w[4];
        grove_block_at(drawer, 0u, w);
        winners[sel] = grove_lex_pool(pool, nv, drawn ? __umulhi(w[0], m0) : 0u);
    }
}

// select::epsilon_lexicase for the slots slot_offset .. + n_slots, a block per group of p.k
// consecutive slots (the group slot_offset / p.k + blockIdx.x; p.k in 1 ..
// GROVE_LEX_STAGED_MAX), each selection a thread, where the candidates' errors fit in shared
// memory. The block stages its candidates once, the pool in order where it holds at most
// p.k, else the group's p.k draws (select::lexicase_candidates), with their keys ([m × C],
// NaN read as +inf, read row by row) and clone groups; then each thread filters its slots'
// candidates there, the survivors a bit mask of candidate positions, its case order (a lazy
// Fisher-Yates, as in grove_lexicase) in shared memory too. A case that removed no one and
// left clones only (one group) ends the filters, and the stream skips the cases' draws.
// Shared memory: m × C doubles, then m candidates and m groups, then blockDim.x × C case
// indices of 16 bits (C < 65536); lexicase_staged_shape in src/backend/cuda/select.rs.
#define GROVE_LEX_STAGED_MAX 256
#define GROVE_LEX_STAGED_WORDS (GROVE_LEX_STAGED_MAX / 32)
#define GROVE_LEX_STAGED_BOUNDS __launch_bounds__(GROVE_LEX_STAGED_MAX)

extern "C" __global__ void GROVE_LEX_STAGED_BOUNDS
grove_lexicase_staged(GroveSelectParams p, const double* errors, const double* eps, const unsigned* pool, const unsigned* n_valid,
                      const unsigned* group, unsigned* winners) {
    extern __shared__ double grove_lex_stage[];
    const double inf = __longlong_as_double(0x7FF0000000000000ll);
    const unsigned nv = n_valid[0], C = p.n_cases, m0 = nv == 0 ? p.n : nv;
    const bool drawn = m0 > p.k;
    const unsigned width = drawn ? p.k : m0;
    const unsigned q = p.slot_offset / p.k + blockIdx.x;
    const unsigned end = p.slot_offset + p.n_slots;
    const unsigned lo = q * p.k > p.slot_offset ? q * p.k : p.slot_offset, hi = q * p.k + p.k < end ? q * p.k + p.k : end;
    double* keys = grove_lex_stage;
    unsigned* id = (unsigned*)(keys + (size_t)width * C);
    unsigned* grp = id + width;
    unsigned short* ord = (unsigned short*)(grp + width) + (size_t)threadIdx.x * C;
    const GroveStream drawer = grove_stream(p.seed_lo, p.seed_hi, p.generation, q, GROVE_PURPOSE_LEXICASE_POOL);
    for (unsigned j = threadIdx.x; j < width; j += blockDim.x) {
        unsigned w[4];
        if (drawn) grove_block_at(drawer, j / 4u, w);
        const unsigned i = grove_lex_pool(pool, nv, drawn ? __umulhi(w[j % 4u], m0) : j);
        id[j] = i;
        grp[j] = group[i];
    }
    __syncthreads();
    for (unsigned e = threadIdx.x; e < width * C; e += blockDim.x) {
        const unsigned j = e / C, c = e - j * C;
        keys[e] = grove_key(errors[(unsigned long long)id[j] * C + c]);
    }
    __syncthreads();
    for (unsigned slot = lo + threadIdx.x; slot < hi; slot += blockDim.x) {
        GroveStream rng = grove_stream(p.seed_lo, p.seed_hi, p.generation, slot, GROVE_PURPOSE_SELECT);
        unsigned alive[GROVE_LEX_STAGED_WORDS];
#pragma unroll
        for (unsigned w = 0; w < GROVE_LEX_STAGED_WORDS; ++w)
            alive[w] = width >= 32u * (w + 1u) ? 0xffffffffu : width > 32u * w ? (1u << (width - 32u * w)) - 1u : 0u;
        unsigned m = width;
        bool mixed = false;
        if (m > 1)
            for (unsigned c = 0; c < C; ++c) ord[c] = (unsigned short)c;
        for (unsigned t = 0; t < C && m > 1; ++t) {
            const unsigned r = t + grove_below(rng, C - t);
            const unsigned c = ord[r];
            ord[r] = ord[t];
            // The best and the worst key left: where the worst is within the threshold, the
            // case removes no one and the second pass is skipped.
            double best = inf, worst = -inf;
#pragma unroll
            for (unsigned w = 0; w < GROVE_LEX_STAGED_WORDS; ++w)
                for (unsigned b = alive[w]; b != 0u; b &= b - 1u) {
                    const double e = keys[(32u * w + (unsigned)__ffs(b) - 1u) * C + c];
                    best = fmin(best, e);
                    worst = fmax(worst, e);
                }
            const double threshold = __dadd_rn(best, eps[c]);
            unsigned kept = m;
            if (!(worst <= threshold)) {
                kept = 0u;
#pragma unroll
                for (unsigned w = 0; w < GROVE_LEX_STAGED_WORDS; ++w) {
                    unsigned keep = 0u;
                    for (unsigned b = alive[w]; b != 0u; b &= b - 1u) {
                        const unsigned bit = (unsigned)__ffs(b) - 1u;
                        if (keys[(32u * w + bit) * C + c] <= threshold) keep |= 1u << bit;
                    }
                    alive[w] = keep;
                    kept += (unsigned)__popc(keep);
                }
            }
            // No one removed: if every candidate left is in one group, the cases left keep them
            // all. The survivors known to span groups are not looked at again until they change.
            bool clones = kept == m && !mixed;
            unsigned g0 = 0xffffffffu;
#pragma unroll
            for (unsigned w = 0; w < GROVE_LEX_STAGED_WORDS; ++w)
                for (unsigned b = clones ? alive[w] : 0u; b != 0u && clones; b &= b - 1u) {
                    const unsigned g = grp[32u * w + (unsigned)__ffs(b) - 1u];
                    if (g0 == 0xffffffffu) g0 = g;
                    clones = clones && g == g0;
                }
            mixed = kept == m && !clones;
            m = kept;
            if (clones) {
                grove_seek(rng, C);
                break;
            }
        }
        // The pick: the k-th candidate left (k = below(m) where m > 1), by position.
        unsigned k = m > 1 ? grove_below(rng, m) : 0u, at = 0u;
        bool found = false;
#pragma unroll
        for (unsigned w = 0; w < GROVE_LEX_STAGED_WORDS; ++w) {
            const unsigned n = (unsigned)__popc(alive[w]);
            if (!found && k < n) {
                unsigned b = alive[w];
                for (unsigned u = 0; u < k; ++u) b &= b - 1u;
                at = 32u * w + (unsigned)__ffs(b) - 1u;
                found = true;
            } else if (!found) {
                k -= n;
            }
        }
        winners[slot - p.slot_offset] = id[at];
    }
}

// select::elite(fit, k) and islands::worst(fit, k) without ranking every individual, one or
// both at once (mode 0: the best, 1: the worst, 2: both, the best in slot 0 and the worst in
// slot 1 of every array). The order is that of a 96-bit key, the 64-bit total order of the
// fitness key and then the index (both complemented for the worst: worst first, ties to the
// higher index), so keys are distinct. A radix select finds the k-th key, eight bits a pass over
// twelve passes (grove_topk_pass counts the keys that share the digits found so far, and its
// last block to finish reads the histogram); grove_topk_collect gathers the k keys at or below it (in
// any order) and grove_topk_order writes each to its rank among them, counted. Migration
// (src/evolve/device/migrate.rs) chooses who leaves and who is replaced with these, with no
// host copy of the fitness.

// The state of one selection, in device memory.
struct GroveTopk {
    unsigned long long prefix_key;  // digits found so far of the k-th key's fitness part
    unsigned long long mask_key;    // which bits of it are found
    unsigned prefix_idx;            // the same for its index part
    unsigned mask_idx;
    unsigned need;                  // keys still to take among those matching the prefix
    unsigned taken;                 // grove_topk_collect's counter
};

__device__ __forceinline__ unsigned grove_topk_slots(unsigned mode) { return mode == 2 ? 2u : 1u; }
__device__ __forceinline__ unsigned grove_topk_worst(unsigned mode, unsigned q) { return mode == 2 ? q : mode; }

__device__ __forceinline__ unsigned long long grove_topk_key(const double* fit, unsigned i, unsigned worst) {
    const unsigned long long u = (unsigned long long)grove_total_order(grove_key(fit[i])) ^ 0x8000000000000000ull;
    return worst ? ~u : u;
}

__device__ __forceinline__ unsigned grove_topk_idx(unsigned i, unsigned worst) { return worst ? ~i : i; }

// Pass d (0..11): the digit of 8 bits it finds, of the fitness part for d < 8 (most significant
// first) and of the index part after.
__device__ __forceinline__ unsigned grove_topk_digit(unsigned long long u, unsigned v, unsigned d) {
    return d < 8 ? (unsigned)(u >> (56 - 8 * d)) & 255u : (v >> (24 - 8 * (d - 8))) & 255u;
}

__device__ __forceinline__ bool grove_topk_matches(const GroveTopk& s, unsigned long long u, unsigned v) {
    return (u & s.mask_key) == s.prefix_key && (v & s.mask_idx) == s.prefix_idx;
}

// st: one GroveTopk per slot; hist: 256 bins per slot, then the passes' count of blocks done.
extern "C" __global__ void grove_topk_init(unsigned k, unsigned mode, GroveTopk* st, unsigned* hist) {
    const unsigned slots = grove_topk_slots(mode);
    for (unsigned q = threadIdx.x; q < slots; q += blockDim.x) {
        GroveTopk& s = st[q];
        s.prefix_key = 0;
        s.mask_key = 0;
        s.prefix_idx = 0;
        s.mask_idx = 0;
        s.need = k;
        s.taken = 0;
    }
    for (unsigned b = threadIdx.x; b <= 256 * slots; b += blockDim.x) hist[b] = 0;
}

// Slot q's state after pass d, given its histogram's bin b, the keys of the bins below it
// (`below`): b holds the need-th matching key, and the keys of lower bins are taken whole
// (collect finds them by comparison), so need drops by their count.
__device__ void grove_topk_take(unsigned d, GroveTopk& s, unsigned b, unsigned below) {
    s.need -= below;
    if (d < 8) {
        s.prefix_key |= (unsigned long long)b << (56 - 8 * d);
        s.mask_key |= 255ull << (56 - 8 * d);
    } else {
        s.prefix_idx |= b << (24 - 8 * (d - 8));
        s.mask_idx |= 255u << (24 - 8 * (d - 8));
    }
}

// Pass d (0..11), one launch: every block counts the keys that share the digits found so far
// into hist (256 bins per slot), then the last block to finish (hist[256 * slots] counts the
// blocks that have) finds each slot's digit and clears the histogram and the count for the
// next pass. A block reads the state before any block can be the last, so none sees it change.
extern "C" __global__ void grove_topk_pass(unsigned n, unsigned mode, unsigned d, const double* fit, GroveTopk* st, unsigned* hist) {
    __shared__ unsigned local[512];
    __shared__ unsigned scan[512];
    __shared__ unsigned needs[2];
    __shared__ bool last;
    const unsigned slots = grove_topk_slots(mode);
    for (unsigned b = threadIdx.x; b < 256 * slots; b += blockDim.x) local[b] = 0;
    __syncthreads();
    const GroveTopk s0 = st[0];
    const GroveTopk s1 = st[slots - 1];
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const unsigned w0 = grove_topk_worst(mode, 0);
        const unsigned long long u = grove_topk_key(fit, i, w0);
        const unsigned v = grove_topk_idx(i, w0);
        if (grove_topk_matches(s0, u, v)) atomicAdd(&local[grove_topk_digit(u, v, d)], 1u);
        if (slots == 2 && grove_topk_matches(s1, ~u, ~v)) atomicAdd(&local[256 + grove_topk_digit(~u, ~v, d)], 1u);
    }
    __syncthreads();
    for (unsigned b = threadIdx.x; b < 256 * slots; b += blockDim.x)
        if (local[b]) atomicAdd(&hist[b], local[b]);
    // This block's bins are in hist before its arrival is counted.
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(&hist[256 * slots], 1u) == gridDim.x - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    // The whole histogram into shared memory (read through volatile: other blocks added to it
    // by atomics) and cleared for the next pass; then each slot's counts summed up to every bin
    // (a block-wide inclusive scan of its 256 bins), and the slot's digit is the first bin whose
    // sum reaches its need (bin 255 when none of the others does), found by the thread holding it.
    volatile unsigned* all = hist;
    for (unsigned b = threadIdx.x; b < 256 * slots; b += blockDim.x) {
        local[b] = all[b];
        all[b] = 0;
    }
    for (unsigned q = threadIdx.x; q < slots; q += blockDim.x) needs[q] = st[q].need;
    __syncthreads();
    for (unsigned off = 1; off < 256; off <<= 1) {
        for (unsigned b = threadIdx.x; b < 256 * slots; b += blockDim.x) scan[b] = local[b] + ((b & 255u) >= off ? local[b - off] : 0u);
        __syncthreads();
        for (unsigned b = threadIdx.x; b < 256 * slots; b += blockDim.x) local[b] = scan[b];
        __syncthreads();
    }
    for (unsigned b = threadIdx.x; b < 256 * slots; b += blockDim.x) {
        const unsigned q = b >> 8, j = b & 255u, need = needs[q];
        const unsigned below = j ? local[b - 1] : 0u;
        if (below < need && (j == 255u || local[b] >= need)) grove_topk_take(d, st[q], j, below);
    }
    if (threadIdx.x == 0) all[256 * slots] = 0;
}

// After the twelve passes each slot's prefix is its k-th key itself: the k keys at or below it,
// into keys and idx at slot q * k.
extern "C" __global__ void grove_topk_collect(unsigned n, unsigned mode, unsigned k, const double* fit, GroveTopk* st,
                                              unsigned long long* keys, unsigned* idx) {
    const unsigned slots = grove_topk_slots(mode);
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        for (unsigned q = 0; q < slots; ++q) {
            const unsigned w = grove_topk_worst(mode, q);
            const unsigned long long u = grove_topk_key(fit, i, w);
            const unsigned v = grove_topk_idx(i, w);
            const unsigned long long tk = st[q].prefix_key;
            const unsigned ti = st[q].prefix_idx;
            if (u < tk || (u == tk && v <= ti)) {
                const unsigned at = q * k + atomicAdd(&st[q].taken, 1u);
                keys[at] = u;
                idx[at] = i;
            }
        }
    }
}

// Entry j of slot q (thread q * k + j): out[q * k + rank] = idx[q * k + j], rank = how many of
// the slot's k keys are below key j (key, then index): O(k^2) reads, from cache for the few
// hundred rows of a migration.
extern "C" __global__ void grove_topk_order(unsigned k, unsigned mode, const unsigned long long* keys, const unsigned* idx,
                                            unsigned* out) {
    const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned total = k * grove_topk_slots(mode);
    if (t >= total) return;
    const unsigned q = t / k, w = grove_topk_worst(mode, q);
    const unsigned long long* kq = keys + (unsigned long long)q * k;
    const unsigned* iq = idx + (unsigned long long)q * k;
    const unsigned long long mu = keys[t];
    const unsigned mv = grove_topk_idx(idx[t], w);
    unsigned rank = 0;
    for (unsigned j = 0; j < k; ++j) {
        const unsigned long long o = kq[j];
        rank += (o < mu || (o == mu && grove_topk_idx(iq[j], w) < mv)) ? 1u : 0u;
    }
    out[(unsigned long long)q * k + rank] = idx[t];
}

// Row r < n of dst becomes row idx[r] of src, rows of `words` 32-bit words (fitness: 2; used
// codons: 1). One thread per word.
extern "C" __global__ void grove_gather_words(unsigned n, unsigned words, const unsigned* idx, const unsigned* src, unsigned* dst) {
    const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n * words) return;
    const unsigned r = t / words, w = t % words;
    dst[t] = src[(unsigned long long)idx[r] * words + w];
}

// Row idx[r] of dst becomes row r of src, for r < n (the idx entries are distinct).
extern "C" __global__ void grove_scatter_words(unsigned n, unsigned words, const unsigned* idx, const unsigned* src, unsigned* dst) {
    const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n * words) return;
    const unsigned r = t / words, w = t % words;
    dst[(unsigned long long)idx[r] * words + w] = src[t];
}

// ---------------------------------------------------------------------------------------------
// NSGA-II on the device, twin of src/select/pareto.rs: non-dominated ranks of (error, size)
// points, crowding distances within each front, the survivors of parents and children, and the
// crowded-comparison tournament. Every step is a stable sort of the points by a key of up to
// 128 bits (grove_pareto_keys, then an LSD radix sort of four bits a pass: grove_radix_count,
// grove_radix_offsets, grove_radix_scatter), followed by one pass over the sorted order, so the
// results are the CPU's bit for bit: ties go to the lower index as there.
//
// A point's objectives are its fitness key (NaN read as +inf, -0 as +0) and its size; an
// invalid point (non-finite fitness) is (+inf, +inf), as pareto::points gives.

// Threads of a radix tile's block and consecutive items per thread (RADIX_THREADS and
// RADIX_ITEMS in kernels.rs).
#define GROVE_RADIX_THREADS 256
#define GROVE_RADIX_ITEMS 8
#define GROVE_RADIX_TILE (GROVE_RADIX_THREADS * GROVE_RADIX_ITEMS)
#define GROVE_RADIX_BINS 16

// f64 in an unsigned order: a < b (as total_cmp) iff the images compare so.
__device__ __forceinline__ unsigned long long grove_f64_order(double f) {
    return (unsigned long long)grove_total_order(f) ^ 0x8000000000000000ull;
}

// The objectives of point i: its error (-0 as +0) and size, or +inf in both when invalid.
__device__ __forceinline__ bool grove_pareto_valid(const double* fit, unsigned i) { return isfinite(grove_key(fit[i])); }
__device__ __forceinline__ double grove_pareto_error(const double* fit, unsigned i) {
    const double f = grove_key(fit[i]);
    return isfinite(f) ? f + 0.0 : __longlong_as_double(0x7FF0000000000000ll);
}
__device__ __forceinline__ double grove_pareto_size(const double* fit, const unsigned short* len, unsigned i) {
    return grove_pareto_valid(fit, i) ? (double)len[i] : __longlong_as_double(0x7FF0000000000000ll);
}

// The sort keys of the n points, and idx = 0..n (the sort's values). The order is (hi, lo):
// mode 0: (size, error) for the ranks (an invalid point's size reads as max_len + 1);
// mode 1: (rank, error) and mode 2: (rank, size) for the crowding distances;
// mode 3: (rank, crowding distance, largest first) for the survivors.
extern "C" __global__ void grove_pareto_keys(unsigned n, unsigned mode, unsigned max_len, const double* fit,
                                             const unsigned short* len, const unsigned* rank, const double* crowd,
                                             unsigned long long* lo, unsigned long long* hi, unsigned* idx) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const bool valid = grove_pareto_valid(fit, i);
    const unsigned long long error = grove_f64_order(grove_pareto_error(fit, i));
    const unsigned long long size = valid ? (unsigned long long)len[i] : (unsigned long long)max_len + 1ull;
    switch (mode) {
        case 0: lo[i] = error; hi[i] = size; break;
        case 1: lo[i] = error; hi[i] = rank[i]; break;
        case 2: lo[i] = size; hi[i] = rank[i]; break;
        default: lo[i] = ~grove_f64_order(crowd[i]); hi[i] = rank[i]; break;
    }
    idx[i] = i;
}

// Digit d of a key: four bits, the low word's first lo_digits digits then the high word's.
__device__ __forceinline__ unsigned grove_radix_digit(unsigned long long lo, unsigned long long hi, unsigned d, unsigned lo_digits) {
    return d < lo_digits ? (unsigned)(lo >> (4 * d)) & 15u : (unsigned)(hi >> (4 * (d - lo_digits))) & 15u;
}

// counts[digit * n_tiles + tile]: how many keys of the tile have each digit.
extern "C" __global__ void grove_radix_count(unsigned n, unsigned d, unsigned lo_digits, const unsigned long long* lo,
                                             const unsigned long long* hi, unsigned long long* counts) {
    __shared__ unsigned c[GROVE_RADIX_BINS];
    if (threadIdx.x < GROVE_RADIX_BINS) c[threadIdx.x] = 0;
    __syncthreads();
    const unsigned first = blockIdx.x * GROVE_RADIX_TILE + threadIdx.x * GROVE_RADIX_ITEMS;
    for (unsigned j = 0; j < GROVE_RADIX_ITEMS; ++j)
        if (first + j < n) atomicAdd(&c[grove_radix_digit(lo[first + j], hi[first + j], d, lo_digits)], 1u);
    __syncthreads();
    if (threadIdx.x < GROVE_RADIX_BINS) counts[threadIdx.x * gridDim.x + blockIdx.x] = c[threadIdx.x];
}

// counts (GROVE_RADIX_BINS x n_tiles, digit-major) to exclusive offsets, in place. One block of
// GROVE_TILE_THREADS threads (scan.cuh's scan of tiles).
extern "C" __global__ void grove_radix_offsets(unsigned n_entries, unsigned long long* counts) {
    grove_tiles_scan(counts, n_entries);
}

// One stable pass: each key goes to its digit's offset for the tile, plus the keys of the same
// digit before it in the tile (earlier threads, then its own earlier items).
extern "C" __global__ void grove_radix_scatter(unsigned n, unsigned d, unsigned lo_digits, const unsigned long long* lo,
                                               const unsigned long long* hi, const unsigned* idx, const unsigned long long* offsets,
                                               unsigned long long* lo_out, unsigned long long* hi_out, unsigned* idx_out) {
    __shared__ unsigned before[GROVE_RADIX_BINS * GROVE_RADIX_THREADS];
    const unsigned t = threadIdx.x;
    const unsigned first = blockIdx.x * GROVE_RADIX_TILE + t * GROVE_RADIX_ITEMS;
    unsigned mine[GROVE_RADIX_BINS];
    for (unsigned b = 0; b < GROVE_RADIX_BINS; ++b) mine[b] = 0;
    for (unsigned j = 0; j < GROVE_RADIX_ITEMS; ++j)
        if (first + j < n) ++mine[grove_radix_digit(lo[first + j], hi[first + j], d, lo_digits)];
    for (unsigned b = 0; b < GROVE_RADIX_BINS; ++b) before[b * GROVE_RADIX_THREADS + t] = mine[b];
    __syncthreads();
    // An inclusive scan across the threads, every digit's row at once (Hillis-Steele).
    for (unsigned s = 1; s < GROVE_RADIX_THREADS; s *= 2) {
        unsigned add[GROVE_RADIX_BINS];
        for (unsigned b = 0; b < GROVE_RADIX_BINS; ++b) add[b] = t >= s ? before[b * GROVE_RADIX_THREADS + t - s] : 0u;
        __syncthreads();
        for (unsigned b = 0; b < GROVE_RADIX_BINS; ++b) before[b * GROVE_RADIX_THREADS + t] += add[b];
        __syncthreads();
    }
    unsigned at[GROVE_RADIX_BINS];
    for (unsigned b = 0; b < GROVE_RADIX_BINS; ++b)
        at[b] = (unsigned)offsets[b * gridDim.x + blockIdx.x] + before[b * GROVE_RADIX_THREADS + t] - mine[b];
    for (unsigned j = 0; j < GROVE_RADIX_ITEMS; ++j) {
        const unsigned k = first + j;
        if (k >= n) break;
        const unsigned b = grove_radix_digit(lo[k], hi[k], d, lo_digits);
        const unsigned to = at[b]++;
        lo_out[to] = lo[k];
        hi_out[to] = hi[k];
        idx_out[to] = idx[k];
    }
}

// The first position at or after `from` (below n) whose hi exceeds v (hi sorted ascending).
__device__ __forceinline__ unsigned grove_upper_bound(const unsigned long long* hi, unsigned from, unsigned n, unsigned long long v) {
    unsigned a = from, b = n;
    while (a < b) {
        const unsigned m = a + (b - a) / 2;
        if (hi[m] <= v) a = m + 1; else b = m;
    }
    return a;
}

// The first position at or after `from` whose hi is at least v.
__device__ __forceinline__ unsigned grove_lower_bound(const unsigned long long* hi, unsigned from, unsigned n, unsigned long long v) {
    unsigned a = from, b = n;
    while (a < b) {
        const unsigned m = a + (b - a) / 2;
        if (hi[m] < v) a = m + 1; else b = m;
    }
    return a;
}

struct GroveMax { __device__ long long operator()(long long a, long long b) const { return a > b ? a : b; } };

// Inclusive scan of v over the block (every thread calls it; blockDim.x a multiple of 32, at
// most 1024): within each warp by shuffles, then the warps' totals in order. `total` = the
// block's. warp holds 32 entries of shared memory.
template <class T, class Op>
__device__ T grove_block_inclusive(T v, Op op, T* warp, T& total) {
    const unsigned lane = threadIdx.x & 31u, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    for (unsigned s = 1; s < 32; s *= 2) {
        const T y = __shfl_up_sync(0xffffffffu, v, s);
        if (lane >= s) v = op(y, v);
    }
    if (lane == 31) warp[w] = v;
    __syncthreads();
    if (threadIdx.x == 0)
        for (unsigned k = 1; k < nw; ++k) warp[k] = op(warp[k - 1], warp[k]);
    __syncthreads();
    if (w > 0) v = op(warp[w - 1], v);
    total = warp[nw - 1];
    __syncthreads();
    return v;
}

// pareto::ranks over the points sorted by (size, error, index) (lo: the error's order, hi: the
// size, idx: the point): sizes are taken in increasing order; front_min[r] holds the smallest
// error of front r among the smaller sizes (non-decreasing in r), so a point's dominators of
// smaller size reach the fronts below b = #{r : front_min[r] <= error}. Within a size every
// point goes behind the ones before it (a lower error dominates; an equal point ranks behind its
// copy of lower index), so the point at position j of its size is on front
// max over j' <= j of b(j') + (j - j'), a prefix maximum. These fronts are distinct and above
// every front whose minimum their error reaches, so each point then sets its front's minimum.
// One block; rank[idx[k]] = the front; at[k] = the same by position (scratch, n entries),
// front_min n entries.
extern "C" __global__ void grove_pareto_ranks(unsigned n, const unsigned long long* lo, const unsigned long long* hi,
                                              const unsigned* idx, unsigned long long* front_min, unsigned* at, unsigned* rank) {
    __shared__ long long warp[32];
    unsigned fronts = 0;  // every thread keeps the same count
    for (unsigned pos = 0; pos < n;) {
        const unsigned end = grove_upper_bound(hi, pos, n, hi[pos]);
        long long best = -(1ll << 62);  // the prefix maximum of the chunks before
        for (unsigned base = pos; base < end; base += blockDim.x) {
            const unsigned k = base + threadIdx.x;
            const bool live = k < end;
            const long long j = (long long)k - (long long)pos;
            long long v = -(1ll << 62);
            if (live) {
                const unsigned long long e = lo[k];
                unsigned a = 0, z = fronts;
                while (a < z) {
                    const unsigned m = a + (z - a) / 2;
                    if (front_min[m] <= e) a = m + 1; else z = m;
                }
                v = (long long)a - j;
            }
            long long chunk_best;
            long long m = grove_block_inclusive(v, GroveMax(), warp, chunk_best);
            m = m > best ? m : best;
            if (live) {
                const unsigned r = (unsigned)(j + m);
                at[k] = r;
                rank[idx[k]] = r;
            }
            best = chunk_best > best ? chunk_best : best;
        }
        __syncthreads();
        for (unsigned k = pos + threadIdx.x; k < end; k += blockDim.x) front_min[at[k]] = lo[k];
        const unsigned top = at[end - 1] + 1;
        fronts = top > fronts ? top : fronts;
        __syncthreads();
        pos = end;
    }
}

// pareto::crowding, objective m (0: error, 1: size) over the points sorted by (rank, objective,
// index) (hi: the rank): the front's two ends are infinite; another point gets the gap between
// its neighbours over the front's range when that range is positive and finite. Objective 0
// writes crowd; objective 1 adds to it (an end of either stays infinite).
extern "C" __global__ void grove_pareto_crowding(unsigned n, unsigned m, const unsigned long long* hi, const unsigned* idx,
                                                 const double* fit, const unsigned short* len, double* crowd) {
    const unsigned k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= n) return;
    const unsigned i = idx[k];
    const unsigned first = grove_lower_bound(hi, 0, k + 1, hi[k]);
    const unsigned last = grove_upper_bound(hi, k, n, hi[k]) - 1u;
    const double inf = __longlong_as_double(0x7FF0000000000000ll);
    if (k == first || k == last) {
        crowd[i] = inf;
        return;
    }
    const double lo_v = m == 0 ? grove_pareto_error(fit, idx[first]) : grove_pareto_size(fit, len, idx[first]);
    const double hi_v = m == 0 ? grove_pareto_error(fit, idx[last]) : grove_pareto_size(fit, len, idx[last]);
    const double range = hi_v - lo_v;
    const bool spread = range > 0.0 && isfinite(range);
    if (m == 0) {
        crowd[i] = spread ? (grove_pareto_error(fit, idx[k + 1]) - grove_pareto_error(fit, idx[k - 1])) / range + 0.0 : 0.0;
    } else if (spread) {
        crowd[i] = crowd[i] + (grove_pareto_size(fit, len, idx[k + 1]) - grove_pareto_size(fit, len, idx[k - 1])) / range;
    }
}

// pareto::crowded_better: a lower rank, or the same rank and a larger crowding distance
// (total_cmp), ties to the lower index.
struct GroveCrowdedBetter {
    const unsigned* rank;
    const double* crowd;
    __device__ bool operator()(unsigned a, unsigned b) const {
        if (rank[a] != rank[b]) return rank[a] < rank[b];
        const long long da = grove_total_order(crowd[a]), db = grove_total_order(crowd[b]);
        return da > db || (da == db && a < b);
    }
};

// pareto::Ranking::tournament for slot slot_offset + s: k contestants drawn as grove_tournament
// draws them (with replacement, from the pool), the best by grove_crowded_better wins.
extern "C" __global__ void grove_pareto_tournament(GroveSelectParams p, const unsigned* rank, const double* crowd,
                                                   const unsigned* pool, const unsigned* n_valid, unsigned* winners) {
    const unsigned s = blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= p.n_slots) return;
    const unsigned nv = n_valid[0];
    const bool all = nv == 0;
    const unsigned n = all ? p.n : nv;
    GroveStream rng = grove_stream(p.seed_lo, p.seed_hi, p.generation, p.slot_offset + s, GROVE_PURPOSE_SELECT);
    winners[s] = grove_draw_tournament(rng, p.k, pool, all, n, GroveCrowdedBetter{rank, crowd});
}
