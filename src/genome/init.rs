//! Genomes and their initialisation: uniformly random genomes, sensible initialisation
//! (ramped half-and-half over derivation trees, using the grammar's minimum depths) and
//! position-independent grow (PonyGE2's PI grow), the last two storing each tree's choices in
//! left-first order so that mapping the genome reproduces the tree.

use crate::grammar::compile::{PRODUCTION_LEAF_ROW, PRODUCTION_RECURSIVE, RuleTable, SymbolKind, unpack};
use crate::rng::{Purpose, Stream};

use super::map::Codons;

/// A population of variable-length genomes, `[P × capacity]` with a length per row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Genomes {
    /// Longest genome a row can hold.
    pub capacity: usize,
    /// `[P × capacity]` codons; entries at or after a row's length are zero.
    pub codons: Vec<u32>,
    /// `[P]` genome lengths.
    pub len: Vec<u32>,
}

impl Genomes {
    /// `p` empty genomes of capacity `capacity`.
    pub fn new(p: usize, capacity: usize) -> Self {
        Self { capacity, codons: vec![0; p * capacity], len: vec![0; p] }
    }

    /// Number of genomes.
    pub fn size(&self) -> usize {
        self.len.len()
    }

    /// Genome `i`.
    pub fn get(&self, i: usize) -> &[u32] {
        &self.codons[i * self.capacity..][..self.len[i] as usize]
    }

    /// Replaces genome `i` (truncated to the capacity).
    pub fn set(&mut self, i: usize, g: &[u32]) {
        let n = g.len().min(self.capacity);
        let row = &mut self.codons[i * self.capacity..(i + 1) * self.capacity];
        row[..n].copy_from_slice(&g[..n]);
        row[n..].fill(0);
        self.len[i] = n as u32;
    }
}

/// How the first generation is made (`--init`, whose help the variants' doc comments are).
/// Random genomes all have the same length; sensible initialisation alternates grow and full
/// trees while the depths ramp; PI grow grows every tree until one branch reaches its depth.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum InitMethod {
    /// Uniformly random genomes of --genome-length codons.
    Random,
    /// Ramped half-and-half over derivation trees (PonyGE2's sensible initialisation).
    Sensible,
    /// Position-independent grow, ramped over --init-depth (PonyGE2's PI grow): nodes are
    /// expanded in random order, with full-tree choices until one branch reaches the depth.
    PiGrow,
}

/// Settings of initialisation.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InitConfig {
    /// Random or sensible.
    pub method: InitMethod,
    /// Genome length for random initialisation.
    pub length: usize,
    /// Codons are drawn from `0..codon_size`.
    pub codon_size: u32,
    /// Sensible and PI grow: smallest tree depth of the ramp (PonyGE2 depth units: root 1, leaf
    /// rows count).
    pub min_depth: u32,
    /// Sensible and PI grow: largest tree depth of the ramp.
    pub max_depth: u32,
    /// Sensible and PI grow: random codons appended after the used ones, as a fraction of them.
    pub tail_fraction: f32,
}

impl Default for InitConfig {
    fn default() -> Self {
        Self { method: InitMethod::Sensible, length: 128, codon_size: 1 << 16, min_depth: 3, max_depth: 7, tail_fraction: 0.5 }
    }
}

/// Makes `p` genomes for `table` (capacity `capacity`), individual `i` drawing from the stream
/// `(seed, 0, i, Init)`. Sensible genomes whose tree cannot reach the ramp's depth use the
/// deepest the grammar allows.
pub fn init_genomes(table: &RuleTable, cfg: &InitConfig, codons: Codons, p: usize, capacity: usize, seed: u64) -> Genomes {
    use rayon::prelude::*;
    let mut out = Genomes::new(p, capacity);
    // Each row draws from its own stream, so rows are made in parallel with the same result.
    let cap = capacity.max(1);
    out.codons
        .par_chunks_mut(cap)
        .zip(out.len.par_iter_mut())
        .enumerate()
        .with_min_len(256)
        .for_each_init(
            || Vec::with_capacity(capacity),
            |buf, (i, (row, len))| {
                init_genome(table, cfg, codons, i, p, seed, capacity, buf);
                // As Genomes::set: cut to the capacity, zero after the length.
                let n = buf.len().min(capacity);
                row[..n].copy_from_slice(&buf[..n]);
                *len = n as u32;
            },
        );
    out
}

