//! Control policies: a multi-output program read as a policy (one output slot per actuator,
//! actions = tanh(outputs), as EvoGP does) and the episodes it plays in a simulated
//! environment. This is the CPU reference of the control kernel (`grove_control_rollout` in
//! `kernels/sim.cu`, host side `backend/cuda/control.rs`): the same f32 simulator
//! (`sim::State<f32>`), the same interpreter (the linear form of [`super::interp`], run one
//! observation at a time with grove's bit-exact math), the same reset draws.
//!
//! Episode `k` of every individual starts from the reset `Stream::new(seed, generation, k,
//! Reset)`: all individuals of a call face the same starts, so their returns compare fairly.
//! A program whose output is NaN or infinite at any step is invalid (its episode stops there).
//!
//! [`SavedPolicy`] is the policy a `grove control` report saves, read back by `grove rollout
//! --policy` and `grove render --policy`.

use anyhow::{Context, Result, bail};
use rayon::prelude::*;

use super::interp::{Program, run};
use crate::program::fastmath;
use crate::program::tree::{Node, Population, TreeRef};
use crate::sim::stats::{InputScale, ObsStats};
use crate::sim::{Model, State};

/// Names of the observation components, in order: `q_JOINT` (qpos), `v_JOINT` (qvel),
/// `z_BODY` (height of a body's frame origin). Grammars may use them as variables.
pub fn observation_names(m: &Model) -> Vec<String> {
    use crate::sim::model::Obs;
    let mut names = Vec::with_capacity(m.obs_size);
    for o in &m.observation {
        match *o {
            Obs::Qpos(a, b) => names.extend(m.joints[a..b].iter().map(|j| format!("q_{}", j.name))),
            Obs::Qvel(a, b, _) => names.extend(m.joints[a..b].iter().map(|j| format!("v_{}", j.name))),
            Obs::Height(b) => names.push(format!("z_{}", m.bodies[b].name)),
        }
    }
    names
}

/// Names of the actuators (the joints they drive), in action order.
pub fn actuator_names(m: &Model) -> Vec<String> {
    m.actuators.iter().map(|a| m.joints[a.dof].name.clone()).collect()
}

/// A program compiled for one observation at a time: the linear form ([`super::interp`]), run
/// by [`run`], the interpreter of every CPU evaluation.
#[derive(Clone, Debug)]
pub struct Policy {
    prog: Program,
    stack: Vec<f32>,
    outs: Vec<f32>,
    /// Reads each observation through this normaliser ([`Policy::reading`]); `None`: as it is.
    scale: Option<InputScale>,
}

impl Policy {
    /// Compiles `tree` (with `n_actions` output slots) over `n_obs` observation components;
    /// `None` when the tree is empty or reads a variable past the observation.
    pub fn new(tree: TreeRef<'_>, n_actions: usize, n_obs: usize) -> Option<Self> {
        if tree.is_empty() || n_actions == 0 {
            return None;
        }
        let prog = Program::new(tree, n_actions, n_obs, 0).ok()?;
        Some(Self { stack: Vec::with_capacity(prog.depth), outs: vec![0.0; n_actions], prog, scale: None })
    }

    /// This policy reading its observations through `scale` (as the roll-out kernel does with
    /// its `scale` buffer), or as they are.
    pub fn reading(self, scale: Option<InputScale>) -> Self {
        Self { scale, ..self }
    }

    /// The program's outputs at `obs` (output slots summed in reverse prefix order, as the
    /// kernel walks the tree). `None` when one is NaN or infinite.
    pub fn outputs(&mut self, obs: &[f32]) -> Option<&[f32]> {
        self.outs.fill(0.0);
        match &self.scale {
            None => run(&self.prog.code, |v| obs[v], &mut self.outs, &mut self.stack),
            Some(s) => run(&self.prog.code, |v| s.read(v, obs[v]), &mut self.outs, &mut self.stack),
        };
        self.outs.iter().all(|x| x.is_finite()).then_some(&self.outs[..])
    }

    /// actions = tanh(outputs) (grove's tanh, bit-exact on both backends); false when an output
    /// is not finite.
    pub fn act(&mut self, obs: &[f32], actions: &mut [f32]) -> bool {
        match self.outputs(obs) {
            Some(o) => {
                for (a, &x) in actions.iter_mut().zip(o) {
                    *a = fastmath::tanh(x);
                }
                true
            }
            None => false,
        }
    }
}

