//! The fitness formulas the engine and the kernels share with the tasks: regression's error
//! measure and scaling settings ([`RegressionConfig`], [`error`]) and the sums every backend
//! folds a program's outputs into ([`RegressionSums`] and the metrics that follow from them),
//! and classification's sums ([`ClassSums`]), the prediction and cross-entropy of a point
//! ([`argmax`], [`softmax_ce`]) and its fitness ([`ClassFitness`], [`fitness_of`]). They live
//! here, below the engine, so `evolve/` and `backend/` never import a task; `task::regression`
//! and `task::classify` re-export them under their old paths.

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

/// How a loss of the user's own turns its per-row values into a fitness.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LossReduce {
    /// The mean over the rows.
    #[default]
    Mean,
    /// The sum over the rows.
    Sum,
}

/// A per-row loss of the user's own (`--loss "abs(p - y)"`), compiled: its body registered as
/// an operator `loss(p, y)` ([`crate::program::ops::user::register_loss`]), computed with the
/// built-ins' f32 operations on both backends (the CPU by [`Loss::row`], the kernels by
/// `grove_apply`), and how the rows' values are reduced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Loss {
    /// The registered operator `loss(p, y)`.
    pub op: crate::program::ops::Op,
    /// Mean or sum over the rows.
    pub reduce: LossReduce,
}

impl Loss {
    /// Compiles `expr`, an expression of the prediction `p` and the target `y`; an error is one
    /// line naming what is wrong.
    pub fn compile(expr: &str, reduce: LossReduce) -> Result<Loss, String> {
        Ok(Loss { op: crate::program::ops::user::register_loss(expr)?, reduce })
    }

    /// The loss at one row: prediction `p`, target `y`, in f32 (the kernels' bits).
    #[inline]
    pub fn row(&self, p: f32, y: f32) -> f32 {
        crate::program::ops::apply_fast(self.op, p, y)
    }

    /// The fitness of `s`: the mean or sum of the rows' losses; `+inf` where a row's prediction
    /// or loss was not finite, or there were no rows.
    pub fn value(&self, s: &LossSums) -> f64 {
        if !s.finite || s.n == 0 {
            return f64::INFINITY;
        }
        let v = match self.reduce {
            LossReduce::Mean => s.sum / s.n as f64,
            LossReduce::Sum => s.sum,
        };
        if v.is_finite() { v } else { f64::INFINITY }
    }
}

/// A program's prediction at a row under linear scaling `(a, b)`: `a·f + b` in f64, rounded to
/// f32, what a loss of the user's own scores (`(1, 0)` gives `f` itself). The kernels compute
/// the same (`grove_loss_sums`).
#[inline]
pub fn scaled_prediction(f: f32, a: f64, b: f64) -> f32 {
    (a * f as f64 + b) as f32
}

/// The sums a loss of the user's own is reduced from, over one program's rows.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LossSums {
    /// Rows.
    pub n: u64,
    /// Σ loss(p, y) in f64, of the rows' f32 losses.
    pub sum: f64,
    /// False where a row's output or loss was NaN or infinite, or there is no program.
    pub finite: bool,
}

