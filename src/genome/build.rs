//! From a derivation to a tree: the mapper's record (`genome::map`) read as its phenotype text
//! says ([`Reading::Text`]: the productions' tokens parsed again by binding power, Python's
//! precedence and associativity) or as the derivation is nested ([`Reading::Derivation`]: the
//! productions' templates), into prefix-order program nodes, with spelled numbers, variable
//! indices and output slots read on the way. The CPU twin of the builder half of
//! `grove_map_trees` (`kernels/map.cu`), which repeats these walks step for step.

use crate::grammar::compile::{RuleTable, SymbolKind, unpack};
use crate::grammar::template::{Item, MAX_SLOTS, Part, Reading, Spell, Templates, Token, read_number};
use crate::program::{Node, Op};

/// Rust's unsigned parsing of ASCII text (an optional `+`, then at least one digit), with
/// values above `max` answered `None`, as overflow is.
fn parse_unsigned(b: &[u8], max: u64) -> Option<u64> {
    let digits = b.strip_prefix(b"+").unwrap_or(b);
    if digits.is_empty() {
        return None;
    }
    let mut v: u64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((c - b'0') as u64)?;
        if v > max {
            return None;
        }
    }
    Some(v)
}

/// Longest text a spelled number, variable index or output slot may have; a longer one is a
/// bad spelling (an invalid individual) on both devices, so the GPU builder needs no more room.
pub const SPELL_CHARS: usize = 64;
/// Deepest nesting of rules the text of one spelled child may go through (counting only
/// non-terminals that are not the last symbol of their production); deeper is a bad spelling.
pub const SPELL_FRAMES: usize = 32;
/// Nested operands the tree builder keeps open at once (holes that are not the last item of
/// their template; a last one replaces its template). Each open one has emitted a node of its
/// own, so a tree of `L` nodes never needs more than `L - 1`: the GPU builder, with this many,
/// serves rows of up to this many nodes.
pub const BUILD_FRAMES: usize = 1024;

/// Why a derivation could not become a tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BuildError {
    /// More nodes than the row holds.
    TooLong,
    /// A spelled number, variable index or output slot did not read (`1.2.3`, a variable past
    /// the data set's, a slot past the outputs, more than [`SPELL_CHARS`] characters).
    BadSpelling,
    /// The text reading: productions open and operators waiting at once past
    /// [`BUILD_FRAMES`] (parentheses nested a thousand deep; Python's parser stops at 200).
    TooDeep,
}

/// The sub-derivation sizes and entry kinds of a derivation (the mapper's record: per expansion
/// in prefix order, the production chosen, or for codon-value symbols the offset chosen):
/// entry `e` spans `e .. e + span[e]`. The GPU builder marks codon-value entries with the top
/// bit of the derivation word instead of keeping `kinds`.
fn spans(t: &RuleTable, derivation: &[u32], span: &mut Vec<u32>, kinds: &mut Vec<u16>) -> Result<(), BuildError> {
    span.clear();
    span.resize(derivation.len(), 1);
    kinds.clear();
    let mut stack: Vec<u16> = vec![crate::grammar::compile::symbol(SymbolKind::NonTerminal, 0)];
    for &d in derivation {
        let s = stack.pop().ok_or(BuildError::TooLong)?;
        kinds.push(s);
        if unpack(s).0 == SymbolKind::NonTerminal {
            stack.extend(t.children_of(d as usize).iter().rev());
        }
    }
    for e in (0..derivation.len()).rev() {
        if unpack(kinds[e]).0 == SymbolKind::NonTerminal {
            let n_kids = t.productions[derivation[e] as usize].n_children as usize;
            let (mut s, mut c) = (1u32, e + 1);
            for _ in 0..n_kids {
                s += span[c];
                c += span[c] as usize;
            }
            span[e] = s;
        }
    }
    Ok(())
}

/// Builds the tree of a complete derivation into `nodes` (cleared first), read as `reading`
/// says. `derivation` is the mapper's record: per expansion in prefix order, the production
/// chosen (or, for codon-value symbols, the offset chosen).
pub fn build_tree(
    t: &RuleTable,
    tpl: &Templates,
    derivation: &[u32],
    reading: Reading,
    max_len: usize,
    nodes: &mut Vec<Node>,
    scratch: &mut Vec<u32>,
) -> Result<(), BuildError> {
    match reading {
        Reading::Text => build_text_tree(t, tpl, derivation, max_len, nodes, scratch),
        Reading::Derivation => build_derivation_tree(t, tpl, derivation, max_len, nodes, scratch),
    }
}