/// Genome `i` of the `p` of [`init_genomes`] into `buf` (cleared first), before the cut to
/// `capacity` codons. A derivation stops growing once its genome is past the capacity (so a
/// ramp depth whose trees would be astronomically large cannot hang the run); the codons kept
/// are the same as without the stop.
#[allow(clippy::too_many_arguments)]
pub fn init_genome(table: &RuleTable, cfg: &InitConfig, codons: Codons, i: usize, p: usize, seed: u64, capacity: usize, buf: &mut Vec<u32>) {
    let mut s = Stream::new(seed, 0, i as u32, Purpose::Init);
    buf.clear();
    match cfg.method {
        InitMethod::Random => buf.extend((0..cfg.length).map(|_| s.below(cfg.codon_size))),
        InitMethod::Sensible => {
            let depths = cfg.max_depth.saturating_sub(cfg.min_depth) + 1;
            let depth = cfg.min_depth + (i as u32 / 2) % depths;
            let full = i % 2 == 1;
            sensible_genome(table, codons, depth, full, cfg.codon_size, capacity, &mut s, buf);
            push_tail(cfg, &mut s, buf);
        }
        InitMethod::PiGrow => {
            let depth = pi_grow_depth(cfg, i, p, seed);
            pi_grow_genome(table, codons, depth, cfg.codon_size, capacity, &mut s, buf);
            push_tail(cfg, &mut s, buf);
        }
    }
}

/// Appends the random tail: `tail_fraction` times as many codons as `buf` holds.
fn push_tail(cfg: &InitConfig, s: &mut Stream, buf: &mut Vec<u32>) {
    let tail = (buf.len() as f32 * cfg.tail_fraction) as usize;
    for _ in 0..tail {
        buf.push(s.below(cfg.codon_size));
    }
}

/// The ramp depth of PI grow's row `i` of `p`, ramped as PonyGE2's `PI_grow` ramps it: the
/// depths `min_depth..=max_depth` (only the first `p` when there are more) take
/// `p / n_depths` rows each, in blocks, and the remaining rows take distinct depths in a random
/// order drawn from the stream `(seed, 0, u32::MAX, Init)`, the same for every row.
pub fn pi_grow_depth(cfg: &InitConfig, i: usize, p: usize, seed: u64) -> u32 {
    let n = (cfg.max_depth.saturating_sub(cfg.min_depth) as usize + 1).min(p.max(1));
    let times = p / n;
    if i < times * n {
        return cfg.min_depth + (i / times) as u32;
    }
    // Fisher–Yates over the depths' offsets; row times·n + r takes entry r.
    let mut order: Vec<u32> = (0..n as u32).collect();
    let mut s = Stream::new(seed, 0, u32::MAX, Purpose::Init);
    for k in (1..n).rev() {
        order.swap(k, s.below(k as u32 + 1) as usize);
    }
    cfg.min_depth + order[(i - times * n).min(n - 1)]
}

/// One node of a derivation tree under construction ([`pi_grow_genome`]).
#[derive(Clone, Copy, Debug)]
struct GrowNode {
    /// The node's symbol: a non-terminal or a codon value.
    sym: u16,
    /// PonyGE2 depth of the node (root 1).
    depth: u32,
    /// Non-terminals: the chosen production's offset within its rule, once expanded.
    choice: u32,
    /// The node's children are nodes `first_child .. first_child + n_children`.
    first_child: u32,
    /// Number of child nodes (the production's non-terminals and codon values).
    n_children: u32,
}

