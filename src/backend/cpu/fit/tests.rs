//! Fitting against finite differences and known curves; trees it must leave alone.

use super::*;
use crate::program::init::{TreeSpec, init_population};
use crate::program::tree::{Node, Population};

pub(super) fn arrays(ns: &[Node]) -> (Vec<u8>, Vec<f32>, Vec<u8>) {
    (ns.iter().map(|n| n.op as u8).collect(), ns.iter().map(|n| n.value).collect(), ns.iter().map(|n| n.out).collect())
}

/// `[1][n]` inputs spread over `[lo, hi]`.
pub(super) fn line(n: usize, lo: f32, hi: f32) -> Vec<f32> {
    (0..n).map(|i| lo + (hi - lo) * i as f32 / (n - 1) as f32).collect()
}

/// The tree's value at one point in f64 with its constant leaves replaced, in prefix order,
/// by `c` (the reference the tangents are checked against by finite differences).
fn eval64(op: &[u8], value: &[f32], c: &[f64], xs: &[f64]) -> f64 {
    let mut stack: Vec<f64> = Vec::new();
    let mut k = op.iter().filter(|&&o| o == Op::Const as u8).count();
    for i in (0..op.len()).rev() {
        let o = Op::from_code(op[i]).unwrap();
        match o {
            Op::Var => stack.push(xs[value[i] as usize]),
            Op::Const => {
                k -= 1;
                stack.push(if k < c.len() { c[k] } else { value[i] as f64 });
            }
            _ => {
                let a = stack.pop().unwrap();
                let b = if o.arity() == 2 { stack.pop().unwrap() } else { 0.0 };
                let r = o.apply(a, b);
                // An infinite value inside the tree leaves the slope undefined (the
                // fitting pass then rejects the point): no reference there.
                if !r.is_finite() {
                    return f64::NAN;
                }
                stack.push(r);
            }
        }
    }
    stack[0]
}

#[test]
fn tangents_match_finite_differences_for_every_operator() {
    // Random trees over every operator; at each point the tangent of every fitted constant
    // against a central difference of the f64 reference, where the reference is smooth
    // there (two step sizes agree).
    let functions: Vec<Op> = crate::program::ops::FUNCTIONS.to_vec();
    let spec = TreeSpec::new(functions, 2, 64).with_depth(2, 5).with_const_range(-2.0, 2.0).with_p_const(0.5);
    let pop = init_population(&spec, 400, 5).unwrap();
    let n_rows = 7;
    let x: Vec<f32> = (0..2 * n_rows).map(|i| ((i * 29 % 17) as f32 - 8.0) * 0.23).collect();
    let (mut checked, mut ops_seen) = (0usize, std::collections::BTreeSet::new());
    for t in 0..pop.size() {
        let tree = pop.tree(t);
        let Some(n_c) = fit_plan(tree.op, tree.value, tree.out, 2, 0) else { continue };
        if n_c == 0 {
            continue;
        }
        let total = tree.op.iter().filter(|&&o| o == Op::Const as u8).count();
        let prob = Problem { op: tree.op, value: tree.value, out: tree.out, x: &x, n_rows, total, n_c, ties: Ties::none(n_c), target: Target::Values { y: &[], scaling: false } };
        let mut c32 = [0.0f32; MAX_FIT_CONSTANTS];
        let c64: Vec<f64> = tree.op.iter().zip(tree.value).filter(|(o, _)| **o == Op::Const as u8).take(n_c).map(|(_, v)| *v as f64).collect();
        for (j, v) in c64.iter().enumerate() {
            c32[j] = *v as f32;
        }
        for row in 0..n_rows {
            let xs = [x[row] as f64, x[n_rows + row] as f64];
            let mut tan = [0.0f32; MAX_FIT_CONSTANTS];
            let mut stack = Stack::new();
            let f = prob.point(&c32, row, &mut tan, &mut stack);
            let f64v = eval64(tree.op, tree.value, &c64, &xs);
            // Ill-conditioned points (where f32 and f64 already disagree) say nothing of
            // the tangents.
            if !f.is_finite() || !f64v.is_finite() || f64v.abs() > 1e4 || (f as f64 - f64v).abs() > 1e-5 * (1.0 + f64v.abs()) {
                continue;
            }
            for j in 0..n_c {
                let fd = |h: f64| {
                    let (mut up, mut dn) = (c64.clone(), c64.clone());
                    up[j] += h;
                    dn[j] -= h;
                    (eval64(tree.op, tree.value, &up, &xs) - eval64(tree.op, tree.value, &dn, &xs)) / (2.0 * h)
                };
                let (d1, d2) = (fd(1e-4), fd(5e-5));
                let scale = 1.0 + d1.abs();
                if !d1.is_finite() || (d1 - d2).abs() > 1e-4 * scale || d1.abs() > 1e4 {
                    continue; // not smooth here (a kink, a jump, a protected branch)
                }
                let got = tan[j] as f64;
                assert!((got - d1).abs() <= 2e-3 * scale, "tree {t} row {row} constant {j}: tangent {got}, finite difference {d1}: {:?} {:?} x {xs:?}", tree.op, tree.value);
                checked += 1;
            }
        }
        ops_seen.extend(tree.op.iter().filter(|&&o| o > Op::Const as u8).copied());
    }
    assert!(checked > 500, "only {checked} tangents checked");
    assert!(ops_seen.len() >= crate::program::ops::FUNCTIONS.len() - 2, "operators seen: {ops_seen:?}");
}

