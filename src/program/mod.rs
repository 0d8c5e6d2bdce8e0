//! Programs: the operator table, the tensorized population of trees, and their CPU interpreter.

pub mod eval;
pub mod ops;
pub mod tree;

pub use ops::{Op, Real};
pub use tree::{Node, Population, TreeRef};
