//! Train/test splits: a seeded Fisher–Yates shuffle of the row indices with our counter-based
//! [`Stream`], so a split depends only on the seed and the number of rows.
//!
//! [`split_indices`] holds the whole rule; [`split()`] applies it to a [`Dataset`]. A stratified
//! split (classification, [`super::classes::stratified_split`]) shuffles each class's indices
//! with the same rule and takes the same fraction of each. The validation split of the training
//! rows ([`Holdout::VALIDATION`]) is the same rule on its own stream, so it is independent of
//! the test split drawn with the same seed.

use anyhow::{Result, bail, ensure};

use super::Dataset;
use crate::rng::{Purpose, Stream};

/// The `individual` of the split's stream address `(seed; 0, SPLIT_STREAM, Purpose::Data)`;
/// built-ins use 0 and 1 for their train and test points.
pub const SPLIT_STREAM: u32 = 2;

/// The `individual` of the validation split's stream address
/// `(seed; 0, VALIDATION_STREAM, Purpose::Data)` (stratified: generation `c + 1` for class `c`).
pub const VALIDATION_STREAM: u32 = 3;

/// Which rows a split holds out: the stream it shuffles with and the name its errors use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Holdout {
    /// The `individual` of the stream address.
    pub stream: u32,
    /// `test` or `validation`, for messages.
    pub name: &'static str,
}

impl Holdout {
    /// The test rows (`--test-fraction`), out of all rows.
    pub const TEST: Holdout = Holdout { stream: SPLIT_STREAM, name: "test" };
    /// The validation rows (`--validation-fraction`), out of the training rows.
    pub const VALIDATION: Holdout = Holdout { stream: VALIDATION_STREAM, name: "validation" };
}

/// Splits `data` into `(train, test)`: `round(n_rows * test_fraction)` rows chosen by a
/// shuffle seeded with `seed` go to the test set, the rest to training; each part keeps the
/// rows in their original order. Fails if the fraction is outside `[0, 1)` or if either part
/// would be empty.
pub fn split(data: &Dataset, test_fraction: f64, seed: u64) -> Result<(Dataset, Dataset)> {
    let (train, test) = split_indices(data.n_rows, test_fraction, seed)?;
    Ok((data.subset(&train)?, data.subset(&test)?))
}

/// The row indices of [`split()`]: `(train, test)`, each ascending.
pub fn split_indices(n_rows: usize, test_fraction: f64, seed: u64) -> Result<(Vec<usize>, Vec<usize>)> {
    split_indices_for(n_rows, test_fraction, seed, Holdout::TEST)
}

/// As [`split()`], holding out `holdout`'s rows: `(kept, held out)`.
pub fn split_for(data: &Dataset, fraction: f64, seed: u64, holdout: Holdout) -> Result<(Dataset, Dataset)> {
    let (kept, held) = split_indices_for(data.n_rows, fraction, seed, holdout)?;
    Ok((data.subset(&kept)?, data.subset(&held)?))
}

/// As [`split_indices`], holding out `holdout`'s rows with its stream: `(kept, held out)`.
pub fn split_indices_for(n_rows: usize, fraction: f64, seed: u64, holdout: Holdout) -> Result<(Vec<usize>, Vec<usize>)> {
    let n_test = holdout_size(n_rows, fraction, holdout.name)?;
    let mut order = shuffled_at(n_rows, seed, holdout.stream)?;
    let mut train = order.split_off(n_test);
    let mut test = order;
    train.sort_unstable();
    test.sort_unstable();
    Ok((train, test))
}

/// The fewest training rows a split may leave.
pub const MIN_TRAIN_ROWS: usize = 2;

/// How many of `n_rows` rows go to the test set: `round(n_rows * test_fraction)`, checked to
/// leave both parts non-empty.
pub fn test_size(n_rows: usize, test_fraction: f64) -> Result<usize> {
    holdout_size(n_rows, test_fraction, "test")
}

/// [`test_size`] for a part called `name` (`test`, `validation`).
fn holdout_size(n_rows: usize, fraction: f64, name: &str) -> Result<usize> {
    ensure!((0.0..1.0).contains(&fraction), "the {name} fraction must be in [0, 1), got {fraction}");
    let n_test = (n_rows as f64 * fraction).round() as usize;
    if n_test == 0 {
        bail!(
            "a {name} fraction of {fraction} of {n_rows} rows leaves the {name} set empty: use at least {:.4}",
            0.5 / n_rows.max(1) as f64
        );
    }
    if n_test >= n_rows {
        bail!("a {name} fraction of {fraction} of {n_rows} rows leaves the training set empty");
    }
    // One training row fits anything exactly and says nothing (R² 1 on the training row).
    if n_rows - n_test < MIN_TRAIN_ROWS {
        bail!(
            "a {name} fraction of {fraction} of {n_rows} rows leaves {} training row{}, fewer than the {MIN_TRAIN_ROWS} a fit needs: use at most {:.4}",
            n_rows - n_test,
            if n_rows - n_test == 1 { "" } else { "s" },
            (n_rows.saturating_sub(MIN_TRAIN_ROWS) as f64 + 0.49) / n_rows as f64
        );
    }
    Ok(n_test)
}

