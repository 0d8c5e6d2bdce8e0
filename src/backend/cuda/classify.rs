//! Classification fitness on the GPU: the host side of `kernels/classify.cu`, twin of
//! `backend::cpu::classify::evaluate_classification` (parity: `tests/cuda_eval.rs`,
//! `classify_matches_reference`).
//!
//! A call checks and packs the population as regression does ([`super::pack`]), copies it and
//! launches one block per (tree, data tile): trees needing at most
//! [`STACK`](kernels::STACK) stack slots go to `grove_classify_fast`, deeper ones to
//! `grove_classify_deep`; then `grove_reduce_classify` sums each tree's tiles in order. The
//! per-class correct counts are exact integers and the cross-entropy is reduced in a fixed
//! order, so results are reproducible for a given launch shape.
//!
//! Not yet tuned: buffers are allocated per call (regression keeps them in the engine), one
//! point per thread per pass. `Backend::classification_sums` calls this on CUDA unless
//! `GROVE_CLASSIFY_KERNEL=0`. The device loop's classification fitness (these kernels, then
//! `generation.cu`'s `grove_classify_fitness`) is in [`super::generation`].

use cudarc::driver::{CudaSlice, LaunchConfig, PushKernelArg};

use crate::program::fitness::ClassSums;
use crate::program::tree::Population;

use super::error::{During, GpuError, Result};
use super::kernels::{self, CLASSIFY};
use super::params::{ClassPartial, ClassReduceParams, ClassifyParams};
use super::pack::{as_bytes_mut, host_buffer, pack, Layout};
use super::CudaEngine;

/// A classification data set on the device: features `x: [n_features][n_rows]` (f32,
/// feature-major), `labels: [n_rows]` (u32, each `< n_classes`), and the offsets added to the
/// programs' outputs where there are linear terms of the inputs
/// ([`CudaEngine::set_class_offset`]).
pub struct DeviceClassData {
    pub(super) x: CudaSlice<f32>,
    pub(super) labels: CudaSlice<u32>,
    pub(super) offset: Option<(CudaSlice<f32>, usize)>,
    pub(super) n_rows: usize,
    pub(super) n_features: usize,
    pub(super) n_classes: usize,
    pub(super) engine: u64,
}

impl DeviceClassData {
    /// Offsets are added to the programs' outputs ([`CudaEngine::set_class_offset`]).
    pub fn has_offset(&self) -> bool {
        self.offset.is_some()
    }
}

impl std::fmt::Debug for DeviceClassData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceClassData")
            .field("n_rows", &self.n_rows)
            .field("n_features", &self.n_features)
            .field("n_classes", &self.n_classes)
            .finish()
    }
}

/// Dynamic shared memory a classification block may use: the 48 KiB a launch gets without
/// opting in, less the kernel's static shared memory (the staged tree, 8 KiB, and the reduction
/// arrays), with room to spare.
pub const CLASSIFY_DYNAMIC_SMEM: usize = 36 * 1024;

// 254 classes (the most) fit with 32 threads.
const _: () = assert!((2 * 254 + 254 * 32) * 4 <= CLASSIFY_DYNAMIC_SMEM);
// With the compiler's scratch (at most 128 threads) and a chunk's instructions (static), a block
// stays within the 48 KiB every kernel gets without opting in.
const _: () = assert!(CLASSIFY_DYNAMIC_SMEM + kernels::CHUNK * 24 + 32 * 8 <= 48 * 1024);

/// Threads per block: the most of 128, 64, 32 whose dynamic shared memory (`2 n_classes`
/// counters, correct and predicted, and `n_outputs` slots per thread, 4 bytes each) fits
/// [`CLASSIFY_DYNAMIC_SMEM`] (32 threads always fit: 254 classes take 33.7 KiB).
pub fn classify_threads(n_classes: usize, n_outputs: usize) -> u32 {
    [128u32, 64, 32].into_iter().find(|&t| (2 * n_classes + n_outputs * t as usize) * 4 <= CLASSIFY_DYNAMIC_SMEM).unwrap_or(32)
}


