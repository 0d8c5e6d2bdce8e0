// generation.cu: the rest of a generation on the device, between evaluation (eval.cu),
// selection (select.cu) and variation (vary.cu), so that a run never copies its population to
// the host. The host side is src/backend/cuda/generation.rs; its loop is src/evolve/device/mod.rs.
//
// - grove_stack_class / grove_partition: which evaluation kernel takes each tree (the fast ones
//   with GROVE_STACK slots, or the deep fallback), in the order pack() (src/backend/cuda/pack.rs)
//   lays out tree_ids: fast trees first, then deep ones, each in index order.
// - grove_regression_fitness: the regression task's fitness from the fused sums, twin of
//   task::regression::error plus parsimony (bit for bit: f64 arithmetic, --fmad=false).
// - grove_argmin_blocks / grove_argmin_final: the best individual by select::elite's order
//   (total order of the key, ties to the lower index), skipping those already chosen, with the
//   generation's statistics (valid count, sums of fitness and length) on the first pass. Called
//   once per elite; results go to the per-generation mailbox the host reads.
//
// Determinism: no floating-point atomics; every sum has a fixed shape.

#define GROVE_STACK 32           // eval.cu's fast kernels' stack (kernels::STACK, checked by a test)
#define GROVE_DEEP_STACK 512     // eval.cu's deep kernels' stack (kernels::DEEP_STACK, likewise)
#define GROVE_SCAN_THREADS 1024  // threads of grove_argmin_final's one block (a power of two)
#define GROVE_REDUCE_THREADS 256 // threads of the argmin blocks (a power of two)
#define GROVE_MAX_ELITE 64       // most individuals grove_argmin_* may skip

#include "grove_common.h"
#include "sums.cuh"
#include "order.cuh"
#include "scan.cuh"

// Mirrors GenParams in src/backend/cuda/kernels.rs.
struct GroveGenParams {
    unsigned n;          // P: individuals
    unsigned max_len;    // L: row stride of the population
    unsigned metric;     // 0 MSE, 1 RMSE, 2 MAE, 3 R2 (task::regression::Metric)
    unsigned scaled;     // 1: linear scaling
    double parsimony;    // added per node
    unsigned n_blocks;   // blocks of grove_argmin_blocks
    unsigned n_chosen;   // individuals already chosen (skipped); this pass writes chosen[n_chosen]
};
GROVE_CHECK_LAYOUT(GroveGenParams);

// Mirrors GenStats: what the host reads after each generation (mailbox words 0 .. 7).
struct GroveGenStats {
    double best;       // fitness of the best individual (by the elite order; may be invalid)
    double sum;        // sum of the valid individuals' fitness
    double sum_len;    // sum of the valid individuals' lengths
    unsigned best_idx; // the best individual
    unsigned n_valid;  // individuals with a finite key and a non-empty tree
};
GROVE_CHECK_LAYOUT(GroveGenStats);

// One block's candidate and partial statistics (Argmin in kernels.rs; device scratch only).
struct GroveArgmin {
    long long key;     // total order of the best key (grove_total_order)
    unsigned idx;      // its index (0xFFFFFFFF: none)
    unsigned n_valid;
    double sum;
    double sum_len;
};
GROVE_CHECK_LAYOUT(GroveArgmin);

// (key, idx) lexicographic: a before b.
__device__ __forceinline__ bool grove_before(long long ka, unsigned ia, long long kb, unsigned ib) {
    return ka < kb || (ka == kb && ia < ib);
}

// ---------------------------------------------------------------------------------------------
// Evaluation order.

// class[t]: 0 when tree t takes the fast kernels (empty, or its stack need is at most
// GROVE_STACK), 1 for the deep ones (at most GROVE_DEEP_STACK), 2 when neither can take it or
// its nodes do not form one tree (which the variation kernels never make). As check_nodes.
extern "C" __global__ void grove_stack_class(GroveGenParams p, const unsigned char* ops, const unsigned short* lens,
                                             unsigned* cls) {
    const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= p.n) return;
    const unsigned n = lens[t];
    if (n == 0) {
        cls[t] = 0;
        return;
    }
    if (n > p.max_len) {
        cls[t] = 2;
        return;
    }
    const unsigned char* op = ops + (size_t)t * p.max_len;
    unsigned h = 0, need = 0;
    for (unsigned i = n; i-- > 0;) {
        const unsigned k = grove_arity(op[i]);
        if (!grove_is_op(op[i]) || h < k) {
            cls[t] = 2;
            return;
        }
        h = h - k + 1;
        need = need > h ? need : h;
    }
    cls[t] = h != 1 ? 2u : need <= GROVE_STACK ? 0u : need <= GROVE_DEEP_STACK ? 1u : 2u;
}

