//! Evaluating a population on the GPU: the host side of `kernels/eval.cu` (fused regression
//! sums and predictions), twin of the CPU evaluator in `src/backend/cpu/eval.rs`.
//!
//! Each call checks on the host every tree the kernels will walk (opcodes, variable indices,
//! output slots, and the stack each tree needs) while packing the population into a reused
//! page-locked staging buffer ([`super::pack`], in parallel), copies it to the device in one
//! copy, then launches one block per (tree, data tile), which compiles its tree to a linear
//! program in shared memory (`kernels/interp.cuh`, twin of `backend::cpu::interp`) and runs it:
//! trees needing at most [`STACK`](kernels::STACK) slots go to the fast kernels, deeper ones (up to
//! [`DEEP_STACK`](kernels::DEEP_STACK), which every tree of up to 1024 nodes fits) to a one-point-per-thread
//! fallback, and deeper still is [`GpuError::TreeTooDeep`].
//!
//! Regression sums are deterministic: each block sums its tile in a fixed order and a second
//! kernel adds the tiles of each tree in index order, in f64, with no atomics.
//!
//! Device buffers and host staging are kept in the engine between calls and only grown, and a
//! call synchronizes once, after reading its results back; see [`EvalTiming`] for where the time
//! of a call goes.

use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::sys::{CUevent_flags, CU_MEMHOSTALLOC_WRITECOMBINED};
use cudarc::driver::{
    CudaEvent, CudaSlice, CudaView, DevicePtrMut, LaunchConfig, PushKernelArg,
};

use crate::program::fitness::RegressionSums;

use super::error::{During, GpuError, Result};
use super::kernels::{self, EVAL, MAX_POINTS_PER_THREAD, MAX_THREADS};
use super::params::{EvalParams, ReduceParams, RegSums};
use super::memory::{HostBuf, grow_device, grow_host, poison};
use super::pack::{as_bytes_mut, pack, Layout, Packed};
use super::CudaEngine;
use crate::program::tree::Population;

/// A data set on the device, uploaded once: features `x: [n_features][n_rows]` (feature-major)
/// and targets `y: [n_rows]`, f32.
pub struct DeviceDataset {
    x: CudaSlice<f32>,
    y: CudaSlice<f32>,
    n_rows: usize,
    n_features: usize,
    engine: u64,
}

impl std::fmt::Debug for DeviceDataset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceDataset").field("n_rows", &self.n_rows).field("n_features", &self.n_features).finish()
    }
}

impl DeviceDataset {
    /// `N`: rows (data points).
    pub fn n_rows(&self) -> usize {
        self.n_rows
    }
    /// `F`: features.
    pub fn n_features(&self) -> usize {
        self.n_features
    }
    /// `x`, `[F][N]`.
    pub(super) fn x(&self) -> &CudaSlice<f32> {
        &self.x
    }
    /// `y`, `[N]`.
    pub(super) fn y(&self) -> &CudaSlice<f32> {
        &self.y
    }
}

/// Predictions on the device, `[programs × rows]` f32, row-major, and a copy of the rows'
/// targets, `[rows]` f32 ([`CudaEngine::scaled_predictions`]): what a fitness function of the
/// user's own reads without a copy to the host (the Python package hands both over by
/// DLPack). It owns its memory; dropping it frees that on its GPU.
pub struct DeviceBatch {
    pred: CudaSlice<f32>,
    y: CudaSlice<f32>,
    valid: Vec<bool>,
    programs: usize,
    rows: usize,
    ordinal: usize,
    ctx: Arc<cudarc::driver::CudaContext>,
}

impl DeviceBatch {
    /// The device address of prediction `[0, 0]` (a `CUdeviceptr`), valid while `self` lives.
    pub fn pred_ptr(&self) -> u64 {
        let (ptr, _sync) = cudarc::driver::DevicePtr::device_ptr(&self.pred, self.pred.stream());
        ptr
    }
    /// The device address of target `[0]`, valid while `self` lives.
    pub fn y_ptr(&self) -> u64 {
        let (ptr, _sync) = cudarc::driver::DevicePtr::device_ptr(&self.y, self.y.stream());
        ptr
    }
    /// Copies `bytes` bytes from device address `ptr` on this batch's GPU to the host (a
    /// fitness function's scores, handed back by DLPack), after the work queued on the legacy
    /// default stream.
    ///
    /// # Safety
    /// `ptr .. ptr + bytes` must be device memory of this batch's context that stays allocated
    /// for the call.
    pub unsafe fn read_device(&self, ptr: u64, bytes: usize) -> Result<Vec<u8>> {
        self.ctx.bind_to_thread().during(|| "making the batch's GPU current".into())?;
        let mut out = vec![0u8; bytes];
        if bytes > 0 {
            // SAFETY: the caller guarantees the range; `out` holds `bytes` bytes.
            unsafe { cudarc::driver::result::memcpy_dtoh_sync(&mut out[..], ptr) }.during(|| "reading scores from the GPU".into())?;
        }
        Ok(out)
    }
    /// `(programs, rows)`.
    pub fn shape(&self) -> (usize, usize) {
        (self.programs, self.rows)
    }
    /// `[programs]`: whether each has a program and finite values at every row.
    pub fn valid(&self) -> &[bool] {
        &self.valid
    }
    /// The CUDA device ordinal the memory is on.
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }
}

impl Drop for DeviceBatch {
    fn drop(&mut self) {
        // The owner may drop it from any thread (a DLPack consumer's deleter): the context is
        // made current first, so that freeing the memory finds it.
        let _ = self.ctx.bind_to_thread();
    }
}

impl std::fmt::Debug for DeviceBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceBatch").field("programs", &self.programs).field("rows", &self.rows).field("ordinal", &self.ordinal).finish()
    }
}

/// The GPU's per-tree sums as the CPU interpreter reports them ([`RegressionSums`]): `f` is the
/// program's result 0 (the root's value, or output slot 0 for multi-output programs); `finite`
/// is false when any result of the program (every output slot) is NaN or infinite at any point,
/// or the tree is empty (whose sums are 0).
impl From<&RegSums> for RegressionSums {
    fn from(r: &RegSums) -> Self {
        Self {
            n: r.n as u64,
            sum_e2: r.sse,
            sum_abs_e: r.sae,
            sum_f: r.sum_f,
            sum_f2: r.sum_ff,
            sum_fy: r.sum_fy,
            sum_y: r.sum_y,
            sum_y2: r.sum_yy,
            finite: r.bad == 0 && r.n > 0,
        }
    }
}

/// Launch settings of the evaluation kernels; `None` picks a default. Set fields to compare
/// variants in benchmarks; an explicit setting the kernels cannot run is an error, not adjusted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EvalConfig {
    /// Threads per block: a multiple of 32, at most 1024. Default: the fewest whole warps, at
    /// most 256, that cover the rows in one pass at the points per thread.
    pub threads_per_block: Option<u32>,
    /// Points each thread evaluates per pass over the tree, 1 to 8. Default 4 (fewer when one
    /// warp covers the rows with fewer, or when many output slots would overflow shared
    /// memory).
    pub points_per_thread: Option<u32>,
    /// Points per block: a multiple of threads × points per thread. Default 4 passes, fewer
    /// when that would leave the GPU short of blocks.
    pub tile_points: Option<u32>,
    /// Fill output buffers with a NaN pattern before launching, so that any element no kernel
    /// wrote shows up (for tests; costs one memset).
    pub poison_outputs: bool,
}

/// A resolved launch shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Launch {
    /// Threads per block.
    pub threads: u32,
    /// Points per thread per pass (the fast kernels; the deep fallback uses 1).
    pub points_per_thread: u32,
    /// Points per block.
    pub tile_points: u32,
    /// Tiles over the data set.
    pub n_tiles: u32,
    /// Dynamic shared memory of the output slots, bytes.
    pub slot_bytes: u32,
}

