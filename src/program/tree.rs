//! Tensorized programs: a population of trees as structure-of-arrays `[P × L]` (EvoGP's encoding).
//!
//! Invariant, checked by [`Population::validate`] and kept by every operator: each tree is in
//! prefix order; node `i`'s subtree is `i .. i + size[i]`; a function node's children follow it
//! one after another (child 1 at `i + 1`, child 2 at `i + 1 + size[i + 1]`, …) and fill its
//! subtree exactly; the root's size is the tree's length; every slot at or after the length is
//! zero in all four arrays. A length of 0 marks an individual without a program (invalid).
//!
//! Multi-output programs (EvoGP's "Modi" nodes): `out[i] = k + 1` makes node `i` an output node
//! for slot `k`. An output node computes as usual, adds its result to output `k`, and passes its
//! *last child's* value to its parent (a leaf passes its own value). With `n_outputs > 0` only
//! the output slots are the program's result; with `n_outputs == 0` the root's value is.

use super::ops::Op;

/// One node of a tree being built on the host.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Node {
    /// What the node does.
    pub op: Op,
    /// Variable index (for `Var`), constant (for `Const`), slot index `i` (for `Slot`, a
    /// grammar's `c[i]`); 0 for other functions.
    pub value: f32,
    /// 0, or `k + 1` for an output node of slot `k`.
    pub out: u8,
}

impl Node {
    /// A function node.
    pub fn func(op: Op) -> Self {
        Self { op, value: 0.0, out: 0 }
    }
    /// A variable leaf.
    pub fn var(index: u32) -> Self {
        Self { op: Op::Var, value: index as f32, out: 0 }
    }
    /// A constant leaf.
    pub fn constant(c: f32) -> Self {
        Self { op: Op::Const, value: c, out: 0 }
    }
}

/// Constant slots a program may have (`c[0]` to `c[15]` in a grammar): the constants
/// Levenberg–Marquardt fits per tree (`backend::cpu::fit::MAX_FIT_CONSTANTS`).
pub const MAX_SLOTS: usize = 16;

/// The tree without its [`Op::Slot`] nodes (a grammar's `c[i]`: `Slot(Const v)` is `v`), for
/// what shows a program (renderings): each slot node gives way to its child, which takes its
/// output mark. A slot node whose child is an output node too stays (the two marks are two
/// additions). Borrowed when the tree has none.
pub fn strip_slots(nodes: &[Node]) -> std::borrow::Cow<'_, [Node]> {
    let keep = |i: usize| nodes[i].op != Op::Slot || nodes.get(i + 1).is_none_or(|c| nodes[i].out != 0 && c.out != 0);
    if (0..nodes.len()).all(keep) {
        return std::borrow::Cow::Borrowed(nodes);
    }
    let mut out: Vec<Node> = Vec::with_capacity(nodes.len());
    let mut mark = 0u8;
    for (i, n) in nodes.iter().enumerate() {
        if keep(i) {
            out.push(Node { out: if n.out == 0 { std::mem::take(&mut mark) } else { n.out }, ..*n });
            mark = 0;
        } else {
            mark = n.out;
        }
    }
    std::borrow::Cow::Owned(out)
}

/// The constant slots of a tree and their values, by slot: `(i, v)` for each `c[i]` (a
/// [`Op::Slot`] node of value `i` over a constant `v`), the first occurrence's value (fitting
/// gives every occurrence the same).
pub fn slot_values(nodes: &[Node]) -> Vec<(usize, f32)> {
    let mut out: Vec<(usize, f32)> = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        if n.op == Op::Slot {
            if let Some(c) = nodes.get(i + 1).filter(|c| c.op == Op::Const) {
                let k = n.value as usize;
                if !out.iter().any(|&(j, _)| j == k) {
                    out.push((k, c.value));
                }
            }
        }
    }
    out.sort_by_key(|&(k, _)| k);
    out
}

/// Computes subtree sizes for nodes in prefix order. Fails if the arities do not form exactly
/// one tree.
pub fn subtree_sizes(nodes: &[Node]) -> Result<Vec<u16>, String> {
    let n = nodes.len();
    if n == 0 {
        return Ok(Vec::new());
    }
    if n > u16::MAX as usize {
        return Err(format!("tree of {n} nodes is longer than 65535"));
    }
    let mut size = vec![0u16; n];
    // Walk backwards: a stack of finished subtree sizes.
    let mut stack: Vec<u16> = Vec::with_capacity(32);
    for i in (0..n).rev() {
        let k = nodes[i].op.arity();
        if stack.len() < k {
            return Err(format!("node {i} ({}) needs {k} children", nodes[i].op));
        }
        let mut s = 1u32;
        for _ in 0..k {
            s += stack.pop().unwrap_or(0) as u32;
        }
        size[i] = s as u16;
        stack.push(s as u16);
    }
    if stack.len() != 1 {
        return Err(format!("nodes form {} trees, not one", stack.len()));
    }
    Ok(size)
}

