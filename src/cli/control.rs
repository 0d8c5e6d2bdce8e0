//! `grove control`: a control policy (one output per actuator, actions = tanh) for a simulated
//! robot. Its population, generations and episodes default to the device's, so the device is
//! opened before the settings are made.

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use super::args::{BudgetArgs, EngineArgs, EngineHelp, GeArgs, IslandArgs, Overlay, RepresentationArgs, RepresentationHelp, RunFlags};
use crate::task::control::{ControlSettings, MAX_EPISODE_STEPS, MAX_EPISODES, PolicyKind};
use crate::task::base::defaults::{self, CONTROL_CPU, CONTROL_CPU_EPISODES, CONTROL_GPU, CONTROL_GPU_EPISODES};
use crate::task::runner::experiment::Experiment;

/// The engine and representation groups' defaults and help in `grove control`.
#[derive(Debug)]
pub struct Control;

impl EngineHelp for Control {
    const DEFAULTS: defaults::EngineDefaults = CONTROL_CPU;
    const GPU_DEFAULTS: Option<defaults::EngineDefaults> = Some(CONTROL_GPU);
    const SEED: &'static str = "Random seed (of evolution and of the reset noise)";
    const PARSIMONY: &'static str = "Fitness penalty per program node (fitness is minus the mean return)";
    const DEVICE: &'static str = "Where to run the roll-outs: auto (CUDA if usable, else CPU), cpu, cuda";
}

impl RepresentationHelp for Control {
    const GRAMMAR: &'static str = "Grammar for grammatical evolution, with one `out(K, EXPR)` per actuator (e.g. grammars/swimmer.bnf; observations are x[:, i] or their names, q_JOINT, v_JOINT, z_BODY)";
    const FUNCTIONS: &'static str = "Function set for tree GP with output nodes (the default without --grammar)";
    const DEFAULT_FUNCTIONS: Option<&'static str> = Some(defaults::FUNCTIONS);
}

