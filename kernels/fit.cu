// fit.cu: numeric constants fitted by Levenberg–Marquardt, one block per tree, the whole fit
// in one launch: grove_fit_constants for regression (squared error, optionally with linear
// scaling), grove_fit_class_constants for classification (generalised Gauss–Newton on the
// softmax cross-entropy). Twin of src/backend/cpu/fit.rs (fit_constants,
// fit_class_constants), operation for operation:
// the same forward-mode tangents through the interpreter's f32 operations (grove_apply), the
// same f64 sums of w_p·w_q over the rows in row order, the same Cholesky solve and the same
// decisions, so the fitted constants are the CPU's bits (compiled with --fmad=false).
//
// A pass over the rows: the block takes T rows at a time; each thread evaluates its row with
// tangents and writes the row's vector w = (J, r) to shared memory; then thread k sums products
// k, k + T, … of the (m + 1)(m + 2) / 2 products over the T rows in order, so each sum runs over
// all rows in row order whatever T is. Classification keeps more per row (each logit's
// tangents less their softmax mean, the softmax, the residuals and the cross-entropy), so a
// chunk holds fewer rows (GROVE_FIT_BUF doubles in all) and thread k computes each row's value
// of sum k from them. Between passes thread 0 takes the step (the solve, the
// decision, λ); the block follows its decisions through shared memory.

#include "grove_common.h"

#define GROVE_FIT_MAX_CONSTANTS 16   // constant leaves fitted per tree (the first, in prefix order)
#define GROVE_FIT_MAX_CLASSES 16     // classes of a classification fit at most
#define GROVE_FIT_STACK 32           // values the walk may hold at once
#define GROVE_FIT_MAX_PARAMS 18      // constants, then a and b with linear scaling
#define GROVE_FIT_MAX_SUMS 190       // (MAX_PARAMS + 1)(MAX_PARAMS + 2) / 2
#define GROVE_FIT_THREADS 128        // most threads a block may have
#define GROVE_FIT_MIN_THREADS 32     // fewest
#define GROVE_FIT_OWN ((GROVE_FIT_MAX_SUMS + GROVE_FIT_MIN_THREADS - 1) / GROVE_FIT_MIN_THREADS)
#define GROVE_FIT_BUF (GROVE_FIT_THREADS * (GROVE_FIT_MAX_PARAMS + 1))  // doubles of a pass's row chunk
#define GROVE_FIT_LAMBDA_START 1e-3
#define GROVE_FIT_LAMBDA_STOP 1e10
#define GROVE_FIT_LAMBDA_MIN 1e-9

// Mirrors FitParams in src/backend/cuda/kernels.rs.
struct GroveFitParams {
    unsigned n_trees;     // entries of tree_ids
    unsigned max_len;     // L: row stride of the population
    unsigned n_rows;      // N
    unsigned n_features;  // F
    unsigned steps;       // Levenberg–Marquardt steps
    unsigned scaling;     // 1: fit a and b of a·f + b too
    unsigned n_classes;   // classification: classes (0 for regression)
    unsigned n_outputs;   // output slots of the programs (0: the root's value)
};
GROVE_CHECK_LAYOUT(GroveFitParams);

// Mirrors FitResult in src/backend/cpu/fit.rs.
struct GroveFitResult {
    double sse_before, sse_after, a, b;
    unsigned constants, accepted;
};
GROVE_CHECK_LAYOUT(GroveFitResult);

__device__ __forceinline__ int grove_fit_sum(int p, int q) { return p * (p + 1) / 2 + q; }

// fit_plan: the constants fitted (≤ MAX_CONSTANTS), or -1 when the tree cannot be fitted.
// *total: its constant leaves.
__device__ int grove_fit_plan(const unsigned char* op, const float* value, const unsigned char* out, int len, unsigned n_features,
                              unsigned n_outputs, int* total) {
    int h = 0, consts = 0;
    *total = 0;
    if (n_outputs > GROVE_FIT_MAX_CLASSES) return -1;
    for (int i = len - 1; i >= 0; --i) {
        if (out[i] > n_outputs) return -1;
        if (!grove_is_op(op[i])) return -1;
        const int k = (int)grove_arity(op[i]);
        if (op[i] == GROVE_OP_VAR && !(value[i] >= 0.0f && (unsigned)value[i] < n_features)) return -1;
        if (op[i] == GROVE_OP_CONST) consts += 1;
        if (h < k) return -1;
        h = h - k + 1;
        if (h > GROVE_FIT_STACK) return -1;
    }
    *total = consts;
    if (h != 1) return -1;
    return consts < GROVE_FIT_MAX_CONSTANTS ? consts : GROVE_FIT_MAX_CONSTANTS;
}