/// Appends to `out` the codons of one random derivation grown as PonyGE2's position-independent
/// grow (`pi_grow` of `representation/derivation.py`) grows it to depth `depth` (at least the
/// start rule's smallest depth): pending nodes are expanded in a random order; a node takes a
/// "full" choice (recursive productions while any production fits, else those whose shortest
/// derivation ends exactly at `depth`, else recursive ones that fit, else shorter ones) while
/// the tree is shallower than `depth` or while no other pending node can recurse (so that one
/// branch reaches `depth`), and otherwise any production whose shortest derivation fits within
/// `depth`. The codons are then written in
/// the mapper's order (leftmost first), each `choice + n·k` for a random `k`, codon values
/// random, and none at single-production rules with [`Codons::Lazy`]; mapping them reproduces
/// the tree.
pub fn pi_grow_genome(table: &RuleTable, codons: Codons, depth: u32, codon_size: u32, capacity: usize, s: &mut Stream, out: &mut Vec<u32>) {
    // The tree stops growing at this many nodes: far more than a genome of `capacity` codons
    // maps to, so only trees whose genomes would be cut anyway are cut short.
    let node_budget = capacity.saturating_mul(16).saturating_add(4096);
    // PonyGE2's numbers in our units: a production's `max_path` is its min depth − 2, the
    // grammar's `max_arity` the largest rule min depth − 1.
    let max_depth = depth.max(table.rules[0].min_depth as u32);
    let max_arity = table.rules.iter().map(|r| r.min_depth as u32).max().unwrap_or(1).saturating_sub(1);
    let rule_recursive = |r: usize| table.productions_of(r).iter().any(|p| p.flags & PRODUCTION_RECURSIVE != 0);
    let can_recurse = |sym: u16| match unpack(sym) {
        (SymbolKind::NonTerminal, r) => rule_recursive(r),
        _ => false,
    };
    let root = crate::grammar::compile::symbol(SymbolKind::NonTerminal, 0);
    let mut nodes = vec![GrowNode { sym: root, depth: 1, choice: 0, first_child: 0, n_children: 0 }];
    let mut queue: Vec<u32> = vec![0];
    let mut recursive_pending = can_recurse(root) as usize;
    // The tree's depth so far, counted as PonyGE2's `get_nodes_and_depth` counts a partial
    // tree: pending nodes at their own depth, leaf rows one below their node.
    let mut overall = 1u32;
    let mut fits: Vec<u32> = Vec::new();
    while !queue.is_empty() && nodes.len() <= node_budget {
        let id = queue.swap_remove(s.below(queue.len() as u32) as usize) as usize;
        let GrowNode { sym, depth: d, .. } = nodes[id];
        recursive_pending -= can_recurse(sym) as usize;
        let (kind, index) = unpack(sym);
        if kind != SymbolKind::NonTerminal {
            // A codon value: one terminal leaf below it, its value drawn when the genome is written.
            overall = overall.max(d + 1);
            continue;
        }
        let rule = table.rules[index];
        let first = rule.first_production as usize;
        let n = rule.n_productions as u32;
        let max_path = |k: u32| (table.productions[first + k as usize].min_depth as u32).saturating_sub(2);
        let recursive = |k: u32| table.productions[first + k as usize].flags & PRODUCTION_RECURSIVE != 0;
        // PonyGE2's remaining depth: how far below this node the tree may still reach.
        let remaining = max_depth as i64 - d as i64;
        let full = overall < max_depth || recursive_pending == 0;
        fits.clear();
        if full && remaining > max_arity as i64 + 1 {
            fits.extend((0..n).filter(|&k| recursive(k)));
            if fits.is_empty() {
                fits.extend(0..n);
            }
        } else if full {
            fits.extend((0..n).filter(|&k| max_path(k) as i64 == remaining - 1));
            if fits.is_empty() {
                // Not in PonyGE2, which takes any shorter production here and so may end the
                // tree above its depth: recursive productions that fit come first, so that a
                // branch can still grow to the depth.
                fits.extend((0..n).filter(|&k| recursive(k) && max_path(k) as i64 <= remaining - 1));
            }
            if fits.is_empty() {
                fits.extend((0..n).filter(|&k| (max_path(k) as i64) < remaining - 1));
            }
        } else {
            fits.extend((0..n).filter(|&k| max_path(k) as i64 <= remaining - 1));
        }
        if fits.is_empty() {
            // PonyGE2's fallback: the productions of the shortest derivation.
            let shortest = (0..n).map(max_path).min().unwrap_or(0);
            fits.extend((0..n).filter(|&k| max_path(k) == shortest));
        }
        let choice = fits[s.below(fits.len() as u32) as usize];
        let p = first + choice as usize;
        let kids = table.children_of(p);
        let first_child = nodes.len() as u32;
        nodes[id].choice = choice;
        nodes[id].first_child = first_child;
        nodes[id].n_children = kids.len() as u32;
        if kids.is_empty() {
            let leaf_row = table.productions[p].flags & PRODUCTION_LEAF_ROW != 0;
            overall = overall.max(d + leaf_row as u32);
        } else {
            overall = overall.max(d + 1);
        }
        for (j, &k) in kids.iter().enumerate() {
            nodes.push(GrowNode { sym: k, depth: d + 1, choice: 0, first_child: 0, n_children: 0 });
            queue.push(first_child + j as u32);
            recursive_pending += can_recurse(k) as usize;
        }
    }
    // The genome in the mapper's order: prefix, children left to right.
    let mut stack: Vec<u32> = vec![0];
    let limit = out.len().saturating_add(capacity);
    while let Some(id) = stack.pop() {
        if out.len() > limit {
            break;
        }
        let node = nodes[id as usize];
        match unpack(node.sym) {
            (SymbolKind::NonTerminal, r) => {
                let n = table.rules[r].n_productions as u32;
                if !(codons == Codons::Lazy && n == 1) {
                    out.push(node.choice + n * s.below((codon_size / n).max(1)));
                }
                stack.extend((node.first_child..node.first_child + node.n_children).rev());
            }
            _ => out.push(s.below(codon_size)),
        }
    }
}

