//! The interpreter against the f64 reference, against its own point semantics (bitwise), and
//! the regression metrics against hand-computed values.

use super::bench::{random_population, random_tree};
use super::*;
use crate::program::ops::{FUNCTIONS, apply_fast};
use crate::program::tree::Node;
use crate::rng::{Purpose, Stream};

/// `[n_features][n_rows]` inputs uniform in [−2, 2).
fn random_x(seed: u64, n_features: usize, n_rows: usize) -> Vec<f32> {
    let mut s = Stream::new(seed, 0, 0, Purpose::Data);
    (0..n_features * n_rows).map(|_| s.unit_f32() * 4.0 - 2.0).collect()
}

fn widen(x: &[f32]) -> Vec<f64> {
    x.iter().map(|&v| v as f64).collect()
}

fn pop_of(trees: &[Vec<Node>], n_outputs: usize) -> Population {
    let max_len = trees.iter().map(Vec::len).max().unwrap_or(1).max(1);
    let mut pop = Population::new(trees.len(), max_len, n_outputs);
    for (i, t) in trees.iter().enumerate() {
        pop.set_tree(i, t).unwrap();
    }
    pop.validate().unwrap();
    pop
}

fn out(node: Node, slot: u8) -> Node {
    Node { out: slot + 1, ..node }
}

/// One point in f32 with [`apply_fast`], node by node: what the block interpreter must give,
/// bit for bit (outputs summed in decreasing node index, as documented).
fn eval_scalar_fast(tree: TreeRef<'_>, x: &[f32], n_rows: usize, row: usize, n_outputs: usize) -> Vec<f32> {
    let mut outs = vec![0.0f32; n_outputs];
    let mut stack: Vec<f32> = Vec::new();
    for i in (0..tree.len()).rev() {
        let op = Op::from_code(tree.op[i]).unwrap();
        let (value, passed) = match op {
            Op::Var => {
                let v = x[tree.value[i] as usize * n_rows + row];
                (v, v)
            }
            Op::Const => (tree.value[i], tree.value[i]),
            _ if op.arity() == 1 => {
                let a = stack.pop().unwrap();
                (apply_fast(op, a, 0.0), a)
            }
            _ => {
                let (a, b) = (stack.pop().unwrap(), stack.pop().unwrap());
                (apply_fast(op, a, b), b)
            }
        };
        if tree.out[i] > 0 {
            outs[tree.out[i] as usize - 1] += value;
            stack.push(passed);
        } else {
            stack.push(value);
        }
    }
    if n_outputs == 0 {
        stack
    } else {
        outs
    }
}

/// How [`eval_variant`] departs from the reference.
#[derive(Clone, Copy)]
enum Variant {
    /// Every function node's result times `1 ± δ`, δ = 2^-20 (16 f32 ulps), the sign drawn
    /// from the pattern (0: all +).
    Perturb(u32),
    /// In f32 with `Op::apply::<f32>` (libm), as the operator table writes each formula.
    F32,
}

/// The reference evaluated as `variant` says, with the largest and smallest non-zero
/// |intermediate| seen: tells whether f32 rounding could move the result (see
/// `is_well_conditioned`).
fn eval_variant(tree: TreeRef<'_>, x: &[f64], n_rows: usize, row: usize, n_outputs: usize, variant: Variant) -> (Vec<f64>, f64, f64) {
    const DELTA: f64 = 1.0 / (1u64 << 20) as f64;
    let mut outs = vec![0.0f64; n_outputs];
    let mut stack: Vec<f64> = Vec::new();
    let (mut big, mut small) = (0.0f64, f64::INFINITY);
    for i in (0..tree.len()).rev() {
        let op = Op::from_code(tree.op[i]).unwrap();
        let (value, passed) = match op {
            Op::Var => {
                let v = x[tree.value[i] as usize * n_rows + row];
                (v, v)
            }
            Op::Const => (tree.value[i] as f64, tree.value[i] as f64),
            _ => {
                let a = stack.pop().unwrap();
                let (b, passed) = if op.arity() == 2 {
                    let b = stack.pop().unwrap();
                    (b, b)
                } else {
                    (0.0, a)
                };
                let v = op.apply(a, b);
                let v = match variant {
                    Variant::Perturb(p) => {
                        let minus = p != 0 && (p.wrapping_mul(i as u32 + 7).rotate_left(13) & 1) == 1;
                        v * if minus { 1.0 - DELTA } else { 1.0 + DELTA }
                    }
                    Variant::F32 => op.apply(a as f32, b as f32) as f64,
                };
                (v, passed)
            }
        };
        if value.is_finite() {
            big = big.max(value.abs());
            if value != 0.0 {
                small = small.min(value.abs());
            }
        }
        if tree.out[i] > 0 {
            outs[tree.out[i] as usize - 1] += value;
            stack.push(passed);
        } else {
            stack.push(value);
        }
    }
    (if n_outputs == 0 { stack } else { outs }, big, small)
}

