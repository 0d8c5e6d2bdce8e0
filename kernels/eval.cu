// eval.cu: evaluates a population of tensorized trees over a data set, on the GPU.
//
// Twin of the CPU evaluator (src/backend/cpu/eval.rs); the host side is src/backend/cuda/eval.rs.
// NVRTC compiles this file after the header generated from src/program/ops.rs, which defines
// GROVE_OP_* and GROVE_FOR_EACH_OP(X): opcodes and formulas are never written here by hand.
//
// Strategy (EvoGP's hybrid, with Chitty's points-per-thread and linear form): one block per
// (tree, data tile) compiles its tree into shared memory (interp.cuh's grove_compile_chunk:
// leaves folded into their parents' operands, the block's threads in parallel, GROVE_CHUNK
// nodes at a time), then every thread runs the program for K points at once, so each
// instruction is decoded and dispatched once per K points. The stack lives in local memory, with its top in
// registers. Block b evaluates tree tree_ids[b % n_trees] on tile b / n_trees: consecutive
// blocks share a data tile, which stays in L2 while the trees go by.
//
// Tree semantics: interp.cuh's. With n_outputs > 0 the slots are the results; with
// n_outputs == 0 the root's value is.
//
// Determinism: no atomics. Each block reduces its tile in a fixed order (warp shuffles, then
// the warps in index order); grove_reduce_regression sums the tiles of a tree in index order.

#define GROVE_STACK 32          // stack slots of the fast kernels (host rejects deeper trees)
#define GROVE_DEEP_STACK 512    // stack slots of the fallback kernels (one point per thread)
#define GROVE_CHUNK 256         // tree nodes compiled into shared memory at a time
#define GROVE_MAX_THREADS 1024  // most threads a block may have

#include "grove_common.h"

// Mirrors EvalParams in src/backend/cuda/kernels.rs.
struct GroveEvalParams {
    unsigned n_rows;       // N: data points
    unsigned n_features;   // F: x is [F][N], feature-major
    unsigned max_len;      // L: row stride of the population arrays
    unsigned n_outputs;    // output slots; 0: the root's value is the result
    unsigned n_trees;      // trees in this launch (entries of tree_ids)
    unsigned tile_points;  // points per block, a multiple of blockDim.x * K
    unsigned n_tiles;      // ceil(N / tile_points): row stride of the partial sums
    unsigned reserved;     // 0
};
GROVE_CHECK_LAYOUT(GroveEvalParams);

#include "sums.cuh"
#include "interp.cuh"

// Mirrors ReduceParams.
struct GroveReduceParams {
    unsigned n_trees;  // rows of the partial sums
    unsigned n_tiles;  // tiles per tree
};
GROVE_CHECK_LAYOUT(GroveReduceParams);


// `p`, hidden from the optimiser: the compiler then keeps the 64-bit pointer in registers and
// adds a uniform offset per load (2 instructions), where it would otherwise recompute the whole
// index arithmetic at every load (measured in the SASS: 6 to 7 instructions a point).
__device__ __forceinline__ const float* grove_opaque(const float* p) {
#ifdef __CUDA_ARCH__
    asm volatile("" : "+l"(p));
#endif
    return p;
}

// The operands and output slots of K points of one thread (interp.cuh's Env).
template <int K>
struct GroveColumns {
    const float* xp[K];  // feature 0 at each point, clamped into the tile (a point past its end
                         // reads the tile's last row; its results are never used)
    unsigned n_rows;     // N: feature f of point k is xp[k][f * N]
    float* slots;        // this thread's slot 0 entry: slot s of point k at [(s * K + k) * T]
    unsigned T;          // threads per block
    __device__ __forceinline__ void load(unsigned arg, float (&v)[K]) const {
        const size_t off = (size_t)arg * n_rows;
#pragma unroll
        for (int k = 0; k < K; ++k) v[k] = __ldg(xp[k] + off);
    }
    __device__ __forceinline__ void slot(unsigned s, const float (&r)[K]) {
        float* sl = slots + s * K * T;
#pragma unroll
        for (int k = 0; k < K; ++k) sl[k * T] += r[k];
    }
};

// A deterministic sum over the warp, ending in lane 0.
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

