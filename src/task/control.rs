//! Control (`grove control`): evolve a policy for a simulated robot. A policy is a program with
//! one output slot per actuator (EvoGP's output nodes, or `out(K, …)` in a grammar); the action
//! is tanh of each output; fitness is minus the mean return over `episodes` roll-outs from
//! different reset noise (the same starts for every individual; `backend::cpu::control`). The best
//! policy is then played on `test_episodes` fresh starts and reported with its program, so
//! `grove rollout --policy REPORT` can replay it. A control run is kept like any other
//! (`task::run`): experiment files, checkpoints and resume, the hall of fame, plots.

use anyhow::{Context, Result, bail};

use super::search::{ClassTreeSettings, EvolveResult, add_island_stats, check_count, check_ge, check_search, describe_devices, fame_rows, islands_summary};
use crate::backend::Backend;
use crate::backend::cpu::control::{ControlRun, Episode, Policy, actuator_names, observation_names, play};
/// The policy a report saves: defined in [`crate::backend::cpu::control`], below the report layer,
/// which reads it too (`grove render --policy`).
pub use crate::backend::cpu::control::SavedPolicy;
use crate::program::tree::{Node, Population};
use crate::sim::Model;
use crate::sim::stats::Learnt;
use std::sync::Mutex;

/// Reset-noise generation word of the test episodes (training uses 0).
pub const TEST_GENERATION: u32 = 1;
/// Reset-noise generation word of the validation episodes that choose the reported policy.
pub const VALIDATION_GENERATION: u32 = 2;
/// Policies the validation episodes choose among: the run's best and the last population's
/// best distinct programs.
pub const VALIDATION_CANDIDATES: usize = 16;

/// Most episodes of each kind (`--episodes`, `--test-episodes`, `--validation-episodes`).
pub const MAX_EPISODES: usize = 10_000;
/// Most iterations of a residual policy's linear search (`--linear-iterations`).
pub const MAX_LINEAR_ITERATIONS: usize = 1_000_000;
/// Most control steps per episode (`--episode-steps`; the shipped environments play 1000).
pub const MAX_EPISODE_STEPS: usize = 1_000_000;

/// Everything a `grove control` run needs; stored in the report so the run can be repeated.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ControlSettings {
    /// A shipped environment (`swimmer`, `hopper`, `walker2d`, `half_cheetah`) or a `.ron` path.
    pub env: String,
    /// Profile (`brax`, `gymnasium`); `None`: the environment's default.
    pub profile: Option<String>,
    /// Grammar for grammatical evolution (`None`: tree GP from `functions`).
    pub grammar: Option<String>,
    /// Function set for tree GP.
    pub functions: Option<String>,
    /// Operators of the user's own (`--define`), e.g. `softsign(x) = x / (1 + abs(x))`, which
    /// the function set and the grammar may name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub operators: Vec<String>,
    /// Population, generations, seed, selection, program length.
    pub engine: crate::evolve::EngineConfig,
    /// GE: mapping limits.
    pub map: crate::genome::MapConfig,
    /// GE: initialisation.
    pub init: crate::genome::InitConfig,
    /// GE: crossover and mutation.
    pub vary: crate::genome::vary::GeVaryConfig,
    /// GE: longest genome.
    pub genome_capacity: usize,
    /// Roll-outs per individual per generation (fitness is the mean return).
    pub episodes: usize,
    /// Control steps per episode (`None`: the environment's, 1000 for the shipped ones).
    pub episode_steps: Option<usize>,
    /// Fresh episodes the best policy is scored on at the end.
    pub test_episodes: usize,
    /// Added to the fitness (minus the return) per node.
    pub parsimony: f64,
    /// Training only: the healthy (alive) reward per step in place of the environment's
    /// (`None`: the env's). 0 removes the bonus for standing still, as Mania et al.'s ARS does
    /// for Hopper and Walker2d; the train and test returns reported use the env's own reward.
    #[serde(default)]
    pub healthy_reward: Option<f64>,
    /// Every generation plays fresh starts (reset noise of generation word 3 + g, the same for
    /// the whole population); false: every generation plays the same `episodes` starts, which
    /// policies can come to fit.
    #[serde(default)]
    pub fresh_starts: bool,
    /// Episodes (reset noise of [`VALIDATION_GENERATION`], the env's own reward) on which the
    /// reported policy is chosen among the run's best and the last population's best distinct
    /// programs ([`VALIDATION_CANDIDATES`] in all); 0: the run's best, by training fitness.
    #[serde(default)]
    pub validation_episodes: usize,
    /// Tree GP settings.
    pub trees: ClassTreeSettings,
    /// Where populations are evaluated.
    pub device: crate::backend::DeviceChoice,
    /// Islands and migration (one island by default).
    #[serde(default)]
    pub islands: crate::evolve::IslandConfig,
    /// When the run ends before its last generation: a time limit, a target ([`super::budget`]).
    #[serde(default)]
    pub budget: super::budget::Budget,
    /// What a policy is: an evolved program, or a linear map of the normalised observations
    /// tuned by random search ([`super::linear_policy`]).
    #[serde(default)]
    pub policy: PolicyKind,
    /// `policy: linear`: the random search (its iterations are `engine.generations`);
    /// `policy: residual`: the search of the linear policy under the programs.
    #[serde(default = "super::defaults::linear_cpu")]
    pub linear: crate::evolve::ars::ArsConfig,
    /// `policy: residual`: iterations of the linear policy's search before the programs' search
    /// (whose generations are `engine.generations`).
    #[serde(default = "super::defaults::linear_iterations_cpu")]
    pub linear_iterations: usize,
    /// `policy: residual`: after every this many generations of the programs' search (0: never),
    /// the linear policy under them is tuned again with the generation's best program on top
    /// ([`super::residual::Head`]).
    #[serde(default)]
    pub head_every: usize,
    /// `policy: residual`: iterations of the random search in each such tuning.
    #[serde(default = "super::defaults::head_iterations")]
    pub head_iterations: usize,
    /// `policy: program`: the programs read each observation normalised, `(o − μ) / σ`, by the
    /// running mean and deviation of every state the population's policies have visited, on
    /// the device where the roll-outs run ([`crate::sim::stats::Learnt`]); the saved policy
    /// has the last generation's normaliser written into its tree. On by default with one
    /// island ([`default_normalise`]); a linear or residual policy always normalises. Absent
    /// from a file (a checkpoint or report of an older grove): off, as that grove ran.
    #[serde(default)]
    pub normalise: bool,
}

