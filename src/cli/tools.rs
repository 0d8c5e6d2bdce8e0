//! The commands around runs: `grove check` (a grammar), `grove map` (genomes to programs),
//! `grove predict` (a saved model on new rows) and `grove rollout` (a simulated episode).
//! `grove bench` is defined beside the benchmarks, in `crate::bench`.

use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;

use crate::backend::DeviceChoice;
use crate::genome::MapConfig;
use crate::grammar::DatasetShape;
use crate::task::runner::tools::MapFormat;

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
    /// The shape, each count checked against what it can mean: variables and inputs 1 to
    /// [`crate::grammar::MAX_RANGE`] (a `GE_RANGE` of more choices is refused anyway), outputs 1
    /// to 255 (a program's output slots).
    fn shape(&self) -> Result<DatasetShape> {
        let max = crate::grammar::MAX_RANGE as u32;
        for (flag, v, hi) in [("--n-vars", self.n_vars, max), ("--n-inputs", self.n_inputs, max), ("--n-outputs", self.n_outputs, u8::MAX as u32)] {
            if let Some(v) = v {
                anyhow::ensure!((1..=hi).contains(&v), "{flag} must be 1 to {hi}, got {v}");
            }
        }
        Ok(DatasetShape { n_vars: self.n_vars, n_is: self.n_inputs, n_os: self.n_outputs })
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
    /// The memory limit of the files read.
    #[command(flatten)]
    pub memory: MemoryArgs,
}

/// `grove map`.
#[derive(Debug, Args)]
pub struct MapArgs {
    /// The grammar file.
    #[arg(long, short)]
    pub grammar: PathBuf,
    /// Extra passes over the genome when codons run out (PonyGE2's MAX_WRAPS).
    #[arg(long, default_value_t = MapConfig::default().max_wraps, help = format!(
        "Extra passes over the genome when codons run out (PonyGE2's MAX_WRAPS), at most {}; genomes of at most {} codons",
        crate::task::base::search::MAX_WRAPS, crate::task::base::search::MAX_GENOME
    ))]
    pub wraps: u32,
    /// Codon use at rules with a single production.
    #[arg(long, value_enum, default_value_t = MapConfig::default().codons)]
    pub codons: crate::genome::Codons,
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
    pub device: DeviceChoice,
    /// Data-set shape for `GE_RANGE:dataset_*`.
    #[command(flatten)]
    pub shape: GrammarArgs,
    /// The most memory mapping may use (e.g. 2G, 512M; default: what the machine has
    /// available).
    #[arg(long, value_name = "SIZE", value_parser = crate::task::base::plan::parse_size, env = "GROVE_MAX_MEMORY")]
    pub max_memory: Option<u64>,
}

/// `--max-memory` of the commands that read files whole and evolve nothing (`check`, `predict`,
/// `rollout`, `plot`, `export`, `render`): every file read honours it
/// ([`crate::input::set_max_memory`]).
#[derive(Debug, Default, Args)]
pub struct MemoryArgs {
    /// The most memory the command may use (e.g. 2G, 512M; default: what the machine has
    /// available); a file whose reading would need more is refused before it is read.
    #[arg(long, value_name = "SIZE", value_parser = crate::task::base::plan::parse_size, env = "GROVE_MAX_MEMORY")]
    pub max_memory: Option<u64>,
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
    /// The memory limit of the files read.
    #[command(flatten)]
    pub memory: MemoryArgs,
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
    /// Control steps, 1 to 1000000 (default: the action file's rows, else the episode length).
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
    /// Play the --policy report's own test episodes (its environment, seed, episode length and
    /// count, and their reset noise) on the CPU, as the run scored them, and print their mean,
    /// which is the report's test return, beside the report's.
    #[arg(long, requires = "policy", conflicts_with_all = ["env", "profile", "states", "no_noise", "seed", "steps", "ignore_termination", "f32", "solver_iterations", "print_model", "device"])]
    pub test: bool,
    /// Where to play: cpu, or cuda (the GPU's simulator and control kernels, in f32: the same
    /// return as `--f32` on the CPU; no --states or --ignore-termination with fixed actions).
    #[arg(long, value_enum, default_value = "cpu")]
    pub device: DeviceChoice,
    /// The memory limit of the files read.
    #[command(flatten)]
    pub memory: MemoryArgs,
}

/// Runs `grove check`.
pub fn check(args: &CheckArgs) -> Result<ExitCode> {
    let report = crate::task::runner::tools::check(&args.grammar, &args.shape.shape()?)?;
    for d in &report.diagnostics {
        eprintln!("{d}");
    }
    print!("{}", report.summary);
    Ok(ExitCode::SUCCESS)
}

/// Runs `grove map`: genomes from standard input, programs to standard output; fails when a
/// genome did not map.
pub fn map(args: &MapArgs) -> Result<ExitCode> {
    let config = MapConfig {
        max_wraps: args.wraps,
        codons: args.codons,
        max_depth: args.max_depth.unwrap_or(u32::MAX),
        max_nodes: args.max_nodes.unwrap_or(u32::MAX),
        ..MapConfig::default()
    };
    let mut out = BufWriter::new(std::io::stdout().lock());
    let settings =
        crate::task::runner::tools::MapSettings {
        grammar: args.grammar.clone(),
        shape: args.shape.shape()?,
        config,
        device: args.device,
        format: args.format,
        max_memory: args.max_memory,
    };
    let bad = crate::task::runner::tools::map_stream(&settings, std::io::stdin().lock(), &mut out, |line| eprintln!("{line}"))?;
    out.flush().context("cannot write standard output")?;
    Ok(if bad > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// Runs `grove predict`: one prediction per row on standard output, the score (when the data
/// has the target) on standard error.
pub fn predict(args: &PredictArgs) -> Result<ExitCode> {
    // Streamed: each block of rows is predicted and written before the next is read. The
    // header line goes out only once the file's header fits the model.
    struct Headed<W: Write> {
        out: W,
        started: bool,
    }
    impl<W: Write> Write for Headed<W> {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            if !self.started {
                self.started = true;
                self.out.write_all(b"prediction\n")?;
            }
            self.out.write(b)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            self.out.flush()
        }
    }
    let mut out = Headed { out: BufWriter::new(std::io::stdout().lock()), started: false };
    let score = crate::task::runner::tools::predict_to(&args.model, &args.data, &mut out)?;
    out.flush().context("cannot write standard output")?;
    if let Some(score) = score {
        eprintln!("{score}");
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs `grove rollout`.
pub fn rollout(args: &RolloutArgs) -> Result<ExitCode> {
    let settings = crate::task::runner::tools::RolloutSettings {
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
            DeviceChoice::Auto if args.device.has_gpu() && args.states.is_none() => DeviceChoice::Cuda,
            DeviceChoice::Auto => DeviceChoice::Cpu,
            d => d,
        },
    };
    if args.print_model {
        let (model, _) = crate::task::runner::tools::rollout_model(&settings)?;
        println!("{}", serde_json::to_string_pretty(&crate::sim::rollout::model_json(&model))?);
        return Ok(ExitCode::SUCCESS);
    }
    if args.test {
        let path = args.policy.as_deref().context("--test replays a --policy report")?;
        println!("{}", crate::task::runner::tools::rollout_test(path)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("{}", crate::task::runner::tools::rollout(&settings)?);
    Ok(ExitCode::SUCCESS)
}
