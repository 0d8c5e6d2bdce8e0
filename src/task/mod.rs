//! Tasks: what each command evolves and how it scores programs, and the saved model that
//! `grove predict` applies.

pub mod classify;
pub mod control;
pub mod model;
pub mod regression;
pub mod experiment;
pub mod run;
pub mod plots;
