//! k-fold cross-validation of the whole fit (issue 27, `--select cv`): a model choice for
//! small data that holds out no rows. The training rows are dealt into `k = min(5, n)` folds
//! by a seeded shuffle; the task repeats its whole fit (the linear terms' choice, the search
//! for as many generations as the run took, each front member's fitted numbers) on every
//! `k − 1` folds and scores that fit's front on the held-out fold. The curve over size limits
//! ([`SizeCurve`]) says what a program of at most `s` nodes, found and fitted without a row,
//! predicts there; each member of the run's own front then takes the curve's per-row losses at
//! its size, the mean, the linear terms and the ridge on every input are scored in the same
//! folds, and the lowest wins (`grove evolve`'s `auto` below 20,000 rows, issue 56).
//!
//! Refitting only the numbers while keeping the run's shapes does not work alone: the shapes
//! were chosen on every row, and on 15 rows such a score picked a 119-node program over a
//! 3-node one (committee, `docs/quality.md`). Repeating the search is what makes the held-out
//! error honest, and it costs `k` more searches (on small data, where a search is short).
//!
//! `--select folds` (issue 56) is that cheaper refit made safe: the candidates include the mean and the linear terms alone, whose
//! shapes were not searched, and the one-standard-error rule ([`super::validation::choose_resampled`])
//! returns the simplest candidate whose error ([`Score`], over every held-out row) is within
//! one standard error of the lowest, so that a program must beat the simple models by more
//! than the resampling's noise.

use crate::rng::{Purpose, Stream};

/// Folds: 5 (each costs one more search), or one row a fold below 5 rows.
pub const MAX_FOLDS: usize = 5;

/// The folds of `n_rows` rows a run uses: `asked` (`--folds`, field `folds`), which must be
/// at least 2 and at most the rows, or else [`super::defaults::FOLDS`], fewer where the rows
/// are fewer (one row a fold).
pub fn fold_count(asked: Option<usize>, n_rows: usize) -> anyhow::Result<usize> {
    match asked {
        Some(k) if k < 2 => anyhow::bail!("--folds (folds) must be at least 2, got {k}"),
        Some(k) if n_rows < 2 => {
            anyhow::bail!("--folds {k} (folds): cross-validation needs at least 2 training rows to deal into folds, and this run has {n_rows}")
        }
        Some(k) if k > n_rows => {
            anyhow::bail!("--folds {k} (folds) is more than the {n_rows} training rows it deals into folds: give --folds {n_rows} or fewer")
        }
        Some(k) => Ok(k),
        None => Ok(super::defaults::FOLDS.min(n_rows)),
    }
}

/// A candidate's resampled error: the mean of its per-row losses over the held-out rows
/// (squared errors, or absolute ones under `--metric mae`) and the standard error of that mean.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Score {
    /// Mean loss per held-out row.
    pub mse: f64,
    /// Its standard error: the losses' standard deviation over √rows (`+inf` for one row).
    pub se: f64,
}

impl Score {
    /// The score of per-row losses (`+inf` where any is not finite or there are none).
    pub fn of(losses: &[f64]) -> Score {
        let n = losses.len();
        if n == 0 || losses.iter().any(|l| !l.is_finite()) {
            return Score { mse: f64::INFINITY, se: f64::INFINITY };
        }
        let mean = losses.iter().sum::<f64>() / n as f64;
        if n < 2 {
            return Score { mse: mean, se: f64::INFINITY };
        }
        let var = losses.iter().map(|l| (l - mean) * (l - mean)).sum::<f64>() / (n - 1) as f64;
        Score { mse: mean, se: (var / n as f64).sqrt() }
    }

    /// `1.234e0 ± 5.6e-2`.
    pub fn describe(&self) -> String {
        format!("{:.4e} ± {:.2e}", self.mse, self.se)
    }
}

/// The paired difference of two candidates' per-row held-out losses, the first's less the
/// second's: its mean with that mean's standard error, and its trimmed mean
/// ([`trimmed_mean`] at [`crate::task::base::defaults::GUARD_TRIM`]), which a gain carried
/// by a few rows does not move.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Difference {
    /// Mean and standard error of the differences.
    pub score: Score,
    /// Their trimmed mean.
    pub trimmed: f64,
}

impl Difference {
    /// The difference of per-row losses `a` less `b` (the shorter length; `+inf` where any
    /// loss is not finite).
    pub fn of(a: &[f64], b: &[f64], trim: f64) -> Difference {
        let d: Vec<f64> = a.iter().zip(b).map(|(a, b)| a - b).collect();
        Difference { score: Score::of(&d), trimmed: trimmed_mean(&d, trim) }
    }
}

