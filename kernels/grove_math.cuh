// grove_math.cuh: grove's f32 transcendental functions on the GPU.
//
// Twin of src/program/fastmath.rs, operation for operation: the same algorithms (Cephes' expf,
// logf, sinf/cosf, tanhf; Payne-Hanek reduction of large trigonometric arguments; pow in f64
// with its own ln and exp; the f64 ln and cos of the simulator's reset draws), the same order of operations, and the coefficients generated from
// the Rust constants (GROVE_EXP_P0, ... are defined just above this file, bit for bit). The
// kernels are compiled with --fmad=false, so the compiler fuses no multiply and add by itself;
// the polynomials use fmaf exactly where the Rust uses mul_add. IEEE + - * /, sqrt and FMA
// round exactly as on the CPU: every function here returns the CPU's bits. The operator
// table (src/program/ops.rs) and the simulator (sim.cu) call these; nothing else in the kernels
// computes a transcendental function.

#define GROVE_F32_NAN __int_as_float(0x7fffffff)
#define GROVE_F32_INF __int_as_float(0x7f800000)

// e^x (fastmath::exp).
__device__ __forceinline__ float grove_exp(float x) {
    const float ROUND = 12582912.0f;  // 1.5 * 2^23
    const float xc = x < -104.0f ? -104.0f : (x > 89.0f ? 89.0f : x);  // NaN passes
    const float t = xc * GROVE_LOG2E0 + ROUND;
    const float nf = t - ROUND;
    const int n = (int)(__float_as_uint(t) - __float_as_uint(ROUND));
    const float r = xc - nf * GROVE_EXP_C0 - nf * GROVE_EXP_C1;
    const float z = r * r;
    const float h = fmaf(fmaf(fmaf(fmaf(fmaf(GROVE_EXP_P0, r, GROVE_EXP_P1), r, GROVE_EXP_P2), r, GROVE_EXP_P3), r, GROVE_EXP_P4), r, GROVE_EXP_P5);
    const float p = h * z + r + 1.0f;
    const int n1 = n >> 1;
    const int n2 = (int)((unsigned)n - (unsigned)n1);
    const float s1 = __uint_as_float(((unsigned)n1 + 127u) << 23);
    const float s2 = __uint_as_float(((unsigned)n2 + 127u) << 23);
    return p * s1 * s2;
}

// ln x for x > 0, +inf and NaN (fastmath::ln).
__device__ __forceinline__ float grove_ln(float x) {
    const bool tiny = x < __uint_as_float(0x00800000u);  // below the smallest normal
    const float xs = tiny ? x * 33554432.0f : x;         // 2^25
    const unsigned bits = __float_as_uint(xs);
    int e = (int)((bits >> 23) & 0xffu) - 126;
    if (tiny) e -= 25;
    const float m = __uint_as_float((bits & 0x007fffffu) | 0x3f000000u);
    const bool small = m < GROVE_SQRTH0;
    e = small ? e - 1 : e;
    const float f = small ? m + m - 1.0f : m - 1.0f;
    const float fe = (float)e;
    const float z = f * f;
    const float h = fmaf(fmaf(fmaf(fmaf(fmaf(fmaf(fmaf(fmaf(GROVE_LN_P0, f, GROVE_LN_P1), f, GROVE_LN_P2), f, GROVE_LN_P3), f, GROVE_LN_P4), f, GROVE_LN_P5), f, GROVE_LN_P6), f, GROVE_LN_P7), f, GROVE_LN_P8);
    float y = h * f * z;
    y += GROVE_EXP_C1 * fe;
    y += -0.5f * z;
    const float r = f + y + GROVE_EXP_C0 * fe;
    return x < GROVE_F32_INF ? r : x;
}

