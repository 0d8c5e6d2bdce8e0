//! Interpreter throughput on a W3-like regression workload (EvoGP's and Chitty's sextic:
//! y = x⁶ − 2x⁴ + x², x uniform in [−1, 1]), in node evaluations per second: Σ over trees of
//! length × rows, per second of [`evaluate_regression`](super::evaluate_regression).
//! Timings are for reporting, never asserted in tests.

use std::time::Instant;

use crate::program::ops::Op;
use crate::program::tree::{Node, Population};
use crate::rng::{Purpose, Stream};

/// What to measure.
#[derive(Clone, Debug)]
pub struct EvalBench {
    /// Trees.
    pub population: usize,
    /// Data points.
    pub rows: usize,
    /// Tree lengths are uniform in `min_len..=max_len`.
    pub min_len: usize,
    /// See `min_len`.
    pub max_len: usize,
    /// Function set.
    pub functions: Vec<Op>,
    /// Block size: one of 64, 128, 256, 512, 1024 (others fall back to the default
    /// [`BLOCK`](super::BLOCK)).
    pub block: usize,
    /// Timed repetitions; the best is reported.
    pub repeats: usize,
    /// Seed of the trees and the data.
    pub seed: u64,
}

impl Default for EvalBench {
    /// W3: 1000 trees of 20–60 nodes over `+ - * / sin cos log exp`, 100 000 points.
    fn default() -> Self {
        Self {
            population: 1000,
            rows: 100_000,
            min_len: 20,
            max_len: 60,
            functions: vec![Op::Add, Op::Sub, Op::Mul, Op::Div, Op::Sin, Op::Cos, Op::Log, Op::Exp],
            block: super::BLOCK,
            repeats: 3,
            seed: 1,
        }
    }
}

/// What was measured.
#[derive(Clone, Debug)]
pub struct EvalBenchReport {
    /// Σ over trees of length × rows, per evaluation.
    pub node_evals: u64,
    /// Best wall time of one evaluation of the whole population, seconds.
    pub seconds: f64,
    /// `node_evals / seconds`.
    pub node_evals_per_second: f64,
    /// rayon threads used.
    pub threads: usize,
    /// Mean tree length.
    pub mean_len: f64,
    /// Individuals with a NaN or infinite output somewhere.
    pub invalid: usize,
    /// Instructions per point after compilation (Σ over trees): one per function node outside
    /// constant subtrees (folded into one constant each), plus output leaves and lone root
    /// leaves; other leaves cost none (they are read in place).
    pub instructions: u64,
    /// Function nodes per point (Σ over trees), for comparison with `instructions`.
    pub function_nodes: u64,
    /// Block size actually used.
    pub block: usize,
}

/// [`evaluate_regression`](super::evaluate_regression) at one block size.
type RegressionFn = fn(&Population, &[f32], &[f32], usize) -> Result<Vec<crate::program::fitness::RegressionSums>, crate::backend::cpu::error::EvalError>;

/// Builds the workload, evaluates it `repeats` times and reports the best.
pub fn bench_eval(cfg: &EvalBench) -> EvalBenchReport {
    let pop = random_population(cfg.seed, cfg.population, cfg.min_len, cfg.max_len, &cfg.functions, 1, 0);
    let (x, y) = sextic(cfg.seed, cfg.rows);
    let node_evals: u64 = pop.len.iter().map(|&l| l as u64 * cfg.rows as u64).sum();
    let instructions = (0..pop.size())
        .filter_map(|i| crate::backend::cpu::interp::Program::new(pop.tree(i), 0, 1, i).ok())
        .map(|p| p.code.len() as u64)
        .sum();
    let function_nodes = pop.op.iter().filter(|&&o| o > Op::Const as u8).count() as u64;
    let (run, block): (RegressionFn, usize) = match cfg.block {
        64 => (super::evaluate_regression_with::<64>, 64),
        128 => (super::evaluate_regression_with::<128>, 128),
        256 => (super::evaluate_regression_with::<256>, 256),
        512 => (super::evaluate_regression_with::<512>, 512),
        1024 => (super::evaluate_regression_with::<1024>, 1024),
        _ => (super::evaluate_regression_with::<{ super::BLOCK }>, super::BLOCK),
    };
    let mut best = f64::INFINITY;
    let mut invalid = 0;
    for _ in 0..cfg.repeats.max(1) {
        let t = Instant::now();
        let sums = run(&pop, &x, &y, cfg.rows).expect("benchmark data is well-formed");
        best = best.min(t.elapsed().as_secs_f64());
        invalid = sums.iter().filter(|s| !s.is_valid()).count();
    }
    EvalBenchReport {
        node_evals,
        seconds: best,
        node_evals_per_second: node_evals as f64 / best,
        threads: rayon::current_num_threads(),
        mean_len: pop.len.iter().map(|&l| l as f64).sum::<f64>() / cfg.population.max(1) as f64,
        invalid,
        instructions,
        function_nodes,
        block,
    }
}