// Evaluates tree tree_ids[blockIdx.x % n_trees] on tile blockIdx.x / n_trees, K points per
// thread per pass, with a stack of DEPTH slots. PREDICT writes every result to
// pred[tree][slot][point]; otherwise the tile's regression sums go to partials[tree][tile], and
// where pred is not null (lexicase in the device loop) the value they read to pred[tree][point].
//
// Dynamic shared memory: n_outputs * K * blockDim.x floats (the output slots of each point;
// each thread touches only its own entries, so they need no barrier), then
// GROVE_COMPILE_SHARED(GROVE_CHUNK, blockDim.x) bytes for the compiler.
template <int K, int DEPTH, bool PREDICT>
__device__ __forceinline__ void grove_eval(const GroveEvalParams& p, const unsigned* __restrict__ tree_ids,
                                           const unsigned char* __restrict__ ops, const float* __restrict__ values,
                                           const unsigned short* __restrict__ sizes,
                                           const unsigned char* __restrict__ outs, const unsigned short* __restrict__ lens,
                                           const float* __restrict__ x, const float* __restrict__ y,
                                           GroveRegSums* __restrict__ partials, float* __restrict__ pred) {
    __shared__ GroveInstr code[GROVE_CHUNK];
    extern __shared__ float slots[];  // output slots, then the compiler's scratch

    const unsigned T = blockDim.x, tid = threadIdx.x;
    const unsigned t = tree_ids[blockIdx.x % p.n_trees];
    const unsigned tile = blockIdx.x / p.n_trees;
    const unsigned first = tile * p.tile_points;
    const unsigned end = min(first + p.tile_points, p.n_rows);
    const int len = (int)lens[t];
    const unsigned n_out = p.n_outputs;
    const unsigned n_res = n_out ? n_out : 1;
    const size_t row = (size_t)t * p.max_len;
    const unsigned char* op = ops + row;
    const float* value = values + row;
    const unsigned short* size = sizes + row;
    const unsigned char* out = outs + row;

    if (len == 0) {  // no program: every result NaN, every point bad (the whole block returns)
        if (PREDICT) {
            for (unsigned s = 0; s < n_res; ++s)
                for (unsigned i = first + tid; i < end; i += T)
                    pred[((size_t)t * n_res + s) * p.n_rows + i] = __int_as_float(0x7fffffff);
        } else if (tid == 0) {
            GroveRegSums e = {0, 0, 0, 0, 0, 0, 0, end - first, end - first};
            partials[(size_t)t * p.n_tiles + tile] = e;
        }
        return;
    }

    unsigned char* scan = (unsigned char*)(slots + n_out * K * T);
    const bool resident = len <= GROVE_CHUNK;  // compiled once; else chunk by chunk, every pass
    int n_code = 0;
    if (resident) {
        int live = 0;
        n_code = grove_compile_chunk(op, value, size, out, len, 0, len, live, code, scan);
        __syncthreads();
    }

    double s_sse = 0, s_sae = 0, s_f = 0, s_ff = 0, s_fy = 0, s_y = 0, s_yy = 0;
    unsigned s_n = 0, s_bad = 0;
    float stack[DEPTH][K];  // values below the top; top[] holds the top of the stack
    GroveColumns<K> env;
    env.n_rows = p.n_rows;
    env.slots = slots + tid;
    env.T = T;

    for (unsigned base = first; base < end; base += T * K) {
        unsigned pt[K];
        bool ok[K];
#pragma unroll
        for (int k = 0; k < K; ++k) {
            pt[k] = base + k * T + tid;  // stride T: each of the K loads is coalesced
            ok[k] = pt[k] < end;
            env.xp[k] = grove_opaque(x + (ok[k] ? pt[k] : end - 1));
        }
        for (unsigned s = 0; s < n_out; ++s)
#pragma unroll
            for (int k = 0; k < K; ++k) slots[(s * K + k) * T + tid] = 0.0f;

        float top[K];
#pragma unroll
        for (int k = 0; k < K; ++k) top[k] = 0.0f;
        int h = 0;  // values on the stack below the top

        int live = 0;  // chunk by chunk from the tree's end: execution runs backwards through prefix order
        for (int hi = len; hi > 0; hi -= GROVE_CHUNK) {
            int n = n_code;
            if (!resident) {
                __syncthreads();  // everyone is done with the previous chunk
                n = grove_compile_chunk(op, value, size, out, len, max(hi - GROVE_CHUNK, 0), hi, live, code, scan);
                __syncthreads();
            }
            for (int i = 0; i < n; ++i) grove_exec<K, DEPTH>(code[i], top, stack, h, env);
        }

#pragma unroll
        for (int k = 0; k < K; ++k) {
            if (!ok[k]) continue;
            if (PREDICT) {
                float* dst = pred + (size_t)t * n_res * p.n_rows + pt[k];
                if (n_out == 0) dst[0] = top[k];
                for (unsigned s = 0; s < n_out; ++s) dst[(size_t)s * p.n_rows] = slots[(s * K + k) * T + tid];
            } else {
                const float f = n_out ? slots[k * T + tid] : top[k];
                if (pred != nullptr) pred[(size_t)t * p.n_rows + pt[k]] = f;  // lexicase's values
                bool fin = isfinite(f);
                for (unsigned s = 1; s < n_out; ++s) fin = fin && isfinite(slots[(s * K + k) * T + tid]);
                const double fd = f, yd = __ldg(y + pt[k]), e = fd - yd;
                s_sse += e * e;
                s_sae += fabs(e);
                s_f += fd;
                s_ff += fd * fd;
                s_fy += fd * yd;
                s_y += yd;
                s_yy += yd * yd;
                s_n += 1;
                s_bad += fin ? 0 : 1;
            }
        }
    }

    if (!PREDICT) {  // the block's sums, in a fixed order: warps by shuffles, then warp 0
        __shared__ double red[GROVE_MAX_THREADS / 32][7];
        __shared__ unsigned red_n[GROVE_MAX_THREADS / 32][2];
        const unsigned warp = tid / 32, lane = tid % 32, n_warps = T / 32;
        double v[7] = {s_sse, s_sae, s_f, s_ff, s_fy, s_y, s_yy};
#pragma unroll
        for (int j = 0; j < 7; ++j) v[j] = grove_warp_sum(v[j]);
        s_n = grove_warp_sum(s_n);
        s_bad = grove_warp_sum(s_bad);
        if (lane == 0) {
#pragma unroll
            for (int j = 0; j < 7; ++j) red[warp][j] = v[j];
            red_n[warp][0] = s_n;
            red_n[warp][1] = s_bad;
        }
        __syncthreads();
        if (warp == 0) {
            const bool have = lane < n_warps;
#pragma unroll
            for (int j = 0; j < 7; ++j) v[j] = grove_warp_sum(have ? red[lane][j] : 0.0);
            s_n = grove_warp_sum(have ? red_n[lane][0] : 0u);
            s_bad = grove_warp_sum(have ? red_n[lane][1] : 0u);
            if (lane == 0) {
                GroveRegSums out = {v[0], v[1], v[2], v[3], v[4], v[5], v[6], s_n, s_bad};
                partials[(size_t)t * p.n_tiles + tile] = out;
            }
        }
    }
}

