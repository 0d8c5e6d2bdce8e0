//! Host side of the control kernels (`grove_control_rollout`, `grove_control_reduce` in
//! `kernels/sim.cu`): a population of policies plays whole episodes in one launch, one thread
//! per (individual, episode), and the mean return per individual is reduced on the device.
//! The CPU reference is `program::policy` (`control_rollout`, `mean_returns`);
//! `tests/control_kernel_host.rs` runs the kernel's code on the host against it and
//! `tests/cuda_control.rs` on a GPU.

use std::mem::{offset_of, size_of};

use cudarc::driver::{DeviceRepr, LaunchConfig, PushKernelArg};
use rayon::prelude::*;

use super::error::{During, GpuError, Result};
use super::kernels::KernelSource;
use super::pack::stack_need;
use super::sim::sim_text;
use super::CudaEngine;
use crate::program::policy::{ControlRun, Episode, control_rollout, mean_returns};
use crate::program::tree::Population;
use crate::sim::Model;

/// The episode kernel.
pub const CONTROL_KERNEL: &str = "grove_control_rollout";
/// The per-individual mean kernel.
pub const CONTROL_REDUCE: &str = "grove_control_reduce";
/// Stack slots of the kernel's interpreter (`GROVE_CTRL_STACK`); deeper trees run on the CPU.
pub const CONTROL_STACK: usize = 64;

/// Launch parameters of both control kernels (`GroveControlParams` in sim.cu).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ControlParams {
    /// `P`: individuals.
    pub n_trees: u32,
    /// `K`: episodes per individual.
    pub episodes: u32,
    /// `T`: control steps per episode at most.
    pub steps: u32,
    /// Philox counter word 0 of the reset draws.
    pub generation: u32,
    /// Philox key.
    pub seed: u64,
    /// `L`: row stride of the population arrays.
    pub max_len: u32,
    /// [`FLAG_NOISE`] | [`FLAG_NO_TERMINATION`].
    pub flags: u32,
}
/// `GROVE_CTRL_NOISE`: reset noise (else the rest pose).
pub const FLAG_NOISE: u32 = 1;
/// `GROVE_CTRL_NO_TERMINATION`: play every episode for all T steps (benchmarks).
pub const FLAG_NO_TERMINATION: u32 = 2;
const _: () = assert!(size_of::<ControlParams>() == 32);
const _: () = assert!(offset_of!(ControlParams, n_trees) == 0);
const _: () = assert!(offset_of!(ControlParams, episodes) == 4);
const _: () = assert!(offset_of!(ControlParams, steps) == 8);
const _: () = assert!(offset_of!(ControlParams, generation) == 12);
const _: () = assert!(offset_of!(ControlParams, seed) == 16);
const _: () = assert!(offset_of!(ControlParams, max_len) == 24);
const _: () = assert!(offset_of!(ControlParams, flags) == 28);
// SAFETY: a plain `#[repr(C)]` struct of u32/u64 fields laid out as `GroveControlParams` (size
// and offsets asserted here and by static_assert in sim.cu).
unsafe impl DeviceRepr for ControlParams {}

/// `(name, offset)` of every `ControlParams` field, for the cross-check with sim.cu's asserts.
pub fn control_params_layout() -> Vec<(&'static str, usize)> {
    vec![
        ("n_trees", offset_of!(ControlParams, n_trees)),
        ("episodes", offset_of!(ControlParams, episodes)),
        ("steps", offset_of!(ControlParams, steps)),
        ("generation", offset_of!(ControlParams, generation)),
        ("seed", offset_of!(ControlParams, seed)),
        ("max_len", offset_of!(ControlParams, max_len)),
        ("flags", offset_of!(ControlParams, flags)),
    ]
}

/// The parameters of `run` over `pop` (checked: sizes fit u32).
pub fn control_params(pop: &Population, run: &ControlRun) -> Result<ControlParams> {
    let threads = pop.size().saturating_mul(run.episodes);
    if run.episodes == 0 || threads > u32::MAX as usize || run.steps > u32::MAX as usize {
        return Err(GpuError::Input(format!("{} individuals × {} episodes × {} steps is out of range", pop.size(), run.episodes, run.steps)));
    }
    Ok(ControlParams {
        n_trees: pop.size() as u32,
        episodes: run.episodes as u32,
        steps: run.steps as u32,
        generation: run.generation,
        seed: run.seed,
        max_len: pop.max_len as u32,
        flags: if run.noise { FLAG_NOISE } else { 0 } | if run.ignore_termination { FLAG_NO_TERMINATION } else { 0 },
    })
}

/// Why the kernel skips a tree: 0 it runs it; [`SKIP_INVALID`] the tree cannot run (empty, a
/// bad node, a variable past the observation, a slot past the actuators), so the individual
/// is invalid as on the CPU; [`SKIP_DEEP`] its stack need exceeds [`CONTROL_STACK`] and the
/// CPU reference plays it instead.
pub fn skip_mask(pop: &Population, m: &Model) -> Vec<u8> {
    (0..pop.size())
        .into_par_iter()
        .map(|i| {
            let t = pop.tree(i);
            if t.is_empty() {
                return SKIP_INVALID;
            }
            match stack_need(t, m.obs_size, m.nu()) {
                Err(_) => SKIP_INVALID,
                Ok(n) if n > CONTROL_STACK => SKIP_DEEP,
                Ok(_) => 0,
            }
        })
        .collect()
}
/// See [`skip_mask`].
pub const SKIP_INVALID: u8 = 1;
/// See [`skip_mask`].
pub const SKIP_DEEP: u8 = 2;