// ids = the fast trees' indices in order, then the deep ones'; counts[0] fast, counts[1] deep,
// counts[2] bad (class 2), counts[3] the first bad tree (or 0xFFFFFFFF). Three launches over
// tiles of GROVE_TILE trees (scan.cuh): grove_partition_count (a block per tile: fast and deep
// counts packed, and the tile's first bad tree), grove_partition_scan (one block: offsets and
// counts) and grove_partition (a block per tile: the ids).

// Packed counts of class c: fast in the high half, deep in the low half.
__device__ __forceinline__ unsigned long long grove_class_count(unsigned c) {
    return c == 0 ? 1ull << 32 : c == 1 ? 1ull : 0ull;
}

extern "C" __global__ void grove_partition_count(GroveGenParams p, const unsigned* cls, unsigned long long* tiles,
                                                 unsigned* tile_bad) {
    __shared__ unsigned first_bad;
    if (threadIdx.x == 0) first_bad = 0xFFFFFFFFu;
    const unsigned lo = grove_tile_first();
    unsigned long long c = 0;
    unsigned bad = 0xFFFFFFFFu;
    for (unsigned j = 0; j < GROVE_TILE_ITEMS; ++j) {
        if (lo + j >= p.n) break;
        const unsigned k = cls[lo + j];
        c += grove_class_count(k);
        if (k > 1 && bad == 0xFFFFFFFFu) bad = lo + j;
    }
    unsigned long long total;
    grove_block_scan(c, total);  // its barriers also order first_bad's reset before the minimum
    if (bad != 0xFFFFFFFFu) atomicMin(&first_bad, bad);
    __syncthreads();
    if (threadIdx.x == 0) {
        tiles[blockIdx.x] = total;
        tile_bad[blockIdx.x] = first_bad;
    }
}

// One block of GROVE_TILE_THREADS threads.
extern "C" __global__ void grove_partition_scan(GroveGenParams p, unsigned long long* tiles, const unsigned* tile_bad,
                                                unsigned* counts) {
    __shared__ unsigned first_bad;
    if (threadIdx.x == 0) first_bad = 0xFFFFFFFFu;
    const unsigned n_tiles = (p.n + GROVE_TILE - 1) / GROVE_TILE;
    const unsigned long long total = grove_tiles_scan(tiles, n_tiles);  // barriers order the reset
    unsigned bad = 0xFFFFFFFFu;
    for (unsigned i = threadIdx.x; i < n_tiles; i += GROVE_TILE_THREADS) bad = tile_bad[i] < bad ? tile_bad[i] : bad;
    if (bad != 0xFFFFFFFFu) atomicMin(&first_bad, bad);
    __syncthreads();
    if (threadIdx.x == 0) {
        const unsigned n_fast = (unsigned)(total >> 32), n_deep = (unsigned)total;
        counts[0] = n_fast;
        counts[1] = n_deep;
        counts[2] = p.n - n_fast - n_deep;
        counts[3] = first_bad;
    }
}

extern "C" __global__ void grove_partition(GroveGenParams p, const unsigned* cls, const unsigned long long* tiles,
                                           const unsigned* counts, unsigned* ids) {
    const unsigned lo = grove_tile_first();
    unsigned k[GROVE_TILE_ITEMS];
    unsigned long long c = 0;
    for (unsigned j = 0; j < GROVE_TILE_ITEMS; ++j) {
        k[j] = lo + j < p.n ? cls[lo + j] : 2u;
        c += grove_class_count(k[j]);
    }
    unsigned long long total;
    const unsigned long long at = tiles[blockIdx.x] + grove_block_scan(c, total);
    unsigned at_fast = (unsigned)(at >> 32), at_deep = counts[0] + (unsigned)at;
    for (unsigned j = 0; j < GROVE_TILE_ITEMS; ++j) {
        if (k[j] == 0) ids[at_fast++] = lo + j;
        else if (k[j] == 1) ids[at_deep++] = lo + j;
    }
}

// ---------------------------------------------------------------------------------------------
// Fitness: task::regression::error (RegressionSums' methods in src/program/fitness.rs) plus
// parsimony per node; +inf for an empty tree.

// GroveCentred, grove_centred and grove_scale (RegressionSums' centred sums and linear scaling)
// are in sums.cuh, which eval.cu shares.

