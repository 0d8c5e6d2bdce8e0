//! Variation of GE genomes (CPU reference of the GE part of `kernels/vary.cu`): variable
//! one-point crossover within the used codons and per-codon integer-flip mutation, each child
//! drawing from its own counter-addressed stream so that the GPU twin can match it exactly.
//! The operators on derivation trees (subtree crossover and mutation) are in
//! [`super::subtree`]; [`GeVaryConfig`] chooses among them.

use crate::rng::Stream;

/// GE's crossover operator (`--crossover NAME[:RATE]`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GeCrossover {
    /// Variable one-point crossover within the used codons ([`crossover`]).
    #[default]
    Onepoint,
    /// Subtree crossover: subtrees of the same non-terminal swapped between the parents'
    /// derivation trees ([`super::subtree::subtree_crossover`]).
    Subtree,
}

/// GE's mutation operator (`--mutation NAME[:RATE]`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GeMutation {
    /// Per-codon integer flip within the used codons ([`int_flip`]).
    #[default]
    IntFlip,
    /// Subtree mutation: one subtree of the derivation replaced by a freshly grown one
    /// ([`super::subtree::subtree_mutate`]).
    Subtree,
}

/// How int-flip's per-codon rate is set (`--mutation int-flip:P`, `:1/used`,
/// `:max(P,1/used)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntFlipRate {
    /// `mutation` per codon.
    Fixed,
    /// 1 / the codons it may change: one flip expected per child (PonyGE2's rate).
    PerUsed,
    /// The larger of `mutation` and 1 / the codons it may change.
    AtLeastPerUsed,
}

/// Settings of GE variation.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GeVaryConfig {
    /// Probability that a pair of parents is crossed (else both are copied).
    pub crossover: f32,
    /// Int-flip: per-codon probability of replacing a codon by a random one (unless
    /// `mutation_per_used`). Subtree mutation: probability that a child is mutated.
    pub mutation: f32,
    /// Mutate only within the used codons (PonyGE2's `within_used`).
    pub within_used: bool,
    /// Codons are drawn from `0..codon_size`.
    pub codon_size: u32,
    /// The crossover operator (files without it: one-point).
    #[serde(default)]
    pub crossover_op: GeCrossover,
    /// The mutation operator (files without it: int-flip).
    #[serde(default)]
    pub mutation_op: GeMutation,
    /// Int-flip at a per-codon rate of 1 / the codons it may change (the used ones with
    /// `within_used`, else the genome's), in place of `mutation`: PonyGE2's rate when
    /// `MUTATION_PROBABILITY` is unset.
    #[serde(default)]
    pub mutation_per_used: bool,
    /// Int-flip at the larger of `mutation` and 1 / the codons it may change: at least one
    /// flip expected in every child, so that a small program is changed as often as a large
    /// one (grove's default, `--mutation int-flip:max(P,1/used)`). Not with
    /// `mutation_per_used`.
    #[serde(default)]
    pub mutation_at_least_per_used: bool,
}

impl Default for GeVaryConfig {
    fn default() -> Self {
        Self {
            crossover: 0.9,
            mutation: 0.05,
            within_used: true,
            codon_size: 1 << 16,
            crossover_op: GeCrossover::Onepoint,
            mutation_op: GeMutation::IntFlip,
            mutation_per_used: false,
            mutation_at_least_per_used: false,
        }
    }
}

impl GeVaryConfig {
    /// How int-flip's rate is set.
    pub fn int_flip_rate_kind(&self) -> IntFlipRate {
        match (self.mutation_per_used, self.mutation_at_least_per_used) {
            (true, _) => IntFlipRate::PerUsed,
            (false, true) => IntFlipRate::AtLeastPerUsed,
            (false, false) => IntFlipRate::Fixed,
        }
    }

    /// Sets how int-flip's rate is set.
    pub fn with_int_flip_rate(self, rate: IntFlipRate) -> Self {
        Self { mutation_per_used: rate == IntFlipRate::PerUsed, mutation_at_least_per_used: rate == IntFlipRate::AtLeastPerUsed, ..self }
    }

    /// Int-flip's per-codon rate for a genome with `limit` codons it may change (`limit > 0`):
    /// `mutation`, or 1 / `limit` (`mutation_per_used`), or the larger of the two
    /// (`mutation_at_least_per_used`), in f32 as the device computes it.
    pub fn int_flip_rate(&self, limit: usize) -> f32 {
        let per_used = 1.0 / limit as f32;
        match self.int_flip_rate_kind() {
            IntFlipRate::PerUsed => per_used,
            IntFlipRate::AtLeastPerUsed => per_used.max(self.mutation),
            IntFlipRate::Fixed => self.mutation,
        }
    }

