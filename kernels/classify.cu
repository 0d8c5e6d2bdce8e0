// classify.cu: fused classification fitness of a population of multi-output trees, on the GPU.
//
// Twin of the CPU reference src/backend/cpu/classify.rs (evaluate_classification); the Rust
// structs are in src/backend/cuda/kernels.rs (ClassifyParams, ClassPartial,
// ClassReduceParams). NVRTC compiles this file after the header generated from
// src/program/ops.rs (GROVE_OP_*, GROVE_FOR_EACH_OP): no formula is written here by hand.
//
// Per tree and point: the outputs are the logits z (n_outputs == n_classes), or, for a
// single-output program of two classes, z = (0, f); with offsets (the linear terms of the
// inputs, src/program/logistic.rs) each output has its offset added first. The prediction is
// argmax z (ties to the lower class; NaN never wins); a correct one counts for the point's class,
// and every prediction for the class predicted (which F1 reads). The cross-entropy
// logsumexp(z) - z[y] = (max z - z[y]) + ln sum_k exp(z[k] - max z) never overflows; as on the
// CPU, the exponentials, their sum (in [1, K]) and its logarithm are f32 with grove_math.cuh's
// functions, so a point's cross-entropy has the CPU's bits, and only the order of the f64 sums
// over points differs. A point with a non-finite logit counts in `bad` and adds nothing else.
//
// Strategy: eval.cu's, simplified to one point per thread per pass: block b evaluates tree
// tree_ids[b % n_trees] on tile b / n_trees (neighbouring blocks share a data tile in L2); the
// block compiles its tree into shared memory (interp.cuh's grove_compile_chunk, GROVE_CHUNK
// nodes at a time); each thread runs the program with interp.cuh's interpreter, its stack in
// local memory and its output slots in dynamic shared memory.
//
// Determinism, no float atomics: per-class correct and prediction counts are integers, summed per block with
// shared-memory integer atomics (exact, so order-free); the cross-entropy (f64) is summed per
// block by warp shuffles and then the warps in index order; grove_reduce_classify sums each
// tree's tiles in tile order. Results are bitwise reproducible for a given launch shape.

#define GROVE_STACK 32          // stack slots of the fast kernel (host rejects deeper trees)
#define GROVE_DEEP_STACK 512    // stack slots of the fallback kernel
#define GROVE_CHUNK 256         // tree nodes compiled into shared memory at a time
#define GROVE_MAX_THREADS 1024  // most threads a block may have

#include "grove_common.h"

// Mirrors ClassifyParams in src/backend/cuda/kernels.rs.
struct GroveClassifyParams {
    unsigned n_rows;       // N: data points
    unsigned n_features;   // F: x is [F][N], feature-major
    unsigned max_len;      // L: row stride of the population arrays
    unsigned n_outputs;    // output slots: n_classes, or 0 (one output, two classes)
    unsigned n_classes;    // K: labels are < K
    unsigned n_trees;      // trees in this launch (entries of tree_ids)
    unsigned tile_points;  // points per block, a multiple of blockDim.x
    unsigned n_tiles;      // ceil(N / tile_points): row stride of the partials
    unsigned has_offset;   // 1: offset [max(1, n_outputs)][N] is added to the outputs
    unsigned reserved;     // 0
};
GROVE_CHECK_LAYOUT(GroveClassifyParams);

#include "sums.cuh"
#include "interp.cuh"

// Mirrors ClassReduceParams.
struct GroveClassReduceParams {
    unsigned n_trees;    // rows of the partials
    unsigned n_tiles;    // tiles per tree
    unsigned n_classes;  // K: 2 K counters per partial (correct, predicted)
    unsigned reserved;   // 0
};
GROVE_CHECK_LAYOUT(GroveClassReduceParams);