/// True where the f64 reference value `r` (output `k`) is a fair target for an f32
/// evaluation. Skipped points are those where f32 itself, not this interpreter, decides the
/// answer, and any f32 evaluation (CUDA's included) may legitimately differ by more than the
/// tolerance:
/// - an intermediate outside [1e-30, 1e30] in magnitude (f32 overflows or flushes where f64
///   does not);
/// - an f32 evaluation with libm (`Op::apply::<f32>`) differs from `r` by more than a quarter
///   of the tolerance, or in being NaN or infinite (e.g. `sigmoid` saturating to exactly 1 in
///   f32, then `slog` giving exactly 0 and `spow(−0.4, 0)` giving 1 where f64 gives NaN; or
///   `plog(6e-12)` giving 0 because `1 + 6e-12` is 1 in f32, then `pow(0, −2)` = inf);
/// - perturbing every node's result by 2^-20 (four times the 2^-22 a node's f32 rounding or
///   fast function may add), in three sign patterns, moves `r` by more than half the tolerance:
///   an ill-conditioned program (`exp(exp(x))`, `sin(1e4·x)`, division by a cancelled
///   difference, a protected operator's jump), where the first-order error of any f32
///   evaluation is not bounded by the tolerance.
fn is_well_conditioned(tree: TreeRef<'_>, x: &[f64], n_rows: usize, row: usize, n_outputs: usize, k: usize, r: f64) -> bool {
    let variants = [Variant::F32, Variant::Perturb(0), Variant::Perturb(0x9e37_79b9), Variant::Perturb(0x85eb_ca6b)];
    for variant in variants {
        let (p, big, small) = eval_variant(tree, x, n_rows, row, n_outputs, variant);
        if big > 1e30 || small < 1e-30 {
            return false;
        }
        let q = p[k];
        let same_special = (r.is_nan() && q.is_nan()) || (r.is_infinite() && q == r);
        let bound = if matches!(variant, Variant::F32) { TOL / 4.0 } else { TOL / 2.0 };
        let close = (q - r).abs() <= bound * r.abs().max(1.0); // false for NaN
        if !same_special && !close {
            return false;
        }
    }
    true
}

/// The f32 interpreter's tolerance against the f64 reference: |f − r| ≤ TOL·max(1, |r|).
const TOL: f64 = 1e-5;

fn all_ops_but_var_const() -> Vec<Op> {
    FUNCTIONS.to_vec()
}

#[test]
fn interpreter_matches_reference_on_random_trees() {
    // 3000 trees over every operator, 1–3 features, single- and multi-output, 24 rows each.
    let n_rows = 24;
    let mut checked = 0usize;
    let mut skipped = 0usize;
    for (set, n_outputs) in [(0u64, 0usize), (1, 0), (2, 3)] {
        let n_features = 1 + set as usize;
        let x = random_x(100 + set, n_features, n_rows);
        let xd = widen(&x);
        let funcs = if set == 1 {
            vec![Op::Add, Op::Sub, Op::Mul, Op::Div, Op::Sin, Op::Cos, Op::Log, Op::Exp]
        } else {
            all_ops_but_var_const()
        };
        let pop = random_population(7 + set, 1000, 1, 40, &funcs, n_features as u32, n_outputs);
        let n_out = n_outputs.max(1);
        for i in 0..pop.size() {
            let got = predict(&pop, i, &x, n_rows).unwrap();
            for row in 0..n_rows {
                let want = eval_reference(pop.tree(i), &xd, n_rows, row, n_outputs);
                for k in 0..n_out {
                    let (g, r) = (got[k * n_rows + row] as f64, want[k]);
                    if !is_well_conditioned(pop.tree(i), &xd, n_rows, row, n_outputs, k, r) {
                        skipped += 1;
                        continue;
                    }
                    checked += 1;
                    let ok = if r.is_finite() {
                        (g - r).abs() <= TOL * r.abs().max(1.0)
                    } else {
                        (r.is_nan() && g.is_nan()) || g == r
                    };
                    assert!(
                        ok,
                        "first mismatch at [set {set}, tree {i}, out {k}, row {row}]: f32={g:e} f64={r:e}\n{:?}",
                        pop.tree(i).nodes()
                    );
                }
            }
        }
    }
    // The check must not be vacuous.
    assert!(checked > 5 * skipped, "checked {checked}, skipped {skipped} ill-conditioned points");
}

