//! Host side of an evaluation call, before anything touches the GPU: checks every tree the
//! kernels will walk and packs the population into one buffer that a single copy moves to the
//! device. Runs in parallel over trees (rayon), one pass over each tree's nodes.
//!
//! The packed buffer holds the kernels' arguments back to back, each section aligned to
//! [`ALIGN`] bytes (see [`Layout`]): `values [P × L] f32`, `tree_ids [P] u32` (the fast
//! kernels' trees first, then the deep ones), `lens [P] u16`, `ops [P × L] u8`,
//! `outs [P × L] u8`. Only each tree's first `len` nodes are written; the kernels read no
//! further (`grove_eval` stages `ops/values/outs[row .. row + len]`), so slots after them hold
//! whatever an earlier call left there.

use std::sync::LazyLock;

use rayon::prelude::*;

use super::error::{GpuError, Result};
use super::kernels::{DEEP_STACK, STACK};
use crate::program::ops::Op;
use crate::program::tree::{Population, TreeRef};

/// Alignment of every section of the packed buffer, bytes.
pub const ALIGN: usize = 256;

/// Arity of every built-in opcode; [`BAD_OP`] for the others. Built once, so the operators a
/// user registers later (a second fit in one Python process) are looked up by [`arity_of`].
static ARITY: LazyLock<[u8; 256]> = LazyLock::new(|| {
    let mut a = [BAD_OP; 256];
    for (code, slot) in a.iter_mut().enumerate() {
        if let Some(op) = Op::from_code(code as u8) {
            *slot = op.arity() as u8;
        }
    }
    a
});
const BAD_OP: u8 = u8::MAX;

/// Arity of opcode `code`: [`ARITY`]'s, else as registered now (user operators may be
/// registered after the table was built); [`BAD_OP`] when it names no operator.
#[inline]
fn arity_of(code: u8) -> u8 {
    match ARITY[code as usize] {
        BAD_OP => registered_arity(code),
        k => k,
    }
}

#[cold]
fn registered_arity(code: u8) -> u8 {
    Op::from_code(code).map_or(BAD_OP, |o| o.arity() as u8)
}

/// Evaluation stack a tree needs when walked backwards (values held at once, counting the
/// top), after checking what the kernels rely on: known opcodes, arities that form one tree,
/// variable indices below `n_features`, output slots within `n_outputs`.
pub fn stack_need(tree: TreeRef<'_>, n_features: usize, n_outputs: usize) -> Result<usize, String> {
    check_nodes(tree.op, tree.value, tree.out, n_features, n_outputs)
}

/// [`stack_need`] on the arrays of one tree (`op`, `value`, `out`: its nodes, same length).
#[inline]
fn check_nodes(op: &[u8], value: &[f32], out: &[u8], n_features: usize, n_outputs: usize) -> Result<usize, String> {
    let (mut h, mut need) = (0usize, 0usize);
    for i in (0..op.len()).rev() {
        let code = op[i];
        let k = arity_of(code);
        if k == BAD_OP {
            return Err(format!("node {i}: bad opcode {code}"));
        }
        if code == Op::Var as u8 {
            // A whole number in 0..n_features: the saturating cast maps NaN, negatives and
            // fractions to a different number (no `fract`, which is a libm call on baseline x86-64).
            let v = value[i];
            if !(v as u32 as f32 == v && (v as u32 as usize) < n_features) {
                return Err(format!("node {i}: variable index {v}, but the data set has {n_features} features"));
            }
        }
        if out[i] as usize > n_outputs {
            return Err(format!("node {i}: output slot {} of {n_outputs}", out[i] as usize - 1));
        }
        let k = k as usize;
        if h < k {
            let name = Op::from_code(code).map_or_else(|| code.to_string(), |o| o.to_string());
            return Err(format!("node {i} ({name}) has {h} of its {k} children"));
        }
        h = h - k + 1;
        need = need.max(h);
    }
    if h != 1 {
        return Err(format!("the nodes form {h} trees, not one"));
    }
    Ok(need)
}

/// True when `size[i]` is the length of node `i`'s subtree for every node (what the kernels
/// rely on to find second children); opcodes must be known (else false).
fn sizes_are_subtrees(op: &[u8], size: &[u16]) -> bool {
    // Walking backwards, the subtrees that follow node i start at i + 1, i + 1 + size[i + 1], ...
    (0..op.len()).rev().all(|i| {
        let k = arity_of(op[i]);
        if k == BAD_OP {
            return false;
        }
        let mut end = i + 1;
        for _ in 0..k {
            match size.get(end) {
                Some(&s) if s > 0 && end + (s as usize) <= op.len() => end += s as usize,
                _ => return false,
            }
        }
        size[i] as usize == end - i
    })
}

