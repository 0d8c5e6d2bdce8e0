//! From productions to program nodes (dialect page, section 4): each production of a rule used
//! as an expression compiles, once, to a small prefix *template* of tree nodes and holes, so a
//! derivation becomes a tensorized tree without ever parsing phenotype text.
//!
//! A production is lexed (terminals into numbers, names, operator symbols, brackets; each child
//! non-terminal kept as a token) and parsed as an expression with holes. Where a child stands
//! decides its role:
//! - an operand (`<e>+<e>`, `pdiv(<e>,<e>)`, `(<e>)`): a **hole**, filled by the child's own
//!   template; the child is then an expression rule too;
//! - an operator (`<e> <op> <e>`, `(<op> <e> <e>)`, `<f>(<e>)`): the node's opcode comes from the
//!   production the child chose, each of which must name an operator of the right arity;
//! - part of a number or variable index (`<c><c>.<c><c>`, `x[:, <i>]`, `x<i>`): the child's
//!   derived text is spliced in and read when the tree is built. Such *digit rules* derive only
//!   digits and `.`.
//!
//! Infix operators follow the usual precedence inside one production; across productions the
//! derivation's structure is the tree (so `<e>-<e>` whose right child derives `a+b` means
//! `x - (a + b)`, where PonyGE2, evaluating the text, would compute `(x - a) + b`).
//! Numbers are read by [`read_number`], an exact algorithm the CUDA mapper repeats.
//!
//! The templates are laid out for the GPU by [`Templates::to_device_blob`] and [`DeviceTables`];
//! a derivation becomes a tree through them in `genome::build` (the CPU twin of
//! `grove_map_trees` in `kernels/map.cu`).

mod expr;

use std::collections::HashMap;

use super::compile::{RuleTable, SymbolKind, unpack};
use super::{Diagnostic, Grammar, GrammarError, Span, Symbol};
use crate::program::Op;
use expr::{Role, parse_production};

/// One item of a production's template, in prefix order.
#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    /// A fixed node.
    Node {
        /// Operator.
        op: Op,
        /// Variable index or constant.
        value: f32,
    },
    /// The subtree of child `k` (the production's k-th child symbol).
    Hole(u16),
    /// A function node whose operator is named by the production child `k` chose.
    OpFrom(u16),
    /// `out(K, EXPR)`: the next node emitted (EXPR's root) becomes an output node for slot K,
    /// given literally or spelled by digit children.
    Output(Vec<Part>),
    /// A constant or variable spelled by text and digit children: the parts are joined and read.
    Spelled {
        /// Constant (`false`) or variable index (`true`).
        var: bool,
        /// Literal text and children, in order.
        parts: Vec<Part>,
    },
}

/// A piece of a spelled number.
#[derive(Clone, Debug, PartialEq)]
pub enum Part {
    /// Literal characters.
    Text(String),
    /// The text derived by child `k`.
    Child(u16),
}

/// Templates for every production of the rules a program's derivation passes through.
#[derive(Clone, Debug, Default)]
pub struct Templates {
    /// Per global production: its template, if its rule is an expression rule.
    pub expr: Vec<Option<Vec<Item>>>,
    /// Per global production: the operator it names, if its rule is an operator rule.
    /// A unit production `<op> ::= <other-op>` has `None` here and delegates to its child.
    pub op: Vec<Option<Op>>,
    /// Number of input variables; a variable index at or above is an error when building.
    pub n_vars: usize,
    /// Number of output slots programs have (0: single output, `out(…)` not allowed).
    pub n_outputs: usize,
}

/// Variable names a grammar may use besides `x0`, `x[0]`, `x[:, 0]`: the data set's columns.
#[derive(Clone, Debug, Default)]
pub struct Vars {
    /// Column names, by index.
    pub names: Vec<String>,
    /// Output slots of the task (classes, actuators); 0 for single-output tasks.
    pub n_outputs: usize,
}