#[test]
fn blocks_give_the_point_semantics_bit_for_bit() {
    // Full blocks, a partial last block and two chunks; every operator; multi-output too.
    let n_rows = CHUNK_ROWS + BLOCK + 37;
    for (seed, n_outputs) in [(1u64, 0usize), (2, 2)] {
        let x = random_x(seed, 2, n_rows);
        let pop = random_population(seed, 60, 1, 50, &all_ops_but_var_const(), 2, n_outputs);
        let n_out = n_outputs.max(1);
        for i in 0..pop.size() {
            let got = predict(&pop, i, &x, n_rows).unwrap();
            for row in (0..n_rows).step_by(7).chain([n_rows - 1]) {
                let want = eval_scalar_fast(pop.tree(i), &x, n_rows, row, n_outputs);
                for k in 0..n_out {
                    let g = got[k * n_rows + row];
                    assert!(
                        g.to_bits() == want[k].to_bits() || (g.is_nan() && want[k].is_nan()),
                        "first mismatch at [tree {i}, out {k}, row {row}]: block={g:e} point={:e}",
                        want[k]
                    );
                }
            }
        }
    }
}

#[test]
fn apply_fast_is_op_apply_within_a_few_ulp() {
    // Pointwise: every operator, a grid of arguments, against the f64 reference.
    let grid: Vec<f32> = (-60..=60).map(|i| i as f32 * 0.173).chain([0.0, -0.0, 1e-20, 1e3, -1e4, 7e3]).collect();
    for &op in FUNCTIONS {
        for &a in &grid {
            for &b in &grid {
                let (g, r) = (apply_fast(op, a, b) as f64, op.apply(a as f64, b as f64));
                let r32 = r as f32 as f64; // f32 can do no better than rounding the exact value
                let ok = if r32.is_finite() {
                    (g - r).abs() <= 4.0 * f32::EPSILON as f64 * r.abs().max(1e-30) + 1e-7
                } else {
                    g.to_bits() == r32.to_bits() || (g.is_nan() && r.is_nan())
                };
                assert!(ok, "{op}({a}, {b}) = {g:e}, f64 says {r:e}");
                if op.arity() == 1 {
                    break;
                }
            }
        }
    }
}

#[test]
fn evogp_worked_example() {
    // EvoGP §V-C: [+<out 1>, x0, *<out 0>, x1, 2] gives [2·x1, x0 + 2].
    let tree = vec![
        out(Node::func(Op::Add), 1),
        Node::var(0),
        out(Node::func(Op::Mul), 0),
        Node::var(1),
        Node::constant(2.0),
    ];
    let pop = pop_of(&[tree], 2);
    let (x0, x1) = ([0.5f32, -3.0, 10.0], [1.25f32, 4.0, -0.75]);
    let x: Vec<f32> = x0.iter().chain(&x1).copied().collect();
    let got = predict(&pop, 0, &x, 3).unwrap();
    let want: Vec<f32> = x1.iter().map(|v| 2.0 * v).chain(x0.iter().map(|v| v + 2.0)).collect();
    assert_eq!(got, want);
    for row in 0..3 {
        let r = eval_reference(pop.tree(0), &widen(&x), 3, row, 2);
        assert_eq!(r, [2.0 * x1[row] as f64, x0[row] as f64 + 2.0]);
    }
}

#[test]
fn leaf_output_nodes_add_and_pass_their_own_value() {
    // [-<out 0>, x0<out 1>, x1<out 1>]: slot 1 gets x0 + x1 (x1 first: decreasing node index),
    // slot 0 gets x0 − x1.
    let tree = vec![out(Node::func(Op::Sub), 0), out(Node::var(0), 1), out(Node::var(1), 1)];
    // A lone leaf output node, and a constant one.
    let lone = vec![out(Node::var(1), 0)];
    let konst = vec![out(Node::constant(1.5), 1)];
    let pop = pop_of(&[tree, lone, konst], 2);
    let x = [3.0f32, -1.0, 0.5, 2.0];
    assert_eq!(predict(&pop, 0, &x, 2).unwrap(), [2.5, -3.0, 3.5, 1.0]);
    assert_eq!(predict(&pop, 1, &x, 2).unwrap(), [0.5, 2.0, 0.0, 0.0]);
    assert_eq!(predict(&pop, 2, &x, 2).unwrap(), [0.0, 0.0, 1.5, 1.5]);
    for (i, row) in [(0, 0), (0, 1), (1, 1), (2, 0)] {
        let r = eval_reference(pop.tree(i), &widen(&x), 2, row, 2);
        let g = predict(&pop, i, &x, 2).unwrap();
        assert_eq!(r, [g[row] as f64, g[2 + row] as f64]);
    }
}