/// Most dynamic shared memory for output slots per block (with the kernel's ~10 KiB of static
/// shared memory, under the 48 KiB a block gets without opting in).
pub const SLOT_BYTES_MAX: u32 = 32 * 1024;
const DEFAULT_THREADS: u32 = 256; // measured: W3 +8 %, W1 +3 %, 100k × 1024 −3 % against 128 (H200)
/// Points a thread evaluates when a launch is not told (`GROVE_K` of the evaluation kernels).
pub const DEFAULT_POINTS_PER_THREAD: u32 = 4;
const DEFAULT_PASSES: u32 = 4;
/// Most (tree, tile) blocks a default launch shape makes (256 MiB of partial sums); larger
/// data get longer tiles instead.
pub const MAX_BLOCKS: u64 = 1 << 22;
impl EvalConfig {
    /// The launch shape for `n_rows` points, `n_trees` trees with `n_outputs` output slots, on a
    /// device with `sm_count` multiprocessors.
    pub fn resolve(&self, n_rows: usize, n_trees: usize, n_outputs: usize, sm_count: u32) -> Result<Launch> {
        let cfg = |s: String| GpuError::Config(s);
        if n_rows == 0 || n_rows > i32::MAX as usize {
            return Err(cfg(format!("{n_rows} rows: the kernels take 1 to {} rows", i32::MAX)));
        }
        let n = n_rows as u64;
        // The points per thread first, the threads after: the narrowest block (whole warps, at
        // most DEFAULT_THREADS) that covers the rows in one pass at the points per thread asked
        // for, else DEFAULT_POINTS_PER_THREAD. Each dispatch, and the block's compile of its
        // tree, is then shared by as many points as it can be.
        let k_want = self.points_per_thread.unwrap_or(DEFAULT_POINTS_PER_THREAD).max(1) as u64;
        let mut t = self
            .threads_per_block
            .unwrap_or_else(|| (n.div_ceil(32 * k_want) * 32).min(DEFAULT_THREADS as u64) as u32);
        if t == 0 || t % 32 != 0 || t > MAX_THREADS {
            return Err(cfg(format!("{t} threads per block: use a multiple of 32 up to {MAX_THREADS}")));
        }
        let mut k = self
            .points_per_thread
            .unwrap_or_else(|| n.div_ceil(t as u64).clamp(1, DEFAULT_POINTS_PER_THREAD as u64) as u32);
        if !(1..=MAX_POINTS_PER_THREAD).contains(&k) {
            return Err(cfg(format!("{k} points per thread: use 1 to {MAX_POINTS_PER_THREAD}")));
        }
        let slots = |t: u32, k: u32| n_outputs as u64 * t as u64 * k as u64 * 4;
        while slots(t, k) > SLOT_BYTES_MAX as u64 && self.points_per_thread.is_none() && k > 1 {
            k -= 1;
        }
        while slots(t, k) > SLOT_BYTES_MAX as u64 && self.threads_per_block.is_none() && t > 32 {
            t -= 32;
        }
        if slots(t, k) > SLOT_BYTES_MAX as u64 {
            return Err(cfg(format!(
                "{n_outputs} output slots × {t} threads × {k} points × 4 bytes is over {SLOT_BYTES_MAX} bytes of shared memory"
            )));
        }
        let step = t * k;
        let tiles = |tile: u32| n.div_ceil(tile as u64);
        let tile = match self.tile_points {
            Some(tile) if tile == 0 || tile % step != 0 => {
                return Err(cfg(format!("{tile} points per tile: use a multiple of {t} threads × {k} points")));
            }
            Some(tile) => tile,
            None => {
                let whole = (n.div_ceil(step as u64) * step as u64).min(u32::MAX as u64) as u32;
                let mut passes = DEFAULT_PASSES;
                while passes > 1 && (n_trees as u64) * tiles(step * passes) < 4 * sm_count as u64 {
                    passes -= 1;
                }
                let tile = (step * passes).min(whole);
                // Past MAX_BLOCKS (tree, tile) pairs the tiles grow, each block making more
                // passes, so that the partial sums stay within MAX_BLOCKS × 64 bytes and the
                // grid within one launch (10⁵ trees over 10⁸ rows: 41 tiles a tree, not 24,418).
                let per_tree = (MAX_BLOCKS / (n_trees as u64).max(1)).max(1);
                if (n_trees as u64) * tiles(tile) > MAX_BLOCKS {
                    (n.div_ceil(per_tree).div_ceil(step as u64) * step as u64).min(whole as u64) as u32
                } else {
                    tile
                }
            }
        };
        let n_tiles = tiles(tile);
        if n_trees as u64 * n_tiles > i32::MAX as u64 {
            return Err(cfg(format!("{n_trees} trees × {n_tiles} tiles is more blocks than one launch takes")));
        }
        Ok(Launch { threads: t, points_per_thread: k, tile_points: tile, n_tiles: n_tiles as u32, slot_bytes: slots(t, k) as u32 })
    }
}

pub use super::pack::stack_need;

/// Where the time of one evaluation call went. Host figures are wall-clock; the device ones
/// come from CUDA events recorded on the engine's stream around each stage, seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct EvalTiming {
    /// Checking and packing the population on the host (rayon), before any copy.
    pub host_prep_s: f64,
    /// The population's copy to the device (one copy of [`EvalTiming::h2d_bytes`]).
    pub h2d_s: f64,
    /// Every kernel of the call: evaluation launches and the reduction.
    pub kernels_s: f64,
    /// Reading the results back.
    pub d2h_s: f64,
    /// The whole call, host clock, entry to return.
    pub total_s: f64,
    /// Bytes copied to the device.
    pub h2d_bytes: usize,
    /// True when the staging buffer is page-locked (else the copy is from pageable memory).
    pub pinned: bool,
}

/// Buffers that evaluation calls reuse, grown when a call needs more and never shrunk, so that
/// calls of one shape allocate nothing after the first.
#[derive(Default)]
pub(super) struct Scratch {
    /// The packed population ([`super::pack`]), page-locked and write-combined: the host only
    /// writes it.
    staging: Option<HostBuf<u32>>,
    /// Its device copy, bytes.
    input: Option<CudaSlice<u8>>,
    /// `[P × n_tiles]` per-tile regression sums.
    partials: Option<CudaSlice<RegSums>>,
    /// `[P]` regression sums.
    sums: Option<CudaSlice<RegSums>>,
    /// `[P]` regression sums on the host, page-locked (read by the host: not write-combined).
    readback: Option<HostBuf<RegSums>>,
    /// Timing events: before the copy, after it, after the kernels, after the read-back.
    events: Option<[CudaEvent; 4]>,
    /// Work reading or writing these buffers may be queued: synchronize before reuse.
    in_flight: bool,
}

/// The population as the kernels see it: views into the device copy of the packed buffer.
pub(super) struct Views<'a> {
    pub(super) ids: CudaView<'a, u32>,
    pub(super) op: CudaView<'a, u8>,
    pub(super) value: CudaView<'a, f32>,
    pub(super) size: CudaView<'a, u16>,
    pub(super) out: CudaView<'a, u8>,
    pub(super) len: CudaView<'a, u16>,
}

/// Views of the packed population's sections in its device copy `input`.
pub(super) fn views<'a>(input: &'a CudaSlice<u8>, lay: &Layout) -> Result<Views<'a>> {
    let pl = lay.p * lay.l;
    let bad = || GpuError::Input("packed population larger than its device buffer".into());
    // SAFETY: the sections hold f32, u32 and u16 values written by `pack` (any bits are valid),
    // each at a multiple of 256 bytes from the buffer's start, which the driver aligns to 256.
    unsafe {
        Ok(Views {
            value: input.slice(lay.value..).transmute::<f32>(pl).ok_or_else(bad)?,
            ids: input.slice(lay.ids..).transmute::<u32>(lay.p).ok_or_else(bad)?,
            len: input.slice(lay.len..).transmute::<u16>(lay.p).ok_or_else(bad)?,
            size: input.slice(lay.size..).transmute::<u16>(pl).ok_or_else(bad)?,
            op: input.slice(lay.op..lay.op + pl),
            out: input.slice(lay.out..lay.out + pl),
        })
    }
}

