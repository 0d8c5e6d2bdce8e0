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
//! A program means what its phenotype text says ([`Reading::Text`], the default): the text read
//! with Python's precedence and associativity, as PonyGE2 evaluates it, so `<e>-<e>` whose right
//! child derives `a+b` spells `x-a+b`, which is `(x - a) + b`. For that each production also
//! keeps its tokens in text order ([`Token`]), which the builder parses again with the
//! children's tokens in place (`genome::build`). [`Reading::Derivation`] keeps the derivation's
//! structure instead: each production's template, infix operators by precedence inside it, a
//! hole being its child whole (`x - (a + b)` above), for grammars written for it.
//! [`readings_differ`] tells where the two can disagree. Numbers are read by [`read_number`],
//! an exact algorithm the CUDA mapper repeats.
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
    /// A constant, variable or constant slot spelled by text and digit children: the parts are
    /// joined and read.
    Spelled {
        /// What the text spells.
        kind: Spell,
        /// Literal text and children, in order.
        parts: Vec<Part>,
    },
}

/// What a spelled item's text is read as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spell {
    /// A number: a constant leaf.
    Const,
    /// A variable index: a variable leaf.
    Var,
    /// The index `i` of a constant slot `c[i]`: an [`Op::Slot`] node of value `i` (below
    /// [`MAX_SLOTS`]); the item after it is the slot's constant leaf.
    Slot,
}

pub use crate::program::tree::MAX_SLOTS;

/// The value a constant slot `c[i]` starts at before fitting: scipy's `curve_fit` starts
/// there too (PonyGE2's `optimize_constants` starts L-BFGS-B at 0, where a product of two
/// constants or a protected division by one has no slope for a fit to follow).
pub const SLOT_START: f32 = 1.0;

/// A piece of a spelled number.
#[derive(Clone, Debug, PartialEq)]
pub enum Part {
    /// Literal characters.
    Text(String),
    /// The text derived by child `k`.
    Child(u16),
}

/// How a derivation becomes a program (`--reading`, a run's `map.reading`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Reading {
    /// What the phenotype text says under Python's precedence and associativity (PonyGE2's
    /// meaning): `x-<e>` with `<e>` deriving `a+b` is `(x-a)+b`.
    #[default]
    Text,
    /// The derivation tree's structure, each production's operators by precedence within it:
    /// `x-<e>` with `<e>` deriving `a+b` is `x-(a+b)` (for grammars written for it).
    Derivation,
}

impl Reading {
    /// What a run's settings written before readings existed meant: the derivation's.
    pub fn before_text() -> Self {
        Reading::Derivation
    }
}

/// One token of a production's text, in text order, for [`Reading::Text`]: the builder parses
/// a derivation's tokens by binding power, each hole replaced by its child's tokens.
#[derive(Clone, Debug, PartialEq)]
pub enum Token {
    /// An operand's node ([`Item::Node`] of a leaf, or [`Item::Spelled`]); a constant slot's
    /// `Slot` node (`c[i]`), which takes the constant token right after it as its operand.
    Node(Item),
    /// Child `k`'s tokens.
    Hole(u16),
    /// An infix operator and its binding powers (left, right).
    Binary {
        /// Operator.
        op: Op,
        /// Left binding power.
        lbp: u8,
        /// Right binding power.
        rbp: u8,
    },
    /// An infix operator named by the production child `k` chose ([`Templates::op_power`]).
    BinaryFrom(u16),
    /// A prefix operator (unary minus) and its right binding power.
    Prefix {
        /// Operator.
        op: Op,
        /// Right binding power.
        rbp: u8,
    },
    /// `name(`: a call's name and its opening parenthesis; its arguments are separated by
    /// [`Token::Comma`] and closed by [`Token::Close`] (a prefix form `(op a b)` reads so too).
    Call(Op),
    /// `<f>(`: a call whose function is named by the production child `k` chose.
    CallFrom(u16),
    /// `out(K,`: the output slot of the expression up to the matching [`Token::Close`].
    Out(Vec<Part>),
    /// `(` that only groups.
    Open,
    /// `)`.
    Close,
    /// `,` between a call's arguments.
    Comma,
}

