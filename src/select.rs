//! Selection (CPU reference of `kernels/select.cu`): tournament, truncation, epsilon-lexicase,
//! elitism, and tournaments with bloat control by size ([`Bloat`], [`Tournament`]: the host
//! loops only); two objectives ranked together as NSGA-II ranks them ([`pareto`]).
//! Fitness is minimised; an invalid individual has fitness `+inf` (or NaN, read as `+inf`) and
//! never wins a tournament or a place among the elite while a valid one exists.

use crate::rng::{Purpose, Stream};

pub mod pareto;

/// Fitness as selection reads it: NaN is `+inf`.
#[inline]
pub fn key(f: f64) -> f64 {
    if f.is_nan() { f64::INFINITY } else { f }
}

/// True if `a` beats `b` (strictly lower fitness; ties go to the lower index for determinism).
#[inline]
fn beats(fit: &[f64], a: usize, b: usize) -> bool {
    let (fa, fb) = (key(fit[a]), key(fit[b]));
    fa < fb || (fa == fb && a < b)
}

/// Indices of the valid individuals (finite fitness), in order.
pub fn valid_indices(fit: &[f64]) -> Vec<u32> {
    (0..fit.len() as u32).filter(|&i| key(fit[i as usize]).is_finite()).collect()
}

/// Tournament selection of parent `slot`: `k` contestants drawn uniformly (with replacement)
/// from `pool` (normally the valid individuals; all of them if none is valid); the fittest
/// wins. Stream: `(seed, generation, slot, Select)`.
pub fn tournament(fit: &[f64], pool: &[u32], k: usize, seed: u64, generation: u32, slot: usize) -> usize {
    let mut s = Stream::new(seed, generation, slot as u32, Purpose::Select);
    let n = if pool.is_empty() { fit.len() } else { pool.len() };
    let pick = |s: &mut Stream| {
        let r = s.below(n as u32) as usize;
        if pool.is_empty() { r } else { pool[r] as usize }
    };
    let mut best = pick(&mut s);
    for _ in 1..k.max(1) {
        let c = pick(&mut s);
        if beats(fit, c, best) {
            best = c;
        }
    }
    best
}

/// Bloat control by selection (`--bloat`): how parent tournaments read program size. The
/// linear penalty is the tasks' `parsimony` coefficient, added to the fitness instead.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Bloat {
    /// Plain tournaments on fitness.
    #[default]
    None,
    /// Luke & Panait's double tournament (fitness first): two fitness tournaments, then the
    /// smaller of their winners wins with probability `size_pressure / 2`.
    DoubleTournament,
    /// Lexicographic parsimony pressure (Luke & Panait): a fitness tournament whose ties in
    /// fitness go to the smaller program.
    Lexicographic,
    /// Two objectives, error and size, as NSGA-II ranks them (Deb et al., 2002): parents and
    /// children compete for the next population by non-dominated front, then crowding distance
    /// ([`pareto::survivors`]), and parent tournaments compare by the same order
    /// ([`pareto::tournament`]).
    Nsga2,
    /// [`Bloat::Nsga2`] for tree GP where constants are not fitted, else plain tournaments
    /// ([`Bloat::None`]): [`Bloat::resolved`], which the engine applies as a run starts
    /// (`EngineConfig::resolved`, as `host::run` and `device::run` start). Measured (`docs/quality.md`, 2026-11-28): on the statsmodels
    /// and Friedman sets without fitting, NSGA-II meets more targets in less time with shorter
    /// programs; with the GPU's fitted constants it loses three sets, and grammatical evolution
    /// on Pagie-1 ends worse under it (its populations shrink to a few nodes).
    Auto,
}

impl Bloat {
    /// The bloat control that runs: [`Bloat::Auto`] as `constants_fitted` and `grammar` (the
    /// representation is grammatical evolution) say, any other as is.
    pub fn resolved(self, constants_fitted: bool, grammar: bool) -> Bloat {
        match self {
            Bloat::Auto if constants_fitted || grammar => Bloat::None,
            Bloat::Auto => Bloat::Nsga2,
            b => b,
        }
    }
}

/// A parent tournament with its bloat control.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tournament {
    /// Contestants per fitness tournament (with replacement).
    pub size: usize,
    /// How size is read.
    pub bloat: Bloat,
    /// Double tournament's `D` in `[1, 2]`: the smaller winner wins with probability `D / 2`.
    pub size_pressure: f64,
}

