//! The `#[repr(C)]` structs Rust and the kernels share (launch parameters, records the kernels
//! write and the host reads), each with its size asserted here. The kernels check every size
//! and field offset against the layout table of [`super::common`] (the generated
//! `grove_common.h`), so the two sides cannot disagree and compile. A leaf of `backend/cuda`:
//! the launchers and the layout table import it, and it imports none of them.

use std::mem::{offset_of, size_of};

use cudarc::driver::{DeviceRepr, ValidAsZeroBits};

use crate::backend::cpu::fit::FitResult;

/// Most entries of `BreedConfig::crossovers` (`GROVE_MAX_CROSSOVERS` in vary.cu).
pub const MAX_CROSSOVERS: usize = 8;
/// Most entries of `BreedConfig::mutations` (`GROVE_MAX_MUTATIONS` in vary.cu).
pub const MAX_MUTATIONS: usize = 16;

/// Parameters of the evaluation kernels (`GroveEvalParams` in eval.cu), passed by value.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EvalParams {
    /// `N`: data points (rows).
    pub n_rows: u32,
    /// `F`: features; `x` is `[F][N]`.
    pub n_features: u32,
    /// `L`: row stride of the population arrays.
    pub max_len: u32,
    /// Output slots; 0 when the root's value is the result.
    pub n_outputs: u32,
    /// Trees this launch evaluates (entries of `tree_ids`).
    pub n_trees: u32,
    /// Points per block: a multiple of threads × points per thread.
    pub tile_points: u32,
    /// `ceil(N / tile_points)`: the row stride of the partial sums.
    pub n_tiles: u32,
    /// Always 0.
    pub reserved: u32,
}

/// Parameters of `grove_compile_trees` (`GroveCompileParams` in interp.cuh), passed by value.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompileParams {
    /// Trees to compile (entries of `tree_ids`, or the first rows when it is null).
    pub n_trees: u32,
    /// `L`: row stride of the population and of the programs.
    pub max_len: u32,
}

/// Per-(tree, tile) partial sums and per-tree totals (`GroveRegSums` in eval.cu), in f64.
/// `e = f − y`, `f` the program's result 0.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RegSums {
    /// Σe².
    pub sse: f64,
    /// Σ|e|.
    pub sae: f64,
    /// Σf.
    pub sum_f: f64,
    /// Σf².
    pub sum_ff: f64,
    /// Σf·y.
    pub sum_fy: f64,
    /// Σy.
    pub sum_y: f64,
    /// Σy².
    pub sum_yy: f64,
    /// Points summed.
    pub n: u32,
    /// Points where some result was NaN or infinite (all of them for an empty tree).
    pub bad: u32,
}

/// Parameters of `grove_reduce_regression` (`GroveReduceParams` in eval.cu).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReduceParams {
    /// Trees (rows of the partial sums).
    pub n_trees: u32,
    /// Tiles per tree (columns of the partial sums).
    pub n_tiles: u32,
}

/// Parameters of the classification kernels (`GroveClassifyParams` in classify.cu).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassifyParams {
    /// `N`: data points (rows).
    pub n_rows: u32,
    /// `F`: features; `x` is `[F][N]`.
    pub n_features: u32,
    /// `L`: row stride of the population arrays.
    pub max_len: u32,
    /// Output slots: `n_classes`, or 0 for one output and two classes.
    pub n_outputs: u32,
    /// `K`: classes; every label is below it.
    pub n_classes: u32,
    /// Trees this launch evaluates (entries of `tree_ids`).
    pub n_trees: u32,
    /// Points per block: a multiple of the block's threads.
    pub tile_points: u32,
    /// `ceil(N / tile_points)`: the row stride of the partials.
    pub n_tiles: u32,
    /// 1: `offset` (`[max(1, n_outputs)][N]`) is added to the outputs; 0: it is not read.
    pub has_offset: u32,
    /// 0.
    pub reserved: u32,
}

/// Per-(tree, tile) and per-tree classification sums (`GroveClassPartial` in classify.cu);
/// the per-class correct counts are a separate `[rows][n_classes]` u32 array.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ClassPartial {
    /// Σ softmax cross-entropy over the finite points, f64.
    pub ce: f64,
    /// Points summed.
    pub n: u32,
    /// Points with a non-finite logit (all of them for an empty tree).
    pub bad: u32,
}