// Kernel arguments, in order (src/backend/cuda/eval.rs launches them so):
//   p         parameters
//   tree_ids  [n_trees] population rows this launch evaluates
//   ops       [P x L] opcodes          values [P x L] variable index or constant
//   sizes     [P x L] subtree sizes    outs   [P x L] output slot + 1     lens [P] tree lengths
//   x         [F][N] features, f32     y      [N] targets (regression only)
//   partials  [P x n_tiles] sums (regression)   pred [P x max(1, n_outputs) x N] (predict)
//   keep      regression: null, or [P x N], each value the sums read (lexicase's cases)
// GROVE_K selects the points-per-thread variant a module holds (the engine compiles one module
// per K it uses, on first use); 0, the default, holds every variant (what the tests compile).
// The deep, reduce, joint-sum and head-sum kernels are in every module.
#ifndef GROVE_K
#define GROVE_K 0
#endif
#define GROVE_WANT(K) (GROVE_K == 0 || GROVE_K == (K))

// Every block size up to GROVE_MAX_THREADS must launch, so the compiler keeps each kernel within
// 65536 / 1024 = 64 registers a thread: without the bound, the math of grove_math.cuh inlined
// into every case of the interpreter's switch takes it to 72-84, which both fails 1024-thread
// launches and lowers occupancy (measured: W3 fell from 1.0e12 to 4.5e11 GPop/s). At 64 there
// are no spills.
#define GROVE_BOUNDS __launch_bounds__(GROVE_MAX_THREADS)

#define GROVE_EVAL_ARGS                                                                     \
    const GroveEvalParams p, const unsigned* __restrict__ tree_ids,                         \
        const unsigned char* __restrict__ ops, const float* __restrict__ values,            \
        const unsigned short* __restrict__ sizes, const unsigned char* __restrict__ outs,   \
        const unsigned short* __restrict__ lens, const float* __restrict__ x
#define GROVE_REGRESSION(K, DEPTH) \
    grove_eval<K, DEPTH, false>(p, tree_ids, ops, values, sizes, outs, lens, x, y, partials, keep)
#define GROVE_PREDICT(K, DEPTH) \
    grove_eval<K, DEPTH, true>(p, tree_ids, ops, values, sizes, outs, lens, x, nullptr, nullptr, pred)

