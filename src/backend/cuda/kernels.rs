//! The kernel sources (`kernels/*.cu`, embedded), the names Rust launches, and the `#[repr(C)]`
//! parameter structs the kernels read, each with its size asserted here; the kernels check
//! every size and field offset against the layout table of [`super::common`] (the generated
//! `grove_common.h`), so the two cannot disagree and compile.

use std::mem::size_of;

use cudarc::driver::{DeviceRepr, ValidAsZeroBits};

use super::common::{COMMON_HEADER, common_header};
use crate::backend::cpu::fit::FitResult;


/// A kernel file: its name (as NVRTC reports it in errors) and its text.
#[derive(Clone, Copy, Debug)]
pub struct KernelSource<'a> {
    /// File name under `kernels/` (`eval.cu`).
    pub file: &'a str,
    /// The file's text.
    pub text: &'a str,
}

/// Name of the generated operator header in compile errors.
pub const OPS_HEADER: &str = "grove_ops.h";

impl KernelSource<'_> {
    /// What NVRTC compiles: the operator header generated from `src/program/ops.rs`, then the
    /// `.cu` file. `#line` directives make NVRTC's line numbers refer to each part's own lines.
    /// A line `#include "NAME"` naming one of [`HEADERS`] or the generated [`COMMON_HEADER`] is
    /// replaced by that header's text (NVRTC gets no include path), again with `#line` directives
    /// on both sides.
    ///
    /// For kernel work without rebuilding: with `GROVE_KERNEL_DIR=DIR`, the `.cu` file and
    /// `grove_math.cuh` are read from `DIR` when they are there (the disk cache keys on the text,
    /// so variants never mix). A text generated in front of the file (sim.cu's model header, up
    /// to its `#line 1 "sim.cu"`) stays: see [`with_override`].
    pub fn full_source(&self) -> String {
        let text = with_override(self.text, self.file, kernel_override(self.file));
        let mut s = format!("#line 1 \"{OPS_HEADER}\"\n{}\n#line 1 \"{}\"\n", ops_header(), self.file);
        for (n, line) in text.lines().enumerate() {
            let header = line.trim().strip_prefix("#include \"").and_then(|r| r.strip_suffix('"'));
            match header.and_then(header_text) {
                Some((name, text)) => {
                    s.push_str(&format!("#line 1 \"{name}\"\n{text}\n#line {} \"{}\"\n", n + 2, self.file));
                }
                None => {
                    s.push_str(line);
                    s.push('\n');
                }
            }
        }
        s
    }
}

/// The header an `#include "NAME"` line names: `(name, text)`, one of [`HEADERS`] or the
/// generated [`COMMON_HEADER`]; `None` for any other name.
fn header_text(name: &str) -> Option<(&'static str, String)> {
    if name == COMMON_HEADER {
        return Some((COMMON_HEADER, common_header()));
    }
    HEADERS.iter().find(|(n, _)| *n == name).map(|&(n, text)| (n, text.to_string()))
}

/// Headers the kernel files include besides the generated [`COMMON_HEADER`], `(name, text)`: `kernels/rng.cuh`, Philox and the draws
/// made from it (twin of `src/rng.rs`); `kernels/order.cuh`, select.rs's order of fitness
/// values; `kernels/sums.cuh`, the per-tree sums of evaluation (RegSums, ClassPartial);
/// `kernels/interp.cuh`, the one interpreter (twin of `backend::cpu::interp`); `kernels/scan.cuh`,
/// the multi-block stable compaction.
pub const HEADERS: &[(&str, &str)] = &[
    ("rng.cuh", include_str!("../../../kernels/rng.cuh")),
    ("order.cuh", include_str!("../../../kernels/order.cuh")),
    ("sums.cuh", include_str!("../../../kernels/sums.cuh")),
    ("interp.cuh", include_str!("../../../kernels/interp.cuh")),
    ("scan.cuh", include_str!("../../../kernels/scan.cuh")),
];

