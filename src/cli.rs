//! The command line: clap definitions (doc comments are the help text) and dispatch.

use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::genome::{Codons, MapConfig};
use crate::task::experiment::Experiment;
use crate::task::run::Checkpoint;
use crate::grammar::DatasetShape;

/// grove: grammatical evolution and tree genetic programming on the GPU.
#[derive(Debug, Parser)]
#[command(name = "grove", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Parse and check a grammar, then print a summary of its rules and compiled table.
    Check(CheckArgs),
    /// Map genomes (one per line on standard input, codons separated by commas) to programs.
    Map(MapArgs),
    /// Evolve a formula for a data set (symbolic regression), from a grammar or a function set.
    Evolve(Box<EvolveArgs>),
    /// Evolve a classifier (one output per class, argmax) for a labelled data set.
    Classify(Box<ClassifyArgs>),
    /// Apply the best program saved in a run report to the rows of a data file.
    Predict(PredictArgs),
    /// Measure throughput (mapping, the CPU interpreter; with --gpu the CUDA evaluator) and print a table.
    Bench(BenchArgs),
    /// Evolve a control policy (one output per actuator, actions = tanh) for a simulated robot.
    Control(Box<ControlArgs>),
    /// Replay actions or an evolved policy in a simulated environment and write the state after
    /// every control step.
    Rollout(RolloutArgs),
    /// Run an experiment file (RON), repeat the run of a report (--from) or continue a
    /// checkpoint (--resume); flags override the file's settings.
    Run(Box<RunArgs>),
    /// Draw the plots of a run report (fitness over generations, Pareto front, predicted
    /// against actual, confusion matrix) as PNG and SVG.
    Plot(PlotArgs),
    /// Print the best program of a report as a function in Python, Rust or C.
    Export(ExportArgs),
    /// Draw a robot's bodies over an episode: a strip of frames (.svg, .png) or an animation
    /// (.gif).
    Render(RenderArgs),
}

/// `grove render`.
#[derive(Debug, Args)]
pub struct RenderArgs {
    /// Environment: a shipped one (swimmer, hopper, walker2d, half_cheetah) or a .ron file
    /// (default with --policy: the policy's).
    #[arg(long)]
    pub env: Option<String>,
    /// Profile: brax (the default) or gymnasium (default with --policy: the policy's).
    #[arg(long)]
    pub profile: Option<String>,
    /// Actions from an evolved policy: a report of `grove control` (played in f32, as
    /// trained: the episode `grove rollout --policy` replays).
    #[arg(long, value_name = "REPORT", conflicts_with = "actions")]
    pub policy: Option<PathBuf>,
    /// Actions from a CSV file, one row per control step (default: zeros).
    #[arg(long, value_name = "FILE")]
    pub actions: Option<PathBuf>,
    /// The picture: .svg or .png (a strip of frames) or .gif (an animation).
    #[arg(long)]
    pub out: PathBuf,
    /// Control steps (default: the action file's rows, else the episode length).
    #[arg(long)]
    pub steps: Option<usize>,
    /// Frames in a strip.
    #[arg(long, default_value_t = 8)]
    pub frames: usize,
    /// An animation shows every N-th control step.
    #[arg(long, default_value_t = 2)]
    pub every: usize,
    /// Reset-noise seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Start at the rest pose instead of adding reset noise.
    #[arg(long)]
    pub no_noise: bool,
}

/// `grove export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// A JSON report written by `grove evolve`, `classify` or `run` with --report.
    #[arg(long)]
    pub model: PathBuf,
    /// The language.
    #[arg(long, value_enum)]
    pub lang: crate::program::export::Lang,
    /// Write the source here instead of standard output.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// Where a run's results go and how it runs: shared by every command that evolves.
#[derive(Clone, Debug, Default, Args)]
pub struct RunFlags {
    /// Write the JSON run report here (`grove predict --model`, `grove plot` and `grove run
    /// --from` read it).
    #[arg(long, value_name = "PATH")]
    pub report: Option<PathBuf>,
    /// Write plots (PNG and SVG) into this directory.
    #[arg(long, value_name = "DIR")]
    pub plots: Option<PathBuf>,
    /// Write the hall of fame (best program of each size: complexity, loss, equation, latex,
    /// sympy) as CSV here.
    #[arg(long, value_name = "PATH")]
    pub hall_of_fame: Option<PathBuf>,
    /// Save a checkpoint here every --checkpoint-every generations and on Ctrl-C (continue
    /// with `grove run --resume PATH`).
    #[arg(long, value_name = "PATH")]
    pub checkpoint: Option<PathBuf>,
    /// Generations between checkpoints (default 10; a resumed run keeps its own).
    #[arg(long, value_name = "N")]
    pub checkpoint_every: Option<usize>,
    /// Worker threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Print only the result.
    #[arg(long, short, conflicts_with = "verbose")]
    pub quiet: bool,
    /// Print a line per generation and where checkpoints go.
    #[arg(long, short)]
    pub verbose: bool,
}