impl Tournament {
    /// The parent of `slot`, from the stream `(seed, generation, slot, Select)`; `sizes[i]` is
    /// individual `i`'s program size in nodes. With [`Bloat::None`] this is [`tournament`]
    /// exactly (what the device loop's kernel repeats). Lexicographic draws the same
    /// contestants and breaks ties on fitness by size, then by index. Double tournament draws
    /// two fitness tournaments of `size` from the one stream, one after the other, then one
    /// uniform number: below `size_pressure / 2` the smaller winner is the parent, else the
    /// larger (equal sizes: the first winner).
    ///
    /// [`Bloat::Nsga2`] tournaments read ranks and crowding distances, which only a whole
    /// population gives: [`pareto::Ranking`] picks them; here it falls back to the lexicographic
    /// pick, which is what they reduce to on a population of one front.
    pub fn pick(&self, fit: &[f64], sizes: &[u16], pool: &[u32], seed: u64, generation: u32, slot: usize) -> usize {
        match self.bloat {
            // `Auto` is resolved as a run starts (`EngineConfig::resolved`); a tournament built
            // by hand with it runs plain.
            Bloat::None | Bloat::Auto => tournament(fit, pool, self.size, seed, generation, slot),
            Bloat::Lexicographic | Bloat::Nsga2 => {
                let mut s = Stream::new(seed, generation, slot as u32, Purpose::Select);
                let lex = |a: usize, b: usize| {
                    let (fa, fb) = (key(fit[a]), key(fit[b]));
                    fa < fb || (fa == fb && (sizes[a], a) < (sizes[b], b))
                };
                run_tournament(fit.len(), pool, self.size, &mut s, lex)
            }
            Bloat::DoubleTournament => {
                let mut s = Stream::new(seed, generation, slot as u32, Purpose::Select);
                let a = run_tournament(fit.len(), pool, self.size, &mut s, |a, b| beats(fit, a, b));
                let b = run_tournament(fit.len(), pool, self.size, &mut s, |a, b| beats(fit, a, b));
                let smaller_wins = s.unit_f64() < self.size_pressure / 2.0;
                if sizes[a] == sizes[b] {
                    a
                } else if (sizes[a] < sizes[b]) == smaller_wins {
                    a
                } else {
                    b
                }
            }
        }
    }
}

/// `k` contestants drawn from `pool` (all `n` individuals if it is empty) with `s`; the one
/// that `beats` every later challenger wins.
pub(crate) fn run_tournament(n: usize, pool: &[u32], k: usize, s: &mut Stream, beats: impl Fn(usize, usize) -> bool) -> usize {
    let m = if pool.is_empty() { n } else { pool.len() };
    let mut pick = || {
        let r = s.below(m as u32) as usize;
        if pool.is_empty() { r } else { pool[r] as usize }
    };
    let mut best = pick();
    for _ in 1..k.max(1) {
        let c = pick();
        if beats(c, best) {
            best = c;
        }
    }
    best
}

/// Tournament without replacement: `k` distinct contestants (all of `pool` if it is smaller).
pub fn tournament_distinct(fit: &[f64], pool: &[u32], k: usize, seed: u64, generation: u32, slot: usize) -> usize {
    let mut s = Stream::new(seed, generation, slot as u32, Purpose::Select);
    let all: Vec<u32>;
    let pool = if pool.is_empty() {
        all = (0..fit.len() as u32).collect();
        &all[..]
    } else {
        pool
    };
    let k = k.clamp(1, pool.len());
    // Partial Fisher-Yates over a small index list of chosen positions.
    let mut chosen: Vec<u32> = Vec::with_capacity(k);
    while chosen.len() < k {
        let r = s.below(pool.len() as u32);
        if !chosen.contains(&r) {
            chosen.push(r);
        }
    }
    let mut best = pool[chosen[0] as usize] as usize;
    for &c in &chosen[1..] {
        let c = pool[c as usize] as usize;
        if beats(fit, c, best) {
            best = c;
        }
    }
    best
}

/// The `n` best individuals, best first (ties by index). Invalid ones come last.
pub fn elite(fit: &[f64], n: usize) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..fit.len()).collect();
    let n = n.min(idx.len());
    if n == 0 {
        return Vec::new();
    }
    idx.select_nth_unstable_by(n - 1, |&a, &b| key(fit[a]).total_cmp(&key(fit[b])).then(a.cmp(&b)));
    idx.truncate(n);
    idx.sort_by(|&a, &b| key(fit[a]).total_cmp(&key(fit[b])).then(a.cmp(&b)));
    idx
}

/// How many of `n` ranked individuals truncation selection chooses among: `ceil(n · rate)`,
/// at least 1 and at most `n` (computed once on the host for the GPU twin too).
pub fn truncation_size(n: usize, rate: f64) -> usize {
    ((n as f64 * rate).ceil() as usize).clamp(1, n.max(1))
}

/// Truncation selection of parent `slot`: uniform among the best `rate` fraction.
pub fn truncation(ranked: &[usize], rate: f64, seed: u64, generation: u32, slot: usize) -> usize {
    let mut s = Stream::new(seed, generation, slot as u32, Purpose::Select);
    let n = truncation_size(ranked.len(), rate);
    ranked[s.below(n as u32) as usize]
}