__device__ __forceinline__ float grove_fit_sign(float v) { return v > 0.0f ? 1.0f : (v < 0.0f ? -1.0f : 0.0f); }

// partials: (∂r/∂a, ∂r/∂b) of r = op(a, b) for a built-in op.
__device__ __forceinline__ void grove_builtin_partials(unsigned op, float a, float b, float r, float& da, float& db) {
    da = 0.0f;
    db = 0.0f;
    switch (op) {
        case GROVE_OP_ADD: da = 1.0f; db = 1.0f; break;
        case GROVE_OP_SUB: da = 1.0f; db = -1.0f; break;
        case GROVE_OP_MUL: da = b; db = a; break;
        case GROVE_OP_DIV:
            if (b != 0.0f) { da = 1.0f / b; db = -(r / b); }
            break;
        case GROVE_OP_SDIV: da = 1.0f / b; db = -(r / b); break;
        case GROVE_OP_AQ: {
            const float s2 = 1.0f + b * b;
            da = 1.0f / sqrtf(s2);
            db = -((r * b) / s2);
            break;
        }
        case GROVE_OP_POW:
            if (a != 0.0f) { da = b * (r / a); db = r * grove_ln(fabsf(a)); }
            break;
        case GROVE_OP_SPOW:
            if (a > 0.0f) { da = b * (r / a); db = r * grove_ln(a); }
            else if (a < 0.0f) { da = b * (r / a); }
            break;
        case GROVE_OP_MAX:
        case GROVE_OP_MIN:
            if (r == a) da = 1.0f; else db = 1.0f;
            break;
        case GROVE_OP_SIN: da = grove_cos(a); break;
        case GROVE_OP_COS: da = -grove_sin(a); break;
        case GROVE_OP_TAN: da = 1.0f + r * r; break;
        case GROVE_OP_EXP: da = r; break;
        case GROVE_OP_LOG:
        case GROVE_OP_RLOG:
            if (a != 0.0f) da = 1.0f / a;
            break;
        case GROVE_OP_SLOG: da = 1.0f / a; break;
        case GROVE_OP_PLOG: da = grove_fit_sign(a) / (1.0f + fabsf(a)); break;
        case GROVE_OP_SQRT:
            if (r != 0.0f) da = grove_fit_sign(a) * (0.5f / r);
            break;
        case GROVE_OP_SSQRT: da = 0.5f / r; break;
        case GROVE_OP_ABS: da = grove_fit_sign(a); break;
        case GROVE_OP_NEG: da = -1.0f; break;
        case GROVE_OP_SQUARE: da = a + a; break;
        case GROVE_OP_CUBE: da = 3.0f * (a * a); break;
        case GROVE_OP_TANH: da = 1.0f - r * r; break;
        case GROVE_OP_SIGMOID: da = r * (1.0f - r); break;
        default: break;
    }
}

// chain: d·t, 0 where either is 0.
__device__ __forceinline__ float grove_chain(float d, float t) { return (d == 0.0f || t == 0.0f) ? 0.0f : d * t; }

// grove_user_partials(op, a, b, da, db): forward mode through a user operator's body, generated
// from src/program/ops/user.rs (false for a built-in).
GROVE_USER_PARTIALS

// r = op(a, b) (grove_apply's formula) and (∂r/∂a, ∂r/∂b), a user operator's through its body,
// in one dispatch: each case applies its formula, then the partials with the opcode a
// constant, so their switches fold away.
__device__ __forceinline__ float grove_apply_partials(unsigned op, float a, float b, float& da, float& db) {
    switch (op) {
#define GROVE_CASE(CODE, ARITY, EXPR)                                                        \
    case CODE: {                                                                             \
        const float r = EXPR;                                                                \
        if (!grove_user_partials(CODE, a, b, da, db)) grove_builtin_partials(CODE, a, b, r, da, db); \
        return r;                                                                            \
    }
        GROVE_FOR_EACH_OP(GROVE_CASE)
#undef GROVE_CASE
        default:
            da = 0.0f;
            db = 0.0f;
            return 0.0f;
    }
}