/// `0..n` in the order of a Fisher–Yates shuffle driven by the stream
/// `(seed; 0, SPLIT_STREAM, Purpose::Data)`: for `i` from `n - 1` down to 1, swap `i` with
/// `below(i + 1)`.
pub fn shuffled(n: usize, seed: u64) -> Result<Vec<usize>> {
    shuffled_at(n, seed, SPLIT_STREAM)
}

/// [`shuffled`] driven by the stream `(seed; 0, stream, Purpose::Data)`.
pub fn shuffled_at(n: usize, seed: u64, stream: u32) -> Result<Vec<usize>> {
    ensure!(n <= u32::MAX as usize, "cannot shuffle {n} rows: at most {} are supported", u32::MAX);
    let mut order: Vec<usize> = (0..n).collect();
    let mut s = Stream::new(seed, 0, stream, Purpose::Data);
    for i in (1..n).rev() {
        let j = s.below(i as u32 + 1) as usize;
        order.swap(i, j);
    }
    Ok(order)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numbered(n: usize) -> Dataset {
        let x: Vec<f64> = (0..n).map(|i| i as f64).collect();
        let y: Vec<f64> = (0..n).map(|i| 1000.0 + i as f64).collect();
        Dataset::new(vec!["i".into()], "y", x, y).unwrap()
    }

    #[test]
    fn split_is_a_deterministic_partition() {
        let d = numbered(100);
        let (train, test) = split(&d, 0.25, 7).unwrap();
        assert_eq!((train.n_rows, test.n_rows), (75, 25));
        train.validate().unwrap();
        test.validate().unwrap();
        // Rows stay whole (x and y together) and every row lands in exactly one part.
        let mut seen: Vec<f32> = train.x.iter().chain(&test.x).copied().collect();
        for d in [&train, &test] {
            assert!(d.x.iter().zip(&d.y).all(|(x, y)| *y == 1000.0 + x));
            assert!(d.x.windows(2).all(|w| w[0] < w[1]), "original order kept");
        }
        seen.sort_by(f32::total_cmp);
        assert_eq!(seen, d.x);
        // Same seed, same split; another seed, another split.
        assert_eq!(split(&d, 0.25, 7).unwrap(), (train.clone(), test.clone()));
        assert_ne!(split(&d, 0.25, 8).unwrap().1.x, test.x);
    }

    #[test]
    fn shuffle_is_a_permutation_and_pinned() {
        let order = shuffled(1000, 3).unwrap();
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..1000).collect::<Vec<_>>());
        assert_ne!(order, sorted);
        // The first swap is of the last index with below(1000) of the stream.
        let mut s = Stream::new(3, 0, SPLIT_STREAM, Purpose::Data);
        let j = s.below(1000) as usize;
        assert_eq!(shuffled(1000, 3).unwrap()[999], j);
        assert_eq!(shuffled(0, 3).unwrap(), Vec::<usize>::new());
    }

    #[test]
    fn bad_fractions_and_empty_parts_are_errors() {
        let d = numbered(20);
        for f in [-0.1, 1.0, 1.5, f64::NAN] {
            let err = split(&d, f, 1).unwrap_err().to_string();
            assert!(err.contains("must be in [0, 1)"), "{f}: {err}");
        }
        let err = split(&d, 0.0, 1).unwrap_err().to_string();
        assert!(err.contains("leaves the test set empty: use at least 0.0250"), "{err}");
        let err = split(&d, 0.01, 1).unwrap_err().to_string();
        assert!(err.contains("leaves the test set empty"), "{err}");
        let err = split(&d, 0.99, 1).unwrap_err().to_string();
        assert!(err.contains("leaves the training set empty"), "{err}");
        // At least two training rows: one fits anything exactly.
        let err = split(&numbered(2), 0.5, 1).unwrap_err().to_string();
        assert!(err.contains("leaves 1 training row, fewer than the 2 a fit needs"), "{err}");
        let (train, test) = split(&numbered(3), 0.3, 1).unwrap();
        assert_eq!((train.n_rows, test.n_rows), (2, 1));
    }
}