    /// The device's code for the rate (`GroveGeParams::per_used`): 0 `mutation`, 1 one over
    /// the codons it may change, 2 the larger of the two.
    pub fn int_flip_rate_code(&self) -> u32 {
        match self.int_flip_rate_kind() {
            IntFlipRate::Fixed => 0,
            IntFlipRate::PerUsed => 1,
            IntFlipRate::AtLeastPerUsed => 2,
        }
    }
}

/// Variable one-point crossover of genomes `ga` and `gb` into `c0` and `c1` (cleared first).
/// With probability `cfg.crossover` each parent's point is drawn from `1..=used` (its used
/// codons, at most its length), as PonyGE2's variable one-point crossover does, and the tails
/// are swapped; otherwise the parents are copied. Children are cut to `capacity`. The caller
/// addresses `s` as `(seed, generation, pair, Crossover)`.
#[allow(clippy::too_many_arguments)]
pub fn crossover(
    ga: &[u32],
    gb: &[u32],
    used_a: u32,
    used_b: u32,
    cfg: &GeVaryConfig,
    capacity: usize,
    s: &mut Stream,
    c0: &mut Vec<u32>,
    c1: &mut Vec<u32>,
) {
    c0.clear();
    c1.clear();
    if !s.chance(cfg.crossover) || ga.is_empty() || gb.is_empty() {
        c0.extend_from_slice(&ga[..ga.len().min(capacity)]);
        c1.extend_from_slice(&gb[..gb.len().min(capacity)]);
        return;
    }
    let point = |s: &mut Stream, g: &[u32], used: u32| -> usize {
        let hi = (used as usize).clamp(1, g.len());
        1 + s.below(hi as u32) as usize
    };
    let pa = point(s, ga, used_a);
    let pb = point(s, gb, used_b);
    c0.extend(ga[..pa].iter().chain(&gb[pb..]).take(capacity));
    c1.extend(gb[..pb].iter().chain(&ga[pa..]).take(capacity));
}

