//! The kernel sources (`kernels/*.cu`, embedded), the names Rust launches, and the `#[repr(C)]`
//! parameter structs the kernels read, each with its size and field offsets asserted here and,
//! with the same numbers, by `static_assert` in the `.cu` file (`tests/cuda_kernels.rs` checks
//! that the two lists agree).

use std::mem::{offset_of, size_of};

use cudarc::driver::{DeviceRepr, ValidAsZeroBits};

use crate::program::ops::cuda_source;

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
    ///
    /// For kernel work without rebuilding: with `GROVE_KERNEL_DIR=DIR`, the `.cu` file and
    /// `grove_math.cuh` are read from `DIR` when they are there (the disk cache keys on the text,
    /// so variants never mix).
    pub fn full_source(&self) -> String {
        let text = kernel_override(self.file).unwrap_or_else(|| self.text.to_string());
        format!("#line 1 \"{OPS_HEADER}\"\n{}\n#line 1 \"{}\"\n{}", cuda_source(), self.file, text)
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
/// cross-entropy), twin of `program::classify::evaluate_classification`.
pub const CLASSIFY: KernelSource<'static> =
    KernelSource { file: "classify.cu", text: include_str!("../../../kernels/classify.cu") };

/// Every kernel file (each must compile: `tests/cuda_kernels.rs`).
pub const SOURCES: &[KernelSource<'static>] = &[EVAL, MAP, CLASSIFY];

/// Stack slots of the fast evaluation kernels (`GROVE_STACK` in eval.cu).
pub const STACK: usize = 32;
/// Stack slots of the fallback kernels, one point per thread (`GROVE_DEEP_STACK` in eval.cu).
pub const DEEP_STACK: usize = 512;
/// Tree nodes staged in shared memory at a time (`GROVE_CHUNK` in eval.cu).
pub const CHUNK: usize = 1024;
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
pub const MAP_STACK: usize = 256;
/// Bytes of the constant-memory rule table (`GROVE_TABLE_BYTES` in map.cu).
pub const MAP_TABLE_BYTES: usize = crate::grammar::compile::TABLE_LIMIT_BYTES;
/// The `#define`s of map.cu that must equal the constants above.
pub const MAP_DEFINES: &[(&str, usize)] = &[("GROVE_MAP_STACK", MAP_STACK), ("GROVE_TABLE_BYTES", MAP_TABLE_BYTES)];
/// The mapper kernel.
pub const MAP_KERNEL: &str = "grove_map";
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

/// The classification kernel for trees whose stack need is at most [`STACK`].
pub const CLASSIFY_FAST: &str = "grove_classify_fast";
/// The classification kernel for deeper trees (up to [`DEEP_STACK`]).
pub const CLASSIFY_DEEP: &str = "grove_classify_deep";
/// Sums the per-tile classification partials of each tree, in tile order.
pub const REDUCE_CLASSIFY: &str = "grove_reduce_classify";
/// The `#define`s of classify.cu that must equal the constants above (as in eval.cu).
pub const CLASSIFY_DEFINES: &[(&str, usize)] = EVAL_DEFINES;

/// Every kernel Rust launches, with its source file (`tests/cuda_kernels.rs` checks each is an
/// `extern "C" __global__` function there). The classification kernels are prepared for the
/// CUDA backend but not launched yet (`Backend::classification_sums` runs the CPU reference).
pub fn launched() -> Vec<(&'static str, KernelSource<'static>)> {
    let mut v: Vec<_> = REGRESSION.iter().chain(PREDICT.iter()).map(|k| (*k, EVAL)).collect();
    v.extend([(REGRESSION_DEEP, EVAL), (PREDICT_DEEP, EVAL), (REDUCE_REGRESSION, EVAL), (MAP_KERNEL, MAP)]);
    v.extend([(CLASSIFY_FAST, CLASSIFY), (CLASSIFY_DEEP, CLASSIFY), (REDUCE_CLASSIFY, CLASSIFY)]);
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
    /// The thread's stack would overflow; the host maps the genome on the CPU instead.
    StackOverflow = 5,
}

impl MapStatus {
    /// The status of a code, `None` for an unknown one.
    pub fn from_code(c: u32) -> Option<Self> {
        use MapStatus::*;
        [Valid, OutOfCodons, TooDeep, TooManyNodes, DerivationFull, StackOverflow].into_iter().find(|s| *s as u32 == c)
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
];

const _: () = assert!(size_of::<MapParams>() == 32);
const _: () = assert!(size_of::<MapOut>() == 20);
const _: () = assert!(size_of::<EvalParams>() == 32);
const _: () = assert!(size_of::<RegSums>() == 64);
const _: () = assert!(size_of::<ReduceParams>() == 8);
const _: () = assert!(size_of::<ClassifyParams>() == 32);
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
// SAFETY: all-zero bytes are a valid `ClassPartial` (zeros of f64 and u32).
unsafe impl ValidAsZeroBits for ClassPartial {}
// SAFETY: all-zero bytes are a valid `RegSums` (zeros of f64 and u32); read-back buffers of it
// are page-locked memory zeroed on allocation.
unsafe impl ValidAsZeroBits for RegSums {}

macro_rules! layout {
    ($($s:ident { $($f:ident),+ }),+ $(,)?) => {
        /// `(struct in the .cu, size)` of every parameter struct.
        pub const SIZES: &[(&str, usize)] = &[$((concat!("Grove", stringify!($s)), size_of::<$s>())),+];
        /// `(struct in the .cu, field, offset)` of every field.
        pub const OFFSETS: &[(&str, &str, usize)] = &[$($((concat!("Grove", stringify!($s)), stringify!($f), offset_of!($s, $f))),+),+];
    };
}

layout! {
    EvalParams { n_rows, n_features, max_len, n_outputs, n_trees, tile_points, n_tiles, reserved },
    RegSums { sse, sae, sum_f, sum_ff, sum_fy, sum_y, sum_yy, n, bad },
    ReduceParams { n_trees, n_tiles },
    MapParams { n_genomes, capacity, max_wraps, lazy, max_depth, max_nodes, max_derivation, table_words },
    MapOut { status, used_codons, depth, nodes, n_derivation },
    ClassifyParams { n_rows, n_features, max_len, n_outputs, n_classes, n_trees, tile_points, n_tiles },
    ClassPartial { ce, n, bad },
    ClassReduceParams { n_trees, n_tiles, n_classes, reserved },
}
