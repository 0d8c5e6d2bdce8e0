//! grove's f32 transcendental functions: the one definition of `exp`, `ln`, `sin`, `cos`, `tan`,
//! `tanh` and `pow` that every backend computes, bit for bit.
//!
//! The CPU interpreter calls these (branch-free, so the compiler vectorises them; libm's `expf`,
//! `logf`, `sinf` are scalar calls and cost 5–10× more), and `kernels/grove_math.cuh` is their
//! CUDA twin: the same operations in the same order, with the coefficients generated from the
//! constants below ([`cuda_constants`]), compiled with `--fmad=false`. Since IEEE `+ − × ÷ √` and
//! integer operations give the same bits on both, so do these functions, and an evolved program
//! has the same fitness on the GPU as on the CPU even where it is chaotic (an `exp` of an `exp`
//! amplifies a 1-ulp difference past any tolerance). `tests/cuda_eval.rs` checks it on the GPU.
//!
//! The algorithms are Cephes' single-precision ones (S. L. Moshier, Cephes Math Library:
//! `expf.c`, `logf.c`, `sinf.c`, `tanhf.c`): a Cody–Waite argument reduction with the constant
//! split so the large part is exact, a minimax polynomial, an exact rescaling. `sin`, `cos` and
//! `tan` of |x| > [`SINCOS_MAX`] reduce exactly with the bits of 2/π (Payne–Hanek, integer
//! arithmetic); `pow` works in f64 with its own `ln` and `exp` to 1e-15, then rounds once. Every
//! fused multiply-add is written out; nothing is contracted. Accuracy, against f64 (tests below):
//! within 2 ulp (or 1e-7 absolute near a zero of `sin`/`cos`), `tan` and `tanh` within 4 ulp,
//! `pow` correctly rounded but for rare ties.
//!
//! Ranges and special values, matching libm exactly:
//! - `exp`: NaN → NaN, x > 88.7228… → +inf (where `expf` overflows), x < −104 → 0, gradual
//!   underflow to subnormals in between.
//! - `ln` (for x > 0; callers handle 0 and negatives): subnormals are rescaled first; +inf →
//!   +inf, NaN → NaN.
//! - `sin`/`cos`/`tan`: ±inf and NaN → NaN.
//! - `pow_abs(a, b)` = |a|^b and `pow(a, b)` as C's `powf` (negative bases with integer
//!   exponents, `pow(x, 0) = pow(1, y) = 1`, zeros and infinities).

// Coefficients are written as Cephes publishes them (a few digits past f32), for traceability.
#![allow(clippy::excessive_precision)]

/// Largest |x| the fast `sin`/`cos`/`tan` reduce accurately: `y = round_even(|x|·4/π)` stays
/// below 2^13, so `y·DP1` and `y·DP2` are exact in f32. Larger arguments take the exact
/// reduction ([`sin_large`]).
pub const SINCOS_MAX: f32 = 6144.0;