// sin r and cos r for |r| <= pi/4.
__device__ __forceinline__ float grove_sin_poly(float r) {
    const float z = r * r;
    return fmaf(fmaf(fmaf(GROVE_SIN_P0, z, GROVE_SIN_P1), z, GROVE_SIN_P2) * z, r, r);
}
__device__ __forceinline__ float grove_cos_poly(float r) {
    const float z = r * r;
    return fmaf(fmaf(fmaf(GROVE_COS_P0, z, GROVE_COS_P1), z, GROVE_COS_P2) * z, z, fmaf(-0.5f, z, 1.0f));
}

// The fast reduction for 0 <= ax <= GROVE_SINCOS_MAX0: ax = j*pi/4 + r, j even.
__device__ __forceinline__ float grove_reduce(float ax, int* j_out) {
    const float a = fminf(ax, GROVE_SINCOS_MAX0 * 2.0f);
    int j = (int)(a * GROVE_FOPI0);
    j = (j + 1) & ~1;
    const float y = (float)j;
    *j_out = j;
    return ((a - y * GROVE_DP0) - y * GROVE_DP1) - y * GROVE_DP2;
}

// The exact reduction of a finite ax > GROVE_SINCOS_MAX0: ax = q*pi/2 + r, |r| <= pi/4.
__device__ __noinline__ float grove_reduce_large(float ax, unsigned* q_out) {
    const unsigned T[12] = GROVE_TWO_OVER_PI;
    const unsigned bits = __float_as_uint(ax);
    const unsigned long long m = (bits & 0x007fffffu) | 0x00800000u;
    const int e = (int)((bits >> 23) & 0xffu) - 150;
    const int i0 = e + 62;
    const int w = i0 / 32;
    const unsigned s = (unsigned)(i0 % 32);
    unsigned long long word[3];
#pragma unroll
    for (int k = 0; k < 3; ++k)
        word[k] = ((((unsigned long long)T[w + k] << 32) | T[w + k + 1]) >> (32 - s)) & 0xffffffffull;
    const unsigned long long p0 = m * word[0], p1 = m * word[1], p2 = m * word[2];
    const unsigned long long lo = p2 & 0xffffffffull;
    unsigned long long mid = p1 + (p2 >> 32);
    const unsigned long long hi = p0 + (mid >> 32);
    mid &= 0xffffffffull;
    const unsigned long long frac = ((hi & 0x3fffffffull) << 34) | (mid << 2) | (lo >> 30);
    *q_out = (unsigned)(((hi >> 30) + (frac >> 63)) & 3ull);
    const double r = (double)(long long)frac * GROVE_PIO2_2M64_0;
    return (float)r;
}

__device__ __noinline__ float grove_sin_large(float x) {
    if (!isfinite(x)) return GROVE_F32_NAN;
    unsigned q;
    const float r = grove_reduce_large(fabsf(x), &q);
    const float v = (q & 1u) ? grove_cos_poly(r) : grove_sin_poly(r);
    const unsigned flip = (__float_as_uint(x) & 0x80000000u) ^ ((q & 2u) << 30);
    return __uint_as_float(__float_as_uint(v) ^ flip);
}
__device__ __noinline__ float grove_cos_large(float x) {
    if (!isfinite(x)) return GROVE_F32_NAN;
    unsigned q;
    const float r = grove_reduce_large(fabsf(x), &q);
    const float v = (q & 1u) ? grove_sin_poly(r) : grove_cos_poly(r);
    const unsigned flip = ((q ^ (q >> 1)) & 1u) << 31;
    return __uint_as_float(__float_as_uint(v) ^ flip);
}
__device__ __noinline__ float grove_tan_large(float x) {
    if (!isfinite(x)) return GROVE_F32_NAN;
    unsigned q;
    const float r = grove_reduce_large(fabsf(x), &q);
    const float s = grove_sin_poly(r), c = grove_cos_poly(r);
    const float v = (q & 1u) ? -c / s : s / c;
    return __uint_as_float(__float_as_uint(v) ^ (__float_as_uint(x) & 0x80000000u));
}

