//! Built-in benchmark problems, generated from their definitions (no files): one registry,
//! [`builtins`], each entry a formula and how its training (and test) points are laid out.
//! Addressed on the command line as `builtin:NAME` or `builtin:NAME:N` (N training points).
//!
//! Generation is deterministic: random points come from our counter-based [`Stream`] at the
//! address `(entry.seed; generation 0, individual 0 for train and 1 for test, Purpose::Data)`,
//! drawn row by row and, within a row, variable by variable (one `unit_f64` each, mapped to
//! `lo + (hi - lo) * u`). So `builtin:sextic:10` is the first 10 rows of `builtin:sextic:20`,
//! and the data are the same on every machine and thread count.
//!
//! Every input is rounded to f32 first, and the target is computed in f64 from those rounded
//! inputs (powers as explicit products; `ln` from the platform's libm, which may differ in the
//! last bit of `y64` between platforms), then rounded to f32 for `y`. So `x64 == x as f64`
//! exactly and `y64` is the exact-in-f64 target at the inputs the f32 interpreter sees.
//! Variables are `x0, x1, …`; the target is `y`.

use anyhow::{Result, bail, ensure};

use super::Dataset;
use crate::rng::{Purpose, Stream};

/// A loaded problem: training data and, when the problem defines one, a test set.
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    /// What was loaded: `builtin:NAME[:N]` or the file's path.
    pub name: String,
    /// The training data.
    pub train: Dataset,
    /// The problem's own test set, if it defines one.
    pub test: Option<Dataset>,
}

/// How the points of a built-in are laid out.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Sampling {
    /// Every combination of `linspace(lo, hi, k)` per variable, `N = k^n_vars` points (N must
    /// be a perfect power, `k >= 2`). Row `r` has variable `v` at grid index
    /// `(r / k^(n_vars - 1 - v)) % k`: the last variable varies fastest.
    Grid {
        /// First grid value of each axis.
        lo: f64,
        /// Last grid value of each axis (included).
        hi: f64,
    },
    /// One variable at `linspace(lo, hi, N)`: `lo + i * (hi - lo) / (N - 1)` for
    /// `i < N - 1`, and exactly `hi` last (NumPy's formula), `N >= 2`.
    Linspace {
        /// First value.
        lo: f64,
        /// Last value (included).
        hi: f64,
    },
    /// Each variable uniform in `[lo, hi]` (random, see the module documentation).
    Uniform {
        /// Lower bound.
        lo: f64,
        /// Upper bound (reachable after rounding to f32).
        hi: f64,
    },
    /// One variable at the integers `from, from + 1, …, from + N - 1`.
    Integers {
        /// First value.
        from: i64,
    },
}

/// One built-in problem.
#[derive(Clone, Copy, Debug)]
pub struct Builtin {
    /// Name after `builtin:`.
    pub name: &'static str,
    /// The target, in terms of `x0, x1, …`.
    pub formula: &'static str,
    /// Where the definition comes from.
    pub source: &'static str,
    /// Number of variables.
    pub n_vars: usize,
    /// Layout of the training points.
    pub train: Sampling,
    /// Training points unless `builtin:NAME:N` says otherwise.
    pub default_n: usize,
    /// Largest N accepted (memory, or time for Keijzer-6's sums).
    pub max_n: usize,
    /// Layout and size of the test set, if the problem defines one (N does not change it).
    pub test: Option<(Sampling, usize)>,
    /// Seed of the [`Stream`] for random layouts (unused by grids).
    pub seed: u64,
    /// The target at one point, `x: [n_vars]`, in f64.
    pub f: fn(&[f64]) -> f64,
}

/// Default cap on the number of points of a built-in: 2²⁸ (268 M, 2.1 GB of f32 inputs for two
/// variables), enough for data sets that are split over several GPUs' row shards; the memory
/// plan refuses a set the machine cannot hold.
const MAX_POINTS: usize = 1 << 28;

fn pagie1(x: &[f64]) -> f64 {
    // x^-4 as 1 / x^4: at 0 it is +inf and the term 1 / (1 + inf) is 0, the right limit.
    let term = |v: f64| 1.0 / (1.0 + 1.0 / (v * v * (v * v)));
    term(x[0]) + term(x[1])
}

