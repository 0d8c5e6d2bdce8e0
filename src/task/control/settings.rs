//! What a control run is given: its settings as reports and experiment files store them
//! ([`ControlSettings`], [`PolicyKind`]), their checks and their defaults (by device, the
//! normaliser's, the random search's top directions, the training healthy reward).

use super::*;

/// Most episodes of each kind (`--episodes`, `--test-episodes`, `--validation-episodes`).
pub const MAX_EPISODES: usize = 10_000;

/// Most iterations of a residual policy's linear search (`--linear-iterations`).
pub const MAX_LINEAR_ITERATIONS: usize = 1_000_000;

/// Most random searches side by side (`--searches`).
pub const MAX_SEARCHES: usize = 1024;

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
    /// reported policy is chosen, by [`super::steady_score`], among the run's best and the last population's best distinct
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
    /// When the run ends before its last generation: a time limit, a target ([`crate::task::base::budget`]).
    #[serde(default)]
    pub budget: crate::task::base::budget::Budget,
    /// What a policy is: an evolved program, or a linear map of the normalised observations
    /// tuned by random search ([`self::linear`]).
    #[serde(default)]
    pub policy: PolicyKind,
    /// `policy: linear`: the random search (its iterations are `engine.generations`);
    /// `policy: residual`: the search of the linear policy under the programs.
    #[serde(default = "crate::task::base::defaults::linear_cpu")]
    pub linear: crate::evolve::ars::ArsConfig,
    /// `policy: linear`: random searches run side by side, each from its own directions (the
    /// first as a run of one draws them), their policies played in one roll-out call an
    /// iteration; the one whose last policy has the highest mean return over
    /// `validation_episodes` episodes (its training return with none) is reported
    /// ([`self::linear`]). Absent from a file: 1.
    #[serde(default = "crate::task::base::defaults::linear_searches")]
    pub searches: usize,
    /// `policy: linear` with `searches` ≥ 2: after every this many iterations the worse half
    /// of the searches take the better half's `W` and statistics (the worst the best's, the
    /// second worst the second best's, ...), ranked by their unperturbed returns over the last
    /// [`self::linear::EXPLOIT_WINDOW`] iterations, and go on with their own directions; 0:
    /// never ([`self::linear::exploit`]). Absent from a file: 0.
    #[serde(default)]
    pub exploit_every: usize,
    /// `policy: residual`: iterations of the linear policy's search before the programs' search
    /// (whose generations are `engine.generations`).
    #[serde(default = "crate::task::base::defaults::linear_iterations_cpu")]
    pub linear_iterations: usize,
    /// `policy: residual`: after every this many generations of the programs' search (0: never),
    /// the linear policy under them is tuned again with the generation's best program on top
    /// ([`self::residual::Head`]).
    #[serde(default)]
    pub head_every: usize,
    /// `policy: residual`: iterations of the random search in each such tuning.
    #[serde(default = "crate::task::base::defaults::head_iterations")]
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
    /// ([`self::residual`]).
    Residual,
}

impl Default for ControlSettings {
    /// `grove control`'s defaults on the CPU in swimmer, with the engine's own settings of
    /// grammatical evolution (the command line's are [`ControlSettings::cli_default`]'s).
    fn default() -> Self {
        use crate::task::base::defaults::{CONTROL_CPU, CONTROL_CPU_EPISODES, CONTROL_P_OUT, CONTROL_TEST_EPISODES, CONTROL_VALIDATION_EPISODES, FUNCTIONS, GE, PARSIMONY};
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
            budget: crate::task::base::budget::Budget::default(),
            policy: PolicyKind::Program,
            linear: crate::task::base::defaults::linear_cpu(),
            searches: crate::task::base::defaults::LINEAR_SEARCHES,
            exploit_every: 0,
            linear_iterations: crate::task::base::defaults::LINEAR_ITERATIONS_CPU,
            head_every: 0,
            head_iterations: crate::task::base::defaults::HEAD_ITERATIONS,
            normalise: true,
        }
    }
}

impl ControlSettings {
    /// `grove control`'s defaults with no flags but `--env`, on a GPU (`on_gpu`:
    /// [`crate::task::base::defaults::CONTROL_GPU`]) or not ([`crate::task::base::defaults::CONTROL_CPU`]): what an
    /// experiment file, a report's settings and the Python package lay their fields over.
    pub fn cli_default(on_gpu: bool) -> Self {
        use crate::task::base::defaults::{CONTROL_CPU, CONTROL_CPU_EPISODES, CONTROL_GPU, CONTROL_GPU_EPISODES, GE};
        let ge = GE.configs();
        let (engine, episodes) = if on_gpu { (CONTROL_GPU, CONTROL_GPU_EPISODES) } else { (CONTROL_CPU, CONTROL_CPU_EPISODES) };
        let base = Self::default();
        Self {
            engine: engine.config(base.engine.constants),
            episodes,
            linear: if on_gpu { crate::task::base::defaults::LINEAR_GPU } else { crate::task::base::defaults::LINEAR_CPU },
            linear_iterations: if on_gpu { crate::task::base::defaults::LINEAR_ITERATIONS_GPU } else { crate::task::base::defaults::LINEAR_ITERATIONS_CPU },
            map: ge.map,
            init: ge.init,
            vary: ge.vary,
            genome_capacity: ge.genome_capacity,
            ..base
        }
    }