// (scaled SSE, syy): RegressionSums::scaled_sse.
__device__ __forceinline__ void grove_scaled_sse(const GroveRegSums& s, double& sse, double& syy) {
    const GroveCentred c = grove_centred(s);
    const double explained = c.sff == 0.0 ? 0.0 : c.sfy * c.sfy / c.sff;
    sse = fmax(c.syy - explained, 0.0);
    syy = c.syy;
}

__device__ double grove_error(const GroveRegSums& s, unsigned metric, bool scaled) {
    const double inf = __longlong_as_double(0x7FF0000000000000ll);
    if (s.bad != 0 || s.n == 0) return inf;
    const double n = (double)s.n;
    double e;
    if (metric == 2) {
        e = s.sae / n;
    } else if (metric == 3) {
        if (scaled) {
            double sse, syy;
            grove_scaled_sse(s, sse, syy);
            const double r2 = syy == 0.0 ? 1.0 : fmin(fmax(1.0 - sse / syy, 0.0), 1.0);
            e = 1.0 - r2;
        } else {
            const double syy = grove_centred(s).syy;
            const double r2 = syy == 0.0 ? (s.sse == 0.0 ? 1.0 : 0.0) : 1.0 - s.sse / syy;
            e = 1.0 - r2;
        }
    } else {
        double mse;
        if (scaled) {
            double sse, syy;
            grove_scaled_sse(s, sse, syy);
            mse = sse / n;
        } else {
            mse = s.sse / n;
        }
        e = metric == 1 ? sqrt(mse) : mse;
    }
    return isfinite(e) ? e : inf;
}

extern "C" __global__ void grove_regression_fitness(GroveGenParams p, const GroveRegSums* sums, const unsigned short* lens,
                                                    double* fit) {
    const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= p.n) return;
    const unsigned len = lens[t];
    if (len == 0) {
        fit[t] = __longlong_as_double(0x7FF0000000000000ll);
        return;
    }
    fit[t] = grove_error(sums[t], p.metric, p.scaled != 0) + p.parsimony * (double)len;
}

// Lexicase on regression's rows: the generation's case rows gathered as a data set of their own
// (x is [F][N], xc [F][k]), then each tree's absolute error at each of them under the readout its
// fitness gives it (task::regression's Regression::case_errors).
extern "C" __global__ void grove_gather_rows(unsigned n_rows, unsigned n_features, unsigned k, const float* x, const float* y,
                                             const unsigned* rows, float* xc, float* yc) {
    const unsigned j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= k) return;
    const unsigned r = rows[j];
    for (unsigned f = 0; f < n_features; ++f) xc[(size_t)f * k + j] = x[(size_t)f * n_rows + r];
    yc[j] = y[r];
}

// errors[t * k + j] = |a·f + b − y[rows[j]]| in f64, f tree t's value at case j: pred[t *
// stride + rows[j]] where by_row (the evaluation kept every row's value), else pred[t * stride +
// j] (the case rows predicted on their own); (a, b) tree t's linear scaling from its sums
// (RegressionSums::scale) where p.scaled, else (1, 0); +inf for an empty tree, invalid sums
// under scaling, or an error that is not finite.
extern "C" __global__ void grove_case_errors(GroveGenParams p, unsigned k, unsigned stride, unsigned by_row, const unsigned* rows,
                                             const float* pred, const float* y, const GroveRegSums* sums,
                                             const unsigned short* lens, double* errors) {
    const unsigned long long at = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (at >= (unsigned long long)p.n * k) return;
    const unsigned t = (unsigned)(at / k), j = (unsigned)(at % k);
    const double inf = __longlong_as_double(0x7FF0000000000000ll);
    if (lens[t] == 0) {
        errors[at] = inf;
        return;
    }
    double a = 1.0, b = 0.0;
    if (p.scaled) {
        const GroveRegSums s = sums[t];
        if (s.bad != 0 || s.n == 0) {
            errors[at] = inf;
            return;
        }
        grove_scale(s, a, b);
    }
    const unsigned r = rows[j];
    const float f = pred[(unsigned long long)t * stride + (by_row ? r : j)];
    const double e = fabs(a * (double)f + b - (double)y[r]);
    errors[at] = isfinite(e) ? e : inf;
}

