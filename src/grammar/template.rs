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

use std::collections::HashMap;

use super::compile::{RuleTable, SymbolKind, unpack};
use super::{Diagnostic, Grammar, GrammarError, Span, Symbol};
use crate::program::Op;

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

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Num(String),
    Name(String),
    Sym(&'static str),
    Child(u16),
    /// A child whose rule is an operator rule (every production names an operator).
    OpChild(u16),
    /// A run of digits, `.` and digit-rule children with no space between.
    Digits(Vec<Part>),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Expr,
    Op(u8),
}

/// Compiles templates for the expression rules reachable from the start rule.
pub fn compile(g: &Grammar, t: &RuleTable, vars: &Vars) -> Result<Templates, GrammarError> {
    let digit = digit_rules(g);
    let op_rule = operator_rules(g);
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
                Role::Expr => match parse_production(&p.symbols, &kids, &digit, &op_rule, vars) {
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

/// Lexes a production's symbols into tokens.
/// A production flattened for lexing: its terminals' characters, each child one marker.
enum C {
    Ch(char),
    Kid(u16),
}

/// The run of digits, `.` and digit children starting at `i` (a spelled number when it holds a
/// child): its parts, the index after it, and whether a child is in it. An exponent (`1e-3`,
/// `2.5E+4`) joins the run only while no child has.
fn digit_run(stream: &[C], i: usize, is_digit_kid: impl Fn(u16) -> bool) -> (Vec<Part>, usize, bool) {
    let mut parts = Vec::new();
    let mut j = i;
    let mut has_kid = false;
    while j < stream.len() {
        match stream[j] {
            C::Kid(k) if is_digit_kid(k) => {
                has_kid = true;
                parts.push(Part::Child(k));
            }
            C::Ch(c) if c.is_ascii_digit() || c == '.' => match parts.last_mut() {
                Some(Part::Text(t)) => t.push(c),
                _ => parts.push(Part::Text(c.to_string())),
            },
            C::Ch(e @ ('e' | 'E')) if !has_kid => {
                let mut t = String::from(e);
                let mut m = j + 1;
                if let Some(C::Ch(s @ ('+' | '-'))) = stream.get(m) {
                    t.push(*s);
                    m += 1;
                }
                let start = m;
                while let Some(C::Ch(d)) = stream.get(m).filter(|c| matches!(c, C::Ch(d) if d.is_ascii_digit())) {
                    t.push(*d);
                    m += 1;
                }
                if m == start {
                    break;
                }
                if let Some(Part::Text(s)) = parts.last_mut() {
                    s.push_str(&t);
                }
                j = m;
                continue;
            }
            _ => break,
        }
        j += 1;
    }
    (parts, j, has_kid)
}

fn lex(symbols: &[Symbol], kids: &[Option<usize>], digit: &[bool], op_rule: &[bool]) -> Result<Vec<Tok>, String> {
    let mut stream = Vec::new();
    let mut k = 0u16;
    for s in symbols {
        match s {
            Symbol::Terminal { text, .. } => stream.extend(text.chars().map(C::Ch)),
            _ => {
                stream.push(C::Kid(k));
                k += 1;
            }
        }
    }
    // A codon value (`<GECodonValue[…]>`) is spelled, as digit rules are: alone it is a
    // constant (read as a number; a negative one does not read).
    let is_digit_kid = |k: u16| kids[k as usize].is_none_or(|r| digit[r]);
    let mut toks = Vec::new();
    let mut i = 0;
    while i < stream.len() {
        match stream[i] {
            C::Kid(k) => {
                // A digit child next to other digits or digit children joins a spelled number.
                let (parts, j, _) = digit_run(&stream, i, is_digit_kid);
                if is_digit_kid(k) && (parts.len() > 1 || kids[k as usize].is_none()) {
                    toks.push(Tok::Digits(parts));
                    i = j;
                } else if kids[k as usize].is_some_and(|r| op_rule[r]) {
                    toks.push(Tok::OpChild(k));
                    i += 1;
                } else {
                    toks.push(Tok::Child(k));
                    i += 1;
                }
            }
            C::Ch(c) if c.is_whitespace() => i += 1,
            C::Ch(c) if c.is_ascii_digit() || c == '.' => {
                let (mut parts, j, has_kid) = digit_run(&stream, i, is_digit_kid);
                if has_kid {
                    toks.push(Tok::Digits(parts));
                } else if let Some(Part::Text(t)) = parts.pop() {
                    toks.push(Tok::Num(t));
                }
                i = j;
            }
            C::Ch(c) if c.is_alphabetic() || c == '_' => {
                let mut name = String::new();
                let mut j = i;
                while let Some(C::Ch(c)) = stream.get(j) {
                    if c.is_alphanumeric() || *c == '_' || *c == '.' {
                        name.push(*c);
                        j += 1;
                    } else {
                        break;
                    }
                }
                toks.push(Tok::Name(name));
                i = j;
            }
            C::Ch(c) => {
                let two: String = match stream.get(i + 1) {
                    Some(C::Ch(d)) => [c, *d].iter().collect(),
                    _ => String::new(),
                };
                const SYMS: [&str; 13] = ["**", "+", "-", "*", "/", "^", "(", ")", "[", "]", ",", ":", "×"];
                if two == "**" {
                    toks.push(Tok::Sym("**"));
                    i += 2;
                } else if let Some(s) = SYMS.iter().find(|s| s.starts_with(c) && s.len() == c.len_utf8()) {
                    toks.push(Tok::Sym(s));
                    i += 1;
                } else if c == '÷' {
                    toks.push(Tok::Sym("/"));
                    i += 1;
                } else {
                    return Err(format!("unexpected character `{c}`"));
                }
            }
        }
    }
    Ok(toks)
}

struct P<'a> {
    kid_names: Vec<&'a str>,
    toks: Vec<Tok>,
    at: usize,
    vars: &'a Vars,
    uses: Vec<(u16, Role)>,
}

type Parsed = (Vec<Item>, Vec<(u16, Role)>);

fn parse_production<'a>(
    symbols: &'a [Symbol],
    kids: &[Option<usize>],
    digit: &[bool],
    op_rule: &[bool],
    vars: &'a Vars,
) -> Result<Parsed, String> {
    let toks = lex(symbols, kids, digit, op_rule)?;
    if toks.is_empty() {
        return Err("it is empty".into());
    }
    let kid_names = symbols
        .iter()
        .filter_map(|s| match s {
            Symbol::NonTerminal { name, .. } => Some(name.as_str()),
            Symbol::Terminal { .. } => None,
            _ => Some("GECodonValue"),
        })
        .collect();
    let mut p = P { kid_names, toks, at: 0, vars, uses: Vec::new() };
    let items = p.expr(0)?;
    if p.at != p.toks.len() {
        return Err(format!("unexpected {} after a complete expression", p.describe(p.at)));
    }
    Ok((items, p.uses))
}

