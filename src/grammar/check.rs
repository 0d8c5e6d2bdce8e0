//! Checks and analyses of a parsed grammar: undefined and duplicate rules, non-terminals with no
//! terminating derivation (where PonyGE2 and GRAPE loop forever), unreachable rules, unit
//! productions; minimum depths and recursion flags for initialisation.
//!
//! Depths are counted the way the mapper reports them (and PonyGE2 counts them): the root is
//! depth 1, and a node whose children are all terminals adds one more level for its leaf row.
//! So `<c> ::= 0|1` has minimum depth 2 and `<e> ::= <c><c>` minimum depth 3.

use super::{Diagnostic, Grammar, GrammarError, Symbol};

/// Minimum depth of a non-terminal with no terminating derivation.
pub const UNBOUNDED: u32 = u32::MAX;

/// What the checks learned about a grammar that passed them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Analysis {
    /// Per rule: the smallest depth of a complete derivation tree rooted there.
    pub min_depth: Vec<u32>,
    /// Per rule and production: the smallest depth of a derivation that starts with it.
    pub production_min_depth: Vec<Vec<u32>>,
    /// Per rule: it can derive itself (it lies on a cycle).
    pub recursive: Vec<bool>,
    /// Per rule and production: one of its non-terminals is recursive.
    pub production_recursive: Vec<Vec<bool>>,
    /// Per rule: reachable from the start rule.
    pub reachable: Vec<bool>,
    /// Per rule and production, the rule index of each non-terminal symbol, in order.
    pub children: Vec<Vec<Vec<usize>>>,
    /// Warnings and notes (parse warnings, unreachable rules, unit productions).
    pub diagnostics: Vec<Diagnostic>,
}

/// Runs every check. Errors: undefined non-terminals, rules defined twice, non-terminals with
/// no terminating derivation. The grammar may still hold unresolved `GE_RANGE:dataset_*`
/// productions; they count as terminal productions here.
pub fn check(g: &Grammar) -> Result<Analysis, GrammarError> {
    let mut errors = Vec::new();
    let mut diagnostics = g.warnings.clone();
    let n = g.rules.len();

    for (i, rule) in g.rules.iter().enumerate() {
        if let Some(first) = g.rules[..i].iter().find(|r| r.name == rule.name) {
            errors.push(Diagnostic::error(
                rule.span,
                format!(
                    "rule <{}> is defined twice: first at line {}, again at line {}",
                    rule.name, first.span.line, rule.span.line
                ),
            ));
        }
    }

    let mut children = Vec::with_capacity(n);
    for rule in &g.rules {
        let mut per_prod = Vec::with_capacity(rule.productions.len());
        for p in &rule.productions {
            let mut kids = Vec::new();
            for (name, span) in p.non_terminals() {
                match g.rule_index(name) {
                    Some(k) => kids.push(k),
                    None => errors.push(Diagnostic::error(
                        span,
                        format!("non-terminal <{name}> is used but never defined"),
                    )),
                }
            }
            per_prod.push(kids);
        }
        children.push(per_prod);
    }
    if !errors.is_empty() {
        return Err(GrammarError::new(&g.file, errors));
    }

    // Minimum depths by a fixed point that stops when a round changes nothing.
    let mut min_depth = vec![UNBOUNDED; n];
    let mut prod_depth: Vec<Vec<u32>> =
        g.rules.iter().map(|r| vec![UNBOUNDED; r.productions.len()]).collect();
    loop {
        let mut changed = false;
        for (r, rule) in g.rules.iter().enumerate() {
            for (k, p) in rule.productions.iter().enumerate() {
                let d = production_depth(p.symbols.iter(), &children[r][k], &min_depth);
                if d < prod_depth[r][k] {
                    prod_depth[r][k] = d;
                    changed = true;
                }
                if d < min_depth[r] {
                    min_depth[r] = d;
                    changed = true;
                }
            }
        }
        if !changed {
            break;
        }
    }

    let reachable = reach_from(&children, &[0]);
    let stuck: Vec<usize> = (0..n).filter(|&r| min_depth[r] == UNBOUNDED).collect();
    if !stuck.is_empty() {
        let names: Vec<String> = stuck.iter().map(|&r| format!("<{}>", g.rules[r].name)).collect();
        for &r in &stuck {
            errors.push(Diagnostic::error(
                g.rules[r].span,
                format!(
                    "<{}> never derives a finished string: every production leads back into {} \
                     (add a production made of terminals only)",
                    g.rules[r].name,
                    names.join(", ")
                ),
            ));
        }
        return Err(GrammarError::new(&g.file, errors));
    }

    let mut recursive = vec![false; n];
    for (r, flag) in recursive.iter_mut().enumerate() {
        let starts: Vec<usize> = children[r].iter().flatten().copied().collect();
        *flag = reach_from(&children, &starts)[r];
    }
    let production_recursive: Vec<Vec<bool>> = children
        .iter()
        .map(|prods| prods.iter().map(|kids| kids.iter().any(|&c| recursive[c])).collect())
        .collect();

    for (r, rule) in g.rules.iter().enumerate() {
        if !reachable[r] {
            diagnostics.push(Diagnostic::warning(
                rule.span,
                format!("rule <{}> is unreachable from the start rule <{}>", rule.name, g.rules[0].name),
            ));
        }
        if rule.productions.len() == 1 && rule.productions[0].dataset_range.is_none() {
            diagnostics.push(Diagnostic::note(
                rule.span,
                format!(
                    "rule <{}> has a single production: it uses a codon with --codons eager \
                     and none with --codons lazy",
                    rule.name
                ),
            ));
        }
    }
    diagnostics.sort_by_key(|d| d.span);

    Ok(Analysis {
        min_depth,
        production_min_depth: prod_depth,
        recursive,
        production_recursive,
        reachable,
        children,
        diagnostics,
    })
}