// Problem::point: the tree at `row` with fitted constants c; tangents in t[0..n_c); output
// nodes' sums and their tangents in ov[0..n_outputs), ot[0..n_outputs)[0..n_c).
//
// Only the tangents that can be nonzero are computed. Constant leaves are numbered in prefix
// order, so a subtree's constants are a range of numbers: when the walk (backwards) reaches
// node i, `k` counts the constants before it, and stack entry h covers [k_lo, hi[h]) with
// hi[h] kept per entry (the same in every thread). An entry's tangents outside its range are
// zero in the reference and are never read here. Every value is the reference's bits: where a
// constant lies in one child only, the other child's term is the reference's chain(d, 0) =
// 0.0f, added in the reference's order (x + 0.0f turns −0 into +0). The work per node is the
// number of fitted constants below it, not n_c.
__device__ float grove_fit_point(const unsigned char* op, const float* value, const unsigned char* out, int len, int total, int n_c,
                                 unsigned n_outputs, const float* c, const float* __restrict__ x, unsigned n_rows, unsigned row, float* t,
                                 float* ov, float (*ot)[GROVE_FIT_MAX_CONSTANTS]) {
    float sv[GROVE_FIT_STACK];
    float st[GROVE_FIT_STACK][GROVE_FIT_MAX_CONSTANTS];
    int hi[GROVE_FIT_STACK];  // entry h's constants end (its range begins where its left sibling's ends)
    for (unsigned k = 0; k < n_outputs; ++k) {
        ov[k] = 0.0f;
        for (int j = 0; j < n_c; ++j) ot[k][j] = 0.0f;
    }
    int h = 0, k = total;
    for (int i = len - 1; i >= 0; --i) {
        const unsigned code = op[i];
        const unsigned slot = out[i];
        if (code == GROVE_OP_VAR || code == GROVE_OP_CONST) {
            hi[h] = k;
            if (code == GROVE_OP_VAR) {
                sv[h] = x[(size_t)value[i] * n_rows + row];
            } else {
                --k;
                if (k < n_c) {
                    sv[h] = c[k];
                    st[h][k] = 1.0f;
                } else {
                    sv[h] = value[i];
                }
            }
            if (slot != 0) {
                ov[slot - 1] += sv[h];
                for (int j = 0; j < n_c; ++j) ot[slot - 1][j] += (j >= k && j < hi[h]) ? st[h][j] : 0.0f;
            }
            ++h;
            continue;
        }
        // Node i's constants: its first child's [k, mid), its second's [mid, end).
        const bool two = grove_arity(code) == 2u;
        const int mid = hi[h - 1], end = two ? hi[h - 2] : mid;
        const float a = sv[h - 1];
        const float b = two ? sv[h - 2] : 0.0f;
        float da, db;
        const float r = grove_apply_partials(code, a, b, da, db);
        const int ma = mid < n_c ? mid : n_c, me = end < n_c ? end : n_c;
        if (slot == 0) {
            if (two) {
                for (int j = k; j < ma; ++j) st[h - 2][j] = grove_chain(da, st[h - 1][j]) + 0.0f;
                for (int j = mid; j < me; ++j) st[h - 2][j] = 0.0f + grove_chain(db, st[h - 2][j]);
                sv[h - 2] = r;
                --h;
            } else {
                for (int j = k; j < ma; ++j) st[h - 1][j] = grove_chain(da, st[h - 1][j]);
                sv[h - 1] = r;
            }
        } else {
            // The node's value goes to its slot; its last child stays on the stack.
            ov[slot - 1] += r;
            if (two) {
                for (int j = 0; j < n_c; ++j) {
                    const float ta = (j >= k && j < mid) ? st[h - 1][j] : 0.0f;
                    const float tb = (j >= mid && j < end) ? st[h - 2][j] : 0.0f;
                    ot[slot - 1][j] += grove_chain(da, ta) + grove_chain(db, tb);
                }
                // The second child's entry stays, now covering the first child's constants too,
                // whose tangents in it are zero.
                for (int j = k; j < ma; ++j) st[h - 2][j] = 0.0f;
                --h;
            } else {
                for (int j = 0; j < n_c; ++j) ot[slot - 1][j] += grove_chain(da, (j >= k && j < mid) ? st[h - 1][j] : 0.0f);
            }
        }
    }
    for (int j = 0; j < n_c; ++j) t[j] = st[0][j];
    return sv[0];
}

