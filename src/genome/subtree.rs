//! GE's operators on derivation trees (PonyGE2's `subtree` crossover and mutation), done on
//! the genome: a parent is mapped with [`Mapper::map_nodes`], which gives each derivation node
//! the span of codons its subtree read, and a subtree is exchanged or replaced by splicing
//! those spans. With wraps off, mapping the spliced genome gives exactly the tree with the
//! subtree swapped, the codons before the span deriving the same nodes and those after it
//! the same later siblings. Crossover's GPU twin is `grove_ge_subtree_crossover` in
//! `kernels/map.cu` (the same draws, retries and fallback), mutation's is
//! `grove_ge_subtree_mutate` beside it.
//!
//! A child that does not fit the genome capacity or does not map validly (too deep, too many
//! nodes, over the loops' derivation or stack bounds) is not kept: the operator tries again
//! with new choices from the same stream, up to [`TRIES`] times, and then keeps the parents
//! (crossover) or the unmutated genome (mutation). PonyGE2 instead draws new parents (crossover)
//! or retries without end (mutation); a bounded retry on the child's own stream keeps the
//! result a function of `(seed, generation, row)`.

use super::init::grow_derivation;
use super::map::{DerivationNode, Mapper};
use super::vary::GeVaryConfig;
use crate::rng::Stream;

/// Attempts an operator makes before it keeps its inputs.
pub const TRIES: usize = 8;

/// Reusable buffers of the subtree operators (one per thread).
#[derive(Clone, Debug, Default)]
pub struct SubtreeScratch {
    a: Vec<DerivationNode>,
    b: Vec<DerivationNode>,
    labels: Vec<u16>,
    fresh: Vec<u32>,
    child: Vec<u32>,
}

/// True when `g` fits `capacity` and maps validly under `mapper`.
fn acceptable(mapper: &mut Mapper<'_>, g: &[u32], capacity: usize) -> bool {
    g.len() <= capacity && mapper.map(g).valid()
}

/// `a` with codons `span` replaced by `middle`, into `out` (cleared first).
fn splice(a: &[u32], span: (u32, u32), middle: &[u32], out: &mut Vec<u32>) {
    out.clear();
    out.extend_from_slice(&a[..span.0 as usize]);
    out.extend_from_slice(middle);
    out.extend_from_slice(&a[span.1 as usize..]);
}

/// Subtree crossover of genomes `ga` and `gb` into `c0` and `c1` (cleared first), the parents
/// mapped with `mapper` (the evolution loop's). With probability `cfg.crossover`: a
/// non-terminal is drawn uniformly from those both derivation trees contain (PonyGE2's
/// choice: labels first, then a node of each tree with that label, uniformly), and the two
/// subtrees' codon spans `a0..a1` of A and `b0..b1` of B are exchanged:
/// `c0 = A[..a0] ++ B[b0..b1] ++ A[a1..]`, `c1 = B[..b0] ++ A[a0..a1] ++ B[b1..]`, so each
/// child keeps its first parent's tail. Only nodes whose span lies within the genome take
/// part (with wraps, a subtree may read past the end). Otherwise, when a parent is invalid,
/// when the trees share no non-terminal, or when [`TRIES`] attempts give no pair of children
/// that both fit `capacity` and map validly, the parents are copied (cut to `capacity`). The
/// caller addresses `s` as `(seed, generation, pair, Crossover)`.
#[allow(clippy::too_many_arguments)]
pub fn subtree_crossover(
    mapper: &mut Mapper<'_>,
    ga: &[u32],
    gb: &[u32],
    cfg: &GeVaryConfig,
    capacity: usize,
    s: &mut Stream,
    scratch: &mut SubtreeScratch,
    c0: &mut Vec<u32>,
    c1: &mut Vec<u32>,
) {
    let copy = |c0: &mut Vec<u32>, c1: &mut Vec<u32>| {
        c0.clear();
        c1.clear();
        c0.extend_from_slice(&ga[..ga.len().min(capacity)]);
        c1.extend_from_slice(&gb[..gb.len().min(capacity)]);
    };
    if !s.chance(cfg.crossover) {
        return copy(c0, c1);
    }
    let SubtreeScratch { a, b, labels, .. } = scratch;
    if !mapper.map_nodes(ga, a).valid() || !mapper.map_nodes(gb, b).valid() {
        return copy(c0, c1);
    }
    a.retain(|n| n.end as usize <= ga.len());
    b.retain(|n| n.end as usize <= gb.len());
    // The shared labels in increasing order, so that a draw names the same one every time.
    labels.clear();
    labels.extend(a.iter().map(|n| n.symbol));
    labels.sort_unstable();
    labels.dedup();
    labels.retain(|l| b.iter().any(|n| n.symbol == *l));
    if labels.is_empty() {
        return copy(c0, c1);
    }
    for _ in 0..TRIES {
        let label = labels[s.below(labels.len() as u32) as usize];
        let pick = |nodes: &[DerivationNode], s: &mut Stream| {
            let k = nodes.iter().filter(|n| n.symbol == label).count() as u32;
            let j = s.below(k) as usize;
            *nodes.iter().filter(|n| n.symbol == label).nth(j).expect("a node of a shared label")
        };
        let (na, nb) = (pick(a, s), pick(b, s));
        let (sa, sb) = ((na.start, na.end), (nb.start, nb.end));
        splice(ga, sa, &gb[sb.0 as usize..sb.1 as usize], c0);
        splice(gb, sb, &ga[sa.0 as usize..sa.1 as usize], c1);
        if acceptable(mapper, c0, capacity) && acceptable(mapper, c1, capacity) {
            return;
        }
    }
    copy(c0, c1);
}