#[test]
fn nested_output_nodes() {
    // [*<out 0>, sin<out 1>, x0, +<out 0>, x1, 3]:
    //   + adds x1 + 3 to slot 0 and passes 3; sin adds sin x0 to slot 1 and passes x0;
    //   * adds x0 · 3 to slot 0. So [(x1 + 3) + 3·x0, sin x0].
    let tree = vec![
        out(Node::func(Op::Mul), 0),
        out(Node::func(Op::Sin), 1),
        Node::var(0),
        out(Node::func(Op::Add), 0),
        Node::var(1),
        Node::constant(3.0),
    ];
    let pop = pop_of(&[tree], 2);
    let x = [0.25f32, -2.0, 1.0, 5.0];
    let got = predict(&pop, 0, &x, 2).unwrap();
    for row in 0..2 {
        let (x0, x1) = (x[row], x[2 + row]);
        assert_eq!(got[row], (x1 + 3.0) + 3.0 * x0);
        assert_eq!(got[2 + row], apply_fast(Op::Sin, x0, 0.0));
        let r = eval_reference(pop.tree(0), &widen(&x), 2, row, 2);
        assert!((r[0] - got[row] as f64).abs() < 1e-6 && (r[1] - got[2 + row] as f64).abs() < 1e-6);
    }
}

#[test]
fn single_output_roots_that_are_leaves_or_constant_subtrees() {
    let trees = vec![
        vec![Node::var(1)],
        vec![Node::constant(-0.5)],
        vec![Node::func(Op::Exp), Node::func(Op::Add), Node::constant(1.0), Node::constant(1.0)],
        vec![Node::func(Op::Mul), Node::var(0), Node::func(Op::Cos), Node::constant(0.0)],
    ];
    let pop = pop_of(&trees, 0);
    let x = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    assert_eq!(predict(&pop, 0, &x, 3).unwrap(), [4.0, 5.0, 6.0]);
    assert_eq!(predict(&pop, 1, &x, 3).unwrap(), [-0.5; 3]);
    assert_eq!(predict(&pop, 2, &x, 3).unwrap(), [apply_fast(Op::Exp, 2.0, 0.0); 3]);
    assert_eq!(predict(&pop, 3, &x, 3).unwrap(), [1.0, 2.0, 3.0]);
    // Leaves fold into their parents, and constant subtrees into one constant: x0 · cos(0) is
    // one instruction, exp(1 + 1) one constant.
    assert_eq!(Program::new(pop.tree(3), 0, 2, 3).unwrap().code.len(), 1);
    assert_eq!(Program::new(pop.tree(2), 0, 2, 2).unwrap().code.len(), 1);
}

#[test]
fn block_boundaries() {
    let tree = vec![
        Node::func(Op::Add),
        Node::func(Op::Sin),
        Node::var(0),
        Node::func(Op::Mul),
        Node::var(1),
        Node::func(Op::Exp),
        Node::var(0),
    ];
    let pop = pop_of(&[tree], 0);
    for n_rows in [1, 2, 7, BLOCK - 1, BLOCK, BLOCK + 1, 3 * BLOCK + 5, CHUNK_ROWS - 1, CHUNK_ROWS, CHUNK_ROWS + 3] {
        let x = random_x(n_rows as u64, 2, n_rows);
        let y: Vec<f32> = random_x(n_rows as u64 + 1, 1, n_rows);
        let f = predict(&pop, 0, &x, n_rows).unwrap();
        assert_eq!(f.len(), n_rows);
        for (row, got) in f.iter().enumerate() {
            let want = eval_scalar_fast(pop.tree(0), &x, n_rows, row, 0)[0];
            assert_eq!(got.to_bits(), want.to_bits(), "n_rows {n_rows}, row {row}");
        }
        let s = evaluate_regression(&pop, &x, &y, n_rows).unwrap()[0];
        assert_eq!(s.n, n_rows as u64);
        assert!(s.finite);
        let e2: f64 = f.iter().zip(&y).map(|(&f, &y)| (f as f64 - y as f64).powi(2)).sum();
        let fy: f64 = f.iter().zip(&y).map(|(&f, &y)| f as f64 * y as f64).sum();
        assert!((s.sum_e2 - e2).abs() <= 1e-12 * e2, "n_rows {n_rows}");
        assert!((s.sum_fy - fy).abs() <= 1e-12 * fy.abs().max(1.0), "n_rows {n_rows}");
    }
}

