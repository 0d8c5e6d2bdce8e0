//! The command line: the `Cli`/`Command` types and dispatch. Each command's arguments and
//! body live in the file of its family (`evolve`, `classify`, `control`; `run` for run, plot,
//! export and render; `tools` for check, map, predict and rollout); the argument groups they
//! share are in `args`. Doc comments are the help text; defaults come from `task::base::defaults`.

pub mod args;
pub mod classify;
pub mod control;
pub mod evolve;
pub mod run;
pub mod tools;

use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};

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
    Check(tools::CheckArgs),
    /// Map genomes (one per line on standard input, codons separated by commas) to programs.
    Map(tools::MapArgs),
    /// Evolve a formula for a data set (symbolic regression), from a grammar or a function set.
    Evolve(Box<evolve::EvolveArgs>),
    /// Evolve a classifier (one output per class, argmax) for a labelled data set.
    Classify(Box<classify::ClassifyArgs>),
    /// Apply the best program saved in a run report to the rows of a data file.
    Predict(tools::PredictArgs),
    /// Measure throughput (mapping, the CPU interpreter; with --gpu the CUDA evaluator) and print a table.
    Bench(crate::bench::BenchArgs),
    /// Evolve a control policy (one output per actuator, actions = tanh) for a simulated robot.
    Control(Box<control::ControlArgs>),
    /// Replay actions or an evolved policy in a simulated environment and write the state after
    /// every control step.
    Rollout(tools::RolloutArgs),
    /// Run an experiment file (RON), repeat the run of a report (--from) or continue a
    /// checkpoint (--resume); flags override the file's settings.
    Run(Box<run::RunArgs>),
    /// Draw the plots of a run report (fitness over generations, Pareto front, predicted
    /// against actual, confusion matrix) as PNG and SVG.
    Plot(run::PlotArgs),
    /// Print the best program of a report as a function in Python, Rust or C.
    Export(run::ExportArgs),
    /// Draw a robot's bodies over an episode: a strip of frames (.svg, .png) or an animation
    /// (.gif).
    Render(run::RenderArgs),
}

/// Parses the process arguments and runs the command.
pub fn run() -> Result<ExitCode> {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // Help and version print as clap prints them; a usage error is clap's message with
        // each line cut, so a 100 KB argument is not echoed whole.
        Err(e) if !e.use_stderr() => e.exit(),
        Err(e) => {
            for line in e.render().to_string().lines() {
                eprintln!("{}", crate::input::clip(line, 2 * crate::input::ECHO));
            }
            return Ok(ExitCode::from(2));
        }
    };
    // Every whole-file read of the command honours its --max-memory (GROVE_MAX_MEMORY).
    crate::input::set_max_memory(match &cli.command {
        Command::Check(a) => a.memory.max_memory,
        Command::Map(a) => a.max_memory,
        Command::Evolve(a) => a.run.max_memory,
        Command::Classify(a) => a.run.max_memory,
        Command::Predict(a) => a.memory.max_memory,
        Command::Bench(a) => a.max_memory,
        Command::Control(a) => a.run.max_memory,
        Command::Rollout(a) => a.memory.max_memory,
        Command::Run(a) => a.flags.max_memory,
        Command::Plot(a) => a.memory.max_memory,
        Command::Export(a) => a.memory.max_memory,
        Command::Render(a) => a.memory.max_memory,
    });
    match cli.command {
        Command::Check(args) => tools::check(&args),
        Command::Map(args) => tools::map(&args),
        Command::Evolve(args) => evolve::evolve(&args),
        Command::Classify(args) => classify::classify(&args),
        Command::Predict(args) => tools::predict(&args),
        Command::Bench(args) => crate::bench::run(&args),
        Command::Control(args) => control::control(&args),
        Command::Rollout(args) => tools::rollout(&args),
        Command::Run(args) => run::run(&args),
        Command::Plot(args) => run::plot(&args),
        Command::Export(args) => run::export(&args),
        Command::Render(args) => run::render(&args),
    }
}
