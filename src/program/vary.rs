//! Variation of tensorized trees (the CPU reference of `kernels/vary.cu`): EvoGP's one
//! subtree-exchange primitive ([`exchange`], its section IV-B) and the ten operators of its
//! Table I built on it, plus [`breed`], which makes a whole new population from a mix of them.
//!
//! # Contract shared by every operator
//!
//! * An operator reads its parent(s) as [`TreeRef`]s and writes one child into a [`RowMut`]; it
//!   depends on nothing else, so offspring are independent and can be made in any order.
//! * All randomness comes from the `rng` it is given, which the engine addresses per child:
//!   `Stream::new(seed, generation, child, Purpose::Crossover)` for crossovers and
//!   `Purpose::Mutate` for mutations ([`crossover_stream`], [`mutation_stream`]). Each
//!   function's docs give its draws in order; a CUDA twin makes the same draws.
//! * The result is [`Outcome::Changed`] exactly when the child differs from its parent (the
//!   recipient, for crossovers); otherwise the child is a bitwise copy of the parent and the
//!   outcome says why.
//! * Output slots (multi-output programs): nodes carry their `out` with them when moved. After
//!   a change, every slot the parent had that the child lost (its output nodes were cut away or
//!   replaced) is put back on a random node of the child that is not an output node
//!   ([`init::place_slot`], slots in increasing order); if no such node is left the child is the
//!   parent ([`Outcome::NoRoomForOutputs`]). So a child's slots always include its parent's.
//!   Point mutations keep every node's `out`; insertion adds nodes without outputs.
//! * A child longer than `L` is replaced by its parent ([`Outcome::Oversized`]).
//! * An empty parent (length 0) gives an empty child ([`Outcome::Unchanged`]).
//! * Float arithmetic is written as separate IEEE operations; the CUDA twin must not fuse
//!   multiply-adds (`__fmul_rn`/`__fadd_rn`).

use super::init::{self, Method, TreeSpec};
use super::ops::Op;
use super::tree::{Node, Population, RowMut, TreeRef};
use crate::rng::{Purpose, Stream};
use rayon::prelude::*;

/// What an operator did to its child.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// The child differs from its parent.
    Changed,
    /// The child equals its parent: nothing to change (an empty tree, no eligible node, a
    /// redraw that gave the same symbol, a crossover that swapped equal subtrees).
    Unchanged,
    /// The child would have been longer than `L`; it is a copy of its parent.
    Oversized,
    /// The child lost an output slot and had no node left to carry it; it is a copy of its
    /// parent.
    NoRoomForOutputs,
}

/// Settings of the variation operators.
#[derive(Clone, Debug, PartialEq)]
pub struct VaryConfig {
    /// What new material (subtree and insert mutation, leaf redraws) is made of. Its
    /// `max_len` and `n_outputs` must match the populations varied.
    pub spec: TreeSpec,
    /// Leaf-biased crossover: probability of cutting at a leaf rather than a function node
    /// (Koza's 90/10 rule: 0.1).
    pub p_leaf: f32,
    /// Subtree mutation: the new subtree is `grow`n with functions down to `.0` and a target
    /// depth drawn uniformly from `.0 ..= .1`.
    pub subtree_depth: (u32, u32),
    /// Multi-point mutation: probability that each node is mutated.
    pub p_point: f32,
    /// Constant mutations: standard deviation of the perturbation.
    pub sigma: f32,
    /// Multi-constant mutation: probability that each constant is perturbed.
    pub p_constant: f32,
}

impl VaryConfig {
    /// Defaults around `spec`: `p_leaf` 0.1, subtree depth 0..=2 (DEAP's `genGrow(0, 2)`),
    /// `p_point` 0.1, `sigma` 0.1, `p_constant` 0.5.
    pub fn new(spec: TreeSpec) -> Self {
        Self { spec, p_leaf: 0.1, subtree_depth: (0, 2), p_point: 0.1, sigma: 0.1, p_constant: 0.5 }
    }

    /// Checks the settings (and the spec), naming the first problem.
    pub fn check(&self) -> Result<(), String> {
        self.spec.check()?;
        for (name, p) in [("p_leaf", self.p_leaf), ("p_point", self.p_point), ("p_constant", self.p_constant)] {
            if !(0.0..=1.0).contains(&p) {
                return Err(format!("{name} = {p} is not a probability"));
            }
        }
        if !(self.sigma.is_finite() && self.sigma >= 0.0) {
            return Err(format!("sigma = {} must be finite and at least 0", self.sigma));
        }
        let (lo, hi) = self.subtree_depth;
        if lo > hi || hi > u16::MAX as u32 {
            return Err(format!("subtree depths {lo}..={hi} are not a range within 0..=65535"));
        }
        Ok(())
    }
}