/// Depth of the shallowest derivation starting with a production whose symbols are `symbols`
/// and whose non-terminals are the rules `kids`. A codon-value symbol counts as a non-terminal
/// with one leaf (depth 2).
fn production_depth<'a>(
    symbols: impl Iterator<Item = &'a Symbol>,
    kids: &[usize],
    min_depth: &[u32],
) -> u32 {
    let mut deepest = 0u32;
    let mut any_child = false;
    for s in symbols {
        if matches!(s, Symbol::CodonRange { .. } | Symbol::CodonSet { .. }) {
            deepest = deepest.max(2);
            any_child = true;
        }
    }
    for &k in kids {
        any_child = true;
        if min_depth[k] == UNBOUNDED {
            return UNBOUNDED;
        }
        deepest = deepest.max(min_depth[k]);
    }
    if any_child { deepest + 1 } else { 2 }
}

/// Rules reachable from `starts` (the starts themselves included).
fn reach_from(children: &[Vec<Vec<usize>>], starts: &[usize]) -> Vec<bool> {
    let mut seen = vec![false; children.len()];
    let mut stack: Vec<usize> = starts.to_vec();
    while let Some(r) = stack.pop() {
        if std::mem::replace(&mut seen[r], true) {
            continue;
        }
        stack.extend(children[r].iter().flatten().copied().filter(|&c| !seen[c]));
    }
    seen
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::{Severity, Span, parse_str};

    fn run(text: &str) -> Result<Analysis, GrammarError> {
        check(&parse_str(text, "g.bnf", false).unwrap())
    }

    #[test]
    fn min_depths_count_the_leaf_row() {
        let a = run("<e> ::= <e>+<e> | <c><c> | x\n<c> ::= 0|1").unwrap();
        assert_eq!(a.min_depth, [2, 2]);
        assert_eq!(a.production_min_depth[0], [3, 3, 2]);
        assert_eq!(a.recursive, [true, false]);
        assert_eq!(a.production_recursive[0], [true, false, false]);
    }

    #[test]
    fn undefined_non_terminal_names_the_use() {
        let e = run("<e> ::= x\n  | <e> + <v>").unwrap_err();
        assert_eq!(e.errors.len(), 1);
        assert_eq!(e.errors[0].span, Span { line: 2, col: 11 });
        assert!(e.errors[0].message.contains("<v>"));
    }

    #[test]
    fn duplicate_rule_names_both_lines() {
        let e = run("<e> ::= x\n<f> ::= y\n<e> ::= z").unwrap_err();
        assert_eq!(e.errors[0].span, Span { line: 3, col: 1 });
        assert!(e.errors[0].message.contains("line 1") && e.errors[0].message.contains("line 3"));
    }

    #[test]
    fn non_terminating_cycle_is_named() {
        let e = run("<s> ::= <a> | x\n<a> ::= <b> y\n<b> ::= <a>").unwrap_err();
        let msgs: Vec<_> = e.errors.iter().map(|d| (d.span.line, d.message.clone())).collect();
        assert_eq!(msgs.len(), 2);
        assert_eq!(msgs[0].0, 2);
        assert!(msgs[0].1.contains("<a>") && msgs[0].1.contains("<b>"));
    }

    #[test]
    fn unreachable_rule_is_a_warning_and_unit_rule_a_note() {
        let a = run("<s> ::= <u>\n<u> ::= a | b\n<x> ::= y").unwrap();
        let kinds: Vec<_> = a.diagnostics.iter().map(|d| (d.severity, d.span.line)).collect();
        assert_eq!(kinds, [(Severity::Note, 1), (Severity::Warning, 3), (Severity::Note, 3)]);
        assert_eq!(a.reachable, [true, true, false]);
    }

    #[test]
    fn codon_values_count_as_one_level() {
        let a = run("<s> ::= v<GECodonValue[0,9]>").unwrap();
        assert_eq!(a.min_depth, [3]);
    }
}
