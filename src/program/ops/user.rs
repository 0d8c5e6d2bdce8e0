//! Operators of the user's own: `softsign(x) = x / (1 + abs(x))`, `hyp(a, b) = sqrt(a*a + b*b)`.
//!
//! A definition is parsed once into a straight-line body over the built-in operators (calls of
//! other user operators are inlined), each step one built-in applied to the parameters,
//! constants or earlier steps. A user operator is one tree node; its value is its body's steps
//! run in order with the built-ins' f32 operations, on the CPU by [`UserOp::eval`] and on the GPU
//! by a `__device__` function generated from the same steps ([`cuda_functions`]), so both give
//! the same bits. Its derivative for constant fitting is forward-mode through the same steps
//! ([`UserOp::partials`], [`cuda_partials`]).
//!
//! The registry is process-wide and append-only: opcodes [`USER_BASE`]`..USER_BASE +`
//! [`MAX_USER_OPS`] are handed out in registration order and an entry never changes, so an
//! opcode byte means the same thing for the life of the process. Definitions are interned by
//! meaning (name, arity and body steps): registering the same definition again gives the same
//! opcode. A name refers to its latest registration ([`by_name`]), so a run registers its own
//! definitions at setup and reads its function set and grammar after that. Entries are leaked
//! to `&'static` so that [`Op::info`] keeps its signature.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, OnceLock};

use super::{FUNCTIONS, Op, OpInfo, Real, Render};

/// The first opcode of the user block.
pub const USER_BASE: u8 = 32;
/// Opcodes in the user block: distinct user operators one process can hold.
pub const MAX_USER_OPS: usize = 32;
/// Definitions one run (one command line, experiment file or grammar) may give.
pub const MAX_DEFINITIONS: usize = 16;
/// Built-in operations in one body, after calls of other user operators are inlined.
pub const MAX_STEPS: usize = 64;

/// An operand of a body step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Arg {
    /// The first parameter.
    A,
    /// The second parameter.
    B,
    /// A constant, as f32 bits.
    Const(u32),
    /// The value of an earlier step.
    Step(u8),
}

/// One built-in applied to two operands (`b` is `Const(0)` for a unary built-in, as the
/// interpreters pass 0 for a unary node's second argument).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Step {
    /// A built-in function operator.
    pub op: Op,
    /// First operand.
    pub a: Arg,
    /// Second operand.
    pub b: Arg,
}

/// A registered user operator.
#[derive(Debug)]
pub struct UserOp {
    /// Its opcode (in the user block).
    pub op: Op,
    /// Its name.
    pub name: &'static str,
    /// The definition as given (trimmed): what reports, checkpoints and policies store.
    pub text: String,
    /// Parameter names, one or two.
    pub params: Vec<String>,
    /// The body, built-ins only, in evaluation order.
    pub steps: Vec<Step>,
    /// The value of the body (a step, a parameter or a constant).
    pub result: Arg,
    /// User operators the body calls (directly), registered before this one.
    pub deps: Vec<Op>,
    /// The table entry [`Op::info`] answers.
    pub info: OpInfo,
}

impl UserOp {
    /// The operator's value at `(a, b)` (`b` ignored when unary) with `apply` for each built-in
    /// step: [`super::apply_fast`] on both backends, [`Op::apply`] for reference checks.
    #[inline]
    pub fn eval<T: Real>(&self, a: T, b: T, apply: impl Fn(Op, T, T) -> T) -> T {
        let mut t = [T::ZERO; MAX_STEPS];
        let get = |t: &[T; MAX_STEPS], x: Arg| match x {
            Arg::A => a,
            Arg::B => b,
            Arg::Const(bits) => T::from_f64(f32::from_bits(bits) as f64),
            Arg::Step(i) => t[i as usize],
        };
        for (i, s) in self.steps.iter().enumerate() {
            t[i] = apply(s.op, get(&t, s.a), get(&t, s.b));
        }
        get(&t, self.result)
    }

