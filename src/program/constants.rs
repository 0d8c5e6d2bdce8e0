//! Numeric constants fitted by Levenberg–Marquardt: the CPU reference of `kernels/fit.cu`
//! (`grove_fit_constants`), which computes the same bits.
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
//! One *pass* over the rows accumulates, in f64 and in row order, every product `w_p·w_q`
//! (`p ≥ q`) of the row's vector `w = (J, r)`: the lower triangle of `JᵀJ`, then `Jᵀr`, then
//! `S`. With linear scaling the first pass runs at `a = 1, b = 0` and gives the closed-form
//! scale, and a second pass starts from it, so the fit starts where linear scaling would and
//! can only improve on it. Each step then solves `(JᵀJ + λ·diag(JᵀJ + ε)) δ = Jᵀr` by Cholesky
//! and runs one pass at `θ + δ`: a lower `S` is accepted and `λ` shrinks tenfold, anything else
//! (a higher or non-finite `S`, a Jacobian with an infinite or NaN entry) is rejected and `λ`
//! grows tenfold. The fitted tree's constants are the accepted `θ` rounded to f32.
//!
//! # Bits
//!
//! The kernel gives every point's `w` with the same f32 and f64 operations (no fused
//! multiply-add on either side), sums each product over the rows in row order, and runs the
//! same solve, so the two agree to the bit whatever the block size.

use rayon::prelude::*;

use super::fastmath;
use super::ops::{Op, apply_fast};
use super::tree::Population;

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
/// operator is flat or its derivative is undefined. Twin of `grove_partials` in fit.cu.
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
    ov: [f32; MAX_FIT_CLASSES],
    ot: [[f32; MAX_FIT_CONSTANTS]; MAX_FIT_CLASSES],
}

impl Stack {
    fn new() -> Self {
        Stack { sv: [0.0; FIT_STACK], st: [[0.0; MAX_FIT_CONSTANTS]; FIT_STACK], ov: [0.0; MAX_FIT_CLASSES], ot: [[0.0; MAX_FIT_CONSTANTS]; MAX_FIT_CLASSES] }
    }
}