/// Byte offsets of the sections of a packed population of `P` trees of capacity `L`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// `P`: trees.
    pub p: usize,
    /// `L`: row stride.
    pub l: usize,
    /// `values [P × L] f32`.
    pub value: usize,
    /// `tree_ids [P] u32`.
    pub ids: usize,
    /// `lens [P] u16`.
    pub len: usize,
    /// `sizes [P × L] u16` (subtree sizes: the kernels find a node's second child by them).
    pub size: usize,
    /// `ops [P × L] u8`.
    pub op: usize,
    /// `outs [P × L] u8`.
    pub out: usize,
    /// Total bytes (a multiple of [`ALIGN`]).
    pub bytes: usize,
}

impl Layout {
    /// The layout for `p` trees of capacity `l`.
    pub fn new(p: usize, l: usize) -> Self {
        let up = |n: usize| n.div_ceil(ALIGN) * ALIGN;
        let value = 0;
        let ids = value + up(p * l * 4);
        let len = ids + up(p * 4);
        let size = len + up(p * 2);
        let op = size + up(p * l * 2);
        let out = op + up(p * l);
        let bytes = out + up(p * l);
        Self { p, l, value, ids, len, size, op, out, bytes: bytes.max(ALIGN) }
    }
}

/// The typed sections of a packed buffer, borrowed for writing.
struct Sections<'a> {
    value: &'a mut [f32],
    ids: &'a mut [u32],
    len: &'a mut [u16],
    size: &'a mut [u16],
    op: &'a mut [u8],
    out: &'a mut [u8],
}

/// Splits `buf` (at least `lay.bytes` long, 4-byte aligned) into its sections.
fn sections<'a>(buf: &'a mut [u8], lay: &Layout) -> Result<Sections<'a>> {
    if buf.len() < lay.bytes || buf.as_ptr().align_offset(4) != 0 {
        return Err(GpuError::Input(format!("packing buffer of {} bytes, need {} aligned to 4", buf.len(), lay.bytes)));
    }
    let (pl, p) = (lay.p * lay.l, lay.p);
    let (head, rest) = buf.split_at_mut(lay.ids);
    let (ids, rest) = rest.split_at_mut(lay.len - lay.ids);
    let (len, rest) = rest.split_at_mut(lay.size - lay.len);
    let (size, rest) = rest.split_at_mut(lay.op - lay.size);
    let (op, rest) = rest.split_at_mut(lay.out - lay.op);
    // SAFETY: f32, u32 and u16 are valid for every bit pattern, and each section starts at a
    // multiple of ALIGN from a 4-byte aligned base, so `align_to_mut` leaves no prefix (checked).
    let (a, value, _) = unsafe { head.align_to_mut::<f32>() };
    let (b, ids, _) = unsafe { ids.align_to_mut::<u32>() };
    let (c, len, _) = unsafe { len.align_to_mut::<u16>() };
    // SAFETY: as above.
    let (d, size, _) = unsafe { size.align_to_mut::<u16>() };
    if !(a.is_empty() && b.is_empty() && c.is_empty() && d.is_empty()) {
        return Err(GpuError::Input("packing buffer sections are misaligned".into()));
    }
    Ok(Sections {
        value: &mut value[..pl],
        ids: &mut ids[..p],
        len: &mut len[..p],
        size: &mut size[..pl],
        op: &mut op[..pl],
        out: &mut rest[..pl],
    })
}

/// What [`pack`] found: `tree_ids[..n_fast]` go to the fast kernels, `tree_ids[n_fast..P]`
/// to the deep fallback.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packed {
    /// The sections of the buffer.
    pub layout: Layout,
    /// Empty trees and trees needing at most [`STACK`] slots.
    pub n_fast: usize,
    /// Trees needing more, up to [`DEEP_STACK`].
    pub n_deep: usize,
}

const FAST: u8 = 0;
const DEEP: u8 = 1;
const BAD: u8 = 2;

