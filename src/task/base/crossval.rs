//! k-fold cross-validation of the whole fit (issue 27, `--select cv`): a model choice for
//! small data that holds out no rows. The training rows are dealt into `k = min(5, n)` folds
//! by a seeded shuffle; the task repeats its whole fit (the linear terms' choice, the search
//! for as many generations as the run took, each front member's fitted numbers) on every
//! `k − 1` folds and scores that fit's front on the held-out fold. The curve over size limits
//! ([`SizeCurve`]) says what a program of at most `s` nodes, found and fitted without a row,
//! predicts there; each member of the run's own front then scores the curve at its size, and
//! the lowest wins.
//!
//! Refitting only the numbers while keeping the run's shapes does not work: the shapes were
//! chosen on every row, and on 15 rows such a score picked a 119-node program over a 3-node one
//! (committee, `docs/quality.md`). Repeating the search is what makes the held-out error
//! honest, and it costs `k` more searches (on small data, where a search is short).

use crate::rng::{Purpose, Stream};

/// Folds: 5 (each costs one more search), or one row a fold below 5 rows.
pub const MAX_FOLDS: usize = 5;

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
        let k = n.min(MAX_FOLDS);
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
/// held-out squared error of the largest member of size at most `s` on that fold's front.
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
