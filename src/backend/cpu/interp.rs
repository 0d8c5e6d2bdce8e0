//! The CPU's one interpreter, twin of `kernels/interp.cuh` (the one the GPU kernels share):
//! trees compiled to linear programs, run one point at a time ([`run`]: control policies) or a
//! block of points at a time ([`block`]: regression, prediction, classification).
//!
//! A tree (prefix order, [`crate::program::tree`]) becomes one instruction per function node,
//! in the order the tree is walked backwards (postfix), with the operand kinds resolved once
//! per program (Chitty's linear form): a leaf that is neither an output node nor the root is
//! folded into its parent as an operand, so it costs the interpreter no dispatch and no stack
//! traffic. Output leaves and a lone root leaf stay instructions of their own. The CPU's own
//! programs ([`Program`]) fold constant subtrees first ([`fold_constants`]), bit for bit; the
//! device's twin ([`compile`], [`compile_trees`]) keeps them, as `interp.cuh` does. [`run`] executes
//! a program with the tree's semantics, operation for operation; the tests hold it and the
//! block executor to the tree walked node by node, and `tests/interp.rs` holds the device
//! compiler (`grove_compile_trees`) to [`compile_trees`].

pub mod block;

use super::error::EvalError;
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
    /// The linear form ([`compile`]) of the tree with its constant subtrees folded.
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
        let compiled = if has_constant_subtree(tree) {
            let (op, value, out) = fold_constants(tree);
            compile(&op, &value, &out, &mut code)
        } else {
            compile_tree(tree, &mut code)
        };
        compiled.ok_or_else(|| EvalError::Malformed { tree: tree_index, reason: "not one tree".into() })?;
        let depth = depth(&code);
        let mut vars: Vec<u32> = (0..tree.len()).filter(|&i| tree.op[i] == Op::Var as u8).map(|i| tree.value[i] as u32).collect();
        vars.sort_unstable();
        vars.dedup();
        Ok(Program { code, n_outputs, depth, vars })
    }
}

/// Values live at once at most when `code` runs (the newest included).
fn depth(code: &[Instr]) -> usize {
    let (mut d, mut depth) = (0usize, 1usize);
    for ins in code {
        if ins.mode & PUSH != 0 {
            d += 1;
            depth = depth.max(d + 1);
        }
        if (ins.mode >> 2) & 3 == src::STACK && ins.mode & BINARY != 0 {
            d -= 1;
        }
    }
    depth
}

/// Whether a checked tree has a subtree for [`fold_constants`] to fold: then it has a function
/// node whose children are all constant leaves, none of them (nor the node) an output node.
fn has_constant_subtree(tree: TreeRef<'_>) -> bool {
    let plain_const = |c: usize| tree.op[c] == Op::Const as u8 && tree.out[c] == 0;
    (0..tree.len()).any(|i| {
        let arity = Op::from_code(tree.op[i]).map_or(0, Op::arity);
        // A first child that is a leaf has one node, so the second starts at i + 2.
        arity > 0 && tree.out[i] == 0 && plain_const(i + 1) && (arity == 1 || plain_const(i + 2))
    })
}

