//! Every command's defaults, once: population, generations, seed, selection and length limit of
//! `grove evolve`, `classify` and `control`, the settings of grammatical evolution they share,
//! and the data, split and tree settings each starts from. The command line
//! (`default_value_t = defaults::EVOLVE.pop`), the settings' `cli_default()` (what experiment
//! files and reports are laid over) and the Python estimators (through `grove._grove`) all read
//! them from here, so a change cannot leave numbers disagreeing.

use crate::evolve::{ConstantFitting, EngineConfig};
use crate::genome::vary::{GeCrossover, GeMutation, GeVaryConfig, IntFlipRate};
use super::validation::{Auto, Select};
use crate::genome::{Codons, InitConfig, InitMethod, MapConfig};

/// The engine settings a command starts from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngineDefaults {
    /// Population size.
    pub pop: usize,
    /// Generations.
    pub gens: usize,
    /// Random seed.
    pub seed: u64,
    /// Tournament size.
    pub tournament: usize,
    /// Best individuals copied unchanged to the next generation.
    pub elite: usize,
    /// Longest program, in nodes.
    pub max_len: usize,
    /// Bloat control by selection (`--bloat`).
    pub bloat: crate::select::Bloat,
}

impl EngineDefaults {
    /// The engine's settings with these defaults and `constants` (the engine's size pressure).
    pub fn config(&self, constants: ConstantFitting) -> EngineConfig {
        EngineConfig {
            pop_size: self.pop,
            generations: self.gens,
            seed: self.seed,
            tournament: self.tournament,
            elite: self.elite,
            max_len: self.max_len,
            bloat: self.bloat,
            constants,
            ..EngineConfig::default()
        }
    }
}

/// `grove evolve`: population 3000, 100 generations, bloat control by [`EVOLVE_BLOAT`].
pub const EVOLVE: EngineDefaults =
    EngineDefaults { pop: 3000, gens: 100, seed: 1, tournament: 3, elite: 1, max_len: 128, bloat: EVOLVE_BLOAT };
/// `grove classify`: population 5000, 40 generations, programs of at most 64 nodes, plain
/// tournaments ([`CLASSIFY_BLOAT`]).
pub const CLASSIFY: EngineDefaults = EngineDefaults { pop: 5000, gens: 40, max_len: 64, bloat: CLASSIFY_BLOAT, ..EVOLVE };
/// `grove classify` on a GPU: population 20 000, 100 generations, ten times the CPU's
/// evaluations in 1.1–1.3 times the wall time of the CPU's budget there (0.49–0.55 s a run
/// against 0.42–0.47 s on an H100, generated sets of 400 rows; digits 1.5 s against 1.1 s).
/// Measured at the `balanced-ce` default (`docs/quality.md`, issue 55, 2026-12-06; 10 seeds
/// on an H100): the checkerboard 0.72 → 0.85 and the sine boundary 0.915 → 0.96, no other
/// set's median lower by more than one test row; 50 000 × 100 gained nothing more on the CPU
/// (5 seeds: checkerboard 0.79, sine 0.95).
pub const CLASSIFY_GPU: EngineDefaults = EngineDefaults { pop: 20_000, gens: 100, ..CLASSIFY };
/// `grove control` on the CPU: population 200, 20 generations (a run of tens of seconds),
/// plain tournaments.
pub const CONTROL_CPU: EngineDefaults = EngineDefaults { pop: 200, gens: 20, bloat: crate::select::Bloat::None, ..EVOLVE };
/// `grove control` on a GPU: population 5000, 100 generations (EvoGP's Swimmer scale).
pub const CONTROL_GPU: EngineDefaults = EngineDefaults { pop: 5000, gens: 100, ..CONTROL_CPU };