/// The mean of `values` without the `⌊share · n⌋` lowest and as many highest (`+inf` where
/// any is not finite or none is left). `share` is clamped to `[0, 0.5)`.
pub fn trimmed_mean(values: &[f64], share: f64) -> f64 {
    if values.is_empty() || values.iter().any(|v| !v.is_finite()) {
        return f64::INFINITY;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let k = ((share.clamp(0.0, 0.499) * n as f64).floor() as usize).min((n - 1) / 2);
    let kept = &v[k..n - k];
    kept.iter().sum::<f64>() / kept.len() as f64
}

/// The folds of `n` rows: a seeded shuffle dealt in turn into `k = min(MAX_FOLDS, n)` folds,
/// so their sizes differ by at most one.
#[derive(Clone, Debug, PartialEq)]
pub struct Folds {
    /// Folds.
    pub k: usize,
    /// `[n]` the fold of each row.
    pub of: Vec<usize>,
}

impl Folds {
    /// The folds of `n` rows for the run seeded `seed` (Philox, purpose `Folds`).
    pub fn new(n: usize, seed: u64) -> Folds {
        Folds::with_k(n, MAX_FOLDS, seed)
    }

    /// [`Folds::new`] with `k` folds (at most `n`).
    pub fn with_k(n: usize, k: usize, seed: u64) -> Folds {
        let k = n.min(k);
        let mut order: Vec<usize> = (0..n).collect();
        let mut s = Stream::new(seed, 0, 0, Purpose::Folds);
        for i in (1..n).rev() {
            let j = s.below(i as u32 + 1) as usize;
            order.swap(i, j);
        }
        let mut of = vec![0; n];
        for (pos, &row) in order.iter().enumerate() {
            of[row] = pos % k.max(1);
        }
        Folds { k, of }
    }

    /// The rows of fold `f` (`held_out`) or of every other fold, in row order.
    pub fn rows(&self, f: usize, held_out: bool) -> Vec<usize> {
        (0..self.of.len()).filter(|&i| (self.of[i] == f) == held_out).collect()
    }
}

/// The cross-validated error of a model choice by size: `sse[s − 1]` sums, over the folds, the
/// held-out loss (squared errors, or absolute ones under `--metric mae`) of the largest member
/// of size at most `s` on that fold's front.
#[derive(Clone, Debug, PartialEq)]
pub struct SizeCurve {
    /// Folds summed.
    pub folds: usize,
    /// Rows held out, over every fold (each training row once).
    pub rows: usize,
    /// `[max_size]` the summed squared error at each size limit `1 ..= max_size`.
    pub sse: Vec<f64>,
    /// Per fold: its held-out rows and `[max_size]` squared error at each size limit.
    pub per_fold: Vec<(usize, Vec<f64>)>,
}

impl SizeCurve {
    /// An empty curve over the size limits `1 ..= max_size`.
    pub fn new(max_size: usize) -> Self {
        SizeCurve { folds: 0, rows: 0, sse: vec![0.0; max_size.max(1)], per_fold: Vec::new() }
    }

    /// Adds one fold: its front as `(size, held-out sum of squared errors)` (any order;
    /// a non-finite error counts as `+inf`) over `rows` held-out rows. A limit below the
    /// front's smallest member takes that member.
    pub fn add(&mut self, front: &[(usize, f64)], rows: usize) {
        let mut front: Vec<(usize, f64)> = front.iter().map(|&(s, e)| (s, if e.is_finite() { e } else { f64::INFINITY })).collect();
        front.sort_by_key(|m| m.0);
        self.folds += 1;
        self.rows += rows;
        let mut fold = vec![f64::INFINITY; self.sse.len()];
        if let Some(&first) = front.first() {
            let mut at = first;
            let mut next = 0;
            for (s, e) in fold.iter_mut().enumerate() {
                while next < front.len() && front[next].0 <= s + 1 {
                    at = front[next];
                    next += 1;
                }
                *e = at.1;
            }
        }
        for (total, e) in self.sse.iter_mut().zip(&fold) {
            *total += e;
        }
        self.per_fold.push((rows, fold));
    }

    /// The cross-validated mean squared error of the size limit `size` (clamped to the
    /// curve); `+inf` before any fold.
    pub fn mse(&self, size: usize) -> f64 {
        if self.rows == 0 {
            return f64::INFINITY;
        }
        self.sse[size.clamp(1, self.sse.len()) - 1] / self.rows as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trimmed_mean_drops_the_same_count_from_each_end() {
        // 200 values: 1 % is two from each end, so the two huge ones and the two lowest go.
        let mut v: Vec<f64> = (0..196).map(|i| (i % 7) as f64).collect();
        v.extend([1e6, 2e6, -5.0, -4.0]);
        let kept: Vec<f64> = (0..196).map(|i| (i % 7) as f64).collect();
        let want = kept.iter().sum::<f64>() / 196.0;
        assert!((trimmed_mean(&v, 0.01) - want).abs() < 1e-12, "{}", trimmed_mean(&v, 0.01));
        // Too few rows for 1 % to remove one: the plain mean.
        assert_eq!(trimmed_mean(&[1.0, 2.0, 6.0], 0.01), 3.0);
        assert_eq!(trimmed_mean(&[4.0], 0.01), 4.0);
        // A share of a half or more keeps the middle, never nothing.
        assert_eq!(trimmed_mean(&[1.0, 2.0, 9.0], 0.9), 2.0);
        assert_eq!(trimmed_mean(&[1.0, 2.0, 5.0, 9.0], 0.5), 3.5);
        // A negative share trims nothing.
        assert_eq!(trimmed_mean(&[1.0, 2.0, 6.0], -1.0), 3.0);
        // Nothing to average, or a loss that is not finite.
        assert_eq!(trimmed_mean(&[], 0.01), f64::INFINITY);
        assert_eq!(trimmed_mean(&[1.0, f64::NAN], 0.01), f64::INFINITY);
        // A difference keeps both the plain mean and the trimmed one.
        let d = Difference::of(&v, &vec![0.0; 200], 0.01);
        assert!(d.score.mse > 1e4 && (d.trimmed - want).abs() < 1e-12);
    }

    #[test]
    fn folds_deal_every_row_once_in_near_equal_folds_and_follow_the_seed() {
        for n in [1, 3, 4, 5, 6, 11, 57] {
            let f = Folds::new(n, 7);
            assert_eq!(f.k, n.min(MAX_FOLDS));
            let sizes: Vec<usize> = (0..f.k).map(|k| f.rows(k, true).len()).collect();
            assert_eq!(sizes.iter().sum::<usize>(), n);
            assert!(sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1, "{sizes:?}");
            for k in 0..f.k {
                assert_eq!(f.rows(k, true).len() + f.rows(k, false).len(), n);
            }
        }
        assert_eq!(Folds::new(57, 7), Folds::new(57, 7));
        assert_ne!(Folds::new(57, 7), Folds::new(57, 8));
    }

    #[test]
    fn a_score_is_the_mean_loss_and_its_standard_error() {
        let s = Score::of(&[1.0, 2.0, 3.0, 4.0]);
        assert_eq!(s.mse, 2.5);
        // Sample variance 5/3 over 4 rows.
        assert!((s.se - (5.0f64 / 3.0 / 4.0).sqrt()).abs() < 1e-12);
        assert_eq!(Score::of(&[1.0, f64::NAN]).mse, f64::INFINITY);
        assert_eq!(Score::of(&[]).mse, f64::INFINITY);
        assert_eq!(Score::of(&[2.0]), Score { mse: 2.0, se: f64::INFINITY });
    }

    #[test]
    fn a_fold_count_past_the_rows_is_one_line() {
        assert_eq!(fold_count(None, 100).unwrap(), super::super::defaults::FOLDS);
        assert_eq!(fold_count(None, 3).unwrap(), 3, "the default takes one row a fold below its count");
        assert_eq!(fold_count(Some(10), 10).unwrap(), 10);
        let e = fold_count(Some(10), 8).unwrap_err().to_string();
        assert_eq!(e, "--folds 10 (folds) is more than the 8 training rows it deals into folds: give --folds 8 or fewer");
        assert!(!e.contains('\n'));
        assert_eq!(fold_count(Some(1), 8).unwrap_err().to_string(), "--folds (folds) must be at least 2, got 1");
        // One row has no two folds: the line says so instead of asking for 2 or fewer.
        let e = fold_count(Some(3), 1).unwrap_err().to_string();
        assert_eq!(e, "--folds 3 (folds): cross-validation needs at least 2 training rows to deal into folds, and this run has 1");
        assert!(fold_count(Some(2), 0).is_err() && fold_count(Some(2), 2).is_ok());
        let f = Folds::with_k(23, 7, 3);
        assert_eq!(f.k, 7);
        assert_eq!((0..7).map(|k| f.rows(k, true).len()).sum::<usize>(), 23);
    }

    #[test]
    fn the_curve_takes_each_folds_largest_member_within_the_limit() {
        let mut c = SizeCurve::new(6);
        // Fold 1: sizes 1, 3, 5; fold 2: sizes 2, 4 (out of order), 10 rows each.
        c.add(&[(1, 9.0), (3, 4.0), (5, 6.0)], 10);
        c.add(&[(4, 1.0), (2, 3.0)], 10);
        assert_eq!((c.folds, c.rows), (2, 20));
        // Limit 1: 9 + 3 (fold 2's smallest, size 2); 2: 9 + 3; 3: 4 + 3; 4: 4 + 1; 5: 6 + 1; 6: 6 + 1.
        assert_eq!(c.sse, vec![12.0, 12.0, 7.0, 5.0, 7.0, 7.0]);
        assert_eq!(c.mse(4), 0.25);
        assert_eq!(c.mse(0), c.mse(1));
        assert_eq!(c.mse(99), c.mse(6));
        // A member whose error is not finite poisons the limits that take it, not the others.
        c.add(&[(1, 1.0), (3, f64::NAN)], 5);
        assert!(c.mse(2).is_finite() && c.mse(3) == f64::INFINITY);
        assert_eq!(SizeCurve::new(3).mse(2), f64::INFINITY);
    }
}
