// sums.cuh: the per-tree sums the evaluation kernels write and the generation kernels read
// (eval.cu, classify.cu, generation.cu), laid out as RegSums and ClassPartial in
// src/backend/cuda/kernels.rs.
#ifndef GROVE_SUMS_CUH
#define GROVE_SUMS_CUH

#ifndef GROVE_OFFSETOF
#define GROVE_OFFSETOF(S, f) ((unsigned long long)__INTADDR__(&(((S*)0)->f)))
#endif

// Mirrors RegSums: sums over points of e = f - y, f the program's result 0, in f64.
struct GroveRegSums {
    double sse, sae, sum_f, sum_ff, sum_fy, sum_y, sum_yy;
    unsigned n;    // points summed
    unsigned bad;  // points where some result was NaN or infinite
};
static_assert(sizeof(GroveRegSums) == 64, "GroveRegSums must match RegSums");
static_assert(GROVE_OFFSETOF(GroveRegSums, sse) == 0, "layout");
static_assert(GROVE_OFFSETOF(GroveRegSums, sae) == 8, "layout");
static_assert(GROVE_OFFSETOF(GroveRegSums, sum_f) == 16, "layout");
static_assert(GROVE_OFFSETOF(GroveRegSums, sum_ff) == 24, "layout");
static_assert(GROVE_OFFSETOF(GroveRegSums, sum_fy) == 32, "layout");
static_assert(GROVE_OFFSETOF(GroveRegSums, sum_y) == 40, "layout");
static_assert(GROVE_OFFSETOF(GroveRegSums, sum_yy) == 48, "layout");
static_assert(GROVE_OFFSETOF(GroveRegSums, n) == 56, "layout");
static_assert(GROVE_OFFSETOF(GroveRegSums, bad) == 60, "layout");

// Mirrors ClassPartial: one (tree, tile)'s sums, and after the reduction one tree's. The
// per-class correct counts live beside it in a [rows][n_classes] unsigned array.
struct GroveClassPartial {
    double ce;     // sum of the cross-entropy over the finite points
    unsigned n;    // points summed
    unsigned bad;  // points with a NaN or infinite logit (all of them for an empty tree)
};
static_assert(sizeof(GroveClassPartial) == 16, "GroveClassPartial must match ClassPartial");
static_assert(GROVE_OFFSETOF(GroveClassPartial, ce) == 0, "layout");
static_assert(GROVE_OFFSETOF(GroveClassPartial, n) == 8, "layout");
static_assert(GROVE_OFFSETOF(GroveClassPartial, bad) == 12, "layout");

#endif  // GROVE_SUMS_CUH