// Rows split over GPUs (--shard-rows): sums[t] takes another shard's sums of tree t, field by
// field, as RegressionSums::merge adds a later chunk (shards are added in order, so the bits are
// those of the host's merge).
extern "C" __global__ void grove_add_regression_sums(unsigned n, const GroveRegSums* other, GroveRegSums* sums) {
    const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    GroveRegSums s = sums[t];
    const GroveRegSums o = other[t];
    s.sse += o.sse;
    s.sae += o.sae;
    s.sum_f += o.sum_f;
    s.sum_ff += o.sum_ff;
    s.sum_fy += o.sum_fy;
    s.sum_y += o.sum_y;
    s.sum_yy += o.sum_yy;
    s.n += o.n;
    s.bad += o.bad;
    sums[t] = s;
}

// ---------------------------------------------------------------------------------------------
// Fitness: task::classify::fitness_of plus parsimony per node; +inf for an empty tree.
// metric: 0 accuracy, 1 balanced accuracy, 2 cross-entropy, 3 weighted F1, 4 balanced accuracy
// with the cross-entropy (program::fitness::balanced_ce_of). correct: [P][2 K],
// each tree's correct points per true class, then its points predicted per class.

extern "C" __global__ void grove_classify_fitness(GroveGenParams p, unsigned n_classes, const GroveClassPartial* sums,
                                                  const unsigned* correct, const unsigned long long* counts,
                                                  const unsigned short* lens, double* fit) {
    const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= p.n) return;
    const double inf = __longlong_as_double(0x7FF0000000000000ll);
    const unsigned len = lens[t];
    const GroveClassPartial s = sums[t];
    if (len == 0 || s.bad > 0 || s.n == 0) {
        fit[t] = inf;
        return;
    }
    const unsigned* c = correct + (size_t)t * 2 * n_classes;
    double f;
    if (p.metric == 0) {
        unsigned long long total = 0;
        for (unsigned k = 0; k < n_classes; ++k) total += c[k];
        f = 1.0 - (double)total / (double)s.n;
    } else if (p.metric == 1 || p.metric == 4) {
        double sum = 0.0;
        unsigned used = 0;
        for (unsigned k = 0; k < n_classes; ++k) {
            if (counts[k] > 0) {
                sum += (double)c[k] / (double)counts[k];
                ++used;
            }
        }
        const double balanced = used == 0 ? 0.0 : sum / (double)used;
        if (p.metric == 1) {
            f = 1.0 - balanced;
        } else {
            // program::fitness::balanced_ce_of(balanced, mean cross-entropy).
            const double ce = s.ce / (double)s.n;
            f = (1.0 - balanced) + ce / (1.0 + ce);
        }
    } else if (p.metric == 3) {
        // program::fitness::weighted_f1_of: sum_c n_c * 2 TP_c / (n_c + predicted_c), over n.
        const unsigned* pred = c + n_classes;
        unsigned long long total = 0;
        for (unsigned k = 0; k < n_classes; ++k) total += counts[k];
        double sum = 0.0;
        for (unsigned k = 0; k < n_classes; ++k) {
            const unsigned long long d = counts[k] + pred[k];
            if (counts[k] > 0 && d > 0) sum += (double)counts[k] * (2.0 * (double)c[k] / (double)d);
        }
        f = 1.0 - (total == 0 ? 0.0 : sum / (double)total);
    } else {
        f = s.ce / (double)s.n;
    }
    fit[t] = (isfinite(f) ? f : inf) + p.parsimony * (double)len;
}

// ---------------------------------------------------------------------------------------------
// The best individual not yet chosen, and (first pass) the generation's statistics: stats()
// and select::elite in src/evolve/mod.rs and src/select.rs. Block b takes individuals
// b * GROVE_REDUCE_THREADS * per .. (a fixed split), each thread a contiguous run; the block
// combines its threads in a fixed tree; grove_argmin_final combines the blocks in order.

__device__ __forceinline__ void grove_combine(GroveArgmin& a, const GroveArgmin& b) {
    if (b.idx != 0xFFFFFFFFu && (a.idx == 0xFFFFFFFFu || grove_before(b.key, b.idx, a.key, a.idx))) {
        a.key = b.key;
        a.idx = b.idx;
    }
    a.n_valid += b.n_valid;
    a.sum += b.sum;
    a.sum_len += b.sum_len;
}

