//! Random policies for the control kernel's parity tests (host emulation and GPU).

#![allow(dead_code)] // each test binary uses part of it

use grove::program::{init_population, Node, Op, Population, TreeSpec};
use grove::sim::Model;

/// `p` random policies for `m` (tree GP with output nodes; sin, tanh and exp among the
/// functions, so grove's bit-exact math is exercised), the last three replaced by edge cases:
/// an empty row, an output of +inf (1e30 · 1e30) and a read past the observation.
pub fn policies(m: &Model, p: usize, seed: u64) -> Population {
    let ops = vec![Op::Add, Op::Sub, Op::Mul, Op::Div, Op::Sin, Op::Tanh, Op::Exp];
    let spec = TreeSpec::new(ops, m.obs_size as u32, 160)
        .with_outputs(m.nu(), 0.15)
        .with_const_range(-2.0, 2.0)
        .with_p_const(0.3)
        .with_depth(2, 4);
    let mut pop = init_population(&spec, p, seed).unwrap();
    let mut out0 = Node::func(Op::Mul);
    out0.out = 1;
    pop.clear(p - 3);
    pop.set_tree(p - 2, &[out0, Node::constant(1e30), Node::constant(1e30)]).unwrap();
    let mut read = Node::var(m.obs_size as u32);
    read.out = 1;
    pop.set_tree(p - 1, &[read]).unwrap();
    pop
}

/// A left-deep chain of `n` additions of observation 0 (stack need n + 1), the sum an output of
/// slot 0: deeper than the kernel's stack when n ≥ 64, so the host plays it on the CPU.
pub fn deep_chain(n: usize) -> Vec<Node> {
    let mut nodes = Vec::with_capacity(2 * n + 1);
    let mut root = Node::func(Op::Add);
    root.out = 1;
    nodes.push(root);
    nodes.extend(std::iter::repeat_n(Node::func(Op::Add), n - 1));
    nodes.extend(std::iter::repeat_n(Node::var(0), n + 1));
    nodes
}

/// `p` policies for the work queue of the roll-out kernel (p ≥ 8): [`policies`]' random ones
/// with the edge cases spread among them, so that episodes ending at once, early and late sit
/// between ordinary ones in the queue. Row 1 is empty and row 5 reads past the observation
/// (the host skips both), row 3 outputs +inf (invalid at its first step), row 6 outputs
/// exp(60 · the last observation, a velocity), which overflows once the robot moves fast enough
/// (invalid after some steps, or never); the others are random.
pub fn interleaved(m: &Model, p: usize, seed: u64) -> Population {
    assert!(p >= 8);
    let base = policies(m, p, seed);
    let mut pop = Population::new(p, base.max_len, base.n_outputs);
    let mut random = 0..p - 3;
    for r in 0..p {
        match r {
            1 => pop.copy_row(r, &base, p - 3),
            3 => pop.copy_row(r, &base, p - 2),
            5 => pop.copy_row(r, &base, p - 1),
            6 => {
                let mut exp = Node::func(Op::Exp);
                exp.out = 1;
                let late = [exp, Node::func(Op::Mul), Node::constant(60.0), Node::var(m.obs_size as u32 - 1)];
                pop.set_tree(r, &late).unwrap();
            }
            _ => pop.copy_row(r, &base, random.next().unwrap()),
        }
    }
    pop
}

/// A normaliser for `n` observation components, as a policy reads it: means and scales of
/// several magnitudes, and component 1 of zero deviation (read as 0).
pub fn test_scale(n: usize) -> grove::sim::stats::InputScale {
    let norm = grove::sim::stats::Normaliser {
        mean: (0..n).map(|i| 0.1 * i as f64 - 0.3).collect(),
        std: (0..n).map(|i| if i == 1 { 0.0 } else { 0.5 + 0.25 * i as f64 }).collect(),
    };
    grove::sim::stats::InputScale::of(&norm)
}
