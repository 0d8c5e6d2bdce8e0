//! `grove control`: a control policy (one output per actuator, actions = tanh) for a simulated
//! robot. Its population, generations and episodes default to the device's, so the device is
//! opened before the settings are made.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use super::args::{BudgetArgs, EngineArgs, EngineHelp, GeArgs, IslandArgs, RunFlags};
use crate::task::control::{ControlSettings, MAX_EPISODE_STEPS, MAX_EPISODES, PolicyKind};
use crate::task::base::defaults::{self, CONTROL_CPU, CONTROL_CPU_EPISODES, CONTROL_GPU, CONTROL_GPU_EPISODES};
use crate::task::runner::experiment::Experiment;
use crate::task::base::search::MAX_GENERATIONS;
use crate::task::base::search::ClassTreeSettings;

/// The engine group's defaults and help in `grove control`.
#[derive(Debug)]
pub struct Control;

impl EngineHelp for Control {
    const DEFAULTS: defaults::EngineDefaults = CONTROL_CPU;
    const BY_DEVICE: bool = true;
    fn pop() -> String {
        format!("Population size, {} [default: {} on the CPU, {} on a GPU]", super::args::pop_bound(), CONTROL_CPU.pop, CONTROL_GPU.pop)
    }
    fn gens() -> String {
        format!("Generations, at most {MAX_GENERATIONS} [default: {} on the CPU, {} on a GPU]", CONTROL_CPU.gens, CONTROL_GPU.gens)
    }
    const SEED: &'static str = "Random seed (of evolution and of the reset noise)";
    const PARSIMONY: &'static str = "Fitness penalty per program node (fitness is minus the mean return)";
    const DEVICE: &'static str = "Where to run the roll-outs: auto (CUDA if usable, else CPU), cpu, cuda";
}

