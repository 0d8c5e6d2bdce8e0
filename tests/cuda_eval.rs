//! Parity of the CUDA evaluator (`kernels/eval.cu`) with a CPU reference written here: a
//! recursive evaluator that follows the tree semantics of `src/program/tree.rs` and
//! `Op::apply`, in f64 (the reference) and in f32 (the precision both backends compute in, which
//! also tells how well-conditioned each point is).
//!
//! The GPU tests are compiled everywhere and ignored unless `GROVE_TEST_GPU=1` (then a missing
//! GPU is a failure). Outputs are poisoned before every launch, so an element no kernel wrote
//! shows up; NaN never passes a comparison it should not.
//!
//! Tolerance: a result `g` matches the f64 reference `c` when `|g − c| ≤ 1e-5·max(1, |c|)`. At
//! points where f32 arithmetic itself cannot reach that (the CPU's f32 evaluation `c32` differs
//! from `c` by more than 1e-6·max(1, |c|)), the bound grows by `10·|c32 − c|`; such points are
//! counted, and the tests that draw well-conditioned programs require them to be rare. Where
//! `c32` is NaN or infinite, `g` must be the same.
//!
//! The tests without a GPU check the scaffolding: the reference against a transcription of the
//! kernel's backwards walk, and the tolerance against an f32 evaluator that must pass it.

use grove::backend::cuda::memory::POISON;
use grove::backend::cuda::{CudaEngine, DeviceDataset, EngineOptions, EvalConfig, GpuError, Origin};
use grove::program::fitness::RegressionSums;
use grove::program::ops::{FUNCTIONS, Op, Real};
use grove::program::tree::{Node, Population, TreeRef};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

// ---------------------------------------------------------------------------------------------
// The reference.

/// Evaluates node `i`'s subtree; adds every output node's value to its slot. Returns the node's
/// value and what it passes to its parent (the last child's value for an output node).
fn eval_node<T: Real>(t: &TreeRef<'_>, i: usize, var: &dyn Fn(usize) -> T, slots: &mut [T]) -> (T, T) {
    let op = Op::from_code(t.op[i]).expect("valid opcode");
    let (value, last) = match op {
        Op::Var => {
            let v = var(t.value[i] as usize);
            (v, v)
        }
        Op::Const => {
            let v = T::from_f64(t.value[i] as f64);
            (v, v)
        }
        _ => {
            let c1 = i + 1;
            let a = eval_node(t, c1, var, slots).1;
            if op.arity() == 2 {
                let c2 = c1 + t.size[c1] as usize;
                let b = eval_node(t, c2, var, slots).1;
                (op.apply(a, b), b)
            } else {
                (op.apply(a, T::ZERO), a)
            }
        }
    };
    if t.out[i] > 0 {
        let s = t.out[i] as usize - 1;
        slots[s] = slots[s] + value;
        (value, last)
    } else {
        (value, value)
    }
}

/// The results of tree `t` at `row`: the slots, or the root's value when `n_outputs == 0`.
fn eval_ref<T: Real>(t: &TreeRef<'_>, data: &Data, row: usize, n_outputs: usize) -> Vec<T> {
    let var = |f: usize| T::from_f64(data.x[f * data.n_rows + row] as f64);
    let mut slots = vec![T::ZERO; n_outputs];
    let (root, _) = eval_node(t, 0, &var, &mut slots);
    if n_outputs > 0 { slots } else { vec![root] }
}

/// A transcription of eval.cu's walk: backwards over the prefix array, a stack whose top is
/// held apart, output nodes passing their last child's value.
fn eval_walk<T: Real>(t: &TreeRef<'_>, data: &Data, row: usize, n_outputs: usize) -> Vec<T> {
    let mut stack = vec![T::ZERO; t.len()];
    let (mut top, mut h) = (T::ZERO, 0usize);
    let mut slots = vec![T::ZERO; n_outputs];
    for i in (0..t.len()).rev() {
        let op = Op::from_code(t.op[i]).unwrap();
        let (r, pass);
        match op {
            Op::Var | Op::Const => {
                r = match op {
                    Op::Var => T::from_f64(data.x[t.value[i] as usize * data.n_rows + row] as f64),
                    _ => T::from_f64(t.value[i] as f64),
                };
                if h > 0 {
                    stack[h - 1] = top;
                }
                h += 1;
                pass = r;
            }
            _ if op.arity() == 2 => {
                let (a, b) = (top, stack[h - 2]);
                r = op.apply(a, b);
                pass = b;
                h -= 1;
            }
            _ => {
                r = op.apply(top, T::ZERO);
                pass = top;
            }
        }
        if t.out[i] > 0 {
            let s = t.out[i] as usize - 1;
            slots[s] = slots[s] + r;
            top = pass;
        } else {
            top = r;
        }
    }
    if n_outputs > 0 { slots } else { vec![top] }
}

// ---------------------------------------------------------------------------------------------
// Data and random populations.

/// A data set on the host: `x` is `[n_features][n_rows]`.
struct Data {
    x: Vec<f32>,
    y: Vec<f32>,
    n_rows: usize,
    n_features: usize,
}

fn random_data(rng: &mut StdRng, n_rows: usize, n_features: usize) -> Data {
    let x: Vec<f32> = (0..n_rows * n_features).map(|_| rng.random_range(-1.0..1.0)).collect();
    let y = (0..n_rows).map(|i| x[i] * x[i] - 0.5 * x[(n_features - 1) * n_rows + i] + rng.random_range(-0.1..0.1)).collect();
    Data { x, y, n_rows, n_features }
}

/// Operators whose programs stay well-conditioned on data in [-1, 1]: bounded values, no poles.
const BENIGN: &[Op] = &[
    Op::Add,
    Op::Sub,
    Op::Mul,
    Op::Aq,
    Op::Max,
    Op::Min,
    Op::Sin,
    Op::Cos,
    Op::Tanh,
    Op::Sigmoid,
    Op::Plog,
    Op::Sqrt,
    Op::Abs,
    Op::Neg,
];

/// A random tree of at most `depth` levels below the root, in prefix order; with
/// `n_outputs > 0`, about a quarter of the nodes are output nodes.
fn random_tree(rng: &mut StdRng, ops: &[Op], depth: usize, n_features: usize, n_outputs: usize) -> Vec<Node> {
    fn grow(rng: &mut StdRng, ops: &[Op], depth: usize, f: usize, o: usize, nodes: &mut Vec<Node>) {
        let mut node = if depth == 0 || rng.random_bool(0.25) {
            if rng.random_bool(0.6) { Node::var(rng.random_range(0..f) as u32) } else { Node::constant(rng.random_range(-2.0..2.0)) }
        } else {
            Node::func(ops[rng.random_range(0..ops.len())])
        };
        if o > 0 && rng.random_bool(0.25) {
            node.out = rng.random_range(1..=o) as u8;
        }
        nodes.push(node);
        for _ in 0..node.op.arity() {
            grow(rng, ops, depth - 1, f, o, nodes);
        }
    }
    let mut nodes = Vec::new();
    grow(rng, ops, depth, n_features, n_outputs, &mut nodes);
    nodes
}