/// Templates for every production of the rules a program's derivation passes through.
#[derive(Clone, Debug, Default)]
pub struct Templates {
    /// Per global production: its template, if its rule is an expression rule.
    pub expr: Vec<Option<Vec<Item>>>,
    /// Per global production: the operator it names, if its rule is an operator rule.
    /// A unit production `<op> ::= <other-op>` has `None` here and delegates to its child.
    pub op: Vec<Option<Op>>,
    /// Per global production: its tokens in text order, if its rule is an expression rule.
    pub text: Vec<Option<Vec<Token>>>,
    /// Per global production of an operator rule: the binding powers `(left, right)` of its
    /// operator written infix (`+ -` 1, 2; `* /` 3, 4; `** ^` 6, 5; a name 3, 4).
    pub op_power: Vec<(u8, u8)>,
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
        text: vec![None; t.productions.len()],
        op_power: vec![(0, 0); t.productions.len()],
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
                    Ok((items, uses, text)) => {
                        for (k, role) in uses {
                            let span = child_span(&p.symbols, k as usize).unwrap_or(p.span);
                            if let Some(r) = kids[k as usize] {
                                want(r, role, span, &mut errors);
                            }
                        }
                        if let Some(msg) = slot_index_past(g, &items, &kids) {
                            errors.push(Diagnostic::error(p.span, msg));
                        }
                        out.expr[gp] = Some(items);
                        out.text[gp] = Some(text);
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
                            Some(op) if op.arity() == arity as usize => {
                                out.op[gp] = Some(op);
                                out.op_power[gp] = expr::binary_power(text.trim()).map_or((3, 4), |(l, r, _)| (l, r));
                            }
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

/// Where a production spells a constant slot's index with one child (`c[<i>]`) whose rule
/// derives a number (`GE_RANGE:dataset_n_vars` gives `0 | 1 | …`), the first index past the
/// slots it can spell, as the error to report; `None` when every index it spells is a slot
/// (longer spellings are read when building: past the slots is an invalid individual).
fn slot_index_past(g: &Grammar, items: &[Item], kids: &[Option<usize>]) -> Option<String> {
    for item in items {
        let Item::Spelled { kind: Spell::Slot, parts } = item else { continue };
        let [Part::Child(k)] = parts.as_slice() else { continue };
        let Some(r) = kids[*k as usize] else { continue };
        let rule = &g.rules[r];
        let past = rule.productions.iter().filter_map(|p| match p.symbols.as_slice() {
            [Symbol::Terminal { text, .. }] => text.trim().parse::<u64>().ok(),
            _ => None,
        });
        if let Some(i) = past.filter(|&i| i >= MAX_SLOTS as u64).max() {
            return Some(format!(
                "c[<{}>] can spell c[{i}], but grove fits at most {MAX_SLOTS} constants, c[0] to c[{}]: give the index a rule of its own, e.g. <ci> ::= GE_RANGE:{MAX_SLOTS}",
                rule.name,
                MAX_SLOTS - 1
            ));
        }
    }
    None
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
    /// A spelled constant slot index (`c[<i>]`): parts in word 1.
    pub const SPELLED_SLOT: u32 = 6;
}

/// Token kinds of the device token table (`GROVE_TOKEN_*` in `kernels/map.cu`).
pub mod token_kind {
    /// A fixed node (a leaf, or a literal `c[i]`'s `Slot`): opcode in bits 8..16, value bits in word 1.
    pub const NODE: u32 = 0;
    /// A spelled constant: parts in word 1.
    pub const SPELLED_CONST: u32 = 1;
    /// A spelled variable index: parts in word 1.
    pub const SPELLED_VAR: u32 = 2;
    /// A spelled constant slot (`c[<i>]`'s `Slot`): parts in word 1.
    pub const SPELLED_SLOT: u32 = 3;
    /// A child's tokens: child in bits 16..32.
    pub const HOLE: u32 = 4;
    /// An infix operator: opcode in bits 8..16, `lbp | rbp << 8` in word 1.
    pub const BINARY: u32 = 5;
    /// An infix operator a child names: child in bits 16..32.
    pub const BINARY_FROM: u32 = 6;
    /// A prefix operator: opcode in bits 8..16, `rbp` in word 1.
    pub const PREFIX: u32 = 7;
    /// `name(`: opcode in bits 8..16.
    pub const CALL: u32 = 8;
    /// `<f>(`: child in bits 16..32.
    pub const CALL_FROM: u32 = 9;
    /// `out(K,`: parts in word 1.
    pub const OUT: u32 = 10;
    /// `(`.
    pub const OPEN: u32 = 11;
    /// `)`.
    pub const CLOSE: u32 = 12;
    /// `,`.
    pub const COMMA: u32 = 13;
}

/// A text entry of the device table that is not spellable: reading it fails the spelling.
pub const TEXT_POISON: u32 = 0xffff_0000;
/// A part of the device table that names a child (else it is text: offset, length).
pub const PART_CHILD: u32 = 1 << 31;

impl Templates {
    /// Whether a production writes a constant slot `c[i]` (whose value constant fitting
    /// chooses).
    pub fn has_slots(&self) -> bool {
        self.expr.iter().flatten().flatten().any(|i| matches!(i, Item::Node { op: Op::Slot, .. } | Item::Spelled { kind: Spell::Slot, .. }))
    }

    /// The templates as one byte blob for the GPU builder, placed after the rule table in
    /// constant memory (`grove_map_trees` in `kernels/map.cu` reads it). Layout (little-endian
    /// `u32` words unless said; offsets in bytes from the blob's start):
    ///
    /// | section | element | count |
    /// |---|---|---|
    /// | header | 14 words: `n_productions, n_items, n_parts, n_terminals, n_set_values, n_vars, n_outputs, off_items, off_parts, off_terminals, off_sets, off_chars, n_tokens, off_tokens` | 1 |
    /// | productions | 3 words: `first_item \| n_items << 16` (`n_items` 0: not an expression production); operator code `\| lbp << 8 \| rbp << 16` ([`Templates::op_power`]) or `0xffff_ffff`; `first_token \| n_tokens << 16` | `n_productions` |
    /// | items | 2 words: `kind \| opcode << 8 \| child << 16`, then value bits or parts (`first \| n << 16`) | `n_items` |
    /// | tokens | 2 words: [`token_kind`]` \| opcode << 8 \| child << 16`, then value bits, parts, or binding powers | `n_tokens` |
    /// | parts | 1 word: [`PART_CHILD`]` \| child`, or text `offset \| length << 16` | `n_parts` |
    /// | terminals, set values | 1 word: text `offset \| length << 16`, or [`TEXT_POISON`] | as in the table |
    /// | characters | bytes | |
    pub fn to_device_blob(&self, t: &RuleTable) -> Vec<u8> {
        let mut prods: Vec<[u32; 3]> = Vec::with_capacity(self.expr.len());
        let (mut items, mut parts, mut chars): (Vec<[u32; 2]>, Vec<u32>, Vec<u8>) = (Vec::new(), Vec::new(), Vec::new());
        let mut tokens: Vec<[u32; 2]> = Vec::new();
        let text = |chars: &mut Vec<u8>, s: &str| -> u32 {
            let len = s.len().min(0x7fff);
            let off = chars.len() as u32;
            chars.extend_from_slice(&s.as_bytes()[..len]);
            off | (len as u32) << 16
        };
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
        for (p, tpl) in self.expr.iter().enumerate() {
            let op = self.op.get(p).copied().flatten().map_or(u32::MAX, |o| {
                let (l, r) = self.op_power.get(p).copied().unwrap_or((3, 4));
                o as u32 | (l as u32) << 8 | (r as u32) << 16
            });
            let Some(tpl) = tpl else {
                prods.push([0, op, 0]);
                continue;
            };
            let toks = self.text.get(p).and_then(|t| t.as_deref()).unwrap_or(&[]);
            prods.push([items.len() as u32 | (tpl.len() as u32) << 16, op, tokens.len() as u32 | (toks.len() as u32) << 16]);
            for tok in toks {
                use token_kind as tk;
                let spelled = |kind: &Spell| match kind {
                    Spell::Const => tk::SPELLED_CONST,
                    Spell::Var => tk::SPELLED_VAR,
                    Spell::Slot => tk::SPELLED_SLOT,
                };
                tokens.push(match tok {
                    Token::Node(Item::Node { op, value }) => [tk::NODE | (*op as u32) << 8, value.to_bits()],
                    Token::Node(Item::Spelled { kind, parts: list }) => [spelled(kind), ps(list, &mut parts, &mut chars)],
                    Token::Node(other) => unreachable!("a token's node is a node or a spelling, not {other:?}"),
                    Token::Hole(k) => [tk::HOLE | (*k as u32) << 16, 0],
                    Token::Binary { op, lbp, rbp } => [tk::BINARY | (*op as u32) << 8, *lbp as u32 | (*rbp as u32) << 8],
                    Token::BinaryFrom(k) => [tk::BINARY_FROM | (*k as u32) << 16, 0],
                    Token::Prefix { op, rbp } => [tk::PREFIX | (*op as u32) << 8, *rbp as u32],
                    Token::Call(op) => [tk::CALL | (*op as u32) << 8, 0],
                    Token::CallFrom(k) => [tk::CALL_FROM | (*k as u32) << 16, 0],
                    Token::Out(list) => [tk::OUT, ps(list, &mut parts, &mut chars)],
                    Token::Open => [tk::OPEN, 0],
                    Token::Close => [tk::CLOSE, 0],
                    Token::Comma => [tk::COMMA, 0],
                });
            }
            for item in tpl {
                items.push(match item {
                    Item::Node { op, value } => [item_kind::NODE | (*op as u32) << 8, value.to_bits()],
                    Item::Hole(k) => [item_kind::HOLE | (*k as u32) << 16, 0],
                    Item::OpFrom(k) => [item_kind::OP_FROM | (*k as u32) << 16, 0],
                    Item::Output(list) => [item_kind::OUTPUT, ps(list, &mut parts, &mut chars)],
                    Item::Spelled { kind, parts: list } => {
                        let kind = match kind {
                            Spell::Const => item_kind::SPELLED_CONST,
                            Spell::Var => item_kind::SPELLED_VAR,
                            Spell::Slot => item_kind::SPELLED_SLOT,
                        };
                        [kind, ps(list, &mut parts, &mut chars)]
                    }
                });
            }
        }
        let spelled = |chars: &mut Vec<u8>, s: &String| if spellable(s) { text(chars, s) } else { TEXT_POISON };
        let terms: Vec<u32> = t.terminals.iter().map(|s| spelled(&mut chars, s)).collect();
        let sets: Vec<u32> = t.set_values.iter().map(|s| spelled(&mut chars, s)).collect();
        let off_items = 56 + prods.len() * 12;
        let off_tokens = off_items + items.len() * 8;
        let off_parts = off_tokens + tokens.len() * 8;
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
            tokens.len(),
            off_tokens,
        ];
        let mut out = Vec::with_capacity(off_chars + chars.len() + 3);
        let words = header
            .iter()
            .map(|&w| w as u32)
            .chain(prods.iter().flatten().copied())
            .chain(items.iter().flatten().copied())
            .chain(tokens.iter().flatten().copied());
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

/// The infix spelling of an operator in messages.
fn symbol(op: Op) -> &'static str {
    match op {
        Op::Add => "+",
        Op::Sub | Op::Neg => "-",
        Op::Mul => "*",
        Op::Div => "/",
        Op::Pow => "**",
        other => other.name(),
    }
}

/// The operators a rule's text can show outside any bracket, as binding powers: bit `p` of
/// `left` for an infix operator of left binding power `p`, of `right` for an infix or prefix
/// operator of right binding power `p`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Exposed {
    left: u32,
    right: u32,
}

/// The binding powers `(left, right)` an operator child (rule `r`) can give, through unit
/// productions; `seen` guards against a loop of them.
fn op_powers(g: &Grammar, t: &RuleTable, tpl: &Templates, r: usize, seen: &mut Vec<usize>, out: &mut Vec<(u8, u8, Op)>) {
    if seen.contains(&r) {
        return;
    }
    seen.push(r);
    let first = t.rules[r].first_production as usize;
    for (k, p) in g.rules[r].productions.iter().enumerate() {
        match tpl.op[first + k] {
            Some(op) => {
                let (l, rp) = tpl.op_power[first + k];
                out.push((l, rp, op));
            }
            None => {
                if let [Symbol::NonTerminal { name, .. }] = p.symbols.as_slice() {
                    if let Some(c) = g.rule_index(name) {
                        op_powers(g, t, tpl, c, seen, out);
                    }
                }
            }
        }
    }
}

/// Where a grammar's two [`Reading`]s can give different programs: one note per production with
/// an operand (a hole) whose child can derive, outside brackets, an operator that the operator
/// beside the hole would take apart in the text (`<e>-<e>` whose second `<e>` derives `a+b`
/// spells `x-a+b`, `(x-a)+b`; the derivation means `x-(a+b)`). A rule's operators count with
/// those its holes outside brackets can bring (a fixed point); a production's hole next to
/// `op` differs where its child shows an operator of left binding power below `op`'s right one
/// (on `op`'s right), or of right binding power at most `op`'s left one (on its left). Empty
/// when the readings always agree (every operator in brackets, or precedence by rules).
pub fn readings_differ(g: &Grammar, t: &RuleTable, tpl: &Templates) -> Vec<Diagnostic> {
    let rule_of = |gp: usize| t.rules.iter().rposition(|r| r.first_production as usize <= gp).unwrap_or(0);
    let child_rule = |gp: usize, k: u16| child_rules(t, gp).get(k as usize).copied().flatten();
    let powers = |gp: usize, k: u16| -> Vec<(u8, u8, Op)> {
        let mut out = Vec::new();
        if let Some(r) = child_rule(gp, k) {
            op_powers(g, t, tpl, r, &mut Vec::new(), &mut out);
        }
        out
    };
    // The depth-0 tokens of each expression production.
    let outside = |toks: &[Token]| -> Vec<(usize, Token)> {
        let mut depth = 0i32;
        let mut v = Vec::new();
        for (j, tok) in toks.iter().enumerate() {
            match tok {
                Token::Open | Token::Call(_) | Token::CallFrom(_) | Token::Out(_) => depth += 1,
                Token::Close => depth -= 1,
                _ if depth == 0 => v.push((j, tok.clone())),
                _ => {}
            }
        }
        v
    };
    let mut exposed = vec![Exposed::default(); t.rules.len()];
    loop {
        let mut changed = false;
        for (gp, toks) in tpl.text.iter().enumerate() {
            let Some(toks) = toks else { continue };
            let r = rule_of(gp);
            let mut e = exposed[r];
            for (_, tok) in outside(toks) {
                match tok {
                    Token::Binary { lbp, rbp, .. } => {
                        e.left |= 1 << lbp;
                        e.right |= 1 << rbp;
                    }
                    Token::BinaryFrom(k) => {
                        for (l, rp, _) in powers(gp, k) {
                            e.left |= 1 << l;
                            e.right |= 1 << rp;
                        }
                    }
                    Token::Prefix { rbp, .. } => e.right |= 1 << rbp,
                    Token::Hole(k) => {
                        if let Some(c) = child_rule(gp, k) {
                            e.left |= exposed[c].left;
                            e.right |= exposed[c].right;
                        }
                    }
                    _ => {}
                }
            }
            if e != exposed[r] {
                exposed[r] = e;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    // A representative operator for a binding power, for the messages.
    let by_left = |p: u32| match p {
        1 => "+",
        3 => "*",
        _ => "**",
    };
    let by_right = |p: u32| match p {
        2 => "+",
        4 => "*",
        _ => "** or a unary -",
    };
    let lowest = |mask: u32| mask.trailing_zeros();
    let mut notes = Vec::new();
    for (gp, toks) in tpl.text.iter().enumerate() {
        let Some(toks) = toks else { continue };
        let r = rule_of(gp);
        let production = &g.rules[r].productions[gp - t.rules[r].first_production as usize];
        let outer = outside(toks);
        let mut found: Option<String> = None;
        for (at, &(j, ref tok)) in outer.iter().enumerate() {
            let Token::Hole(k) = tok else { continue };
            let Some(c) = child_rule(gp, *k) else { continue };
            let ex = exposed[c];
            // (lbp, rbp, symbol, prefix) of the operator beside the hole.
            let beside = |n: Option<&(usize, Token)>| -> Vec<(u8, u8, &'static str, bool)> {
                match n {
                    Some((_, Token::Binary { op, lbp, rbp })) => vec![(*lbp, *rbp, symbol(*op), false)],
                    Some((_, Token::BinaryFrom(k))) => powers(gp, *k).into_iter().map(|(l, r, op)| (l, r, symbol(op), false)).collect(),
                    Some((_, Token::Prefix { op, rbp })) => vec![(0, *rbp, symbol(*op), true)],
                    _ => Vec::new(),
                }
            };
            // Only tokens next to the hole in the text count.
            let left = outer.get(at.wrapping_sub(1)).filter(|(i, _)| i + 1 == j);
            let right = outer.get(at + 1).filter(|(i, _)| *i == j + 1);
            let name = &g.rules[c].name;
            for (_, rbp, sym, prefix) in beside(left) {
                let looser = ex.left & ((1u32 << rbp) - 1);
                if looser != 0 && found.is_none() {
                    let c = by_left(lowest(looser));
                    let x = if prefix { "" } else { "x " };
                    found = Some(format!(
                        "where <{name}> after `{sym}` derives `a {c} b`, the text `{x}{sym} a {c} b` means `({x}{sym} a) {c} b`, the derivation `{x}{sym} (a {c} b)`"
                    ));
                }
            }
            for (lbp, _, sym, _) in beside(right) {
                let looser = ex.right & ((2u32 << lbp) - 1);
                if looser != 0 && found.is_none() {
                    let c = by_right(lowest(looser));
                    found = Some(match c {
                        "+" | "*" => format!("where <{name}> before `{sym}` derives `a {c} b`, the text `a {c} b {sym} x` means `a {c} (b {sym} x)`, the derivation `(a {c} b) {sym} x`"),
                        _ => format!("where <{name}> before `{sym}` derives `a ** b` or `-a`, the text `a ** b {sym} x` means `a ** (b {sym} x)`, the derivation `(a ** b) {sym} x`"),
                    });
                }
            }
        }
        if let Some(why) = found {
            notes.push(Diagnostic::note(
                production.span,
                format!("the phenotype text and the derivation can mean different programs: {why}; grove evaluates the text, as PonyGE2 and Python do (--reading derivation: the derivation's)"),
            ));
        }
    }
    notes
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

    fn differ(text: &str) -> Vec<String> {
        let g = parse_str(text, "t.bnf", false).unwrap();
        let l = load_parsed(g, &DatasetShape { n_vars: Some(2), ..Default::default() }).unwrap();
        let t = compile(&l.grammar, &l.table, &Vars { names: vec!["x".into(), "y".into()], n_outputs: 0 }).unwrap();
        readings_differ(&l.grammar, &l.table, &t).into_iter().map(|d| format!("{}: {}", d.span, d.message)).collect()
    }

    #[test]
    fn readings_differ_where_the_text_regroups_an_operand() {
        // PonyGE2's Vladislavleva-4: every infix production.
        let v4 = differ("<e> ::= <e>+<e>|<e>-<e>|<e>*<e>|pdiv(<e>,<e>)|x|<c><c>.<c><c>\n<c> ::= GE_RANGE:10");
        assert_eq!(v4.len(), 3, "{v4:?}");
        assert!(v4[1].starts_with("1:17: the phenotype text and the derivation can mean different programs"), "{v4:?}");
        assert!(v4[1].contains("the text `x - a + b` means `(x - a) + b`, the derivation `x - (a + b)`"), "{v4:?}");
        assert!(v4[2].contains("the text `a + b * x` means `a + (b * x)`, the derivation `(a + b) * x`"), "{v4:?}");
        // Right-associative powers: (a**b)**c against a**b**c.
        assert_eq!(differ("<e> ::= <e>**<e> | x").len(), 1);
        // An operator rule between operands: its operators' own powers.
        assert_eq!(differ("<e> ::= <e> <op> <e> | x\n<op> ::= + | *").len(), 1);
        // Unary minus over a product: -(a*x) against (-a)*x; (-a)*x alike.
        let neg = differ("<e> ::= -<e> | (<e>+<e>) | <e>*x | x");
        assert!(neg.len() == 1 && neg[0].starts_with("1:9:") && neg[0].contains("the text `- a * b` means `(- a) * b`"), "{neg:?}");
        // A power over a negation: (-a)**x against -a**x = -(a**x); -(a**x) alike.
        let pow = differ("<e> ::= -<e> | (<e>+<e>) | <e>**x | x");
        assert!(pow.len() == 1 && pow[0].starts_with("1:28:") && pow[0].contains("`-a`"), "{pow:?}");
        // Operators in brackets, calls, and precedence by rules read alike.
        assert!(differ("<e> ::= (<e>+<e>) | (<e>-<e>) | aq(<e>,<e>) | -<e> | x").is_empty());
        assert!(differ("<e> ::= (<op> <e> <e>) | x\n<op> ::= + | - | *").is_empty());
        assert!(differ("<e> ::= <e>+<t> | <e>-<t> | <t>\n<t> ::= <t>*<f> | <f>\n<f> ::= (<e>) | x | -<f> | <f>**<f>").len() == 1);
        assert!(differ("<e> ::= <e>+<t> | <e>-<t> | <t>\n<t> ::= <t>*<f> | <f>\n<f> ::= (<e>) | x | -<f> | <g>**<f>\n<g> ::= x | (<e>)").is_empty());
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
