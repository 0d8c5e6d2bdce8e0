//! A program as source code: a function in Python, Rust or C that computes what grove's
//! interpreter computes (protected operators as small helper functions with the semantics of
//! `ops.rs`; the standard library's `sin`, `exp`, … where grove uses its own, so results agree
//! to float rounding, not bit for bit). Multi-output programs are summed per slot as
//! [`output_trees`](super::render::output_trees) lays them out.

use std::borrow::Cow;

use super::Op;
use super::render::{identifier, output_trees};
use super::tree::Node;

/// Target languages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    /// Python 3 (the `math` module).
    Python,
    /// Rust (f32).
    Rust,
    /// C99 (float, `<math.h>`).
    C,
}

/// What to export: a tree and what surrounds it in a model.
pub struct Program<'a> {
    /// The tree, prefix order.
    pub nodes: &'a [Node],
    /// Output slots (0: the root's value is the output).
    pub n_outputs: usize,
    /// Feature names, by variable index (become parameter names).
    pub features: &'a [String],
    /// Regression: the result is `a·f + b`.
    pub scale: Option<(f64, f64)>,
    /// Regression with output slots: the result is `b + Σ w_k f_k` over them, `(b, w)`
    /// ([`super::head::Head`]), summed in slot order.
    pub head: Option<(f64, &'a [f64])>,
    /// Regression: linear terms of the inputs added to the result, `c + Σ a_j x_j`, `(c, a)`
    /// ([`super::linear::Linear`]), summed in input order after the program's value.
    pub linear: Option<(f64, &'a [f64])>,
    /// Regression: `(lo, hi)`, the prediction clamped to `[lo, hi]` (`--output-margin`).
    pub limits: Option<(f64, f64)>,
    /// Classification: linear terms of the (standardised) inputs added to each output, one per
    /// output ([`super::linear::Linear`]), summed in input order after the program's value.
    pub logit_terms: Option<&'a [super::linear::Linear]>,
    /// Classification with a head over the program's outputs: class `c`'s logit is
    /// `c_c + Σ_m a_cm f_m` ([`super::linear::Linear`] over the `max(1, n_outputs)` outputs),
    /// summed in f64 in output order and rounded to f32.
    pub class_head: Option<&'a [super::linear::Linear]>,
    /// Features are standardised first: `(x - mean) / std`.
    pub standardize: Option<(&'a [f64], &'a [f64])>,
    /// Classification: class names (the function returns the class index).
    pub classes: Option<&'a [String]>,
    /// A control policy: actuator names, one output slot each (`act` returns tanh of every
    /// output, as `grove control` plays it).
    pub actuators: Option<&'a [String]>,
}

fn literal(c: f32, lang: Lang) -> String {
    if !c.is_finite() {
        return match (lang, c.is_nan()) {
            (Lang::Python, true) => "math.nan".into(),
            (Lang::Python, false) => format!("{}math.inf", if c < 0.0 { "-" } else { "" }),
            (Lang::Rust, true) => "f32::NAN".into(),
            (Lang::Rust, false) => format!("{}f32::INFINITY", if c < 0.0 { "-" } else { "" }),
            (Lang::C, true) => "NAN".into(),
            (Lang::C, false) => format!("{}INFINITY", if c < 0.0 { "-" } else { "" }),
        };
    }
    // `{:?}` prints the shortest text that reads back as the same f32, with a `.0` or exponent.
    let s = format!("{c:?}");
    let s = match lang {
        Lang::Python => s,
        Lang::Rust => format!("{s}_f32"),
        Lang::C => format!("{s}f"),
    };
    if c < 0.0 { format!("({s})") } else { s }
}

/// The call or expression of an operator; `{a}` and `{b}` appear at most once each.
fn template(op: Op, lang: Lang) -> Cow<'static, str> {
    use Lang::*;
    Cow::Borrowed(match (op, lang) {
        (Op::Add, _) => "({a} + {b})",
        (Op::Sub, _) => "({a} - {b})",
        (Op::Mul, _) => "({a} * {b})",
        (Op::Neg, _) => "(-{a})",
        (Op::Sdiv, Python) => "_sdiv({a}, {b})",
        (Op::Sdiv, _) => "({a} / {b})",
        (Op::Abs, Python) => "abs({a})",
        (Op::Abs, Rust) => "{a}.abs()",
        (Op::Abs, C) => "fabsf({a})",
        (Op::Max, Python) => "_max({a}, {b})",
        (Op::Max, Rust) => "{a}.max({b})",
        (Op::Max, C) => "fmaxf({a}, {b})",
        (Op::Min, Python) => "_min({a}, {b})",
        (Op::Min, Rust) => "{a}.min({b})",
        (Op::Min, C) => "fminf({a}, {b})",
        (Op::Sin, Python) => "math.sin({a})",
        (Op::Sin, Rust) => "{a}.sin()",
        (Op::Sin, C) => "sinf({a})",
        (Op::Cos, Python) => "math.cos({a})",
        (Op::Cos, Rust) => "{a}.cos()",
        (Op::Cos, C) => "cosf({a})",
        (Op::Tan, Python) => "math.tan({a})",
        (Op::Tan, Rust) => "{a}.tan()",
        (Op::Tan, C) => "tanf({a})",
        (Op::Tanh, Python) => "math.tanh({a})",
        (Op::Tanh, Rust) => "{a}.tanh()",
        (Op::Tanh, C) => "tanhf({a})",
        (Op::Exp, Rust) => "{a}.exp()",
        (Op::Exp, C) => "expf({a})",
        (Op::Div, _) => "g_div({a}, {b})",
        (Op::Aq, _) => "g_aq({a}, {b})",
        (Op::Pow, _) => "g_pow({a}, {b})",
        (Op::Spow, _) => "g_spow({a}, {b})",
        (Op::Exp, Python) => "g_exp({a})",
        (Op::Log, _) => "g_log({a})",
        (Op::Rlog, _) => "g_rlog({a})",
        (Op::Plog, _) => "g_plog({a})",
        (Op::Slog, _) => "g_slog({a})",
        (Op::Sqrt, _) => "g_sqrt({a})",
        (Op::Ssqrt, _) => "g_ssqrt({a})",
        (Op::Square, _) => "g_square({a})",
        (Op::Cube, _) => "g_cube({a})",
        (Op::Sigmoid, _) => "g_sigmoid({a})",
        (Op::Var | Op::Const, _) => "{a}",
        // A grammar's constant c[i] is its value.
        (Op::Slot, _) => "{a}",
        // A user operator calls its helper ([`user_helpers`]).
        (crate::program::ops::user_ops!(), _) => {
            return Cow::Owned(match op.arity() {
                2 => format!("g_u_{}({{a}}, {{b}})", op.name()),
                _ => format!("g_u_{}({{a}})", op.name()),
            });
        }
    })
}