    /// What the search takes from these settings.
    pub fn search_settings(&self) -> crate::task::base::search::SearchSettings<'_> {
        let ge = crate::task::base::defaults::GeConfigs { map: self.map, init: self.init, vary: self.vary, genome_capacity: self.genome_capacity };
        crate::task::base::search::SearchSettings::of(&self.engine, &self.islands, &self.grammar, &self.functions, ge)
    }

    /// Checks values the types allow but a run cannot use; each message names the flag and
    /// the experiment-file field.
    pub fn check(&self) -> Result<()> {
        use anyhow::ensure;
        crate::task::base::search::register_operators(&self.operators)?;
        check_search(&self.engine, &self.islands)?;
        ensure!(!self.islands.shard_rows, "--shard-rows (islands.shard_rows) splits regression rows over GPUs; grove control has no row shards yet");
        crate::task::base::search::check_tree_rates(self.trees.p_crossover, self.trees.p_mutation)?;
        self.budget.check(crate::task::base::budget::Measure::Return)?;
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
            self::linear::check(&self.linear, self.episodes, self.searches)?;
        }
        ensure!(
            self.searches == 1 || self.policy == PolicyKind::Linear,
            "--searches (searches) runs random searches of --policy linear side by side; this run's policy is {}: leave it out",
            format!("{:?}", self.policy).to_lowercase()
        );
        ensure!(
            self.exploit_every == 0 || self.searches >= 2,
            "--exploit-every (exploit_every) copies the better random searches side by side over the worse; this run has {} search{}: give --searches 2 or more, or leave it out",
            self.searches,
            if self.searches == 1 { "" } else { "es" }
        );
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
        ensure!(
            !(self.engine.diversity == crate::select::Diversity::Unique && self.policy == PolicyKind::Linear),
            "--diversity unique (engine.diversity) chooses the parents of evolved programs; --policy linear tunes a linear map by random search: leave --diversity out"
        );
        if self.engine.selection.is_lexicase() {
            ensure!(
                self.policy != PolicyKind::Linear,
                "--selection {} chooses the parents of evolved programs; --policy linear tunes a linear map by random search: leave --selection out",
                if self.engine.selection == crate::select::Selection::Lexicase { "lexicase" } else { "down-sampled" }
            );
            ensure!(
                self.episodes >= 2,
                "--selection lexicase and down-sampled read each episode as a case: give --episodes 2 or more (episodes is {})",
                self.episodes
            );
            crate::select::cases_per_generation(self.engine.selection, self.engine.down_sample, self.episodes).map_err(|m| anyhow::anyhow!(m))?;
        }
        check_ge(&self.search_settings().ge)?;
        crate::task::base::search::check_diversity(&self.engine, self.grammar.is_some())?;
        ensure!(self.grammar.is_some() || self.functions.is_some(), "give --grammar FILE or --functions LIST (in an experiment file: grammar or functions)");
        Ok(())
    }

    /// The settings of `given` (JSON fields, as a report's `settings` holds them) laid over
    /// [`Self::cli_default`]`(on_gpu)`; then checked.
    pub fn from_json(given: serde_json::Value, on_gpu: bool) -> Result<Self> {
        let mut base = serde_json::to_value(Self::cli_default(on_gpu))?;
        top_by_share(&mut base, &given);
        if on_gpu {
            searches_by_default(&mut base, &given);
        }
        let normalise = given.get("normalise").cloned();
        crate::task::base::search::merge(&mut base, given);
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
                bail!("--normalise off is for --policy program (in a file, normalise: false is for policy: program); a {} policy always reads normalised observations", format!("{policy:?}").to_lowercase());
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

/// On a GPU, a `--policy linear` run that names neither `linear.directions` nor `linear.top`
/// plays searches of [`crate::task::base::defaults::LINEAR_GPU_SIDE`]'s directions side by
/// side: [`crate::task::base::defaults::LINEAR_GPU_SEARCHES`] of them, or the `searches` named
/// when that is 2 or more (`base`: the defaults as JSON, `given` the fields given). One search
/// named, or the directions named, keeps [`crate::task::base::defaults::LINEAR_GPU`] for what
/// is not named. (Before, naming `--searches 16` gave each of the 16 the single search's 1024
/// directions: eight times the episodes of the default an iteration.)
pub fn searches_by_default(base: &mut serde_json::Value, given: &serde_json::Value) {
    use crate::task::base::defaults::{LINEAR_GPU_SEARCHES, LINEAR_GPU_SIDE};
    let policy: PolicyKind = given.get("policy").and_then(|p| serde_json::from_value(p.clone()).ok()).unwrap_or_default();
    let linear = given.get("linear");
    let directions_named = linear.is_some_and(|l| l.get("directions").is_some() || l.get("top").is_some());
    let searches = given.get("searches").map(|k| k.as_u64());
    if policy != PolicyKind::Linear || directions_named {
        return;
    }
    match searches {
        None => base["searches"] = serde_json::json!(LINEAR_GPU_SEARCHES),
        // Two or more named (a count the checks refuse is left for them to say so).
        Some(Some(k)) if k >= 2 => {}
        Some(_) => return,
    }
    base["linear"]["directions"] = serde_json::json!(LINEAR_GPU_SIDE.directions);
    base["linear"]["top"] = serde_json::json!(LINEAR_GPU_SIDE.top);
}

/// The top directions of `directions` at the share of `d` (at least 1).
pub fn linear_top(directions: usize, d: &crate::evolve::ars::ArsConfig) -> usize {
    (directions.saturating_mul(d.top)).div_ceil(d.directions.max(1)).max(1)
}

/// The healthy reward training uses: `flag` when given, else 0 for environments that end an
/// episode when the robot falls (Hopper, Walker2d), where the env's alive bonus makes standing
/// still a strong local optimum (`None`: the env's own).
pub fn training_healthy_reward(flag: Option<f64>, m: &Model) -> Option<f64> {
    flag.or_else(|| (m.terminate_when_unhealthy && m.healthy_weight != 0.0).then_some(0.0))
}
