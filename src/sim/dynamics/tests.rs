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

/// `smooth` over every DOF, as it was before it looped over each body's path (2aad3fa): every
/// column of every body's Jacobian, zeros included, in every sum.
fn smooth_over_every_dof<T: Real>(m: &Model, k: &Kinematics<T>, v: &[T]) -> (DMatrix<T>, DVector<T>, DVector<T>) {
    let nv = m.nv();
    let jv = |jac: &[[T; 3]]| {
        let mut o = [T::zero(); 3];
        for (c, &vi) in jac.iter().zip(v) {
            o[0] += c[0] * vi;
            o[1] += c[1] * vi;
            o[2] += c[2] * vi;
        }
        o
    };
    let (mut mass, mut bias, mut fluid) = (DMatrix::<T>::zeros(nv, nv), DVector::<T>::zeros(nv), DVector::<T>::zeros(nv));
    for (j, jt) in m.joints.iter().enumerate() {
        mass[(j, j)] = r(jt.armature);
    }
    let (mut jac, mut scratch) = (vec![[T::zero(); 3]; nv], vec![[T::zero(); 3]; nv]);
    let g: V2<T> = v2(m.gravity);
    for (b, body) in m.bodies.iter().enumerate() {
        let c = world_point(m, k, b, body.com);
        jacobian(m, k, b, c, body.path.len(), &mut jac);
        let (mb, ib): (T, T) = (r(body.mass), r(body.inertia[2]));
        for i in 0..nv {
            for j in 0..nv {
                mass[(i, j)] += mb * (jac[i][0] * jac[j][0] + jac[i][1] * jac[j][1]) + ib * jac[i][2] * jac[j][2];
            }
        }
        let pdot = jv(&jac);
        let mut a = [T::zero(); 2];
        for (n, &j) in body.path.iter().enumerate() {
            if let JointKind::Hinge { sign } = m.joints[j].kind {
                jacobian(m, k, b, k.anchor[j], n, &mut scratch);
                let adot = jv(&scratch);
                let d = perp([pdot[0] - adot[0], pdot[1] - adot[1]]);
                let s: T = r(sign);
                a[0] += s * d[0] * v[j];
                a[1] += s * d[1] * v[j];
            }
        }
        for i in 0..nv {
            bias[i] += mb * (jac[i][0] * (a[0] - g[0]) + jac[i][1] * (a[1] - g[1]));
        }
        if let Some([rho, mu]) = m.fluid {
            let f = fluid_force(fluid_coefficients(body, rho, mu), k.ang[b] + r(body.inertia_angle), jv(&jac));
            for i in 0..nv {
                fluid[i] += jac[i][0] * f[0] + jac[i][1] * f[1] + jac[i][2] * f[2];
            }
        }
    }
    (mass, bias, fluid)
}

fn same_bits<T: Real>(a: &[T], b: &[T]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.exact_f64().to_bits() == y.exact_f64().to_bits())
}

/// Looping over each body's path changes no bit of M (every entry, both triangles), the bias or
/// the fluid forces at finite states: the terms left out would add ±0 to sums that start at +0.
/// Every shipped env and profile, in f32 (the kernels') and f64, at states far from rest.
fn path_loops_equal_every_dof_loops<T: Real>() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(57);
    for (env, _) in crate::sim::spec::SHIPPED {
        for profile in ["brax", "gymnasium"] {
            let m = Model::load(env, Some(profile)).unwrap();
            assert!(m.bodies.iter().any(|b| b.path.len() < m.nv()), "{env}: some body must leave DOFs out");
            for _ in 0..50 {
                let q: Vec<T> = m.joints.iter().map(|j| r(j.qpos0 + rng.random_range(-1.5..1.5))).collect();
                let v: Vec<T> = (0..m.nv()).map(|_| r(rng.random_range(-8.0..8.0))).collect();
                let ctrl: Vec<T> = (0..m.nu()).map(|_| r(rng.random_range(-1.0..1.0))).collect();
                let k = kinematics(&m, &q);
                let s = smooth(&m, &k, &q, &v, &ctrl);
                let (mass, bias, fluid) = smooth_over_every_dof(&m, &k, &v);
                assert!(same_bits(s.mass.as_slice(), mass.as_slice()), "{env} {profile}: M\n{}\n{}", s.mass, mass);
                assert!(same_bits(s.bias.as_slice(), bias.as_slice()), "{env} {profile}: bias {} {}", s.bias, bias);
                assert!(same_bits(s.fluid.as_slice(), fluid.as_slice()), "{env} {profile}: fluid {} {}", s.fluid, fluid);
            }
        }
    }
}

#[test]
fn the_path_loops_give_the_every_dof_loops_bits_in_f32() {
    path_loops_equal_every_dof_loops::<f32>();
}

#[test]
fn the_path_loops_give_the_every_dof_loops_bits_in_f64() {
    path_loops_equal_every_dof_loops::<f64>();
}
