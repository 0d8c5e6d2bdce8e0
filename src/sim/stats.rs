//! Running statistics of the observations a policy acts on, and the normaliser they give:
//! `n = (o − μ) / σ` with `μ` and `σ` the mean and sample standard deviation of every observation
//! seen so far, as augmented random search (Mania, Guy and Recht, 2018, V2) reads its inputs.
//!
//! The roll-out kernel (`grove_control_rollout` in `kernels/sim.cu`, asked for them) sums each
//! episode's observations and their squares in f64 in step order, as [`ObsStats::add`] does, and
//! the host merges episodes in index order ([`ObsStats::merge`]), so both backends give the same
//! bits ([`crate::backend::cpu::control::control_rollout_observed`] is the CPU's twin).
//!
//! A policy reads a normaliser in f32 ([`InputScale`]); a population of programs learns one
//! while it evolves ([`Learnt`]).

use crate::program::Op;
use crate::program::tree::Node;

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

    /// Writes these statistics into `item` as the roll-out kernel does (the inverse of
    /// [`Self::from_item`]; `item.len() = 1 + 2 · dim`).
    pub fn write_item(&self, item: &mut [f64]) {
        let d = self.dim();
        item[0] = self.n as f64;
        item[1..1 + d].copy_from_slice(&self.sum);
        item[1 + d..1 + 2 * d].copy_from_slice(&self.sumsq);
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

/// A normaliser as a policy applies it, in f32: observation `i` is read as `(x_i − m_i) · s_i`
/// (`m_i` = `μ_i` and `s_i` = [`Normaliser::scale`] rounded to f32), or 0 where `s_i` is 0. The
/// roll-out kernel applies it to each step's observation before the policy reads it
/// (`grove_control_rollout`'s `scale`), the CPU's policy where it reads one, and
/// [`InputScale::compose`] writes it into a tree with the same operations, so all three give the
/// same bits.
#[derive(Clone, Debug, PartialEq)]
pub struct InputScale {
    /// `m_i`.
    pub mean: Vec<f32>,
    /// `s_i`.
    pub scale: Vec<f32>,
}

impl InputScale {
    /// The f32 form of `norm`.
    pub fn of(norm: &Normaliser) -> Self {
        let scale = (0..norm.std.len()).map(|i| norm.scale(i) as f32).collect();
        Self { mean: norm.mean.iter().map(|&m| m as f32).collect(), scale }
    }

    /// Observation `i` valued `x`, as the policy reads it (0 past the normaliser's components).
    #[inline]
    pub fn read(&self, i: usize, x: f32) -> f32 {
        match self.scale.get(i) {
            Some(&s) if s != 0.0 => (x - self.mean[i]) * s,
            _ => 0.0,
        }
    }

    /// The kernel's buffer: every `m_i`, then every `s_i`.
    pub fn words(&self) -> Vec<f32> {
        self.mean.iter().chain(&self.scale).copied().collect()
    }

    /// `program` (a tree over the normalised observations) as a tree over the raw ones: each
    /// variable leaf `x_i` becomes `(x_i − m_i) · s_i`, a constant 0 where `s_i` is 0 (or `i` is
    /// past the components). At most [`Self::MAX_GROWTH`] times as long.
    pub fn compose(&self, program: &[Node]) -> Vec<Node> {
        let mut nodes = Vec::with_capacity(Self::MAX_GROWTH * program.len());
        self.compose_into(program, &mut nodes);
        nodes
    }

    /// [`Self::compose`], appending to `nodes`.
    pub fn compose_into(&self, program: &[Node], nodes: &mut Vec<Node>) {
        for n in program {
            if n.op != Op::Var {
                nodes.push(*n);
                continue;
            }
            let i = n.value as usize;
            let s = self.scale.get(i).copied().unwrap_or(0.0);
            if s == 0.0 {
                nodes.push(Node { op: Op::Const, value: 0.0, out: n.out });
                continue;
            }
            // An output node passes its last child's value to its parent: a marked leaf
            // becomes `out(0 + n_i)`, whose slot and parent both get n_i.
            if n.out != 0 {
                nodes.push(Node { out: n.out, ..Node::func(Op::Add) });
                nodes.push(Node::constant(0.0));
            }
            nodes.extend([Node::func(Op::Mul), Node::func(Op::Sub), Node::var(i as u32), Node::constant(self.mean[i]), Node::constant(s)]);
        }
    }

    /// The most nodes [`Self::compose`] writes for one.
    pub const MAX_GROWTH: usize = 7;
}

/// The normaliser a population's programs read their observations through while they evolve
/// (`grove control --normalise`): every observation the population's policies have read so far,
/// and the normaliser the last generation was played with. Generation `g` plays with the
/// normaliser of everything generations `0 … g−1` saw ([`Self::next`]), then adds what its
/// policies saw ([`Self::learn`], each individual's episodes merged in episode order, then
/// individuals in index order, on both backends), so a run's normalisers do not depend on where
/// it runs. Generation 0 reads the observations as they are (mean 0, deviation 1).
#[derive(Clone, Debug, PartialEq)]
pub struct Learnt {
    /// Everything seen.
    pub seen: ObsStats,
    /// The normaliser of the generation played last.
    pub played: Normaliser,
    /// The observations it was learnt from.
    pub played_from: u64,
}

impl Learnt {
    /// Nothing seen of `d` components.
    pub fn new(d: usize) -> Self {
        let seen = ObsStats::new(d);
        Self { played: seen.normaliser(), played_from: 0, seen }
    }

    /// The normaliser of what was seen, which the next generation plays with: kept as
    /// [`Self::played`].
    pub fn next(&mut self) -> InputScale {
        self.played = self.seen.normaliser();
        self.played_from = self.seen.n;
        InputScale::of(&self.played)
    }

    /// Adds what each individual's policy saw (in index order).
    pub fn learn(&mut self, by_individual: &[ObsStats]) {
        for s in by_individual {
            self.seen.merge(s);
        }
    }

    /// [`Self::learn`] from the roll-out kernel's rows (`[n, sums (d), sums of squares (d)]` per
    /// episode, `k` episodes per individual): the same sums in the same order, without a value
    /// per episode.
    pub fn learn_rows(&mut self, rows: &[f64], k: usize) {
        let d = self.seen.dim();
        let mut one = ObsStats::new(d);
        for individual in rows.chunks((1 + 2 * d) * k.max(1)) {
            one.n = 0;
            one.sum.fill(0.0);
            one.sumsq.fill(0.0);
            for item in individual.chunks(1 + 2 * d) {
                one.n += item[0] as u64;
                for (a, b) in one.sum.iter_mut().zip(&item[1..1 + d]) {
                    *a += b;
                }
                for (a, b) in one.sumsq.iter_mut().zip(&item[1 + d..]) {
                    *a += b;
                }
            }
            self.seen.merge(&one);
        }
    }

    /// The policy a program plays at the end: `program` read through [`Self::played`].
    pub fn compose(&self, program: &[Node]) -> Vec<Node> {
        InputScale::of(&self.played).compose(program)
    }

    /// Saved exactly (every f64 as its bits).
    pub fn state(&self) -> LearntState {
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect();
        LearntState {
            seen: self.seen.n,
            sum: bits(self.seen.sums()),
            sumsq: bits(self.seen.sums_of_squares()),
            mean: bits(&self.played.mean),
            std: bits(&self.played.std),
            played_from: self.played_from,
        }
    }

    /// The normaliser `state` saved, for `d` observation components; an error line when the
    /// state does not hold `d` of each part.
    pub fn restore(state: &LearntState, d: usize) -> Result<Self, String> {
        let parts = [("sums", state.sum.len()), ("sums of squares", state.sumsq.len()), ("means", state.mean.len()), ("deviations", state.std.len())];
        if let Some((what, n)) = parts.iter().find(|p| p.1 != d) {
            return Err(format!("the saved normaliser holds {n} {what} for {d} observations"));
        }
        let f = |v: &[u64]| v.iter().map(|&b| f64::from_bits(b)).collect::<Vec<_>>();
        Ok(Self {
            seen: ObsStats::from_sums(state.seen, f(&state.sum), f(&state.sumsq)),
            played: Normaliser { mean: f(&state.mean), std: f(&state.std) },
            played_from: state.played_from,
        })
    }
}

/// [`Learnt`] as a checkpoint keeps it: every f64 as its bits.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LearntState {
    /// Observations seen.
    pub seen: u64,
    /// Their sums, by component.
    pub sum: Vec<u64>,
    /// Their sums of squares.
    pub sumsq: Vec<u64>,
    /// The last generation's normaliser: means.
    pub mean: Vec<u64>,
    /// And deviations.
    pub std: Vec<u64>,
    /// The observations they were learnt from.
    pub played_from: u64,
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
        // A kernel row written and read back.
        let mut item = vec![0.0; 5];
        all.write_item(&mut item);
        assert_eq!(item[0], 3.0);
        assert_eq!(ObsStats::from_item(&item), all);
    }

    #[test]
    fn a_learnt_normaliser_plays_each_generation_with_what_the_earlier_ones_saw() {
        let mut l = Learnt::new(2);
        // Generation 0 reads the observations as they are.
        let first = l.next();
        assert_eq!((first.mean.clone(), first.scale.clone()), (vec![0.0; 2], vec![1.0; 2]));
        let mut a = ObsStats::new(2);
        a.add(&[1.0, 4.0]);
        a.add(&[3.0, 4.0]);
        let mut b = ObsStats::new(2);
        b.add(&[5.0, 4.0]);
        l.learn(&[a.clone(), b.clone()]);
        // What was learnt reaches the next generation, not the one played.
        assert_eq!(l.played, Normaliser { mean: vec![0.0; 2], std: vec![1.0; 2] });
        let second = l.next();
        assert_eq!(l.played.mean, vec![3.0, 4.0]);
        assert_eq!(l.played_from, 3);
        assert_eq!(l.played.std, vec![2.0, 0.0]);
        assert_eq!(second.mean, vec![3.0, 4.0]);
        assert_eq!(second.scale, vec![(1.0 / (2.0 + 1e-8)) as f32, 0.0]);
        // The composed policy reads through the normaliser played last: x0 → (x0 − 3)·s0, x1 → 0.
        let program = [Node { out: 1, ..Node::func(Op::Add) }, Node::var(0), Node::var(1)];
        let c = l.compose(&program);
        assert_eq!(c[0], program[0]);
        assert_eq!(&c[1..6], &[Node::func(Op::Mul), Node::func(Op::Sub), Node::var(0), Node::constant(3.0), Node::constant(second.scale[0])]);
        assert_eq!(c[6], Node::constant(0.0));
        assert_eq!(c.len(), 7);
        // From the kernel's rows: the same bits as from the statistics.
        let rows: Vec<f64> = [&a, &b, &a, &ObsStats::new(2)]
            .iter()
            .flat_map(|s| std::iter::once(s.n as f64).chain(s.sums().iter().copied()).chain(s.sums_of_squares().iter().copied()).collect::<Vec<_>>())
            .collect();
        let (mut by_rows, mut by_stats) = (l.clone(), l.clone());
        by_rows.learn_rows(&rows, 2);
        let (mut ab, mut a0) = (a.clone(), a.clone());
        ab.merge(&b);
        a0.merge(&ObsStats::new(2));
        by_stats.learn(&[ab, a0]);
        assert_eq!(by_rows, by_stats);
        // Saved and restored exactly; a state of other sizes is one line.
        let back = Learnt::restore(&l.state(), 2).unwrap();
        assert_eq!(back, l);
        let err = Learnt::restore(&l.state(), 3).unwrap_err();
        assert_eq!(err, "the saved normaliser holds 2 sums for 3 observations");
        let mut short = l.state();
        short.std.pop();
        assert_eq!(Learnt::restore(&short, 2).unwrap_err(), "the saved normaliser holds 1 deviations for 2 observations");
    }

    #[test]
    fn a_marked_variable_keeps_its_output_slot_when_composed() {
        let scale = InputScale { mean: vec![1.0], scale: vec![0.5] };
        // out(x0) alone: the slot moves to an add node over 0 and the normalised read.
        let c = scale.compose(&[Node { out: 1, ..Node::var(0) }]);
        assert_eq!(c[0], Node { out: 1, ..Node::func(Op::Add) });
        assert_eq!(c[1], Node::constant(0.0));
        assert_eq!(c.len(), 7);
        assert_eq!(scale.read(0, 3.0), 1.0);
        assert_eq!(scale.read(5, 3.0), 0.0, "past the components: 0");
        assert_eq!(scale.words(), vec![1.0, 0.5]);
    }
}