/// `kernels/scan.cuh`: the multi-block stable compaction of select.cu and generation.cu.
pub const SCAN: KernelSource<'static> = KernelSource { file: "scan.cuh", text: include_str!("../../../kernels/scan.cuh") };
/// Threads of a tile's block in the compactions (`GROVE_TILE_THREADS` in scan.cuh).
pub const TILE_THREADS: u32 = 256;
/// Consecutive indices per thread of a tile (`GROVE_TILE_ITEMS`).
pub const TILE_ITEMS: u32 = 4;
/// Indices per tile: the compactions launch `n.div_ceil(TILE)` blocks.
pub const TILE: u32 = TILE_THREADS * TILE_ITEMS;
/// The `#define`s of scan.cuh that must equal the constants above.
pub const SCAN_DEFINES: &[(&str, usize)] = &[("GROVE_TILE_THREADS", TILE_THREADS as usize), ("GROVE_TILE_ITEMS", TILE_ITEMS as usize)];

/// The operator header every kernel file is compiled after (`program::ops::cuda_source`), with
/// `grove_math.cuh` from `GROVE_KERNEL_DIR` when it holds one.
pub fn ops_header() -> String {
    match kernel_override("grove_math.cuh") {
        Some(math) => crate::program::ops::cuda_source_with(&math),
        None => crate::program::ops::cuda_source(),
    }
}

/// `text` (a kernel file's, or one generated around it) with the file's part replaced by
/// `file_text` when there is one: the part after the text's `#line 1 "FILE"` line when it has
/// one (sim.cu comes after its model's generated header, which stays), else the whole text.
pub fn with_override(text: &str, file: &str, file_text: Option<String>) -> String {
    let Some(file_text) = file_text else { return text.to_string() };
    let marker = format!("#line 1 \"{file}\"\n");
    match text.find(&marker) {
        Some(i) => format!("{}{file_text}", &text[..i + marker.len()]),
        None => file_text,
    }
}

/// The text of `DIR/file` when `GROVE_KERNEL_DIR=DIR` is set and the file is there.
pub fn kernel_override(file: &str) -> Option<String> {
    let dir = std::env::var_os("GROVE_KERNEL_DIR")?;
    std::fs::read_to_string(std::path::Path::new(&dir).join(file)).ok()
}

/// `kernels/eval.cu`: tree evaluation, fused regression sums, predictions.
pub const EVAL: KernelSource<'static> = KernelSource { file: "eval.cu", text: include_str!("../../../kernels/eval.cu") };

/// `kernels/map.cu`: the genotype-to-phenotype mapper, one thread per genome.
pub const MAP: KernelSource<'static> = KernelSource { file: "map.cu", text: include_str!("../../../kernels/map.cu") };

/// `kernels/classify.cu`: fused classification fitness (per-class correct counts and softmax
/// cross-entropy), twin of `backend::cpu::classify::evaluate_classification`.
pub const CLASSIFY: KernelSource<'static> =
    KernelSource { file: "classify.cu", text: include_str!("../../../kernels/classify.cu") };

/// `kernels/fit.cu`: constants fitted by Levenberg–Marquardt, one block per tree.
pub const FIT: KernelSource<'static> = KernelSource { file: "fit.cu", text: include_str!("../../../kernels/fit.cu") };
/// Fits the constants of a list of regression trees in place.
pub const FIT_CONSTANTS: &str = "grove_fit_constants";
/// Fits the constants of a list of classification programs in place (softmax cross-entropy).
pub const FIT_CLASS_CONSTANTS: &str = "grove_fit_class_constants";
/// The split fit (a tree's parts over many blocks, for data of more than one part), regression:
/// the start, a pass over every waiting tree's parts, the step between passes.
pub const FIT_SPLIT_START: &str = "grove_fit_split_start_constants";
/// See [`FIT_SPLIT_START`].
pub const FIT_SPLIT_PASS: &str = "grove_fit_split_pass_constants";
/// See [`FIT_SPLIT_START`].
pub const FIT_SPLIT_STEP: &str = "grove_fit_split_step_constants";
/// The split fit for classification.
pub const FIT_SPLIT_START_CLASS: &str = "grove_fit_split_start_class_constants";
/// See [`FIT_SPLIT_START_CLASS`].
pub const FIT_SPLIT_PASS_CLASS: &str = "grove_fit_split_pass_class_constants";
/// See [`FIT_SPLIT_START_CLASS`].
pub const FIT_SPLIT_STEP_CLASS: &str = "grove_fit_split_step_class_constants";
/// Bytes of a split fit's state per tree (`GROVE_FIT_SPLIT_BYTES`: fit.cu asserts its
/// `GroveFitSplit` fits).
pub const FIT_SPLIT_BYTES: usize = 4096;
/// Threads per block of `grove_fit_constants` (at most `GROVE_FIT_THREADS`, at least
/// `GROVE_FIT_MIN_THREADS`): the threads walking the rows (one or two rows each) and summing the
/// products.
pub const FIT_THREADS: u32 = 128;
/// Nodes of a tree the fitting kernels decode in shared memory (`GROVE_FIT_NODES`); a
/// population whose rows are longer gets a scratch array of [`FIT_NODE_BYTES`] per node and tree.
pub const FIT_NODES: usize = 512;
/// Bytes of one decoded node (`GroveFitNode` in fit.cu).
pub const FIT_NODE_BYTES: usize = 8;
/// The `#define`s of fit.cu that must equal grove's constants.
pub const FIT_DEFINES: &[(&str, usize)] = &[
    ("GROVE_FIT_MAX_CONSTANTS", crate::backend::cpu::fit::MAX_FIT_CONSTANTS),
    ("GROVE_FIT_MAX_CLASSES", crate::backend::cpu::fit::MAX_FIT_CLASSES),
    ("GROVE_FIT_STACK", crate::backend::cpu::fit::FIT_STACK),
    ("GROVE_FIT_MAX_PARAMS", crate::backend::cpu::fit::MAX_FIT_PARAMS),
    ("GROVE_FIT_MAX_SUMS", crate::backend::cpu::fit::MAX_FIT_SUMS),
    ("GROVE_FIT_THREADS", FIT_THREADS as usize),
    ("GROVE_FIT_NODES", FIT_NODES),
    ("GROVE_FIT_PART", crate::backend::cpu::fit::FIT_PART),
    ("GROVE_FIT_SPLIT_BYTES", FIT_SPLIT_BYTES),
];

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