/// Parameters of `grove_reduce_classify` (`GroveClassReduceParams` in classify.cu).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassReduceParams {
    /// Trees (rows of the partials).
    pub n_trees: u32,
    /// Tiles per tree.
    pub n_tiles: u32,
    /// Classes (counters per partial).
    pub n_classes: u32,
    /// Always 0.
    pub reserved: u32,
}

/// Parameters of `grove_map` (`GroveMapParams` in map.cu), passed by value.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MapParams {
    /// `P`: genomes.
    pub n_genomes: u32,
    /// Row stride of the genome array, codons.
    pub capacity: u32,
    /// Extra passes over a genome allowed after the first.
    pub max_wraps: u32,
    /// 1: single-production rules read no codon (lazy); 0: eager.
    pub lazy: u32,
    /// Largest valid depth (`u32::MAX`: no limit).
    pub max_depth: u32,
    /// Largest valid node count (`u32::MAX`: no limit).
    pub max_nodes: u32,
    /// Row stride of the derivation array; a longer derivation stops with
    /// [`MapStatus::DerivationFull`].
    pub max_derivation: u32,
    /// 4-byte words of the table each block stages in shared memory (the dynamic shared
    /// memory of the launch); 0 reads the table from constant memory.
    pub table_words: u32,
}

/// Parameters of `grove_map_trees` (`GroveMapTreesParams` in map.cu), passed by value.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MapTreesParams {
    /// The mapper's settings; `max_derivation` is the scratch's rows, `table_words` counts the
    /// rule table and the templates.
    pub map: MapParams,
    /// Byte offset of the templates in the constant table.
    pub templates_at: u32,
    /// `L`: the population's row width.
    pub max_len: u32,
    /// 1: build trees; 0: map only (status and used codons).
    pub build: u32,
    /// How a derivation becomes a tree: [`MapTreesParams::reading_code`].
    pub reading: u32,
}

impl MapTreesParams {
    /// `GROVE_READING_*` of map.cu: 0 the derivation's nesting, 1 the phenotype's text.
    pub fn reading_code(r: crate::grammar::template::Reading) -> u32 {
        match r {
            crate::grammar::template::Reading::Derivation => 0,
            crate::grammar::template::Reading::Text => 1,
        }
    }
}
const _: () = assert!(size_of::<MapTreesParams>() == 48);

/// Parameters of `grove_ge_subtree_crossover` (`GroveSubtreeParams` in map.cu), passed by value.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SubtreeParams {
    /// The loops' mapper (`Grammar::mapper`'s settings and bounds); `capacity` is the row
    /// stride of parents and children, `n_genomes` the parents.
    pub map: MapParams,
    /// Pairs of parents (threads).
    pub n_pairs: u32,
    /// Child row of pair 0's first child.
    pub first_row: u32,
    /// Rows of the children's arrays.
    pub n_rows: u32,
    /// The run's seed, low word.
    pub seed_lo: u32,
    /// The run's seed, high word.
    pub seed_hi: u32,
    /// The generation the children belong to.
    pub generation: u32,
    /// `GeVaryConfig::crossover`.
    pub p_crossover: f32,
    /// Scratch words per thread: [`subtree_scratch_words`].
    pub scratch_stride: u32,
}
const _: () = assert!(size_of::<SubtreeParams>() == 64);

/// Scratch words of one `grove_ge_subtree_crossover` thread: 8 derivation rows (a parent's
/// derivation, each parent's node symbols, starts and ends, the labels) and two children.
pub fn subtree_scratch_words(max_derivation: usize, capacity: usize) -> usize {
    8 * max_derivation + 2 * capacity
}

/// Parameters of `grove_ge_subtree_mutate` (`GroveSubtreeMutateParams` in map.cu), passed by
/// value.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SubtreeMutateParams {
    /// The loops' mapper (`Grammar::mapper`'s settings and bounds); `capacity` is the row
    /// stride, `n_genomes` the rows.
    pub map: MapParams,
    /// Rows before it (the elite) are left as they are.
    pub first_row: u32,
    /// Rows `first_row..n_rows` are mutated, one thread each.
    pub n_rows: u32,
    /// The run's seed, low word.
    pub seed_lo: u32,
    /// The run's seed, high word.
    pub seed_hi: u32,
    /// The generation the rows belong to.
    pub generation: u32,
    /// `GeVaryConfig::mutation`.
    pub p_mutation: f32,
    /// `GeVaryConfig::codon_size`.
    pub codon_size: u32,
    /// Scratch words per thread: [`subtree_mutate_scratch_words`].
    pub scratch_stride: u32,
}
const _: () = assert!(size_of::<SubtreeMutateParams>() == 64);

