//! The kernel sources (`kernels/*.cu`, embedded), the names Rust launches, and the constants
//! and `#define`s both sides must agree on. The `#[repr(C)]` structs the kernels read are in
//! [`super::params`].

use super::common::{COMMON_HEADER, common_header};
use super::params::{MAX_CROSSOVERS, MAX_MUTATIONS, MapStatus};


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
/// the multi-block stable compaction; `kernels/lanes.cuh`, groups of lanes of a warp working as one.
pub const HEADERS: &[(&str, &str)] = &[
    ("rng.cuh", include_str!("../../../kernels/rng.cuh")),
    ("order.cuh", include_str!("../../../kernels/order.cuh")),
    ("sums.cuh", include_str!("../../../kernels/sums.cuh")),
    ("interp.cuh", include_str!("../../../kernels/interp.cuh")),
    ("scan.cuh", include_str!("../../../kernels/scan.cuh")),
    ("lanes.cuh", include_str!("../../../kernels/lanes.cuh")),
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
/// GE subtree crossover (map.cu, beside the mapper it calls): one thread per pair, twin of
/// `genome::subtree::subtree_crossover`.
pub const GE_SUBTREE_CROSSOVER: &str = "grove_ge_subtree_crossover";
/// GE subtree mutation (map.cu): one thread per row, in place, twin of
/// `genome::subtree::subtree_mutate`.
pub const GE_SUBTREE_MUTATE: &str = "grove_ge_subtree_mutate";
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
/// Each program's fitness from its joint sums, the device loop's with linear terms of the inputs
/// (twin `task::regression::fitness::joint_error` plus parsimony, bit for bit).
pub const JOINT_FITNESS: &str = "grove_joint_fitness";
/// Each program's sums for its fitted linear head over K outputs, from its predictions (twin
/// `backend::cpu::eval::evaluate_head`).
pub const HEAD_SUMS: &str = "grove_head_sums";
/// A classifier's head sums per program over its outputs (eval.cu).
pub const CLASS_HEAD_SUMS: &str = "grove_class_head_sums";
/// Each program's sum of a loss of the user's own over the rows at its (linearly scaled)
/// predictions (twin `backend::cpu::eval::evaluate_loss`).
pub const LOSS_SUMS: &str = "grove_loss_sums";
/// Each program's predictions under its linear scaling, in place: what a fitness function of
/// the user's own receives on the device.
pub const SCALE_PREDICTIONS: &str = "grove_scale_predictions";
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
/// Epsilon-lexicase selection, a warp a selection (any pool and case count).
pub const LEXICASE: &str = "grove_lexicase";
/// Epsilon-lexicase selection, a block a group of selections sharing their candidates, staged
/// in shared memory (where they fit).
pub const LEXICASE_STAGED: &str = "grove_lexicase_staged";
/// Lexicase: the individuals whose errors set the epsilons.
pub const EPSILON_SAMPLE_KERNEL: &str = "grove_epsilon_sample";
/// Lexicase: the epsilons, a block per case.
pub const LEXICASE_EPSILONS: &str = "grove_lexicase_epsilons";
/// Lexicase: each row's hash into the clone table.
pub const ERROR_GROUPS_INSERT: &str = "grove_error_groups_insert";
/// Lexicase: each row's clone group, checked against its hash's lowest index.
pub const ERROR_GROUPS_VERIFY: &str = "grove_error_groups_verify";
/// Unique parents (`select::parent_pool`): each valid fitness into the table of groups.
pub const UNIQUE_INSERT: &str = "grove_unique_insert";
/// ... each individual's group: its fitness's smallest, then first, individual.
pub const UNIQUE_GROUPS: &str = "grove_unique_groups";
/// Threads of a `grove_lexicase_epsilons` block (`GROVE_EPSILON_THREADS`).
pub const EPSILON_THREADS: u32 = 256;
/// The most cases whose order a `grove_lexicase` selection keeps in shared memory
/// (`GROVE_LEX_CASES`); more go to a buffer of `n_cases` words per selection.
pub const LEXICASE_CASES: usize = 1024;
/// Selections (groups of [`LANES`] threads) per `grove_lexicase` block (`GROVE_LEX_GROUPS`).
pub const LEXICASE_GROUPS: u32 = 4;
/// The largest candidate pool `grove_lexicase_staged` serves (`GROVE_LEX_STAGED_MAX`): its
/// survivors are a bit mask of this many positions, and a block has at most this many threads.
pub const LEXICASE_STAGED_MAX: usize = 256;
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
    ("GROVE_EPSILON_SAMPLE", crate::select::EPSILON_SAMPLE),
    ("GROVE_EPSILON_THREADS", EPSILON_THREADS as usize),
    ("GROVE_LANES", LANES as usize),
    ("GROVE_LEX_CASES", LEXICASE_CASES),
    ("GROVE_LEX_GROUPS", LEXICASE_GROUPS as usize),
    ("GROVE_LEX_STAGED_MAX", LEXICASE_STAGED_MAX),
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
/// Lexicase: chosen rows of a data set gathered as a data set of their own.
pub const GATHER_ROWS: &str = "grove_gather_rows";
/// Lexicase: regression's per-case errors under each tree's scaling.
pub const CASE_ERRORS: &str = "grove_case_errors";
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
    v.extend([(REGRESSION_DEEP, EVAL), (PREDICT_DEEP, EVAL), (REDUCE_REGRESSION, EVAL), (JOINT_SUMS, EVAL), (JOINT_FITNESS, EVAL), (HEAD_SUMS, EVAL), (CLASS_HEAD_SUMS, EVAL), (LOSS_SUMS, EVAL), (SCALE_PREDICTIONS, EVAL), (MAP_KERNEL, MAP), (MAP_TREES_KERNEL, MAP), (INIT_GENOMES, MAP), (GE_SUBTREE_CROSSOVER, MAP), (GE_SUBTREE_MUTATE, MAP)]);
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
            LEXICASE_STAGED,
            EPSILON_SAMPLE_KERNEL,
            LEXICASE_EPSILONS,
            ERROR_GROUPS_INSERT,
            ERROR_GROUPS_VERIFY,
            UNIQUE_INSERT,
            UNIQUE_GROUPS,
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
        [STACK_CLASS, PARTITION_COUNT, PARTITION_SCAN, PARTITION, REGRESSION_FITNESS, ADD_REGRESSION_SUMS, CLASSIFY_FITNESS, ARGMIN_BLOCKS, ARGMIN_FINAL, SIZES_RESET, SIZES_KEYS, SIZES_INDEX, CONTROL_SKIP, CONTROL_FITNESS, GATHER_ROWS, CASE_ERRORS]
            .map(|k| (k, GENERATION)),
    );
    v.extend([FIT_CONSTANTS, FIT_CLASS_CONSTANTS, FIT_SPLIT_START, FIT_SPLIT_PASS, FIT_SPLIT_STEP, FIT_SPLIT_START_CLASS, FIT_SPLIT_PASS_CLASS, FIT_SPLIT_STEP_CLASS].map(|k| (k, FIT)));
    v
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