/// `kernels/vary.cu`: tree and GE variation, one thread per offspring.
pub const VARY: KernelSource<'static> = KernelSource { file: "vary.cu", text: include_str!("../../../kernels/vary.cu") };

/// `kernels/select.cu`: the valid pool, tournaments, ranking, truncation.
pub const SELECT: KernelSource<'static> = KernelSource { file: "select.cu", text: include_str!("../../../kernels/select.cu") };

/// Every kernel file (each must compile: `tests/cuda_kernels.rs`).
/// `kernels/generation.cu`: evaluation order, regression fitness, statistics and elites of a
/// generation that stays on the device.
pub const GENERATION: KernelSource<'static> =
    KernelSource { file: "generation.cu", text: include_str!("../../../kernels/generation.cu") };
/// Every kernel file compiled without generated parts (sim.cu is compiled per environment).
pub const SOURCES: &[KernelSource<'static>] = &[EVAL, MAP, CLASSIFY, VARY, SELECT, GENERATION, FIT];

/// Stack slots of the fast evaluation kernels (`GROVE_STACK` in eval.cu).
pub const STACK: usize = 32;
/// Stack slots of the fallback kernels, one point per thread (`GROVE_DEEP_STACK` in eval.cu).
pub const DEEP_STACK: usize = 512;
/// Tree nodes compiled into shared memory at a time (`GROVE_CHUNK` in eval.cu and classify.cu;
/// at most one 16-byte instruction each).
pub const CHUNK: usize = 256;
/// Dynamic shared memory the in-block compiler of eval.cu and classify.cu takes after the
/// output slots (`GROVE_COMPILE_SHARED(GROVE_CHUNK, T)` in interp.cuh: the staged nodes, 8
/// bytes each, and two scan words per warp), whatever the block size.
pub const COMPILE_SHARED_BYTES: u32 = (CHUNK as u32) * 8 + 32 * 8;
// With the 16-byte instructions of a chunk (static) and the largest output slots, a block stays
// within the 48 KiB every kernel gets without opting in.
const _: () = assert!(CHUNK * 16 + CHUNK * 8 + 32 * 8 + 32 * 1024 <= 48 * 1024);

/// Most threads a block may have (`GROVE_MAX_THREADS` in eval.cu).
pub const MAX_THREADS: u32 = 1024;
/// Most points per thread of the fast kernels.
pub const MAX_POINTS_PER_THREAD: u32 = 8;
/// The `#define`s of eval.cu that must equal the constants above.
pub const EVAL_DEFINES: &[(&str, usize)] = &[
    ("GROVE_STACK", STACK),
    ("GROVE_DEEP_STACK", DEEP_STACK),
    ("GROVE_CHUNK", CHUNK),
    ("GROVE_MAX_THREADS", MAX_THREADS as usize),
];

/// `(symbol, depth)` entries of each mapper thread's stack (`GROVE_MAP_STACK` in map.cu).
pub const MAP_STACK: usize = crate::genome::MAP_STACK;
/// Bytes of the constant-memory rule table (`GROVE_TABLE_BYTES` in map.cu).
pub const MAP_TABLE_BYTES: usize = crate::grammar::compile::TABLE_LIMIT_BYTES;
/// The `#define`s of map.cu that must equal the constants above.
pub const MAP_DEFINES: &[(&str, usize)] = &[
    ("GROVE_MAP_STACK", MAP_STACK),
    ("GROVE_TABLE_BYTES", MAP_TABLE_BYTES),
    ("GROVE_BUILD_FRAMES", crate::genome::build::BUILD_FRAMES),
    ("GROVE_SPELL_FRAMES", crate::genome::build::SPELL_FRAMES),
    ("GROVE_SPELL_CHARS", crate::genome::build::SPELL_CHARS),
    ("GROVE_ITEM_NODE", crate::grammar::template::item_kind::NODE as usize),
    ("GROVE_ITEM_HOLE", crate::grammar::template::item_kind::HOLE as usize),
    ("GROVE_ITEM_OP_FROM", crate::grammar::template::item_kind::OP_FROM as usize),
    ("GROVE_ITEM_OUTPUT", crate::grammar::template::item_kind::OUTPUT as usize),
    ("GROVE_ITEM_SPELLED_CONST", crate::grammar::template::item_kind::SPELLED_CONST as usize),
    ("GROVE_ITEM_SPELLED_VAR", crate::grammar::template::item_kind::SPELLED_VAR as usize),
];
/// The mapper kernel.
pub const MAP_KERNEL: &str = "grove_map";
/// Genomes to trees: the mapper and the tree builder in one kernel (map.cu).
pub const MAP_TREES_KERNEL: &str = "grove_map_trees";
/// GE's first generation (map.cu): `init_genomes` on the device.
pub const INIT_GENOMES: &str = "grove_init_genomes";
/// The constant-memory rule table of map.cu.
pub const MAP_TABLE_SYMBOL: &str = "grove_table";

/// Regression kernels with `K` points per thread, indexed by `K - 1`.
pub const REGRESSION: [&str; 8] = [
    "grove_eval_regression_k1",
    "grove_eval_regression_k2",
    "grove_eval_regression_k3",
    "grove_eval_regression_k4",
    "grove_eval_regression_k5",
    "grove_eval_regression_k6",
    "grove_eval_regression_k7",
    "grove_eval_regression_k8",
];
/// Prediction kernels with `K` points per thread, indexed by `K - 1`.
pub const PREDICT: [&str; 8] = [
    "grove_predict_k1",
    "grove_predict_k2",
    "grove_predict_k3",
    "grove_predict_k4",
    "grove_predict_k5",
    "grove_predict_k6",
    "grove_predict_k7",
    "grove_predict_k8",
];
/// The regression fallback for trees deeper than [`STACK`].
pub const REGRESSION_DEEP: &str = "grove_eval_regression_deep";
/// The prediction fallback for trees deeper than [`STACK`].
pub const PREDICT_DEEP: &str = "grove_predict_deep";
/// Sums the per-tile partial sums of each tree, in tile order.
pub const REDUCE_REGRESSION: &str = "grove_reduce_regression";
/// Each program's sums for its joint fit with linear terms of the inputs, from its predictions
/// (twin `backend::cpu::eval::evaluate_joint`).
pub const JOINT_SUMS: &str = "grove_joint_sums";
/// Each program's sums for its fitted linear head over K outputs, from its predictions (twin
/// `backend::cpu::eval::evaluate_head`).
pub const HEAD_SUMS: &str = "grove_head_sums";
/// A classifier's head sums per program over its outputs (eval.cu).
pub const CLASS_HEAD_SUMS: &str = "grove_class_head_sums";
/// Threads of a [`JOINT_SUMS`] or [`HEAD_SUMS`] block (`GROVE_JOINT_THREADS` in eval.cu).
pub const JOINT_THREADS: u32 = 256;
/// Compiles trees to linear programs (`kernels/interp.cuh` over its `grove_compile_tree`,
/// compiled into sim.cu only, for the policies; twin `backend::cpu::interp::compile_trees`).
/// eval.cu and classify.cu compile inside each block instead (interp.cuh's `grove_compile_chunk`).
pub const COMPILE_TREES: &str = "grove_compile_trees";

/// The classification kernel for trees whose stack need is at most [`STACK`].
pub const CLASSIFY_FAST: &str = "grove_classify_fast";
/// The classification kernel for deeper trees (up to [`DEEP_STACK`]).
pub const CLASSIFY_DEEP: &str = "grove_classify_deep";
/// Sums the per-tile classification partials of each tree, in tile order.
pub const REDUCE_CLASSIFY: &str = "grove_reduce_classify";
/// The `#define`s of classify.cu that must equal the constants above (as in eval.cu).
pub const CLASSIFY_DEFINES: &[(&str, usize)] = EVAL_DEFINES;
/// One tree operator for every child (`kernels/vary.cu`; like the other tree kernels there, a
/// group of [`LANES`] threads per child).
pub const VARY_OP: &str = "grove_vary_op";
/// One generation of tree breeding, twin of `program::breed`.
pub const BREED_TREES: &str = "grove_breed_trees";
/// Random trees of the first generation, twin of `init_population`.
pub const INIT_TREES: &str = "grove_init_trees";
/// Copies chosen rows of a tree population (elites).
pub const GATHER_TREES: &str = "grove_gather_trees";
/// Writes rows of a small population over chosen rows of another (migrants).
pub const SCATTER_TREES: &str = "grove_scatter_trees";
/// GE variable one-point crossover, one thread per pair.
pub const GE_CROSSOVER: &str = "grove_ge_crossover";
/// GE per-codon int-flip, one thread per child.
pub const GE_INT_FLIP: &str = "grove_ge_int_flip";
/// Copies chosen genomes (elites).
pub const GATHER_GENOMES: &str = "grove_gather_genomes";
/// Writes genomes over chosen rows of another set (migrants).
pub const SCATTER_GENOMES: &str = "grove_scatter_genomes";
/// Draws from `rng.cuh` for the parity test of the random numbers.
pub const RNG_DRAWS: &str = "grove_rng_draws";
/// Most entries of `BreedConfig::crossovers` (`GROVE_MAX_CROSSOVERS` in vary.cu).
pub const MAX_CROSSOVERS: usize = 8;
/// Most entries of `BreedConfig::mutations` (`GROVE_MAX_MUTATIONS` in vary.cu).
pub const MAX_MUTATIONS: usize = 16;
/// Threads that make one child in the tree kernels of vary.cu (`GROVE_LANES`): a warp, whose
/// lanes take the same decisions and share the copying and scanning of rows.
pub const LANES: u32 = 32;
/// The `#define`s of vary.cu that must equal the constants above.
pub const VARY_DEFINES: &[(&str, usize)] =
    &[("GROVE_MAX_CROSSOVERS", MAX_CROSSOVERS), ("GROVE_MAX_MUTATIONS", MAX_MUTATIONS), ("GROVE_LANES", LANES as usize)];

/// The valid pool (`kernels/select.cu`).
pub const VALID_POOL: &str = "grove_valid_pool";
/// ... its counts per tile (scan.cuh).
pub const VALID_COUNT: &str = "grove_valid_count";
/// ... the tiles' offsets and the pool's size.
pub const VALID_SCAN: &str = "grove_valid_scan";
/// Tournament selection, with or without replacement.
pub const TOURNAMENT: &str = "grove_tournament";
/// The full ranking by fitness (elitism, truncation).
pub const RANK: &str = "grove_rank";
/// Truncation selection.
pub const TRUNCATION: &str = "grove_truncation";
/// Epsilon-lexicase selection.
pub const LEXICASE: &str = "grove_lexicase";
/// The `k` best or worst by fitness without a full ranking (migration): the radix select's
/// state, its passes (a histogram and the digit it gives, one launch each), the gathering of the
/// `k` and their order.
pub const TOPK_INIT: &str = "grove_topk_init";
/// ... one pass: the histogram, then the digit its last block picks.
pub const TOPK_PASS: &str = "grove_topk_pass";
/// ... the `k` rows at or below the `k`-th key.
pub const TOPK_COLLECT: &str = "grove_topk_collect";
/// ... each written to its rank.
pub const TOPK_ORDER: &str = "grove_topk_order";
/// NSGA-II: the sort keys of the points (`grove_pareto_keys`).
pub const PARETO_KEYS: &str = "grove_pareto_keys";
/// ... the fronts over the points sorted by (size, error).
pub const PARETO_RANKS: &str = "grove_pareto_ranks";
/// ... one objective's crowding distances over the points sorted by (rank, objective).
pub const PARETO_CROWDING: &str = "grove_pareto_crowding";
/// ... the crowded-comparison tournament.
pub const PARETO_TOURNAMENT: &str = "grove_pareto_tournament";
/// A pass of the radix sort: the digits' counts per tile.
pub const RADIX_COUNT: &str = "grove_radix_count";
/// ... the counts to offsets.
pub const RADIX_OFFSETS: &str = "grove_radix_offsets";
/// ... each key to its place.
pub const RADIX_SCATTER: &str = "grove_radix_scatter";
/// Threads of a radix tile's block (`GROVE_RADIX_THREADS` in select.cu).
pub const RADIX_THREADS: u32 = 256;
/// Keys per thread of a tile (`GROVE_RADIX_ITEMS`).
pub const RADIX_ITEMS: u32 = 8;
/// Keys per tile.
pub const RADIX_TILE: u32 = RADIX_THREADS * RADIX_ITEMS;
/// Threads of the one block of `grove_pareto_ranks` (any multiple of 32 up to 1024).
pub const PARETO_THREADS: u32 = 1024;
/// Rows of 32-bit words gathered by index (fitness, used codons of migrants).
pub const GATHER_WORDS: &str = "grove_gather_words";
/// Rows of 32-bit words scattered by index.
pub const SCATTER_WORDS: &str = "grove_scatter_words";
/// Most contestants of a tournament without replacement (`GROVE_MAX_DISTINCT` in select.cu).
pub const MAX_DISTINCT: usize = 64;
/// Block size of the ranking kernel (`GROVE_RANK_TILE` in select.cu).
pub const RANK_TILE: u32 = 256;
/// The `#define`s of select.cu that must equal the constants above.
pub const SELECT_DEFINES: &[(&str, usize)] = &[
    ("GROVE_MAX_DISTINCT", MAX_DISTINCT),
    ("GROVE_RANK_TILE", RANK_TILE as usize),
    ("GROVE_RADIX_THREADS", RADIX_THREADS as usize),
    ("GROVE_RADIX_ITEMS", RADIX_ITEMS as usize),
];

/// Threads of the one-block kernels of generation.cu (`GROVE_SCAN_THREADS`).
pub const SCAN_THREADS: u32 = 1024;
/// Threads of `grove_argmin_blocks` (`GROVE_REDUCE_THREADS`).
pub const REDUCE_THREADS: u32 = 256;
/// Most elites the device loop keeps (`GROVE_MAX_ELITE`).
pub const MAX_ELITE: usize = 64;
/// The `#define`s of generation.cu that must equal the constants above.
pub const GENERATION_DEFINES: &[(&str, usize)] = &[
    ("GROVE_STACK", STACK),
    ("GROVE_DEEP_STACK", DEEP_STACK),
    ("GROVE_SCAN_THREADS", SCAN_THREADS as usize),
    ("GROVE_REDUCE_THREADS", REDUCE_THREADS as usize),
    ("GROVE_MAX_ELITE", MAX_ELITE),
];
/// Which evaluation kernel takes each tree.
pub const STACK_CLASS: &str = "grove_stack_class";
/// Control: which trees the roll-out kernel plays (`control::skip_mask`).
pub const CONTROL_SKIP: &str = "grove_control_skip";
/// Control: the task's fitness of the mean returns, and the env steps played.
pub const CONTROL_FITNESS: &str = "grove_control_fitness";
/// Tree ids in evaluation order, and their counts.
pub const PARTITION: &str = "grove_partition";
/// ... its counts per tile (scan.cuh).
pub const PARTITION_COUNT: &str = "grove_partition_count";
/// ... the tiles' offsets and the counts.
pub const PARTITION_SCAN: &str = "grove_partition_scan";
/// Regression fitness from the fused sums.
pub const REGRESSION_FITNESS: &str = "grove_regression_fitness";
/// Another row shard's regression sums added to a tree's (rows split over GPUs).
pub const ADD_REGRESSION_SUMS: &str = "grove_add_regression_sums";
/// The best individual not yet chosen, per block (and statistics).
pub const ARGMIN_BLOCKS: &str = "grove_argmin_blocks";
/// ... combined over the blocks.
pub const ARGMIN_FINAL: &str = "grove_argmin_final";
/// Classification fitness from the per-tree sums.
pub const CLASSIFY_FITNESS: &str = "grove_classify_fitness";
/// Per-size best and counts: reset.
pub const SIZES_RESET: &str = "grove_sizes_reset";
/// ... the best key of each size and the size histogram.
pub const SIZES_KEYS: &str = "grove_sizes_keys";
/// ... the lowest index reaching each size's best key.
pub const SIZES_INDEX: &str = "grove_sizes_index";

/// Every kernel Rust launches, with its source file (`tests/cuda_kernels.rs` checks each is an
/// `extern "C" __global__` function there). The classification kernels are prepared for the
/// CUDA backend but not launched yet (`Backend::classification_sums` runs the CPU reference).
pub fn launched() -> Vec<(&'static str, KernelSource<'static>)> {
    let mut v: Vec<_> = REGRESSION.iter().chain(PREDICT.iter()).map(|k| (*k, EVAL)).collect();
    v.extend([(REGRESSION_DEEP, EVAL), (PREDICT_DEEP, EVAL), (REDUCE_REGRESSION, EVAL), (JOINT_SUMS, EVAL), (HEAD_SUMS, EVAL), (CLASS_HEAD_SUMS, EVAL), (MAP_KERNEL, MAP), (MAP_TREES_KERNEL, MAP), (INIT_GENOMES, MAP)]);
    v.extend([(CLASSIFY_FAST, CLASSIFY), (CLASSIFY_DEEP, CLASSIFY), (REDUCE_CLASSIFY, CLASSIFY)]);
    v.extend(
        [INIT_TREES, VARY_OP, BREED_TREES, GATHER_TREES, SCATTER_TREES, GE_CROSSOVER, GE_INT_FLIP, GATHER_GENOMES, SCATTER_GENOMES, RNG_DRAWS]
            .map(|k| (k, VARY)),
    );
    v.extend([
            VALID_COUNT,
            VALID_SCAN,
            VALID_POOL,
            TOURNAMENT,
            RANK,
            TRUNCATION,
            LEXICASE,
            TOPK_INIT,
            TOPK_PASS,
            TOPK_COLLECT,
            TOPK_ORDER,
            GATHER_WORDS,
            SCATTER_WORDS,
            PARETO_KEYS,
            PARETO_RANKS,
            PARETO_CROWDING,
            PARETO_TOURNAMENT,
            RADIX_COUNT,
            RADIX_OFFSETS,
            RADIX_SCATTER,
        ]
        .map(|k| (k, SELECT)));
    v.extend(
        [STACK_CLASS, PARTITION_COUNT, PARTITION_SCAN, PARTITION, REGRESSION_FITNESS, ADD_REGRESSION_SUMS, CLASSIFY_FITNESS, ARGMIN_BLOCKS, ARGMIN_FINAL, SIZES_RESET, SIZES_KEYS, SIZES_INDEX, CONTROL_SKIP, CONTROL_FITNESS]
            .map(|k| (k, GENERATION)),
    );
    v.extend([FIT_CONSTANTS, FIT_CLASS_CONSTANTS, FIT_SPLIT_START, FIT_SPLIT_PASS, FIT_SPLIT_STEP, FIT_SPLIT_START_CLASS, FIT_SPLIT_PASS_CLASS, FIT_SPLIT_STEP_CLASS].map(|k| (k, FIT)));
    v
}

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
    /// Padding.
    pub pad: u32,
}
const _: () = assert!(size_of::<MapTreesParams>() == 48);

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
    /// `grove_map_trees`: more open templates than `BUILD_FRAMES` (never for rows of at most
    /// that many nodes; an error, not an outcome).
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