const PYTHON_HELPERS: &str = r#"import math


def g_exp(a):
    try:
        return math.exp(a)
    except OverflowError:
        return math.inf


def g_div(a, b): return 1.0 if b == 0.0 else a / b
def _sdiv(a, b): return a / b if b != 0.0 else (math.nan if a == 0.0 or a != a else math.copysign(math.inf, a) * math.copysign(1.0, b))
def g_aq(a, b): return a / math.sqrt(1.0 + b * b)
def g_pow(a, b):
    try:
        return math.pow(abs(a), b)
    except (OverflowError, ZeroDivisionError, ValueError):
        return math.inf
def g_spow(a, b):
    try:
        return math.pow(a, b)
    except (OverflowError, ZeroDivisionError, ValueError):
        return math.nan
def g_log(a): return 0.0 if a == 0.0 else math.log(abs(a))
def g_rlog(a): return 1.0 if a == 0.0 else math.log(abs(a))
def g_plog(a): return math.log(1.0 + abs(a))
def g_slog(a): return math.log(a) if a > 0.0 else (-math.inf if a == 0.0 else math.nan)
def g_sqrt(a): return math.sqrt(abs(a))
def g_ssqrt(a): return math.sqrt(a) if a >= 0.0 else math.nan
def g_square(a): return a * a
def g_cube(a): return a * a * a
def g_sigmoid(a): return 1.0 / (1.0 + g_exp(-a))
def _max(a, b): return b if a != a else (a if b != b else max(a, b))
def _min(a, b): return b if a != a else (a if b != b else min(a, b))
"#;