impl LossSums {
    /// Adds `other`'s rows (merging chunks in row order).
    pub fn merge(&mut self, other: &Self) {
        self.n += other.n;
        self.sum += other.sum;
        self.finite &= other.finite;
    }
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
    /// Mean softmax cross-entropy of the outputs (smooth; the class probabilities the model
    /// reports are fitted to it alone).
    CrossEntropy,
    /// 1 − weighted F1: the per-class F1 scores averaged with the classes' shares of the rows
    /// as weights (scikit-learn's `f1_score(average="weighted")`, PonyGE2's classification
    /// fitness).
    #[serde(alias = "f1")]
    #[value(alias = "f1")]
    WeightedF1,
    /// 1 − balanced accuracy plus the mean cross-entropy c squashed into [0, 1) as c / (1 + c),
    /// weighted alike (the default): each class's misclassified share drives the search, and
    /// the cross-entropy ranks the programs it ties and shapes the outputs of several classes.
    // `balanced_ce_of`. Chosen by measurement against the cross-entropy alone, on the CPU (10
    // seeds) and on a GPU (5 seeds) at `grove classify`'s defaults: the 4 × 4 checkerboard
    // 0.63 → 0.73 (CPU) and 0.60 → 0.73 (GPU), the spirals on the GPU 0.46 → 0.52, circles,
    // moons, 3-bit parity and iris tied, no other set moved by more than one test row
    // (`docs/quality.md`, issue 55, 2026-12-06).
    #[default]
    BalancedCe,
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

/// Weighted F1 of sums, given the points per class: `Σ_c (n_c / n) · F1_c` with
/// `F1_c = 2·TP_c / (n_c + predicted_c)` (0 for a class neither present nor predicted), the
/// weights the classes' shares of the points (scikit-learn's `average="weighted"`). Summed in
/// class order: `kernels/generation.cu`'s `grove_classify_fitness` computes the same bits.
pub fn weighted_f1_of(s: &ClassSums, counts: &[u64]) -> f64 {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return 0.0;
    }
    let mut sum = 0.0;
    for (c, &n) in counts.iter().enumerate() {
        let tp = s.correct.get(c).copied().unwrap_or(0);
        let pred = s.predicted.get(c).copied().unwrap_or(0);
        let d = n + pred;
        if n > 0 && d > 0 {
            sum += n as f64 * (2.0 * tp as f64 / d as f64);
        }
    }
    sum / total as f64
}

/// [`ClassFitness::BalancedCe`] from the balanced accuracy and the mean cross-entropy:
/// `(1 − balanced) + ce / (1 + ce)`, in that order of operations (`kernels/generation.cu`'s
/// `grove_classify_fitness` computes the same bits from the same two numbers).
pub fn balanced_ce_of(balanced: f64, mean_ce: f64) -> f64 {
    (1.0 - balanced) + ce_share(mean_ce)
}

/// A cross-entropy `c` squashed into [0, 1) as `c / (1 + c)`: `balanced-ce`'s term, of the
/// mean in the fitness and the validation choice, of one row in lexicase's cases.
pub fn ce_share(c: f64) -> f64 {
    c / (1.0 + c)
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
        ClassFitness::WeightedF1 => 1.0 - weighted_f1_of(s, counts),
        ClassFitness::BalancedCe => balanced_ce_of(balanced_of(s, counts), s.ce / s.n as f64),
    };
    if f.is_finite() { f } else { f64::INFINITY }
}

/// Sums from which every regression metric of one individual follows (f64, over the rows);
/// `f` is the program's output, `y` the target, `e = f − y`.
///
/// Metrics of an invalid individual ([`is_valid`](Self::is_valid) false) are the worst
/// possible: +inf for errors, −inf for R².
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RegressionSums {
    /// Rows.
    pub n: u64,
    /// Σe².
    pub sum_e2: f64,
    /// Σ|e|.
    pub sum_abs_e: f64,
    /// Σf.
    pub sum_f: f64,
    /// Σf².
    pub sum_f2: f64,
    /// Σf·y.
    pub sum_fy: f64,
    /// Σy.
    pub sum_y: f64,
    /// Σy².
    pub sum_y2: f64,
    /// False if any output was NaN or ±inf, or the individual has no program.
    pub finite: bool,
}

/// Below this fraction of Σf² (resp. Σy²), the centred Σ(f − f̄)² is treated as 0. A spread
/// under 1e-5 of the magnitude is within f32 rounding of the outputs (and of the f64
/// cancellation in Σf² − n·f̄²), so linear scaling would only amplify rounding noise.
const VAR_REL_TOL: f64 = 1e-10;