/// `(name, code)` of every status, as map.cu `#define`s them (`GROVE_MAP_VALID 0`, ...).
pub const MAP_STATUS_DEFINES: &[(&str, u32)] = &[
    ("GROVE_MAP_VALID", MapStatus::Valid as u32),
    ("GROVE_MAP_OUT_OF_CODONS", MapStatus::OutOfCodons as u32),
    ("GROVE_MAP_TOO_DEEP", MapStatus::TooDeep as u32),
    ("GROVE_MAP_TOO_MANY_NODES", MapStatus::TooManyNodes as u32),
    ("GROVE_MAP_DERIVATION_FULL", MapStatus::DerivationFull as u32),
    ("GROVE_MAP_STACK_OVERFLOW", MapStatus::StackOverflow as u32),
    ("GROVE_BUILD_TOO_LONG", MapStatus::TooLong as u32),
    ("GROVE_BUILD_BAD_SPELLING", MapStatus::BadSpelling as u32),
    ("GROVE_BUILD_FRAMES_FULL", MapStatus::BuildFramesFull as u32),
];

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
    /// `grove_vary_op`'s operator: [`op_code`].
    pub op: u32,
    /// Cumulative crossover weights, normalised to end at 1 (as `breed` computes them).
    pub cum_x: [f32; MAX_CROSSOVERS],
    /// The crossover of each entry, as [`op_code`].
    pub kind_x: [u32; MAX_CROSSOVERS],
    /// Cumulative mutation weights, normalised to end at 1.
    pub cum_m: [f32; MAX_MUTATIONS],
    /// The mutation of each entry, as [`op_code`].
    pub kind_m: [u32; MAX_MUTATIONS],
    /// `grove_init_trees`: `TreeSpec::method` (0 grow, 1 full, 2 half and half).
    pub init_method: u32,
    /// `TreeSpec::min_depth`.
    pub min_depth: u32,
    /// `TreeSpec::max_depth`.
    pub max_depth: u32,
}