const RUST_HELPERS: &str = "fn g_div(a: f32, b: f32) -> f32 { if b == 0.0 { 1.0 } else { a / b } }
fn g_aq(a: f32, b: f32) -> f32 { a / (1.0 + b * b).sqrt() }
fn g_pow(a: f32, b: f32) -> f32 { a.abs().powf(b) }
fn g_spow(a: f32, b: f32) -> f32 { a.powf(b) }
fn g_log(a: f32) -> f32 { if a == 0.0 { 0.0 } else { a.abs().ln() } }
fn g_rlog(a: f32) -> f32 { if a == 0.0 { 1.0 } else { a.abs().ln() } }
fn g_plog(a: f32) -> f32 { (1.0 + a.abs()).ln() }
fn g_slog(a: f32) -> f32 { a.ln() }
fn g_sqrt(a: f32) -> f32 { a.abs().sqrt() }
fn g_ssqrt(a: f32) -> f32 { a.sqrt() }
fn g_square(a: f32) -> f32 { a * a }
fn g_cube(a: f32) -> f32 { a * a * a }
fn g_sigmoid(a: f32) -> f32 { 1.0 / (1.0 + (-a).exp()) }
";

const C_HELPERS: &str = "#include <math.h>

static float g_div(float a, float b) { return b == 0.0f ? 1.0f : a / b; }
static float g_aq(float a, float b) { return a / sqrtf(1.0f + b * b); }
static float g_pow(float a, float b) { return powf(fabsf(a), b); }
static float g_spow(float a, float b) { return powf(a, b); }
static float g_log(float a) { return a == 0.0f ? 0.0f : logf(fabsf(a)); }
static float g_rlog(float a) { return a == 0.0f ? 1.0f : logf(fabsf(a)); }
static float g_plog(float a) { return logf(1.0f + fabsf(a)); }
static float g_slog(float a) { return logf(a); }
static float g_sqrt(float a) { return sqrtf(fabsf(a)); }
static float g_ssqrt(float a) { return sqrtf(a); }
static float g_square(float a) { return a * a; }
static float g_cube(float a) { return a * a * a; }
static float g_sigmoid(float a) { return 1.0f / (1.0f + expf(-a)); }
";

/// A helper function per user operator the trees use (`g_u_NAME`, its body over the
/// built-ins), in opcode order.
fn user_helpers(nodes: &[Node], lang: Lang) -> Vec<String> {
    let mut ops: Vec<Op> = nodes.iter().map(|n| n.op).filter(|o| o.is_user()).collect();
    ops.sort();
    ops.dedup();
    let params = ["a".to_string(), "b".to_string()];
    ops.into_iter()
        .filter_map(crate::program::ops::user::get)
        .map(|u| {
            let body = expression(&u.body_nodes(), &params, lang);
            let two = u.params.len() == 2;
            match lang {
                Lang::Python => format!("def g_u_{}({}): return {body}\n", u.name, if two { "a, b" } else { "a" }),
                Lang::Rust => format!("fn g_u_{}({}) -> f32 {{ {body} }}\n", u.name, if two { "a: f32, b: f32" } else { "a: f32" }),
                Lang::C => format!("static float g_u_{}({}) {{ return {body}; }}\n", u.name, if two { "float a, float b" } else { "float a" }),
            }
        })
        .collect()
}

/// The lines of `helpers` that define a `g_*` function the expressions call (and the others).
fn used_helpers(helpers: &str, exprs: &[String]) -> String {
    helpers
        .lines()
        .filter(|l| match l.split_once("g_") {
            Some((_, rest)) if l.starts_with("static") || l.starts_with("fn") => {
                let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                exprs.iter().any(|e| e.contains(&format!("g_{name}(")))
            }
            _ => true,
        })
        .map(|l| format!("{l}\n"))
        .collect()
}

