//! The fitted linear head over a program's outputs (issue 27): with `K` outputs `f_1 … f_K`
//! as features, the model is `b + Σ w_i f_i`, fitted by ridge least squares from sums the
//! interpreter accumulates in the same pass as the outputs ([`HeadSums`]: n, Σf_i, Σf_i f_j,
//! Σf_i y, Σy, Σy², in f64). One output is linear scaling, which stays on
//! [`RegressionSums`](super::fitness::RegressionSums) so its numbers do not change; the head
//! serves `2 ..= MAX_HEAD` outputs.
//!
//! # The solve
//!
//! On the centred sums `C_ij = Σ(f_i − f̄_i)(f_j − f̄_j)` and `c_i = Σ(f_i − f̄_i)(y − ȳ)`, a
//! feature whose spread is under [`VAR_REL_TOL`](super::fitness) of its raw Σf² is constant and
//! gets weight 0. The others are scaled to unit spread (`R = D⁻½ C D⁻½`) and
//! `(R + RIDGE·I) v = D⁻½ c` is solved by Cholesky, `w = D⁻½ v`: the penalty is
//! [`RIDGE`] times each feature's own sum of squares, so it does not depend on the features'
//! units. A pivot that still falls under `RIDGE / 2` (a feature the earlier ones explain to
//! within rounding) drops that feature (weight 0). So constant or collinear features give
//! finite weights, never NaN. `b = ȳ − Σ w_i f̄_i`.

use super::fitness::Metric;

/// Most outputs a head reads.
pub const MAX_HEAD: usize = 8;

/// Pairs `i ≤ j` of features: the upper triangle of the Gram matrix.
pub const HEAD_PAIRS: usize = MAX_HEAD * (MAX_HEAD + 1) / 2;

/// The ridge penalty, relative to each feature's centred sum of squares: the solve minimises
/// `Σ(b + Σ w_i f_i − y)² + RIDGE · Σ_i w_i² Σ(f_i − f̄_i)²`. At 1e-6 it shifts the weights of
/// well-conditioned features by about one part in a million, and keeps a feature set whose
/// centred sums carry the f64 cancellation error of nearly constant f32 outputs (up to
/// ~1e-6 relative) positive definite.
pub const RIDGE: f64 = 1e-6;

/// Below this fraction of Σf² (resp. Σy²), a centred sum of squares is treated as 0 (the
/// tolerance of linear scaling, [`super::fitness::RegressionSums`]).
const VAR_REL_TOL: f64 = 1e-10;

/// Index of the pair `(i, j)`, `i ≤ j < MAX_HEAD`, in [`HeadSums::sum_ff`]: row-major upper
/// triangle, `(0,0), (0,1) … (0,7), (1,1) …`.
pub const fn pair(i: usize, j: usize) -> usize {
    i * (2 * MAX_HEAD - i + 1) / 2 + (j - i)
}

/// Sums from which the head of one program and its error follow, over the rows (f64); `f_i`
/// is output `i`, `y` the target. Mergeable: chunks merged in row order give reproducible bits.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HeadSums {
    /// Features (outputs) read: `1 ..= MAX_HEAD`; entries past it are 0.
    pub k: usize,
    /// Rows.
    pub n: u64,
    /// `[MAX_HEAD]` Σf_i.
    pub sum_f: [f64; MAX_HEAD],
    /// `[HEAD_PAIRS]` Σf_i·f_j, `i ≤ j`, at [`pair`]`(i, j)`.
    pub sum_ff: [f64; HEAD_PAIRS],
    /// `[MAX_HEAD]` Σf_i·y.
    pub sum_fy: [f64; MAX_HEAD],
    /// Σy.
    pub sum_y: f64,
    /// Σy².
    pub sum_y2: f64,
    /// False if any output was NaN or ±inf, or the individual has no program.
    pub finite: bool,
}

/// A fitted head: the prediction is `b + Σ w_i f_i`.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Head {
    /// Intercept.
    pub b: f64,
    /// `[K]` weight of each output.
    pub w: Vec<f64>,
}

impl Head {
    /// The prediction at one row from its outputs `f` (`[K]`): `b + Σ w_i f_i`, summed in f64
    /// in output order (the order every output of grove uses).
    pub fn apply(&self, f: &[f64]) -> f64 {
        let mut p = self.b;
        for (w, f) in self.w.iter().zip(f) {
            p += w * f;
        }
        p
    }

