// fit.cu: numeric constants fitted by Levenberg–Marquardt, one block per tree, the whole fit
// in one launch: grove_fit_constants for regression (squared error, optionally with linear
// scaling), grove_fit_class_constants for classification (generalised Gauss–Newton on the
// softmax cross-entropy). Twin of src/backend/cpu/fit.rs (fit_constants,
// fit_class_constants), operation for operation:
// the same forward-mode tangents through the interpreter's f32 operations (grove_apply), the
// same f64 sums of w_p·w_q (within each part of GROVE_FIT_PART rows in row order, the parts'
// sums added in order), the same Cholesky solve and the same decisions, so the fitted
// constants are the CPU's bits (compiled with --fmad=false). Data of more than one part takes
// the split fit at the end of this file (a block per part of every tree).
//
// The tree is decoded once per fit (grove_fit_decode: each node's opcode, operand and the ranges
// of constants below it, in shared memory), so a row's walk reads one 8-byte word a node.
//
// A pass over the rows: the block takes a chunk of rows at a time (T, or GROVE_FIT_ROWS a
// thread when the rows fill more than one a thread: one dispatch a node for them all); each
// thread evaluates its rows with tangents and writes each row's vector w = (J, r) to shared
// memory; then thread k sums products k, k + T, … of the (m + 1)(m + 2) / 2 products over the
// chunk's rows in order (no chunk crosses a part's end), so each part's sum runs over its rows
// in row order whatever the chunk is.
// Classification keeps more per row (each logit's tangents less their softmax mean, the
// softmax, the residuals and the cross-entropy), so a chunk holds fewer rows (GROVE_FIT_BUF
// doubles in all, at most T) and thread k computes each row's value of sum k from them. Between
// passes thread 0 takes the step (the solve, the decision, λ); the block follows its decisions
// through shared memory.

#include "grove_common.h"

#define GROVE_FIT_MAX_CONSTANTS 16   // constant leaves fitted per tree (the first, in prefix order)
#define GROVE_FIT_MAX_CLASSES 16     // classes of a classification fit at most
#define GROVE_FIT_STACK 32           // values the walk may hold at once
#define GROVE_FIT_MAX_PARAMS 18      // constants, then a and b with linear scaling
#define GROVE_FIT_MAX_SUMS 190       // (MAX_PARAMS + 1)(MAX_PARAMS + 2) / 2
#define GROVE_FIT_THREADS 128        // most threads a block may have
#define GROVE_FIT_MIN_THREADS 32     // fewest
#define GROVE_FIT_OWN ((GROVE_FIT_MAX_SUMS + GROVE_FIT_MIN_THREADS - 1) / GROVE_FIT_MIN_THREADS)
#define GROVE_FIT_ROWS 2             // regression: rows a thread walks at once (one dispatch a node) when the rows fill more than one per thread
#define GROVE_FIT_NODES 512          // nodes of a tree decoded in shared memory; longer trees' in the scratch array
#define GROVE_FIT_PART 4096          // rows of a part: each sum is its parts' sums added in order
#define GROVE_FIT_SPLIT_BYTES 4096   // bytes the host gives each tree's GroveFitSplit
// Four blocks of GROVE_FIT_THREADS an SM: what the shared memory allows; registers capped to
// match (measured on an H200: 2-3 % faster than the compiler's own 116 registers).
#define GROVE_FIT_BOUNDS __launch_bounds__(GROVE_FIT_THREADS, 4)
#define GROVE_FIT_BUF (GROVE_FIT_THREADS * GROVE_FIT_ROWS * (GROVE_FIT_MAX_PARAMS + 1))  // doubles of a pass's row chunk
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

// grove_apply_partials for K points at once: one dispatch, each case's formula and partials
// applied to every point.
template <int K>
__device__ __forceinline__ void grove_apply_partials_k(unsigned op, const float (&va)[K], const float (&vb)[K], float (&r)[K], float (&da)[K],
                                                       float (&db)[K]) {
    switch (op) {
#define GROVE_CASE(CODE, ARITY, EXPR)                                                                    \
    case CODE:                                                                                           \
        _Pragma("unroll") for (int k = 0; k < K; ++k) {                                                  \
            const float a = va[k], b = vb[k];                                                            \
            (void)b;                                                                                     \
            r[k] = EXPR;                                                                                 \
            if (!grove_user_partials(CODE, a, b, da[k], db[k])) grove_builtin_partials(CODE, a, b, r[k], da[k], db[k]); \
        }                                                                                                \
        break;
        GROVE_FOR_EACH_OP(GROVE_CASE)
#undef GROVE_CASE
        default:
#pragma unroll
            for (int k = 0; k < K; ++k) {
                r[k] = 0.0f;
                da[k] = 0.0f;
                db[k] = 0.0f;
            }
    }
}