/// `grove evolve`'s bloat control: [`crate::select::Bloat::Auto`], NSGA-II where constants are
/// not fitted (the default on either device) and plain tournaments where they are. Measured with
/// `aq` (2026-11-28, `docs/quality.md`): on the CPU NSGA-II meets 8 of 14 statsmodels targets
/// against 6, Friedman-1 0.952 against 0.936 in 2.1 s against 3.0 s, and no set is lower by
/// more than 0.01 at 10x the generations; with the GPU's fitted constants it loses diabetes
/// (−0.05), engel (−0.02) and cancer (−0.01).
pub const EVOLVE_BLOAT: crate::select::Bloat = crate::select::Bloat::Auto;
/// `grove classify`'s bloat control: plain tournaments.
pub const CLASSIFY_BLOAT: crate::select::Bloat = crate::select::Bloat::None;

/// `grove control`'s episodes per individual on the CPU (about 4 × 10⁶ env steps in all).
pub const CONTROL_CPU_EPISODES: usize = 1;
/// `grove control`'s episodes per individual on a GPU.
pub const CONTROL_GPU_EPISODES: usize = 4;

/// The function set of tree GP where a command has one without `--functions` (`grove classify`,
/// `grove control`).
pub const FUNCTIONS: &str = "add,sub,mul,div";
/// `grove evolve`'s function set without `--functions` or `--grammar`, in an experiment file
/// without `functions` or `grammar`, and the Python regressor's without `function_set`: the
/// analytic quotient `aq(a, b) = a / √(1 + b²)` instead of `div`, which has no pole. With
/// `div`, fitted constants put poles near unseen points (Friedman-1 on a GPU at its defaults,
/// 5 splits: median test R² 0.845 with `div`, 0.948 with `aq`; the other seven sets measured
/// moved by at most 0.0004); on the CPU, 10 splits of 18 sets, Friedman-1 0.879 → 0.936 and
/// diabetes 0.420 → 0.447, against one tiny set lost (cpunish, 12 rows): `docs/quality.md`.
pub const EVOLVE_FUNCTIONS: &str = "add,sub,mul,aq";
/// What `--select auto` does for `grove evolve` (issue 56): below [`EVOLVE_VALIDATION_ROWS`]
/// training rows, k-fold cross-validation of the whole fit (`cv`: the terms, the search and
/// the fitted numbers repeated without each fold) with the mean, the linear terms alone and
/// the ridge on every input scored in the same folds beside each size of the front, and the
/// lowest returned; from there on, a quarter of the rows held out, the simple candidates beside
/// the front and the one-standard-error rule on them (`validation`). Measured on the 30 sets
/// of the quality suite (`docs/quality.md`, issue 56, 10 splits): it meets 20 of the targets
/// (the better of linear and Operon, less 0.005) on the CPU and 19 on a GPU, against 16 and 15
/// for the description length guarded by the front's refits (`mdl`, the rule before), and no
/// set's median falls by more than 0.01 at ten times the generations on a GPU (an
/// `nvidia-h100-x1`, splits 0–4; the CPU's ten-times run was of the rule before). Cross-validating the
/// front alone (`folds`) is optimistic for the larger programs, whose shapes were searched on
/// every row; the whole fit's folds score every shape on rows its search never saw. They cost
/// k more searches, which on data below the validation size are short.
pub const EVOLVE_AUTO: Auto = Auto { small: Select::Cv, min_rows: EVOLVE_VALIDATION_ROWS };

/// Training rows from which `grove evolve`'s automatic choice holds out validation rows instead
/// of cross-validating the front: there a quarter of the rows costs the search little, one
/// held-out set of at least 5000 rows measures an error to within a few percent, and the folds'
/// five refits of the front over every row are what a large run would spend its time on.
pub const EVOLVE_VALIDATION_ROWS: usize = 20_000;

/// The share of held-out rows trimmed from each end of a program's paired loss difference
/// against a simple model before the model choice's guard counts its gain
/// (`task::base::validation`): a program's shape was searched on every row, and on noisy data
/// with a heavy tail the search memorises a few extreme rows; the folds keep that shape, so
/// its cross-validated gain rests on those rows. On a 4774-row set of that kind, at ten times
/// the generations, 1 % trimmed left 3 % of the programs' gain and the terms were returned,
/// while on the sets where programs won on test rows it left 60–100 % (`docs/quality.md`,
/// issue 56).
pub const GUARD_TRIM: f64 = 0.01;