#[test]
fn nan_and_inf_make_an_individual_invalid() {
    let x = [-1.0f32, 0.5, 3.0, 2.0];
    let y = [0.0f32; 4];
    let trees = vec![
        vec![Node::func(Op::Slog), Node::var(0)], // ln(−1): NaN at row 0
        vec![Node::func(Op::Exp), Node::func(Op::Exp), Node::func(Op::Exp), Node::var(0)], // e^e^e^3: inf
        vec![Node::func(Op::Sdiv), Node::var(0), Node::func(Op::Sub), Node::var(0), Node::var(0)], // x/0
        vec![Node::func(Op::Div), Node::var(0), Node::func(Op::Sub), Node::var(0), Node::var(0)], // protected: 1
        vec![Node::func(Op::Sin), Node::constant(f32::MAX)], // libm path, finite
    ];
    let pop = pop_of(&trees, 0);
    let sums = evaluate_regression(&pop, &x, &y, 4).unwrap();
    assert_eq!(sums.iter().map(|s| s.finite).collect::<Vec<_>>(), [false, false, false, true, true]);
    assert_eq!(sums[0].mse(), f64::INFINITY);
    assert_eq!(sums[1].r2(), f64::NEG_INFINITY);
    assert_eq!(sums[2].scaled_mse(), f64::INFINITY);
    // The same points are non-finite in the interpreter and in the f64 reference.
    let xd = widen(&x);
    for i in 0..trees.len() {
        let f = predict(&pop, i, &x, 4).unwrap();
        for (row, got) in f.iter().enumerate() {
            let r = eval_reference(pop.tree(i), &xd, 4, row, 0)[0];
            assert_eq!(got.is_finite(), r.abs() <= f32::MAX as f64, "tree {i} row {row}");
            assert_eq!(got.is_nan(), r.is_nan(), "tree {i} row {row}");
        }
    }
}

#[test]
fn finite_flag_is_exactly_any_non_finite_output() {
    let n_rows = 300;
    let x = random_x(9, 1, n_rows);
    let y = random_x(10, 1, n_rows);
    let pop = random_population(3, 400, 1, 30, &all_ops_but_var_const(), 1, 0);
    let sums = evaluate_regression(&pop, &x, &y, n_rows).unwrap();
    let mut invalid = 0;
    for (i, s) in sums.iter().enumerate() {
        let f = predict(&pop, i, &x, n_rows).unwrap();
        assert_eq!(s.finite, f.iter().all(|v| v.is_finite()), "tree {i}");
        invalid += !s.finite as usize;
    }
    assert!(invalid > 0 && invalid < 400, "{invalid} invalid: the test needs both kinds");
}

#[test]
fn empty_trees_are_invalid() {
    let mut pop = Population::new(2, 4, 0);
    pop.set_tree(1, &[Node::var(0)]).unwrap();
    let x = [1.0f32, 2.0];
    let sums = evaluate_regression(&pop, &x, &[1.0, 2.0], 2).unwrap();
    assert!(!sums[0].finite && !sums[0].is_valid() && sums[0].mse().is_infinite());
    assert!(sums[1].is_valid() && sums[1].mse() == 0.0);
    assert!(predict(&pop, 0, &x, 2).unwrap().iter().all(|v| v.is_nan()));
    assert!(evaluate_fold(&pop, &x, 2, &Collect).unwrap()[0].is_none());
    assert!(eval_reference(pop.tree(0), &[1.0, 2.0], 2, 0, 0)[0].is_nan());
}

/// Every field, as bits.
fn bits(s: &RegressionSums) -> [u64; 9] {
    [
        s.n,
        s.sum_e2.to_bits(),
        s.sum_abs_e.to_bits(),
        s.sum_f.to_bits(),
        s.sum_f2.to_bits(),
        s.sum_fy.to_bits(),
        s.sum_y.to_bits(),
        s.sum_y2.to_bits(),
        s.finite as u64,
    ]
}

#[test]
fn results_do_not_depend_on_the_thread_count() {
    let n_rows = 3 * CHUNK_ROWS + 100;
    let (x, y) = super::bench::sextic(5, n_rows);
    let funcs = [Op::Add, Op::Sub, Op::Mul, Op::Div, Op::Sin, Op::Cos, Op::Log, Op::Exp];
    let pop = random_population(11, 40, 5, 40, &funcs, 1, 0);
    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        pool.install(|| evaluate_regression(&pop, &x, &y, n_rows).unwrap()).iter().map(bits).collect::<Vec<_>>()
    };
    let one = run(1);
    assert_eq!(one, run(2));
    assert_eq!(one, run(3));
}

