//! From a derivation to a tree: the mapper's record (`genome::map`) walked through the
//! productions' templates (`grammar::template`) into prefix-order program nodes, with spelled
//! numbers, variable indices and output slots read on the way. The CPU twin of the builder half
//! of `grove_map_trees` (`kernels/map.cu`), which repeats this walk step for step.

use crate::grammar::compile::{RuleTable, SymbolKind, unpack};
use crate::grammar::template::{Item, MAX_SLOTS, Part, Spell, Templates, read_number};
use crate::program::Node;

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

/// Builds the tree of a complete derivation into `nodes` (cleared first).
/// `derivation` is the mapper's record: per expansion in prefix order, the production chosen
/// (or, for codon-value symbols, the offset chosen).
///
/// The walk is the one `grove_map_trees` (`kernels/map.cu`) makes: a stack of open templates,
/// each at its next item; a hole that is its template's last item replaces the template (so
/// chains like `(<e>)` take no room); an `out(K, …)` marks the next node emitted, and a later
/// mark before that node replaces it (the innermost `out` wins).
pub fn build_tree(
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

    fn tree(text: &str, vars: &[&str], genome: &[u32]) -> Vec<Node> {
        let (l, tpl) = setup(text, vars);
        let mut m = Mapper::new(&l.table, MapConfig::default());
        assert!(m.map(genome).valid());
        let (mut nodes, mut scratch) = (Vec::new(), Vec::new());
        build_tree(&l.table, &tpl, m.derivation(), 256, &mut nodes, &mut scratch).unwrap();
        nodes
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
        assert_eq!(build_tree(&l.table, &tpl, m.derivation(), 8, &mut nodes, &mut s), Err(BuildError::BadSpelling));
        assert!(m.map(&[0, 1, 1]).valid());
        build_tree(&l.table, &tpl, m.derivation(), 8, &mut nodes, &mut s).unwrap();
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
        assert_eq!(build_tree(&l.table, &tpl, m.derivation(), 2, &mut nodes, &mut s), Err(BuildError::TooLong));
    }
}