/// Scratch words of one `grove_ge_subtree_mutate` thread: 6 derivation rows (the derivation,
/// the nodes' symbols, starts, ends and depths, the size stack), the fresh codons (one past the
/// capacity: a grow stops one codon past its budget) and the child.
pub fn subtree_mutate_scratch_words(max_derivation: usize, capacity: usize) -> usize {
    6 * max_derivation + 2 * capacity + 1
}

/// Parameters of `grove_init_genomes` (`GroveInitParams` in map.cu), passed by value.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct InitParams {
    /// `P`.
    pub n: u32,
    /// Row stride.
    pub capacity: u32,
    /// Seed, low word.
    pub seed_lo: u32,
    /// Seed, high word.
    pub seed_hi: u32,
    /// 0 random, 1 sensible.
    pub sensible: u32,
    /// Random: codons per genome.
    pub length: u32,
    /// Codons are drawn below this.
    pub codon_size: u32,
    /// Sensible: the ramp's smallest depth.
    pub min_depth: u32,
    /// Sensible: the ramp's largest depth.
    pub max_depth: u32,
    /// Sensible: random codons appended, as a fraction of the used ones.
    pub tail_fraction: f32,
    /// 1: single-production rules read no codon.
    pub lazy: u32,
    /// Words of the table staged in shared memory; 0 reads constant memory.
    pub table_words: u32,
}
const _: () = assert!(size_of::<InitParams>() == 48);

/// Parameters of `grove_control_skip` (`GroveControlClassParams` in generation.cu).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ControlClassParams {
    /// `P`.
    pub n: u32,
    /// `L`.
    pub max_len: u32,
    /// Observation size: variable indices below it.
    pub n_vars: u32,
    /// Actuators: output slots `1..=n_slots`.
    pub n_slots: u32,
    /// The roll-out kernel's stack; deeper trees are played by the CPU.
    pub stack: u32,
    /// Padding.
    pub pad: u32,
}

/// One genome's outcome from `grove_map` (`GroveMapOut` in map.cu).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MapOut {
    /// A [`MapStatus`] code.
    pub status: u32,
    /// Codons read.
    pub used_codons: u32,
    /// PonyGE2 depth (root 1, leaf rows count).
    pub depth: u32,
    /// PonyGE2 node count.
    pub nodes: u32,
    /// Derivation entries written.
    pub n_derivation: u32,
}

/// `GroveMapOut::status` codes (`GROVE_MAP_*` in map.cu).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapStatus {
    /// Mapped to a complete program.
    Valid = 0,
    /// Codons and wraps ran out.
    OutOfCodons = 1,
    /// Deeper than `max_depth`.
    TooDeep = 2,
    /// More nodes than `max_nodes`.
    TooManyNodes = 3,
    /// The derivation would outgrow its row (`Invalid::DerivationTooLong`).
    DerivationFull = 4,
    /// The thread's stack would overflow: `grove_map`'s host maps the genome on the CPU
    /// instead; in `grove_map_trees` it is [`crate::genome::map::Invalid::StackTooDeep`].
    StackOverflow = 5,
    /// `grove_map_trees`: the tree outgrew its row (`BuildError::TooLong`).
    TooLong = 6,
    /// `grove_map_trees`: a spelled number, index or slot did not read (`BuildError::BadSpelling`).
    BadSpelling = 7,
    /// `grove_map_trees`: more open templates than `BUILD_FRAMES` (by the derivation: never for
    /// rows of at most that many nodes, an error; by the text: productions open and operators
    /// waiting past it, `BuildError::TooDeep`, an invalid individual).
    BuildFramesFull = 8,
}

impl MapStatus {
    /// The status of a code, `None` for an unknown one.
    pub fn from_code(c: u32) -> Option<Self> {
        use MapStatus::*;
        [Valid, OutOfCodons, TooDeep, TooManyNodes, DerivationFull, StackOverflow, TooLong, BadSpelling, BuildFramesFull]
            .into_iter()
            .find(|s| *s as u32 == c)
    }
}


