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