/// `expf`'s polynomial, highest degree first.
pub const EXP_P: [f32; 6] = [1.987_569_2e-4, 1.398_199_9e-3, 8.333_452e-3, 4.166_579_6e-2, 1.666_666_5e-1, 5.000_000_1e-1];
/// ln 2 = EXP_C1 + EXP_C2, with EXP_C1 of 9 bits so n·EXP_C1 is exact.
pub const EXP_C1: f32 = 0.693_359_375;
/// See [`EXP_C1`].
pub const EXP_C2: f32 = -2.121_944_4e-4;
/// `logf`'s polynomial, highest degree first.
pub const LN_P: [f32; 9] = [
    7.037_683_6e-2,
    -1.151_461e-1,
    1.167_699_9e-1,
    -1.242_014_1e-1,
    1.424_932_3e-1,
    -1.666_805_8e-1,
    2.000_071_4e-1,
    -2.499_999_4e-1,
    3.333_333_1e-1,
];
/// 4/π.
pub const FOPI: f32 = 1.273_239_5;
/// π/4 = DP1 + DP2 + DP3, the first two short enough that y·DP1 and y·DP2 are exact.
pub const DP: [f32; 3] = [0.785_156_25, 2.418_756_5e-4, 3.774_895e-8];
/// `sinf`'s polynomial in z = r², highest degree first.
pub const SIN_P: [f32; 3] = [-1.951_529_6e-4, 8.332_161e-3, -1.666_665_5e-1];
/// `cosf`'s polynomial in z = r², highest degree first.
pub const COS_P: [f32; 3] = [2.443_315_7e-5, -1.388_731_6e-3, 4.166_664_6e-2];
/// `tanhf`'s polynomial in x², highest degree first (for |x| < 0.625).
pub const TANH_P: [f32; 5] = [-5.704_988_7e-3, 2.063_908_9e-2, -5.373_971_6e-2, 1.333_144_2e-1, -3.333_328_2e-1];
/// The bits of 2/π, 32 to a word, after two words of zeros (so a window may start left of the
/// binary point): the exact reduction of large `sin`/`cos`/`tan` arguments reads them.
pub const TWO_OVER_PI: [u32; 12] = [
    0, 0, 0xA2F9_836E, 0x4E44_1529, 0xFC27_57D1, 0xF534_DDC0, 0xDB62_9599, 0x3C43_9041, 0xFE51_63AB, 0xDEBB_C561,
    0xB724_6E3A, 0x424D_D2E0,
];
/// π/2 · 2^−64: scales the reduction's 64-bit fixed-point fraction of a quarter turn to radians.
pub const PIO2_2M64: f64 = std::f64::consts::FRAC_PI_2 / 18_446_744_073_709_551_616.0;
/// ln 2 in two parts for the f64 `exp`, the first with 21 trailing zero bits (fdlibm's).
pub const LN2_HI: f64 = 6.931_471_803_691_238_164_90e-1;
/// See [`LN2_HI`].
pub const LN2_LO: f64 = 1.908_214_929_270_587_700_02e-10;
/// Terms of the f64 `ln`'s series in s²: 1/3, 1/5, …, 1/25.
const LN64_TERMS: usize = 12;
/// Terms of the f64 `exp`'s Taylor series: 1/k! for k = 1 … 14.
const EXP64_TERMS: usize = 14;
/// Terms of the f64 sine's series after t: t³/3! … t^17/17!.
const SIN64_TERMS: usize = 8;
/// Terms of the f64 cosine's series after 1 − t²/2: t⁴/4! … t^18/18!.
const COS64_TERMS: usize = 8;

/// The constants above as C definitions (`#define GROVE_EXP_P0 __int_as_float(0x…u)`), bit
/// for bit, for `kernels/grove_math.cuh`.
pub fn cuda_constants() -> String {
    let mut s = String::new();
    let mut f = |name: &str, v: &[f32]| {
        for (i, x) in v.iter().enumerate() {
            s.push_str(&format!("#define GROVE_{name}{i} __int_as_float(0x{:08x})\n", x.to_bits()));
        }
    };
    f("EXP_P", &EXP_P);
    f("EXP_C", &[EXP_C1, EXP_C2]);
    f("LN_P", &LN_P);
    f("FOPI", &[FOPI]);
    f("DP", &DP);
    f("SIN_P", &SIN_P);
    f("COS_P", &COS_P);
    f("TANH_P", &TANH_P);
    f("SINCOS_MAX", &[SINCOS_MAX]);
    f("LOG2E", &[std::f32::consts::LOG2_E]);
    f("SQRTH", &[std::f32::consts::FRAC_1_SQRT_2]);
    let mut d = |name: &str, v: &[f64]| {
        for (i, x) in v.iter().enumerate() {
            s.push_str(&format!("#define GROVE_{name}{i} __longlong_as_double(0x{:016x}ll)\n", x.to_bits()));
        }
    };
    d("PIO2_2M64_", &[PIO2_2M64]);
    d("LN2_", &[LN2_HI, LN2_LO]);
    d("SQRT2_D", &[std::f64::consts::SQRT_2]);
    d("LOG2E_D", &[std::f64::consts::LOG2_E]);
    // The series' coefficients as initialisers of local arrays.
    let mut list = |name: &str, v: &[f64]| {
        let items: Vec<String> = v.iter().map(|x| format!("__longlong_as_double(0x{:016x}ll)", x.to_bits())).collect();
        s.push_str(&format!("#define GROVE_{name} {{{}}}\n", items.join(", ")));
    };
    list("LN64_C", &ln64_coefficients());
    list("EXP64_C", &exp64_coefficients());
    s.push_str(&format!("#define GROVE_LN64_TERMS {LN64_TERMS}\n#define GROVE_EXP64_TERMS {EXP64_TERMS}\n"));
    let mut list = |name: &str, v: &[f64]| {
        let items: Vec<String> = v.iter().map(|x| format!("__longlong_as_double(0x{:016x}ll)", x.to_bits())).collect();
        s.push_str(&format!("#define GROVE_{name} {{{}}}\n", items.join(", ")));
    };
    list("SIN64_C", &sin64_coefficients());
    list("COS64_C", &cos64_coefficients());
    s.push_str(&format!("#define GROVE_SIN64_TERMS {SIN64_TERMS}\n#define GROVE_COS64_TERMS {COS64_TERMS}\n"));
    s.push_str(&format!("#define GROVE_TAU_D0 __longlong_as_double(0x{:016x}ll)\n", std::f64::consts::TAU.to_bits()));
    let words: Vec<String> = TWO_OVER_PI.iter().map(|w| format!("0x{w:08x}u")).collect();
    s.push_str(&format!("#define GROVE_TWO_OVER_PI {{{}}}\n", words.join(", ")));
    s
}

