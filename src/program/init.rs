//! Random trees for tree GP without a grammar (EvoGP's mode): `grow`, `full` and ramped
//! half-and-half, always within a length budget, with output nodes for multi-output programs.
//! The CPU reference of the tree generator in `kernels/vary.cu`.
//!
//! Every random choice comes from one [`Stream`] and the order of draws is part of the contract
//! (a CUDA twin must make the same draws in the same order); each function spells its order out.
//! Float arithmetic is written as separate IEEE operations (`lo + (hi - lo) * u` is a multiply
//! then an add): the CUDA twin must use `__fmul_rn`/`__fadd_rn` (or `--fmad=false`) so that no
//! multiply-add is fused.
//!
//! Depth: the root has depth 0 and a tree's depth is its deepest node's (a lone leaf: 0), as in
//! DEAP and gplearn.

use super::ops::Op;
use super::tree::{Node, Population};
use crate::rng::{Purpose, Stream};
use rayon::prelude::*;

/// How one tree is generated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// Every leaf at exactly the target depth (Koza's full).
    Full,
    /// Functions down to the minimum depth, then leaves or functions at random, leaves at the
    /// target depth (Koza's grow, with DEAP's minimum depth).
    Grow,
}

/// How a population's trees are generated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum InitMethod {
    /// Grow only; target depths cycle through the depth range by individual.
    Grow,
    /// Full only; target depths cycle through the depth range by individual.
    Full,
    /// Ramped half-and-half: even individuals full, odd grow; individual `i` has target depth
    /// `min + (i / 2) % (max - min + 1)`.
    #[default]
    HalfAndHalf,
}

/// What random trees are made of: functions, leaves, size limits and outputs.
#[derive(Clone, Debug, PartialEq)]
pub struct TreeSpec {
    /// The function set (no `Var`/`Const`); may be empty (trees are then single leaves).
    pub functions: Vec<Op>,
    /// Number of input variables: variable leaves have indices `0 .. n_vars`.
    pub n_vars: u32,
    /// Fixed constants a constant leaf may take (EvoGP's classification uses `{-1, 0, 1}`).
    pub constants: Vec<f32>,
    /// A uniform range `[lo, hi)` a constant leaf may be drawn from. With both fixed constants
    /// (`m` of them) and a range, a constant is `constants[u]` for `u = below(m + 1) < m`, else
    /// drawn from the range: the range counts as one more choice.
    pub const_range: Option<(f32, f32)>,
    /// Probability that a leaf is a constant when both variables and constants exist.
    pub p_const: f32,
    /// Probability that `grow` ends a branch with a leaf above the target depth. `None`:
    /// gplearn's ratio, terminals / (terminals + functions), where terminals counts the
    /// variables, the fixed constants and the range as one.
    pub p_leaf_grow: Option<f32>,
    /// `L`: the longest tree (nodes).
    pub max_len: usize,
    /// 0: single output (the root's value); `k > 0`: `k` output slots (see [`place_outputs`]).
    pub n_outputs: usize,
    /// With `k > 0` outputs: probability that a node not already an output node becomes one
    /// for a random slot, in new trees and in new subtrees made by mutation.
    pub p_out: f32,
    /// Smallest target depth of [`init_population`].
    pub min_depth: u32,
    /// Largest target depth of [`init_population`].
    pub max_depth: u32,
    /// How [`init_population`] makes trees.
    pub method: InitMethod,
}

impl TreeSpec {
    /// A spec with these functions, `n_vars` variables and trees of at most `max_len` nodes;
    /// no constants, one output, ramped half-and-half over depths 2..=6 (gplearn's default).
    pub fn new(functions: Vec<Op>, n_vars: u32, max_len: usize) -> Self {
        Self {
            functions,
            n_vars,
            constants: Vec::new(),
            const_range: None,
            p_const: 0.5,
            p_leaf_grow: None,
            max_len,
            n_outputs: 0,
            p_out: 0.0,
            min_depth: 2,
            max_depth: 6,
            method: InitMethod::HalfAndHalf,
        }
    }
    /// With these fixed constants.
    pub fn with_constants(mut self, constants: &[f32]) -> Self {
        self.constants = constants.to_vec();
        self
    }
    /// With constants drawn uniformly from `[lo, hi)`.
    pub fn with_const_range(mut self, lo: f32, hi: f32) -> Self {
        self.const_range = Some((lo, hi));
        self
    }
    /// With this probability of a constant (vs a variable) leaf.
    pub fn with_p_const(mut self, p: f32) -> Self {
        self.p_const = p;
        self
    }
    /// With `k` output slots (0: single output) and extra output nodes with probability `p_out`.
    pub fn with_outputs(mut self, k: usize, p_out: f32) -> Self {
        self.n_outputs = k;
        self.p_out = p_out;
        self
    }
    /// With target depths `min ..= max`.
    pub fn with_depth(mut self, min: u32, max: u32) -> Self {
        self.min_depth = min;
        self.max_depth = max;
        self
    }
    /// With this population method.
    pub fn with_method(mut self, method: InitMethod) -> Self {
        self.method = method;
        self
    }

