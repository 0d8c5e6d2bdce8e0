//! Programs: the operator table, the tensorized population of trees, their CPU interpreter,
//! the fused classification fitness (reference of `kernels/classify.cu`), the fitness formulas
//! of regression and classification (`fitness`: shared by the tasks, the engine and the
//! kernels), random trees, the variation operators on them, control policies (reference of the
//! control kernel) and the policy a control report saves, and rendering.

pub mod classify;
pub mod constants;
pub mod eval;
pub mod fastmath;
pub mod fitness;
pub mod init;
pub mod linear;
pub mod ops;
pub mod export;
pub mod policy;
pub mod render;
pub mod tree;
pub mod vary;

pub use init::{TreeSpec, init_population};
pub use ops::{Op, Real};
pub use tree::{Node, Population, RowMut, TreeRef};
pub use vary::{BreedConfig, Crossover, Mutation, Outcome, VaryConfig, breed};