/// `p` random trees of at most `depth` levels; every `empty_every`-th row left empty.
fn random_population(rng: &mut StdRng, p: usize, depth: usize, n_features: usize, n_outputs: usize, empty_every: usize) -> Population {
    let mut pop = Population::new(p, (1 << (depth + 1)) - 1, n_outputs);
    for i in 0..p {
        if empty_every > 0 && i % empty_every == empty_every - 1 {
            continue;
        }
        let nodes = random_tree(rng, BENIGN, depth, n_features, n_outputs);
        pop.set_tree(i, &nodes).unwrap();
    }
    pop.validate().unwrap();
    pop
}

/// A left-deep chain of `n` binary operators (stack need `n + 1`) over random leaves.
fn left_deep_chain(rng: &mut StdRng, n: usize, n_features: usize) -> Vec<Node> {
    let ops = [Op::Add, Op::Aq, Op::Max, Op::Min, Op::Sub];
    let mut nodes: Vec<Node> = (0..n).map(|_| Node::func(ops[rng.random_range(0..ops.len())])).collect();
    nodes.extend((0..=n).map(|_| Node::var(rng.random_range(0..n_features) as u32)));
    nodes
}

/// A right-deep chain of `n` operators (stack need 2) of `2n + 1` nodes.
fn right_deep_chain(rng: &mut StdRng, n: usize, n_features: usize) -> Vec<Node> {
    let ops = [Op::Add, Op::Aq, Op::Max, Op::Min, Op::Sub, Op::Mul];
    let mut nodes = Vec::new();
    for _ in 0..n {
        nodes.push(Node::func(ops[rng.random_range(0..ops.len())]));
        nodes.push(Node::var(rng.random_range(0..n_features) as u32));
    }
    nodes.push(Node::constant(0.5));
    nodes
}

// ---------------------------------------------------------------------------------------------
// Comparison.

/// Reference results `[P × max(1, n_outputs) × N]` in f64 and f32, and which trees are finite.
struct Reference {
    r64: Vec<f64>,
    r32: Vec<f32>,
    finite: Vec<bool>,
}

fn reference(pop: &Population, data: &Data) -> Reference {
    let (p, o, n) = (pop.size(), pop.n_outputs.max(1), data.n_rows);
    let mut r = Reference { r64: vec![f64::NAN; p * o * n], r32: vec![f32::NAN; p * o * n], finite: vec![false; p] };
    for t in 0..p {
        let tree = pop.tree(t);
        if tree.is_empty() {
            continue;
        }
        let mut finite = true;
        for i in 0..n {
            let (a, b) = (eval_ref::<f64>(&tree, data, i, pop.n_outputs), eval_ref::<f32>(&tree, data, i, pop.n_outputs));
            for s in 0..o {
                r.r64[(t * o + s) * n + i] = a[s];
                r.r32[(t * o + s) * n + i] = b[s];
                finite &= b[s].is_finite();
            }
        }
        r.finite[t] = finite;
    }
    r
}

/// How a comparison went: points checked, and those where f32 itself is ill-conditioned.
#[derive(Debug, Default)]
struct Checked {
    points: usize,
    ill_conditioned: usize,
}

/// Compares predictions with the reference; the error names the first mismatch.
fn check_predictions(gpu: &[f32], rf: &Reference, pop: &Population, n_rows: usize) -> Result<Checked, String> {
    let (p, o) = (pop.size(), pop.n_outputs.max(1));
    if gpu.len() != p * o * n_rows {
        return Err(format!("{} predictions, expected {p} × {o} × {n_rows}", gpu.len()));
    }
    let mut c = Checked::default();
    for t in 0..p {
        for s in 0..o {
            for i in 0..n_rows {
                let k = (t * o + s) * n_rows + i;
                let (g, c64, c32) = (gpu[k], rf.r64[k], rf.r32[k]);
                let at = format!("[tree {t}, out {s}, row {i}]");
                if g.to_bits() == POISON {
                    return Err(format!("{at} was never written"));
                }
                let ok = if pop.len[t] == 0 {
                    g.is_nan()
                } else if !c32.is_finite() {
                    (c32.is_nan() && g.is_nan()) || (c32.is_infinite() && g == c32)
                } else if !g.is_finite() {
                    false
                } else {
                    let slack = (c32 as f64 - c64).abs();
                    if slack > 1e-6 * c64.abs().max(1.0) {
                        c.ill_conditioned += 1;
                    }
                    (g as f64 - c64).abs() <= 1e-5 * c64.abs().max(1.0) + 10.0 * slack
                };
                if !ok {
                    return Err(format!("first mismatch at {at}: gpu={g} cpu={c64} (f32 reference {c32})"));
                }
                c.points += 1;
            }
        }
    }
    Ok(c)
}

/// Regression sums computed on the host from results `[P × O × N]`, in row order, in f64,
/// with the scale of each sum (the sum of the absolute values of its terms).
fn host_sums(results: &[f64], o: usize, data: &Data, t: usize) -> ([f64; 7], [f64; 7]) {
    let (mut s, mut scale) = ([0.0; 7], [0.0; 7]);
    for i in 0..data.n_rows {
        let f = results[(t * o) * data.n_rows + i];
        let y = data.y[i] as f64;
        let e = f - y;
        let terms = [e * e, e.abs(), f, f * f, f * y, y, y * y];
        for j in 0..7 {
            s[j] += terms[j];
            scale[j] += terms[j].abs();
        }
    }
    (s, scale)
}

fn fields(g: &RegressionSums) -> [f64; 7] {
    [g.sum_e2, g.sum_abs_e, g.sum_f, g.sum_f2, g.sum_fy, g.sum_y, g.sum_y2]
}

const FIELDS: [&str; 7] = ["sse", "sae", "sum_f", "sum_ff", "sum_fy", "sum_y", "sum_yy"];

