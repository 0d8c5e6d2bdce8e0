//! Linear terms of the inputs under a classifier's outputs (issue 27): each output (logit) of
//! the program gets `c_k + Σ_j a_kj x_j` added, fitted before the search by multinomial logistic
//! regression, so the search evolves what a linear classifier of the inputs cannot say — the
//! classification twin of [`super::linear`]. Digits is the case in point: a linear classifier
//! of its 64 pixels reaches 0.97 test accuracy where a program alone reached 0.77.
//!
//! # The fit
//!
//! Multinomial logistic regression with an L2 penalty on the weights (not the intercepts),
//! minimising `Σ_i CE_i + ½ λ Σ_kj w_kj²` over standardised inputs (inputs without a spread get
//! weight 0), by L-BFGS ([`minimise`]). The penalty `λ` is chosen from [`PENALTIES`] by 5-fold
//! cross-validated cross-entropy (folds by a fixed permutation of the rows, so a run is
//! reproducible), each fold's fits warm-started along the penalties from the largest, the path
//! ending where the cross-validated cross-entropy first rises; the terms are then fitted on
//! every row at that penalty. They help ([`LogisticFit::helps`]) where their cross-validated
//! cross-entropy is below that of the class frequencies alone by more than the choice of
//! penalty costs.
//!
//! A one-output program of two classes (`binary`) decides by the sign of its value, class 1's
//! logit against class 0's 0: its terms are the difference of the two classes' terms, so
//! `f(x) + (c_1 − c_0) + Σ_j (a_1j − a_0j) x_j` is the same logit difference.
//!
//! Sums over rows are taken in chunks of [`CHUNK`] rows, in parallel, and added in chunk order,
//! so the fit is the same whatever the thread count.

use rayon::prelude::*;

use super::linear::Linear;

/// Penalties tried, largest first (the warm starts follow this order).
pub const PENALTIES: [f64; 7] = [1000.0, 100.0, 10.0, 1.0, 0.1, 0.01, 0.001];

/// Folds of the cross-validation.
pub const FOLDS: usize = 5;

/// Rows per chunk of the parallel sums.
const CHUNK: usize = 256;

/// Most L-BFGS iterations of one fit.
const MAX_ITER: usize = 500;

/// The fitted terms and how they compare with the class frequencies.
#[derive(Clone, Debug, PartialEq)]
pub struct LogisticFit {
    /// One set of terms per output: `n_classes` of them, or one (class 1 less class 0) for a
    /// binary program.
    pub terms: Vec<Linear>,
    /// The chosen penalty `λ`.
    pub penalty: f64,
    /// Mean cross-validated cross-entropy at the chosen penalty.
    pub cv_ce: f64,
    /// Mean cross-validated cross-entropy of the class frequencies alone.
    pub prior_ce: f64,
    /// Mean training cross-entropy of the final fit.
    pub train_ce: f64,
    /// Inputs with a spread (the others get weight 0).
    pub inputs: usize,
    /// Rows fitted.
    pub n: usize,
}

impl LogisticFit {
    /// Nats the terms save on the held-out rows over the class frequencies:
    /// `n · (prior_ce − cv_ce)`.
    pub fn saving(&self) -> f64 {
        self.n as f64 * (self.prior_ce - self.cv_ce)
    }

    /// The terms predict held-out rows better than the class frequencies, by more than the
    /// choice among [`PENALTIES`] costs (`ln 7 + 1` nats; noise alone saves about 1).
    pub fn helps(&self) -> bool {
        self.inputs > 0 && self.saving() > (PENALTIES.len() as f64).ln() + 1.0
    }
}

/// The offsets the terms add to a program's outputs at every row of `x` (`[F][n_rows]`,
/// feature-major, f32): `[terms.len()][n_rows]`, each computed in f64 and rounded to f32, as
/// the model applies them ([`crate::task::base::model::Model::outputs_of`]).
pub fn offsets(terms: &[Linear], x: &[f32], n_rows: usize) -> Vec<f32> {
    terms.iter().flat_map(|t| t.apply(x, n_rows).into_iter().map(|v| v as f32)).collect()
}

