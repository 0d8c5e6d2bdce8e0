//! Regression with one population's training rows split over several GPUs (`--shard-rows`,
//! data parallel): [`ShardedRegression`] sums each shard's rows where its data lives and adds
//! the shards' sums in shard order before computing the fitness, on the host loop
//! ([`crate::program::fitness::RegressionSums::merge`]) and in the device loop (each shard's GPU
//! sums, the first adds: [`crate::evolve::device::Shard`]), with the same bits. The CPU runs the
//! same shards one after another, so `--device cpu --gpus N --shard-rows` computes what `N`
//! GPUs compute.

use anyhow::{Result, bail, ensure};

use super::Regression;
use crate::backend::{Backend, Gpus};
use crate::data::Dataset;
use crate::evolve::device::{DeviceTask, Shard};
use crate::program::fitness::RegressionSums;
use crate::program::tree::Population;

/// Checks the settings of a run with `--shard-rows` that can be checked before a device is
/// opened: a fitted head is not split, and on the CPU the number of shards must be given.
pub fn check(islands: &crate::evolve::IslandConfig, device: crate::backend::DeviceChoice, outputs: usize) -> Result<()> {
    if !islands.shard_rows {
        return Ok(());
    }
    ensure!(outputs <= 1, "--shard-rows: a fitted head (--outputs {outputs}) is not split over GPUs yet; use --outputs 1");
    ensure!(
        !(device == crate::backend::DeviceChoice::Cpu && islands.gpus == Gpus::All),
        "--shard-rows on the CPU: give --gpus N, the number of row shards (the CPU then computes what N GPUs compute)"
    );
    Ok(())
}

/// Most row shards a run may have.
pub const MAX_SHARDS: usize = 1024;

/// How many shards `gpus` asks for: on a GPU the GPUs it names, all of which must exist (the
/// results depend on the count, so none is left out quietly); on the CPU the number it gives.
pub fn count(gpus: &Gpus, backend: &Backend) -> Result<usize> {
    let devices = backend.visible_gpus()?;
    let n = match (gpus, devices) {
        (Gpus::All, Some(d)) => d,
        (Gpus::All, None) => bail!("--shard-rows on the CPU: give --gpus N, the number of row shards (the CPU then computes what N GPUs compute)"),
        (Gpus::Count(n), _) => *n,
        (Gpus::List(l), _) => l.len(),
    };
    ensure!(n <= MAX_SHARDS, "--shard-rows splits the rows over at most {MAX_SHARDS} GPUs, got --gpus {gpus}");
    if let Some(d) = devices {
        let missing: Vec<usize> = match gpus {
            Gpus::List(l) => l.iter().copied().filter(|&o| o >= d).collect(),
            Gpus::Count(n) if *n > d => (d..*n).collect(),
            _ => Vec::new(),
        };
        ensure!(
            missing.is_empty(),
            "--gpus {gpus} with --shard-rows: the driver sees {d} GPU(s), so there is no GPU {} (the rows' shards, and so the results, depend on the GPU count)",
            missing.iter().map(|o| o.to_string()).collect::<Vec<_>>().join(", ")
        );
    }
    Ok(n)
}

/// The training rows in `n` contiguous shards, in order, as even as can be (the first
/// `n_rows % n` shards take one row more).
pub fn split_rows(rows: &Dataset, n: usize) -> Result<Vec<Dataset>> {
    ensure!(n >= 1, "--shard-rows needs at least one shard");
    ensure!(rows.n_rows >= n, "--shard-rows over {n} GPUs needs at least {n} training rows, got {}", rows.n_rows);
    let (base, extra) = (rows.n_rows / n, rows.n_rows % n);
    let mut start = 0;
    (0..n)
        .map(|s| {
            let len = base + usize::from(s < extra);
            let idx: Vec<usize> = (start..start + len).collect();
            start += len;
            rows.subset(&idx)
        })
        .collect()
}

/// Regression over row shards, each evaluated by its own backend ([`Regression`] per shard, in
/// row order).
pub struct ShardedRegression<'p> {
    parts: &'p [Regression<'p>],
    shards: Vec<Shard<'p>>,
}

impl<'p> ShardedRegression<'p> {
    /// The task over `parts` (at least one; one output each, no fitted head).
    pub fn new(parts: &'p [Regression<'p>]) -> Result<Self> {
        ensure!(!parts.is_empty(), "a sharded task needs at least one shard");
        ensure!(parts.iter().all(|p| p.outputs <= 1), "--shard-rows: a fitted head (--outputs K) is not split over GPUs yet");
        let shards = parts[1..]
            .iter()
            .filter_map(|r| r.backend.shard(&r.data))
            .collect();
        Ok(Self { parts, shards })
    }

    /// Every tree's sums over all shards: each shard's in turn, added in shard order.
    pub fn sums(&self, pop: &Population) -> Result<Vec<RegressionSums>> {
        let mut all = self.parts[0].backend.regression_sums(pop, &self.parts[0].data)?;
        for part in &self.parts[1..] {
            let more = part.backend.regression_sums(pop, &part.data)?;
            for (a, b) in all.iter_mut().zip(&more) {
                a.merge(b);
            }
        }
        Ok(all)
    }
}

impl crate::evolve::Fitness for ShardedRegression<'_> {
    fn evaluate(&self, pop: &Population) -> Result<Vec<f64>> {
        Ok(self.parts[0].fitness_of_sums(&self.sums(pop)?, pop))
    }

    fn device_task(&self) -> Option<DeviceTask<'_>> {
        // The device loop only when every shard's rows are on a GPU.
        if self.shards.len() + 1 != self.parts.len() {
            return None;
        }
        self.parts[0].device_task()?.with_shards(&self.shards)
    }
}