impl CudaEngine {
    /// Copies a data set to the device: `x` is `[n_features][n_rows]` (feature-major), `y` is
    /// `[n_rows]`. Every value must be finite; the error names the first that is not.
    pub fn upload_dataset(&self, x: &[f32], y: &[f32], n_rows: usize, n_features: usize) -> Result<DeviceDataset> {
        if n_rows == 0 || n_rows > i32::MAX as usize {
            return Err(GpuError::Input(format!("{n_rows} rows: the GPU takes 1 to {} rows", i32::MAX)));
        }
        if n_features > u32::MAX as usize || x.len() != n_rows * n_features || y.len() != n_rows {
            return Err(GpuError::Input(format!(
                "x has {} values and y {}; expected {n_features} × {n_rows} and {n_rows}",
                x.len(),
                y.len()
            )));
        }
        use rayon::prelude::*;
        if let Some(i) = x.par_iter().with_min_len(1 << 16).position_first(|v| !v.is_finite()) {
            return Err(GpuError::Input(format!("x[row {}][column {}] is {}", i % n_rows, i / n_rows, x[i])));
        }
        if let Some(i) = y.par_iter().with_min_len(1 << 16).position_first(|v| !v.is_finite()) {
            return Err(GpuError::Input(format!("y[row {i}] is {}", y[i])));
        }
        Ok(DeviceDataset {
            x: self.upload(x, "uploading the data set")?,
            y: self.upload(y, "uploading the targets")?,
            n_rows,
            n_features,
            engine: self.id,
        })
    }

    /// Regression sums of every individual over `data`, with the default launch settings.
    pub fn evaluate_regression(&self, pop: &Population, data: &DeviceDataset) -> Result<Vec<RegressionSums>> {
        self.evaluate_regression_with(pop, data, &EvalConfig::default())
    }

    /// Regression sums of every individual over `data`: `[P]`.
    pub fn evaluate_regression_with(
        &self,
        pop: &Population,
        data: &DeviceDataset,
        cfg: &EvalConfig,
    ) -> Result<Vec<RegressionSums>> {
        self.regression(pop, data, cfg, false).map(|(sums, _)| sums)
    }

    /// [`CudaEngine::evaluate_regression_with`], also saying where the time went (four CUDA
    /// events more per call; the results are the same).
    pub fn evaluate_regression_timed(
        &self,
        pop: &Population,
        data: &DeviceDataset,
        cfg: &EvalConfig,
    ) -> Result<(Vec<RegressionSums>, EvalTiming)> {
        self.regression(pop, data, cfg, true)
    }

