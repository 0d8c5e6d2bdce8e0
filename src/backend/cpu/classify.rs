//! Fused classification fitness on the CPU: the reference of `kernels/classify.cu`. Each
//! individual's outputs are folded block by block ([`evaluate_fold`]) into per-class correct
//! counts, per-class prediction counts (which F1 reads) and the softmax cross-entropy sum, so `[P × K × N]` outputs are never stored.
//!
//! Scores of one point (`z`: the program's outputs as logits, `y`: the true class):
//! - multi-output programs (`n_outputs = K ≥ 2`): `z = (out_0, …, out_{K−1})`;
//! - single-output programs for two classes (`binary`): `z = (0, f)`, so class 1 is predicted
//!   where `f > 0` and the cross-entropy is the logistic loss `ln(1 + e^{−f})` for class 1;
//! - prediction: `argmax z`, ties to the lower class, NaN never winning (all NaN: class 0);
//! - cross-entropy: `logsumexp(z) − z_y = (max z − z_y) + ln Σ exp(z_k − max z)`, so it never
//!   overflows; the exponentials and the logarithm of the sum (in [1, K]) are the interpreter's
//!   f32 fast functions (1–2 ulp), everything else and the sums over points f64.
//! [`softmax_ce`](crate::program::fitness::softmax_ce)
//!   is the same in f64, for tests; `kernels/classify.cu` computes each point's the same way
//!   (`grove_math.cuh`'s twins of these functions), so only the order of its sums differs.
//!
//! A point where any output is NaN or infinite is counted in `bad`; the task makes such an
//! individual invalid, as regression does.

use super::error::EvalError;
use super::eval::{BLOCK, BlockFold, BlockOutputs, evaluate_fold};
use crate::program::fastmath;
use crate::program::fitness::ClassSums;
use crate::program::tree::Population;

/// The fold: labels of the rows, number of classes, whether the program has one output, and
/// the offsets added to its outputs (`[max(1, n_outputs)][n_rows]`, where given).
struct ClassFold<'a> {
    labels: &'a [u32],
    n_classes: usize,
    binary: bool,
    offset: Option<&'a [f32]>,
    n_rows: usize,
}

impl ClassFold<'_> {
    /// Logit `k` of the block's rows from `row0` (`None`: binary mode's class 0, fixed at 0):
    /// the output, plus its offset where there are offsets (then written to `buf`).
    #[inline(always)]
    fn logit<'b>(&self, k: usize, row0: usize, out: &'b BlockOutputs<'_>, buf: &'b mut [f32; BLOCK]) -> Option<&'b [f32]> {
        let slot = if self.binary {
            if k == 0 {
                return None;
            }
            0
        } else {
            k
        };
        let z = out.output(slot);
        match self.offset {
            None => Some(z),
            Some(off) => {
                let off = &off[slot * self.n_rows + row0..][..z.len()];
                for ((b, &z), &o) in buf.iter_mut().zip(z).zip(off) {
                    *b = z + o;
                }
                Some(&buf[..z.len()])
            }
        }
    }
}