fn sextic(x: &[f64]) -> f64 {
    let x2 = x[0] * x[0];
    let x4 = x2 * x2;
    x4 * x2 - 2.0 * x4 + x2
}

fn quartic(x: &[f64]) -> f64 {
    let x1 = x[0];
    let x2 = x1 * x1;
    x1 + x2 + x2 * x1 + x2 * x2
}

fn nguyen7(x: &[f64]) -> f64 {
    (x[0] + 1.0).ln() + (x[0] * x[0] + 1.0).ln()
}

fn keijzer6(x: &[f64]) -> f64 {
    // The harmonic number H(x), summed in f64 from i = 1 up; x is a positive integer.
    let n = x[0].max(0.0) as u64;
    (1..=n).map(|i| 1.0 / i as f64).sum()
}

fn vladislavleva4(x: &[f64]) -> f64 {
    10.0 / (5.0 + x.iter().map(|&v| (v - 3.0) * (v - 3.0)).sum::<f64>())
}

static BUILTINS: [Builtin; 7] = [
    Builtin {
        name: "pagie1",
        formula: "1/(1+x0^-4) + 1/(1+x1^-4)",
        source: "Pagie & Hogeweg 1997; 32×32 grid over [-5,5]² (the classic E[-5,5,0.4] grid is builtin:pagie1:676)",
        n_vars: 2,
        train: Sampling::Grid { lo: -5.0, hi: 5.0 },
        default_n: 1024,
        max_n: MAX_POINTS,
        test: None,
        seed: 0,
        f: pagie1,
    },
    Builtin {
        name: "sextic",
        formula: "x0^6 - 2*x0^4 + x0^2",
        source: "Koza 1994; 20 random points in [-1,1]",
        n_vars: 1,
        train: Sampling::Uniform { lo: -1.0, hi: 1.0 },
        default_n: 20,
        max_n: MAX_POINTS,
        test: None,
        seed: 1,
        f: sextic,
    },
    Builtin {
        name: "quartic",
        formula: "x0 + x0^2 + x0^3 + x0^4",
        source: "Pospichal et al. (GE on GPUs); 128 points, linspace(0,10,128)",
        n_vars: 1,
        train: Sampling::Linspace { lo: 0.0, hi: 10.0 },
        default_n: 128,
        max_n: MAX_POINTS,
        test: None,
        seed: 0,
        f: quartic,
    },
    Builtin {
        name: "koza1",
        formula: "x0^4 + x0^3 + x0^2 + x0",
        source: "Koza 1992 (quartic polynomial); 20 random points in [-1,1]",
        n_vars: 1,
        train: Sampling::Uniform { lo: -1.0, hi: 1.0 },
        default_n: 20,
        max_n: MAX_POINTS,
        test: None,
        seed: 2,
        f: quartic,
    },
    Builtin {
        name: "nguyen7",
        formula: "ln(x0 + 1) + ln(x0^2 + 1)",
        source: "Uy et al. 2011; 20 random points in [0,2]",
        n_vars: 1,
        train: Sampling::Uniform { lo: 0.0, hi: 2.0 },
        default_n: 20,
        max_n: MAX_POINTS,
        test: None,
        seed: 3,
        f: nguyen7,
    },
    Builtin {
        name: "keijzer6",
        formula: "sum_{i=1}^{x0} 1/i",
        source: "Keijzer 2003; train x0 = 1..50, test x0 = 1..120",
        n_vars: 1,
        train: Sampling::Integers { from: 1 },
        default_n: 50,
        max_n: 10_000,
        test: Some((Sampling::Integers { from: 1 }, 120)),
        seed: 0,
        f: keijzer6,
    },
    Builtin {
        name: "vladislavleva4",
        formula: "10 / (5 + sum_{i=0}^{4} (x_i - 3)^2)",
        source: "Vladislavleva et al. 2009; train 1024 random points in [0.05,6.05]^5, test 5000 in [-0.25,6.35]^5",
        n_vars: 5,
        train: Sampling::Uniform { lo: 0.05, hi: 6.05 },
        default_n: 1024,
        max_n: MAX_POINTS / 5,
        test: Some((Sampling::Uniform { lo: -0.25, hi: 6.35 }, 5000)),
        seed: 4,
        f: vladislavleva4,
    },
];

