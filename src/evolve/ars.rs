//! Augmented random search (Mania, Guy and Recht, "Simple random search provides a competitive
//! approach to reinforcement learning", 2018; their V2-t): a parameter vector θ climbs the
//! return by finite differences along random directions.
//!
//! Each iteration draws `N` directions `δ_k` of independent standard normals, plays the two
//! policies `θ + ν δ_k` and `θ − ν δ_k` for every `k`, keeps the `b` directions whose better
//! return `max(r⁺_k, r⁻_k)` is highest, and steps
//!
//! ```text
//! θ ← θ + α / (b σ_R) · Σ_{k kept} (r⁺_k − r⁻_k) δ_k
//! ```
//!
//! where `σ_R` is the standard deviation of the `2b` returns kept, so the step's length does
//! not depend on the scale of the rewards. The task plays the policies (on any backend) and
//! keeps the observation normaliser that makes one step size fit every observation (V2);
//! this module is the update alone, so it is tested on functions with known optima.
//!
//! The directions are drawn from Philox streams ([`crate::rng`], purpose
//! [`Purpose::Directions`]) addressed by seed, iteration and direction, and every sum runs in
//! index order, so a run is the same at any thread count and on every backend.

use anyhow::{Result, ensure};

use crate::rng::{Purpose, Stream};
use crate::sim::stats::ObsStats;

/// Settings of the search.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArsConfig {
    /// `N`: directions per iteration (each plays two policies).
    pub directions: usize,
    /// `b`: directions whose returns make the step, the best by `max(r⁺, r⁻)`; at most `N`.
    pub top: usize,
    /// `α`: step size.
    pub step_size: f64,
    /// `ν`: standard deviation of the exploration noise added to θ.
    pub noise: f64,
}

/// Most directions per iteration (`2N` policies are played at once).
pub const MAX_DIRECTIONS: usize = 1 << 20;

/// Largest step size and exploration noise: parameters are read by normalised observations, so
/// a larger one is a typing slip, not a setting.
pub const MAX_SCALE: f64 = 1000.0;

impl ArsConfig {
    /// Checks the values a run can use; the message names the flag and the experiment field
    /// (`linear.FIELD`).
    pub fn check(&self) -> Result<(), String> {
        if self.directions == 0 || self.directions > MAX_DIRECTIONS {
            return Err(format!("--directions (linear.directions) must be 1 to {MAX_DIRECTIONS}, got {}", self.directions));
        }
        if self.top == 0 || self.top > self.directions {
            return Err(format!("--top-directions (linear.top) must be 1 to --directions ({}), got {}", self.directions, self.top));
        }
        if !(self.step_size > 0.0 && self.step_size <= MAX_SCALE) {
            return Err(format!("--step-size (linear.step_size) must be a positive number, at most {MAX_SCALE}, got {}", self.step_size));
        }
        if !(self.noise > 0.0 && self.noise <= MAX_SCALE) {
            return Err(format!("--noise (linear.noise) must be a positive number, at most {MAX_SCALE}, got {}", self.noise));
        }
        Ok(())
    }
}

/// The `n` directions of `iteration` in `d` dimensions, each `d` standard normal draws (Box–Muller
/// over the stream of direction `k`), direction-major.
pub fn directions(seed: u64, iteration: usize, n: usize, d: usize) -> Vec<Vec<f64>> {
    directions_from(seed, iteration, 0, n, d)
}

/// Directions `first .. first + n` of `iteration` ([`directions`] is `first = 0`): searches run
/// side by side from one seed draw disjoint ranges, search `s` of `N` directions the range from
/// `s N`, so the first search is the one a run of one search makes.
pub fn directions_from(seed: u64, iteration: usize, first: usize, n: usize, d: usize) -> Vec<Vec<f64>> {
    let word = u32::try_from(iteration).unwrap_or(u32::MAX);
    (first..first + n)
        .map(|k| {
            let mut s = Stream::new(seed, word, k as u32, Purpose::Directions);
            let mut v = Vec::with_capacity(d + 1);
            while v.len() < d {
                let (u1, u2) = (1.0 - s.unit_f64(), s.unit_f64());
                let r = (-2.0 * u1.ln()).sqrt();
                let (sin, cos) = (std::f64::consts::TAU * u2).sin_cos();
                v.push(r * cos);
                v.push(r * sin);
            }
            v.truncate(d);
            v
        })
        .collect()
}