#if GROVE_WANT(1)
extern "C" __global__ void GROVE_BOUNDS grove_eval_regression_k1(GROVE_EVAL_ARGS, const float* __restrict__ y, GroveRegSums* __restrict__ partials, float* __restrict__ keep) { GROVE_REGRESSION(1, GROVE_STACK); }
#endif
#if GROVE_WANT(2)
extern "C" __global__ void GROVE_BOUNDS grove_eval_regression_k2(GROVE_EVAL_ARGS, const float* __restrict__ y, GroveRegSums* __restrict__ partials, float* __restrict__ keep) { GROVE_REGRESSION(2, GROVE_STACK); }
#endif
#if GROVE_WANT(3)
extern "C" __global__ void GROVE_BOUNDS grove_eval_regression_k3(GROVE_EVAL_ARGS, const float* __restrict__ y, GroveRegSums* __restrict__ partials, float* __restrict__ keep) { GROVE_REGRESSION(3, GROVE_STACK); }
#endif
#if GROVE_WANT(4)
extern "C" __global__ void GROVE_BOUNDS grove_eval_regression_k4(GROVE_EVAL_ARGS, const float* __restrict__ y, GroveRegSums* __restrict__ partials, float* __restrict__ keep) { GROVE_REGRESSION(4, GROVE_STACK); }
#endif
#if GROVE_WANT(5)
extern "C" __global__ void GROVE_BOUNDS grove_eval_regression_k5(GROVE_EVAL_ARGS, const float* __restrict__ y, GroveRegSums* __restrict__ partials, float* __restrict__ keep) { GROVE_REGRESSION(5, GROVE_STACK); }
#endif
#if GROVE_WANT(6)
extern "C" __global__ void GROVE_BOUNDS grove_eval_regression_k6(GROVE_EVAL_ARGS, const float* __restrict__ y, GroveRegSums* __restrict__ partials, float* __restrict__ keep) { GROVE_REGRESSION(6, GROVE_STACK); }
#endif
#if GROVE_WANT(7)
extern "C" __global__ void GROVE_BOUNDS grove_eval_regression_k7(GROVE_EVAL_ARGS, const float* __restrict__ y, GroveRegSums* __restrict__ partials, float* __restrict__ keep) { GROVE_REGRESSION(7, GROVE_STACK); }
#endif
#if GROVE_WANT(8)
extern "C" __global__ void GROVE_BOUNDS grove_eval_regression_k8(GROVE_EVAL_ARGS, const float* __restrict__ y, GroveRegSums* __restrict__ partials, float* __restrict__ keep) { GROVE_REGRESSION(8, GROVE_STACK); }
#endif
extern "C" __global__ void GROVE_BOUNDS grove_eval_regression_deep(GROVE_EVAL_ARGS, const float* __restrict__ y, GroveRegSums* __restrict__ partials, float* __restrict__ keep) { GROVE_REGRESSION(1, GROVE_DEEP_STACK); }

#if GROVE_WANT(1)
extern "C" __global__ void GROVE_BOUNDS grove_predict_k1(GROVE_EVAL_ARGS, float* __restrict__ pred) { GROVE_PREDICT(1, GROVE_STACK); }
#endif
#if GROVE_WANT(2)
extern "C" __global__ void GROVE_BOUNDS grove_predict_k2(GROVE_EVAL_ARGS, float* __restrict__ pred) { GROVE_PREDICT(2, GROVE_STACK); }
#endif
#if GROVE_WANT(3)
extern "C" __global__ void GROVE_BOUNDS grove_predict_k3(GROVE_EVAL_ARGS, float* __restrict__ pred) { GROVE_PREDICT(3, GROVE_STACK); }
#endif
#if GROVE_WANT(4)
extern "C" __global__ void GROVE_BOUNDS grove_predict_k4(GROVE_EVAL_ARGS, float* __restrict__ pred) { GROVE_PREDICT(4, GROVE_STACK); }
#endif
#if GROVE_WANT(5)
extern "C" __global__ void GROVE_BOUNDS grove_predict_k5(GROVE_EVAL_ARGS, float* __restrict__ pred) { GROVE_PREDICT(5, GROVE_STACK); }
#endif
#if GROVE_WANT(6)
extern "C" __global__ void GROVE_BOUNDS grove_predict_k6(GROVE_EVAL_ARGS, float* __restrict__ pred) { GROVE_PREDICT(6, GROVE_STACK); }
#endif
#if GROVE_WANT(7)
extern "C" __global__ void GROVE_BOUNDS grove_predict_k7(GROVE_EVAL_ARGS, float* __restrict__ pred) { GROVE_PREDICT(7, GROVE_STACK); }
#endif
#if GROVE_WANT(8)
extern "C" __global__ void GROVE_BOUNDS grove_predict_k8(GROVE_EVAL_ARGS, float* __restrict__ pred) { GROVE_PREDICT(8, GROVE_STACK); }
#endif
extern "C" __global__ void GROVE_BOUNDS grove_predict_deep(GROVE_EVAL_ARGS, float* __restrict__ pred) { GROVE_PREDICT(1, GROVE_DEEP_STACK); }

