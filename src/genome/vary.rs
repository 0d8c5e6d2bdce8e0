//! Variation of GE genomes (CPU reference of the GE part of `kernels/vary.cu`): variable
//! one-point crossover within the used codons and per-codon integer-flip mutation, each child
//! drawing from its own counter-addressed stream so that the GPU twin can match it exactly.

use crate::rng::{Purpose, Stream};

use super::init::Genomes;

/// Settings of GE variation.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GeVaryConfig {
    /// Probability that a pair of parents is crossed (else both are copied).
    pub crossover: f32,
    /// Per-codon probability of replacing a codon by a random one.
    pub mutation: f32,
    /// Mutate only within the used codons (PonyGE2's `within_used`).
    pub within_used: bool,
    /// Codons are drawn from `0..codon_size`.
    pub codon_size: u32,
}

impl Default for GeVaryConfig {
    fn default() -> Self {
        Self { crossover: 0.9, mutation: 0.05, within_used: true, codon_size: 1 << 16 }
    }
}

/// Makes children `2j` and `2j + 1` of `out` from parents `a` and `b` of `parents`.
/// Each parent's crossover point is drawn from `1..=used` (its used codons, at most its length),
/// as PonyGE2's variable one-point crossover does; a child longer than the capacity is cut to
/// it. Stream: `(seed, generation, j, Crossover)`.
#[allow(clippy::too_many_arguments)]
pub fn crossover_pair(
    parents: &Genomes,
    used: &[u32],
    a: usize,
    b: usize,
    j: usize,
    out: &mut Genomes,
    cfg: &GeVaryConfig,
    seed: u64,
    generation: u32,
    buf: &mut Vec<u32>,
) {
    let mut s = Stream::new(seed, generation, j as u32, Purpose::Crossover);
    let (ga, gb) = (parents.get(a), parents.get(b));
    if !s.chance(cfg.crossover) || ga.is_empty() || gb.is_empty() {
        out.set(2 * j, ga);
        if 2 * j + 1 < out.size() {
            out.set(2 * j + 1, gb);
        }
        return;
    }
    let point = |s: &mut Stream, g: &[u32], used: u32| -> usize {
        let hi = (used as usize).clamp(1, g.len());
        1 + s.below(hi as u32) as usize
    };
    let pa = point(&mut s, ga, used[a]).min(ga.len());
    let pb = point(&mut s, gb, used[b]).min(gb.len());
    buf.clear();
    buf.extend_from_slice(&ga[..pa]);
    buf.extend_from_slice(&gb[pb..]);
    out.set(2 * j, buf);
    if 2 * j + 1 < out.size() {
        buf.clear();
        buf.extend_from_slice(&gb[..pb]);
        buf.extend_from_slice(&ga[pa..]);
        out.set(2 * j + 1, buf);
    }
}

/// Per-codon integer flip of genome `i` in place: each codon (within the used ones when so
/// configured) is replaced by a uniform random codon with probability `cfg.mutation`.
/// Stream: `(seed, generation, i, Mutate)`.
pub fn int_flip(g: &mut Genomes, i: usize, used: u32, cfg: &GeVaryConfig, seed: u64, generation: u32) {
    let mut s = Stream::new(seed, generation, i as u32, Purpose::Mutate);
    let n = g.len[i] as usize;
    let limit = if cfg.within_used { (used as usize).min(n) } else { n };
    let row = &mut g.codons[i * g.capacity..][..limit];
    for c in row {
        if s.chance(cfg.mutation) {
            *c = s.below(cfg.codon_size);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parents() -> Genomes {
        let mut g = Genomes::new(2, 16);
        g.set(0, &[1, 2, 3, 4, 5, 6]);
        g.set(1, &[10, 20, 30, 40]);
        g
    }

    #[test]
    fn one_point_crossover_swaps_tails_within_used() {
        let p = parents();
        let cfg = GeVaryConfig { crossover: 1.0, ..GeVaryConfig::default() };
        let mut buf = Vec::new();
        let mut out = Genomes::new(100, 16);
        for j in 0..50 {
            crossover_pair(&p, &[3, 2], 0, 1, j, &mut out, &cfg, 5, 1, &mut buf);
            let (c0, c1) = (out.get(2 * j), out.get(2 * j + 1));
            assert_eq!(c0.len() + c1.len(), 10);
            let pa = c0.iter().take_while(|&&x| x < 10).count();
            assert!((1..=3).contains(&pa), "point {pa} outside used codons");
            assert_eq!(&c0[..pa], &[1, 2, 3, 4, 5, 6][..pa]);
            let pb = c1.iter().take_while(|&&x| x >= 10).count();
            assert!((1..=2).contains(&pb));
            assert_eq!(&c1[pb..], &[1, 2, 3, 4, 5, 6][pa..]);
        }
    }

    #[test]
    fn no_crossover_copies_parents_and_capacity_cuts() {
        let p = parents();
        let cfg = GeVaryConfig { crossover: 0.0, ..GeVaryConfig::default() };
        let mut out = Genomes::new(2, 16);
        crossover_pair(&p, &[6, 4], 0, 1, 0, &mut out, &cfg, 5, 1, &mut Vec::new());
        assert_eq!(out.get(0), p.get(0));
        assert_eq!(out.get(1), p.get(1));
        let mut small = Genomes::new(2, 3);
        let cfg = GeVaryConfig { crossover: 1.0, ..cfg };
        crossover_pair(&p, &[6, 4], 0, 1, 0, &mut small, &cfg, 5, 1, &mut Vec::new());
        assert!(small.len.iter().all(|&l| l <= 3));
    }

    #[test]
    fn int_flip_rate_and_used_region() {
        let mut g = Genomes::new(1, 2000);
        g.set(0, &vec![7; 2000]);
        let cfg = GeVaryConfig { mutation: 0.1, codon_size: 1000, ..GeVaryConfig::default() };
        int_flip(&mut g, 0, 1000, &cfg, 3, 2);
        let changed = g.get(0)[..1000].iter().filter(|&&c| c != 7).count();
        assert!((60..140).contains(&changed), "{changed}");
        assert!(g.get(0)[1000..].iter().all(|&c| c == 7));
    }
}