// A node of the tree being fitted, decoded once per fit (grove_fit_decode) for every row's walk.
// Constant leaves are numbered in prefix order, so a subtree's constants are a range of numbers,
// clipped here to the fitted ones [0, n_c).
struct GroveFitNode {
    unsigned char code;  // opcode: GROVE_OP_VAR, GROVE_OP_CONST or a function
    unsigned char slot;  // output slot + 1, or 0
    unsigned char lo;    // a fitted constant leaf: its number (else GROVE_FIT_NONE); a function: its first child's constants [lo, mid)
    unsigned char mid;   // a function: its second child's constants [mid, end)
    unsigned word;       // a variable: its feature; an unfitted constant: its bits; a function: end | two arguments << 8
};
#define GROVE_FIT_NONE 255u

// Decodes a tree grove_fit_plan accepted (`total` constant leaves, the first n_c fitted) into
// nodes[0..len): the ranges of constants the walk keeps, by the walk's own stack of range ends.
__device__ void grove_fit_decode(const unsigned char* op, const float* value, const unsigned char* out, int len, int total, int n_c,
                                 GroveFitNode* nodes) {
    int hi[GROVE_FIT_STACK];  // entry h's constants end (its range begins where its left sibling's ends)
    int h = 0, k = total;
    for (int i = len - 1; i >= 0; --i) {
        GroveFitNode nd;
        nd.code = op[i];
        nd.slot = out[i];
        nd.mid = 0;
        if (nd.code == GROVE_OP_VAR || nd.code == GROVE_OP_CONST) {
            hi[h] = k;
            nd.lo = (unsigned char)GROVE_FIT_NONE;
            if (nd.code == GROVE_OP_VAR) {
                nd.word = (unsigned)value[i];
            } else {
                --k;
                if (k < n_c) {
                    nd.lo = (unsigned char)k;
                    nd.word = 0u;
                } else {
                    nd.word = __float_as_uint(value[i]);
                }
            }
            ++h;
        } else {
            const bool two = grove_arity(nd.code) == 2u;
            const int mid = hi[h - 1], end = two ? hi[h - 2] : mid;
            nd.lo = (unsigned char)(k < n_c ? k : n_c);
            nd.mid = (unsigned char)(mid < n_c ? mid : n_c);
            nd.word = (unsigned)(end < n_c ? end : n_c) | (two ? 256u : 0u);
            // Two arguments: entry h - 2 keeps its end and now begins where the first child's did.
            if (two) --h;
        }
        nodes[i] = nd;
    }
}

// Problem::point for K rows at once: the decoded tree at rows row[0..K) with fitted constants
// c; its values in f[k], the tangents in t[j][k] (j < n_c). With SLOTS (K = 1), the output
// nodes' sums and their tangents in ov[0..n_outputs), ot[0..n_outputs)[0..n_c).
//
// Only the tangents that can be nonzero are computed. The entries on the walk's stack cover
// disjoint ranges of constants, so one array T[0..n_c) holds every entry's tangents: T[j] is
// the tangent of the entry whose range holds j. The reference's tangents outside an entry's
// range are zero and are never read here. Every value is the reference's bits: where a constant
// lies in one child only, the other child's term is the reference's chain(d, 0) = 0.0f, added
// in the reference's order (x + 0.0f turns −0 into +0). The work per node is the number of
// fitted constants below it, not n_c; the dispatch is shared by the K rows.
template <int K, bool SLOTS>
__device__ void grove_fit_point(const GroveFitNode* nodes, int len, int n_c, unsigned n_outputs, const float* c, const float* __restrict__ x,
                                unsigned n_rows, const unsigned (&row)[K], float (&f)[K], float (&t)[GROVE_FIT_MAX_CONSTANTS][K], float* ov,
                                float (*ot)[GROVE_FIT_MAX_CONSTANTS]) {
    float sv[GROVE_FIT_STACK][K];
    float T[GROVE_FIT_MAX_CONSTANTS][K];
    if (SLOTS) {
        for (unsigned s = 0; s < n_outputs; ++s) {
            ov[s] = 0.0f;
            for (int j = 0; j < n_c; ++j) ot[s][j] = 0.0f;
        }
    }
    int h = 0;
    for (int i = len - 1; i >= 0; --i) {
        const GroveFitNode nd = nodes[i];
        const int lo = nd.lo;
        if (nd.code <= GROVE_OP_CONST) {
            if (nd.code == GROVE_OP_VAR) {
                const float* xf = x + (size_t)nd.word * n_rows;
#pragma unroll
                for (int k = 0; k < K; ++k) sv[h][k] = xf[row[k]];
            } else if (lo != (int)GROVE_FIT_NONE) {
#pragma unroll
                for (int k = 0; k < K; ++k) {
                    sv[h][k] = c[lo];
                    T[lo][k] = 1.0f;
                }
            } else {
#pragma unroll
                for (int k = 0; k < K; ++k) sv[h][k] = __uint_as_float(nd.word);
            }
            if (SLOTS && nd.slot != 0) {
                ov[nd.slot - 1] += sv[h][0];
                for (int j = 0; j < n_c; ++j) ot[nd.slot - 1][j] += j == lo ? T[j][0] : 0.0f;
            }
            ++h;
            continue;
        }
        // The node's constants: its first child's [lo, mid), its second's [mid, end).
        const bool two = nd.word >= 256u;
        const int mid = nd.mid, end = (int)(nd.word & 255u);
        float a[K], b[K], r[K], da[K], db[K];
#pragma unroll
        for (int k = 0; k < K; ++k) {
            a[k] = sv[h - 1][k];
            b[k] = two ? sv[h - 2][k] : 0.0f;
        }
        grove_apply_partials_k<K>(nd.code, a, b, r, da, db);
        if (!SLOTS || nd.slot == 0) {
            if (two) {
                for (int j = lo; j < mid; ++j) {
#pragma unroll
                    for (int k = 0; k < K; ++k) T[j][k] = grove_chain(da[k], T[j][k]) + 0.0f;
                }
                for (int j = mid; j < end; ++j) {
#pragma unroll
                    for (int k = 0; k < K; ++k) T[j][k] = 0.0f + grove_chain(db[k], T[j][k]);
                }
#pragma unroll
                for (int k = 0; k < K; ++k) sv[h - 2][k] = r[k];
                --h;
            } else {
                for (int j = lo; j < mid; ++j) {
#pragma unroll
                    for (int k = 0; k < K; ++k) T[j][k] = grove_chain(da[k], T[j][k]);
                }
#pragma unroll
                for (int k = 0; k < K; ++k) sv[h - 1][k] = r[k];
            }
        } else {
            // The node's value goes to its slot; its last child stays on the stack.
            const unsigned s = nd.slot - 1u;
            ov[s] += r[0];
            if (two) {
                for (int j = 0; j < n_c; ++j) {
                    const float ta = (j >= lo && j < mid) ? T[j][0] : 0.0f;
                    const float tb = (j >= mid && j < end) ? T[j][0] : 0.0f;
                    ot[s][j] += grove_chain(da[0], ta) + grove_chain(db[0], tb);
                }
                // The second child's entry stays, now covering the first child's constants too,
                // whose tangents in it are zero.
                for (int j = lo; j < mid; ++j) T[j][0] = 0.0f;
                --h;
            } else {
                for (int j = 0; j < n_c; ++j) ot[s][j] += grove_chain(da[0], (j >= lo && j < mid) ? T[j][0] : 0.0f);
            }
        }
    }
    for (int j = 0; j < n_c; ++j) {
#pragma unroll
        for (int k = 0; k < K; ++k) t[j][k] = T[j][k];
    }
#pragma unroll
    for (int k = 0; k < K; ++k) f[k] = sv[0][k];
}

