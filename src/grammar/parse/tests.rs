//! Tests of the grammar reader: PonyGE2's dialect token for token (spaces, quotes, escapes, comments, GE_RANGE, line ends) and its errors.

use super::*;

fn parse(text: &str) -> Grammar {
    parse_str(text, "t.bnf", false).unwrap_or_else(|e| panic!("{e}"))
}

fn terms(p: &Production) -> Vec<String> {
    p.symbols
        .iter()
        .map(|s| match s {
            Symbol::Terminal { text, .. } => format!("T{text:?}"),
            Symbol::NonTerminal { name, .. } => format!("<{name}>"),
            other => format!("{other:?}"),
        })
        .collect()
}

#[test]
fn spaces_between_tokens_stay_in_terminals() {
    let g = parse("<e> ::= (<e> <op> <e>) | <v>\n<op> ::= +|-\n<v> ::= x");
    assert_eq!(terms(&g.rules[0].productions[0]), ["T\"(\"", "<e>", "T\" \"", "<op>", "T\" \"", "<e>", "T\")\""]);
    assert_eq!(g.rules[1].productions.len(), 2);
}

#[test]
fn multi_line_rule_and_leading_bar() {
    let g = parse("<a> ::= x\n      | y |\n  z\n<b> ::= w");
    let names: Vec<_> = g.rules[0].productions.iter().map(|p| terms(p)[0].clone()).collect();
    assert_eq!(names, ["T\"x\"", "T\"y\"", "T\"z\""]);
    assert_eq!(g.rules[1].span, Span { line: 4, col: 1 });
}

#[test]
fn quotes_protect_special_characters() {
    let g = parse("<a> ::= '|' | \"'<b>'\" | '#' | \"<\" <a>");
    let p = &g.rules[0].productions;
    assert_eq!(terms(&p[0]), ["T\"|\""]);
    assert_eq!(terms(&p[1]), ["T\"'<b>'\""]);
    assert_eq!(terms(&p[2]), ["T\"#\""]);
    assert_eq!(terms(&p[3]), ["T\"< \"", "<a>"]);
}

#[test]
fn escapes_are_decoded() {
    let g = parse(r#"<a> ::= '\n' | "a\tb" | x\\y | '\x41'"#);
    let p = &g.rules[0].productions;
    assert_eq!(terms(&p[0]), ["T\"\\n\""]);
    assert_eq!(terms(&p[1]), ["T\"a\\tb\""]);
    assert_eq!(terms(&p[2]), ["T\"x\\\\y\""]);
    assert_eq!(terms(&p[3]), ["T\"A\""]);
}

#[test]
fn comments_end_productions() {
    let g = parse("# header\n<a> ::= x # first\n  | y # <b> ::= z\n");
    assert_eq!(g.rules.len(), 1);
    assert_eq!(g.rules[0].productions.len(), 2);
}

#[test]
fn hyphenated_names_and_lone_angle() {
    let g = parse("<pre-op> ::= a < b | <x-y>\n<x-y> ::= 1");
    assert_eq!(terms(&g.rules[0].productions[0]), ["T\"a < b\""]);
    assert_eq!(terms(&g.rules[0].productions[1]), ["<x-y>"]);
}

#[test]
fn empty_terminal() {
    let g = parse("<a> ::= \"\" | x");
    assert_eq!(terms(&g.rules[0].productions[0]), ["T\"\""]);
}

#[test]
fn newline_inside_production_is_terminal_text() {
    let g = parse("<a> ::= x  \n   y | z");
    assert_eq!(terms(&g.rules[0].productions[0]), ["T\"x  \\ny\""]);
}

#[test]
fn ge_range_literal_and_dataset() {
    let g = parse("<d> ::= GE_RANGE:3 | q\n<v> ::= GE_RANGE:dataset_n_vars");
    assert_eq!(g.rules[0].productions.len(), 4);
    assert_eq!(terms(&g.rules[0].productions[2]), ["T\"2\""]);
    assert!(g.needs_dataset());
    let err = g.resolve(&DatasetShape::default()).unwrap_err();
    assert_eq!(err.errors[0].span, Span { line: 2, col: 9 });
    let r = g.resolve(&DatasetShape { n_vars: Some(2), ..Default::default() }).unwrap();
    assert_eq!(r.rules[1].productions.len(), 2);
    assert!(!r.needs_dataset());
}

#[test]
fn ge_range_reads_counts_as_python_int() {
    let g = parse("<w> ::= GE_RANGE: 3 | GE_RANGE:1_0 | GE_RANGE:-2 | w\n<k> ::= GE_RANGE:2\n  dropped | k");
    assert_eq!(g.rules[0].productions.len(), 3 + 10 + 1);
    assert_eq!(g.rules[1].productions.len(), 3);
    assert_eq!(g.warnings.len(), 2); // -2 adds nothing; `dropped` is ignored
    assert_eq!(python_int(" +1_000 "), Some(1000));
    assert_eq!(python_int("1__0"), None);
    assert_eq!(python_int("x"), None);
}

#[test]
fn crlf_is_a_newline() {
    let g = parse("<a> ::= x\r\n  | y\r<b> ::= z");
    assert_eq!(g.rules[0].productions.len(), 2);
    assert_eq!(g.rules[1].span, Span { line: 3, col: 1 });
}

#[test]
fn ge_range_misuse_is_an_error() {
    let e = parse_str("<d> ::= GE_RANGE:dataset_n_rows", "g.bnf", false).unwrap_err();
    assert_eq!(e.errors[0].span, Span { line: 1, col: 18 });
    assert!(e.to_string().starts_with("g.bnf:1:18: error: bad use of GE_RANGE"), "{e}");
}

#[test]
fn codon_values() {
    let g = parse("<a> ::= <GECodonValue[-2,5]>x<GECodonValue{a, b ,c}>");
    let s = &g.rules[0].productions[0].symbols;
    assert!(matches!(s[0], Symbol::CodonRange { lo: -2, hi: 5, .. }));
    assert!(matches!(&s[2], Symbol::CodonSet { values, .. } if values == &["a", "b", "c"]));
    let e = parse_str("<a> ::= <GECodonValue[5,2]>", "g", false).unwrap_err();
    assert!(e.errors[0].message.contains("empty"));
}

#[test]
fn unterminated_quote_is_an_error() {
    let e = parse_str("<a> ::= x\n  | 'abc\n<b> ::= c", "g", false).unwrap_err();
    assert_eq!(e.errors[0].span, Span { line: 2, col: 5 });
}

#[test]
fn no_rules_is_an_error() {
    assert!(parse_str("# nothing\n", "g", false).is_err());
    assert!(parse_str("", "g", false).is_err());
}

#[test]
fn empty_rule_is_an_error() {
    let e = parse_str("<a> ::= <b>\n<b> ::=   \n", "g", false).unwrap_err();
    assert_eq!(e.errors[0].span, Span { line: 2, col: 1 });
}

#[test]
fn stray_text_is_a_warning() {
    let g = parse("hello\n<a> ::= x");
    assert_eq!(g.warnings.len(), 1);
    assert_eq!(g.warnings[0].span, Span { line: 1, col: 1 });
}

#[test]
fn unescape_python_rules() {
    assert_eq!(unescape(r"a\qb").unwrap(), r"a\qb");
    assert_eq!(unescape(r"\101\u00e9").unwrap(), "Aé");
    assert!(unescape("x\\").is_err());
    assert!(unescape(r"\xZ1").is_err());
}