/// Standardised inputs (`[used][n]`, f64) and, per used input, its index, mean and deviation.
struct Design {
    z: Vec<f64>,
    cols: Vec<(usize, f64, f64)>,
    n: usize,
}

impl Design {
    fn new(x: &[f32], n_rows: usize, n_features: usize) -> Design {
        let mut cols = Vec::new();
        let mut z = Vec::new();
        for j in 0..n_features {
            let col = &x[j * n_rows..(j + 1) * n_rows];
            let mean = col.iter().map(|&v| v as f64).sum::<f64>() / n_rows as f64;
            let var = col.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n_rows as f64;
            let sd = var.sqrt();
            if !(sd > 1e-12 * mean.abs().max(1.0)) {
                continue;
            }
            cols.push((j, mean, sd));
            z.extend(col.iter().map(|&v| (v as f64 - mean) / sd));
        }
        Design { z, cols, n: n_rows }
    }

    fn f(&self) -> usize {
        self.cols.len()
    }
}

/// The penalised objective over the rows `rows` (indices into the design; `None`: all):
/// parameters `w` laid out `[K][F + 1]` (intercept first). Returns the objective and writes its
/// gradient to `g`.
struct Problem<'a> {
    d: &'a Design,
    labels: &'a [u32],
    k: usize,
    rows: Vec<usize>,
    lambda: f64,
}

impl Problem<'_> {
    fn value_grad(&self, w: &[f64], g: &mut [f64]) -> f64 {
        let (k, f) = (self.k, self.d.f());
        let stride = f + 1;
        let parts: Vec<(f64, Vec<f64>)> = self
            .rows
            .par_chunks(CHUNK)
            .map(|rows| {
                let m = rows.len();
                // Logits [K][m], column by column over the chunk's rows.
                let mut z = vec![0.0f64; k * m];
                for c in 0..k {
                    let zc = &mut z[c * m..(c + 1) * m];
                    zc.fill(w[c * stride]);
                    for j in 0..f {
                        let wj = w[c * stride + 1 + j];
                        if wj == 0.0 {
                            continue;
                        }
                        let col = &self.d.z[j * self.d.n..(j + 1) * self.d.n];
                        for (v, &r) in zc.iter_mut().zip(rows) {
                            *v += wj * col[r];
                        }
                    }
                }
                // Softmax, loss, and the residuals p − y in place.
                let mut loss = 0.0;
                for (i, &r) in rows.iter().enumerate() {
                    let top = (0..k).map(|c| z[c * m + i]).fold(f64::NEG_INFINITY, f64::max);
                    let s: f64 = (0..k).map(|c| (z[c * m + i] - top).exp()).sum();
                    let y = self.labels[r] as usize;
                    loss += top + s.ln() - z[y * m + i];
                    for c in 0..k {
                        z[c * m + i] = (z[c * m + i] - top).exp() / s;
                    }
                    z[y * m + i] -= 1.0;
                }
                let mut grad = vec![0.0f64; k * stride];
                for c in 0..k {
                    let rc = &z[c * m..(c + 1) * m];
                    grad[c * stride] = rc.iter().sum();
                    for j in 0..f {
                        let col = &self.d.z[j * self.d.n..(j + 1) * self.d.n];
                        grad[c * stride + 1 + j] = rc.iter().zip(rows).map(|(v, &r)| v * col[r]).sum();
                    }
                }
                (loss, grad)
            })
            .collect();
        g.fill(0.0);
        let mut loss = 0.0;
        for (l, gr) in parts {
            loss += l;
            for (a, b) in g.iter_mut().zip(gr) {
                *a += b;
            }
        }
        for c in 0..k {
            for j in 0..f {
                let v = w[c * stride + 1 + j];
                loss += 0.5 * self.lambda * v * v;
                g[c * stride + 1 + j] += self.lambda * v;
            }
        }
        // Per row, so the tolerances do not depend on the row count.
        let n = self.rows.len().max(1) as f64;
        g.iter_mut().for_each(|v| *v /= n);
        loss / n
    }

    /// Mean cross-entropy of `w` on `rows`.
    fn cross_entropy(&self, w: &[f64], rows: &[usize]) -> f64 {
        let (k, f) = (self.k, self.d.f());
        let stride = f + 1;
        let mut z = vec![0.0; k];
        let mut total = 0.0;
        for &r in rows {
            for (c, v) in z.iter_mut().enumerate() {
                *v = w[c * stride] + (0..f).map(|j| w[c * stride + 1 + j] * self.d.z[j * self.d.n + r]).sum::<f64>();
            }
            let top = z.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let s: f64 = z.iter().map(|v| (v - top).exp()).sum();
            total += top + s.ln() - z[self.labels[r] as usize];
        }
        total / rows.len().max(1) as f64
    }
}