#[test]
fn metrics_match_hand_computed_values() {
    // f = [1, 2, 3, 4], y = [1, 3, 2, 5]: e = [0, −1, 1, −1]; ȳ = 2.75, Σ(y − ȳ)² = 8.75;
    // f̄ = 2.5, Σ(f − f̄)² = 5, Σ(f − f̄)(y − ȳ) = 5.5, so a = 1.1, b = 0, scaled SSE = 2.7.
    let pop = pop_of(&[vec![Node::var(0)]], 0);
    let s = evaluate_regression(&pop, &[1.0, 2.0, 3.0, 4.0], &[1.0, 3.0, 2.0, 5.0], 4).unwrap()[0];
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-14 * b.abs().max(1.0);
    assert_eq!((s.n, s.sum_e2, s.sum_abs_e, s.sum_f, s.sum_f2, s.sum_fy, s.sum_y, s.sum_y2), (4, 3.0, 3.0, 10.0, 30.0, 33.0, 11.0, 39.0));
    assert!(close(s.mse(), 0.75) && close(s.rmse(), 0.75f64.sqrt()) && close(s.mae(), 0.75));
    assert!(close(s.r2(), 1.0 - 3.0 / 8.75));
    let (a, b) = s.scale();
    assert!(close(a, 1.1) && close(b, 0.0), "{a} {b}");
    assert!(close(s.scaled_mse(), 2.7 / 4.0));
    assert!(close(s.scaled_r2(), 1.0 - 2.7 / 8.75));
}

#[test]
fn linear_scaling_recovers_a_and_b() {
    // f = (y − 3) / 2, so y = 2·f + 3: a = 2, b = 3 exactly (all sums are exact here).
    let tree = vec![Node::func(Op::Div), Node::func(Op::Sub), Node::var(0), Node::constant(3.0), Node::constant(2.0)];
    let pop = pop_of(&[tree], 0);
    let y: Vec<f32> = (0..1000).map(|i| i as f32 * 0.5 - 70.0).collect();
    let s = evaluate_regression(&pop, &y, &y, y.len()).unwrap()[0];
    assert_eq!(s.scale(), (2.0, 3.0));
    assert_eq!(s.scaled_mse(), 0.0);
    assert_eq!(s.scaled_r2(), 1.0);
    assert!(s.mse() > 100.0);
}

#[test]
fn constant_outputs_never_scale_into_a_fit() {
    // Regression guard: Σf² − n·f̄² of a constant is rounding noise, not variance; dividing by
    // it would make a constant program look like a perfect fit after scaling.
    let y: Vec<f32> = (0..5000).map(|i| ((i * 37) % 101) as f32 * 0.01).collect();
    let pop = pop_of(&[vec![Node::constant(0.1)], vec![Node::constant(1234.567)]], 0);
    let x = vec![0.0f32; y.len()];
    for s in evaluate_regression(&pop, &x, &y, y.len()).unwrap() {
        let (a, b) = s.scale();
        assert_eq!(a, 0.0);
        assert!((b - s.sum_y / s.n as f64).abs() < 1e-12);
        assert_eq!(s.scaled_r2(), 0.0);
        let var_y = s.sum_y2 / s.n as f64 - (s.sum_y / s.n as f64).powi(2);
        assert!((s.scaled_mse() - var_y).abs() <= 1e-9 * var_y);
    }
}

#[test]
fn constant_target_follows_the_r2_convention() {
    let pop = pop_of(&[vec![Node::var(0)], vec![Node::constant(2.0)]], 0);
    let x = [1.0f32, 2.0, 3.0];
    let s = evaluate_regression(&pop, &x, &[2.0; 3], 3).unwrap();
    assert_eq!((s[0].r2(), s[1].r2()), (0.0, 1.0));
    assert_eq!((s[0].scaled_r2(), s[1].scaled_r2()), (1.0, 1.0));
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    let pop = pop_of(&[vec![Node::var(2)]], 0);
    let x = [0.0f32; 6];
    assert_eq!(
        evaluate_regression(&pop, &x, &[0.0; 3], 3).unwrap_err(),
        EvalError::Variable { tree: 0, node: 0, var: 2.0, n_features: 2 }
    );
    assert_eq!(predict(&pop, 0, &x, 4).unwrap_err(), EvalError::DataShape { len: 6, n_rows: 4 });
    assert_eq!(predict(&pop, 3, &x, 3).unwrap_err(), EvalError::NoSuchIndividual { index: 3, size: 1 });
    assert_eq!(predict(&pop, 0, &[], 0).unwrap_err(), EvalError::NoRows);
    let ok = pop_of(&[vec![Node::var(0)]], 0);
    assert_eq!(evaluate_regression(&ok, &x, &[0.0; 2], 3).unwrap_err(), EvalError::TargetLength { len: 2, n_rows: 3 });
    assert_eq!(
        evaluate_regression(&ok, &x, &[0.0, f32::NAN, 0.0], 3).unwrap_err(),
        EvalError::TargetNotFinite { row: 1 }
    );
    let two = pop_of(&[vec![out(Node::var(0), 1)]], 2);
    assert!(matches!(evaluate_regression(&two, &x, &[0.0; 3], 3), Err(EvalError::TooManyOutputs { .. })));
    // A malformed row (bypassing set_tree) is reported, not a panic.
    let mut bad = Population::new(1, 2, 0);
    bad.op[0] = Op::Add as u8;
    bad.size[0] = 2;
    bad.len[0] = 2;
    bad.op[1] = Op::Var as u8;
    bad.size[1] = 1;
    assert!(matches!(predict(&bad, 0, &x, 3), Err(EvalError::Malformed { .. })));
}