/// What `grove control` trains (`--policy`, the experiment field `policy`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum PolicyKind {
    /// A program evolved by tree GP or grammatical evolution: actions = tanh of its outputs.
    #[default]
    Program,
    /// actions = tanh(W (o − μ) / σ), with the observations' running mean and deviation, W
    /// tuned by augmented random search (Mania et al. 2018): the baseline of `--policy program`.
    Linear,
    /// actions = tanh(W n + f(n)) over the normalised observations n = (o − μ) / σ: W tuned by
    /// random search first (`linear_iterations`), then programs f evolved on top of it
    /// ([`super::residual`]).
    Residual,
}

impl Default for ControlSettings {
    /// `grove control`'s defaults on the CPU in swimmer, with the engine's own settings of
    /// grammatical evolution (the command line's are [`ControlSettings::cli_default`]'s).
    fn default() -> Self {
        use super::defaults::{CONTROL_CPU, CONTROL_CPU_EPISODES, CONTROL_P_OUT, CONTROL_TEST_EPISODES, CONTROL_VALIDATION_EPISODES, FUNCTIONS, GE, PARSIMONY};
        Self {
            env: "swimmer".into(),
            profile: None,
            grammar: None,
            functions: Some(FUNCTIONS.into()),
            operators: Vec::new(),
            engine: CONTROL_CPU.config(crate::evolve::ConstantFitting::default()),
            map: crate::genome::MapConfig::default(),
            init: crate::genome::InitConfig::default(),
            vary: crate::genome::vary::GeVaryConfig::default(),
            genome_capacity: GE.genome_capacity,
            episodes: CONTROL_CPU_EPISODES,
            episode_steps: None,
            test_episodes: CONTROL_TEST_EPISODES,
            parsimony: PARSIMONY,
            healthy_reward: None,
            fresh_starts: false,
            validation_episodes: CONTROL_VALIDATION_EPISODES,
            trees: ClassTreeSettings { constants: vec![-1.0, -0.5, 0.5, 1.0, 2.0], p_out: CONTROL_P_OUT, ..Default::default() },
            device: crate::backend::DeviceChoice::default(),
            islands: crate::evolve::IslandConfig::default(),
            budget: super::budget::Budget::default(),
            policy: PolicyKind::Program,
            linear: super::defaults::linear_cpu(),
            linear_iterations: super::defaults::LINEAR_ITERATIONS_CPU,
            head_every: 0,
            head_iterations: super::defaults::HEAD_ITERATIONS,
            normalise: true,
        }
    }
}

impl ControlSettings {
    /// `grove control`'s defaults with no flags but `--env`, on a GPU (`on_gpu`:
    /// [`super::defaults::CONTROL_GPU`]) or not ([`super::defaults::CONTROL_CPU`]): what an
    /// experiment file, a report's settings and the Python package lay their fields over.
    pub fn cli_default(on_gpu: bool) -> Self {
        use super::defaults::{CONTROL_CPU, CONTROL_CPU_EPISODES, CONTROL_GPU, CONTROL_GPU_EPISODES, GE};
        let ge = GE.configs();
        let (engine, episodes) = if on_gpu { (CONTROL_GPU, CONTROL_GPU_EPISODES) } else { (CONTROL_CPU, CONTROL_CPU_EPISODES) };
        let base = Self::default();
        Self {
            engine: engine.config(base.engine.constants),
            episodes,
            linear: if on_gpu { super::defaults::LINEAR_GPU } else { super::defaults::LINEAR_CPU },
            linear_iterations: if on_gpu { super::defaults::LINEAR_ITERATIONS_GPU } else { super::defaults::LINEAR_ITERATIONS_CPU },
            map: ge.map,
            init: ge.init,
            vary: ge.vary,
            genome_capacity: ge.genome_capacity,
            ..base
        }
    }

    /// What the search takes from these settings.
    pub fn search_settings(&self) -> super::search::SearchSettings<'_> {
        let ge = super::defaults::GeConfigs { map: self.map, init: self.init, vary: self.vary, genome_capacity: self.genome_capacity };
        super::search::SearchSettings::of(&self.engine, &self.islands, &self.grammar, &self.functions, ge)
    }

    /// Checks values the types allow but a run cannot use; each message names the flag and
    /// the experiment-file field.
    pub fn check(&self) -> Result<()> {
        use anyhow::ensure;
        super::search::register_operators(&self.operators)?;
        check_search(&self.engine, &self.islands)?;
        ensure!(!self.islands.shard_rows, "--shard-rows (islands.shard_rows) splits regression rows over GPUs; grove control has no row shards yet");
        self.budget.check(super::budget::Measure::Return)?;
        ensure!(
            self.engine.constants.steps == 0,
            "engine.constants.steps is {}: control fits no constants (constant fitting is for regression and classification)",
            self.engine.constants.steps
        );
        check_count("--episodes (episodes)", self.episodes, 1, MAX_EPISODES)?;
        check_count("--test-episodes (test_episodes)", self.test_episodes, 1, MAX_EPISODES)?;
        check_count("--validation-episodes (validation_episodes)", self.validation_episodes, 0, MAX_EPISODES)?;
        if let Some(n) = self.episode_steps {
            check_count("--episode-steps (episode_steps)", n, 1, MAX_EPISODE_STEPS)?;
        }
        ensure!(self.parsimony >= 0.0 && self.parsimony.is_finite(), "--parsimony (parsimony) must be >= 0, got {}", self.parsimony);
        ensure!((0.0..=1.0).contains(&self.trees.p_out), "--p-out (trees.p_out) must be a probability, got {}", self.trees.p_out);
        if let Some(w) = self.healthy_reward {
            ensure!(w.is_finite(), "--healthy-reward (healthy_reward) must be a finite number, got {w}");
        }
        if self.policy != PolicyKind::Program {
            super::linear_policy::check(&self.linear, self.episodes)?;
        }
        if self.policy == PolicyKind::Residual {
            check_count("--linear-iterations (linear_iterations)", self.linear_iterations, 1, MAX_LINEAR_ITERATIONS)?;
            check_count("--head-iterations (head_iterations)", self.head_iterations, 1, MAX_LINEAR_ITERATIONS)?;
            ensure!(
                self.head_every == 0 || self.islands.count <= 1,
                "--head-every (head_every) tunes one linear policy under one population: leave out --islands (islands.count is {})",
                self.islands.count
            );
        } else {
            ensure!(
                self.head_every == 0,
                "--head-every (head_every) tunes the linear policy under a --policy residual run's programs; this run's policy is {}",
                format!("{:?}", self.policy).to_lowercase()
            );
        }
        ensure!(
            !(self.normalise && self.policy == PolicyKind::Program && self.islands.count > 1),
            "--normalise on (normalise) learns one normaliser for one population: with --islands (islands.count is {}) turn it off with --normalise off",
            self.islands.count
        );
        check_ge(&self.search_settings().ge)?;
        ensure!(self.grammar.is_some() || self.functions.is_some(), "give --grammar FILE or --functions LIST (in an experiment file: grammar or functions)");
        Ok(())
    }

    /// The settings of `given` (JSON fields, as a report's `settings` holds them) laid over
    /// [`Self::cli_default`]`(on_gpu)`; then checked.
    pub fn from_json(given: serde_json::Value, on_gpu: bool) -> Result<Self> {
        let mut base = serde_json::to_value(Self::cli_default(on_gpu))?;
        top_by_share(&mut base, &given);
        let normalise = given.get("normalise").cloned();
        super::search::merge(&mut base, given);
        resolve_normalise(&mut base, normalise.as_ref())?;
        let s: Self = serde_json::from_value(base).context("bad control settings")?;
        s.check()?;
        Ok(s)
    }
}