// Problem::class_row into r (the row's record in the chunk: d[K][n_c], p[K], e[K], ce), each
// slot's offset (offset [max(1, n_outputs)][N], the linear terms of the inputs; may be null)
// added to its logit in f32 as the classification fitness adds it.
__device__ void grove_fit_class_row(const GroveFitNode* nodes, int len, int n_c, unsigned n_classes, unsigned n_outputs, const float* c,
                                    const float* __restrict__ x, const float* __restrict__ offset, unsigned n_rows, unsigned row,
                                    unsigned label, double* r) {
    float t[GROVE_FIT_MAX_CONSTANTS][1];
    float ov[GROVE_FIT_MAX_CLASSES];
    float ot[GROVE_FIT_MAX_CLASSES][GROVE_FIT_MAX_CONSTANTS];
    const unsigned rows[1] = {row};
    float f[1];
    grove_fit_point<1, true>(nodes, len, n_c, n_outputs, c, x, n_rows, rows, f, t, ov, ot);
    const int K = (int)n_classes;
    if (n_outputs == 0) {
        ov[0] = 0.0f;
        for (int j = 0; j < n_c; ++j) ot[0][j] = 0.0f;
        ov[1] = offset ? f[0] + offset[row] : f[0];
        for (int j = 0; j < n_c; ++j) ot[1][j] = t[j][0];
    } else if (offset) {
        for (int k = 0; k < K; ++k) ov[k] += offset[(size_t)k * n_rows + row];
    }
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
    const float* __restrict__ offset;     // classification: [max(1, n_outputs)][N] under the outputs, or null
};

// A regression pass's rows base + tid + k·T (k < K) of a chunk into buf: each row's vector
// w = (a·J, f, 1 with linear scaling, r) at buf[(row − base) · stride]. Rows from `end` on
// (the part's end) repeat the part's last row and are not written.
template <int K>
static __device__ void grove_fit_rows(const GroveFitState& s, double* buf, const GroveFitNode* nodes, int len, const GroveFitData& data,
                                      unsigned n_rows, unsigned end, unsigned base, unsigned stride) {
    const unsigned tid = threadIdx.x, T = blockDim.x;
    const int n_c = s.n_c, m = s.m;
    const bool scaling = m > n_c;
    const double a = scaling ? s.trial[n_c] : 1.0, b = scaling ? s.trial[n_c + 1] : 0.0;
    unsigned rows[K];
#pragma unroll
    for (int k = 0; k < K; ++k) {
        const unsigned row = base + tid + (unsigned)k * T;
        rows[k] = row < end ? row : end - 1u;
    }
    float t[GROVE_FIT_MAX_CONSTANTS][K];
    float f[K];
    grove_fit_point<K, false>(nodes, len, n_c, 0u, s.c, data.x, n_rows, rows, f, t, nullptr, nullptr);
#pragma unroll
    for (int k = 0; k < K; ++k) {
        const unsigned row = base + tid + (unsigned)k * T;
        if (row < end) {
            double* wr = buf + (size_t)(tid + (unsigned)k * T) * stride;
            for (int j = 0; j < n_c; ++j) wr[j] = a * (double)t[j][k];
            if (scaling) {
                wr[n_c] = (double)f[k];
                wr[n_c + 1] = 1.0;
            }
            wr[m] = (double)data.y[row] - (a * (double)f[k] + b);
        }
    }
}