    /// Checks the spec, naming the first problem.
    pub fn check(&self) -> Result<(), String> {
        if self.max_len == 0 || self.max_len > u16::MAX as usize {
            return Err(format!("max_len {} is not in 1..=65535", self.max_len));
        }
        if self.n_outputs > 254 {
            return Err(format!("{} outputs: at most 254 (slots are stored as u8 slot + 1)", self.n_outputs));
        }
        if let Some(op) = self.functions.iter().find(|o| o.is_leaf()) {
            return Err(format!("`{op}` is a leaf, not a function"));
        }
        if let Some((i, op)) = self.functions.iter().enumerate().find(|(i, o)| self.functions[..*i].contains(o)) {
            return Err(format!("`{op}` is in the function set twice (again at {i})"));
        }
        if self.n_vars > 1 << 24 {
            return Err(format!("{} variables: at most 2^24 (indices are stored as f32)", self.n_vars));
        }
        if let Some(c) = self.constants.iter().find(|c| !c.is_finite()) {
            return Err(format!("constant {c} is not finite"));
        }
        if let Some((lo, hi)) = self.const_range {
            if !(lo.is_finite() && hi.is_finite() && lo <= hi && (hi - lo).is_finite()) {
                return Err(format!("constant range [{lo}, {hi}) is not a finite interval"));
            }
        }
        if self.n_terminals() == 0 {
            return Err("no leaves: give at least one variable or constant".into());
        }
        for (name, p) in [("p_const", Some(self.p_const)), ("p_leaf_grow", self.p_leaf_grow), ("p_out", Some(self.p_out))] {
            if let Some(p) = p.filter(|p| !(0.0..=1.0).contains(p)) {
                return Err(format!("{name} = {p} is not a probability"));
            }
        }
        if self.min_depth > self.max_depth || self.max_depth > u16::MAX as u32 {
            return Err(format!("depths {}..={} are not a range within 0..=65535", self.min_depth, self.max_depth));
        }
        Ok(())
    }

    /// Number of leaf choices: variables, fixed constants, and the range as one.
    pub fn n_terminals(&self) -> usize {
        self.n_vars as usize + self.constants.len() + self.const_range.is_some() as usize
    }

    /// The probability that `grow` ends a branch early (see [`TreeSpec::p_leaf_grow`]).
    pub fn grow_leaf_prob(&self) -> f32 {
        self.p_leaf_grow.unwrap_or_else(|| {
            let t = self.n_terminals() as f32;
            t / (t + self.functions.len() as f32)
        })
    }

    /// A random leaf. Draws: `chance(p_const)` only if both variables and constants exist; then
    /// a variable is `below(n_vars)`; a constant is `below(m)` (fixed only), one `unit_f32`
    /// (range only), or `below(m + 1)` and, if it picked the range, one `unit_f32`.
    pub fn random_leaf(&self, rng: &mut Stream) -> Node {
        let has_const = !self.constants.is_empty() || self.const_range.is_some();
        let constant = match (self.n_vars > 0, has_const) {
            (false, _) => true,
            (true, false) => false,
            (true, true) => rng.chance(self.p_const),
        };
        if !constant {
            return Node::var(rng.below(self.n_vars));
        }
        let m = self.constants.len() as u32;
        let from_range = |rng: &mut Stream, (lo, hi): (f32, f32)| Node::constant(lo + (hi - lo) * rng.unit_f32());
        match self.const_range {
            None => Node::constant(self.constants[rng.below(m) as usize]),
            Some(r) if m == 0 => from_range(rng, r),
            Some(r) => match rng.below(m + 1) {
                u if u < m => Node::constant(self.constants[u as usize]),
                _ => from_range(rng, r),
            },
        }
    }

    /// Individual `i`'s method and target depth under [`TreeSpec::method`] (no randomness).
    pub fn method_for(&self, i: usize) -> (Method, u32) {
        let n = (self.max_depth - self.min_depth) as usize + 1;
        match self.method {
            InitMethod::Grow => (Method::Grow, self.min_depth + (i % n) as u32),
            InitMethod::Full => (Method::Full, self.min_depth + (i % n) as u32),
            InitMethod::HalfAndHalf => {
                let m = if i % 2 == 0 { Method::Full } else { Method::Grow };
                (m, self.min_depth + (i / 2 % n) as u32)
            }
        }
    }
}

