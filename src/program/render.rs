//! Rendering programs as text: infix formulas parenthesised by the tree (no more than it needs:
//! the text read with Python's precedence is the tree), LaTeX, and text that
//! sympy's `sympify` parses (with the protected operators spelled as functions it can be given).

use super::ops::{Op, Render};
use super::tree::Node;

/// Output styles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// `x0 + sin(x1) * 2.5`.
    Infix,
    /// `x_{0} + \sin\left(x_{1}\right) \cdot 2.5`.
    Latex,
    /// `x0 + sin(x1)*2.5`, protected operators as calls (`div(a, b)`, `plog(x)`).
    Sympy,
}

/// Renders the tree `nodes` (prefix order). `names` gives variable names (`x{i}` if absent).
/// Output nodes are shown as `out{k}=(...)` in infix; multi-output programs are better shown
/// per slot with [`outputs`].
pub fn render(nodes: &[Node], names: &[String], style: Style) -> String {
    if nodes.is_empty() {
        return "<empty>".into();
    }
    // A grammar's constants c[i] show as their values.
    let nodes = &*super::tree::strip_slots(nodes);
    let Ok(size) = super::tree::subtree_sizes(nodes) else {
        return "<malformed>".into();
    };
    let mut out = String::new();
    write(nodes, &size, names, style, &mut out);
    out
}

/// Renders each output slot of a multi-output program (EvoGP semantics, `tree.rs`): slot `k` is
/// the sum of the values of its output nodes, each shown as its own function of its children's
/// *passed* values (a nested output node passes its last child's value; a leaf its own). A slot
/// no node writes is `0`. Returns `n_outputs` formulas; a malformed tree gives `<malformed>`.
pub fn outputs(nodes: &[Node], n_outputs: usize, names: &[String], style: Style) -> Vec<String> {
    let Some(slots) = output_trees(nodes, n_outputs) else {
        return vec!["<malformed>".into(); n_outputs];
    };
    slots
        .into_iter()
        .map(|t| if t.is_empty() { "0".into() } else { t.iter().map(|t| render(t, names, style)).collect::<Vec<_>>().join(" + ") })
        .collect()
}

/// The terms of each output slot as plain trees (no output tags): slot `k`'s value is the sum
/// of its trees' values (0 for none). `None` for a malformed tree.
pub fn output_trees(nodes: &[Node], n_outputs: usize) -> Option<Vec<Vec<Vec<Node>>>> {
    let nodes = &*super::tree::strip_slots(nodes);
    let size = super::tree::subtree_sizes(nodes).ok()?;
    // Node i's children, by index.
    let children = |i: usize| {
        let mut c = Vec::new();
        let mut j = i + 1;
        while j < i + size[i] as usize {
            c.push(j);
            j += size[j] as usize;
        }
        c
    };
    // Node i's own value as a plain tree (output tags dropped): its function of its children's
    // passed values, where a nested output node passes its last child's value. Iterative (a
    // stack of the nodes whose passed value comes next), so any depth is safe.
    let own = |i: usize, dst: &mut Vec<Node>| {
        dst.push(Node { out: 0, ..nodes[i] });
        let mut todo: Vec<usize> = children(i).into_iter().rev().collect();
        while let Some(mut j) = todo.pop() {
            loop {
                let c = children(j);
                match c.last() {
                    Some(&last) if nodes[j].out > 0 => j = last,
                    _ => break,
                }
            }
            dst.push(Node { out: 0, ..nodes[j] });
            todo.extend(children(j).into_iter().rev());
        }
    };
    let mut terms = vec![Vec::new(); n_outputs];
    for (i, n) in nodes.iter().enumerate() {
        if n.out > 0 && (n.out as usize) <= n_outputs {
            let mut t = Vec::new();
            own(i, &mut t);
            terms[n.out as usize - 1].push(t);
        }
    }
    Some(terms)
}