    /// `(∂r/∂a, ∂r/∂b)` of `r = self(a, b)`: forward-mode through the body, each step's value by
    /// `apply`, its partials by `partials(op, x, y, value)`, combined with `chain(d, t)` as the
    /// fit combines a node's partials with its children's tangents:
    /// `t = chain(∂x, t_x) + chain(∂y, t_y)`. Twin of the generated `grove_user_partials`.
    pub fn partials(
        &self,
        a: f32,
        b: f32,
        apply: impl Fn(Op, f32, f32) -> f32,
        partials: impl Fn(Op, f32, f32, f32) -> (f32, f32),
        chain: impl Fn(f32, f32) -> f32,
    ) -> (f32, f32) {
        // Per step: value, tangent along a, tangent along b.
        let mut v = [0f32; MAX_STEPS];
        let mut ta = [0f32; MAX_STEPS];
        let mut tb = [0f32; MAX_STEPS];
        let get = |v: &[f32; MAX_STEPS], ta: &[f32; MAX_STEPS], tb: &[f32; MAX_STEPS], x: Arg| match x {
            Arg::A => (a, 1.0, 0.0),
            Arg::B => (b, 0.0, 1.0),
            Arg::Const(bits) => (f32::from_bits(bits), 0.0, 0.0),
            Arg::Step(i) => (v[i as usize], ta[i as usize], tb[i as usize]),
        };
        for (i, s) in self.steps.iter().enumerate() {
            let (x, xa, xb) = get(&v, &ta, &tb, s.a);
            let (y, ya, yb) = get(&v, &ta, &tb, s.b);
            let r = apply(s.op, x, y);
            let (dx, dy) = partials(s.op, x, y, r);
            v[i] = r;
            ta[i] = chain(dx, xa) + chain(dy, ya);
            tb[i] = chain(dx, xb) + chain(dy, yb);
        }
        let (_, ra, rb) = get(&v, &ta, &tb, self.result);
        (ra, rb)
    }

    /// The body as a tree in prefix order over variables 0 (`a`) and 1 (`b`) (shared steps
    /// repeated), for rendering and export.
    pub fn body_nodes(&self) -> Vec<super::super::tree::Node> {
        use super::super::tree::Node;
        fn go(u: &UserOp, x: Arg, out: &mut Vec<Node>) {
            match x {
                Arg::A => out.push(Node::var(0)),
                Arg::B => out.push(Node::var(1)),
                Arg::Const(bits) => out.push(Node::constant(f32::from_bits(bits))),
                Arg::Step(i) => {
                    let s = u.steps[i as usize];
                    out.push(Node::func(s.op));
                    go(u, s.a, out);
                    if s.op.arity() == 2 {
                        go(u, s.b, out);
                    }
                }
            }
        }
        let mut out = Vec::new();
        go(self, self.result, &mut out);
        out
    }
}

static SLOTS: [OnceLock<&'static UserOp>; MAX_USER_OPS] = [const { OnceLock::new() }; MAX_USER_OPS];

/// What registration needs besides the slots: how many are used, each name's latest
/// registration, and the interning of definitions by meaning.
#[derive(Default)]
struct State {
    used: usize,
    current: HashMap<String, Op>,
    by_meaning: HashMap<(String, usize, Vec<Step>, Arg), Op>,
}

fn state() -> std::sync::MutexGuard<'static, State> {
    static STATE: OnceLock<Mutex<State>> = OnceLock::new();
    STATE.get_or_init(|| Mutex::new(State::default())).lock().unwrap_or_else(|e| e.into_inner())
}

/// The registered operator of user opcode `op`, if that slot is taken.
#[inline]
pub fn get(op: Op) -> Option<&'static UserOp> {
    let i = (op as u8).checked_sub(USER_BASE)? as usize;
    SLOTS.get(i)?.get().copied()
}

/// The user operator behind opcode byte `code`, if registered.
#[inline]
pub fn from_code(code: u8) -> Option<Op> {
    let i = code.checked_sub(USER_BASE)? as usize;
    SLOTS.get(i)?.get().map(|u| u.op)
}

/// Every registered user operator, in opcode order.
pub fn registered() -> Vec<&'static UserOp> {
    SLOTS.iter().map_while(|s| s.get().copied()).collect()
}

/// The latest registration of `name`.
pub fn by_name(name: &str) -> Option<Op> {
    state().current.get(name).copied()
}

/// A definition split into its parts, before its calls are resolved.
#[derive(Debug)]
struct Parsed {
    text: String,
    name: String,
    params: Vec<String>,
    body: Expr,
}

/// A body's syntax tree.
#[derive(Clone, Debug)]
enum Expr {
    Num(f32),
    Param(usize),
    Neg(Box<Expr>),
    Bin(char, Box<Expr>, Box<Expr>),
    Call(String, Vec<Expr>),
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Num(f32),
    Name(String),
    Sym(char),
}