/// 1/(2k+1) for k = LN64_TERMS … 1, highest first (Horner order).
fn ln64_coefficients() -> [f64; LN64_TERMS] {
    std::array::from_fn(|i| 1.0 / (2 * (LN64_TERMS - i) + 1) as f64)
}

/// 1/k! for k = EXP64_TERMS … 1, highest first (Horner order).
fn exp64_coefficients() -> [f64; EXP64_TERMS] {
    let mut fact = [1.0f64; EXP64_TERMS + 1];
    for k in 1..=EXP64_TERMS {
        fact[k] = fact[k - 1] * k as f64;
    }
    std::array::from_fn(|i| 1.0 / fact[EXP64_TERMS - i])
}

/// The sine series after t: (−1)^k/(2k+1)! for k = SIN64_TERMS … 1, highest first.
fn sin64_coefficients() -> [f64; SIN64_TERMS] {
    std::array::from_fn(|i| {
        let k = SIN64_TERMS - i;
        let f: f64 = (1..=2 * k + 1).map(|x| x as f64).product();
        if k % 2 == 1 { -1.0 / f } else { 1.0 / f }
    })
}

/// The cosine series after 1 − t²/2: (−1)^k/(2k)! for k = COS64_TERMS + 1 … 2, highest first.
fn cos64_coefficients() -> [f64; COS64_TERMS] {
    std::array::from_fn(|i| {
        let k = COS64_TERMS + 1 - i;
        let f: f64 = (1..=2 * k).map(|x| x as f64).product();
        if k % 2 == 1 { -1.0 / f } else { 1.0 / f }
    })
}

/// Horner's rule with fused multiply-adds: `fma(fma(c0, x, c1), x, c2)…`, as `fmaf` in the
/// CUDA twin. An FMA rounds once, by IEEE 754, so both give the same bits.
#[inline(always)]
fn horner(x: f32, c: &[f32]) -> f32 {
    let mut p = c[0];
    for &ci in &c[1..] {
        p = p.mul_add(x, ci);
    }
    p
}

/// True where the fast `sin`/`cos` reduction applies (false for NaN and ±inf too).
#[inline(always)]
pub fn sincos_in_range(x: f32) -> bool {
    x.abs() <= SINCOS_MAX
}

