//! Programs: the operator table and the tensorized population of trees.

pub mod ops;
pub mod tree;

pub use ops::{Op, Real};
pub use tree::{Node, Population, RowMut, TreeRef};
