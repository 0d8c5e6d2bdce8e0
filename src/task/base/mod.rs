//! The base every task stands on: run options and the observer of a run, the state its
//! checkpoints keep, the search every task starts, the model choice, memory plans, budgets,
//! the saved model, the report's common blocks and every command's defaults. Nothing here
//! names a task or the runner.

pub mod budget;
pub mod crossval;
pub mod defaults;
pub mod ge_names;
pub mod model;
pub mod observer;
pub mod options;
pub mod plan;
pub mod report;
pub mod search;
pub mod state;
pub mod validation;
