//! The fitness formulas the engine and the kernels share with the tasks: regression's error
//! measure and scaling settings ([`RegressionConfig`], [`error`]) and classification's fitness
//! of the fused sums ([`ClassFitness`], [`fitness_of`]). They live here, below the engine, so
//! `evolve/` and `backend/` never import a task; `task::regression` and `task::classify`
//! re-export them under their old paths.

use super::classify::ClassSums;
use super::eval::RegressionSums;

/// The error measure evolution minimises.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Metric {
    /// Mean squared error.
    Mse,
    /// Root mean squared error.
    Rmse,
    /// Mean absolute error.
    Mae,
    /// Coefficient of determination (minimised as 1 − R²).
    R2,
}

/// Settings of the regression task.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegressionConfig {
    /// The error evolution minimises.
    pub metric: Metric,
    /// Fit `a·f(x) + b` by least squares before scoring (not with MAE).
    pub linear_scaling: bool,
    /// Added to the fitness per node of the program.
    pub parsimony: f64,
}

impl Default for RegressionConfig {
    fn default() -> Self {
        Self { metric: Metric::Mse, linear_scaling: true, parsimony: 0.0 }
    }
}

/// The error of sums `s` under `metric` (scaled when asked), lower is better; `+inf` if invalid.
pub fn error(s: &RegressionSums, metric: Metric, scaled: bool) -> f64 {
    if !s.finite || s.n == 0 {
        return f64::INFINITY;
    }
    let e = match (metric, scaled) {
        (Metric::Mse, false) => s.mse(),
        (Metric::Mse, true) => s.scaled_mse(),
        (Metric::Rmse, false) => s.rmse(),
        (Metric::Rmse, true) => s.scaled_mse().sqrt(),
        (Metric::Mae, _) => s.mae(),
        (Metric::R2, false) => 1.0 - s.r2(),
        (Metric::R2, true) => 1.0 - s.scaled_r2(),
    };
    if e.is_finite() { e } else { f64::INFINITY }
}

/// What evolution minimises.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum ClassFitness {
    /// 1 − accuracy.
    Accuracy,
    /// 1 − balanced accuracy (the mean of the per-class recalls).
    BalancedAccuracy,
    /// Mean softmax cross-entropy of the outputs (smooth; guides search best).
    #[default]
    CrossEntropy,
}

/// Accuracy of sums: correct points over all points.
pub fn accuracy_of(s: &ClassSums) -> f64 {
    s.correct.iter().sum::<u64>() as f64 / s.n.max(1) as f64
}

/// Balanced accuracy of sums, given the points per class: the mean recall over the classes
/// that have points.
pub fn balanced_of(s: &ClassSums, counts: &[u64]) -> f64 {
    let (mut sum, mut k) = (0.0, 0usize);
    for (c, &n) in s.correct.iter().zip(counts) {
        if n > 0 {
            sum += *c as f64 / n as f64;
            k += 1;
        }
    }
    if k == 0 { 0.0 } else { sum / k as f64 }
}

/// The fitness (lower is better) of sums; `+inf` for an individual with a non-finite output.
pub fn fitness_of(s: &ClassSums, counts: &[u64], fitness: ClassFitness) -> f64 {
    if s.bad > 0 || s.n == 0 {
        return f64::INFINITY;
    }
    let f = match fitness {
        ClassFitness::Accuracy => 1.0 - accuracy_of(s),
        ClassFitness::BalancedAccuracy => 1.0 - balanced_of(s, counts),
        ClassFitness::CrossEntropy => s.ce / s.n as f64,
    };
    if f.is_finite() { f } else { f64::INFINITY }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fitness_from_sums_agrees_with_the_confusion_matrix() {
        let s = ClassSums { correct: vec![3, 1, 3], ce: 5.0, n: 10, bad: 0 };
        let counts = [4, 2, 4];
        assert!((fitness_of(&s, &counts, ClassFitness::Accuracy) - 0.3).abs() < 1e-15);
        assert!((fitness_of(&s, &counts, ClassFitness::BalancedAccuracy) - 1.0 / 3.0).abs() < 1e-15);
        assert_eq!(fitness_of(&s, &counts, ClassFitness::CrossEntropy), 0.5);
        let bad = ClassSums { bad: 1, ..s };
        assert_eq!(fitness_of(&bad, &counts, ClassFitness::Accuracy), f64::INFINITY);
    }
}
