//! Constants fitted for classification: Levenberg–Marquardt on the softmax cross-entropy
//! summed over the rows (generalised Gauss–Newton), the twin of `grove_fit_class_constants` in
//! `kernels/fit.cu`. The walk, the pass and the solve are [`super`]'s; this file holds what a
//! row of a classification pass adds up and the entry points.

use super::*;

/// One row's share of a classification pass: `d[k] = T_k − v` (the tangents of logit `k`
/// less their mean under the softmax `p`), `p`, `e[k] = [k = y] − p[k]`, and the row's
/// cross-entropy.
pub(super) struct ClassRow {
    pub(super) d: [[f64; MAX_FIT_CONSTANTS]; MAX_FIT_CLASSES],
    pub(super) p: [f64; MAX_FIT_CLASSES],
    pub(super) e: [f64; MAX_FIT_CLASSES],
    pub(super) ce: f64,
}

impl Problem<'_> {
    /// The row's share of a classification pass (`n_classes` logits). The logits (each slot
    /// plus its offset, where there are offsets: `[max(1, n_outputs)][n_rows]`), their
    /// maximum, the softmax sum and the cross-entropy are those of the classification fitness
    /// (`backend::cpu::classify`); a row with a logit that is not finite has a NaN cross-entropy,
    /// which rejects the pass. The offsets are constants: the tangents do not change. Twin of
    /// `grove_fit_class_row`.
    #[allow(clippy::needless_range_loop, clippy::too_many_arguments)]
    pub(super) fn class_row(
        &self,
        label: u32,
        n_classes: usize,
        n_outputs: usize,
        offset: Option<&[f32]>,
        c: &[f32; MAX_FIT_CONSTANTS],
        row: usize,
        out: &mut ClassRow,
        stack: &mut Stack,
    ) {
        let n_c = self.n_c;
        let mut t = [0.0f32; MAX_FIT_CONSTANTS];
        let f = self.point(c, row, &mut t, stack);
        if n_outputs == 0 {
            // Binary: the logits (0, f), the one offset row added to class 1's.
            stack.ov[0] = 0.0;
            stack.ot[0][..n_c].fill(0.0);
            stack.ov[1] = match offset {
                Some(off) => f + off[row],
                None => f,
            };
            stack.ot[1][..n_c].copy_from_slice(&t[..n_c]);
        } else if let Some(off) = offset {
            for k in 0..n_classes {
                stack.ov[k] += off[k * self.n_rows + row];
            }
        }
        let (z, tz) = (&stack.ov, &stack.ot);
        let mut mx = f32::NEG_INFINITY;
        let mut fin = true;
        for &v in &z[..n_classes] {
            mx = if v > mx { v } else { mx };
            fin &= v.is_finite();
        }
        let mut ex = [0.0f32; MAX_FIT_CLASSES];
        let mut s = 0.0f32;
        for k in 0..n_classes {
            ex[k] = fastmath::exp(z[k] - mx);
            s += ex[k];
        }
        let y = label as usize;
        out.ce = if fin { (mx as f64 - z[y] as f64) + fastmath::ln(s) as f64 } else { f64::NAN };
        for k in 0..n_classes {
            out.p[k] = ex[k] as f64 / s as f64;
            out.e[k] = if k == y { 1.0 - out.p[k] } else { -out.p[k] };
        }
        for j in 0..n_c {
            let mut v = 0.0f64;
            for k in 0..n_classes {
                v += out.p[k] * tz[k][j] as f64;
            }
            for k in 0..n_classes {
                out.d[k][j] = tz[k][j] as f64 - v;
            }
        }
    }
}

/// A classification row's value of the sum `(p, q)` (`m` parameters). Twin of
/// `grove_fit_class_product`.
#[inline(always)]
pub(super) fn class_product(cr: &ClassRow, n_classes: usize, m: usize, p: usize, q: usize) -> f64 {
    if p == m && q == m {
        return cr.ce;
    }
    let mut v = 0.0f64;
    for k in 0..n_classes {
        v += if p == m { cr.e[k] * cr.d[k][q] } else { (cr.p[k] * cr.d[k][p]) * cr.d[k][q] };
    }
    v
}

