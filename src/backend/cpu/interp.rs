//! The CPU's one interpreter, twin of `kernels/interp.cuh` (the one the GPU kernels share):
//! trees compiled to linear programs, run one point at a time ([`run`]: control policies) or a
//! block of points at a time ([`block`]: regression, prediction, classification).
//!
//! A tree (prefix order, [`crate::program::tree`]) becomes one instruction per function node,
//! in the order the tree is walked backwards (postfix), with the operand kinds resolved once
//! per program (Chitty's linear form): a leaf that is neither an output node nor the root is
//! folded into its parent as an operand, so it costs the interpreter no dispatch and no stack
//! traffic. Output leaves and a lone root leaf stay instructions of their own. [`run`] executes
//! a program with the tree's semantics, operation for operation; the tests hold it and the
//! block executor to the tree walked node by node, and `tests/interp.rs` holds the device
//! compiler (`grove_compile_trees`) to [`compile_trees`].

pub mod block;

use super::eval::EvalError;
use crate::program::ops::{Op, apply_fast};
use crate::program::tree::TreeRef;

/// Where an operand comes from (2 bits of [`Instr::mode`]).
pub mod src {
    /// Operand a: the newest value (`top`).
    pub const TOP: u8 = 0;
    /// Operand b: popped from the stack.
    pub const STACK: u8 = 0;
    /// A variable of the data (or observation): the operand's word is its index.
    pub const VAR: u8 = 1;
    /// A constant: the operand's word is its f32 bits.
    pub const CONST: u8 = 2;
    /// Operand b: the newest value (`top`), when operand a is a folded leaf.
    pub const BTOP: u8 = 3;
}
/// [`Instr::mode`] flag: push `top` on the stack before reading the operands.
pub const PUSH: u8 = 16;
/// [`Instr::mode`] flag: two arguments (an output instruction passes b up, else a).
pub const BINARY: u8 = 32;
/// The instruction count [`compile_trees`] gives a tree [`compile`] refuses (the device
/// compilers take only trees the host checked).
pub const NOT_COMPILED: u16 = u16::MAX;

/// One instruction, laid out as `GroveInstr` in `kernels/interp.cuh` (16 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Instr {
    /// Operand a: a variable index ([`src::VAR`]) or a constant's bits ([`src::CONST`]); 0 else.
    pub a: u32,
    /// Operand b, likewise.
    pub b: u32,
    /// Opcode; `Var` or `Const` for a lone leaf (its value is operand a).
    pub op: u8,
    /// a's source | b's source << 2 | [`PUSH`] | [`BINARY`].
    pub mode: u8,
    /// Output slot + 1, or 0.
    pub out: u8,
    /// 0.
    pub pad: u8,
    /// 0.
    pub reserved: u32,
}
const _: () = assert!(std::mem::size_of::<Instr>() == 16);

/// A leaf folded into its parent: its source and operand word.
fn leaf_operand(op: u8, value: f32) -> (u8, u32) {
    if op == Op::Var as u8 { (src::VAR, value as u32) } else { (src::CONST, value.to_bits()) }
}

