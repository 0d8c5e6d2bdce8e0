//! Evaluation on the CPU: a whole population over a whole data set, folded into regression
//! sums or collected as predictions, and the f64 reference the interpreter is checked against.
//! The CUDA `kernels/eval.cu` is its twin and gives the same bits at every point. Throughput:
//! `examples/bench_eval.rs`.
//!
//! # How a tree is evaluated
//!
//! Each tree is compiled once to the linear form of `kernels/interp.cuh` ([`super::interp`]:
//! one instruction per function node in postfix order, leaves folded into their parents) and
//! run over *blocks* of [`BLOCK`] data points ([`super::interp::block`]: Chitty's
//! two-dimensional stack), so the per-instruction dispatch is paid once per block, not once per
//! point.
//!
//! Output nodes (EvoGP's multi-output "Modi" nodes, `tree.rs`): an output node of slot `k` adds
//! its result to output `k` and passes its *last* child's value to its parent (a leaf output
//! node passes its own value). Outputs start at 0 and are summed in decreasing node index
//! (the order of the reverse-prefix walk), in f32, on both backends and in the reference.
//!
//! # Numbers
//!
//! Points are evaluated in f32 with the semantics of [`Op::apply`]
//! ([`apply_fast`](crate::program::ops::apply_fast)), except that every transcendental function
//! (`exp`, the logarithms, `sin`, `cos`, `tan`, `tanh`, `pow`, `sigmoid`) is grove's own
//! ([`fastmath`](crate::program::fastmath): Cephes' algorithms, 1–4 ulp from the exact value),
//! which the CUDA kernels compute bit for bit. Special values (0, ±inf, NaN,
//! overflow thresholds) are exactly those of libm. Results stay within 1e-5 relative of
//! [`Op::apply::<f64>`](Op::apply) wherever the program is well-conditioned. No fused
//! multiply-add is used anywhere, so the bits do not depend on the vector width chosen at run
//! time (AVX2 when the CPU has it), nor on the backend.
//!
//! # Parallelism and determinism
//!
//! Rows are cut into fixed chunks of [`CHUNK_ROWS`] (a function of nothing but the constant
//! block size); work items are (individual, chunk) pairs, run by rayon; partial results are
//! merged per individual in chunk order on the calling thread. So population 1000 × 100 000
//! rows and population 1 × 100 000 rows both use every core, and every result is bitwise the
//! same whatever the thread count.

mod bench;

use rayon::prelude::*;

pub use bench::{EvalBench, EvalBenchReport, bench_eval, bench_population, bench_sextic};

use super::error::EvalError;
use super::interp::Program;
use super::interp::block::{Entry, XBlock, run_block};
use crate::program::fitness::{LossSums, RegressionSums, scaled_prediction};
use crate::program::head::{ClassHeadSums, HeadSums, MAX_HEAD, pair};
use crate::program::linear::JointSums;
use crate::program::ops::Op;
use crate::program::tree::{Population, TreeRef};

/// Data points per block: the width of the two-dimensional stack. Chosen by measurement
/// (`cargo run --release --example bench_eval -- --threads 1 --block B`, W3 workload, 2-core
/// AMD EPYC, AVX2): 128 to 1024 are within 5–10% of each other, 256 the best by a little, 64
/// about 8% slower; at 256 a 60-node tree's stack (≤ 8 slots of 1 KiB) stays in L1.
pub const BLOCK: usize = 256;

/// Blocks per work item.
const CHUNK_BLOCKS: usize = 16;

/// Rows per work item: rows `c·CHUNK_ROWS ..` form chunk `c`, whatever the thread count.
pub const CHUNK_ROWS: usize = BLOCK * CHUNK_BLOCKS;

// ---------------------------------------------------------------------------------------------
// The reference
// ---------------------------------------------------------------------------------------------