// The operands and output slots of one point of one thread (interp.cuh's Env).
struct GroveRow {
    const float* xp;  // feature 0 at the point (clamped into the tile: past its end, the last row)
    unsigned n_rows;  // N: feature f at xp[f * N]
    float* slot0;     // this thread's slot 0; slot s at slot0[s * blockDim.x]
    unsigned T;       // threads per block
    __device__ __forceinline__ void load(unsigned arg, float (&v)[1]) const { v[0] = __ldg(xp + (size_t)arg * n_rows); }
    __device__ __forceinline__ void slot(unsigned s, const float (&r)[1]) { slot0[s * T] += r[0]; }
};

__device__ __forceinline__ double grove_warp_sum(double v) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
    return v;
}
__device__ __forceinline__ unsigned grove_warp_sum(unsigned v) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
    return v;
}

// Logit k of the current point pt: slot k of this thread, or (0, f) for one output; with
// offsets, the output plus its offset, added in f32 as the CPU reference adds them.
__device__ __forceinline__ double grove_logit(const float* slots, unsigned n_out, unsigned k, float top,
                                              const float* __restrict__ offset, unsigned n_rows, unsigned pt) {
    if (n_out == 0) {
        if (k == 0) return 0.0;
        return offset ? (double)(top + __ldg(offset + pt)) : (double)top;
    }
    const float z = slots[k * blockDim.x + threadIdx.x];
    return offset ? (double)(z + __ldg(offset + (size_t)k * n_rows + pt)) : (double)z;
}