/// Compiles one tree (its nodes' `op`, `value` and `out`, prefix order) into `dst` (cleared
/// first). Returns the instruction count, or `None` when the nodes are not one well-formed tree;
/// an empty tree compiles to no instructions. Twin of `grove_compile_tree` and
/// `grove_compile_chunk` (which read the subtree sizes where this walks with a stack).
pub fn compile(op: &[u8], value: &[f32], out: &[u8], dst: &mut Vec<Instr>) -> Option<usize> {
    dst.clear();
    let len = op.len();
    if len == 0 {
        return Some(0);
    }
    let foldable = |c: usize| op[c] <= Op::Const as u8 && out[c] == 0 && c != 0;
    let mut pos: Vec<usize> = Vec::new();
    let mut live = 0usize;
    for i in (0..len).rev() {
        let code = op[i];
        if foldable(i) {
            pos.push(i);
            continue;
        }
        let mut ins = Instr { op: code, out: out[i], ..Instr::default() };
        let used;
        if code <= Op::Const as u8 {
            let (s, w) = leaf_operand(code, value[i]);
            ins.mode = s | (src::CONST << 2);
            ins.a = w;
            used = 0;
        } else {
            let arity = Op::from_code(code).map_or(0, Op::arity);
            if arity == 0 || pos.len() < arity {
                return None;
            }
            let c1 = pos.pop().expect("checked");
            let f1 = foldable(c1);
            let mut mode = src::TOP;
            let mut u = 0;
            if f1 {
                let (s, w) = leaf_operand(op[c1], value[c1]);
                mode = s;
                ins.a = w;
            } else {
                u += 1;
            }
            if arity == 2 {
                let c2 = pos.pop().expect("checked");
                let sb = if foldable(c2) {
                    let (s, w) = leaf_operand(op[c2], value[c2]);
                    ins.b = w;
                    s
                } else {
                    u += 1;
                    if f1 { src::BTOP } else { src::STACK }
                };
                mode |= (sb << 2) | BINARY;
            } else {
                mode |= src::CONST << 2;
            }
            ins.mode = mode;
            used = u;
        }
        if used == 0 && live > 0 {
            ins.mode |= PUSH;
        }
        live = live + 1 - used;
        dst.push(ins);
        pos.push(i);
    }
    (pos.len() == 1).then_some(dst.len())
}

/// [`compile`] on a tree of a population.
pub fn compile_tree(tree: TreeRef<'_>, dst: &mut Vec<Instr>) -> Option<usize> {
    compile(tree.op, tree.value, tree.out, dst)
}

/// Compiles rows `ids` of a population laid out as the device holds it (`op`, `value`, `out`:
/// `[P × max_len]`; `lens`: `[P]`) into `prog` (`[P × max_len]`) and `n_instr` (`[P]`,
/// [`NOT_COMPILED`] for a refused tree); other rows are left as they are. Twin of
/// `grove_compile_trees`.
#[allow(clippy::too_many_arguments)]
pub fn compile_trees(
    ids: &[u32],
    op: &[u8],
    value: &[f32],
    out: &[u8],
    lens: &[u16],
    max_len: usize,
    prog: &mut [Instr],
    n_instr: &mut [u16],
) {
    let mut buf = Vec::new();
    for &t in ids {
        let (t, row) = (t as usize, t as usize * max_len);
        let len = lens[t] as usize;
        let r = row..row + len;
        match compile(&op[r.clone()], &value[r.clone()], &out[r], &mut buf) {
            Some(n) => {
                prog[row..row + n].copy_from_slice(&buf);
                n_instr[t] = n as u16;
            }
            None => n_instr[t] = NOT_COMPILED,
        }
    }
}

/// A tree checked against its data and compiled: what the CPU runs, one observation at a time
/// ([`run`]) or a block of points at a time ([`block`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Program {
    /// The linear form ([`compile`]).
    pub code: Vec<Instr>,
    /// Output slots (`n_outputs`), or 0 when the root's value is the result.
    pub n_outputs: usize,
    /// Values live at once at most (the newest included): the stack a run needs.
    pub depth: usize,
    /// The variables read, ascending, without repeats.
    pub vars: Vec<u32>,
}

impl Program {
    /// Checks a non-empty tree (opcodes, output slots below `n_outputs`, variables below
    /// `n_features`, one tree) and compiles it. `tree_index` only labels errors.
    pub fn new(tree: TreeRef<'_>, n_outputs: usize, n_features: usize, tree_index: usize) -> Result<Self, EvalError> {
        check(tree, n_outputs, n_features, tree_index)?;
        let mut code = Vec::with_capacity(tree.len());
        compile_tree(tree, &mut code).ok_or_else(|| EvalError::Malformed { tree: tree_index, reason: "not one tree".into() })?;
        let (mut d, mut depth) = (0usize, 1usize);
        for ins in &code {
            if ins.mode & PUSH != 0 {
                d += 1;
                depth = depth.max(d + 1);
            }
            if (ins.mode >> 2) & 3 == src::STACK && ins.mode & BINARY != 0 {
                d -= 1;
            }
        }
        let mut vars: Vec<u32> = (0..tree.len()).filter(|&i| tree.op[i] == Op::Var as u8).map(|i| tree.value[i] as u32).collect();
        vars.sort_unstable();
        vars.dedup();
        Ok(Program { code, n_outputs, depth, vars })
    }
}