/// `s` cut for a message ([`crate::input::clip`]).
fn q(s: &str) -> String {
    crate::input::clip(s, crate::input::ECHO)
}

fn tokens(s: &str) -> Result<Vec<Tok>, String> {
    let c: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        if ch.is_whitespace() {
            i += 1;
        } else if ch.is_ascii_digit() || (ch == '.' && c.get(i + 1).is_some_and(|d| d.is_ascii_digit())) {
            let start = i;
            while i < c.len() && (c[i].is_ascii_digit() || c[i] == '.') {
                i += 1;
            }
            if i < c.len() && (c[i] == 'e' || c[i] == 'E') {
                let mut j = i + 1;
                if j < c.len() && (c[j] == '+' || c[j] == '-') {
                    j += 1;
                }
                if j < c.len() && c[j].is_ascii_digit() {
                    i = j;
                    while i < c.len() && c[i].is_ascii_digit() {
                        i += 1;
                    }
                }
            }
            let text: String = c[start..i].iter().collect();
            let v: f32 = text.parse().map_err(|_| format!("`{}` is not a number", q(&text)))?;
            if !v.is_finite() {
                return Err(format!("the constant {text} is not a finite f32"));
            }
            out.push(Tok::Num(v));
        } else if ch.is_alphabetic() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_' || c[i] == '.') {
                i += 1;
            }
            out.push(Tok::Name(c[start..i].iter().collect()));
        } else if "+-*/(),=".contains(ch) {
            out.push(Tok::Sym(ch));
            i += 1;
        } else {
            return Err(format!("unexpected `{ch}` (a body uses + - * /, parentheses, calls, numbers and the parameters)"));
        }
    }
    Ok(out)
}

/// The most tokens a body may have: [`MAX_STEPS`] operations take far fewer, and a bound keeps
/// the parsed expression (a tree walked recursively) shallow whatever the text.
pub const MAX_BODY_TOKENS: usize = 1024;
/// How deep a body's parentheses, signs and calls may nest.
pub const MAX_NESTING: usize = 64;

struct Parser<'a> {
    toks: &'a [Tok],
    at: usize,
    params: &'a [String],
    depth: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.at)
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(&Tok::Sym(c)) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn expr(&mut self) -> Result<Expr, String> {
        let mut e = self.term()?;
        loop {
            let op = if self.eat('+') {
                '+'
            } else if self.eat('-') {
                '-'
            } else {
                return Ok(e);
            };
            e = Expr::Bin(op, Box::new(e), Box::new(self.term()?));
        }
    }

    fn term(&mut self) -> Result<Expr, String> {
        let mut e = self.unary()?;
        loop {
            let op = if self.eat('*') {
                '*'
            } else if self.eat('/') {
                '/'
            } else {
                return Ok(e);
            };
            e = Expr::Bin(op, Box::new(e), Box::new(self.unary()?));
        }
    }

    fn unary(&mut self) -> Result<Expr, String> {
        if self.depth >= MAX_NESTING {
            return Err(format!("the body nests more than {MAX_NESTING} deep (parentheses, signs, calls)"));
        }
        self.depth += 1;
        let e = self.signed();
        self.depth -= 1;
        e
    }

    fn signed(&mut self) -> Result<Expr, String> {
        if self.eat('-') {
            return Ok(match self.unary()? {
                Expr::Num(v) => Expr::Num(-v),
                e => Expr::Neg(Box::new(e)),
            });
        }
        self.primary()
    }

    fn primary(&mut self) -> Result<Expr, String> {
        match self.toks.get(self.at).cloned() {
            Some(Tok::Num(v)) => {
                self.at += 1;
                Ok(Expr::Num(v))
            }
            Some(Tok::Name(n)) => {
                self.at += 1;
                if self.eat('(') {
                    let mut args = Vec::new();
                    if !self.eat(')') {
                        loop {
                            args.push(self.expr()?);
                            if self.eat(')') {
                                break;
                            }
                            if !self.eat(',') {
                                return Err(format!("expected `,` or `)` in the arguments of `{}`", q(&n)));
                            }
                        }
                    }
                    Ok(Expr::Call(n, args))
                } else {
                    match self.params.iter().position(|p| *p == n) {
                        Some(i) => Ok(Expr::Param(i)),
                        None => Err(format!("unknown variable `{}` (the parameters are {})", q(&n), self.params.join(", "))),
                    }
                }
            }
            Some(Tok::Sym('(')) => {
                self.at += 1;
                let e = self.expr()?;
                if !self.eat(')') {
                    return Err("a `(` is not closed".into());
                }
                Ok(e)
            }
            Some(Tok::Sym(c)) => Err(format!("unexpected `{c}`")),
            None => Err("the body ends too early".into()),
        }
    }
}