/// An operator waiting on the text reading's stack: an infix one, or a group an opening
/// token (in the backwards walk, a `)`) began, with the commas met in it.
#[derive(Clone, Copy, Debug)]
enum Pending {
    Binary { op: Op, lbp: u8 },
    Group { commas: u32 },
}

/// The operator a production child chose (an operator rule's production, through unit
/// productions that delegate to their only child): its production.
fn chosen_op(tpl: &Templates, derivation: &[u32], mut c: usize) -> usize {
    while tpl.op[derivation[c] as usize].is_none() {
        c += 1;
    }
    derivation[c] as usize
}

/// [`build_tree`] by the phenotype's text ([`Reading::Text`]), the walk `grove_map_trees`
/// repeats: the derivation's tokens (each production's [`Token`]s, a hole's being its child's)
/// are read from the last to the first and parsed by binding power, a shunting-yard run
/// backwards. Read so, it emits the nodes in reverse prefix order (each node after its
/// subtree, its last child's first), so the row is written from its end and reversed once.
/// Backwards, `)` opens a group and `(`, `name(` or `out(K,` closes it; an infix operator
/// first emits each waiting one it binds looser than (`lbp ≥ rbp` of the new one: its left
/// operand holds them), a prefix one those binding at least as tightly as its operand takes,
/// then applies at once. Productions still open (a hole that is not its production's first
/// token; a first one replaces its production) and operators waiting share [`BUILD_FRAMES`].
pub fn build_text_tree(t: &RuleTable, tpl: &Templates, derivation: &[u32], max_len: usize, nodes: &mut Vec<Node>, scratch: &mut Vec<u32>) -> Result<(), BuildError> {
    nodes.clear();
    let mut kinds = Vec::with_capacity(derivation.len());
    spans(t, derivation, scratch, &mut kinds)?;
    let span = &scratch[..];
    let child = |e: usize, k: u16| -> usize {
        let mut c = e + 1;
        for _ in 0..k {
            c += span[c] as usize;
        }
        c
    };
    let tokens = |e: usize| -> Result<&[Token], BuildError> { tpl.text[derivation[e] as usize].as_deref().ok_or(BadSpelling) };
    use BuildError::{BadSpelling, TooDeep, TooLong};
    // (derivation entry, tokens left) of each open production.
    let mut frames: Vec<(usize, usize)> = vec![(0, tokens(0)?.len())];
    let mut ops: Vec<Pending> = Vec::new();
    // Operands on the output: each emitted node takes its arity's and leaves one.
    let mut avail = 0usize;
    let mut text = Vec::with_capacity(SPELL_CHARS);
    let emit = |nodes: &mut Vec<Node>, avail: &mut usize, node: Node| -> Result<(), BuildError> {
        let a = node.op.arity();
        if *avail < a {
            return Err(BadSpelling);
        }
        if nodes.len() >= max_len {
            return Err(TooLong);
        }
        *avail = *avail - a + 1;
        nodes.push(node);
        Ok(())
    };
    // Emits waiting infix operators while `pops` says, down to a group.
    let unwind = |ops: &mut Vec<Pending>, nodes: &mut Vec<Node>, avail: &mut usize, pops: &dyn Fn(u8) -> bool| -> Result<(), BuildError> {
        while let Some(&Pending::Binary { op, lbp }) = ops.last() {
            if !pops(lbp) {
                break;
            }
            ops.pop();
            emit(nodes, avail, Node::func(op))?;
        }
        Ok(())
    };
    while let Some(&(e, i)) = frames.last() {
        if i == 0 {
            frames.pop();
            continue;
        }
        let top = frames.len() - 1;
        frames[top].1 = i - 1;
        match &tokens(e)?[i - 1] {
            Token::Hole(k) => {
                let c = child(e, *k);
                let n = tokens(c)?.len();
                if i == 1 {
                    frames[top] = (c, n);
                } else if frames.len() + ops.len() >= BUILD_FRAMES {
                    return Err(TooDeep);
                } else {
                    frames.push((c, n));
                }
            }
            Token::Node(item) => {
                let node = match item {
                    Item::Node { op, value } => Node { op: *op, value: *value, out: 0 },
                    Item::Spelled { kind, parts } => {
                        spell(t, derivation, span, e, parts, &mut text)?;
                        spelled_node(*kind, &text, tpl.n_vars)?
                    }
                    _ => return Err(BadSpelling),
                };
                emit(nodes, &mut avail, node)?;
            }
            Token::Binary { op, lbp, rbp } => {
                unwind(&mut ops, nodes, &mut avail, &|l| l >= *rbp)?;
                if frames.len() + ops.len() >= BUILD_FRAMES {
                    return Err(TooDeep);
                }
                ops.push(Pending::Binary { op: *op, lbp: *lbp });
            }
            Token::BinaryFrom(k) => {
                let q = chosen_op(tpl, derivation, child(e, *k));
                let op = tpl.op[q].ok_or(BadSpelling)?;
                let (lbp, rbp) = tpl.op_power[q];
                unwind(&mut ops, nodes, &mut avail, &|l| l >= rbp)?;
                if frames.len() + ops.len() >= BUILD_FRAMES {
                    return Err(TooDeep);
                }
                ops.push(Pending::Binary { op, lbp });
            }
            Token::Prefix { op, rbp } => {
                unwind(&mut ops, nodes, &mut avail, &|l| l >= *rbp)?;
                emit(nodes, &mut avail, Node::func(*op))?;
            }
            Token::Close => {
                if frames.len() + ops.len() >= BUILD_FRAMES {
                    return Err(TooDeep);
                }
                ops.push(Pending::Group { commas: 0 });
            }
            Token::Comma => {
                unwind(&mut ops, nodes, &mut avail, &|_| true)?;
                match ops.last_mut() {
                    Some(Pending::Group { commas }) => *commas += 1,
                    _ => return Err(BadSpelling),
                }
            }
            tok @ (Token::Open | Token::Call(_) | Token::CallFrom(_) | Token::Out(_)) => {
                unwind(&mut ops, nodes, &mut avail, &|_| true)?;
                let Some(Pending::Group { commas }) = ops.pop() else { return Err(BadSpelling) };
                match tok {
                    Token::Open if commas == 0 => {}
                    Token::Call(op) if commas as usize + 1 == op.arity() => emit(nodes, &mut avail, Node::func(*op))?,
                    Token::CallFrom(k) => {
                        let op = tpl.op[chosen_op(tpl, derivation, child(e, *k))].ok_or(BadSpelling)?;
                        if commas as usize + 1 != op.arity() {
                            return Err(BadSpelling);
                        }
                        emit(nodes, &mut avail, Node::func(op))?;
                    }
                    Token::Out(parts) if commas == 0 => {
                        spell(t, derivation, span, e, parts, &mut text)?;
                        let k = parse_unsigned(&text, u64::MAX).ok_or(BadSpelling)?;
                        if k >= tpl.n_outputs as u64 {
                            return Err(BadSpelling);
                        }
                        // The group's root, emitted last; an inner out(…) marked it first.
                        let root = nodes.last_mut().ok_or(BadSpelling)?;
                        if root.out == 0 {
                            root.out = k as u8 + 1;
                        }
                    }
                    _ => return Err(BadSpelling),
                }
            }
        }
    }
    unwind(&mut ops, nodes, &mut avail, &|_| true)?;
    if !ops.is_empty() || avail != 1 {
        return Err(BadSpelling);
    }
    nodes.reverse();
    Ok(())
}