/// The `2N` parameter vectors an iteration plays: `θ + ν δ_k` at `2k`, `θ − ν δ_k` at `2k + 1`.
pub fn perturbed(theta: &[f64], deltas: &[Vec<f64>], noise: f64) -> Vec<Vec<f64>> {
    let mut out = Vec::with_capacity(2 * deltas.len());
    for d in deltas {
        out.push(theta.iter().zip(d).map(|(t, x)| t + noise * x).collect());
        out.push(theta.iter().zip(d).map(|(t, x)| t - noise * x).collect());
    }
    out
}

/// What one update did.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Step {
    /// Directions whose two returns were finite (the others are left out of the ranking).
    pub finite: usize,
    /// Directions the step used (`min(b, finite)`).
    pub used: usize,
    /// `σ_R` of the returns used.
    pub sigma: f64,
    /// Euclidean length of the change of θ (0 when no step was taken).
    pub length: f64,
    /// The step would have made θ non-finite, so it was not taken.
    pub overflow: bool,
}

/// One ARS step of `theta` from the returns `returns` (`2N`, laid out as [`perturbed`]) of the
/// directions `deltas`: the `top` directions by `max(r⁺, r⁻)` (ties to the lower index), `σ_R`
/// over their `2b` returns (population standard deviation). A direction with a non-finite
/// return takes no part; no step is taken when no direction is left, when the returns used are
/// all equal (no direction tells better from worse), or when it would leave θ non-finite
/// ([`Step::overflow`]).
pub fn step(theta: &mut [f64], deltas: &[Vec<f64>], returns: &[f64], cfg: &ArsConfig) -> Step {
    assert_eq!(returns.len(), 2 * deltas.len(), "two returns per direction");
    let mut ranked: Vec<usize> = (0..deltas.len()).filter(|&k| returns[2 * k].is_finite() && returns[2 * k + 1].is_finite()).collect();
    let finite = ranked.len();
    let best = |k: usize| returns[2 * k].max(returns[2 * k + 1]);
    ranked.sort_by(|&a, &b| best(b).total_cmp(&best(a)).then(a.cmp(&b)));
    ranked.truncate(cfg.top);
    let used = ranked.len();
    if used == 0 {
        return Step { finite, ..Step::default() };
    }
    let kept = || ranked.iter().flat_map(|&k| [returns[2 * k], returns[2 * k + 1]]);
    let mean = kept().sum::<f64>() / (2 * used) as f64;
    let sigma = (kept().map(|r| (r - mean) * (r - mean)).sum::<f64>() / (2 * used) as f64).sqrt();
    if !(sigma > 0.0 && sigma.is_finite()) {
        return Step { finite, used, sigma, length: 0.0, overflow: false };
    }
    let scale = cfg.step_size / (used as f64 * sigma);
    let mut change = vec![0.0f64; theta.len()];
    for &k in &ranked {
        let w = returns[2 * k] - returns[2 * k + 1];
        for (c, x) in change.iter_mut().zip(&deltas[k]) {
            *c += w * x;
        }
    }
    let next: Vec<f64> = theta.iter().zip(&change).map(|(t, c)| t + scale * c).collect();
    if next.iter().any(|x| !x.is_finite()) {
        return Step { finite, used, sigma, length: 0.0, overflow: true };
    }
    let length = change.iter().map(|c| (scale * c) * (scale * c)).sum::<f64>().sqrt();
    theta.copy_from_slice(&next);
    Step { finite, used, sigma, length, overflow: false }
}

/// What one iteration did, for the report's `generations`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Iteration {
    /// The best return of the perturbed policies.
    pub best: f64,
    /// Their mean return.
    pub mean: f64,
    /// The unperturbed policy's return.
    pub central: f64,
    /// The step taken.
    pub step: Step,
    /// Seconds the iteration took.
    pub seconds: f64,
}

/// A linear policy's search between iterations, exactly (floats as f64 bits): what a checkpoint keeps
/// (a control run's checkpoint keeps it), so that a resumed run ends as the uninterrupted one.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinearState {
    /// The next iteration.
    pub iteration: usize,
    /// `W`, row-major (`nu × n_obs`).
    pub weights: Vec<u64>,
    /// Observations the statistics hold.
    pub seen: u64,
    /// Their sums, by component.
    pub sum: Vec<u64>,
    /// Their sums of squares.
    pub sumsq: Vec<u64>,
    /// Every iteration so far: the best, mean and unperturbed returns, the step's `σ_R` and
    /// length (bits), its finite and used directions, whether it overflowed, and its seconds.
    pub history: Vec<(u64, u64, u64, u64, u64, usize, usize, bool, f64)>,
    /// The searches run side by side with this one (`--searches K`: the other `K − 1`, in
    /// order), each a whole state of its own; empty for one search.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub side: Vec<LinearState>,
}