/// Writes into `nodes` (prefix order, no output nodes) a random tree of at most `budget` nodes
/// (`budget >= 1`), aiming for `method` at target depth `depth`, functions forced above
/// `min_depth` under `grow`.
///
/// The target depth is first clamped to `budget - 1` (a deeper tree cannot fit). Then
/// attempts run in this order until one fits: `(method, depth)`, then if that was `full`,
/// `(grow, depth)`, then `(grow, depth - 1)`, …, `(grow, 0)`, which is one leaf and always fits.
/// Each attempt uses `min(min_depth, its depth)` and continues the same stream. An attempt is
/// abandoned as soon as the nodes placed plus the child slots still open exceed `budget`.
///
/// Within an attempt, nodes are drawn in prefix order. A node at depth `t` is a leaf if the
/// function set is empty or `t >= depth`, a function if `t < min` or the method is `full`, and
/// otherwise a leaf if `chance(p_leaf)` (grow). A function is `functions[below(|F|)]`; a leaf
/// is [`TreeSpec::random_leaf`].
pub fn random_tree(spec: &TreeSpec, method: Method, min_depth: u32, depth: u32, budget: usize, rng: &mut Stream, nodes: &mut Vec<Node>) {
    assert!(budget >= 1, "a tree needs room for at least one node");
    let (mut m, mut d) = (method, depth.min(budget as u32 - 1));
    let mut pending = Vec::with_capacity(budget + 2);
    while !attempt(spec, m, min_depth.min(d), d, budget, rng, nodes, &mut pending) {
        if m == Method::Full {
            m = Method::Grow;
        } else {
            d -= 1; // depth 0 always fits, so d > 0 here
        }
    }
}

/// One attempt of [`random_tree`]; false if it ran over `budget`.
#[allow(clippy::too_many_arguments)]
fn attempt(spec: &TreeSpec, method: Method, min: u32, depth: u32, budget: usize, rng: &mut Stream, nodes: &mut Vec<Node>, pending: &mut Vec<u32>) -> bool {
    nodes.clear();
    pending.clear();
    pending.push(0); // depths of the child slots still to fill, the next on top
    let p_leaf = spec.grow_leaf_prob();
    let nf = spec.functions.len() as u32;
    while let Some(t) = pending.pop() {
        let leaf = nf == 0 || t >= depth || (method == Method::Grow && t >= min && rng.chance(p_leaf));
        if leaf {
            nodes.push(spec.random_leaf(rng));
        } else {
            let f = spec.functions[rng.below(nf) as usize];
            nodes.push(Node::func(f));
            pending.extend(std::iter::repeat_n(t + 1, f.arity()));
        }
        if nodes.len() + pending.len() > budget {
            return false;
        }
    }
    true
}

/// Puts output slot `slot` on a uniformly random node of `out` (a tree's `out[..len]`) that is
/// not an output node yet: one `below(free)` draw, then the `r`-th free node in prefix order.
/// False (and no draw) if every node is an output node already.
pub fn place_slot(out: &mut [u8], slot: usize, rng: &mut Stream) -> bool {
    let free = out.iter().filter(|&&o| o == 0).count();
    if free == 0 {
        return false;
    }
    let r = rng.below(free as u32) as usize;
    if let Some(o) = out.iter_mut().filter(|o| **o == 0).nth(r) {
        *o = slot as u8 + 1;
    }
    true
}

/// Makes output nodes of a new whole tree, for `k = spec.n_outputs > 0` slots.
///
/// Rule: with `n` nodes, `m = min(n, k)` slots are placed, each on its own node, so every slot
/// appears at least once when `n >= k`. The slots are taken in the order `r, r + 1, … (mod k)`
/// from a random start `r = below(k)` (drawn even when `n >= k`), so a tree too small for all
/// slots serves a random run of them rather than always the first; each goes on a random free
/// node ([`place_slot`]). Then [`extra_outputs`] may add more.
pub fn place_outputs(spec: &TreeSpec, nodes: &mut [Node], rng: &mut Stream) {
    let k = spec.n_outputs;
    if k == 0 || nodes.is_empty() {
        return;
    }
    let mut out: Vec<u8> = nodes.iter().map(|n| n.out).collect();
    let r = rng.below(k as u32) as usize;
    for s in 0..nodes.len().min(k) {
        place_slot(&mut out, (r + s) % k, rng);
    }
    for (n, o) in nodes.iter_mut().zip(out) {
        n.out = o;
    }
    extra_outputs(spec, nodes, rng);
}