/// Points per block (a multiple of `threads`): up to 8 passes of the block, fewer for small data.
pub fn classify_tile(n_rows: usize, threads: u32) -> u32 {
    let passes = (n_rows as u32).div_ceil(threads).clamp(1, 8);
    passes * threads
}

impl CudaEngine {
    /// Copies a classification data set to the device. Features must be finite; labels below
    /// `n_classes` (at most 254, the output slots nodes can address).
    pub fn upload_class_data(&self, x: &[f32], labels: &[u32], n_rows: usize, n_features: usize, n_classes: usize) -> Result<DeviceClassData> {
        if n_rows == 0 || n_rows > i32::MAX as usize {
            return Err(GpuError::Input(format!("{n_rows} rows: the GPU takes 1 to {} rows", i32::MAX)));
        }
        if x.len() != n_rows * n_features || labels.len() != n_rows {
            return Err(GpuError::Input(format!(
                "x has {} values and labels {}; expected {n_features} × {n_rows} and {n_rows}",
                x.len(),
                labels.len()
            )));
        }
        if !(2..=254).contains(&n_classes) {
            return Err(GpuError::Input(format!("{n_classes} classes: the kernels take 2 to 254")));
        }
        if let Some(i) = x.iter().position(|v| !v.is_finite()) {
            return Err(GpuError::Input(format!("x[row {}][column {}] is {}", i % n_rows, i / n_rows, x[i])));
        }
        if let Some(i) = labels.iter().position(|&l| l as usize >= n_classes) {
            return Err(GpuError::Input(format!("label of row {i} is {}, not below {n_classes}", labels[i])));
        }
        Ok(DeviceClassData {
            x: self.upload(x, "uploading the features")?,
            labels: self.upload(labels, "uploading the labels")?,
            offset: None,
            n_rows,
            n_features,
            n_classes,
            engine: self.id,
        })
    }

    /// Adds `offset` (`[slots][n_rows]`, finite, f32) to the outputs of every program `data`
    /// scores from now on: `slots` is the number of outputs (`n_classes`), or 1 for one-output
    /// programs of two classes, whose class-1 logit it moves; as
    /// `backend::cpu::classify::evaluate_classification_with`.
    pub fn set_class_offset(&self, data: &mut DeviceClassData, offset: &[f32]) -> Result<()> {
        let slots = offset.len() / data.n_rows;
        if offset.len() % data.n_rows != 0 || !(slots == data.n_classes || (slots == 1 && data.n_classes == 2)) {
            return Err(GpuError::Input(format!("{} offsets for {} rows of {} classes", offset.len(), data.n_rows, data.n_classes)));
        }
        if let Some(i) = offset.iter().position(|v| !v.is_finite()) {
            return Err(GpuError::Input(format!("offset {i} is {}", offset[i])));
        }
        data.offset = Some((self.upload(offset, "uploading the offsets")?, slots));
        Ok(())
    }