/// Checks regression sums: counts and finiteness against the reference; the sums against sums
/// of the GPU's own predictions (the reduction, tightly) and against the f64 reference
/// (trees whose every point is well-conditioned).
fn check_sums(gpu: &[RegressionSums], pred: &[f32], rf: &Reference, pop: &Population, data: &Data) -> Result<(), String> {
    let (p, o, n) = (pop.size(), pop.n_outputs.max(1), data.n_rows);
    if gpu.len() != p {
        return Err(format!("{} sums for {p} trees", gpu.len()));
    }
    let pred64: Vec<f64> = pred.iter().map(|&v| v as f64).collect();
    for (t, g) in gpu.iter().enumerate() {
        if g.n != n as u64 {
            return Err(format!("tree {t}: n = {}, expected {n}", g.n));
        }
        if g.finite != rf.finite[t] {
            return Err(format!("tree {t}: finite = {}, the reference says {}", g.finite, rf.finite[t]));
        }
        if !g.finite {
            if pop.len[t] == 0 && fields(g) != [0.0; 7] {
                return Err(format!("tree {t} is empty but its sums are {g:?}"));
            }
            continue;
        }
        let (own, own_scale) = host_sums(&pred64, o, data, t);
        let (cpu, cpu_scale) = host_sums(&rf.r64, o, data, t);
        let well = (0..n).all(|i| {
            let k = (t * o) * n + i;
            (rf.r32[k] as f64 - rf.r64[k]).abs() <= 1e-6 * rf.r64[k].abs().max(1.0)
        });
        for (j, (gv, name)) in fields(g).into_iter().zip(FIELDS).enumerate() {
            if (gv - own[j]).abs() > 1e-6 * own_scale[j].max(1.0) {
                return Err(format!("tree {t}: {name} = {gv}, but the GPU's predictions sum to {}", own[j]));
            }
            if well && (gv - cpu[j]).abs() > 1e-5 * (n as f64 + cpu_scale[j]) {
                return Err(format!("tree {t}: {name} = {gv}, the reference {}", cpu[j]));
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Tests without a GPU: the scaffolding.

#[test]
fn reference_follows_the_tree_docs() {
    // EvoGP's worked example: [+<out 1>, x0, *<out 0>, x1, 2] at x0 = 3, x1 = 5. The product
    // (10) goes to slot 0 and passes its last child (2) up; the sum 3 + 2 goes to slot 1.
    let nodes = [
        Node { out: 2, ..Node::func(Op::Add) },
        Node::var(0),
        Node { out: 1, ..Node::func(Op::Mul) },
        Node::var(1),
        Node::constant(2.0),
    ];
    let mut pop = Population::new(1, 5, 2);
    pop.set_tree(0, &nodes).unwrap();
    let data = Data { x: vec![3.0, 5.0], y: vec![0.0], n_rows: 1, n_features: 2 };
    assert_eq!(eval_ref::<f64>(&pop.tree(0), &data, 0, 2), [10.0, 5.0]);
    assert_eq!(eval_walk::<f64>(&pop.tree(0), &data, 0, 2), [10.0, 5.0]);
    // Single output: the root's value.
    pop.n_outputs = 0;
    pop.out.fill(0);
    assert_eq!(eval_ref::<f64>(&pop.tree(0), &data, 0, 0), [13.0]);
}

#[test]
fn kernel_walk_matches_the_recursive_reference() {
    let mut rng = StdRng::seed_from_u64(7);
    for n_outputs in [0, 3] {
        let data = random_data(&mut rng, 50, 3);
        let pop = random_population(&mut rng, 16, 5, 3, n_outputs, 5);
        for t in 0..pop.size() {
            let tree = pop.tree(t);
            if tree.is_empty() {
                continue;
            }
            for i in 0..data.n_rows {
                let (a, b) = (eval_ref::<f64>(&tree, &data, i, n_outputs), eval_walk::<f64>(&tree, &data, i, n_outputs));
                for (x, y) in a.iter().zip(&b) {
                    assert!((x - y).abs() <= 1e-12 * x.abs().max(1.0), "tree {t} row {i}: {a:?} vs {b:?}");
                }
            }
        }
    }
}

#[test]
fn tolerance_accepts_an_f32_evaluator_and_rejects_errors() {
    let mut rng = StdRng::seed_from_u64(11);
    let data = random_data(&mut rng, 60, 3);
    let pop = random_population(&mut rng, 16, 5, 3, 2, 4);
    let rf = reference(&pop, &data);
    // The kernel's walk in f32 plays the GPU.
    let o = 2;
    let mut sim = vec![f32::NAN; pop.size() * o * data.n_rows];
    for t in 0..pop.size() {
        if pop.len[t] == 0 {
            continue;
        }
        for i in 0..data.n_rows {
            for (s, v) in eval_walk::<f32>(&pop.tree(t), &data, i, 2).into_iter().enumerate() {
                sim[(t * o + s) * data.n_rows + i] = v;
            }
        }
    }
    let c = check_predictions(&sim, &rf, &pop, data.n_rows).unwrap();
    assert!(c.ill_conditioned * 50 <= c.points, "{c:?}: the benign operators should rarely be ill-conditioned");
    let t = (0..pop.size()).find(|&t| pop.len[t] > 0).unwrap();
    let k = t * o * data.n_rows + 3;
    let mut bad = sim.clone();
    bad[k] = f32::from_bits(POISON);
    assert!(check_predictions(&bad, &rf, &pop, data.n_rows).unwrap_err().contains("never written"));
    let mut bad = sim.clone();
    bad[k] = f32::NAN;
    assert!(check_predictions(&bad, &rf, &pop, data.n_rows).unwrap_err().contains("first mismatch"));
    let mut bad = sim.clone();
    bad[k] += 1e-3 * bad[k].abs().max(1.0);
    assert!(check_predictions(&bad, &rf, &pop, data.n_rows).is_err());
}

// ---------------------------------------------------------------------------------------------
// GPU tests.

/// The engine; with GROVE_TEST_GPU=1, no GPU is a failure.
/// Held by the tests that count an engine's module loads and by the one that registers user
/// operators: a registration changes every module's text (its operator header) and so its key,
/// and a test counting loads beside it saw a module it had just loaded missing (an H100,
/// 2026-12-07, three test threads).
static MODULE_KEYS: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn module_keys() -> std::sync::MutexGuard<'static, ()> {
    MODULE_KEYS.lock().unwrap_or_else(|e| e.into_inner())
}

fn engine() -> CudaEngine {
    CudaEngine::new().unwrap_or_else(|e| panic!("GROVE_TEST_GPU=1 but {e}"))
}

fn upload(e: &CudaEngine, d: &Data) -> DeviceDataset {
    e.upload_dataset(&d.x, &d.y, d.n_rows, d.n_features).unwrap()
}

fn poisoned(cfg: EvalConfig) -> EvalConfig {
    EvalConfig { poison_outputs: true, ..cfg }
}

/// Evaluates `pop` on `data` both ways with `cfg` and checks everything against the reference.
fn check_all(e: &CudaEngine, pop: &Population, data: &Data, dev: &DeviceDataset, cfg: EvalConfig, rf: &Reference) -> Checked {
    let cfg = poisoned(cfg);
    let pred = e.predict_with(pop, dev, &cfg).unwrap_or_else(|err| panic!("{err}"));
    let c = check_predictions(&pred, rf, pop, data.n_rows).unwrap_or_else(|m| panic!("predict ({cfg:?}): {m}"));
    let sums = e.evaluate_regression_with(pop, dev, &cfg).unwrap_or_else(|err| panic!("{err}"));
    check_sums(&sums, &pred, rf, pop, data).unwrap_or_else(|m| panic!("evaluate_regression ({cfg:?}): {m}"));
    c
}

#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn eval_matches_reference() {
    let e = engine();
    eprintln!("{} (cc {:?}, {:?})", e.device_name(), e.compute_capability(), e.target());
    let mut rng = StdRng::seed_from_u64(2026);
    // (trees, rows, outputs, depth): single and multi-output, N not a multiple of any tile,
    // one point, one tree; every 7th tree empty.
    for (p, n, o, depth) in [(64, 1000, 0, 6), (64, 777, 3, 6), (33, 2049, 0, 5), (1, 1, 0, 4), (5, 1, 2, 4), (200, 130, 1, 6)] {
        let data = random_data(&mut rng, n, 3);
        let dev = upload(&e, &data);
        let pop = random_population(&mut rng, p, depth, 3, o, 7);
        let rf = reference(&pop, &data);
        let c = check_all(&e, &pop, &data, &dev, EvalConfig::default(), &rf);
        assert!(c.ill_conditioned * 50 <= c.points, "{c:?}");
        eprintln!("P={p} N={n} outputs={o}: {c:?}");
    }
}

#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn every_launch_shape_matches_reference() {
    let e = engine();
    let mut rng = StdRng::seed_from_u64(99);
    let data = random_data(&mut rng, 3001, 3);
    let dev = upload(&e, &data);
    let pop = random_population(&mut rng, 20, 6, 3, 2, 6);
    let rf = reference(&pop, &data);
    for t in [32, 64, 96, 256, 1024] {
        for k in 1..=8 {
            if 2 * t * k * 4 > 32 * 1024 {
                continue; // two output slots would overflow the shared-memory budget
            }
            for passes in [1, 3] {
                let cfg = EvalConfig {
                    threads_per_block: Some(t),
                    points_per_thread: Some(k),
                    tile_points: Some(t * k * passes),
                    poison_outputs: true,
                };
                check_all(&e, &pop, &data, &dev, cfg, &rf);
            }
        }
    }
}

#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn every_operator_matches_reference() {
    let e = engine();
    // Edge values: zeros of both signs, tiny, ±1, large, and ordinary points.
    let col: Vec<f32> = vec![0.0, -0.0, 1e-30, -1e-30, 1.0, -1.0, 0.5, -2.5, 3.0, 1e3, -1e3, 1e-3, 7.25, -0.75];
    let n = col.len();
    let mut x = col.clone();
    x.extend(col.iter().rev());
    let data = Data { x, y: vec![0.25; n], n_rows: n, n_features: 2 };
    let dev = upload(&e, &data);
    let shapes: Vec<Vec<Node>> = FUNCTIONS
        .iter()
        .flat_map(|&op| {
            let f = Node::func(op);
            if op.arity() == 2 {
                vec![vec![f, Node::var(0), Node::var(1)], vec![f, Node::var(1), Node::constant(-0.0)], vec![f, Node::constant(2.0), Node::var(0)]]
            } else {
                vec![vec![f, Node::var(0)], vec![f, Node::var(1)]]
            }
        })
        .collect();
    let mut pop = Population::new(shapes.len(), 3, 0);
    for (i, s) in shapes.iter().enumerate() {
        pop.set_tree(i, s).unwrap();
    }
    let rf = reference(&pop, &data);
    check_all(&e, &pop, &data, &dev, EvalConfig::default(), &rf);
    check_all(&e, &pop, &data, &dev, EvalConfig { points_per_thread: Some(1), ..Default::default() }, &rf);
}