extern "C" __global__ void grove_argmin_blocks(GroveGenParams p, const double* fit, const unsigned short* lens,
                                               const unsigned* chosen, GroveArgmin* partials) {
    __shared__ GroveArgmin red[GROVE_REDUCE_THREADS];
    __shared__ unsigned skip[GROVE_MAX_ELITE];
    const unsigned t = threadIdx.x;
    const unsigned n_skip = p.n_chosen < GROVE_MAX_ELITE ? p.n_chosen : GROVE_MAX_ELITE;
    for (unsigned i = t; i < n_skip; i += blockDim.x) skip[i] = chosen[i];
    __syncthreads();
    const unsigned long long per_block = ((unsigned long long)p.n + p.n_blocks - 1) / p.n_blocks;
    const unsigned long long b0 = per_block * blockIdx.x;
    const unsigned long long b1 = b0 + per_block < p.n ? b0 + per_block : p.n;
    const unsigned long long per = (per_block + GROVE_REDUCE_THREADS - 1) / GROVE_REDUCE_THREADS;
    const unsigned long long lo0 = b0 + per * t;
    const unsigned long long lo = lo0 < b1 ? lo0 : b1, hi = lo + per < b1 ? lo + per : b1;
    GroveArgmin m = {0, 0xFFFFFFFFu, 0, 0.0, 0.0};
    for (unsigned long long j = lo; j < hi; ++j) {
        const unsigned i = (unsigned)j;
        bool skipped = false;
        for (unsigned c = 0; c < n_skip; ++c) skipped |= skip[c] == i;
        const double k = grove_key(fit[i]);
        if (!skipped) {
            const long long o = grove_total_order(k);
            if (m.idx == 0xFFFFFFFFu || grove_before(o, i, m.key, m.idx)) {
                m.key = o;
                m.idx = i;
            }
        }
        if (p.n_chosen == 0 && isfinite(k) && lens[i] > 0) {
            m.n_valid += 1;
            m.sum += k;
            m.sum_len += (double)lens[i];
        }
    }
    red[t] = m;
    __syncthreads();
    for (unsigned d = GROVE_REDUCE_THREADS / 2; d > 0; d /= 2) {
        if (t < d) grove_combine(red[t], red[t + d]);
        __syncthreads();
    }
    if (t == 0) partials[blockIdx.x] = red[0];
}

// One block of GROVE_SCAN_THREADS threads: combines the n_blocks (at most GROVE_SCAN_THREADS)
// partials in a fixed tree; writes chosen[n_chosen] and, on the first pass, the statistics.
extern "C" __global__ void grove_argmin_final(GroveGenParams p, const GroveArgmin* partials, const double* fit,
                                              unsigned* chosen, GroveGenStats* stats) {
    __shared__ GroveArgmin red[GROVE_SCAN_THREADS];
    const unsigned t = threadIdx.x;
    const GroveArgmin none = {0, 0xFFFFFFFFu, 0, 0.0, 0.0};
    red[t] = t < p.n_blocks ? partials[t] : none;
    __syncthreads();
    for (unsigned d = GROVE_SCAN_THREADS / 2; d > 0; d /= 2) {
        if (t < d) grove_combine(red[t], red[t + d]);
        __syncthreads();
    }
    if (t != 0) return;
    const GroveArgmin m = red[0];
    const unsigned idx = m.idx == 0xFFFFFFFFu ? 0u : m.idx;
    chosen[p.n_chosen] = idx;
    if (p.n_chosen == 0) {
        stats->best = grove_key(fit[idx]);
        stats->sum = m.sum;
        stats->sum_len = m.sum_len;
        stats->best_idx = idx;
        stats->n_valid = m.n_valid;
    }
}

// ---------------------------------------------------------------------------------------------
// Per size n (1 .. L): the best valid fitness of the generation (as an ordered integer: the
// total order of the key) and the lowest index reaching it, and how many valid individuals
// have n nodes: the hall of fame's and the median size's view of a generation (evolve/hof.rs,
// task/run.rs) without copying the population. Three launches: reset, keys, indices.

// f64 total order as an unsigned integer (ascending).
__device__ __forceinline__ unsigned long long grove_ordered_u64(double f) {
    const unsigned long long b = (unsigned long long)__double_as_longlong(f);
    return (b >> 63) ? ~b : (b | 0x8000000000000000ull);
}

extern "C" __global__ void grove_sizes_reset(GroveGenParams p, unsigned long long* best_key, unsigned* best_idx, unsigned* hist) {
    const unsigned n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n > p.max_len) return;
    best_key[n] = 0xFFFFFFFFFFFFFFFFull;
    best_idx[n] = 0xFFFFFFFFu;
    hist[n] = 0;
}

