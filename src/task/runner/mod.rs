//! The runner: the top of the task layer. It alone knows the [`experiment::Experiment`] of a
//! run (every task's settings), checkpoints and the files a run leaves, and it holds the tools
//! that read them back (`check`, `map`, `predict`, `export`, `plot`, `rollout`, `render`).

pub mod checkpoint;
pub mod experiment;
pub mod outputs;
pub mod plots;
pub mod tools;

use anyhow::Result;

use crate::task::base::options::{RunOptions, on_threads};
use crate::task::base::report::EvolveResult;
use experiment::Experiment;

/// Runs an experiment (evolve, classify or control) as `opts` says, on `threads` worker
/// threads: the library's run of `grove evolve`, `grove classify`, `grove control` and
/// `grove run`. Checkpoints, where `opts` asks for them, are [`checkpoint::FileCheckpoints`]
/// of `exp`.
pub fn run_experiment(exp: &Experiment, opts: &RunOptions, threads: Option<usize>) -> Result<EvolveResult> {
    on_threads(threads, || match exp {
        Experiment::Evolve(s) => crate::task::regression::run(s, opts),
        Experiment::Classify(s) => crate::task::classify::run(s, opts),
        Experiment::Control(s) => crate::task::control::run(s, opts),
    })
}