// Problem::class_row into r (the row's record in the chunk: d[K][n_c], p[K], e[K], ce).
__device__ void grove_fit_class_row(const unsigned char* op, const float* value, const unsigned char* out, int len, int total, int n_c,
                                    unsigned n_classes, unsigned n_outputs, const float* c, const float* __restrict__ x, unsigned n_rows,
                                    unsigned row, unsigned label, double* r) {
    float t[GROVE_FIT_MAX_CONSTANTS];
    float ov[GROVE_FIT_MAX_CLASSES];
    float ot[GROVE_FIT_MAX_CLASSES][GROVE_FIT_MAX_CONSTANTS];
    const float f = grove_fit_point(op, value, out, len, total, n_c, n_outputs, c, x, n_rows, row, t, ov, ot);
    if (n_outputs == 0) {
        ov[0] = 0.0f;
        for (int j = 0; j < n_c; ++j) ot[0][j] = 0.0f;
        ov[1] = f;
        for (int j = 0; j < n_c; ++j) ot[1][j] = t[j];
    }
    const int K = (int)n_classes;
    double* d = r;
    double* p = r + K * n_c;
    double* e = p + K;
    float mx = __int_as_float(0xff800000);  // −∞
    bool fin = true;
    for (int k = 0; k < K; ++k) {
        mx = ov[k] > mx ? ov[k] : mx;
        fin = fin && isfinite(ov[k]);
    }
    float ex[GROVE_FIT_MAX_CLASSES];
    float s = 0.0f;
    for (int k = 0; k < K; ++k) {
        ex[k] = grove_exp(ov[k] - mx);
        s += ex[k];
    }
    const int y = (int)label;
    e[K] = fin ? ((double)mx - (double)ov[y]) + (double)grove_ln(s) : __longlong_as_double(0x7ff8000000000000ll);
    for (int k = 0; k < K; ++k) {
        p[k] = (double)ex[k] / (double)s;
        e[k] = k == y ? 1.0 - p[k] : -p[k];
    }
    for (int j = 0; j < n_c; ++j) {
        double v = 0.0;
        for (int k = 0; k < K; ++k) v += p[k] * (double)ot[k][j];
        for (int k = 0; k < K; ++k) d[k * n_c + j] = (double)ot[k][j] - v;
    }
}

// class_product: a classification row's value of the sum (pp, q) (m = n_c parameters).
__device__ __forceinline__ double grove_fit_class_product(const double* r, int K, int n_c, int pp, int q) {
    const double* d = r;
    const double* p = r + K * n_c;
    const double* e = p + K;
    if (pp == n_c && q == n_c) return e[K];
    double v = 0.0;
    for (int k = 0; k < K; ++k) v += pp == n_c ? e[k] * d[k * n_c + q] : (p[k] * d[k * n_c + pp]) * d[k * n_c + q];
    return v;
}

// pass_ok: S, the diagonal of JᵀJ and Jᵀr finite.
__device__ bool grove_fit_ok(const double* sums, int m) {
    bool ok = true;
    for (int p = 0; p <= m; ++p) ok = ok && isfinite(sums[grove_fit_sum(p, p)]) && isfinite(sums[grove_fit_sum(m, p)]);
    return ok;
}

// closed_form_scale.
__device__ void grove_fit_scale(const double* sums, int n_c, double* a_out, double* b_out) {
    const int fi = n_c, oi = n_c + 1, m = n_c + 2;
    const double n = sums[grove_fit_sum(oi, oi)];
    const double sf = sums[grove_fit_sum(oi, fi)];
    const double sff = sums[grove_fit_sum(fi, fi)];
    const double sfy = sums[grove_fit_sum(m, fi)] + sff;
    const double sy = sums[grove_fit_sum(m, oi)] + sf;
    const double var = sff - sf * (sf / n);
    const double cov = sfy - sf * (sy / n);
    const double a = var > 1e-12 * sff ? cov / var : 0.0;
    *a_out = a;
    *b_out = (sy - a * sf) / n;
}