/// Every built-in problem, in a fixed order.
pub fn builtins() -> &'static [Builtin] {
    &BUILTINS
}

/// The built-in called `name` (lower case); the error lists the known names.
pub fn find(name: &str) -> Result<&'static Builtin> {
    match BUILTINS.iter().find(|b| b.name == name) {
        Some(b) => Ok(b),
        None => {
            let known = BUILTINS.iter().map(|b| b.name).collect::<Vec<_>>().join(", ");
            bail!("unknown built-in problem `{name}`; known: {known}")
        }
    }
}

/// Generates the built-in `name` (case-insensitive) with `n` training points (default: its
/// own), and its test set if it has one.
pub fn builtin(name: &str, n: Option<usize>) -> Result<Problem> {
    let name = name.to_ascii_lowercase();
    let b = find(&name)?;
    let label = match n {
        Some(n) => format!("builtin:{name}:{n}"),
        None => format!("builtin:{name}"),
    };
    let n = n.unwrap_or(b.default_n);
    ensure!(n >= 1 && n <= b.max_n, "{label}: N must be from 1 to {}, got {n}", b.max_n);
    let train = b.generate(b.train, n, 0).map_err(|e| anyhow::anyhow!("{label}: {e}"))?;
    let test = match b.test {
        Some((sampling, n_test)) => {
            Some(b.generate(sampling, n_test, 1).map_err(|e| anyhow::anyhow!("{label} (test set): {e}"))?)
        }
        None => None,
    };
    Ok(Problem { name: label, train, test })
}

impl Builtin {
    /// `n` points laid out by `sampling`, from the stream of `individual` (0 train, 1 test).
    pub fn generate(&self, sampling: Sampling, n: usize, individual: u32) -> Result<Dataset> {
        use rayon::prelude::*;
        let d = self.n_vars;
        // Feature-major inputs, [d][n], each rounded to f32 (in parallel: 16.8 M grid points of
        // SR-GPU's W4 take 2.4 s on one core). Only the uniform layout draws from a stream, in
        // row-major order, sequentially.
        let mut x64 = vec![0.0f64; n * d];
        const MIN: usize = 1 << 15;
        match sampling {
            Sampling::Grid { lo, hi } => {
                let k = grid_side(n, d)?;
                let axis = linspace(lo, hi, k);
                // Row r's variable v is axis digit d-1-v of r in base k (the last varies fastest).
                for (v, col) in x64.chunks_mut(n.max(1)).enumerate() {
                    let div = k.pow((d - 1 - v) as u32);
                    col.par_iter_mut().with_min_len(MIN).enumerate().for_each(|(r, x)| *x = axis[(r / div) % k]);
                }
            }
            Sampling::Linspace { lo, hi } => {
                ensure!(d == 1, "a linspace layout has one variable, this problem has {d}");
                ensure!(n >= 2, "linspace needs at least 2 points, got {n}");
                x64.copy_from_slice(&linspace(lo, hi, n));
            }
            Sampling::Uniform { lo, hi } => {
                let mut s = Stream::new(self.seed, 0, individual, Purpose::Data);
                for r in 0..n {
                    for v in 0..d {
                        x64[v * n + r] = lo + (hi - lo) * s.unit_f64();
                    }
                }
            }
            Sampling::Integers { from } => {
                ensure!(d == 1, "an integer layout has one variable, this problem has {d}");
                for (i, x) in x64.iter_mut().enumerate() {
                    *x = (from + i as i64) as f64;
                }
            }
        }
        x64.par_iter_mut().with_min_len(MIN).for_each(|v| *v = *v as f32 as f64);
        let f = self.f;
        let y64: Vec<f64> = (0..n)
            .into_par_iter()
            .with_min_len(MIN)
            .map_init(
                || vec![0.0; d],
                |row, r| {
                    for (v, x) in row.iter_mut().enumerate() {
                        *x = x64[v * n + r];
                    }
                    f(row)
                },
            )
            .collect();
        let names = (0..d).map(|v| format!("x{v}")).collect();
        Dataset::new(names, "y", x64, y64)
    }
}