fn is_identifier(s: &str) -> bool {
    let mut c = s.chars();
    c.next().is_some_and(|f| f.is_ascii_alphabetic() || f == '_') && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
}

/// The built-in named `name` (any of its names), if any.
fn builtin(name: &str) -> Option<Op> {
    FUNCTIONS.iter().copied().find(|op| op.info().names.contains(&name))
}

/// Splits `text` (`name(p[, q]) = body`) and parses the body; errors name what is wrong.
fn parse(text: &str) -> Result<Parsed, String> {
    let text = text.trim();
    let (head, body) = text.split_once('=').ok_or("expected `name(x) = body` (no `=`)")?;
    let head = head.trim();
    let (name, rest) = head.split_once('(').ok_or("expected `name(x) = body` (no parameter list)")?;
    let name = name.trim();
    let list = rest.trim_end().strip_suffix(')').ok_or("expected `name(x) = body` (the parameter list is not closed)")?;
    if !is_identifier(name) {
        return Err(format!("`{}` is not a name (letters, digits and _, not starting with a digit)", q(name)));
    }
    if let Some(op) = builtin(name) {
        return Err(format!("`{name}` shadows the built-in operator `{}`; choose another name", op.name()));
    }
    let params: Vec<String> = list.split(',').map(|p| p.trim().to_string()).collect();
    if let Some(p) = params.iter().find(|p| !is_identifier(p)) {
        return Err(format!("`{}` is not a parameter name", q(p)));
    }
    if params.len() > 2 {
        return Err(format!("`{name}` takes {} parameters; an operator takes 1 or 2 (a tree node has at most two children)", params.len()));
    }
    if params.len() == 2 && params[0] == params[1] {
        return Err(format!("the parameter `{}` is named twice", params[0]));
    }
    let toks = tokens(body)?;
    if toks.is_empty() {
        return Err("the body is empty".into());
    }
    if toks.len() > MAX_BODY_TOKENS {
        return Err(format!("the body has {} tokens, more than the {MAX_BODY_TOKENS} a definition may have", toks.len()));
    }
    let mut p = Parser { toks: &toks, at: 0, params: &params, depth: 0 };
    let body = p.expr()?;
    if let Some(t) = p.peek() {
        let t = match t {
            Tok::Num(v) => v.to_string(),
            Tok::Name(n) => n.clone(),
            Tok::Sym(c) => c.to_string(),
        };
        return Err(format!("unexpected `{}` after the body", q(&t)));
    }
    Ok(Parsed { text: text.to_string(), name: name.to_string(), params, body })
}

/// The names a body calls.
fn calls(e: &Expr, out: &mut Vec<String>) {
    match e {
        Expr::Num(_) | Expr::Param(_) => {}
        Expr::Neg(x) => calls(x, out),
        Expr::Bin(_, x, y) => {
            calls(x, out);
            calls(y, out);
        }
        Expr::Call(n, args) => {
            out.push(n.clone());
            args.iter().for_each(|a| calls(a, out));
        }
    }
}

/// Lowers a body into steps; `known` resolves the user operators it may call.
struct Lower<'a> {
    steps: Vec<Step>,
    known: &'a dyn Fn(&str) -> Option<&'static UserOp>,
    deps: Vec<Op>,
}