/// One tree (prefix order, no output tags) as an expression.
pub fn expression(nodes: &[Node], params: &[String], lang: Lang) -> String {
    // What comes next: text, or the next node of the prefix order with its operands. A stack
    // in place of recursion, and one string appended to, so any depth is safe and the time is
    // linear in the text.
    enum Step {
        Text(String),
        Next,
    }
    if nodes.is_empty() {
        return literal(0.0, lang);
    }
    let (mut out, mut at, mut todo) = (String::new(), 0usize, vec![Step::Next]);
    while let Some(step) = todo.pop() {
        if let Step::Text(t) = step {
            out.push_str(&t);
            continue;
        }
        let Some(&n) = nodes.get(at) else {
            // A malformed tree (too few nodes) reads its missing operands as 0.
            out.push_str(&literal(0.0, lang));
            continue;
        };
        at += 1;
        match n.op {
            Op::Var => out.push_str(&params.get(n.value as usize).cloned().unwrap_or_else(|| format!("x{}", n.value))),
            Op::Const => out.push_str(&literal(n.value, lang)),
            op => {
                // The template's text around `{a}` and `{b}`, each operand once, `{a}` first.
                let t = template(op, lang);
                let mut steps = Vec::new();
                let mut rest: &str = &t;
                for hole in ["{a}", "{b}"].iter().take(op.arity()) {
                    if let Some((before, after)) = rest.split_once(hole) {
                        steps.push(Step::Text(before.to_string()));
                        steps.push(Step::Next);
                        rest = after;
                    }
                }
                steps.push(Step::Text(rest.replace("{b}", "")));
                todo.extend(steps.into_iter().rev());
            }
        }
    }
    out
}

/// `s` as a line comment of `lang`.
fn comment_line(lang: Lang, s: &str) -> String {
    match lang {
        Lang::Python => format!("# {s}\n"),
        _ => format!("// {s}\n"),
    }
}

/// The source of a control policy: `outputs` (one value per actuator) and `act` (their tanh)
/// over the observations `params`.
fn policy_source(params: &[String], p: &Program<'_>, acts: &[String], outs: &[String], lang: Lang) -> String {
    let users = user_helpers(p.nodes, lang);
    let called: Vec<String> = outs.iter().chain(&users).cloned().collect();
    let comment = |s: &str| comment_line(lang, s);
    let mut src = comment(&format!("grove control policy: act returns one action per actuator ({}), tanh of each output", acts.join(", ")));
    src += &comment(&format!("parameters (observations): {}", p.features.join(", ")));
    let k = outs.len();
    match lang {
        Lang::Python => {
            let sig = params.join(", ");
            src += PYTHON_HELPERS;
            src += &users.concat();
            src += "\n\n";
            src += &format!("def outputs({sig}):\n    return [{}]\n\n\n", outs.join(", "));
            src += &format!("def act({sig}):\n    return [math.tanh(g_o) for g_o in outputs({sig})]\n");
        }
        Lang::Rust => {
            let sig = params.iter().map(|n| format!("{n}: f32")).collect::<Vec<_>>().join(", ");
            src += "#![allow(dead_code, unused_parens, clippy::all)]\n";
            src += &used_helpers(RUST_HELPERS, &called);
            src += &users.concat();
            src += "\n";
            src += &format!("pub fn outputs({sig}) -> [f32; {k}] {{\n    [{}]\n}}\n\n", outs.join(", "));
            src += &format!("pub fn act({sig}) -> [f32; {k}] {{\n    outputs({}).map(f32::tanh)\n}}\n", params.join(", "));
        }
        Lang::C => {
            let sig = params.iter().map(|n| format!("float {n}")).collect::<Vec<_>>().join(", ");
            src += &used_helpers(C_HELPERS, &called);
            src += &users.concat();
            src += "\n";
            src += &format!("/* Writes the {k} outputs to g_z. */\nvoid outputs({sig}, float *g_z) {{\n");
            for (i, o) in outs.iter().enumerate() {
                src += &format!("    g_z[{i}] = {o};\n");
            }
            src += "}\n\n";
            src += &format!("/* Writes the {k} actions to g_a. */\nvoid act({sig}, float *g_a) {{\n    outputs({}, g_a);\n", params.join(", "));
            src += &format!("    for (int g_i = 0; g_i < {k}; g_i++)\n        g_a[g_i] = tanhf(g_a[g_i]);\n}}\n");
        }
    }
    src
}