/// `grove control`.
#[derive(Debug, Args)]
pub struct ControlArgs {
    /// Environment: swimmer, hopper, walker2d, half_cheetah, or a path to an environment .ron file.
    #[arg(long)]
    pub env: String,
    /// Profile: brax (the default of the shipped envs) or gymnasium.
    #[arg(long)]
    pub profile: Option<String>,
    /// Grammar for grammatical evolution, with one `out(K, EXPR)` per actuator (e.g.
    /// grammars/swimmer.bnf; observations are x[:, i] or their names, q_JOINT, v_JOINT, z_BODY).
    #[arg(long, short, conflicts_with = "functions")]
    pub grammar: Option<PathBuf>,
    /// Function set for tree GP with output nodes (the default without --grammar).
    #[arg(long, default_value = defaults::FUNCTIONS)]
    pub functions: String,
    /// An operator of your own, usable in --functions and grammars (repeatable), e.g.
    /// --define "softsign(x) = x / (1 + abs(x))": a body over the built-ins (+ - * /, calls such
    /// as abs, sin, np.exp), the parameters (one or two), numbers and the operators defined before.
    #[arg(long = "define", value_name = "DEFINITION")]
    pub define: Vec<String>,
    /// Population, generations, seed, selection, program length, device.
    #[command(flatten)]
    pub engine: EngineArgs<Control>,
    /// Roll-outs per individual, from different reset noise; fitness is the mean return.
    #[arg(long, help = format!(
        "Roll-outs per individual, from different reset noise; fitness is the mean return; 1 to {MAX_EPISODES} [default: {CONTROL_CPU_EPISODES} on the CPU, {CONTROL_GPU_EPISODES} on a GPU]"
    ))]
    pub episodes: Option<usize>,
    /// Control steps per episode (default: the environment's, 1000).
    #[arg(long, help = format!("Control steps per episode, 1 to {MAX_EPISODE_STEPS} (default: the environment's, 1000)"))]
    pub episode_steps: Option<usize>,
    /// Fresh episodes the best policy is scored on at the end (on the CPU).
    #[arg(long, default_value_t = defaults::CONTROL_TEST_EPISODES, help = format!("Fresh episodes the best policy is scored on at the end (on the CPU), 1 to {MAX_EPISODES}"))]
    pub test_episodes: usize,
    /// Tree GP: probability that a node of a new tree or subtree becomes an extra output node.
    #[arg(long, default_value_t = defaults::CONTROL_P_OUT)]
    pub p_out: f32,
    /// Training only: healthy (alive) reward per step instead of the environment's. Default: 0
    /// for environments that end when the robot falls (Hopper, Walker2d, whose own bonus of 1
    /// makes standing still a local optimum; ARS trains the same way), the env's otherwise.
    /// Reported returns always use the env's reward; `--healthy-reward 1` trains on it.
    #[arg(long)]
    pub healthy_reward: Option<f64>,
    /// Every generation plays fresh starts (new reset noise each generation, the same for the
    /// whole population) instead of the same `--episodes` starts throughout, which policies can
    /// come to fit.
    #[arg(long)]
    pub fresh_starts: bool,
    /// Episodes on which the reported policy is chosen, by the env's own return, among the
    /// run's best and the last population's fittest distinct programs (16 in all); 0: the
    /// run's best by training fitness.
    #[arg(long, default_value_t = defaults::CONTROL_VALIDATION_EPISODES, help = format!(
        "Episodes on which the reported policy is chosen, by the env's own return, among the run's best and the last population's fittest distinct programs (16 in all); 0: the run's best by training fitness; at most {MAX_EPISODES}"
    ))]
    pub validation_episodes: usize,
    /// What to train: program (evolved, actions = tanh of its outputs), linear (actions =
    /// tanh(W (o - mean) / std) over the observations' running mean and deviation, W tuned by
    /// augmented random search, Mania et al. 2018; --gens counts its iterations) or residual
    /// (the linear policy for --linear-iterations, then programs over the normalised
    /// observations evolved for --gens generations and added to it: tanh(W n + f(n))).
    #[arg(long, value_enum, default_value_t = PolicyKind::Program)]
    pub policy: PolicyKind,
    /// --policy linear: random directions per iteration (each plays two policies).
    #[arg(long, help = format!(
        "--policy linear and residual: random directions per iteration, each playing two policies, 1 to {} [default: {} on the CPU, {} on a GPU]",
        crate::evolve::ars::MAX_DIRECTIONS, defaults::LINEAR_CPU.directions, defaults::LINEAR_GPU.directions
    ))]
    pub directions: Option<usize>,
    /// --policy linear: the directions whose better return is highest make each step.
    #[arg(long, help = format!(
        "--policy linear and residual: the directions with the highest better return that make each step, 1 to --directions [default: {} on the CPU, {} on a GPU]",
        defaults::LINEAR_CPU.top, defaults::LINEAR_GPU.top
    ))]
    pub top_directions: Option<usize>,
    /// --policy linear: step size (the step is scaled by the spread of the returns used).
    #[arg(long, help = format!(
        "--policy linear and residual: step size (the step is divided by the spread of the returns it uses) [default: {} on the CPU, {} on a GPU]",
        defaults::LINEAR_CPU.step_size, defaults::LINEAR_GPU.step_size
    ))]
    pub step_size: Option<f64>,
    /// --policy linear: standard deviation of the random changes of W that are played.
    #[arg(long, help = format!(
        "--policy linear and residual: standard deviation of the random changes of W that are played [default: {} on the CPU, {} on a GPU]",
        defaults::LINEAR_CPU.noise, defaults::LINEAR_GPU.noise
    ))]
    pub noise: Option<f64>,
    /// --policy residual: iterations of the linear policy's search before the programs'.
    #[arg(long, help = format!(
        "--policy residual: iterations of the linear policy's random search before the programs are evolved on top of it (--gens generations), 1 to {} [default: {} on the CPU, {} on a GPU]",
        crate::task::control::MAX_LINEAR_ITERATIONS, defaults::LINEAR_ITERATIONS_CPU, defaults::LINEAR_ITERATIONS_GPU
    ))]
    pub linear_iterations: Option<usize>,
    /// --policy residual: tune the linear policy again after every this many generations.
    #[arg(long, default_value_t = 0, help = "--policy residual: after every this many generations, tune the linear policy under the programs again with the generation's best program on top (0: never)")]
    pub head_every: usize,
    /// --policy residual: iterations of each tuning.
    #[arg(long, default_value_t = defaults::HEAD_ITERATIONS, help = "--policy residual with --head-every: iterations of the random search in each tuning of the linear policy")]
    pub head_iterations: usize,
    /// --policy program: read each observation normalised by the running mean and deviation of
    /// every state the population has visited.
    #[arg(long, value_name = "on|off", value_parser = clap::builder::BoolishValueParser::new(), help = "--policy program: the programs read each observation normalised, (o - mean) / std, by the running mean and deviation of every state the population's policies have visited; the saved policy has the last generation's written in [default: on, off with --islands]")]
    pub normalise: Option<bool>,
    /// Grammatical evolution settings.
    #[command(flatten)]
    pub ge: GeArgs,
    /// Islands and migration.
    #[command(flatten)]
    pub islands: IslandArgs,
    /// The run's budget.
    #[command(flatten)]
    pub budget: BudgetArgs,
    /// Results (the report's policy is what `grove rollout --policy` replays) and how to run.
    #[command(flatten)]
    pub run: RunFlags,
}