/// Evaluates one tree at one point in f64 with [`Op::apply`]: the ground truth of the tests.
///
/// `x`: `[n_features][n_rows]`, feature-major; variable `v` reads `x[v * n_rows + row]`.
/// Returns the output slots (`n_outputs > 0`) or the root's value (`n_outputs == 0`), as
/// `max(1, n_outputs)` values; all NaN for an empty or malformed tree.
pub fn eval_reference(tree: TreeRef<'_>, x: &[f64], n_rows: usize, row: usize, n_outputs: usize) -> Vec<f64> {
    let invalid = vec![f64::NAN; n_outputs.max(1)];
    let mut outs = vec![0.0f64; n_outputs];
    let mut stack: Vec<f64> = Vec::with_capacity(tree.len());
    // Reverse prefix order is postfix order: children are on the stack before their parent.
    for i in (0..tree.len()).rev() {
        let Some(op) = Op::from_code(tree.op[i]) else { return invalid };
        let (value, passed) = match op {
            Op::Var => {
                let v = x.get(tree.value[i] as usize * n_rows + row).copied().unwrap_or(f64::NAN);
                (v, v)
            }
            Op::Const => (tree.value[i] as f64, tree.value[i] as f64),
            _ if op.arity() == 1 => {
                let Some(a) = stack.pop() else { return invalid };
                (op.apply(a, 0.0), a)
            }
            _ => {
                let (Some(a), Some(b)) = (stack.pop(), stack.pop()) else { return invalid };
                (op.apply(a, b), b)
            }
        };
        match tree.out[i] as usize {
            0 => stack.push(value),
            k if k <= n_outputs => {
                outs[k - 1] += value;
                stack.push(passed);
            }
            _ => return invalid,
        }
    }
    if stack.len() != 1 {
        return invalid;
    }
    if n_outputs == 0 {
        stack
    } else {
        outs
    }
}

// ---------------------------------------------------------------------------------------------
// Folding block outputs
// ---------------------------------------------------------------------------------------------

/// One block's outputs, as a [`BlockFold`] sees them.
#[derive(Clone, Copy, Debug)]
pub struct BlockOutputs<'a> {
    values: &'a [f32],
    stride: usize,
    n_outputs: usize,
    len: usize,
}

impl<'a> BlockOutputs<'a> {
    /// Number of outputs: `max(1, n_outputs)`.
    pub fn n_outputs(&self) -> usize {
        self.n_outputs
    }
    /// Number of points (rows) in the block: [`BLOCK`], or fewer in the last block.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Always false (blocks hold at least one row).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Output `k` at this block's rows: `[len]`, f32.
    pub fn output(&self, k: usize) -> &'a [f32] {
        &self.values[k * self.stride..k * self.stride + self.len]
    }
}