/// The stream of crossover choices for child `child` of `generation`.
pub fn crossover_stream(seed: u64, generation: u32, child: usize) -> Stream {
    Stream::new(seed, generation, child as u32, Purpose::Crossover)
}

/// The stream of mutation choices for child `child` of `generation`.
pub fn mutation_stream(seed: u64, generation: u32, child: usize) -> Stream {
    Stream::new(seed, generation, child as u32, Purpose::Mutate)
}

/// The result of [`exchange`] when the child would not fit in its row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooLong {
    /// The length the child would have had.
    pub len: usize,
}

/// The subtree-exchange primitive (EvoGP IV-B): writes into `child` the tree `recipient` with
/// its subtree at node `at` replaced by the whole of `donor` (any valid tree: a subtree of
/// another tree, or new nodes).
///
/// Child = `recipient[..at]` ++ `donor` ++ `recipient[at + size[at]..]`. The sizes of the
/// nodes before `at` whose subtree contains it (`j + size[j] > at`: exactly its ancestors)
/// change by `donor.len() - size[at]`; every other size is copied. Padding is zeroed. If the
/// child would be longer than the row, nothing is written.
///
/// Needs `at < recipient.len()` and a non-empty donor (panics otherwise: a caller's bug).
pub fn exchange(child: &mut RowMut<'_>, recipient: TreeRef<'_>, at: usize, donor: TreeRef<'_>) -> Result<(), TooLong> {
    let n = recipient.len();
    assert!(at < n, "exchange at node {at} of a tree of {n}");
    assert!(!donor.is_empty(), "exchange with an empty donor");
    let (removed, added) = (recipient.size[at] as usize, donor.len());
    let len = n - removed + added;
    if len > child.max_len() {
        return Err(TooLong { len });
    }
    child.op[..at].copy_from_slice(&recipient.op[..at]);
    child.value[..at].copy_from_slice(&recipient.value[..at]);
    child.out[..at].copy_from_slice(&recipient.out[..at]);
    for j in 0..at {
        let s = recipient.size[j] as usize;
        child.size[j] = if j + s > at { (s - removed + added) as u16 } else { s as u16 };
    }
    let mid = at..at + added;
    child.op[mid.clone()].copy_from_slice(donor.op);
    child.value[mid.clone()].copy_from_slice(donor.value);
    child.size[mid.clone()].copy_from_slice(donor.size);
    child.out[mid].copy_from_slice(donor.out);
    let (src, dst) = (at + removed..n, at + added..len);
    child.op[dst.clone()].copy_from_slice(&recipient.op[src.clone()]);
    child.value[dst.clone()].copy_from_slice(&recipient.value[src.clone()]);
    child.size[dst.clone()].copy_from_slice(&recipient.size[src.clone()]);
    child.out[dst].copy_from_slice(&recipient.out[src]);
    child.zero_from(len);
    Ok(())
}

/// A one-row buffer holding `nodes`, for use as an exchange donor.
fn buffer(nodes: &[Node], n_outputs: usize) -> Population {
    let mut buf = Population::new(1, nodes.len(), n_outputs);
    // The nodes come from the generator or from a valid tree, so they form one tree.
    buf.set_tree(0, nodes).expect("new nodes form one tree");
    buf
}

/// Position of the `k`-th node (prefix order) whose opcode satisfies `pred`.
fn nth(op: &[u8], k: usize, pred: impl Fn(Op) -> bool) -> usize {
    let is = |c: &u8| pred(Op::from_code(*c).unwrap_or(Op::Const));
    op.iter().enumerate().filter(|(_, c)| is(c)).nth(k).map_or(0, |(i, _)| i)
}

/// Number of nodes whose opcode satisfies `pred`.
fn count(op: &[u8], pred: impl Fn(Op) -> bool) -> usize {
    op.iter().filter(|c| pred(Op::from_code(**c).unwrap_or(Op::Const))).count()
}

fn is_function(op: Op) -> bool {
    !op.is_leaf()
}