impl Policy {
    /// The policy of the tree `nodes` for `m` (one output slot per actuator), as a roll-out
    /// replays it; an error says why the tree does not fit the model.
    pub fn for_model(nodes: &[Node], m: &Model) -> Result<Self> {
        Self::for_sizes(nodes, m.nu(), m.obs_size)
            .with_context(|| format!("the policy does not fit {} ({} observations, {} actuators)", m.name, m.obs_size, m.nu()))
    }

    /// The policy of the tree `nodes` with `n_actions` output slots over `n_obs` observations.
    pub fn for_sizes(nodes: &[Node], n_actions: usize, n_obs: usize) -> Result<Self> {
        let mut pop = Population::new(1, nodes.len().max(1), n_actions);
        pop.set_tree(0, nodes).map_err(|e| anyhow::anyhow!("the policy's tree is malformed: {e}"))?;
        Self::new(pop.tree(0), n_actions, n_obs).with_context(|| format!("the policy does not fit its {n_obs} observations and {n_actions} actuators"))
    }
}

impl crate::sim::rollout::Actor for Policy {
    fn act(&mut self, obs: &[f32], actions: &mut [f32]) -> bool {
        Policy::act(self, obs, actions)
    }

    fn boxed_clone(&self) -> Box<dyn crate::sim::rollout::Actor> {
        Box::new(self.clone())
    }
}

/// One episode's outcome.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Episode {
    /// Sum of the rewards (each f32, summed in f64).
    pub ret: f64,
    /// Control steps taken.
    pub steps: u32,
    /// The policy's outputs stayed finite (false: the individual is invalid).
    pub valid: bool,
}

impl Episode {
    /// No program, or one the kernel cannot run: invalid.
    pub const INVALID: Episode = Episode { ret: 0.0, steps: 0, valid: false };
}

/// Where episodes start and how long they run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ControlRun {
    /// Episodes per individual (`K`).
    pub episodes: usize,
    /// Control steps per episode at most (`T`).
    pub steps: usize,
    /// Philox key of the reset draws.
    pub seed: u64,
    /// Philox counter word 0 of the reset draws (word 1 is the episode index).
    pub generation: u32,
    /// Reset noise (false: every episode starts at the rest pose).
    pub noise: bool,
    /// Play all `steps` whatever the robot's health (for benchmarks: episodes of equal length).
    #[serde(default)]
    pub ignore_termination: bool,
}

impl ControlRun {
    /// Generation word of training generation 0 when every generation plays fresh starts:
    /// words 0, 1 and 2 are the fixed training starts, the test episodes and the validation
    /// episodes (`task::control::TEST_GENERATION`, `VALIDATION_GENERATION`).
    pub const FRESH_WORD: u32 = 3;

    /// This run with the starts of training generation `g` when every generation plays fresh
    /// ones: generation word [`Self::FRESH_WORD`]` + g`, shared by the whole population, so
    /// individuals of a generation meet the same starts and no start is met twice.
    pub fn at_generation(self, g: usize) -> Self {
        let word = u32::try_from(g).ok().and_then(|g| g.checked_add(Self::FRESH_WORD)).unwrap_or(u32::MAX);
        Self { generation: word, ..self }
    }
}

/// Plays episode `k` of `run` with `policy` (`State<f32>`, as the GPU).
pub fn play(m: &Model, policy: &mut Policy, run: &ControlRun, k: u32) -> Episode {
    play_observed(m, policy, run, k, |_| ())
}

/// [`play`], showing `seen` every observation the policy acts on, in step order.
pub fn play_observed(m: &Model, policy: &mut Policy, run: &ControlRun, k: u32, mut seen: impl FnMut(&[f32])) -> Episode {
    let mut s: State<f32> = if run.noise { State::reset(m, run.seed, run.generation, k) } else { State::rest(m) };
    let mut obs = Vec::with_capacity(m.obs_size);
    let mut a = vec![0.0f32; m.nu()];
    let mut ret = 0.0f64;
    for t in 0..run.steps {
        s.observe(m, &mut obs);
        seen(&obs);
        if !policy.act(&obs, &mut a) {
            return Episode { ret, steps: t as u32, valid: false };
        }
        let r = s.step(m, &a);
        ret += r.reward as f64;
        if r.done && !run.ignore_termination {
            return Episode { ret, steps: t as u32 + 1, valid: true };
        }
    }
    Episode { ret, steps: run.steps as u32, valid: true }
}