/// `grove control`.
#[derive(Debug, Args)]
pub struct ControlArgs {
    /// Environment: swimmer, hopper, walker2d, half_cheetah, or a path to an environment .ron file.
    #[arg(long, help_heading = "Environment")]
    pub env: String,
    /// Profile: brax (the default of the shipped envs) or gymnasium.
    #[arg(long, help_heading = "Environment")]
    pub profile: Option<String>,
    /// Grammar or function set, operators of one's own.
    #[command(flatten, next_help_heading = "Representation")]
    pub representation: RepresentationArgs<Control>,
    /// Tree GP: probability that a node of a new tree or subtree becomes an extra output node.
    #[arg(long, allow_negative_numbers = true, default_value_t = defaults::CONTROL_P_OUT, help_heading = "Representation")]
    pub p_out: f32,
    /// Population, generations, seed, selection, program length, device.
    #[command(flatten, next_help_heading = "Search")]
    pub engine: EngineArgs<Control>,
    // The device's default without the flag.
    #[arg(long, help_heading = "Episodes", help = format!(
        "Roll-outs per individual, from different reset noise; fitness is the mean return; 1 to {MAX_EPISODES} [default: {CONTROL_CPU_EPISODES} on the CPU, {CONTROL_GPU_EPISODES} on a GPU]"
    ))]
    pub(crate) episodes: Option<usize>,
    #[arg(long, help_heading = "Episodes", help = format!("Control steps per episode, 1 to {MAX_EPISODE_STEPS} (default: the environment's, 1000)"))]
    pub(crate) episode_steps: Option<usize>,
    #[arg(long, help_heading = "Episodes", default_value_t = defaults::CONTROL_TEST_EPISODES, help = format!(
        "Fresh episodes the best policy is scored on at the end (on the CPU), 1 to {MAX_EPISODES}"
    ))]
    pub(crate) test_episodes: usize,
    #[arg(long, help_heading = "Episodes", default_value_t = defaults::CONTROL_VALIDATION_EPISODES, help = format!(
        "Episodes on which the reported policy is chosen, by the env's own return (its mean less one standard deviation), among the run's best and the last population's fittest distinct programs ({} in all); 0: the run's best by training fitness; at most {MAX_EPISODES}",
        crate::task::control::VALIDATION_CANDIDATES
    ))]
    pub(crate) validation_episodes: usize,
    /// Training only: healthy (alive) reward per step instead of the environment's. Default: 0
    /// for environments that end when the robot falls (Hopper, Walker2d, whose own bonus of 1
    /// makes standing still a local optimum; ARS trains the same way), the env's otherwise.
    /// Reported returns always use the env's reward; `--healthy-reward 1` trains on it.
    #[arg(long, allow_negative_numbers = true, help_heading = "Episodes")]
    pub healthy_reward: Option<f64>,
    /// Every generation plays fresh starts (new reset noise each generation, the same for the
    /// whole population) instead of the same `--episodes` starts throughout, which policies can
    /// come to fit.
    #[arg(long, help_heading = "Episodes")]
    pub fresh_starts: bool,
    /// What to train: program (evolved, actions = tanh of its outputs), linear (actions =
    /// tanh(W (o - mean) / std) over the observations' running mean and deviation, W tuned by
    /// augmented random search, Mania et al. 2018; --gens counts its iterations) or residual
    /// (the linear policy for --linear-iterations, then programs over the normalised
    /// observations evolved for --gens generations and added to it: tanh(W n + f(n))).
    #[arg(long, value_enum, default_value_t = PolicyKind::default(), help_heading = "Policy")]
    pub policy: PolicyKind,
    // This and the three below: the device's defaults without the flag.
    #[arg(long, help_heading = "Policy", help = format!(
        "--policy linear and residual: random directions per iteration, each playing two policies, 1 to {} [default: {} on the CPU, {} on a GPU ({} in each of --policy linear's {} searches side by side)]",
        crate::evolve::ars::MAX_DIRECTIONS, defaults::LINEAR_CPU.directions, defaults::LINEAR_GPU.directions, defaults::LINEAR_GPU_SIDE.directions, defaults::LINEAR_GPU_SEARCHES
    ))]
    pub(crate) directions: Option<usize>,
    #[arg(long, help_heading = "Policy", help = format!(
        "--policy linear and residual: the directions with the highest better return that make each step, 1 to --directions [default: {} on the CPU, {} on a GPU; with --directions alone, the same share of them]",
        defaults::LINEAR_CPU.top, defaults::LINEAR_GPU.top
    ))]
    pub(crate) top_directions: Option<usize>,
    #[arg(long, allow_negative_numbers = true, help_heading = "Policy", help = format!(
        "--policy linear and residual: step size (the step is divided by the spread of the returns it uses) [default: {} on the CPU, {} on a GPU]",
        defaults::LINEAR_CPU.step_size, defaults::LINEAR_GPU.step_size
    ))]
    pub(crate) step_size: Option<f64>,
    #[arg(long, allow_negative_numbers = true, help_heading = "Policy", help = format!(
        "--policy linear and residual: standard deviation of the random changes of W that are played [default: {} on the CPU, {} on a GPU]",
        defaults::LINEAR_CPU.noise, defaults::LINEAR_GPU.noise
    ))]
    pub(crate) noise: Option<f64>,
    #[arg(long, help_heading = "Policy", help = format!(
        "--policy linear: random searches run side by side, 1 to {}, each drawing its own directions, their policies played together in one roll-out call an iteration; the one whose last policy has the highest mean return over --validation-episodes fresh episodes (its training return with 0) is reported [default: {} on the CPU; on a GPU {} of --directions {} --top-directions {} unless --directions or --top-directions is given, else {}; on a GPU 2 or more given keep those directions unless they are given]",
        crate::task::control::settings::MAX_SEARCHES, defaults::LINEAR_SEARCHES, defaults::LINEAR_GPU_SEARCHES, defaults::LINEAR_GPU_SIDE.directions, defaults::LINEAR_GPU_SIDE.top, defaults::LINEAR_SEARCHES
    ))]
    pub(crate) searches: Option<usize>,
    #[arg(long, help_heading = "Policy", value_name = "E", help = format!(
        "--policy linear with --searches 2 or more: after every E iterations the worse half of the searches take the better half's W and statistics (ranked by their unperturbed returns over the last {} iterations) and go on with their own directions; 0: never [default: 0]",
        crate::task::control::linear::EXPLOIT_WINDOW
    ))]
    pub(crate) exploit_every: Option<usize>,
    #[arg(long, help_heading = "Policy", help = format!(
        "--policy residual: iterations of the linear policy's random search before the programs are evolved on top of it (--gens generations), 1 to {} [default: {} on the CPU, {} on a GPU]",
        crate::task::control::MAX_LINEAR_ITERATIONS, defaults::LINEAR_ITERATIONS_CPU, defaults::LINEAR_ITERATIONS_GPU
    ))]
    pub(crate) linear_iterations: Option<usize>,
    /// --policy residual: after every this many generations, tune the linear policy under the
    /// programs again with the generation's best program on top (0: never)
    #[arg(long, default_value_t = ControlSettings::default().head_every, help_heading = "Policy")]
    pub head_every: usize,
    /// --policy residual with --head-every: iterations of the random search in each tuning of
    /// the linear policy
    #[arg(long, default_value_t = defaults::HEAD_ITERATIONS, help_heading = "Policy")]
    pub head_iterations: usize,
    /// --policy program: the programs read each observation normalised, (o - mean) / std, by
    /// the running mean and deviation of every state the population's policies have visited;
    /// the saved policy has the last generation's written in [default: on, off with --islands]
    #[arg(long, value_name = "on|off", value_parser = clap::builder::BoolishValueParser::new(), help_heading = "Policy")]
    pub normalise: Option<bool>,
    /// Grammatical evolution settings.
    #[command(flatten, next_help_heading = "Grammatical evolution")]
    pub ge: GeArgs,
    /// Islands and migration.
    #[command(flatten, next_help_heading = "Islands")]
    pub islands: IslandArgs,
    /// The run's budget.
    #[command(flatten, next_help_heading = "Budget")]
    pub budget: BudgetArgs,
    /// Results (the report's policy is what `grove rollout --policy` replays) and how to run.
    #[command(flatten, next_help_heading = "Output and run")]
    pub run: RunFlags,
}