/// With `k = spec.n_outputs > 0` and `spec.p_out > 0`: each node, in prefix order, that is not
/// an output node becomes one with probability `p_out` (`chance(p_out)`), for slot `below(k)`.
/// No draws otherwise.
pub fn extra_outputs(spec: &TreeSpec, nodes: &mut [Node], rng: &mut Stream) {
    let k = spec.n_outputs as u32;
    if k == 0 || spec.p_out <= 0.0 {
        return;
    }
    for n in nodes.iter_mut().filter(|n| n.out == 0) {
        if rng.chance(spec.p_out) {
            n.out = rng.below(k) as u8 + 1;
        }
    }
}

/// Individual `i`'s initial tree: [`TreeSpec::method_for`]`(i)`, [`random_tree`] within
/// `max_len`, then [`place_outputs`], all from `Stream::new(seed, 0, i, Purpose::Init)`.
/// The spec must pass [`TreeSpec::check`].
pub fn init_tree(spec: &TreeSpec, i: usize, seed: u64) -> Vec<Node> {
    let mut rng = Stream::new(seed, 0, i as u32, Purpose::Init);
    let (method, depth) = spec.method_for(i);
    let mut nodes = Vec::new();
    random_tree(spec, method, spec.min_depth, depth, spec.max_len, &mut rng, &mut nodes);
    place_outputs(spec, &mut nodes, &mut rng);
    nodes
}

