//! Tests of the shared math: accuracy in ulps against libm, special values, and the CUDA constants spelled bit for bit.

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
    // The exact reduction: every 997th bit pattern from SINCOS_MAX to the largest finite.
    let (mut ws, mut wc): (f64, f64) = (0.0, 0.0);
    let mut b = SINCOS_MAX.to_bits() + 1;
    while b < f32::MAX.to_bits() {
        for x in [f32::from_bits(b), -f32::from_bits(b)] {
            let (sw, cw) = ((x as f64).sin(), (x as f64).cos());
            ws = ws.max(ulps(sin_any(x), sw).min((sin_any(x) as f64 - sw).abs() / 6e-8));
            wc = wc.max(ulps(cos_any(x), cw).min((cos_any(x) as f64 - cw).abs() / 6e-8));
        }
        b += 997;
    }
    assert!(ws <= 2.0 && wc <= 2.0, "large: sin {ws}, cos {wc} (ulp, or units of 6e-8 absolute)");
    for x in [f32::INFINITY, f32::NEG_INFINITY, f32::NAN] {
        assert!(sin_any(x).is_nan() && cos_any(x).is_nan() && tan_any(x).is_nan());
    }
    // Both reductions agree where they meet.
    for x in sweep(SINCOS_MAX - 10.0, SINCOS_MAX, 2001) {
        let (s, c, _) = reduce(x);
        let (r, _) = reduce_large(x);
        assert!((sin(x) - sin_large(x)).abs() <= 2e-7, "{x}: {s} {c} {r}");
        assert!((cos(x) - cos_large(x)).abs() <= 2e-7, "{x}");
    }
}

#[test]
fn sin_cos_is_sin_and_cos_bit_for_bit() {
    let mut b = 0u32;
    // Every 4099th bit pattern, both signs: small, in range, large, inf and NaN.
    while b < 0x7fc0_0000 {
        for x in [f32::from_bits(b), -f32::from_bits(b)] {
            let (s, c) = sin_cos(x);
            assert_eq!((s.to_bits(), c.to_bits()), (sin_any(x).to_bits(), cos_any(x).to_bits()), "{x:e}");
        }
        b += 4099;
    }
}

#[test]
fn f64_ln_and_cos_turns_are_accurate() {
    let mut rng = crate::rng::Stream::new(3, 0, 0, crate::rng::Purpose::Bench);
    let (mut wl, mut wc): (f64, f64) = (0.0, 0.0);
    for _ in 0..100_000 {
        let u = rng.unit_f64();
        let x = 1.0 - u;
        wl = wl.max((ln64(x) - x.ln()).abs() / x.ln().abs().max(f64::MIN_POSITIVE));
        wc = wc.max((cos_turns64(u) - (std::f64::consts::TAU * u).cos()).abs());
    }
    assert!(wl < 4e-15 && wc < 2e-15, "ln64 {wl:e} relative, cos_turns64 {wc:e} absolute");
    for (u, want) in [(0.0, 1.0), (0.25, 0.0), (0.5, -1.0), (0.75, 0.0), (1.0, 1.0)] {
        assert!((cos_turns64(u) - want).abs() < 1e-16, "cos 2π·{u} = {}", cos_turns64(u));
    }
    assert_eq!(ln64(1.0), 0.0);
}

#[test]
fn tan_is_within_four_ulp_away_from_its_poles() {
    let mut worst: f64 = 0.0;
    let mut check = |x: f32| {
        let want = (x as f64).tan();
        if want.abs() < 1e4 {
            worst = worst.max(ulps(tan_any(x), want).min((tan_any(x) as f64 - want).abs() / 6e-8));
        }
    };
    for x in sweep(-SINCOS_MAX, SINCOS_MAX, 200_001) {
        check(x);
    }
    let mut b = SINCOS_MAX.to_bits() + 1;
    while b < f32::MAX.to_bits() {
        check(f32::from_bits(b));
        b += 997;
    }
    assert!(worst <= 4.0, "tan worst {worst} ulp");
    assert_eq!(tan(-0.0).to_bits(), (-0.0f32).to_bits());
}

#[test]
fn tanh_is_within_four_ulp() {
    let mut worst: f64 = 0.0;
    for x in sweep(-12.0, 12.0, 100_001).chain(sweep(-0.7, 0.7, 10_001)) {
        worst = worst.max(ulps(tanh(x), (x as f64).tanh()));
    }
    assert!(worst <= 4.0, "tanh worst {worst} ulp");
    assert_eq!(tanh(100.0), 1.0);
    assert_eq!(tanh(-1e30), -1.0);
    assert_eq!(tanh(f32::INFINITY), 1.0);
    assert_eq!(tanh(-0.0).to_bits(), (-0.0f32).to_bits());
    assert!(tanh(f32::NAN).is_nan());
}