/// Whether the programs of a `policy` run on `islands` islands read normalised observations
/// when the settings do not say: yes with one island (it won on all four robots on an H200,
/// `docs/benchmarks.md`); with several, no (the normaliser is learnt by one population). A
/// linear or residual policy always reads them.
pub fn default_normalise(policy: PolicyKind, islands: usize) -> bool {
    policy != PolicyKind::Program || islands <= 1
}

/// Sets `merged["normalise"]` (settings as JSON, `given` laid over the defaults) to
/// [`default_normalise`] when `given` (its `normalise` field) was none; an error when it turns
/// normalising off for a policy that always normalises.
pub fn resolve_normalise(merged: &mut serde_json::Value, given: Option<&serde_json::Value>) -> Result<()> {
    let policy: PolicyKind = merged.get("policy").and_then(|p| serde_json::from_value(p.clone()).ok()).unwrap_or_default();
    match given {
        Some(v) => {
            if v == &serde_json::Value::Bool(false) && policy != PolicyKind::Program {
                bail!("normalise: false is for policy: program; a {} policy always reads normalised observations", format!("{policy:?}").to_lowercase());
            }
        }
        None => {
            let islands = merged.get("islands").and_then(|i| i.get("count")).and_then(serde_json::Value::as_u64).unwrap_or(1) as usize;
            merged["normalise"] = serde_json::Value::Bool(default_normalise(policy, islands));
        }
    }
    Ok(())
}

/// Where `given` (experiment fields) sets `linear.directions` but not `linear.top`, sets
/// `base`'s top (the defaults the fields are laid over) to the defaults' share of the
/// directions, as `--directions` alone does on the command line.
pub fn top_by_share(base: &mut serde_json::Value, given: &serde_json::Value) {
    let linear = given.get("linear");
    let (Some(n), None) = (linear.and_then(|l| l.get("directions")).and_then(serde_json::Value::as_u64), linear.and_then(|l| l.get("top"))) else {
        return;
    };
    let d: Option<crate::evolve::ars::ArsConfig> = base.get("linear").and_then(|l| serde_json::from_value(l.clone()).ok());
    if let Some(d) = d {
        base["linear"]["top"] = serde_json::json!(linear_top(n as usize, &d));
    }
}

/// The top directions of `directions` at the share of `d` (at least 1).
pub fn linear_top(directions: usize, d: &crate::evolve::ars::ArsConfig) -> usize {
    (directions.saturating_mul(d.top)).div_ceil(d.directions.max(1)).max(1)
}

/// Opens the device for a `grove control` run in `env` (loading the environment first, so
/// that a bad one fails before a GPU is opened); says on standard error, unless quiet, when
/// `auto` falls back to the CPU.
pub fn open_for(env: &str, profile: Option<&str>, device: crate::backend::DeviceChoice, quiet: bool) -> Result<Backend> {
    open_on(env, profile, device, &crate::backend::Gpus::All, quiet)
}

/// [`open_for`] on the first of the GPUs `gpus` chooses (for islands spread over several).
pub fn open_on(env: &str, profile: Option<&str>, device: crate::backend::DeviceChoice, gpus: &crate::backend::Gpus, quiet: bool) -> Result<Backend> {
    Model::load(env, profile)?;
    Backend::open_on(device, gpus, quiet)
}

/// Plays a saved policy for one episode in f32, as `grove rollout --policy` does: `steps`
/// control steps at most (default: the environment's episode length), from the reset noise of
/// `seed` (`None`: the rest pose).
pub fn replay(saved: &SavedPolicy, steps: Option<usize>, seed: Option<u64>) -> Result<crate::sim::rollout::RolloutSummary> {
    use crate::sim::rollout::{ActionSource, RolloutOptions, rollout};
    let m = Model::load(&saved.env, Some(&saved.profile))?;
    let actions = ActionSource::Policy(Box::new(Policy::for_model(&saved.tree(&m)?, &m)?));
    let opts = RolloutOptions { steps: steps.unwrap_or(m.episode_steps), seed, ignore_termination: false };
    rollout::<f32>(&m, &actions, &opts, None)
}

/// Where a search plays: the environment as tested (`m`) and as trained (its healthy reward
/// possibly replaced), the training episodes, and the names of its observations and actuators.
pub struct Arena {
    /// The environment, as tested.
    pub m: Model,
    /// The environment as trained (its healthy reward possibly replaced).
    pub trained: Model,
    /// The training episodes.
    pub run: ControlRun,
    /// The training healthy reward, when it replaces the env's.
    pub healthy: Option<f64>,
    /// Observation names.
    pub names: Vec<String>,
    /// Actuator names.
    pub acts: Vec<String>,
}

impl Arena {
    /// Loads the environment of `settings` (one line when it has no actuator or observation).
    pub fn load(settings: &ControlSettings) -> Result<Self> {
        let m = Model::load(&settings.env, settings.profile.as_deref())?;
        let (nu, n_obs) = (m.nu(), m.obs_size);
        if nu == 0 || n_obs == 0 {
            bail!("{} has {nu} actuators and {n_obs} observations; a policy needs at least one of each", m.name);
        }
        let steps = settings.episode_steps.unwrap_or(m.episode_steps);
        let run = ControlRun { episodes: settings.episodes, steps, seed: settings.engine.seed, generation: 0, noise: true, ignore_termination: false };
        let mut trained = m.clone();
        let healthy = training_healthy_reward(settings.healthy_reward, &m);
        if let Some(w) = healthy {
            trained.healthy_weight = w;
        }
        let (names, acts) = (observation_names(&m), actuator_names(&m));
        Ok(Arena { m, trained, run, healthy, names, acts })
    }
}