/// Parameters of the tree variation kernels (`GroveVaryParams` in vary.cu), passed by value:
/// the tree spec, the operator settings and the breeding mix, resolved on the host.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct VaryParams {
    /// Children to make (threads).
    pub n_children: u32,
    /// `L`.
    pub max_len: u32,
    /// Output slots (0: single output).
    pub n_outputs: u32,
    /// The run's seed, low word.
    pub seed_lo: u32,
    /// The run's seed, high word.
    pub seed_hi: u32,
    /// The generation the children belong to (their streams' address).
    pub generation: u32,
    /// Entries of the function list.
    pub n_functions: u32,
    /// Variables `0 .. n_vars`.
    pub n_vars: u32,
    /// Entries of the constant list.
    pub n_constants: u32,
    /// 1 when constants may be drawn from `[range_lo, range_hi)`.
    pub has_range: u32,
    /// Constant range, low end.
    pub range_lo: f32,
    /// Constant range, high end (exclusive).
    pub range_hi: f32,
    /// `TreeSpec::p_const`.
    pub p_const: f32,
    /// `TreeSpec::grow_leaf_prob()`.
    pub p_leaf_grow: f32,
    /// `TreeSpec::p_out`.
    pub p_out: f32,
    /// `VaryConfig::p_leaf`.
    pub p_leaf: f32,
    /// `VaryConfig::subtree_depth.0`.
    pub subtree_lo: u32,
    /// `VaryConfig::subtree_depth.1`.
    pub subtree_hi: u32,
    /// `VaryConfig::p_point`.
    pub p_point: f32,
    /// `VaryConfig::sigma`.
    pub sigma: f32,
    /// `VaryConfig::p_constant`.
    pub p_constant: f32,
    /// `BreedConfig::p_crossover`.
    pub p_crossover: f32,
    /// `BreedConfig::p_mutation`.
    pub p_mutation: f32,
    /// Entries of `cum_x` and `kind_x`.
    pub n_crossovers: u32,
    /// Entries of `cum_m` and `kind_m`.
    pub n_mutations: u32,
    /// `grove_vary_op`'s operator: [`op_code`](super::kernels::op_code).
    pub op: u32,
    /// Cumulative crossover weights, normalised to end at 1 (as `breed` computes them).
    pub cum_x: [f32; MAX_CROSSOVERS],
    /// The crossover of each entry, as [`op_code`](super::kernels::op_code).
    pub kind_x: [u32; MAX_CROSSOVERS],
    /// Cumulative mutation weights, normalised to end at 1.
    pub cum_m: [f32; MAX_MUTATIONS],
    /// The mutation of each entry, as [`op_code`](super::kernels::op_code).
    pub kind_m: [u32; MAX_MUTATIONS],
    /// `grove_init_trees`: `TreeSpec::method` (0 grow, 1 full, 2 half and half).
    pub init_method: u32,
    /// `TreeSpec::min_depth`.
    pub min_depth: u32,
    /// `TreeSpec::max_depth`.
    pub max_depth: u32,
}

/// Parameters of the GE variation kernels (`GroveGeParams` in vary.cu).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GeParams {
    /// Pairs of parents (crossover threads).
    pub n_pairs: u32,
    /// Row stride of every genome array, codons.
    pub capacity: u32,
    /// Child row of pair 0's first child; int-flip starts there too.
    pub first_row: u32,
    /// Rows of the children's arrays.
    pub n_rows: u32,
    /// The run's seed, low word.
    pub seed_lo: u32,
    /// The run's seed, high word.
    pub seed_hi: u32,
    /// The generation the children belong to.
    pub generation: u32,
    /// 1: int-flip only within the used codons.
    pub within_used: u32,
    /// `GeVaryConfig::crossover`.
    pub p_crossover: f32,
    /// `GeVaryConfig::mutation`.
    pub p_mutation: f32,
    /// `GeVaryConfig::codon_size`.
    pub codon_size: u32,
    /// Genome `i`'s used codons are `used[i * used_stride]`: 1 for a plain array, 5 for the
    /// `used_codons` of [`MapOut`] records.
    pub used_stride: u32,
    /// Int-flip's per-codon rate (`GeVaryConfig::int_flip_rate_code`): 0 `p_mutation`, 1 one
    /// over the codons it may change, 2 the larger of the two.
    pub per_used: u32,
}

