//! Numeric constants fitted by Levenberg–Marquardt: the CPU reference of `kernels/fit.cu`
//! (`grove_fit_constants`), which computes the same bits. Regression's fit is here, with the
//! walk, the pass and the solve both fits share; classification's in [`class`].
//!
//! # What is fitted
//!
//! The first [`MAX_FIT_CONSTANTS`] constant leaves of a tree, in prefix order (the rest stay as
//! they are), and, with linear scaling, the scale `a` and offset `b` of `a·f(x) + b`: the
//! parameters `θ` minimise the sum of squared residuals `S(θ) = Σ (y − a·f(x; c) − b)²` over
//! the data's rows. Trees with output nodes, or whose walk needs more than [`FIT_STACK`]
//! values at once, are not fitted.
//!
//! # How
//!
//! The Jacobian comes from forward-mode derivatives: every point is evaluated once with a
//! tangent per fitted constant beside each value (dual numbers), through the tree in the
//! interpreter's order with the interpreter's f32 operations ([`apply_fast`]), so the values are
//! the fitness's bits. The partial derivatives of each operator ([`partials`]) follow the
//! protected semantics: where an operator is flat (a protected division by zero, `log 0`, the
//! losing side of `max`) its derivative is 0.
//!
//! One *pass* over the rows accumulates, in f64, every product `w_p·w_q` (`p ≥ q`) of the
//! row's vector `w = (J, r)`: the lower triangle of `JᵀJ`, then `Jᵀr`, then `S`. Each sum runs
//! over the rows in parts of [`FIT_PART`] rows: within a part in row order from zero, and the
//! parts' sums added in order, so that a GPU can give a tree's parts to many blocks (data of
//! one part is summed in plain row order). With linear scaling the first pass runs at `a = 1, b = 0` and gives the closed-form
//! scale, and a second pass starts from it, so the fit starts where linear scaling would and
//! can only improve on it. Each step then solves `(JᵀJ + λ·diag(JᵀJ + ε)) δ = Jᵀr` by Cholesky
//! and runs one pass at `θ + δ`: a lower `S` is accepted and `λ` shrinks tenfold, anything else
//! (a higher or non-finite `S`, a Jacobian with an infinite or NaN entry) is rejected and `λ`
//! grows tenfold. The fitted tree's constants are the accepted `θ` rounded to f32.
//!
//! # Bits
//!
//! The kernel gives every point's `w` with the same f32 and f64 operations (no fused
//! multiply-add on either side), sums each product over the rows in the same parts and order,
//! and runs the same solve, so the two agree to the bit whatever the block size.

pub mod class;

use rayon::prelude::*;

use class::{ClassRow, class_product};

use crate::program::fastmath;
use crate::program::ops::{Op, apply_fast};
use crate::program::tree::Population;

/// Constant leaves fitted per tree: the first ones in prefix order.
pub const MAX_FIT_CONSTANTS: usize = 16;
/// Classes of a classification fit at most; programs for more are not fitted.
pub const MAX_FIT_CLASSES: usize = 16;
/// Values the fitting walk may hold at once; deeper trees are not fitted.
pub const FIT_STACK: usize = 32;
/// Parameters at most: the constants, then `a` and `b` with linear scaling.
pub const MAX_FIT_PARAMS: usize = MAX_FIT_CONSTANTS + 2;
/// Sums of a pass at most: the products `w_p·w_q`, `p ≥ q`, of `w = (J, r)`.
pub const MAX_FIT_SUMS: usize = (MAX_FIT_PARAMS + 1) * (MAX_FIT_PARAMS + 2) / 2;
/// Rows of a part of a pass: each sum is the parts' sums added in order, each part's over its
/// rows in order (the GPU's blocks can then share a tree's rows: `kernels/fit.cu`).
pub const FIT_PART: usize = 4096;
/// `λ` of the first step.
pub const LAMBDA_START: f64 = 1e-3;
/// Past this `λ` the fit stops (the steps it would take are too small to matter).
pub const LAMBDA_STOP: f64 = 1e10;
/// Smallest `λ` after accepted steps.
pub const LAMBDA_MIN: f64 = 1e-9;

/// How to fit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FitConfig {
    /// Levenberg–Marquardt steps (each one pass over the rows).
    pub steps: u32,
    /// Fit `a` and `b` of `a·f + b` with the constants (the regression task's linear scaling).
    pub linear_scaling: bool,
}