/// Bitwise equality of two trees (opcodes, value bits, sizes, outputs).
fn same(a: TreeRef<'_>, b: TreeRef<'_>) -> bool {
    a.op == b.op
        && a.size == b.size
        && a.out == b.out
        && a.value.iter().zip(b.value).all(|(x, y)| x.to_bits() == y.to_bits())
}

/// The slots (0-based) that have an output node in `out`, as a 256-bit set.
fn slots(out: &[u8]) -> [u64; 4] {
    let mut set = [0u64; 4];
    for &o in out.iter().filter(|&&o| o > 0) {
        let s = o as usize - 1;
        set[s / 64] |= 1 << (s % 64);
    }
    set
}

/// Copies `parent` into `child` and reports `outcome`.
fn keep(parent: TreeRef<'_>, child: &mut RowMut<'_>, outcome: Outcome) -> Outcome {
    child.copy_from(parent);
    outcome
}

/// The common ending: the parent kept if the child did not fit; else every output slot the
/// parent had and the child lost is put back (draws: one `below` per lost slot, in increasing
/// slot order, see [`init::place_slot`]), or the parent kept if there is no room for them;
/// then Unchanged if the child equals the parent (a repaired slot can land where it was).
fn finish(parent: TreeRef<'_>, child: &mut RowMut<'_>, fitted: Result<(), TooLong>, rng: &mut Stream) -> Outcome {
    if fitted.is_err() {
        return keep(parent, child, Outcome::Oversized);
    }
    let (had, has) = (slots(parent.out), slots(child.tree().out));
    let n = *child.len as usize;
    for s in 0..256 {
        let bit = 1u64 << (s % 64);
        if had[s / 64] & bit != 0 && has[s / 64] & bit == 0 && !init::place_slot(&mut child.out[..n], s, rng) {
            return keep(parent, child, Outcome::NoRoomForOutputs);
        }
    }
    if same(parent, child.tree()) { Outcome::Unchanged } else { Outcome::Changed }
}

/// One-point (subtree) crossover: the recipient's subtree at a uniform node `below(len_r)` is
/// replaced by the donor's subtree at a uniform node `below(len_d)`.
pub fn one_point_crossover(recipient: TreeRef<'_>, donor: TreeRef<'_>, child: &mut RowMut<'_>, rng: &mut Stream) -> Outcome {
    if recipient.is_empty() || donor.is_empty() {
        return keep(recipient, child, Outcome::Unchanged);
    }
    let i = rng.below(recipient.len() as u32) as usize;
    let j = rng.below(donor.len() as u32) as usize;
    let fitted = exchange(child, recipient, i, donor.subtree(j));
    finish(recipient, child, fitted, rng)
}

/// A crossover point biased towards (or away from) leaves, as DEAP's `cxOnePointLeafBiased`:
/// `chance(p_leaf)` asks for a leaf, else a function node; a tree without function nodes
/// gives a leaf either way. Then `below(count)` picks uniformly among the nodes of that kind.
fn biased_point(t: TreeRef<'_>, p_leaf: f32, rng: &mut Stream) -> usize {
    let want_leaf = rng.chance(p_leaf);
    let functions = count(t.op, is_function);
    let leaf = want_leaf || functions == 0;
    let k = rng.below(if leaf { (t.len() - functions) as u32 } else { functions as u32 }) as usize;
    nth(t.op, k, |op| op.is_leaf() == leaf)
}

/// Leaf-biased one-point crossover: as [`one_point_crossover`], but each crossover point is a
/// leaf with probability `cfg.p_leaf` and a function node otherwise (falling back to a leaf in
/// a tree of one node). Draws: the recipient's point, then the donor's (each `chance`, `below`).
pub fn leaf_biased_crossover(recipient: TreeRef<'_>, donor: TreeRef<'_>, child: &mut RowMut<'_>, rng: &mut Stream, cfg: &VaryConfig) -> Outcome {
    if recipient.is_empty() || donor.is_empty() {
        return keep(recipient, child, Outcome::Unchanged);
    }
    let i = biased_point(recipient, cfg.p_leaf, rng);
    let j = biased_point(donor, cfg.p_leaf, rng);
    let fitted = exchange(child, recipient, i, donor.subtree(j));
    finish(recipient, child, fitted, rng)
}