/// Formats a constant compactly and exactly enough to reproduce its f32 value.
pub fn number(c: f32) -> String {
    let s = format!("{c}");
    if s.contains('e') || s.len() <= 10 {
        return s;
    }
    format!("{c:.6e}")
}

/// Names no variable may take in a printed equation or an exported function: keywords of
/// Python, Rust and C; sympy's own symbols; the functions the exports and `SYMPY_PRELUDE` call
/// and the names the exported functions use (every operator's name is refused too, and so is
/// any name starting with `_` or `g_`, the exports' helpers).
const RESERVED: &[&str] = &[
    // Python
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del", "elif", "else",
    "except", "finally", "for", "from", "global", "if", "import", "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise",
    "return", "try", "while", "with", "yield", "range", "len", "math", "sympy", "np",
    // Rust
    "fn", "let", "mut", "ref", "move", "match", "loop", "impl", "trait", "struct", "enum", "mod", "pub", "use", "crate", "super",
    "self", "Self", "const", "static", "type", "unsafe", "where", "extern", "dyn", "true", "false", "abstract", "become", "box",
    "do", "final", "macro", "override", "priv", "typeof", "unsized", "virtual", "f32", "f64", "usize", "vec",
    // C
    "auto", "case", "char", "default", "double", "float", "goto", "int", "long", "register", "restrict", "short", "signed",
    "sizeof", "switch", "typedef", "union", "unsigned", "void", "volatile", "inline",
    // sympy's symbols and functions that sympify would read instead of a variable
    "E", "I", "N", "O", "Q", "S", "pi", "oo", "zoo", "nan", "beta", "gamma", "zeta", "re", "im", "sign", "Abs", "Max", "Min",
    "floor", "ceiling", "Symbol", "Integer", "Float", "Rational", "Function", "Piecewise", "Eq",
    // the exports' functions
    "predict", "outputs", "abs", "ln", "pow", "cosf", "expf", "fabsf", "fmaxf", "fminf", "logf", "powf", "sinf", "sqrtf", "tanf",
    "tanhf",
];

/// A variable's name as every printed equation (infix, LaTeX, sympy) and every exported
/// function spells it. A name that is already an identifier in all of them (ASCII letters,
/// digits and `_`, starting with a letter, without `__`, not [`RESERVED`] nor an operator's
/// name) is kept; any other becomes `x{i}__` followed by its characters, each one that is not
/// an ASCII letter or digit as `_` (`2 col` at index 3 → `x3__2_col`). Kept names never hold
/// `__` and changed ones start with their own index, so distinct columns keep distinct names.
pub fn identifier(name: &str, i: usize) -> String {
    let plain = name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.contains("__")
        && !name.starts_with("g_")
        && !RESERVED.contains(&name)
        && Op::by_name(name).is_none();
    if plain {
        return name.to_string();
    }
    let body: String = name.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
    format!("x{i}__{body}")
}

/// Variable `i` as `style` prints it (its [`identifier`], or `x{i}` without a name).
pub fn var_name(i: usize, names: &[String], style: Style) -> String {
    match (names.get(i), style) {
        (Some(n), Style::Latex) => latex_name(&identifier(n, i)),
        (Some(n), _) => identifier(n, i),
        (None, Style::Latex) => format!("x_{{{i}}}"),
        (None, _) => format!("x{i}"),
    }
}

fn latex_name(n: &str) -> String {
    match n.split_once(|c: char| c.is_ascii_digit()) {
        Some((head, _)) if !head.is_empty() && n[head.len()..].bytes().all(|b| b.is_ascii_digit()) => {
            format!("{head}_{{{}}}", &n[head.len()..])
        }
        _ => format!("\\mathrm{{{}}}", n.replace('_', "\\_")),
    }
}