/// A checked tree with its constant subtrees folded (the nodes' `op`, `value` and `out`, prefix
/// order): every largest subtree of functions and constants that holds no output node becomes
/// one constant, its value computed now with [`apply_fast`] in the tree's order, the operation
/// the interpreters would run at every point, so the bits (NaN and infinities included) are
/// theirs. An output node and the subtrees above it stay, so each output still gets its value.
/// The CPU's programs only: the device compilers (and [`compile`], their twin) fold leaves alone.
fn fold_constants(tree: TreeRef<'_>) -> (Vec<u8>, Vec<f32>, Vec<u8>) {
    let len = tree.len();
    // Walked backwards: each node's value when its subtree is constant, and its subtree's size.
    let mut konst: Vec<Option<f32>> = vec![None; len];
    let mut size = vec![1usize; len];
    let mut pending: Vec<usize> = Vec::new();
    for i in (0..len).rev() {
        let op = Op::from_code(tree.op[i]).expect("checked");
        let (a, b) = match op.arity() {
            0 => (None, None),
            1 => (pending.pop(), None),
            _ => (pending.pop(), pending.pop()),
        };
        size[i] += a.map_or(0, |c| size[c]) + b.map_or(0, |c| size[c]);
        konst[i] = match (op, tree.out[i]) {
            (_, k) if k != 0 => None,
            (Op::Const, _) => Some(tree.value[i]),
            (Op::Var, _) => None,
            _ => match (a.and_then(|c| konst[c]), b.map(|c| konst[c])) {
                (Some(x), None) => Some(apply_fast(op, x, 0.0)),
                (Some(x), Some(Some(y))) => Some(apply_fast(op, x, y)),
                _ => None,
            },
        };
        pending.push(i);
    }
    let (mut op, mut value, mut out) = (Vec::with_capacity(len), Vec::with_capacity(len), Vec::with_capacity(len));
    let mut i = 0;
    while i < len {
        match konst[i] {
            Some(c) => {
                op.push(Op::Const as u8);
                value.push(c);
                out.push(0);
                i += size[i];
            }
            None => {
                op.push(tree.op[i]);
                value.push(tree.value[i]);
                out.push(tree.out[i]);
                i += 1;
            }
        }
    }
    (op, value, out)
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
            return Err(bad(match n_outputs {
                0 => format!("node {i}: output slot {} in a program with one output (no slots)", k - 1),
                n => format!("node {i}: output slot {} but the program has {n} (0 to {})", k - 1, n - 1),
            }));
        }
        if live < op.arity() {
            return Err(bad(format!("node {i} ({op}) has too few children")));
        }
        if op == Op::Var {
            let v = tree.value[i];
            if !(v >= 0.0 && (v as usize) < n_features && v.fract() == 0.0) {
                return Err(EvalError::Variable { tree: tree_index, node: i, var: v, n_features });
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

    /// `tree`'s program without the folding of constant subtrees (what [`compile`] gives).
    fn unfolded(tree: TreeRef<'_>, n_outputs: usize, n_features: usize) -> Program {
        let folded = Program::new(tree, n_outputs, n_features, 0).expect("a valid tree");
        let mut code = Vec::new();
        compile_tree(tree, &mut code).expect("a valid tree");
        Program { depth: depth(&code), code, ..folded }
    }

    /// `prog`'s root and outputs at `B` points (`x`: `[n_features][B]`), by [`block::run_block`].
    fn block_values<const B: usize>(prog: &Program, x: &[f32]) -> (Vec<f32>, Vec<f32>) {
        use block::{Entry, XBlock, run_block};
        let xb = XBlock::Rows { x, n_rows: B, row0: 0 };
        let (mut stack, mut entries) = (vec![0.0f32; prog.depth * B], vec![Entry::Vec; prog.depth]);
        let mut outs = vec![0.0f32; prog.n_outputs * B];
        let root = match run_block::<B>(prog, &xb, &mut stack, &mut entries, &mut [0.0; B], &mut outs) {
            Entry::Vec => stack[..B].to_vec(),
            Entry::Const(c) => vec![c; B],
            Entry::Var(v) => xb.var::<B>(v).to_vec(),
        };
        (root, outs)
    }

    /// Folded and unfolded programs of `tree` give the same bits at `B` points of `x`
    /// (`[n_features][B]`), run a point at a time and a block at a time. Returns how many
    /// instructions folding saved.
    fn same_bits_folded<const B: usize>(tree: TreeRef<'_>, n_outputs: usize, n_features: usize, x: &[f32]) -> usize {
        let folded = Program::new(tree, n_outputs, n_features, 0).expect("a valid tree");
        let plain = unfolded(tree, n_outputs, n_features);
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<u32>>();
        for row in 0..B {
            let (mut fo, mut po) = (vec![0.0f32; n_outputs], vec![0.0f32; n_outputs]);
            let f = run(&folded.code, |i| x[i * B + row], &mut fo, &mut Vec::new());
            let p = run(&plain.code, |i| x[i * B + row], &mut po, &mut Vec::new());
            assert_eq!((f.to_bits(), bits(&fo)), (p.to_bits(), bits(&po)), "{tree:?}, row {row}: {f} {fo:?} vs {p} {po:?}");
        }
        let (fr, fo) = block_values::<B>(&folded, x);
        let (pr, po) = block_values::<B>(&plain, x);
        assert_eq!((bits(&fr), bits(&fo)), (bits(&pr), bits(&po)), "{tree:?}, block: {fr:?} {fo:?} vs {pr:?} {po:?}");
        assert!(folded.depth <= plain.depth && folded.vars == plain.vars);
        plain.code.len() - folded.code.len()
    }

    fn tree_of(ns: &[Node], n_outputs: usize) -> crate::program::tree::Population {
        let mut pop = crate::program::tree::Population::new(1, ns.len(), n_outputs);
        pop.set_tree(0, ns).unwrap();
        pop
    }

    #[test]
    fn constant_subtrees_fold_to_the_same_bits() {
        let x: Vec<f32> = (0..16).map(|i| (i as f32 - 7.5) * 0.61).collect();
        let c = Node::constant;
        // x0 * slog(-2) + div(1, 0): a NaN and an infinity folded; the sum is NaN at every point.
        let nan = [Node::func(Op::Add), Node::func(Op::Mul), Node::var(0), Node::func(Op::Slog), c(-2.0), Node::func(Op::Div), c(1.0), c(0.0)];
        let pop = tree_of(&nan, 0);
        assert_eq!(same_bits_folded::<8>(pop.tree(0), 0, 2, &x), 2);
        let (root, _) = block_values::<8>(&Program::new(pop.tree(0), 0, 2, 0).unwrap(), &x);
        assert!(root.iter().all(|v| v.is_nan()));
        // A constant tree folds to one constant; sqrt of a negative and plog stay protected.
        let whole = [Node::func(Op::Sub), Node::func(Op::Sqrt), c(-3.0), Node::func(Op::Plog), Node::func(Op::Neg), c(5.0)];
        let pop = tree_of(&whole, 0);
        assert_eq!(Program::new(pop.tree(0), 0, 1, 0).unwrap().code.len(), 1);
        same_bits_folded::<8>(pop.tree(0), 0, 1, &x);
        // out1(exp(out0((2 + 3) * 4) + 5) * x1): 2 + 3 folds into the output node, which adds
        // 20 to slot 0 and passes 4 up; nothing above an output node folds.
        let mut outs = [Node::func(Op::Mul), Node::func(Op::Exp), Node::func(Op::Add), Node::func(Op::Mul), Node::func(Op::Add)];
        outs[3].out = 1;
        outs[0].out = 2;
        let outs = [&outs[..], &[c(2.0), c(3.0), c(4.0), c(5.0), Node::var(1)]].concat();
        let pop = tree_of(&outs, 2);
        assert_eq!(same_bits_folded::<8>(pop.tree(0), 2, 2, &x), 1);
        let prog = Program::new(pop.tree(0), 2, 2, 0).unwrap();
        assert_eq!(prog.code.len(), 4);
        let (_, o) = block_values::<8>(&prog, &x);
        assert_eq!(o[..8], [20.0f32; 8]);
        // An output leaf inside a constant subtree: nothing above it folds.
        let mut leaf = [Node::func(Op::Sin), Node::func(Op::Add), c(1.0), c(0.5)];
        leaf[3].out = 1;
        let pop = tree_of(&leaf, 1);
        assert_eq!(same_bits_folded::<8>(pop.tree(0), 1, 1, &x), 0);
    }

    #[test]
    fn random_constant_heavy_trees_fold_to_the_same_bits() {
        // Mostly constant leaves, zero among them (protected operators, NaN and infinities),
        // every function, with and without output nodes; random data with zeros and large values.
        let functions: Vec<Op> = crate::program::ops::FUNCTIONS.to_vec();
        const B: usize = 16;
        let x: Vec<f32> = (0..3 * B).map(|i| [0.0, -1e30, 7.25, -0.3][i % 4] + ((i * 37 % 101) as f32 - 50.0) * 0.173).collect();
        let mut saved = 0;
        for n_out in [0usize, 3] {
            let spec = TreeSpec::new(functions.clone(), 3, 96)
                .with_constants(&[0.0, -1.0, 2.5, 1e30, -0.0])
                .with_p_const(0.8)
                .with_outputs(n_out, 0.1)
                .with_depth(2, 7);
            let pop = crate::program::init::init_population(&spec, 300, 5 + n_out as u64).unwrap();
            for t in 0..pop.size() {
                let tree = pop.tree(t);
                assert_eq!(has_constant_subtree(tree), fold_constants(tree).0.len() < tree.len(), "tree {t}");
                saved += same_bits_folded::<B>(tree, n_out, 3, &x);
            }
        }
        assert!(saved > 100, "the trees hold constant subtrees ({saved} instructions folded)");
    }

    #[test]
    fn policies_fold_to_the_same_bits() {
        // Control policies run the folded program a point at a time ([`run`]): the same outputs,
        // and the same verdict on non-finite ones, as the unfolded program.
        let functions: Vec<Op> = crate::program::ops::FUNCTIONS.to_vec();
        let spec = TreeSpec::new(functions, 4, 64).with_constants(&[0.0, 1.5, -2.0]).with_p_const(0.7).with_outputs(2, 0.2).with_depth(2, 6);
        let pop = crate::program::init::init_population(&spec, 200, 3).unwrap();
        for t in 0..pop.size() {
            let mut policy = super::super::control::Policy::new(pop.tree(t), 2, 4).expect("a valid policy");
            let plain = unfolded(pop.tree(t), 2, 4);
            for k in 0..6 {
                let obs: Vec<f32> = (0..4).map(|i| ((t * 7 + k * 5 + i * 3) % 11) as f32 * 0.37 - 1.8).collect();
                let mut want = vec![0.0f32; 2];
                run(&plain.code, |v| obs[v], &mut want, &mut Vec::new());
                let valid = want.iter().all(|v| v.is_finite());
                match policy.outputs(&obs) {
                    Some(got) => assert!(valid && got.iter().zip(&want).all(|(g, w)| g.to_bits() == w.to_bits()), "tree {t}"),
                    None => assert!(!valid, "tree {t}: folded invalid, unfolded {want:?}"),
                }
            }
        }
    }
}