// Problem::part over rows [lo, hi): each part of GROVE_FIT_PART rows (counted from lo) summed
// from zero in row order, each thread's owned sums then added to (ADD) or written to (one part)
// out[e] (every thread of the block, at s.trial, its constants in s.c, over the tree decoded
// in `nodes`). Regression: a chunk is one or GROVE_FIT_ROWS rows a thread, thread tid's rows
// tid, tid + T, …, each row's vector w (grove_fit_rows) in buf[row * (MAX_PARAMS + 1) ..];
// classification: each row's record (grove_fit_class_row) in a chunk of at most T rows. No
// chunk crosses a part's end. Thread tid owns sums tid, tid + T, … (own_p, own_q: their (p, q)).
template <bool CLASSES, bool ADD>
static __device__ __forceinline__ void grove_fit_parts(const GroveFitState& s, double* buf, const GroveFitNode* nodes, int len,
                                                       const GroveFitParams& prm, const GroveFitData& data, unsigned lo, unsigned hi,
                                                       const int* own_p, const int* own_q, double* out) {
    const unsigned tid = threadIdx.x, T = blockDim.x, n_rows = prm.n_rows;
    const int m = s.m, n_c = s.n_c, n_sums = grove_fit_sum(m, m) + 1;
    const int K = (int)prm.n_classes;
    // Doubles per row.
    const unsigned stride = CLASSES ? (unsigned)(K * (n_c + 2) + 1) : (unsigned)(GROVE_FIT_MAX_PARAMS + 1);
    double acc[GROVE_FIT_OWN];
#pragma unroll
    for (int o = 0; o < GROVE_FIT_OWN; ++o) acc[o] = 0.0;
    unsigned part_end = hi - lo > GROVE_FIT_PART ? lo + GROVE_FIT_PART : hi;
    // Regression: GROVE_FIT_ROWS rows a thread where the part's rows fill more than one a
    // thread (fewer rows keep more threads busy with one each).
    unsigned per_thread = CLASSES || part_end - lo <= T ? 1u : (unsigned)GROVE_FIT_ROWS;
    for (unsigned base = lo; base < hi;) {
        const unsigned chunk = CLASSES ? (GROVE_FIT_BUF / stride < T ? GROVE_FIT_BUF / stride : T) : T * per_thread;
        const unsigned count = part_end - base < chunk ? part_end - base : chunk;
        if (CLASSES) {
            const unsigned row = base + tid;
            if (tid < count)
                grove_fit_class_row(nodes, len, n_c, prm.n_classes, prm.n_outputs, s.c, data.x, data.offset, n_rows, row, data.labels[row],
                                    buf + (size_t)tid * stride);
        } else if (tid < count) {
            if (per_thread == GROVE_FIT_ROWS)
                grove_fit_rows<GROVE_FIT_ROWS>(s, buf, nodes, len, data, n_rows, part_end, base, stride);
            else
                grove_fit_rows<1>(s, buf, nodes, len, data, n_rows, part_end, base, stride);
        }
        __syncthreads();
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
        base += count;
        if (base == part_end) {
#pragma unroll
            for (int o = 0; o < GROVE_FIT_OWN; ++o) {
                const int e = (int)tid + o * (int)T;
                if (e < n_sums) out[e] = ADD ? out[e] + acc[o] : acc[o];
                acc[o] = 0.0;
            }
            part_end = hi - base > GROVE_FIT_PART ? base + GROVE_FIT_PART : hi;
            per_thread = CLASSES || part_end - base <= T ? 1u : (unsigned)GROVE_FIT_ROWS;
        }
    }
}

// The (p, q) of the sums thread tid owns: tid, tid + T, … (found once per pass).
static __device__ __forceinline__ void grove_fit_owned(int m, int* own_p, int* own_q) {
#pragma unroll
    for (int o = 0; o < GROVE_FIT_OWN; ++o) {
        const int e = (int)threadIdx.x + o * (int)blockDim.x;
        int pp = 0;
        while (pp < m && grove_fit_sum(pp + 1, 0) <= e) ++pp;
        own_p[o] = pp;
        own_q[o] = e - grove_fit_sum(pp, 0);
    }
}