// Evaluates tree tree_ids[blockIdx.x % n_trees] on tile blockIdx.x / n_trees, one point per
// thread per pass, with a stack of DEPTH slots. Writes partials[tree][tile] and
// correct[tree][tile][2 * n_classes]: the correct points of each true class, then the points
// predicted as each class.
//
// Dynamic shared memory: 2 * n_classes unsigned counters, then n_outputs * blockDim.x floats
// (each thread's output slots; a thread touches only its own, so they need no barrier).
template <int DEPTH>
__device__ __forceinline__ void grove_classify(const GroveClassifyParams& p, const unsigned* __restrict__ tree_ids,
                                               const unsigned char* __restrict__ ops, const float* __restrict__ values,
                                               const unsigned short* __restrict__ sizes,
                                               const unsigned char* __restrict__ outs, const unsigned short* __restrict__ lens,
                                               const float* __restrict__ x, const unsigned* __restrict__ labels,
                                               const float* __restrict__ offset_in,
                                               GroveClassPartial* __restrict__ partials,
                                               unsigned* __restrict__ correct) {
    __shared__ GroveInstr code[GROVE_CHUNK];
    extern __shared__ unsigned grove_shared[];
    unsigned* counts = grove_shared;                           // [2 * n_classes]: correct, predicted
    float* slots = (float*)(grove_shared + 2 * p.n_classes);  // [n_outputs][blockDim.x]
    unsigned char* scan = (unsigned char*)(slots + p.n_outputs * blockDim.x);  // the compiler's

    const unsigned T = blockDim.x, tid = threadIdx.x;
    const unsigned t = tree_ids[blockIdx.x % p.n_trees];
    const unsigned tile = blockIdx.x / p.n_trees;
    const unsigned first = tile * p.tile_points;
    const unsigned end = min(first + p.tile_points, p.n_rows);
    const int len = (int)lens[t];
    const unsigned n_out = p.n_outputs;
    const float* offset = p.has_offset ? offset_in : nullptr;
    const size_t row = (size_t)t * p.max_len;
    const unsigned char* op = ops + row;
    const float* value = values + row;
    const unsigned short* size = sizes + row;
    const unsigned char* out = outs + row;
    const unsigned n_counts = 2 * p.n_classes;
    unsigned* my_correct = correct + ((size_t)t * p.n_tiles + tile) * n_counts;

    if (len == 0) {  // no program: every point bad, nothing correct or predicted
        for (unsigned c = tid; c < n_counts; c += T) my_correct[c] = 0;
        if (tid == 0) {
            GroveClassPartial e = {0.0, end - first, end - first};
            partials[(size_t)t * p.n_tiles + tile] = e;
        }
        return;
    }

    for (unsigned c = tid; c < n_counts; c += T) counts[c] = 0;
    const bool resident = len <= GROVE_CHUNK;  // compiled once; else chunk by chunk, every pass
    int n_code = 0;
    if (resident) {
        int live = 0;
        n_code = grove_compile_chunk(op, value, size, out, len, 0, len, live, code, scan);
    }
    __syncthreads();  // counters zeroed (and the program compiled)

    double s_ce = 0.0;
    unsigned s_n = 0, s_bad = 0;
    float stack[DEPTH][1];  // values below the top; top holds the top of the stack
    GroveRow env;
    env.n_rows = p.n_rows;
    env.slot0 = slots + tid;
    env.T = T;

    for (unsigned base = first; base < end; base += T) {
        const unsigned pt = base + tid;
        const bool ok = pt < end;
        env.xp = x + (ok ? pt : end - 1);
        for (unsigned s = 0; s < n_out; ++s) slots[s * T + tid] = 0.0f;
        float top1[1] = {0.0f};
        int h = 0;  // values on the stack below the top

        int live = 0;  // chunk by chunk from the tree's end: execution runs backwards through prefix order
        for (int hi = len; hi > 0; hi -= GROVE_CHUNK) {
            int n = n_code;
            if (!resident) {
                __syncthreads();  // everyone is done with the previous chunk
                n = grove_compile_chunk(op, value, size, out, len, max(hi - GROVE_CHUNK, 0), hi, live, code, scan);
                __syncthreads();
            }
            for (int i = 0; i < n; ++i) grove_exec<1, DEPTH>(code[i], top1, stack, h, env);
        }
        const float top = top1[0];

        if (ok) {
            const unsigned y = __ldg(labels + pt);
            const unsigned K = p.n_classes;
            bool fin = true;
            unsigned best = 0;
            double m = grove_logit(slots, n_out, 0, top, offset, p.n_rows, pt);
            fin = isfinite(m);
            for (unsigned k = 1; k < K; ++k) {
                const double z = grove_logit(slots, n_out, k, top, offset, p.n_rows, pt);
                fin = fin && isfinite(z);
                if (z > m) {  // NaN never wins (only reached when every logit is finite)
                    m = z;
                    best = k;
                }
            }
            s_n += 1;
            if (!fin) {
                s_bad += 1;
            } else {
                if (best == y) atomicAdd(&counts[y], 1u);  // integer: exact in any order
                atomicAdd(&counts[p.n_classes + best], 1u);
                // The CPU's bits (src/backend/cpu/classify.rs): the softmax sum in f32 with
                // grove_exp of the f32 differences, in class order, and grove_ln of it; the
                // logits are f32 values, so m and every z are exact in f64.
                const float mf = (float)m;
                float sum = 0.0f;
                for (unsigned k = 0; k < K; ++k) sum += grove_exp((float)grove_logit(slots, n_out, k, top, offset, p.n_rows, pt) - mf);
                s_ce += (m - grove_logit(slots, n_out, y, top, offset, p.n_rows, pt)) + (double)grove_ln(sum);
            }
        }
    }

    // The block's sums, in a fixed order: warps by shuffles, then warp 0 over the warps.
    __shared__ double red_ce[GROVE_MAX_THREADS / 32];
    __shared__ unsigned red_n[GROVE_MAX_THREADS / 32][2];
    const unsigned warp = tid / 32, lane = tid % 32, n_warps = T / 32;
    s_ce = grove_warp_sum(s_ce);
    s_n = grove_warp_sum(s_n);
    s_bad = grove_warp_sum(s_bad);
    if (lane == 0) {
        red_ce[warp] = s_ce;
        red_n[warp][0] = s_n;
        red_n[warp][1] = s_bad;
    }
    __syncthreads();  // also: every counter update is done
    for (unsigned c = tid; c < n_counts; c += T) my_correct[c] = counts[c];
    if (warp == 0) {
        const bool have = lane < n_warps;
        s_ce = grove_warp_sum(have ? red_ce[lane] : 0.0);
        s_n = grove_warp_sum(have ? red_n[lane][0] : 0u);
        s_bad = grove_warp_sum(have ? red_n[lane][1] : 0u);
        if (lane == 0) {
            GroveClassPartial out = {s_ce, s_n, s_bad};
            partials[(size_t)t * p.n_tiles + tile] = out;
        }
    }
}