/// The lines that standardise each feature in place before the program reads it (none for a
/// model without standardisation), in f64 and rounded to f32 in Rust and C.
fn standardize_lines(p: &Program<'_>, params: &[String], lang: Lang) -> Vec<String> {
    let Some((mean, std)) = p.standardize else { return Vec::new() };
    params
        .iter()
        .enumerate()
        .map(|(j, name)| {
            let (m, s) = (mean.get(j).copied().unwrap_or(0.0), std.get(j).copied().unwrap_or(1.0));
            match lang {
                Lang::Python => format!("{name} = ({name} - {m:?}) / {s:?}"),
                Lang::Rust => format!("let {name} = (({name} as f64 - {m:?}) / {s:?}) as f32;"),
                Lang::C => format!("{name} = (float)(((double){name} - {m:?}) / {s:?});"),
            }
        })
        .collect()
}

/// A classifier's linear terms per output: each output becomes `out + c + a_j * x_j …` (f64,
/// zero weights left out), rounded to f32 in Rust and C as the model adds them.
fn add_logit_terms(outs: &mut [String], terms: &[crate::program::linear::Linear], params: &[String], lang: Lang) {
    for (o, t) in outs.iter_mut().zip(terms) {
        let x = |name: &str| match lang {
            Lang::Python => name.to_string(),
            Lang::Rust => format!("{name} as f64"),
            Lang::C => format!("(double){name}"),
        };
        let sum: String = t.a.iter().zip(params).filter(|(a, _)| **a != 0.0).map(|(a, n)| format!(" + {a:?} * {}", x(n))).collect();
        *o = match lang {
            Lang::Python => format!("({o}) + {:?}{sum}", t.c),
            Lang::Rust => format!("(({o}) as f64 + {:?}{sum}) as f32", t.c),
            Lang::C => format!("(float)((double)({o}) + {:?}{sum})", t.c),
        };
    }
}

/// A classifier's head: the program's outputs become named features (`g_f0 …`, lines added to
/// `body`, computed first) and `outs` each class's logit `c + a_m * g_f{m} …` (f64, zero weights
/// left out), rounded to f32 in Rust and C as the model computes it; returns the features'
/// expressions. An error for a head that does not fit the classes and outputs.
fn class_head_logits(p: &Program<'_>, head: &[crate::program::linear::Linear], outs: &mut Vec<String>, body: &mut Vec<String>, lang: Lang) -> Result<Vec<String>, String> {
    let k = outs.len();
    if p.classes.map(<[String]>::len) != Some(head.len()) || p.logit_terms.is_some() || head.iter().any(|h| h.a.len() != k) {
        return Err(format!("a classifier's head has one set of weights per class, a weight per output ({k}), and no linear terms per output"));
    }
    for (m, o) in outs.iter().enumerate() {
        body.push(match lang {
            Lang::Python => format!("g_f{m} = {o}"),
            Lang::Rust => format!("let g_f{m}: f32 = {o};"),
            Lang::C => format!("float g_f{m} = {o};"),
        });
    }
    let feats = std::mem::take(outs);
    for h in head {
        let f = |m: usize| match lang {
            Lang::Python => format!("g_f{m}"),
            Lang::Rust => format!("g_f{m} as f64"),
            Lang::C => format!("(double)g_f{m}"),
        };
        let sum: String = h.a.iter().enumerate().filter(|(_, a)| **a != 0.0).map(|(m, a)| format!(" + {a:?} * {}", f(m))).collect();
        outs.push(match lang {
            Lang::Python => format!("{:?}{sum}", h.c),
            Lang::Rust => format!("({:?}{sum}) as f32", h.c),
            Lang::C => format!("(float)({:?}{sum})", h.c),
        });
    }
    Ok(feats)
}