/// What fitting did to one tree; laid out as `GroveFitResult` in `kernels/fit.cu`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FitResult {
    /// `S` where the fit started (after the closed-form scale with linear scaling); NaN when
    /// the tree could not be fitted or its start is not finite.
    pub sse_before: f64,
    /// `S` at the accepted parameters.
    pub sse_after: f64,
    /// The fit's scale `a` (1 without linear scaling).
    pub a: f64,
    /// The fit's offset `b` (0 without linear scaling).
    pub b: f64,
    /// Constants fitted (0: the tree was left as it was).
    pub constants: u32,
    /// Steps accepted (the tree's constants changed only if this is not 0).
    pub accepted: u32,
}
const _: () = assert!(std::mem::size_of::<FitResult>() == 40);

/// Index of the product `w_p·w_q` (`p ≥ q`) among a pass's sums.
#[inline(always)]
pub fn sum_index(p: usize, q: usize) -> usize {
    p * (p + 1) / 2 + q
}

/// The constants fitted in a tree of nodes `op`, `value`, `out` over data of `n_features`
/// features, for a program of `n_outputs` output slots (0: the root's value is the result; all
/// constant leaves count, the first [`MAX_FIT_CONSTANTS`] are fitted): `Some(fitted)`, or `None`
/// when the tree cannot be fitted (an output node past `n_outputs`, more than
/// [`MAX_FIT_CLASSES`] slots, a walk deeper than [`FIT_STACK`], an opcode that is not an
/// operator, a variable past the features, or not one tree). Twin of `grove_fit_plan`.
pub fn fit_plan(op: &[u8], value: &[f32], out: &[u8], n_features: usize, n_outputs: usize) -> Option<usize> {
    if n_outputs > MAX_FIT_CLASSES {
        return None;
    }
    let (mut h, mut consts) = (0usize, 0usize);
    for i in (0..op.len()).rev() {
        if out[i] as usize > n_outputs {
            return None;
        }
        let o = Op::from_code(op[i])?;
        if o == Op::Var && !(value[i] >= 0.0 && (value[i] as usize) < n_features) {
            return None;
        }
        if o == Op::Const {
            consts += 1;
        }
        let k = o.arity();
        if h < k {
            return None;
        }
        h = h - k + 1;
        if h > FIT_STACK {
            return None;
        }
    }
    (h == 1).then_some(consts.min(MAX_FIT_CONSTANTS))
}

/// `(∂r/∂a, ∂r/∂b)` of `r = op(a, b)` ([`apply_fast`]'s value, passed in), in f32; 0 where the
/// operator is flat or its derivative is undefined; a user operator's through its body
/// ([`UserOp::partials`](crate::program::ops::user::UserOp::partials)). Twin of
/// `grove_partials` in fit.cu.
#[inline(always)]
pub fn partials(op: Op, a: f32, b: f32, r: f32) -> (f32, f32) {
    let sign = |v: f32| if v > 0.0 { 1.0 } else if v < 0.0 { -1.0 } else { 0.0 };
    match op {
        Op::Var | Op::Const => (0.0, 0.0),
        Op::Add => (1.0, 1.0),
        Op::Sub => (1.0, -1.0),
        Op::Mul => (b, a),
        Op::Div => {
            if b == 0.0 {
                (0.0, 0.0)
            } else {
                (1.0 / b, -(r / b))
            }
        }
        Op::Sdiv => (1.0 / b, -(r / b)),
        Op::Aq => {
            let s2 = 1.0 + b * b;
            (1.0 / s2.sqrt(), -((r * b) / s2))
        }
        Op::Pow => {
            if a == 0.0 {
                (0.0, 0.0)
            } else {
                (b * (r / a), r * fastmath::ln(a.abs()))
            }
        }
        Op::Spow => {
            if a == 0.0 {
                (0.0, 0.0)
            } else if a > 0.0 {
                (b * (r / a), r * fastmath::ln(a))
            } else {
                (b * (r / a), 0.0)
            }
        }
        Op::Max | Op::Min => {
            if r == a {
                (1.0, 0.0)
            } else {
                (0.0, 1.0)
            }
        }
        Op::Sin => (fastmath::cos_any(a), 0.0),
        Op::Cos => (-fastmath::sin_any(a), 0.0),
        Op::Tan => (1.0 + r * r, 0.0),
        Op::Exp => (r, 0.0),
        Op::Log | Op::Rlog => {
            if a == 0.0 {
                (0.0, 0.0)
            } else {
                (1.0 / a, 0.0)
            }
        }
        Op::Slog => (1.0 / a, 0.0),
        Op::Plog => (sign(a) / (1.0 + a.abs()), 0.0),
        Op::Sqrt => {
            if r == 0.0 {
                (0.0, 0.0)
            } else {
                (sign(a) * (0.5 / r), 0.0)
            }
        }
        Op::Ssqrt => (0.5 / r, 0.0),
        Op::Abs => (sign(a), 0.0),
        Op::Neg => (-1.0, 0.0),
        Op::Square => (a + a, 0.0),
        Op::Cube => (3.0 * (a * a), 0.0),
        Op::Tanh => (1.0 - r * r, 0.0),
        Op::Sigmoid => (r * (1.0 - r), 0.0),
        // Forward mode through the body, each step by the rules above.
        crate::program::ops::user_ops!() => {
            crate::program::ops::user::get(op).map_or((0.0, 0.0), |u| u.partials(a, b, apply_fast, partials, chain))
        }
    }
}