/// Subtree mutation: the subtree at a uniform node `i = below(len)` is replaced by a new tree
/// ([`init::random_tree`], `grow`, functions down to `cfg.subtree_depth.0`, target depth
/// `.0 + below(.1 - .0 + 1)`), then [`init::extra_outputs`] for multi-output programs. The new
/// tree is generated within the room the row has left (`L - len + size[i]` nodes), so this
/// operator never makes an oversized child.
pub fn subtree_mutation(parent: TreeRef<'_>, child: &mut RowMut<'_>, rng: &mut Stream, cfg: &VaryConfig) -> Outcome {
    if parent.is_empty() {
        return keep(parent, child, Outcome::Unchanged);
    }
    let i = rng.below(parent.len() as u32) as usize;
    let (lo, hi) = cfg.subtree_depth;
    let depth = lo + rng.below(hi - lo + 1);
    let room = (child.max_len() + parent.size[i] as usize).saturating_sub(parent.len());
    let mut nodes = Vec::new();
    init::random_tree(&cfg.spec, Method::Grow, lo, depth, room.max(1), rng, &mut nodes);
    init::extra_outputs(&cfg.spec, &mut nodes, rng);
    let new = buffer(&nodes, cfg.spec.n_outputs);
    let fitted = exchange(child, parent, i, new.tree(0));
    finish(parent, child, fitted, rng)
}

/// Hoist mutation, in EvoGP's and gplearn's general form: a subtree is replaced by one of its
/// own proper subtrees. Node `i` is a uniform function node (`below(#functions)`), node `j` a
/// uniform proper descendant of it (`i + 1 + below(size[i] - 1)`). With `i` the root the child
/// is a subtree of the parent. The child is always shorter; a tree without function nodes is
/// unchanged.
pub fn hoist_mutation(parent: TreeRef<'_>, child: &mut RowMut<'_>, rng: &mut Stream) -> Outcome {
    let functions = count(parent.op, is_function);
    if functions == 0 {
        return keep(parent, child, Outcome::Unchanged);
    }
    let i = nth(parent.op, rng.below(functions as u32) as usize, is_function);
    let j = i + 1 + rng.below(parent.size[i] as u32 - 1) as usize;
    let fitted = exchange(child, parent, i, parent.subtree(j));
    finish(parent, child, fitted, rng)
}

/// Single-point mutation of node `i` of `row` (in place). A function becomes another function
/// of the same arity from the spec (`below(#others)` over the spec's functions of that arity
/// other than its own, in spec order); a leaf becomes a new leaf ([`TreeSpec::random_leaf`]),
/// redrawn up to 4 times in all until it differs bitwise from the old one. The node's `out`
/// is kept. False (the node unchanged) if there is no alternative or every redraw matched.
fn mutate_node(row: &mut RowMut<'_>, i: usize, rng: &mut Stream, spec: &TreeSpec) -> bool {
    let op = Op::from_code(row.op[i]).unwrap_or(Op::Const);
    if op.is_leaf() {
        for _ in 0..4 {
            let leaf = spec.random_leaf(rng);
            if leaf.op != op || leaf.value.to_bits() != row.value[i].to_bits() {
                row.op[i] = leaf.op as u8;
                row.value[i] = leaf.value;
                return true;
            }
        }
        return false;
    }
    let others = || spec.functions.iter().filter(move |f| f.arity() == op.arity() && **f != op);
    let n = others().count();
    if n == 0 {
        return false;
    }
    let k = rng.below(n as u32) as usize;
    row.op[i] = others().nth(k).map_or(op, |f| *f) as u8;
    true
}

/// Single-point mutation: node `below(len)` changes symbol, keeping its arity (see the rules
/// of the node mutation: a function to another function of the same arity, a leaf to another
/// leaf). Shape, sizes and outputs are untouched.
pub fn point_mutation(parent: TreeRef<'_>, child: &mut RowMut<'_>, rng: &mut Stream, cfg: &VaryConfig) -> Outcome {
    child.copy_from(parent);
    if parent.is_empty() {
        return Outcome::Unchanged;
    }
    let i = rng.below(parent.len() as u32) as usize;
    mutate_node(child, i, rng, &cfg.spec);
    finish(parent, child, Ok(()), rng)
}