impl ControlArgs {
    /// The run's settings (as stored in the report), with the defaults of `on_gpu`'s device.
    pub fn settings(&self, on_gpu: bool) -> Result<ControlSettings> {
        let (d, episodes) = if on_gpu { (CONTROL_GPU, CONTROL_GPU_EPISODES) } else { (CONTROL_CPU, CONTROL_CPU_EPISODES) };
        let ge = self.ge.configs();
        let base = ControlSettings::default();
        let e = &self.engine;
        let s = ControlSettings {
            env: self.env.clone(),
            profile: self.profile.clone(),
            grammar: self.grammar.as_ref().map(|p| p.display().to_string()),
            functions: if self.grammar.is_some() { None } else { Some(self.functions.clone()) },
            operators: self.define.clone(),
            engine: e.config(&d, None, base.engine.constants),
            map: ge.map,
            init: ge.init,
            vary: ge.vary,
            genome_capacity: ge.genome_capacity,
            episodes: self.episodes.unwrap_or(episodes),
            episode_steps: self.episode_steps,
            test_episodes: self.test_episodes,
            parsimony: e.parsimony,
            healthy_reward: self.healthy_reward,
            fresh_starts: self.fresh_starts,
            validation_episodes: self.validation_episodes,
            trees: ClassTreeSettings { p_out: self.p_out, ..base.trees },
            device: e.device,
            islands: self.islands.config(),
            budget: self.budget.config(),
            policy: self.policy,
            linear: {
                let d = if on_gpu { defaults::LINEAR_GPU } else { defaults::LINEAR_CPU };
                let directions = self.directions.unwrap_or(d.directions);
                // A smaller --directions alone keeps the default's share of them.
                let top = self.top_directions.unwrap_or(if self.directions.is_some() { crate::task::control::linear_top(directions, &d) } else { d.top });
                crate::evolve::ars::ArsConfig { directions, top, step_size: self.step_size.unwrap_or(d.step_size), noise: self.noise.unwrap_or(d.noise) }
            },
            linear_iterations: self
                .linear_iterations
                .unwrap_or(if on_gpu { defaults::LINEAR_ITERATIONS_GPU } else { defaults::LINEAR_ITERATIONS_CPU }),
            head_every: self.head_every,
            head_iterations: self.head_iterations,
            normalise: self.normalise.unwrap_or(crate::task::control::default_normalise(self.policy, self.islands.config().count)),
        };
        if self.normalise == Some(false) && self.policy != PolicyKind::Program {
            anyhow::bail!("--normalise off is for --policy program; a {} policy always reads normalised observations", format!("{:?}", self.policy).to_lowercase());
        }
        s.check()?;
        Ok(s)
    }
}

/// `grove control`: opens the device first (its defaults depend on it), then runs as every
/// command that evolves does ([`super::run::run_experiment`]), on that device.
pub fn control(args: &ControlArgs) -> Result<ExitCode> {
    use crate::task::control::{fit, open_on};
    let backend = open_on(&args.env, args.profile.as_deref(), args.engine.device, &args.islands.gpus, args.run.quiet)?;
    let settings = args.settings(backend.is_gpu())?;
    let (opts, outputs) = super::run::run_options(&args.run, None, &Experiment::Control(settings.clone()))?;
    let result = crate::task::base::options::on_threads(args.run.threads, || fit(&settings, &backend, &opts))?;
    super::run::finish_run(&result, &outputs)
}