/// One term of the chain rule, `d·t`, taken as 0 where either factor is: a value that does not
/// depend on the constant (an infinite slope at a variable's kink), or a flat operator (the
/// losing side of `max`), adds nothing, even where the other factor is infinite or NaN.
/// Twin of `grove_chain`.
#[inline(always)]
fn chain(d: f32, t: f32) -> f32 {
    if d == 0.0 || t == 0.0 { 0.0 } else { d * t }
}

/// The fitting walk's values and their tangents, and the output slots' sums.
struct Stack {
    sv: [f32; FIT_STACK],
    st: [[f32; MAX_FIT_CONSTANTS]; FIT_STACK],
    /// Where each entry's range of constants ends ([`Problem::point`]).
    hi: [usize; FIT_STACK],
    ov: [f32; MAX_FIT_CLASSES],
    ot: [[f32; MAX_FIT_CONSTANTS]; MAX_FIT_CLASSES],
}

impl Stack {
    fn new() -> Self {
        Stack { sv: [0.0; FIT_STACK], st: [[0.0; MAX_FIT_CONSTANTS]; FIT_STACK], hi: [0; FIT_STACK], ov: [0.0; MAX_FIT_CLASSES], ot: [[0.0; MAX_FIT_CONSTANTS]; MAX_FIT_CLASSES] }
    }
}

/// What a tree's constants are fitted to.
#[derive(Clone, Copy)]
enum Target<'a> {
    /// Regression: `y`, with linear scaling or without.
    Values { y: &'a [f32], scaling: bool },
    /// Classification by the softmax cross-entropy: `labels` below `n_classes`; the logits are
    /// the program's `n_outputs == n_classes` slots, or with `n_outputs == 0` (two classes)
    /// `(0, f)`, each slot plus its `offset` where there are offsets (`[max(1,
    /// n_outputs)][n_rows]`: the linear terms of the inputs, added in f32 as the
    /// classification fitness adds them).
    Classes { labels: &'a [u32], n_classes: usize, n_outputs: usize, offset: Option<&'a [f32]> },
}

/// One tree and the data it is fitted on.
struct Problem<'a> {
    op: &'a [u8],
    value: &'a [f32],
    out: &'a [u8],
    x: &'a [f32],
    n_rows: usize,
    /// Constant leaves in the tree.
    total: usize,
    /// Fitted: the first `n_c` of them.
    n_c: usize,
    target: Target<'a>,
}