/// Multi-point mutation: each node, in prefix order, is mutated independently with
/// probability `cfg.p_point` (`chance`, then the single-point rules). Unlike EvoGP's, which
/// changes all nodes or none, the expected number changed is about `p_point · len`.
pub fn multi_point_mutation(parent: TreeRef<'_>, child: &mut RowMut<'_>, rng: &mut Stream, cfg: &VaryConfig) -> Outcome {
    child.copy_from(parent);
    for i in 0..parent.len() {
        if rng.chance(cfg.p_point) {
            mutate_node(child, i, rng, &cfg.spec);
        }
    }
    finish(parent, child, Ok(()), rng)
}

/// Insert mutation (DEAP's `mutInsert`): a new function node goes above a uniform node
/// `i = below(len)`. Draws: `i`, the function `functions[below(|F|)]`, the position
/// `below(arity)` of the old subtree among its children; if the child fits in `L`, its other
/// children are new leaves ([`TreeSpec::random_leaf`], in order). New nodes are not output
/// nodes. The child is `arity` nodes longer; an empty function set leaves the tree unchanged.
pub fn insert_mutation(parent: TreeRef<'_>, child: &mut RowMut<'_>, rng: &mut Stream, cfg: &VaryConfig) -> Outcome {
    let fs = &cfg.spec.functions;
    if parent.is_empty() || fs.is_empty() {
        return keep(parent, child, Outcome::Unchanged);
    }
    let i = rng.below(parent.len() as u32) as usize;
    let f = fs[rng.below(fs.len() as u32) as usize];
    let pos = rng.below(f.arity() as u32) as usize;
    if parent.len() + f.arity() > child.max_len() {
        return keep(parent, child, Outcome::Oversized);
    }
    let mut nodes = vec![Node::func(f)];
    for c in 0..f.arity() {
        if c == pos {
            nodes.extend(parent.subtree(i).nodes());
        } else {
            nodes.push(cfg.spec.random_leaf(rng));
        }
    }
    let new = buffer(&nodes, cfg.spec.n_outputs);
    let fitted = exchange(child, parent, i, new.tree(0));
    finish(parent, child, fitted, rng)
}

/// Delete mutation (DEAP's `mutShrink`): a uniform function node `below(#functions)` is
/// replaced by one of its children `below(arity)`; the other children go with it. The child is
/// always shorter. A tree without function nodes (a lone leaf, or an empty tree) is unchanged:
/// EvoGP's version hits a device-side assert there.
pub fn delete_mutation(parent: TreeRef<'_>, child: &mut RowMut<'_>, rng: &mut Stream) -> Outcome {
    let functions = count(parent.op, is_function);
    if functions == 0 {
        return keep(parent, child, Outcome::Unchanged);
    }
    let i = nth(parent.op, rng.below(functions as u32) as usize, is_function);
    let arity = Op::from_code(parent.op[i]).map_or(1, Op::arity);
    let mut j = i + 1;
    for _ in 0..rng.below(arity as u32) {
        j += parent.size[j] as usize;
    }
    let fitted = exchange(child, parent, i, parent.subtree(j));
    finish(parent, child, fitted, rng)
}

/// A standard normal deviate without transcendental functions, so that CPU and GPU agree
/// bitwise: Irwin–Hall, the sum of 12 uniforms minus 6 (mean 0, variance 1, within ±6).
/// Draws: 12 × `next_u32`; the integer sum of their top 24 bits is converted once to f32.
pub fn normal(rng: &mut Stream) -> f32 {
    let sum: u32 = (0..12).map(|_| rng.next_u32() >> 8).sum();
    sum as f32 * (1.0 / 16_777_216.0) - 6.0
}

/// Perturbs constant `c` to `c + sigma · normal()`, keeping `c` if that is not finite.
fn perturb(c: f32, rng: &mut Stream, sigma: f32) -> f32 {
    let v = c + sigma * normal(rng);
    if v.is_finite() { v } else { c }
}

fn is_const(op: Op) -> bool {
    op == Op::Const
}

/// Single-constant mutation: a uniform constant leaf (`below(#constants)`) becomes
/// `c + N(0, sigma)` ([`normal`]). Only that value changes; a tree without constants is
/// unchanged.
pub fn constant_mutation(parent: TreeRef<'_>, child: &mut RowMut<'_>, rng: &mut Stream, cfg: &VaryConfig) -> Outcome {
    child.copy_from(parent);
    let n = count(parent.op, is_const);
    if n == 0 {
        return Outcome::Unchanged;
    }
    let i = nth(parent.op, rng.below(n as u32) as usize, is_const);
    child.value[i] = perturb(parent.value[i], rng, cfg.sigma);
    finish(parent, child, Ok(()), rng)
}