/// The checks of [`Program::new`], node by node in the interpreter's order (the first breach
/// is the one reported).
fn check(tree: TreeRef<'_>, n_outputs: usize, n_features: usize, tree_index: usize) -> Result<(), EvalError> {
    let bad = |reason: String| EvalError::Malformed { tree: tree_index, reason };
    if tree.is_empty() {
        return Err(bad("empty tree".into()));
    }
    let mut live = 0usize;
    for i in (0..tree.len()).rev() {
        let op = Op::from_code(tree.op[i]).ok_or_else(|| bad(format!("node {i}: bad opcode {}", tree.op[i])))?;
        let k = tree.out[i] as usize;
        if k > n_outputs {
            return Err(bad(format!("node {i}: output slot {} of {n_outputs}", k as isize - 1)));
        }
        if live < op.arity() {
            return Err(bad(format!("node {i} ({op}) has too few children")));
        }
        if op == Op::Var {
            let v = tree.value[i];
            if !(v >= 0.0 && (v as usize) < n_features && v.fract() == 0.0) {
                return Err(EvalError::Variable { tree: tree_index, node: i, var: v as u32, n_features });
            }
        }
        live = live + 1 - op.arity();
    }
    if live != 1 {
        return Err(bad(format!("nodes form {live} trees, not one")));
    }
    Ok(())
}