/// A reduction over each individual's outputs, fused into evaluation so `[P × N]` outputs are
/// never materialised (regression fitness, and classification's argmax or cross-entropy).
///
/// For each individual and each chunk of [`CHUNK_ROWS`] rows, [`init`](Self::init) makes an
/// accumulator and [`block`](Self::block) sees that chunk's blocks in row order; then the
/// chunks' accumulators are merged in row order with [`merge`](Self::merge). The grouping is
/// fixed by the row count alone, so results do not depend on the thread count.
///
/// A classifier's accuracy, with one output per class (argmax; ties to the lower class):
///
/// ```
/// use grove::backend::cpu::eval::{evaluate_fold, BlockFold, BlockOutputs};
/// use grove::program::{Node, Op, Population};
///
/// struct Accuracy<'a> { labels: &'a [u32] }
///
/// impl BlockFold for Accuracy<'_> {
///     type Acc = u64; // correct rows
///     fn init(&self) -> u64 { 0 }
///     fn block(&self, acc: &mut u64, row0: usize, out: &BlockOutputs<'_>) {
///         for j in 0..out.len() {
///             let mut best = 0;
///             for k in 1..out.n_outputs() {
///                 if out.output(k)[j] > out.output(best)[j] { best = k; }
///             }
///             *acc += (best as u32 == self.labels[row0 + j]) as u64;
///         }
///     }
///     fn merge(&self, acc: &mut u64, next: u64) { *acc += next; }
/// }
///
/// // Two outputs: class 0 scores x0, class 1 scores x1.
/// let mut pop = Population::new(1, 3, 2);
/// let tree = [Node::func(Op::Add), Node { out: 1, ..Node::var(0) }, Node { out: 2, ..Node::var(1) }];
/// pop.set_tree(0, &tree).unwrap();
/// let x = [1.0, 0.0, 5.0, /* x1: */ 0.5, 2.0, 1.0]; // [features][rows]
/// let correct = evaluate_fold(&pop, &x, 3, &Accuracy { labels: &[0, 1, 1] }).unwrap();
/// assert_eq!(correct, [Some(2)]); // slots hold x0 and x1 (the root's sum is no output)
/// ```
pub trait BlockFold: Sync {
    /// The per-individual result.
    type Acc: Send;
    /// An accumulator for a chunk of rows.
    fn init(&self) -> Self::Acc;
    /// An accumulator for a chunk of rows of individual `individual` (a row of the
    /// population), for folds whose work differs by individual; [`Self::init`] by default.
    fn init_for(&self, _individual: usize) -> Self::Acc {
        self.init()
    }
    /// Folds one block: rows `row0 .. row0 + out.len()`.
    fn block(&self, acc: &mut Self::Acc, row0: usize, out: &BlockOutputs<'_>);
    /// Appends `next`, the accumulator of the rows that follow `acc`'s.
    fn merge(&self, acc: &mut Self::Acc, next: Self::Acc);
}

/// Per-thread buffers, reused across work items.
#[derive(Default)]
struct Scratch {
    /// `[depth][B]`: the block stack.
    stack: Vec<f32>,
    /// `[depth]`: what each entry of the block stack holds.
    entries: Vec<Entry>,
    /// `[n_outputs][B]`.
    outs: Vec<f32>,
    /// `[B]`: an output node's value; a root that is a constant or a variable.
    tmp: Vec<f32>,
    /// `[program's variables][B]`: the last, partial block's variables, zero-padded.
    pad: Vec<f32>,
}

/// Evaluates rows `rows` (a chunk) of `prog` and folds them into `acc`.
#[inline(always)]
fn eval_rows_generic<const B: usize, F: BlockFold>(
    prog: &Program,
    x: &[f32],
    n_rows: usize,
    rows: std::ops::Range<usize>,
    fold: &F,
    acc: &mut F::Acc,
    scratch: &mut Scratch,
) {
    let Scratch { stack, entries, outs, tmp, pad } = scratch;
    let n_out = prog.n_outputs.max(1);
    if stack.len() < prog.depth * B {
        stack.resize(prog.depth * B, 0.0);
    }
    if entries.len() < prog.depth {
        entries.resize(prog.depth, Entry::Vec);
    }
    if outs.len() < n_out * B {
        outs.resize(n_out * B, 0.0);
    }
    if tmp.len() < B {
        tmp.resize(B, 0.0);
    }
    let tmp: &mut [f32; B] = (&mut tmp[..B]).try_into().expect("B floats");
    let mut row0 = rows.start;
    while row0 < rows.end {
        let len = B.min(rows.end - row0);
        let xb = if len == B {
            XBlock::Rows { x, n_rows, row0 }
        } else {
            if pad.len() < prog.vars.len() * B {
                pad.resize(prog.vars.len() * B, 0.0);
            }
            for (i, &v) in prog.vars.iter().enumerate() {
                let src = v as usize * n_rows + row0;
                let dst = &mut pad[i * B..(i + 1) * B];
                dst[..len].copy_from_slice(&x[src..src + len]);
                dst[len..].fill(0.0);
            }
            XBlock::Padded { pad, vars: &prog.vars }
        };
        if prog.n_outputs > 0 {
            outs[..n_out * B].fill(0.0);
        }
        let root = run_block::<B>(prog, &xb, stack, entries, tmp, outs);
        let values: &[f32] = if prog.n_outputs > 0 {
            &outs[..n_out * B]
        } else {
            match root {
                Entry::Vec => &stack[..B],
                Entry::Const(c) => {
                    tmp.fill(c);
                    &tmp[..]
                }
                Entry::Var(v) => xb.var::<B>(v),
            }
        };
        fold.block(acc, row0, &BlockOutputs { values, stride: B, n_outputs: n_out, len });
        row0 += len;
    }
}

/// [`eval_rows_generic`] compiled for AVX2 and FMA (the math's `mul_add`s become `vfmadd`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn eval_rows_avx2<const B: usize, F: BlockFold>(
    prog: &Program,
    x: &[f32],
    n_rows: usize,
    rows: std::ops::Range<usize>,
    fold: &F,
    acc: &mut F::Acc,
    scratch: &mut Scratch,
) {
    eval_rows_generic::<B, F>(prog, x, n_rows, rows, fold, acc, scratch)
}

/// Evaluates a chunk with the widest vectors the CPU has (the bits are the same either way:
/// without hardware FMA, `mul_add` is libm's exact `fmaf`, only slower).
fn eval_rows<const B: usize, F: BlockFold>(
    prog: &Program,
    x: &[f32],
    n_rows: usize,
    rows: std::ops::Range<usize>,
    fold: &F,
    acc: &mut F::Acc,
    scratch: &mut Scratch,
) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU supports AVX2 and FMA (checked just above).
        return unsafe { eval_rows_avx2::<B, F>(prog, x, n_rows, rows, fold, acc, scratch) };
    }
    eval_rows_generic::<B, F>(prog, x, n_rows, rows, fold, acc, scratch)
}

/// Checks `x` against `n_rows`; returns the number of features.
fn n_features(x: &[f32], n_rows: usize) -> Result<usize, EvalError> {
    if n_rows == 0 {
        return Err(EvalError::NoRows);
    }
    if x.len() % n_rows != 0 {
        return Err(EvalError::DataShape { len: x.len(), n_rows });
    }
    Ok(x.len() / n_rows)
}