/// Multi-constant mutation: each constant leaf, in prefix order, is perturbed independently
/// with probability `cfg.p_constant` (`chance`, then as [`constant_mutation`]).
pub fn multi_constant_mutation(parent: TreeRef<'_>, child: &mut RowMut<'_>, rng: &mut Stream, cfg: &VaryConfig) -> Outcome {
    child.copy_from(parent);
    for i in 0..parent.len() {
        if parent.op[i] == Op::Const as u8 && rng.chance(cfg.p_constant) {
            child.value[i] = perturb(parent.value[i], rng, cfg.sigma);
        }
    }
    finish(parent, child, Ok(()), rng)
}

/// The crossovers of EvoGP's Table I.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Crossover {
    /// [`one_point_crossover`].
    OnePoint,
    /// [`leaf_biased_crossover`].
    LeafBiased,
}

impl Crossover {
    /// Every crossover.
    pub const ALL: [Crossover; 2] = [Crossover::OnePoint, Crossover::LeafBiased];

    /// Applies this crossover.
    pub fn apply(self, recipient: TreeRef<'_>, donor: TreeRef<'_>, child: &mut RowMut<'_>, rng: &mut Stream, cfg: &VaryConfig) -> Outcome {
        match self {
            Crossover::OnePoint => one_point_crossover(recipient, donor, child, rng),
            Crossover::LeafBiased => leaf_biased_crossover(recipient, donor, child, rng, cfg),
        }
    }
}

/// The mutations of EvoGP's Table I.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mutation {
    /// [`subtree_mutation`].
    Subtree,
    /// [`hoist_mutation`].
    Hoist,
    /// [`point_mutation`].
    Point,
    /// [`multi_point_mutation`].
    MultiPoint,
    /// [`insert_mutation`].
    Insert,
    /// [`delete_mutation`].
    Delete,
    /// [`constant_mutation`].
    Constant,
    /// [`multi_constant_mutation`].
    MultiConstant,
}

impl Mutation {
    /// Every mutation.
    pub const ALL: [Mutation; 8] = [
        Mutation::Subtree,
        Mutation::Hoist,
        Mutation::Point,
        Mutation::MultiPoint,
        Mutation::Insert,
        Mutation::Delete,
        Mutation::Constant,
        Mutation::MultiConstant,
    ];

    /// Applies this mutation.
    pub fn apply(self, parent: TreeRef<'_>, child: &mut RowMut<'_>, rng: &mut Stream, cfg: &VaryConfig) -> Outcome {
        match self {
            Mutation::Subtree => subtree_mutation(parent, child, rng, cfg),
            Mutation::Hoist => hoist_mutation(parent, child, rng),
            Mutation::Point => point_mutation(parent, child, rng, cfg),
            Mutation::MultiPoint => multi_point_mutation(parent, child, rng, cfg),
            Mutation::Insert => insert_mutation(parent, child, rng, cfg),
            Mutation::Delete => delete_mutation(parent, child, rng),
            Mutation::Constant => constant_mutation(parent, child, rng, cfg),
            Mutation::MultiConstant => multi_constant_mutation(parent, child, rng, cfg),
        }
    }
}

/// Any one of the ten operators (for code that applies one chosen at run time, such as the
/// GPU's per-operator kernel and its parity tests).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operator {
    /// A crossover: recipient and donor.
    Crossover(Crossover),
    /// A mutation of one parent.
    Mutation(Mutation),
}

impl Operator {
    /// Every operator: the crossovers, then the mutations.
    pub const ALL: [Operator; 10] = [
        Operator::Crossover(Crossover::OnePoint),
        Operator::Crossover(Crossover::LeafBiased),
        Operator::Mutation(Mutation::Subtree),
        Operator::Mutation(Mutation::Hoist),
        Operator::Mutation(Mutation::Point),
        Operator::Mutation(Mutation::MultiPoint),
        Operator::Mutation(Mutation::Insert),
        Operator::Mutation(Mutation::Delete),
        Operator::Mutation(Mutation::Constant),
        Operator::Mutation(Mutation::MultiConstant),
    ];