impl Problem<'_> {
    fn scaling(&self) -> bool {
        matches!(self.target, Target::Values { scaling: true, .. })
    }

    /// Parameters: `n_c`, plus `a` and `b` with scaling.
    fn m(&self) -> usize {
        self.n_c + if self.scaling() { 2 } else { 0 }
    }

    /// The tree at `row` with constants `c` (f32): the root's value, its tangents in
    /// `t[..n_c]`, and, for output nodes, each slot's sum and its tangents in `stack.ov` and
    /// `stack.ot` (zeroed first). An output node adds its value to its slot (in f32, in the
    /// walk's order, as the interpreter does) and passes its last child's value and tangents;
    /// an output leaf its own. `stack` is scratch.
    ///
    /// Only the tangents that can be nonzero are computed: constants are numbered in prefix
    /// order, so a subtree's constants are a range. Walking backwards, at node `i` `k` counts
    /// the constants before it; stack entry `h` ends its range at `hi[h]` and begins where its
    /// left sibling's ends (the first child's at `k`). A tangent outside its entry's range is
    /// zero and is never read. Where a constant lies in one child only, the other child's term
    /// is `chain(d, 0) = 0.0`, added in the same order (`x + 0.0` turns −0 into +0), so the
    /// values are those of the full forward mode over all `n_c` constants.
    // Index loops, as in the CUDA twin, operation for operation.
    #[allow(clippy::needless_range_loop)]
    fn point(&self, c: &[f32; MAX_FIT_CONSTANTS], row: usize, t: &mut [f32; MAX_FIT_CONSTANTS], stack: &mut Stack) -> f32 {
        let n_c = self.n_c;
        let Stack { sv, st, hi, ov, ot } = stack;
        let slots = if let Target::Classes { n_outputs, .. } = self.target { n_outputs } else { 0 };
        for k in 0..slots {
            ov[k] = 0.0;
            ot[k][..n_c].fill(0.0);
        }
        // The tangent of entry `h` for constant `j`, zero outside its range `[lo, hi[h])`.
        let tan = |st: &[[f32; MAX_FIT_CONSTANTS]; FIT_STACK], h: usize, lo: usize, end: usize, j: usize| {
            if j >= lo && j < end { st[h][j] } else { 0.0 }
        };
        let mut h = 0usize;
        let mut k = self.total;
        for i in (0..self.op.len()).rev() {
            let code = self.op[i];
            let slot = self.out[i] as usize;
            if code == Op::Var as u8 || code == Op::Const as u8 {
                hi[h] = k;
                if code == Op::Var as u8 {
                    sv[h] = self.x[self.value[i] as usize * self.n_rows + row];
                } else {
                    k -= 1;
                    if k < n_c {
                        sv[h] = c[k];
                        st[h][k] = 1.0;
                    } else {
                        sv[h] = self.value[i];
                    }
                }
                if slot != 0 {
                    ov[slot - 1] += sv[h];
                    for j in 0..n_c {
                        ot[slot - 1][j] += tan(st, h, k, hi[h], j);
                    }
                }
                h += 1;
                continue;
            }
            let op = Op::from_code(code).expect("fit_plan checked the opcodes");
            // Walking backwards, child 1 is on top of child 2: its constants are [k, mid), child
            // 2's [mid, end).
            let two = op.arity() == 2;
            let mid = hi[h - 1];
            let end = if two { hi[h - 2] } else { mid };
            let (ma, me) = (mid.min(n_c), end.min(n_c));
            let a = sv[h - 1];
            let b = if two { sv[h - 2] } else { 0.0 };
            let r = apply_fast(op, a, b);
            let (da, db) = partials(op, a, b, r);
            if slot == 0 {
                if two {
                    for j in k..ma {
                        st[h - 2][j] = chain(da, st[h - 1][j]) + 0.0;
                    }
                    for j in mid..me {
                        st[h - 2][j] = 0.0 + chain(db, st[h - 2][j]);
                    }
                    sv[h - 2] = r;
                    h -= 1;
                } else {
                    for j in k..ma {
                        st[h - 1][j] = chain(da, st[h - 1][j]);
                    }
                    sv[h - 1] = r;
                }
            } else {
                // The node's value goes to its slot; its last child stays on the stack.
                ov[slot - 1] += r;
                if two {
                    for j in 0..n_c {
                        ot[slot - 1][j] += chain(da, tan(st, h - 1, k, mid, j)) + chain(db, tan(st, h - 2, mid, end, j));
                    }
                    // Child 2's entry stays, now covering child 1's constants too, whose
                    // tangents in it are zero.
                    for j in k..ma {
                        st[h - 2][j] = 0.0;
                    }
                    h -= 1;
                } else {
                    for j in 0..n_c {
                        ot[slot - 1][j] += chain(da, tan(st, h - 1, k, mid, j));
                    }
                }
            }
        }
        t[..n_c].copy_from_slice(&st[0][..n_c]);
        sv[0]
    }

    /// The row's vector `w = (J, r)` at `theta` (`c` its constants as f32), `m + 1` entries.
    fn row(&self, y: &[f32], theta: &[f64; MAX_FIT_PARAMS], c: &[f32; MAX_FIT_CONSTANTS], row: usize, w: &mut [f64; MAX_FIT_PARAMS + 1], stack: &mut Stack) {
        let n_c = self.n_c;
        let mut t = [0.0f32; MAX_FIT_CONSTANTS];
        let f = self.point(c, row, &mut t, stack);
        let scaling = self.scaling();
        let (a, b) = if scaling { (theta[n_c], theta[n_c + 1]) } else { (1.0, 0.0) };
        for j in 0..n_c {
            w[j] = a * t[j] as f64;
        }
        if scaling {
            w[n_c] = f as f64;
            w[n_c + 1] = 1.0;
        }
        w[self.m()] = y[row] as f64 - (a * f as f64 + b);
    }

    /// One pass at `theta`: every sum of the step, over the rows in order. Regression: every
    /// product `w_p·w_q`, `p ≥ q`. Classification (generalised Gauss–Newton on the summed
    /// cross-entropy `S`): `Σ_k p_k·d_kp·d_kq` for `p ≥ q` (the Hessian of `S` through the
    /// softmax), `Σ_k e_k·d_kq` in row `m` (minus the gradient) and the row's cross-entropy
    /// at `(m, m)`; each row's value is summed over `k` first, then added to the pass's sum.
    #[allow(clippy::needless_range_loop)]
    fn pass(&self, theta: &[f64; MAX_FIT_PARAMS], sums: &mut [f64; MAX_FIT_SUMS]) {
        let m = self.m();
        let mut c = [0.0f32; MAX_FIT_CONSTANTS];
        for j in 0..self.n_c {
            c[j] = theta[j] as f32;
        }
        let rows = |k: usize| k * FIT_PART..((k + 1) * FIT_PART).min(self.n_rows);
        let n_parts = self.n_rows.div_ceil(FIT_PART);
        if n_parts <= 1 {
            // One part's sums are the pass's (0 + x is x: no sum from zero is −0).
            self.part(&c, theta, rows(0), sums);
            return;
        }
        let n_sums = sum_index(m, m) + 1;
        sums[..n_sums].fill(0.0);
        // The parts on every thread (as the GPU gives them to many blocks), added in order.
        let parts: Vec<[f64; MAX_FIT_SUMS]> = (0..n_parts)
            .into_par_iter()
            .map(|k| {
                let mut part = [0.0f64; MAX_FIT_SUMS];
                self.part(&c, theta, rows(k), &mut part);
                part
            })
            .collect();
        for part in &parts {
            for e in 0..n_sums {
                sums[e] += part[e];
            }
        }
    }

    /// The sums of [`Self::pass`] over `rows` alone, from zero, in row order (`c`: `theta`'s
    /// constants in f32).
    #[allow(clippy::needless_range_loop)]
    fn part(&self, c: &[f32; MAX_FIT_CONSTANTS], theta: &[f64; MAX_FIT_PARAMS], rows: std::ops::Range<usize>, sums: &mut [f64; MAX_FIT_SUMS]) {
        let m = self.m();
        sums[..sum_index(m, m) + 1].fill(0.0);
        let mut stack = Stack::new();
        match self.target {
            Target::Values { y, .. } => {
                let mut w = [0.0f64; MAX_FIT_PARAMS + 1];
                for row in rows {
                    self.row(y, theta, c, row, &mut w, &mut stack);
                    for p in 0..=m {
                        for q in 0..=p {
                            sums[sum_index(p, q)] += w[p] * w[q];
                        }
                    }
                }
            }
            Target::Classes { labels, n_classes, n_outputs, offset } => {
                let mut cr = ClassRow { d: [[0.0; MAX_FIT_CONSTANTS]; MAX_FIT_CLASSES], p: [0.0; MAX_FIT_CLASSES], e: [0.0; MAX_FIT_CLASSES], ce: 0.0 };
                for row in rows {
                    self.class_row(labels[row], n_classes, n_outputs, offset, c, row, &mut cr, &mut stack);
                    for p in 0..=m {
                        for q in 0..=p {
                            sums[sum_index(p, q)] += class_product(&cr, n_classes, m, p, q);
                        }
                    }
                }
            }
        }
    }
}

