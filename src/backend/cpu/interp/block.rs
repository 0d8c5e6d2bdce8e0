//! The linear form run over a block of `B` data points at once (Chitty's two-dimensional
//! stack, `papers/chitty-two-dimensional-stack-gpu-gp.txt` §4–5): every stack entry is a
//! `B`-wide vector and each instruction is one tight loop over the block, so the dispatch is
//! paid once per block, not once per point. [`run_block`] gives the bits of [`super::run`] at
//! every point.
//!
//! An entry of the stack holds either `B` values of its own, or a constant, or a variable of
//! the data (read in place): a value that is the same at every point (a constant passed up by
//! an output node, and what is computed from constants above it) is computed once per block
//! with [`apply_fast`], which gives the bits a lane would, and a leaf passed up by an output
//! node is never copied. The newest value (`top` of the linear form) is entry `d`, the entries
//! below it are the stack: a push moves `d` up, a pop down, and an instruction writes its result
//! over its operand in entry `d` (the loops read each lane before they write it).

use super::{BINARY, PUSH, Program, src};
use crate::program::fastmath;
use crate::program::ops::{Op, apply_fast};

/// What a stack entry holds for the current block.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Entry {
    /// `B` values, in the entry's row of the stack.
    Vec,
    /// The same value at every point.
    Const(f32),
    /// A variable of the data, read in place.
    Var(u32),
}

/// The data a block reads.
pub enum XBlock<'a> {
    /// A full block: variable `v` is `x[v * n_rows + row0 ..][..B]`.
    Rows {
        /// `[n_features][n_rows]`, feature-major.
        x: &'a [f32],
        /// Rows of the data.
        n_rows: usize,
        /// The block's first row.
        row0: usize,
    },
    /// The last, partial block, copied and zero-padded: variable `vars[i]` is `pad[i * B ..][..B]`.
    Padded {
        /// `[vars][B]`.
        pad: &'a [f32],
        /// The program's variables, ascending.
        vars: &'a [u32],
    },
}

impl XBlock<'_> {
    /// Variable `v` at the block's points.
    #[inline(always)]
    pub fn var<const B: usize>(&self, v: u32) -> &[f32; B] {
        let (data, s) = match *self {
            XBlock::Rows { x, n_rows, row0 } => (x, v as usize * n_rows + row0),
            XBlock::Padded { pad, vars } => (pad, vars.binary_search(&v).expect("a variable of the program") * B),
        };
        data[s..s + B].try_into().expect("block inside the data")
    }
}

/// Where an operand is, once the entries it names are resolved.
#[derive(Clone, Copy)]
enum Operand {
    /// Entry `k`'s own values ([`Entry::Vec`]).
    Slot(usize),
    /// A variable of the data.
    Var(u32),
    /// A constant.
    Const(f32),
}

/// An operand as a block kernel reads it.
#[derive(Clone, Copy)]
enum Arg<'a, const B: usize> {
    /// `B` values that are not the destination.
    Vec(&'a [f32; B]),
    /// The same value at every point.
    Val(f32),
    /// The destination's own values, read before each lane is written.
    Dst,
}

/// Unary pointwise map.
#[inline(always)]
fn map1<const B: usize>(d: &mut [f32; B], a: Arg<'_, B>, f: impl Fn(f32) -> f32) {
    match a {
        Arg::Vec(a) => {
            for j in 0..B {
                d[j] = f(a[j]);
            }
        }
        Arg::Dst => {
            for v in d.iter_mut() {
                *v = f(*v);
            }
        }
        Arg::Val(c) => d.fill(f(c)),
    }
}

/// Binary pointwise map, one loop per shape of the arguments.
#[inline(always)]
fn map2<const B: usize>(d: &mut [f32; B], a: Arg<'_, B>, b: Arg<'_, B>, f: impl Fn(f32, f32) -> f32) {
    match (a, b) {
        (Arg::Vec(a), Arg::Vec(b)) => {
            for j in 0..B {
                d[j] = f(a[j], b[j]);
            }
        }
        (Arg::Vec(a), Arg::Val(c)) => {
            for j in 0..B {
                d[j] = f(a[j], c);
            }
        }
        (Arg::Val(c), Arg::Vec(b)) => {
            for j in 0..B {
                d[j] = f(c, b[j]);
            }
        }
        (Arg::Dst, Arg::Vec(b)) => {
            for j in 0..B {
                d[j] = f(d[j], b[j]);
            }
        }
        (Arg::Dst, Arg::Val(c)) => {
            for v in d.iter_mut() {
                *v = f(*v, c);
            }
        }
        (Arg::Vec(a), Arg::Dst) => {
            for j in 0..B {
                d[j] = f(a[j], d[j]);
            }
        }
        (Arg::Val(c), Arg::Dst) => {
            for v in d.iter_mut() {
                *v = f(c, *v);
            }
        }
        (Arg::Dst, Arg::Dst) => {
            for v in d.iter_mut() {
                *v = f(*v, *v);
            }
        }
        (Arg::Val(c), Arg::Val(e)) => d.fill(f(c, e)),
    }
}