/// Folds of `--select folds` without `--folds` (fewer where the training rows are fewer).
pub const FOLDS: usize = 5;

/// The rule `--select auto` applies to `grove classify` without validation rows: the training
/// minimum (the description length chose programs too small on iris and wine).
pub const CLASSIFY_SMALL_DATA_RULE: Select = Select::Train;

/// The rule `--select auto` applies to `grove classify` without validation rows where the
/// model has linear terms of the inputs: the smallest description length. With the terms the
/// training minimum sharpens the logits of separable classes until it overfits (wine, seed 1:
/// 63 nodes, test accuracy 0.933, against 0.956 for the description length's 3 nodes;
/// `docs/quality.md`, 2026-11-27).
pub const CLASSIFY_SMALL_DATA_RULE_WITH_TERMS: Select = Select::Mdl;

/// `grove evolve`'s data.
pub const EVOLVE_DATA: &str = "builtin:pagie1";
/// `grove classify`'s data.
pub const CLASSIFY_DATA: &str = "builtin:iris";
/// `grove evolve`'s test fraction (0: the built-in's own test set, if any).
pub const EVOLVE_TEST_FRACTION: f64 = 0.0;
/// `grove classify`'s test fraction, per class.
pub const CLASSIFY_TEST_FRACTION: f64 = 0.25;
/// Fitness penalty per program node, every command.
pub const PARSIMONY: f64 = 0.0;
/// `grove evolve`'s program outputs under the fitted linear head (1: the program's value,
/// linearly scaled as before the head).
pub const EVOLVE_OUTPUTS: usize = 1;
/// `grove evolve`'s linear terms of the inputs beside the program.
pub const EVOLVE_LINEAR_INPUTS: crate::task::base::model::LinearInputs = crate::task::base::model::LinearInputs::Auto;
/// `grove classify`'s head: none (0), each class's output is the program's own. With
/// `--outputs K` a head over the program's K outputs gives each class its logit.
pub const CLASSIFY_OUTPUTS: usize = 0;
/// `grove classify`'s linear terms of the inputs under the outputs.
pub const CLASSIFY_LINEAR_INPUTS: crate::task::base::model::LinearInputs = crate::task::base::model::LinearInputs::Auto;
/// `grove evolve`'s probability, with `--outputs` above 1, that a new tree node becomes an extra
/// output node (as `grove classify`'s).
pub const EVOLVE_P_OUT: f32 = 0.05;
/// `grove classify`'s probability that a new tree node becomes an extra output node.
pub const CLASSIFY_P_OUT: f32 = 0.05;
/// Tree GP's probability that a child is made by crossover (every task's `trees.p_crossover`,
/// `--crossover P` without a grammar).
pub const TREE_P_CROSSOVER: f32 = 0.9;
/// Tree GP's probability that a child is then mutated (every task's `trees.p_mutation`,
/// `--mutation P` without a grammar).
pub const TREE_P_MUTATION: f32 = 0.3;
/// `grove control`'s probability that a new tree node becomes an extra output node.
pub const CONTROL_P_OUT: f32 = 0.1;
/// `grove control`'s fresh episodes the best policy is scored on at the end.
pub const CONTROL_TEST_EPISODES: usize = 10;
/// `grove control`'s episodes on which the reported policy is chosen.
pub const CONTROL_VALIDATION_EPISODES: usize = 30;

/// Codons are drawn from `0..CODON_SIZE`.
pub const CODON_SIZE: u32 = 1 << 16;