/// Folds the individuals `which` of `pop` with block size `B`; `None` for an empty tree.
fn fold_individuals<const B: usize, F: BlockFold>(
    pop: &Population,
    which: &[usize],
    x: &[f32],
    n_rows: usize,
    fold: &F,
) -> Result<Vec<Option<F::Acc>>, EvalError> {
    let n_features = n_features(x, n_rows)?;
    if let Some(&index) = which.iter().find(|&&i| i >= pop.size()) {
        return Err(EvalError::NoSuchIndividual { index, size: pop.size() });
    }
    let compiled: Vec<Result<Option<Program>, EvalError>> = which
        .par_iter()
        .map(|&i| {
            let tree = pop.tree(i);
            if tree.is_empty() {
                Ok(None)
            } else {
                Program::new(tree, pop.n_outputs, n_features, i).map(Some)
            }
        })
        .collect();
    // The first bad tree in population order, whatever the thread count.
    let progs: Vec<Option<Program>> = compiled.into_iter().collect::<Result<_, _>>()?;
    let chunk = B * CHUNK_BLOCKS;
    let n_chunks = n_rows.div_ceil(chunk);
    let parts: Vec<Option<F::Acc>> = (0..progs.len() * n_chunks)
        .into_par_iter()
        .map_init(Scratch::default, |scratch, item| {
            let prog = progs[item / n_chunks].as_ref()?;
            let c = item % n_chunks;
            let rows = c * chunk..((c + 1) * chunk).min(n_rows);
            let mut acc = fold.init_for(which[item / n_chunks]);
            eval_rows::<B, F>(prog, x, n_rows, rows, fold, &mut acc, scratch);
            Some(acc)
        })
        .collect();
    // Merge each individual's chunks in row order, here, so the order is fixed.
    let mut parts = parts.into_iter();
    let mut out = Vec::with_capacity(progs.len());
    for _ in 0..progs.len() {
        let mut acc: Option<F::Acc> = None;
        for part in parts.by_ref().take(n_chunks) {
            match (&mut acc, part) {
                (Some(a), Some(p)) => fold.merge(a, p),
                (None, p) => acc = p,
                (Some(_), None) => {}
            }
        }
        out.push(acc);
    }
    Ok(out)
}

/// Evaluates every individual of `pop` over `x` (`[n_features][n_rows]`, feature-major, f32),
/// folding its outputs block by block with `fold`. Returns one accumulator per individual, in
/// population order; `None` for an individual without a program (length 0).
pub fn evaluate_fold<F: BlockFold>(pop: &Population, x: &[f32], n_rows: usize, fold: &F) -> Result<Vec<Option<F::Acc>>, EvalError> {
    let all: Vec<usize> = (0..pop.size()).collect();
    fold_individuals::<BLOCK, F>(pop, &all, x, n_rows, fold)
}

/// Collects outputs: `[n_out][rows of the chunk]`.
struct Collect;

impl BlockFold for Collect {
    type Acc = Vec<Vec<f32>>;
    fn init(&self) -> Self::Acc {
        Vec::new()
    }
    fn block(&self, acc: &mut Self::Acc, _row0: usize, out: &BlockOutputs<'_>) {
        acc.resize_with(out.n_outputs(), Vec::new);
        for (k, o) in acc.iter_mut().enumerate() {
            o.extend_from_slice(out.output(k));
        }
    }
    fn merge(&self, acc: &mut Self::Acc, next: Self::Acc) {
        for (a, n) in acc.iter_mut().zip(next) {
            a.extend(n);
        }
    }
}

/// Every individual's outputs at every row: `[P × max(1, n_outputs) × n_rows]` (individual,
/// then output slot, then row), f32, NaN and inf included; all NaN for an individual without a
/// program (the layout of the GPU's `CudaEngine::predict`). `x`: `[n_features][n_rows]`.
pub fn predict_all(pop: &Population, x: &[f32], n_rows: usize) -> Result<Vec<f32>, EvalError> {
    let n_out = pop.n_outputs.max(1);
    let mut out = Vec::with_capacity(pop.size() * n_out * n_rows);
    for acc in evaluate_fold(pop, x, n_rows, &Collect)? {
        match acc {
            Some(outs) => outs.iter().for_each(|o| out.extend_from_slice(o)),
            None => out.resize(out.len() + n_out * n_rows, f32::NAN),
        }
    }
    Ok(out)
}

/// Individual `i`'s outputs at every row: `[max(1, n_outputs)][n_rows]`, f32, NaN and inf
/// included; all NaN for an individual without a program. `x`: `[n_features][n_rows]`.
pub fn predict(pop: &Population, i: usize, x: &[f32], n_rows: usize) -> Result<Vec<f32>, EvalError> {
    let n_out = pop.n_outputs.max(1);
    let acc = fold_individuals::<BLOCK, _>(pop, &[i], x, n_rows, &Collect)?.pop().flatten();
    Ok(match acc {
        Some(outs) => outs.concat(),
        None => vec![f32::NAN; n_out * n_rows],
    })
}

