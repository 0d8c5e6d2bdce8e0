//! A run's state as its checkpoints keep it: the engine's state, the hall of fame, the work
//! counted so far, and the parts a task keeps beside them ([`TaskState`]: a control run's
//! linear search and normaliser). The runner stores it with the run's settings
//! (`task::runner::checkpoint`).

use anyhow::{Result, ensure};
use serde::{Deserialize, Serialize};

use crate::evolve::checkpoint::{Saved, SavedNode};
use crate::evolve::hof::{Entry, HallOfFame};

/// A hall-of-fame entry, exactly.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedEntry {
    /// Size in nodes.
    pub size: usize,
    /// Fitness, f64 bits.
    pub fitness: u64,
    /// Tree.
    pub nodes: Vec<SavedNode>,
    /// Generation first seen.
    pub generation: usize,
}

/// Everything a run has done, exactly: what a checkpoint holds beside the settings and the
/// output paths. Its fields are keys of the checkpoint file's object ([`Self::FIELDS`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunState {
    /// The engine's state.
    pub state: Saved,
    /// The hall of fame.
    pub hall_of_fame: Vec<SavedEntry>,
    /// Node evaluations so far (timing).
    pub node_evaluations: f64,
    /// Median program size of each generation so far (0 where none was valid).
    #[serde(default)]
    pub median_sizes: Vec<f64>,
    /// Control runs: env steps played and seconds spent in roll-outs so far (timing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_steps: Option<(u64, f64)>,
    /// `(opcode, definition)` of the user operators the saved trees use: opcodes are handed out
    /// per process, so a reader registers the definitions and renumbers the trees.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub operators: Vec<(u8, String)>,
    /// A linear policy's search (`--policy linear`): its whole state. `state` then holds only
    /// the next iteration and the current policy as the best program.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub linear: Option<crate::evolve::ars::LinearState>,
    /// Programs evolved on a linear policy (`--policy residual`) past its search: that search's
    /// state, the linear policy under the programs `state` holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub residual: Option<crate::evolve::ars::LinearState>,
    /// Programs over normalised observations (`--normalise`): the normaliser they read
    /// through, and everything it has learnt from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<crate::sim::stats::LearntState>,
}

impl RunState {
    /// The keys the fields take in a checkpoint file's object.
    pub const FIELDS: [&'static str; 9] =
        ["state", "hall_of_fame", "node_evaluations", "median_sizes", "env_steps", "operators", "linear", "residual", "inputs"];

    /// The hall of fame it holds (its entries' trees checked by the runner's checkpoint check).
    pub fn hall_of_fame(&self) -> Result<HallOfFame> {
        let mut h = HallOfFame::default();
        for e in &self.hall_of_fame {
            ensure!(e.size == e.nodes.len() && e.size <= u16::MAX as usize, "a hall-of-fame entry of size {} holds {} nodes", e.size, e.nodes.len());
            if h.by_size.len() <= e.size {
                h.by_size.resize(e.size + 1, None);
            }
            h.by_size[e.size] = Some(Entry {
                fitness: f64::from_bits(e.fitness),
                nodes: crate::evolve::checkpoint::decode_nodes(&e.nodes)?,
                generation: e.generation,
            });
        }
        Ok(h)
    }
}

/// The parts of a run's state that a task keeps beside the engine's, read each time a
/// checkpoint is saved (they may change between generations).
pub trait TaskState: Sync {
    /// Writes the task's parts into `state`.
    fn save_into(&self, state: &mut RunState);
}