fn binary_power(s: &str) -> Option<(u8, u8, Op)> {
    // (left binding power, right binding power, operator)
    Some(match s {
        "+" => (1, 2, Op::Add),
        "-" => (1, 2, Op::Sub),
        "*" | "×" => (3, 4, Op::Mul),
        "/" => (3, 4, Op::Div),
        "^" | "**" => (6, 5, Op::Pow),
        _ => return None,
    })
}

impl P<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.at)
    }

    fn describe(&self, at: usize) -> String {
        match self.toks.get(at) {
            Some(Tok::Num(n)) => format!("number `{n}`"),
            Some(Tok::Name(n)) => format!("name `{n}`"),
            Some(Tok::Sym(s)) => format!("`{s}`"),
            Some(Tok::Child(_)) => "non-terminal".into(),
            Some(Tok::OpChild(_)) => "operator non-terminal".into(),
            Some(Tok::Digits(_)) => "spelled number".into(),
            None => "end".into(),
        }
    }

    fn expect(&mut self, s: &str) -> Result<(), String> {
        if self.peek() == Some(&Tok::Sym(match s {
            "(" => "(",
            ")" => ")",
            "," => ",",
            "]" => "]",
            _ => return Err(format!("internal: expect {s}")),
        })) {
            self.at += 1;
            Ok(())
        } else {
            Err(format!("expected `{s}`, found {}", self.describe(self.at)))
        }
    }

    /// True if a primary expression can start at `at`.
    fn starts_primary(&self, at: usize) -> bool {
        matches!(self.toks.get(at), Some(Tok::Num(_) | Tok::Name(_) | Tok::Child(_) | Tok::OpChild(_) | Tok::Digits(_) | Tok::Sym("(" | "-")))
    }

    fn expr(&mut self, min_bp: u8) -> Result<Vec<Item>, String> {
        let mut lhs = self.prefix()?;
        loop {
            let (lbp, rbp, head) = match self.peek() {
                Some(Tok::Sym(s)) => match binary_power(s) {
                    Some((l, r, op)) => (l, r, Item::Node { op, value: 0.0 }),
                    None => break,
                },
                // `<e> <op> <e>`: an operator rule in operator position.
                Some(Tok::OpChild(k)) => (3, 4, Item::OpFrom(*k)),
                Some(Tok::Child(k)) if self.starts_primary(self.at + 1) => {
                    return Err(format!(
                        "<{}> stands where an operator goes, but not every production of it names \
                         an operator (+, -, *, /, sin, pdiv, …)",
                        self.kid_names[*k as usize]
                    ));
                }
                _ => break,
            };
            if lbp < min_bp {
                break;
            }
            if let Item::OpFrom(k) = head {
                self.uses.push((k, Role::Op(2)));
            }
            self.at += 1;
            let rhs = self.expr(rbp)?;
            let mut node = vec![head];
            node.extend(lhs);
            node.extend(rhs);
            lhs = node;
        }
        Ok(lhs)
    }

    fn args(&mut self) -> Result<Vec<Vec<Item>>, String> {
        self.expect("(")?;
        let mut args = vec![self.expr(0)?];
        while self.peek() == Some(&Tok::Sym(",")) {
            self.at += 1;
            args.push(self.expr(0)?);
        }
        self.expect(")")?;
        Ok(args)
    }

    fn prefix(&mut self) -> Result<Vec<Item>, String> {
        let at = self.at;
        let tok = self.toks.get(at).cloned().ok_or("it ends where an operand is expected")?;
        self.at += 1;
        match tok {
            Tok::Num(n) => {
                let v = read_number(&n).ok_or_else(|| format!("`{n}` is not a number"))?;
                Ok(vec![Item::Node { op: Op::Const, value: v }])
            }
            Tok::Digits(parts) => Ok(vec![Item::Spelled { var: false, parts }]),
            Tok::Sym("-") => {
                let operand = self.expr(5)?;
                let mut v = vec![Item::Node { op: Op::Neg, value: 0.0 }];
                v.extend(operand);
                Ok(v)
            }
            Tok::Sym("(") => {
                // Prefix form `(op a b)`, or grouping `(a)`.
                let save = (self.at, self.uses.len());
                if let Ok(items) = self.prefix_form() {
                    return Ok(items);
                }
                (self.at, _) = save;
                self.uses.truncate(save.1);
                let inner = self.expr(0)?;
                self.expect(")")?;
                Ok(inner)
            }
            Tok::OpChild(k) => {
                // `<f>(<e>)`: the function's name is chosen by an operator rule.
                let args = self.args()?;
                self.uses.push((k, Role::Op(args.len() as u8)));
                let mut v = vec![Item::OpFrom(k)];
                v.extend(args.into_iter().flatten());
                Ok(v)
            }
            Tok::Child(k) => {
                self.uses.push((k, Role::Expr));
                Ok(vec![Item::Hole(k)])
            }
            Tok::Name(name) => self.name(name),
            Tok::Sym(s) => Err(format!("`{s}` where an operand is expected")),
        }
    }

    /// After `(`: an operator (symbol, name or child) followed by its operands and `)`.
    fn prefix_form(&mut self) -> Result<Vec<Item>, String> {
        let head = match self.peek().cloned() {
            Some(Tok::Sym(s)) => match binary_power(s) {
                Some((_, _, op)) => Item::Node { op, value: 0.0 },
                None => return Err(String::new()),
            },
            Some(Tok::Name(n)) => match Op::by_name(&n) {
                Some(op) => Item::Node { op, value: 0.0 },
                None => return Err(String::new()),
            },
            Some(Tok::OpChild(k)) => Item::OpFrom(k),
            _ => return Err(String::new()),
        };
        self.at += 1;
        let mut operands = Vec::new();
        while self.peek() != Some(&Tok::Sym(")")) {
            if !self.starts_primary(self.at) || operands.len() == 2 {
                return Err(String::new());
            }
            operands.push(self.prefix()?);
        }
        self.at += 1;
        let n = operands.len();
        match &head {
            Item::Node { op, .. } if op.arity() == n => {}
            Item::OpFrom(k) if n >= 1 => self.uses.push((*k, Role::Op(n as u8))),
            _ => return Err(String::new()),
        }
        let mut v = vec![head];
        v.extend(operands.into_iter().flatten());
        Ok(v)
    }

    fn name(&mut self, name: String) -> Result<Vec<Item>, String> {
        // An output node: `out(K, EXPR)`.
        if name == "out" && self.peek() == Some(&Tok::Sym("(")) {
            if self.vars.n_outputs == 0 {
                return Err("`out(…)` makes an output node, but this task has a single output".into());
            }
            self.at += 1;
            let slot = match self.toks.get(self.at).cloned() {
                Some(Tok::Num(n)) => {
                    let k: usize = n.parse().map_err(|_| format!("`{n}` is not an output slot"))?;
                    if k >= self.vars.n_outputs {
                        return Err(format!("output slot {k} is past the task's {} outputs", self.vars.n_outputs));
                    }
                    vec![Part::Text(n)]
                }
                Some(Tok::Digits(parts)) => parts,
                // A digit rule (e.g. `GE_RANGE:dataset_n_os`): its text is read when building.
                Some(Tok::Child(k)) => vec![Part::Child(k)],
                _ => return Err("expected an output slot (a number or a digit rule) after `out(`".into()),
            };
            self.at += 1;
            self.expect(",")?;
            let body = self.expr(0)?;
            self.expect(")")?;
            let mut v = vec![Item::Output(slot)];
            v.extend(body);
            return Ok(v);
        }
        // A call: `pdiv(a, b)`, `np.sin(a)`.
        if self.peek() == Some(&Tok::Sym("(")) {
            let op = Op::by_name(&name).ok_or_else(|| format!("`{name}` is not a known function"))?;
            let args = self.args()?;
            if args.len() != op.arity() {
                return Err(format!("`{name}` takes {} arguments, given {}", op.arity(), args.len()));
            }
            let mut v = vec![Item::Node { op, value: 0.0 }];
            v.extend(args.into_iter().flatten());
            return Ok(v);
        }
        // `x[:, 0]`, `x[0]`, `x[:, <i>]`.
        if (name == "x" || name == "X") && self.peek() == Some(&Tok::Sym("[")) {
            self.at += 1;
            if self.peek() == Some(&Tok::Sym(":")) {
                self.at += 1;
                self.expect(",")?;
            }
            let item = match self.toks.get(self.at).cloned() {
                Some(Tok::Num(n)) => self.var_index(&n)?,
                Some(Tok::Digits(parts)) => Item::Spelled { var: true, parts },
                Some(Tok::Child(k)) => Item::Spelled { var: true, parts: vec![Part::Child(k)] },
                _ => return Err(format!("expected a variable index after `{name}[`")),
            };
            self.at += 1;
            self.expect("]")?;
            return Ok(vec![item]);
        }
        // `x0`, `X12`.
        if let Some(digits) = name.strip_prefix(['x', 'X']).filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit())) {
            if !self.vars.names.iter().any(|n| n == &name) {
                return Ok(vec![self.var_index(digits)?]);
            }
        }
        // `x<i>`: a spelled index right after the name.
        if (name == "x" || name == "X") && matches!(self.peek(), Some(Tok::Digits(_) | Tok::Child(_))) {
            let parts = match self.toks[self.at].clone() {
                Tok::Digits(parts) => parts,
                Tok::Child(k) => vec![Part::Child(k)],
                _ => unreachable!(),
            };
            self.at += 1;
            return Ok(vec![Item::Spelled { var: true, parts }]);
        }
        if let Some(i) = self.vars.names.iter().position(|n| n == &name) {
            return Ok(vec![Item::Node { op: Op::Var, value: i as f32 }]);
        }
        Err(format!("`{name}` is neither a function nor a variable of the data set"))
    }

    fn var_index(&self, digits: &str) -> Result<Item, String> {
        let i: u32 = digits.parse().map_err(|_| format!("`{digits}` is not a variable index"))?;
        if !self.vars.names.is_empty() && i as usize >= self.vars.names.len() {
            return Err(format!("variable x{i} is past the data set's {} variables", self.vars.names.len()));
        }
        Ok(Item::Node { op: Op::Var, value: i as f32 })
    }
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
    let mut stack: Vec<u16> = vec![super::compile::symbol(SymbolKind::NonTerminal, 0)];
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
    nodes: &mut Vec<crate::program::Node>,
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
            Item::Node { op, value } => crate::program::Node { op: *op, value: *value, out: 0 },
            Item::OpFrom(k) => {
                let mut c = child(e, *k);
                let op = loop {
                    match tpl.op[derivation[c] as usize] {
                        Some(op) => break op,
                        None => c += 1, // a unit production delegating to its only child
                    }
                };
                crate::program::Node::func(op)
            }
            Item::Spelled { var, parts } => {
                spell(t, derivation, span, e, parts, &mut text)?;
                if *var {
                    let i = parse_unsigned(&text, u32::MAX as u64).ok_or(BuildError::BadSpelling)?;
                    if tpl.n_vars > 0 && i as usize >= tpl.n_vars {
                        return Err(BuildError::BadSpelling);
                    }
                    crate::program::Node::var(i as u32)
                } else {
                    let s = std::str::from_utf8(&text).map_err(|_| BuildError::BadSpelling)?;
                    crate::program::Node::constant(read_number(s).ok_or(BuildError::BadSpelling)?)
                }
            }
        };
        node.out = std::mem::take(&mut mark);
        nodes.push(node);
    }
    Ok(())
}

/// Whether a terminal's text may stand in a spelled number (the characters number and index
/// reading can accept); the GPU builder keeps only such texts and fails on any other.
fn spellable(text: &str) -> bool {
    text.bytes().all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'+' | b'-' | b'e' | b'E'))
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
    use crate::genome::{MapConfig, Mapper};
    use crate::grammar::{DatasetShape, load_parsed, parse_str};
    use crate::program::Node;

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

    #[test]
    fn too_long_is_reported() {
        let (l, tpl) = setup(V4, &["a", "b"]);
        let mut m = Mapper::new(&l.table, MapConfig::default());
        assert!(m.map(&[0, 9, 10]).valid());
        let (mut nodes, mut s) = (Vec::new(), Vec::new());
        assert_eq!(build_tree(&l.table, &tpl, m.derivation(), 2, &mut nodes, &mut s), Err(BuildError::TooLong));
    }
}