/// Fits the constants of one classification program (`op`, `value`, `out`: its nodes; output
/// slots `n_outputs`, which is `n_classes`, or 0 for two classes' single output) on `x`
/// (`[n_features][n_rows]`) and `labels` in place, by the softmax cross-entropy summed over
/// the rows (the result's `sse_*` fields), with `offset` (`[max(1, n_outputs)][n_rows]`, the
/// linear terms of the inputs) added to the outputs where given, as the fitness adds it.
/// Programs with more than [`MAX_FIT_CLASSES`] classes, or offsets of another shape, are not
/// fitted. Twin of one block of `grove_fit_class_constants`.
#[allow(clippy::too_many_arguments)]
pub fn fit_class_tree(
    op: &[u8],
    value: &mut [f32],
    out: &[u8],
    x: &[f32],
    labels: &[u32],
    offset: Option<&[f32]>,
    n_rows: usize,
    n_classes: usize,
    n_outputs: usize,
    steps: u32,
) -> FitResult {
    let shape_ok = if n_outputs == 0 { n_classes == 2 } else { n_outputs == n_classes };
    let offset_ok = offset.is_none_or(|o| o.len() == n_outputs.max(1) * n_rows);
    if n_rows == 0 || x.len() % n_rows != 0 || labels.len() != n_rows || !shape_ok || !offset_ok || n_classes > MAX_FIT_CLASSES {
        return NOT_FITTED;
    }
    if labels.iter().any(|&l| l as usize >= n_classes) {
        return NOT_FITTED;
    }
    let Some(n_c) = fit_plan(op, value, out, x.len() / n_rows, n_outputs) else { return NOT_FITTED };
    if n_c == 0 {
        return NOT_FITTED;
    }
    let target = Target::Classes { labels, n_classes, n_outputs, offset };
    levenberg_marquardt(Problem { op, value, out, x, n_rows, total: count_constants(op), n_c, target }, steps)
        .map_or(NOT_FITTED, |(res, theta)| write_back(op, value, res, &theta))
}

/// Fits the constants of rows `rows` of the classification population `pop` (`n_outputs ==
/// n_classes`, or 0 with two classes) in place on `x` (`[n_features][n_rows]`) and `labels`
/// by the softmax cross-entropy, with `offset` (`[max(1, n_outputs)][n_rows]`) added to the
/// outputs where given, in parallel over the rows; one result per row, in `rows`' order. The
/// CPU reference of `grove_fit_class_constants`.
#[allow(clippy::too_many_arguments)]
pub fn fit_class_constants(
    pop: &mut Population,
    rows: &[usize],
    x: &[f32],
    labels: &[u32],
    offset: Option<&[f32]>,
    n_rows: usize,
    n_classes: usize,
    steps: u32,
) -> Vec<FitResult> {
    let n_outputs = pop.n_outputs;
    fit_rows(pop, rows, |op, value, out| fit_class_tree(op, value, out, x, labels, offset, n_rows, n_classes, n_outputs, steps))
}

#[cfg(test)]
mod tests {
    use super::*;
    use super::super::tests::{arrays, line};
    use crate::program::init::{TreeSpec, init_population};
    use crate::program::tree::{Node, Population};

    /// Pseudo-random numbers in [0, 1) from an index (deterministic labels for the tests).
    fn unit(i: usize) -> f64 {
        let mut h = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03;
        h ^= h >> 31;
        h = h.wrapping_mul(0xBF58_476D_1CE4_E5B9);
        h ^= h >> 29;
        (h >> 11) as f64 / (1u64 << 53) as f64
    }