// Sums each tree's tile partials in tile order, in f64: sums[t] = sum over j of partials[t][j].
// One thread per tree.
extern "C" __global__ void grove_reduce_regression(const GroveReduceParams p,
                                                   const GroveRegSums* __restrict__ partials,
                                                   GroveRegSums* __restrict__ sums) {
    const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= p.n_trees) return;
    GroveRegSums s = {0, 0, 0, 0, 0, 0, 0, 0, 0};
    const GroveRegSums* q = partials + (size_t)t * p.n_tiles;
    for (unsigned j = 0; j < p.n_tiles; ++j) {
        s.sse += q[j].sse;
        s.sae += q[j].sae;
        s.sum_f += q[j].sum_f;
        s.sum_ff += q[j].sum_ff;
        s.sum_fy += q[j].sum_fy;
        s.sum_y += q[j].sum_y;
        s.sum_yy += q[j].sum_yy;
        s.n += q[j].n;
        s.bad += q[j].bad;
    }
    sums[t] = s;
}

// Each program's sums for its joint fit with linear terms of the inputs (the CPU's
// program::linear::JointSums, backend::cpu::eval::evaluate_joint), from its values `pred`
// (written by grove_predict_*, [n_trees][n_rows]; one output). Grid (n_trees, k + 1), one block of
// GROVE_JOINT_THREADS per (tree, column): column c < k sums x[inputs[c]] · f over the rows;
// column k sums f, f^2 and f · r (r: the target less the terms) and counts the rows where f is
// NaN or infinite. Threads stride the rows; grove_joint_block_sum adds their partials. In
// f64, from f32 values.
// out: [n_trees][k + 3] = (sum_f, sum_f2, sum_fr, sum_xf[0 .. k]); bad: [n_trees].
#define GROVE_JOINT_THREADS 256
#define GROVE_JOINT_BOUNDS __launch_bounds__(GROVE_JOINT_THREADS)

// Adds up the GROVE_JOINT_THREADS partials (a, b, c, n) of a block in a fixed tree order, so the
// bits do not depend on the scheduling; afterwards thread 0's arguments hold the block's sums.
// Every thread of the block calls it, once per launch.
__device__ void grove_joint_block_sum(double& a, double& b, double& c, unsigned& n) {
    __shared__ double s_a[GROVE_JOINT_THREADS], s_b[GROVE_JOINT_THREADS], s_c[GROVE_JOINT_THREADS];
    __shared__ unsigned s_n[GROVE_JOINT_THREADS];
    const unsigned tid = threadIdx.x;
    s_a[tid] = a;
    s_b[tid] = b;
    s_c[tid] = c;
    s_n[tid] = n;
    __syncthreads();
    for (unsigned h = GROVE_JOINT_THREADS / 2; h > 0; h /= 2) {
        if (tid < h) {
            s_a[tid] += s_a[tid + h];
            s_b[tid] += s_b[tid + h];
            s_c[tid] += s_c[tid + h];
            s_n[tid] += s_n[tid + h];
        }
        __syncthreads();
    }
    a = s_a[0];
    b = s_b[0];
    c = s_c[0];
    n = s_n[0];
}
extern "C" __global__ void GROVE_JOINT_BOUNDS grove_joint_sums(const unsigned n_rows, const unsigned k, const float* __restrict__ pred,
                                                               const float* __restrict__ x, const float* __restrict__ r,
                                                               const unsigned* __restrict__ inputs, double* __restrict__ out,
                                                               unsigned* __restrict__ bad) {
    const unsigned t = blockIdx.x, col = blockIdx.y, tid = threadIdx.x;
    const float* f = pred + (size_t)t * n_rows;
    double a = 0.0, b = 0.0, c = 0.0;
    unsigned nb = 0;
    if (col < k) {
        const float* xc = x + (size_t)inputs[col] * n_rows;
        for (unsigned i = tid; i < n_rows; i += GROVE_JOINT_THREADS) a += (double)xc[i] * (double)f[i];
    } else {
        for (unsigned i = tid; i < n_rows; i += GROVE_JOINT_THREADS) {
            const double v = f[i];
            a += v;
            b += v * v;
            c += v * (double)r[i];
            nb += isfinite(f[i]) ? 0u : 1u;
        }
    }
    grove_joint_block_sum(a, b, c, nb);
    if (tid != 0) return;
    double* o = out + (size_t)t * (k + 3);
    if (col < k) {
        o[3 + col] = a;
    } else {
        o[0] = a;
        o[1] = b;
        o[2] = c;
        bad[t] = nb;
    }
}