/// What a tree's constants are fitted to.
#[derive(Clone, Copy)]
enum Target<'a> {
    /// Regression: `y`, with linear scaling or without.
    Values { y: &'a [f32], scaling: bool },
    /// Classification by the softmax cross-entropy: `labels` below `n_classes`; the logits are
    /// the program's `n_outputs == n_classes` slots, or with `n_outputs == 0` (two classes)
    /// `(0, f)`.
    Classes { labels: &'a [u32], n_classes: usize, n_outputs: usize },
}

/// One row's share of a classification pass: `d[k] = T_k − v` (the tangents of logit `k`
/// less their mean under the softmax `p`), `p`, `e[k] = [k = y] − p[k]`, and the row's
/// cross-entropy.
struct ClassRow {
    d: [[f64; MAX_FIT_CONSTANTS]; MAX_FIT_CLASSES],
    p: [f64; MAX_FIT_CLASSES],
    e: [f64; MAX_FIT_CLASSES],
    ce: f64,
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
    // Index loops, as in the CUDA twin, operation for operation.
    #[allow(clippy::needless_range_loop)]
    fn point(&self, c: &[f32; MAX_FIT_CONSTANTS], row: usize, t: &mut [f32; MAX_FIT_CONSTANTS], stack: &mut Stack) -> f32 {
        let n_c = self.n_c;
        let Stack { sv, st, ov, ot } = stack;
        let slots = if let Target::Classes { n_outputs, .. } = self.target { n_outputs } else { 0 };
        for k in 0..slots {
            ov[k] = 0.0;
            ot[k][..n_c].fill(0.0);
        }
        let mut h = 0usize;
        let mut k = self.total;
        for i in (0..self.op.len()).rev() {
            let code = self.op[i];
            let slot = self.out[i] as usize;
            if code == Op::Var as u8 || code == Op::Const as u8 {
                st[h][..n_c].fill(0.0);
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
                        ot[slot - 1][j] += st[h][j];
                    }
                }
                h += 1;
                continue;
            }
            let op = Op::from_code(code).expect("fit_plan checked the opcodes");
            // Walking backwards, child 1 is on top of child 2.
            let a = sv[h - 1];
            let b = if op.arity() == 2 { sv[h - 2] } else { 0.0 };
            let r = apply_fast(op, a, b);
            let (da, db) = partials(op, a, b, r);
            if slot == 0 {
                if op.arity() == 2 {
                    for j in 0..n_c {
                        st[h - 2][j] = chain(da, st[h - 1][j]) + chain(db, st[h - 2][j]);
                    }
                    sv[h - 2] = r;
                    h -= 1;
                } else {
                    for j in 0..n_c {
                        st[h - 1][j] = chain(da, st[h - 1][j]);
                    }
                    sv[h - 1] = r;
                }
            } else {
                // The node's value goes to its slot; its last child stays on the stack.
                ov[slot - 1] += r;
                if op.arity() == 2 {
                    for j in 0..n_c {
                        ot[slot - 1][j] += chain(da, st[h - 1][j]) + chain(db, st[h - 2][j]);
                    }
                    h -= 1;
                } else {
                    for j in 0..n_c {
                        ot[slot - 1][j] += chain(da, st[h - 1][j]);
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

    /// The row's share of a classification pass (`n_classes` logits). The logits, their
    /// maximum, the softmax sum and the cross-entropy are those of the classification fitness
    /// (`program::classify`); a row with a logit that is not finite has a NaN cross-entropy,
    /// which rejects the pass. Twin of `grove_fit_class_row`.
    #[allow(clippy::needless_range_loop, clippy::too_many_arguments)]
    fn class_row(&self, label: u32, n_classes: usize, n_outputs: usize, c: &[f32; MAX_FIT_CONSTANTS], row: usize, out: &mut ClassRow, stack: &mut Stack) {
        let n_c = self.n_c;
        let mut t = [0.0f32; MAX_FIT_CONSTANTS];
        let f = self.point(c, row, &mut t, stack);
        if n_outputs == 0 {
            // Binary: the logits (0, f).
            stack.ov[0] = 0.0;
            stack.ot[0][..n_c].fill(0.0);
            stack.ov[1] = f;
            stack.ot[1][..n_c].copy_from_slice(&t[..n_c]);
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
        let n_sums = sum_index(m, m) + 1;
        sums[..n_sums].fill(0.0);
        let mut stack = Stack::new();
        match self.target {
            Target::Values { y, .. } => {
                let mut w = [0.0f64; MAX_FIT_PARAMS + 1];
                for row in 0..self.n_rows {
                    self.row(y, theta, &c, row, &mut w, &mut stack);
                    for p in 0..=m {
                        for q in 0..=p {
                            sums[sum_index(p, q)] += w[p] * w[q];
                        }
                    }
                }
            }
            Target::Classes { labels, n_classes, n_outputs } => {
                let mut cr = ClassRow { d: [[0.0; MAX_FIT_CONSTANTS]; MAX_FIT_CLASSES], p: [0.0; MAX_FIT_CLASSES], e: [0.0; MAX_FIT_CLASSES], ce: 0.0 };
                for row in 0..self.n_rows {
                    self.class_row(labels[row], n_classes, n_outputs, &c, row, &mut cr, &mut stack);
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

/// A classification row's value of the sum `(p, q)` (`m` parameters). Twin of
/// `grove_fit_class_product`.
#[inline(always)]
fn class_product(cr: &ClassRow, n_classes: usize, m: usize, p: usize, q: usize) -> f64 {
    if p == m && q == m {
        return cr.ce;
    }
    let mut v = 0.0f64;
    for k in 0..n_classes {
        v += if p == m { cr.e[k] * cr.d[k][q] } else { (cr.p[k] * cr.d[k][p]) * cr.d[k][q] };
    }
    v
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

/// Fits the constants of one classification program (`op`, `value`, `out`: its nodes; output
/// slots `n_outputs`, which is `n_classes`, or 0 for two classes' single output) on `x`
/// (`[n_features][n_rows]`) and `labels` in place, by the softmax cross-entropy summed over
/// the rows (the result's `sse_*` fields). Programs with more than [`MAX_FIT_CLASSES`] classes
/// are not fitted. Twin of one block of `grove_fit_class_constants`.
#[allow(clippy::too_many_arguments)]
pub fn fit_class_tree(op: &[u8], value: &mut [f32], out: &[u8], x: &[f32], labels: &[u32], n_rows: usize, n_classes: usize, n_outputs: usize, steps: u32) -> FitResult {
    let shape_ok = if n_outputs == 0 { n_classes == 2 } else { n_outputs == n_classes };
    if n_rows == 0 || x.len() % n_rows != 0 || labels.len() != n_rows || !shape_ok || n_classes > MAX_FIT_CLASSES {
        return NOT_FITTED;
    }
    if labels.iter().any(|&l| l as usize >= n_classes) {
        return NOT_FITTED;
    }
    let Some(n_c) = fit_plan(op, value, out, x.len() / n_rows, n_outputs) else { return NOT_FITTED };
    if n_c == 0 {
        return NOT_FITTED;
    }
    let target = Target::Classes { labels, n_classes, n_outputs };
    levenberg_marquardt(Problem { op, value, out, x, n_rows, total: count_constants(op), n_c, target }, steps)
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

/// Fits the constants of rows `rows` of the classification population `pop` (`n_outputs ==
/// n_classes`, or 0 with two classes) in place on `x` (`[n_features][n_rows]`) and `labels`
/// by the softmax cross-entropy, in parallel over the rows; one result per row, in `rows`'
/// order. The CPU reference of `grove_fit_class_constants`.
pub fn fit_class_constants(pop: &mut Population, rows: &[usize], x: &[f32], labels: &[u32], n_rows: usize, n_classes: usize, steps: u32) -> Vec<FitResult> {
    let n_outputs = pop.n_outputs;
    fit_rows(pop, rows, |op, value, out| fit_class_tree(op, value, out, x, labels, n_rows, n_classes, n_outputs, steps))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::init::{TreeSpec, init_population};
    use crate::program::tree::Node;

    fn arrays(ns: &[Node]) -> (Vec<u8>, Vec<f32>, Vec<u8>) {
        (ns.iter().map(|n| n.op as u8).collect(), ns.iter().map(|n| n.value).collect(), ns.iter().map(|n| n.out).collect())
    }

    /// `[1][n]` inputs spread over `[lo, hi]`.
    fn line(n: usize, lo: f32, hi: f32) -> Vec<f32> {
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
            let prob = Problem { op: tree.op, value: tree.value, out: tree.out, x: &x, n_rows, total, n_c, target: Target::Values { y: &[], scaling: false } };
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
            let all = crate::program::eval::evaluate_regression(&pop, &x, &y, n).unwrap();
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
                let target = Target::Classes { labels: &labels, n_classes, n_outputs };
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
        let r = fit_class_tree(&op, &mut value, &out, &x, &labels, n, 2, 0, 25);
        assert_eq!(r.constants, 2);
        assert!(r.accepted > 2 && r.sse_after < r.sse_before, "{r:?}");
        assert!((value[2] - 2.0).abs() < 0.25 && (value[4] + 1.0).abs() < 0.2, "fitted {value:?}");
        let mut pop = Population::new(1, 8, 0);
        pop.set_tree(0, &t.iter().enumerate().map(|(i, n)| Node { value: value[i], ..*n }).collect::<Vec<_>>()).unwrap();
        let sums = crate::program::classify::evaluate_classification(&pop, &x, &labels, n, 2).unwrap();
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
        let res = fit_class_constants(&mut pop, &rows, &x, &labels, n, 3, 8);
        let sums = crate::program::classify::evaluate_classification(&pop, &x, &labels, n, 3).unwrap();
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
            let r = fit_class_tree(&op, &mut v, &out, &x, labels, 12, k, n_out, 5);
            assert_eq!((r.constants, r.accepted), (0, 0), "{k} classes, {n_out} outputs");
            assert!(r.sse_before.is_nan());
            assert_eq!(v, value);
        }
        // The same tree with its three slots fits.
        let mut v = value.clone();
        let r = fit_class_tree(&op, &mut v, &out, &x, &labels, 12, 3, 3, 5);
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
        let target = Target::Classes { labels: &labels, n_classes: 3, n_outputs: 3 };
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