#[test]
fn recovers_the_constants_of_a_known_curve() {
    // y = 2.5 sin(1.3 x) + 0.7 from the tree c0 * sin(c1 * x) + c2 started at 1, 1, 0.
    let n = 64;
    let x = line(n, -3.0, 3.0);
    let y: Vec<f32> = x.iter().map(|&v| 2.5 * (1.3 * v).sin() + 0.7).collect();
    let t = [Node::func(Op::Add), Node::func(Op::Mul), Node::constant(1.0), Node::func(Op::Sin), Node::func(Op::Mul), Node::constant(1.0), Node::var(0), Node::constant(0.0)];
    let (op, mut value, out) = arrays(&t);
    let r = fit_tree(&op, &mut value, &out, &x, &y, n, FitConfig { steps: 30, linear_scaling: false });
    assert_eq!(r.constants, 3);
    assert!(r.accepted > 0 && r.sse_after < 1e-6 * r.sse_before, "{r:?}");
    let got = [value[2], value[5], value[7]];
    for (g, w) in got.iter().zip([2.5f32, 1.3, 0.7]) {
        assert!((g - w).abs() < 1e-3, "fitted {got:?}");
    }
    assert_eq!((r.a, r.b), (1.0, 0.0));
}

#[test]
fn with_linear_scaling_fits_scale_offset_and_inner_constants() {
    // y = 3 exp(-0.8 x) − 2 from exp(c · x): the scale and offset come with the fit.
    let n = 50;
    let x = line(n, -1.0, 2.0);
    let y: Vec<f32> = x.iter().map(|&v| 3.0 * (-0.8 * v).exp() - 2.0).collect();
    let t = [Node::func(Op::Exp), Node::func(Op::Mul), Node::constant(-0.3), Node::var(0)];
    let (op, mut value, out) = arrays(&t);
    let r = fit_tree(&op, &mut value, &out, &x, &y, n, FitConfig { steps: 40, linear_scaling: true });
    assert!(r.sse_after < 1e-6, "{r:?}");
    assert!((value[2] + 0.8).abs() < 1e-3 && (r.a - 3.0).abs() < 1e-2 && (r.b + 2.0).abs() < 1e-2, "{value:?} {r:?}");
    // Scaling alone, on a tree without constants: a least-squares line, nothing to step.
    let t = [Node::var(0)];
    let (op, mut value, out) = arrays(&t);
    let r = fit_tree(&op, &mut value, &out, &x, &x.iter().map(|v| 2.0 * v + 1.0).collect::<Vec<_>>(), n, FitConfig { steps: 5, linear_scaling: true });
    assert_eq!(r.constants, 0);
    assert!((r.a - 2.0).abs() < 1e-9 && (r.b - 1.0).abs() < 1e-9 && r.sse_before < 1e-9, "{r:?}");
}