#[test]
fn compiled_programs_keep_few_slots() {
    // Leaves are never pushed, so a chain of 30 additions holds one value at a time; a random
    // tree of 60 nodes about its Strahler number.
    let mut chain = Vec::new();
    for _ in 0..30 {
        chain.push(Node::func(Op::Add));
        chain.push(Node::var(0));
    }
    chain.push(Node::var(0));
    let pop = pop_of(&[chain], 0);
    assert_eq!(Program::new(pop.tree(0), 0, 1, 0).unwrap().depth, 1);
    let mut s = Stream::new(1, 0, 0, Purpose::Bench);
    let t = random_tree(&mut s, &[Op::Add, Op::Sin], 1, 60, 0);
    let pop = pop_of(&[t], 0);
    assert!(Program::new(pop.tree(0), 0, 1, 0).unwrap().depth <= 8);
}


#[test]
fn one_output_slot_is_a_single_output_program() {
    // n_outputs == 1: the slot, not the root, is the output: [+, x0<out 0>, 5] gives x0.
    let pop = pop_of(&[vec![Node::func(Op::Add), out(Node::var(0), 0), Node::constant(5.0)]], 1);
    let x = [1.0f32, -2.0, 4.0];
    assert_eq!(predict(&pop, 0, &x, 3).unwrap(), x);
    let s = evaluate_regression(&pop, &x, &x, 3).unwrap()[0];
    assert!(s.is_valid() && s.mse() == 0.0 && s.r2() == 1.0);
}

#[test]
fn head_sums_are_the_sums_of_the_outputs() {
    // 60 random 4-output trees over 5000 rows (two chunks and a partial block): the fused
    // sums equal sums of the predicted outputs, and the head's MSE from them equals the MSE of
    // its predictions.
    let (n_rows, k) = (5000, 4);
    let x = random_x(21, 2, n_rows);
    let y: Vec<f32> = (0..n_rows).map(|r| x[r] * x[n_rows + r] + 0.5 * x[r]).collect();
    let pop = random_population(5, 60, 1, 30, &[Op::Add, Op::Sub, Op::Mul, Op::Sin], 2, k);
    let sums = evaluate_head(&pop, &x, &y, n_rows).unwrap();
    let mut fitted = 0;
    for (i, s) in sums.iter().enumerate() {
        let out = predict(&pop, i, &x, n_rows).unwrap();
        let mut want = HeadSums::new(k);
        let mut f = vec![0.0; k];
        for r in 0..n_rows {
            for (j, v) in f.iter_mut().enumerate() {
                *v = out[j * n_rows + r] as f64;
            }
            want.add_row(&f, y[r] as f64);
        }
        assert_eq!((s.n, s.finite), (want.n, want.finite), "tree {i}");
        if !s.finite {
            continue;
        }
        let close = |a: f64, b: f64, scale: f64| (a - b).abs() <= 1e-12 * scale.max(1.0);
        for j in 0..k {
            assert!(close(s.sum_f[j], want.sum_f[j], want.sum_ff[pair(j, j)]), "tree {i}, Σf{j}");
            assert!(close(s.sum_fy[j], want.sum_fy[j], want.sum_ff[pair(j, j)] + want.sum_y2), "tree {i}, Σf{j}y");
            for m in j..k {
                let scale = want.sum_ff[pair(j, j)] + want.sum_ff[pair(m, m)];
                assert!(close(s.sum_ff[pair(j, m)], want.sum_ff[pair(j, m)], scale), "tree {i}, Σf{j}f{m}");
            }
        }
        let (head, mse, _) = s.fit_scores().unwrap();
        let direct = head.predict(&out, n_rows).iter().zip(&y).map(|(p, &y)| (p - y as f64).powi(2)).sum::<f64>() / n_rows as f64;
        let var = want.sum_y2 / n_rows as f64 - (want.sum_y / n_rows as f64).powi(2);
        assert!((mse - direct).abs() <= 1e-8 * var, "tree {i}: sums {mse}, predictions {direct}");
        fitted += 1;
    }
    assert!(fitted > 30, "only {fitted} of 60 trees were finite");
    let nine = Population::new(1, 1, 9);
    assert_eq!(evaluate_head(&nine, &x, &y, n_rows).unwrap_err(), EvalError::TooManyOutputs { n_outputs: 9, max: 8 });
}

