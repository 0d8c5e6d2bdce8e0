//! Constants fitted on the GPU: the host side of `kernels/fit.cu`, twin of
//! [`crate::program::constants::fit_constants`] (the same bits: the kernel's docs say how).
//! One block per tree fits the whole Levenberg–Marquardt run in one launch, on the population
//! where it lies: the device loop's rows in place, or a host population's rows copied in and
//! back.

use cudarc::driver::{LaunchConfig, PushKernelArg};

use super::error::{During, GpuError, Result};
use super::kernels::{FIT, FIT_CONSTANTS, FIT_THREADS, FitParams};
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
        let res = self.fit_constants_on_device(&mut dev, &idx, data, cfg)?;
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
