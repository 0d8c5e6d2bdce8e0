//! One production's text read as an expression with holes: lexed (terminals into numbers,
//! names, operator symbols, brackets; each child non-terminal one token) and parsed by binding
//! power into the prefix template [`super::compile`] stores, and, as the parse reads them, into
//! the production's tokens in text order ([`Token`], what the text reading parses again with
//! the children's tokens in place).

use super::{Item, MAX_SLOTS, Part, SLOT_START, Spell, Token, Vars, read_number};
use crate::grammar::Symbol;
use crate::program::Op;

/// A token of a production's text.
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

/// What a rule stands for where a production uses it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Role {
    /// An operand: its productions are expressions.
    Expr,
    /// An operator of this arity: each production names one.
    Op(u8),
}

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

/// Lexes a production's symbols into tokens.
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

/// The data set's variables with their names looked up in constant time.
pub(super) struct Index<'a> {
    /// The variables.
    pub vars: &'a Vars,
    /// Each name's first index.
    pub index: std::collections::HashMap<&'a str, usize>,
}

/// How deep operands may nest in one production (parentheses, unary minus, right-associative
/// `^` chains, calls): deeper is refused in one line rather than recursing without bound.
pub const MAX_NESTING: usize = 256;

/// A parse of the primary at a `(` token: its items, where it ended, the uses and the text
/// tokens it added.
type Group = Result<(Vec<Item>, usize, Vec<(u16, Role)>, Vec<Token>), String>;

struct P<'a> {
    kid_names: Vec<&'a str>,
    toks: Vec<Tok>,
    at: usize,
    vars: &'a Vars,
    index: &'a std::collections::HashMap<&'a str, usize>,
    uses: Vec<(u16, Role)>,
    /// The production's tokens in text order, as the parse reads them.
    text: Vec<Token>,
    /// How deep the primary being read is.
    depth: usize,
    /// Each `(`'s primary, once read: a `(` is read as a group and, where that fails, as a
    /// prefix form, which would read what is inside twice at every level (exponential time).
    groups: std::collections::HashMap<usize, Group>,
}

/// A production's template, the role of each child it uses, and its tokens.
type Parsed = (Vec<Item>, Vec<(u16, Role)>, Vec<Token>);

/// Parses a production as an expression with holes: its template, and the role each child
/// non-terminal takes in it.
pub(super) fn parse_production<'a>(
    symbols: &'a [Symbol],
    kids: &[Option<usize>],
    digit: &[bool],
    op_rule: &[bool],
    index: &'a Index<'a>,
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
    let mut p = P { kid_names, toks, at: 0, vars: index.vars, index: &index.index, uses: Vec::new(), text: Vec::new(), depth: 0, groups: Default::default() };
    let items = p.expr(0)?;
    if p.at != p.toks.len() {
        return Err(format!("unexpected {} after a complete expression", p.describe(p.at)));
    }
    Ok((items, p.uses, p.text))
}

/// Binding power of unary minus: tighter than `*` and `/`, looser than `**` on its right, as in
/// Python (`-a**b` is `-(a**b)`, `a**-b` is `a**(-b)`, `-a*b` is `(-a)*b`).
pub(super) const NEG_POWER: u8 = 5;