impl LinearState {
    /// The state of a search at `iteration` with weights `theta`, statistics `stats` and its
    /// iterations so far.
    pub fn of(iteration: usize, theta: &[f64], stats: &ObsStats, history: &[Iteration]) -> Self {
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect();
        LinearState {
            iteration,
            weights: bits(theta),
            seen: stats.n,
            sum: bits(stats.sums()),
            sumsq: bits(stats.sums_of_squares()),
            history: history
                .iter()
                .map(|h| {
                    let s = &h.step;
                    (h.best.to_bits(), h.mean.to_bits(), h.central.to_bits(), s.sigma.to_bits(), s.length.to_bits(), s.finite, s.used, s.overflow, h.seconds)
                })
                .collect(),
            side: Vec::new(),
        }
    }

    /// Whether the parts agree: as many sums as sums of squares (at least one), `W` a whole
    /// number of rows of them, one history row per iteration run.
    pub fn check(&self) -> Result<()> {
        for (k, s) in self.side.iter().enumerate() {
            ensure!(s.side.is_empty(), "the linear search's side-by-side search {} holds searches of its own", k + 2);
            ensure!(
                s.iteration == self.iteration && s.weights.len() == self.weights.len() && s.sum.len() == self.sum.len(),
                "the linear search's side-by-side search {} is at iteration {} with {} weights; the first is at {} with {}",
                k + 2,
                s.iteration,
                s.weights.len(),
                self.iteration,
                self.weights.len()
            );
            s.check()?;
        }
        let n = self.sum.len();
        ensure!(n > 0 && self.sumsq.len() == n, "the linear search's statistics hold {} sums and {} sums of squares", n, self.sumsq.len());
        ensure!(
            !self.weights.is_empty() && self.weights.len() % n == 0,
            "the linear search's W holds {} weights, not whole rows of {n} observations",
            self.weights.len()
        );
        ensure!(
            self.history.len() == self.iteration,
            "the linear search is before iteration {} with {} iterations of history",
            self.iteration,
            self.history.len()
        );
        Ok(())
    }