/// e^x, Cephes `expf`: x = n·ln2 + r, |r| ≤ ln2/2, e^r by a degree-7 polynomial, times 2^n.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const ROUND: f32 = 12_582_912.0; // 1.5·2^23: adding it rounds to an integer (ties to even)
    // NaN passes through the clamp (written with comparisons, as the CUDA twin must).
    #[allow(clippy::manual_clamp)]
    let xc = if x < -104.0 {
        -104.0
    } else if x > 89.0 {
        89.0
    } else {
        x
    };
    let t = xc * LOG2E + ROUND;
    let n_f = t - ROUND;
    let n = (t.to_bits() as i32).wrapping_sub(ROUND.to_bits() as i32); // n_f as an integer
    let r = xc - n_f * EXP_C1 - n_f * EXP_C2;
    let z = r * r;
    let p = horner(r, &EXP_P) * z + r + 1.0;
    // 2^n in two normal factors (n ∈ [−150, 128]), so overflow and underflow round once.
    let n1 = n >> 1;
    let n2 = n.wrapping_sub(n1);
    let s1 = f32::from_bits((n1.wrapping_add(127) as u32) << 23);
    let s2 = f32::from_bits((n2.wrapping_add(127) as u32) << 23);
    p * s1 * s2
}

/// ln x for x > 0 (and +inf, NaN), Cephes `logf`: x = m·2^e with m ∈ [√½, √2), ln(m) by a
/// degree-9 polynomial in m − 1, plus e·ln2 in two parts.
#[inline(always)]
pub fn ln(x: f32) -> f32 {
    const SQRTH: f32 = std::f32::consts::FRAC_1_SQRT_2;
    // Subnormals: scale into the normal range first.
    let tiny = x < f32::MIN_POSITIVE;
    let xs = if tiny { x * 33_554_432.0 } else { x }; // 2^25
    let bits = xs.to_bits();
    let mut e = ((bits >> 23) & 0xff) as i32 - 126;
    if tiny {
        e -= 25;
    }
    let m = f32::from_bits((bits & 0x007f_ffff) | 0x3f00_0000); // [0.5, 1)
    let small = m < SQRTH;
    let e = if small { e - 1 } else { e };
    let f = if small { m + m - 1.0 } else { m - 1.0 };
    let fe = e as f32;
    let z = f * f;
    let mut y = horner(f, &LN_P) * f * z;
    y += EXP_C2 * fe;
    y += -0.5 * z;
    let r = f + y + EXP_C1 * fe;
    // +inf and NaN come back as they went in.
    if x < f32::INFINITY {
        r
    } else {
        x
    }
}

/// sin r for |r| ≤ π/4.
#[inline(always)]
fn sin_poly(r: f32) -> f32 {
    let z = r * r;
    (horner(z, &SIN_P) * z).mul_add(r, r)
}

/// cos r for |r| ≤ π/4.
#[inline(always)]
fn cos_poly(r: f32) -> f32 {
    let z = r * r;
    (horner(z, &COS_P) * z).mul_add(z, (-0.5f32).mul_add(z, 1.0))
}

/// The shared reduction of `sin`, `cos` and `tan` for 0 ≤ ax ≤ SINCOS_MAX: ax = y·π/4 + r, y
/// even, |r| ≤ π/4; returns (sin r, cos r, y as an integer).
#[inline(always)]
fn reduce(ax: f32) -> (f32, f32, i32) {
    // Clamp so out-of-range lanes (fixed up by the caller) stay harmless; `min` also maps NaN
    // to the bound, so the conversion below never sees NaN.
    let a = ax.min(SINCOS_MAX * 2.0);
    // SAFETY: 0 ≤ a·4/π < 2^14 and not NaN, so the truncation is in range (the saturating
    // `as i32` would not vectorise).
    let j = unsafe { (a * FOPI).to_int_unchecked::<i32>() };
    let j = (j + 1) & !1;
    let y = j as f32;
    let r = ((a - y * DP[0]) - y * DP[1]) - y * DP[2];
    (sin_poly(r), cos_poly(r), j)
}