// solve_step: (JᵀJ + λ·diag(JᵀJ + ε)) δ = Jᵀr by Cholesky; false if not positive definite.
__device__ bool grove_fit_solve(const double* sums, int m, double lambda, double* delta) {
    double l[GROVE_FIT_MAX_PARAMS][GROVE_FIT_MAX_PARAMS];
    double max_diag = 0.0;
    for (int p = 0; p < m; ++p) max_diag = fmax(max_diag, sums[grove_fit_sum(p, p)]);
    const double eps = 1e-9 * max_diag + 1e-300;
    for (int p = 0; p < m; ++p) {
        for (int q = 0; q <= p; ++q) {
            double s = sums[grove_fit_sum(p, q)];
            if (p == q) s = s + lambda * (s + eps);
            for (int k = 0; k < q; ++k) s -= l[p][k] * l[q][k];
            if (p == q) {
                if (!(s > 0.0)) return false;
                l[p][p] = sqrt(s);
            } else {
                l[p][q] = s / l[q][q];
            }
        }
    }
    double z[GROVE_FIT_MAX_PARAMS];
    for (int p = 0; p < m; ++p) {
        double s = sums[grove_fit_sum(m, p)];
        for (int k = 0; k < p; ++k) s -= l[p][k] * z[k];
        z[p] = s / l[p][p];
    }
    for (int p = m - 1; p >= 0; --p) {
        double s = z[p];
        for (int k = p + 1; k < m; ++k) s -= l[k][p] * delta[k];
        delta[p] = s / l[p][p];
    }
    return true;
}

// The block's state between passes (shared memory).
struct GroveFitState {
    double theta[GROVE_FIT_MAX_PARAMS];  // accepted parameters
    double trial[GROVE_FIT_MAX_PARAMS];  // parameters of the next pass
    double cur[GROVE_FIT_MAX_SUMS];      // sums at theta
    double sums[GROVE_FIT_MAX_SUMS];     // sums of the last pass
    double lambda;
    float c[GROVE_FIT_MAX_CONSTANTS];    // the pass's constants, f32
    int n_c, total, m, go;
    unsigned accepted;
};

// What a block fits its tree to.
struct GroveFitData {
    const float* __restrict__ x;          // [F][N]
    const float* __restrict__ y;          // regression: [N]
    const unsigned* __restrict__ labels;  // classification: [N]
};