/// [`build_tree`] by the derivation's nesting ([`Reading::Derivation`]).
///
/// The walk is the one `grove_map_trees` (`kernels/map.cu`) makes: a stack of open templates,
/// each at its next item; a hole that is its template's last item replaces the template (so
/// chains like `(<e>)` take no room); an `out(K, …)` marks the next node emitted, and a later
/// mark before that node replaces it (the innermost `out` wins).
pub fn build_derivation_tree(
    t: &RuleTable,
    tpl: &Templates,
    derivation: &[u32],
    max_len: usize,
    nodes: &mut Vec<Node>,
    scratch: &mut Vec<u32>,
) -> Result<(), BuildError> {
    nodes.clear();
    let mut kinds = Vec::with_capacity(derivation.len());
    spans(t, derivation, scratch, &mut kinds)?;
    let span = &scratch[..];
    let child = |e: usize, k: u16| -> usize {
        let mut c = e + 1;
        for _ in 0..k {
            c += span[c] as usize;
        }
        c
    };
    // (derivation entry, next item) of each open template.
    let mut frames: Vec<(usize, usize)> = vec![(0, 0)];
    let mut mark = 0u8;
    let mut text = Vec::with_capacity(SPELL_CHARS);
    while let Some(&(e, i)) = frames.last() {
        let items = tpl.expr[derivation[e] as usize].as_ref().ok_or(BuildError::BadSpelling)?;
        if i == items.len() {
            frames.pop();
            continue;
        }
        if nodes.len() >= max_len {
            return Err(BuildError::TooLong);
        }
        let top = frames.len() - 1;
        frames[top].1 += 1;
        let mut node = match &items[i] {
            Item::Output(parts) => {
                spell(t, derivation, span, e, parts, &mut text)?;
                let k = parse_unsigned(&text, u64::MAX).ok_or(BuildError::BadSpelling)?;
                if k >= tpl.n_outputs as u64 {
                    return Err(BuildError::BadSpelling);
                }
                mark = k as u8 + 1;
                continue;
            }
            Item::Hole(k) => {
                let c = child(e, *k);
                if i + 1 == items.len() {
                    frames[top] = (c, 0);
                } else {
                    debug_assert!(frames.len() < BUILD_FRAMES, "an open operand per emitted node");
                    frames.push((c, 0));
                }
                continue;
            }
            Item::Node { op, value } => Node { op: *op, value: *value, out: 0 },
            Item::OpFrom(k) => {
                let mut c = child(e, *k);
                let op = loop {
                    match tpl.op[derivation[c] as usize] {
                        Some(op) => break op,
                        None => c += 1, // a unit production delegating to its only child
                    }
                };
                Node::func(op)
            }
            Item::Spelled { kind, parts } => {
                spell(t, derivation, span, e, parts, &mut text)?;
                spelled_node(*kind, &text, tpl.n_vars)?
            }
        };
        node.out = std::mem::take(&mut mark);
        nodes.push(node);
    }
    Ok(())
}