/// The exact reduction of a finite |x| > SINCOS_MAX (Payne–Hanek): |x| = q·π/2 + r with
/// |r| ≤ π/4; returns (r, q mod 4). |x| = m·2^e with m a 24-bit integer; only the bits of 2/π
/// whose product with m·2^e is not a multiple of 4 matter, a 96-bit window of them, and the
/// 120-bit product m·window holds the quadrant in bits 94–95 and the fraction below.
#[inline]
fn reduce_large(ax: f32) -> (f32, u32) {
    let bits = ax.to_bits();
    let m = ((bits & 0x007f_ffff) | 0x0080_0000) as u64;
    let e = ((bits >> 23) & 0xff) as i32 - 150; // |x| = m·2^e, e ∈ [−10, 104] here
    let i0 = (e + 62) as usize; // first bit of the window in TWO_OVER_PI
    let (w, s) = (i0 / 32, (i0 % 32) as u32);
    let word = |k: usize| -> u64 { ((((TWO_OVER_PI[w + k] as u64) << 32) | TWO_OVER_PI[w + k + 1] as u64) >> (32 - s)) & 0xffff_ffff };
    let (p0, p1, p2) = (m * word(0), m * word(1), m * word(2));
    let lo = p2 & 0xffff_ffff;
    let mid = p1 + (p2 >> 32);
    let hi = p0 + (mid >> 32);
    let mid = mid & 0xffff_ffff;
    let frac = ((hi & 0x3fff_ffff) << 34) | (mid << 2) | (lo >> 30); // 64 bits of fraction
    let q = (((hi >> 30) + (frac >> 63)) & 3) as u32; // rounded to the nearest quarter turn
    let r = (frac as i64) as f64 * PIO2_2M64;
    (r as f32, q)
}

/// sin x for |x| > SINCOS_MAX, ±inf and NaN (the lanes [`sin`] leaves wrong).
#[inline(never)]
pub fn sin_large(x: f32) -> f32 {
    if !x.is_finite() {
        return f32::NAN;
    }
    let (r, q) = reduce_large(x.abs());
    let v = if q & 1 != 0 { cos_poly(r) } else { sin_poly(r) };
    let flip = (x.to_bits() & 0x8000_0000) ^ ((q & 2) << 30);
    f32::from_bits(v.to_bits() ^ flip)
}

/// cos x for |x| > SINCOS_MAX, ±inf and NaN.
#[inline(never)]
pub fn cos_large(x: f32) -> f32 {
    if !x.is_finite() {
        return f32::NAN;
    }
    let (r, q) = reduce_large(x.abs());
    let v = if q & 1 != 0 { sin_poly(r) } else { cos_poly(r) };
    let flip = ((q ^ (q >> 1)) & 1) << 31; // negative in quadrants 1 and 2
    f32::from_bits(v.to_bits() ^ flip)
}

/// tan x for |x| > SINCOS_MAX, ±inf and NaN.
#[inline(never)]
pub fn tan_large(x: f32) -> f32 {
    if !x.is_finite() {
        return f32::NAN;
    }
    let (r, q) = reduce_large(x.abs());
    let (s, c) = (sin_poly(r), cos_poly(r));
    let v = if q & 1 != 0 { -c / s } else { s / c };
    f32::from_bits(v.to_bits() ^ (x.to_bits() & 0x8000_0000))
}

/// sin x: Cephes `sinf` for |x| ≤ [`SINCOS_MAX`] (wrong elsewhere: see [`sin_any`]).
#[inline(always)]
pub fn sin(x: f32) -> f32 {
    let (s, c, j) = reduce(x.abs());
    let v = if j & 2 != 0 { c } else { s };
    // Negative when exactly one of "x < 0" and "y ≡ 4, 6 (mod 8)" holds.
    let flip = (x.to_bits() & 0x8000_0000) ^ (((j & 4) as u32) << 29);
    f32::from_bits(v.to_bits() ^ flip)
}

/// cos x: Cephes `cosf` for |x| ≤ [`SINCOS_MAX`] (wrong elsewhere: see [`cos_any`]).
#[inline(always)]
pub fn cos(x: f32) -> f32 {
    let (s, c, j) = reduce(x.abs());
    let v = if j & 2 != 0 { s } else { c };
    let flip = (((j & 4) ^ ((j & 2) << 1)) as u32) << 29;
    f32::from_bits(v.to_bits() ^ flip)
}

