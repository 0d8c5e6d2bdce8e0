//! Programs: the operator table, the tensorized population of trees, and random trees.

pub mod init;
pub mod ops;
pub mod tree;

pub use init::{TreeSpec, init_population};
pub use ops::{Op, Real};
pub use tree::{Node, Population, RowMut, TreeRef};