/// Decodes a tree as reports save it (`[operator name, value, output slot + 1 or 0]` per node,
/// prefix order: a run report's `model`, a control report's `policy`) for a program that reads
/// `n_features` variables and writes `n_outputs` output slots (0: the root's value), and checks
/// it as a population row is checked ([`Population::validate_row`]): at least one node, known
/// operators, one tree, variable indices whole and below `n_features`, constants finite in f32
/// (a value past ±3.4e38 reads as infinite), output slots in range. Errors name the node and
/// the problem; a long name is clipped.
pub fn decode(nodes: &[(String, f32, u8)], n_features: usize, n_outputs: usize) -> Result<Vec<Node>, String> {
    if nodes.is_empty() {
        return Err("the tree is empty: a program has at least one node".into());
    }
    if nodes.len() > u16::MAX as usize {
        return Err(format!("the tree has {} nodes, over {}", nodes.len(), u16::MAX));
    }
    if n_outputs >= u8::MAX as usize {
        return Err(format!("{n_outputs} output slots, over {}", u8::MAX - 1));
    }
    let nodes: Vec<Node> = nodes
        .iter()
        .enumerate()
        .map(|(i, (name, value, out))| {
            let op = match name.as_str() {
                "var" => Op::Var,
                "const" => Op::Const,
                "slot" => Op::Slot,
                n => Op::by_name(n).ok_or_else(|| format!("node {i}: unknown operator `{}`", super::clip(n, 40)))?,
            };
            match op {
                Op::Var if !(*value >= 0.0 && value.fract() == 0.0 && (*value as usize) < n_features) => {
                    return Err(match n_features {
                        0 => format!("node {i}: variable index {value}, but the program reads no variables"),
                        n => format!("node {i}: variable index {value}, but the program reads {n} variables (indices 0 to {})", n - 1),
                    });
                }
                Op::Const if !value.is_finite() => {
                    return Err(format!("node {i}: constant {value}: a constant is a finite f32 (at most ±3.4e38)"));
                }
                Op::Slot if !(*value >= 0.0 && value.fract() == 0.0 && (*value as usize) < MAX_SLOTS) => {
                    return Err(format!("node {i}: constant slot c[{value}]: slots are c[0] to c[{}]", MAX_SLOTS - 1));
                }
                _ => {}
            }
            Ok(Node { op, value: *value, out: *out })
        })
        .collect::<Result<_, String>>()?;
    let mut row = Population::new(1, nodes.len(), n_outputs);
    row.set_tree(0, &nodes).map_err(|e| format!("the tree is malformed: {e}"))?;
    row.validate_row(0)?;
    Ok(nodes)
}

/// A population of programs, structure-of-arrays, row `i` holding tree `i`.
#[derive(Clone, Debug, PartialEq)]
pub struct Population {
    /// `L`: the longest tree a row can hold.
    pub max_len: usize,
    /// Number of output slots; 0 for single-output programs (the root's value is the output).
    pub n_outputs: usize,
    /// `[P × L]` opcodes ([`Op`] as `u8`).
    pub op: Vec<u8>,
    /// `[P × L]` variable index or constant.
    pub value: Vec<f32>,
    /// `[P × L]` subtree sizes.
    pub size: Vec<u16>,
    /// `[P × L]` output slot + 1, or 0.
    pub out: Vec<u8>,
    /// `[P]` tree lengths (0: no program).
    pub len: Vec<u16>,
}

/// One tree of a population, borrowed.
#[derive(Clone, Copy, Debug)]
pub struct TreeRef<'a> {
    /// Opcodes, `len` of them.
    pub op: &'a [u8],
    /// Values.
    pub value: &'a [f32],
    /// Subtree sizes.
    pub size: &'a [u16],
    /// Output slots + 1.
    pub out: &'a [u8],
}