extern "C" __global__ void grove_sizes_keys(GroveGenParams p, const double* fit, const unsigned short* lens,
                                            unsigned long long* best_key, unsigned* hist) {
    const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= p.n) return;
    const unsigned len = lens[t];
    const double k = grove_key(fit[t]);
    if (len == 0 || len > p.max_len || !isfinite(k)) return;
    atomicMin(&best_key[len], grove_ordered_u64(k));
    atomicAdd(&hist[len], 1u);
}

extern "C" __global__ void grove_sizes_index(GroveGenParams p, const double* fit, const unsigned short* lens,
                                             const unsigned long long* best_key, unsigned* best_idx) {
    const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= p.n) return;
    const unsigned len = lens[t];
    const double k = grove_key(fit[t]);
    if (len == 0 || len > p.max_len || !isfinite(k)) return;
    if (grove_ordered_u64(k) == best_key[len]) atomicMin(&best_idx[len], t);
}

// ---------------------------------------------------------------------------------------------
// Control (the device loop's control task; host side src/backend/cuda/control.rs).

// Mirrors ControlClassParams in src/backend/cuda/kernels.rs.
struct GroveControlClassParams {
    unsigned n;        // P
    unsigned max_len;  // L
    unsigned n_vars;   // observation size: variable indices below it
    unsigned n_slots;  // actuators: output slots 1..=n_slots
    unsigned stack;    // the roll-out kernel's interpreter stack (control::CONTROL_STACK)
    unsigned pad;
};
GROVE_CHECK_LAYOUT(GroveControlClassParams);

// skip[t], as control::skip_mask: 0 the roll-out kernel plays tree t; 1 it cannot run (empty,
// a bad opcode, a variable index that is not a whole number below n_vars, a slot past n_slots,
// nodes that are not one tree: invalid); 2 its stack need exceeds p.stack (the CPU plays it).
// Trees of class 2 are counted into *n_deep (integer atomics: order-free).
extern "C" __global__ void grove_control_skip(GroveControlClassParams p, const unsigned char* ops, const float* values,
                                              const unsigned char* outs, const unsigned short* lens, unsigned char* skip,
                                              unsigned* n_deep) {
    const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= p.n) return;
    const unsigned n = lens[t];
    unsigned char s = 0;
    if (n == 0 || n > p.max_len) {
        s = 1;
    } else {
        const unsigned long long row = (unsigned long long)t * p.max_len;
        unsigned h = 0, need = 0;
        for (unsigned i = n; i-- > 0;) {
            const unsigned code = ops[row + i];
            const unsigned k = grove_arity(code);
            bool bad = !grove_is_op(code) || outs[row + i] > p.n_slots || h < k;
            if (code == GROVE_OP_VAR) {
                // check_nodes: v as u32 as f32 == v and (v as u32) < n_vars, with Rust's
                // saturating cast (NaN to 0, negatives to 0, large to u32::MAX).
                const float v = values[row + i];
                const unsigned u = v != v ? 0u : v <= 0.0f ? 0u : v >= 4294967296.0f ? 0xFFFFFFFFu : (unsigned)v;
                bad = bad || !((float)u == v && u < p.n_vars);
            }
            if (bad) {
                s = 1;
                break;
            }
            h = h - k + 1;
            need = need > h ? need : h;
        }
        if (s == 0) s = h != 1 ? 1 : need > p.stack ? 2 : 0;
    }
    skip[t] = s;
    if (s == 2) atomicAdd(n_deep, 1u);
}

// The control task's fitness of the mean returns, twin of task::control's: +inf for an empty
// row or a non-finite mean, else -mean + parsimony * len (f64, nothing fused). Each individual's
// episode lengths are added to *steps (integer atomics).
extern "C" __global__ void grove_control_fitness(GroveGenParams p, unsigned episodes, const double* means,
                                                 const unsigned* lengths, const unsigned short* lens, double* fit,
                                                 unsigned long long* steps) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= p.n) return;
    const double r = means[i];
    const unsigned len = lens[i];
    const bool finite = r == r && r != __longlong_as_double(0x7ff0000000000000ll) && r != __longlong_as_double(0xfff0000000000000ll);
    fit[i] = (len == 0 || !finite) ? __longlong_as_double(0x7ff0000000000000ll) : __dadd_rn(-r, __dmul_rn(p.parsimony, (double)len));
    unsigned long long s = 0;
    for (unsigned k = 0; k < episodes; ++k) s += lengths[(unsigned long long)i * episodes + k];
    if (s > 0) atomicAdd(steps, s);
}