    /// Makes child `k` of `generation` from `a` (and donor `b` for a crossover), on child
    /// `k`'s crossover or mutation stream ([`crossover_stream`], [`mutation_stream`]).
    #[allow(clippy::too_many_arguments)]
    pub fn apply(self, a: TreeRef<'_>, b: TreeRef<'_>, child: &mut RowMut<'_>, seed: u64, generation: u32, k: usize, cfg: &VaryConfig) -> Outcome {
        match self {
            Operator::Crossover(x) => x.apply(a, b, child, &mut crossover_stream(seed, generation, k), cfg),
            Operator::Mutation(m) => m.apply(a, child, &mut mutation_stream(seed, generation, k), cfg),
        }
    }
}

/// How [`breed`] mixes the operators (EvoGP's Algorithm 1: crossover, then mutation).
#[derive(Clone, Debug, PartialEq)]
pub struct BreedConfig {
    /// Probability that a child is made by crossover (else it starts as a copy of its first
    /// parent).
    pub p_crossover: f32,
    /// Crossovers and their relative weights.
    pub crossovers: Vec<(Crossover, f32)>,
    /// Probability that a child is then mutated.
    pub p_mutation: f32,
    /// Mutations and their relative weights.
    pub mutations: Vec<(Mutation, f32)>,
}

impl BreedConfig {
    /// Checks probabilities and weights, naming the first problem.
    pub fn check(&self) -> Result<(), String> {
        for (name, p) in [("p_crossover", self.p_crossover), ("p_mutation", self.p_mutation)] {
            if !(0.0..=1.0).contains(&p) {
                return Err(format!("{name} = {p} is not a probability"));
            }
        }
        let crossovers: Vec<f32> = self.crossovers.iter().map(|c| c.1).collect();
        let mutations: Vec<f32> = self.mutations.iter().map(|m| m.1).collect();
        for (name, p, w) in [("crossover", self.p_crossover, &crossovers), ("mutation", self.p_mutation, &mutations)] {
            if let Some(x) = w.iter().find(|x| !(x.is_finite() && **x >= 0.0)) {
                return Err(format!("{name} weight {x} must be finite and at least 0"));
            }
            if p > 0.0 && w.iter().sum::<f32>() <= 0.0 {
                return Err(format!("p_{name} is {p} but no {name} has a positive weight"));
            }
        }
        Ok(())
    }
}

/// Cumulative weights, normalised to end at 1 (computed once; the GPU gets the same table).
pub fn cumulative(weights: impl Iterator<Item = f32>) -> Vec<f32> {
    let mut acc = 0.0f32;
    let mut cum: Vec<f32> = weights.map(|w| { acc += w; acc }).collect();
    for c in &mut cum {
        *c /= acc;
    }
    cum
}

/// The first entry whose cumulative weight exceeds `u` (`u` in `[0, 1)`). A zero-weight entry
/// never does (its cumulative weight equals the one before it); the table ends at exactly 1.
fn pick(cum: &[f32], u: f32) -> usize {
    cum.iter().position(|&c| u < c).unwrap_or(cum.len() - 1)
}

/// What [`breed`] did to one child.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bred {
    /// The crossover applied and its outcome, if any.
    pub crossover: Option<(Crossover, Outcome)>,
    /// The mutation applied and its outcome, if any.
    pub mutation: Option<(Mutation, Outcome)>,
}