// ---------------------------------------------------------------------------------------------
// Regression
// ---------------------------------------------------------------------------------------------

/// The regression fold: accumulates [`RegressionSums`] against `y`.
struct RegressionFold<'a> {
    y: &'a [f32],
}

/// Sums 8 lanes in a fixed pairwise order.
#[inline(always)]
fn hsum(a: [f64; 8]) -> f64 {
    ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]))
}

impl BlockFold for RegressionFold<'_> {
    type Acc = RegressionSums;

    fn init(&self) -> RegressionSums {
        RegressionSums { finite: true, ..RegressionSums::default() }
    }

    #[inline(always)]
    fn block(&self, acc: &mut RegressionSums, row0: usize, out: &BlockOutputs<'_>) {
        let f = out.output(0);
        let y = &self.y[row0..row0 + f.len()];
        // Eight lanes (fixed: row j goes to lane j % 8), summed pairwise at the end of the
        // block: vectorised, and more accurate than one running sum.
        let mut s = [[0.0f64; 8]; 7];
        let mut add = |l: usize, fv: f32, yv: f32| {
            let (fv, yv) = (fv as f64, yv as f64);
            let e = fv - yv;
            s[0][l] += e * e;
            s[1][l] += e.abs();
            s[2][l] += fv;
            s[3][l] += fv * fv;
            s[4][l] += fv * yv;
            s[5][l] += yv;
            s[6][l] += yv * yv;
        };
        let (fc, yc) = (f.chunks_exact(8), y.chunks_exact(8));
        let (fr, yr) = (fc.remainder(), yc.remainder());
        for (fb, yb) in fc.zip(yc) {
            for l in 0..8 {
                add(l, fb[l], yb[l]);
            }
        }
        for (l, (&fv, &yv)) in fr.iter().zip(yr).enumerate() {
            add(l, fv, yv);
        }
        let part = RegressionSums {
            n: f.len() as u64,
            sum_e2: hsum(s[0]),
            sum_abs_e: hsum(s[1]),
            sum_f: hsum(s[2]),
            sum_f2: hsum(s[3]),
            sum_fy: hsum(s[4]),
            sum_y: hsum(s[5]),
            sum_y2: hsum(s[6]),
            // Σf² of finite f32 values cannot overflow f64; NaN or ±inf make it non-finite.
            finite: hsum(s[3]).is_finite(),
        };
        acc.merge(&part);
    }

    fn merge(&self, acc: &mut RegressionSums, next: RegressionSums) {
        acc.merge(&next);
    }
}

/// Regression fitness of every individual, fused with evaluation: no `[P × N]` buffer.
///
/// `x`: `[n_features][n_rows]`, feature-major, f32; `y`: `[n_rows]`, finite. Programs must be
/// single-output (`n_outputs` 0 or 1). Individuals without a program, or with a NaN or
/// infinite output at any row, come back with `finite == false`.
pub fn evaluate_regression(pop: &Population, x: &[f32], y: &[f32], n_rows: usize) -> Result<Vec<RegressionSums>, EvalError> {
    evaluate_regression_with::<BLOCK>(pop, x, y, n_rows)
}

/// What the regression sums need of a population and its target: one output (or the root's
/// value), one finite target value per row.
fn check_target(pop: &Population, y: &[f32], n_rows: usize) -> Result<(), EvalError> {
    if pop.n_outputs > 1 {
        return Err(EvalError::TooManyOutputs { n_outputs: pop.n_outputs, max: 1 });
    }
    if y.len() != n_rows {
        return Err(EvalError::TargetLength { len: y.len(), n_rows });
    }
    if let Some(row) = y.iter().position(|v| !v.is_finite()) {
        return Err(EvalError::TargetNotFinite { row });
    }
    Ok(())
}

/// [`evaluate_regression`] with block size `B` (for benchmarks).
fn evaluate_regression_with<const B: usize>(
    pop: &Population,
    x: &[f32],
    y: &[f32],
    n_rows: usize,
) -> Result<Vec<RegressionSums>, EvalError> {
    check_target(pop, y, n_rows)?;
    let all: Vec<usize> = (0..pop.size()).collect();
    let sums = fold_individuals::<B, _>(pop, &all, x, n_rows, &RegressionFold { y })?;
    Ok(sums.into_iter().map(|s| s.unwrap_or(RegressionSums::invalid(n_rows as u64))).collect())
}

// ---------------------------------------------------------------------------------------------
// A loss of the user's own
// ---------------------------------------------------------------------------------------------