impl TreeRef<'_> {
    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.op.len()
    }
    /// True for an empty (invalid) tree.
    pub fn is_empty(&self) -> bool {
        self.op.is_empty()
    }
    /// Node `i` as a [`Node`].
    pub fn node(&self, i: usize) -> Node {
        Node { op: Op::from_code(self.op[i]).unwrap_or(Op::Const), value: self.value[i], out: self.out[i] }
    }
    /// All nodes, copied.
    pub fn nodes(&self) -> Vec<Node> {
        (0..self.len()).map(|i| self.node(i)).collect()
    }
    /// The subtree rooted at node `i` (`i .. i + size[i]`), itself a valid tree: sizes are
    /// relative, so no copy is needed.
    pub fn subtree(&self, i: usize) -> TreeRef<'_> {
        let r = i..i + self.size[i] as usize;
        TreeRef {
            op: &self.op[r.clone()],
            value: &self.value[r.clone()],
            size: &self.size[r.clone()],
            out: &self.out[r],
        }
    }
    /// Depth: edges on the longest path from the root to a leaf (a lone leaf has depth 0; an
    /// empty tree too).
    pub fn depth(&self) -> usize {
        // Walk in prefix order with a stack of the depths of children still to come.
        let (mut deepest, mut pending) = (0, vec![0usize]);
        for &code in self.op {
            let d = pending.pop().unwrap_or(0);
            deepest = deepest.max(d);
            let arity = Op::from_code(code).map_or(0, Op::arity);
            pending.extend(std::iter::repeat_n(d + 1, arity));
        }
        deepest
    }
}

/// One row of a population, borrowed for writing: `L` slots of each array and the length.
/// Rows of one population are disjoint, so children can be written in parallel
/// ([`Population::rows_mut`]).
#[derive(Debug)]
pub struct RowMut<'a> {
    /// `[L]` opcodes.
    pub op: &'a mut [u8],
    /// `[L]` values.
    pub value: &'a mut [f32],
    /// `[L]` subtree sizes.
    pub size: &'a mut [u16],
    /// `[L]` output slots + 1.
    pub out: &'a mut [u8],
    /// The row's tree length.
    pub len: &'a mut u16,
}

impl RowMut<'_> {
    /// `L`: the longest tree the row can hold.
    pub fn max_len(&self) -> usize {
        self.op.len()
    }
    /// The tree the row holds now.
    pub fn tree(&self) -> TreeRef<'_> {
        let n = *self.len as usize;
        TreeRef { op: &self.op[..n], value: &self.value[..n], size: &self.size[..n], out: &self.out[..n] }
    }
    /// Writes a copy of `tree` (at most `L` nodes) and zeroes the padding after it.
    pub fn copy_from(&mut self, tree: TreeRef<'_>) {
        let n = tree.len();
        assert!(n <= self.max_len(), "tree of {n} nodes copied into a row of {}", self.max_len());
        self.op[..n].copy_from_slice(tree.op);
        self.value[..n].copy_from_slice(tree.value);
        self.size[..n].copy_from_slice(tree.size);
        self.out[..n].copy_from_slice(tree.out);
        self.zero_from(n);
    }
    /// Sets the length to `n` and zeroes every slot from `n` on.
    pub fn zero_from(&mut self, n: usize) {
        self.op[n..].fill(0);
        self.value[n..].fill(0.0);
        self.size[n..].fill(0);
        self.out[n..].fill(0);
        *self.len = n as u16;
    }
}

impl Population {
    /// `p` empty rows of capacity `max_len`.
    pub fn new(p: usize, max_len: usize, n_outputs: usize) -> Self {
        assert!(max_len <= u16::MAX as usize, "max_len {max_len} over 65535");
        Self {
            max_len,
            n_outputs,
            op: vec![0; p * max_len],
            value: vec![0.0; p * max_len],
            size: vec![0; p * max_len],
            out: vec![0; p * max_len],
            len: vec![0; p],
        }
    }

    /// Number of rows (individuals).
    pub fn size(&self) -> usize {
        self.len.len()
    }