    /// Predictions from outputs `[K][n_rows]` (f32, output-major, as the interpreter gives
    /// them): `[n_rows]`, f64.
    pub fn predict(&self, out: &[f32], n_rows: usize) -> Vec<f64> {
        let mut f = vec![0.0; self.w.len()];
        (0..n_rows)
            .map(|r| {
                for (i, v) in f.iter_mut().enumerate() {
                    *v = out[i * n_rows + r] as f64;
                }
                self.apply(&f)
            })
            .collect()
    }
}

impl HeadSums {
    /// Empty sums over `k` features (finite, no rows).
    pub fn new(k: usize) -> Self {
        assert!((1..=MAX_HEAD).contains(&k), "a head reads 1..={MAX_HEAD} outputs, not {k}");
        Self { k, n: 0, sum_f: [0.0; MAX_HEAD], sum_ff: [0.0; HEAD_PAIRS], sum_fy: [0.0; MAX_HEAD], sum_y: 0.0, sum_y2: 0.0, finite: true }
    }

    /// The sums of an individual without a program over `n` rows.
    pub fn invalid(k: usize, n: u64) -> Self {
        Self { n, finite: false, ..Self::new(k) }
    }

    /// Adds one row: outputs `f` (`[k]`) and target `y`.
    pub fn add_row(&mut self, f: &[f64], y: f64) {
        let k = self.k;
        self.n += 1;
        for i in 0..k {
            self.sum_f[i] += f[i];
            self.sum_fy[i] += f[i] * y;
            for j in i..k {
                self.sum_ff[pair(i, j)] += f[i] * f[j];
            }
        }
        self.sum_y += y;
        self.sum_y2 += y * y;
        self.finite &= (0..k).all(|i| f[i].is_finite());
    }

    /// Adds `other`'s rows (merging chunks: call in row order for reproducible bits).
    pub fn merge(&mut self, other: &Self) {
        self.n += other.n;
        for (a, b) in self.sum_f.iter_mut().zip(&other.sum_f) {
            *a += b;
        }
        for (a, b) in self.sum_ff.iter_mut().zip(&other.sum_ff) {
            *a += b;
        }
        for (a, b) in self.sum_fy.iter_mut().zip(&other.sum_fy) {
            *a += b;
        }
        self.sum_y += other.sum_y;
        self.sum_y2 += other.sum_y2;
        self.finite &= other.finite;
    }

    /// Sets Σf_i and Σf_i·f_j from `o`, laid out as the GPU's head kernels write them
    /// (`grove_head_sums`, `grove_class_head_sums`): the `k` sums, then the `k(k+1)/2` products
    /// in the row-major order of the upper triangle. Returns how many values it read.
    pub fn read_features(&mut self, o: &[f64]) -> usize {
        let k = self.k;
        let mut q = k;
        for i in 0..k {
            self.sum_f[i] = o[i];
            for j in i..k {
                self.sum_ff[pair(i, j)] = o[q];
                q += 1;
            }
        }
        q
    }

    /// Finite outputs at at least one row.
    pub fn is_valid(&self) -> bool {
        self.finite && self.n > 0
    }

    /// Centred `(C, c, syy)`: `C` `[k][k]` row-major (both triangles), `c` `[k]`, and
    /// Σ(y − ȳ)² (0 below [`VAR_REL_TOL`] of Σy²).
    fn centred(&self) -> (Vec<f64>, Vec<f64>, f64) {
        let (k, n) = (self.k, self.n as f64);
        let mean: Vec<f64> = self.sum_f[..k].iter().map(|s| s / n).collect();
        let mut cov = vec![0.0; k * k];
        for i in 0..k {
            for j in i..k {
                let v = self.sum_ff[pair(i, j)] - mean[i] * self.sum_f[j];
                cov[i * k + j] = v;
                cov[j * k + i] = v;
            }
        }
        let c = (0..k).map(|i| self.sum_fy[i] - mean[i] * self.sum_y).collect();
        let syy = self.sum_y2 - self.sum_y / n * self.sum_y;
        let syy = if syy <= VAR_REL_TOL * self.sum_y2 { 0.0 } else { syy };
        (cov, c, syy)
    }