/// Runs a program at one point: `var(i)` reads variable `i`; `outs` (one per output slot)
/// receive the output nodes' values, added in the program's order; `stack` is scratch. Returns
/// the root's value (the last value computed). The f32 operations are [`apply_fast`]'s, in the
/// tree's order: the bits of [`block`] at every point, and of the kernels.
pub fn run(prog: &[Instr], var: impl Fn(usize) -> f32, outs: &mut [f32], stack: &mut Vec<f32>) -> f32 {
    stack.clear();
    let mut top = 0.0f32;
    let operand = |s: u8, w: u32, top: f32| match s {
        src::VAR => var(w as usize),
        src::CONST => f32::from_bits(w),
        _ => top,
    };
    for ins in prog {
        if ins.mode & PUSH != 0 {
            stack.push(top);
        }
        let (sa, sb) = (ins.mode & 3, (ins.mode >> 2) & 3);
        let a = operand(sa, ins.a, top);
        let b = if sb == src::STACK { stack.pop().expect("a compiled program pops only what it pushed") } else { operand(sb, ins.b, top) };
        let r = match Op::from_code(ins.op) {
            Some(op) if !op.is_leaf() => apply_fast(op, a, b),
            _ => a,
        };
        if ins.out != 0 {
            outs[ins.out as usize - 1] += r;
            top = if ins.mode & BINARY != 0 { b } else { a };
        } else {
            top = r;
        }
    }
    top
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::init::TreeSpec;
    use crate::program::tree::Node;

    fn nodes(ns: &[Node]) -> (Vec<u8>, Vec<f32>, Vec<u8>) {
        (ns.iter().map(|n| n.op as u8).collect(), ns.iter().map(|n| n.value).collect(), ns.iter().map(|n| n.out).collect())
    }

    #[test]
    fn leaves_fold_into_their_parents() {
        // (x0 + 2) * sin(x1): three instructions, no leaf of its own, one push for the
        // waiting product operand.
        let t = [Node::func(Op::Mul), Node::func(Op::Add), Node::var(0), Node::constant(2.0), Node::func(Op::Sin), Node::var(1)];
        let (op, value, out) = nodes(&t);
        let mut prog = Vec::new();
        assert_eq!(compile(&op, &value, &out, &mut prog), Some(3));
        assert_eq!((prog[0].op, prog[0].mode), (Op::Sin as u8, src::VAR | (src::CONST << 2)));
        assert_eq!((prog[1].op, prog[1].mode), (Op::Add as u8, src::VAR | (src::CONST << 2) | BINARY | PUSH));
        assert_eq!((prog[1].a, f32::from_bits(prog[1].b)), (0, 2.0));
        assert_eq!((prog[2].op, prog[2].mode), (Op::Mul as u8, src::TOP | (src::STACK << 2) | BINARY));
        let x = [1.5f32, 0.25];
        let got = run(&prog, |i| x[i], &mut [], &mut Vec::new());
        assert_eq!(got.to_bits(), ((1.5f32 + 2.0) * 0.25f32.sin()).to_bits());
    }

    #[test]
    fn a_lone_leaf_and_output_leaves_stay_instructions() {
        let (op, value, out) = nodes(&[Node::constant(3.0)]);
        let mut prog = Vec::new();
        assert_eq!(compile(&op, &value, &out, &mut prog), Some(1));
        assert_eq!(run(&prog, |_| 0.0, &mut [], &mut Vec::new()), 3.0);
        // out(0, x0) + out(1, 4): the leaves are output nodes; the sum passes their values up.
        let mut t = [Node::func(Op::Add), Node::var(0), Node::constant(4.0)];
        t[1].out = 1;
        t[2].out = 2;
        let (op, value, out) = nodes(&t);
        assert_eq!(compile(&op, &value, &out, &mut prog), Some(3));
        let mut slots = [0.0; 2];
        assert_eq!(run(&prog, |_| 5.0, &mut slots, &mut Vec::new()), 9.0);
        assert_eq!(slots, [5.0, 4.0]);
    }

    #[test]
    fn a_long_chain_compiles_and_runs() {
        // x + (x + (... + x)) written as a left-deep chain in prefix order: n adds, then n + 1
        // leaves, all pending at once when walked backwards. Regression: the first device
        // compiler refused a chain holding exactly 512 values (its bound came before a pop).
        let n = 700;
        let mut op = vec![Op::Add as u8; n];
        op.extend(std::iter::repeat_n(Op::Var as u8, n + 1));
        let (value, out) = (vec![0.0f32; 2 * n + 1], vec![0u8; 2 * n + 1]);
        let mut prog = Vec::new();
        assert_eq!(compile(&op, &value, &out, &mut prog), Some(n));
        assert_eq!(run(&prog, |_| 1.0, &mut [], &mut Vec::new()), (n + 1) as f32);
    }

    #[test]
    fn malformed_trees_are_refused_not_miscompiled() {
        let mut prog = vec![Instr::default(); 3];
        assert_eq!(compile(&[], &[], &[], &mut prog), Some(0));
        assert!(prog.is_empty());
        // Two trees side by side; a function short of children; an unknown opcode.
        let (op, value, out) = nodes(&[Node::var(0), Node::var(1)]);
        assert_eq!(compile(&op, &value, &out, &mut prog), None);
        assert_eq!(compile(&[Op::Add as u8, 0], &[0.0, 0.0], &[0, 0], &mut prog), None);
        assert_eq!(compile(&[200, 0], &[0.0, 0.0], &[0, 0], &mut prog), None);
    }

    #[test]
    fn compiled_programs_give_the_interpreters_bits() {
        // Random trees of every function, with and without output nodes, against the tree
        // interpreter at every point, bit for bit.
        let functions: Vec<Op> = crate::program::ops::FUNCTIONS.to_vec();
        let n_rows = 24;
        let x: Vec<f32> = (0..3 * n_rows).map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.173).collect();
        for n_out in [0usize, 3] {
            let spec = TreeSpec::new(functions.clone(), 3, 96).with_outputs(n_out, 0.2).with_depth(2, 7);
            let pop = crate::program::init::init_population(&spec, 200, 11 + n_out as u64).unwrap();
            let mut prog = Vec::new();
            for t in 0..pop.size() {
                let tree = pop.tree(t);
                let n = compile_tree(tree, &mut prog).expect("a valid tree compiles");
                assert!(n <= tree.op.len() && n >= 1);
                let want = super::super::eval::predict(&pop, t, &x, n_rows).unwrap();
                for row in 0..n_rows {
                    let mut slots = vec![0.0f32; n_out];
                    let root = run(&prog, |i| x[i * n_rows + row], &mut slots, &mut Vec::new());
                    let got = if n_out == 0 { vec![root] } else { slots };
                    for (k, g) in got.iter().enumerate() {
                        let w = want[k * n_rows + row];
                        assert_eq!(g.to_bits(), w.to_bits(), "tree {t}, output {k}, row {row}: compiled {g}, interpreted {w}");
                    }
                }
            }
        }
    }
}