/// Every individual of `pop` for `run.episodes` episodes: `[P × K]`, individual-major. The
/// CPU twin of `grove_control_rollout`; rayon over (individual, episode), results in index
/// order whatever the thread count.
pub fn control_rollout(pop: &Population, m: &Model, run: &ControlRun) -> Vec<Episode> {
    (0..pop.size() * run.episodes).into_par_iter().map(|g| play_item(pop, m, run, g, None, |_| ())).collect()
}

/// Item `g` of a roll-out of `pop`: episode `g % K` of individual `g / K`, showing `seen` every
/// observation its policy reads (before `scale`, through which the policy reads them);
/// invalid, seeing nothing, when the tree cannot run.
fn play_item(pop: &Population, m: &Model, run: &ControlRun, g: usize, scale: Option<&InputScale>, seen: impl FnMut(&[f32])) -> Episode {
    let k = run.episodes;
    match Policy::new(pop.tree(g / k), pop.n_outputs, m.obs_size) {
        Some(p) if pop.n_outputs == m.nu() => play_observed(m, &mut p.reading(scale.cloned()), run, (g % k) as u32, seen),
        _ => Episode::INVALID,
    }
}

/// [`control_rollout`] with the statistics of the observations each episode's policy read
/// ([`ObsStats`], per episode, individual-major): the CPU twin of `grove_control_rollout` with
/// its `observed` buffer, the policies reading their observations through `scale` when given
/// (its `scale` buffer; the statistics are of the observations before it). An episode that does
/// not run (no program, or one that cannot run) saw nothing.
pub fn control_rollout_observed(pop: &Population, m: &Model, run: &ControlRun, scale: Option<&InputScale>) -> (Vec<Episode>, Vec<ObsStats>) {
    (0..pop.size() * run.episodes)
        .into_par_iter()
        .map(|g| {
            let mut seen = ObsStats::new(m.obs_size);
            (play_item(pop, m, run, g, scale, |o| seen.add(o)), seen)
        })
        .unzip()
}

/// Merges the statistics of each individual's `k` episodes (`[P × K]` in), in episode order.
pub fn observed_by_individual(items: &[ObsStats], k: usize) -> Vec<ObsStats> {
    items
        .chunks(k.max(1))
        .map(|c| {
            let mut all = ObsStats::new(c.first().map_or(0, ObsStats::dim));
            for s in c {
                all.merge(s);
            }
            all
        })
        .collect()
}

/// Mean return per individual over its `k` episodes (`[P × K]` in, summed in episode order in
/// f64, divided by `k`); NaN for an individual with an invalid episode. The CPU twin of
/// `grove_control_reduce`.
pub fn mean_returns(episodes: &[Episode], k: usize) -> Vec<f64> {
    episodes
        .chunks(k.max(1))
        .map(|e| if e.iter().all(|x| x.valid) { e.iter().fold(0.0, |s, x| s + x.ret) / k as f64 } else { f64::NAN })
        .collect()
}

/// The saved policy in a report (`policy`): what `grove rollout --policy` replays.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedPolicy {
    /// Environment (shipped name or path) and profile it was evolved in.
    pub env: String,
    /// Profile name.
    pub profile: String,
    /// Observation names, in the order of the program's variable indices.
    pub observations: Vec<String>,
    /// Actuator names, in the order of the output slots.
    pub actuators: Vec<String>,
    /// The tree in prefix order: `[operator name, value, output slot + 1 or 0]` per node.
    pub nodes: Vec<(String, f32, u8)>,
    /// The definitions of the user operators the tree uses, callees first; registered again
    /// when the policy is read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub operators: Vec<String>,
}

impl SavedPolicy {
    /// Reads the `policy` of a `grove control --report` file.
    pub fn read(path: &std::path::Path) -> Result<Self> {
        let text = crate::input::read_text(path, "the report", crate::input::REPORT_BYTES)?;
        let v: serde_json::Value = serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
        Self::from_report(&v, &path.display().to_string())
    }

    /// The `policy` of a report already read (`origin` names it in errors), checked playable.
    pub fn from_report(report: &serde_json::Value, origin: &str) -> Result<Self> {
        let p = report.get("policy").with_context(|| format!("{origin} has no `policy`: write one with grove control --report"))?;
        let policy: SavedPolicy = serde_json::from_value(p.clone())
            .map_err(|e| anyhow::anyhow!("{origin}: the `policy` entry is malformed: {}", crate::program::clip(&e.to_string(), 200)))?;
        policy.nodes().with_context(|| format!("{origin}: the policy cannot be played"))?;
        Ok(policy)
    }

