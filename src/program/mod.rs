//! Programs: the operator table, the tensorized population of trees, their CPU interpreter,
//! the fused classification fitness (reference of `kernels/classify.cu`), random trees, the variation operators on them, control policies (reference of the
//! control kernel), and rendering.

pub mod classify;
pub mod eval;
pub mod fastmath;
pub mod init;
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