impl BlockFold for ClassFold<'_> {
    type Acc = ClassSums;
    fn init(&self) -> ClassSums {
        ClassSums { correct: vec![0; self.n_classes], predicted: vec![0; self.n_classes], ..ClassSums::default() }
    }
    // Column by column over the block's rows (vectorised loops), not point by point: with
    // short programs this fold, not the interpreter, is most of the time.
    #[inline(always)]
    fn block(&self, acc: &mut ClassSums, row0: usize, out: &BlockOutputs<'_>) {
        let len = out.len();
        // Largest logit, its class (ties to the lower; NaN never wins), finiteness; then the
        // softmax sum Σ exp(z_k − max) ∈ [1, K] with the f32 fast exp.
        let (mut m, mut arg, mut fin, mut s) = ([0.0f32; BLOCK], [0u32; BLOCK], [true; BLOCK], [0.0f32; BLOCK]);
        let mut buf = [0.0f32; BLOCK];
        m[..len].fill(f32::NEG_INFINITY);
        for k in 0..self.n_classes {
            match self.logit(k, row0, out, &mut buf) {
                Some(z) => {
                    for j in 0..len {
                        let better = z[j] > m[j];
                        m[j] = if better { z[j] } else { m[j] };
                        arg[j] = if better { k as u32 } else { arg[j] };
                        fin[j] &= z[j].is_finite();
                    }
                }
                None => {
                    // Binary mode's fixed logit 0 for class 0 (k == 0: m is still −inf).
                    m[..len].fill(0.0);
                }
            }
        }
        for k in 0..self.n_classes {
            match self.logit(k, row0, out, &mut buf) {
                Some(z) => {
                    for j in 0..len {
                        s[j] += fastmath::exp(z[j] - m[j]);
                    }
                }
                None => {
                    for j in 0..len {
                        s[j] += fastmath::exp(-m[j]);
                    }
                }
            }
        }
        let labels = &self.labels[row0..row0 + len];
        for j in 0..len {
            acc.n += 1;
            if !fin[j] {
                acc.bad += 1;
                continue;
            }
            let y = labels[j] as usize;
            let zy = match (self.binary, self.offset) {
                (true, _) if y == 0 => 0.0,
                (true, None) => out.output(0)[j],
                (true, Some(off)) => out.output(0)[j] + off[row0 + j],
                (false, None) => out.output(y)[j],
                (false, Some(off)) => out.output(y)[j] + off[y * self.n_rows + row0 + j],
            };
            acc.predicted[arg[j] as usize] += 1;
            if arg[j] as usize == y {
                acc.correct[y] += 1;
            }
            acc.ce += (m[j] as f64 - zy as f64) + fastmath::ln(s[j]) as f64;
        }
    }
    fn merge(&self, acc: &mut ClassSums, next: ClassSums) {
        for (a, b) in acc.correct.iter_mut().zip(next.correct) {
            *a += b;
        }
        for (a, b) in acc.predicted.iter_mut().zip(next.predicted) {
            *a += b;
        }
        acc.ce += next.ce;
        acc.n += next.n;
        acc.bad += next.bad;
    }
}

/// Classification sums of every individual of `pop` over `x` (`[n_features][n_rows]`,
/// feature-major, f32) with `labels` (`[n_rows]`, each `< n_classes`). With `pop.n_outputs ==
/// n_classes` the outputs are the logits; with `pop.n_outputs == 0` and `n_classes == 2` the
/// single output is class 1's logit against 0 (module docs). An individual without a program
/// gets `bad == n_rows`.
pub fn evaluate_classification(
    pop: &Population,
    x: &[f32],
    labels: &[u32],
    n_rows: usize,
    n_classes: usize,
) -> Result<Vec<ClassSums>, EvalError> {
    evaluate_classification_with(pop, x, labels, n_rows, n_classes, None)
}

