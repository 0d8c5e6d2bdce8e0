// sums.cuh: the per-tree sums the evaluation kernels write and the generation kernels read
// (eval.cu, classify.cu, generation.cu), laid out as RegSums and ClassPartial in
// src/backend/cuda/kernels.rs (checked against the layout table, grove_common.h).
#ifndef GROVE_SUMS_CUH
#define GROVE_SUMS_CUH

// GROVE_CHECK_LAYOUT comes from grove_common.h, which the kernel file includes first.

// Mirrors RegSums: sums over points of e = f - y, f the program's result 0, in f64.
struct GroveRegSums {
    double sse, sae, sum_f, sum_ff, sum_fy, sum_y, sum_yy;
    unsigned n;    // points summed
    unsigned bad;  // points where some result was NaN or infinite
};
GROVE_CHECK_LAYOUT(GroveRegSums);

// Mirrors ClassPartial: one (tree, tile)'s sums, and after the reduction one tree's. The
// per-class correct and prediction counts live beside it in a [rows][2 n_classes] unsigned array.
struct GroveClassPartial {
    double ce;     // sum of the cross-entropy over the finite points
    unsigned n;    // points summed
    unsigned bad;  // points with a NaN or infinite logit (all of them for an empty tree)
};
GROVE_CHECK_LAYOUT(GroveClassPartial);

// RegressionSums::centred (src/program/fitness.rs): below GROVE_VAR_REL_TOL of the raw sum of
// squares, a centred sum of squares is 0.
#define GROVE_VAR_REL_TOL 1e-10

struct GroveCentred {
    double sff, syy, sfy;
};

__device__ __forceinline__ GroveCentred grove_centred(const GroveRegSums& s) {
    const double n = (double)s.n;
    const double mf = s.sum_f / n, my = s.sum_y / n;
    double sff = s.sum_ff - mf * s.sum_f;
    double syy = s.sum_yy - my * s.sum_y;
    sff = sff <= GROVE_VAR_REL_TOL * s.sum_ff ? 0.0 : sff;
    syy = syy <= GROVE_VAR_REL_TOL * s.sum_yy ? 0.0 : syy;
    const double sfy = s.sum_fy - mf * s.sum_y;
    return {sff, syy, sfy};
}

// RegressionSums::scale: (a, b) minimising sum (a f + b - y)^2 for valid sums (n > 0, no bad
// point): a = cov(f, y) / var(f) (0 for constant outputs), b = mean y - a mean f.
__device__ __forceinline__ void grove_scale(const GroveRegSums& s, double& a, double& b) {
    const GroveCentred c = grove_centred(s);
    const double n = (double)s.n;
    a = c.sff == 0.0 ? 0.0 : c.sfy / c.sff;
    b = s.sum_y / n - a * (s.sum_f / n);
}

#endif  // GROVE_SUMS_CUH