/// The program as a complete source file: helpers, then `predict` (and `outputs` for a
/// classifier; `outputs` and `act` for a control policy).
pub fn export(p: &Program<'_>, lang: Lang) -> Result<String, String> {
    // The names the equations print ([`identifier`]), so the source and the report agree.
    let params: Vec<String> = p.features.iter().enumerate().map(|(i, n)| identifier(n, i)).collect();
    if p.linear.is_some() && (p.classes.is_some() || p.standardize.is_some()) {
        return Err("linear terms of the inputs belong to a regression model without standardisation".into());
    }
    if let Some((lo, hi)) = p.limits {
        if p.classes.is_some() || p.actuators.is_some() || !(lo <= hi) || !lo.is_finite() || !hi.is_finite() {
            return Err(format!("prediction limits [{lo}, {hi}] belong to a regression model, finite and in order"));
        }
    }
    if let Some(t) = p.logit_terms {
        if p.classes.is_none() || t.len() != p.n_outputs.max(1) || t.iter().any(|t| t.a.len() != params.len()) {
            return Err("linear terms per output belong to a classifier, one per output and a weight per feature".into());
        }
    }
    // The program reads standardised features under the same names.
    let mut body = standardize_lines(p, &params, lang);
    let mut outs: Vec<String> = if p.n_outputs == 0 {
        vec![expression(p.nodes, &params, lang)]
    } else {
        let slots = output_trees(p.nodes, p.n_outputs).ok_or("the model's tree is malformed")?;
        slots
            .iter()
            .map(|terms| {
                if terms.is_empty() {
                    literal(0.0, lang)
                } else {
                    terms.iter().map(|t| expression(t, &params, lang)).collect::<Vec<_>>().join(" + ")
                }
            })
            .collect()
    };
    // A classifier's terms: each output becomes `out + c + a_j * x_j …`.
    if let Some(terms) = p.logit_terms {
        add_logit_terms(&mut outs, terms, &params, lang);
    }
    // A classifier's head: the program's outputs become named features, each class's logit a
    // line over them.
    let feats = match p.class_head {
        Some(head) => class_head_logits(p, head, &mut outs, &mut body, lang)?,
        None => Vec::new(),
    };
    // One output whose sign decides between two classes.
    let binary = p.n_outputs == 0 && p.class_head.is_none();
    if let Some(acts) = p.actuators {
        if p.classes.is_some() || p.scale.is_some() || p.head.is_some() || p.linear.is_some() || p.logit_terms.is_some() || p.class_head.is_some() || p.standardize.is_some() {
            return Err("a control policy has no scaling, head, linear terms, classes or standardisation".into());
        }
        if acts.len() != p.n_outputs || acts.is_empty() {
            return Err(format!("a control policy has one output per actuator: {} outputs, {} actuators", p.n_outputs, acts.len()));
        }
        return Ok(policy_source(&params, p, acts, &outs, lang));
    }
    let users = user_helpers(p.nodes, lang);
    // What the helpers must cover: the expressions and the user operators' bodies.
    let called: Vec<String> = outs.iter().chain(&feats).chain(&users).cloned().collect();
    let mut src = String::new();
    let header = match p.classes {
        Some(c) => format!(
            "grove classifier: predict returns the class index ({}){}",
            c.iter().enumerate().map(|(i, n)| format!("{i} = {n}")).collect::<Vec<_>>().join(", "),
            if binary { "; one output: class 1 where it is positive" } else { "" }
        ),
        None => "grove regression model: predict returns the prediction".to_string(),
    };
    let comment = |s: &str| comment_line(lang, s);
    src += &comment(&header);
    src += &comment(&format!("parameters: {}", p.features.join(", ")));
    let (a, b) = p.scale.unwrap_or((1.0, 0.0));
    // A regression model's value: `a·f + b`, or the head `b + w0·f0 + w1·f1 + …` (f64, in slot
    // order; a slot of several terms is parenthesised by `cast`, or here for Python).
    // Linear terms follow: ` + c + a_j * x_j` (f64; zero weights left out).
    let value = |cast: &dyn Fn(&str) -> String| -> String {
        let program = match p.head {
            None => format!("{a:?} * {} + {b:?}", cast(&outs[0])),
            Some((b, w)) => {
                let terms: Vec<String> = w.iter().zip(&outs).map(|(w, f)| format!(" + {w:?} * {}", cast(f))).collect();
                format!("{b:?}{}", terms.concat())
            }
        };
        match p.linear {
            None => program,
            Some((c, a)) => {
                let terms: Vec<String> =
                    a.iter().zip(&params).filter(|(a, _)| **a != 0.0).map(|(a, x)| format!(" + {a:?} * {}", cast(x))).collect();
                format!("{program} + {c:?}{}", terms.concat())
            }
        }
    };
    match lang {
        Lang::Python => {
            src += PYTHON_HELPERS;
            src += &users.concat();
            src += "\n\n";
            let sig = params.join(", ");
            let pre: String = body.iter().map(|l| format!("    {l}\n")).collect();
            match p.classes {
                None => {
                    let cast = |f: &str| if p.head.is_some() || p.linear.is_some() { format!("({f})") } else { f.to_string() };
                    src += &match p.limits {
                        None => format!("def predict({sig}):\n{pre}    return {}\n", value(&cast)),
                        Some((lo, hi)) => format!(
                            "def predict({sig}):\n{pre}    g_v = {}\n    return {lo:?} if g_v < {lo:?} else ({hi:?} if g_v > {hi:?} else g_v)\n",
                            value(&cast)
                        ),
                    }
                }
                Some(_) => {
                    src += &format!("def outputs({sig}):\n{pre}    return [{}]\n\n\n", outs.join(", "));
                    src += &format!("def predict({sig}):\n    g_z = outputs({sig})\n");
                    src += if binary {
                        "    return 1 if g_z[0] > 0.0 else 0\n"
                    } else {
                        "    return max(range(len(g_z)), key=lambda g_k: (g_z[g_k], -g_k))\n"
                    };
                }
            }
        }
        Lang::Rust => {
            src += "#![allow(dead_code, unused_parens, clippy::all)]\n";
            src += &used_helpers(RUST_HELPERS, &called);
            src += &users.concat();
            src += "\n";
            let sig = params.iter().map(|n| format!("{n}: f32")).collect::<Vec<_>>().join(", ");
            let pre: String = body.iter().map(|l| format!("    {l}\n")).collect();
            match p.classes {
                None => {
                    let v = value(&|f| format!("({f}) as f64"));
                    src += &match p.limits {
                        None => format!("pub fn predict({sig}) -> f64 {{\n{pre}    {v}\n}}\n"),
                        Some((lo, hi)) => format!("pub fn predict({sig}) -> f64 {{\n{pre}    let g_v: f64 = {v};\n    g_v.clamp({lo:?}, {hi:?})\n}}\n"),
                    }
                }
                Some(_) => {
                    src += &format!("pub fn outputs({sig}) -> Vec<f32> {{\n{pre}    vec![{}]\n}}\n\n", outs.join(", "));
                    src += &format!("pub fn predict({sig}) -> usize {{\n    let g_z = outputs({});\n", params.join(", "));
                    src += if binary {
                        "    if g_z[0] > 0.0 { 1 } else { 0 }\n}\n"
                    } else {
                        "    let mut g_k = 0;\n    for (g_i, g_v) in g_z.iter().enumerate() {\n        if *g_v > g_z[g_k] {\n            g_k = g_i;\n        }\n    }\n    g_k\n}\n"
                    };
                }
            }
        }
        Lang::C => {
            src += &used_helpers(C_HELPERS, &called);
            src += &users.concat();
            src += "\n";
            let sig = params.iter().map(|n| format!("float {n}")).collect::<Vec<_>>().join(", ");
            let sig = if sig.is_empty() { "void".to_string() } else { sig };
            let pre: String = body.iter().map(|l| format!("    {l}\n")).collect();
            match p.classes {
                None => {
                    let v = value(&|f| format!("(double)({f})"));
                    src += &match p.limits {
                        None => format!("double predict({sig}) {{\n{pre}    return {v};\n}}\n"),
                        Some((lo, hi)) => format!(
                            "double predict({sig}) {{\n{pre}    double g_v = {v};\n    return g_v < {lo:?} ? {lo:?} : (g_v > {hi:?} ? {hi:?} : g_v);\n}}\n"
                        ),
                    }
                }
                Some(_) => {
                    let k = outs.len();
                    src += &format!("/* Writes the {k} outputs to g_z. */\nvoid outputs({sig}, float *g_z) {{\n{pre}");
                    for (i, o) in outs.iter().enumerate() {
                        src += &format!("    g_z[{i}] = {o};\n");
                    }
                    src += "}\n\n";
                    src += &format!("int predict({sig}) {{\n    float g_z[{k}];\n    outputs({}, g_z);\n", params.join(", "));
                    src += if binary {
                        "    return g_z[0] > 0.0f ? 1 : 0;\n}\n"
                    } else {
                        "    int g_k = 0;\n    for (int g_i = 1; g_i < (int)(sizeof g_z / sizeof g_z[0]); g_i++)\n        if (g_z[g_i] > g_z[g_k]) g_k = g_i;\n    return g_k;\n}\n"
                    };
                }
            }
        }
    }
    Ok(src)
}