/// The fold of a loss of the user's own: each individual's rows scored by `loss(p, y)` at its
/// prediction `p = a·f + b` ([`scaled_prediction`]), its `(a, b)` from `scale`.
struct LossFold<'a> {
    y: &'a [f32],
    loss: &'static crate::program::ops::user::UserOp,
    scale: &'a [(f64, f64)],
}

thread_local! {
    /// A [`LossFold`]'s per-step values of one block, `[steps][BLOCK]`, reused.
    static LOSS_STEPS: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A [`LossFold`] accumulator: the individual's scaling and its sums.
struct LossAcc {
    a: f64,
    b: f64,
    sums: LossSums,
}

impl BlockFold for LossFold<'_> {
    type Acc = LossAcc;

    fn init(&self) -> LossAcc {
        LossAcc { a: 1.0, b: 0.0, sums: LossSums { finite: true, ..LossSums::default() } }
    }

    fn init_for(&self, individual: usize) -> LossAcc {
        let (a, b) = self.scale[individual];
        LossAcc { a, b, ..self.init() }
    }

    // Step by step over the block's rows (each step one built-in over `len` values), not row
    // by row: the same operations on every row as `UserOp::eval`, so the same bits.
    fn block(&self, acc: &mut LossAcc, row0: usize, out: &BlockOutputs<'_>) {
        use crate::program::ops::apply_fast;
        use crate::program::ops::user::Arg;
        let f = out.output(0);
        let len = f.len();
        let y = &self.y[row0..row0 + len];
        let mut p = [0f32; BLOCK];
        for (p, &f) in p.iter_mut().zip(f) {
            *p = scaled_prediction(f, acc.a, acc.b);
        }
        let steps = &self.loss.steps;
        LOSS_STEPS.with(|t| {
            let mut t = t.borrow_mut();
            if t.len() < steps.len() * BLOCK {
                t.resize(steps.len() * BLOCK, 0.0);
            }
            for (i, st) in steps.iter().enumerate() {
                let (done, rest) = t.split_at_mut(i * BLOCK);
                let dst = &mut rest[..len];
                let value = |x: Arg, j: usize| -> f32 {
                    match x {
                        Arg::A => p[j],
                        Arg::B => y[j],
                        Arg::Const(bits) => f32::from_bits(bits),
                        Arg::Step(k) => done[k as usize * BLOCK + j],
                    }
                };
                for (j, d) in dst.iter_mut().enumerate() {
                    *d = apply_fast(st.op, value(st.a, j), value(st.b, j));
                }
            }
            let s = &mut acc.sums;
            for j in 0..len {
                let l = match self.loss.result {
                    Arg::A => p[j],
                    Arg::B => y[j],
                    Arg::Const(bits) => f32::from_bits(bits),
                    Arg::Step(k) => t[k as usize * BLOCK + j],
                };
                s.finite &= f[j].is_finite() && l.is_finite();
                s.sum += l as f64;
            }
            s.n += len as u64;
        });
    }

    fn merge(&self, acc: &mut LossAcc, next: LossAcc) {
        acc.sums.merge(&next.sums);
    }
}

/// Each individual's sums of the loss `loss` (a registered user operator `loss(p, y)`,
/// [`crate::program::fitness::Loss`]) over the rows, at its prediction `p = a·f + b` with
/// `scale[i] = (a, b)` (`(1, 0)`: the program's value itself): the reference of eval.cu's
/// `grove_loss_sums`. `x`: `[n_features][n_rows]`; `y`: `[n_rows]`, finite; one output.
/// Individuals without a program, or with a NaN or infinite output or loss at any row, come
/// back with `finite == false`.
pub fn evaluate_loss(pop: &Population, x: &[f32], y: &[f32], n_rows: usize, loss: Op, scale: &[(f64, f64)]) -> Result<Vec<LossSums>, EvalError> {
    check_target(pop, y, n_rows)?;
    let Some(loss) = crate::program::ops::user::get(loss) else {
        return Err(EvalError::Loss { code: loss as u8 });
    };
    if scale.len() != pop.size() {
        return Err(EvalError::Scales { len: scale.len(), size: pop.size() });
    }
    let all: Vec<usize> = (0..pop.size()).collect();
    let sums = fold_individuals::<BLOCK, _>(pop, &all, x, n_rows, &LossFold { y, loss, scale })?;
    Ok(sums.into_iter().map(|s| s.map_or(LossSums { n: n_rows as u64, ..LossSums::default() }, |a| a.sums)).collect())
}

// ---------------------------------------------------------------------------------------------
// The fitted head's sums
// ---------------------------------------------------------------------------------------------