/// tan x: sin r / cos r on the same reduction, for |x| ≤ [`SINCOS_MAX`] (see [`tan_any`]).
#[inline(always)]
pub fn tan(x: f32) -> f32 {
    let (s, c, j) = reduce(x.abs());
    let v = if j & 2 != 0 { -c / s } else { s / c };
    f32::from_bits(v.to_bits() ^ (x.to_bits() & 0x8000_0000))
}

/// sin x for every x.
#[inline(always)]
pub fn sin_any(x: f32) -> f32 {
    if sincos_in_range(x) {
        sin(x)
    } else {
        sin_large(x)
    }
}

/// cos x for every x.
#[inline(always)]
pub fn cos_any(x: f32) -> f32 {
    if sincos_in_range(x) {
        cos(x)
    } else {
        cos_large(x)
    }
}

/// tan x for every x.
#[inline(always)]
pub fn tan_any(x: f32) -> f32 {
    if sincos_in_range(x) {
        tan(x)
    } else {
        tan_large(x)
    }
}

/// (sin x, cos x) for every x from one reduction: bit for bit `(sin_any(x), cos_any(x))`.
/// The simulator's rotations use it (`sim::dynamics`, `grove_sincos` in the kernels). Where the
/// CPU has FMA it runs a copy compiled for it: a fused multiply-add rounds once either way, so
/// the bits are the same, but without the target feature each `mul_add` is a call into
/// compiler-builtins' `fmaf` (the simulator's f32 steps were a fifth slower with them).
#[inline]
pub fn sin_cos(x: f32) -> (f32, f32) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has FMA, checked just now.
        return unsafe { sin_cos_fma(x) };
    }
    sin_cos_portable(x)
}

/// [`sin_cos`] compiled with FMA instructions.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "fma")]
unsafe fn sin_cos_fma(x: f32) -> (f32, f32) {
    sin_cos_portable(x)
}

/// [`sin_cos`] for any CPU.
#[inline(always)]
fn sin_cos_portable(x: f32) -> (f32, f32) {
    if !sincos_in_range(x) {
        return (sin_large(x), cos_large(x));
    }
    let (s, c, j) = reduce(x.abs());
    let (sv, cv) = if j & 2 != 0 { (c, s) } else { (s, c) };
    let sflip = (x.to_bits() & 0x8000_0000) ^ (((j & 4) as u32) << 29);
    let cflip = (((j & 4) ^ ((j & 2) << 1)) as u32) << 29;
    (f32::from_bits(sv.to_bits() ^ sflip), f32::from_bits(cv.to_bits() ^ cflip))
}

/// tanh x, Cephes `tanhf`: an odd polynomial below |x| = 0.625, 1 − 2/(e^{2|x|} + 1) above.
#[inline(always)]
pub fn tanh(x: f32) -> f32 {
    let z = x.abs();
    let s = exp(z + z);
    let big = 1.0 - 2.0 / (s + 1.0); // +inf → 1
    let w = x * x;
    let small = horner(w, &TANH_P) * w * x + x;
    // NaN fails the comparison and takes the polynomial, which keeps it NaN.
    if z >= 0.625 {
        f32::from_bits(big.to_bits() | (x.to_bits() & 0x8000_0000))
    } else if z == 0.0 {
        x // keeps the sign of −0
    } else {
        small
    }
}

/// ln x in f64 for a positive, finite, normal x (an f32 widened, or a reset draw in (0, 1]):
/// x = m·2^e with m ∈ [√½, √2), ln m = 2·atanh(s) with s = (m − 1)/(m + 1), |s| ≤ 0.172, by
/// its series. Within about 1e-15 relative; `grove_ln64` is its CUDA twin.
#[inline]
pub fn ln64(x: f64) -> f64 {
    let bits = x.to_bits();
    let mut e = ((bits >> 52) & 0x7ff) as i64 - 1023;
    let mut m = f64::from_bits((bits & 0x000f_ffff_ffff_ffff) | 0x3ff0_0000_0000_0000); // [1, 2)
    if m > std::f64::consts::SQRT_2 {
        m *= 0.5;
        e += 1;
    }
    let f = m - 1.0;
    let s = f / (2.0 + f);
    let z = s * s;
    let c = ln64_coefficients();
    let mut p = c[0];
    for &ci in &c[1..] {
        p = p * z + ci;
    }
    let lnm = 2.0 * s + 2.0 * s * z * p;
    let ef = e as f64;
    ef * LN2_HI + (lnm + ef * LN2_LO)
}