/// `k` with `k^d == n` and `k >= 2`, or an error naming the nearest valid sizes.
fn grid_side(n: usize, d: usize) -> Result<usize> {
    let pow = |k: usize| k.checked_pow(d as u32).unwrap_or(usize::MAX);
    let guess = (n as f64).powf(1.0 / d as f64).round() as usize;
    if let Some(k) = (guess.saturating_sub(1)..=guess + 1).find(|&k| pow(k) == n) {
        ensure!(k >= 2, "a grid needs at least 2 points per axis ({} in all), got N = {n}", pow(2));
        return Ok(k);
    }
    let below = (1..=guess + 1).rev().find(|&k| pow(k) < n).unwrap_or(1);
    let (lo, hi) = (below.max(2), below + 1);
    let what = if d == 2 { "a perfect square".to_string() } else { format!("a perfect {d}th power") };
    bail!(
        "a {d}-variable grid needs N = k^{d} points (k per axis), {what}; got {n}, nearest are {} ({lo}^{d}) and {} ({hi}^{d})",
        pow(lo),
        pow(hi)
    )
}

/// NumPy's `linspace(lo, hi, k)`: `lo + i * step` with `step = (hi - lo) / (k - 1)`, last
/// value exactly `hi`.
fn linspace(lo: f64, hi: f64, k: usize) -> Vec<f64> {
    if k == 1 {
        return vec![lo];
    }
    let step = (hi - lo) / (k - 1) as f64;
    let mut v: Vec<f64> = (0..k).map(|i| lo + i as f64 * step).collect();
    v[k - 1] = hi;
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-12 * b.abs().max(1.0)
    }

    #[test]
    fn formulas_match_hand_computed_values() {
        type Case = (fn(&[f64]) -> f64, &'static [f64], f64);
        let cases: &[Case] = &[
            (pagie1, &[1.0, 1.0], 1.0),
            (pagie1, &[2.0, -1.0], 16.0 / 17.0 + 0.5),
            (pagie1, &[-5.0, -5.0], 2.0 * 625.0 / 626.0),
            (pagie1, &[0.0, 1.0], 0.5), // x^-4 = inf, its term is 0
            (pagie1, &[0.0, 0.0], 0.0),
            (sextic, &[0.5], 0.015625 - 0.125 + 0.25),
            (sextic, &[1.0], 0.0),
            (sextic, &[-1.0], 0.0),
            (sextic, &[2.0], 64.0 - 32.0 + 4.0),
            (quartic, &[2.0], 30.0),
            (quartic, &[10.0], 11110.0),
            (quartic, &[-1.0], 0.0),
            (quartic, &[-0.5], -0.5 + 0.25 - 0.125 + 0.0625),
            (nguyen7, &[0.0], 0.0),
            (nguyen7, &[1.0], 2.0 * std::f64::consts::LN_2),
            (nguyen7, &[2.0], 3f64.ln() + 5f64.ln()),
            (keijzer6, &[1.0], 1.0),
            (keijzer6, &[4.0], 25.0 / 12.0),
            (keijzer6, &[10.0], 7381.0 / 2520.0),
            (vladislavleva4, &[3.0; 5], 2.0),
            (vladislavleva4, &[4.0; 5], 1.0),
            (vladislavleva4, &[0.0; 5], 0.2),
            (vladislavleva4, &[3.0, 3.0, 3.0, 3.0, 5.0], 10.0 / 9.0),
        ];
        for (k, &(f, x, want)) in cases.iter().enumerate() {
            let got = f(x);
            assert!(close(got, want), "case {k}: f({x:?}) = {got}, want {want}");
        }
    }

    #[test]
    fn default_shapes_and_test_sets() {
        let shapes = [
            ("pagie1", (1024, 2), None),
            ("sextic", (20, 1), None),
            ("quartic", (128, 1), None),
            ("koza1", (20, 1), None),
            ("nguyen7", (20, 1), None),
            ("keijzer6", (50, 1), Some((120, 1))),
            ("vladislavleva4", (1024, 5), Some((5000, 5))),
        ];
        assert_eq!(builtins().len(), shapes.len());
        for (name, train, test) in shapes {
            let p = builtin(name, None).unwrap();
            assert_eq!(p.name, format!("builtin:{name}"));
            assert_eq!(p.train.shape(), train, "{name}");
            assert_eq!(p.test.as_ref().map(Dataset::shape), test, "{name}");
            assert_eq!(p.train.target, "y");
            assert_eq!(p.train.names[0], "x0");
            for d in std::iter::once(&p.train).chain(p.test.as_ref()) {
                d.validate().unwrap();
                // Inputs are f32 values, and y64 is f of exactly those inputs.
                let (x64, y64) = (d.x64.as_ref().unwrap(), d.y64.as_ref().unwrap());
                assert!(x64.iter().zip(&d.x).all(|(&a, &b)| a == b as f64), "{name}");
                let b = find(name).unwrap();
                for (i, &y) in y64.iter().enumerate() {
                    let row: Vec<f64> = d.row(i).unwrap().iter().map(|&v| v as f64).collect();
                    assert_eq!((b.f)(&row), y, "{name} row {i}");
                }
            }
        }
    }

    #[test]
    fn pagie1_grid_is_linspace_per_axis_last_variable_fastest() {
        let d = builtin("pagie1", None).unwrap().train;
        let step = 10.0 / 31.0;
        assert_eq!(d.row(0).unwrap(), vec![-5.0, -5.0]);
        assert_eq!(d.row(1).unwrap(), vec![-5.0, (-5.0 + step) as f32]);
        assert_eq!(d.row(32).unwrap(), vec![(-5.0 + step) as f32, -5.0]);
        assert_eq!(d.row(1023).unwrap(), vec![5.0, 5.0]);
        assert!(close(d.y64.as_ref().unwrap()[0], 2.0 * 625.0 / 626.0));
        // builtin:pagie1:64 is an 8×8 grid.
        let small = builtin("pagie1", Some(64)).unwrap().train;
        assert_eq!(small.shape(), (64, 2));
        assert_eq!(small.row(9).unwrap(), vec![(-5.0 + 10.0 / 7.0) as f32; 2]);
        // The classic grid: step 0.4.
        let classic = builtin("pagie1", Some(676)).unwrap().train;
        assert_eq!(classic.row(1).unwrap(), vec![-5.0, -4.6]);
    }

    // With 33 points per axis the grid contains 0, where x^-4 is infinite: the target must be
    // the finite limit, not NaN.
    #[test]
    fn pagie1_grid_through_zero_has_finite_target() {
        let d = builtin("pagie1", Some(33 * 33)).unwrap().train;
        let centre = 16 * 33 + 16;
        assert_eq!(d.row(centre).unwrap(), vec![0.0, 0.0]);
        assert_eq!(d.y[centre], 0.0);
        assert_eq!(d.row(16).unwrap(), vec![-5.0, 0.0]);
        assert!(close(d.y64.as_ref().unwrap()[16], 625.0 / 626.0));
        assert!(d.y.iter().all(|v| v.is_finite()));
    }

    #[test]
    fn grid_sizes_must_be_perfect_squares() {
        let err = builtin("pagie1", Some(50)).unwrap_err().to_string();
        assert!(err.contains("builtin:pagie1:50") && err.contains("perfect square"), "{err}");
        assert!(err.contains("49 (7^2) and 64 (8^2)"), "{err}");
        let err = builtin("pagie1", Some(1)).unwrap_err().to_string();
        assert!(err.contains("at least 2 points per axis"), "{err}");
        let err = builtin("pagie1", Some(2)).unwrap_err().to_string();
        assert!(err.contains("nearest are 4 (2^2) and 4 (2^2)"), "{err}");
        assert_eq!(grid_side(27, 3).unwrap(), 3);
        assert_eq!(grid_side(4096, 2).unwrap(), 64);
    }

    #[test]
    fn quartic_is_linspace_0_10() {
        let d = builtin("quartic", None).unwrap().train;
        let x = d.feature(0).unwrap();
        assert_eq!((x[0], x[127]), (0.0, 10.0));
        assert_eq!(x[1], (10.0f64 / 127.0) as f32);
        assert_eq!(d.y64.as_ref().unwrap()[127], 11110.0);
        let err = builtin("quartic", Some(1)).unwrap_err().to_string();
        assert!(err.contains("at least 2 points"), "{err}");
    }

    #[test]
    fn keijzer6_uses_integers_and_standard_test_range() {
        let p = builtin("keijzer6", None).unwrap();
        assert_eq!(p.train.feature(0).unwrap(), (1..=50).map(|i| i as f32).collect::<Vec<_>>());
        let test = p.test.unwrap();
        assert_eq!(test.feature(0).unwrap()[119], 120.0);
        assert!(close(test.y64.as_ref().unwrap()[3], 25.0 / 12.0));
        let err = builtin("keijzer6", Some(20_000)).unwrap_err().to_string();
        assert!(err.contains("N must be from 1 to 10000"), "{err}");
    }

    #[test]
    fn random_builtins_are_deterministic_in_range_and_prefix_stable() {
        for (name, lo, hi) in [("sextic", -1.0, 1.0), ("koza1", -1.0, 1.0), ("nguyen7", 0.0, 2.0)] {
            let a = builtin(name, Some(200)).unwrap().train;
            let b = builtin(name, Some(200)).unwrap().train;
            assert_eq!(a, b, "{name}");
            let x = a.feature(0).unwrap();
            assert!(x.iter().all(|&v| (lo..=hi).contains(&v)), "{name}");
            // Not degenerate: spread over the interval.
            let (min, max) = x.iter().fold((f32::MAX, f32::MIN), |(l, h), &v| (l.min(v), h.max(v)));
            assert!(min < lo + 0.1 && max > hi - 0.1, "{name}: {min}..{max}");
            let head = builtin(name, Some(20)).unwrap().train;
            assert_eq!(head.x[..], x[..20], "{name}");
        }
        // Problems with the same layout but different seeds draw different points.
        assert_ne!(builtin("sextic", None).unwrap().train.x, builtin("koza1", None).unwrap().train.x);
        // Pinned values: a change of generator or draw order is a change of the data sets.
        let s = builtin("sextic", None).unwrap().train;
        let expected = {
            let mut st = Stream::new(1, 0, 0, Purpose::Data);
            (-1.0 + 2.0 * st.unit_f64()) as f32
        };
        assert_eq!(s.x[0], expected);
    }

    #[test]
    fn vladislavleva4_train_and_test_ranges() {
        let p = builtin("vladislavleva4", Some(300)).unwrap();
        assert_eq!(p.name, "builtin:vladislavleva4:300");
        assert_eq!(p.train.shape(), (300, 5));
        assert!(p.train.x.iter().all(|&v| (0.05f32..=6.05).contains(&v)));
        let test = p.test.unwrap();
        assert!(test.x.iter().all(|&v| (-0.25f32..=6.35).contains(&v)));
        assert!(test.x.iter().any(|&v| v < 0.0), "the test range extends below the training range");
        // Row 0 of the training set is draws 0..5 of the train stream, one per variable.
        let mut st = Stream::new(4, 0, 0, Purpose::Data);
        let row0: Vec<f32> = (0..5).map(|_| (0.05 + 6.0 * st.unit_f64()) as f32).collect();
        assert_eq!(p.train.row(0).unwrap(), row0);
    }

    #[test]
    fn unknown_names_list_the_known_ones() {
        let err = builtin("pagie2", None).unwrap_err().to_string();
        assert!(err.contains("unknown built-in problem `pagie2`"), "{err}");
        for b in builtins() {
            assert!(err.contains(b.name), "{err}");
        }
        assert!(builtin("PAGIE1", Some(16)).is_ok());
        let err = builtin("sextic", Some(0)).unwrap_err().to_string();
        assert!(err.contains("N must be from 1"), "{err}");
    }
}