#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn deep_and_long_trees_match_reference() {
    let e = engine();
    let mut rng = StdRng::seed_from_u64(5);
    let data = random_data(&mut rng, 700, 3);
    let dev = upload(&e, &data);
    // Stack need 31, 32, 33 (around the fast kernels' 32), 200 and 512 (the fallback's limit);
    // right-deep chains (need 2) longer than the 1024 nodes staged at a time, up to 4001 nodes;
    // and a chain needing 701, which is refused.
    let trees: Vec<Vec<Node>> = vec![
        left_deep_chain(&mut rng, 30, 3),
        left_deep_chain(&mut rng, 31, 3),
        left_deep_chain(&mut rng, 32, 3),
        left_deep_chain(&mut rng, 199, 3),
        left_deep_chain(&mut rng, 511, 3),
        right_deep_chain(&mut rng, 600, 3),
        right_deep_chain(&mut rng, 2000, 3),
        left_deep_chain(&mut rng, 700, 3),
    ];
    let mut pop = Population::new(trees.len(), 4001, 0);
    for (i, t) in trees.iter().enumerate() {
        pop.set_tree(i, t).unwrap();
    }
    match e.evaluate_regression(&pop, &dev) {
        Err(GpuError::TreeTooDeep { tree: 7, need: 701, max: 512 }) => {}
        other => panic!("expected TreeTooDeep for tree 7, got {other:?}"),
    }
    // In its place, a tree both deep (the fallback kernel) and longer than one staged chunk:
    // sub(right-deep chain of 1401 nodes, left-deep chain needing 301), 2003 nodes.
    let mut long_deep = vec![Node::func(Op::Sub)];
    long_deep.extend(right_deep_chain(&mut rng, 700, 3));
    long_deep.extend(left_deep_chain(&mut rng, 300, 3));
    pop.set_tree(7, &long_deep).unwrap();
    pop.validate().unwrap();
    let rf = reference(&pop, &data);
    for k in [1, 4, 8] {
        check_all(&e, &pop, &data, &dev, EvalConfig { points_per_thread: Some(k), ..Default::default() }, &rf);
    }
}

#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn results_are_deterministic() {
    let e = engine();
    let mut rng = StdRng::seed_from_u64(3);
    let data = random_data(&mut rng, 5000, 3);
    let dev = upload(&e, &data);
    let pop = random_population(&mut rng, 100, 6, 3, 2, 9);
    let cfg = poisoned(EvalConfig::default());
    let bits = |s: &[RegressionSums]| -> Vec<u64> {
        s.iter().flat_map(|g| fields(g).map(f64::to_bits).into_iter().chain([g.n, g.finite as u64])).collect()
    };
    let a = e.evaluate_regression_with(&pop, &dev, &cfg).unwrap();
    let b = e.evaluate_regression_with(&pop, &dev, &cfg).unwrap();
    assert_eq!(bits(&a), bits(&b), "regression sums differ between two runs");
    let pa: Vec<u32> = e.predict_with(&pop, &dev, &cfg).unwrap().iter().map(|v| v.to_bits()).collect();
    let pb: Vec<u32> = e.predict_with(&pop, &dev, &cfg).unwrap().iter().map(|v| v.to_bits()).collect();
    assert!(pa == pb, "predictions differ between two runs");
}

