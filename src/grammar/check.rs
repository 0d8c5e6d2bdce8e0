//! Checks and analyses of a parsed grammar: undefined and duplicate rules, non-terminals with no
//! terminating derivation (where PonyGE2 and GRAPE loop forever), unreachable rules, unit
//! productions; minimum depths and recursion flags for initialisation.
//!
//! Depths are counted the way the mapper reports them (and PonyGE2 counts them): the root is
//! depth 1, and a node whose children are all terminals adds one more level for its leaf row.
//! So `<c> ::= 0|1` has minimum depth 2 and `<e> ::= <c><c>` minimum depth 3.

use super::compile::{TABLE_LIMIT_BYTES, table_bytes};
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

    // The size of the rule table first: a grammar too large for it is refused before any
    // analysis (a lower bound while `GE_RANGE:dataset_*` productions wait to be expanded).
    if let Some(e) = too_large(g) {
        return Err(GrammarError::new(&g.file, vec![e]));
    }

    // Every name's first definition, so that each look-up below is O(1).
    let index = g.rule_indices();
    for (i, rule) in g.rules.iter().enumerate() {
        let first = index[rule.name.as_str()];
        if first != i {
            errors.push(Diagnostic::error(
                rule.span,
                format!(
                    "rule <{}> is defined twice: first at line {}, again at line {}",
                    rule.name, g.rules[first].span.line, rule.span.line
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
                match index.get(name) {
                    Some(&k) => kids.push(k),
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

    let min_depth = min_depths(g, &children);
    let prod_depth: Vec<Vec<u32>> = g
        .rules
        .iter()
        .enumerate()
        .map(|(r, rule)| {
            let kids = &children[r];
            rule.productions.iter().zip(kids).map(|(p, k)| production_depth(p.symbols.iter(), k, &min_depth)).collect()
        })
        .collect();

    let reachable = reach_from(&children, &[0]);
    let stuck: Vec<usize> = (0..n).filter(|&r| min_depth[r] == UNBOUNDED).collect();
    if !stuck.is_empty() {
        // Name a few of the rules on the loop, not thousands in every message.
        const NAMED: usize = 5;
        let mut names: Vec<String> = stuck.iter().take(NAMED).map(|&r| format!("<{}>", g.rules[r].name)).collect();
        if stuck.len() > NAMED {
            names.push(format!("{} more", stuck.len() - NAMED));
        }
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

    let recursive = on_a_cycle(&children);
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

/// The rule table's size error, when the grammar's counts alone already exceed what GPU constant
/// memory holds (every compile would refuse it, after an analysis that grows with the grammar).
fn too_large(g: &Grammar) -> Option<Diagnostic> {
    let (mut productions, mut symbols, mut children, mut codon) = (0usize, 0usize, 0usize, 0usize);
    for p in g.rules.iter().flat_map(|r| &r.productions) {
        productions += 1;
        symbols += p.symbols.len();
        for s in &p.symbols {
            match s {
                Symbol::Terminal { .. } => {}
                Symbol::NonTerminal { .. } => children += 1,
                Symbol::CodonRange { .. } | Symbol::CodonSet { .. } => {
                    children += 1;
                    codon += 1;
                }
            }
        }
    }
    let bytes = table_bytes(g.rules.len(), productions, children, symbols, codon);
    (bytes > TABLE_LIMIT_BYTES).then(|| {
        Diagnostic::error(
            g.rules[0].span,
            format!(
                "the grammar is too large for the rule table: {} rules, {productions} productions and {symbols} \
                 symbols take at least {bytes} bytes; GPU constant memory holds {TABLE_LIMIT_BYTES}",
                g.rules.len()
            ),
        )
    })
}

/// Per rule, the smallest depth of a complete derivation tree rooted there ([`UNBOUNDED`] when
/// there is none). Knuth's generalisation of Dijkstra's algorithm: a production's depth is known
/// once all its non-terminals are, and exceeds each of theirs, so rules settle in order of
/// depth and each production is looked at once per non-terminal: O(size · log rules).
fn min_depths(g: &Grammar, children: &[Vec<Vec<usize>>]) -> Vec<u32> {
    use std::cmp::Reverse;
    let n = g.rules.len();
    let mut min_depth = vec![UNBOUNDED; n];
    // users[k]: (rule, production) once per occurrence of rule k in that production.
    let mut users: Vec<Vec<(usize, usize)>> = vec![Vec::new(); n];
    let mut waiting: Vec<Vec<usize>> = children.iter().map(|prods| prods.iter().map(Vec::len).collect()).collect();
    let mut heap = std::collections::BinaryHeap::new();
    for (r, prods) in children.iter().enumerate() {
        for (k, kids) in prods.iter().enumerate() {
            for &c in kids {
                users[c].push((r, k));
            }
            if kids.is_empty() {
                heap.push(Reverse((production_depth(g.rules[r].productions[k].symbols.iter(), kids, &min_depth), r)));
            }
        }
    }
    let mut settled = vec![false; n];
    while let Some(Reverse((d, r))) = heap.pop() {
        if std::mem::replace(&mut settled[r], true) {
            continue;
        }
        min_depth[r] = d;
        for &(u, k) in &users[r] {
            waiting[u][k] -= 1;
            if waiting[u][k] == 0 {
                let p = &g.rules[u].productions[k];
                heap.push(Reverse((production_depth(p.symbols.iter(), &children[u][k], &min_depth), u)));
            }
        }
    }
    min_depth
}

/// Per rule: whether it can derive itself, i.e. lies on a cycle of the rule graph (a strongly
/// connected component of more than one rule, or a rule that names itself). Tarjan's algorithm
/// with an explicit stack, so a chain of 10⁵ rules neither overflows the call stack nor costs
/// more than one pass: O(rules + uses).
fn on_a_cycle(children: &[Vec<Vec<usize>>]) -> Vec<bool> {
    let n = children.len();
    let edges: Vec<Vec<usize>> = children.iter().map(|prods| prods.iter().flatten().copied().collect()).collect();
    const UNSEEN: usize = usize::MAX;
    let (mut order, mut low) = (vec![UNSEEN; n], vec![0usize; n]);
    let mut on_stack = vec![false; n];
    let (mut stack, mut next) = (Vec::new(), 0usize);
    let mut cyclic = vec![false; n];
    for root in 0..n {
        if order[root] != UNSEEN {
            continue;
        }
        // Frames of the depth-first walk: (rule, index of its next edge).
        let mut frames = vec![(root, 0usize)];
        order[root] = next;
        low[root] = next;
        next += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(&mut (v, ref mut e)) = frames.last_mut() {
            if let Some(&w) = edges[v].get(*e) {
                *e += 1;
                if w == v {
                    cyclic[v] = true;
                }
                if order[w] == UNSEEN {
                    order[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    frames.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(order[w]);
                }
                continue;
            }
            frames.pop();
            if let Some(&(parent, _)) = frames.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == order[v] {
                let from = stack.iter().rposition(|&x| x == v).expect("v is on the stack");
                let component = stack.split_off(from);
                let several = component.len() > 1;
                for x in component {
                    on_stack[x] = false;
                    cyclic[x] |= several;
                }
            }
        }
    }
    cyclic
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

    /// The old fixed point and reach-from-every-rule scan, kept here as the reference that the
    /// linear-time analysis must equal.
    fn reference(g: &Grammar, children: &[Vec<Vec<usize>>]) -> (Vec<u32>, Vec<bool>) {
        let n = g.rules.len();
        let mut min_depth = vec![UNBOUNDED; n];
        loop {
            let mut changed = false;
            for (r, rule) in g.rules.iter().enumerate() {
                for (k, p) in rule.productions.iter().enumerate() {
                    let d = production_depth(p.symbols.iter(), &children[r][k], &min_depth);
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
        let recursive = (0..n)
            .map(|r| {
                let starts: Vec<usize> = children[r].iter().flatten().copied().collect();
                reach_from(children, &starts)[r]
            })
            .collect();
        (min_depth, recursive)
    }

    #[test]
    fn linear_analysis_equals_the_fixed_point_on_random_grammars() {
        use crate::rng::{Purpose, Stream};
        for seed in 0..300u64 {
            let mut rng = Stream::new(seed, 0, 0, Purpose::Init);
            let n = 1 + rng.below(12) as usize;
            let mut text = String::new();
            for r in 0..n {
                let prods: Vec<String> = (0..1 + rng.below(4))
                    .map(|_| {
                        let parts: Vec<String> = (0..rng.below(4))
                            .map(|_| match rng.below(5) {
                                0 => "x".to_string(),
                                1 => "<GECodonValue[0,3]>".to_string(),
                                _ => format!("<r{}>", rng.below(n as u32)),
                            })
                            .collect();
                        if parts.is_empty() { "t".to_string() } else { parts.join(" ") }
                    })
                    .collect();
                text += &format!("<r{r}> ::= {}\n", prods.join(" | "));
            }
            let g = parse_str(&text, "g.bnf", false).unwrap();
            let index = g.rule_indices();
            let children: Vec<Vec<Vec<usize>>> = g
                .rules
                .iter()
                .map(|r| r.productions.iter().map(|p| p.non_terminals().map(|(name, _)| index[name]).collect()).collect())
                .collect();
            let (depth, recursive) = reference(&g, &children);
            assert_eq!(min_depths(&g, &children), depth, "seed {seed}:\n{text}");
            assert_eq!(on_a_cycle(&children), recursive, "seed {seed}:\n{text}");
        }
    }

    // A 5 MB grammar of chained rules took minutes: the analysis was quadratic and ran before
    // the size limit that refuses it.
    #[test]
    fn a_huge_grammar_is_refused_at_once_by_its_size() {
        let text: String = (0..100_000).map(|r| format!("<r{r}> ::= <r{}> | x\n", r + 1)).collect::<String>() + "<r100000> ::= y\n";
        let g = parse_str(&text, "g.bnf", false).unwrap();
        let start = std::time::Instant::now();
        let e = check(&g).unwrap_err();
        assert!(start.elapsed().as_secs_f64() < 2.0, "took {:?}", start.elapsed());
        assert_eq!(e.errors.len(), 1);
        assert!(e.errors[0].message.contains("too large for the rule table"), "{}", e.errors[0].message);
        assert!(e.errors[0].message.contains("100001 rules"), "{}", e.errors[0].message);
    }

    #[test]
    fn a_long_chain_within_the_size_limit_is_analysed_without_recursion() {
        // 1,500 rules in one chain and one loop back to the start: deep for a recursive walk.
        let n = 1500;
        let text: String = (0..n).map(|r| format!("<r{r}> ::= <r{}> | x\n", (r + 1) % n)).collect();
        let a = check(&parse_str(&text, "g.bnf", false).unwrap()).unwrap();
        assert!(a.recursive.iter().all(|&r| r));
        assert!(a.min_depth.iter().all(|&d| d == 2));
    }

    #[test]
    fn many_stuck_rules_name_a_few_and_count_the_rest() {
        let text: String = "<s> ::= <r0> | x\n".to_string() + &(0..50).map(|r| format!("<r{r}> ::= <r{}>\n", (r + 1) % 50)).collect::<String>();
        let e = run(&text).unwrap_err();
        assert_eq!(e.errors.len(), 50);
        assert!(e.errors[0].message.contains("45 more"), "{}", e.errors[0].message);
        let shown = e.to_string();
        assert_eq!(shown.lines().count(), GrammarError::SHOWN + 1, "{shown}");
        assert!(shown.ends_with("and 30 more errors"), "{shown}");
    }
}