impl Lower<'_> {
    fn push(&mut self, op: Op, a: Arg, b: Arg) -> Result<Arg, String> {
        if self.steps.len() >= MAX_STEPS {
            return Err(format!("the body has more than {MAX_STEPS} operations (calls of other definitions count their bodies)"));
        }
        self.steps.push(Step { op, a, b });
        Ok(Arg::Step((self.steps.len() - 1) as u8))
    }

    fn go(&mut self, e: &Expr) -> Result<Arg, String> {
        const ZERO: Arg = Arg::Const(0);
        Ok(match e {
            Expr::Num(v) => Arg::Const(v.to_bits()),
            Expr::Param(0) => Arg::A,
            Expr::Param(_) => Arg::B,
            Expr::Neg(x) => {
                let a = self.go(x)?;
                self.push(Op::Neg, a, ZERO)?
            }
            Expr::Bin(c, x, y) => {
                let op = match c {
                    '+' => Op::Add,
                    '-' => Op::Sub,
                    '*' => Op::Mul,
                    _ => Op::Div,
                };
                let (a, b) = (self.go(x)?, self.go(y)?);
                self.push(op, a, b)?
            }
            Expr::Call(name, args) => {
                let (arity, user) = match builtin(name) {
                    Some(op) => (op.arity(), None),
                    None => match (self.known)(name) {
                        Some(u) => (u.params.len(), Some(u)),
                        None => return Err(format!("unknown operator `{}`", q(name))),
                    },
                };
                if args.len() != arity {
                    return Err(format!("`{name}` takes {arity} argument{}, given {}", if arity == 1 { "" } else { "s" }, args.len()));
                }
                let a = self.go(&args[0])?;
                let b = if arity == 2 { self.go(&args[1])? } else { ZERO };
                match user {
                    None => self.push(builtin(name).expect("checked"), a, b)?,
                    Some(u) => {
                        // A registered operator is a dependency; a loss's helper (`cosh`) is
                        // inlined and registered nowhere.
                        let registered = get(u.op).is_some_and(|g| std::ptr::eq(g, u));
                        if registered && !self.deps.contains(&u.op) {
                            self.deps.push(u.op);
                        }
                        // Inlined: the callee's steps with its parameters replaced.
                        let base = self.steps.len();
                        let map = |x: Arg| match x {
                            Arg::A => a,
                            Arg::B => b,
                            Arg::Const(c) => Arg::Const(c),
                            Arg::Step(i) => Arg::Step((base + i as usize) as u8),
                        };
                        for s in &u.steps {
                            self.push(s.op, map(s.a), map(s.b))?;
                        }
                        map(u.result)
                    }
                }
            }
        })
    }
}

/// Registers a set of definitions (a run's, a grammar's, a saved report's) and returns their
/// opcodes in the given order. A body may call the built-ins by any of their names, the set's
/// other definitions (in any order, without a cycle) and operators registered before. Each
/// error is one line naming the definition: a call of itself or a cycle, an unknown operator
/// or variable, a name that shadows a built-in or is defined twice, a call with the wrong
/// number of arguments, more than [`MAX_DEFINITIONS`] definitions, a full registry.
pub fn register(defs: &[String]) -> Result<Vec<Op>, String> {
    if defs.len() > MAX_DEFINITIONS {
        return Err(format!("{} operator definitions; at most {MAX_DEFINITIONS} are allowed", defs.len()));
    }
    let mut parsed = Vec::with_capacity(defs.len());
    for d in defs {
        parsed.push(parse(d).map_err(|e| format!("definition `{}`: {e}", q(d.trim())))?);
    }
    let mut index = HashMap::new();
    for (i, p) in parsed.iter().enumerate() {
        if index.insert(p.name.clone(), i).is_some() {
            return Err(format!("definition `{}`: `{}` is defined twice", q(&p.text), p.name));
        }
    }
    // Order: callees before callers; a cycle is an error naming its path.
    let mut order = Vec::new();
    let mut state = vec![0u8; parsed.len()]; // 0 new, 1 on the path, 2 done
    fn visit(i: usize, parsed: &[Parsed], index: &HashMap<String, usize>, state: &mut [u8], path: &mut Vec<usize>, order: &mut Vec<usize>) -> Result<(), String> {
        match state[i] {
            2 => return Ok(()),
            1 => {
                let p = &parsed[i];
                let from = path.iter().position(|&j| j == i).unwrap_or(0);
                return Err(if path.len() - from == 1 {
                    format!("definition `{}`: `{}` calls itself", q(&p.text), p.name)
                } else {
                    let cycle: Vec<&str> = path[from..].iter().chain([&i]).map(|&j| parsed[j].name.as_str()).collect();
                    format!("definition `{}`: `{}` calls itself through {}", q(&p.text), p.name, cycle.join(" → "))
                });
            }
            _ => {}
        }
        state[i] = 1;
        path.push(i);
        let mut called = Vec::new();
        calls(&parsed[i].body, &mut called);
        for c in called {
            if let Some(&j) = index.get(&c) {
                visit(j, parsed, index, state, path, order)?;
            }
        }
        path.pop();
        state[i] = 2;
        order.push(i);
        Ok(())
    }
    for i in 0..parsed.len() {
        visit(i, &parsed, &index, &mut state, &mut Vec::new(), &mut order)?;
    }
    let mut ops: Vec<Option<Op>> = vec![None; parsed.len()];
    for i in order {
        let p = &parsed[i];
        let done: Vec<(String, Op)> = ops.iter().enumerate().filter_map(|(j, o)| o.map(|o| (parsed[j].name.clone(), o))).collect();
        let known = |name: &str| -> Option<&'static UserOp> {
            match index.get(name) {
                Some(_) => done.iter().find(|(n, _)| n == name).and_then(|(_, o)| get(*o)),
                None => by_name(name).and_then(get),
            }
        };
        let mut lower = Lower { steps: Vec::new(), known: &known, deps: Vec::new() };
        let result = lower.go(&p.body).map_err(|e| format!("definition `{}`: {e}", q(&p.text)))?;
        ops[i] = Some(intern(p, lower.steps, result, lower.deps, true).map_err(|e| format!("definition `{}`: {e}", q(&p.text)))?);
    }
    Ok(ops.into_iter().map(|o| o.expect("every definition is lowered")).collect())
}