/// e^t in f64 for t ∈ [−110, 100]: t = n·ln2 + r, |r| ≤ ln2/2, Taylor series, times 2^n.
#[inline]
fn exp64(t: f64) -> f64 {
    const ROUND: f64 = 6_755_399_441_055_744.0; // 1.5·2^52
    let n = (t * std::f64::consts::LOG2_E + ROUND) - ROUND;
    let r = (t - n * LN2_HI) - n * LN2_LO;
    let c = exp64_coefficients();
    let mut p = c[0];
    for &ci in &c[1..] {
        p = p * r + ci;
    }
    let p = p * r + 1.0;
    p * f64::from_bits(((n as i64 + 1023) as u64) << 52)
}

/// cos 2πu in f64 for |u| < 2^50 (the reset noise's Box–Muller angle, u ∈ [0, 1)): u = n/4 + r
/// with n the nearest quarter turn and |r| ≤ 1/8, both exact, then sin or cos of t = 2πr
/// (|t| ≤ π/4) by their Taylor series to t^17 and t^18. Within a few ulp of libm's `cos`;
/// `grove_cos_turns64` is its CUDA twin, so the GPU draws the CPU's resets bit for bit.
#[inline]
pub fn cos_turns64(u: f64) -> f64 {
    const ROUND: f64 = 6_755_399_441_055_744.0; // 1.5·2^52
    let n = (u * 4.0 + ROUND) - ROUND;
    let r = u - n * 0.25;
    let t = r * std::f64::consts::TAU;
    let z = t * t;
    let (sc, cc) = (sin64_coefficients(), cos64_coefficients());
    let mut ps = sc[0];
    for &ci in &sc[1..] {
        ps = ps * z + ci;
    }
    let mut pc = cc[0];
    for &ci in &cc[1..] {
        pc = pc * z + ci;
    }
    let s = t + t * z * ps;
    let c = (1.0 - 0.5 * z) + z * z * pc;
    match (n as i64) & 3 {
        0 => c,
        1 => -s,
        2 => -c,
        _ => s,
    }
}

/// |a|^b, as C's `powf(fabsf(a), b)`: b·ln|a| and its exponential in f64, rounded once.
#[inline]
pub fn pow_abs(a: f32, b: f32) -> f32 {
    let a = a.abs();
    if b == 0.0 || a == 1.0 {
        return 1.0; // even for NaN, as C's pow
    }
    if a.is_nan() || b.is_nan() {
        return f32::NAN;
    }
    if a == 0.0 {
        return if b > 0.0 { 0.0 } else { f32::INFINITY };
    }
    if a == f32::INFINITY {
        return if b > 0.0 { f32::INFINITY } else { 0.0 };
    }
    if b == f32::INFINITY {
        return if a > 1.0 { f32::INFINITY } else { 0.0 };
    }
    if b == f32::NEG_INFINITY {
        return if a > 1.0 { 0.0 } else { f32::INFINITY };
    }
    let t = b as f64 * ln64(a as f64);
    if t > 100.0 {
        f32::INFINITY
    } else if t < -110.0 {
        0.0
    } else {
        exp64(t) as f32
    }
}

/// a^b, as C's `powf`: |a|^b, negated for a negative base and an odd integer exponent; NaN for a
/// negative finite base and a finite non-integer exponent.
#[inline]
pub fn pow(a: f32, b: f32) -> f32 {
    let m = pow_abs(a, b);
    let integer = b.is_finite() && b == b.trunc();
    let odd = integer && b % 2.0 != 0.0; // |b| ≥ 2^24 is even
    if (b.is_nan() && a != 1.0) || (a < 0.0 && a.is_finite() && b.is_finite() && !integer) {
        f32::NAN
    } else if a.is_sign_negative() && odd && !a.is_nan() {
        -m
    } else {
        m
    }
}

#[cfg(test)]
mod tests;
