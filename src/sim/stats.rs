//! Running statistics of the observations a policy acts on, and the normaliser they give:
//! `n = (o − μ) / σ` with `μ` and `σ` the mean and sample standard deviation of every observation
//! seen so far, as augmented random search (Mania, Guy and Recht, 2018, V2) reads its inputs.
//!
//! The roll-out kernel (`grove_control_rollout` in `kernels/sim.cu`, asked for them) sums each
//! episode's observations and their squares in f64 in step order, as [`ObsStats::add`] does, and
//! the host merges episodes in index order ([`ObsStats::merge`]), so both backends give the same
//! bits ([`crate::backend::cpu::control::control_rollout_observed`] is the CPU's twin).

/// A standard deviation below this reads its observation as constant: the policy ignores it
/// (as ARS's filter does).
pub const MIN_STD: f64 = 1e-7;

/// Sums over the observations seen, for their running mean and standard deviation.
#[derive(Clone, Debug, PartialEq)]
pub struct ObsStats {
    /// Observations added.
    pub n: u64,
    sum: Vec<f64>,
    sumsq: Vec<f64>,
}

impl ObsStats {
    /// No observation of `d` components yet.
    pub fn new(d: usize) -> Self {
        Self { n: 0, sum: vec![0.0; d], sumsq: vec![0.0; d] }
    }

    /// Statistics of `n` observations with these sums and sums of squares (one of each per
    /// component).
    pub fn from_sums(n: u64, sum: Vec<f64>, sumsq: Vec<f64>) -> Self {
        assert_eq!(sum.len(), sumsq.len(), "a sum of squares per sum");
        Self { n, sum, sumsq }
    }

    /// The statistics of one episode as the roll-out kernel writes them: `[n, sums (d), sums of
    /// squares (d)]`, f64 (`item.len() = 1 + 2d`).
    pub fn from_item(item: &[f64]) -> Self {
        let d = (item.len() - 1) / 2;
        Self { n: item[0] as u64, sum: item[1..1 + d].to_vec(), sumsq: item[1 + d..1 + 2 * d].to_vec() }
    }

    /// Observation components.
    pub fn dim(&self) -> usize {
        self.sum.len()
    }

    /// The sum of each component.
    pub fn sums(&self) -> &[f64] {
        &self.sum
    }

    /// The sum of each component's squares.
    pub fn sums_of_squares(&self) -> &[f64] {
        &self.sumsq
    }

    /// Adds one observation.
    pub fn add(&mut self, obs: &[f32]) {
        debug_assert_eq!(obs.len(), self.sum.len());
        self.n += 1;
        for ((s, q), &x) in self.sum.iter_mut().zip(&mut self.sumsq).zip(obs) {
            let x = x as f64;
            *s += x;
            *q += x * x;
        }
    }

    /// Adds everything `other` has seen.
    pub fn merge(&mut self, other: &ObsStats) {
        self.n += other.n;
        for (a, b) in self.sum.iter_mut().zip(&other.sum) {
            *a += b;
        }
        for (a, b) in self.sumsq.iter_mut().zip(&other.sumsq) {
            *a += b;
        }
    }

    /// The normaliser of what was seen: mean 0 and deviation 1 before two observations.
    pub fn normaliser(&self) -> Normaliser {
        if self.n < 2 {
            return Normaliser { mean: vec![0.0; self.sum.len()], std: vec![1.0; self.sum.len()] };
        }
        let n = self.n as f64;
        let mean: Vec<f64> = self.sum.iter().map(|s| s / n).collect();
        // Sample variance (as ARS's running statistics), never below 0 from rounding.
        let std = self.sumsq.iter().zip(&mean).map(|(q, m)| ((q - n * m * m) / (n - 1.0)).max(0.0).sqrt()).collect();
        Normaliser { mean, std }
    }
}

/// The mean and standard deviation of each observation component, as the policy reads them.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Normaliser {
    /// `μ`.
    pub mean: Vec<f64>,
    /// `σ`.
    pub std: Vec<f64>,
}

impl Normaliser {
    /// `1 / σ_i`, or 0 where `σ_i` is below [`MIN_STD`] (and where it is not finite).
    pub fn scale(&self, i: usize) -> f64 {
        let s = self.std[i];
        if s.is_finite() && s >= MIN_STD { 1.0 / (s + 1e-8) } else { 0.0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_normaliser_is_the_sample_mean_and_deviation() {
        let mut s = ObsStats::new(3);
        assert_eq!(s.normaliser(), Normaliser { mean: vec![0.0; 3], std: vec![1.0; 3] });
        for x in [[1.0f32, 5.0, -2.0], [3.0, 5.0, 2.0], [5.0, 5.0, 0.0]] {
            s.add(&x);
        }
        let n = s.normaliser();
        assert_eq!(n.mean, vec![3.0, 5.0, 0.0]);
        assert_eq!(n.std, vec![2.0, 0.0, 2.0]);
        // A constant component is ignored by the policy, not divided by zero.
        assert_eq!(n.scale(1), 0.0);
        assert_eq!(n.scale(0), 1.0 / (2.0 + 1e-8));
        // Merging halves gives the whole.
        let (mut a, mut b) = (ObsStats::new(2), ObsStats::new(2));
        a.add(&[1.0, 2.0]);
        b.add(&[3.0, -4.0]);
        b.add(&[0.5, 0.25]);
        a.merge(&b);
        let mut all = ObsStats::new(2);
        for x in [[1.0f32, 2.0], [3.0, -4.0], [0.5, 0.25]] {
            all.add(&x);
        }
        assert_eq!(a, all);
    }

}
