//! Why a CPU evaluation could not run: [`EvalError`], shared by the interpreter (a tree that
//! does not compile: a bad variable, a malformed encoding) and the folds that call it (data of
//! the wrong shape, bad targets or labels). A base both use, so the interpreter does not import
//! the evaluation that runs it.

use std::fmt;

/// Why an evaluation could not run. Individuals without a program, or whose outputs are
/// NaN or infinite, are not errors: they are reported as invalid in the results.
#[derive(Clone, Debug, PartialEq)]
pub enum EvalError {
    /// `n_rows` is 0.
    NoRows,
    /// `x` is not `[n_features][n_rows]`.
    DataShape {
        /// `x.len()`.
        len: usize,
        /// Rows expected.
        n_rows: usize,
    },
    /// `y` does not have one value per row.
    TargetLength {
        /// `y.len()`.
        len: usize,
        /// Rows expected.
        n_rows: usize,
    },
    /// A target value is NaN or infinite.
    TargetNotFinite {
        /// The first such row.
        row: usize,
    },
    /// A class label (as the target of a classifier's head) is not a class index.
    Label {
        /// The first such row.
        row: usize,
        /// Its value.
        value: f32,
        /// Classes.
        n_classes: usize,
    },
    /// The population has more outputs than the function supports.
    TooManyOutputs {
        /// The population's `n_outputs`.
        n_outputs: usize,
        /// The most the function supports.
        max: usize,
    },
    /// An individual index is past the population.
    NoSuchIndividual {
        /// The index asked for.
        index: usize,
        /// The population size.
        size: usize,
    },
    /// A variable index is not below the number of features.
    Variable {
        /// Tree index.
        tree: usize,
        /// Node index.
        node: usize,
        /// The variable index read (as stored: it may be fractional or negative).
        var: f32,
        /// Features in the data.
        n_features: usize,
    },
    /// A loss names an opcode that is no registered user operator.
    Loss {
        /// The opcode.
        code: u8,
    },
    /// Scalings given for another number of individuals.
    Scales {
        /// Scalings given.
        len: usize,
        /// The population size.
        size: usize,
    },
    /// A tree breaks the encoding's invariants (run `Population::validate`).
    Malformed {
        /// Tree index.
        tree: usize,
        /// What is wrong.
        reason: String,
    },
}

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EvalError::NoRows => write!(f, "the data set has no rows"),
            EvalError::DataShape { len, n_rows } => {
                write!(f, "x has {len} values, not a multiple of {n_rows} rows (expected [features][rows])")
            }
            EvalError::TargetLength { len, n_rows } => write!(f, "y has {len} values for {n_rows} rows"),
            EvalError::TargetNotFinite { row } => write!(f, "target value at row {row} is NaN or infinite"),
            EvalError::Label { row, value, n_classes } => {
                write!(f, "class label at row {row} is {value}, not a class index below {n_classes}")
            }
            EvalError::TooManyOutputs { n_outputs, max } => {
                write!(f, "programs have {n_outputs} outputs; this evaluation takes at most {max}")
            }
            EvalError::NoSuchIndividual { index, size } => {
                write!(f, "individual {index} asked for in a population of {size}")
            }
            EvalError::Variable { tree, node, var, n_features } => {
                write!(f, "tree {tree}, node {node}: variable index {var}, but the data has {n_features} features")?;
                if *n_features > 0 {
                    write!(f, " (indices 0 to {})", n_features - 1)?;
                }
                Ok(())
            }
            EvalError::Loss { code } => write!(f, "the loss's opcode {code} is no registered operator"),
            EvalError::Scales { len, size } => write!(f, "{len} scalings for a population of {size}"),
            EvalError::Malformed { tree, reason } => write!(f, "tree {tree} is malformed: {reason}"),
        }
    }
}

impl std::error::Error for EvalError {}