/// Binding strength of a node's rendering (leaves and calls bind tightest).
fn strength(n: &Node, style: Style) -> u8 {
    match n.op.info().render {
        Render::Infix(_, p) if !(style == Style::Sympy && n.op == Op::Div) => p,
        Render::Prefix(_) => 3,
        _ if n.op == Op::Const && n.value < 0.0 => 3,
        _ => 10,
    }
}

/// What [`write`] does next: append text, or write the subtree rooted at a node.
enum Step {
    Text(std::borrow::Cow<'static, str>),
    Node(usize),
}

/// Writes the tree `nodes` (subtree sizes `size`) to `out`, iteratively (a stack of steps in
/// place of recursion, so a tree of any depth is safe) and in time linear in the text.
fn write(nodes: &[Node], size: &[u16], names: &[String], style: Style, out: &mut String) {
    use std::borrow::Cow;
    let open = if style == Style::Latex { "\\left(" } else { "(" };
    let close = if style == Style::Latex { "\\right)" } else { ")" };
    let mut todo = vec![Step::Node(0)];
    // Each node's steps, in order; pushed reversed.
    let mut steps: Vec<Step> = Vec::new();
    while let Some(step) = todo.pop() {
        let i = match step {
            Step::Text(t) => {
                out.push_str(&t);
                continue;
            }
            Step::Node(i) => i,
        };
        let n = nodes[i];
        steps.clear();
        let tagged = n.out > 0 && style == Style::Infix;
        if tagged {
            steps.push(Step::Text(Cow::Owned(format!("out{}=(", n.out - 1))));
        }
        let wrapped = |steps: &mut Vec<Step>, child: usize, wrap: bool| {
            if wrap {
                steps.push(Step::Text(Cow::Borrowed(open)));
            }
            steps.push(Step::Node(child));
            if wrap {
                steps.push(Step::Text(Cow::Borrowed(close)));
            }
        };
        match n.op {
            Op::Var => steps.push(Step::Text(Cow::Owned(var_name(n.value as usize, names, style)))),
            Op::Const => steps.push(Step::Text(Cow::Owned(number(n.value)))),
            op => {
                let info = op.info();
                let first = i + 1;
                match (info.render, style) {
                    (Render::Infix(sym, p), _) if !(style == Style::Sympy && op == Op::Div) => {
                        let (l, r) = (first, first + size[first] as usize);
                        // Parentheses by the tree: the text reads back (in Python, sympy, by
                        // hand) as this tree, so a right operand of equal strength keeps them,
                        // even where real arithmetic would regroup it (`a + (b + c)`, and
                        // `a*(b/c)`, which protected division makes another function).
                        let wrap_l = strength(&nodes[l], style) < p;
                        let wrap_r = strength(&nodes[r], style) <= p;
                        if style == Style::Latex && sym == "/" {
                            steps.extend([Step::Text(Cow::Borrowed("\\frac{")), Step::Node(l), Step::Text(Cow::Borrowed("}{")), Step::Node(r), Step::Text(Cow::Borrowed("}"))]);
                        } else {
                            wrapped(&mut steps, l, wrap_l);
                            steps.push(Step::Text(Cow::Owned(infix_text(sym, style))));
                            wrapped(&mut steps, r, wrap_r);
                        }
                    }
                    (Render::Prefix(sym), _) => {
                        steps.push(Step::Text(Cow::Borrowed(sym)));
                        wrapped(&mut steps, first, strength(&nodes[first], style) < 10);
                    }
                    _ => {
                        let name = match style {
                            Style::Sympy => op.name(),
                            _ => match info.render {
                                Render::Call(c) => c,
                                Render::Infix(..) | Render::Prefix(_) => op.name(),
                            },
                        };
                        let head = if style == Style::Latex {
                            let known = ["sin", "cos", "tan", "exp", "log", "tanh", "max", "min"];
                            if known.contains(&name) { format!("\\{name}\\left(") } else { format!("\\operatorname{{{name}}}\\left(") }
                        } else {
                            format!("{name}(")
                        };
                        steps.push(Step::Text(Cow::Owned(head)));
                        let mut child = first;
                        for k in 0..op.arity() {
                            if k > 0 {
                                steps.push(Step::Text(Cow::Borrowed(", ")));
                            }
                            steps.push(Step::Node(child));
                            child += size[child] as usize;
                        }
                        steps.push(Step::Text(Cow::Borrowed(close)));
                    }
                }
            }
        }
        if tagged {
            steps.push(Step::Text(Cow::Borrowed(")")));
        }
        todo.extend(steps.drain(..).rev());
    }
}

/// How an infix symbol is written: `a + b` and `a*b` in infix, `a+b` for sympy, `a \cdot b`.
fn infix_text(sym: &str, style: Style) -> String {
    match (style, sym) {
        (Style::Sympy, s) => s.to_string(),
        (Style::Latex, "*") => " \\cdot ".to_string(),
        (Style::Infix, "*" | "/") => sym.to_string(),
        (_, s) => format!(" {s} "),
    }
}

/// A user operator for sympy: `name = lambda a: body` (or `lambda a, b:`), its body in sympy
/// text over the functions of [`SYMPY_PRELUDE`], to run after it.
pub fn sympy_definition(u: &super::ops::user::UserOp) -> String {
    let params: Vec<String> = ["a", "b"][..u.params.len()].iter().map(|p| p.to_string()).collect();
    format!("{} = lambda {}: {}", u.name, params.join(", "), render(&u.body_nodes(), &params, Style::Sympy))
}

/// Python definitions sympy needs for the protected operators, to paste before `sympify`.
pub const SYMPY_PRELUDE: &str = "div = lambda a, b: sympy.Piecewise((1, sympy.Eq(b, 0)), (a / b, True)); \
aq = lambda a, b: a / sympy.sqrt(1 + b**2); plog = lambda x: sympy.log(1 + sympy.Abs(x)); \
rlog = lambda x: sympy.log(sympy.Abs(x)); square = lambda x: x**2; cube = lambda x: x**3; \
sigmoid = lambda x: 1 / (1 + sympy.exp(-x)); neg = lambda x: -x";

#[cfg(test)]
mod tests {

