//! Genomes and their initialisation: uniformly random genomes, and sensible initialisation
//! (ramped half-and-half over derivation trees, using the grammar's minimum depths), which
//! stores each tree's choices in left-first order so that mapping the genome reproduces it.

use crate::grammar::compile::{PRODUCTION_RECURSIVE, RuleTable, SymbolKind, unpack};
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
/// trees while the depths ramp.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum InitMethod {
    /// Uniformly random genomes of --genome-length codons.
    Random,
    /// Ramped half-and-half over derivation trees (PonyGE2's sensible initialisation).
    Sensible,
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
    /// Sensible: smallest tree depth of the ramp (PonyGE2 depth units: root 1, leaf rows count).
    pub min_depth: u32,
    /// Sensible: largest tree depth of the ramp.
    pub max_depth: u32,
    /// Sensible: random codons appended after the used ones, as a fraction of them.
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
                init_genome(table, cfg, codons, i, seed, buf);
                // As Genomes::set: cut to the capacity, zero after the length.
                let n = buf.len().min(capacity);
                row[..n].copy_from_slice(&buf[..n]);
                *len = n as u32;
            },
        );
    out
}

/// Genome `i` of [`init_genomes`] into `buf` (cleared first), before the capacity cut.
pub fn init_genome(table: &RuleTable, cfg: &InitConfig, codons: Codons, i: usize, seed: u64, buf: &mut Vec<u32>) {
    let mut s = Stream::new(seed, 0, i as u32, Purpose::Init);
    buf.clear();
    match cfg.method {
        InitMethod::Random => buf.extend((0..cfg.length).map(|_| s.below(cfg.codon_size))),
        InitMethod::Sensible => {
            let depths = cfg.max_depth.saturating_sub(cfg.min_depth) + 1;
            let depth = cfg.min_depth + (i as u32 / 2) % depths;
            let full = i % 2 == 1;
            sensible_genome(table, codons, depth, full, cfg.codon_size, &mut s, buf);
            let tail = (buf.len() as f32 * cfg.tail_fraction) as usize;
            for _ in 0..tail {
                buf.push(s.below(cfg.codon_size));
            }
        }
    }
}

/// Appends to `out` the codons of one random derivation of depth at most `max_depth`: with
/// `full`, recursive productions are preferred while they fit, so branches reach the depth;
/// otherwise any production that fits is equally likely. Each codon is `choice + n·k` for a
/// random `k`, so that it selects `choice` at a rule of `n` productions.
pub fn sensible_genome(
    table: &RuleTable,
    codons: Codons,
    max_depth: u32,
    full: bool,
    codon_size: u32,
    s: &mut Stream,
    out: &mut Vec<u32>,
) {
    let start_min = table.rules[0].min_depth as u32;
    let max_depth = max_depth.max(start_min);
    let mut stack: Vec<(u16, u32)> = vec![(crate::grammar::compile::symbol(SymbolKind::NonTerminal, 0), 1)];
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
                fits.extend((0..n).filter(|&k| d - 1 + table.productions[(first + k) as usize].min_depth as u32 <= max_depth));
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
                for &k in table.children_of(p).iter().rev() {
                    stack.push((k, d + 1));
                }
            }
            _ => out.push(s.below(codon_size)),
        }
    }
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
}
