//! Constants fitted on the GPU: the host side of `kernels/fit.cu`, twin of
//! [`crate::backend::cpu::fit::fit_constants`] and
//! [`crate::backend::cpu::fit::class::fit_class_constants`] (the same bits: the kernel's docs say how).
//! One block per tree fits the whole Levenberg–Marquardt run in one launch, on the population
//! where it lies: the device loop's rows in place, or a host population's rows copied in and
//! back.

use cudarc::driver::{CudaSlice, LaunchConfig, PushKernelArg};

use super::error::{During, GpuError, Result};
use super::classify::DeviceClassData;
use super::kernels::{
    FIT, FIT_CLASS_CONSTANTS, FIT_CONSTANTS, FIT_NODE_BYTES, FIT_NODES, FIT_SPLIT_BYTES, FIT_SPLIT_PASS, FIT_SPLIT_PASS_CLASS,
    FIT_SPLIT_START, FIT_SPLIT_START_CLASS, FIT_SPLIT_STEP, FIT_SPLIT_STEP_CLASS, FIT_THREADS,
};
use super::params::FitParams;
use super::{CudaEngine, DeviceDataset, DeviceIndices, DevicePopulation};

/// The most bytes of decoded long trees one fitting launch keeps (its trees are fewer where
/// rows are long).
const FIT_SCRATCH_BYTES: usize = 256 << 20;
/// The most bytes of the parts' sums one group of split fits keeps (its trees are fewer where
/// the data has many parts).
const FIT_PARTIALS_BYTES: usize = 256 << 20;
use crate::backend::cpu::fit::{FIT_PART, FitConfig, FitResult, MAX_FIT_SUMS};
use crate::program::tree::Population;

/// A null device pointer: the classification kernels' `offset` where there are no offsets.
static NULL: u64 = 0;

/// Pushes a classification fit's `const float* offset`: the offsets, or `null`.
fn push_offset<'a>(b: &mut cudarc::driver::LaunchArgs<'a>, offset: Option<&'a CudaSlice<f32>>, null: &'a u64) {
    match offset {
        Some(o) => b.arg(o),
        None => b.arg(null),
    };
}

impl CudaEngine {
    /// Fits the constants of rows `rows` of a device population in place on `data` (its `x`
    /// and `y`); one result per row, in `rows`' order. Trees the fit cannot take (output
    /// nodes, walks deeper than the kernel's stack) are left as they are.
    pub fn fit_constants_on_device(&self, pop: &mut DevicePopulation, rows: &DeviceIndices, data: &DeviceDataset, cfg: FitConfig) -> Result<Vec<FitResult>> {
        self.check_dataset(data)?;
        if pop.engine != self.id || rows.engine != self.id {
            return Err(GpuError::Input("the population or the row list belongs to another engine".into()));
        }
        let params = FitParams {
            n_rows: data.n_rows() as u32,
            n_features: data.n_features() as u32,
            steps: cfg.steps,
            scaling: cfg.linear_scaling as u32,
            ..FitParams::default()
        };
        // SAFETY: `y` holds `n_rows` values of `data`, whose `x` is `[F][N]`.
        unsafe { self.launch_fit(false, params, pop, rows, data.x(), data.y(), None) }
    }

    /// [`CudaEngine::fit_constants_on_device`] for rows of a host population: the rows go to
    /// the device, are fitted there, and their constants come back into `pop`.
    pub fn fit_constants(&self, pop: &mut Population, rows: &[usize], data: &DeviceDataset, cfg: FitConfig) -> Result<Vec<FitResult>> {
        self.fit_host_rows(pop, rows, |dev, idx| self.fit_constants_on_device(dev, idx, data, cfg))
    }