/// Per-codon integer flip in place: each codon of `g` (only the first `used` when
/// `cfg.within_used`) is replaced by a uniform random codon with probability `cfg.mutation`
/// (or at [`GeVaryConfig::int_flip_rate`]: 1 / the number of codons it may change, or the larger
/// of the two).
/// The caller addresses `s` as `(seed, generation, child, Mutate)`.
pub fn int_flip(g: &mut [u32], used: u32, cfg: &GeVaryConfig, s: &mut Stream) {
    let limit = if cfg.within_used { (used as usize).min(g.len()) } else { g.len() };
    if limit == 0 {
        return;
    }
    let rate = cfg.int_flip_rate(limit);
    for c in &mut g[..limit] {
        if s.chance(rate) {
            *c = s.below(cfg.codon_size);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Purpose;

    const A: [u32; 6] = [1, 2, 3, 4, 5, 6];
    const B: [u32; 4] = [10, 20, 30, 40];

    #[test]
    fn one_point_crossover_swaps_tails_within_used() {
        let cfg = GeVaryConfig { crossover: 1.0, ..GeVaryConfig::default() };
        let (mut c0, mut c1) = (Vec::new(), Vec::new());
        let mut points = std::collections::HashSet::new();
        for j in 0..50 {
            let mut s = Stream::new(5, 1, j, Purpose::Crossover);
            crossover(&A, &B, 3, 2, &cfg, 16, &mut s, &mut c0, &mut c1);
            assert_eq!(c0.len() + c1.len(), 10);
            let pa = c0.iter().take_while(|&&x| x < 10).count();
            assert!((1..=3).contains(&pa), "point {pa} outside used codons");
            assert_eq!(&c0[..pa], &A[..pa]);
            let pb = c1.iter().take_while(|&&x| x >= 10).count();
            assert!((1..=2).contains(&pb));
            assert_eq!(&c1[pb..], &A[pa..]);
            assert_eq!(&c0[pa..], &B[pb..]);
            points.insert((pa, pb));
        }
        assert_eq!(points.len(), 6, "every pair of points occurs");
    }

    #[test]
    fn no_crossover_copies_parents_and_capacity_cuts() {
        let cfg = GeVaryConfig { crossover: 0.0, ..GeVaryConfig::default() };
        let (mut c0, mut c1) = (Vec::new(), Vec::new());
        let mut s = Stream::new(5, 1, 0, Purpose::Crossover);
        crossover(&A, &B, 6, 4, &cfg, 16, &mut s, &mut c0, &mut c1);
        assert_eq!((c0.as_slice(), c1.as_slice()), (&A[..], &B[..]));
        let cfg = GeVaryConfig { crossover: 1.0, ..cfg };
        crossover(&A, &B, 6, 4, &cfg, 3, &mut s, &mut c0, &mut c1);
        assert!(c0.len() <= 3 && c1.len() <= 3);
    }

    #[test]
    fn int_flip_rate_and_used_region() {
        let mut g = vec![7u32; 2000];
        let cfg = GeVaryConfig { mutation: 0.1, codon_size: 1000, ..GeVaryConfig::default() };
        int_flip(&mut g, 1000, &cfg, &mut Stream::new(3, 2, 0, Purpose::Mutate));
        let changed = g[..1000].iter().filter(|&&c| c != 7).count();
        assert!((60..140).contains(&changed), "{changed}");
        assert!(g[1000..].iter().all(|&c| c == 7));
    }

    #[test]
    fn int_flip_at_one_per_used_codon() {
        let cfg = GeVaryConfig { mutation: 0.9, mutation_per_used: true, codon_size: 1 << 16, ..GeVaryConfig::default() };
        let mut changed = 0;
        for k in 0..2000 {
            let mut g = vec![7u32; 150];
            int_flip(&mut g, 100, &cfg, &mut Stream::new(3, 2, k, Purpose::Mutate));
            assert!(g[100..].iter().all(|&c| c == 7));
            changed += g.iter().filter(|&&c| c != 7).count();
        }
        // One flip per genome on average (`mutation` unused).
        assert!((1800..2200).contains(&changed), "{changed}");
    }

    #[test]
    fn int_flip_at_least_one_per_used_codon_follows_the_larger_rate() {
        let cfg = GeVaryConfig { mutation: 0.02, codon_size: 1 << 16, ..GeVaryConfig::default() }.with_int_flip_rate(IntFlipRate::AtLeastPerUsed);
        assert_eq!(cfg.int_flip_rate_kind(), IntFlipRate::AtLeastPerUsed);
        // 1 / 10 above 0.02; 0.02 above 1 / 200; equal at 50 codons.
        assert_eq!((cfg.int_flip_rate(10), cfg.int_flip_rate(200), cfg.int_flip_rate(50)), (0.1, 0.02, 0.02));
        assert_eq!(cfg.with_int_flip_rate(IntFlipRate::PerUsed).int_flip_rate(200), 1.0 / 200.0);
        assert_eq!(cfg.with_int_flip_rate(IntFlipRate::Fixed).int_flip_rate(10), 0.02);
        assert_eq!([IntFlipRate::Fixed, IntFlipRate::PerUsed, IntFlipRate::AtLeastPerUsed].map(|r| cfg.with_int_flip_rate(r).int_flip_rate_code()), [0, 1, 2]);
        // Flips per genome over 2000 children: one on average for 10 used codons (a fixed 0.02
        // would make 0.2), four for 200 (1 / used would make one).
        for (used, lo, hi) in [(10u32, 1800, 2200), (200, 7400, 8600)] {
            let mut changed = 0;
            for k in 0..2000 {
                let mut g = vec![7u32; 300];
                int_flip(&mut g, used, &cfg, &mut Stream::new(5, 1, k, Purpose::Mutate));
                assert!(g[used as usize..].iter().all(|&c| c == 7));
                changed += g.iter().filter(|&&c| c != 7).count();
            }
            assert!((lo..hi).contains(&changed), "{used} used codons: {changed} flips");
        }
    }

    #[test]
    fn old_vary_blocks_load_as_onepoint_and_int_flip() {
        let d = GeVaryConfig::default();
        // Experiment files and checkpoints from before the operators load as one-point and int-flip.
        let old: GeVaryConfig = serde_json::from_str(r#"{"crossover": 0.9, "mutation": 0.02, "within_used": true, "codon_size": 65536}"#).unwrap();
        assert_eq!(old, GeVaryConfig { mutation: 0.02, ..d });
    }
}