// Problem::pass at s.trial into s.sums: the parts' sums (grove_fit_parts) added in order.
template <bool CLASSES>
static __device__ void grove_fit_pass(GroveFitState& s, double* buf, const GroveFitNode* nodes, int len, const GroveFitParams& prm,
                                      const GroveFitData& data) {
    const int n_sums = grove_fit_sum(s.m, s.m) + 1;
    int own_p[GROVE_FIT_OWN], own_q[GROVE_FIT_OWN];
    grove_fit_owned(s.m, own_p, own_q);
    for (int e = (int)threadIdx.x; e < n_sums; e += (int)blockDim.x) s.sums[e] = 0.0;
    grove_fit_parts<CLASSES, true>(s, buf, nodes, len, prm, data, 0u, prm.n_rows, own_p, own_q, s.sums);
    __syncthreads();
}

// The steps between passes, one thread, shared by grove_fit_block and the split fit.

// The start's pass accepted as where the steps begin: θ and the sums at θ.
static __device__ __forceinline__ void grove_fit_begin(GroveFitState& s) {
    for (int i = 0; i < s.m; ++i) s.theta[i] = s.trial[i];
    for (int e = 0; e <= grove_fit_sum(s.m, s.m); ++e) s.cur[e] = s.sums[e];
}

// A step's solve at θ: the trial parameters (and their f32 constants) and true; false, with λ
// grown tenfold, where the damped system is not positive definite (the step takes no pass).
static __device__ __forceinline__ bool grove_fit_try(GroveFitState& s) {
    double delta[GROVE_FIT_MAX_PARAMS];
    if (!grove_fit_solve(s.cur, s.m, s.lambda, delta)) {
        s.lambda *= 10.0;
        return false;
    }
    for (int i = 0; i < s.m; ++i) s.trial[i] = s.theta[i] + delta[i];
    for (int j = 0; j < s.n_c; ++j) s.c[j] = (float)s.trial[j];
    return true;
}

// After the pass at a step's trial parameters (its sums in s.sums): accepted where finite and
// S fell (θ and its sums follow, λ shrinks, one more accepted), else λ grows.
static __device__ __forceinline__ void grove_fit_decide(GroveFitState& s) {
    const int m = s.m, s_m = grove_fit_sum(m, m);
    if (grove_fit_ok(s.sums, m) && s.sums[s_m] < s.cur[s_m]) {
        for (int i = 0; i < m; ++i) s.theta[i] = s.trial[i];
        for (int e = 0; e <= s_m; ++e) s.cur[e] = s.sums[e];
        s.lambda = fmax(s.lambda * 0.1, GROVE_FIT_LAMBDA_MIN);
        s.accepted += 1;
    } else {
        s.lambda *= 10.0;
    }
}

// The fit's result; the accepted constants written back into the tree (op, value: its row of
// len nodes) where a step was accepted.
static __device__ __forceinline__ GroveFitResult grove_fit_result(const GroveFitState& s, double sse_before, bool scaling,
                                                                  const unsigned char* op, float* value, int len) {
    const int n_c = s.n_c;
    if (s.accepted > 0) {
        int k = 0;
        for (int i = 0; i < len && k < n_c; ++i)
            if (op[i] == GROVE_OP_CONST) value[i] = (float)s.theta[k++];
    }
    GroveFitResult res;
    res.sse_before = sse_before;
    res.sse_after = s.cur[grove_fit_sum(s.m, s.m)];
    res.a = scaling ? s.theta[n_c] : 1.0;
    res.b = scaling ? s.theta[n_c + 1] : 0.0;
    res.constants = (unsigned)n_c;
    res.accepted = s.accepted;
    return res;
}

// The result of a tree not fitted (its start not finite, or a shape the fit cannot take).
static __device__ __forceinline__ GroveFitResult grove_fit_unfitted() {
    const GroveFitResult res = {__longlong_as_double(0x7ff8000000000000ll), __longlong_as_double(0x7ff8000000000000ll), 1.0, 0.0, 0u, 0u};
    return res;
}

// A fit's start (one thread): the plan (s.go: the tree can be fitted), the parameters of the
// first pass and the tree decoded into `nodes`.
template <bool CLASSES>
static __device__ void grove_fit_init(const GroveFitParams& p, const unsigned char* op, const float* value, const unsigned char* out, int len,
                                      GroveFitState& s, GroveFitNode* nodes) {
    const bool scaling = !CLASSES && p.scaling != 0;
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
    if (s.go) grove_fit_decode(op, value, out, len, total, s.n_c, nodes);
}