// Each program's fitness from its joint sums (grove_joint_sums' out and bad, over n_rows rows): the
// error of the program fitted together with the linear terms, twin of
// task::regression::fitness::joint_error (through Joint::objective_with) plus parsimony per node, bit
// for bit: the same f64 operations in the same order (--fmad=false). params (Joint::device_params):
// [objective, syy, mu[k], sd[k], minv[k][k]]; metric as GroveGenParams' (0 MSE, 1 RMSE, 2 MAE, 3 R2).
// One thread a program; +inf for an empty tree, a value that is not finite, or no rows.
extern "C" __global__ void grove_joint_fitness(const unsigned p, const unsigned k, const unsigned n_rows, const unsigned metric,
                                               const double parsimony, const double* __restrict__ params,
                                               const double* __restrict__ sums, const unsigned* __restrict__ bad,
                                               const unsigned short* __restrict__ lens, double* __restrict__ fit) {
    const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= p) return;
    const double inf = __longlong_as_double(0x7FF0000000000000ll);
    const unsigned len = lens[t];
    const double* s = sums + (size_t)t * (k + 3);
    if (len == 0 || bad[t] != 0 || n_rows == 0 || !isfinite(s[1])) {
        fit[t] = inf;
        return;
    }
    const double n = (double)n_rows, sum_f = s[0], sum_f2 = s[1], sum_fr = s[2];
    const double* mu = params + 2;
    const double* sd = mu + k;
    const double* minv = sd + k;
    // Joint::spread: c = Zᵀf, q = f's centred spread less what the terms explain.
    double cmc = 0.0;
    for (unsigned a = 0; a < k; ++a) {
        const double ca = (s[3 + a] - mu[a] * sum_f) / sd[a];
        for (unsigned b = 0; b < k; ++b) {
            const double cb = (s[3 + b] - mu[b] * sum_f) / sd[b];
            cmc += ca * minv[a * k + b] * cb;
        }
    }
    const double centred = sum_f2 - sum_f * sum_f / n;
    double q = centred - cmc;
    if (!(q > 1e-10 * fmax(sum_f2, 2.2250738585072014e-308) && isfinite(q))) q = 0.0;
    // Joint::objective_with, then joint_error's metric.
    const double objective = params[0], syy = params[1];
    const double rss = q > 0.0 ? fmax(objective - sum_fr * sum_fr / q, 0.0) : objective;
    double e;
    if (metric == 0) e = rss / n;
    else if (metric == 1) e = sqrt(rss / n);
    else if (metric == 3) e = syy > 0.0 ? fmin(rss / syy, 1.0) : 0.0;
    else e = inf;
    if (!isfinite(e)) e = inf;
    fit[t] = e + parsimony * (double)len;
}

// A loss of the user's own (program::fitness::Loss; the CPU's backend::cpu::eval::evaluate_loss):
// each program's sum of loss(p, y) over the rows, p = a f + b in f64 rounded to f32
// (program::fitness::scaled_prediction), (a, b) its linear scaling (grove_scale, from the sums
// of its values, as RegressionSums::scale) where `scaled`, else (1, 0). `loss` is the loss's
// opcode (a registered user operator), applied by grove_apply with the CPU's bits. One block of
// GROVE_JOINT_THREADS per program (grid n_trees), from its values `pred` ([n_trees][n_rows],
// the prediction kernels'); threads stride the rows, grove_joint_block_sum adds them up.
// out: [n_trees] the sums; bad: [n_trees] rows whose value or loss is NaN or infinite.
__device__ __forceinline__ void grove_block_scale(const unsigned n_rows, const unsigned scaled, const float* __restrict__ f,
                                                  const float* __restrict__ y, double& a, double& b, unsigned& nb) {
    const unsigned tid = threadIdx.x;
    double sf = 0.0, sff = 0.0, sfy = 0.0, sy = 0.0, syy = 0.0, unused = 0.0;
    unsigned none = 0;
    nb = 0;
    for (unsigned i = tid; i < n_rows; i += GROVE_JOINT_THREADS) {
        const double v = f[i], w = y[i];
        sf += v;
        sff += v * v;
        sfy += v * w;
        sy += w;
        syy += w * w;
        nb += isfinite(f[i]) ? 0u : 1u;
    }
    grove_joint_block_sum(sf, sff, sfy, nb);
    __syncthreads();  // every thread has read the first sums out of shared memory
    grove_joint_block_sum(sy, syy, unused, none);
    __syncthreads();
    a = 1.0;
    b = 0.0;
    if (scaled && nb == 0) {
        GroveRegSums s = {0.0, 0.0, sf, sff, sfy, sy, syy, n_rows, 0};
        grove_scale(s, a, b);
    }
}