/// Mean returns of a population, wherever the backend runs them.
pub struct Control<'m> {
    /// Where roll-outs run.
    pub backend: &'m Backend,
    /// The environment.
    pub model: &'m Model,
    /// Episodes, steps and reset noise.
    pub run: ControlRun,
    /// Every generation plays fresh starts ([`ControlRun::at_generation`]); false: every
    /// generation plays `run`'s.
    pub fresh: bool,
    /// Added to the fitness per node.
    pub parsimony: f64,
    /// Control steps played and seconds spent in roll-outs so far.
    pub played: std::sync::Mutex<(u64, f64)>,
    /// The linear policy the programs are the residual of (`--policy residual`): each program is
    /// played composed with its current one ([`super::residual::Residual::compose`]), by the
    /// host loop, and it may be tuned again between generations ([`super::residual::Head`]).
    pub residual: Option<&'m super::residual::Head<'m>>,
    /// `--normalise`: the normaliser the programs read their observations through, learnt from
    /// what each generation's policies see ([`Learnt`]).
    pub learnt: Option<&'m Mutex<Learnt>>,
}

impl Control<'_> {
    /// Fitness of `pop` over `run`'s episodes: minus the mean return plus parsimony, `+inf` for
    /// rows with no program or a non-finite return; counts the env steps and seconds played.
    fn returns(&self, pop: &Population, run: &ControlRun) -> Result<Vec<f64>> {
        let t0 = std::time::Instant::now();
        let composed = self.residual.map(|h| h.residual().compose_population(pop));
        let (means, steps) = match self.learnt {
            Some(l) => {
                let mut l = l.lock().unwrap_or_else(|e| e.into_inner());
                let (means, steps, seen) = self.backend.control_returns_observed(pop, self.model, run, Some(&l.next()))?;
                l.learn(&seen);
                (means, steps)
            }
            None => self.backend.control_returns(composed.as_ref().unwrap_or(pop), self.model, run)?,
        };
        if let Ok(mut p) = self.played.lock() {
            p.0 += steps;
            p.1 += t0.elapsed().as_secs_f64();
        }
        Ok(means
            .iter()
            .enumerate()
            .map(|(i, &r)| if pop.len[i] == 0 || !r.is_finite() { f64::INFINITY } else { -r + self.parsimony * pop.len[i] as f64 })
            .collect())
    }
}

impl crate::evolve::Fitness for Control<'_> {
    fn evaluate(&self, pop: &Population) -> Result<Vec<f64>> {
        self.returns(pop, &self.run)
    }

    fn evaluate_at(&self, pop: &Population, generation: usize) -> Result<Vec<f64>> {
        let run = if self.fresh { self.run.at_generation(generation) } else { self.run };
        let fit = self.returns(pop, &run)?;
        if let Some(h) = self.residual {
            h.after_generation(generation, self.backend, pop, &fit, &self.played)?;
        }
        Ok(fit)
    }

    fn device_task(&self) -> Option<crate::evolve::device::DeviceTask<'_>> {
        // The device loop plays the programs as they are; a residual's are composed first.
        if self.residual.is_some() {
            return None;
        }
        self.backend.control_task(self.model, self.run, self.fresh, self.parsimony, &self.played, self.learnt)
    }
}

/// Checks that a grammar's output nodes can write every actuator's slot: each `out(K, …)` with a
/// literal K is collected, and when all are literal they must cover `0 .. nu`.
pub fn check_grammar_outputs(templates: &crate::grammar::template::Templates, nu: usize, path: &str) -> Result<()> {
    use crate::grammar::template::{Item, Part};
    let (mut literal, mut spelled) = (std::collections::BTreeSet::new(), false);
    for item in templates.expr.iter().flatten().flatten() {
        if let Item::Output(parts) = item {
            match parts.as_slice() {
                [Part::Text(t)] => {
                    literal.insert(t.parse::<usize>().unwrap_or(usize::MAX));
                }
                _ => spelled = true,
            }
        }
    }
    if literal.is_empty() && !spelled {
        bail!("{path} has no out(K, …) output nodes; a policy needs one output per actuator ({nu} here)");
    }
    if !spelled {
        let missing: Vec<String> = (0..nu).filter(|k| !literal.contains(k)).map(|k| k.to_string()).collect();
        if !missing.is_empty() {
            bail!(
                "{path} writes outputs {} but the environment has {nu} actuators: out({}, …) is missing",
                literal.iter().map(|k| k.to_string()).collect::<Vec<_>>().join(", "),
                missing.join(", …), out(")
            );
        }
    }
    Ok(())
}

/// Scores of a policy over several episodes.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyScores {
    /// Each episode.
    pub episodes: Vec<Episode>,
}

impl PolicyScores {
    /// Mean return (NaN when an episode was invalid).
    pub fn mean(&self) -> f64 {
        if self.episodes.iter().any(|e| !e.valid) || self.episodes.is_empty() {
            return f64::NAN;
        }
        self.episodes.iter().map(|e| e.ret).sum::<f64>() / self.episodes.len() as f64
    }
    /// Population standard deviation of the returns.
    pub fn std(&self) -> f64 {
        let m = self.mean();
        (self.episodes.iter().map(|e| (e.ret - m).powi(2)).sum::<f64>() / self.episodes.len().max(1) as f64).sqrt()
    }
    /// Mean episode length, control steps.
    pub fn mean_steps(&self) -> f64 {
        self.episodes.iter().map(|e| e.steps as f64).sum::<f64>() / self.episodes.len().max(1) as f64
    }
    /// The scores as the report shows them.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "mean": crate::report::num(self.mean()), "std": crate::report::num(self.std()),
            "mean_steps": self.mean_steps(), "episodes": self.episodes.len(),
            "returns": self.episodes.iter().map(|e| crate::report::num(e.ret)).collect::<Vec<_>>(),
            "steps": self.episodes.iter().map(|e| e.steps).collect::<Vec<_>>(),
        })
    }
}

/// Plays `nodes` on the CPU (the reference) for the episodes of `run`.
pub fn score_policy(nodes: &[Node], m: &Model, run: &ControlRun) -> Result<PolicyScores> {
    let mut pop = Population::new(1, nodes.len().max(1), m.nu());
    pop.set_tree(0, nodes).map_err(|e| anyhow::anyhow!("the policy's tree is malformed: {e}"))?;
    let policy = Policy::new(pop.tree(0), m.nu(), m.obs_size)
        .with_context(|| format!("the policy does not fit {} (it reads past its {} observations)", m.name, m.obs_size))?;
    use rayon::prelude::*;
    let episodes = (0..run.episodes as u32).into_par_iter().map(|k| play(m, &mut policy.clone(), run, k)).collect();
    Ok(PolicyScores { episodes })
}