/// Parameters of the selection kernels (`GroveSelectParams` in select.cu).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SelectParams {
    /// `P`: individuals.
    pub n: u32,
    /// Selections this launch makes.
    pub n_slots: u32,
    /// Slot `s` of the launch is selection `slot_offset + s` (its stream's individual).
    pub slot_offset: u32,
    /// Tournament size.
    pub k: u32,
    /// 1: without replacement.
    pub distinct: u32,
    /// Truncation: choose among the first `n_top` ranked.
    pub n_top: u32,
    /// The run's seed, low word.
    pub seed_lo: u32,
    /// The run's seed, high word.
    pub seed_hi: u32,
    /// The generation selected for.
    pub generation: u32,
    /// Lexicase: cases (columns of the error matrix).
    pub n_cases: u32,
    /// Lexicase: the row stride of the candidate and case-order buffers (entry `j` of slot `s`
    /// at `j × stride + s`).
    pub stride: u32,
}

const _: () = assert!(size_of::<VaryParams>() == 308);
const _: () = assert!(size_of::<GeParams>() == 52);
const _: () = assert!(size_of::<SelectParams>() == 44);
// SAFETY: plain `#[repr(C)]` structs of 4-byte fields (and arrays of them) whose layout equals
// the CUDA structs' (sizes and offsets asserted on both sides); passed by value only.
unsafe impl DeviceRepr for VaryParams {}
// SAFETY: as above.
unsafe impl DeviceRepr for GeParams {}
// SAFETY: as above.
unsafe impl DeviceRepr for SelectParams {}

/// Parameters of generation.cu's kernels (`GroveGenParams`), passed by value.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GenParams {
    /// `P`: individuals.
    pub n: u32,
    /// `L`: row stride of the population.
    pub max_len: u32,
    /// 0 MSE, 1 RMSE, 2 MAE, 3 R² ([`crate::program::fitness::Metric`]).
    pub metric: u32,
    /// 1: linear scaling.
    pub scaled: u32,
    /// Added to the fitness per node.
    pub parsimony: f64,
    /// Blocks of `grove_argmin_blocks`.
    pub n_blocks: u32,
    /// Individuals already chosen; the pass writes `chosen[n_chosen]`.
    pub n_chosen: u32,
}

/// A generation's statistics as generation.cu leaves them (`GroveGenStats`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GenStats {
    /// Fitness of the best individual (by `select::elite`'s order; may be invalid).
    pub best: f64,
    /// Sum of the valid individuals' fitness.
    pub sum: f64,
    /// Sum of the valid individuals' lengths.
    pub sum_len: f64,
    /// The best individual.
    pub best_idx: u32,
    /// Valid individuals (finite fitness, non-empty tree).
    pub n_valid: u32,
}

/// One block's candidate of `grove_argmin_blocks` (`GroveArgmin`; device scratch only).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Argmin {
    /// Total order of the best key.
    pub key: i64,
    /// Its index (`u32::MAX`: none).
    pub idx: u32,
    /// Valid individuals of the block.
    pub n_valid: u32,
    /// Sum of their fitness.
    pub sum: f64,
    /// Sum of their lengths.
    pub sum_len: f64,
}

const _: () = assert!(size_of::<GenParams>() == 32);
const _: () = assert!(size_of::<GenStats>() == 32);
const _: () = assert!(size_of::<Argmin>() == 32);
const _: () = assert!(size_of::<MapParams>() == 32);
const _: () = assert!(size_of::<MapOut>() == 20);
const _: () = assert!(size_of::<EvalParams>() == 32);
const _: () = assert!(size_of::<RegSums>() == 64);
const _: () = assert!(size_of::<ReduceParams>() == 8);
const _: () = assert!(size_of::<CompileParams>() == 8);
const _: () = assert!(size_of::<ClassifyParams>() == 40);
const _: () = assert!(size_of::<ClassPartial>() == 16);
const _: () = assert!(size_of::<ClassReduceParams>() == 16);

