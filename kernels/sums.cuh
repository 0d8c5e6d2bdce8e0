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
// per-class correct counts live beside it in a [rows][n_classes] unsigned array.
struct GroveClassPartial {
    double ce;     // sum of the cross-entropy over the finite points
    unsigned n;    // points summed
    unsigned bad;  // points with a NaN or infinite logit (all of them for an empty tree)
};
GROVE_CHECK_LAYOUT(GroveClassPartial);

#endif  // GROVE_SUMS_CUH
