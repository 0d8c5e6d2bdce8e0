//! Selection (CPU reference of `kernels/select.cu`): tournament and truncation, elitism.
//! Fitness is minimised; an invalid individual has fitness `+inf` (or NaN, read as `+inf`) and
//! never wins a tournament or a place among the elite while a valid one exists.

use crate::rng::{Purpose, Stream};

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
