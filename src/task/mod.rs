//! Tasks: what each command evolves and how it scores programs, the saved model that
//! `grove predict` applies, and the body of every command as a library function (settings
//! in, results out), which the command line and the Python package both call.
//!
//! Three levels, each naming only its own level or those below (`tests/layers.rs` checks it):
//!
//! - [`base`]: what every task shares — run options and the observer of a run, the search
//!   every task starts, the model choice ([`base::validation`]), memory plans, budgets, the
//!   saved model, the report's common blocks and every command's defaults.
//! - the tasks, one folder each: [`regression`], [`classify`], [`control`]. A task never
//!   names another.
//! - [`runner`]: the only part that knows the [`runner::experiment::Experiment`] of a run
//!   (all three tasks' settings), checkpoints, output files and the tools (`check`, `map`,
//!   `predict`, `export`, `plot`, `rollout`, `render`) that read them.

pub mod base;
pub mod classify;
pub mod control;
pub mod regression;
pub mod runner;