/// [`evaluate_classification`] with `offset` (`[max(1, pop.n_outputs)][n_rows]`, where given)
/// added to the outputs before they are scored: the linear terms of the inputs
/// ([`crate::program::logistic`]). In binary mode the one offset row is added to class 1's
/// logit.
pub fn evaluate_classification_with(
    pop: &Population,
    x: &[f32],
    labels: &[u32],
    n_rows: usize,
    n_classes: usize,
    offset: Option<&[f32]>,
) -> Result<Vec<ClassSums>, EvalError> {
    let binary = pop.n_outputs == 0;
    assert!(
        if binary { n_classes == 2 } else { pop.n_outputs == n_classes },
        "{} outputs cannot score {n_classes} classes",
        pop.n_outputs
    );
    assert_eq!(labels.len(), n_rows, "one label per row");
    if let Some(off) = offset {
        assert_eq!(off.len(), pop.n_outputs.max(1) * n_rows, "one offset per output and row");
    }
    let fold = ClassFold { labels, n_classes, binary, offset, n_rows };
    let sums = evaluate_fold(pop, x, n_rows, &fold)?;
    Ok(sums
        .into_iter()
        .map(|s| s.unwrap_or(ClassSums { correct: vec![0; n_classes], predicted: vec![0; n_classes], ce: 0.0, n: n_rows as u64, bad: n_rows as u64 }))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::fitness::softmax_ce;
    use crate::program::{Node, Op};

    #[test]
    fn sums_count_per_class_and_match_a_hand_computation() {
        // out0 = x0, out1 = x1 (root's sum discarded). Rows: (x0, x1, label).
        let rows = [(1.0f32, 0.0f32, 0u32), (0.0, 2.0, 1), (3.0, 1.0, 1), (0.0, 0.0, 1)];
        let n = rows.len();
        let mut x = vec![0.0; 2 * n];
        for (i, r) in rows.iter().enumerate() {
            x[i] = r.0;
            x[n + i] = r.1;
        }
        let labels: Vec<u32> = rows.iter().map(|r| r.2).collect();
        let mut pop = Population::new(2, 3, 2);
        let tree = [Node::func(Op::Add), Node { out: 1, ..Node::var(0) }, Node { out: 2, ..Node::var(1) }];
        pop.set_tree(0, &tree).unwrap();
        let s = evaluate_classification(&pop, &x, &labels, n, 2).unwrap();
        // Row 0: class 0 right; row 1: right; row 2: predicts 0, wrong; row 3: tie -> 0, wrong.
        assert_eq!(s[0].correct, [1, 1]);
        assert_eq!(s[0].predicted, [3, 1], "rows 0, 2 and 3 predict class 0");
        assert_eq!((s[0].n, s[0].bad), (4, 0));
        let want: f64 = rows.iter().map(|r| softmax_ce(&[r.0 as f64, r.1 as f64], r.2 as usize)).sum();
        assert!((s[0].ce - want).abs() < 1e-6, "{} vs {want}", s[0].ce);
        // Row 1 is empty: every point bad.
        assert_eq!((s[1].n, s[1].bad), (4, 4));
    }

    #[test]
    fn binary_mode_predicts_class_one_where_the_output_is_positive() {
        let x = [-1.0f32, 0.0, 2.0];
        let mut pop = Population::new(1, 1, 0);
        pop.set_tree(0, &[Node::var(0)]).unwrap();
        let s = evaluate_classification(&pop, &x, &[0, 1, 1], 3, 2).unwrap();
        assert_eq!(s[0].correct, [1, 1], "0 predicts class 0, so row 1 is wrong");
        assert_eq!(s[0].predicted, [2, 1]);
        let want = (1.0 + 1f64.exp()).ln() - 1.0 + 2f64.ln() + (1.0 + (-2f64).exp()).ln();
        assert!((s[0].ce - want).abs() < 1e-6, "{} vs {want}", s[0].ce);
    }

    #[test]
    fn offsets_score_as_if_added_to_the_outputs() {
        // out_k = x_k with offsets o_k scores as out_k = x_k + o_k; in binary mode the one
        // offset row moves class 1's logit. 700 rows: several blocks, one partial.
        let n = 700;
        let x: Vec<f32> = (0..2 * n).map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0).collect();
        let off: Vec<f32> = (0..2 * n).map(|i| ((i * 13 % 29) as f32 - 14.0) / 10.0).collect();
        let labels: Vec<u32> = (0..n).map(|i| (i % 3 % 2) as u32).collect();
        let shifted: Vec<f32> = x.iter().zip(&off).map(|(a, b)| a + b).collect();
        let mut pop = Population::new(1, 3, 2);
        pop.set_tree(0, &[Node::func(Op::Add), Node { out: 1, ..Node::var(0) }, Node { out: 2, ..Node::var(1) }]).unwrap();
        let with = evaluate_classification_with(&pop, &x, &labels, n, 2, Some(&off)).unwrap();
        let moved = evaluate_classification(&pop, &shifted, &labels, n, 2).unwrap();
        assert_eq!(with, moved);
        let plain = evaluate_classification(&pop, &x, &labels, n, 2).unwrap();
        assert_ne!(with, plain, "the offsets must change the scores");
        let mut one = Population::new(1, 1, 0);
        one.set_tree(0, &[Node::var(0)]).unwrap();
        let with = evaluate_classification_with(&one, &x, &labels, n, 2, Some(&off[..n])).unwrap();
        let moved = evaluate_classification(&one, &shifted, &labels, n, 2).unwrap();
        assert_eq!(with, moved);
    }

    #[test]
    fn non_finite_outputs_are_counted_bad() {
        // out0 = x0 / 0 with protected division is finite; use exp(x0) overflow instead.
        let x = [1.0f32, 200.0];
        let mut pop = Population::new(1, 2, 0);
        pop.set_tree(0, &[Node::func(Op::Exp), Node::var(0)]).unwrap();
        let s = evaluate_classification(&pop, &x, &[1, 1], 2, 2).unwrap();
        assert_eq!((s[0].n, s[0].bad, s[0].correct.clone(), s[0].predicted.clone()), (2, 1, vec![0, 1], vec![0, 1]), "a bad row predicts nothing");
    }
}
