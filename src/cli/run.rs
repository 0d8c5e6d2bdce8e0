//! `grove run` (experiment files, `--from` a report, `--resume` a checkpoint), `grove plot`,
//! `grove export` and `grove render`, and how every command that evolves runs: options from the
//! shared flags, Ctrl-C, the files written and the summary printed.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;

use super::args::RunFlags;
use crate::task::runner::experiment::Experiment;
use std::sync::Arc;

use crate::task::runner::checkpoint::{Checkpoint, FileCheckpoints};
use crate::report::files::Named;
use crate::task::runner::outputs::{Outputs, check_outputs, write_outputs};
use crate::task::base::options::{Checkpoints, RunOptions};
use crate::task::base::report::EvolveResult;

/// `grove run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// An experiment file (RON), e.g. examples/w1-pagie1.ron.
    #[arg(value_name = "FILE", conflicts_with_all = ["from", "resume"])]
    pub file: Option<PathBuf>,
    /// Repeat the run of this report (its command and complete settings).
    #[arg(long, value_name = "REPORT", conflicts_with = "resume")]
    pub from: Option<PathBuf>,
    /// Continue the run saved in this checkpoint (and keep saving to it). Its input files
    /// must be those it started on, by content: a changed one is refused unless named by
    /// --accept-changed.
    #[arg(long, value_name = "CHECKPOINT")]
    pub resume: Option<PathBuf>,
    /// With --resume: continue even though this input file (its path, or its flag: --data,
    /// --grammar, --env) changed since the run started. May be repeated.
    #[arg(long, value_name = "FILE", requires = "resume", allow_hyphen_values = true)]
    pub accept_changed: Vec<PathBuf>,
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
    /// Override how the GPUs exchange data (islands.link: peer or nccl); with --resume too.
    #[arg(long, value_name = "peer|nccl")]
    pub gpu_link: Option<crate::evolve::islands::GpuLink>,
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
    /// The memory limit of the files read.
    #[command(flatten)]
    pub memory: super::tools::MemoryArgs,
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
    /// The memory limit of the files read.
    #[command(flatten)]
    pub memory: super::tools::MemoryArgs,
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
    /// The memory limit of the files read.
    #[command(flatten)]
    pub memory: super::tools::MemoryArgs,
}

/// Runs an experiment on the requested threads (Ctrl-C saves a checkpoint and stops when
/// checkpoints are on), then prints the summary and writes the report, hall of fame and plots.
/// `sources` are the files the settings were read from (an experiment file, a report), which
/// no output may overwrite.
pub fn run_experiment(exp: Experiment, flags: &RunFlags, resume: Option<(PathBuf, Checkpoint)>, sources: &[Named]) -> Result<ExitCode> {
    if let Experiment::Evolve(s) = &exp {
        s.check_fitness_fn()?;
    }
    let (opts, outputs) = run_options(flags, resume, &exp, sources)?;
    let result = crate::task::runner::run_experiment(&exp, &opts, flags.threads)?;
    finish_run(&result, &outputs)
}

/// How a run of `exp` goes as `flags` say: quiet or verbose, checkpoints (into the resumed
/// checkpoint's file and at its interval unless the flags say otherwise), the files written at
/// the end (a resumed run's own unless the flags name others, returned beside the options),
/// and with checkpoints a Ctrl-C that saves one and stops. Every file the run will write is
/// checked here, before the data is read or a device opened: it can be written, and it is none
/// of the run's inputs (`exp`'s files, `sources`, a resumed checkpoint) nor another output
/// ([`check_outputs`]).
pub fn run_options(flags: &RunFlags, resume: Option<(PathBuf, Checkpoint)>, exp: &Experiment, sources: &[Named]) -> Result<(RunOptions, Outputs)> {
    let every = flags.checkpoint_every(resume.as_ref().map(|r| r.1.checkpoint_every));
    anyhow::ensure!(every >= 1, "--checkpoint-every must be at least 1");
    let path = flags.checkpoint.clone().or_else(|| resume.as_ref().map(|r| r.0.clone()));
    let given = Outputs { report: flags.report.clone(), hall_of_fame: flags.hall_of_fame.clone(), plots: flags.plots.clone() };
    let outputs = match &resume {
        Some((_, c)) => given.or(&c.outputs),
        None => given,
    };
    let mut inputs = exp.input_files();
    inputs.extend_from_slice(sources);
    if let Some((resumed, _)) = &resume {
        if flags.checkpoint.is_some() {
            inputs.push(Named::new("resumed checkpoint", resumed));
        }
    }
    check_outputs(&outputs, path.as_deref(), &inputs)?;
    let checkpoint: Option<Arc<dyn Checkpoints>> = match path {
        Some(p) => Some(Arc::new(FileCheckpoints::new(p, every, exp.clone(), &outputs)?)),
        None => None,
    };
    let stop = match &checkpoint {
        Some(_) => Some(ctrl_c_flag()?),
        None => None,
    };
    let opts = RunOptions {
        quiet: flags.quiet,
        verbose: flags.verbose,
        checkpoint,
        resume: resume.map(|r| r.1.run),
        stop,
        max_memory: flags.max_memory,
        log: None,
    };
    Ok((opts, outputs))
}