    #[test]
    fn class_sums_are_the_gradient_of_the_cross_entropy() {
        // Multi-output trees over smooth operators with output nodes anywhere, and single-output
        // trees for two classes: row m of a pass is minus the gradient of its summed
        // cross-entropy (against central differences of the pass's own S), and the Hessian
        // block is positive semi-definite on its diagonal.
        let n_rows = 30;
        let x: Vec<f32> = (0..2 * n_rows).map(|i| (unit(i) * 4.0 - 2.0) as f32).collect();
        let (mut checked, mut fitted_outputs) = (0usize, 0usize);
        for (n_outputs, n_classes) in [(3usize, 3usize), (0, 2)] {
            let labels: Vec<u32> = (0..n_rows).map(|r| (unit(1000 + r) * n_classes as f64) as u32).collect();
            let functions = crate::program::ops::parse_function_set("add,sub,mul,sin,tanh").unwrap();
            let spec = TreeSpec::new(functions, 2, 48).with_depth(2, 5).with_const_range(-1.5, 1.5).with_p_const(0.5).with_outputs(n_outputs, if n_outputs > 0 { 0.25 } else { 0.0 });
            let pop = init_population(&spec, 60, 11).unwrap();
            for t in 0..pop.size() {
                let tree = pop.tree(t);
                let Some(n_c) = fit_plan(tree.op, tree.value, tree.out, 2, n_outputs) else { continue };
                if n_c == 0 {
                    continue;
                }
                fitted_outputs += tree.out.iter().any(|&o| o != 0) as usize;
                let target = Target::Classes { labels: &labels, n_classes, n_outputs, offset: None };
                let prob = Problem { op: tree.op, value: tree.value, out: tree.out, x: &x, n_rows, total: count_constants(tree.op), n_c, target };
                let mut theta = [0.0f64; MAX_FIT_PARAMS];
                let consts: Vec<f64> = tree.op.iter().zip(tree.value).filter(|(o, _)| **o == Op::Const as u8).take(n_c).map(|(_, v)| *v as f64).collect();
                theta[..n_c].copy_from_slice(&consts);
                let mut sums = [0.0f64; MAX_FIT_SUMS];
                prob.pass(&theta, &mut sums);
                if !pass_ok(&sums, n_c) {
                    continue;
                }
                for p in 0..n_c {
                    assert!(sums[sum_index(p, p)] >= -1e-9, "tree {t}: Hessian diagonal {p} is {}", sums[sum_index(p, p)]);
                }
                for q in 0..n_c {
                    let s_at = |h: f64| {
                        let mut th = theta;
                        th[q] += h;
                        let mut s2 = [0.0f64; MAX_FIT_SUMS];
                        prob.pass(&th, &mut s2);
                        s2[sum_index(n_c, n_c)]
                    };
                    let (d1, d2) = ((s_at(1e-2) - s_at(-1e-2)) / 2e-2, (s_at(5e-3) - s_at(-5e-3)) / 1e-2);
                    let scale = 1.0 + d1.abs();
                    if !d1.is_finite() || (d1 - d2).abs() > 2e-2 * scale {
                        continue; // not smooth at this scale
                    }
                    let got = -sums[sum_index(n_c, q)];
                    assert!((got - d1).abs() <= 3e-2 * scale, "outputs {n_outputs}, tree {t}, constant {q}: gradient {got}, finite difference {d1}");
                    checked += 1;
                }
            }
        }
        assert!(checked > 100 && fitted_outputs > 10, "{checked} gradients checked, {fitted_outputs} trees with output nodes");
    }

    #[test]
    fn fits_a_logistic_model_to_its_maximum_likelihood() {
        // Two classes from P(class 1) = σ(2x − 1); the tree c0·x + c1 from 0.3, 0.2 lands near
        // (2, −1) (the maximum-likelihood estimate of 4000 rows), and its final cross-entropy is
        // what the classification fitness computes for the fitted tree.
        let n = 4000;
        let x: Vec<f32> = (0..n).map(|i| (unit(i) * 6.0 - 3.0) as f32).collect();
        let labels: Vec<u32> = (0..n).map(|i| (unit(n + i) < 1.0 / (1.0 + (-(2.0 * x[i] as f64 - 1.0)).exp())) as u32).collect();
        let t = [Node::func(Op::Add), Node::func(Op::Mul), Node::constant(0.3), Node::var(0), Node::constant(0.2)];
        let (op, mut value, out) = arrays(&t);
        let r = fit_class_tree(&op, &mut value, &out, &x, &labels, None, n, 2, 0, 25);
        assert_eq!(r.constants, 2);
        assert!(r.accepted > 2 && r.sse_after < r.sse_before, "{r:?}");
        assert!((value[2] - 2.0).abs() < 0.25 && (value[4] + 1.0).abs() < 0.2, "fitted {value:?}");
        let mut pop = Population::new(1, 8, 0);
        pop.set_tree(0, &t.iter().enumerate().map(|(i, n)| Node { value: value[i], ..*n }).collect::<Vec<_>>()).unwrap();
        let sums = crate::backend::cpu::classify::evaluate_classification(&pop, &x, &labels, n, 2).unwrap();
        assert!((sums[0].ce - r.sse_after).abs() <= 1e-6 * r.sse_after, "fitness CE {}, fit {}", sums[0].ce, r.sse_after);
    }