/// The sextic data set: `x` `[1][rows]` uniform in [−1, 1], `y = x⁶ − 2x⁴ + x²`.
pub(crate) fn sextic(seed: u64, rows: usize) -> (Vec<f32>, Vec<f32>) {
    let mut s = Stream::new(seed, 0, 0, Purpose::Data);
    let x: Vec<f32> = (0..rows).map(|_| s.unit_f32() * 2.0 - 1.0).collect();
    let y = x
        .iter()
        .map(|&v| {
            let v2 = v as f64 * v as f64;
            (v2 * v2 * v2 - 2.0 * v2 * v2 + v2) as f32
        })
        .collect();
    (x, y)
}

/// `p` random trees (see [`random_tree`]), each with a length drawn uniformly from
/// `min_len..=max_len`, in a population with room for `max_len` nodes.
pub(crate) fn random_population(
    seed: u64,
    p: usize,
    min_len: usize,
    max_len: usize,
    functions: &[Op],
    n_vars: u32,
    n_outputs: usize,
) -> Population {
    let mut pop = Population::new(p, max_len.max(1), n_outputs);
    for i in 0..p {
        let mut s = Stream::new(seed, 0, i as u32, Purpose::Bench);
        let target = min_len + s.below((max_len - min_len + 1) as u32) as usize;
        let nodes = random_tree(&mut s, functions, n_vars, target, n_outputs);
        pop.set_tree(i, &nodes).expect("random trees are well-formed");
    }
    pop
}

/// A random tree of about `target` nodes (never more), for benchmarks and tests only (the
/// evolutionary initialisation lives elsewhere). Functions are drawn from `functions` while
/// there is room; leaves are variables `x0 .. x{n_vars−1}` or constants in [−2, 2) in
/// steps of 1/64, half each; with `n_outputs > 0` about one node in five is an output node.
pub(crate) fn random_tree(s: &mut Stream, functions: &[Op], n_vars: u32, target: usize, n_outputs: usize) -> Vec<Node> {
    let target = target.max(1);
    let mut nodes = Vec::with_capacity(target);
    let mut open = 1usize; // children still to place
    while open > 0 {
        // Room left after this node, if every open slot gets a leaf.
        let room = target.saturating_sub(nodes.len() + open);
        let fits: Vec<Op> = functions.iter().copied().filter(|f| f.arity() <= room).collect();
        // A leaf early only while other branches stay open, so trees reach about `target`.
        let leaf = fits.is_empty() || (open > 1 && s.chance(0.15));
        let mut node = if leaf {
            if n_vars > 0 && s.chance(0.5) {
                Node::var(s.below(n_vars))
            } else {
                Node::constant((s.below(256) as f32 - 128.0) / 64.0)
            }
        } else {
            Node::func(fits[s.below(fits.len() as u32) as usize])
        };
        if n_outputs > 0 && s.chance(0.2) {
            node.out = 1 + s.below(n_outputs as u32) as u8;
        }
        open = open - 1 + node.op.arity();
        nodes.push(node);
    }
    nodes
}

/// Random benchmark trees (one variable) for other benchmarks, e.g. the GPU's in `grove bench`.
pub fn bench_population(seed: u64, p: usize, min_len: usize, max_len: usize, functions: &[Op]) -> Population {
    random_population(seed, p, min_len, max_len, functions, 1, 0)
}

/// The sextic data set of W3 (`x` uniform in [−1, 1]), for other benchmarks.
pub fn bench_sextic(seed: u64, rows: usize) -> (Vec<f32>, Vec<f32>) {
    sextic(seed, rows)
}
