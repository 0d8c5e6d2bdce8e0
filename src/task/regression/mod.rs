//! Symbolic regression (`grove evolve`): fitness from the fused error sums of the interpreter
//! (MSE, RMSE, MAE or 1 − R², optionally after linear scaling as Operon does, plus parsimony
//! pressure), or, for programs with several outputs, from the fitted linear head over them
//! ([`crate::program::head`]); linear terms of the inputs beside the program; and the program
//! chosen from the front, scored on the training, validation and test data.
//!
//! [`settings`] holds what a run is given, [`fitness`] how programs are scored, [`search`] the
//! run up to the front ([`run`], [`fit`]), [`choice`] the candidates' resampled errors,
//! [`report`] the choice and the report ([`finish`]),
//! [`shard`] rows split over GPUs. Every public item is re-exported here. The submodules share
//! this module's imports (`use super::*`).

pub mod choice;
pub mod fitness;
pub mod report;
pub mod search;
pub mod settings;
pub mod shard;

use crate::backend::cpu::eval::evaluate_regression;
use crate::data::Dataset;
use crate::program::fitness::RegressionSums;
use crate::program::head::{Head, MAX_HEAD};
use crate::program::linear::{Joint, JointSums, Linear, LinearFit};
use crate::program::tree::{Node, Population};
use crate::task::base::report::{EvolveResult, add_island_stats, describe_devices, device_loop_line, generations_json, islands_summary};
use crate::task::base::search::{check_ge, check_grammar_slots, check_search};

/// The error measure, the task's settings and the error of the fused sums: defined in
/// [`crate::program::fitness`], below the engine, which reads them too.
pub use crate::program::fitness::{Loss, LossReduce, LossSums, Metric, RegressionConfig, error};
pub use crate::task::base::model::{LinearInputs, Readout};

pub use choice::*;
pub use fitness::*;
pub use report::*;
pub use search::*;
pub use settings::*;
