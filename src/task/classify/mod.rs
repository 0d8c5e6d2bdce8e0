//! Classification (`grove classify`): programs with one output per class (EvoGP's output
//! nodes), the prediction being the argmax of the outputs, or for two classes optionally one
//! output whose sign decides (`binary`). Fitness is accuracy, balanced accuracy, weighted F1 or
//! the softmax cross-entropy of the outputs (smooth, so it tells apart programs that accuracy ties); the
//! best program is reported with accuracy, balanced accuracy and a confusion matrix on the
//! training and test rows, and saved as a [`Model`] for `grove predict`.
//!
//! [`settings`] holds what a run is given, [`fitness`] how programs are scored, [`search`] the
//! run up to the choice ([`run`], [`fit`]), [`report`] the report. Every public item is
//! re-exported here. The submodules share this module's imports (`use super::*`).

pub mod fitness;
pub mod report;
pub mod search;
pub mod settings;

use anyhow::{Context, Result, bail};

use crate::data::classes::{ClassSource, Labeled, Standardize, stratified_split};
use crate::program::tree::{Node, Population};
use crate::task::base::model::{LinearInputs, Model, ModelKind, classify_outputs};
use crate::task::base::report::{EvolveResult, add_island_stats, describe_devices, device_loop_line, generations_json, islands_summary};
use crate::task::base::search::{ClassTreeSettings, check_ge, check_search};

/// The fitness measure and the fitness of the fused sums: defined in [`crate::program::fitness`],
/// below the engine, which reads them too.
pub use crate::program::fitness::{ClassFitness, accuracy_of, balanced_of, fitness_of};

pub use fitness::*;
pub use search::*;
pub use settings::*;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confusion_metrics_match_a_hand_computation() {
        // True: 0 0 0 0 1 1 2 2 2 2; predicted: 0 0 0 1 1 0 2 2 2 1.
        let t = [0, 0, 0, 0, 1, 1, 2, 2, 2, 2];
        let p = [0, 0, 0, 1, 1, 0, 2, 2, 2, 1];
        let c = Confusion::new(&t, &p, 3);
        assert_eq!(c.counts, vec![vec![3, 1, 0], vec![1, 1, 0], vec![0, 1, 3]]);
        assert_eq!(c.accuracy(), 0.7);
        // Recalls 3/4, 1/2, 3/4: mean 2/3.
        assert!((c.balanced_accuracy() - 2.0 / 3.0).abs() < 1e-15);
        // F1 per class 3/4, 2/5, 6/7, weighted by 4, 2 and 4 rows of 10 (scikit-learn gives
        // f1_score(t, p, average="weighted") = 0.72285714...).
        assert!((c.weighted_f1() - (0.4 * 0.75 + 0.2 * 0.4 + 0.4 * 6.0 / 7.0)).abs() < 1e-15);
        assert!((c.weighted_f1() - 0.722_857_142_857_142_9).abs() < 1e-12);
        // A class with no rows does not count in the balanced accuracy.
        let c = Confusion::new(&[0, 0, 1], &[0, 1, 1], 3);
        assert!((c.balanced_accuracy() - 0.75).abs() < 1e-15);
        let text = c.render(&["a".into(), "b".into(), "c".into()]);
        assert_eq!(text.lines().count(), 4, "{text}");
        assert!(text.lines().nth(1).unwrap().ends_with(" 1 1 0"), "{text}");
    }
}