// SAFETY: plain `#[repr(C)]` structs of u32/f64 fields whose layout equals the CUDA structs'
// (sizes and offsets asserted on both sides), so the bytes mean the same on the device.
unsafe impl DeviceRepr for EvalParams {}
// SAFETY: as above; `RegSums` is also read back from device memory, where every bit pattern
// is a valid value of each field.
unsafe impl DeviceRepr for RegSums {}
// SAFETY: as above.
unsafe impl DeviceRepr for ReduceParams {}
// SAFETY: as above.
unsafe impl DeviceRepr for MapParams {}
// SAFETY: as above: two u32 fields.
unsafe impl DeviceRepr for CompileParams {}
// SAFETY: as above: #[repr(C)] of a MapParams and four u32, no padding (48 bytes, asserted).
unsafe impl DeviceRepr for MapTreesParams {}
// SAFETY: as above: #[repr(C)] of a MapParams and eight 4-byte fields, no padding (64 bytes,
// asserted).
unsafe impl DeviceRepr for SubtreeParams {}
// SAFETY: as above: #[repr(C)] of a MapParams and eight 4-byte fields, no padding (64 bytes,
// asserted).
unsafe impl DeviceRepr for SubtreeMutateParams {}
// SAFETY: as above: six u32 fields.
unsafe impl DeviceRepr for ControlClassParams {}
// SAFETY: as above: twelve 4-byte fields.
unsafe impl DeviceRepr for InitParams {}
// SAFETY: as above; `MapOut` is read back from device memory, where every bit pattern is a
// valid value of each (u32) field.
unsafe impl DeviceRepr for MapOut {}
// SAFETY: as above (classify.cu's structs; sizes and offsets asserted on both sides).
unsafe impl DeviceRepr for ClassifyParams {}
// SAFETY: as above; read back from device memory, where every bit pattern is a valid value
// of each (f64, u32) field.
unsafe impl DeviceRepr for ClassPartial {}
// SAFETY: as above.
unsafe impl DeviceRepr for ClassReduceParams {}
// SAFETY: as above (generation.cu's structs; sizes and offsets asserted on both sides).
unsafe impl DeviceRepr for GenParams {}
// SAFETY: as above; read back from device memory, where every bit pattern is a valid value of
// each (f64, u32) field.
unsafe impl DeviceRepr for GenStats {}
// SAFETY: as above (device scratch, never read on the host).
unsafe impl DeviceRepr for Argmin {}
// SAFETY: all-zero bytes are valid values of these plain structs.
unsafe impl ValidAsZeroBits for GenStats {}
// SAFETY: as above.
unsafe impl ValidAsZeroBits for Argmin {}
// SAFETY: all-zero bytes are a valid `ClassPartial` (zeros of f64 and u32).
unsafe impl ValidAsZeroBits for ClassPartial {}
// SAFETY: all-zero bytes are a valid `RegSums` (zeros of f64 and u32); read-back buffers of it
// are page-locked memory zeroed on allocation.
unsafe impl ValidAsZeroBits for RegSums {}

/// Parameters of `grove_fit_constants` (`GroveFitParams` in fit.cu), passed by value.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FitParams {
    /// Trees to fit (entries of the id list).
    pub n_trees: u32,
    /// `L`: row stride of the population.
    pub max_len: u32,
    /// `N`: rows fitted on.
    pub n_rows: u32,
    /// `F`: features.
    pub n_features: u32,
    /// Levenberg–Marquardt steps.
    pub steps: u32,
    /// 1: fit `a` and `b` of `a·f + b` too (regression only).
    pub scaling: u32,
    /// Classification: classes (0 for regression).
    pub n_classes: u32,
    /// Output slots of the programs (0: the root's value).
    pub n_outputs: u32,
}
const _: () = assert!(size_of::<FitParams>() == 32);
// SAFETY: a plain `#[repr(C)]` struct of 4-byte fields whose layout equals GroveFitParams'
// (sizes and offsets asserted on both sides); passed by value only.
unsafe impl DeviceRepr for FitParams {}
// SAFETY: `#[repr(C)]` of four f64 and two u32 (40 bytes, no padding), laid out as
// GroveFitResult (asserted on both sides); every bit pattern is a value.
unsafe impl DeviceRepr for FitResult {}
// SAFETY: as above; all-zero bits are a valid FitResult.
unsafe impl ValidAsZeroBits for FitResult {}