/// True when a pass's `S`, the diagonal of `JᵀJ` and `Jᵀr` are all finite (`m` parameters).
pub fn pass_ok(sums: &[f64], m: usize) -> bool {
    (0..=m).all(|p| sums[sum_index(p, p)].is_finite() && sums[sum_index(m, p)].is_finite())
}

/// The closed-form scale `(a, b)` from the sums of a pass at `a = 1, b = 0` (`n_c` constants
/// before the `f` and `1` columns): least squares of `y` on `f`; `a = 0` when `f` does not
/// vary. Twin of `grove_fit_scale`.
pub fn closed_form_scale(sums: &[f64], n_c: usize) -> (f64, f64) {
    let (fi, oi, m) = (n_c, n_c + 1, n_c + 2);
    let n = sums[sum_index(oi, oi)];
    let sf = sums[sum_index(oi, fi)];
    let sff = sums[sum_index(fi, fi)];
    // Jᵀr with r = y − f: Σ f·(y − f) and Σ (y − f).
    let sfy = sums[sum_index(m, fi)] + sff;
    let sy = sums[sum_index(m, oi)] + sf;
    let var = sff - sf * (sf / n);
    let cov = sfy - sf * (sy / n);
    let a = if var > 1e-12 * sff { cov / var } else { 0.0 };
    (a, (sy - a * sf) / n)
}