// Kernel arguments, in order:
//   p         parameters
//   tree_ids  [n_trees] population rows this launch evaluates
//   ops       [P x L] opcodes          values [P x L] variable index or constant
//   sizes     [P x L] subtree sizes    outs   [P x L] output slot + 1     lens [P] tree lengths
//   x         [F][N] features, f32     labels [N] class of each point (< n_classes)
//   offset    [max(1, n_outputs)][N] added to the outputs where p.has_offset (else unread)
//   partials  [P x n_tiles] sums       correct [P x n_tiles x 2 n_classes] correct, predicted counts
// Launch: blockDim.x a multiple of 32 (at most GROVE_MAX_THREADS), grid n_trees * n_tiles,
// dynamic shared memory (2 * n_classes + n_outputs * blockDim.x) * 4 bytes, then
// GROVE_COMPILE_SHARED(GROVE_CHUNK, blockDim.x) bytes for the compiler.
#define GROVE_CLASSIFY_ARGS                                                                      \
    const GroveClassifyParams p, const unsigned* __restrict__ tree_ids,                          \
        const unsigned char* __restrict__ ops, const float* __restrict__ values,                 \
        const unsigned short* __restrict__ sizes, const unsigned char* __restrict__ outs,        \
        const unsigned short* __restrict__ lens, const float* __restrict__ x, const unsigned* __restrict__ labels,                        \
        const float* __restrict__ offset, GroveClassPartial* __restrict__ partials, unsigned* __restrict__ correct

extern "C" __global__ void grove_classify_fast(GROVE_CLASSIFY_ARGS) {
    grove_classify<GROVE_STACK>(p, tree_ids, ops, values, sizes, outs, lens, x, labels, offset, partials, correct);
}
// For trees whose stack need exceeds GROVE_STACK (the host computes it, as for eval.cu).
extern "C" __global__ void grove_classify_deep(GROVE_CLASSIFY_ARGS) {
    grove_classify<GROVE_DEEP_STACK>(p, tree_ids, ops, values, sizes, outs, lens, x, labels, offset, partials, correct);
}

// Sums each tree's tile partials in tile order: sums[t] and sums_correct[t][2 * n_classes] (the
// correct counts, then the prediction counts). One thread per tree (the class loop is short;
// K <= 254).
extern "C" __global__ void grove_reduce_classify(const GroveClassReduceParams p,
                                                 const GroveClassPartial* __restrict__ partials,
                                                 const unsigned* __restrict__ correct,
                                                 GroveClassPartial* __restrict__ sums,
                                                 unsigned* __restrict__ sums_correct) {
    const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= p.n_trees) return;
    GroveClassPartial s = {0.0, 0, 0};
    const GroveClassPartial* q = partials + (size_t)t * p.n_tiles;
    for (unsigned j = 0; j < p.n_tiles; ++j) {
        s.ce += q[j].ce;
        s.n += q[j].n;
        s.bad += q[j].bad;
    }
    sums[t] = s;
    const unsigned n_counts = 2 * p.n_classes;
    const unsigned* c = correct + (size_t)t * p.n_tiles * n_counts;
    for (unsigned k = 0; k < n_counts; ++k) {
        unsigned total = 0;
        for (unsigned j = 0; j < p.n_tiles; ++j) total += c[(size_t)j * n_counts + k];
        sums_correct[(size_t)t * n_counts + k] = total;
    }
}