    /// The ridge fit of `y ≈ b + Σ w_i f_i` (the module's solve); `None` if invalid.
    pub fn fit(&self) -> Option<Head> {
        if !self.is_valid() {
            return None;
        }
        let (k, n) = (self.k, self.n as f64);
        let (cov, c, _) = self.centred();
        // Features with a spread: their scale √C_ii; the rest get weight 0.
        let scale: Vec<f64> = (0..k)
            .map(|i| {
                let v = cov[i * k + i];
                if v > VAR_REL_TOL * self.sum_ff[pair(i, i)] && v > 0.0 { v.sqrt() } else { 0.0 }
            })
            .collect();
        // Cholesky of R + RIDGE·I, row by row, dropping a feature whose pivot is too small.
        let mut l = vec![0.0; k * k];
        let mut keep = vec![false; k];
        for i in 0..k {
            if scale[i] == 0.0 {
                continue;
            }
            let r = |a: usize, b: usize| cov[a * k + b] / (scale[a] * scale[b]);
            for j in (0..i).filter(|&j| keep[j]) {
                let dot: f64 = (0..j).map(|m| l[i * k + m] * l[j * k + m]).sum();
                l[i * k + j] = (r(i, j) - dot) / l[j * k + j];
            }
            let d = 1.0 + RIDGE - (0..i).map(|m| l[i * k + m] * l[i * k + m]).sum::<f64>();
            if d > RIDGE / 2.0 && d.is_finite() {
                l[i * k + i] = d.sqrt();
                keep[i] = true;
            } else {
                l[i * k..i * k + i].fill(0.0);
            }
        }
        // Solve L z = D⁻½ c, then Lᵀ v = z, over the kept features.
        let mut z = vec![0.0; k];
        for i in (0..k).filter(|&i| keep[i]) {
            let dot: f64 = (0..i).map(|m| l[i * k + m] * z[m]).sum();
            z[i] = (c[i] / scale[i] - dot) / l[i * k + i];
        }
        let mut v = vec![0.0; k];
        for i in (0..k).rev().filter(|&i| keep[i]) {
            let dot: f64 = (i + 1..k).map(|m| l[m * k + i] * v[m]).sum();
            v[i] = (z[i] - dot) / l[i * k + i];
        }
        let w: Vec<f64> = (0..k).map(|i| if keep[i] { v[i] / scale[i] } else { 0.0 }).collect();
        if w.iter().any(|w| !w.is_finite()) {
            return None;
        }
        let b = self.sum_y / n - (0..k).map(|i| w[i] * self.sum_f[i] / n).sum::<f64>();
        b.is_finite().then_some(Head { b, w })
    }

    /// Σ(b + Σ w_i f_i − y)² of `head` on these rows, from the sums (`head.b` is taken to be
    /// the centred fit's intercept, as [`Self::fit`] gives it), and Σ(y − ȳ)²; both ≥ 0.
    pub fn sse(&self, head: &Head) -> (f64, f64) {
        let k = self.k;
        let (cov, c, syy) = self.centred();
        let w = &head.w;
        let mut sse = syy;
        for i in 0..k {
            sse -= 2.0 * w[i] * c[i];
            for j in 0..k {
                sse += w[i] * w[j] * cov[i * k + j];
            }
        }
        (sse.max(0.0), syy)
    }

    /// The fitted head and its training `(mse, r2)` (R² in [0, 1]; 1 for a constant target);
    /// `None` if invalid.
    pub fn fit_scores(&self) -> Option<(Head, f64, f64)> {
        let head = self.fit()?;
        let (sse, syy) = self.sse(&head);
        let r2 = if syy == 0.0 { 1.0 } else { (1.0 - sse / syy).clamp(0.0, 1.0) };
        Some((head, sse / self.n as f64, r2))
    }

    /// The error of the fitted head under `metric` (lower is better; `+inf` if invalid);
    /// `None` for MAE, which a least-squares head does not minimise.
    pub fn error(&self, metric: Metric) -> Option<f64> {
        let e = match (metric, self.fit_scores()) {
            (Metric::Mae, _) => return None,
            (_, None) => f64::INFINITY,
            (Metric::Mse, Some((_, mse, _))) => mse,
            (Metric::Rmse, Some((_, mse, _))) => mse.sqrt(),
            (Metric::R2, Some((_, _, r2))) => 1.0 - r2,
        };
        Some(if e.is_finite() { e } else { f64::INFINITY })
    }
}