/// Compiles templates for the expression rules reachable from the start rule.
pub fn compile(g: &Grammar, t: &RuleTable, vars: &Vars) -> Result<Templates, GrammarError> {
    let digit = digit_rules(g);
    let op_rule = operator_rules(g);
    // Names to indices once, so each name a production spells is found in constant time.
    let index: std::collections::HashMap<&str, usize> = vars.names.iter().enumerate().rev().map(|(i, n)| (n.as_str(), i)).collect();
    let index = expr::Index { vars, index };
    let mut out = Templates {
        expr: vec![None; t.productions.len()],
        op: vec![None; t.productions.len()],
        n_vars: vars.names.len(),
        n_outputs: vars.n_outputs,
    };
    let mut errors = Vec::new();
    let mut roles: HashMap<usize, Role> = HashMap::new();
    let mut work = vec![(0usize, Role::Expr)];
    roles.insert(0, Role::Expr);
    while let Some((r, role)) = work.pop() {
        let rule = &g.rules[r];
        for (k, p) in rule.productions.iter().enumerate() {
            let gp = t.rules[r].first_production as usize + k;
            let kids: Vec<Option<usize>> = child_rules(t, gp);
            let mut want = |child: usize, role: Role, span: Span, errors: &mut Vec<Diagnostic>| {
                match roles.get(&child) {
                    Some(&had) if had != role => errors.push(Diagnostic::error(
                        span,
                        format!("<{}> is used both as an operand and as an operator", g.rules[child].name),
                    )),
                    Some(_) => {}
                    None => {
                        roles.insert(child, role);
                        work.push((child, role));
                    }
                }
            };
            match role {
                Role::Expr => match parse_production(&p.symbols, &kids, &digit, &op_rule, &index) {
                    Ok((items, uses)) => {
                        for (k, role) in uses {
                            let span = child_span(&p.symbols, k as usize).unwrap_or(p.span);
                            if let Some(r) = kids[k as usize] {
                                want(r, role, span, &mut errors);
                            }
                        }
                        out.expr[gp] = Some(items);
                    }
                    Err(msg) => errors.push(Diagnostic::error(
                        p.span,
                        format!("production of <{}> cannot be read as an expression: {msg}", rule.name),
                    )),
                },
                Role::Op(arity) => {
                    let text: Option<String> = p.symbols.iter().map(|s| match s {
                        Symbol::Terminal { text, .. } => Some(text.as_str()),
                        _ => None,
                    }).collect();
                    match (text, kids.as_slice()) {
                        (Some(text), []) => match Op::by_name(text.trim()) {
                            Some(op) if op.arity() == arity as usize => out.op[gp] = Some(op),
                            Some(op) => errors.push(Diagnostic::error(
                                p.span,
                                format!("`{}` takes {} arguments where {arity} are given", op.name(), op.arity()),
                            )),
                            None => errors.push(Diagnostic::error(
                                p.span,
                                format!("<{}> is used as an operator, but `{}` is not a known operator", rule.name, text.trim()),
                            )),
                        },
                        (None, [Some(only)]) if p.symbols.len() == 1 => {
                            want(*only, Role::Op(arity), p.span, &mut errors);
                        }
                        _ => errors.push(Diagnostic::error(
                            p.span,
                            format!("<{}> is used as an operator, so each production must be one operator name", rule.name),
                        )),
                    }
                }
            }
        }
    }
    if errors.is_empty() {
        // Both tables must fit the GPU's constant memory together.
        if let Err(msg) = DeviceTables::new(t, &out) {
            errors.push(Diagnostic::error(g.rules[0].span, msg));
        }
    }
    if errors.is_empty() { Ok(out) } else { Err(GrammarError::new(&g.file, errors)) }
}

/// The rule of each child of production `gp`; `None` for a codon value.
fn child_rules(t: &RuleTable, gp: usize) -> Vec<Option<usize>> {
    t.children_of(gp).iter().map(|&s| match unpack(s) {
        (SymbolKind::NonTerminal, r) => Some(r),
        _ => None,
    }).collect()
}

fn child_span(symbols: &[Symbol], k: usize) -> Option<Span> {
    symbols.iter().filter(|s| !matches!(s, Symbol::Terminal { .. })).nth(k).map(Symbol::span)
}