#[test]
fn fitting_never_raises_the_error_and_only_writes_accepted_constants() {
    let functions = crate::program::ops::parse_function_set("add,sub,mul,div,sin,cos,exp,log,sqrt,tanh,aq,square").unwrap();
    let spec = TreeSpec::new(functions, 2, 64).with_depth(2, 6).with_const_range(-3.0, 3.0).with_p_const(0.4);
    let before = init_population(&spec, 300, 9).unwrap();
    let n = 40;
    let x: Vec<f32> = (0..2 * n).map(|i| ((i * 13 % 41) as f32) * 0.1 - 2.0).collect();
    let y: Vec<f32> = (0..n).map(|r| x[r] * x[n + r] + (2.0 * x[r]).sin()).collect();
    for scaling in [false, true] {
        let mut pop = before.clone();
        let rows: Vec<usize> = (0..pop.size()).collect();
        let res = fit_constants(&mut pop, &rows, &x, &y, n, FitConfig { steps: 8, linear_scaling: scaling });
        let (mut improved, mut fitted) = (0, 0);
        let all = crate::backend::cpu::eval::evaluate_regression(&pop, &x, &y, n).unwrap();
        for (t, r) in res.iter().enumerate() {
            let changed = pop.tree(t).value != before.tree(t).value;
            if r.accepted == 0 {
                assert!(!changed, "tree {t}: constants written without an accepted step");
                continue;
            }
            fitted += 1;
            assert!(r.sse_after < r.sse_before, "tree {t}: {r:?}");
            // The fitted tree's error as the interpreter computes it matches the fit's.
            let sums = all[t];
            let sse = if scaling { sums.scaled_mse() * n as f64 } else { sums.mse() * n as f64 };
            assert!(sse <= r.sse_after * (1.0 + 1e-6) + 1e-9, "tree {t}: interpreter SSE {sse}, fit {r:?}");
            improved += (r.sse_after < 0.9 * r.sse_before) as usize;
        }
        assert!(fitted > 50 && improved > 20, "scaling {scaling}: {fitted} fitted, {improved} improved by 10 %");
    }
}

#[test]
fn trees_that_cannot_be_fitted_are_left_alone() {
    let x = line(10, 0.0, 1.0);
    let y = x.clone();
    let cfg = FitConfig { steps: 5, linear_scaling: false };
    // An output node; a variable past the features; no constants; no rows.
    let mut t = [Node::func(Op::Add), Node::var(0), Node::constant(1.0)];
    t[2].out = 1;
    let cases: Vec<(Vec<Node>, usize)> = vec![(t.to_vec(), 10), (vec![Node::func(Op::Add), Node::var(3), Node::constant(1.0)], 10), (vec![Node::func(Op::Sin), Node::var(0)], 10)];
    for (nodes, n) in cases {
        let (op, mut value, out) = arrays(&nodes);
        let keep = value.clone();
        let r = fit_tree(&op, &mut value, &out, &x, &y, n, cfg);
        assert_eq!((r.constants, r.accepted), (0, 0));
        assert_eq!(value, keep);
    }
    let (op, mut value, out) = arrays(&[Node::func(Op::Add), Node::var(0), Node::constant(1.0)]);
    assert_eq!(fit_tree(&op, &mut value, &out, &[], &[], 0, cfg).constants, 0);
    // A walk deeper than the stack: a right-leaning chain x + (x + (… + c)).
    let depth = FIT_STACK + 2;
    let mut nodes = Vec::new();
    for _ in 0..depth {
        nodes.push(Node::func(Op::Add));
        nodes.push(Node::var(0));
    }
    nodes.push(Node::constant(1.0));
    let (op, value, out) = arrays(&nodes);
    assert_eq!(fit_plan(&op, &value, &out, 1, 0), Some(1), "a right-leaning chain needs two values at a time");
    let mut nodes = vec![Node::func(Op::Add); depth];
    nodes.extend(std::iter::repeat_n(Node::constant(1.0), depth + 1));
    let (op, value, out) = arrays(&nodes);
    assert_eq!(fit_plan(&op, &value, &out, 1, 0), None);
}

/// `Slot(c)`: a grammar's constant `c[i]` over its value.
fn slot(i: u32) -> Node {
    Node { op: Op::Slot, value: i as f32, out: 0 }
}