/// Σ a·b over a block in eight lanes (row j to lane j % 8), summed pairwise: the order of
/// [`RegressionFold`].
#[inline(always)]
fn dot8(a: &[f32], b: &[f32]) -> f64 {
    let mut s = [0.0f64; 8];
    let (ac, bc) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ar, br) = (ac.remainder(), bc.remainder());
    for (ab, bb) in ac.zip(bc) {
        for l in 0..8 {
            s[l] += ab[l] as f64 * bb[l] as f64;
        }
    }
    for (l, (&x, &y)) in ar.iter().zip(br).enumerate() {
        s[l] += x as f64 * y as f64;
    }
    hsum(s)
}

/// Σ a over a block, in [`dot8`]'s order.
#[inline(always)]
fn sum8(a: &[f32]) -> f64 {
    let mut s = [0.0f64; 8];
    let c = a.chunks_exact(8);
    let r = c.remainder();
    for b in c {
        for l in 0..8 {
            s[l] += b[l] as f64;
        }
    }
    for (l, &x) in r.iter().enumerate() {
        s[l] += x as f64;
    }
    hsum(s)
}

/// The head's fold: accumulates [`HeadSums`] of the outputs against `y`.
struct HeadFold<'a> {
    y: &'a [f32],
    k: usize,
}

impl BlockFold for HeadFold<'_> {
    type Acc = HeadSums;

    fn init(&self) -> HeadSums {
        HeadSums::new(self.k)
    }

    fn block(&self, acc: &mut HeadSums, row0: usize, out: &BlockOutputs<'_>) {
        let y = &self.y[row0..row0 + out.len()];
        let mut part = HeadSums::new(self.k);
        part.n = out.len() as u64;
        for i in 0..self.k {
            let fi = out.output(i);
            part.sum_f[i] = sum8(fi);
            part.sum_fy[i] = dot8(fi, y);
            for j in i..self.k {
                part.sum_ff[pair(i, j)] = dot8(fi, out.output(j));
            }
            // Σf² of finite f32 values cannot overflow f64; NaN or ±inf make it non-finite.
            part.finite &= part.sum_ff[pair(i, i)].is_finite();
        }
        part.sum_y = sum8(y);
        part.sum_y2 = dot8(y, y);
        acc.merge(&part);
    }

    fn merge(&self, acc: &mut HeadSums, next: HeadSums) {
        acc.merge(&next);
    }
}

/// The fitted head's sums ([`HeadSums`]) of every individual, fused with evaluation: the
/// outputs of a population with `2 ..= MAX_HEAD` output slots against `y`.
///
/// `x`: `[n_features][n_rows]`, feature-major, f32; `y`: `[n_rows]`, finite. Individuals
/// without a program, or with a NaN or infinite output at any row, come back with
/// `finite == false`.
pub fn evaluate_head(pop: &Population, x: &[f32], y: &[f32], n_rows: usize) -> Result<Vec<HeadSums>, EvalError> {
    let k = pop.n_outputs;
    if k > MAX_HEAD {
        return Err(EvalError::TooManyOutputs { n_outputs: k, max: MAX_HEAD });
    }
    if y.len() != n_rows {
        return Err(EvalError::TargetLength { len: y.len(), n_rows });
    }
    if let Some(row) = y.iter().position(|v| !v.is_finite()) {
        return Err(EvalError::TargetNotFinite { row });
    }
    let k = k.max(1);
    let all: Vec<usize> = (0..pop.size()).collect();
    let sums = fold_individuals::<BLOCK, _>(pop, &all, x, n_rows, &HeadFold { y, k })?;
    Ok(sums.into_iter().map(|s| s.unwrap_or(HeadSums::invalid(k, n_rows as u64))).collect())
}

/// The class-head fold: accumulates [`ClassHeadSums`] of the outputs against class labels.
struct ClassHeadFold<'a> {
    labels: &'a [f32],
    k: usize,
    n_classes: usize,
}

impl BlockFold for ClassHeadFold<'_> {
    type Acc = ClassHeadSums;

    fn init(&self) -> ClassHeadSums {
        ClassHeadSums::new(self.k, self.n_classes)
    }

    fn block(&self, acc: &mut ClassHeadSums, row0: usize, out: &BlockOutputs<'_>) {
        let labels = &self.labels[row0..row0 + out.len()];
        let mut part = ClassHeadSums::new(self.k, self.n_classes);
        part.sums.n = out.len() as u64;
        for i in 0..self.k {
            let fi = out.output(i);
            part.sums.sum_f[i] = sum8(fi);
            for j in i..self.k {
                part.sums.sum_ff[pair(i, j)] = dot8(fi, out.output(j));
            }
            part.sums.finite &= part.sums.sum_ff[pair(i, i)].is_finite();
            for (&f, &l) in fi.iter().zip(labels) {
                part.class_f[l as usize][i] += f as f64;
            }
        }
        for &l in labels {
            part.counts[l as usize] += 1;
        }
        acc.merge(&part);
    }

    fn merge(&self, acc: &mut ClassHeadSums, next: ClassHeadSums) {
        acc.merge(&next);
    }
}