    #[test]
    fn outputs_follow_evogp_semantics() {
        use crate::program::Op;
        // The dialect page's worked example: prefix [+<out 1>, x0, *<out 0>, x1, 2] computes
        // [2*x1, x0+2]: `*` passes 2 up to `+`.
        let nodes = [
            Node { out: 2, ..Node::func(Op::Add) },
            Node::var(0),
            Node { out: 1, ..Node::func(Op::Mul) },
            Node::var(1),
            Node::constant(2.0),
        ];
        assert_eq!(outputs(&nodes, 3, &[], Style::Infix), ["x1*2", "x0 + 2", "0"]);
        // Two nodes on one slot add up; a leaf output passes its own value.
        let nodes = [Node { out: 1, ..Node::func(Op::Sub) }, Node { out: 1, ..Node::var(0) }, Node::var(1)];
        assert_eq!(outputs(&nodes, 1, &["a".into(), "b".into()], Style::Infix), ["a - b + a"]);
    }

    use super::*;

    fn n(op: Op) -> Node {
        Node::func(op)
    }

    #[test]
    fn minimal_parentheses() {
        // (x0 - (x1 + 2)) * sin(x0)
        let t = [n(Op::Mul), n(Op::Sub), Node::var(0), n(Op::Add), Node::var(1), Node::constant(2.0), n(Op::Sin), Node::var(0)];
        assert_eq!(render(&t, &[], Style::Infix), "(x0 - (x1 + 2))*sin(x0)");
        assert_eq!(render(&t, &[], Style::Sympy), "(x0-(x1+2))*sin(x0)");
        assert_eq!(render(&t, &[], Style::Latex), "\\left(x_{0} - \\left(x_{1} + 2\\right)\\right) \\cdot \\sin\\left(x_{0}\\right)");
        // (a + b) + c stays flat; a + (b + c) and a*(b/c) keep theirs (the text is the tree);
        // a / (b * c) keeps its parentheses.
        let t = [n(Op::Add), n(Op::Add), Node::var(0), Node::var(1), Node::var(2)];
        assert_eq!(render(&t, &[], Style::Infix), "x0 + x1 + x2");
        let t = [n(Op::Add), Node::var(0), n(Op::Add), Node::var(1), Node::var(2)];
        assert_eq!(render(&t, &[], Style::Infix), "x0 + (x1 + x2)");
        let t = [n(Op::Mul), Node::var(0), n(Op::Div), Node::var(1), Node::var(2)];
        assert_eq!(render(&t, &[], Style::Infix), "x0*(x1/x2)");
        assert_eq!(render(&t, &[], Style::Sympy), "x0*div(x1, x2)");
        let t = [n(Op::Div), Node::var(0), n(Op::Mul), Node::var(1), Node::var(2)];
        assert_eq!(render(&t, &[], Style::Infix), "x0/(x1*x2)");
        assert_eq!(render(&t, &[], Style::Sympy), "div(x0, x1*x2)");
    }