// sin, cos and tan of any x (fastmath::sin_any, cos_any, tan_any).
__device__ __forceinline__ float grove_sin(float x) {
    if (!(fabsf(x) <= GROVE_SINCOS_MAX0)) return grove_sin_large(x);
    int j;
    const float r = grove_reduce(fabsf(x), &j);
    const float v = (j & 2) ? grove_cos_poly(r) : grove_sin_poly(r);
    const unsigned flip = (__float_as_uint(x) & 0x80000000u) ^ (((unsigned)(j & 4)) << 29);
    return __uint_as_float(__float_as_uint(v) ^ flip);
}
__device__ __forceinline__ float grove_cos(float x) {
    if (!(fabsf(x) <= GROVE_SINCOS_MAX0)) return grove_cos_large(x);
    int j;
    const float r = grove_reduce(fabsf(x), &j);
    const float v = (j & 2) ? grove_sin_poly(r) : grove_cos_poly(r);
    const unsigned flip = ((unsigned)((j & 4) ^ ((j & 2) << 1))) << 29;
    return __uint_as_float(__float_as_uint(v) ^ flip);
}
__device__ __forceinline__ float grove_tan(float x) {
    if (!(fabsf(x) <= GROVE_SINCOS_MAX0)) return grove_tan_large(x);
    int j;
    const float r = grove_reduce(fabsf(x), &j);
    const float s = grove_sin_poly(r), c = grove_cos_poly(r);
    const float v = (j & 2) ? -c / s : s / c;
    return __uint_as_float(__float_as_uint(v) ^ (__float_as_uint(x) & 0x80000000u));
}

// sin x and cos x from one reduction, bit for bit grove_sin(x) and grove_cos(x)
// (fastmath::sin_cos): the simulator's rotations.
__device__ __forceinline__ void grove_sincos(float x, float* s_out, float* c_out) {
    if (!(fabsf(x) <= GROVE_SINCOS_MAX0)) {
        *s_out = grove_sin_large(x);
        *c_out = grove_cos_large(x);
        return;
    }
    int j;
    const float r = grove_reduce(fabsf(x), &j);
    const float s = grove_sin_poly(r), c = grove_cos_poly(r);
    const float sv = (j & 2) ? c : s, cv = (j & 2) ? s : c;
    const unsigned sflip = (__float_as_uint(x) & 0x80000000u) ^ (((unsigned)(j & 4)) << 29);
    const unsigned cflip = ((unsigned)((j & 4) ^ ((j & 2) << 1))) << 29;
    *s_out = __uint_as_float(__float_as_uint(sv) ^ sflip);
    *c_out = __uint_as_float(__float_as_uint(cv) ^ cflip);
}

// tanh x (fastmath::tanh).
__device__ __forceinline__ float grove_tanh(float x) {
    const float z = fabsf(x);
    if (z >= 0.625f) {
        const float s = grove_exp(z + z);
        const float big = 1.0f - 2.0f / (s + 1.0f);
        return __uint_as_float(__float_as_uint(big) | (__float_as_uint(x) & 0x80000000u));
    }
    if (z == 0.0f) return x;
    const float w = x * x;
    const float h = fmaf(fmaf(fmaf(fmaf(GROVE_TANH_P0, w, GROVE_TANH_P1), w, GROVE_TANH_P2), w, GROVE_TANH_P3), w, GROVE_TANH_P4);
    return h * w * x + x;
}