/// Subtree mutation of `g` in place, mapped with `mapper` (the evolution loop's): with
/// probability `cfg.mutation`, a node of its derivation tree is drawn uniformly (non-terminals
/// and codon values alike, as PonyGE2 draws among all non-terminal nodes) and its codon span
/// is replaced by the codons of a fresh random derivation of the same symbol, grown at the
/// node's depth so that the tree stays within the mapper's depth limit
/// ([`grow_derivation`], PonyGE2's "random" derivation); the codons outside the span, the tail
/// included, are kept. A genome that does not map validly is left as it is, and so is one for
/// which [`TRIES`] attempts give no child that fits `capacity` and maps validly. The caller
/// addresses `s` as `(seed, generation, child, Mutate)`.
pub fn subtree_mutate(mapper: &mut Mapper<'_>, g: &mut Vec<u32>, cfg: &GeVaryConfig, capacity: usize, s: &mut Stream, scratch: &mut SubtreeScratch) {
    if !s.chance(cfg.mutation) {
        return;
    }
    let SubtreeScratch { a, fresh, child, .. } = scratch;
    if !mapper.map_nodes(g, a).valid() {
        return;
    }
    a.retain(|n| n.end as usize <= g.len());
    if a.is_empty() {
        return;
    }
    let map = mapper.config();
    let table = mapper.table();
    for _ in 0..TRIES {
        let n = a[s.below(a.len() as u32) as usize];
        let kept = g.len() - (n.end - n.start) as usize;
        fresh.clear();
        let budget = capacity.saturating_sub(kept);
        if !grow_derivation(table, map.codons, n.symbol, n.depth, map.max_depth, false, cfg.codon_size, budget, super::MAP_STACK, s, fresh) {
            continue;
        }
        splice(g, (n.start, n.end), fresh, child);
        if acceptable(mapper, child, capacity) {
            std::mem::swap(g, child);
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::genome::MapConfig;
    use crate::genome::init::{InitConfig, InitMethod, init_genomes};
    use crate::genome::map::Codons;
    use crate::grammar::compile::{RuleTable, SymbolKind, unpack};
    use crate::grammar::{DatasetShape, load_parsed, parse_str};
    use crate::rng::Purpose;

    const GRAMMARS: [&str; 3] = [
        "<e> ::= (<op> <e> <e>) | <v>\n<op> ::= + | - | *\n<v> ::= x0 | 1.0",
        // A unit rule (no codon with lazy codons) and codon values.
        "<s> ::= <e>\n<e> ::= <e>+<e>|<e>*<e>|f(<e>)|x|<c><c>.<c>\n<c> ::= GE_RANGE:10",
        // PonyGE2's supervised_learning.bnf, two variables.
        "<e>  ::= (<e>+<e>)|(<e>-<e>)|(<e>*<e>)|aq(<e>,<e>)|x[:, <varidx>]|<c>\n<varidx> ::= GE_RANGE:2\n<c> ::= <d>.<d> | -<d>.<d>\n<d> ::= GE_RANGE:10",
    ];

    fn table(text: &str) -> RuleTable {
        load_parsed(parse_str(text, "g", false).unwrap(), &DatasetShape::default()).unwrap().table
    }

    /// `n` PI grow genomes (tails included) of depths 3 to 7.
    fn parents(t: &RuleTable, codons: Codons, n: usize) -> Vec<Vec<u32>> {
        let cfg = InitConfig { method: InitMethod::PiGrow, min_depth: 3, max_depth: 7, ..InitConfig::default() };
        let pop = init_genomes(t, &cfg, codons, n, 4096, 5);
        (0..n).map(|i| pop.get(i).to_vec()).collect()
    }

    /// The phenotype of `g` and, per derivation node, the byte range of the text it derives.
    fn text_and_spans(m: &mut Mapper<'_>, g: &[u32]) -> (String, Vec<(usize, usize)>) {
        fn walk(t: &RuleTable, d: &[u32], next: &mut usize, sym: u16, out: &mut String, spans: &mut [(usize, usize)]) {
            let (kind, index) = unpack(sym);
            if kind == SymbolKind::Terminal {
                out.push_str(&t.terminals[index]);
                return;
            }
            let k = *next;
            *next += 1;
            let from = out.len();
            if kind == SymbolKind::NonTerminal {
                for &c in t.symbols_of(d[k] as usize) {
                    walk(t, d, next, c, out, spans);
                }
            } else {
                t.render_derivation(d, k, sym, out);
            }
            spans[k] = (from, out.len());
        }
        assert!(m.map(g).valid());
        let d = m.derivation().to_vec();
        let mut spans = vec![(0, 0); d.len()];
        let mut out = String::new();
        walk(m.table(), &d, &mut 0, crate::grammar::compile::symbol(SymbolKind::NonTerminal, 0), &mut out, &mut spans);
        let mut rendered = String::new();
        m.render(&mut rendered);
        assert_eq!(out, rendered);
        (out, spans)
    }

    #[test]
    fn derivation_nodes_span_their_subtrees() {
        for text in GRAMMARS {
            let t = table(text);
            for codons in [Codons::Eager, Codons::Lazy] {
                let mut m = Mapper::new(&t, MapConfig { codons, ..MapConfig::default() });
                let mut nodes = Vec::new();
                for g in parents(&t, codons, 40) {
                    let r = m.map_nodes(&g, &mut nodes);
                    assert!(r.valid());
                    assert_eq!(nodes.len(), m.derivation().len());
                    assert_eq!((nodes[0].start, nodes[0].end, nodes[0].size as usize, nodes[0].depth), (0, r.used_codons, nodes.len(), 1));
                    for (i, n) in nodes.iter().enumerate() {
                        // Rendering the node's subtree alone uses exactly its entries.
                        let mut out = String::new();
                        assert_eq!(t.render_derivation(m.derivation(), i, n.symbol, &mut out), i + n.size as usize);
                        // Its children follow each other and fill its span.
                        let mut at = i + 1;
                        let mut pos = n.start + matches!(unpack(n.symbol), (SymbolKind::NonTerminal, r) if !(codons == Codons::Lazy && t.rules[r].n_productions == 1)) as u32;
                        if !matches!(unpack(n.symbol), (SymbolKind::NonTerminal, _)) {
                            pos += 1;
                        }
                        while at < i + n.size as usize {
                            assert_eq!((nodes[at].start, nodes[at].depth), (pos, n.depth + 1), "node {at} under {i}");
                            pos = nodes[at].end;
                            at += nodes[at].size as usize;
                        }
                        assert_eq!(pos, n.end, "node {i}");
                    }
                }
            }
        }
    }

    /// Swapping the spans of two nodes of the same non-terminal gives the swapped trees: child
    /// 0's phenotype is A's text with A's subtree's text replaced by B's, and child 1's the
    /// other way round, for every such pair of nodes of these parents.
    #[test]
    fn swapped_spans_map_to_the_swapped_trees() {
        for text in GRAMMARS {
            let t = table(text);
            for codons in [Codons::Eager, Codons::Lazy] {
                let mut m = Mapper::new(&t, MapConfig { codons, ..MapConfig::default() });
                let ps = parents(&t, codons, 12);
                let (mut na, mut nb, mut c0, mut c1) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
                let mut pairs = 0;
                for j in 0..6 {
                    let (ga, gb) = (&ps[2 * j], &ps[2 * j + 1]);
                    m.map_nodes(ga, &mut na);
                    m.map_nodes(gb, &mut nb);
                    let (text_a, spans_a) = text_and_spans(&mut m, ga);
                    let (text_b, spans_b) = text_and_spans(&mut m, gb);
                    for (ka, x) in na.iter().enumerate() {
                        for (kb, y) in nb.iter().enumerate().filter(|(_, y)| y.symbol == x.symbol) {
                            splice(ga, (x.start, x.end), &gb[y.start as usize..y.end as usize], &mut c0);
                            splice(gb, (y.start, y.end), &ga[x.start as usize..x.end as usize], &mut c1);
                            let ((a0, a1), (b0, b1)) = (spans_a[ka], spans_b[kb]);
                            let want0 = format!("{}{}{}", &text_a[..a0], &text_b[b0..b1], &text_a[a1..]);
                            let want1 = format!("{}{}{}", &text_b[..b0], &text_a[a0..a1], &text_b[b1..]);
                            assert_eq!(text_and_spans(&mut m, &c0).0, want0, "{text}: nodes {ka} and {kb}");
                            assert_eq!(text_and_spans(&mut m, &c1).0, want1, "{text}: nodes {ka} and {kb}");
                            pairs += 1;
                        }
                    }
                }
                assert!(pairs > 100, "{text}: {pairs} pairs");
            }
        }
    }

    /// Subtree crossover's children are a swap of two same-symbol subtrees of the parents (or
    /// the parents), valid within the mapper's limits and the capacity, and most pairs change.
    #[test]
    fn subtree_crossover_swaps_subtrees_of_one_non_terminal() {
        let cfg = GeVaryConfig { crossover: 1.0, ..GeVaryConfig::default() };
        for text in GRAMMARS {
            let t = table(text);
            let mut m = Mapper::new(&t, MapConfig { max_depth: 9, ..MapConfig::default() });
            let ps = parents(&t, Codons::Eager, 80);
            let (mut na, mut nb, mut w0, mut w1) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            let mut scratch = SubtreeScratch::default();
            let (mut c0, mut c1) = (Vec::new(), Vec::new());
            let (mut changed, mut labels) = (0, std::collections::HashSet::new());
            for j in 0..40 {
                let (ga, gb) = (&ps[2 * j], &ps[2 * j + 1]);
                let mut s = Stream::new(3, 1, j as u32, Purpose::Crossover);
                subtree_crossover(&mut m, ga, gb, &cfg, 4096, &mut s, &mut scratch, &mut c0, &mut c1);
                if (&c0, &c1) == (ga, gb) {
                    continue;
                }
                changed += 1;
                for c in [&c0, &c1] {
                    let r = m.map(c);
                    assert!(r.valid() && r.depth <= 9, "{text}: pair {j}");
                }
                m.map_nodes(ga, &mut na);
                m.map_nodes(gb, &mut nb);
                let swap = na.iter().flat_map(|x| nb.iter().filter(move |y| y.symbol == x.symbol).map(move |y| (*x, *y))).find(|(x, y)| {
                    splice(ga, (x.start, x.end), &gb[y.start as usize..y.end as usize], &mut w0);
                    splice(gb, (y.start, y.end), &ga[x.start as usize..x.end as usize], &mut w1);
                    (&w0, &w1) == (&c0, &c1)
                });
                let (x, _) = swap.unwrap_or_else(|| panic!("{text}: pair {j}'s children are no swap of subtrees"));
                labels.insert(x.symbol);
            }
            assert!(changed > 25, "{text}: only {changed} of 40 crossovers changed the parents");
            assert!(labels.len() > 1, "{text}: one label crossed");
        }
    }

    /// Subtree mutation keeps everything outside the replaced subtree: the codons before and
    /// after its span, and the phenotype's text around the subtree's; the new subtree derives
    /// from the same symbol at the same depth and the tree stays within the depth limit.
    #[test]
    fn subtree_mutation_keeps_everything_outside_the_replaced_subtree() {
        let cfg = GeVaryConfig { mutation: 1.0, ..GeVaryConfig::default() };
        for text in GRAMMARS {
            let t = table(text);
            for codons in [Codons::Eager, Codons::Lazy] {
                let mut m = Mapper::new(&t, MapConfig { codons, max_depth: 9, ..MapConfig::default() });
                let mut scratch = SubtreeScratch::default();
                let (mut before, mut after) = (Vec::new(), Vec::new());
                let mut changed = 0;
                for (k, g) in parents(&t, codons, 60).into_iter().enumerate() {
                    let mut c = g.clone();
                    subtree_mutate(&mut m, &mut c, &cfg, 4096, &mut Stream::new(4, 2, k as u32, Purpose::Mutate), &mut scratch);
                    let r = m.map_nodes(&c, &mut after);
                    assert!(r.valid() && r.depth <= 9, "{text}: child {k}, depth {}", r.depth);
                    if c == g {
                        continue;
                    }
                    changed += 1;
                    m.map_nodes(&g, &mut before);
                    let (text_g, spans_g) = text_and_spans(&mut m, &g);
                    let (text_c, spans_c) = text_and_spans(&mut m, &c);
                    let replaced = before.iter().enumerate().any(|(i, n)| {
                        let (s0, s1) = (n.start as usize, n.end as usize);
                        let Some(new_len) = (c.len() + s1 - s0).checked_sub(g.len()) else { return false };
                        let Some(x) = after.get(i) else { return false };
                        let ((t0, t1), (u0, u1)) = (spans_g[i], spans_c[i]);
                        c[..s0] == g[..s0]
                            && c[s0 + new_len..] == g[s1..]
                            && (x.symbol, x.depth, x.start as usize, x.end as usize) == (n.symbol, n.depth, s0, s0 + new_len)
                            && (t0, &text_g[..t0], &text_g[t1..]) == (u0, &text_c[..u0], &text_c[u1..])
                    });
                    assert!(replaced, "{text} {codons:?}: child {k} is not its parent with one subtree replaced");
                }
                assert!(changed > 40, "{text}: only {changed} of 60 mutations changed the genome");
            }
        }
    }

    #[test]
    fn rejected_children_fall_back_to_the_parents() {
        let t = table(GRAMMARS[0]);
        let ps = parents(&t, Codons::Eager, 2);
        let cfg = GeVaryConfig { crossover: 1.0, mutation: 1.0, ..GeVaryConfig::default() };
        let mut scratch = SubtreeScratch::default();
        let (mut c0, mut c1) = (Vec::new(), Vec::new());
        // A capacity no child fits: the parents are copied, cut to the capacity; the
        // mutated genome is kept as it was.
        let mut m = Mapper::new(&t, MapConfig::default());
        subtree_crossover(&mut m, &ps[0], &ps[1], &cfg, 3, &mut Stream::new(1, 1, 0, Purpose::Crossover), &mut scratch, &mut c0, &mut c1);
        assert_eq!((&c0[..], &c1[..]), (&ps[0][..3], &ps[1][..3]));
        let mut g = ps[0].clone();
        subtree_mutate(&mut m, &mut g, &cfg, 1, &mut Stream::new(1, 1, 0, Purpose::Mutate), &mut scratch);
        assert_eq!(g, ps[0]);
        // An invalid parent: copies.
        subtree_crossover(&mut m, &ps[0][..1], &ps[1], &cfg, 4096, &mut Stream::new(1, 1, 0, Purpose::Crossover), &mut scratch, &mut c0, &mut c1);
        assert_eq!((&c0[..], &c1[..]), (&ps[0][..1], &ps[1][..]));
        // The same stream gives the same children.
        let (mut d0, mut d1) = (Vec::new(), Vec::new());
        for (x0, x1) in [(&mut c0, &mut c1), (&mut d0, &mut d1)] {
            subtree_crossover(&mut m, &ps[0], &ps[1], &cfg, 4096, &mut Stream::new(1, 1, 7, Purpose::Crossover), &mut scratch, x0, x1);
        }
        assert_eq!((c0, c1), (d0, d1));
    }
}