    /// Classification sums of every individual of `pop` over `data`: `[P]`, as
    /// `backend::cpu::classify::evaluate_classification` computes them (`pop.n_outputs` is
    /// `n_classes`, or 0 with two classes).
    pub fn evaluate_classification(&self, pop: &Population, data: &DeviceClassData) -> Result<Vec<ClassSums>> {
        if data.engine != self.id {
            return Err(GpuError::Input("the data set was uploaded by another engine".into()));
        }
        let (p, k, n_out) = (pop.size(), data.n_classes, pop.n_outputs);
        if !(n_out == k || (n_out == 0 && k == 2)) {
            return Err(GpuError::Input(format!("{n_out} outputs cannot score {k} classes")));
        }
        if p == 0 {
            return Ok(Vec::new());
        }
        let lay = Layout::new(p, pop.max_len);
        let mut staging = host_buffer(lay.bytes);
        let packed = pack(pop, data.n_features, as_bytes_mut(&mut staging))?;
        let input: CudaSlice<u8> = self.upload(&as_bytes_mut(&mut staging)[..lay.bytes], "copying the population")?;
        let v = super::eval::views(&input, &lay)?;
        let mut b = self.alloc_class_buffers(p, n_out, data)?;
        self.launch_classification(&v, packed.n_fast, p, pop.max_len, n_out, data, &mut b)?;
        let (sums, sums_correct) = (&b.sums, &b.sums_correct);
        let mut s = self.stream.clone_dtoh(sums).during(|| "reading the classification sums".into())?;
        let mut c = self.stream.clone_dtoh(sums_correct).during(|| "reading the correct counts".into())?;
        s.truncate(p);
        c.truncate(p * 2 * k);
        self.stream.synchronize().during(|| "running the classification kernels".into())?;
        Ok(s
            .iter()
            .zip(c.chunks_exact(2 * k))
            .map(|(s, c)| ClassSums {
                correct: c[..k].iter().map(|&v| v as u64).collect(),
                predicted: c[k..].iter().map(|&v| v as u64).collect(),
                ce: s.ce,
                n: s.n as u64,
                bad: s.bad as u64,
            })
            .collect())
    }
}

/// The device buffers of one classification evaluation of `P` trees.
pub struct ClassBuffers {
    partials: CudaSlice<ClassPartial>,
    correct: CudaSlice<u32>,
    pub(super) sums: CudaSlice<ClassPartial>,
    pub(super) sums_correct: CudaSlice<u32>,
    threads: u32,
    tile_points: u32,
    n_tiles: u32,
    n: usize,
}

impl CudaEngine {
    /// Buffers for classifying `p` trees of `n_out` outputs over `data`.
    pub fn alloc_class_buffers(&self, p: usize, n_out: usize, data: &DeviceClassData) -> Result<ClassBuffers> {
        let k = data.n_classes;
        let threads = classify_threads(k, n_out);
        let tile_points = classify_tile(data.n_rows, threads);
        let n_tiles = (data.n_rows as u32).div_ceil(tile_points);
        let n_part = p * n_tiles as usize;
        Ok(ClassBuffers {
            partials: self.alloc::<ClassPartial>(n_part, false, "allocating partial sums")?,
            correct: self.alloc::<u32>(n_part * 2 * k, false, "allocating correct counts")?,
            sums: self.alloc::<ClassPartial>(p, false, "allocating sums")?,
            sums_correct: self.alloc::<u32>(p * 2 * k, false, "allocating per-class sums")?,
            threads,
            tile_points,
            n_tiles,
            n: p,
        })
    }