/// The settings of grammatical evolution as the command line gives them (`--wraps`,
/// `--codons`, `--max-depth`, `--init`, `--init-depth`, `--genome-length`,
/// `--genome-capacity`, `--crossover`, `--mutation`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ge {
    /// Extra passes over the genome.
    pub wraps: u32,
    /// Codon use at single-production rules.
    pub codons: Codons,
    /// Largest derivation depth (PonyGE2's count).
    pub max_depth: u32,
    /// How the first generation is made.
    pub init: InitMethod,
    /// Smallest and largest depth of sensible initialisation's ramp.
    pub init_depth: (u32, u32),
    /// Genome length of random initialisation.
    pub genome_length: usize,
    /// Longest genome crossover may make.
    pub genome_capacity: usize,
    /// Probability of crossing a pair of parents.
    pub crossover: f32,
    /// Int-flip's per-codon probability; subtree mutation's probability per child.
    pub mutation: f32,
    /// The crossover operator.
    pub crossover_op: GeCrossover,
    /// The mutation operator.
    pub mutation_op: GeMutation,
    /// How int-flip's per-codon rate follows `mutation` and the used codons.
    pub int_flip_rate: IntFlipRate,
    /// How a derivation becomes a program.
    pub reading: crate::grammar::template::Reading,
}

/// Subtree mutation's probability per child when `--mutation subtree` gives none: every child,
/// as PonyGE2's subtree mutation (one event per individual).
pub const GE_SUBTREE_MUTATION: f32 = 1.0;

/// The command line's settings of grammatical evolution, shared by every command. Crossover
/// swaps derivation subtrees ([`GeCrossover::Subtree`]): measured on PonyGE2's three regression
/// problems at its settings (`docs/quality.md`, issue 55, the search benchmark), one-point
/// crossover collapses to a constant on Pagie-1 in 6 of 10 seeds and is 200 times PonyGE2's
/// error on Keijzer-6, where subtree crossover beats PonyGE2 on Pagie-1 and
/// Vladislavleva-4 and ties it on Keijzer-6. Int-flip flips each used codon at the larger of
/// 0.02 and 1 / the used codons ([`IntFlipRate::AtLeastPerUsed`]), so a small program gets one
/// flip expected where 0.02 gave it a fifth of one: measured (`docs/quality.md`, issue 55,
/// 2026-12-06) at grove's budget it is 14 times better on Pagie-1 and level on
/// Vladislavleva-4 and Keijzer-6, and at PonyGE2's settings it beats PonyGE2's median on
/// Keijzer-6, where 0.02 lost by 1.4 times.
pub const GE: Ge = Ge {
    wraps: 0,
    codons: Codons::Eager,
    max_depth: 17,
    init: InitMethod::Sensible,
    init_depth: (3, 8),
    genome_length: 128,
    genome_capacity: 512,
    crossover: 0.9,
    mutation: 0.02,
    crossover_op: GeCrossover::Subtree,
    mutation_op: GeMutation::IntFlip,
    int_flip_rate: IntFlipRate::AtLeastPerUsed,
    // What the phenotype says, as PonyGE2 and Python read it.
    reading: crate::grammar::template::Reading::Text,
};

/// A command's settings of grammatical evolution: mapping, initialisation, variation and the
/// genome capacity, as the settings types store them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GeConfigs {
    /// Mapping limits.
    pub map: MapConfig,
    /// Initialisation.
    pub init: InitConfig,
    /// Crossover and mutation.
    pub vary: GeVaryConfig,
    /// Longest genome (at least the initial length: a shorter one is refused by the settings'
    /// check, not raised).
    pub genome_capacity: usize,
}

impl Ge {
    /// The configs these settings give (no node limit on mapping; half of a sensible genome's
    /// codons are a random tail).
    pub fn configs(&self) -> GeConfigs {
        GeConfigs {
            map: MapConfig { max_wraps: self.wraps, codons: self.codons, max_depth: self.max_depth, max_nodes: u32::MAX, reading: self.reading },
            init: InitConfig {
                method: self.init,
                length: self.genome_length,
                codon_size: CODON_SIZE,
                min_depth: self.init_depth.0,
                max_depth: self.init_depth.1,
                tail_fraction: 0.5,
            },
            vary: GeVaryConfig {
                crossover: self.crossover,
                mutation: self.mutation,
                within_used: true,
                codon_size: CODON_SIZE,
                crossover_op: self.crossover_op,
                mutation_op: self.mutation_op,
                mutation_per_used: false,
                mutation_at_least_per_used: false,
            }
            .with_int_flip_rate(self.int_flip_rate),
            genome_capacity: self.genome_capacity,
        }
    }
}