extern "C" __global__ void GROVE_JOINT_BOUNDS grove_loss_sums(const unsigned n_rows, const unsigned scaled, const unsigned loss,
                                                              const float* __restrict__ pred, const float* __restrict__ y,
                                                              double* __restrict__ out, unsigned* __restrict__ bad) {
    const unsigned t = blockIdx.x, tid = threadIdx.x;
    const float* f = pred + (size_t)t * n_rows;
    double a, b;
    unsigned nb;
    grove_block_scale(n_rows, scaled, f, y, a, b, nb);
    double sum = 0.0, unused1 = 0.0, unused2 = 0.0;
    unsigned lb = 0;
    for (unsigned i = tid; i < n_rows; i += GROVE_JOINT_THREADS) {
        const float p = (float)(a * (double)f[i] + b);
        const float l = grove_apply(loss, p, y[i]);
        lb += isfinite(l) ? 0u : 1u;
        sum += (double)l;
    }
    grove_joint_block_sum(sum, unused1, unused2, lb);
    if (tid == 0) {
        out[t] = sum;
        bad[t] = nb + lb;
    }
}

// A program's predictions under its linear scaling, in place: pred[t][i] = a f + b in f64
// rounded to f32, (a, b) as grove_loss_sums computes them (where `scaled`; a program with a
// NaN or infinite value keeps its values), and bad[t] its rows whose value is NaN or infinite.
// One block of GROVE_JOINT_THREADS per program: what a fitness function of the user's own
// receives on the device.
extern "C" __global__ void GROVE_JOINT_BOUNDS grove_scale_predictions(const unsigned n_rows, const unsigned scaled,
                                                                      float* __restrict__ pred, const float* __restrict__ y,
                                                                      unsigned* __restrict__ bad) {
    const unsigned t = blockIdx.x, tid = threadIdx.x;
    float* f = pred + (size_t)t * n_rows;
    double a, b;
    unsigned nb;
    grove_block_scale(n_rows, scaled, f, y, a, b, nb);
    if (tid == 0) bad[t] = nb;
    __syncthreads();  // every thread has its (a, b) before any value changes
    if (!scaled || nb != 0) return;
    for (unsigned i = tid; i < n_rows; i += GROVE_JOINT_THREADS) f[i] = (float)(a * (double)f[i] + b);
}

// Column col < k + k(k+1)/2 of a head's sums over the outputs f ([k][n_rows]): sum f_col for
// col < k, then sum f_i * f_j for i <= j in row-major order of the upper triangle; this
// thread's share of the rows (grove_joint_block_sum adds the shares). Shared by
// grove_class_head_sums and grove_head_sums, whose first columns these are.
__device__ double grove_head_feature_sum(const unsigned col, const unsigned k, const unsigned n_rows, const float* __restrict__ f,
                                         const unsigned tid) {
    double a = 0.0;
    if (col < k) {
        const float* fc = f + (size_t)col * n_rows;
        for (unsigned i = tid; i < n_rows; i += GROVE_JOINT_THREADS) a += (double)fc[i];
        return a;
    }
    unsigned q = col - k, i = 0;
    while (q >= k - i) {
        q -= k - i;
        ++i;
    }
    const float* fi = f + (size_t)i * n_rows;
    const float* fj = f + (size_t)(i + q) * n_rows;
    for (unsigned r = tid; r < n_rows; r += GROVE_JOINT_THREADS) a += (double)fi[r] * (double)fj[r];
    return a;
}