    /// Fits the constants of rows `rows` of a device classification population in place on
    /// `data` by the softmax cross-entropy, with the data's offsets (the linear terms of the
    /// inputs, [`Self::set_class_offset`]) under the outputs; one result per row, in `rows`'
    /// order. The population has one output slot per class, or none with two classes. Programs
    /// the fit cannot take (more than 16 classes, walks deeper than the kernel's stack) are left
    /// as they are.
    pub fn fit_class_constants_on_device(&self, pop: &mut DevicePopulation, rows: &DeviceIndices, data: &DeviceClassData, steps: u32) -> Result<Vec<FitResult>> {
        if pop.engine != self.id || rows.engine != self.id || data.engine != self.id {
            return Err(GpuError::Input("the population, the row list or the data set belongs to another engine".into()));
        }
        let (k, n_out) = (data.n_classes, pop.n_outputs());
        if !(n_out == k || (n_out == 0 && k == 2)) {
            return Err(GpuError::Input(format!("programs of {n_out} outputs cannot be fitted to {k} classes")));
        }
        let offset = match &data.offset {
            Some((o, slots)) if *slots != n_out.max(1) => return Err(GpuError::Input(format!("offsets for {slots} outputs, programs of {n_out}"))),
            Some((o, _)) => Some(o),
            None => None,
        };
        let params = FitParams {
            n_rows: data.n_rows as u32,
            n_features: data.n_features as u32,
            steps,
            n_classes: k as u32,
            n_outputs: n_out as u32,
            ..FitParams::default()
        };
        // SAFETY: `labels` holds `n_rows` labels of `data`, each below `n_classes` (checked on
        // upload), whose `x` is `[F][N]`; the output count matches the classes and the
        // offsets' slots (checked above), the offsets `[slots][N]` (checked on upload).
        unsafe { self.launch_fit(true, params, pop, rows, &data.x, &data.labels, offset) }
    }