/// The Levenberg–Marquardt step: solves `(JᵀJ + λ·diag(JᵀJ + ε)) δ = Jᵀr` from a pass's sums
/// by Cholesky (`m` parameters). False when the damped matrix is not positive definite. Twin
/// of `grove_fit_solve`.
pub fn solve_step(sums: &[f64], m: usize, lambda: f64, delta: &mut [f64]) -> bool {
    let mut l = [[0.0f64; MAX_FIT_PARAMS]; MAX_FIT_PARAMS];
    let mut max_diag = 0.0f64;
    for p in 0..m {
        max_diag = max_diag.max(sums[sum_index(p, p)]);
    }
    let eps = 1e-9 * max_diag + 1e-300;
    for p in 0..m {
        for q in 0..=p {
            let mut s = sums[sum_index(p, q)];
            if p == q {
                s = s + lambda * (s + eps);
            }
            for k in 0..q {
                s -= l[p][k] * l[q][k];
            }
            if p == q {
                if !(s > 0.0) {
                    return false;
                }
                l[p][p] = s.sqrt();
            } else {
                l[p][q] = s / l[q][q];
            }
        }
    }
    let mut z = [0.0f64; MAX_FIT_PARAMS];
    for p in 0..m {
        let mut s = sums[sum_index(m, p)];
        for k in 0..p {
            s -= l[p][k] * z[k];
        }
        z[p] = s / l[p][p];
    }
    for p in (0..m).rev() {
        let mut s = z[p];
        for k in p + 1..m {
            s -= l[k][p] * delta[k];
        }
        delta[p] = s / l[p][p];
    }
    true
}

/// The result of a tree that was not fitted.
const NOT_FITTED: FitResult = FitResult { sse_before: f64::NAN, sse_after: f64::NAN, a: 1.0, b: 0.0, constants: 0, accepted: 0 };

/// Fits the constants of one tree (`op`, `value`, `out`: its nodes) on `x` (`[n_features][n_rows]`)
/// and `y` in place. Twin of one block of `grove_fit_constants`.
pub fn fit_tree(op: &[u8], value: &mut [f32], out: &[u8], x: &[f32], y: &[f32], n_rows: usize, cfg: FitConfig) -> FitResult {
    if n_rows == 0 || x.len() % n_rows != 0 || y.len() != n_rows {
        return NOT_FITTED;
    }
    let Some(n_c) = fit_plan(op, value, out, x.len() / n_rows, 0) else { return NOT_FITTED };
    if n_c == 0 && !cfg.linear_scaling {
        return NOT_FITTED;
    }
    let target = Target::Values { y, scaling: cfg.linear_scaling };
    levenberg_marquardt(Problem { op, value, out, x, n_rows, total: count_constants(op), n_c, target }, cfg.steps)
        .map_or(NOT_FITTED, |(res, theta)| write_back(op, value, res, &theta))
}

fn count_constants(op: &[u8]) -> usize {
    op.iter().filter(|&&o| o == Op::Const as u8).count()
}

/// Writes the accepted constants into the tree's values (only when a step was accepted).
fn write_back(op: &[u8], value: &mut [f32], res: FitResult, theta: &[f64; MAX_FIT_PARAMS]) -> FitResult {
    if res.accepted > 0 {
        let mut k = 0;
        for (i, &o) in op.iter().enumerate() {
            if o == Op::Const as u8 && k < res.constants as usize {
                value[i] = theta[k] as f32;
                k += 1;
            }
        }
    }
    res
}