/// A population of `p` random trees ([`init_tree`] for each row; rayon-parallel, the same for
/// any thread count). Fails if the spec does not pass [`TreeSpec::check`].
pub fn init_population(spec: &TreeSpec, p: usize, seed: u64) -> Result<Population, String> {
    spec.check()?;
    let trees: Vec<Vec<Node>> = (0..p).into_par_iter().map(|i| init_tree(spec, i, seed)).collect();
    let mut pop = Population::new(p, spec.max_len, spec.n_outputs);
    for (i, nodes) in trees.iter().enumerate() {
        pop.set_tree(i, nodes).map_err(|e| format!("tree {i}: {e}"))?;
    }
    Ok(pop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::tree::TreeRef;

    fn spec(max_len: usize) -> TreeSpec {
        TreeSpec::new(vec![Op::Add, Op::Sub, Op::Mul, Op::Div, Op::Sin, Op::Cos], 3, max_len)
            .with_constants(&[-1.0, 0.0, 1.0])
            .with_const_range(-5.0, 5.0)
    }

    /// True if every leaf of `t` is at depth `d`.
    fn is_full(t: TreeRef<'_>, d: usize) -> bool {
        let mut pending = vec![0usize];
        t.op.iter().all(|&code| {
            let (depth, arity) = (pending.pop().unwrap(), Op::from_code(code).unwrap().arity());
            pending.extend(std::iter::repeat_n(depth + 1, arity));
            arity > 0 || depth == d
        })
    }

    #[test]
    fn depths_are_within_the_range_and_ramped_half_and_half_mixes_methods() {
        let s = spec(1024).with_depth(2, 5);
        for seed in 0..3 {
            let pop = init_population(&s, 400, seed).unwrap();
            pop.validate().unwrap();
            let mut seen_depth = [false; 6];
            let (mut full, mut grow_not_full) = (0, 0);
            for i in 0..pop.size() {
                let t = pop.tree(i);
                let (method, d) = s.method_for(i);
                let depth = t.depth();
                assert!((2..=5).contains(&depth), "tree {i}: depth {depth}");
                seen_depth[depth] = true;
                match method {
                    Method::Full => {
                        assert_eq!(depth, d as usize, "tree {i}");
                        assert!(is_full(t, depth), "tree {i} is not full");
                        full += 1;
                    }
                    Method::Grow => {
                        assert!(depth <= d as usize, "tree {i}");
                        grow_not_full += !is_full(t, depth) as usize;
                    }
                }
            }
            assert_eq!(full, 200);
            // Grow at target depth 2 = min depth is forced full; of the other 150, most are not.
            assert!(grow_not_full > 75, "grow made only {grow_not_full} irregular trees");
            assert!(seen_depth[2..].iter().all(|&s| s), "{seen_depth:?}");
        }
    }

    #[test]
    fn nothing_exceeds_tiny_max_len() {
        for l in 1..=7 {
            for method in [InitMethod::Grow, InitMethod::Full, InitMethod::HalfAndHalf] {
                let s = spec(l).with_depth(0, 6).with_method(method);
                let pop = init_population(&s, 300, 11).unwrap();
                pop.validate().unwrap();
                for i in 0..pop.size() {
                    assert!((1..=l).contains(&pop.tree(i).len()), "L = {l}, tree {i}");
                }
                if l == 1 {
                    assert!((0..pop.size()).all(|i| Op::from_code(pop.op[i]).unwrap().is_leaf()));
                }
            }
        }
    }

    #[test]
    fn full_falls_back_to_grow_then_shallower() {
        // Full binary trees of depth 6 have 127 nodes: with L = 20 every full attempt fails.
        let s = TreeSpec::new(vec![Op::Add], 1, 20).with_depth(6, 6).with_method(InitMethod::Full);
        let pop = init_population(&s, 200, 5).unwrap();
        pop.validate().unwrap();
        assert!((0..200).all(|i| pop.tree(i).len() <= 20 && pop.tree(i).depth() <= 6));
        assert!((0..200).any(|i| pop.tree(i).len() > 1));
    }

    #[test]
    fn a_depth_far_beyond_the_budget_is_clamped_not_retried_level_by_level() {
        let s = spec(16).with_depth(60_000, 60_000);
        let pop = init_population(&s, 200, 4).unwrap();
        pop.validate().unwrap();
        assert!((0..200).all(|i| pop.tree(i).depth() <= 15));
    }

    #[test]
    fn multi_output_places_every_slot_when_the_tree_is_big_enough() {
        for (k, p_out) in [(3, 0.0), (4, 0.2), (7, 0.0)] {
            let s = spec(64).with_depth(0, 4).with_outputs(k, p_out);
            let pop = init_population(&s, 300, 3).unwrap();
            pop.validate().unwrap();
            for i in 0..pop.size() {
                let t = pop.tree(i);
                let mut count = vec![0; k];
                for &o in t.out.iter().filter(|&&o| o > 0) {
                    count[o as usize - 1] += 1;
                }
                let present = count.iter().filter(|&&c| c > 0).count();
                assert_eq!(present, t.len().min(k), "tree {i} ({} nodes): {count:?}", t.len());
                if p_out == 0.0 {
                    assert!(count.iter().all(|&c| c <= 1), "tree {i}: {count:?}");
                }
            }
        }
    }

    #[test]
    fn init_is_deterministic_and_seeded() {
        let s = spec(64).with_outputs(2, 0.1);
        let a = init_population(&s, 100, 9).unwrap();
        let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        let b = one.install(|| init_population(&s, 100, 9).unwrap());
        assert_eq!(a, b);
        assert_ne!(a, init_population(&s, 100, 10).unwrap());
    }

    #[test]
    fn leaves_follow_the_spec() {
        let s = TreeSpec::new(vec![], 0, 1).with_constants(&[-1.0, 0.0, 1.0]);
        let pop = init_population(&s, 300, 1).unwrap();
        assert!(pop.op.iter().all(|&o| o == Op::Const as u8));
        assert!(pop.value.iter().all(|v| [-1.0, 0.0, 1.0].contains(v)));
        let s = TreeSpec::new(vec![], 4, 1).with_const_range(2.0, 3.0).with_p_const(0.25);
        let pop = init_population(&s, 4000, 1).unwrap();
        let consts = pop.op.iter().filter(|&&o| o == Op::Const as u8).count();
        assert!((800..1200).contains(&consts), "{consts} constants of 4000 at p = 0.25");
        for (o, v) in pop.op.iter().zip(&pop.value) {
            assert!(if *o == Op::Var as u8 { *v < 4.0 } else { (2.0..=3.0).contains(v) });
        }
    }

    #[test]
    fn bad_specs_are_rejected_with_a_reason() {
        let cases = [
            (TreeSpec::new(vec![Op::Add], 0, 8), "no leaves"),
            (TreeSpec::new(vec![Op::Add], 1, 0), "max_len"),
            (TreeSpec::new(vec![Op::Var], 1, 8), "leaf"),
            (spec(8).with_outputs(255, 0.0), "outputs"),
            (spec(8).with_const_range(1.0, 0.0), "range"),
            (spec(8).with_constants(&[f32::NAN]), "finite"),
            (spec(8).with_p_const(1.5), "p_const"),
            (spec(8).with_depth(3, 2), "depths"),
            (spec(8).with_depth(0, 70_000), "depths"),
            (TreeSpec::new(vec![Op::Add, Op::Sin, Op::Add], 1, 8), "twice"),
        ];
        for (s, word) in cases {
            let e = init_population(&s, 1, 0).unwrap_err();
            assert!(e.contains(word), "{e:?} should mention {word}");
        }
    }
}