#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn reused_buffers_and_timing_leave_results_unchanged() {
    // The engine keeps its staging and device buffers between calls and only grows them: a call
    // after a larger one (stale nodes past every tree's length), after a failed one, or timed
    // must give the bits a fresh engine gives.
    let bits = |s: &[RegressionSums]| -> Vec<u64> {
        s.iter().flat_map(|g| fields(g).map(f64::to_bits).into_iter().chain([g.n, g.finite as u64])).collect()
    };
    let mut rng = StdRng::seed_from_u64(11);
    let data = random_data(&mut rng, 3000, 3);
    let big = random_population(&mut rng, 400, 6, 3, 0, 7);
    let small = random_population(&mut rng, 50, 4, 3, 0, 5);
    let multi = random_population(&mut rng, 60, 6, 3, 2, 0);
    let cfg = poisoned(EvalConfig::default());
    let fresh = |pop: &Population| {
        let e = engine();
        let dev = upload(&e, &data);
        (bits(&e.evaluate_regression_with(pop, &dev, &cfg).unwrap()), e.predict_with(pop, &dev, &cfg).unwrap())
    };
    let expected: Vec<_> = [&big, &small, &multi].into_iter().map(fresh).collect();
    let e = engine();
    let dev = upload(&e, &data);
    let mut bad = small.clone();
    bad.value[0] = 7.0;
    bad.op[0] = Op::Var as u8;
    for (round, pop) in [&big, &small, &multi, &big, &small].into_iter().enumerate() {
        let i = round % 3;
        assert!(e.evaluate_regression_with(&bad, &dev, &cfg).is_err());
        let got = bits(&e.evaluate_regression_with(pop, &dev, &cfg).unwrap());
        assert!(got == expected[i].0, "round {round}: regression sums differ from a fresh engine's");
        let (timed, t) = e.evaluate_regression_timed(pop, &dev, &cfg).unwrap();
        assert!(bits(&timed) == expected[i].0, "round {round}: timed sums differ");
        assert!(t.h2d_bytes > 0 && t.total_s >= t.host_prep_s, "{t:?}");
        assert!([t.host_prep_s, t.h2d_s, t.kernels_s, t.d2h_s].iter().all(|v| v.is_finite() && *v >= 0.0), "{t:?}");
        let pred = e.predict_with(pop, &dev, &cfg).unwrap();
        let same = pred.len() == expected[i].1.len() && pred.iter().zip(&expected[i].1).all(|(a, b)| a.to_bits() == b.to_bits());
        assert!(same, "round {round}: predictions differ from a fresh engine's");
    }
}