/// The validation episodes' choice: each candidate's training fitness, size and mean
/// validation return, and which one was chosen.
pub struct Validation {
    /// Episodes each candidate played.
    pub episodes: usize,
    /// (training fitness, size, mean validation return) per candidate; the run's best first.
    pub candidates: Vec<(f64, usize, f64)>,
    /// The chosen candidate's index.
    pub chosen: usize,
}

impl Validation {
    fn json(&self) -> serde_json::Value {
        let c: Vec<serde_json::Value> = self
            .candidates
            .iter()
            .map(|&(f, n, v)| serde_json::json!({"fitness": crate::report::num(f), "size": n, "validation_return": crate::report::num(v)}))
            .collect();
        serde_json::json!({"episodes": self.episodes, "generation_word": VALIDATION_GENERATION, "candidates": c, "chosen": self.chosen})
    }

    fn line(&self) -> String {
        let (best, chosen) = (self.candidates[0].2, self.candidates[self.chosen].2);
        let which = if self.chosen == 0 { "the run's best".to_string() } else { format!("candidate {} (the run's best: {best:.2})", self.chosen + 1) };
        format!("chosen        {which} of {}, validation return {chosen:.2} over {} episodes\n", self.candidates.len(), self.episodes)
    }
}

/// The policy to report: with validation episodes, the candidate (the run's best, then the last
/// population's fittest distinct programs, [`VALIDATION_CANDIDATES`] in all) with the highest
/// mean return over `run`'s episodes, the earlier on a tie (NaN, from an invalid episode,
/// never wins); with none, the run's best.
/// `policy_of` gives the policy a program plays (the program itself, or a residual's composed
/// tree).
pub fn choose_on_validation(
    outcome: &crate::evolve::Outcome,
    m: &Model,
    run: &ControlRun,
    policy_of: &dyn Fn(&[Node]) -> Vec<Node>,
) -> Result<(crate::evolve::Best, Option<Validation>)> {
    if run.episodes == 0 {
        return Ok((outcome.best.clone(), None));
    }
    let (pop, fit) = (&outcome.population, &outcome.fitness);
    let mut order: Vec<usize> = (0..fit.len()).filter(|&i| fit[i].is_finite() && pop.len[i] > 0).collect();
    order.sort_by(|&a, &b| fit[a].total_cmp(&fit[b]).then(a.cmp(&b)));
    let mut picked: Vec<(f64, Vec<Node>, Option<usize>)> = vec![(outcome.best.fitness, outcome.best.nodes.clone(), None)];
    for i in order {
        if picked.len() == VALIDATION_CANDIDATES {
            break;
        }
        let nodes = pop.tree(i).nodes();
        if !picked.iter().any(|p| p.1 == nodes) {
            picked.push((fit[i], nodes, Some(i)));
        }
    }
    let mut candidates = Vec::with_capacity(picked.len());
    let (mut chosen, mut top) = (0, f64::NEG_INFINITY);
    for (k, (f, nodes, _)) in picked.iter().enumerate() {
        let v = score_policy(&policy_of(nodes), m, run)?.mean();
        if v > top {
            (chosen, top) = (k, v);
        }
        candidates.push((*f, nodes.len(), v));
    }
    let (f, nodes, _) = &picked[chosen];
    let best = if chosen == 0 {
        outcome.best.clone()
    } else {
        // A program of the last population: found by the last generation, no genome kept.
        crate::evolve::Best { fitness: *f, nodes: nodes.clone(), generation: outcome.history.last().map_or(0, |s| s.generation), genome: None }
    };
    Ok((best, Some(Validation { episodes: run.episodes, candidates, chosen })))
}

/// Loads the environment, evolves a policy and scores the best one.
pub fn control(settings: &ControlSettings, backend: &Backend, quiet: bool) -> Result<EvolveResult> {
    control_with(settings, backend, &super::run::RunOptions { quiet, ..Default::default() })
}

/// Opens the device `settings.device` names (after loading the environment, so that a bad one
/// fails first; saying on standard error, unless quiet, when `auto` falls back to the CPU) and
/// runs [`control_with`]: a control experiment of `grove run`.
pub fn control_run(settings: &ControlSettings, opts: &super::run::RunOptions) -> Result<EvolveResult> {
    let backend = open_on(&settings.env, settings.profile.as_deref(), settings.device, &settings.islands.gpus, opts.quiet)?;
    control_with(settings, &backend, opts)
}

/// As [`control`], with checkpoints, resume, a stop flag and verbosity from `opts` (as every
/// task's run takes them; a stop fails with [`super::run::Stopped`]): the
/// library's control run, under both the command line (`grove control`, `grove run`) and the
/// Python package (`grove.control`). `settings.device` is what `backend` was opened from.
pub fn control_with(settings: &ControlSettings, backend: &Backend, opts: &super::run::RunOptions) -> Result<EvolveResult> {
    settings.check()?;
    match settings.policy {
        PolicyKind::Linear => return super::linear_policy::control_linear(settings, backend, opts),
        PolicyKind::Residual => return super::residual::control_residual(settings, backend, opts),
        PolicyKind::Program => {}
    }
    if opts.resume.as_ref().is_some_and(|c| c.linear.is_some()) {
        bail!("the checkpoint holds a --policy linear search, not an evolved population: resume it with its own settings");
    }
    if opts.resume.as_ref().is_some_and(|c| c.residual.is_some()) {
        bail!("the checkpoint holds programs evolved on a linear policy: resume it with --set policy=residual");
    }
    control_programs(settings, backend, opts, &Arena::load(settings)?, None)
}

