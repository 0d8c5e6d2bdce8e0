//! Programs: the operator table and its f32 point semantics (`ops`, `fastmath`), the
//! tensorized population of trees, the fitness formulas and sums of regression and
//! classification (`fitness`: shared by the tasks, the engine and both backends), the fitted
//! linear head over a program's outputs (`head`), linear terms of the inputs beside it
//! (`linear` for regression, `logistic` for classification), random trees,
//! the variation operators on them, rendering and export. The CPU interpreter and the CPU twins
//! of the kernels live in `backend::cpu`.

pub mod fastmath;
pub mod fitness;
pub mod head;
pub mod linear;
pub mod logistic;
pub mod init;
pub mod ops;
pub mod export;
pub mod render;
pub mod tree;
pub mod vary;

pub use init::{TreeSpec, init_population};
pub use ops::{Op, Real};
pub use tree::{Node, Population, RowMut, TreeRef};
pub use vary::{BreedConfig, Crossover, Mutation, Outcome, VaryConfig, breed};

/// `text` as an error message shows it: whole up to `max` characters, else its first `max`
/// and how many more there are (a 10 MB value in a file is never echoed whole).
pub fn clip(text: &str, max: usize) -> String {
    crate::input::clip(text, max)
}
