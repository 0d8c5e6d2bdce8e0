//! Tasks: what each command evolves and how it scores programs, the saved model that
//! `grove predict` applies, and the body of every command as a library function (settings
//! in, results out), which the command line and the Python package both call.

pub mod classify;
pub mod control;
pub mod defaults;
pub mod model;
pub mod regression;
pub mod experiment;
pub mod run;
pub mod search;
pub mod plots;
pub mod tools;
pub mod validation;