/// Appends to `out` the codons of one random derivation of depth at most `max_depth`: with
/// `full`, recursive productions are preferred while they fit, so branches reach the depth;
/// otherwise any production that fits is equally likely. Each codon is `choice + n·k` for a
/// random `k`, so that it selects `choice` at a rule of `n` productions. Growth stops once past
/// `capacity` codons, the first `capacity` being those of the whole derivation.
#[allow(clippy::too_many_arguments)]
pub fn sensible_genome(
    table: &RuleTable,
    codons: Codons,
    max_depth: u32,
    full: bool,
    codon_size: u32,
    capacity: usize,
    s: &mut Stream,
    out: &mut Vec<u32>,
) {
    let start_min = table.rules[0].min_depth as u32;
    let root = crate::grammar::compile::symbol(SymbolKind::NonTerminal, 0);
    grow_derivation(table, codons, root, 1, max_depth.max(start_min), full, codon_size, capacity, usize::MAX, s, out);
}

/// Appends to `out` the codons of one random derivation of `symbol` (a non-terminal or a codon
/// value) placed at depth `depth` of a tree whose depth may reach `max_depth`, as
/// [`sensible_genome`] grows it: a production fits where its shortest derivation ends within
/// `max_depth`; with `full` the recursive ones among those are preferred. Subtree mutation
/// grows its new subtrees so (PonyGE2's "random" derivation). Returns false, `out` then holding
/// a partial derivation, once more than `budget` codons would be appended, or once more than
/// `max_stack` symbols would be pending (subtree mutation passes the loops' mapper bound,
/// [`crate::genome::MAP_STACK`], as its GPU twin holds no more: a subtree that outgrows it
/// would make its genome overflow the mapper anyway).
#[allow(clippy::too_many_arguments)]
pub fn grow_derivation(
    table: &RuleTable,
    codons: Codons,
    symbol: u16,
    depth: u32,
    max_depth: u32,
    full: bool,
    codon_size: u32,
    budget: usize,
    max_stack: usize,
    s: &mut Stream,
    out: &mut Vec<u32>,
) -> bool {
    let limit = out.len().saturating_add(budget);
    let mut stack: Vec<(u16, u32)> = vec![(symbol, depth)];
    let mut fits: Vec<u32> = Vec::new();
    while let Some((sym, d)) = stack.pop() {
        let (kind, index) = unpack(sym);
        match kind {
            SymbolKind::NonTerminal => {
                let rule = table.rules[index];
                let first = rule.first_production as u32;
                let n = rule.n_productions as u32;
                fits.clear();
                // A production of min depth m used at depth d reaches depth d - 1 + m.
                fits.extend((0..n).filter(|&k| (d - 1).saturating_add(table.productions[(first + k) as usize].min_depth as u32) <= max_depth));
                if full {
                    let rec: Vec<u32> = fits.iter().copied().filter(|&k| table.productions[(first + k) as usize].flags & PRODUCTION_RECURSIVE != 0).collect();
                    if !rec.is_empty() {
                        fits = rec;
                    }
                }
                if fits.is_empty() {
                    // Cannot happen when max_depth >= the start rule's min depth; keep going safely.
                    let k = (0..n).min_by_key(|&k| table.productions[(first + k) as usize].min_depth).unwrap_or(0);
                    fits.push(k);
                }
                let choice = fits[s.below(fits.len() as u32) as usize];
                if !(codons == Codons::Lazy && n == 1) {
                    out.push(choice + n * s.below((codon_size / n).max(1)));
                }
                let p = (first + choice) as usize;
                if stack.len() + table.children_of(p).len() > max_stack {
                    return false;
                }
                for &k in table.children_of(p).iter().rev() {
                    stack.push((k, d + 1));
                }
            }
            _ => out.push(s.below(codon_size)),
        }
        if out.len() > limit {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::genome::{MapConfig, Mapper};
    use crate::grammar::{DatasetShape, load_parsed, parse_str};

    #[test]
    fn sensible_genomes_map_to_trees_within_the_ramp() {
        let g = parse_str("<e> ::= (<op> <e> <e>) | <v>\n<op> ::= + | - | *\n<v> ::= x0 | 1.0", "g", false).unwrap();
        let l = load_parsed(g, &DatasetShape::default()).unwrap();
        let cfg = InitConfig { min_depth: 3, max_depth: 6, ..InitConfig::default() };
        let pop = init_genomes(&l.table, &cfg, Codons::Eager, 200, 512, 9);
        let mut m = Mapper::new(&l.table, MapConfig::default());
        let mut depths = Vec::new();
        for i in 0..pop.size() {
            let r = m.map(pop.get(i));
            assert!(r.valid(), "genome {i} invalid");
            assert!(r.depth <= 6, "depth {}", r.depth);
            depths.push(r.depth);
            // Full trees of depth d reach exactly d.
            if i % 2 == 1 {
                assert_eq!(r.depth, 3 + (i as u32 / 2) % 4);
            }
        }
        assert!(depths.contains(&3) && depths.contains(&6));
        // Deterministic.
        assert_eq!(pop, init_genomes(&l.table, &cfg, Codons::Eager, 200, 512, 9));
    }

    /// PI grow's promise: every tree within its ramp depth and one branch reaching it (so the
    /// mapped depth is the ramp depth), the depths ramped in PonyGE2's blocks, valid genomes
    /// with eager and lazy codons, the same genomes for the same seed.
    #[test]
    fn pi_grow_trees_reach_their_ramp_depth_and_no_further() {
        let texts = [
            "<e> ::= (<op> <e> <e>) | <v>\n<op> ::= + | - | *\n<v> ::= x0 | 1.0",
            "<s> ::= <e>\n<e> ::= <e>+<e>|<e>*<e>|np.sin(<e>)|x[:, 0]|<c><c>.<c>\n<c> ::= GE_RANGE:10",
            // PonyGE2's supervised_learning.bnf, two variables.
            "<e>  ::= (<e>+<e>)|(<e>-<e>)|(<e>*<e>)|aq(<e>,<e>)|x[:, <varidx>]|<c>\n<varidx> ::= GE_RANGE:2\n<c> ::= <d>.<d> | -<d>.<d>\n<d> ::= GE_RANGE:10",
        ];
        for text in texts {
            let l = load_parsed(parse_str(text, "g", false).unwrap(), &DatasetShape::default()).unwrap();
            let cfg = InitConfig { method: InitMethod::PiGrow, min_depth: 4, max_depth: 8, ..InitConfig::default() };
            for codons in [Codons::Eager, Codons::Lazy] {
                let p = 203;
                let pop = init_genomes(&l.table, &cfg, codons, p, 4096, 9);
                let mut m = Mapper::new(&l.table, MapConfig { codons, ..MapConfig::default() });
                let mut per_depth = [0usize; 9];
                let mut lens = std::collections::HashSet::new();
                for i in 0..p {
                    let want = pi_grow_depth(&cfg, i, p, 9);
                    let r = m.map(pop.get(i));
                    assert!(r.valid(), "{text}: genome {i} invalid");
                    assert_eq!(r.depth, want, "{text} {codons:?}: genome {i}");
                    // The tail: half as many codons again as the tree reads.
                    assert_eq!(pop.len[i], r.used_codons + r.used_codons / 2, "{text}: genome {i}");
                    per_depth[want as usize] += 1;
                    lens.insert(r.used_codons);
                }
                // 203 rows over 5 depths: 40 each in blocks, 3 more on distinct depths.
                assert!(per_depth[4..].iter().all(|&c| c == 40 || c == 41), "{per_depth:?}");
                assert_eq!(per_depth.iter().sum::<usize>(), p);
                assert!(lens.len() > 15, "grown trees differ in size: {} sizes", lens.len());
                assert_eq!(pop, init_genomes(&l.table, &cfg, codons, p, 4096, 9));
                assert_ne!(pop, init_genomes(&l.table, &cfg, codons, p, 4096, 10));
            }
        }
    }

    #[test]
    fn pi_grow_ramps_in_blocks_with_the_rest_on_distinct_depths() {
        let cfg = InitConfig { method: InitMethod::PiGrow, min_depth: 3, max_depth: 5, ..InitConfig::default() };
        let d: Vec<u32> = (0..8).map(|i| pi_grow_depth(&cfg, i, 8, 1)).collect();
        assert_eq!(d[..6], [3, 3, 4, 4, 5, 5]);
        assert!(d[6] != d[7] && (3..=5).contains(&d[6]) && (3..=5).contains(&d[7]), "{d:?}");
        // Fewer rows than depths: only the first depths.
        assert_eq!((0..2).map(|i| pi_grow_depth(&cfg, i, 2, 1)).collect::<Vec<_>>(), [3, 4]);
    }

    #[test]
    fn lazy_genomes_skip_unit_rules() {
        let g = parse_str("<s> ::= <u>\n<u> ::= a | b", "g", false).unwrap();
        let l = load_parsed(g, &DatasetShape::default()).unwrap();
        let cfg = InitConfig { tail_fraction: 0.0, ..InitConfig::default() };
        let eager = init_genomes(&l.table, &cfg, Codons::Eager, 4, 16, 1);
        let lazy = init_genomes(&l.table, &cfg, Codons::Lazy, 4, 16, 1);
        assert_eq!(eager.len, [2; 4]);
        assert_eq!(lazy.len, [1; 4]);
    }
    /// A grow that would hold more than `max_stack` pending symbols stops with false, and one
    /// that never does gives the codons of the unbounded grow (the bound changes no draw).
    #[test]
    fn grow_stops_at_its_stack_bound_and_is_otherwise_unchanged() {
        let g = parse_str("<e> ::= f(<e>,<e>,<e>,<e>) | x0 | 1.0", "g", false).unwrap();
        let l = load_parsed(g, &DatasetShape::default()).unwrap();
        let root = crate::grammar::compile::symbol(SymbolKind::NonTerminal, 0);
        let (mut stopped, mut same) = (0, 0);
        for seed in 0..200 {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            let free = grow_derivation(&l.table, Codons::Eager, root, 1, 6, false, 1 << 16, usize::MAX, usize::MAX, &mut Stream::new(seed, 0, 0, Purpose::Init), &mut a);
            assert!(free, "an unbounded grow completes");
            if grow_derivation(&l.table, Codons::Eager, root, 1, 6, false, 1 << 16, usize::MAX, 7, &mut Stream::new(seed, 0, 0, Purpose::Init), &mut b) {
                assert_eq!(a, b, "seed {seed}");
                same += 1;
            } else {
                stopped += 1;
            }
        }
        assert!(stopped > 10 && same > 10, "{stopped} stopped, {same} complete");
    }
}