/// `grove run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// An experiment file (RON), e.g. examples/w1-pagie1.ron.
    #[arg(value_name = "FILE", conflicts_with_all = ["from", "resume"])]
    pub file: Option<PathBuf>,
    /// Repeat the run of this report (its command and complete settings).
    #[arg(long, value_name = "REPORT", conflicts_with = "resume")]
    pub from: Option<PathBuf>,
    /// Continue the run saved in this checkpoint (and keep saving to it).
    #[arg(long, value_name = "CHECKPOINT")]
    pub resume: Option<PathBuf>,
    /// Override the population size (engine.pop_size).
    #[arg(long)]
    pub pop: Option<usize>,
    /// Override the generations (engine.generations); with --resume, run longer or shorter.
    #[arg(long)]
    pub gens: Option<usize>,
    /// Override the seed (engine.seed).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Override the data (data).
    #[arg(long)]
    pub data: Option<String>,
    /// Override where to evaluate (device): auto, cpu, cuda.
    #[arg(long, value_enum)]
    pub device: Option<crate::backend::DeviceChoice>,
    /// Override the number of islands (islands.count); a checkpoint resumes only on its own.
    #[arg(long, value_name = "N")]
    pub islands: Option<usize>,
    /// Override the GPUs the islands use (islands.gpus: all, N or a list); with --resume too.
    #[arg(long, value_name = "all|N|LIST")]
    pub gpus: Option<crate::evolve::islands::Gpus>,
    /// Set any field of the settings: `--set engine.tournament=7` (the value is read as JSON,
    /// else as text). May be repeated.
    #[arg(long = "set", value_name = "FIELD=VALUE")]
    pub set: Vec<String>,
    /// Results and how to run.
    #[command(flatten)]
    pub flags: RunFlags,
}

/// `grove plot`.
#[derive(Debug, Args)]
pub struct PlotArgs {
    /// A JSON report written with --report.
    pub report: PathBuf,
    /// Directory for the plots.
    #[arg(long, default_value = "plots")]
    pub out: PathBuf,
}

/// `grove rollout`.
#[derive(Debug, Args)]
pub struct RolloutArgs {
    /// Environment: a shipped one (swimmer, hopper, walker2d, half_cheetah) or a path to a .ron
    /// file (default with --policy: the report's).
    #[arg(long)]
    pub env: Option<String>,
    /// Profile: brax (the default of the shipped envs) or gymnasium (default with --policy: the
    /// report's).
    #[arg(long)]
    pub profile: Option<String>,
    /// Actions: CSV, one row per control step, one column per actuator (default: zeros).
    #[arg(long, conflicts_with = "policy")]
    pub actions: Option<PathBuf>,
    /// A report written by `grove control --report`: its best policy chooses the actions
    /// (actions = tanh of the program's outputs, as in training; the roll-out runs in f32).
    #[arg(long)]
    pub policy: Option<PathBuf>,
    /// Write `step,q...,v...,reward,done` rows here (row 0 is the reset state; qpos and qvel in
    /// MuJoCo's order).
    #[arg(long)]
    pub states: Option<PathBuf>,
    /// Start at the rest pose instead of adding reset noise.
    #[arg(long)]
    pub no_noise: bool,
    /// Reset-noise seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Control steps (default: the action file's rows, else the episode length).
    #[arg(long)]
    pub steps: Option<usize>,
    /// Keep stepping after the episode terminates.
    #[arg(long)]
    pub ignore_termination: bool,
    /// Step in f32 (what the GPU computes) instead of f64.
    #[arg(long)]
    pub f32: bool,
    /// Cap on projected Gauss-Seidel sweeps per constraint solve (default: the env's).
    #[arg(long)]
    pub solver_iterations: Option<usize>,
    /// Print the compiled model's constants as JSON and exit.
    #[arg(long)]
    pub print_model: bool,
    /// Where to play: cpu, or cuda (the GPU's simulator and control kernels, in f32: the same
    /// return as `--f32` on the CPU; no --states or --ignore-termination with fixed actions).
    #[arg(long, value_enum, default_value = "cpu")]
    pub device: crate::backend::DeviceChoice,
}

/// How the first GE generation is made.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum InitArg {
    /// Uniformly random genomes of --genome-length codons.
    Random,
    /// Ramped half-and-half over derivation trees (PonyGE2's sensible initialisation).
    Sensible,
}