// Each program's sums for a classifier's head over K outputs (the CPU's
// program::head::ClassHeadSums, backend::cpu::eval::evaluate_class_head), from its values
// `pred` ([n_trees][k][n_rows], as grove_head_sums) and the rows' class indices `labels` (as
// floats). Grid (n_trees, C), C = k + k(k+1)/2 + k * n_classes + 1 columns, one block of
// GROVE_JOINT_THREADS per (tree, column): column c < k sums f_c; the next k(k+1)/2 sum
// f_i * f_j for i <= j (row-major upper triangle); the next k * n_classes sum f_i over the rows
// of class c at k + k(k+1)/2 + c * k + i; the last counts the rows where some output is NaN or
// infinite. Threads stride the rows, then add their partials in a fixed tree order. In f64.
// out: [n_trees][C]; bad: [n_trees].
extern "C" __global__ void GROVE_JOINT_BOUNDS grove_class_head_sums(const unsigned n_rows, const unsigned k, const unsigned n_classes,
                                                                    const float* __restrict__ pred, const float* __restrict__ labels,
                                                                    double* __restrict__ out, unsigned* __restrict__ bad) {
    const unsigned t = blockIdx.x, col = blockIdx.y, tid = threadIdx.x;
    const unsigned pairs = k * (k + 1) / 2, n_cols = k + pairs + k * n_classes + 1;
    const float* f = pred + (size_t)t * k * n_rows;
    double a = 0.0, unused_b = 0.0, unused_c = 0.0;
    unsigned nb = 0;
    if (col < k + pairs) {
        a = grove_head_feature_sum(col, k, n_rows, f, tid);
    } else if (col < n_cols - 1) {
        const unsigned q = col - k - pairs, c = q / k;
        const float* fc = f + (size_t)(q % k) * n_rows;
        const float want = (float)c;
        for (unsigned r = tid; r < n_rows; r += GROVE_JOINT_THREADS) a += labels[r] == want ? (double)fc[r] : 0.0;
    } else {
        for (unsigned r = tid; r < n_rows; r += GROVE_JOINT_THREADS) {
            bool fin = true;
            for (unsigned o = 0; o < k; ++o) fin = fin && isfinite(f[(size_t)o * n_rows + r]);
            nb += fin ? 0u : 1u;
        }
    }
    grove_joint_block_sum(a, unused_b, unused_c, nb);
    if (tid != 0) return;
    out[(size_t)t * n_cols + col] = a;
    if (col + 1 == n_cols) bad[t] = nb;
}

// Each program's sums for its fitted linear head over K outputs (the CPU's
// program::head::HeadSums, backend::cpu::eval::evaluate_head), from its values `pred`
// (written by grove_predict_*, [n_trees][k][n_rows]). Grid (n_trees, C), C = 2k + k(k+1)/2 + 1
// columns, one block of GROVE_JOINT_THREADS per (tree, column): column c < k sums f_c; the
// next k(k+1)/2 sum f_i * f_j for i <= j in row-major order of the upper triangle; the next k
// sum f_i * y; the last sums y and y^2 and counts the rows where some output is NaN or
// infinite. Threads stride the rows, then add their partials in a fixed tree order. In f64.
// out: [n_trees][C + 1] (the last column's two sums at C - 1 and C); bad: [n_trees].
extern "C" __global__ void GROVE_JOINT_BOUNDS grove_head_sums(const unsigned n_rows, const unsigned k, const float* __restrict__ pred,
                                                              const float* __restrict__ y, double* __restrict__ out,
                                                              unsigned* __restrict__ bad) {
    const unsigned t = blockIdx.x, col = blockIdx.y, tid = threadIdx.x;
    const unsigned pairs = k * (k + 1) / 2, n_cols = 2 * k + pairs + 1;
    const float* f = pred + (size_t)t * k * n_rows;
    double a = 0.0, b = 0.0, unused = 0.0;
    unsigned nb = 0;
    if (col < k + pairs) {
        a = grove_head_feature_sum(col, k, n_rows, f, tid);
    } else if (col < 2 * k + pairs) {
        const float* fc = f + (size_t)(col - k - pairs) * n_rows;
        for (unsigned r = tid; r < n_rows; r += GROVE_JOINT_THREADS) a += (double)fc[r] * (double)y[r];
    } else {
        for (unsigned r = tid; r < n_rows; r += GROVE_JOINT_THREADS) {
            const double v = y[r];
            a += v;
            b += v * v;
            bool fin = true;
            for (unsigned o = 0; o < k; ++o) fin = fin && isfinite(f[(size_t)o * n_rows + r]);
            nb += fin ? 0u : 1u;
        }
    }
    grove_joint_block_sum(a, b, unused, nb);
    if (tid != 0) return;
    double* o = out + (size_t)t * (n_cols + 1);
    o[col] = a;
    if (col + 1 == n_cols) {
        o[col + 1] = b;
        bad[t] = nb;
    }
}