    #[test]
    fn names_negatives_and_outputs() {
        let names = vec!["height".to_string(), "w2".to_string()];
        let t = [n(Op::Neg), n(Op::Add), Node::var(0), Node::constant(-1.5)];
        assert_eq!(render(&t, &names, Style::Infix), "-(height + -1.5)");
        let t = [Node { out: 2, ..n(Op::Add) }, Node::var(1), Node::constant(2.0)];
        assert_eq!(render(&t, &names, Style::Infix), "out1=(w2 + 2)");
        assert_eq!(render(&[Node::var(1)], &names, Style::Latex), "w_{2}");
    }

    // Issue 28: column names with commas, spaces or leading digits were printed raw into
    // equations and the hall of fame's sympy column, which sympy cannot parse.
    #[test]
    fn names_that_are_not_identifiers_are_sanitised_and_stay_distinct() {
        let names: Vec<String> = ["a,b", "a b", "a_b", "2nd", "lambda", "E", "sin", "x1__y", "", "é", "_hidden", "g_div", "Height", "z"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        // Every variable, summed: one equation that names them all.
        let mut t = Vec::new();
        for i in 0..names.len() - 1 {
            t.push(n(Op::Add));
            t.push(Node::var(i as u32));
        }
        t.push(Node::var(names.len() as u32 - 1));
        let words = |text: &str| -> Vec<String> {
            text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).filter(|w| !w.is_empty()).map(str::to_string).collect()
        };
        for style in [Style::Infix, Style::Sympy] {
            let text = render(&t, &names, style);
            assert!(text.chars().all(|c| c.is_ascii_alphanumeric() || "_ +()".contains(c)), "{text}");
            let got = words(&text);
            assert_eq!(got.len(), names.len(), "{text}");
            for w in &got {
                assert!(w.starts_with(|c: char| c.is_ascii_alphabetic()), "{w} in {text}");
            }
            let distinct: std::collections::BTreeSet<&String> = got.iter().collect();
            assert_eq!(distinct.len(), names.len(), "{text}");
        }
        let ids: Vec<String> = names.iter().enumerate().map(|(i, n)| identifier(n, i)).collect();
        assert_eq!(
            ids,
            [
                "x0__a_b", "x1__a_b", "a_b", "x3__2nd", "x4__lambda", "x5__E", "x6__sin", "x7__x1__y", "x8__", "x9___", "x10___hidden",
                "x11__g_div", "Height", "z"
            ]
        );
        // LaTeX spells the same names.
        assert_eq!(render(&[Node::var(1)], &names, Style::Latex), "\\mathrm{x1\\_\\_a\\_b}");
    }
}