/// `grove evolve`.
#[derive(Debug, Args)]
pub struct EvolveArgs {
    /// Data: `builtin:NAME[:N]` (pagie1, sextic, quartic, koza1, nguyen7, keijzer6,
    /// vladislavleva4) or a CSV / tab-separated file with a header.
    #[arg(long, default_value = "builtin:pagie1")]
    pub data: String,
    /// Target column (default: the last column).
    #[arg(long)]
    pub target: Option<String>,
    /// Grammar for grammatical evolution.
    #[arg(long, short, conflicts_with = "functions")]
    pub grammar: Option<PathBuf>,
    /// Function set for tree GP without a grammar, e.g. add,sub,mul,div,sin.
    #[arg(long)]
    pub functions: Option<String>,
    /// Population size.
    #[arg(long, default_value_t = 3000)]
    pub pop: usize,
    /// Generations.
    #[arg(long, default_value_t = 100)]
    pub gens: usize,
    /// Random seed: the same seed repeats the run exactly, whatever the thread count.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Fraction of rows held out as a test set (0: use the built-in's own test set, if any).
    #[arg(long, default_value_t = 0.0)]
    pub test_fraction: f64,
    /// Error to minimise.
    #[arg(long, value_enum, default_value = "mse")]
    pub metric: crate::task::regression::Metric,
    /// Do not fit a·f(x)+b by least squares before scoring.
    #[arg(long)]
    pub no_linear_scaling: bool,
    /// Fitness penalty per program node.
    #[arg(long, default_value_t = 0.0)]
    pub parsimony: f64,
    /// Constant fitting.
    #[command(flatten)]
    pub fitting: FitArgs,
    /// Tournament size.
    #[arg(long, default_value_t = 3)]
    pub tournament: usize,
    /// Best individuals copied unchanged to the next generation.
    #[arg(long, default_value_t = 1)]
    pub elite: usize,
    /// Longest program, in nodes.
    #[arg(long, default_value_t = 128)]
    pub max_len: usize,
    /// Choosing the returned program, bloat control.
    #[command(flatten)]
    pub choice: ChoiceArgs,
    /// Grammatical evolution settings.
    #[command(flatten)]
    pub ge: GeArgs,
    /// Islands and migration.
    #[command(flatten)]
    pub islands: IslandArgs,
    /// Where to evaluate: auto (CUDA if usable, else CPU), cpu, cuda.
    #[arg(long, value_enum, default_value = "auto", env = "GROVE_DEVICE")]
    pub device: crate::backend::DeviceChoice,
    /// Results and how to run.
    #[command(flatten)]
    pub run: RunFlags,
}

/// The island model, shared by every command that evolves.
#[derive(Clone, Debug, Args)]
pub struct IslandArgs {
    /// Islands: populations of --pop each that evolve side by side and exchange their best
    /// programs on a ring (1: one population).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub islands: usize,
    /// Generations between migrations (with --islands).
    #[arg(long, default_value_t = 5, value_name = "M")]
    pub migrate_every: usize,
    /// Programs each island sends to the next at a migration, replacing its worst (0: none).
    #[arg(long, default_value_t = 20, value_name = "K")]
    pub migrants: usize,
    /// GPUs the islands are spread over on a CUDA run: all, a number (the first N), or a list
    /// of device ordinals (0,2; a single one as 3,). Results do not depend on it.
    #[arg(long, default_value = "all", value_name = "all|N|LIST")]
    pub gpus: crate::evolve::islands::Gpus,
}

impl IslandArgs {
    /// The settings' `islands` block.
    pub fn config(&self) -> crate::evolve::IslandConfig {
        crate::evolve::IslandConfig { count: self.islands, migrate_every: self.migrate_every, migrants: self.migrants, gpus: self.gpus.clone() }
    }
}

/// How the returned program is chosen and how bloat is controlled, shared by `evolve` and
/// `classify`.
#[derive(Debug, Args)]
pub struct ChoiceArgs {
    /// Fraction of the training rows held out (seeded; per class for classify) to choose the
    /// returned program; never used for fitness [default: 0.25 with at least 300 training
    /// rows, else none].
    #[arg(long, value_name = "F")]
    pub validation_fraction: Option<f64>,
    /// How the returned program is chosen from the hall of fame's Pareto front (error against
    /// size).
    #[arg(long, value_enum, default_value = "auto")]
    pub select: crate::task::validation::Select,
    /// Bloat control by selection (the linear penalty is --parsimony).
    #[arg(long, value_enum, default_value = "none")]
    pub bloat: crate::select::Bloat,
    /// Double tournament's D, in [1, 2].
    #[arg(long, value_name = "D", default_value_t = crate::evolve::DEFAULT_SIZE_PRESSURE)]
    pub size_pressure: f64,
}

/// Settings of grammatical evolution, shared by `evolve` and `classify`.
#[derive(Debug, Args)]
pub struct GeArgs {
    /// GE: extra passes over the genome.
    #[arg(long, default_value_t = 0)]
    pub wraps: u32,
    /// GE: codon use at single-production rules.
    #[arg(long, value_enum, default_value = "eager")]
    pub codons: CodonsArg,
    /// GE: largest derivation depth (PonyGE2's count).
    #[arg(long, default_value_t = 17)]
    pub max_depth: u32,
    /// GE: initialisation.
    #[arg(long, value_enum, default_value = "sensible")]
    pub init: InitArg,
    /// GE: smallest and largest depth of sensible initialisation's ramp.
    #[arg(long, default_value = "3,8", value_parser = parse_range)]
    pub init_depth: (u32, u32),
    /// GE: genome length of random initialisation.
    #[arg(long, default_value_t = 128)]
    pub genome_length: usize,
    /// GE: longest genome crossover may make.
    #[arg(long, default_value_t = 512)]
    pub genome_capacity: usize,
    /// GE: probability of crossing a pair of parents.
    #[arg(long, default_value_t = 0.9)]
    pub crossover: f32,
    /// GE: per-codon mutation probability.
    #[arg(long, default_value_t = 0.02)]
    pub mutation: f32,
}