/// The per-case thresholds of epsilon-lexicase selection (La Cava, Spector and Danai, 2016):
/// for each case, the median absolute deviation of the finite errors on it of the individuals
/// in `pool` (all of them if it is empty), or 0 when none is finite. `errors` is `[P × C]`,
/// row `i` individual `i`'s error on each of the `n_cases` cases. A median of an even count
/// is the mean of the middle two. Computed on the host for both devices.
pub fn lexicase_epsilons(errors: &[f64], n_cases: usize, pool: &[u32]) -> Vec<f64> {
    let n = errors.len().checked_div(n_cases).unwrap_or(0);
    let all: Vec<u32>;
    let pool = if pool.is_empty() {
        all = (0..n as u32).collect();
        &all[..]
    } else {
        pool
    };
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        let m = v.len() / 2;
        if v.len() % 2 == 1 { v[m] } else { (v[m - 1] + v[m]) / 2.0 }
    };
    (0..n_cases)
        .map(|c| {
            let mut v: Vec<f64> = pool.iter().map(|&i| errors[i as usize * n_cases + c]).filter(|e| e.is_finite()).collect();
            if v.is_empty() {
                return 0.0;
            }
            let med = median(&mut v);
            let mut dev: Vec<f64> = v.iter().map(|e| (e - med).abs()).collect();
            median(&mut dev)
        })
        .collect()
}