// One block per tree tree_ids[blockIdx.x]: fits its constants in `values` in place (only when
// a step was accepted) and writes what it did to results[blockIdx.x]. Static, so that its
// shared memory has internal linkage (a template's function-local statics are otherwise one
// object across every library that defines them: the host emulator loads several).
template <bool CLASSES>
static __device__ void grove_fit_block(const GroveFitParams& p, const unsigned* __restrict__ tree_ids, const unsigned char* __restrict__ ops,
                                float* __restrict__ values, const unsigned char* __restrict__ outs, const unsigned short* __restrict__ lens,
                                const GroveFitData& data, GroveFitResult* __restrict__ results, GroveFitNode* __restrict__ scratch) {
    __shared__ GroveFitState s;
    __shared__ double buf[GROVE_FIT_BUF];
    __shared__ GroveFitNode shared_nodes[GROVE_FIT_NODES];
    if (blockIdx.x >= p.n_trees) return;
    const unsigned t = tree_ids[blockIdx.x];
    const size_t row0 = (size_t)t * p.max_len;
    const unsigned char* op = ops + row0;
    const unsigned char* out = outs + row0;
    float* value = values + row0;
    const int len = lens[t];
    const bool scaling = !CLASSES && p.scaling != 0;
    const unsigned tid = threadIdx.x;
    GroveFitNode* nodes = len <= GROVE_FIT_NODES ? shared_nodes : scratch + (size_t)blockIdx.x * p.max_len;
    if (tid == 0) grove_fit_init<CLASSES>(p, op, value, out, len, s, nodes);
    __syncthreads();
    if (!s.go) {
        if (tid == 0) results[blockIdx.x] = grove_fit_unfitted();
        return;
    }
    const int m = s.m, n_c = s.n_c;
    grove_fit_pass<CLASSES>(s, buf, nodes, len, p, data);
    if (tid == 0) {
        s.go = grove_fit_ok(s.sums, m);
        if (s.go && scaling) {
            grove_fit_scale(s.sums, n_c, &s.trial[n_c], &s.trial[n_c + 1]);
        }
    }
    __syncthreads();
    if (s.go && scaling) {
        grove_fit_pass<CLASSES>(s, buf, nodes, len, p, data);
        if (tid == 0) s.go = grove_fit_ok(s.sums, m);
        __syncthreads();
    }
    if (!s.go) {
        if (tid == 0) results[blockIdx.x] = grove_fit_unfitted();
        return;
    }
    if (tid == 0) grove_fit_begin(s);
    __syncthreads();
    const double sse_before = s.cur[grove_fit_sum(m, m)];
    for (unsigned step = 0; step < p.steps; ++step) {
        if (tid == 0) s.go = s.lambda > GROVE_FIT_LAMBDA_STOP ? 0 : grove_fit_try(s) ? 1 : 2;  // 2: no pass this step
        __syncthreads();
        if (s.go == 0) break;
        if (s.go == 1) {
            grove_fit_pass<CLASSES>(s, buf, nodes, len, p, data);
            if (tid == 0) grove_fit_decide(s);
        }
        __syncthreads();
    }
    if (tid == 0) results[blockIdx.x] = grove_fit_result(s, sse_before, scaling, op, value, len);
}

// Regression: ops, values, outs [P x L], lens [P]: the population; x [F][N], y [N]: the rows
// fitted on; scratch [n_trees x L]: the decoded nodes of trees longer than GROVE_FIT_NODES
// (unread, and may be null, when L is not). p.n_classes and p.n_outputs are 0.
extern "C" __global__ void GROVE_FIT_BOUNDS grove_fit_constants(const GroveFitParams p, const unsigned* __restrict__ tree_ids,
                                               const unsigned char* __restrict__ ops, float* __restrict__ values,
                                               const unsigned char* __restrict__ outs, const unsigned short* __restrict__ lens,
                                               const float* __restrict__ x, const float* __restrict__ y,
                                               GroveFitResult* __restrict__ results, GroveFitNode* __restrict__ scratch) {
    const GroveFitData data = {x, y, nullptr, nullptr};
    grove_fit_block<false>(p, tree_ids, ops, values, outs, lens, data, results, scratch);
}

// Classification: as grove_fit_constants with labels [N] (each < p.n_classes) for y; the
// programs have p.n_outputs slots (p.n_classes), or 0 for two classes' single output; offset
// [max(1, p.n_outputs)][N] is added to the outputs, or null.
extern "C" __global__ void GROVE_FIT_BOUNDS grove_fit_class_constants(const GroveFitParams p, const unsigned* __restrict__ tree_ids,
                                                     const unsigned char* __restrict__ ops, float* __restrict__ values,
                                                     const unsigned char* __restrict__ outs, const unsigned short* __restrict__ lens,
                                                     const float* __restrict__ x, const unsigned* __restrict__ labels,
                                                     const float* __restrict__ offset, GroveFitResult* __restrict__ results,
                                                     GroveFitNode* __restrict__ scratch) {
    const GroveFitData data = {x, nullptr, labels, offset};
    grove_fit_block<true>(p, tree_ids, ops, values, outs, lens, data, results, scratch);
}

// ---------------------------------------------------------------------------------------------
// Split fits: a tree's parts over many blocks, for data of more than one part (few trees over
// many rows would otherwise leave most SMs idle, each block adding its sums serially). The same
// steps as grove_fit_block, in launches: grove_fit_split_start (a thread per tree: the plan,
// the first parameters, the tree decoded into its scratch row), then, as many times as a fit
// can pass over the rows (steps + 2), grove_fit_split_pass (a block per part of each tree
// whose fit waits for a pass: the part's sums into partials) and grove_fit_split_step (a block
// per tree: the parts' sums added in order, then the decisions grove_fit_block takes between
// its passes, up to the next pass or the end). The sums, and so the fitted bits, are
// grove_fit_block's.