#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn modules_are_cached_in_memory_and_on_disk() {
    let _keys = module_keys();
    let dir = std::env::temp_dir().join(format!("grove-engine-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let open = || {
        CudaEngine::with_options(EngineOptions { ordinal: 0, cache_dir: Some(dir.clone()) })
            .unwrap_or_else(|e| panic!("GROVE_TEST_GPU=1 but {e}"))
    };
    let mut rng = StdRng::seed_from_u64(1);
    let data = random_data(&mut rng, 100, 3);
    let pop = random_population(&mut rng, 4, 4, 3, 0, 0);
    let first = open();
    let dev = upload(&first, &data);
    first.evaluate_regression(&pop, &dev).unwrap();
    first.evaluate_regression(&pop, &dev).unwrap();
    let loads = first.module_loads();
    assert_eq!(loads.len(), 1, "one module, loaded once: {loads:?}");
    assert_eq!(loads[0].origin, Origin::Compiled);
    let second = open();
    let dev = upload(&second, &data);
    second.evaluate_regression(&pop, &dev).unwrap();
    let loads = second.module_loads();
    assert_eq!(loads[0].origin, Origin::Disk, "{loads:?}");
    eprintln!("compile {:.3} s, from disk {:.3} s", first.module_loads()[0].seconds, loads[0].seconds);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `module_ready` compiles a module on another thread and answers at once: `None` while NVRTC
/// works, then the module; `load` waits for that compile instead of starting another. With
/// the disk cache, the compile is stored, and a fresh engine has the module at once.
#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn a_module_compiles_on_another_thread_while_the_caller_goes_on() {
    let _keys = module_keys();
    use grove::backend::cuda::kernels::EVAL;
    let dir = std::env::temp_dir().join(format!("grove-engine-behind-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let open = |cache: bool| {
        CudaEngine::with_options(EngineOptions { ordinal: 0, cache_dir: cache.then(|| dir.clone()) })
            .unwrap_or_else(|e| panic!("GROVE_TEST_GPU=1 but {e}"))
    };
    // Waited for by `load`: one compile, counted once.
    let first = open(true);
    let defines: &[(&str, u32)] = &[("GROVE_TEST_BEHIND", 1)];
    assert!(first.module_ready(&EVAL, defines).unwrap().is_none(), "nothing was compiled yet");
    let (_, origin) = first.load(&EVAL, defines).unwrap();
    assert_eq!(origin, Origin::Compiled);
    assert!(first.module_ready(&EVAL, defines).unwrap().is_some());
    let loads = first.module_loads();
    assert_eq!(loads.len(), 1, "{loads:?}");
    // On disk now: a fresh engine has it at once.
    let second = open(true);
    assert!(second.module_ready(&EVAL, defines).unwrap().is_some());
    assert_eq!(second.module_loads()[0].origin, Origin::Disk);
    // Without a disk cache, polled until the compile ends.
    let third = open(false);
    let start = std::time::Instant::now();
    let mut polls = 0;
    while third.module_ready(&EVAL, defines).unwrap().is_none() {
        polls += 1;
        assert!(start.elapsed().as_secs() < 300, "the compile never ended");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(polls > 0, "the first call answered before NVRTC could have compiled the module");
    let loads = third.module_loads();
    assert_eq!((loads.len(), loads[0].origin), (1, Origin::Compiled), "{loads:?}");
    // The compiled module holds the file's kernels.
    let module = third.module_ready(&EVAL, defines).unwrap().unwrap();
    assert!(module.load_function("grove_eval_regression_k1").is_ok());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn bad_input_is_an_error_not_a_crash() {
    let e = engine();
    let mut rng = StdRng::seed_from_u64(8);
    let data = random_data(&mut rng, 10, 2);
    let dev = upload(&e, &data);
    // A variable the data set does not have.
    let mut pop = Population::new(2, 3, 0);
    pop.set_tree(1, &[Node::func(Op::Add), Node::var(0), Node::var(2)]).unwrap();
    let err = e.evaluate_regression(&pop, &dev).unwrap_err().to_string();
    assert!(err.contains("tree 1") && err.contains("variable index 2"), "{err}");
    assert!(e.predict(&pop, &dev).is_err());
    // A non-finite data value, named by row and column.
    let mut x = data.x.clone();
    x[data.n_rows + 4] = f32::NAN;
    let err = e.upload_dataset(&x, &data.y, data.n_rows, 2).unwrap_err().to_string();
    assert!(err.contains("row 4") && err.contains("column 1"), "{err}");
    assert!(e.upload_dataset(&data.x, &data.y, data.n_rows + 1, 2).is_err());
    // A data set of another engine.
    let other = engine();
    let pop = random_population(&mut rng, 2, 3, 2, 0, 0);
    assert!(other.evaluate_regression(&pop, &dev).is_err());
    // Nothing to do.
    assert!(e.evaluate_regression(&Population::new(0, 4, 0), &dev).unwrap().is_empty());
    assert!(e.predict(&Population::new(0, 4, 0), &dev).unwrap().is_empty());
}

// ---------------------------------------------------------------------------------------------
// Bit-exact parity with the CPU interpreter.

/// Same bits, or both NaN (the payload of a NaN is not part of the contract).
fn same_bits(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// The CPU interpreter's results for every tree, laid out as the GPU's `predict`.
fn cpu_predict(pop: &Population, d: &Data) -> Vec<f32> {
    (0..pop.size())
        .flat_map(|i| {
            grove::backend::cpu::eval::predict(pop, i, &d.x, d.n_rows).unwrap_or_else(|_| vec![f32::NAN; pop.n_outputs.max(1) * d.n_rows])
        })
        .collect()
}

/// Finite arguments that exercise every branch of grove's math: both reductions of sin/cos/tan,
/// exp's overflow and underflow thresholds, subnormals, and random bit patterns. (Data must be
/// finite; the tests reach ±inf and NaN through strict division by a zero column.)
fn hard_arguments(rng: &mut StdRng, n_random: usize) -> Vec<f32> {
    let mut v = vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        f32::MIN_POSITIVE,
        1e-45,
        -1e-45,
        f32::MAX,
        f32::MIN,
        88.72283,
        88.72284,
        -87.33655,
        -103.97208,
        -104.5,
        0.625,
        -0.625,
        6144.0,
        6144.0005,
        -6144.0005,
        1e30,
        -3e38,
        0.5,
        2.0,
        3.0,
        -3.0,
        1.0 / 3.0,
    ];
    for i in -400..=400 {
        v.push(i as f32 * 0.0371);
    }
    for _ in 0..n_random {
        let bits: u32 = rng.random();
        let r = f32::from_bits(bits);
        v.push(if r.is_finite() { r } else { 1.5 });
        v.push(rng.random_range(-30.0f32..30.0));
    }
    v
}

#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn every_operator_gives_the_cpus_bits_everywhere() {
    let e = engine();
    let mut rng = StdRng::seed_from_u64(4);
    let a = hard_arguments(&mut rng, 4000);
    // Every pair (a_i, a_j) for a spread of j: column 0 is a, column 1 a shuffled copy.
    let n = a.len();
    let mut b = a.clone();
    for i in (1..n).rev() {
        b.swap(i, rng.random_range(0..=i));
    }
    let mut x = a.clone();
    x.extend(&b);
    x.extend(std::iter::repeat_n(0.0, n));
    let data = Data { x, y: vec![0.0; n], n_rows: n, n_features: 3 };
    let dev = upload(&e, &data);
    // Per operator: op(x0, x1); op(x0 / 0, x1) and op(x0, x1 / 0), whose arguments are ±inf,
    // or NaN where the column is 0 (strict division by the zero column x2).
    let inf = |v: u32| vec![Node::func(Op::Sdiv), Node::var(v), Node::var(2)];
    let mut trees: Vec<(Op, usize, Vec<Node>)> = Vec::new();
    for &op in FUNCTIONS {
        let f = Node::func(op);
        if op.arity() == 2 {
            trees.push((op, 0, vec![f, Node::var(0), Node::var(1)]));
            trees.push((op, 1, [vec![f], inf(0), vec![Node::var(1)]].concat()));
            trees.push((op, 2, [vec![f, Node::var(0)], inf(1)].concat()));
        } else {
            trees.push((op, 0, vec![f, Node::var(0)]));
            trees.push((op, 1, [vec![f], inf(0)].concat()));
        }
    }
    let mut pop = Population::new(trees.len(), 5, 0);
    for (i, (_, _, t)) in trees.iter().enumerate() {
        pop.set_tree(i, t).unwrap();
    }
    let gpu = e.predict_with(&pop, &dev, &poisoned(EvalConfig::default())).unwrap();
    let cpu = cpu_predict(&pop, &data);
    let mut bad = Vec::new();
    for (t, (op, form, _)) in trees.iter().enumerate() {
        for r in 0..n {
            let (g, c) = (gpu[t * n + r], cpu[t * n + r]);
            let (ra, rb) = match form {
                0 => (a[r], b[r]),
                1 => (a[r] / 0.0, b[r]),
                _ => (a[r], b[r] / 0.0),
            };
            let want = grove::program::ops::apply_fast(*op, ra, rb);
            assert!(same_bits(c, want), "the CPU interpreter's {op}({ra}, {rb}) = {c:e} is not apply_fast's {want:e}");
            if !same_bits(g, c) {
                bad.push(format!("{op}({ra:e}, {rb:e}): gpu {g:e} ({:08x}), cpu {c:e} ({:08x})", g.to_bits(), c.to_bits()));
            }
        }
    }
    assert!(bad.is_empty(), "{} results differ:\n{}", bad.len(), bad[..bad.len().min(20)].join("\n"));
}

#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn random_programs_of_every_operator_give_the_cpus_bits() {
    let e = engine();
    let mut rng = StdRng::seed_from_u64(77);
    for (o, depth) in [(0, 7), (3, 6)] {
        let mut data = random_data(&mut rng, 1500, 3);
        for v in data.x.iter_mut().step_by(7) {
            *v *= 40.0; // reach exp's overflow and the large trigonometric reduction
        }
        let dev = upload(&e, &data);
        let mut pop = Population::new(300, (1 << (depth + 1)) - 1, o);
        for i in 0..pop.size() {
            let nodes = random_tree(&mut rng, FUNCTIONS, depth, 3, o);
            pop.set_tree(i, &nodes).unwrap();
        }
        let gpu = e.predict_with(&pop, &dev, &poisoned(EvalConfig::default())).unwrap();
        let cpu = cpu_predict(&pop, &data);
        let diff = gpu.iter().zip(&cpu).filter(|(g, c)| !same_bits(**g, **c)).count();
        let nonfinite = cpu.iter().filter(|c| !c.is_finite()).count();
        eprintln!("outputs {o}: {} results, {nonfinite} non-finite, {diff} differ", cpu.len());
        assert_eq!(diff, 0, "{diff} of {} results differ from the CPU's bits", cpu.len());
        if o > 0 {
            continue; // regression sums are for single-output programs
        }
        // The fitness sums differ only by the order of the f64 additions.
        let gs = e.evaluate_regression_with(&pop, &dev, &poisoned(EvalConfig::default())).unwrap();
        let cs = grove::backend::cpu::eval::evaluate_regression(&pop, &data.x, &data.y, data.n_rows).unwrap();
        for (i, (g, c)) in gs.iter().zip(&cs).enumerate() {
            assert_eq!(g.finite, c.finite, "tree {i}: finite gpu {} cpu {}", g.finite, c.finite);
            if c.finite {
                let rel = (g.mse() - c.mse()).abs() / c.mse().abs().max(1e-300);
                assert!(rel <= 1e-12, "tree {i}: mse gpu {:e} cpu {:e}", g.mse(), c.mse());
            }
        }
    }
}

/// The joint fit's sums (`grove_joint_sums` after the prediction kernels) against the CPU's
/// `evaluate_joint`: the same program values, so the f64 sums differ only by their order;
/// empty, NaN-valued and deep trees come back invalid as on the CPU, and a bad input column is
/// an error.
#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn joint_sums_match_the_cpu() {
    let e = engine();
    let mut rng = StdRng::seed_from_u64(91);
    for (n_rows, inputs) in [(1500, vec![0, 2]), (37, vec![1]), (4000, vec![]), (300, vec![2, 0, 1, 1])] {
        let data = random_data(&mut rng, n_rows, 3);
        let dev = upload(&e, &data);
        // Random programs of every operator, every 17th empty, and one deeper than the fast
        // kernels' stack (the deep kernel writes its values).
        let mut pop = Population::new(200, 255, 0);
        for i in (0..200).filter(|i| i % 17 != 16) {
            pop.set_tree(i, &random_tree(&mut rng, FUNCTIONS, 5, 3, 0)).unwrap();
        }
        pop.set_tree(5, &right_deep_chain(&mut rng, 120, 3)).unwrap();
        let g = e.evaluate_joint(&pop, &dev, &inputs).unwrap();
        let c = grove::backend::cpu::eval::evaluate_joint(&pop, &data.x, &data.y, data.n_rows, &inputs).unwrap();
        assert_eq!(g.len(), c.len());
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * a.abs().max(b.abs()).max(1e-300) || (a - b).abs() < 1e-9;
        let mut valid = 0;
        for (i, (g, c)) in g.iter().zip(&c).enumerate() {
            assert_eq!((g.finite, g.n, g.sum_xf.len()), (c.finite, c.n, c.sum_xf.len()), "tree {i}");
            if !c.finite {
                continue;
            }
            valid += 1;
            for (a, b) in [(g.sum_f, c.sum_f), (g.sum_f2, c.sum_f2), (g.sum_fr, c.sum_fr)].into_iter().chain(g.sum_xf.iter().copied().zip(c.sum_xf.iter().copied())) {
                assert!(close(a, b), "tree {i}: gpu {a:e} cpu {b:e}");
            }
        }
        assert!(valid > 50, "{valid} valid trees of 200");
        assert!(!g[16].finite, "every 17th tree is empty");
    }
    let data = random_data(&mut rng, 50, 3);
    let dev = upload(&e, &data);
    let pop = random_population(&mut rng, 4, 4, 3, 0, 0);
    let err = e.evaluate_joint(&pop, &dev, &[3]).unwrap_err().to_string();
    assert!(err.contains("input 3 of 3"), "{err}");
}

