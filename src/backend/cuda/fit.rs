//! Constants fitted on the GPU: the host side of `kernels/fit.cu`, twin of
//! [`crate::program::constants::fit_constants`] and
//! [`crate::program::constants::fit_class_constants`] (the same bits: the kernel's docs say how).
//! One block per tree fits the whole Levenberg–Marquardt run in one launch, on the population
//! where it lies: the device loop's rows in place, or a host population's rows copied in and
//! back.

use cudarc::driver::{LaunchConfig, PushKernelArg};

use super::error::{During, GpuError, Result};
use super::classify::DeviceClassData;
use super::kernels::{FIT, FIT_CLASS_CONSTANTS, FIT_CONSTANTS, FIT_THREADS, FitParams};
use super::{CudaEngine, DeviceDataset, DeviceIndices, DevicePopulation};
use crate::program::constants::{FitConfig, FitResult};
use crate::program::tree::Population;

impl CudaEngine {
    /// Fits the constants of rows `rows` of a device population in place on `data` (its `x`
    /// and `y`); one result per row, in `rows`' order. Trees the fit cannot take (output
    /// nodes, walks deeper than the kernel's stack) are left as they are.
    pub fn fit_constants_on_device(&self, pop: &mut DevicePopulation, rows: &DeviceIndices, data: &DeviceDataset, cfg: FitConfig) -> Result<Vec<FitResult>> {
        self.check_dataset(data)?;
        if pop.engine != self.id || rows.engine != self.id {
            return Err(GpuError::Input("the population or the row list belongs to another engine".into()));
        }
        if rows.bound() > pop.size() {
            return Err(GpuError::Input(format!("row indices up to {} for a population of {}", rows.bound(), pop.size())));
        }
        let n = rows.len();
        if n == 0 {
            return Ok(Vec::new());
        }
        let params = FitParams {
            n_trees: n as u32,
            max_len: pop.max_len() as u32,
            n_rows: data.n_rows() as u32,
            n_features: data.n_features() as u32,
            steps: cfg.steps,
            scaling: cfg.linear_scaling as u32,
            n_classes: 0,
            n_outputs: 0,
        };
        let mut results = self.stream.alloc_zeros::<FitResult>(n).during(|| "allocating fit results".into())?;
        let f = self.function(&FIT, &[], FIT_CONSTANTS)?;
        let mut b = self.stream.launch_builder(&f);
        b.arg(&params).arg(&rows.idx).arg(&pop.op).arg(&mut pop.value).arg(&pop.out).arg(&pop.len).arg(data.x()).arg(data.y()).arg(&mut results);
        let lc = LaunchConfig { grid_dim: (n as u32, 1, 1), block_dim: (FIT_THREADS, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: the arguments are those of grove_fit_constants, in order; `rows` holds `n`
        // indices below the population's size; the population's rows have `max_len` slots
        // and lengths within them (kept by every kernel that writes it); `x` is `[F][N]` and
        // `y` `[N]` of `data`, whose feature count bounds every variable index (trees with
        // another are not fitted); `results` has `n` entries.
        unsafe { b.launch(lc) }.during(|| format!("launching {FIT_CONSTANTS}"))?;
        self.stream.clone_dtoh(&results).during(|| "reading fit results".into())
    }

    /// [`CudaEngine::fit_constants_on_device`] for rows of a host population: the rows go to
    /// the device, are fitted there, and their constants come back into `pop`.
    pub fn fit_constants(&self, pop: &mut Population, rows: &[usize], data: &DeviceDataset, cfg: FitConfig) -> Result<Vec<FitResult>> {
        self.fit_host_rows(pop, rows, |dev, idx| self.fit_constants_on_device(dev, idx, data, cfg))
    }

    /// Fits the constants of rows `rows` of a device classification population in place on
    /// `data` by the softmax cross-entropy; one result per row, in `rows`' order. The
    /// population has one output slot per class, or none with two classes. Programs the fit
    /// cannot take (more than 16 classes, walks deeper than the kernel's stack) are left as
    /// they are.
    pub fn fit_class_constants_on_device(&self, pop: &mut DevicePopulation, rows: &DeviceIndices, data: &DeviceClassData, steps: u32) -> Result<Vec<FitResult>> {
        if pop.engine != self.id || rows.engine != self.id || data.engine != self.id {
            return Err(GpuError::Input("the population, the row list or the data set belongs to another engine".into()));
        }
        if rows.bound() > pop.size() {
            return Err(GpuError::Input(format!("row indices up to {} for a population of {}", rows.bound(), pop.size())));
        }
        let (k, n_out) = (data.n_classes, pop.n_outputs());
        if !(n_out == k || (n_out == 0 && k == 2)) {
            return Err(GpuError::Input(format!("programs of {n_out} outputs cannot be fitted to {k} classes")));
        }
        let n = rows.len();
        if n == 0 {
            return Ok(Vec::new());
        }
        let params = FitParams {
            n_trees: n as u32,
            max_len: pop.max_len() as u32,
            n_rows: data.n_rows as u32,
            n_features: data.n_features as u32,
            steps,
            scaling: 0,
            n_classes: k as u32,
            n_outputs: n_out as u32,
        };
        let mut results = self.stream.alloc_zeros::<FitResult>(n).during(|| "allocating fit results".into())?;
        let f = self.function(&FIT, &[], FIT_CLASS_CONSTANTS)?;
        let mut b = self.stream.launch_builder(&f);
        b.arg(&params).arg(&rows.idx).arg(&pop.op).arg(&mut pop.value).arg(&pop.out).arg(&pop.len).arg(&data.x).arg(&data.labels).arg(&mut results);
        let lc = LaunchConfig { grid_dim: (n as u32, 1, 1), block_dim: (FIT_THREADS, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: the arguments are those of grove_fit_class_constants, in order; `rows` holds
        // `n` indices below the population's size; its rows have `max_len` slots and lengths
        // within them; `x` is `[F][N]` and `labels` `[N]` of `data`, each label below
        // `n_classes` (checked on upload), the output count matches the classes (checked
        // above), and the feature count bounds every variable index (trees with another are not
        // fitted); `results` has `n` entries.
        unsafe { b.launch(lc) }.during(|| format!("launching {FIT_CLASS_CONSTANTS}"))?;
        self.stream.clone_dtoh(&results).during(|| "reading fit results".into())
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