/// The programs' search of [`control_with`] (settings checked) in `arena`, on their own or,
/// with `stage`, as the residual of its linear policy (`--policy residual`,
/// [`super::residual`]): `opts.resume` is then a checkpoint of the programs' search or none.
pub fn control_programs(
    settings: &ControlSettings,
    backend: &Backend,
    opts: &super::run::RunOptions,
    arena: &Arena,
    stage: Option<&super::residual::LinearStage>,
) -> Result<EvolveResult> {
    use crate::program::render::{Style, outputs};

    let start = std::time::Instant::now();
    let head = stage.map(|s| super::residual::Head::new(s, settings, arena)).transpose()?;
    let residual = head.as_ref();
    let learnt = learnt_of(settings, opts, arena.m.obs_size)?.map(Mutex::new);
    let learnt = learnt.as_ref();
    let policy_of = |nodes: &[Node]| match (residual, learnt) {
        (Some(h), _) => h.residual().compose(nodes),
        (None, Some(l)) => l.lock().unwrap_or_else(|e| e.into_inner()).compose(nodes),
        (None, None) => nodes.to_vec(),
    };
    let Arena { m, trained, run, healthy, names, acts } = arena;
    let (nu, n_obs, run, healthy) = (m.nu(), m.obs_size, *run, *healthy);
    // Per individual: each episode's return, length and validity (and its state on a GPU).
    // A normalising run also keeps each episode's observation sums on both sides.
    let episodes = settings.episodes as u64;
    let sums = if learnt.is_some() { 8 * (1 + 2 * n_obs as u64) * episodes } else { 0 };
    let need = super::plan::TaskNeed { per_individual: 16 * episodes + 16 + sums, device_per_individual: 64 * episodes + 16 + sums, ..Default::default() };
    super::plan::check_search(&settings.search_settings(), &need, backend, opts.max_memory, ", --episodes")?;
    // A resumed run goes on counting from the checkpoint's env steps and roll-out seconds; a
    // residual's programs from its linear search's.
    let played = opts.resume.as_ref().and_then(|c| c.env_steps).or(stage.map(|s| s.played)).unwrap_or((0, 0.0));
    // Islands spread over every GPU `islands.gpus` chooses; the first task counts every
    // island's env steps.
    let more = backend.more_gpus(&settings.islands.gpus, settings.islands.count)?;
    let tasks: Vec<Control> = std::iter::once(backend)
        .chain(&more)
        .enumerate()
        .map(|(i, b)| Control {
            backend: b,
            model: trained,
            run,
            fresh: settings.fresh_starts,
            parsimony: settings.parsimony,
            played: std::sync::Mutex::new(if i == 0 { played } else { (0, 0.0) }),
            residual,
            learnt,
        })
        .collect();
    let task = crate::evolve::OnGpus(&tasks);
    let device = describe_devices(backend, &more);
    // A residual's programs, and normalising ones, read the normalised observations.
    let program_names = if residual.is_some() || learnt.is_some() { super::residual::normalised_names(names) } else { names.clone() };
    // --stop-at is the best policy's training return (its fitness less the parsimony penalty,
    // negated).
    let parsimony = settings.parsimony;
    let goal = super::budget::Goal {
        measure: super::budget::Measure::Return,
        value: Box::new(move |b: &crate::evolve::Best| -(b.fitness - parsimony * b.nodes.len() as f64)),
    };
    let mut observer = super::run::RunObserver::for_control(&settings.engine, &settings.islands, opts, &tasks[0].played)?
        .with_budget(settings.budget, goal)
        .with_residual(residual)
        .with_inputs(learnt);
    let trees = |functions: &str| settings.trees.rep(functions, n_obs, nu, settings.engine.max_len);
    let check = |templates: &crate::grammar::template::Templates, name: &str| check_grammar_outputs(templates, nu, name);
    let programs = super::search::Programs {
        names,
        n_outputs: nu,
        purpose: format!("as a policy for {} ({nu} actuators, {n_obs} observations)", m.name),
        check: &check,
        trees: &trees,
    };
    let searching = std::time::Instant::now();
    let outcome = super::search::evolve(&settings.search_settings(), &programs, &task, &mut observer)?;
    let (setup_seconds, search_seconds) = (searching.duration_since(start).as_secs_f64(), searching.elapsed().as_secs_f64());
    // A residual's whole run includes its linear search.
    let seconds = start.elapsed().as_secs_f64() + stage.map_or(0.0, |s| s.seconds);
    let (played, rollout_seconds) = tasks[0].played.lock().map_or((0, 0.0), |p| *p);
    if outcome.best.nodes.is_empty() {
        bail!("no valid policy was found: every individual failed to map or had a non-finite output");
    }
    let validation_run = ControlRun { episodes: settings.validation_episodes, generation: VALIDATION_GENERATION, ..run };
    let (chosen, validation) = choose_on_validation(&outcome, m, &validation_run, &policy_of)?;
    let best = &chosen;
    // What the policy plays: the program, or a residual's composed tree.
    let played_nodes = policy_of(&best.nodes);
    let train = score_policy(&played_nodes, m, &run)?;
    let test_run = ControlRun { episodes: settings.test_episodes, generation: TEST_GENERATION, ..run };
    let test = score_policy(&played_nodes, m, &test_run)?;
    let programs = outputs(&best.nodes, nu, &program_names, Style::Infix);
    // A residual's action adds the linear policy's row, `lin_ACTUATOR`, to the program's output.
    let action = |a: &str, p: &str| if residual.is_some() { format!("tanh(lin_{a} + {p})") } else { format!("tanh({p})") };
    let mut generations: Vec<serde_json::Value> = outcome
        .history
        .iter()
        .map(|s| {
            serde_json::json!({"generation": s.generation, "best_return": crate::report::num(-s.best),
                "mean_return": crate::report::num(-s.mean), "mean_size": crate::report::num(s.mean_size),
                "median_size": observer.median_sizes.get(s.generation).copied().map(crate::report::num),
                "invalid": s.invalid, "seconds": s.seconds})
        })
        .collect();
    add_island_stats(&mut generations, &outcome.island_history, true);
    // The hall of fame's loss is minus the training return (the fitness less the parsimony
    // penalty); each row shows every actuator's action.
    let fame = fame_rows(&observer.hof, settings.parsimony, |nodes| {
        let show = |style: Style| {
            let wrap = |(a, p): (&String, String)| match (style, residual.is_some()) {
                (Style::Latex, false) => format!("\\tanh\\left({p}\\right)"),
                (Style::Latex, true) => format!("\\tanh\\left(\\mathrm{{lin}}_{{{}}} + {p}\\right)", a.replace('_', "\\_")),
                (Style::Infix | Style::Sympy, _) => action(a, &p),
            };
            acts.iter().zip(outputs(nodes, nu, &program_names, style)).map(wrap).collect::<Vec<_>>().join("; ")
        };
        Ok((show(Style::Infix), show(Style::Latex), show(Style::Sympy)))
    })?;
    let mut best_json = serde_json::json!({
        "programs": programs.iter().zip(acts).map(|(p, a)| serde_json::json!({"actuator": a, "action": action(a, p)})).collect::<Vec<_>>(),
        "size": best.nodes.len(), "fitness": crate::report::num(best.fitness), "generation": best.generation,
    });
    if let Some((genome, text)) = &best.genome {
        best_json["genome"] = serde_json::json!(genome);
        best_json["phenotype"] = serde_json::json!(text);
    }
    let policy = SavedPolicy {
        env: settings.env.clone(),
        profile: m.profile.clone(),
        observations: names.clone(),
        actuators: acts.clone(),
        nodes: super::model::Model::encode(&played_nodes),
        operators: super::model::Model::operators_of(&played_nodes),
    };
    let mut report = serde_json::json!({
        "command": "control",
        "settings": settings,
        "env": {"name": m.name, "profile": m.profile, "observations": names, "actuators": acts, "episode_steps": run.steps},
        "generations": generations,
        "ended": observer.ended,
        "best": best_json,
        "train": train.json(),
        "test": test.json(),
        "policy": policy,
        "training_healthy_reward": healthy.unwrap_or(m.healthy_weight),
        "hall_of_fame": fame,
        "validation": validation.as_ref().map(Validation::json),
        "timing": {"seconds": seconds, "env_steps": played, "rollout_seconds": rollout_seconds,
                   "env_steps_per_second": played as f64 / rollout_seconds.max(1e-9),
                   "threads": rayon::current_num_threads(), "device": device},
        "transfers": outcome.transfers,
        "version": env!("CARGO_PKG_VERSION"),
    });
    // The user operators the program uses, with the Python that gives them to sympy.
    if let Some(o) = super::model::operators_json(&best.nodes) {
        report["operators"] = o;
    }
    let w = acts.iter().map(|a| a.len()).max().unwrap_or(1).max(6);
    let mut summary = format!("{} ({}), {} actuators, {} observations\n", m.name, m.profile, nu, n_obs);
    if let (Some(s), Some(h)) = (stage, residual) {
        let returns = h.returns();
        report["linear_policy"] = h.residual().linear.json(names, acts);
        report["linear_search"] = serde_json::json!({"iterations": returns.len(), "returns": returns.iter().map(|&r| crate::report::num(r)).collect::<Vec<_>>(),
            "before_programs": settings.linear_iterations, "head_every": settings.head_every, "head_iterations": settings.head_iterations});
        report["timing"]["linear_seconds"] = serde_json::json!(s.seconds);
        let tuned = returns.len().saturating_sub(settings.linear_iterations);
        let again = if tuned > 0 { format!(", then {tuned} more under the programs, {} every {} generations", settings.head_iterations, settings.head_every) } else { String::new() };
        summary += &format!(
            "policy        residual: tanh(lin + f(n)), n = (o - mean) / std; lin = W n tuned by random search ({} iterations{again}, return {:.2}), f evolved on top\n",
            settings.linear_iterations,
            returns.last().copied().unwrap_or(f64::NAN)
        );
        summary += "weights       W, mean and std in the report's `linear_policy`; `policy` holds the whole policy as a program\n";
    }
    if let Some(l) = learnt {
        let l = l.lock().unwrap_or_else(|e| e.into_inner());
        report["normaliser"] = serde_json::json!({
            "observations": names, "mean": l.played.mean.iter().map(|&x| crate::report::num(x)).collect::<Vec<_>>(),
            "std": l.played.std.iter().map(|&x| crate::report::num(x)).collect::<Vec<_>>(), "states": l.played_from,
        });
        summary += &format!(
            "inputs        n = (o - mean) / std, learnt from the {} states the population's policies visited before its last generation (--normalise); `policy` has them written in\n",
            l.played_from
        );
    }
    for (a, p) in acts.iter().zip(&programs) {
        summary += &format!("{a:<w$}  {}\n", action(a, p));
    }
    summary += &format!("size          {} nodes\n", best.nodes.len());
    summary += &observer.ended.line(settings.engine.generations).unwrap_or_default();
    if let Some(v) = &validation {
        summary += &v.line();
    }
    if let Some(w) = healthy.filter(|&w| w != m.healthy_weight) {
        summary += &format!("training      healthy reward {w} per step instead of {} (--healthy-reward); returns below use the env's\n", m.healthy_weight);
    }
    summary += &format!(
        "train return  {:.2}  (mean of {} episode{}, {:.0} steps on average)\n",
        train.mean(),
        train.episodes.len(),
        if train.episodes.len() == 1 { "" } else { "s" },
        train.mean_steps()
    );
    summary += &format!(
        "test return   {:.2} ± {:.2}  (mean of {} fresh episodes, {:.0} steps on average)\n",
        test.mean(),
        test.std(),
        test.episodes.len(),
        test.mean_steps()
    );
    if let Some(line) = islands_summary(&settings.islands, settings.engine.pop_size, &outcome.island_history, true) {
        summary += &line;
    }
    let generations: Vec<f64> = outcome.history.iter().map(|s| s.seconds).collect();
    let finish = start.elapsed().as_secs_f64() - setup_seconds - search_seconds;
    let split = super::search::Split::of(setup_seconds, search_seconds, finish, &generations, backend.kernel_loads());
    split.add_to(&mut report);
    summary += &split.line("generation");
    summary += &format!(
        "time          {seconds:.2} s on {}; {played} env steps in {rollout_seconds:.2} s of roll-outs ({:.3e} steps/s with the policy)",
        device,
        played as f64 / rollout_seconds.max(1e-9)
    );
    Ok(EvolveResult { report, summary })
}