    /// Launches fit.cu's fit of regression trees (or, with `classes`, classification
    /// programs), one block per entry of `rows` (data of more than one part: a block per part
    /// of each tree, [`Self::launch_split_fit`]), with `params` (its tree count and row stride
    /// filled in here) over `pop`, `x` and `target` (`y` or the labels) and, for classes,
    /// `offset` (null where `None`), and reads the results back.
    ///
    /// # Safety
    /// `x` must be `[params.n_features][params.n_rows]` and `target` hold `params.n_rows`
    /// entries of the type the kernel reads there (`y`, or labels below `params.n_classes`);
    /// `offset`, with classes, `[max(1, params.n_outputs)][params.n_rows]`.
    #[allow(clippy::too_many_arguments)]
    unsafe fn launch_fit<T: cudarc::driver::DeviceRepr>(
        &self,
        classes: bool,
        mut params: FitParams,
        pop: &mut DevicePopulation,
        rows: &DeviceIndices,
        x: &CudaSlice<f32>,
        target: &CudaSlice<T>,
        offset: Option<&CudaSlice<f32>>,
    ) -> Result<Vec<FitResult>> {
        if rows.bound() > pop.size() {
            return Err(GpuError::Input(format!("row indices up to {} for a population of {}", rows.bound(), pop.size())));
        }
        let n = rows.len();
        if n == 0 {
            return Ok(Vec::new());
        }
        params.max_len = pop.max_len() as u32;
        // Longest trees first: a block's time grows with its tree's length, so the long ones
        // take the first wave and the short ones fill the last (measured on an H200: the SMs
        // sat idle 38 % of a launch of 1000 trees in their given order). Only the blocks'
        // order changes; each result is put back in `rows`' order below.
        let ids = self.download_indices(rows)?;
        let lens = self.stream.clone_dtoh(&pop.len).during(|| "reading tree lengths".into())?;
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|&k| std::cmp::Reverse(lens[ids[k] as usize]));
        let longest_first: Vec<u32> = order.iter().map(|&k| ids[k]).collect();
        let sorted = self.upload(&longest_first, "uploading the fitted trees' order")?;
        let mut results = self.stream.alloc_zeros::<FitResult>(n).during(|| "allocating fit results".into())?;
        if params.n_rows as usize > FIT_PART {
            // SAFETY: as the caller promises.
            unsafe { self.launch_split_fit(classes, params, pop, &sorted, x, target, offset, &mut results)? };
            return self.fit_results(&results, order);
        }
        let kernel = if classes { FIT_CLASS_CONSTANTS } else { FIT_CONSTANTS };
        // Trees longer than the kernel decodes in shared memory are decoded in a scratch row
        // per tree instead (one byte when no tree can be that long), at most
        // FIT_SCRATCH_BYTES of them a launch.
        let row_bytes = pop.max_len() * FIT_NODE_BYTES;
        let per_launch = if pop.max_len() > FIT_NODES { (FIT_SCRATCH_BYTES / row_bytes).clamp(1, n) } else { n };
        let scratch_bytes = if pop.max_len() > FIT_NODES { per_launch * row_bytes } else { 1 };
        let mut scratch = self.stream.alloc_zeros::<u8>(scratch_bytes).during(|| format!("allocating {scratch_bytes} bytes of fitting scratch"))?;
        let f = self.function(&FIT, &[], kernel)?;
        for lo in (0..n).step_by(per_launch) {
            let hi = (lo + per_launch).min(n);
            params.n_trees = (hi - lo) as u32;
            let ids = sorted.slice(lo..hi);
            let mut res = results.slice_mut(lo..hi);
            let mut b = self.stream.launch_builder(&f);
            b.arg(&params).arg(&ids).arg(&pop.op).arg(&mut pop.value).arg(&pop.out).arg(&pop.len).arg(x).arg(target);
            if classes {
                push_offset(&mut b, offset, &NULL);
            }
            b.arg(&mut res).arg(&mut scratch);
            let lc = LaunchConfig { grid_dim: ((hi - lo) as u32, 1, 1), block_dim: (FIT_THREADS, 1, 1), shared_mem_bytes: 0 };
            // SAFETY: the arguments are those of grove_fit_constants and
            // grove_fit_class_constants (with its offset, or a null pointer), in order; `ids` holds `hi - lo` indices below the
            // population's size; the population's rows have `max_len` slots and lengths within
            // them (kept by every kernel that writes it); `scratch` holds `hi - lo` rows of
            // `max_len` decoded nodes where `max_len` exceeds FIT_NODES; `x` and `target` are as
            // the caller promises, and the feature count bounds every variable index (trees with
            // another are not fitted); `res` has `hi - lo` entries.
            unsafe { b.launch(lc) }.during(|| format!("launching {kernel}"))?;
        }
        self.fit_results(&results, order)
    }

    /// The fit results, launched in `order` (entry `j` of `results` is the caller's `order[j]`),
    /// back in the caller's order.
    fn fit_results(&self, results: &CudaSlice<FitResult>, order: Vec<usize>) -> Result<Vec<FitResult>> {
        let in_order = self.stream.clone_dtoh(results).during(|| "reading fit results".into())?;
        let mut out = vec![FitResult::default(); order.len()];
        for (k, r) in order.into_iter().zip(in_order) {
            out[k] = r;
        }
        Ok(out)
    }

    /// The split fit (fit.cu's `grove_fit_split_*`) of the trees `ids` lists, in groups whose
    /// parts' sums stay within FIT_PARTIALS_BYTES: each group's start, then `steps + 2` times
    /// (the most passes a fit takes) a pass over every waiting tree's parts and a step, into
    /// `results` (one per entry of `ids`). The same bits as one block per tree.
    ///
    /// # Safety
    /// As [`Self::launch_fit`]; `ids` holds indices below the population's size.
    #[allow(clippy::too_many_arguments)]
    unsafe fn launch_split_fit<T: cudarc::driver::DeviceRepr>(
        &self,
        classes: bool,
        mut params: FitParams,
        pop: &mut DevicePopulation,
        ids: &CudaSlice<u32>,
        x: &CudaSlice<f32>,
        target: &CudaSlice<T>,
        offset: Option<&CudaSlice<f32>>,
        results: &mut CudaSlice<FitResult>,
    ) -> Result<()> {
        let n = ids.len();
        let n_rows = params.n_rows as usize;
        let n_parts = n_rows.div_ceil(FIT_PART);
        let tree_bytes = (n_parts * MAX_FIT_SUMS * 8).max(pop.max_len() * FIT_NODE_BYTES);
        let group = (FIT_PARTIALS_BYTES / tree_bytes).clamp(1, n);
        let (start, pass, step) = if classes {
            (FIT_SPLIT_START_CLASS, FIT_SPLIT_PASS_CLASS, FIT_SPLIT_STEP_CLASS)
        } else {
            (FIT_SPLIT_START, FIT_SPLIT_PASS, FIT_SPLIT_STEP)
        };
        let (f_start, f_pass, f_step) = (self.function(&FIT, &[], start)?, self.function(&FIT, &[], pass)?, self.function(&FIT, &[], step)?);
        let alloc = |bytes: usize, what: &str| self.stream.alloc_zeros::<u8>(bytes).during(|| format!("allocating {bytes} bytes of {what}"));
        let mut fits = alloc(group * FIT_SPLIT_BYTES, "split fits' states")?;
        let mut partials = self.stream.alloc_zeros::<f64>(group * n_parts * MAX_FIT_SUMS).during(|| "allocating the parts' sums".into())?;
        let mut scratch = alloc(group * pop.max_len() * FIT_NODE_BYTES, "decoded trees")?;
        let n_parts_arg = n_parts as u32;
        for lo in (0..n).step_by(group) {
            let hi = (lo + group).min(n);
            let g = hi - lo;
            params.n_trees = g as u32;
            let ids = ids.slice(lo..hi);
            let mut res = results.slice_mut(lo..hi);
            let mut b = self.stream.launch_builder(&f_start);
            b.arg(&params).arg(&ids).arg(&pop.op).arg(&pop.value).arg(&pop.out).arg(&pop.len).arg(&mut fits).arg(&mut res).arg(&mut scratch);
            let lc = LaunchConfig { grid_dim: ((g as u32).div_ceil(FIT_THREADS), 1, 1), block_dim: (FIT_THREADS, 1, 1), shared_mem_bytes: 0 };
            // SAFETY: grove_fit_split_start_*'s arguments in order; `ids` holds `g` indices
            // below the population's size, whose rows have `max_len` slots; `fits`, `res` and
            // `scratch` hold `g` states, results and rows of `max_len` decoded nodes.
            unsafe { b.launch(lc) }.during(|| format!("launching {start}"))?;
            for _ in 0..params.steps + 2 {
                let mut b = self.stream.launch_builder(&f_pass);
                b.arg(&params).arg(&n_parts_arg).arg(&fits).arg(&scratch).arg(x).arg(target);
                if classes {
                    push_offset(&mut b, offset, &NULL);
                }
                b.arg(&mut partials);
                let lc = LaunchConfig { grid_dim: ((g * n_parts) as u32, 1, 1), block_dim: (FIT_THREADS, 1, 1), shared_mem_bytes: 0 };
                // SAFETY: grove_fit_split_pass_*'s arguments in order; `g * n_parts` blocks (at
                // most FIT_PARTIALS_BYTES / 1520, well within a grid) each write one part's
                // sums into `partials` ([g][n_parts][MAX_FIT_SUMS]); `x`, `target` and, with
                // classes, the offset (or a null pointer) as the caller promises; the trees were decoded by the start.
                unsafe { b.launch(lc) }.during(|| format!("launching {pass}"))?;
                let mut b = self.stream.launch_builder(&f_step);
                b.arg(&params).arg(&n_parts_arg).arg(&ids).arg(&pop.op).arg(&mut pop.value).arg(&mut fits).arg(&partials).arg(&mut res);
                let lc = LaunchConfig { grid_dim: (g as u32, 1, 1), block_dim: (FIT_THREADS, 1, 1), shared_mem_bytes: 0 };
                // SAFETY: grove_fit_split_step_*'s arguments in order; block k writes tree k's
                // state, result and (at its end) constants in its own row.
                unsafe { b.launch(lc) }.during(|| format!("launching {step}"))?;
            }
        }
        Ok(())
    }

    /// [`CudaEngine::fit_class_constants_on_device`] for rows of a host population: the rows
    /// go to the device, are fitted there, and their constants come back into `pop`.
    pub fn fit_class_constants(&self, pop: &mut Population, rows: &[usize], data: &DeviceClassData, steps: u32) -> Result<Vec<FitResult>> {
        self.fit_host_rows(pop, rows, |dev, idx| self.fit_class_constants_on_device(dev, idx, data, steps))
    }

    /// Runs `fit` on rows `rows` of a host population copied to the device, and copies the
    /// fitted constants back.
    fn fit_host_rows(
        &self,
        pop: &mut Population,
        rows: &[usize],
        fit: impl FnOnce(&mut DevicePopulation, &DeviceIndices) -> Result<Vec<FitResult>>,
    ) -> Result<Vec<FitResult>> {
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        if let Some(&r) = rows.iter().find(|&&r| r >= pop.size()) {
            return Err(GpuError::Input(format!("row {r} of a population of {}", pop.size())));
        }
        let sub = pop.gather(rows);
        let mut dev = self.upload_population(&sub)?;
        let ids: Vec<u32> = (0..rows.len() as u32).collect();
        let idx = self.upload_indices(&ids, rows.len())?;
        let res = fit(&mut dev, &idx)?;
        let values = self.stream.clone_dtoh(&dev.value).during(|| "reading fitted constants".into())?;
        let l = pop.max_len;
        for (k, &r) in rows.iter().enumerate() {
            if res[k].accepted > 0 {
                let len = pop.len[r] as usize;
                pop.value[r * l..r * l + len].copy_from_slice(&values[k * l..k * l + len]);
            }
        }
        Ok(res)
    }
}