/// The head's sums (`grove_head_sums` after the prediction kernels) against the CPU's
/// `evaluate_head`, for 1 to 8 outputs: the same output values, so the f64 sums differ only by
/// their order; empty trees come back invalid as on the CPU.
#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn head_sums_match_the_cpu() {
    let e = engine();
    let mut rng = StdRng::seed_from_u64(93);
    for (n_rows, k) in [(1500, 2), (37, 8), (4000, 3), (300, 1)] {
        let data = random_data(&mut rng, n_rows, 3);
        let dev = upload(&e, &data);
        let mut pop = Population::new(150, 255, if k > 1 { k } else { 0 });
        for i in (0..150).filter(|i| i % 13 != 12) {
            pop.set_tree(i, &random_tree(&mut rng, BENIGN, 5, 3, if k > 1 { k } else { 0 })).unwrap();
        }
        let g = e.evaluate_head(&pop, &dev).unwrap();
        let c = grove::backend::cpu::eval::evaluate_head(&pop, &data.x, &data.y, data.n_rows).unwrap();
        assert_eq!(g.len(), c.len());
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * a.abs().max(b.abs()).max(1e-300) || (a - b).abs() < 1e-9;
        let mut valid = 0;
        for (i, (g, c)) in g.iter().zip(&c).enumerate() {
            assert_eq!((g.finite, g.n, g.k), (c.finite, c.n, c.k), "tree {i}");
            if !c.finite {
                continue;
            }
            valid += 1;
            let all = |h: &grove::program::head::HeadSums| -> Vec<f64> {
                h.sum_f.iter().chain(&h.sum_ff).chain(&h.sum_fy).copied().chain([h.sum_y, h.sum_y2]).collect()
            };
            for (a, b) in all(g).into_iter().zip(all(c)) {
                assert!(close(a, b), "k {k}, tree {i}: gpu {a:e} cpu {b:e}");
            }
        }
        assert!(valid > 50, "{valid} valid trees of 150");
        assert!(!g[12].finite, "every 13th tree is empty");
    }
}

/// A classifier head's sums (`grove_class_head_sums` after the prediction kernels) against the
/// CPU's `evaluate_class_head`, for 1 to 8 outputs and 2 to 10 classes: the same output values,
/// so the f64 sums differ only by their order; empty trees come back invalid as on the CPU.
#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn class_head_sums_match_the_cpu() {
    let e = engine();
    let mut rng = StdRng::seed_from_u64(94);
    for (n_rows, k, c) in [(1500, 2, 3), (37, 8, 2), (4000, 3, 10), (300, 1, 4)] {
        let mut data = random_data(&mut rng, n_rows, 3);
        data.y = (0..n_rows).map(|i| ((i * 7 + i / 3) % c) as f32).collect();
        let dev = upload(&e, &data);
        let mut pop = Population::new(150, 255, if k > 1 { k } else { 0 });
        for i in (0..150).filter(|i| i % 13 != 12) {
            pop.set_tree(i, &random_tree(&mut rng, BENIGN, 5, 3, if k > 1 { k } else { 0 })).unwrap();
        }
        let counts = grove::backend::cpu::eval::class_counts(&data.y, c).unwrap();
        let g = e.evaluate_class_head(&pop, &dev, &counts).unwrap();
        let w = grove::backend::cpu::eval::evaluate_class_head(&pop, &data.x, &data.y, data.n_rows, c).unwrap();
        assert_eq!(g.len(), w.len());
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * a.abs().max(b.abs()).max(1e-300) || (a - b).abs() < 1e-9;
        let mut valid = 0;
        for (i, (g, w)) in g.iter().zip(&w).enumerate() {
            assert_eq!((g.sums.finite, g.sums.n, g.sums.k, &g.counts), (w.sums.finite, w.sums.n, w.sums.k, &w.counts), "tree {i}");
            if !w.sums.finite {
                continue;
            }
            valid += 1;
            let all = |h: &grove::program::head::ClassHeadSums| -> Vec<f64> { h.sums.sum_f.iter().chain(&h.sums.sum_ff).chain(h.class_f.iter().flatten()).copied().collect() };
            for (a, b) in all(g).into_iter().zip(all(w)) {
                assert!(close(a, b), "k {k}, c {c}, tree {i}: gpu {a:e} cpu {b:e}");
            }
            assert!((g.brier() - w.brier()).abs() <= 1e-9, "k {k}, c {c}, tree {i}");
        }
        assert!(valid > 50, "{valid} valid trees of 150");
        assert!(!g[12].sums.finite, "every 13th tree is empty");
    }
}