// Problem::pass at s.trial (its constants in s.c) into s.sums: every thread of the block.
// Regression: each thread's row vector w = (J, r) in buf[tid * (MAX_PARAMS + 1) ..];
// classification: each row's record (grove_fit_class_row) in a chunk of fewer rows.
template <bool CLASSES>
static __device__ void grove_fit_pass(GroveFitState& s, double* buf, const unsigned char* op, const float* value, const unsigned char* out, int len,
                               const GroveFitParams& prm, const GroveFitData& data) {
    const unsigned tid = threadIdx.x, T = blockDim.x, n_rows = prm.n_rows;
    const bool scaling = prm.scaling != 0;
    const int m = s.m, n_c = s.n_c, n_sums = grove_fit_sum(m, m) + 1;
    const int K = (int)prm.n_classes;
    // Doubles per row and rows per chunk.
    const unsigned stride = CLASSES ? (unsigned)(K * (n_c + 2) + 1) : (unsigned)(GROVE_FIT_MAX_PARAMS + 1);
    const unsigned chunk = CLASSES ? (GROVE_FIT_BUF / stride < T ? GROVE_FIT_BUF / stride : T) : T;
    // Thread tid owns sums tid, tid + T, …: their (p, q) found once per pass, their running
    // values in registers (the loops over the owned sums are unrolled).
    double acc[GROVE_FIT_OWN];
    int own_p[GROVE_FIT_OWN], own_q[GROVE_FIT_OWN];
#pragma unroll
    for (int o = 0; o < GROVE_FIT_OWN; ++o) {
        acc[o] = 0.0;
        const int e = (int)tid + o * (int)T;
        int pp = 0;
        while (pp < m && grove_fit_sum(pp + 1, 0) <= e) ++pp;
        own_p[o] = pp;
        own_q[o] = e - grove_fit_sum(pp, 0);
    }
    const double a = scaling ? s.trial[n_c] : 1.0, b = scaling ? s.trial[n_c + 1] : 0.0;
    for (unsigned base = 0; base < n_rows; base += chunk) {
        const unsigned row = base + tid;
        if (tid < chunk && row < n_rows) {
            double* wr = buf + (size_t)tid * stride;
            if (CLASSES) {
                grove_fit_class_row(op, value, out, len, s.total, n_c, prm.n_classes, prm.n_outputs, s.c, data.x, n_rows, row, data.labels[row], wr);
            } else {
                float t[GROVE_FIT_MAX_CONSTANTS];
                float ov[1];
                float ot[1][GROVE_FIT_MAX_CONSTANTS];
                const float f = grove_fit_point(op, value, out, len, s.total, n_c, 0u, s.c, data.x, n_rows, row, t, ov, ot);
                for (int j = 0; j < n_c; ++j) wr[j] = a * (double)t[j];
                if (scaling) {
                    wr[n_c] = (double)f;
                    wr[n_c + 1] = 1.0;
                }
                wr[m] = (double)data.y[row] - (a * (double)f + b);
            }
        }
        __syncthreads();
        const unsigned count = n_rows - base < chunk ? n_rows - base : chunk;
        // Each owned sum over the chunk's rows in row order.
#pragma unroll
        for (int o = 0; o < GROVE_FIT_OWN; ++o) {
            if ((int)tid + o * (int)T < n_sums) {
                const int pp = own_p[o], q = own_q[o];
                double v = acc[o];
                if (CLASSES) {
                    for (unsigned r = 0; r < count; ++r) v += grove_fit_class_product(buf + (size_t)r * stride, K, n_c, pp, q);
                } else {
                    const double* wp = buf + pp;
                    const double* wq = buf + q;
                    for (unsigned r = 0; r < count; ++r) v += wp[(size_t)r * stride] * wq[(size_t)r * stride];
                }
                acc[o] = v;
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int o = 0; o < GROVE_FIT_OWN; ++o) {
        const int e = (int)tid + o * (int)T;
        if (e < n_sums) s.sums[e] = acc[o];
    }
    __syncthreads();
}

// One block per tree tree_ids[blockIdx.x]: fits its constants in `values` in place (only when
// a step was accepted) and writes what it did to results[blockIdx.x]. Static, so that its
// shared memory has internal linkage (a template's function-local statics are otherwise one
// object across every library that defines them: the host emulator loads several).
template <bool CLASSES>
static __device__ void grove_fit_block(const GroveFitParams& p, const unsigned* __restrict__ tree_ids, const unsigned char* __restrict__ ops,
                                float* __restrict__ values, const unsigned char* __restrict__ outs, const unsigned short* __restrict__ lens,
                                const GroveFitData& data, GroveFitResult* __restrict__ results) {
    __shared__ GroveFitState s;
    __shared__ double buf[GROVE_FIT_BUF];
    if (blockIdx.x >= p.n_trees) return;
    const unsigned t = tree_ids[blockIdx.x];
    const size_t row0 = (size_t)t * p.max_len;
    const unsigned char* op = ops + row0;
    const unsigned char* out = outs + row0;
    float* value = values + row0;
    const int len = lens[t];
    const bool scaling = !CLASSES && p.scaling != 0;
    const unsigned tid = threadIdx.x;
    if (tid == 0) {
        int total = 0;
        // Classification: the shapes fit_class_tree accepts (its labels are checked on upload).
        const bool shape = !CLASSES || (p.n_classes <= GROVE_FIT_MAX_CLASSES && (p.n_outputs == 0 ? p.n_classes == 2 : p.n_outputs == p.n_classes));
        const int n_c = p.n_rows == 0 || !shape ? -1 : grove_fit_plan(op, value, out, len, p.n_features, CLASSES ? p.n_outputs : 0u, &total);
        s.go = n_c >= 0 && (n_c > 0 || scaling);
        s.n_c = n_c < 0 ? 0 : n_c;
        s.total = total;
        s.m = s.n_c + (scaling ? 2 : 0);
        s.accepted = 0;
        s.lambda = GROVE_FIT_LAMBDA_START;
        int k = 0;
        for (int i = 0; i < len && k < s.n_c; ++i)
            if (op[i] == GROVE_OP_CONST) s.trial[k++] = (double)value[i];
        if (scaling) {
            s.trial[s.n_c] = 1.0;
            s.trial[s.n_c + 1] = 0.0;
        }
        for (int j = 0; j < s.n_c; ++j) s.c[j] = (float)s.trial[j];
    }
    __syncthreads();
    GroveFitResult res = {__longlong_as_double(0x7ff8000000000000ll), __longlong_as_double(0x7ff8000000000000ll), 1.0, 0.0, 0u, 0u};
    if (!s.go) {
        if (tid == 0) results[blockIdx.x] = res;
        return;
    }
    const int m = s.m, n_c = s.n_c, s_m = grove_fit_sum(m, m), n_sums = s_m + 1;
    grove_fit_pass<CLASSES>(s, buf, op, value, out, len, p, data);
    if (tid == 0) {
        s.go = grove_fit_ok(s.sums, m);
        if (s.go && scaling) {
            grove_fit_scale(s.sums, n_c, &s.trial[n_c], &s.trial[n_c + 1]);
        }
    }
    __syncthreads();
    if (s.go && scaling) {
        grove_fit_pass<CLASSES>(s, buf, op, value, out, len, p, data);
        if (tid == 0) s.go = grove_fit_ok(s.sums, m);
        __syncthreads();
    }
    if (!s.go) {
        if (tid == 0) results[blockIdx.x] = res;
        return;
    }
    if (tid == 0) {
        for (int i = 0; i < m; ++i) s.theta[i] = s.trial[i];
        for (int e = 0; e < n_sums; ++e) s.cur[e] = s.sums[e];
    }
    __syncthreads();
    const double sse_before = s.cur[s_m];
    for (unsigned step = 0; step < p.steps; ++step) {
        if (tid == 0) {
            s.go = 0;
            if (!(s.lambda > GROVE_FIT_LAMBDA_STOP)) {
                double delta[GROVE_FIT_MAX_PARAMS];
                if (grove_fit_solve(s.cur, m, s.lambda, delta)) {
                    for (int i = 0; i < m; ++i) s.trial[i] = s.theta[i] + delta[i];
                    for (int j = 0; j < n_c; ++j) s.c[j] = (float)s.trial[j];
                    s.go = 1;
                } else {
                    s.lambda *= 10.0;
                    s.go = 2;  // no pass this step
                }
            }
        }
        __syncthreads();
        if (s.go == 0) break;
        if (s.go == 1) {
            grove_fit_pass<CLASSES>(s, buf, op, value, out, len, p, data);
            if (tid == 0) {
                if (grove_fit_ok(s.sums, m) && s.sums[s_m] < s.cur[s_m]) {
                    for (int i = 0; i < m; ++i) s.theta[i] = s.trial[i];
                    for (int e = 0; e < n_sums; ++e) s.cur[e] = s.sums[e];
                    s.lambda = fmax(s.lambda * 0.1, GROVE_FIT_LAMBDA_MIN);
                    s.accepted += 1;
                } else {
                    s.lambda *= 10.0;
                }
            }
        }
        __syncthreads();
    }
    if (tid == 0) {
        if (s.accepted > 0) {
            int k = 0;
            for (int i = 0; i < len && k < n_c; ++i)
                if (op[i] == GROVE_OP_CONST) value[i] = (float)s.theta[k++];
        }
        res.sse_before = sse_before;
        res.sse_after = s.cur[s_m];
        res.a = scaling ? s.theta[n_c] : 1.0;
        res.b = scaling ? s.theta[n_c + 1] : 0.0;
        res.constants = (unsigned)n_c;
        res.accepted = s.accepted;
        results[blockIdx.x] = res;
    }
}

// Regression: ops, values, outs [P x L], lens [P]: the population; x [F][N], y [N]: the rows
// fitted on. p.n_classes and p.n_outputs are 0.
extern "C" __global__ void grove_fit_constants(const GroveFitParams p, const unsigned* __restrict__ tree_ids,
                                               const unsigned char* __restrict__ ops, float* __restrict__ values,
                                               const unsigned char* __restrict__ outs, const unsigned short* __restrict__ lens,
                                               const float* __restrict__ x, const float* __restrict__ y,
                                               GroveFitResult* __restrict__ results) {
    const GroveFitData data = {x, y, nullptr};
    grove_fit_block<false>(p, tree_ids, ops, values, outs, lens, data, results);
}

// Classification: as grove_fit_constants with labels [N] (each < p.n_classes) for y; the
// programs have p.n_outputs slots (p.n_classes), or 0 for two classes' single output.
extern "C" __global__ void grove_fit_class_constants(const GroveFitParams p, const unsigned* __restrict__ tree_ids,
                                                     const unsigned char* __restrict__ ops, float* __restrict__ values,
                                                     const unsigned char* __restrict__ outs, const unsigned short* __restrict__ lens,
                                                     const float* __restrict__ x, const unsigned* __restrict__ labels,
                                                     GroveFitResult* __restrict__ results) {
    const GroveFitData data = {x, nullptr, labels};
    grove_fit_block<true>(p, tree_ids, ops, values, outs, lens, data, results);
}