/// The opcode of a lowered definition: its earlier registration, or the next free slot. A
/// `named` one becomes the latest registration of its name ([`by_name`]); a loss is not named.
fn intern(p: &Parsed, steps: Vec<Step>, result: Arg, deps: Vec<Op>, named: bool) -> Result<Op, String> {
    let mut st = state();
    let key = (p.name.clone(), p.params.len(), steps.clone(), result);
    if let Some(&op) = st.by_meaning.get(&key) {
        if named {
            st.current.insert(p.name.clone(), op);
        }
        return Ok(op);
    }
    if st.used >= MAX_USER_OPS {
        return Err(format!("grove holds at most {MAX_USER_OPS} distinct user operators per process, and all are taken"));
    }
    let code = USER_BASE + st.used as u8;
    let op = Op::from_user_code(code).expect("the user block has MAX_USER_OPS opcodes");
    let name: &'static str = Box::leak(p.name.clone().into_boxed_str());
    let names: &'static [&'static str] = Box::leak(vec![name].into_boxed_slice());
    let arity = p.params.len() as u8;
    let cuda: &'static str = Box::leak(format!("grove_user_{code}(a, b)").into_boxed_str());
    let protected = steps.iter().all(|s| s.op.info().protected);
    let info = OpInfo { names, arity, render: Render::Call(name), sympy: name, cuda, protected };
    let entry: &'static UserOp = Box::leak(Box::new(UserOp {
        op,
        name,
        text: p.text.clone(),
        params: p.params.clone(),
        steps,
        result,
        deps,
        info,
    }));
    SLOTS[st.used].set(entry).map_err(|_| "a user opcode was taken twice".to_string())?;
    st.used += 1;
    st.by_meaning.insert(key, op);
    if named {
        st.current.insert(p.name.clone(), op);
    }
    Ok(op)
}

/// Functions a loss may call besides the built-ins and the user's operators, defined over the
/// built-ins and inlined into the loss (no opcode of their own): `cosh(x)` and `sinh(x)` as
/// `(exp(x) ± exp(-x)) / 2`, which overflow to infinity past |x| ≈ 89 (the row's loss is then
/// not finite and the program invalid).
pub const LOSS_HELPERS: &[&str] = &["cosh(x) = (exp(x) + exp(-x)) / 2", "sinh(x) = (exp(x) - exp(-x)) / 2"];

/// The name a loss is registered under (reports show its text, `loss(p, y) = …`).
pub const LOSS_NAME: &str = "loss";

/// [`LOSS_HELPERS`] lowered, once: operators no registry holds.
fn loss_helpers() -> &'static [UserOp] {
    static HELPERS: OnceLock<Vec<UserOp>> = OnceLock::new();
    HELPERS.get_or_init(|| {
        LOSS_HELPERS
            .iter()
            .map(|text| {
                let p = parse(text).expect("a loss helper parses");
                let none = |_: &str| -> Option<&'static UserOp> { None };
                let mut lower = Lower { steps: Vec::new(), known: &none, deps: Vec::new() };
                let result = lower.go(&p.body).expect("a loss helper calls built-ins only");
                let name: &'static str = Box::leak(p.name.clone().into_boxed_str());
                let info = OpInfo { names: Box::leak(vec![name].into_boxed_slice()), arity: 1, render: Render::Call(name), sympy: name, cuda: "", protected: false };
                // `op` names no slot: `get(op)` is never this entry, so it is no dependency.
                UserOp { op: Op::Neg, name, text: p.text, params: p.params, steps: lower.steps, result, deps: Vec::new(), info }
            })
            .collect()
    })
}

