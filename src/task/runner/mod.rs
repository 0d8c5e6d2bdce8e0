//! The runner: the top of the task layer. It alone knows the [`experiment::Experiment`] of a
//! run (every task's settings), checkpoints and the files a run leaves, and it holds the tools
//! that read them back (`check`, `map`, `predict`, `export`, `plot`, `rollout`, `render`).

pub mod experiment;
pub mod plots;
pub mod tools;