/// The fit of a problem: its result and accepted parameters, or `None` when its start is not
/// finite.
fn levenberg_marquardt(prob: Problem<'_>, steps: u32) -> Option<(FitResult, [f64; MAX_FIT_PARAMS])> {
    let (n_c, m, scaling) = (prob.n_c, prob.m(), prob.scaling());
    let mut theta = [0.0f64; MAX_FIT_PARAMS];
    let mut k = 0;
    for (i, &o) in prob.op.iter().enumerate() {
        if o == Op::Const as u8 && k < n_c {
            theta[k] = prob.value[i] as f64;
            k += 1;
        }
    }
    if scaling {
        theta[n_c] = 1.0;
        theta[n_c + 1] = 0.0;
    }
    let mut cur = [0.0f64; MAX_FIT_SUMS];
    prob.pass(&theta, &mut cur);
    if !pass_ok(&cur, m) {
        return None;
    }
    if scaling {
        let (a, b) = closed_form_scale(&cur, n_c);
        theta[n_c] = a;
        theta[n_c + 1] = b;
        prob.pass(&theta, &mut cur);
        if !pass_ok(&cur, m) {
            return None;
        }
    }
    let s_m = sum_index(m, m);
    let sse_before = cur[s_m];
    let mut lambda = LAMBDA_START;
    let mut accepted = 0u32;
    let mut trial = [0.0f64; MAX_FIT_PARAMS];
    let mut delta = [0.0f64; MAX_FIT_PARAMS];
    let mut sums = [0.0f64; MAX_FIT_SUMS];
    for _ in 0..steps {
        if lambda > LAMBDA_STOP {
            break;
        }
        if !solve_step(&cur, m, lambda, &mut delta) {
            lambda *= 10.0;
            continue;
        }
        for p in 0..m {
            trial[p] = theta[p] + delta[p];
        }
        prob.pass(&trial, &mut sums);
        if pass_ok(&sums, m) && sums[s_m] < cur[s_m] {
            theta = trial;
            cur = sums;
            lambda = (lambda * 0.1).max(LAMBDA_MIN);
            accepted += 1;
        } else {
            lambda *= 10.0;
        }
    }
    let (a, b) = if scaling { (theta[n_c], theta[n_c + 1]) } else { (1.0, 0.0) };
    Some((FitResult { sse_before, sse_after: cur[s_m], a, b, constants: n_c as u32, accepted }, theta))
}

/// Fits rows `rows` of `pop` in place with `fit(op, value, out)`, in parallel over the rows;
/// one result per row, in `rows`' order.
fn fit_rows(pop: &mut Population, rows: &[usize], fit: impl Fn(&[u8], &mut [f32], &[u8]) -> FitResult + Sync) -> Vec<FitResult> {
    let l = pop.max_len;
    let fitted: Vec<(usize, Vec<f32>, FitResult)> = rows
        .par_iter()
        .map(|&r| {
            let span = r * l..r * l + pop.len[r] as usize;
            let mut value = pop.value[span.clone()].to_vec();
            let res = fit(&pop.op[span.clone()], &mut value, &pop.out[span]);
            (r, value, res)
        })
        .collect();
    let mut out = Vec::with_capacity(fitted.len());
    for (r, value, res) in fitted {
        if res.accepted > 0 {
            pop.value[r * l..r * l + value.len()].copy_from_slice(&value);
        }
        out.push(res);
    }
    out
}

/// Fits the constants of rows `rows` of `pop` in place on `x` (`[n_features][n_rows]`) and
/// `y`, in parallel over the rows; one result per row, in `rows`' order. The CPU reference of
/// `grove_fit_constants`. Every variable index must be below the data's feature count (as the
/// interpreter checks). Multi-output programs are not fitted.
pub fn fit_constants(pop: &mut Population, rows: &[usize], x: &[f32], y: &[f32], n_rows: usize, cfg: FitConfig) -> Vec<FitResult> {
    let multi = pop.n_outputs != 0;
    fit_rows(pop, rows, |op, value, out| if multi { NOT_FITTED } else { fit_tree(op, value, out, x, y, n_rows, cfg) })
}

#[cfg(test)]
mod tests;