    #[test]
    fn class_fitting_lowers_the_cross_entropy_of_multi_output_programs() {
        // Three classes by the nearest of three centres in the plane; random programs with
        // output nodes. Fitting never raises the cross-entropy, writes constants only when a
        // step was accepted, and the fitness of a fitted program is the fit's.
        let n = 90;
        let x: Vec<f32> = (0..2 * n).map(|i| (unit(7 * i + 3) * 4.0 - 2.0) as f32).collect();
        let centres = [(-1.0f32, -1.0f32), (1.0, 0.0), (-0.5, 1.2)];
        let labels: Vec<u32> = (0..n)
            .map(|r| {
                let d = |c: (f32, f32)| (x[r] - c.0).powi(2) + (x[n + r] - c.1).powi(2);
                (0..3).min_by(|&a, &b| d(centres[a]).total_cmp(&d(centres[b]))).unwrap() as u32
            })
            .collect();
        let functions = crate::program::ops::parse_function_set("add,sub,mul,div").unwrap();
        let spec = TreeSpec::new(functions, 2, 64).with_depth(2, 5).with_constants(&[-1.0, 0.0, 1.0]).with_p_const(0.3).with_outputs(3, 0.2);
        let before = init_population(&spec, 200, 4).unwrap();
        let mut pop = before.clone();
        let rows: Vec<usize> = (0..pop.size()).collect();
        let res = fit_class_constants(&mut pop, &rows, &x, &labels, None, n, 3, 8);
        let sums = crate::backend::cpu::classify::evaluate_classification(&pop, &x, &labels, n, 3).unwrap();
        let (mut fitted, mut improved) = (0, 0);
        for (t, r) in res.iter().enumerate() {
            if r.accepted == 0 {
                assert_eq!(pop.tree(t).value, before.tree(t).value, "tree {t}: constants written without an accepted step");
                continue;
            }
            fitted += 1;
            assert!(r.sse_after < r.sse_before, "tree {t}: {r:?}");
            assert!((sums[t].ce - r.sse_after).abs() <= 1e-5 * (1.0 + r.sse_after), "tree {t}: fitness CE {}, fit {r:?}", sums[t].ce);
            improved += (r.sse_after < 0.8 * r.sse_before) as usize;
        }
        assert!(fitted > 60 && improved > 20, "{fitted} fitted, {improved} improved by 20 %");
    }

    #[test]
    fn class_fitting_reads_the_offsets_as_the_fitness_adds_them() {
        // Linear terms of the inputs arrive as offsets under each output. For three classes
        // (output nodes) and for two (one output, the offset under class 1's logit): the fit's
        // cross-entropy before and after is the fitness's with the same offsets (to 1e-6
        // relative: the two add the rows in other groups), fitting never raises it, and the
        // offsets change what is fitted (the same programs fitted without them end elsewhere).
        let n = 80;
        let x: Vec<f32> = (0..2 * n).map(|i| (unit(11 * i + 5) * 4.0 - 2.0) as f32).collect();
        for (n_outputs, n_classes) in [(3usize, 3usize), (0, 2)] {
            let labels: Vec<u32> = (0..n).map(|r| ((x[r] + 0.5 * x[n + r]).abs() * 1.3) as u32 % n_classes as u32).collect();
            let slots = n_outputs.max(1);
            let offset: Vec<f32> = (0..slots * n).map(|i| (0.8 * x[i % n] - 0.3 * (i / n) as f32 + 0.1 * x[n + i % n]) as f32).collect();
            let functions = crate::program::ops::parse_function_set("add,sub,mul,sin").unwrap();
            let spec = TreeSpec::new(functions, 2, 48).with_depth(2, 5).with_const_range(-1.5, 1.5).with_p_const(0.4).with_outputs(n_outputs, if n_outputs > 0 { 0.25 } else { 0.0 });
            let before = init_population(&spec, 120, 9).unwrap();
            let rows: Vec<usize> = (0..before.size()).collect();
            let (mut with, mut without) = (before.clone(), before.clone());
            let res = fit_class_constants(&mut with, &rows, &x, &labels, Some(&offset), n, n_classes, 6);
            fit_class_constants(&mut without, &rows, &x, &labels, None, n, n_classes, 6);
            let ce = |pop: &Population| crate::backend::cpu::classify::evaluate_classification_with(pop, &x, &labels, n, n_classes, Some(&offset)).unwrap();
            let (start, end) = (ce(&before), ce(&with));
            let (mut fitted, mut differ) = (0, 0);
            for (t, r) in res.iter().enumerate() {
                if r.constants == 0 {
                    continue;
                }
                assert!((start[t].ce - r.sse_before).abs() <= 1e-6 * (1.0 + r.sse_before), "outputs {n_outputs}, tree {t}: fitness CE {} before, fit {r:?}", start[t].ce);
                if r.accepted == 0 {
                    continue;
                }
                fitted += 1;
                assert!(r.sse_after < r.sse_before, "tree {t}: {r:?}");
                assert!((end[t].ce - r.sse_after).abs() <= 1e-6 * (1.0 + r.sse_after), "outputs {n_outputs}, tree {t}: fitness CE {} after, fit {r:?}", end[t].ce);
                differ += (with.tree(t).value != without.tree(t).value) as usize;
            }
            assert!(fitted > 30 && differ > 20, "outputs {n_outputs}: {fitted} fitted, {differ} differ from the fit without offsets");
        }
        // Offsets of another shape are not fitted.
        let t = [Node::func(Op::Mul), Node::constant(0.5), Node::var(0)];
        let (op, value, out) = arrays(&t);
        let labels: Vec<u32> = (0..n).map(|r| (r % 2) as u32).collect();
        let mut v = value.clone();
        let r = fit_class_tree(&op, &mut v, &out, &x, &labels, Some(&vec![0.0; n - 1]), n, 2, 0, 5);
        assert_eq!((r.constants, r.accepted), (0, 0));
        assert_eq!(v, value);
    }