impl GeArgs {
    /// Checks the settings; returns the mapping, initialisation and variation configs and
    /// the genome capacity.
    pub fn configs(&self) -> Result<(MapConfig, crate::genome::InitConfig, crate::genome::vary::GeVaryConfig, usize)> {
        use crate::genome::{InitConfig, InitMethod};
        let codon_size = 1 << 16;
        Ok((
            MapConfig {
                max_wraps: self.wraps,
                codons: match self.codons {
                    CodonsArg::Eager => Codons::Eager,
                    CodonsArg::Lazy => Codons::Lazy,
                },
                max_depth: self.max_depth,
                max_nodes: u32::MAX,
            },
            InitConfig {
                method: match self.init {
                    InitArg::Random => InitMethod::Random,
                    InitArg::Sensible => InitMethod::Sensible,
                },
                length: self.genome_length,
                codon_size,
                min_depth: self.init_depth.0,
                max_depth: self.init_depth.1,
                tail_fraction: 0.5,
            },
            crate::genome::vary::GeVaryConfig { crossover: self.crossover, mutation: self.mutation, within_used: true, codon_size },
            self.genome_capacity.max(self.genome_length),
        ))
    }
}

fn parse_range(s: &str) -> Result<(u32, u32), String> {
    let (a, b) = s.split_once([',', '-', ':']).ok_or_else(|| format!("`{s}`: expected MIN,MAX"))?;
    let a: u32 = a.trim().parse().map_err(|_| format!("`{a}` is not a whole number"))?;
    let b: u32 = b.trim().parse().map_err(|_| format!("`{b}` is not a whole number"))?;
    if a > b || a == 0 {
        return Err(format!("`{s}`: need 1 <= MIN <= MAX"));
    }
    Ok((a, b))
}

/// Constant fitting by Levenberg–Marquardt (`grove evolve`, `grove classify`).
#[derive(Debug, Args)]
pub struct FitArgs {
    /// Levenberg–Marquardt steps fitting the numeric constants of the best programs on the
    /// training rows (regression: the squared error, with the scale and offset of linear
    /// scaling; classification: the softmax cross-entropy); 0: no fitting [default: evolve 10
    /// on a GPU and 0 on the CPU, where the fit costs many times a plain run; classify 0]
    #[arg(long, value_name = "STEPS")]
    pub optimise_constants: Option<u32>,
    /// Generations between constant fits (1: every generation) [default: 5]
    #[arg(long, value_name = "G")]
    pub optimise_every: Option<usize>,
    /// Fraction of the population whose constants are fitted, the best first [default: 0.2]
    #[arg(long, value_name = "F")]
    pub optimise_fraction: Option<f64>,
}

impl FitArgs {
    /// Constant fitting as asked, each setting not given taken from `defaults(on_gpu)` for
    /// the device the run will use.
    fn config(&self, device: crate::backend::DeviceChoice, defaults: fn(bool) -> crate::evolve::ConstantFitting) -> crate::evolve::ConstantFitting {
        let d = defaults(device.has_gpu());
        crate::evolve::ConstantFitting {
            steps: self.optimise_constants.unwrap_or(d.steps),
            every: self.optimise_every.unwrap_or(d.every),
            fraction: self.optimise_fraction.unwrap_or(d.fraction),
        }
    }
}

impl EvolveArgs {
    /// The run's settings (as stored in the report), checked.
    pub fn settings(&self) -> anyhow::Result<crate::task::regression::EvolveSettings> {
        let (map, init, vary, genome_capacity) = self.ge.configs()?;
        let s = crate::task::regression::EvolveSettings {
            data: self.data.clone(),
            target: self.target.clone(),
            test_fraction: self.test_fraction,
            validation_fraction: self.choice.validation_fraction,
            select: self.choice.select,
            grammar: self.grammar.as_ref().map(|p| p.display().to_string()),
            functions: self.functions.clone(),
            engine: crate::evolve::EngineConfig {
                pop_size: self.pop,
                generations: self.gens,
                seed: self.seed,
                tournament: self.tournament,
                elite: self.elite.min(self.pop),
                max_len: self.max_len,
                bloat: self.choice.bloat,
                size_pressure: self.choice.size_pressure,
                constants: self.fitting.config(self.device, crate::task::regression::default_fit),
            },
            map,
            init,
            vary,
            genome_capacity,
            regression: crate::task::regression::RegressionConfig {
                metric: self.metric,
                linear_scaling: !self.no_linear_scaling,
                parsimony: self.parsimony,
            },
            trees: crate::task::regression::TreeSettings::default(),
            device: self.device,
            islands: self.islands.config(),
        };
        s.check()?;
        Ok(s)
    }
}

fn evolve(args: &EvolveArgs) -> Result<ExitCode> {
    run_experiment(Experiment::Evolve(args.settings()?), &args.run, None)
}

/// Runs an experiment on the requested threads (Ctrl-C saves a checkpoint and stops when
/// checkpoints are on), then writes the report, hall of fame and plots and prints the summary.
pub fn run_experiment(exp: Experiment, flags: &RunFlags, resume: Option<(PathBuf, Checkpoint)>) -> Result<ExitCode> {
    let opts = run_options(flags, resume)?;
    let result = crate::task::run::run_experiment(&exp, &opts, flags.threads)?;
    finish_run(&result, flags)
}