/// Registers a per-row loss of the user's own, `BODY` an expression of the prediction `p` and
/// the target `y` (`abs(p - y)`, `log(cosh(p - y))`): parsed and lowered as an operator
/// definition `loss(p, y) = BODY` ([`register`]), whose body may call the built-ins by any of
/// their names, the operators registered before (`--define`) and [`LOSS_HELPERS`]. It gets a
/// user opcode, so both backends compute it as they compute user operators ([`UserOp::eval`],
/// the generated `grove_user_<code>`), with the same bits; but it is not reachable by name, so
/// no function set or grammar can name it. Each error is one line naming what is wrong: a name
/// other than `p`, `y`, an operator or a known function, a body that does not read `p`.
pub fn register_loss(body: &str) -> Result<Op, String> {
    let text = format!("{LOSS_NAME}(p, y) = {}", body.trim());
    let p = parse(&text).map_err(|e| format!("the loss `{}`: {e}", super::super::clip(body.trim(), 80)))?;
    let helpers = loss_helpers();
    let known = |name: &str| -> Option<&'static UserOp> { by_name(name).and_then(get).or_else(|| helpers.iter().find(|h| h.name == name)) };
    let mut lower = Lower { steps: Vec::new(), known: &known, deps: Vec::new() };
    let result = lower.go(&p.body).map_err(|e| format!("the loss `{}`: {e}", super::super::clip(body.trim(), 80)))?;
    let reads_p = result == Arg::A || lower.steps.iter().any(|s| s.a == Arg::A || s.b == Arg::A);
    if !reads_p {
        return Err(format!("the loss `{}` does not read the prediction `p`: every program would score the same", super::super::clip(body.trim(), 80)));
    }
    intern(&p, lower.steps, result, lower.deps, false).map_err(|e| format!("the loss `{}`: {e}", super::super::clip(body.trim(), 80)))
}

/// The definitions a tree's user operators need, callees first (each registered before its
/// callers, so opcode order is a valid order): what a report, checkpoint or policy stores so
/// that [`register`] can give them back on load.
pub fn definitions_for(ops: impl IntoIterator<Item = Op>) -> Vec<String> {
    let mut seen = HashSet::new();
    let mut stack: Vec<Op> = ops.into_iter().filter(|o| get(*o).is_some()).collect();
    while let Some(o) = stack.pop() {
        if seen.insert(o) {
            stack.extend(get(o).map_or(&[][..], |u| &u.deps[..]).iter().copied());
        }
    }
    let mut used: Vec<Op> = seen.into_iter().collect();
    used.sort();
    used.into_iter().filter_map(get).map(|u| u.text.clone()).collect()
}

/// Registers the definitions a saved tree carries (a report's model, a policy) and checks that
/// every operator `names` holds is a leaf, a built-in or one of them; errors name `what`.
pub fn load_saved<'a>(defs: &[String], names: impl IntoIterator<Item = &'a str>, what: &str) -> Result<(), String> {
    let ops = register(defs).map_err(|e| format!("{what}: {e}"))?;
    let defined: Vec<&str> = ops.iter().map(|o| o.name()).collect();
    for n in names {
        if !matches!(n, "var" | "const" | "slot") && builtin(n).is_none() && !defined.contains(&n) {
            return Err(format!(
                "{what}: unknown operator `{}` in the tree: neither built in nor defined in its `operators` ({})",
                super::super::clip(n, 40),
                if defined.is_empty() { "none".to_string() } else { defined.join(", ") }
            ));
        }
    }
    Ok(())
}

/// `(opcode, definition)` of the user operators `ops` use and those they call, in opcode
/// order: what a checkpoint stores beside its opcode bytes.
pub fn saved_codes(ops: impl IntoIterator<Item = Op>) -> Vec<(u8, String)> {
    let texts = definitions_for(ops);
    registered().into_iter().filter(|u| texts.contains(&u.text)).map(|u| (u.op as u8, u.text.clone())).collect()
}