#define GROVE_SPLIT_FIRST 0   // waits for the first pass (at the start's constants)
#define GROVE_SPLIT_SECOND 1  // linear scaling: waits for the pass at the closed-form a and b
#define GROVE_SPLIT_STEP 2    // waits for the pass at a step's trial parameters
#define GROVE_SPLIT_DONE 3    // result written

// One tree's fit between launches.
struct GroveFitSplit {
    GroveFitState s;
    double sse_before;
    unsigned step;
    int phase;
    int len;
};

static_assert(sizeof(GroveFitSplit) <= GROVE_FIT_SPLIT_BYTES, "GroveFitSplit outgrew the host's GROVE_FIT_SPLIT_BYTES");

// Thread k: tree k's start (tree_ids[k]: its row of the population).
template <bool CLASSES>
static __device__ void grove_fit_split_start(const GroveFitParams& p, const unsigned* __restrict__ tree_ids, const unsigned char* __restrict__ ops,
                                             const float* __restrict__ values, const unsigned char* __restrict__ outs,
                                             const unsigned short* __restrict__ lens, GroveFitSplit* __restrict__ fits,
                                             GroveFitResult* __restrict__ results, GroveFitNode* __restrict__ scratch) {
    const unsigned k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= p.n_trees) return;
    const unsigned t = tree_ids[k];
    const size_t row0 = (size_t)t * p.max_len;
    GroveFitSplit& f = fits[k];
    f.len = lens[t];
    grove_fit_init<CLASSES>(p, ops + row0, values + row0, outs + row0, f.len, f.s, scratch + (size_t)k * p.max_len);
    f.phase = f.s.go ? GROVE_SPLIT_FIRST : GROVE_SPLIT_DONE;
    if (!f.s.go) results[k] = grove_fit_unfitted();
}

// Block b: part b % n_parts of tree b / n_parts, when its fit waits for a pass.
template <bool CLASSES>
static __device__ void grove_fit_split_pass(const GroveFitParams& p, unsigned n_parts, const GroveFitSplit* __restrict__ fits,
                                            const GroveFitNode* __restrict__ scratch, const GroveFitData& data, double* __restrict__ partials) {
    __shared__ GroveFitState s;
    __shared__ double buf[GROVE_FIT_BUF];
    __shared__ GroveFitNode shared_nodes[GROVE_FIT_NODES];
    const unsigned k = blockIdx.x / n_parts, part = blockIdx.x % n_parts, tid = threadIdx.x;
    if (k >= p.n_trees) return;
    const GroveFitSplit& f = fits[k];
    if (f.phase == GROVE_SPLIT_DONE) return;
    const int len = f.len;
    const GroveFitNode* nodes = scratch + (size_t)k * p.max_len;
    if (len <= GROVE_FIT_NODES) {
        for (int i = (int)tid; i < len; i += (int)blockDim.x) shared_nodes[i] = nodes[i];
        nodes = shared_nodes;
    }
    if (tid == 0) {
        s.n_c = f.s.n_c;
        s.m = f.s.m;
        for (int i = 0; i < s.m; ++i) s.trial[i] = f.s.trial[i];
        for (int j = 0; j < s.n_c; ++j) s.c[j] = f.s.c[j];
    }
    __syncthreads();
    int own_p[GROVE_FIT_OWN], own_q[GROVE_FIT_OWN];
    grove_fit_owned(s.m, own_p, own_q);
    const unsigned lo = part * GROVE_FIT_PART;
    const unsigned hi = p.n_rows - lo < GROVE_FIT_PART ? p.n_rows : lo + GROVE_FIT_PART;
    grove_fit_parts<CLASSES, false>(s, buf, nodes, len, p, data, lo, hi, own_p, own_q, partials + ((size_t)k * n_parts + part) * GROVE_FIT_MAX_SUMS);
}

// Where grove_fit_block's steps go on from accepted parameters: the next step's solve (λ grows
// past each that fails) up to a trial pass; past the last step or λ's bound, the result (the
// accepted constants written back into the tree).
template <bool CLASSES>
static __device__ void grove_fit_split_advance(const GroveFitParams& p, GroveFitSplit& f, float* value, const unsigned char* op,
                                               GroveFitResult* result) {
    while (f.step < p.steps && !(f.s.lambda > GROVE_FIT_LAMBDA_STOP)) {
        if (grove_fit_try(f.s)) {
            f.phase = GROVE_SPLIT_STEP;
            return;
        }
        f.step += 1;
    }
    *result = grove_fit_result(f.s, f.sse_before, !CLASSES && p.scaling != 0, op, value, f.len);
    f.phase = GROVE_SPLIT_DONE;
}