/// The node a spelled item's text makes: a constant read by [`read_number`], a variable index
/// below `n_vars` (any when 0), or a constant slot's index below [`MAX_SLOTS`]; else a bad
/// spelling. Both builders (and the GPU's) read spellings so.
pub fn spelled_node(kind: Spell, text: &[u8], n_vars: usize) -> Result<Node, BuildError> {
    match kind {
        Spell::Var => {
            let i = parse_unsigned(text, u32::MAX as u64).ok_or(BuildError::BadSpelling)?;
            if n_vars > 0 && i as usize >= n_vars {
                return Err(BuildError::BadSpelling);
            }
            Ok(Node::var(i as u32))
        }
        Spell::Slot => {
            let i = parse_unsigned(text, MAX_SLOTS as u64 - 1).ok_or(BuildError::BadSpelling)?;
            Ok(Node { op: crate::program::Op::Slot, value: i as f32, out: 0 })
        }
        Spell::Const => {
            let s = std::str::from_utf8(text).map_err(|_| BuildError::BadSpelling)?;
            Ok(Node::constant(read_number(s).ok_or(BuildError::BadSpelling)?))
        }
    }
}

/// Joins literal text and the text derived by children (of derivation entry `e`) into `out`:
/// a bad spelling past [`SPELL_CHARS`] characters or [`SPELL_FRAMES`] nested rules.
fn spell(t: &RuleTable, derivation: &[u32], span: &[u32], e: usize, parts: &[Part], out: &mut Vec<u8>) -> Result<(), BuildError> {
    out.clear();
    let kids = t.children_of(derivation[e] as usize);
    let push = |out: &mut Vec<u8>, s: &[u8]| {
        out.extend_from_slice(s);
        if out.len() > SPELL_CHARS { Err(BuildError::BadSpelling) } else { Ok(()) }
    };
    for part in parts {
        match part {
            Part::Text(s) => push(out, s.as_bytes())?,
            Part::Child(k) => {
                let mut c = e + 1;
                for _ in 0..*k {
                    c += span[c] as usize;
                }
                // The child's text, walked as the GPU does: open productions with their next
                // symbol; the derivation read in order from `c`.
                let leaf = |out: &mut Vec<u8>, sym: u16, d: u32| -> Result<(), BuildError> {
                    let (kind, index) = unpack(sym);
                    let s = match kind {
                        SymbolKind::Terminal => t.terminals[index].clone(),
                        SymbolKind::CodonRange => (t.codon[index][0] as i64 + d as i64).to_string(),
                        _ => t.set_values[t.codon[index][0] as usize + d as usize].clone(),
                    };
                    out.extend_from_slice(s.as_bytes());
                    Ok(())
                };
                let sym = kids[*k as usize];
                if unpack(sym).0 != SymbolKind::NonTerminal {
                    leaf(out, sym, derivation[c])?;
                    push(out, b"")?;
                    continue;
                }
                let mut frames: Vec<(usize, usize)> = vec![(derivation[c] as usize, 0)];
                let mut next = c + 1;
                while let Some(&(q, j)) = frames.last() {
                    let syms = t.symbols_of(q);
                    if j == syms.len() {
                        frames.pop();
                        continue;
                    }
                    let top = frames.len() - 1;
                    frames[top].1 += 1;
                    let s = syms[j];
                    match unpack(s).0 {
                        SymbolKind::Terminal => leaf(out, s, 0)?,
                        SymbolKind::NonTerminal => {
                            let q2 = derivation[next] as usize;
                            next += 1;
                            if j + 1 == syms.len() {
                                frames[top] = (q2, 0);
                            } else if frames.len() == SPELL_FRAMES {
                                return Err(BuildError::BadSpelling);
                            } else {
                                frames.push((q2, 0));
                            }
                        }
                        _ => {
                            leaf(out, s, derivation[next])?;
                            next += 1;
                        }
                    }
                    push(out, b"")?;
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::genome::{MapConfig, Mapper};
    use crate::grammar::template::{Vars, compile};
    use crate::grammar::{DatasetShape, load_parsed, parse_str};
    use crate::program::Op;

    fn setup(text: &str, vars: &[&str]) -> (crate::grammar::Loaded, Templates) {
        let g = parse_str(text, "t.bnf", false).unwrap();
        let shape = DatasetShape { n_vars: Some(vars.len() as u32), n_is: None, n_os: Some(2) };
        let l = load_parsed(g, &shape).unwrap();
        let v = Vars { names: vars.iter().map(|s| s.to_string()).collect(), n_outputs: 2 };
        let tpl = compile(&l.grammar, &l.table, &v).unwrap_or_else(|e| panic!("{e}"));
        (l, tpl)
    }

    /// The tree of `genome` by each reading: (text, derivation).
    fn readings(text: &str, vars: &[&str], genome: &[u32]) -> (Vec<Node>, Vec<Node>) {
        let (l, tpl) = setup(text, vars);
        let mut m = Mapper::new(&l.table, MapConfig::default());
        assert!(m.map(genome).valid());
        let (mut a, mut b, mut scratch) = (Vec::new(), Vec::new(), Vec::new());
        build_tree(&l.table, &tpl, m.derivation(), Reading::Text, 256, &mut a, &mut scratch).unwrap();
        build_tree(&l.table, &tpl, m.derivation(), Reading::Derivation, 256, &mut b, &mut scratch).unwrap();
        (a, b)
    }

    /// The tree of `genome`, which both readings agree on.
    fn tree(text: &str, vars: &[&str], genome: &[u32]) -> Vec<Node> {
        let (a, b) = readings(text, vars, genome);
        assert_eq!(a, b, "the readings differ");
        a
    }

    fn strs(s: &[&str]) -> Vec<String> {
        s.iter().map(|s| s.to_string()).collect()
    }

    fn ops(nodes: &[Node]) -> Vec<String> {
        nodes.iter().map(|n| match n.op {
            Op::Var => format!("x{}", n.value),
            Op::Const => format!("{}", n.value),
            op => op.name().to_string(),
        }).collect()
    }

    const V4: &str = "<e> ::= <e>+<e>|<e>-<e>|<e>*<e>|pdiv(<e>,<e>)|psqrt(<e>)|np.sin(<e>)|np.tanh(<e>)|np.exp(<e>)|plog(<e>)|x[:, 0]|x[:, 1]|<c><c>.<c><c>\n<c> ::= GE_RANGE:10";

    #[test]
    fn ponyge2_style_productions() {
        assert_eq!(ops(&tree(V4, &["a", "b"], &[0, 9, 10])), ["add", "x0", "x1"]);
        assert_eq!(ops(&tree(V4, &["a", "b"], &[11, 1, 2, 3, 4])), ["12.34"]);
        assert_eq!(ops(&tree(V4, &["a", "b"], &[3, 5, 9, 10])), ["div", "sin", "x0", "x1"]);
    }

    #[test]
    fn operator_non_terminals_and_prefix_form() {
        let ge = "<expr> ::= (<op> <expr> <expr>) | <var>\n<op> ::= + | - | *\n<var> ::= x0 | 1.0";
        // (* x0 (+ 1.0 x0))
        assert_eq!(ops(&tree(ge, &["x0"], &[0, 2, 1, 0, 0, 0, 1, 1, 1, 0])), ["mul", "x0", "add", "1", "x0"]);
        let infix = "<e> ::= <e> <op> <e> | <f>(<e>) | x\n<op> ::= + | / | <mulop>\n<mulop> ::= *\n<f> ::= sin | np.exp";
        assert_eq!(ops(&tree(infix, &["x"], &[0, 2, 2, 0, 1, 1, 2])), ["mul", "x0", "exp", "x0"]);
    }

    // A report's formula `aq(-9.6 - (-8.9 - -3.3), …)` read back as `8.9 - --3.3` inside: text
    // that reads as a grouping and as a prefix form `(- a b)` was taken for the prefix form.
    #[test]
    fn brackets_that_read_as_an_expression_group_it() {
        let g = "<e> ::= (-8.9 - -3.3) | (- x -3.3) | (-<e> - <e>) | (- <e> <e>) | x | 2";
        assert_eq!(ops(&tree(g, &["x"], &[0])), ["sub", "neg", "8.9", "neg", "3.3"]);
        // Python reads `(- x -3.3)` as `(-x) - 3.3` too.
        assert_eq!(ops(&tree(g, &["x"], &[1])), ["sub", "neg", "x0", "3.3"]);
        assert_eq!(ops(&tree(g, &["x"], &[2, 4, 5])), ["sub", "neg", "x0", "2"]);
        assert_eq!(ops(&tree(g, &["x"], &[3, 4, 5])), ["sub", "x0", "2"]);
    }

    #[test]
    fn precedence_inside_one_production() {
        let g = "<e> ::= <e>+<e>*<e> | -<e> ^ 2 | x";
        assert_eq!(ops(&tree(g, &["x"], &[0, 2, 2, 2])), ["add", "x0", "mul", "x0", "x0"]);
        assert_eq!(ops(&tree(g, &["x"], &[1, 2])), ["neg", "pow", "x0", "2"]);
    }

    #[test]
    fn spelled_variables_and_column_names() {
        let g = "<e> ::= x[:, <i>] | x<i> | x[<i>] | height | (<e>)\n<i> ::= GE_RANGE:dataset_n_vars";
        assert_eq!(ops(&tree(g, &["a", "height"], &[0, 1])), ["x1"]);
        assert_eq!(ops(&tree(g, &["a", "height"], &[1, 0])), ["x0"]);
        assert_eq!(ops(&tree(g, &["a", "height"], &[2, 1])), ["x1"]);
        assert_eq!(ops(&tree(g, &["a", "height"], &[4, 3])), ["x1"]);
    }

    #[test]
    fn output_nodes() {
        let g = "<p> ::= out(0, <e>) + out(1, <e>*<e>) | out(<k>, <e>)\n<e> ::= x | 2\n<k> ::= GE_RANGE:dataset_n_os";
        let nodes = tree(g, &["x"], &[0, 0, 0, 1]);
        assert_eq!(ops(&nodes), ["add", "x0", "mul", "x0", "2"]);
        let outs: Vec<u8> = nodes.iter().map(|n| n.out).collect();
        assert_eq!(outs, [0, 1, 2, 0, 0]);
        let nodes = tree(g, &["x"], &[1, 1, 1]);
        assert_eq!((ops(&nodes), nodes[0].out), (vec!["2".to_string()], 2));
        // A single-output task refuses out(…).
        let gr = parse_str(g, "t.bnf", false).unwrap();
        let l = load_parsed(gr, &DatasetShape { n_os: Some(2), ..Default::default() }).unwrap();
        let e = compile(&l.grammar, &l.table, &Vars { names: vec!["x".into()], n_outputs: 0 }).unwrap_err();
        assert!(e.to_string().contains("single output"), "{e}");
    }

    #[test]
    fn a_grammars_constants_are_slots_over_their_start() {
        // PonyGE2's supervised_learning_consts: c[<idx>] with <idx> GE_RANGE:dataset_n_vars.
        let g = "<e> ::= (<e>+<e>) | (<e>*<e>) | x[:, <idx>] | c[<idx>] | c[2]\n<idx> ::= GE_RANGE:dataset_n_vars";
        let slot = |nodes: &[Node], i: usize| (nodes[i].op, nodes[i].value, nodes[i + 1].op, nodes[i + 1].value);
        // (c[1] * c[2])
        let nodes = tree(g, &["a", "b"], &[1, 3, 1, 4]);
        assert_eq!(nodes.len(), 5);
        assert_eq!(slot(&nodes, 1), (Op::Slot, 1.0, Op::Const, crate::grammar::template::SLOT_START));
        assert_eq!(slot(&nodes, 3), (Op::Slot, 2.0, Op::Const, crate::grammar::template::SLOT_START));
        // A spelled index past the slots is a bad spelling (an invalid individual).
        let (l, tpl) = setup("<e> ::= c[<d><d>]\n<d> ::= 0 | 1 | 6", &["a"]);
        let mut m = Mapper::new(&l.table, MapConfig::default());
        assert!(m.map(&[0, 1, 2]).valid());
        let (mut nodes, mut s) = (Vec::new(), Vec::new());
        for r in [Reading::Text, Reading::Derivation] {
            assert_eq!(build_tree(&l.table, &tpl, m.derivation(), r, 8, &mut nodes, &mut s), Err(BuildError::BadSpelling));
        }
        assert!(m.map(&[0, 1, 1]).valid());
        build_tree(&l.table, &tpl, m.derivation(), Reading::Text, 8, &mut nodes, &mut s).unwrap();
        assert_eq!((nodes[0].op, nodes[0].value), (Op::Slot, 11.0));
        assert!(tpl.has_slots());
    }

    #[test]
    fn constant_slots_past_sixteen_are_one_clear_line() {
        let compile_err = |text: &str, n_vars: u32| {
            let gr = parse_str(text, "t.bnf", false).unwrap();
            let l = load_parsed(gr, &DatasetShape { n_vars: Some(n_vars), ..Default::default() }).unwrap();
            let names = (0..n_vars).map(|i| format!("x{i}")).collect();
            compile(&l.grammar, &l.table, &Vars { names, n_outputs: 0 }).map(|_| ()).unwrap_err().to_string()
        };
        let e = compile_err("<e> ::= c[16] + x0 | x0", 1);
        assert!(e.contains("t.bnf:1:9") && e.contains("c[16] is past the constants grove fits: at most 16, c[0] to c[15]"), "{e}");
        // PonyGE2's consts grammar on data of 20 variables could spell c[19].
        let e = compile_err("<e> ::= (<e>+<e>) | x[:, <idx>] | c[<idx>]\n<idx> ::= GE_RANGE:dataset_n_vars", 20);
        assert!(e.contains("c[<idx>] can spell c[19], but grove fits at most 16 constants"), "{e}");
        assert!(e.contains("<ci> ::= GE_RANGE:16"), "{e}");
    }

    #[test]
    fn too_long_is_reported() {
        let (l, tpl) = setup(V4, &["a", "b"]);
        let mut m = Mapper::new(&l.table, MapConfig::default());
        assert!(m.map(&[0, 9, 10]).valid());
        let (mut nodes, mut s) = (Vec::new(), Vec::new());
        for r in [Reading::Text, Reading::Derivation] {
            assert_eq!(build_tree(&l.table, &tpl, m.derivation(), r, 2, &mut nodes, &mut s), Err(BuildError::TooLong));
        }
    }

    #[test]
    fn the_text_reads_by_pythons_precedence_and_associativity() {
        let g = "<e> ::= <e>-<e> | <e>+<e> | <e>*<e> | <e>**<e> | -<e> | x | y | z | (<e>)";
        let v = ["x", "y", "z"];
        // x-<e>, <e> = y+z: x-y+z is (x-y)+z; the derivation's x-(y+z).
        let (text, der) = readings(g, &v, &[0, 5, 1, 6, 7]);
        assert_eq!((ops(&text), ops(&der)), (strs(&["add", "sub", "x0", "x1", "x2"]), strs(&["sub", "x0", "add", "x1", "x2"])));
        // x*<e>, <e> = y-z: (x*y)-z.
        assert_eq!(ops(&readings(g, &v, &[2, 5, 0, 6, 7]).0), strs(&["sub", "mul", "x0", "x1", "x2"]));
        // -<e>, <e> = x+y: (-x)+y; <e> = x**y: -(x**y).
        assert_eq!(ops(&readings(g, &v, &[4, 1, 5, 6]).0), strs(&["add", "neg", "x0", "x1"]));
        assert_eq!(ops(&readings(g, &v, &[4, 3, 5, 6]).0), strs(&["neg", "pow", "x0", "x1"]));
        // <e>**z, <e> = -x: -x**z is -(x**z); <e> = x**y: x**y**z is x**(y**z).
        assert_eq!(ops(&readings(g, &v, &[3, 4, 5, 7]).0), strs(&["neg", "pow", "x0", "x2"]));
        let (text, der) = readings(g, &v, &[3, 3, 5, 6, 7]);
        assert_eq!((ops(&text), ops(&der)), (strs(&["pow", "x0", "pow", "x1", "x2"]), strs(&["pow", "pow", "x0", "x1", "x2"])));
        // x**<e>, <e> = -y*z: x**-y*z is (x**(-y))*z.
        assert_eq!(ops(&readings(g, &v, &[3, 5, 2, 4, 6, 7]).0), strs(&["mul", "pow", "x0", "neg", "x1", "x2"]));
        // Parentheses inside productions keep their content whole: x-(y+z).
        let (text, der) = readings(g, &v, &[0, 5, 8, 1, 6, 7]);
        assert_eq!(text, der);
    }

    #[test]
    fn operator_rules_calls_outputs_and_constants_in_the_text() {
        // <e> <op> <e> with * then y-z: the chosen operator's own precedence.
        let g = "<e> ::= <e> <op> <e> | pdiv(<e>, <e>) | x | y | z\n<op> ::= - | <mul>\n<mul> ::= *";
        let v = ["x", "y", "z"];
        let (text, der) = readings(g, &v, &[0, 2, 1, 0, 0, 3, 0, 4]);
        assert_eq!((ops(&text), ops(&der)), (strs(&["sub", "mul", "x0", "x1", "x2"]), strs(&["mul", "x0", "sub", "x1", "x2"])));
        // A call's arguments are whole: pdiv(x-y, z) alike.
        assert_eq!(ops(&tree(g, &v, &[1, 0, 2, 0, 3, 4])), strs(&["div", "sub", "x0", "x1", "x2"]));
        // c[i] under an operator of the text: c[0]*x+y is (c[0]*x)+y.
        let g = "<e> ::= c[0]*<e> | <e>+<e> | x | y";
        let (text, _) = readings(g, &["x", "y"], &[0, 1, 2, 3]);
        assert_eq!(ops(&text), strs(&["add", "mul", "slot", "1", "x0", "x1"]));
        assert_eq!(text[2].value, 0.0);
        // out(K, …) marks its expression's root in the text too.
        let g = "<p> ::= out(1, <e>) + <e>*<e>\n<e> ::= x-<e> | y";
        let (text, der) = readings(g, &["x", "y"], &[0, 0, 1, 1, 0, 1]);
        // out(1, x-y) + y*x-y is (out(1, x-y) + y*x) - y.
        assert_eq!(ops(&text), strs(&["sub", "add", "sub", "x0", "x1", "mul", "x1", "x0", "x1"]));
        assert_eq!(text.iter().map(|n| n.out).collect::<Vec<_>>(), [0, 0, 2, 0, 0, 0, 0, 0, 0]);
        assert_ne!(text, der);
    }

    #[test]
    fn the_text_reading_bounds_its_nesting() {
        // ((((…x…)))) 600 deep: one node, but 600 productions open and 600 groups waiting.
        let (l, tpl) = setup("<e> ::= (<e>) | x", &["x"]);
        let mut genome = vec![0u32; 600];
        genome.push(1);
        let mut m = Mapper::new(&l.table, MapConfig::default());
        assert!(m.map(&genome).valid());
        let (mut nodes, mut s) = (Vec::new(), Vec::new());
        assert_eq!(build_tree(&l.table, &tpl, m.derivation(), Reading::Text, 8, &mut nodes, &mut s), Err(BuildError::TooDeep));
        build_tree(&l.table, &tpl, m.derivation(), Reading::Derivation, 8, &mut nodes, &mut s).unwrap();
        assert_eq!(ops(&nodes), ["x0"]);
        // 200 deep fits.
        let mut genome = vec![0u32; 200];
        genome.push(1);
        assert!(m.map(&genome).valid());
        build_tree(&l.table, &tpl, m.derivation(), Reading::Text, 8, &mut nodes, &mut s).unwrap();
        assert_eq!(ops(&nodes), ["x0"]);
    }

}