    /// One call: check and pack on the host into the staging buffer, one copy in, the kernels,
    /// one copy out, one synchronization. Buffers come from [`Scratch`], locked for the call.
    fn regression(
        &self,
        pop: &Population,
        data: &DeviceDataset,
        cfg: &EvalConfig,
        timed: bool,
    ) -> Result<(Vec<RegressionSums>, EvalTiming)> {
        let start = Instant::now();
        self.check_dataset(data)?;
        let p = pop.size();
        if p == 0 {
            return Ok((Vec::new(), EvalTiming::default()));
        }
        let launch = cfg.resolve(data.n_rows, p, pop.n_outputs, self.sm_count)?;
        let mut guard = self.scratch.lock().unwrap_or_else(|e| e.into_inner());
        let s = &mut *guard;
        let packed = self.stage(pop, data.n_features, s)?;
        let host_prep_s = start.elapsed().as_secs_f64();
        if timed && s.events.is_none() {
            let ev = || self.ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).during(|| "creating timing events".into());
            s.events = Some([ev()?, ev()?, ev()?, ev()?]);
        }
        let events = if timed { s.events.as_ref() } else { None };
        let record = |i: usize| -> Result<()> {
            match events {
                Some(ev) => ev[i].record(&self.stream).during(|| "recording a timing event".into()),
                None => Ok(()),
            }
        };
        let n_part = p * launch.n_tiles as usize;
        grow_device(&self.stream, &mut s.partials, n_part, "allocating partial sums")?;
        grow_device(&self.stream, &mut s.sums, p, "allocating sums")?;
        let readback = grow_host(&self.ctx, &mut s.readback, p, 0).slice_mut()?;
        let (Some(input), Some(staging), Some(partials), Some(sums)) =
            (s.input.as_mut(), s.staging.as_mut(), s.partials.as_mut(), s.sums.as_mut())
        else {
            unreachable!("stage and grow_device filled every buffer");
        };
        let lay = packed.layout;
        let pinned = staging.is_pinned();
        s.in_flight = true;
        record(0)?;
        let bytes = &as_bytes_mut(staging.slice_mut()?)[..lay.bytes];
        self.stream.memcpy_htod(bytes, &mut input.slice_mut(..lay.bytes)).during(|| "copying the population".into())?;
        record(1)?;
        if cfg.poison_outputs {
            let stream: &Arc<_> = &self.stream;
            let words = size_of::<RegSums>() / 4;
            let (ptr, _rec) = partials.device_ptr_mut(stream);
            poison(ptr, n_part * words, stream, "partial sums")?;
            let (ptr, _rec) = sums.device_ptr_mut(stream);
            poison(ptr, p * words, stream, "sums")?;
        }
        let v = views(input, &lay)?;
        self.launch_regression(&v, packed.n_fast, p, pop.max_len, pop.n_outputs, data, &launch, partials, sums, None)?;
        record(2)?;
        let out = &mut readback[..p];
        self.stream.memcpy_dtoh(&sums.slice(..p), out).during(|| "reading the regression sums".into())?;
        record(3)?;
        self.stream.synchronize().during(|| "running the regression kernels".into())?;
        s.in_flight = false;
        let result = out.iter().map(RegressionSums::from).collect();
        let mut timing = EvalTiming { host_prep_s, h2d_bytes: lay.bytes, pinned, ..EvalTiming::default() };
        if let Some(ev) = events {
            let ms = |a: usize, b: usize| ev[a].elapsed_ms(&ev[b]).map(|m| m as f64 / 1e3).during(|| "reading timing events".into());
            timing.h2d_s = ms(0, 1)?;
            timing.kernels_s = ms(1, 2)?;
            timing.d2h_s = ms(2, 3)?;
        }
        timing.total_s = start.elapsed().as_secs_f64();
        Ok((result, timing))
    }

    /// Queues the regression kernels for `n_trees` trees of a population on the device (`v`:
    /// its arrays, row stride `max_len`, and `v.ids`, the fast kernels' trees first,
    /// `n_fast` of them, then the deep ones), then the reduction: `sums[t]` for every tree `t`
    /// named in `v.ids[..n_trees]`. `partials` holds at least `n_trees × launch.n_tiles`
    /// entries, `sums` at least one per row of the population. Every tree must have passed the
    /// checks of [`super::pack::stack_need`] (the fast ones within [`STACK`], the deep ones
    /// within [`DEEP_STACK`]).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn launch_regression(
        &self,
        v: &Views<'_>,
        n_fast: usize,
        n_trees: usize,
        max_len: usize,
        n_outputs: usize,
        data: &DeviceDataset,
        launch: &Launch,
        partials: &mut CudaSlice<RegSums>,
        sums: &mut CudaSlice<RegSums>,
        mut keep: Option<&mut CudaSlice<f32>>,
    ) -> Result<()> {
        let n_part = n_trees * launch.n_tiles as usize;
        let rows = v.len.len();
        if keep.as_ref().is_some_and(|k| k.len() < rows * data.n_rows || n_outputs > 0) {
            return Err(GpuError::Input(format!("keeping the values of {rows} trees ({n_outputs} outputs) at {} rows", data.n_rows)));
        }
        if partials.len() < n_part || v.ids.len() < n_trees || n_fast > n_trees {
            return Err(GpuError::Input(format!("{n_trees} trees ({n_fast} fast) for {} ids and {} partial sums", v.ids.len(), partials.len())));
        }
        let defines = [("GROVE_K", launch.points_per_thread)];
        let mut part = partials.slice_mut(..n_part);
        for (ids, deep) in [(v.ids.slice(..n_fast), false), (v.ids.slice(n_fast..n_trees), true)] {
            if ids.is_empty() {
                continue;
            }
            let name = if deep { kernels::REGRESSION_DEEP } else { kernels::REGRESSION[launch.points_per_thread as usize - 1] };
            let (params, lc) = self.eval_shape(max_len, n_outputs, data, launch, ids.len(), deep);
            let f = self.function(&EVAL, &defines, name)?;
            let mut b = self.stream.launch_builder(&f);
            b.arg(&params).arg(&ids).arg(&v.op).arg(&v.value).arg(&v.size).arg(&v.out).arg(&v.len);
            b.arg(&data.x).arg(&data.y).arg(&mut part);
            let null: u64 = 0;
            match keep.as_deref_mut() {
                Some(k) => b.arg(k),
                None => b.arg(&null),
            };
            // SAFETY: the arguments match `grove_eval_regression_k*(GroveEvalParams,
            // const unsigned* tree_ids, const unsigned char* ops, const float* values, const
            // unsigned short* sizes, const unsigned char* outs, const unsigned short* lens,
            // const float* x, const float* y, GroveRegSums* partials, float* keep)`, with
            // `EvalParams` laid out as `GroveEvalParams`. Buffer sizes: tree_ids n_trees, the
            // population P × L and P, x F × N, y N, partials n_trees × n_tiles, keep null or
            // P × N for trees of one output (checked above; the kernel writes
            // keep[tree × N + row] for its rows). The caller
            // guarantees (pack, or the device's own operators and grove_stack_class) each
            // tree's opcodes, subtree sizes, variable indices (< F), output slots (≤ n_outputs,
            // which sized the dynamic shared memory) and stack need (≤ this kernel's stack);
            // the kernel reads only each tree's `len` nodes of its row, so every access stays
            // inside them.
            unsafe { b.launch(lc) }.during(|| format!("launching {name}"))?;
        }
        let rp = ReduceParams { n_trees: n_trees as u32, n_tiles: launch.n_tiles };
        let f = self.function(&EVAL, &[("GROVE_K", launch.points_per_thread)], kernels::REDUCE_REGRESSION)?;
        let mut b = self.stream.launch_builder(&f);
        let part = part.slice(..);
        b.arg(&rp).arg(&part).arg(&mut *sums);
        let lc = LaunchConfig { grid_dim: ((n_trees as u32).div_ceil(128), 1, 1), block_dim: (128, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: matches `grove_reduce_regression(GroveReduceParams, const GroveRegSums*
        // partials, GroveRegSums* sums)`; partials holds n_trees × n_tiles entries, all written
        // above (every tree is in exactly one of the launches), sums one per tree row.
        unsafe { b.launch(lc) }.during(|| format!("launching {}", kernels::REDUCE_REGRESSION))?;
        Ok(())
    }

    /// Checks that `rows` are 1 to 2^32 − 1 rows of `data` and copies them to `d_rows` (grown as
    /// needed): lexicase's case rows.
    pub(super) fn copy_rows<'a>(&self, data: &DeviceDataset, rows: &[u32], d_rows: &'a mut Option<CudaSlice<u32>>) -> Result<&'a mut CudaSlice<u32>> {
        self.check_dataset(data)?;
        if rows.is_empty() || rows.len() > u32::MAX as usize || rows.iter().any(|&r| r as usize >= data.n_rows) {
            return Err(GpuError::Input(format!("{} case rows of a data set of {} rows", rows.len(), data.n_rows)));
        }
        let k = rows.len();
        let d_rows = grow_device(&self.stream, d_rows, k, "allocating the case rows")?;
        self.stream.memcpy_htod(rows, &mut d_rows.slice_mut(..k)).during(|| "copying the case rows".into())?;
        Ok(d_rows)
    }

    /// The rows `rows` (each below the data's rows, checked) of `data` as a data set of their
    /// own, in that order, gathered on the device (`grove_gather_rows`) into `s.cases`
    /// (kept while its shape stays), the indices copied to `d_rows`: lexicase's cases.
    pub(super) fn gather_rows(&self, data: &DeviceDataset, rows: &[u32], d_rows: &mut Option<CudaSlice<u32>>, gathered: &mut Option<DeviceDataset>) -> Result<()> {
        let k = rows.len();
        let d_rows = self.copy_rows(data, rows, d_rows)?;
        if !gathered.as_ref().is_some_and(|c| c.n_rows == k && c.n_features == data.n_features && c.engine == self.id) {
            *gathered = Some(DeviceDataset {
                x: self.alloc::<f32>(k * data.n_features.max(1), false, "allocating the case rows")?,
                y: self.alloc::<f32>(k, false, "allocating the case rows")?,
                n_rows: k,
                n_features: data.n_features,
                engine: self.id,
            });
        }
        let cases = gathered.as_mut().expect("just made");
        let f = self.function(&kernels::GENERATION, &[], kernels::GATHER_ROWS)?;
        let mut b = self.stream.launch_builder(&f);
        let (n, nf, k32) = (data.n_rows as u32, data.n_features as u32, k as u32);
        b.arg(&n).arg(&nf).arg(&k32).arg(&data.x).arg(&data.y).arg(&*d_rows).arg(&mut cases.x).arg(&mut cases.y);
        let lc = LaunchConfig { grid_dim: (k32.div_ceil(256), 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: matches `grove_gather_rows(unsigned n_rows, unsigned n_features, unsigned k,
        // const float* x, const float* y, const unsigned* rows, float* xc, float* yc)`: x holds
        // F × N and y N floats, rows k indices below N (checked, copied just before), xc F × k
        // and yc k; thread j < k writes column j of each.
        unsafe { b.launch(lc) }.during(|| format!("launching {}", kernels::GATHER_ROWS))?;
        Ok(())
    }

    /// Queues the predictions of the `n_trees` trees named by `v.ids` (the first `n_fast` for
    /// the fast kernels, the rest for the deep one) at every row of `data` into `pred`
    /// (`[tree][max(1, n_outputs)][row]`, by tree row), with the default launch settings.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn launch_predict(
        &self,
        v: &Views<'_>,
        n_fast: usize,
        n_trees: usize,
        p: usize,
        max_len: usize,
        n_outputs: usize,
        data: &DeviceDataset,
        pred: &mut CudaSlice<f32>,
    ) -> Result<()> {
        self.check_dataset(data)?;
        if pred.len() < p * n_outputs.max(1) * data.n_rows || v.ids.len() < n_trees || n_fast > n_trees {
            return Err(GpuError::Input(format!("predictions of {n_trees} trees ({n_fast} fast) of {p} into {} values", pred.len())));
        }
        let launch = EvalConfig::default().resolve(data.n_rows, n_trees.max(1), n_outputs, self.sm_count)?;
        let defines = [("GROVE_K", launch.points_per_thread)];
        for (ids, deep) in [(v.ids.slice(..n_fast), false), (v.ids.slice(n_fast..n_trees), true)] {
            if ids.is_empty() {
                continue;
            }
            let name = if deep { kernels::PREDICT_DEEP } else { kernels::PREDICT[launch.points_per_thread as usize - 1] };
            let (params, lc) = self.eval_shape(max_len, n_outputs, data, &launch, ids.len(), deep);
            let f = self.function(&EVAL, &defines, name)?;
            let mut b = self.stream.launch_builder(&f);
            b.arg(&params).arg(&ids).arg(&v.op).arg(&v.value).arg(&v.size).arg(&v.out).arg(&v.len);
            b.arg(&data.x).arg(&mut *pred);
            // SAFETY: the arguments match `grove_predict_k*(GroveEvalParams, const unsigned*
            // tree_ids, const unsigned char* ops, const float* values, const unsigned short*
            // sizes, const unsigned char* outs, const unsigned short* lens, const float* x,
            // float* pred)`; pred holds P × max(1, n_outputs) × N floats (checked) and every id
            // is a tree row below P; the population's invariants are those of
            // `launch_regression`.
            unsafe { b.launch(lc) }.during(|| format!("launching {name}"))?;
        }
        Ok(())
    }

    /// Checks and packs `pop` into the staging buffer (grown as needed) and makes sure the
    /// device input buffer can take it. Waits first for any copy still using the staging buffer.
    fn stage(&self, pop: &Population, n_features: usize, s: &mut Scratch) -> Result<Packed> {
        if s.in_flight {
            // An earlier call failed after queueing work on these buffers.
            self.stream.synchronize().during(|| "waiting for an earlier call".into())?;
            s.in_flight = false;
        }
        let lay = Layout::new(pop.size(), pop.max_len);
        let staging = grow_host(&self.ctx, &mut s.staging, lay.bytes.div_ceil(4), CU_MEMHOSTALLOC_WRITECOMBINED);
        let packed = pack(pop, n_features, as_bytes_mut(staging.slice_mut()?))?;
        grow_device(&self.stream, &mut s.input, lay.bytes, "allocating the population buffer")?;
        Ok(packed)
    }

    /// Every result of every individual at every point, with the default launch settings.
    pub fn predict(&self, pop: &Population, data: &DeviceDataset) -> Result<Vec<f32>> {
        self.predict_with(pop, data, &EvalConfig::default())
    }

    /// Every result of every individual at every point: `[P × max(1, n_outputs) × N]`
    /// (individual, then output slot, then row). An empty tree's results are NaN.
    pub fn predict_with(&self, pop: &Population, data: &DeviceDataset, cfg: &EvalConfig) -> Result<Vec<f32>> {
        self.check_dataset(data)?;
        if pop.size() == 0 {
            return Ok(Vec::new());
        }
        let mut guard = self.scratch.lock().unwrap_or_else(|e| e.into_inner());
        let s = &mut *guard;
        let (pred, _) = self.predict_on_device(pop, data, cfg, s)?;
        // clone_dtoh into pageable memory waits for the stream: the one synchronization.
        let out = self.stream.clone_dtoh(&pred).during(|| "reading the predictions".into())?;
        self.stream.synchronize().during(|| "running the prediction kernels".into())?;
        s.in_flight = false;
        Ok(out)
    }

    /// Queues the prediction kernels of [`Self::predict_with`] for a non-empty `pop`, leaving
    /// the predictions on the device, and returns them with the population's packed arrays
    /// (still in `s.input`). Sets `s.in_flight`; the caller synchronizes and clears it.
    fn predict_on_device(&self, pop: &Population, data: &DeviceDataset, cfg: &EvalConfig, s: &mut Scratch) -> Result<(CudaSlice<f32>, Packed)> {
        let p = pop.size();
        let launch = cfg.resolve(data.n_rows, p, pop.n_outputs, self.sm_count)?;
        let packed = self.stage(pop, data.n_features, s)?;
        let n_res = pop.n_outputs.max(1);
        let mut pred = self.alloc::<f32>(p * n_res * data.n_rows, cfg.poison_outputs, "allocating predictions")?;
        let (Some(input), Some(staging)) = (s.input.as_mut(), s.staging.as_mut()) else {
            unreachable!("stage filled both buffers");
        };
        let lay = packed.layout;
        s.in_flight = true;
        let bytes = &as_bytes_mut(staging.slice_mut()?)[..lay.bytes];
        self.stream.memcpy_htod(bytes, &mut input.slice_mut(..lay.bytes)).during(|| "copying the population".into())?;
        let v = views(input, &lay)?;
        let defines = [("GROVE_K", launch.points_per_thread)];
        for (ids, deep) in [(v.ids.slice(..packed.n_fast), false), (v.ids.slice(packed.n_fast..), true)] {
            if ids.is_empty() {
                continue;
            }
            let name = if deep { kernels::PREDICT_DEEP } else { kernels::PREDICT[launch.points_per_thread as usize - 1] };
            let (params, lc) = self.eval_shape(pop.max_len, pop.n_outputs, data, &launch, ids.len(), deep);
            let f = self.function(&EVAL, &defines, name)?;
            let mut b = self.stream.launch_builder(&f);
            b.arg(&params).arg(&ids).arg(&v.op).arg(&v.value).arg(&v.size).arg(&v.out).arg(&v.len);
            b.arg(&data.x).arg(&mut pred);
            // SAFETY: the arguments match `grove_predict_k*(GroveEvalParams, const unsigned*
            // tree_ids, const unsigned char* ops, const float* values, const unsigned short*
            // sizes, const unsigned char* outs, const unsigned short* lens, const float* x,
            // float* pred)`; pred holds
            // P × max(1, n_outputs) × N floats; the other buffers and the checks that keep
            // every access inside them are as in `evaluate_regression_with`.
            unsafe { b.launch(lc) }.during(|| format!("launching {name}"))?;
        }
        Ok((pred, packed))
    }

    /// The sums of every individual's joint fit with linear terms of the inputs (twin of
    /// [`crate::backend::cpu::eval::evaluate_joint`]; the same values at every point, the sums
    /// within rounding): single-output programs, the dataset's target the residual `r` of the
    /// terms, `inputs` the terms' columns. The programs' values are written to the device
    /// (`P × N` floats), then `grove_joint_sums` adds them up per (program, column).
    /// Individuals without a program, or with a NaN or infinite value at any row, come back
    /// with `finite == false`.
    pub fn evaluate_joint(&self, pop: &Population, data: &DeviceDataset, inputs: &[usize]) -> Result<Vec<crate::program::linear::JointSums>> {
        use crate::program::linear::JointSums;
        self.check_dataset(data)?;
        if pop.n_outputs > 0 {
            return Err(GpuError::Input(format!("the joint fit reads one output; the population has {}", pop.n_outputs)));
        }
        if let Some(&j) = inputs.iter().find(|&&j| j >= data.n_features) {
            return Err(GpuError::Input(format!("linear term of input {j} of {}", data.n_features)));
        }
        let (p, n, k) = (pop.size(), data.n_rows, inputs.len());
        if p == 0 {
            return Ok(Vec::new());
        }
        if n == 0 {
            return Ok((0..p).map(|_| JointSums::invalid(k, 0)).collect());
        }
        let mut guard = self.scratch.lock().unwrap_or_else(|e| e.into_inner());
        let s = &mut *guard;
        let (pred, _) = self.predict_on_device(pop, data, &EvalConfig::default(), s)?;
        let cols: Vec<u32> = inputs.iter().map(|&j| j as u32).collect();
        let cols = if cols.is_empty() { vec![0] } else { cols };
        let d_cols = self.stream.clone_htod(&cols).during(|| "copying the terms' inputs".into())?;
        let mut out = self.alloc::<f64>(p * (k + 3), false, "allocating the joint sums")?;
        let mut bad = self.alloc::<u32>(p, false, "allocating the joint sums")?;
        let f = self.function(&EVAL, &[("GROVE_K", 1)], kernels::JOINT_SUMS)?;
        let mut b = self.stream.launch_builder(&f);
        let (n32, k32) = (n as u32, k as u32);
        b.arg(&n32).arg(&k32).arg(&pred).arg(&data.x).arg(&data.y).arg(&d_cols).arg(&mut out).arg(&mut bad);
        let lc = LaunchConfig { grid_dim: (p as u32, k32 + 1, 1), block_dim: (kernels::JOINT_THREADS, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: matches `grove_joint_sums(unsigned n_rows, unsigned k, const float* pred,
        // const float* x, const float* r, const unsigned* inputs, double* out, unsigned* bad)`:
        // pred holds P × N floats, written above for every population row, x F × N and r N (the dataset), inputs k column indices
        // (each < F, checked; one dummy entry when k = 0, never read), out P × (k + 3) and bad
        // P entries, one per block row of the grid (P, k + 1).
        unsafe { b.launch(lc) }.during(|| format!("launching {}", kernels::JOINT_SUMS))?;
        let sums = self.stream.clone_dtoh(&out).during(|| "reading the joint sums".into())?;
        let bad = self.stream.clone_dtoh(&bad).during(|| "reading the joint sums".into())?;
        self.stream.synchronize().during(|| "running the joint-sum kernels".into())?;
        s.in_flight = false;
        Ok((0..p).map(|t| JointSums::from_kernel(&sums[t * (k + 3)..(t + 1) * (k + 3)], bad[t], pop.len[t] as usize, n)).collect())
    }

    /// Every individual's sums of a loss of the user's own (`loss`, a registered user operator
    /// `loss(p, y)`) over `data`'s rows at its prediction `p = a·f + b`, `(a, b)` its linear
    /// scaling where `scaled`, else `(1, 0)` (twin of
    /// [`crate::backend::cpu::eval::evaluate_loss`], whose scaling comes from the fused sums:
    /// the same values at every point but for a rare last-bit difference of `p`, the sums
    /// within rounding). The prediction kernels write the programs' values (`P × N` floats),
    /// then `grove_loss_sums` scales, scores and adds them up per program. Single-output
    /// programs; individuals without a program, or with a NaN or infinite value or loss at any
    /// row, come back with `finite == false`.
    pub fn evaluate_loss(&self, pop: &Population, data: &DeviceDataset, loss: crate::program::ops::Op, scaled: bool) -> Result<Vec<crate::program::fitness::LossSums>> {
        use crate::program::fitness::LossSums;
        self.check_dataset(data)?;
        if pop.n_outputs > 0 {
            return Err(GpuError::Input(format!("a loss scores one output; the population has {}", pop.n_outputs)));
        }
        if crate::program::ops::user::get(loss).is_none() {
            return Err(GpuError::Input(format!("the loss's opcode {} is no registered operator", loss as u8)));
        }
        let (p, n) = (pop.size(), data.n_rows);
        if p == 0 {
            return Ok(Vec::new());
        }
        let mut guard = self.scratch.lock().unwrap_or_else(|e| e.into_inner());
        let s = &mut *guard;
        let (pred, _) = self.predict_on_device(pop, data, &EvalConfig::default(), s)?;
        let mut out = self.alloc::<f64>(p, false, "allocating the loss sums")?;
        let mut bad = self.alloc::<u32>(p, false, "allocating the loss sums")?;
        let f = self.function(&EVAL, &[("GROVE_K", 1)], kernels::LOSS_SUMS)?;
        let mut b = self.stream.launch_builder(&f);
        let (n32, scaled32, op32) = (n as u32, scaled as u32, loss as u8 as u32);
        b.arg(&n32).arg(&scaled32).arg(&op32).arg(&pred).arg(&data.y).arg(&mut out).arg(&mut bad);
        let lc = LaunchConfig { grid_dim: (p as u32, 1, 1), block_dim: (kernels::JOINT_THREADS, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: matches `grove_loss_sums(unsigned n_rows, unsigned scaled, unsigned loss, const
        // float* pred, const float* y, double* out, unsigned* bad)`: pred holds P × N floats,
        // written above for every population row, y N floats (the dataset), out and bad P
        // entries, one per block of the grid (P); `loss` is a registered user opcode (checked
        // above), which the module's grove_apply was generated with (the kernel text, and so its
        // cache key, includes every registered operator).
        unsafe { b.launch(lc) }.during(|| format!("launching {}", kernels::LOSS_SUMS))?;
        let sums = self.stream.clone_dtoh(&out).during(|| "reading the loss sums".into())?;
        let bad = self.stream.clone_dtoh(&bad).during(|| "reading the loss sums".into())?;
        self.stream.synchronize().during(|| "running the loss kernels".into())?;
        s.in_flight = false;
        Ok((0..p).map(|t| LossSums { n: n as u64, sum: sums[t], finite: bad[t] == 0 && pop.len[t] > 0 }).collect())
    }

    /// A batch of predictions computed on the host (`programs × rows`, row-major) with its
    /// targets, copied onto this GPU: a fitness function of the user's own on a GPU run gets
    /// device arrays for every call, also the scores of the returned model (which the host
    /// computes). A program is valid where its predictions are all finite.
    pub fn upload_batch(&self, pred: &[f32], y: &[f32], programs: usize, rows: usize) -> Result<DeviceBatch> {
        if pred.len() != programs * rows || y.len() != rows || programs == 0 {
            return Err(GpuError::Input(format!("a batch of {} predictions and {} targets for {programs} programs × {rows} rows", pred.len(), y.len())));
        }
        let valid = (0..programs).map(|t| rows > 0 && pred[t * rows..(t + 1) * rows].iter().all(|v| v.is_finite())).collect();
        let d_pred = self.stream.clone_htod(pred).during(|| "copying a batch's predictions".into())?;
        let d_y = self.stream.clone_htod(y).during(|| "copying a batch's targets".into())?;
        self.stream.synchronize().during(|| "copying a batch".into())?;
        Ok(DeviceBatch { pred: d_pred, y: d_y, valid, programs, rows, ordinal: self.ordinal(), ctx: self.ctx.clone() })
    }

    /// Every individual's predictions at `data`'s rows, left on the device: `[P × N]` f32, the
    /// program's value under its linear scaling where `scaled` (`grove_scale_predictions`, as
    /// [`Self::evaluate_loss`] scales them; a program with a NaN or infinite value keeps its
    /// values), NaN for an individual without a program, and which programs are valid. What a
    /// fitness function of the user's own receives on the GPU ([`DeviceBatch`]); the stream is
    /// synchronized, so any stream may read it. Single-output programs.
    pub fn scaled_predictions(&self, pop: &Population, data: &DeviceDataset, scaled: bool) -> Result<DeviceBatch> {
        self.check_dataset(data)?;
        if pop.n_outputs > 0 {
            return Err(GpuError::Input(format!("predictions of one output; the population has {}", pop.n_outputs)));
        }
        let (p, n) = (pop.size(), data.n_rows);
        if p == 0 {
            return Err(GpuError::Input("predictions of an empty population".into()));
        }
        let mut guard = self.scratch.lock().unwrap_or_else(|e| e.into_inner());
        let s = &mut *guard;
        let (mut pred, _) = self.predict_on_device(pop, data, &EvalConfig::default(), s)?;
        let mut bad = self.alloc::<u32>(p, false, "allocating the batch's counts")?;
        let f = self.function(&EVAL, &[("GROVE_K", 1)], kernels::SCALE_PREDICTIONS)?;
        let mut b = self.stream.launch_builder(&f);
        let (n32, scaled32) = (n as u32, scaled as u32);
        b.arg(&n32).arg(&scaled32).arg(&mut pred).arg(&data.y).arg(&mut bad);
        let lc = LaunchConfig { grid_dim: (p as u32, 1, 1), block_dim: (kernels::JOINT_THREADS, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: matches `grove_scale_predictions(unsigned n_rows, unsigned scaled, float* pred,
        // const float* y, unsigned* bad)`: pred holds P × N floats, written above for every
        // population row, y N floats (the dataset), bad P entries; block t writes only row t of
        // pred and bad[t].
        unsafe { b.launch(lc) }.during(|| format!("launching {}", kernels::SCALE_PREDICTIONS))?;
        let y = self.stream.clone_dtod(&data.y).during(|| "copying the targets for the batch".into())?;
        let bad = self.stream.clone_dtoh(&bad).during(|| "reading the batch's counts".into())?;
        self.stream.synchronize().during(|| "running the prediction kernels".into())?;
        s.in_flight = false;
        let valid = (0..p).map(|t| bad[t] == 0 && pop.len[t] > 0).collect();
        Ok(DeviceBatch { pred, y, valid, programs: p, rows: n, ordinal: self.ordinal(), ctx: self.ctx.clone() })
    }

    /// The sums of every individual's fitted head over its `K = pop.n_outputs ≥ 1` outputs
    /// (twin of [`crate::backend::cpu::eval::evaluate_head`]; the same values at every point,
    /// the sums within rounding): the prediction kernels write every output at every row
    /// (`P × K × N` floats), then `grove_head_sums` adds them up per (program, sum).
    /// Individuals without a program, or with a NaN or infinite output at any row, come back
    /// with `finite == false`.
    pub fn evaluate_head(&self, pop: &Population, data: &DeviceDataset) -> Result<Vec<crate::program::head::HeadSums>> {
        use crate::program::head::{HeadSums, MAX_HEAD};
        self.check_dataset(data)?;
        let k = pop.n_outputs.max(1);
        if k > MAX_HEAD {
            return Err(GpuError::Input(format!("a head reads at most {MAX_HEAD} outputs; the population has {k}")));
        }
        let (p, n) = (pop.size(), data.n_rows);
        if p == 0 {
            return Ok(Vec::new());
        }
        if n == 0 {
            return Ok((0..p).map(|_| HeadSums::new(k)).collect());
        }
        let pairs = k * (k + 1) / 2;
        let n_cols = 2 * k + pairs + 1;
        let mut guard = self.scratch.lock().unwrap_or_else(|e| e.into_inner());
        let s = &mut *guard;
        let (pred, _) = self.predict_on_device(pop, data, &EvalConfig::default(), s)?;
        let mut out = self.alloc::<f64>(p * (n_cols + 1), false, "allocating the head sums")?;
        let mut bad = self.alloc::<u32>(p, false, "allocating the head sums")?;
        let f = self.function(&EVAL, &[("GROVE_K", 1)], kernels::HEAD_SUMS)?;
        let mut b = self.stream.launch_builder(&f);
        let (n32, k32) = (n as u32, k as u32);
        b.arg(&n32).arg(&k32).arg(&pred).arg(&data.y).arg(&mut out).arg(&mut bad);
        let lc = LaunchConfig { grid_dim: (p as u32, n_cols as u32, 1), block_dim: (kernels::JOINT_THREADS, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: matches `grove_head_sums(unsigned n_rows, unsigned k, const float* pred,
        // const float* y, double* out, unsigned* bad)`: pred holds P × K × N floats, written
        // above for every population row (K = max(1, n_outputs), the prediction kernels'
        // layout), y N floats (the dataset), out P × (C + 1) and bad P entries for the grid
        // (P, C), C = 2K + K(K + 1)/2 + 1.
        unsafe { b.launch(lc) }.during(|| format!("launching {}", kernels::HEAD_SUMS))?;
        let sums = self.stream.clone_dtoh(&out).during(|| "reading the head sums".into())?;
        let bad = self.stream.clone_dtoh(&bad).during(|| "reading the head sums".into())?;
        self.stream.synchronize().during(|| "running the head-sum kernels".into())?;
        s.in_flight = false;
        Ok((0..p)
            .map(|t| {
                let o = &sums[t * (n_cols + 1)..(t + 1) * (n_cols + 1)];
                let mut h = HeadSums::new(k);
                h.n = n as u64;
                let q = h.read_features(o);
                h.sum_fy[..k].copy_from_slice(&o[q..q + k]);
                h.sum_y = o[n_cols - 1];
                h.sum_y2 = o[n_cols];
                if bad[t] == 0 && pop.len[t] > 0 { h } else { HeadSums::invalid(k, n as u64) }
            })
            .collect())
    }

    /// Every individual's sums for a classifier's head over its outputs
    /// ([`crate::program::head::ClassHeadSums`]): the prediction kernels write the outputs,
    /// `grove_class_head_sums` adds them up per class; `data`'s target holds the rows' class
    /// indices (as floats), of which `counts[c]` are `c` (the task's own class counts of those
    /// rows: [`crate::backend::Backend::class_head_sums`]). The CPU twin:
    /// [`crate::backend::cpu::eval::evaluate_class_head`].
    pub fn evaluate_class_head(&self, pop: &Population, data: &DeviceDataset, counts: &[u64]) -> Result<Vec<crate::program::head::ClassHeadSums>> {
        use crate::program::head::{ClassHeadSums, MAX_HEAD};
        let n_classes = counts.len();
        self.check_dataset(data)?;
        let k = pop.n_outputs.max(1);
        if k > MAX_HEAD {
            return Err(GpuError::Input(format!("a head reads at most {MAX_HEAD} outputs; the population has {k}")));
        }
        let (p, n) = (pop.size(), data.n_rows);
        if p == 0 {
            return Ok(Vec::new());
        }
        if n == 0 {
            return Ok((0..p).map(|_| ClassHeadSums::new(k, n_classes)).collect());
        }
        let pairs = k * (k + 1) / 2;
        let n_cols = k + pairs + k * n_classes + 1;
        if n_cols > 65535 {
            return Err(GpuError::Input(format!("a head over {k} outputs and {n_classes} classes needs {n_cols} sums a program; at most 65535")));
        }
        let mut guard = self.scratch.lock().unwrap_or_else(|e| e.into_inner());
        let s = &mut *guard;
        let (pred, _) = self.predict_on_device(pop, data, &EvalConfig::default(), s)?;
        let mut out = self.alloc::<f64>(p * n_cols, false, "allocating the class head sums")?;
        let mut bad = self.alloc::<u32>(p, false, "allocating the class head sums")?;
        let f = self.function(&EVAL, &[("GROVE_K", 1)], kernels::CLASS_HEAD_SUMS)?;
        let mut b = self.stream.launch_builder(&f);
        let (n32, k32, c32) = (n as u32, k as u32, n_classes as u32);
        b.arg(&n32).arg(&k32).arg(&c32).arg(&pred).arg(&data.y).arg(&mut out).arg(&mut bad);
        let lc = LaunchConfig { grid_dim: (p as u32, n_cols as u32, 1), block_dim: (kernels::JOINT_THREADS, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: matches `grove_class_head_sums(unsigned n_rows, unsigned k, unsigned n_classes,
        // const float* pred, const float* labels, double* out, unsigned* bad)`: pred holds
        // P × K × N floats, written above for every population row (K = max(1, n_outputs)),
        // labels N floats (the dataset's target), out P × C and bad P entries for the grid
        // (P, C), C = K + K(K + 1)/2 + K·n_classes + 1 (at most 65535, checked above).
        unsafe { b.launch(lc) }.during(|| format!("launching {}", kernels::CLASS_HEAD_SUMS))?;
        let sums = self.stream.clone_dtoh(&out).during(|| "reading the class head sums".into())?;
        let bad = self.stream.clone_dtoh(&bad).during(|| "reading the class head sums".into())?;
        self.stream.synchronize().during(|| "running the class head-sum kernels".into())?;
        s.in_flight = false;
        Ok((0..p)
            .map(|t| {
                let o = &sums[t * n_cols..(t + 1) * n_cols];
                let mut h = ClassHeadSums::new(k, n_classes);
                h.sums.n = n as u64;
                let q = h.sums.read_features(o);
                for (c, f) in h.class_f.iter_mut().enumerate() {
                    f[..k].copy_from_slice(&o[q + c * k..q + (c + 1) * k]);
                }
                h.counts = counts.to_vec();
                if bad[t] == 0 && pop.len[t] > 0 { h } else { ClassHeadSums { counts: counts.to_vec(), ..ClassHeadSums::invalid(k, n_classes, n as u64) } }
            })
            .collect())
    }

    pub(super) fn check_dataset(&self, data: &DeviceDataset) -> Result<()> {
        if data.engine != self.id {
            return Err(GpuError::Input("the data set was uploaded by another engine".into()));
        }
        Ok(())
    }

    /// Parameters and launch configuration of one evaluation launch over `n_trees` trees.
    fn eval_shape(
        &self,
        max_len: usize,
        n_outputs: usize,
        data: &DeviceDataset,
        l: &Launch,
        n_trees: usize,
        deep: bool,
    ) -> (EvalParams, LaunchConfig) {
        let params = EvalParams {
            n_rows: data.n_rows as u32,
            n_features: data.n_features as u32,
            max_len: max_len as u32,
            n_outputs: n_outputs as u32,
            n_trees: n_trees as u32,
            tile_points: l.tile_points,
            n_tiles: l.n_tiles,
            reserved: 0,
        };
        // The deep kernels take one point per thread: same tiles, same threads, K = 1.
        let slot_bytes = if deep { l.slot_bytes / l.points_per_thread } else { l.slot_bytes };
        let lc = LaunchConfig {
            grid_dim: (n_trees as u32 * l.n_tiles, 1, 1),
            block_dim: (l.threads, 1, 1),
            shared_mem_bytes: slot_bytes + kernels::COMPILE_SHARED_BYTES,
        };
        (params, lc)
    }

}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cuda::kernels::{DEEP_STACK, STACK};
    use crate::program::ops::Op;
    use crate::program::tree::Node;

    fn config(t: Option<u32>, k: Option<u32>, tile: Option<u32>) -> EvalConfig {
        EvalConfig { threads_per_block: t, points_per_thread: k, tile_points: tile, poison_outputs: false }
    }

    #[test]
    fn default_launch_shapes() {
        let d = EvalConfig::default();
        // Plenty of trees: 4 passes of 256 × 4 points.
        let l = d.resolve(100_000, 1000, 0, 132).unwrap();
        assert_eq!((l.threads, l.points_per_thread, l.tile_points, l.n_tiles), (256, 4, 4096, 25));
        // One tree on a big data set: fewer passes so the GPU has blocks.
        let l = d.resolve(100_000, 1, 0, 132).unwrap();
        assert_eq!((l.tile_points, l.n_tiles), (1024, 98));
        // Tiny data: one warp, one point each.
        let l = d.resolve(1, 1, 0, 132).unwrap();
        assert_eq!((l.threads, l.points_per_thread, l.tile_points, l.n_tiles), (32, 1, 32, 1));
        // Small data: the narrowest block that covers the rows at 4 points a thread (W2's 64
        // rows: one warp, 2 points a thread; 256 rows: 64 × 4).
        for (rows, trees, want) in [
            (64, 1_000_000, (32, 2, 64, 1)),
            (33, 10, (32, 2, 64, 1)),
            (128, 5000, (32, 4, 128, 1)),
            (256, 5000, (64, 4, 256, 1)),
            (300, 10, (96, 4, 384, 1)),
            (1000, 5000, (256, 4, 1024, 1)),
        ] {
            let l = d.resolve(rows, trees, 0, 132).unwrap();
            assert_eq!((l.threads, l.points_per_thread, l.tile_points, l.n_tiles), want, "{rows} rows, {trees} trees");
        }
        // Given points per thread, the block covers the rows at those.
        let l = config(None, Some(1), None).resolve(64, 10, 0, 132).unwrap();
        assert_eq!((l.threads, l.points_per_thread), (64, 1));
        let l = config(None, Some(2), None).resolve(512, 10, 0, 132).unwrap();
        assert_eq!((l.threads, l.points_per_thread), (256, 2));
        // Many output slots: fewer points per thread to fit shared memory.
        let l = d.resolve(100_000, 1000, 40, 132).unwrap();
        assert!(l.slot_bytes <= SLOT_BYTES_MAX && l.points_per_thread == 1, "{l:?}");
        let l = d.resolve(100_000, 1000, 255, 132).unwrap();
        assert!(l.slot_bytes <= SLOT_BYTES_MAX && l.threads == 32, "{l:?}");
        // Many trees over many rows: longer tiles keep the blocks within MAX_BLOCKS (10⁵ trees
        // over 10⁸ rows were 2.4 × 10⁹ blocks, more than a launch takes).
        let l = d.resolve(100_000_000, 100_000, 0, 132).unwrap();
        assert_eq!((l.tile_points % 1024, l.n_tiles), (0, 41), "{l:?}");
        assert!(100_000 * l.n_tiles as u64 <= MAX_BLOCKS && l.tile_points as u64 * 41 >= 100_000_000, "{l:?}");
        // Just at the bound the default shape stays (W4's 1000 trees over 2²⁴ rows).
        let l = d.resolve(1 << 24, 1000, 0, 132).unwrap();
        assert_eq!((l.tile_points, l.n_tiles), (4096, 4096));
        // More trees than MAX_BLOCKS: a tile is the whole data set.
        let l = d.resolve(10_000, 8_000_000, 0, 132).unwrap();
        assert_eq!(l.n_tiles, 1, "{l:?}");
    }

    #[test]
    fn explicit_launch_settings_are_checked_not_adjusted() {
        assert!(config(Some(100), None, None).resolve(1000, 1, 0, 1).is_err());
        assert!(config(Some(2048), None, None).resolve(1000, 1, 0, 1).is_err());
        assert!(config(None, Some(9), None).resolve(1000, 1, 0, 1).is_err());
        assert!(config(Some(64), Some(2), Some(100)).resolve(1000, 1, 0, 1).is_err());
        assert!(config(Some(1024), Some(8), None).resolve(1000, 1, 2, 1).is_err());
        let l = config(Some(64), Some(2), Some(256)).resolve(1000, 3, 0, 1).unwrap();
        assert_eq!((l.threads, l.points_per_thread, l.tile_points, l.n_tiles), (64, 2, 256, 4));
        assert!(EvalConfig::default().resolve(0, 1, 0, 1).is_err());
    }

    fn tree(nodes: &[Node], n_outputs: usize) -> Population {
        let mut pop = Population::new(1, nodes.len().max(1), n_outputs);
        pop.set_tree(0, nodes).unwrap();
        pop
    }

    #[test]
    fn stack_need_counts_pending_values() {
        use Op::*;
        let f = Node::func;
        // add(x0, mul(x1, 2)): walking backwards holds 2, x1, then x0 with mul's result.
        let pop = tree(&[f(Add), Node::var(0), f(Mul), Node::var(1), Node::constant(2.0)], 0);
        assert_eq!(stack_need(pop.tree(0), 2, 0), Ok(2));
        // Walking backwards evaluates child 2 first, so a right-deep chain
        // add(x, add(x, add(x, x))) needs 2 and a left-deep one add(add(add(x, x), x), x)
        // holds all four leaves at once.
        let right = [f(Add), Node::var(0), f(Add), Node::var(0), f(Add), Node::var(0), Node::var(0)];
        assert_eq!(stack_need(tree(&right, 0).tree(0), 1, 0), Ok(2));
        let left = [f(Add), f(Add), f(Add), Node::var(0), Node::var(0), Node::var(0), Node::var(0)];
        assert_eq!(stack_need(tree(&left, 0).tree(0), 1, 0), Ok(4));
        assert_eq!(stack_need(tree(&[f(Sin), Node::var(0)], 0).tree(0), 1, 0), Ok(1));
    }

    #[test]
    fn stack_need_rejects_what_the_kernels_cannot_walk() {
        let pop = tree(&[Node::func(Op::Add), Node::var(0), Node::var(3)], 0);
        assert!(stack_need(pop.tree(0), 3, 0).unwrap_err().contains("variable index 3"));
        let pop = tree(&[Node { out: 2, ..Node::var(0) }], 2);
        assert!(stack_need(pop.tree(0), 1, 1).unwrap_err().contains("output slot 1 of 1"));
        let mut pop = tree(&[Node::func(Op::Neg), Node::var(0)], 0);
        pop.op[0] = 200;
        assert!(stack_need(pop.tree(0), 1, 0).unwrap_err().contains("bad opcode 200"));
        pop.op[0] = Op::Add as u8;
        assert!(stack_need(pop.tree(0), 1, 0).unwrap_err().contains("children"));
        let mut pop = tree(&[Node::func(Op::Neg), Node::var(0)], 0);
        pop.op[0] = Op::Var as u8;
        assert!(stack_need(pop.tree(0), 1, 0).unwrap_err().contains("2 trees"));
    }

    /// Fast ids then deep ids, from a packed buffer.
    fn split(pop: &Population, n_features: usize) -> Result<(Vec<u32>, Vec<u32>)> {
        let mut buf = crate::backend::cuda::pack::host_buffer(Layout::new(pop.size(), pop.max_len).bytes);
        let bytes = as_bytes_mut(&mut buf);
        let packed = pack(pop, n_features, bytes)?;
        let ids_bytes = &bytes[packed.layout.ids..packed.layout.ids + 4 * pop.size()];
        let ids: Vec<u32> = ids_bytes.chunks(4).map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]])).collect();
        Ok((ids[..packed.n_fast].to_vec(), ids[packed.n_fast..].to_vec()))
    }

    #[test]
    fn deep_trees_go_to_the_fallback_and_deeper_ones_are_refused() {
        // A left-deep chain of n additions needs n + 1 slots.
        let chain = |n: usize| {
            let mut nodes = vec![Node::func(Op::Add); n];
            nodes.extend(vec![Node::var(0); n + 1]);
            nodes
        };
        let mut pop = Population::new(4, 2 * DEEP_STACK + 1, 0);
        pop.set_tree(0, &chain(STACK - 1)).unwrap();
        pop.set_tree(1, &chain(STACK)).unwrap();
        pop.set_tree(3, &chain(DEEP_STACK - 1)).unwrap();
        assert_eq!(split(&pop, 1).unwrap(), (vec![0, 2], vec![1, 3]));
        pop.set_tree(3, &chain(DEEP_STACK)).unwrap();
        assert!(matches!(split(&pop, 1), Err(GpuError::TreeTooDeep { tree: 3, need, .. }) if need == DEEP_STACK + 1));
    }
}
