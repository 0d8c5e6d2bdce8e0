//! Tasks: what each command evolves and how it scores programs, the saved model that
//! `grove predict` applies, and the body of every command as a library function (settings
//! in, results out), which the command line and the Python package both call. The three tasks
//! (`regression`, `classify`, `control`) share `search` and never import each other; every
//! command's defaults are in `defaults`; of the modules here, only `experiment` and `run` know
//! the `Experiment` of a run and hand it to the tasks.

pub mod budget;
pub mod classify;
pub mod control;
pub mod crossval;
pub mod defaults;
pub mod linear_policy;
pub mod model;
pub mod plan;
pub mod regression;
pub mod residual;
pub mod experiment;
pub mod run;
pub mod search;
pub mod shard;
pub mod plots;
pub mod tools;
pub mod validation;