/// How a run goes as `flags` say: quiet or verbose, checkpoints (into the resumed checkpoint's
/// file and at its interval unless the flags say otherwise), and with checkpoints a Ctrl-C
/// that saves one and stops.
fn run_options(flags: &RunFlags, resume: Option<(PathBuf, Checkpoint)>) -> Result<crate::task::run::RunOptions> {
    let every = flags.checkpoint_every.or(resume.as_ref().map(|r| r.1.checkpoint_every)).unwrap_or(10);
    anyhow::ensure!(every >= 1, "--checkpoint-every must be at least 1");
    let checkpoint = flags.checkpoint.clone().or_else(|| resume.as_ref().map(|r| r.0.clone()));
    let stop = match &checkpoint {
        Some(_) => Some(ctrl_c_flag()?),
        None => None,
    };
    Ok(crate::task::run::RunOptions {
        quiet: flags.quiet,
        verbose: flags.verbose,
        checkpoint,
        checkpoint_every: every,
        resume: resume.map(|r| r.1),
        stop,
    })
}

/// Writes the report, hall of fame and plots `flags` ask for and prints the summary.
fn finish_run(result: &crate::task::regression::EvolveResult, flags: &RunFlags) -> Result<ExitCode> {
    use crate::task::run::Outputs;
    let outputs = Outputs { report: flags.report.clone(), hall_of_fame: flags.hall_of_fame.clone(), plots: flags.plots.clone() };
    print_result(result, &crate::task::run::write_outputs(&result.report, &outputs)?);
    Ok(ExitCode::SUCCESS)
}

/// Prints a run's summary and the files it wrote.
fn print_result(result: &crate::task::regression::EvolveResult, written: &[(&str, PathBuf)]) {
    println!("{}", result.summary);
    for (what, path) in written {
        println!("{what:<13} {}", path.display());
    }
}

/// A flag Ctrl-C sets: the run saves a checkpoint and stops between generations. A second
/// Ctrl-C quits at once (exit status 130). The handler is installed once per process; later
/// calls get the same flag, cleared.
fn ctrl_c_flag() -> Result<std::sync::Arc<std::sync::atomic::AtomicBool>> {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, OnceLock};
    static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();
    if let Some(f) = FLAG.get() {
        f.store(false, Ordering::SeqCst);
        return Ok(f.clone());
    }
    let flag = Arc::new(AtomicBool::new(false));
    let f = flag.clone();
    ctrlc::set_handler(move || {
        if f.swap(true, Ordering::SeqCst) {
            std::process::exit(130);
        }
        eprintln!("\nstopping after this generation to save a checkpoint (Ctrl-C again quits at once)");
    })
    .context("cannot install the Ctrl-C handler")?;
    Ok(FLAG.get_or_init(|| flag).clone())
}

fn run_cmd(args: &RunArgs) -> Result<ExitCode> {
    use crate::task::experiment::{Overrides, from_source, resume};
    let overrides = Overrides {
        pop: args.pop,
        gens: args.gens,
        seed: args.seed,
        data: args.data.clone(),
        device: args.device,
        islands: args.islands,
        gpus: args.gpus.clone(),
        set: args.set.clone(),
    };
    if let Some(path) = &args.resume {
        let (exp, c) = resume(path, &overrides)?;
        return run_experiment(exp, &args.flags, Some((path.clone(), c)));
    }
    let exp = from_source(args.file.as_deref(), args.from.as_deref(), &overrides)?;
    run_experiment(exp, &args.flags, None)
}

fn export(args: &ExportArgs) -> Result<ExitCode> {
    let src = crate::task::tools::export(&args.model, args.lang)?;
    match &args.out {
        Some(p) => std::fs::write(p, src).with_context(|| format!("cannot write {}", p.display()))?,
        None => print!("{src}"),
    }
    Ok(ExitCode::SUCCESS)
}

fn render(args: &RenderArgs) -> Result<ExitCode> {
    let line = crate::task::tools::render(&crate::task::tools::RenderSettings {
        env: args.env.clone(),
        profile: args.profile.clone(),
        policy: args.policy.clone(),
        actions: args.actions.clone(),
        out: args.out.clone(),
        steps: args.steps,
        frames: args.frames,
        every: args.every,
        seed: (!args.no_noise).then_some(args.seed),
    })?;
    println!("{line}");
    Ok(ExitCode::SUCCESS)
}