/// `sin`/`cos`/`tan` of `a` (not the destination): the fast form on every lane, then the exact
/// reduction on the lanes out of its range.
#[inline(always)]
fn sincos_vec<const B: usize>(d: &mut [f32; B], a: &[f32; B], fast: fn(f32) -> f32, slow: fn(f32) -> f32) {
    map1(d, Arg::Vec(a), fast);
    // An or-reduction without early exit, so it vectorises.
    let any_out = a.iter().fold(false, |acc, &x| acc | !fastmath::sincos_in_range(x));
    if any_out {
        for j in 0..B {
            if !fastmath::sincos_in_range(a[j]) {
                d[j] = slow(a[j]);
            }
        }
    }
}

/// `sin`/`cos`/`tan` over a block; bitwise [`apply_fast`] at every lane.
#[inline(always)]
fn sincos_block<const B: usize>(d: &mut [f32; B], a: Arg<'_, B>, fast: fn(f32) -> f32, slow: fn(f32) -> f32) {
    match a {
        Arg::Val(c) => d.fill(if fastmath::sincos_in_range(c) { fast(c) } else { slow(c) }),
        Arg::Vec(a) => sincos_vec(d, a, fast, slow),
        Arg::Dst => {
            let any_out = d.iter().fold(false, |acc, &x| acc | !fastmath::sincos_in_range(x));
            if any_out {
                // The arguments are kept for the lanes the fast form cannot take.
                let a: [f32; B] = *d;
                sincos_vec(d, &a, fast, slow);
            } else {
                map1(d, Arg::Dst, fast);
            }
        }
    }
}

/// `d = op(a, b)` over a block; bitwise [`apply_fast`] at every lane.
#[inline(always)]
fn apply_block<const B: usize>(op: Op, d: &mut [f32; B], a: Arg<'_, B>, b: Arg<'_, B>) {
    macro_rules! bin {
        ($op:expr) => {
            map2(d, a, b, |x, y| apply_fast($op, x, y))
        };
    }
    macro_rules! un {
        ($op:expr) => {
            map1(d, a, |x| apply_fast($op, x, 0.0))
        };
    }
    match op {
        Op::Add => bin!(Op::Add),
        Op::Sub => bin!(Op::Sub),
        Op::Mul => bin!(Op::Mul),
        Op::Div => bin!(Op::Div),
        Op::Aq => bin!(Op::Aq),
        Op::Pow => bin!(Op::Pow),
        Op::Max => bin!(Op::Max),
        Op::Min => bin!(Op::Min),
        Op::Sdiv => bin!(Op::Sdiv),
        Op::Spow => bin!(Op::Spow),
        Op::Sin => sincos_block(d, a, fastmath::sin, fastmath::sin_large),
        Op::Cos => sincos_block(d, a, fastmath::cos, fastmath::cos_large),
        Op::Tan => sincos_block(d, a, fastmath::tan, fastmath::tan_large),
        Op::Exp => un!(Op::Exp),
        Op::Log => un!(Op::Log),
        Op::Rlog => un!(Op::Rlog),
        Op::Plog => un!(Op::Plog),
        Op::Sqrt => un!(Op::Sqrt),
        Op::Abs => un!(Op::Abs),
        Op::Neg => un!(Op::Neg),
        Op::Slot => map1(d, a, |x| x),
        Op::Square => un!(Op::Square),
        Op::Cube => un!(Op::Cube),
        Op::Tanh => un!(Op::Tanh),
        Op::Sigmoid => un!(Op::Sigmoid),
        Op::Slog => un!(Op::Slog),
        Op::Ssqrt => un!(Op::Ssqrt),
        Op::Var | Op::Const => map1(d, a, |x| x), // a leaf's value is its operand
        crate::program::ops::user_ops!() => match crate::program::ops::user::get(op) {
            Some(u) if u.params.len() == 2 => map2(d, a, b, |x, y| u.eval(x, y, apply_fast)),
            Some(u) => map1(d, a, |x| u.eval(x, 0.0, apply_fast)),
            None => map1(d, a, |_| 0.0),
        },
    }
}