    /// Queues the classification kernels for the `n_trees` trees named by `v.ids` (the fast
    /// kernels' `n_fast` first) and the reduction into `b.sums` and `b.sums_correct`. Every
    /// tree must have passed [`super::pack::stack_need`]'s checks for `n_out` outputs and
    /// `data`'s features.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn launch_classification(
        &self,
        v: &super::eval::Views<'_>,
        n_fast: usize,
        n_trees: usize,
        max_len: usize,
        n_out: usize,
        data: &DeviceClassData,
        b: &mut ClassBuffers,
    ) -> Result<()> {
        let k = data.n_classes;
        if b.n != n_trees || v.ids.len() < n_trees || n_fast > n_trees || classify_threads(k, n_out) != b.threads {
            return Err(GpuError::Input(format!("classifying {n_trees} trees with buffers for {}", b.n)));
        }
        if let Some((_, slots)) = &data.offset {
            if *slots != n_out.max(1) {
                return Err(GpuError::Input(format!("offsets for {slots} outputs, programs of {n_out}")));
            }
        }
        let (threads, tile_points, n_tiles) = (b.threads, b.tile_points, b.n_tiles);
        for (ids, deep) in [(v.ids.slice(..n_fast), false), (v.ids.slice(n_fast..n_trees), true)] {
            if ids.is_empty() {
                continue;
            }
            let name = if deep { kernels::CLASSIFY_DEEP } else { kernels::CLASSIFY_FAST };
            let params = ClassifyParams {
                n_rows: data.n_rows as u32,
                n_features: data.n_features as u32,
                max_len: max_len as u32,
                n_outputs: n_out as u32,
                n_classes: k as u32,
                n_trees: ids.len() as u32,
                tile_points,
                n_tiles,
                has_offset: data.offset.is_some() as u32,
                reserved: 0,
            };
            let lc = LaunchConfig {
                grid_dim: (ids.len() as u32 * n_tiles, 1, 1),
                block_dim: (threads, 1, 1),
                shared_mem_bytes: ((2 * k + n_out * threads as usize) * 4) as u32 + kernels::COMPILE_SHARED_BYTES,
            };
            let f = self.function(&CLASSIFY, &[], name)?;
            let mut lb = self.stream.launch_builder(&f);
            lb.arg(&params).arg(&ids).arg(&v.op).arg(&v.value).arg(&v.size).arg(&v.out).arg(&v.len);
            // Without offsets the kernel reads none: any device pointer serves.
            let offset = data.offset.as_ref().map_or(&data.x, |(o, _)| o);
            lb.arg(&data.x).arg(&data.labels).arg(offset).arg(&mut b.partials).arg(&mut b.correct);
            // SAFETY: the arguments match `grove_classify_fast/deep(GroveClassifyParams,
            // const unsigned* tree_ids, const unsigned char* ops, const float* values, const
            // unsigned short* sizes, const unsigned char* outs, const unsigned short* lens,
            // const float* x, const unsigned* labels, const float* offset, GroveClassPartial*
            // partials, unsigned* correct)`, with `ClassifyParams` laid out as
            // `GroveClassifyParams` (asserted on both sides). Sizes: tree_ids n_trees; the
            // population P × L and P (subtree sizes checked by pack or kept by the device's
            // operators); x F × N; labels N (each < n_classes, checked at upload); offset
            // max(1, n_out) × N where has_offset (checked above and at upload), else unread;
            // partials P × n_tiles; correct P × n_tiles × 2K.
            // The caller checked each tree's opcodes, variables (< F), output slots (≤
            // n_outputs, which sized the dynamic shared memory with the 2K counters) and stack
            // need (≤ this kernel's stack); blocks index partials by tree row < P and tile.
            unsafe { lb.launch(lc) }.during(|| format!("launching {name}"))?;
        }
        let rp = ClassReduceParams { n_trees: n_trees as u32, n_tiles, n_classes: k as u32, reserved: 0 };
        let f = self.function(&CLASSIFY, &[], kernels::REDUCE_CLASSIFY)?;
        let mut lb = self.stream.launch_builder(&f);
        lb.arg(&rp).arg(&b.partials).arg(&b.correct).arg(&mut b.sums).arg(&mut b.sums_correct);
        let lc = LaunchConfig { grid_dim: ((n_trees as u32).div_ceil(128), 1, 1), block_dim: (128, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: matches `grove_reduce_classify(GroveClassReduceParams, const
        // GroveClassPartial* partials, const unsigned* correct, GroveClassPartial* sums,
        // unsigned* sums_correct)`; partials and correct hold P × n_tiles (× 2K) entries, all
        // written above (every tree is in exactly one launch); sums P, sums_correct P × 2K.
        unsafe { lb.launch(lc) }.during(|| format!("launching {}", kernels::REDUCE_CLASSIFY))?;
        Ok(())
    }

}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launch_shapes_fit_shared_memory_and_cover_the_rows() {
        assert_eq!(classify_threads(3, 3), 128);
        assert_eq!(classify_threads(100, 100), 64);
        assert_eq!(classify_threads(254, 254), 32);
        assert_eq!(classify_tile(1, 128), 128);
        assert_eq!(classify_tile(1797, 128), 1024);
        assert_eq!(classify_tile(300, 64), 320);
    }
}