/// Makes child `k` of `out` from parents `pairs[k] = [a, b]` of `parents`, for every `k`,
/// rayon-parallel; the result does not depend on the thread count.
///
/// Child `k`'s crossover stream ([`crossover_stream`]) draws `chance(p_crossover)` and, if it
/// crosses, one `unit_f32` to pick the crossover by weight; the crossover (recipient `a`,
/// donor `b`) continues on that stream. Its mutation stream ([`mutation_stream`]) likewise
/// draws `chance(p_mutation)`, one `unit_f32` for the mutation, then the mutation's draws,
/// applied to the crossover's child (or to `a`). A child neither crossed nor mutated is a copy
/// of `a`. Returns what happened to each child, in order.
pub fn breed(parents: &Population, pairs: &[[u32; 2]], out: &mut Population, seed: u64, generation: u32, vary: &VaryConfig, mix: &BreedConfig) -> Result<Vec<Bred>, String> {
    vary.check()?;
    mix.check()?;
    let (l, k) = (parents.max_len, parents.n_outputs);
    if (out.max_len, out.n_outputs, vary.spec.max_len, vary.spec.n_outputs) != (l, k, l, k) {
        return Err(format!(
            "parents have L = {l} and {k} outputs, children L = {} and {}, the spec L = {} and {}",
            out.max_len, out.n_outputs, vary.spec.max_len, vary.spec.n_outputs
        ));
    }
    if out.size() != pairs.len() {
        return Err(format!("{} pairs of parents for {} children", pairs.len(), out.size()));
    }
    if let Some(p) = pairs.iter().flatten().find(|&&p| p as usize >= parents.size()) {
        return Err(format!("parent {p} of a population of {}", parents.size()));
    }
    let cum_x = cumulative(mix.crossovers.iter().map(|c| c.1));
    let cum_m = cumulative(mix.mutations.iter().map(|m| m.1));
    let bred = out
        .rows_mut()
        .into_par_iter()
        .zip(pairs.par_iter())
        .enumerate()
        .map_init(
            || Population::new(1, l, k),
            |scratch, (i, (mut row, &[a, b]))| {
                let mut xs = crossover_stream(seed, generation, i);
                let mut ms = mutation_stream(seed, generation, i);
                let x = xs.chance(mix.p_crossover).then(|| mix.crossovers[pick(&cum_x, xs.unit_f32())].0);
                let m = ms.chance(mix.p_mutation).then(|| mix.mutations[pick(&cum_m, ms.unit_f32())].0);
                let (pa, pb) = (parents.tree(a as usize), parents.tree(b as usize));
                match (x, m) {
                    (None, None) => {
                        row.copy_from(pa);
                        Bred { crossover: None, mutation: None }
                    }
                    (Some(x), None) => Bred { crossover: Some((x, x.apply(pa, pb, &mut row, &mut xs, vary))), mutation: None },
                    (None, Some(m)) => Bred { crossover: None, mutation: Some((m, m.apply(pa, &mut row, &mut ms, vary))) },
                    (Some(x), Some(m)) => {
                        let xo = x.apply(pa, pb, &mut scratch.row_mut(0), &mut xs, vary);
                        let mo = m.apply(scratch.tree(0), &mut row, &mut ms, vary);
                        Bred { crossover: Some((x, xo)), mutation: Some((m, mo)) }
                    }
                }
            },
        )
        .collect();
    Ok(bred)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exchange_matches_evogp_worked_example() {
        // [+, x0, *, x1, 2] with the `*` subtree (node 2) replaced by [sin, x2].
        let mut rec = Population::new(1, 8, 0);
        rec.set_tree(0, &[Node::func(Op::Add), Node::var(0), Node::func(Op::Mul), Node::var(1), Node::constant(2.0)]).unwrap();
        let don = buffer(&[Node::func(Op::Sin), Node::var(2)], 0);
        let mut out = Population::new(1, 8, 0);
        exchange(&mut out.row_mut(0), rec.tree(0), 2, don.tree(0)).unwrap();
        out.validate().unwrap();
        assert_eq!(out.tree(0).op, [Op::Add as u8, Op::Var as u8, Op::Sin as u8, Op::Var as u8]);
        assert_eq!(out.tree(0).size, [4, 1, 2, 1]);
        assert_eq!(out.tree(0).value, [0.0, 0.0, 0.0, 2.0]);
        let mut small = Population::new(1, 3, 0);
        assert_eq!(exchange(&mut small.row_mut(0), rec.tree(0), 1, rec.tree(0)), Err(TooLong { len: 9 }));
        assert_eq!(small.len[0], 0);
    }

    #[test]
    fn normal_has_mean_zero_and_unit_variance() {
        let mut rng = Stream::new(3, 0, 0, Purpose::Bench);
        let xs: Vec<f64> = (0..20_000).map(|_| normal(&mut rng) as f64).collect();
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / xs.len() as f64;
        assert!(mean.abs() < 0.03 && (var - 1.0).abs() < 0.05, "mean {mean}, variance {var}");
    }

    #[test]
    fn pick_follows_weights_and_skips_zero_weights() {
        let cum = cumulative([0.0, 1.0, 0.0, 3.0, 0.0].into_iter());
        assert_eq!(cum, [0.0, 0.25, 0.25, 1.0, 1.0]);
        assert_eq!(pick(&cum, 0.0), 1);
        assert_eq!(pick(&cum, 0.2499), 1);
        assert_eq!(pick(&cum, 0.25), 3);
        assert_eq!(pick(&cum, 0.999_999_9), 3);
    }
}
