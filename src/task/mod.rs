//! Tasks: what each command evolves and how it scores programs.

pub mod regression;