/// Operator codes of vary.cu (`GROVE_X_*`, `GROVE_M_*`): crossovers, then mutations.
pub fn op_code(op: crate::program::vary::Operator) -> u32 {
    use crate::program::vary::{Crossover, Mutation, Operator};
    match op {
        Operator::Crossover(Crossover::OnePoint) => 0,
        Operator::Crossover(Crossover::LeafBiased) => 1,
        Operator::Mutation(Mutation::Subtree) => 2,
        Operator::Mutation(Mutation::Hoist) => 3,
        Operator::Mutation(Mutation::Point) => 4,
        Operator::Mutation(Mutation::MultiPoint) => 5,
        Operator::Mutation(Mutation::Insert) => 6,
        Operator::Mutation(Mutation::Delete) => 7,
        Operator::Mutation(Mutation::Constant) => 8,
        Operator::Mutation(Mutation::MultiConstant) => 9,
    }
}

/// `(name, code)` of every operator and outcome, as vary.cu `#define`s them.
pub fn vary_code_defines() -> Vec<(&'static str, u32)> {
    use crate::program::vary::{Crossover, Mutation, Operator};
    vec![
        ("GROVE_X_ONE_POINT", op_code(Operator::Crossover(Crossover::OnePoint))),
        ("GROVE_X_LEAF_BIASED", op_code(Operator::Crossover(Crossover::LeafBiased))),
        ("GROVE_M_SUBTREE", op_code(Operator::Mutation(Mutation::Subtree))),
        ("GROVE_M_HOIST", op_code(Operator::Mutation(Mutation::Hoist))),
        ("GROVE_M_POINT", op_code(Operator::Mutation(Mutation::Point))),
        ("GROVE_M_MULTI_POINT", op_code(Operator::Mutation(Mutation::MultiPoint))),
        ("GROVE_M_INSERT", op_code(Operator::Mutation(Mutation::Insert))),
        ("GROVE_M_DELETE", op_code(Operator::Mutation(Mutation::Delete))),
        ("GROVE_M_CONSTANT", op_code(Operator::Mutation(Mutation::Constant))),
        ("GROVE_M_MULTI_CONSTANT", op_code(Operator::Mutation(Mutation::MultiConstant))),
        ("GROVE_INIT_GROW", 0),
        ("GROVE_INIT_FULL", 1),
        ("GROVE_INIT_HALF_AND_HALF", 2),
        ("GROVE_CHANGED", 0),
        ("GROVE_UNCHANGED", 1),
        ("GROVE_OVERSIZED", 2),
        ("GROVE_NO_ROOM_FOR_OUTPUTS", 3),
    ]
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
}

const _: () = assert!(size_of::<VaryParams>() == 308);
const _: () = assert!(size_of::<GeParams>() == 48);
const _: () = assert!(size_of::<SelectParams>() == 40);
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