/// Epsilon-lexicase selection of parent `slot` (stream `(seed, generation, slot, Select)`):
/// the candidates start as `pool` (all individuals if it is empty), in order. Cases are taken
/// in a random order drawn one at a time (step `t` swaps case `t + below(C - t)` into place
/// `t`: a lazy Fisher–Yates), and each keeps the candidates whose error (NaN read as `+inf`) is
/// at most the best candidate's plus `eps[case]` (an f64 addition). It stops when one
/// candidate is left or the cases run out; then one of the candidates left is drawn with
/// `below(count)` (no draw when there is one). `errors` is `[P × n_cases]`.
#[allow(clippy::too_many_arguments)]
pub fn epsilon_lexicase(errors: &[f64], n_cases: usize, eps: &[f64], pool: &[u32], seed: u64, generation: u32, slot: usize) -> usize {
    let mut s = Stream::new(seed, generation, slot as u32, Purpose::Select);
    let n = errors.len().checked_div(n_cases).unwrap_or(0);
    let mut cand: Vec<u32> = if pool.is_empty() { (0..n as u32).collect() } else { pool.to_vec() };
    let mut order: Vec<u32> = (0..n_cases as u32).collect();
    let err = |i: u32, c: usize| key(errors[i as usize * n_cases + c]);
    for t in 0..n_cases {
        if cand.len() <= 1 {
            break;
        }
        let r = t + s.below((n_cases - t) as u32) as usize;
        order.swap(t, r);
        let c = order[t] as usize;
        let mut best = f64::INFINITY;
        for &i in &cand {
            if err(i, c) < best {
                best = err(i, c);
            }
        }
        let threshold = best + eps[c];
        cand.retain(|&i| err(i, c) <= threshold);
    }
    let pick = if cand.len() > 1 { s.below(cand.len() as u32) as usize } else { 0 };
    cand[pick] as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_never_wins_while_a_valid_one_exists() {
        let fit = [f64::INFINITY, 5.0, f64::NAN, f64::INFINITY];
        let pool = valid_indices(&fit);
        assert_eq!(pool, [1]);
        for slot in 0..100 {
            assert_eq!(tournament(&fit, &pool, 3, 1, 0, slot), 1);
            assert_eq!(tournament_distinct(&fit, &pool, 3, 1, 0, slot), 1);
        }
        assert_eq!(elite(&fit, 2), [1, 0]);
    }

    #[test]
    fn binary_tournament_picks_the_better_at_the_expected_rate() {
        // With replacement, the better of two distinct individuals of a population of two
        // wins with probability 3/4.
        let fit = [1.0, 2.0];
        let pool = valid_indices(&fit);
        let n = 40_000;
        let wins = (0..n).filter(|&s| tournament(&fit, &pool, 2, 7, 3, s) == 0).count();
        let rate = wins as f64 / n as f64;
        assert!((rate - 0.75).abs() < 0.01, "{rate}");
        // Among 10 ranked individuals, tournament size 2 picks rank r with prob (2(n-r)-1)/n².
        let fit: Vec<f64> = (0..10).map(|i| i as f64).collect();
        let pool = valid_indices(&fit);
        let mut counts = [0usize; 10];
        for s in 0..n {
            counts[tournament(&fit, &pool, 2, 9, 0, s)] += 1;
        }
        for (r, &c) in counts.iter().enumerate() {
            let p = (2.0 * (10 - r) as f64 - 1.0) / 100.0;
            assert!((c as f64 / n as f64 - p).abs() < 0.01, "rank {r}: {c}");
        }
    }

    #[test]
    fn lexicase_picks_specialists_and_respects_epsilon() {
        // Individual 0 is best on case 0, individual 1 on case 1, 2 is mediocre on both and
        // 3 is invalid (NaN): with eps 0, only 0 and 1 ever win, each about half the time.
        let errors = [0.0, 5.0, 5.0, 0.0, 2.0, 2.0, f64::NAN, 0.0];
        let fit = [1.0, 1.0, 1.0, f64::NAN];
        let pool = valid_indices(&fit);
        let eps = [0.0, 0.0];
        let mut wins = [0usize; 4];
        for slot in 0..2000 {
            wins[epsilon_lexicase(&errors, 2, &eps, &pool, 3, 1, slot)] += 1;
        }
        assert_eq!((wins[2], wins[3]), (0, 0), "{wins:?}");
        assert!((850..1150).contains(&wins[0]), "{wins:?}");
        // With a wide epsilon every case keeps everyone and the pick is uniform over the pool.
        let mut wins = [0usize; 4];
        for slot in 0..3000 {
            wins[epsilon_lexicase(&errors, 2, &[10.0, 10.0], &pool, 3, 1, slot)] += 1;
        }
        assert!(wins[..3].iter().all(|&w| (850..1150).contains(&w)) && wins[3] == 0, "{wins:?}");
        // MAD: case 0 over the pool has errors 0, 5, 2: median 2, deviations 2, 3, 0: MAD 2.
        assert_eq!(lexicase_epsilons(&errors, 2, &pool), [2.0, 2.0]);
        assert_eq!(lexicase_epsilons(&[f64::NAN, 1.0], 1, &[]), [0.0]);
    }

    #[test]
    fn size_tournaments_prefer_small_programs_as_specified() {
        // Plain: exactly `tournament`.
        let fit: Vec<f64> = (0..20).map(|i| (i % 5) as f64).collect();
        let sizes: Vec<u16> = (0..20).map(|i| 30 - i as u16).collect();
        let pool = valid_indices(&fit);
        let plain = Tournament { size: 3, bloat: Bloat::None, size_pressure: 1.4 };
        for slot in 0..200 {
            assert_eq!(plain.pick(&fit, &sizes, &pool, 5, 2, slot), tournament(&fit, &pool, 3, 5, 2, slot));
        }
        // Lexicographic: the same contestants; among fitness ties the smallest (here the
        // highest index) wins, where a plain tournament takes the lowest index.
        let lex = Tournament { bloat: Bloat::Lexicographic, ..plain };
        let flat = [1.0; 4];
        let sizes4 = [9, 3, 3, 7];
        let pool4 = valid_indices(&flat);
        for slot in 0..200 {
            let w = lex.pick(&flat, &sizes4, &pool4, 1, 1, slot);
            let p = tournament(&flat, &pool4, 3, 1, 1, slot);
            assert!(sizes4[w] <= sizes4[p], "slot {slot}: {w} vs plain {p}");
            assert_eq!(fit[lex.pick(&fit, &sizes, &pool, 5, 2, slot)], fit[tournament(&fit, &pool, 3, 5, 2, slot)]);
        }
        // Double tournament, tournament size 1 (uniform winners): with D = 2 the smaller of two
        // different sizes always wins, with D = 1 half the time, with D = 1.4 70 % of the time.
        let fit = [1.0, 1.0];
        let sizes = [10, 20];
        let pool = valid_indices(&fit);
        let n = 20_000;
        for (d, want) in [(2.0, 1.0), (1.0, 0.5), (1.4, 0.7)] {
            let t = Tournament { size: 1, bloat: Bloat::DoubleTournament, size_pressure: d };
            let (mut small, mut differ) = (0, 0);
            for slot in 0..n {
                let mut s = Stream::new(3, 4, slot as u32, Purpose::Select);
                let (a, b) = (s.below(2), s.below(2));
                let w = t.pick(&fit, &sizes, &pool, 3, 4, slot);
                if a != b {
                    differ += 1;
                    small += (w == 0) as usize;
                } else {
                    assert_eq!(w, a as usize, "equal sizes: the first winner");
                }
            }
            let rate = small as f64 / differ as f64;
            assert!((rate - want).abs() < 0.02, "D = {d}: the smaller won {rate}");
        }
    }

    #[test]
    fn elite_and_truncation() {
        let fit = [3.0, 1.0, 2.0, 1.0];
        assert_eq!(elite(&fit, 3), [1, 3, 2]);
        let ranked = elite(&fit, 4);
        for slot in 0..50 {
            let i = truncation(&ranked, 0.5, 1, 1, slot);
            assert!(i == 1 || i == 3);
        }
    }
}