/// Prints the summary, then writes the report, hall of fame and plots `outputs` asks for and
/// prints the files written. A file that cannot be written is one `error:` line on standard
/// error that says where its content was kept instead ([`write_outputs`]), and the exit status
/// is then 1: the summary, printed first, survives whatever the disk does.
pub fn finish_run(result: &EvolveResult, outputs: &Outputs) -> Result<ExitCode> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    // Standard output may be closed (`| head`): the files are written all the same.
    let mut shown = writeln!(out, "{}", result.summary);
    let done = write_outputs(&result.report, outputs);
    for (what, path) in &done.written {
        shown = shown.and_then(|_| writeln!(out, "{what:<13} {}", path.display()));
    }
    for line in &done.failed {
        eprintln!("error: {line}");
    }
    if let Err(e) = shown.and_then(|_| out.flush()) {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("error: cannot write standard output: {e}");
            return Ok(ExitCode::FAILURE);
        }
    }
    Ok(if done.failed.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
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

/// Runs `grove run`.
pub fn run(args: &RunArgs) -> Result<ExitCode> {
    use crate::task::runner::experiment::{Overrides, from_source, resume};
    let overrides = Overrides {
        pop: args.pop,
        gens: args.gens,
        seed: args.seed,
        data: args.data.clone(),
        device: args.device,
        islands: args.islands,
        gpus: args.gpus.clone(),
        link: args.gpu_link,
        set: args.set.clone(),
        accept_changed: args.accept_changed.clone(),
    };
    if let Some(path) = &args.resume {
        let (exp, c, notes) = resume(path, &overrides)?;
        for n in notes {
            eprintln!("{n}");
        }
        return run_experiment(exp, &args.flags, Some((path.clone(), c)), &[]);
    }
    let exp = from_source(args.file.as_deref(), args.from.as_deref(), &overrides)?;
    let mut sources = Vec::new();
    if let Some(f) = &args.file {
        sources.push(Named::new("experiment file", f));
    }
    if let Some(r) = &args.from {
        sources.push(Named::new("report --from repeats", r));
    }
    run_experiment(exp, &args.flags, None, &sources)
}

/// Runs `grove export`.
pub fn export(args: &ExportArgs) -> Result<ExitCode> {
    if let Some(p) = &args.out {
        crate::report::files::check_output(p, "--out")?;
        crate::report::files::check_distinct(&[Named::new("--out", p)], &[Named::new("--model", &args.model)])?;
    }
    let src = crate::task::runner::tools::export(&args.model, args.lang)?;
    match &args.out {
        Some(p) => crate::report::write_atomic(p, src.as_bytes()).with_context(|| format!("cannot write {}", p.display()))?,
        None => print!("{src}"),
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs `grove render`.
pub fn render(args: &RenderArgs) -> Result<ExitCode> {
    let line = crate::task::runner::tools::render(&crate::task::runner::tools::RenderSettings {
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

/// Runs `grove plot`.
pub fn plot(args: &PlotArgs) -> Result<ExitCode> {
    for p in crate::task::runner::tools::plot(&args.report, &args.out)? {
        println!("{}", p.display());
    }
    Ok(ExitCode::SUCCESS)
}