/// Registers a checkpoint's `(opcode, definition)` pairs (in order) and returns the opcode
/// each saved one has now, `map[saved] = current`: itself for the leaves and built-ins, `None`
/// for a user opcode the pairs do not define.
pub fn remap(saved: &[(u8, String)], what: &str) -> Result<Vec<Option<u8>>, String> {
    let mut map: Vec<Option<u8>> = (0..=255u8).map(|c| (c < USER_BASE).then_some(c)).collect();
    for (code, text) in saved {
        let op = register(std::slice::from_ref(text)).map_err(|e| format!("{what}: {e}"))?[0];
        map[*code as usize] = Some(op as u8);
    }
    Ok(map)
}

/// C float literal with exactly the bits of `bits`.
fn cuda_const(bits: u32) -> String {
    format!("__int_as_float(0x{bits:08x})")
}

fn cuda_arg(x: Arg) -> String {
    match x {
        Arg::A => "a".into(),
        Arg::B => "b".into(),
        Arg::Const(bits) => cuda_const(bits),
        Arg::Step(i) => format!("t{i}"),
    }
}

/// The `__device__` function of each user operator of `users` (a snapshot of [`registered`]),
/// `grove_user_<code>(a, b)`: each body step one temporary computed by `grove_apply_builtin` (so
/// NVRTC, compiled with `--fmad=false`, keeps the order and fuses nothing).
pub fn cuda_functions(users: &[&UserOp]) -> String {
    let mut s = String::new();
    for u in users {
        s.push_str(&format!("// {}\n__device__ __forceinline__ float grove_user_{}(float a, float b) {{\n", u.text.replace('\n', " "), u.op as u8));
        s.push_str("    (void)a; (void)b;\n");
        for (i, st) in u.steps.iter().enumerate() {
            s.push_str(&format!("    const float t{i} = grove_apply_builtin({}u, {}, {});\n", st.op as u8, cuda_arg(st.a), cuda_arg(st.b)));
        }
        s.push_str(&format!("    return {};\n}}\n", cuda_arg(u.result)));
    }
    s
}

/// `GROVE_USER_PARTIALS` for the user operators `users` (a snapshot of [`registered`]): a macro
/// defining `grove_user_partials(op, a, b, da, db)` (forward mode through each user operator's
/// body, twin of [`UserOp::partials`]), expanded by fit.cu after its `grove_builtin_partials`
/// and `grove_chain`.
pub fn cuda_partials(users: &[&UserOp]) -> String {
    let tan = |x: Arg| -> (String, String) {
        match x {
            Arg::A => ("1.0f".into(), "0.0f".into()),
            Arg::B => ("0.0f".into(), "1.0f".into()),
            Arg::Const(_) => ("0.0f".into(), "0.0f".into()),
            Arg::Step(i) => (format!("ta{i}"), format!("tb{i}")),
        }
    };
    let mut lines = Vec::new();
    for u in users {
        let code = u.op as u8;
        lines.push(format!("__device__ __noinline__ void grove_user_partials_{code}(float a, float b, float& da, float& db) {{"));
        lines.push("    (void)a; (void)b;".into());
        for (i, st) in u.steps.iter().enumerate() {
            let (x, y) = (cuda_arg(st.a), cuda_arg(st.b));
            let ((xa, xb), (ya, yb)) = (tan(st.a), tan(st.b));
            lines.push(format!("    const float t{i} = grove_apply_builtin({}u, {x}, {y});", st.op as u8));
            lines.push(format!("    float dx{i}, dy{i};"));
            lines.push(format!("    grove_builtin_partials({}u, {x}, {y}, t{i}, dx{i}, dy{i});", st.op as u8));
            lines.push(format!("    const float ta{i} = grove_chain(dx{i}, {xa}) + grove_chain(dy{i}, {ya});"));
            lines.push(format!("    const float tb{i} = grove_chain(dx{i}, {xb}) + grove_chain(dy{i}, {yb});"));
        }
        let (ra, rb) = tan(u.result);
        lines.push(format!("    da = {ra};"));
        lines.push(format!("    db = {rb};"));
        lines.push("}".into());
    }
    lines.push("__device__ __forceinline__ bool grove_user_partials(unsigned op, float a, float b, float& da, float& db) {".into());
    lines.push("    switch (op) {".into());
    for u in users {
        lines.push(format!("        case {0}u: grove_user_partials_{0}(a, b, da, db); return true;", u.op as u8));
    }
    lines.push("        default: return false;".into());
    lines.push("    }".into());
    lines.push("}".into());
    format!("#define GROVE_USER_PARTIALS \\\n{}\n", lines.join(" \\\n"))
}

#[cfg(test)]
mod tests;