/// The sums of a classifier's head over a program's `K` outputs (issue 27): the features'
/// [`HeadSums`] (n, Σf_i, Σf_i f_j) and, per class `c`, Σf_i over its rows and its row count:
/// the sums of [`HeadSums`] against the one-hot target `[label = c]`, so each class gets a
/// ridge least-squares head `b_c + Σ w_ci f_i` from the same pass ([`ClassHeadSums::of_class`]).
/// The search scores a program by the mean squared error of those heads over the one-hot
/// targets (the Brier score of their scores, [`ClassHeadSums::brier`]); the returned program's
/// head is refitted by multinomial logistic regression so that its probabilities are
/// calibrated (`task::classify`). Mergeable in row order, as [`HeadSums`].
#[derive(Clone, Debug, PartialEq)]
pub struct ClassHeadSums {
    /// The features' sums (their `sum_fy`, `sum_y` and `sum_y2` unused: 0).
    pub sums: HeadSums,
    /// `[C][MAX_HEAD]` Σf_i over the rows of class `c`.
    pub class_f: Vec<[f64; MAX_HEAD]>,
    /// `[C]` rows of class `c`.
    pub counts: Vec<u64>,
}

impl ClassHeadSums {
    /// Empty sums over `k` features and `n_classes` classes.
    pub fn new(k: usize, n_classes: usize) -> Self {
        Self { sums: HeadSums::new(k), class_f: vec![[0.0; MAX_HEAD]; n_classes], counts: vec![0; n_classes] }
    }

    /// The sums of an individual without a program over `n` rows.
    pub fn invalid(k: usize, n_classes: usize, n: u64) -> Self {
        Self { sums: HeadSums::invalid(k, n), ..Self::new(k, n_classes) }
    }

    /// Adds one row: outputs `f` (`[k]`) of a row of class `label`.
    pub fn add_row(&mut self, f: &[f64], label: usize) {
        self.sums.add_row(f, 0.0);
        for (s, f) in self.class_f[label].iter_mut().zip(&f[..self.sums.k]) {
            *s += f;
        }
        self.counts[label] += 1;
    }

    /// Adds `other`'s rows (call in row order for reproducible bits).
    pub fn merge(&mut self, other: &Self) {
        self.sums.merge(&other.sums);
        for (a, b) in self.class_f.iter_mut().zip(&other.class_f) {
            for (a, b) in a.iter_mut().zip(b) {
                *a += b;
            }
        }
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
    }

    /// Classes.
    pub fn n_classes(&self) -> usize {
        self.counts.len()
    }

    /// The [`HeadSums`] of the features against class `c`'s one-hot target.
    pub fn of_class(&self, c: usize) -> HeadSums {
        let n_c = self.counts[c] as f64;
        HeadSums { sum_fy: self.class_f[c], sum_y: n_c, sum_y2: n_c, ..self.sums }
    }

    /// Each class's ridge least-squares head on its one-hot target; `None` if invalid.
    pub fn fit(&self) -> Option<Vec<Head>> {
        (0..self.n_classes()).map(|c| self.of_class(c).fit()).collect()
    }