/// The normaliser a `--normalise` run starts from: a resumed run's, else one that has seen
/// nothing; `None` without `--normalise`. An error line when a checkpoint's does not fit.
fn learnt_of(settings: &ControlSettings, opts: &super::run::RunOptions, n_obs: usize) -> Result<Option<Learnt>> {
    let saved = opts.resume.as_ref().and_then(|c| c.inputs.as_ref());
    // A residual's programs read the observations its linear policy normalises.
    match (settings.normalise && settings.policy == PolicyKind::Program, saved) {
        (false, None) => Ok(None),
        (false, Some(_)) => bail!("the checkpoint holds a normaliser but its settings do not normalise: it is not this run's"),
        (true, None) if opts.resume.is_some() => bail!("the checkpoint holds no normaliser but its settings normalise: it is not this run's"),
        (true, None) => Ok(Some(Learnt::new(n_obs))),
        (true, Some(state)) => Learnt::restore(state, n_obs).map(Some).map_err(|e| anyhow::anyhow!("the checkpoint: {e}")),
    }
}

/// The healthy reward training uses: `flag` when given, else 0 for environments that end an
/// episode when the robot falls (Hopper, Walker2d), where the env's alive bonus makes standing
/// still a strong local optimum (`None`: the env's own).
pub fn training_healthy_reward(flag: Option<f64>, m: &Model) -> Option<f64> {
    flag.or_else(|| (m.terminate_when_unhealthy && m.healthy_weight != 0.0).then_some(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hopper_and_walker_train_without_the_alive_bonus_unless_asked() {
        for (env, zeroed) in [("hopper", true), ("walker2d", true), ("swimmer", false), ("half_cheetah", false)] {
            let m = Model::load(env, None).unwrap();
            assert_eq!(training_healthy_reward(None, &m), zeroed.then_some(0.0), "{env}");
            assert_eq!(training_healthy_reward(Some(1.0), &m), Some(1.0), "{env}");
        }
    }

    /// Hopper and `n` random tree policies of up to 32 nodes (seed `seed`).
    fn random_hopper_policies(n: usize, seed: u64) -> (Model, Population) {
        let m = Model::load("hopper", None).unwrap();
        let rep = ClassTreeSettings { constants: vec![-1.0, 0.5], p_out: 0.2, ..Default::default() }
            .rep("add,sub,mul", m.obs_size, m.nu(), 32)
            .unwrap();
        let pop = crate::program::init_population(&rep.vary.spec, n, seed).unwrap();
        (m, pop)
    }

    #[test]
    fn fresh_starts_play_each_generations_own_episodes() {
        use crate::evolve::Fitness;
        let (m, pop) = random_hopper_policies(4, 5);
        let run = ControlRun { episodes: 3, steps: 60, seed: 9, generation: 0, noise: true, ignore_termination: false };
        let task = |fresh| Control { backend: &Backend::Cpu, model: &m, run, fresh, parsimony: 0.0, played: std::sync::Mutex::new((0, 0.0)), residual: None, learnt: None };
        let score = |r: &ControlRun| -> Vec<u64> { (0..4).map(|i| (-score_policy(&pop.tree(i).nodes(), &m, r).unwrap().mean()).to_bits()).collect() };
        let bits = |f: Vec<f64>| -> Vec<u64> { f.iter().map(|x| x.to_bits()).collect() };
        let (fixed, fresh) = (task(false), task(true));
        for g in [0, 1, 7] {
            // Without fresh starts every generation plays generation word 0's episodes.
            assert_eq!(bits(fixed.evaluate_at(&pop, g).unwrap()), score(&run), "generation {g}");
            let word = ControlRun::FRESH_WORD + g as u32;
            assert_eq!(bits(fresh.evaluate_at(&pop, g).unwrap()), score(&ControlRun { generation: word, ..run }), "generation {g}");
        }
        // Fresh words never meet the fixed training starts (0) or the test episodes'.
        assert!(ControlRun::FRESH_WORD > TEST_GENERATION.max(VALIDATION_GENERATION) && run.at_generation(0).generation == ControlRun::FRESH_WORD);
        assert_ne!(fresh.evaluate_at(&pop, 0).unwrap(), fresh.evaluate_at(&pop, 1).unwrap(), "new starts, new returns");
        assert_eq!(run.at_generation(usize::MAX).generation, u32::MAX, "saturates");
    }

    #[test]
    fn validation_episodes_choose_the_candidate_with_the_highest_return() {
        let (m, mut pop) = random_hopper_policies(8, 11);
        // Row 5 repeats row 2: a program is a candidate once. Row 7 is invalid.
        let copy = pop.tree(2).nodes();
        pop.set_tree(5, &copy).unwrap();
        let fitness = vec![-3.0, -1.0, -7.0, -2.0, -5.0, -7.0, -4.0, f64::INFINITY];
        let best = crate::evolve::Best { fitness: -9.0, nodes: pop.tree(6).nodes(), generation: 3, genome: None };
        let outcome = crate::evolve::Outcome { best: best.clone(), history: Vec::new(), population: pop.clone(), fitness, transfers: None, island_history: Vec::new() };
        let run = ControlRun { episodes: 3, steps: 40, seed: 2, generation: VALIDATION_GENERATION, noise: true, ignore_termination: false };
        let (chosen, v) = choose_on_validation(&outcome, &m, &run, &<[Node]>::to_vec).unwrap();
        let v = v.expect("validation episodes were asked for");
        // The run's best first, then the population by fitness: rows 2, 4, 0, 3, 1 (row 6 is the
        // run's best again, 5 a copy of 2, 7 invalid).
        let order = [6usize, 2, 4, 0, 3, 1];
        assert_eq!(v.candidates.len(), order.len());
        let returns: Vec<f64> = order.iter().map(|&i| score_policy(&pop.tree(i).nodes(), &m, &run).unwrap().mean()).collect();
        for (k, &i) in order.iter().enumerate() {
            assert_eq!(v.candidates[k].1, pop.tree(i).nodes().len(), "candidate {k}");
            assert_eq!(v.candidates[k].2.to_bits(), returns[k].to_bits(), "candidate {k}");
        }
        let top = (0..returns.len()).fold(0, |b, k| if returns[k] > returns[b] { k } else { b });
        assert_eq!(v.chosen, top);
        assert_eq!(chosen.nodes, pop.tree(order[top]).nodes());
        assert_eq!(chosen.fitness, if top == 0 { -9.0 } else { outcome.fitness[order[top]] });
        // No validation episodes: the run's best, as before.
        let (plain, none) = choose_on_validation(&outcome, &m, &ControlRun { episodes: 0, ..run }, &<[Node]>::to_vec).unwrap();
        assert!(none.is_none() && plain == best);
    }

    #[test]
    fn grammars_must_cover_every_actuator() {
        use crate::grammar::template::{Vars, compile};
        use crate::grammar::{DatasetShape, load_parsed, parse_str};
        let shape = DatasetShape { n_vars: Some(3), n_is: Some(3), n_os: Some(3) };
        let vars = Vars { names: vec!["a".into(), "b".into(), "c".into()], n_outputs: 3 };
        let tpl = |text: &str| {
            let l = load_parsed(parse_str(text, "g.bnf", false).unwrap(), &shape).unwrap();
            compile(&l.grammar, &l.table, &vars).unwrap()
        };
        let two = tpl("<p> ::= out(0, <e>) + out(1, <e>)\n<e> ::= a | b | <e>*<e>");
        let err = check_grammar_outputs(&two, 3, "g.bnf").unwrap_err().to_string();
        assert!(err.contains("out(2, …) is missing"), "{err}");
        let none = tpl("<e> ::= a | b | <e>*<e>");
        assert!(check_grammar_outputs(&none, 3, "g.bnf").unwrap_err().to_string().contains("no out(K, …)"));
        let all = tpl("<p> ::= out(0, <e>) + out(1, <e>) + out(2, <e>)\n<e> ::= a | b | <e>*<e>");
        check_grammar_outputs(&all, 3, "g.bnf").unwrap();
        let spelled = tpl("<p> ::= out(<k>, <e>)\n<k> ::= GE_RANGE:dataset_n_os\n<e> ::= a | b");
        check_grammar_outputs(&spelled, 3, "g.bnf").unwrap();
    }
}