/// `grove control --policy linear` on the CPU: few directions, as Mania et al.'s runs of ARS
/// (8 for Hopper, 32 for HalfCheetah), so that a small budget takes several steps.
pub const LINEAR_CPU: crate::evolve::ars::ArsConfig = crate::evolve::ars::ArsConfig { directions: 8, top: 4, step_size: 0.02, noise: 0.03 };
/// `grove control --policy linear` on a GPU: an iteration lasts as long as its longest
/// episode whatever the number of episodes played beside it, so it plays many directions and
/// steps along the best eighth of them (measured on an H200 against 256 directions and against
/// the best half, docs/benchmarks.md: Walker2d 5199 against 2925 and 1020 in 60 s).
pub const LINEAR_GPU: crate::evolve::ars::ArsConfig = crate::evolve::ars::ArsConfig { directions: 1024, top: 128, step_size: 0.03, noise: 0.03 };

/// `grove control --policy residual`: iterations of the linear policy's search before the
/// programs' on the CPU (the CPU's generations of `--policy linear`).
pub const LINEAR_ITERATIONS_CPU: usize = CONTROL_CPU.gens;
/// The same on a GPU (the GPU's generations of `--policy linear`).
pub const LINEAR_ITERATIONS_GPU: usize = CONTROL_GPU.gens;

/// `grove control --policy residual --head-every G`: iterations of the random search in each
/// tuning of the linear policy under the programs.
pub const HEAD_ITERATIONS: usize = 5;

/// [`HEAD_ITERATIONS`], for serde's defaults.
pub fn head_iterations() -> usize {
    HEAD_ITERATIONS
}

/// [`LINEAR_ITERATIONS_CPU`], for serde's defaults.
pub fn linear_iterations_cpu() -> usize {
    LINEAR_ITERATIONS_CPU
}

/// `--searches`: random searches of `--policy linear` side by side on the CPU, and on a GPU
/// where `--directions` or `--top-directions` is given (a run of one, as before the flag).
pub const LINEAR_SEARCHES: usize = 1;

/// `--policy linear` on a GPU with none of `--searches`, `--directions`, `--top-directions`:
/// 8 searches side by side of [`LINEAR_GPU_SIDE`] (8 × 257 policies, no more episodes than
/// one search of [`LINEAR_GPU`]'s 1024 directions, so an iteration costs the same). At 60 s
/// they beat one search of 1024 on Walker2d (5723 against 5215) and HalfCheetah (6541 against
/// 6178) on an H200, seed 1, and on seeds 2 and 3 run four at once; Hopper 3691 against 3648,
/// Swimmer level (docs/benchmarks.md, issue 57, 2026-12-06).
pub const LINEAR_GPU_SEARCHES: usize = 8;

/// The random search of each of [`LINEAR_GPU_SEARCHES`]: 128 directions, the best 16 (the
/// same eighth as [`LINEAR_GPU`]), its step and noise.
pub const LINEAR_GPU_SIDE: crate::evolve::ars::ArsConfig = crate::evolve::ars::ArsConfig { directions: 128, top: 16, ..LINEAR_GPU };

/// [`LINEAR_SEARCHES`], for serde's defaults.
pub fn linear_searches() -> usize {
    LINEAR_SEARCHES
}

/// [`LINEAR_CPU`], for serde's defaults.
pub fn linear_cpu() -> crate::evolve::ars::ArsConfig {
    LINEAR_CPU
}

/// Generations between checkpoints (`--checkpoint-every`, a checkpoint's `checkpoint_every`
/// where an older file has none; a resumed run keeps its own).
pub const CHECKPOINT_EVERY: usize = 10;

/// [`CHECKPOINT_EVERY`], for serde's defaults.
pub fn checkpoint_every() -> usize {
    CHECKPOINT_EVERY
}