#[test]
fn a_grammars_constants_move_as_one_wherever_they_occur() {
    // y = 1.5·(x0 + x1) − 0.5 from c[0]·x0 + c[0]·x1 + c[1]: the two c[0] are one parameter,
    // fitted to 1.5 (two free leaves could share the slope any way), c[1] to −0.5.
    let n = 40;
    let x: Vec<f32> = (0..2 * n).map(|i| ((i * 13 % 29) as f32 - 14.0) * 0.1).collect();
    let y: Vec<f32> = (0..n).map(|r| 1.5 * (x[r] + x[n + r]) - 0.5).collect();
    let t = [
        Node::func(Op::Add),
        Node::func(Op::Add),
        Node::func(Op::Mul),
        slot(0),
        Node::constant(1.0),
        Node::var(0),
        Node::func(Op::Mul),
        slot(0),
        Node::constant(1.0),
        Node::var(1),
        slot(1),
        Node::constant(1.0),
    ];
    let (op, mut value, out) = arrays(&t);
    assert_eq!(fit_ties(&op, &value, 3).map(|t| (t.n_p, t.group[..3].to_vec())), Some((2, vec![0, 0, 1])));
    let r = fit_tree(&op, &mut value, &out, &x, &y, n, FitConfig { steps: 20, linear_scaling: false });
    assert_eq!(r.constants, 2, "{r:?}");
    assert!(r.accepted > 0 && r.sse_after < 1e-8, "{r:?}");
    assert_eq!(value[4].to_bits(), value[8].to_bits(), "both c[0] carry one value: {value:?}");
    assert!((value[4] - 1.5).abs() < 1e-4 && (value[11] + 0.5).abs() < 1e-4, "{value:?}");
    // The fitted tree's error is the one evaluation gives.
    let mut pop = Population::new(1, 16, 0);
    pop.set_tree(0, &t.iter().enumerate().map(|(i, n)| Node { value: value[i], ..*n }).collect::<Vec<_>>()).unwrap();
    let sums = crate::backend::cpu::eval::evaluate_regression(&pop, &x, &y, n).unwrap();
    assert!((sums[0].sum_e2 - r.sse_after).abs() <= 1e-9 + 1e-6 * r.sse_after, "evaluation {} fit {}", sums[0].sum_e2, r.sse_after);
}

#[test]
fn tied_tangents_are_the_sum_of_their_leaves() {
    // d/dc of c·x + sin(c) at c is x + cos(c): the pass's Jacobian column against the untied
    // tree's two columns added (in f32, leaf order), point by point.
    let n = 9;
    let x = line(n, -2.0, 2.0);
    let tied = [Node::func(Op::Add), Node::func(Op::Mul), slot(3), Node::constant(0.4), Node::var(0), Node::func(Op::Sin), slot(3), Node::constant(0.4)];
    let (op, value, out) = arrays(&tied);
    let ties = fit_ties(&op, &value, 2).unwrap();
    assert_eq!(ties.n_p, 1);
    let target = Target::Values { y: &x, scaling: false };
    let prob = Problem { op: &op, value: &value, out: &out, x: &x, n_rows: n, total: 2, n_c: 2, ties, target };
    let free = Problem { ties: Ties::none(2), ..Problem { op: &op, value: &value, out: &out, x: &x, n_rows: n, total: 2, n_c: 2, ties, target } };
    let c = [0.4f32; MAX_FIT_CONSTANTS];
    let (mut st, mut sf) = (Stack::new(), Stack::new());
    for row in 0..n {
        let (mut t1, mut t2) = ([0.0f32; MAX_FIT_CONSTANTS], [0.0f32; MAX_FIT_CONSTANTS]);
        let f1 = prob.point(&c, row, &mut t1, &mut st);
        let f2 = free.point(&c, row, &mut t2, &mut sf);
        assert_eq!(f1.to_bits(), f2.to_bits());
        assert_eq!(t1[0].to_bits(), (t2[0] + t2[1]).to_bits(), "row {row}");
        let want = x[row] as f64 + 0.4f64.cos();
        assert!((t1[0] as f64 - want).abs() < 1e-5, "row {row}: {} vs {want}", t1[0]);
    }
}

#[test]
fn a_slot_that_reaches_past_the_fitted_leaves_is_not_fitted() {
    // Seventeen constant leaves: the 17th is not fitted, so a c[0] among the first sixteen
    // that recurs there could not move as one; the tree is left alone.
    let mut t = vec![];
    for _ in 0..16 {
        t.push(Node::func(Op::Add));
    }
    t.push(slot(0));
    t.push(Node::constant(1.0));
    for k in 0..15 {
        t.push(Node::constant(k as f32));
    }
    t.push(slot(0));
    t.push(Node::constant(1.0));
    let (op, mut value, out) = arrays(&t);
    assert!(fit_ties(&op, &value, 16).is_none());
    let before = value.clone();
    let x = line(5, 0.0, 1.0);
    let r = fit_tree(&op, &mut value, &out, &x, &x, 5, FitConfig { steps: 5, linear_scaling: true });
    assert_eq!((r.constants, r.accepted), (0, 0));
    assert_eq!(value, before);
    // The same tree with the second c[0] as a c[1] of its own fits its first sixteen.
    let mut t2 = t.clone();
    let last = t2.len() - 2;
    t2[last] = slot(1);
    let (op, value, _) = arrays(&t2);
    assert_eq!(fit_ties(&op, &value, 16).map(|t| t.n_p), Some(16));
}