fn plot(args: &PlotArgs) -> Result<ExitCode> {
    for p in crate::task::tools::plot(&args.report, &args.out)? {
        println!("{}", p.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// `grove classify`.
#[derive(Debug, Args)]
pub struct ClassifyArgs {
    /// Data: `builtin:NAME` (iris, wine, breast_cancer, digits) or a CSV / tab-separated file
    /// with a header and a column of class labels (integers or names).
    #[arg(long, default_value = "builtin:iris")]
    pub data: String,
    /// The class label column (default: the last column).
    #[arg(long)]
    pub label: Option<String>,
    /// Grammar for grammatical evolution (with `out(K, EXPR)` output nodes, e.g.
    /// grammars/classify.bnf).
    #[arg(long, short, conflicts_with = "functions")]
    pub grammar: Option<PathBuf>,
    /// Function set for tree GP with random output nodes (the default without --grammar).
    #[arg(long, default_value = "add,sub,mul,div")]
    pub functions: String,
    /// Population size.
    #[arg(long, default_value_t = 5000)]
    pub pop: usize,
    /// Generations.
    #[arg(long, default_value_t = 40)]
    pub gens: usize,
    /// Random seed (of evolution and of the train/test split).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Fraction of each class held out for testing (stratified split).
    #[arg(long, default_value_t = 0.25)]
    pub test_fraction: f64,
    /// What evolution minimises.
    #[arg(long, value_enum, default_value = "cross-entropy")]
    pub fitness: crate::task::classify::ClassFitness,
    /// Two classes only: one output, class 1 (the second in sorted order) where it is positive.
    #[arg(long)]
    pub binary: bool,
    /// Do not standardise the features (by default each is shifted and scaled by the training
    /// rows' mean and standard deviation, and the saved model repeats it).
    #[arg(long)]
    pub no_standardize: bool,
    /// Fitness penalty per program node.
    #[arg(long, default_value_t = 0.0)]
    pub parsimony: f64,
    /// Tournament size.
    #[arg(long, default_value_t = 3)]
    pub tournament: usize,
    /// Best individuals copied unchanged to the next generation.
    #[arg(long, default_value_t = 1)]
    pub elite: usize,
    /// Longest program, in nodes.
    #[arg(long, default_value_t = 64)]
    pub max_len: usize,
    /// Tree GP: probability that a node of a new tree or subtree becomes an extra output node.
    #[arg(long, default_value_t = 0.05)]
    pub p_out: f32,
    /// Constant fitting.
    #[command(flatten)]
    pub fitting: FitArgs,
    /// Choosing the returned program, bloat control.
    #[command(flatten)]
    pub choice: ChoiceArgs,
    /// Grammatical evolution settings.
    #[command(flatten)]
    pub ge: GeArgs,
    /// Islands and migration.
    #[command(flatten)]
    pub islands: IslandArgs,
    /// Where to evaluate: auto (CUDA if usable, else CPU), cpu, cuda.
    #[arg(long, value_enum, default_value = "auto", env = "GROVE_DEVICE")]
    pub device: crate::backend::DeviceChoice,
    /// Results and how to run.
    #[command(flatten)]
    pub run: RunFlags,
}

impl ClassifyArgs {
    /// The run's settings (as stored in the report).
    pub fn settings(&self) -> Result<crate::task::classify::ClassifySettings> {
        let (map, init, vary, genome_capacity) = self.ge.configs()?;
        let s = crate::task::classify::ClassifySettings {
            data: self.data.clone(),
            label: self.label.clone(),
            test_fraction: self.test_fraction,
            validation_fraction: self.choice.validation_fraction,
            select: self.choice.select,
            standardize: !self.no_standardize,
            grammar: self.grammar.as_ref().map(|p| p.display().to_string()),
            functions: if self.grammar.is_some() { None } else { Some(self.functions.clone()) },
            engine: crate::evolve::EngineConfig {
                pop_size: self.pop,
                generations: self.gens,
                seed: self.seed,
                tournament: self.tournament,
                elite: self.elite.min(self.pop),
                max_len: self.max_len,
                bloat: self.choice.bloat,
                size_pressure: self.choice.size_pressure,
                constants: self.fitting.config(self.device, crate::task::classify::default_fit),
            },
            map,
            init,
            vary,
            genome_capacity,
            fitness: self.fitness,
            binary: self.binary,
            parsimony: self.parsimony,
            trees: crate::task::classify::ClassTreeSettings { p_out: self.p_out, ..Default::default() },
            device: self.device,
            islands: self.islands.config(),
        };
        s.check()?;
        Ok(s)
    }
}

fn classify(args: &ClassifyArgs) -> Result<ExitCode> {
    run_experiment(Experiment::Classify(args.settings()?), &args.run, None)
}

/// `grove predict`.
#[derive(Debug, Args)]
pub struct PredictArgs {
    /// A JSON report written by `grove classify --report` or `grove evolve --report`.
    #[arg(long)]
    pub model: PathBuf,
    /// A CSV / tab-separated file with a header holding the model's feature columns (by name,
    /// in any order; other columns are ignored).
    #[arg(long)]
    pub data: PathBuf,
}

fn predict(args: &PredictArgs) -> Result<ExitCode> {
    let p = crate::task::tools::predict(&args.model, &args.data)?;
    let mut out = BufWriter::new(std::io::stdout().lock());
    writeln!(out, "prediction")?;
    for p in &p.predictions {
        writeln!(out, "{p}")?;
    }
    out.flush().context("cannot write standard output")?;
    if let Some(score) = p.score {
        eprintln!("{score}");
    }
    Ok(ExitCode::SUCCESS)
}

/// Options naming a grammar and the data-set shape its `GE_RANGE:dataset_*` productions need.
#[derive(Debug, Args)]
pub struct GrammarArgs {
    /// Number of input variables, for `GE_RANGE:dataset_n_vars`.
    #[arg(long, value_name = "N")]
    pub n_vars: Option<u32>,
    /// Number of inputs, for `GE_RANGE:dataset_n_is`.
    #[arg(long, value_name = "N")]
    pub n_inputs: Option<u32>,
    /// Number of outputs, for `GE_RANGE:dataset_n_os`.
    #[arg(long, value_name = "N")]
    pub n_outputs: Option<u32>,
}

impl GrammarArgs {
    fn shape(&self) -> DatasetShape {
        DatasetShape { n_vars: self.n_vars, n_is: self.n_inputs, n_os: self.n_outputs }
    }
}

/// `grove check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The grammar file (`.bnf`, or `.pybnf` for Python-indented output).
    pub grammar: PathBuf,
    /// Data-set shape for `GE_RANGE:dataset_*`.
    #[command(flatten)]
    pub shape: GrammarArgs,
}

/// Codon use at single-production rules.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum CodonsArg {
    /// One codon at every non-terminal (PonyGE2).
    Eager,
    /// No codon at a rule with one production (GEVA, libGE).
    Lazy,
}

/// Output format of `grove map`.
pub use crate::task::tools::MapFormat;

/// `grove map`.
#[derive(Debug, Args)]
pub struct MapArgs {
    /// The grammar file.
    #[arg(long, short)]
    pub grammar: PathBuf,
    /// Extra passes over the genome when codons run out (PonyGE2's MAX_WRAPS).
    #[arg(long, default_value_t = 0)]
    pub wraps: u32,
    /// Codon use at rules with a single production.
    #[arg(long, value_enum, default_value = "eager")]
    pub codons: CodonsArg,
    /// Largest tree depth (root = 1, leaf rows count); deeper trees are invalid.
    #[arg(long)]
    pub max_depth: Option<u32>,
    /// Largest node count; larger trees are invalid.
    #[arg(long)]
    pub max_nodes: Option<u32>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: MapFormat,
    /// Where to map: cpu (default), cuda (batches of genomes on the GPU; the same output), or
    /// auto (CUDA if usable, else CPU).
    #[arg(long, value_enum, default_value = "cpu")]
    pub device: crate::backend::DeviceChoice,
    /// Data-set shape for `GE_RANGE:dataset_*`.
    #[command(flatten)]
    pub shape: GrammarArgs,
}

/// `grove bench` and its parts (defined beside the benchmarks, which read them).
pub use crate::bench::{BenchArgs, GpuPart};

/// Parses the process arguments and runs the command.
pub fn run() -> Result<ExitCode> {
    let cli = Cli::parse();
    match cli.command {
        Command::Check(args) => check(&args),
        Command::Map(args) => map(&args),
        Command::Evolve(args) => evolve(&args),
        Command::Classify(args) => classify(&args),
        Command::Predict(args) => predict(&args),
        Command::Bench(args) => crate::bench::run(&args),
        Command::Control(args) => control(&args),
        Command::Rollout(args) => rollout(&args),
        Command::Run(args) => run_cmd(&args),
        Command::Plot(args) => plot(&args),
        Command::Export(args) => export(&args),
        Command::Render(args) => render(&args),
    }
}

fn rollout(args: &RolloutArgs) -> Result<ExitCode> {
    let settings = crate::task::tools::RolloutSettings {
        env: args.env.clone(),
        profile: args.profile.clone(),
        actions: args.actions.clone(),
        policy: args.policy.clone(),
        states: args.states.clone(),
        seed: (!args.no_noise).then_some(args.seed),
        steps: args.steps,
        ignore_termination: args.ignore_termination,
        f32: args.f32,
        solver_iterations: args.solver_iterations,
        device: match args.device {
            crate::backend::DeviceChoice::Auto if args.device.has_gpu() && args.states.is_none() => crate::backend::DeviceChoice::Cuda,
            crate::backend::DeviceChoice::Auto => crate::backend::DeviceChoice::Cpu,
            d => d,
        },
    };
    if args.print_model {
        let (model, _) = crate::task::tools::rollout_model(&settings)?;
        println!("{}", serde_json::to_string_pretty(&crate::sim::rollout::model_json(&model))?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("{}", crate::task::tools::rollout(&settings)?);
    Ok(ExitCode::SUCCESS)
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
    #[arg(long, default_value = "add,sub,mul,div")]
    pub functions: String,
    /// Population size [default: 200 on the CPU, 5000 on a GPU].
    #[arg(long)]
    pub pop: Option<usize>,
    /// Generations [default: 20 on the CPU, 100 on a GPU].
    #[arg(long)]
    pub gens: Option<usize>,
    /// Roll-outs per individual, from different reset noise; fitness is the mean return
    /// [default: 1 on the CPU, 4 on a GPU].
    #[arg(long)]
    pub episodes: Option<usize>,
    /// Control steps per episode (default: the environment's, 1000).
    #[arg(long)]
    pub episode_steps: Option<usize>,
    /// Fresh episodes the best policy is scored on at the end (on the CPU).
    #[arg(long, default_value_t = 10)]
    pub test_episodes: usize,
    /// Random seed (of evolution and of the reset noise).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Fitness penalty per program node (fitness is minus the mean return).
    #[arg(long, default_value_t = 0.0)]
    pub parsimony: f64,
    /// Tournament size.
    #[arg(long, default_value_t = 3)]
    pub tournament: usize,
    /// Best individuals copied unchanged to the next generation.
    #[arg(long, default_value_t = 1)]
    pub elite: usize,
    /// Longest program, in nodes.
    #[arg(long, default_value_t = 128)]
    pub max_len: usize,
    /// Tree GP: probability that a node of a new tree or subtree becomes an extra output node.
    #[arg(long, default_value_t = 0.1)]
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
    #[arg(long, default_value_t = 30)]
    pub validation_episodes: usize,
    /// Grammatical evolution settings.
    #[command(flatten)]
    pub ge: GeArgs,
    /// Islands and migration.
    #[command(flatten)]
    pub islands: IslandArgs,
    /// Where to run the roll-outs: auto (CUDA if usable, else CPU), cpu, cuda.
    #[arg(long, value_enum, default_value = "auto", env = "GROVE_DEVICE")]
    pub device: crate::backend::DeviceChoice,
    /// Results (the report's policy is what `grove rollout --policy` replays) and how to run.
    #[command(flatten)]
    pub run: RunFlags,
}

impl ControlArgs {
    /// The run's settings (as stored in the report), with the defaults of `on_gpu`'s device.
    pub fn settings(&self, on_gpu: bool) -> Result<crate::task::control::ControlSettings> {
        use crate::task::control::{ControlSettings, CPU_DEFAULTS, GPU_DEFAULTS};
        let d = if on_gpu { GPU_DEFAULTS } else { CPU_DEFAULTS };
        let pop = self.pop.unwrap_or(d.pop);
        let episodes = self.episodes.unwrap_or(d.episodes);
        let (map, init, vary, genome_capacity) = self.ge.configs()?;
        let base = ControlSettings::default();
        let s = ControlSettings {
            env: self.env.clone(),
            profile: self.profile.clone(),
            grammar: self.grammar.as_ref().map(|p| p.display().to_string()),
            functions: if self.grammar.is_some() { None } else { Some(self.functions.clone()) },
            engine: crate::evolve::EngineConfig {
                pop_size: pop,
                generations: self.gens.unwrap_or(d.gens),
                seed: self.seed,
                tournament: self.tournament,
                elite: self.elite.min(pop),
                max_len: self.max_len,
                ..Default::default()
            },
            map,
            init,
            vary,
            genome_capacity,
            episodes,
            episode_steps: self.episode_steps,
            test_episodes: self.test_episodes.max(1),
            parsimony: self.parsimony,
            healthy_reward: self.healthy_reward,
            fresh_starts: self.fresh_starts,
            validation_episodes: self.validation_episodes,
            trees: crate::task::classify::ClassTreeSettings { p_out: self.p_out, ..base.trees },
            device: self.device,
            islands: self.islands.config(),
        };
        s.check()?;
        Ok(s)
    }
}

/// `grove control`: opens the device first (its defaults depend on it), then runs as every
/// command that evolves does ([`run_experiment`]), on that device.
fn control(args: &ControlArgs) -> Result<ExitCode> {
    use crate::task::control::{control_with, open_on};
    let backend = open_on(&args.env, args.profile.as_deref(), args.device, &args.islands.gpus, args.run.quiet)?;
    let settings = args.settings(matches!(backend, crate::backend::Backend::Cuda(_)))?;
    let opts = run_options(&args.run, None)?;
    let result = crate::task::run::on_threads(args.run.threads, || control_with(&settings, &backend, &opts))?;
    finish_run(&result, &args.run)
}

fn check(args: &CheckArgs) -> Result<ExitCode> {
    let report = crate::task::tools::check(&args.grammar, &args.shape.shape())?;
    for d in &report.diagnostics {
        eprintln!("{d}");
    }
    print!("{}", report.summary);
    Ok(ExitCode::SUCCESS)
}

/// Parses one genome line: codons separated by commas and/or spaces, optionally in brackets.
pub use crate::task::tools::parse_genome;

fn map(args: &MapArgs) -> Result<ExitCode> {
    let config = MapConfig {
        max_wraps: args.wraps,
        codons: match args.codons {
            CodonsArg::Eager => Codons::Eager,
            CodonsArg::Lazy => Codons::Lazy,
        },
        max_depth: args.max_depth.unwrap_or(u32::MAX),
        max_nodes: args.max_nodes.unwrap_or(u32::MAX),
    };
    let mut out = BufWriter::new(std::io::stdout().lock());
    let settings =
        crate::task::tools::MapSettings { grammar: args.grammar.clone(), shape: args.shape.shape(), config, device: args.device, format: args.format };
    let bad = crate::task::tools::map_stream(&settings, std::io::stdin().lock(), &mut out, |line| eprintln!("{line}"))?;
    out.flush().context("cannot write standard output")?;
    Ok(if bad > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}