    /// `W`, the statistics and the history, as the search holds them.
    pub fn restore(&self) -> (Vec<f64>, ObsStats, Vec<Iteration>) {
        let f = |v: &[u64]| v.iter().map(|&b| f64::from_bits(b)).collect::<Vec<_>>();
        let stats = ObsStats::from_sums(self.seen, f(&self.sum), f(&self.sumsq));
        let history = self
            .history
            .iter()
            .map(|&(best, mean, central, sigma, length, finite, used, overflow, seconds)| Iteration {
                best: f64::from_bits(best),
                mean: f64::from_bits(mean),
                central: f64::from_bits(central),
                step: Step { finite, used, sigma: f64::from_bits(sigma), length: f64::from_bits(length), overflow },
                seconds,
            })
            .collect();
        (f(&self.weights), stats, history)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(n: usize, b: usize) -> ArsConfig {
        ArsConfig { directions: n, top: b, step_size: 0.05, noise: 0.05 }
    }

    #[test]
    fn directions_are_standard_normal_and_reproducible() {
        let a = directions(7, 3, 200, 51);
        assert_eq!(a.len(), 200);
        assert!(a.iter().all(|v| v.len() == 51));
        assert_eq!(a, directions(7, 3, 200, 51));
        assert_ne!(a, directions(7, 4, 200, 51));
        assert_ne!(a, directions(8, 3, 200, 51));
        // A direction's draws do not depend on how many others are drawn.
        assert_eq!(directions(7, 3, 5, 51)[4], a[4]);
        let all: Vec<f64> = a.iter().flatten().copied().collect();
        let n = all.len() as f64;
        let mean = all.iter().sum::<f64>() / n;
        let var = all.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
        assert!(mean.abs() < 0.03, "mean {mean}");
        assert!((var - 1.0).abs() < 0.05, "variance {var}");
        assert!(all.iter().all(|x| x.is_finite()));
    }

    /// ARS climbs a concave function to its maximum from far away.
    #[test]
    fn the_steps_climb_to_the_maximum_of_a_quadratic() {
        let target = [1.5, -2.0, 0.5, 3.0];
        let f = |x: &[f64]| -x.iter().zip(&target).map(|(a, b)| (a - b) * (a - b)).sum::<f64>();
        let c = ArsConfig { directions: 16, top: 8, step_size: 0.1, noise: 0.05 };
        let mut theta = vec![0.0; 4];
        let start = f(&theta);
        for it in 0..200 {
            let deltas = directions(1, it, c.directions, theta.len());
            let returns: Vec<f64> = perturbed(&theta, &deltas, c.noise).iter().map(|p| f(p)).collect();
            let s = step(&mut theta, &deltas, &returns, &c);
            assert_eq!((s.finite, s.used), (16, 8));
        }
        assert!(f(&theta) > -0.05 && start < -15.0, "{theta:?}: {}", f(&theta));
    }

    #[test]
    fn the_step_follows_the_kept_directions_and_is_scaled_by_their_spread() {
        // Two directions, the first better: with b = 1 only it moves θ, by α / σ_R (r⁺ − r⁻) δ.
        let deltas = vec![vec![1.0, 0.0], vec![0.0, 1.0]];
        let returns = [5.0, 1.0, 2.0, 2.5];
        let mut theta = vec![0.0, 0.0];
        let s = step(&mut theta, &deltas, &returns, &cfg(2, 1));
        assert_eq!((s.used, s.sigma), (1, 2.0));
        assert_eq!(theta, vec![0.05 / 2.0 * 4.0, 0.0]);
        assert_eq!(s.length, 0.1);
        // Scaling every return leaves the step unchanged.
        let mut scaled = vec![0.0, 0.0];
        step(&mut scaled, &deltas, &returns.map(|r| 1000.0 * r), &cfg(2, 1));
        assert_eq!(scaled, theta);
    }

    #[test]
    fn non_finite_and_flat_returns_take_no_step() {
        let deltas = vec![vec![1.0], vec![-1.0]];
        let mut theta = vec![0.25];
        // Direction 0 has a NaN: only direction 1 ranks.
        let s = step(&mut theta, &deltas, &[f64::NAN, 1.0, 3.0, 1.0], &cfg(2, 2));
        assert_eq!((s.finite, s.used), (1, 1));
        assert_eq!(theta, vec![0.25 + 0.05 / 1.0 * 2.0 * -1.0]);
        // Every return equal: σ_R = 0 and θ stays.
        let mut flat = vec![0.25];
        let s = step(&mut flat, &deltas, &[2.0; 4], &cfg(2, 2));
        assert_eq!((s.used, s.sigma, s.length), (2, 0.0, 0.0));
        assert_eq!(flat, vec![0.25]);
        // No finite direction at all.
        let s = step(&mut flat, &deltas, &[f64::NAN, 1.0, f64::INFINITY, 0.0], &cfg(2, 2));
        assert_eq!(s, Step { finite: 0, used: 0, sigma: 0.0, length: 0.0, overflow: false });
        // A step that would overflow θ leaves it as it was.
        let mut big = vec![1.7e308];
        let huge = ArsConfig { step_size: 1000.0, ..cfg(2, 2) };
        let s = step(&mut big, &[vec![1e305], vec![-1e305]], &[2.0, -2.0, 0.0, 0.0], &huge);
        assert!(s.overflow && s.length == 0.0 && s.sigma.is_finite(), "{s:?}");
        assert_eq!(big, vec![1.7e308]);
    }

    #[test]
    fn bad_settings_are_named() {
        assert!(cfg(4, 2).check().is_ok());
        assert!(cfg(0, 0).check().unwrap_err().contains("--directions"));
        assert!(cfg(4, 5).check().unwrap_err().contains("--top-directions"));
        assert!(cfg(4, 0).check().unwrap_err().contains("--top-directions"));
        let bad = ArsConfig { step_size: f64::NAN, ..cfg(4, 2) };
        assert!(bad.check().unwrap_err().contains("--step-size"));
        let bad = ArsConfig { noise: 0.0, ..cfg(4, 2) };
        assert!(bad.check().unwrap_err().contains("--noise"));
        let bad = ArsConfig { step_size: 1e300, ..cfg(4, 2) };
        assert!(bad.check().unwrap_err().contains("at most 1000"));
        let bad = ArsConfig { noise: f64::INFINITY, ..cfg(4, 2) };
        assert!(bad.check().unwrap_err().contains("--noise"));
    }
}