/// Checks every tree of `pop` for the kernels (see [`stack_need`]; also lengths within
/// `max_len` and array sizes) and packs it into `buf` (see the module doc), in parallel over
/// trees. On a bad tree, the error names the first one in index order, whatever the thread
/// count.
pub fn pack(pop: &Population, n_features: usize, buf: &mut [u8]) -> Result<Packed> {
    let (p, l, n_outputs) = (pop.size(), pop.max_len, pop.n_outputs);
    for (name, n) in [("op", pop.op.len()), ("value", pop.value.len()), ("size", pop.size.len()), ("out", pop.out.len())] {
        if n != p * l {
            return Err(GpuError::Input(format!("population array {name} has {n} entries, expected {p} × {l}")));
        }
    }
    if n_outputs > u8::MAX as usize {
        return Err(GpuError::Input(format!("{n_outputs} output slots; nodes can address 255")));
    }
    if p > u32::MAX as usize {
        return Err(GpuError::Input(format!("{p} trees is more than one launch takes")));
    }
    let layout = Layout::new(p, l);
    let s = sections(buf, &layout)?;
    // One task per tree, grouped so that a task copies a few KiB at least.
    let min_len = (4096 / l.max(1)).max(1);
    let classes: Vec<u8> = s
        .op
        .par_chunks_mut(l.max(1))
        .zip(s.value.par_chunks_mut(l.max(1)))
        .zip(s.out.par_chunks_mut(l.max(1)))
        .zip(s.size.par_chunks_mut(l.max(1)))
        .zip(s.len.par_iter_mut())
        .zip(s.ids.par_iter_mut())
        .enumerate()
        .with_min_len(min_len)
        .map(|(t, (((((op, value), out), size), len), id))| {
            let n = pop.len[t] as usize;
            *id = t as u32;
            *len = pop.len[t];
            if n > l {
                return BAD;
            }
            let r = t * l..t * l + n;
            let (src_op, src_value, src_out) = (&pop.op[r.clone()], &pop.value[r.clone()], &pop.out[r.clone()]);
            op[..n].copy_from_slice(src_op);
            value[..n].copy_from_slice(src_value);
            out[..n].copy_from_slice(src_out);
            size[..n].copy_from_slice(&pop.size[r]);
            if n == 0 {
                return FAST;
            }
            if !sizes_are_subtrees(src_op, &size[..n]) {
                return BAD;
            }
            match check_nodes(src_op, src_value, src_out, n_features, n_outputs) {
                Ok(need) if need <= STACK => FAST,
                Ok(need) if need <= DEEP_STACK => DEEP,
                _ => BAD,
            }
        })
        .collect();
    if let Some(t) = classes.iter().position(|&c| c == BAD) {
        return Err(tree_error(pop, t, n_features));
    }
    let n_deep = classes.iter().filter(|&&c| c == DEEP).count();
    if n_deep > 0 {
        // Rare: fast trees first, then deep ones, each in index order.
        let fast = (0..p as u32).filter(|&t| classes[t as usize] == FAST);
        let deep = (0..p as u32).filter(|&t| classes[t as usize] == DEEP);
        for (slot, t) in s.ids.iter_mut().zip(fast.chain(deep)) {
            *slot = t;
        }
    }
    Ok(Packed { layout, n_fast: p - n_deep, n_deep })
}

/// The error for tree `t`, which [`pack`] found bad.
fn tree_error(pop: &Population, t: usize, n_features: usize) -> GpuError {
    let l = pop.max_len;
    if pop.len[t] as usize > l {
        return GpuError::Input(format!("tree {t}: length {} over max_len {l}", pop.len[t]));
    }
    let tree = pop.tree(t);
    match stack_need(tree, n_features, pop.n_outputs) {
        Err(e) => GpuError::Input(format!("tree {t}: {e}")),
        Ok(_) if !sizes_are_subtrees(tree.op, tree.size) => {
            GpuError::Input(format!("tree {t}: its subtree sizes do not match its nodes"))
        }
        Ok(need) => GpuError::TreeTooDeep { tree: t, need, max: DEEP_STACK },
    }
}

/// A 4-byte aligned scratch buffer of at least `bytes` bytes on the host, zeroed (for
/// packing without a GPU, and when page-locked memory cannot be had).
pub fn host_buffer(bytes: usize) -> Vec<u32> {
    vec![0u32; bytes.div_ceil(4)]
}