impl RegressionSums {
    /// The sums of an individual without a program over `n` rows.
    pub fn invalid(n: u64) -> Self {
        Self { n, finite: false, ..Self::default() }
    }

    /// Adds `other`'s rows (merging chunks: call in row order for reproducible bits).
    pub fn merge(&mut self, other: &Self) {
        self.n += other.n;
        self.sum_e2 += other.sum_e2;
        self.sum_abs_e += other.sum_abs_e;
        self.sum_f += other.sum_f;
        self.sum_f2 += other.sum_f2;
        self.sum_fy += other.sum_fy;
        self.sum_y += other.sum_y;
        self.sum_y2 += other.sum_y2;
        self.finite &= other.finite;
    }

    /// The sums of outputs `f` against targets `y` (`[rows]` each), in row order.
    pub fn of_rows(f: &[f32], y: &[f32]) -> Self {
        let mut s = Self { n: f.len() as u64, finite: true, ..Self::default() };
        for (&fv, &yv) in f.iter().zip(y) {
            s.finite &= fv.is_finite();
            let (fv, yv) = (fv as f64, yv as f64);
            let e = fv - yv;
            s.sum_e2 += e * e;
            s.sum_abs_e += e.abs();
            s.sum_f += fv;
            s.sum_f2 += fv * fv;
            s.sum_fy += fv * yv;
            s.sum_y += yv;
            s.sum_y2 += yv * yv;
        }
        s
    }

    /// Finite outputs at at least one row.
    pub fn is_valid(&self) -> bool {
        self.finite && self.n > 0
    }

    /// Mean squared error; +inf if invalid.
    pub fn mse(&self) -> f64 {
        if !self.is_valid() {
            return f64::INFINITY;
        }
        self.sum_e2 / self.n as f64
    }

    /// Root mean squared error; +inf if invalid.
    pub fn rmse(&self) -> f64 {
        self.mse().sqrt()
    }

    /// Mean absolute error; +inf if invalid.
    pub fn mae(&self) -> f64 {
        if !self.is_valid() {
            return f64::INFINITY;
        }
        self.sum_abs_e / self.n as f64
    }

    /// Centred sums: (Σ(f − f̄)², Σ(y − ȳ)², Σ(f − f̄)(y − ȳ)), each variance clamped to ≥ 0
    /// and set to 0 below [`VAR_REL_TOL`] of the raw sum of squares.
    fn centred(&self) -> (f64, f64, f64) {
        let n = self.n as f64;
        let (mf, my) = (self.sum_f / n, self.sum_y / n);
        let sff = self.sum_f2 - mf * self.sum_f;
        let syy = self.sum_y2 - my * self.sum_y;
        let sff = if sff <= VAR_REL_TOL * self.sum_f2 { 0.0 } else { sff };
        let syy = if syy <= VAR_REL_TOL * self.sum_y2 { 0.0 } else { syy };
        let sfy = self.sum_fy - mf * self.sum_y;
        (sff, syy, sfy)
    }

    /// Coefficient of determination, 1 − Σe² / Σ(y − ȳ)²; for a constant target, 1 if the
    /// outputs are exact and 0 otherwise (scikit-learn's convention); −inf if invalid.
    pub fn r2(&self) -> f64 {
        if !self.is_valid() {
            return f64::NEG_INFINITY;
        }
        let (_, syy, _) = self.centred();
        if syy == 0.0 {
            return if self.sum_e2 == 0.0 { 1.0 } else { 0.0 };
        }
        1.0 - self.sum_e2 / syy
    }

    /// Linear scaling (Keijzer 2003; Operon): `(a, b)` minimising Σ(a·f + b − y)², that is
    /// `a = cov(f, y) / var(f)`, `b = ȳ − a·f̄`; `(0, ȳ)` when the outputs are constant;
    /// `(1, 0)` (no change) if invalid.
    pub fn scale(&self) -> (f64, f64) {
        if !self.is_valid() {
            return (1.0, 0.0);
        }
        let n = self.n as f64;
        let (sff, _, sfy) = self.centred();
        let a = if sff == 0.0 { 0.0 } else { sfy / sff };
        (a, self.sum_y / n - a * (self.sum_f / n))
    }