/// `(left binding power, right binding power, operator)` of an infix symbol: `+ -` (1, 2),
/// `* /` (3, 4), `** ^` (6, 5, right-associative): Python's precedence and associativity.
pub(super) fn binary_power(s: &str) -> Option<(u8, u8, Op)> {
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
        // A deque: a long left-associative chain (`a + b + c + …`) puts each operator in front
        // of what came before, which a vector would copy each time (quadratic time).
        let mut lhs: std::collections::VecDeque<Item> = self.prefix()?.into();
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
            match head {
                Item::OpFrom(k) => {
                    self.uses.push((k, Role::Op(2)));
                    self.text.push(Token::BinaryFrom(k));
                }
                Item::Node { op, .. } => self.text.push(Token::Binary { op, lbp, rbp }),
                _ => {}
            }
            self.at += 1;
            let rhs = self.expr(rbp)?;
            // `head lhs rhs`, copying the shorter side only.
            if lhs.len() >= rhs.len() {
                lhs.push_front(head);
                lhs.extend(rhs);
            } else {
                let mut node: std::collections::VecDeque<Item> = rhs.into();
                while let Some(x) = lhs.pop_back() {
                    node.push_front(x);
                }
                node.push_front(head);
                lhs = node;
            }
        }
        Ok(lhs.into())
    }

    /// `(a, b)` after a call's name (whose token holds the `(`).
    fn args(&mut self) -> Result<Vec<Vec<Item>>, String> {
        self.expect("(")?;
        let mut args = vec![self.expr(0)?];
        while self.peek() == Some(&Tok::Sym(",")) {
            self.at += 1;
            self.text.push(Token::Comma);
            args.push(self.expr(0)?);
        }
        self.expect(")")?;
        self.text.push(Token::Close);
        Ok(args)
    }

    fn prefix(&mut self) -> Result<Vec<Item>, String> {
        if self.depth >= MAX_NESTING {
            return Err(format!("operands nest more than {MAX_NESTING} deep (parentheses, calls, signs or `^` chains)"));
        }
        self.depth += 1;
        let r = self.primary();
        self.depth -= 1;
        r
    }

    fn primary(&mut self) -> Result<Vec<Item>, String> {
        let at = self.at;
        let tok = self.toks.get(at).cloned().ok_or("it ends where an operand is expected")?;
        self.at += 1;
        match tok {
            Tok::Num(n) => {
                let shown = || crate::input::clip(&n, crate::input::ECHO);
                let v = read_number(&n).ok_or_else(|| format!("`{}` is not a number", shown()))?;
                // A constant past f32's range would be infinite in every program that uses it.
                if !v.is_finite() {
                    return Err(format!("the constant `{}` is beyond f32's range (magnitudes up to 3.4e38)", shown()));
                }
                Ok(self.leaf(Item::Node { op: Op::Const, value: v }))
            }
            Tok::Digits(parts) => Ok(self.leaf(Item::Spelled { kind: Spell::Const, parts })),
            Tok::Sym("-") => {
                self.text.push(Token::Prefix { op: Op::Neg, rbp: NEG_POWER });
                let operand = self.expr(NEG_POWER)?;
                let mut v = vec![Item::Node { op: Op::Neg, value: 0.0 }];
                v.extend(operand);
                Ok(v)
            }
            Tok::Sym("(") => {
                if let Some(g) = self.groups.get(&at).cloned() {
                    return g.map(|(items, end, uses, text)| {
                        self.at = end;
                        self.uses.extend(uses);
                        self.text.extend(text);
                        items
                    });
                }
                let (uses0, text0) = (self.uses.len(), self.text.len());
                let read = self.group_or_prefix_form();
                let group = read.clone().map(|items| (items, self.at, self.uses[uses0.min(self.uses.len())..].to_vec(), self.text[text0.min(self.text.len())..].to_vec()));
                self.groups.insert(at, group);
                read
            }
            Tok::OpChild(k) => {
                // `<f>(<e>)`: the function's name is chosen by an operator rule.
                self.text.push(Token::CallFrom(k));
                let args = self.args()?;
                self.uses.push((k, Role::Op(args.len() as u8)));
                let mut v = vec![Item::OpFrom(k)];
                v.extend(args.into_iter().flatten());
                Ok(v)
            }
            Tok::Child(k) => {
                self.uses.push((k, Role::Expr));
                self.text.push(Token::Hole(k));
                Ok(vec![Item::Hole(k)])
            }
            Tok::Name(name) => self.name(name),
            Tok::Sym(s) => Err(format!("`{s}` where an operand is expected")),
        }
    }

    /// After `(` (at `self.at - 1`): grouping `(a)`, as Python reads it, or else the prefix
    /// form `(op a b)`: text that reads both ways is a grouping (`(-a - b)` is `(-a) - b`, not
    /// `sub(a, -b)`).
    fn group_or_prefix_form(&mut self) -> Result<Vec<Item>, String> {
        let save = (self.at, self.uses.len(), self.text.len());
        self.text.push(Token::Open);
        let grouped = self.expr(0).and_then(|inner| {
            self.expect(")")?;
            self.text.push(Token::Close);
            Ok(inner)
        });
        if grouped.is_ok() {
            return grouped;
        }
        (self.at, _, _) = save;
        self.uses.truncate(save.1);
        self.text.truncate(save.2);
        match self.prefix_form() {
            Ok(items) => Ok(items),
            // Neither: the grouping's complaint.
            Err(_) => {
                (self.at, _, _) = save;
                self.uses.truncate(save.1);
                self.text.truncate(save.2);
                grouped
            }
        }
    }

    /// An operand of one node: its item, and its token.
    fn leaf(&mut self, item: Item) -> Vec<Item> {
        self.text.push(Token::Node(item.clone()));
        vec![item]
    }

    /// After `(`: an operator (symbol, name or child) followed by its operands and `)`; its
    /// tokens those of the call `op(a, b)`, which the text means alike.
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
        self.text.push(match head {
            Item::Node { op, .. } => Token::Call(op),
            Item::OpFrom(k) => Token::CallFrom(k),
            _ => unreachable!("a head is a node or an operator child"),
        });
        self.at += 1;
        let mut operands = Vec::new();
        while self.peek() != Some(&Tok::Sym(")")) {
            if !self.starts_primary(self.at) || operands.len() == 2 {
                return Err(String::new());
            }
            if !operands.is_empty() {
                self.text.push(Token::Comma);
            }
            operands.push(self.prefix()?);
        }
        self.at += 1;
        self.text.push(Token::Close);
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
            self.text.push(Token::Out(slot.clone()));
            let body = self.expr(0)?;
            self.expect(")")?;
            self.text.push(Token::Close);
            let mut v = vec![Item::Output(slot)];
            v.extend(body);
            return Ok(v);
        }
        // A call: `pdiv(a, b)`, `np.sin(a)`.
        if self.peek() == Some(&Tok::Sym("(")) {
            let op = Op::by_name(&name).ok_or_else(|| format!("`{name}` is not a known function"))?;
            self.text.push(Token::Call(op));
            let args = self.args()?;
            if args.len() != op.arity() {
                return Err(format!("`{name}` takes {} arguments, given {}", op.arity(), args.len()));
            }
            let mut v = vec![Item::Node { op, value: 0.0 }];
            v.extend(args.into_iter().flatten());
            return Ok(v);
        }
        // A constant slot, PonyGE2's `c[0]`, `c[<i>]` (fitted: `Slot(Const)`).
        if name == "c" && self.peek() == Some(&Tok::Sym("[")) {
            self.at += 1;
            let slot = match self.toks.get(self.at).cloned() {
                Some(Tok::Num(n)) => {
                    let i: usize = n.parse().map_err(|_| format!("`c[{n}]`: a constant's index is a whole number"))?;
                    if i >= MAX_SLOTS {
                        return Err(format!("c[{i}] is past the constants grove fits: at most {MAX_SLOTS}, c[0] to c[{}]", MAX_SLOTS - 1));
                    }
                    Item::Node { op: Op::Slot, value: i as f32 }
                }
                Some(Tok::Digits(parts)) => Item::Spelled { kind: Spell::Slot, parts },
                Some(Tok::Child(k)) => Item::Spelled { kind: Spell::Slot, parts: vec![Part::Child(k)] },
                _ => return Err("expected a constant's index after `c[`".into()),
            };
            self.at += 1;
            self.expect("]")?;
            let start = Item::Node { op: Op::Const, value: SLOT_START };
            self.text.push(Token::Node(slot.clone()));
            self.text.push(Token::Node(start.clone()));
            return Ok(vec![slot, start]);
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
                Some(Tok::Digits(parts)) => Item::Spelled { kind: Spell::Var, parts },
                Some(Tok::Child(k)) => Item::Spelled { kind: Spell::Var, parts: vec![Part::Child(k)] },
                _ => return Err(format!("expected a variable index after `{name}[`")),
            };
            self.at += 1;
            self.expect("]")?;
            return Ok(self.leaf(item));
        }
        // `x0`, `X12`.
        if let Some(digits) = name.strip_prefix(['x', 'X']).filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit())) {
            if !self.index.contains_key(name.as_str()) {
                let item = self.var_index(digits)?;
                return Ok(self.leaf(item));
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
            return Ok(self.leaf(Item::Spelled { kind: Spell::Var, parts }));
        }
        if let Some(&i) = self.index.get(name.as_str()) {
            return Ok(self.leaf(Item::Node { op: Op::Var, value: i as f32 }));
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