/// `o += a` over a block.
#[inline(always)]
fn add_into<const B: usize>(o: &mut [f32; B], a: Arg<'_, B>) {
    match a {
        Arg::Vec(s) => {
            for j in 0..B {
                o[j] += s[j];
            }
        }
        Arg::Val(c) => {
            for v in o.iter_mut() {
                *v += c;
            }
        }
        Arg::Dst => unreachable!("outputs are never an operand"),
    }
}

/// Runs `prog` over one block. `stack`: `[prog.depth][B]` and `entries`: `[prog.depth]`,
/// scratch; `tmp`: `[B]`, scratch; `outs`: `[n_outputs][B]`, zeroed. Returns the root's entry
/// (entry 0; its values are `stack[..B]` when it is [`Entry::Vec`]).
#[inline(always)]
pub fn run_block<const B: usize>(
    prog: &Program,
    xb: &XBlock<'_>,
    stack: &mut [f32],
    entries: &mut [Entry],
    tmp: &mut [f32; B],
    outs: &mut [f32],
) -> Entry {
    assert!(stack.len() >= prog.depth * B && entries.len() >= prog.depth && outs.len() >= prog.n_outputs * B);
    let base = stack.as_mut_ptr();
    // SAFETY: `k < prog.depth` (the entry index never passes the depth `Program::new` measured),
    // so the `B` floats at `base + k·B` lie inside `stack` (asserted above). The reference lives
    // for one instruction, during which the only `&mut` into `stack` is the destination's entry,
    // and an operand in that entry is passed as `Arg::Dst`, never through this reference.
    let slot = |k: usize| -> &[f32; B] { unsafe { &*(base.add(k * B) as *const [f32; B]) } };
    let arg = |o: Operand, dst: Option<usize>| -> Arg<'_, B> {
        match o {
            Operand::Slot(k) if Some(k) == dst => Arg::Dst,
            Operand::Slot(k) => Arg::Vec(slot(k)),
            Operand::Var(v) => Arg::Vec(xb.var(v)),
            Operand::Const(c) => Arg::Val(c),
        }
    };
    let mut d = 0usize;
    for ins in &prog.code {
        if ins.mode & PUSH != 0 {
            d += 1;
        }
        let (sa, sb) = (ins.mode & 3, (ins.mode >> 2) & 3);
        let word = |s: u8, w: u32, k: usize| match s {
            src::VAR => Operand::Var(w),
            src::CONST => Operand::Const(f32::from_bits(w)),
            _ => Operand::Slot(k),
        };
        let a = word(sa, ins.a, d);
        if sb == src::STACK {
            d -= 1;
        }
        let b = word(sb, ins.b, d);
        let resolve = |o: Operand| match o {
            Operand::Slot(k) => match entries[k] {
                Entry::Vec => Operand::Slot(k),
                Entry::Const(c) => Operand::Const(c),
                Entry::Var(v) => Operand::Var(v),
            },
            o => o,
        };
        let (a, b) = (resolve(a), resolve(b));
        let entry_of = |o: Operand| match o {
            Operand::Slot(_) => Entry::Vec,
            Operand::Const(c) => Entry::Const(c),
            Operand::Var(v) => Entry::Var(v),
        };
        let op = Op::from_code(ins.op).expect("Program::new checked the opcodes");
        if ins.out == 0 {
            entries[d] = match (op.is_leaf(), a, b) {
                (true, a, _) => entry_of(a),
                (false, Operand::Const(ca), Operand::Const(cb)) => Entry::Const(apply_fast(op, ca, cb)),
                _ => {
                    // SAFETY: as for `slot`; operands in entry `d` come as `Arg::Dst`.
                    let dst = unsafe { &mut *(base.add(d * B) as *mut [f32; B]) };
                    apply_block(op, dst, arg(a, Some(d)), arg(b, Some(d)));
                    Entry::Vec
                }
            };
        } else {
            let o: &mut [f32; B] = (&mut outs[(ins.out as usize - 1) * B..ins.out as usize * B]).try_into().expect("an output slot");
            match (op.is_leaf(), a, b) {
                (true, a, _) => add_into(o, arg(a, None)),
                (false, Operand::Const(ca), Operand::Const(cb)) => add_into(o, Arg::Val(apply_fast(op, ca, cb))),
                _ => {
                    apply_block(op, tmp, arg(a, None), arg(b, None));
                    add_into(o, Arg::Vec(tmp));
                }
            }
            // The node passes its last child (or a leaf itself) up: already in entry `d`
            // unless it is a folded leaf.
            entries[d] = entry_of(if ins.mode & BINARY != 0 { b } else { a });
        }
    }
    entries[0]
}