// ---------------------------------------------------------------------------------------------
// Classification (kernels/classify.cu against backend::cpu::classify::evaluate_classification).

#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn classify_matches_reference() {
    use grove::backend::cpu::classify::evaluate_classification;
    let e = engine();
    let mut rng = StdRng::seed_from_u64(606);
    // (trees, rows, classes, outputs): multi-output, binary (one output), many classes, one
    // point; every 5th tree empty; N not a multiple of any tile.
    for (p, n, k, o) in [(64, 1000, 3, 3), (40, 777, 2, 0), (16, 3001, 10, 10), (5, 1, 3, 3)] {
        let data = random_data(&mut rng, n, 4);
        let labels: Vec<u32> = (0..n).map(|_| rng.random_range(0..k as u32)).collect();
        let mut pop = random_population(&mut rng, p, 5, 4, o, 5);
        if o == 0 {
            // A tree deeper than the fast kernel's stack goes to grove_classify_deep.
            let mut big = Population::new(p, 81, 0);
            for t in 0..p {
                if pop.len[t] > 0 {
                    big.set_tree(t, &pop.tree(t).nodes()).unwrap();
                }
            }
            big.set_tree(0, &left_deep_chain(&mut rng, 40, 4)).unwrap();
            pop = big;
        }
        let dev = e.upload_class_data(&data.x, &labels, n, 4, k).unwrap();
        let gpu = e.evaluate_classification(&pop, &dev).unwrap_or_else(|err| panic!("{err}"));
        let cpu = evaluate_classification(&pop, &data.x, &labels, n, k).unwrap();
        assert_eq!(gpu.len(), p);
        for t in 0..p {
            let (g, c) = (&gpu[t], &cpu[t]);
            let at = format!("[tree {t}, P={p} N={n} K={k} outputs={o}]");
            assert_eq!((g.n, g.bad), (c.n, c.bad), "first mismatch at {at}: n/bad gpu={:?} cpu={:?}", (g.n, g.bad), (c.n, c.bad));
            // The interpreter's bits on both: the same argmax at every point, and each point's
            // cross-entropy the CPU's (grove_math.cuh's exp and ln); only the sums' order differs.
            assert_eq!((&g.correct, &g.predicted), (&c.correct, &c.predicted), "first mismatch at {at}: counts");
            assert!((g.ce - c.ce).abs() <= 1e-11 * c.ce.abs().max(1.0), "first mismatch at {at}: ce gpu={} cpu={}", g.ce, c.ce);
        }
        // Deterministic: the same call gives the same bits.
        let again = e.evaluate_classification(&pop, &dev).unwrap();
        assert!(again.iter().zip(&gpu).all(|(a, b)| a.ce.to_bits() == b.ce.to_bits() && a.correct == b.correct));
        // Offsets (the linear terms of the inputs) added to the outputs, one row per output.
        let offset: Vec<f32> = (0..o.max(1) * n).map(|_| rng.random_range(-3.0f32..3.0)).collect();
        let mut dev = dev;
        e.set_class_offset(&mut dev, &offset).unwrap();
        let gpu_o = e.evaluate_classification(&pop, &dev).unwrap_or_else(|err| panic!("{err}"));
        let cpu_o = grove::backend::cpu::classify::evaluate_classification_with(&pop, &data.x, &labels, n, k, Some(&offset)).unwrap();
        for t in 0..p {
            let (g, c) = (&gpu_o[t], &cpu_o[t]);
            let at = format!("[offsets, tree {t}, P={p} N={n} K={k} outputs={o}]");
            assert_eq!((g.n, g.bad), (c.n, c.bad), "first mismatch at {at}");
            assert_eq!((&g.correct, &g.predicted), (&c.correct, &c.predicted), "first mismatch at {at}: counts");
            assert!((g.ce - c.ce).abs() <= 1e-11 * c.ce.abs().max(1.0), "first mismatch at {at}: ce gpu={} cpu={}", g.ce, c.ce);
        }
        assert!(gpu_o.iter().zip(&gpu).any(|(a, b)| a.ce != b.ce), "the offsets change the sums");
        // Offsets of the wrong shape or not finite are refused.
        assert!(e.set_class_offset(&mut dev, &offset[..n.saturating_sub(1)]).is_err());
        let mut nan = offset.clone();
        nan[0] = f32::NAN;
        assert!(e.set_class_offset(&mut dev, &nan).is_err());
        eprintln!("classify P={p} N={n} K={k} outputs={o}: ok");
    }
}

#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn user_operators_match_the_cpu_bit_for_bit() {
    let _keys = module_keys();
    // A user operator is computed by its body's built-in steps on both devices: the kernel's
    // predictions are the CPU interpreter's bits.
    let defs = ["g_softsign(x) = x / (1 + abs(x))", "g_hyp(a, b) = sqrt(a*a + b*b)", "g_mix(a, b) = exp(-g_hyp(a, b)) * sin(a) + 0.5"];
    let user = grove::program::ops::user::register(&defs.iter().map(|d| d.to_string()).collect::<Vec<_>>()).unwrap();
    let e = engine();
    let mut rng = StdRng::seed_from_u64(31);
    let mut ops = vec![Op::Add, Op::Mul, Op::Sub];
    ops.extend(&user);
    let trees: Vec<Vec<Node>> = (0..64).map(|_| random_tree(&mut rng, &ops, 5, 3, 0)).collect();
    assert!(trees.iter().flatten().any(|n| n.op.is_user()));
    let max_len = trees.iter().map(Vec::len).max().unwrap();
    let mut pop = Population::new(trees.len(), max_len, 0);
    for (i, t) in trees.iter().enumerate() {
        pop.set_tree(i, t).unwrap();
    }
    let data = random_data(&mut rng, 999, 3);
    let dev = upload(&e, &data);
    let gpu = e.predict_with(&pop, &dev, &poisoned(EvalConfig::default())).unwrap();
    for t in 0..pop.size() {
        let cpu = grove::backend::cpu::eval::predict(&pop, t, &data.x, data.n_rows).unwrap();
        for (r, (g, c)) in gpu[t * data.n_rows..(t + 1) * data.n_rows].iter().zip(&cpu).enumerate() {
            assert_eq!(g.to_bits(), c.to_bits(), "first mismatch at [tree {t}, row {r}]: gpu={g} cpu={c}");
        }
    }
}