/// Rules every production of which names one operator (`+`, `sin`, `pdiv`), directly or
/// through a unit production to another such rule.
fn operator_rules(g: &Grammar) -> Vec<bool> {
    let n = g.rules.len();
    let mut op = vec![true; n];
    loop {
        let mut changed = false;
        for r in 0..n {
            if !op[r] {
                continue;
            }
            let ok = g.rules[r].productions.iter().all(|p| match p.symbols.as_slice() {
                [Symbol::Terminal { text, .. }] => Op::by_name(text.trim()).is_some(),
                [Symbol::NonTerminal { name, .. }] => g.rule_index(name).is_some_and(|k| op[k] && k != r),
                _ => false,
            });
            if !ok {
                op[r] = false;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    op
}

/// Rules whose every derivation is digits and `.` only.
fn digit_rules(g: &Grammar) -> Vec<bool> {
    let n = g.rules.len();
    let mut digit = vec![true; n];
    loop {
        let mut changed = false;
        for r in 0..n {
            if !digit[r] {
                continue;
            }
            let ok = g.rules[r].productions.iter().all(|p| {
                p.symbols.iter().all(|s| match s {
                    Symbol::Terminal { text, .. } => text.chars().all(|c| c.is_ascii_digit() || c == '.'),
                    Symbol::NonTerminal { name, .. } => g.rule_index(name).is_some_and(|k| digit[k]),
                    Symbol::CodonRange { lo, .. } => *lo >= 0,
                    Symbol::CodonSet { values, .. } => values.iter().all(|v| v.chars().all(|c| c.is_ascii_digit() || c == '.')),
                })
            });
            if !ok {
                digit[r] = false;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    digit
}

/// Reads a decimal number (`12`, `0.5`, `.5`, `3.`, `1e-3`) exactly the way the CUDA builder
/// does (`grove_read_number` in `kernels/map.cu`): digits into an integer mantissa (at most 19
/// significant digits), a decimal exponent, then one f64 multiplication or division by a power
/// of ten ([`pow10`]) and rounding to f32.
pub fn read_number(text: &str) -> Option<f32> {
    let b = text.as_bytes();
    let (mut mant, mut exp, mut digits, mut seen_dot, mut i) = (0u64, 0i32, 0u32, false, 0usize);
    while i < b.len() {
        match b[i] {
            c @ b'0'..=b'9' => {
                if digits < 19 {
                    mant = mant * 10 + (c - b'0') as u64;
                    if mant > 0 {
                        digits += 1;
                    }
                    if seen_dot {
                        exp -= 1;
                    }
                } else if !seen_dot {
                    exp += 1;
                }
            }
            b'.' if !seen_dot => seen_dot = true,
            b'e' | b'E' => break,
            _ => return None,
        }
        i += 1;
    }
    if i == 0 || (i == 1 && seen_dot) {
        return None;
    }
    if i < b.len() {
        exp = exp.saturating_add(parse_i32(&b[i + 1..])?);
    }
    let m = mant as f64;
    let v = if exp >= 0 { m * pow10(exp.unsigned_abs().min(400)) } else { m / pow10(exp.unsigned_abs().min(400)) };
    Some(v as f32)
}

/// `10^n` in f64 by binary powering (square the base, multiply where `n` has a bit), the one
/// order of roundings `kernels/map.cu` repeats; exact up to `10^22`.
pub fn pow10(mut n: u32) -> f64 {
    let (mut r, mut a) = (1.0f64, 10.0f64);
    loop {
        if n & 1 == 1 {
            r *= a;
        }
        n >>= 1;
        if n == 0 {
            return r;
        }
        a *= a;
    }
}

/// Rust's `i32` parsing of ASCII text (an optional sign, then at least one digit; `None` on
/// anything else or overflow), written out so that the CUDA builder can repeat it.
fn parse_i32(b: &[u8]) -> Option<i32> {
    let (neg, digits) = match b.first() {
        Some(b'-') => (true, &b[1..]),
        Some(b'+') => (false, &b[1..]),
        _ => (false, b),
    };
    if digits.is_empty() {
        return None;
    }
    let mut v: i64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v * 10 + (c - b'0') as i64;
        if v > i32::MAX as i64 + 1 {
            return None;
        }
    }
    let v = if neg { -v } else { v };
    i32::try_from(v).ok()
}

/// Whether a terminal's text may stand in a spelled number (the characters number and index
/// reading can accept); the GPU builder keeps only such texts and fails on any other.
fn spellable(text: &str) -> bool {
    text.bytes().all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'+' | b'-' | b'e' | b'E'))
}

/// Item kinds of the device template table (`GROVE_ITEM_*` in `kernels/map.cu`).
pub mod item_kind {
    /// A fixed node: opcode in bits 8..16 of word 0, value in word 1.
    pub const NODE: u32 = 0;
    /// A child's subtree: child in bits 16..32.
    pub const HOLE: u32 = 1;
    /// A function node named by a child's operator production: child in bits 16..32.
    pub const OP_FROM: u32 = 2;
    /// `out(K, …)`: parts in word 1.
    pub const OUTPUT: u32 = 3;
    /// A spelled constant: parts in word 1.
    pub const SPELLED_CONST: u32 = 4;
    /// A spelled variable index: parts in word 1.
    pub const SPELLED_VAR: u32 = 5;
}

/// A text entry of the device table that is not spellable: reading it fails the spelling.
pub const TEXT_POISON: u32 = 0xffff_0000;
/// A part of the device table that names a child (else it is text: offset, length).
pub const PART_CHILD: u32 = 1 << 31;

impl Templates {
    /// The templates as one byte blob for the GPU builder, placed after the rule table in
    /// constant memory (`grove_map_trees` in `kernels/map.cu` reads it). Layout (little-endian
    /// `u32` words unless said; offsets in bytes from the blob's start):
    ///
    /// | section | element | count |
    /// |---|---|---|
    /// | header | 12 words: `n_productions, n_items, n_parts, n_terminals, n_set_values, n_vars, n_outputs, off_items, off_parts, off_terminals, off_sets, off_chars` | 1 |
    /// | productions | 2 words: `first_item \| n_items << 16` (`n_items` 0: not an expression production), operator code or `0xffff_ffff` | `n_productions` |
    /// | items | 2 words: `kind \| opcode << 8 \| child << 16`, then value bits or parts (`first \| n << 16`) | `n_items` |
    /// | parts | 1 word: [`PART_CHILD`]` \| child`, or text `offset \| length << 16` | `n_parts` |
    /// | terminals, set values | 1 word: text `offset \| length << 16`, or [`TEXT_POISON`] | as in the table |
    /// | characters | bytes | |
    pub fn to_device_blob(&self, t: &RuleTable) -> Vec<u8> {
        let mut prods: Vec<[u32; 2]> = Vec::with_capacity(self.expr.len());
        let (mut items, mut parts, mut chars): (Vec<[u32; 2]>, Vec<u32>, Vec<u8>) = (Vec::new(), Vec::new(), Vec::new());
        let text = |chars: &mut Vec<u8>, s: &str| -> u32 {
            let len = s.len().min(0x7fff);
            let off = chars.len() as u32;
            chars.extend_from_slice(&s.as_bytes()[..len]);
            off | (len as u32) << 16
        };
        for (p, tpl) in self.expr.iter().enumerate() {
            let op = self.op.get(p).copied().flatten().map_or(u32::MAX, |o| o as u32);
            let Some(tpl) = tpl else {
                prods.push([0, op]);
                continue;
            };
            prods.push([items.len() as u32 | (tpl.len() as u32) << 16, op]);
            for item in tpl {
                let ps = |list: &[Part], parts: &mut Vec<u32>, chars: &mut Vec<u8>| -> u32 {
                    let first = parts.len() as u32;
                    for part in list {
                        parts.push(match part {
                            Part::Text(s) => text(chars, s),
                            Part::Child(k) => PART_CHILD | *k as u32,
                        });
                    }
                    first | (list.len() as u32) << 16
                };
                items.push(match item {
                    Item::Node { op, value } => [item_kind::NODE | (*op as u32) << 8, value.to_bits()],
                    Item::Hole(k) => [item_kind::HOLE | (*k as u32) << 16, 0],
                    Item::OpFrom(k) => [item_kind::OP_FROM | (*k as u32) << 16, 0],
                    Item::Output(list) => [item_kind::OUTPUT, ps(list, &mut parts, &mut chars)],
                    Item::Spelled { var, parts: list } => {
                        let kind = if *var { item_kind::SPELLED_VAR } else { item_kind::SPELLED_CONST };
                        [kind, ps(list, &mut parts, &mut chars)]
                    }
                });
            }
        }
        let spelled = |chars: &mut Vec<u8>, s: &String| if spellable(s) { text(chars, s) } else { TEXT_POISON };
        let terms: Vec<u32> = t.terminals.iter().map(|s| spelled(&mut chars, s)).collect();
        let sets: Vec<u32> = t.set_values.iter().map(|s| spelled(&mut chars, s)).collect();
        let off_items = 48 + prods.len() * 8;
        let off_parts = off_items + items.len() * 8;
        let off_terms = off_parts + parts.len() * 4;
        let off_sets = off_terms + terms.len() * 4;
        let off_chars = off_sets + sets.len() * 4;
        let header = [
            prods.len(),
            items.len(),
            parts.len(),
            terms.len(),
            sets.len(),
            self.n_vars,
            self.n_outputs,
            off_items,
            off_parts,
            off_terms,
            off_sets,
            off_chars,
        ];
        let mut out = Vec::with_capacity(off_chars + chars.len() + 3);
        let words = header.iter().map(|&w| w as u32).chain(prods.iter().flatten().copied()).chain(items.iter().flatten().copied());
        for w in words.chain(parts).chain(terms).chain(sets) {
            out.extend_from_slice(&w.to_le_bytes());
        }
        out.extend_from_slice(&chars);
        out.resize(out.len().div_ceil(4) * 4, 0);
        out
    }
}

/// The rule table and the templates together, as the GPU builder's constant memory holds
/// them: the rule table's blob, then the templates' at [`DeviceTables::templates_at`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceTables {
    /// Both blobs, 4-byte aligned.
    pub blob: Vec<u8>,
    /// Byte offset of the templates.
    pub templates_at: usize,
}

impl DeviceTables {
    /// Lays out both tables; an error says which part is too large for constant memory.
    pub fn new(t: &RuleTable, tpl: &Templates) -> Result<Self, String> {
        let mut blob = t.to_device_blob();
        let templates_at = blob.len();
        let templates = tpl.to_device_blob(t);
        if templates_at + templates.len() > super::compile::TABLE_LIMIT_BYTES {
            return Err(format!(
                "the compiled rule table ({templates_at} bytes) and node templates ({} bytes) are {} bytes together; \
                 GPU constant memory holds {}",
                templates.len(),
                templates_at + templates.len(),
                super::compile::TABLE_LIMIT_BYTES
            ));
        }
        blob.extend_from_slice(&templates);
        Ok(Self { blob, templates_at })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::{DatasetShape, load_parsed, parse_str};

    #[test]
    fn unreadable_productions_are_clear_errors() {
        let g = parse_str("<e> ::= <e> ? <e> | x", "t.bnf", false).unwrap();
        let l = load_parsed(g, &DatasetShape::default()).unwrap();
        let e = compile(&l.grammar, &l.table, &Vars { names: vec!["x".into()], n_outputs: 0 }).unwrap_err();
        assert!(e.to_string().contains("t.bnf:1:9"), "{e}");
        let g = parse_str("<e> ::= <e> <op> <e> | x\n<op> ::= + | foo", "t.bnf", false).unwrap();
        let l = load_parsed(g, &DatasetShape::default()).unwrap();
        let e = compile(&l.grammar, &l.table, &Vars { names: vec!["x".into()], n_outputs: 0 }).unwrap_err();
        assert!(e.to_string().contains("<op> stands where an operator goes"), "{e}");
    }

    #[test]
    fn numbers_read_exactly() {
        assert_eq!(read_number("12.34"), Some(12.34f32));
        assert_eq!(read_number("00.04"), Some(0.04f32));
        assert_eq!(read_number(".5"), Some(0.5));
        assert_eq!(read_number("1e-3"), Some(0.001));
        assert_eq!(read_number("2.5E+2"), Some(250.0));
        assert_eq!(read_number("1.2.3"), None);
        assert_eq!(read_number("."), None);
        for s in ["0.1", "3.14159", "99.99", "1234567.891", "0.000123"] {
            assert_eq!(read_number(s), s.parse::<f32>().ok(), "{s}");
        }
    }
}