    /// Tree `i`.
    pub fn tree(&self, i: usize) -> TreeRef<'_> {
        let (a, n) = (i * self.max_len, self.len[i] as usize);
        TreeRef {
            op: &self.op[a..a + n],
            value: &self.value[a..a + n],
            size: &self.size[a..a + n],
            out: &self.out[a..a + n],
        }
    }

    /// Writes `nodes` (prefix order) into row `i`, computing sizes and zeroing the padding.
    /// Fails if they do not form one tree or do not fit in `max_len`; the row is then emptied.
    pub fn set_tree(&mut self, i: usize, nodes: &[Node]) -> Result<(), String> {
        let sizes = subtree_sizes(nodes);
        let res = match sizes {
            Ok(_) if nodes.len() > self.max_len => {
                Err(format!("tree of {} nodes does not fit in {}", nodes.len(), self.max_len))
            }
            Ok(s) => Ok(s),
            Err(e) => Err(e),
        };
        self.clear(i);
        let sizes = res?;
        let a = i * self.max_len;
        for (k, (n, s)) in nodes.iter().zip(&sizes).enumerate() {
            self.op[a + k] = n.op as u8;
            self.value[a + k] = n.value;
            self.size[a + k] = *s;
            self.out[a + k] = n.out;
        }
        self.len[i] = nodes.len() as u16;
        Ok(())
    }

    /// Empties row `i` (length 0, all zero).
    pub fn clear(&mut self, i: usize) {
        let r = i * self.max_len..(i + 1) * self.max_len;
        self.op[r.clone()].fill(0);
        self.value[r.clone()].fill(0.0);
        self.size[r.clone()].fill(0);
        self.out[r].fill(0);
        self.len[i] = 0;
    }

    /// Row `i`, borrowed for writing.
    pub fn row_mut(&mut self, i: usize) -> RowMut<'_> {
        let r = i * self.max_len..(i + 1) * self.max_len;
        RowMut {
            op: &mut self.op[r.clone()],
            value: &mut self.value[r.clone()],
            size: &mut self.size[r.clone()],
            out: &mut self.out[r],
            len: &mut self.len[i],
        }
    }

    /// Every row, borrowed for writing, in row order (for writing children in parallel).
    pub fn rows_mut(&mut self) -> Vec<RowMut<'_>> {
        let l = self.max_len.max(1); // chunks of 0 are not allowed; with L = 0 every chunk is empty
        let (op, value, size, out) = (&mut self.op, &mut self.value, &mut self.size, &mut self.out);
        let mut chunks = op.chunks_mut(l).zip(value.chunks_mut(l)).zip(size.chunks_mut(l)).zip(out.chunks_mut(l));
        self.len
            .iter_mut()
            .map(|len| match chunks.next() {
                Some((((op, value), size), out)) => RowMut { op, value, size, out, len },
                None => RowMut { op: &mut [], value: &mut [], size: &mut [], out: &mut [], len },
            })
            .collect()
    }

    /// A population of rows `rows` of this one, in that order.
    pub fn gather(&self, rows: &[usize]) -> Population {
        let mut out = Population::new(rows.len(), self.max_len, self.n_outputs);
        for (k, &r) in rows.iter().enumerate() {
            out.copy_row(k, self, r);
        }
        out
    }

    /// Copies row `src` of `from` into row `dst` of `self` (same `max_len`).
    pub fn copy_row(&mut self, dst: usize, from: &Population, src: usize) {
        debug_assert_eq!(self.max_len, from.max_len);
        let (d, s) = (dst * self.max_len..(dst + 1) * self.max_len, src * from.max_len..(src + 1) * from.max_len);
        self.op[d.clone()].copy_from_slice(&from.op[s.clone()]);
        self.value[d.clone()].copy_from_slice(&from.value[s.clone()]);
        self.size[d.clone()].copy_from_slice(&from.size[s.clone()]);
        self.out[d].copy_from_slice(&from.out[s]);
        self.len[dst] = from.len[src];
    }

    /// Checks every invariant of the encoding (see the module docs); names the first breach.
    pub fn validate(&self) -> Result<(), String> {
        let (p, l) = (self.size(), self.max_len);
        for (name, n) in [("op", self.op.len()), ("value", self.value.len()), ("size", self.size.len()), ("out", self.out.len())] {
            if n != p * l {
                return Err(format!("{name} has {n} entries, expected {p} × {l}"));
            }
        }
        for i in 0..p {
            self.validate_row(i).map_err(|e| format!("tree {i}: {e}"))?;
        }
        Ok(())
    }

    /// Checks row `t` as [`Self::validate`] does; names the node and the problem.
    pub fn validate_row(&self, t: usize) -> Result<(), String> {
        let (l, n) = (self.max_len, self.len[t] as usize);
        if n > l {
            return Err(format!("length {n} over max_len {l}"));
        }
        let a = t * l;
        for k in n..l {
            if self.op[a + k] != 0 || self.value[a + k].to_bits() != 0 || self.size[a + k] != 0 || self.out[a + k] != 0 {
                return Err(format!("padding at {k} is not zero"));
            }
        }
        if n == 0 {
            return Ok(());
        }
        if self.size[a] as usize != n {
            return Err(format!("root size {} differs from length {n}", self.size[a]));
        }
        for i in 0..n {
            let op = Op::from_code(self.op[a + i]).ok_or_else(|| format!("node {i}: bad opcode {}", self.op[a + i]))?;
            let s = self.size[a + i] as usize;
            if s == 0 || i + s > n {
                return Err(format!("node {i}: size {s} runs past the tree (length {n})"));
            }
            let v = self.value[a + i];
            match op {
                Op::Var if !(v >= 0.0 && v.fract() == 0.0) => return Err(format!("node {i}: variable index {v}")),
                Op::Const if !v.is_finite() => return Err(format!("node {i}: constant {v}")),
                Op::Slot if !(v >= 0.0 && v.fract() == 0.0 && (v as usize) < MAX_SLOTS) => return Err(format!("node {i}: constant slot c[{v}]")),
                Op::Var | Op::Const | Op::Slot => {}
                _ if v.to_bits() != 0 => return Err(format!("node {i}: function {op} has value {v}")),
                _ => {}
            }
            let mut j = i + 1;
            for c in 0..op.arity() {
                if j >= i + s {
                    return Err(format!("node {i} ({op}): child {c} missing"));
                }
                j += self.size[a + j] as usize;
            }
            if j != i + s {
                return Err(format!("node {i} ({op}): children fill {} of size {s}", j - i));
            }
            let o = self.out[a + i] as usize;
            if o > self.n_outputs {
                return Err(match self.n_outputs {
                    0 => format!("node {i}: output slot {} in a program with one output (no slots)", o - 1),
                    n => format!("node {i}: output slot {} but the program has {n} (0 to {})", o - 1, n - 1),
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example() -> Vec<Node> {
        // EvoGP's worked example: [+<out 1>, x0, *<out 0>, x1, 2].
        vec![
            Node { out: 2, ..Node::func(Op::Add) },
            Node::var(0),
            Node { out: 1, ..Node::func(Op::Mul) },
            Node::var(1),
            Node::constant(2.0),
        ]
    }

    #[test]
    fn sizes_and_validation() {
        let mut pop = Population::new(3, 8, 2);
        pop.set_tree(1, &example()).unwrap();
        assert_eq!(pop.tree(1).size, [5, 1, 3, 1, 1]);
        pop.validate().unwrap();
        assert_eq!(pop.tree(0).len(), 0);
    }

    #[test]
    fn bad_trees_are_rejected() {
        let mut pop = Population::new(1, 4, 0);
        assert!(pop.set_tree(0, &[Node::func(Op::Add), Node::var(0)]).is_err());
        assert!(pop.set_tree(0, &[Node::var(0), Node::var(1)]).is_err());
        assert!(pop.set_tree(0, &example()).is_err()); // too long
        assert_eq!(pop.len[0], 0);
        pop.validate().unwrap();
    }

    #[test]
    fn subtree_and_depth() {
        let mut pop = Population::new(1, 8, 2);
        pop.set_tree(0, &example()).unwrap();
        let t = pop.tree(0);
        assert_eq!(t.depth(), 2);
        let sub = t.subtree(2);
        assert_eq!((sub.len(), sub.size, sub.depth()), (3, &[3u16, 1, 1][..], 1));
        assert_eq!(t.subtree(4).depth(), 0);
        assert_eq!(pop.tree(0).subtree(0).nodes(), example());
        assert_eq!(Population::new(1, 4, 0).tree(0).depth(), 0);
    }

    #[test]
    fn rows_are_written_in_place_and_padded() {
        let mut pop = Population::new(3, 8, 2);
        let mut src = Population::new(1, 8, 2);
        src.set_tree(0, &example()).unwrap();
        for mut row in pop.rows_mut() {
            row.copy_from(src.tree(0));
        }
        pop.row_mut(1).copy_from(src.tree(0).subtree(2));
        pop.validate().unwrap();
        assert_eq!(pop.len, [5, 3, 5]);
        assert_eq!(pop.tree(1).nodes(), example()[2..]);
        // L = 0: rows exist and are empty.
        let mut empty = Population::new(2, 0, 0);
        assert_eq!(empty.rows_mut().iter().map(|r| r.max_len()).collect::<Vec<_>>(), [0, 0]);
    }

    #[test]
    fn validate_finds_each_breach() {
        let mut pop = Population::new(1, 8, 2);
        pop.set_tree(0, &example()).unwrap();
        let good = pop.clone();
        pop.size[2] = 2;
        assert!(pop.validate().unwrap_err().contains("children"));
        pop = good.clone();
        pop.value[6] = 1.0;
        assert!(pop.validate().unwrap_err().contains("padding"));
        pop = good.clone();
        pop.out[1] = 3;
        assert!(pop.validate().unwrap_err().contains("output slot"));
        pop = good.clone();
        pop.op[3] = 99;
        assert!(pop.validate().unwrap_err().contains("opcode"));
        pop = good;
        pop.len[0] = 4;
        assert!(pop.validate().is_err());
    }
}