/// Rows per class of `labels` (class indices below `n_classes`, as f32); an error names the
/// first row that is not one.
pub fn class_counts(labels: &[f32], n_classes: usize) -> Result<Vec<u64>, EvalError> {
    if let Some(row) = labels.iter().position(|&l| !(l >= 0.0 && l.fract() == 0.0 && (l as usize) < n_classes)) {
        return Err(EvalError::Label { row, value: labels[row], n_classes });
    }
    let mut counts = vec![0u64; n_classes];
    labels.iter().for_each(|&l| counts[l as usize] += 1);
    Ok(counts)
}

/// The sums of a classifier's head ([`ClassHeadSums`]) of every individual, fused with
/// evaluation: the outputs of a population with up to `MAX_HEAD` output slots (0: the root's
/// value) against class labels `labels` (`[n_rows]`, class indices below `n_classes` as f32).
pub fn evaluate_class_head(pop: &Population, x: &[f32], labels: &[f32], n_rows: usize, n_classes: usize) -> Result<Vec<ClassHeadSums>, EvalError> {
    let k = pop.n_outputs;
    if k > MAX_HEAD {
        return Err(EvalError::TooManyOutputs { n_outputs: k, max: MAX_HEAD });
    }
    if labels.len() != n_rows {
        return Err(EvalError::TargetLength { len: labels.len(), n_rows });
    }
    let counts = class_counts(labels, n_classes)?;
    let k = k.max(1);
    let all: Vec<usize> = (0..pop.size()).collect();
    let sums = fold_individuals::<BLOCK, _>(pop, &all, x, n_rows, &ClassHeadFold { labels, k, n_classes })?;
    // An individual without a program still knows the rows' classes.
    Ok(sums.into_iter().map(|s| s.unwrap_or_else(|| ClassHeadSums { counts: counts.clone(), ..ClassHeadSums::invalid(k, n_classes, n_rows as u64) })).collect())
}

// ---------------------------------------------------------------------------------------------
// The joint fit with linear terms of the inputs
// ---------------------------------------------------------------------------------------------

/// The joint fold: accumulates [`JointSums`] of the program's value against the residual `r`
/// and the inputs `xs`.
struct JointFold<'a> {
    r: &'a [f32],
    xs: Vec<&'a [f32]>,
}

impl BlockFold for JointFold<'_> {
    type Acc = JointSums;

    fn init(&self) -> JointSums {
        JointSums::new(self.xs.len())
    }

    fn block(&self, acc: &mut JointSums, row0: usize, out: &BlockOutputs<'_>) {
        let f = out.output(0);
        let rows = row0..row0 + f.len();
        let mut part = JointSums::new(self.xs.len());
        part.n = f.len() as u64;
        part.sum_f = sum8(f);
        part.sum_f2 = dot8(f, f);
        part.sum_fr = dot8(f, &self.r[rows.clone()]);
        for (s, x) in part.sum_xf.iter_mut().zip(&self.xs) {
            *s = dot8(f, &x[rows.clone()]);
        }
        // Σf² of finite f32 values cannot overflow f64; NaN or ±inf make it non-finite.
        part.finite = part.sum_f2.is_finite();
        acc.merge(&part);
    }

    fn merge(&self, acc: &mut JointSums, next: JointSums) {
        acc.merge(&next);
    }
}

/// The sums of every individual's joint fit with linear terms of the inputs
/// ([`crate::program::linear::Joint`]), fused with evaluation: single-output programs, `r` the
/// target less the terms, `inputs` the terms' columns of `x` (`[n_features][n_rows]`).
/// Individuals without a program, or with a NaN or infinite value at any row, come back with
/// `finite == false`.
pub fn evaluate_joint(pop: &Population, x: &[f32], r: &[f32], n_rows: usize, inputs: &[usize]) -> Result<Vec<JointSums>, EvalError> {
    check_target(pop, r, n_rows)?;
    if x.len() % n_rows.max(1) != 0 || inputs.iter().any(|&j| (j + 1) * n_rows > x.len()) {
        return Err(EvalError::DataShape { len: x.len(), n_rows });
    }
    let xs = inputs.iter().map(|&j| &x[j * n_rows..(j + 1) * n_rows]).collect();
    let all: Vec<usize> = (0..pop.size()).collect();
    let sums = fold_individuals::<BLOCK, _>(pop, &all, x, n_rows, &JointFold { r, xs })?;
    Ok(sums.into_iter().map(|s| s.unwrap_or(JointSums::invalid(inputs.len(), n_rows as u64))).collect())
}

#[cfg(test)]
mod tests;