#[test]
fn class_head_sums_are_the_sums_of_the_outputs_per_class() {
    // 40 random 3-output trees and one-output trees over 3000 rows of 4 classes: the fused
    // sums equal sums of the predicted outputs per class; bad labels are named.
    let n_rows = 3000;
    let x = random_x(23, 2, n_rows);
    let labels: Vec<f32> = (0..n_rows).map(|r| ((r * 7 + r / 13) % 4) as f32).collect();
    for k_out in [3usize, 0] {
        let pop = random_population(6, 40, 1, 30, &[Op::Add, Op::Sub, Op::Mul, Op::Sin], 2, k_out);
        let k = k_out.max(1);
        let sums = evaluate_class_head(&pop, &x, &labels, n_rows, 4).unwrap();
        let mut finite = 0;
        for (i, s) in sums.iter().enumerate() {
            let out = predict(&pop, i, &x, n_rows).unwrap();
            let mut want = ClassHeadSums::new(k, 4);
            let mut f = vec![0.0; k];
            for r in 0..n_rows {
                f.iter_mut().enumerate().for_each(|(j, v)| *v = out[j * n_rows + r] as f64);
                want.add_row(&f, labels[r] as usize);
            }
            assert_eq!((s.sums.n, s.sums.finite, &s.counts), (want.sums.n, want.sums.finite, &want.counts), "tree {i}");
            if !s.sums.finite {
                continue;
            }
            finite += 1;
            let close = |a: f64, b: f64, scale: f64| (a - b).abs() <= 1e-12 * scale.max(1.0);
            for j in 0..k {
                let scale = want.sums.sum_ff[pair(j, j)];
                assert!(close(s.sums.sum_f[j], want.sums.sum_f[j], scale), "tree {i}, Σf{j}");
                for c in 0..4 {
                    assert!(close(s.class_f[c][j], want.class_f[c][j], scale), "tree {i}, class {c}, Σf{j}");
                }
            }
            assert!((s.brier() - want.brier()).abs() <= 1e-9, "tree {i}: {} against {}", s.brier(), want.brier());
        }
        assert!(finite > 20, "only {finite} of 40 trees were finite");
    }
    let pop = random_population(6, 2, 1, 10, &[Op::Add], 2, 2);
    let mut bad = labels.clone();
    bad[17] = 4.0;
    assert_eq!(evaluate_class_head(&pop, &x, &bad, n_rows, 4).unwrap_err(), EvalError::Label { row: 17, value: 4.0, n_classes: 4 });
    bad[17] = 1.5;
    assert!(matches!(evaluate_class_head(&pop, &x, &bad, n_rows, 4), Err(EvalError::Label { row: 17, .. })));
}

#[test]
fn user_operators_evaluate_as_their_bodies_bit_for_bit() {
    // Random trees over built-ins and user operators (one and two arguments, one composed of
    // another): the block interpreter, with its folding of constant subtrees, gives what the
    // node-by-node apply_fast gives, which for a user node is its body's steps.
    let defs: Vec<String> = ["e_softsign(x) = x / (1 + abs(x))", "e_hyp(a, b) = sqrt(a*a + b*b)", "e_mix(a, b) = e_softsign(a) * sin(b) - 0.5"]
        .iter()
        .map(|d| d.to_string())
        .collect();
    let user = crate::program::ops::user::register(&defs).unwrap();
    let mut functions = vec![Op::Add, Op::Mul, Op::Sin, Op::Exp];
    functions.extend(&user);
    let mut s = Stream::new(11, 0, 0, Purpose::Init);
    let trees: Vec<Vec<Node>> = (0..60).map(|i| random_tree(&mut s, &functions, 3, 5 + i % 30, 0)).collect();
    assert!(trees.iter().flatten().any(|n| n.op == user[2]), "the trees use the user operators");
    let pop = pop_of(&trees, 0);
    let (n_rows, x) = (37, random_x(5, 3, 37));
    for t in 0..trees.len() {
        let got = predict(&pop, t, &x, n_rows).unwrap();
        for row in 0..n_rows {
            let want = eval_scalar_fast(pop.tree(t), &x, n_rows, row, 0)[0];
            assert_eq!(got[row].to_bits(), want.to_bits(), "tree {t}, row {row}: {} vs {want}", got[row]);
        }
    }
    // And a user node's value is its definition computed by hand.
    let pop = pop_of(&[vec![Node::func(user[0]), Node::var(0)]], 0);
    let got = predict(&pop, 0, &x, n_rows).unwrap();
    for row in 0..n_rows {
        let v = x[row];
        assert_eq!(got[row].to_bits(), (v / (1.0 + v.abs())).to_bits());
    }
}