/// What a control launch returns.
#[derive(Clone, Debug, Default)]
pub struct ControlOutcome {
    /// Mean return per individual, NaN for an invalid one: (P,).
    pub means: Vec<f64>,
    /// Every episode, individual-major: (P·K,).
    pub episodes: Vec<Episode>,
}

impl ControlOutcome {
    /// Control steps taken in all episodes together.
    pub fn env_steps(&self) -> u64 {
        self.episodes.iter().map(|e| e.steps as u64).sum()
    }
}

impl CudaEngine {
    /// Plays every individual of `pop` as a policy in `m` for the episodes of `run` (one thread
    /// per episode, 64 threads per block), and the mean return per individual. Equal to
    /// `program::policy::{control_rollout, mean_returns}` up to the f32 simulator's rounding.
    pub fn control_returns(&self, pop: &Population, m: &Model, run: &ControlRun) -> Result<ControlOutcome> {
        self.control_returns_with(pop, m, run, 64)
    }

    /// [`CudaEngine::control_returns`] with `block` threads per block (for benchmarks).
    pub fn control_returns_with(&self, pop: &Population, m: &Model, run: &ControlRun, block: u32) -> Result<ControlOutcome> {
        if pop.n_outputs != m.nu() {
            return Err(GpuError::Input(format!("the policies have {} outputs but {} has {} actuators", pop.n_outputs, m.name, m.nu())));
        }
        let params = control_params(pop, run)?;
        let (p, k) = (pop.size(), run.episodes);
        if p == 0 {
            return Ok(ControlOutcome::default());
        }
        let skip = skip_mask(pop, m);
        let text = sim_text(m);
        let (module, _) = self.load(&KernelSource { file: "sim.cu", text: &text }, &[])?;
        let rollout = module.load_function(CONTROL_KERNEL).during(|| format!("finding {CONTROL_KERNEL} in sim.cu"))?;
        let reduce = module.load_function(CONTROL_REDUCE).during(|| format!("finding {CONTROL_REDUCE} in sim.cu"))?;
        let d_pop = self.upload_population(pop)?;
        let s = &self.stream;
        let d_skip = s.clone_htod(&skip).during(|| "uploading the skip mask".into())?;
        let n = p * k;
        let mut d_returns = s.alloc_zeros::<f64>(n).during(|| "allocating returns".into())?;
        let mut d_lengths = s.alloc_zeros::<u32>(n).during(|| "allocating lengths".into())?;
        let mut d_valid = s.alloc_zeros::<u32>(n).during(|| "allocating validity".into())?;
        let mut d_means = s.alloc_zeros::<f64>(p).during(|| "allocating means".into())?;
        let block = block.clamp(32, 1024);
        let lc = |threads: usize| LaunchConfig { grid_dim: ((threads as u32).div_ceil(block), 1, 1), block_dim: (block, 1, 1), shared_mem_bytes: 0 };
        let mut b = s.launch_builder(&rollout);
        b.arg(&params).arg(&d_pop.op).arg(&d_pop.value).arg(&d_pop.out).arg(&d_pop.len).arg(&d_skip);
        b.arg(&mut d_returns).arg(&mut d_lengths).arg(&mut d_valid);
        // SAFETY: matches `grove_control_rollout(GroveControlParams, const unsigned char* ops,
        // const float* values, const unsigned char* outs, const unsigned short* lens, const
        // unsigned char* skip, double* returns, unsigned* lengths, unsigned* valid)`; the
        // population holds P × L nodes (L = params.max_len) and P lengths, skip P entries, the
        // outputs P·K; threads g < P·K only. Every tree the kernel walks passed `stack_need`
        // (opcodes, arities, variables < obs_size, slots ≤ nu, stack ≤ GROVE_CTRL_STACK).
        unsafe { b.launch(lc(n)) }.during(|| format!("launching {CONTROL_KERNEL}"))?;
        let mut b = s.launch_builder(&reduce);
        b.arg(&params).arg(&d_returns).arg(&d_valid).arg(&mut d_means);
        // SAFETY: matches `grove_control_reduce(GroveControlParams, const double* returns, const
        // unsigned* valid, double* means)`: returns and valid hold P·K entries, means P.
        unsafe { b.launch(lc(p)) }.during(|| format!("launching {CONTROL_REDUCE}"))?;
        s.synchronize().during(|| format!("running {CONTROL_KERNEL}"))?;
        let mut means = s.clone_dtoh(&d_means).during(|| "reading means".into())?;
        let returns = s.clone_dtoh(&d_returns).during(|| "reading returns".into())?;
        let lengths = s.clone_dtoh(&d_lengths).during(|| "reading lengths".into())?;
        let valid = s.clone_dtoh(&d_valid).during(|| "reading validity".into())?;
        let mut episodes: Vec<Episode> =
            (0..n).map(|g| Episode { ret: returns[g], steps: lengths[g], valid: valid[g] != 0 }).collect();
        // Trees too deep for the kernel's stack: the CPU reference plays them.
        let deep: Vec<usize> = (0..p).filter(|&i| skip[i] == SKIP_DEEP).collect();
        if !deep.is_empty() {
            let mut sub = Population::new(deep.len(), pop.max_len, pop.n_outputs);
            for (r, &i) in deep.iter().enumerate() {
                sub.copy_row(r, pop, i);
            }
            let eps = control_rollout(&sub, m, run);
            let sub_means = mean_returns(&eps, k);
            for (r, &i) in deep.iter().enumerate() {
                means[i] = sub_means[r];
                episodes[i * k..(i + 1) * k].copy_from_slice(&eps[r * k..(r + 1) * k]);
            }
        }
        Ok(ControlOutcome { means, episodes })
    }
}