/// Launch parameters of both control kernels (`GroveControlParams` in sim.cu).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ControlParams {
    /// `P`: individuals.
    pub n_trees: u32,
    /// `K`: episodes per individual.
    pub episodes: u32,
    /// `T`: control steps per episode at most.
    pub steps: u32,
    /// Philox counter word 0 of the reset draws.
    pub generation: u32,
    /// Philox key.
    pub seed: u64,
    /// `L`: row stride of the population arrays.
    pub max_len: u32,
    /// [`FLAG_NOISE`] | [`FLAG_NO_TERMINATION`].
    pub flags: u32,
}
/// `GROVE_CTRL_NOISE`: reset noise (else the rest pose).
pub const FLAG_NOISE: u32 = 1;
/// `GROVE_CTRL_NO_TERMINATION`: play every episode for all T steps (benchmarks).
pub const FLAG_NO_TERMINATION: u32 = 2;
const _: () = assert!(size_of::<ControlParams>() == 32);
const _: () = assert!(offset_of!(ControlParams, n_trees) == 0);
const _: () = assert!(offset_of!(ControlParams, episodes) == 4);
const _: () = assert!(offset_of!(ControlParams, steps) == 8);
const _: () = assert!(offset_of!(ControlParams, generation) == 12);
const _: () = assert!(offset_of!(ControlParams, seed) == 16);
const _: () = assert!(offset_of!(ControlParams, max_len) == 24);
const _: () = assert!(offset_of!(ControlParams, flags) == 28);
// SAFETY: a plain `#[repr(C)]` struct of u32/u64 fields laid out as `GroveControlParams` (size
// and offsets asserted here and by static_assert in sim.cu).
unsafe impl DeviceRepr for ControlParams {}

/// `(name, offset)` of every `ControlParams` field, for the cross-check with sim.cu's asserts.
pub fn control_params_layout() -> Vec<(&'static str, usize)> {
    vec![
        ("n_trees", offset_of!(ControlParams, n_trees)),
        ("episodes", offset_of!(ControlParams, episodes)),
        ("steps", offset_of!(ControlParams, steps)),
        ("generation", offset_of!(ControlParams, generation)),
        ("seed", offset_of!(ControlParams, seed)),
        ("max_len", offset_of!(ControlParams, max_len)),
        ("flags", offset_of!(ControlParams, flags)),
    ]
}

/// Launch parameters of `grove_sim_rollout` (`GroveSimParams` in sim.cu), passed by value.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SimParams {
    /// `E`: environments, one thread each.
    pub n_envs: u32,
    /// `T`: control steps at most.
    pub steps: u32,
    /// Philox counter word 0 of the reset draws (the generation).
    pub generation: u32,
    /// 1: reset noise; 0: start at the rest pose.
    pub noise: u32,
    /// Philox key (the run's seed).
    pub seed: u64,
    /// 1: write every state to the trajectory buffer.
    pub record: u32,
    /// Philox counter word 1 of environment e is `first_env + e`.
    pub first_env: u32,
}
const _: () = assert!(size_of::<SimParams>() == 32);
const _: () = assert!(offset_of!(SimParams, n_envs) == 0);
const _: () = assert!(offset_of!(SimParams, steps) == 4);
const _: () = assert!(offset_of!(SimParams, generation) == 8);
const _: () = assert!(offset_of!(SimParams, noise) == 12);
const _: () = assert!(offset_of!(SimParams, seed) == 16);
const _: () = assert!(offset_of!(SimParams, record) == 24);
const _: () = assert!(offset_of!(SimParams, first_env) == 28);
// SAFETY: a plain `#[repr(C)]` struct of u32/u64 fields whose layout equals `GroveSimParams`
// (size and offsets asserted here and by static_assert in sim.cu).
unsafe impl DeviceRepr for SimParams {}

/// `(name, offset)` of every `SimParams` field, for the cross-check with sim.cu's asserts.
pub fn sim_params_layout() -> Vec<(&'static str, usize)> {
    vec![
        ("n_envs", offset_of!(SimParams, n_envs)),
        ("steps", offset_of!(SimParams, steps)),
        ("generation", offset_of!(SimParams, generation)),
        ("noise", offset_of!(SimParams, noise)),
        ("seed", offset_of!(SimParams, seed)),
        ("record", offset_of!(SimParams, record)),
        ("first_env", offset_of!(SimParams, first_env)),
    ]
}