#[test]
fn pow_is_correctly_rounded_nearly_everywhere_and_has_cs_special_values() {
    // Random finite bases and exponents whose result is finite: compare with f64 powf.
    let mut rng = crate::rng::Stream::new(7, 0, 0, crate::rng::Purpose::Bench);
    let (mut off, mut n) = (0, 0);
    for _ in 0..200_000 {
        let a = f32::from_bits(rng.next_u32() & 0x7fff_ffff);
        let b = (rng.unit_f32() - 0.5) * 40.0;
        if !a.is_finite() {
            continue;
        }
        let want = (a as f64).powf(b as f64);
        let got = pow_abs(a, b);
        if want == 0.0 || !want.is_finite() || (want as f32).is_infinite() {
            assert!(got.to_bits() == (want as f32).to_bits() || ulps(got, want) <= 1.0, "pow({a}, {b}) = {got}, f64 {want}");
            continue;
        }
        n += 1;
        let u = ulps(got, want);
        assert!(u <= 1.0, "pow({a}, {b}) = {got}, f64 {want}: {u} ulp");
        if got != want as f32 {
            off += 1;
        }
    }
    assert!(off * 1000 < n, "{off} of {n} not correctly rounded");
    // C's special values.
    let (inf, nan) = (f32::INFINITY, f32::NAN);
    let cases = [
        (2.0, 0.0, 1.0),
        (nan, 0.0, 1.0),
        (1.0, nan, 1.0),
        (0.0, 2.0, 0.0),
        (0.0, -2.0, inf),
        (inf, 2.0, inf),
        (inf, -2.0, 0.0),
        (0.5, inf, 0.0),
        (0.5, -inf, inf),
        (2.0, inf, inf),
        (2.0, -inf, 0.0),
        (-1.0, inf, 1.0),
        (-2.0, 3.0, -8.0),
        (-2.0, 2.0, 4.0),
        (-2.0, -1.0, -0.5),
        (-0.0, -1.0, -inf),
        (-0.0, 3.0, -0.0),
        (-inf, 3.0, -inf),
        (-inf, -3.0, -0.0),
        (1e10, 1e10, inf),
        (1e-10, 1e10, 0.0),
    ];
    for (a, b, want) in cases {
        let got = pow(a, b);
        assert_eq!(got.to_bits(), want.to_bits(), "pow({a}, {b}) = {got}, C says {want}");
        assert_eq!(got.to_bits(), a.powf(b).to_bits(), "pow({a}, {b}) vs libm");
    }
    for (a, b) in [(-2.0f32, 0.5f32), (-1.0, nan), (nan, 1.0), (2.0, nan), (-8.0, 1.0 / 3.0)] {
        assert!(pow(a, b).is_nan(), "pow({a}, {b}) = {}", pow(a, b));
    }
    assert_eq!(pow_abs(-2.0, 0.5), 2f32.sqrt());
}

#[test]
fn cuda_constants_spell_every_constant_bit_for_bit() {
    let c = cuda_constants();
    assert!(c.contains(&format!("#define GROVE_EXP_P0 __int_as_float(0x{:08x})", EXP_P[0].to_bits())));
    assert!(c.contains(&format!("#define GROVE_LN_P8 __int_as_float(0x{:08x})", LN_P[8].to_bits())));
    assert!(c.contains(&format!("#define GROVE_LN64_C {{__longlong_as_double(0x{:016x}ll), ", (1.0f64 / 25.0).to_bits())));
    assert!(c.contains(&format!(", __longlong_as_double(0x{:016x}ll)}}\n#define GROVE_LN64_TERMS", 1.0f64.to_bits())));
    assert!(c.contains(&format!("#define GROVE_PIO2_2M64_0 __longlong_as_double(0x{:016x}ll)", PIO2_2M64.to_bits())));
    assert!(c.contains("0xa2f9836eu"));
    assert!(c.contains(&format!("#define GROVE_SIN64_C {{__longlong_as_double(0x{:016x}ll), ", sin64_coefficients()[0].to_bits())));
    assert!(c.contains(&format!("#define GROVE_TAU_D0 __longlong_as_double(0x{:016x}ll)", std::f64::consts::TAU.to_bits())));
    assert_eq!(sin(0.0), 0.0);
    assert_eq!(sin(-0.0).to_bits(), (-0.0f32).to_bits());
    assert_eq!(cos(0.0), 1.0);
}
