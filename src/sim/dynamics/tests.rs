//! Tests of the contact solve: block principal pivoting from cold and warm starts, the one-row rule alone, and giving up on a matrix that is not definite.

use super::*;
use rand::{Rng, SeedableRng};

/// A contact-like problem: `points` contact points of 3 rows each (J_n ± μJ_t and J_n, so
/// A = J M⁻¹ Jᵀ is singular and only R makes A + R definite) and `limits` joint-limit rows,
/// with right-hand sides of both signs. Returns (nr, A, R, b).
fn problem(rng: &mut rand::rngs::StdRng, nv: usize, points: usize, limits: usize) -> (usize, Vec<f64>, Vec<f64>, Vec<f64>) {
    let mut jac: Vec<Vec<f64>> = Vec::new();
    for _ in 0..points {
        let n: Vec<f64> = (0..nv).map(|_| rng.random_range(-1.0..1.0)).collect();
        let t: Vec<f64> = (0..nv).map(|_| rng.random_range(-1.0..1.0)).collect();
        let mu = rng.random_range(0.5..2.0);
        for s in [mu, -mu, 0.0] {
            jac.push(n.iter().zip(&t).map(|(a, b)| a + s * b).collect());
        }
    }
    for _ in 0..limits {
        let mut row = vec![0.0; nv];
        row[rng.random_range(0..nv)] = if rng.random_bool(0.5) { 1.0 } else { -1.0 };
        jac.push(row);
    }
    let g = DMatrix::<f64>::from_fn(nv, nv, |_, _| rng.random_range(-1.0..1.0));
    let mass = &g * g.transpose() + DMatrix::identity(nv, nv) * 0.1;
    let inv = mass.try_inverse().unwrap();
    let nr = jac.len();
    let j = DMatrix::from_fn(nr, nv, |r, c| jac[r][c]);
    let a = &j * inv * j.transpose();
    let reg: Vec<f64> = (0..nr).map(|r| a[(r, r)] * rng.random_range(0.02..0.2) + 1e-6).collect();
    let b: Vec<f64> = (0..nr).map(|_| rng.random_range(-3.0..1.0)).collect();
    (nr, (0..nr * nr).map(|k| a[(k / nr, k % nr)]).collect(), reg, b)
}

/// The largest breach of f ≥ 0, w ≥ 0 and f·w = 0, relative to the problem's scale.
fn breach(nr: usize, a: &[f64], reg: &[f64], b: &[f64], f: &[f64]) -> f64 {
    let scale = 1.0 + b.iter().fold(0.0f64, |m, x| m.max(x.abs())) + f.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    (0..nr)
        .map(|i| {
            let w = b[i] + reg[i] * f[i] + (0..nr).map(|j| a[i * nr + j] * f[j]).sum::<f64>();
            (-f[i]).max(-w).max(f[i].min(w).abs())
        })
        .fold(0.0, f64::max)
        / scale
}

#[test]
fn pivoting_solves_contact_problems_exactly_from_cold_and_warm_starts() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut solved = 0;
    for case in 0..400 {
        let (nv, points, limits) = (rng.random_range(3..10), rng.random_range(0..6), rng.random_range(0..4));
        let (nr, a, reg, b) = problem(&mut rng, nv, points, limits);
        let mut f = vec![0.0; nr];
        if case % 2 == 1 {
            f.iter_mut().for_each(|x| *x = if rng.random_bool(0.5) { rng.random_range(0.0..2.0) } else { 0.0 });
        }
        assert!(pivot_solve(nr, &a, &reg, &b, &mut f), "case {case}: {nr} rows did not settle in {MAX_PIVOTS} rounds");
        assert!(breach(nr, &a, &reg, &b, &f) < 1e-9, "case {case}: {f:?}");
        // The solution is unique: long projected Gauss–Seidel reaches the same forces.
        let diag: Vec<f64> = (0..nr).map(|i| a[i * nr + i] + reg[i]).collect();
        let mut g = vec![0.0; nr];
        pgs(200_000, nr, &a, &reg, &b, &diag, &mut g);
        for (x, y) in f.iter().zip(&g) {
            assert!((x - y).abs() <= 1e-7 * (1.0 + y.abs()), "case {case}: pivoting {x}, PGS {y}");
        }
        solved += (nr > 0) as usize;
    }
    assert!(solved > 300);
}

#[test]
fn the_one_row_rule_alone_also_reaches_the_solution() {
    // No patience: every round that does not reduce the broken rows exchanges one row
    // (Murty's rule), the path block exchanges fall back on when they cycle.
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    for case in 0..200 {
        let (points, limits) = (rng.random_range(1..6), rng.random_range(0..4));
        let (nr, a, reg, b) = problem(&mut rng, 6, points, limits);
        let mut f = vec![0.0; nr];
        assert!(pivot_rounds(nr, &a, &reg, &b, &mut f, 0, 4096), "case {case}");
        assert!(breach(nr, &a, &reg, &b, &f) < 1e-9, "case {case}");
    }
}

#[test]
fn pivoting_in_f32_settles_and_stays_close_to_f64() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    for case in 0..200 {
        let (points, limits) = (rng.random_range(1..6), rng.random_range(0..4));
        let (nr, a, reg, b) = problem(&mut rng, 9, points, limits);
        let mut f = vec![0.0; nr];
        assert!(pivot_solve(nr, &a, &reg, &b, &mut f));
        let c = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
        let mut g = vec![0.0f32; nr];
        assert!(pivot_solve(nr, &c(&a), &c(&reg), &c(&b), &mut g), "case {case}: f32 did not settle");
        let size = f.iter().fold(1.0f64, |m, x| m.max(x.abs()));
        for (x, y) in f.iter().zip(&g) {
            assert!((x - *y as f64).abs() <= 1e-2 * size, "case {case}: f64 {x}, f32 {y}");
        }
    }
}

#[test]
fn pivoting_gives_up_on_a_matrix_that_is_not_definite_and_keeps_the_warm_start() {
    // A + R indefinite: the first factor of the free rows fails.
    let (a, reg, b) = (vec![1.0, 2.0, 2.0, 1.0], vec![0.0, 0.0], vec![-1.0, -1.0]);
    let mut f = vec![0.5, 0.25];
    assert!(!pivot_solve(2, &a, &reg, &b, &mut f));
    assert_eq!(f, vec![0.5, 0.25]);
    // No rows: nothing to solve, trivially settled.
    assert!(pivot_solve::<f64>(0, &[], &[], &[], &mut []));
}