/// Minimises `fg` (value, writing the gradient) from `x` by L-BFGS (memory 10) with a
/// backtracking Armijo line search; stops when the largest gradient component is below `1e-5`
/// (the objective is per row), the objective stops falling (relative change below `1e-12`), or
/// after [`MAX_ITER`] steps.
pub fn minimise(fg: impl Fn(&[f64], &mut [f64]) -> f64, mut x: Vec<f64>) -> Vec<f64> {
    const M: usize = 10;
    let n = x.len();
    let mut g = vec![0.0; n];
    let mut fx = fg(&x, &mut g);
    let (mut s_hist, mut y_hist, mut rho): (Vec<Vec<f64>>, Vec<Vec<f64>>, Vec<f64>) = (Vec::new(), Vec::new(), Vec::new());
    let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(a, b)| a * b).sum::<f64>();
    let mut xn = vec![0.0; n];
    let mut gn = vec![0.0; n];
    for _ in 0..MAX_ITER {
        if !fx.is_finite() || g.iter().fold(0.0f64, |m, v| m.max(v.abs())) < 1e-5 {
            break;
        }
        // Two-loop recursion: d = −H g.
        let mut q = g.clone();
        let mut alpha = vec![0.0; s_hist.len()];
        for i in (0..s_hist.len()).rev() {
            alpha[i] = rho[i] * dot(&s_hist[i], &q);
            q.iter_mut().zip(&y_hist[i]).for_each(|(q, y)| *q -= alpha[i] * y);
        }
        let gamma = match s_hist.last() {
            Some(s) => dot(s, y_hist.last().unwrap()) / dot(y_hist.last().unwrap(), y_hist.last().unwrap()),
            None => 1.0 / dot(&g, &g).sqrt().max(1e-12),
        };
        q.iter_mut().for_each(|v| *v *= gamma);
        for i in 0..s_hist.len() {
            let b = rho[i] * dot(&y_hist[i], &q);
            q.iter_mut().zip(&s_hist[i]).for_each(|(q, s)| *q += (alpha[i] - b) * s);
        }
        let mut d: Vec<f64> = q.iter().map(|v| -v).collect();
        let mut slope = dot(&g, &d);
        if !(slope < 0.0) {
            // Not a descent direction: restart from steepest descent.
            s_hist.clear();
            y_hist.clear();
            rho.clear();
            d = g.iter().map(|v| -v).collect();
            slope = dot(&g, &d);
        }
        let mut step = 1.0;
        let mut fnew;
        loop {
            xn.iter_mut().zip(&x).zip(&d).for_each(|((xn, x), d)| *xn = x + step * d);
            fnew = fg(&xn, &mut gn);
            if fnew.is_finite() && fnew <= fx + 1e-4 * step * slope {
                break;
            }
            step *= 0.5;
            if step < 1e-20 {
                return x;
            }
        }
        let s: Vec<f64> = xn.iter().zip(&x).map(|(a, b)| a - b).collect();
        let y: Vec<f64> = gn.iter().zip(&g).map(|(a, b)| a - b).collect();
        let sy = dot(&s, &y);
        let done = (fx - fnew).abs() <= 1e-12 * fx.abs().max(1e-12);
        std::mem::swap(&mut x, &mut xn);
        std::mem::swap(&mut g, &mut gn);
        fx = fnew;
        if done {
            break;
        }
        if sy > 1e-12 {
            if s_hist.len() == M {
                s_hist.remove(0);
                y_hist.remove(0);
                rho.remove(0);
            }
            rho.push(1.0 / sy);
            s_hist.push(s);
            y_hist.push(y);
        }
    }
    x
}