impl ControlArgs {
    /// The settings fields the flags give ([`Overlay`]); those whose defaults are the device's
    /// only where given.
    pub fn overlay(&self) -> Result<serde_json::Value> {
        let mut o = Overlay::default();
        o.set("env", &self.env);
        o.set("profile", &self.profile);
        self.representation.overlay(&mut o);
        o.number("--p-out", "trees.p_out", self.p_out.into())?;
        self.engine.overlay(&mut o, "parsimony")?;
        o.set_some("episodes", self.episodes);
        o.set("episode_steps", self.episode_steps);
        o.set("test_episodes", self.test_episodes);
        o.set("validation_episodes", self.validation_episodes);
        o.number_some("--healthy-reward", "healthy_reward", self.healthy_reward)?;
        o.set("fresh_starts", self.fresh_starts);
        o.set("policy", self.policy);
        o.set_some("linear.directions", self.directions);
        o.set_some("linear.top", self.top_directions);
        o.number_some("--step-size", "linear.step_size", self.step_size)?;
        o.number_some("--noise", "linear.noise", self.noise)?;
        o.set_some("searches", self.searches);
        o.set_some("exploit_every", self.exploit_every);
        o.set_some("linear_iterations", self.linear_iterations);
        o.set("head_every", self.head_every);
        o.set("head_iterations", self.head_iterations);
        o.set_some("normalise", self.normalise);
        self.ge.overlay(&mut o, self.representation.grammar.is_some())?;
        self.islands.overlay(&mut o);
        self.budget.overlay(&mut o)?;
        Ok(o.into_value())
    }

    /// The run's settings (as stored in the report): the flags laid over the defaults of a GPU
    /// (`on_gpu`) or the CPU, as an experiment file's fields are, checked.
    pub fn settings(&self, on_gpu: bool) -> Result<ControlSettings> {
        match Experiment::from_flags("control", self.overlay()?, Some(on_gpu))? {
            Experiment::Control(s) => Ok(s),
            other => anyhow::bail!("grove control made the settings of `{}`", other.command()),
        }
    }
}

/// `grove control`: opens the device first (its defaults depend on it), then runs as every
/// command that evolves does ([`super::run::run_experiment`]), on that device.
pub fn control(args: &ControlArgs) -> Result<ExitCode> {
    use crate::task::control::{fit, open_on};
    let backend = open_on(&args.env, args.profile.as_deref(), args.engine.device(), &args.islands.gpus, args.run.quiet)?;
    let settings = args.settings(backend.is_gpu())?;
    let (opts, outputs) = super::run::run_options(&args.run, None, &Experiment::Control(settings.clone()), &[])?;
    let result = crate::task::base::options::on_threads(args.run.threads, || fit(&settings, &backend, &opts))?;
    super::run::finish_run(&result, &outputs)
}