    /// Residual Σ(a·f + b − y)² after linear scaling: Σ(y − ȳ)² − cov²/var(f), ≥ 0.
    fn scaled_sse(&self) -> (f64, f64) {
        let (sff, syy, sfy) = self.centred();
        let explained = if sff == 0.0 { 0.0 } else { sfy * sfy / sff };
        ((syy - explained).max(0.0), syy)
    }

    /// Mean squared error after linear scaling; +inf if invalid.
    pub fn scaled_mse(&self) -> f64 {
        if !self.is_valid() {
            return f64::INFINITY;
        }
        self.scaled_sse().0 / self.n as f64
    }

    /// R² after linear scaling (the squared correlation of f and y); 1 for a constant target
    /// (which scaling fits exactly); −inf if invalid.
    pub fn scaled_r2(&self) -> f64 {
        if !self.is_valid() {
            return f64::NEG_INFINITY;
        }
        let (sse, syy) = self.scaled_sse();
        if syy == 0.0 {
            return 1.0;
        }
        (1.0 - sse / syy).clamp(0.0, 1.0)
    }
}

/// Per-individual sums of the classification fitness.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClassSums {
    /// `[n_classes]` points of each true class that were predicted correctly.
    pub correct: Vec<u64>,
    /// `[n_classes]` points predicted as each class (points with a non-finite output excluded):
    /// with `correct` and the class counts, the confusion matrix's margins, which F1 reads.
    pub predicted: Vec<u64>,
    /// Σ over points of the softmax cross-entropy (points with a non-finite output excluded).
    pub ce: f64,
    /// Points summed.
    pub n: u64,
    /// Points where some output was NaN or infinite.
    pub bad: u64,
}

/// The predicted class of logits `z` (argmax, ties to the lower class, NaN never wins).
pub fn argmax(z: &[f64]) -> usize {
    let mut best = 0;
    for k in 1..z.len() {
        if z[k] > z[best] || (z[best].is_nan() && !z[k].is_nan()) {
            best = k;
        }
    }
    best
}