/// `buf` as bytes.
pub fn as_bytes_mut(buf: &mut [u32]) -> &mut [u8] {
    // SAFETY: u8 has alignment 1 and every bit pattern of the u32s is valid as bytes.
    unsafe { buf.align_to_mut::<u8>() }.1
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::tree::Node;

    /// `p` copies of `nodes` (row capacity `l`), one output slot count for all.
    fn pop_of(p: usize, l: usize, n_outputs: usize, nodes: &[Node]) -> Population {
        let mut pop = Population::new(p, l, n_outputs);
        for t in 0..p {
            pop.set_tree(t, nodes).unwrap();
        }
        pop
    }

    fn pack_err(pop: &Population, n_features: usize) -> String {
        let mut buf = host_buffer(Layout::new(pop.size(), pop.max_len).bytes);
        pack(pop, n_features, as_bytes_mut(&mut buf)).unwrap_err().to_string()
    }

    fn expr() -> Vec<Node> {
        // add(x0, mul(x1, 2))
        vec![Node::func(Op::Add), Node::var(0), Node::func(Op::Mul), Node::var(1), Node::constant(2.0)]
    }

    #[test]
    fn pack_copies_each_tree_into_its_section() {
        let mut pop = pop_of(3000, 8, 0, &expr());
        pop.set_tree(7, &[Node::var(1)]).unwrap();
        pop.set_tree(9, &[]).unwrap();
        let lay = Layout::new(pop.size(), pop.max_len);
        assert!([lay.value, lay.ids, lay.len, lay.size, lay.op, lay.out, lay.bytes].iter().all(|o| o % ALIGN == 0), "{lay:?}");
        let mut buf = host_buffer(lay.bytes);
        let packed = pack(&pop, 2, as_bytes_mut(&mut buf)).unwrap();
        assert_eq!((packed.n_fast, packed.n_deep), (3000, 0));
        let s = sections(as_bytes_mut(&mut buf), &lay).unwrap();
        for t in 0..pop.size() {
            let n = pop.len[t] as usize;
            let r = t * 8..t * 8 + n;
            assert_eq!(s.ids[t], t as u32);
            assert_eq!(s.len[t], pop.len[t]);
            assert_eq!(&s.op[r.clone()], &pop.op[r.clone()], "tree {t}");
            assert_eq!(&s.out[r.clone()], &pop.out[r.clone()], "tree {t}");
            assert_eq!(&s.size[r.clone()], &pop.size[r.clone()], "tree {t}");
            assert_eq!(s.value[r.clone()].iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                       pop.value[r].iter().map(|v| v.to_bits()).collect::<Vec<_>>(), "tree {t}");
        }
    }

    #[test]
    fn pack_refuses_wrong_subtree_sizes() {
        // The kernels find second children by the sizes: a wrong one must not reach them.
        let mut pop = pop_of(300, 8, 0, &expr());
        let l = pop.max_len;
        pop.size[120 * l] += 1;
        let lay = Layout::new(pop.size(), l);
        let mut buf = host_buffer(lay.bytes);
        let err = pack(&pop, 2, as_bytes_mut(&mut buf)).unwrap_err().to_string();
        assert!(err.contains("tree 120") && err.contains("subtree sizes"), "{err}");
    }

    #[test]
    fn pack_names_the_first_bad_opcode() {
        let mut pop = pop_of(5000, 8, 0, &expr());
        pop.op[4321 * 8 + 2] = 200;
        pop.op[4999 * 8] = 201;
        assert_eq!(pack_err(&pop, 2), format!("{}tree 4321: node 2: bad opcode 200", prefix()));
    }

    #[test]
    fn pack_names_the_first_bad_variable() {
        let mut pop = pop_of(5000, 8, 0, &expr());
        pop.value[2500 * 8 + 3] = 2.0; // x2 of 2 features
        pop.value[3000 * 8 + 1] = 0.5;
        pop.value[4000 * 8 + 1] = -1.0;
        assert!(pack_err(&pop, 2).contains("tree 2500: node 3: variable index 2, but the data set has 2 features"));
        pop.value[2500 * 8 + 3] = 1.0;
        assert!(pack_err(&pop, 2).contains("tree 3000: node 1: variable index 0.5"));
        pop.value[3000 * 8 + 1] = 1.0;
        assert!(pack_err(&pop, 2).contains("tree 4000: node 1: variable index -1"));
        pop.value[4000 * 8 + 1] = f32::NAN;
        assert!(pack_err(&pop, 2).contains("tree 4000: node 1: variable index NaN"));
    }

    #[test]
    fn pack_names_the_first_bad_output_slot() {
        let mut nodes = expr();
        nodes[2].out = 2; // slot 1
        let mut pop = pop_of(4000, 8, 2, &nodes);
        assert!(pack(&pop, 2, as_bytes_mut(&mut host_buffer(Layout::new(4000, 8).bytes))).is_ok());
        pop.out[1234 * 8 + 4] = 3; // slot 2 of 2
        assert!(pack_err(&pop, 2).contains("tree 1234: node 4: output slot 2 of 2"), "{}", pack_err(&pop, 2));
        pop.n_outputs = 1;
        assert!(pack_err(&pop, 2).contains("tree 0: node 2: output slot 1 of 1"));
    }

    #[test]
    fn pack_names_broken_trees_and_long_lengths() {
        let mut pop = pop_of(3000, 8, 0, &expr());
        pop.op[1500 * 8 + 2] = Op::Var as u8; // mul becomes a leaf: three trees
        assert!(pack_err(&pop, 2).contains("tree 1500: the nodes form 3 trees, not one"));
        pop.op[1500 * 8 + 2] = Op::Sin as u8; // mul becomes unary: add(x0, sin(x1)) and a stray 2
        assert!(pack_err(&pop, 2).contains("tree 1500: the nodes form 2 trees, not one"));
        pop.op[1500 * 8 + 2] = Op::Mul as u8;
        pop.op[1500 * 8 + 4] = Op::Add as u8; // a leaf becomes binary with no children
        assert!(pack_err(&pop, 2).contains("tree 1500: node 4 (") && pack_err(&pop, 2).contains("has 0 of its 2 children"));
        pop.op[1500 * 8 + 4] = Op::Const as u8;
        pop.len[2000] = 9;
        assert!(pack_err(&pop, 2).contains("tree 2000: length 9 over max_len 8"));
    }

    #[test]
    fn pack_agrees_with_stack_need_and_orders_deep_trees_last() {
        // A left-deep chain of n additions needs n + 1 slots.
        let chain = |n: usize| {
            let mut nodes = vec![Node::func(Op::Add); n];
            nodes.extend(vec![Node::var(0); n + 1]);
            nodes
        };
        let l = 2 * STACK + 1;
        let mut pop = Population::new(2000, l, 0);
        for t in 0..pop.size() {
            let n = [STACK - 1, STACK, 3][t % 3];
            pop.set_tree(t, &chain(n)).unwrap();
            assert_eq!(stack_need(pop.tree(t), 1, 0), Ok(n + 1));
        }
        let lay = Layout::new(pop.size(), l);
        let mut buf = host_buffer(lay.bytes);
        let packed = pack(&pop, 1, as_bytes_mut(&mut buf)).unwrap();
        let deep: Vec<u32> = (0..2000).filter(|t| t % 3 == 1).collect();
        let fast: Vec<u32> = (0..2000).filter(|t| t % 3 != 1).collect();
        assert_eq!((packed.n_fast, packed.n_deep), (fast.len(), deep.len()));
        let s = sections(as_bytes_mut(&mut buf), &lay).unwrap();
        assert_eq!(&s.ids[..packed.n_fast], &fast[..]);
        assert_eq!(&s.ids[packed.n_fast..], &deep[..]);
    }

    #[test]
    fn an_operator_registered_after_the_first_pack_is_known() {
        // The table of arities is built by the first check; a definition registered later (a
        // second fit in one Python process) is still a known operator of its arity.
        stack_need(pop_of(1, 8, 0, &expr()).tree(0), 2, 0).unwrap();
        let late = crate::program::ops::user::register(&["pack_late_sq(x) = x*x".to_string()]).unwrap()[0];
        let tree = [Node::func(Op::Add), Node::func(late), Node::var(0), Node::var(1)];
        assert_eq!(stack_need(pop_of(1, 8, 0, &tree).tree(0), 2, 0), Ok(2));
        let t = pop_of(1, 8, 0, &tree);
        assert!(sizes_are_subtrees(t.tree(0).op, t.tree(0).size));
        // A code no one registered is still refused.
        let mut pop = pop_of(1, 8, 0, &tree);
        pop.op[1] = 63;
        assert!(stack_need(pop.tree(0), 2, 0).unwrap_err().contains("bad opcode 63"));
    }

    #[test]
    fn pack_refuses_a_short_buffer() {
        let pop = pop_of(10, 8, 0, &expr());
        let mut buf = host_buffer(Layout::new(10, 8).bytes - 4);
        assert!(pack(&pop, 2, as_bytes_mut(&mut buf)).is_err());
    }

    fn prefix() -> String {
        GpuError::Input(String::new()).to_string()
    }
}