// Block k: tree k's pass sums (its parts' added in order), then its decisions.
template <bool CLASSES>
static __device__ void grove_fit_split_step(const GroveFitParams& p, unsigned n_parts, const unsigned* __restrict__ tree_ids,
                                            const unsigned char* __restrict__ ops, float* __restrict__ values, GroveFitSplit* __restrict__ fits,
                                            const double* __restrict__ partials, GroveFitResult* __restrict__ results) {
    const unsigned k = blockIdx.x, tid = threadIdx.x;
    if (k >= p.n_trees) return;
    GroveFitSplit& f = fits[k];
    if (f.phase == GROVE_SPLIT_DONE) return;
    GroveFitState& s = f.s;
    const int m = s.m, n_c = s.n_c, s_m = grove_fit_sum(m, m), n_sums = s_m + 1;
    for (int e = (int)tid; e < n_sums; e += (int)blockDim.x) {
        double v = 0.0;
        for (unsigned part = 0; part < n_parts; ++part) v += partials[((size_t)k * n_parts + part) * GROVE_FIT_MAX_SUMS + e];
        s.sums[e] = v;
    }
    __syncthreads();
    if (tid != 0) return;
    const size_t row0 = (size_t)tree_ids[k] * p.max_len;
    const bool scaling = !CLASSES && p.scaling != 0;
    if (f.phase == GROVE_SPLIT_FIRST || f.phase == GROVE_SPLIT_SECOND) {
        if (!grove_fit_ok(s.sums, m)) {
            results[k] = grove_fit_unfitted();
            f.phase = GROVE_SPLIT_DONE;
            return;
        }
        if (f.phase == GROVE_SPLIT_FIRST && scaling) {
            grove_fit_scale(s.sums, n_c, &s.trial[n_c], &s.trial[n_c + 1]);
            f.phase = GROVE_SPLIT_SECOND;
            return;
        }
        grove_fit_begin(s);
        f.sse_before = s.cur[s_m];
        f.step = 0;
    } else {
        grove_fit_decide(s);
        f.step += 1;
    }
    grove_fit_split_advance<CLASSES>(p, f, values + row0, ops + row0, &results[k]);
}

// The split kernels for regression (y) and classification (labels, and offset or null): fits [n_trees], partials
// [n_trees x n_parts x GROVE_FIT_MAX_SUMS], scratch [n_trees x L] (every tree's decoded nodes),
// results [n_trees]; the rest as grove_fit_constants.
extern "C" __global__ void grove_fit_split_start_constants(const GroveFitParams p, const unsigned* __restrict__ tree_ids,
                                                           const unsigned char* __restrict__ ops, const float* __restrict__ values,
                                                           const unsigned char* __restrict__ outs, const unsigned short* __restrict__ lens,
                                                           GroveFitSplit* __restrict__ fits, GroveFitResult* __restrict__ results,
                                                           GroveFitNode* __restrict__ scratch) {
    grove_fit_split_start<false>(p, tree_ids, ops, values, outs, lens, fits, results, scratch);
}
extern "C" __global__ void grove_fit_split_start_class_constants(const GroveFitParams p, const unsigned* __restrict__ tree_ids,
                                                                 const unsigned char* __restrict__ ops, const float* __restrict__ values,
                                                                 const unsigned char* __restrict__ outs, const unsigned short* __restrict__ lens,
                                                                 GroveFitSplit* __restrict__ fits, GroveFitResult* __restrict__ results,
                                                                 GroveFitNode* __restrict__ scratch) {
    grove_fit_split_start<true>(p, tree_ids, ops, values, outs, lens, fits, results, scratch);
}
extern "C" __global__ void GROVE_FIT_BOUNDS grove_fit_split_pass_constants(const GroveFitParams p, unsigned n_parts, const GroveFitSplit* __restrict__ fits,
                                                                          const GroveFitNode* __restrict__ scratch, const float* __restrict__ x,
                                                                          const float* __restrict__ y, double* __restrict__ partials) {
    const GroveFitData data = {x, y, nullptr, nullptr};
    grove_fit_split_pass<false>(p, n_parts, fits, scratch, data, partials);
}
extern "C" __global__ void GROVE_FIT_BOUNDS grove_fit_split_pass_class_constants(const GroveFitParams p, unsigned n_parts,
                                                                                const GroveFitSplit* __restrict__ fits,
                                                                                const GroveFitNode* __restrict__ scratch,
                                                                                const float* __restrict__ x, const unsigned* __restrict__ labels,
                                                                                const float* __restrict__ offset, double* __restrict__ partials) {
    const GroveFitData data = {x, nullptr, labels, offset};
    grove_fit_split_pass<true>(p, n_parts, fits, scratch, data, partials);
}
extern "C" __global__ void grove_fit_split_step_constants(const GroveFitParams p, unsigned n_parts, const unsigned* __restrict__ tree_ids,
                                                          const unsigned char* __restrict__ ops, float* __restrict__ values,
                                                          GroveFitSplit* __restrict__ fits, const double* __restrict__ partials,
                                                          GroveFitResult* __restrict__ results) {
    grove_fit_split_step<false>(p, n_parts, tree_ids, ops, values, fits, partials, results);
}
extern "C" __global__ void grove_fit_split_step_class_constants(const GroveFitParams p, unsigned n_parts, const unsigned* __restrict__ tree_ids,
                                                                const unsigned char* __restrict__ ops, float* __restrict__ values,
                                                                GroveFitSplit* __restrict__ fits, const double* __restrict__ partials,
                                                                GroveFitResult* __restrict__ results) {
    grove_fit_split_step<true>(p, n_parts, tree_ids, ops, values, fits, partials, results);
}