// ln x in f64 for a positive finite x widened from f32 (fastmath::ln64).
__device__ __forceinline__ double grove_ln64(double x) {
    const unsigned long long bits = (unsigned long long)__double_as_longlong(x);
    long long e = (long long)((bits >> 52) & 0x7ffull) - 1023;
    double m = __longlong_as_double((long long)((bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull));
    if (m > GROVE_SQRT2_D0) {
        m *= 0.5;
        e += 1;
    }
    const double f = m - 1.0;
    const double s = f / (2.0 + f);
    const double z = s * s;
    const double c[GROVE_LN64_TERMS] = GROVE_LN64_C;
    double p = c[0];
#pragma unroll
    for (int i = 1; i < GROVE_LN64_TERMS; ++i) p = p * z + c[i];
    const double lnm = 2.0 * s + 2.0 * s * z * p;
    const double ef = (double)e;
    return ef * GROVE_LN2_0 + (lnm + ef * GROVE_LN2_1);
}

// e^t in f64 for t in [-110, 100] (fastmath::exp64).
__device__ __forceinline__ double grove_exp64(double t) {
    const double ROUND = 6755399441055744.0;  // 1.5 * 2^52
    const double n = (t * GROVE_LOG2E_D0 + ROUND) - ROUND;
    const double r = (t - n * GROVE_LN2_0) - n * GROVE_LN2_1;
    const double c[GROVE_EXP64_TERMS] = GROVE_EXP64_C;
    double p = c[0];
#pragma unroll
    for (int i = 1; i < GROVE_EXP64_TERMS; ++i) p = p * r + c[i];
    p = p * r + 1.0;
    return p * __longlong_as_double((long long)((unsigned long long)((long long)n + 1023) << 52));
}

// cos 2*pi*u in f64 for |u| < 2^50 (fastmath::cos_turns64): the reset noise's Box-Muller angle.
__device__ __forceinline__ double grove_cos_turns64(double u) {
    const double ROUND = 6755399441055744.0;  // 1.5 * 2^52
    const double n = (u * 4.0 + ROUND) - ROUND;
    const double r = u - n * 0.25;
    const double t = r * GROVE_TAU_D0;
    const double z = t * t;
    const double sc[GROVE_SIN64_TERMS] = GROVE_SIN64_C;
    const double cc[GROVE_COS64_TERMS] = GROVE_COS64_C;
    double ps = sc[0];
#pragma unroll
    for (int i = 1; i < GROVE_SIN64_TERMS; ++i) ps = ps * z + sc[i];
    double pc = cc[0];
#pragma unroll
    for (int i = 1; i < GROVE_COS64_TERMS; ++i) pc = pc * z + cc[i];
    const double s = t + t * z * ps;
    const double c = (1.0 - 0.5 * z) + z * z * pc;
    switch ((long long)n & 3) {
        case 0: return c;
        case 1: return -s;
        case 2: return -c;
        default: return s;
    }
}

// |a|^b (fastmath::pow_abs).
__device__ __noinline__ float grove_pow_abs(float a, float b) {
    a = fabsf(a);
    if (b == 0.0f || a == 1.0f) return 1.0f;
    if (isnan(a) || isnan(b)) return GROVE_F32_NAN;
    if (a == 0.0f) return b > 0.0f ? 0.0f : GROVE_F32_INF;
    if (a == GROVE_F32_INF) return b > 0.0f ? GROVE_F32_INF : 0.0f;
    if (b == GROVE_F32_INF) return a > 1.0f ? GROVE_F32_INF : 0.0f;
    if (b == -GROVE_F32_INF) return a > 1.0f ? 0.0f : GROVE_F32_INF;
    const double t = (double)b * grove_ln64((double)a);
    if (t > 100.0) return GROVE_F32_INF;
    if (t < -110.0) return 0.0f;
    return (float)grove_exp64(t);
}

// a^b as C's powf (fastmath::pow).
__device__ __forceinline__ float grove_pow(float a, float b) {
    const float m = grove_pow_abs(a, b);
    const bool integer = isfinite(b) && b == truncf(b);
    const bool odd = integer && fmodf(b, 2.0f) != 0.0f;
    if ((isnan(b) && a != 1.0f) || (a < 0.0f && isfinite(a) && isfinite(b) && !integer)) return GROVE_F32_NAN;
    if (signbit(a) && odd && !isnan(a)) return -m;
    return m;
}