/// Softmax cross-entropy `logsumexp(z) − z[y]` of finite logits `z`, computed as
/// `m + ln Σ exp(z_k − m) − z[y]` with `m = max z`, so it is finite for any finite `z`.
pub fn softmax_ce(z: &[f64], y: usize) -> f64 {
    let m = z.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let s: f64 = z.iter().map(|&v| (v - m).exp()).sum();
    (m - z[y]) + s.ln()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn softmax_ce_is_stable_and_exact() {
        // Uniform logits: ln K.
        assert!((softmax_ce(&[0.0, 0.0, 0.0], 1) - 3f64.ln()).abs() < 1e-15);
        // Huge logits neither overflow nor lose the answer.
        assert!((softmax_ce(&[1000.0, 0.0], 1) - 1000.0).abs() < 1e-9);
        assert!(softmax_ce(&[1000.0, 0.0], 0).abs() < 1e-300);
        assert!((softmax_ce(&[-1e30, 1e30], 0) - 2e30).abs() / 2e30 < 1e-15);
        // Shifting all logits changes nothing.
        let a = softmax_ce(&[1.0, 2.0, 3.0], 0);
        let b = softmax_ce(&[501.0, 502.0, 503.0], 0);
        assert!((a - b).abs() < 1e-12 && (a - (1f64.exp() + 2f64.exp() + 3f64.exp()).ln() + 1.0).abs() < 1e-12);
    }

    #[test]
    fn argmax_breaks_ties_low_and_skips_nan() {
        assert_eq!(argmax(&[1.0, 3.0, 3.0]), 1);
        assert_eq!(argmax(&[f64::NAN, -5.0]), 1);
        assert_eq!(argmax(&[2.0, f64::NAN, 1.0]), 0);
        assert_eq!(argmax(&[f64::NAN, f64::NAN]), 0);
        assert_eq!(argmax(&[0.0, 0.0]), 0, "binary: f = 0 predicts class 0");
    }

    #[test]
    fn fitness_from_sums_agrees_with_the_confusion_matrix() {
        // True: 0 0 0 0 1 1 2 2 2 2; predicted: 0 0 0 1 1 0 2 2 2 1 (the confusion matrix
        // of task::classify's test).
        let s = ClassSums { correct: vec![3, 1, 3], predicted: vec![4, 3, 3], ce: 5.0, n: 10, bad: 0 };
        let counts = [4, 2, 4];
        // F1: 2·3/(4+4) = 0.75, 2·1/(2+3) = 0.4, 2·3/(4+3) = 6/7; weighted by 0.4, 0.2, 0.4.
        let f1 = 0.4 * 0.75 + 0.2 * 0.4 + 0.4 * 6.0 / 7.0;
        assert!((weighted_f1_of(&s, &counts) - f1).abs() < 1e-15);
        assert!((fitness_of(&s, &counts, ClassFitness::WeightedF1) - (1.0 - f1)).abs() < 1e-15);
        // A class never predicted nor present counts nothing; all right is 1.
        let perfect = ClassSums { correct: vec![2, 0, 3], predicted: vec![2, 0, 3], ce: 0.0, n: 5, bad: 0 };
        assert_eq!(weighted_f1_of(&perfect, &[2, 0, 3]), 1.0);
        assert!((fitness_of(&s, &counts, ClassFitness::Accuracy) - 0.3).abs() < 1e-15);
        assert!((fitness_of(&s, &counts, ClassFitness::BalancedAccuracy) - 1.0 / 3.0).abs() < 1e-15);
        assert_eq!(fitness_of(&s, &counts, ClassFitness::CrossEntropy), 0.5);
        // Balanced accuracy 2/3 and mean cross-entropy 0.5: 1/3 + 0.5 / 1.5.
        assert!((fitness_of(&s, &counts, ClassFitness::BalancedCe) - 2.0 / 3.0).abs() < 1e-15);
        let bad = ClassSums { bad: 1, ..s };
        assert_eq!(fitness_of(&bad, &counts, ClassFitness::Accuracy), f64::INFINITY);
        assert_eq!(fitness_of(&bad, &counts, ClassFitness::BalancedCe), f64::INFINITY);
    }

    #[test]
    fn balanced_ce_ranks_by_both_and_orders_ties_by_the_cross_entropy() {
        let counts = [4, 2, 4];
        let at = |correct: Vec<u64>, ce: f64| fitness_of(&ClassSums { correct, predicted: vec![4, 3, 3], ce, n: 10, bad: 0 }, &counts, ClassFitness::BalancedCe);
        // Equal balanced accuracy: the lower cross-entropy is the better.
        assert!(at(vec![3, 1, 3], 4.0) < at(vec![3, 1, 3], 6.0));
        // Equal cross-entropy: the higher balanced accuracy is the better, and the cross-entropy
        // term alone never exceeds 1, whatever the logits.
        assert!(at(vec![4, 2, 4], 6.0) < at(vec![3, 1, 3], 6.0));
        assert!(at(vec![4, 2, 4], 1e300) <= 1.0 && at(vec![4, 2, 4], 50.0) < 1.0 && at(vec![0, 0, 0], 0.0) == 1.0);
        // Weighted alike, not a tie-break: a far worse cross-entropy outweighs a tenth more of
        // balanced accuracy (0.1 + 2/3 against 0.2 + 1/11).
        assert!(balanced_ce_of(0.9, 2.0) > balanced_ce_of(0.8, 0.1));
    }
}
