//! `GROVE_LOOP_PROFILE=1`: the device loop waits for the device after every step and prints
//! where the time went (for tuning; the waits themselves cost a little).

use std::time::Instant;

use anyhow::{Result, anyhow};

use crate::backend::cuda::CudaEngine;

/// Seconds per step of the loop, when profiling.
pub(super) struct StageTimes {
    on: bool,
    last: Instant,
    total: Vec<(&'static str, f64)>,
}

impl StageTimes {
    pub(super) fn new(on: bool) -> Self {
        Self { on, last: Instant::now(), total: Vec::new() }
    }
    /// Whether it profiles (and so waits after every step).
    pub(super) fn on(&self) -> bool {
        self.on
    }
    /// Waits for the device and adds the time since the last mark to `name`.
    pub(super) fn mark(&mut self, e: &CudaEngine, name: &'static str) -> Result<()> {
        if !self.on {
            return Ok(());
        }
        e.stream().synchronize().map_err(|err| anyhow!("profiling the device loop: {err}"))?;
        let now = Instant::now();
        let dt = (now - self.last).as_secs_f64();
        self.last = now;
        match self.total.iter_mut().find(|(n, _)| *n == name) {
            Some((_, t)) => *t += dt,
            None => self.total.push((name, dt)),
        }
        Ok(())
    }
    pub(super) fn print(&self) {
        if self.on {
            let sum: f64 = self.total.iter().map(|(_, t)| t).sum();
            for (name, t) in &self.total {
                eprintln!("device loop: {name:22} {:9.3} ms ({:4.1} %)", t * 1e3, 100.0 * t / sum);
            }
        }
    }
}