    /// The tree, decoded and checked ([`crate::program::tree::decode`]: it reads the
    /// observations and writes one output slot per actuator).
    pub fn nodes(&self) -> Result<Vec<Node>> {
        crate::program::ops::user::load_saved(&self.operators, self.nodes.iter().map(|n| n.0.as_str()), "the policy")
            .map_err(|e| anyhow::anyhow!(e))?;
        crate::program::tree::decode(&self.nodes, self.observations.len(), self.actuators.len())
            .map_err(|e| anyhow::anyhow!("the policy's tree: {e}"))
    }

    /// The policy compiled for one observation at a time (`observations.len()` components,
    /// `actuators.len()` actions), without loading the environment.
    pub fn compile(&self) -> Result<Policy> {
        Policy::for_sizes(&self.nodes()?, self.actuators.len(), self.observations.len())
    }

    /// The tree, checked against `m` (same observation and action sizes).
    pub fn tree(&self, m: &Model) -> Result<Vec<Node>> {
        let names = observation_names(m);
        if names != self.observations || self.actuators.len() != m.nu() {
            bail!(
                "the policy was evolved for {} ({} observations, {} actuators); {} ({}) has {} and {}",
                self.env,
                self.observations.len(),
                self.actuators.len(),
                m.name,
                m.profile,
                names.len(),
                m.nu()
            );
        }
        self.nodes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::Op;

    fn out(mut n: Node, k: u8) -> Node {
        n.out = k + 1;
        n
    }

    #[test]
    fn outputs_follow_the_output_nodes() {
        // out0(x1 * 2) + out1(-1): slot 0 = 2·x1, slot 1 = -1 and the root adds both.
        let nodes = [
            Node::func(Op::Add),
            out(Node::func(Op::Mul), 0),
            Node::var(1),
            Node::constant(2.0),
            out(Node::constant(-1.0), 1),
        ];
        let mut pop = Population::new(1, 8, 2);
        pop.set_tree(0, &nodes).unwrap();
        let mut p = Policy::new(pop.tree(0), 2, 3).unwrap();
        assert_eq!(p.outputs(&[5.0, 0.25, 7.0]).unwrap(), &[0.5, -1.0]);
        let mut a = [0.0; 2];
        assert!(p.act(&[5.0, 0.25, 7.0], &mut a));
        assert_eq!(a, [fastmath::tanh(0.5), fastmath::tanh(-1.0)]);
        // Reading observation 3 of 3 does not compile.
        let mut bad = Population::new(1, 4, 2);
        bad.set_tree(0, &[out(Node::var(3), 0)]).unwrap();
        assert!(Policy::new(bad.tree(0), 2, 3).is_none());
    }

    #[test]
    fn an_observed_rollout_sums_what_each_policy_read() {
        let m = Model::load("hopper", None).unwrap();
        // Row 0 plays; row 1 has no program; row 2's output is infinite at its first step.
        let mut pop = Population::new(3, 8, m.nu());
        let marked: Vec<Node> = (0..m.nu()).map(|j| out(Node::var(j as u32), j as u8)).collect();
        // add(out0(x0), add(out1(x1), out2(x2))): hopper's three actuators.
        assert_eq!(m.nu(), 3);
        let tree = [Node::func(Op::Add), marked[0], Node::func(Op::Add), marked[1], marked[2]];
        pop.set_tree(0, &tree).unwrap();
        pop.set_tree(2, &[out(Node::func(Op::Mul), 0), Node::constant(1e30), Node::constant(1e30)]).unwrap();
        let run = ControlRun { episodes: 2, steps: 40, seed: 5, generation: 1, noise: true, ignore_termination: false };
        let (eps, seen) = control_rollout_observed(&pop, &m, &run, None);
        assert_eq!(eps, control_rollout(&pop, &m, &run));
        for k in 0..2 {
            let mut want = ObsStats::new(m.obs_size);
            let mut p = Policy::for_model(&tree, &m).unwrap();
            let e = play_observed(&m, &mut p, &run, k as u32, |o| want.add(o));
            assert_eq!((eps[k], &seen[k]), (e, &want));
            assert_eq!(want.n, e.steps as u64);
            assert!(want.sums_of_squares().iter().all(|&q| q > 0.0));
        }
        // No program: nothing seen. Invalid at once: the one observation the policy read.
        assert_eq!(seen[2], ObsStats::new(m.obs_size));
        assert_eq!((seen[4].n, eps[4].steps, eps[4].valid), (1, 0, false));
        // By individual: the episodes merged in order.
        let by = observed_by_individual(&seen, 2);
        let mut first = seen[0].clone();
        first.merge(&seen[1]);
        let mut third = seen[4].clone();
        third.merge(&seen[5]);
        assert_eq!(by, vec![first, ObsStats::new(m.obs_size), third]);
    }

    #[test]
    fn a_non_finite_output_ends_the_episode_as_invalid() {
        let m = Model::load("swimmer", None).unwrap();
        // Individual 0: out0(1e30 · q_rot) stays finite; individual 1: out1(1e30 · 1e30) is +inf.
        let mut pop = Population::new(2, 8, 2);
        pop.set_tree(0, &[out(Node::func(Op::Mul), 0), Node::constant(1e30), Node::var(0)]).unwrap();
        pop.set_tree(1, &[out(Node::func(Op::Mul), 1), Node::constant(1e30), Node::constant(1e30)]).unwrap();
        let run = ControlRun { episodes: 2, steps: 20, seed: 3, generation: 0, noise: true, ignore_termination: false };
        let eps = control_rollout(&pop, &m, &run);
        assert_eq!(eps.len(), 4);
        assert!(eps[0].valid && eps[1].valid && eps[0].steps == 20, "{eps:?}");
        assert!(!eps[2].valid && eps[2].steps == 0, "{eps:?}");
        let means = mean_returns(&eps, 2);
        assert_eq!(means[0], (eps[0].ret + eps[1].ret) / 2.0);
        assert!(means[1].is_nan());
    }

    /// A policy reading through a normaliser plays as its tree with the normaliser written in
    /// (`InputScale::compose`), bit for bit: random programs of every operator over Hopper's
    /// observations, one component of zero deviation, whole episodes.
    #[test]
    fn a_normalised_policy_plays_as_its_composed_tree() {
        use crate::sim::stats::{InputScale, Normaliser};
        let m = Model::load("hopper", None).unwrap();
        let n = m.obs_size;
        let norm = Normaliser {
            mean: (0..n).map(|i| 0.3 * i as f64 - 1.0).collect(),
            std: (0..n).map(|i| if i == 2 { 1e-9 } else { 0.2 + 0.5 * i as f64 }).collect(),
        };
        let scale = InputScale::of(&norm);
        assert_eq!(scale.read(2, 7.0), 0.0, "a constant component is read as 0");
        let spec = crate::program::TreeSpec {
            constants: vec![-1.0, 0.5, 2.0],
            n_outputs: m.nu(),
            p_out: 0.3,
            ..crate::program::TreeSpec::new(vec![Op::Add, Op::Sub, Op::Mul, Op::Div, Op::Sin, Op::Tanh], n as u32, 40)
        };
        let pop = crate::program::init_population(&spec, 24, 7).unwrap();
        let mut composed = Population::new(pop.size(), InputScale::MAX_GROWTH * pop.max_len, pop.n_outputs);
        for i in 0..pop.size() {
            let c = scale.compose(&pop.tree(i).nodes());
            assert!(c.len() <= InputScale::MAX_GROWTH * pop.len[i] as usize);
            composed.set_tree(i, &c).unwrap();
        }
        let run = ControlRun { episodes: 2, steps: 200, seed: 3, generation: 0, noise: true, ignore_termination: false };
        let (read, seen) = control_rollout_observed(&pop, &m, &run, Some(&scale));
        let (written, seen_written) = control_rollout_observed(&composed, &m, &run, None);
        assert_eq!(read, written);
        assert_eq!(seen, seen_written, "the statistics are of the raw observations");
        assert!(read.iter().any(|e| e.valid && e.steps > 10), "some policies play: {read:?}");
        // Through the identity normaliser a policy plays as itself.
        let identity = InputScale::of(&Normaliser { mean: vec![0.0; n], std: vec![1.0; n] });
        assert_eq!(control_rollout_observed(&pop, &m, &run, Some(&identity)).0, control_rollout(&pop, &m, &run));
    }
}