/// A fixed permutation of `0..n` (a hash of the index), so the folds do not follow the order of
/// the rows and a run is reproducible.
fn folds(n: usize) -> Vec<Vec<usize>> {
    let mut order: Vec<(u64, usize)> = (0..n)
        .map(|i| {
            let mut h = (i as u64).wrapping_add(0x9E37_79B9_7F4A_7C15);
            h = (h ^ (h >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            h = (h ^ (h >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            (h ^ (h >> 31), i)
        })
        .collect();
    order.sort_unstable();
    let mut f = vec![Vec::new(); FOLDS];
    for (p, (_, i)) in order.into_iter().enumerate() {
        f[p % FOLDS].push(i);
    }
    f.iter_mut().for_each(|v| v.sort_unstable());
    f
}

/// Multinomial logistic regression of `labels` (each `< n_classes`) on `x` (`[F][n_rows]`,
/// feature-major) with the penalty of least cross-validated cross-entropy (module docs); terms
/// per class, or one set (class 1 less class 0) for a `binary` program. `None` with fewer than
/// `2 · FOLDS` rows or no input with a spread; an error for non-finite values or mismatched
/// lengths.
pub fn fit(x: &[f32], labels: &[u32], n_rows: usize, n_features: usize, n_classes: usize, binary: bool) -> Result<Option<LogisticFit>, String> {
    if x.len() != n_rows * n_features || labels.len() != n_rows {
        return Err(format!("{} values and {} labels for {n_rows} rows of {n_features} inputs", x.len(), labels.len()));
    }
    if n_classes < 2 || labels.iter().any(|&l| l as usize >= n_classes) {
        return Err(format!("labels must be below {n_classes} (at least 2 classes)"));
    }
    if binary && n_classes != 2 {
        return Err(format!("a one-output program decides between 2 classes, not {n_classes}"));
    }
    if let Some(i) = x.iter().position(|v| !v.is_finite()) {
        return Err(format!("input {} of row {} is {}", i / n_rows.max(1), i % n_rows.max(1), x[i]));
    }
    let d = Design::new(x, n_rows, n_features);
    if n_rows < 2 * FOLDS || d.f() == 0 {
        return Ok(None);
    }
    let k = n_classes;
    let size = k * (d.f() + 1);
    let problem = |rows: Vec<usize>, lambda: f64| Problem { d: &d, labels, k, rows, lambda };

    // Cross-validation along the penalties from the largest, each fold's fit warm-started from
    // its fit at the last penalty; the path stops where the cross-validated cross-entropy first
    // rises (the smaller penalties, the slowest fits, are then not needed).
    let folds = folds(n_rows);
    let mut prior = 0.0;
    let mut fitting = Vec::with_capacity(FOLDS);
    for held in &folds {
        let mut keep = vec![true; n_rows];
        held.iter().for_each(|&i| keep[i] = false);
        let rows: Vec<usize> = (0..n_rows).filter(|&i| keep[i]).collect();
        // The class frequencies of the fitting rows (half a count for a class they lack).
        let mut counts = vec![0.0; k];
        rows.iter().for_each(|&r| counts[labels[r] as usize] += 1.0);
        counts.iter_mut().filter(|c| **c == 0.0).for_each(|c| *c = 0.5);
        let total: f64 = counts.iter().sum();
        prior += held.iter().map(|&r| -(counts[labels[r] as usize] / total).ln()).sum::<f64>();
        fitting.push(rows);
    }
    let mut w = vec![vec![0.0; size]; FOLDS];
    let mut cv: Vec<f64> = Vec::with_capacity(PENALTIES.len());
    for &lambda in &PENALTIES {
        let mut total = 0.0;
        for (f, held) in folds.iter().enumerate() {
            let pr = problem(fitting[f].clone(), lambda);
            w[f] = minimise(|w, g| pr.value_grad(w, g), std::mem::take(&mut w[f]));
            total += pr.cross_entropy(&w[f], held) * held.len() as f64;
        }
        let rises = cv.last().is_some_and(|&last| total > last);
        cv.push(total);
        if rises {
            break;
        }
    }
    let best = (0..cv.len()).min_by(|&a, &b| cv[a].total_cmp(&cv[b])).unwrap_or(0);
    let lambda = PENALTIES[best];
    let pr = problem((0..n_rows).collect(), lambda);
    let w = minimise(|w, g| pr.value_grad(w, g), vec![0.0; size]);
    let train_ce = pr.cross_entropy(&w, &pr.rows);
    // Back to the raw inputs: a_kj = w_kj / s_j, c_k = w_k0 − Σ_j w_kj m_j / s_j, the
    // intercepts centred (the softmax does not see a common shift).
    let stride = d.f() + 1;
    let mut terms: Vec<Linear> = (0..k)
        .map(|c| {
            let mut a = vec![0.0; n_features];
            let mut b = w[c * stride];
            for (q, &(j, m, s)) in d.cols.iter().enumerate() {
                a[j] = w[c * stride + 1 + q] / s;
                b -= a[j] * m;
            }
            Linear { c: b, a }
        })
        .collect();
    let mean_c = terms.iter().map(|t| t.c).sum::<f64>() / k as f64;
    terms.iter_mut().for_each(|t| t.c -= mean_c);
    if binary {
        let (t0, t1) = (&terms[0], &terms[1]);
        terms = vec![Linear { c: t1.c - t0.c, a: t1.a.iter().zip(&t0.a).map(|(a, b)| a - b).collect() }];
    }
    Ok(Some(LogisticFit {
        terms,
        penalty: lambda,
        cv_ce: cv[best] / n_rows as f64,
        prior_ce: prior / n_rows as f64,
        train_ce,
        inputs: d.f(),
        n: n_rows,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A seeded stream of uniform numbers in [0, 1).
    fn uniform(seed: u64) -> impl FnMut() -> f64 {
        let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        move || {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (s >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    /// Rows drawn from a softmax model with logits `w[k]·[1, x]`: `(x [F][n], labels)`.
    fn draw(w: &[Vec<f64>], n: usize, seed: u64) -> (Vec<f32>, Vec<u32>) {
        let f = w[0].len() - 1;
        let mut u = uniform(seed);
        let mut x = vec![0.0f32; f * n];
        let mut labels = Vec::with_capacity(n);
        for i in 0..n {
            let xi: Vec<f64> = (0..f).map(|_| 4.0 * u() - 2.0).collect();
            for j in 0..f {
                x[j * n + i] = xi[j] as f32;
            }
            let z: Vec<f64> = w.iter().map(|wk| wk[0] + (0..f).map(|j| wk[1 + j] * xi[j]).sum::<f64>()).collect();
            let s: f64 = z.iter().map(|v| v.exp()).sum();
            let mut r = u() * s;
            let mut c = 0;
            while c + 1 < w.len() && r >= z[c].exp() {
                r -= z[c].exp();
                c += 1;
            }
            labels.push(c as u32);
        }
        (x, labels)
    }

    #[test]
    fn recovers_the_logit_differences_of_a_known_model() {
        // Three classes, two inputs and one of noise; logits relative to class 0.
        let w = vec![vec![0.0, 0.0, 0.0, 0.0], vec![0.5, 2.0, -1.0, 0.0], vec![-0.5, -1.5, 1.5, 0.0]];
        let (x, labels) = draw(&w, 6000, 7);
        let fit = fit(&x, &labels, 6000, 3, 3, false).unwrap().unwrap();
        assert!(fit.helps() && fit.cv_ce < 0.8 * fit.prior_ce, "{fit:?}");
        assert_eq!(fit.terms.len(), 3);
        for c in 1..3 {
            let (t, t0) = (&fit.terms[c], &fit.terms[0]);
            for j in 0..3 {
                let got = t.a[j] - t0.a[j];
                assert!((got - w[c][1 + j]).abs() < 0.2, "class {c} input {j}: {got} for {}", w[c][1 + j]);
            }
            assert!((t.c - t0.c - w[c][0]).abs() < 0.2, "class {c} intercept");
        }
    }

    #[test]
    fn binary_terms_are_the_difference_of_the_classes() {
        let w = vec![vec![0.0, 0.0, 0.0], vec![-1.0, 3.0, 0.0]];
        let (x, labels) = draw(&w, 4000, 3);
        let two = fit(&x, &labels, 4000, 2, 2, false).unwrap().unwrap();
        let one = fit(&x, &labels, 4000, 2, 2, true).unwrap().unwrap();
        assert_eq!(one.terms.len(), 1);
        for j in 0..2 {
            assert!((one.terms[0].a[j] - (two.terms[1].a[j] - two.terms[0].a[j])).abs() < 1e-12);
        }
        assert!((one.terms[0].a[0] - 3.0).abs() < 0.3 && one.terms[0].a[1].abs() < 0.3, "{:?}", one.terms);
        assert!((one.terms[0].c + 1.0).abs() < 0.3, "{:?}", one.terms);
    }

    #[test]
    fn noise_does_not_help_and_constant_inputs_stay_finite() {
        // Labels independent of the inputs: the frequencies predict as well.
        let mut u = uniform(11);
        let n = 400;
        let x: Vec<f32> = (0..3 * n).map(|_| u() as f32).collect();
        let labels: Vec<u32> = (0..n).map(|_| (u() * 3.0) as u32).collect();
        let f = fit(&x, &labels, n, 3, 3, false).unwrap().unwrap();
        assert!(!f.helps(), "{f:?}");
        // A constant and a duplicated input: weight 0 for the constant, all finite.
        let mut x2 = vec![5.0f32; n];
        x2.extend_from_slice(&x[..n]);
        x2.extend_from_slice(&x[..n]);
        let labels: Vec<u32> = (0..n).map(|i| (x[i] > 0.5) as u32).collect();
        let f = fit(&x2, &labels, n, 3, 2, false).unwrap().unwrap();
        assert_eq!(f.inputs, 2);
        assert!(f.terms.iter().all(|t| t.check(3).is_ok() && t.a[0] == 0.0), "{:?}", f.terms);
        assert!(f.helps());
    }

    #[test]
    fn same_fit_whatever_the_thread_count() {
        let w = vec![vec![0.0, 0.0, 0.0], vec![0.3, 1.0, -2.0]];
        let (x, labels) = draw(&w, 1500, 5);
        let a = fit(&x, &labels, 1500, 2, 2, false).unwrap().unwrap();
        let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        let b = pool.install(|| fit(&x, &labels, 1500, 2, 2, false).unwrap().unwrap());
        assert_eq!(a, b);
    }

    #[test]
    fn bad_input_is_an_error_and_tiny_data_none() {
        assert!(fit(&[0.0; 5], &[0, 1, 0], 3, 2, 2, false).is_err());
        assert!(fit(&[0.0, 1.0, f32::NAN], &[0, 1, 0], 3, 1, 2, false).unwrap_err().contains("NaN"));
        assert!(fit(&[0.0, 1.0, 2.0], &[0, 3, 0], 3, 1, 2, false).is_err());
        assert!(fit(&[0.0, 1.0, 2.0], &[0, 1, 2], 3, 1, 3, true).is_err());
        assert_eq!(fit(&[0.0, 1.0, 2.0], &[0, 1, 0], 3, 1, 2, false).unwrap(), None);
    }
}