    /// `Σ_c Σ_rows (b_c + Σ w_ci f_i − [label = c])² / n` of the heads [`Self::fit`] gives
    /// (0 for a perfect one-hot fit, at most 1 − Σ_c p_c² for the class frequencies alone);
    /// `+inf` if invalid.
    pub fn brier(&self) -> f64 {
        if !self.sums.is_valid() {
            return f64::INFINITY;
        }
        let mut sse = 0.0;
        for c in 0..self.n_classes() {
            let s = self.of_class(c);
            let Some(h) = s.fit() else { return f64::INFINITY };
            sse += s.sse(&h).0;
        }
        let e = sse / self.sums.n as f64;
        if e.is_finite() { e } else { f64::INFINITY }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{Purpose, Stream};

    #[test]
    fn class_heads_are_the_one_hot_least_squares_fits() {
        let mut rng = Stream::new(11, 0, 2, Purpose::Init);
        let (k, c, n) = (3, 4, 400);
        let f: Vec<Vec<f64>> = (0..n).map(|_| (0..k).map(|i| uniform(&mut rng) * (i + 1) as f64).collect()).collect();
        // Classes by which of f0 + f1, f1 − f2, f2 and 0.3 is largest: a linear structure.
        let label = |r: &[f64]| {
            let s = [r[0] + r[1], r[1] - r[2], r[2], 0.3];
            (0..4).max_by(|&a, &b| s[a].total_cmp(&s[b])).unwrap()
        };
        let labels: Vec<usize> = f.iter().map(|r| label(r)).collect();
        let mut s = ClassHeadSums::new(k, c);
        let mut half = ClassHeadSums::new(k, c);
        for (i, (r, &l)) in f.iter().zip(&labels).enumerate() {
            if i < n / 2 { s.add_row(r, l) } else { half.add_row(r, l) }
        }
        s.merge(&half);
        let heads = s.fit().expect("valid");
        // Each class's head is the fit of HeadSums against its one-hot column.
        for (cl, h) in heads.iter().enumerate() {
            let y: Vec<f64> = labels.iter().map(|&l| if l == cl { 1.0 } else { 0.0 }).collect();
            let direct = sums(&f, &y).fit().unwrap();
            assert!((h.b - direct.b).abs() < 1e-9 && h.w.iter().zip(&direct.w).all(|(a, b)| (a - b).abs() < 1e-9), "class {cl}: {h:?} {direct:?}");
        }
        // The Brier score from the sums is that of the heads' scores.
        let direct: f64 = f
            .iter()
            .zip(&labels)
            .map(|(r, &l)| heads.iter().enumerate().map(|(cl, h)| (h.apply(r) - if cl == l { 1.0 } else { 0.0 }).powi(2)).sum::<f64>())
            .sum::<f64>()
            / n as f64;
        assert!((s.brier() - direct).abs() < 1e-9, "{} against {direct}", s.brier());
        // The features carry the classes: well under the class frequencies' score.
        let p: Vec<f64> = (0..c).map(|cl| s.counts[cl] as f64 / n as f64).collect();
        assert!(s.brier() < 0.7 * (1.0 - p.iter().map(|p| p * p).sum::<f64>()), "{}", s.brier());
        // A non-finite output makes the sums invalid.
        s.add_row(&[f64::NAN, 0.0, 0.0], 1);
        assert!(s.fit().is_none());
        assert_eq!(s.brier(), f64::INFINITY);
        assert_eq!(ClassHeadSums::invalid(2, 3, 10).brier(), f64::INFINITY);
    }

    /// Sums of rows `f` (`[rows][k]`) against `y`.
    fn sums(f: &[Vec<f64>], y: &[f64]) -> HeadSums {
        let mut s = HeadSums::new(f[0].len());
        for (r, &y) in f.iter().zip(y) {
            s.add_row(r, y);
        }
        s
    }

    fn uniform(rng: &mut Stream) -> f64 {
        rng.unit_f64() * 2.0 - 1.0
    }

    #[test]
    fn pair_indexes_the_upper_triangle_densely() {
        let mut seen = vec![false; HEAD_PAIRS];
        for i in 0..MAX_HEAD {
            for j in i..MAX_HEAD {
                assert!(!seen[pair(i, j)], "({i}, {j}) reuses an index");
                seen[pair(i, j)] = true;
            }
        }
        assert!(seen.iter().all(|&s| s));
    }

    #[test]
    fn head_recovers_known_weights() {
        for k in 3..=5 {
            let mut rng = Stream::new(7, 0, k as u32, Purpose::Init);
            let w_true: Vec<f64> = (0..k).map(|i| [1.5, -2.0, 0.25, 3.0, -0.75][i]).collect();
            let b_true = 0.4;
            let (mut f, mut y) = (Vec::new(), Vec::new());
            for _ in 0..500 {
                let row: Vec<f64> = (0..k).map(|i| uniform(&mut rng) * (i + 1) as f64 + i as f64).collect();
                y.push(b_true + row.iter().zip(&w_true).map(|(a, b)| a * b).sum::<f64>() + 1e-3 * uniform(&mut rng));
                f.push(row);
            }
            let (head, mse, r2) = sums(&f, &y).fit_scores().expect("valid");
            for (got, want) in head.w.iter().zip(&w_true) {
                assert!((got - want).abs() < 1e-3, "k={k}: w {:?}, want {w_true:?}", head.w);
            }
            assert!((head.b - b_true).abs() < 2e-3, "k={k}: b {} want {b_true}", head.b);
            assert!(mse < 1e-6 && r2 > 0.999_999, "k={k}: mse {mse} r2 {r2}");
        }
    }

    #[test]
    fn collinear_and_constant_features_stay_finite() {
        let mut rng = Stream::new(3, 0, 0, Purpose::Init);
        let (mut f, mut y) = (Vec::new(), Vec::new());
        for _ in 0..300 {
            let a = uniform(&mut rng);
            // f1 = 2·f0 exactly, f2 constant, f3 = f0 + f1 exactly.
            f.push(vec![a, 2.0 * a, 5.0, 3.0 * a]);
            y.push(4.0 * a + 1.0);
        }
        let s = sums(&f, &y);
        let (head, mse, r2) = s.fit_scores().expect("valid");
        assert!(head.w.iter().all(|w| w.is_finite()) && head.b.is_finite(), "{head:?}");
        assert_eq!(head.w[2], 0.0, "a constant feature gets weight 0: {head:?}");
        assert!(mse < 1e-9 && r2 > 0.999_999, "the exact fit is still found: mse {mse}, r2 {r2}");
        // The predictions are the target: the collinear weights sum to the true slope.
        let p: Vec<f64> = f.iter().map(|r| head.apply(r)).collect();
        assert!(p.iter().zip(&y).all(|(p, y)| (p - y).abs() < 1e-5), "{head:?}");
        // Every feature constant: the head is the mean.
        let flat: Vec<Vec<f64>> = (0..50).map(|_| vec![1.0, -3.0]).collect();
        let yy: Vec<f64> = (0..50).map(|i| i as f64).collect();
        let h = sums(&flat, &yy).fit().expect("valid");
        assert_eq!(h.w, vec![0.0, 0.0]);
        assert!((h.b - 24.5).abs() < 1e-12, "{h:?}");
    }

    #[test]
    fn mse_from_sums_equals_mse_of_predictions() {
        for seed in 0..5u64 {
            let mut rng = Stream::new(seed, 0, 1, Purpose::Init);
            let k = 2 + seed as usize % 7;
            let n = 200 + 37 * seed as usize;
            let f: Vec<Vec<f64>> = (0..n).map(|_| (0..k).map(|_| uniform(&mut rng) * 10.0 + 3.0).collect()).collect();
            let y: Vec<f64> = (0..n).map(|_| uniform(&mut rng) * 5.0 - 7.0).collect();
            // Split the rows into two chunks and merge in row order, as the interpreter does.
            let mut s = sums(&f[..n / 3], &y[..n / 3]);
            s.merge(&sums(&f[n / 3..], &y[n / 3..]));
            let (head, mse, r2) = s.fit_scores().expect("valid");
            let direct = f.iter().zip(&y).map(|(r, y)| (head.apply(r) - y).powi(2)).sum::<f64>() / n as f64;
            let mean = y.iter().sum::<f64>() / n as f64;
            let var = y.iter().map(|y| (y - mean).powi(2)).sum::<f64>() / n as f64;
            assert!((mse - direct).abs() < 1e-9 * var, "seed {seed}: sums {mse}, predictions {direct}");
            assert!((r2 - (1.0 - direct / var)).abs() < 1e-9, "seed {seed}");
        }
    }

    #[test]
    fn invalid_sums_give_no_head_and_infinite_error() {
        let mut s = sums(&[vec![1.0, 2.0], vec![3.0, 1.0]], &[0.0, 1.0]);
        s.add_row(&[f64::NAN, 0.0], 2.0);
        assert!(s.fit().is_none());
        assert_eq!(s.error(Metric::Mse), Some(f64::INFINITY));
        assert_eq!(HeadSums::invalid(3, 10).error(Metric::R2), Some(f64::INFINITY));
        assert_eq!(s.error(Metric::Mae), None);
    }
}