    #[test]
    fn class_fits_refuse_shapes_they_cannot_take() {
        let x = line(12, -1.0, 1.0);
        let labels: Vec<u32> = (0..12).map(|r| (r % 3) as u32).collect();
        let mut t = [Node::func(Op::Add), Node::func(Op::Mul), Node::constant(0.5), Node::var(0), Node::constant(1.0)];
        t[1].out = 1;
        t[4].out = 3;
        let (op, value, out) = arrays(&t);
        // Outputs must be the classes (or none for two); labels below them; at most 16.
        for (labels, k, n_out) in [(&labels, 3usize, 2usize), (&labels, 2, 0), (&labels, 17, 17), (&vec![5u32; 12], 3, 3)] {
            let mut v = value.clone();
            let r = fit_class_tree(&op, &mut v, &out, &x, labels, None, 12, k, n_out, 5);
            assert_eq!((r.constants, r.accepted), (0, 0), "{k} classes, {n_out} outputs");
            assert!(r.sse_before.is_nan());
            assert_eq!(v, value);
        }
        // The same tree with its three slots fits.
        let mut v = value.clone();
        let r = fit_class_tree(&op, &mut v, &out, &x, &labels, None, 12, 3, 3, 5);
        assert_eq!(r.constants, 2, "{r:?}");
        assert!(r.sse_before.is_finite());
    }

    #[test]
    fn class_hessian_is_exact_for_logits_linear_in_their_constants() {
        // z0 = c0·x0, z1 = c1·x1, z2 = c2 through output nodes: the Gauss–Newton matrix is the
        // cross-entropy's Hessian, so it matches central differences of the gradient.
        let mut t = [
            Node::func(Op::Add),
            Node::func(Op::Mul),
            Node::constant(0.7),
            Node::var(0),
            Node::func(Op::Add),
            Node::func(Op::Mul),
            Node::constant(-0.4),
            Node::var(1),
            Node::constant(0.2),
        ];
        (t[1].out, t[5].out, t[8].out) = (1, 2, 3);
        let (op, value, out) = arrays(&t);
        let n = 60;
        let x: Vec<f32> = (0..2 * n).map(|i| (unit(i + 77) * 3.0 - 1.5) as f32).collect();
        let labels: Vec<u32> = (0..n).map(|r| (unit(500 + r) * 3.0) as u32).collect();
        let target = Target::Classes { labels: &labels, n_classes: 3, n_outputs: 3, offset: None };
        let prob = Problem { op: &op, value: &value, out: &out, x: &x, n_rows: n, total: 3, n_c: 3, target };
        let theta = { let mut th = [0.0f64; MAX_FIT_PARAMS]; th[..3].copy_from_slice(&[0.7, -0.4, 0.2]); th };
        let grad = |th: &[f64; MAX_FIT_PARAMS]| {
            let mut s2 = [0.0f64; MAX_FIT_SUMS];
            prob.pass(th, &mut s2);
            [-s2[sum_index(3, 0)], -s2[sum_index(3, 1)], -s2[sum_index(3, 2)]]
        };
        let mut sums = [0.0f64; MAX_FIT_SUMS];
        prob.pass(&theta, &mut sums);
        for q in 0..3 {
            let (mut up, mut dn) = (theta, theta);
            up[q] += 1e-2;
            dn[q] -= 1e-2;
            let (gu, gd) = (grad(&up), grad(&dn));
            for p in 0..3 {
                let fd = (gu[p] - gd[p]) / 2e-2;
                let h = sums[sum_index(p.max(q), p.min(q))];
                assert!((h - fd).abs() <= 1e-2 * (1.0 + fd.abs()), "H[{p}][{q}] = {h}, finite difference {fd}");
            }
        }
    }
}
