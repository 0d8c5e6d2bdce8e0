//! Host side of the control kernels (`grove_control_rollout`, `grove_control_reduce` in
//! `kernels/sim.cu`): a population of policies plays whole episodes in one launch, the
//! (individual, episode) pairs a queue that persistent threads take from as their episodes end
//! (as many threads as stay resident on the device), and the mean return per individual is
//! reduced on the device.
//! The CPU reference is `backend::cpu::control` (`control_rollout`, `mean_returns`);
//! `tests/control_kernel_host.rs` runs the kernel's code on the host against it and
//! `tests/cuda_control.rs` on a GPU.
//!
//! The device loop's control fitness step lives here too, as it plays the same roll-out:
//! [`CudaEngine::control_classify`] and [`CudaEngine::control_fitness`] launch
//! `kernels/generation.cu`'s `grove_control_skip` and `grove_control_fitness` around it. The
//! open-loop roll-out of `sim.cu` is [`super::sim`].

use cudarc::driver::{CudaFunction, CudaSlice, CudaView, LaunchConfig, PushKernelArg};
use rayon::prelude::*;

use super::error::{During, GpuError, Result};
use super::generation::{CONTROL_DEEP_AT, ENV_STEPS_AT, Mailbox};
use super::memory::grow_device;
use super::kernels::{COMPILE_TREES, CONTROL_FITNESS, CONTROL_SKIP, GENERATION, KernelSource};
use super::params::{CompileParams, ControlClassParams, ControlParams, FLAG_NOISE, FLAG_NO_TERMINATION, GenParams};
use super::select::DeviceFitness;
use super::population::DevicePopulation;
use super::pack::stack_need;
use super::sim::sim_text;
use super::CudaEngine;
use crate::backend::cpu::control::{ControlRun, Episode, control_rollout, control_rollout_observed, mean_returns};
use crate::sim::stats::{InputScale, Learnt, ObsStats};
use crate::program::tree::Population;
use crate::sim::Model;

/// The episode kernel.
pub const CONTROL_KERNEL: &str = "grove_control_rollout";
/// The per-individual mean kernel.
pub const CONTROL_REDUCE: &str = "grove_control_reduce";
/// Stack slots of the kernel's interpreter (`GROVE_CTRL_STACK`); deeper trees run on the CPU.
pub const CONTROL_STACK: usize = 64;
/// Threads per block of the roll-out (`GROVE_CTRL_BLOCK`, also its launch bound).
pub const CONTROL_BLOCK: u32 = 64;

/// The lanes per episode the roll-out kernel can be built with (`GROVE_CTRL_LANES`): powers
/// of two up to a warp.
pub const EPISODE_LANES: [u32; 6] = [1, 2, 4, 8, 16, 32];

/// Shared-memory words one group of lanes needs for `m` (`GROVE_LANE_WORDS` in sim.cu): the
/// constraint rows' (A S·S, Y S·NV, b and A's diagonal S each, S = `m`'s constraint slots, at
/// least 1). Each lane computes the smooth dynamics itself.
pub fn lane_words(m: &Model) -> usize {
    let (s, nv) = (m.n_slots().max(1), m.nv());
    s * s + s * nv + 2 * s
}

/// The defines of the roll-out module with `lanes` lanes an episode: none for one lane.
fn lane_defines(lanes: u32) -> Vec<(&'static str, u32)> {
    if lanes > 1 { vec![("GROVE_CTRL_LANES", lanes)] } else { Vec::new() }
}

/// Dynamic shared memory of one roll-out block with `lanes` lanes an episode of `m`, bytes (0
/// for one lane: its rows stay in local memory).
pub fn block_shared_bytes(m: &Model, lanes: u32) -> usize {
    if lanes > 1 { (CONTROL_BLOCK / lanes) as usize * lane_words(m) * 4 } else { 0 }
}

/// The lanes an episode when the engine is not told otherwise ([`CudaEngine::set_episode_lanes`]):
/// the widest of [`EPISODE_LANES`] with which `episodes` episodes take at most `1/share` of the
/// `resident` threads the one-lane kernel keeps on the device; 1 when there are more. A group
/// repeats the serial parts of a step (kinematics, M's factor, the pivoting solve, the policy),
/// so lanes pay only where one lane an episode would leave the device mostly idle. With only the
/// constraint rows shared out, on an H200 (docs/benchmarks.md, issue 29) 256 episodes played
/// 1.75-2.1× faster with 32 lanes, 2048 episodes 1.3-1.5× faster with 4 to 8, and 20,000
/// episodes fastest with one, which a share of 4 picked. Sharing out the smooth dynamics too
/// (issue 57) was no faster once each lane's own copy loops over paths only, and was removed
/// (2026-12-07); the share stays the measured [`LANES_SHARE`] (`GROVE_LANES_SHARE` sets it,
/// [`CudaEngine::lanes_share`]; `tools/control/gpu_spread.sh bench`).
pub fn spare_lanes(episodes: usize, resident: u64, share: u64) -> u32 {
    EPISODE_LANES.iter().rev().copied().find(|&g| (episodes as u64).saturating_mul(share.saturating_mul(g as u64)) <= resident).unwrap_or(1)
}

/// The default of [`spare_lanes`]' `share`: groups of lanes may fill a quarter of the resident
/// threads (measured with only the constraint rows shared out, docs/benchmarks.md issue 29).
pub const LANES_SHARE: u64 = 4;

/// How many threads a roll-out launch starts; every one takes episodes from the kernel's queue
/// until it is empty, so any count plays every episode, with the same bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ControlGrid {
    /// As many as stay resident: the device's SMs × the blocks of [`CONTROL_BLOCK`] threads
    /// that fit on one (the occupancy calculator's), fewer when there are fewer episodes. A
    /// thread whose episode ends takes the next, so no lane idles while episodes wait.
    #[default]
    Resident,
    /// One thread per episode, so no thread takes a second: the launch of the kernel before
    /// issue 15 (which had no queue), for benchmarks that run it through `GROVE_KERNEL_DIR`.
    PerEpisode,
    /// About this many threads (whole blocks, at least one): tests make threads refill.
    Threads(u32),
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
    /// The statistics of the observations each episode's policy read, individual-major (P·K,),
    /// when asked for ([`CudaEngine::control_returns_observed`]); else empty.
    pub observed: Vec<ObsStats>,
    /// The lanes that played each episode (`GROVE_CTRL_LANES`).
    pub lanes: u32,
}

impl ControlOutcome {
    /// Control steps taken in all episodes together.
    pub fn env_steps(&self) -> u64 {
        self.episodes.iter().map(|e| e.steps as u64).sum()
    }
}

impl CudaEngine {
    /// Plays every individual of `pop` as a policy in `m` for the episodes of `run` (persistent
    /// threads taking episodes from a queue, [`ControlGrid::Resident`]), and the mean return
    /// per individual. Equal to `backend::cpu::control::{control_rollout, mean_returns}` bit for bit.
    pub fn control_returns(&self, pop: &Population, m: &Model, run: &ControlRun) -> Result<ControlOutcome> {
        self.control_returns_with(pop, m, run, ControlGrid::Resident)
    }

    /// [`CudaEngine::control_returns`] with `grid` threads (for tests and benchmarks; the
    /// results do not depend on it).
    pub fn control_returns_with(&self, pop: &Population, m: &Model, run: &ControlRun, grid: ControlGrid) -> Result<ControlOutcome> {
        self.play(pop, m, run, grid, false, None)
    }

    /// [`CudaEngine::control_returns`] with the statistics of every episode's observations
    /// ([`ControlOutcome::observed`]), as `backend::cpu::control::control_rollout_observed`
    /// gives them, bit for bit; the policies read their observations through `scale` when
    /// given.
    pub fn control_returns_observed(&self, pop: &Population, m: &Model, run: &ControlRun, grid: ControlGrid, scale: Option<&InputScale>) -> Result<ControlOutcome> {
        self.play(pop, m, run, grid, true, scale)
    }

    fn play(&self, pop: &Population, m: &Model, run: &ControlRun, grid: ControlGrid, observe: bool, scale: Option<&InputScale>) -> Result<ControlOutcome> {
        if pop.n_outputs != m.nu() {
            return Err(GpuError::Input(format!("the policies have {} outputs but {} has {} actuators", pop.n_outputs, m.name, m.nu())));
        }
        let params = control_params(pop, run)?;
        let (p, k) = (pop.size(), run.episodes);
        if p == 0 {
            return Ok(ControlOutcome::default());
        }
        let skip = skip_mask(pop, m);
        let kernels = self.control_kernels(m, p * k)?;
        let d_pop = self.upload_population(pop)?;
        let mut programs = Programs::default();
        let c = self.compile_policies(&kernels.compile, &d_pop, &mut programs)?;
        let s = &self.stream;
        let d_skip = s.clone_htod(&skip).during(|| "uploading the skip mask".into())?;
        let n = p * k;
        let mut d_returns = s.alloc_zeros::<f64>(n).during(|| "allocating returns".into())?;
        let mut d_lengths = s.alloc_zeros::<u32>(n).during(|| "allocating lengths".into())?;
        let mut d_valid = s.alloc_zeros::<u32>(n).during(|| "allocating validity".into())?;
        let mut d_means = s.alloc_zeros::<f64>(p).during(|| "allocating means".into())?;
        let mut d_queue = s.alloc_zeros::<u32>(1).during(|| "allocating the episode queue".into())?;
        let row = 1 + 2 * m.obs_size;
        let mut d_observed = if observe { Some(s.alloc_zeros::<f64>(n * row).during(|| "allocating the observation sums".into())?) } else { None };
        let d_scale = scale.map(|sc| self.upload_scale(sc, m)).transpose()?;
        let mut out = RolloutOut {
            returns: &mut d_returns,
            lengths: &mut d_lengths,
            valid: &mut d_valid,
            queue: &mut d_queue,
            observed: d_observed.as_mut(),
            scale: d_scale.as_ref(),
        };
        self.launch_rollout(&kernels, &params, &c, &d_skip, &mut out, grid)?;
        let lc = |threads: usize| LaunchConfig { grid_dim: ((threads as u32).div_ceil(64), 1, 1), block_dim: (64, 1, 1), shared_mem_bytes: 0 };
        let mut b = s.launch_builder(&kernels.reduce);
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
        let mut observed = match &d_observed {
            Some(d) => s.clone_dtoh(d).during(|| "reading the observation sums".into())?.chunks(row).map(ObsStats::from_item).collect(),
            None => Vec::new(),
        };
        // Trees too deep for the kernel's stack: the CPU reference plays them.
        let deep: Vec<usize> = (0..p).filter(|&i| skip[i] == SKIP_DEEP).collect();
        if !deep.is_empty() {
            let mut sub = Population::new(deep.len(), pop.max_len, pop.n_outputs);
            for (r, &i) in deep.iter().enumerate() {
                sub.copy_row(r, pop, i);
            }
            let (eps, seen) = if observe { control_rollout_observed(&sub, m, run, scale) } else { (control_rollout(&sub, m, run), Vec::new()) };
            let sub_means = mean_returns(&eps, k);
            for (r, &i) in deep.iter().enumerate() {
                means[i] = sub_means[r];
                episodes[i * k..(i + 1) * k].copy_from_slice(&eps[r * k..(r + 1) * k]);
                if observe {
                    observed[i * k..(i + 1) * k].clone_from_slice(&seen[r * k..(r + 1) * k]);
                }
            }
        }
        Ok(ControlOutcome { means, episodes, observed, lanes: kernels.lanes })
    }
}

/// A population's policies compiled to linear programs (`grove_compile_trees` in
/// `kernels/interp.cuh`, twin `backend::cpu::interp::compile_trees`), what the roll-out kernel runs:
/// `prog`, `[P × L]` instructions of 16 bytes (4 words each, row `t` at `t × L`), and `n_instr`,
/// `[P]` instruction counts. Grown when a population needs more, never shrunk.
#[derive(Default)]
pub struct Programs {
    prog: Option<CudaSlice<u32>>,
    n_instr: Option<CudaSlice<u16>>,
}

/// The control kernels of one model's module ([`CudaEngine::control_kernels`]).
struct ControlKernels {
    rollout: CudaFunction,
    reduce: CudaFunction,
    compile: CudaFunction,
    /// Lanes an episode the module was built with (`GROVE_CTRL_LANES`).
    lanes: u32,
    /// Dynamic shared memory of a roll-out block, bytes.
    shared: u32,
    /// Roll-out blocks that stay resident on an SM (the occupancy calculator's, at least 1).
    per_sm: u32,
}

/// The compiled programs of one launch: views of [`Programs`].
struct Compiled<'a> {
    prog: CudaView<'a, u32>,
    n_instr: CudaView<'a, u16>,
}

/// The roll-out's outputs: returns, lengths and validity `[P·K]`, the queue's counter (one
/// word, zeroed by [`CudaEngine::launch_rollout`] before the launch), and, when asked for, the
/// observations' statistics `[P·K × (1 + 2 n_obs)]`.
struct RolloutOut<'a> {
    returns: &'a mut CudaSlice<f64>,
    lengths: &'a mut CudaSlice<u32>,
    valid: &'a mut CudaSlice<u32>,
    queue: &'a mut CudaSlice<u32>,
    observed: Option<&'a mut CudaSlice<f64>>,
    /// The normaliser the policies read through (`[2 n_obs]`: means, then scales), or none.
    scale: Option<&'a CudaSlice<f32>>,
}

impl CudaEngine {
    /// The lanes an episode this engine was told to use: what [`Self::set_episode_lanes`] set,
    /// else `GROVE_EPISODE_LANES` from the environment (for benchmarks of whole runs; an error
    /// unless one of [`EPISODE_LANES`]), else `None`: [`spare_lanes`] decides per launch.
    pub fn episode_lanes(&self) -> Result<Option<u32>> {
        match self.episode_lanes.load(std::sync::atomic::Ordering::Relaxed) {
            0 => match std::env::var("GROVE_EPISODE_LANES") {
                Ok(v) => v
                    .trim()
                    .parse()
                    .ok()
                    .filter(|g| EPISODE_LANES.contains(g))
                    .map(Some)
                    .ok_or_else(|| GpuError::Input(format!("GROVE_EPISODE_LANES={v}: lanes an episode are one of {EPISODE_LANES:?}"))),
                Err(_) => Ok(None),
            },
            g => Ok(Some(g)),
        }
    }

    /// The share of the resident threads [`spare_lanes`] lets groups of lanes fill (1/share):
    /// `GROVE_LANES_SHARE` from the environment (a positive integer; for benchmarks that pick
    /// the default), else [`LANES_SHARE`].
    pub fn lanes_share(&self) -> Result<u64> {
        match std::env::var("GROVE_LANES_SHARE") {
            Ok(v) => v
                .trim()
                .parse()
                .ok()
                .filter(|&s: &u64| s > 0)
                .ok_or_else(|| GpuError::Input(format!("GROVE_LANES_SHARE={v}: the groups' share of the resident threads is 1/N for a positive integer N"))),
            Err(_) => Ok(LANES_SHARE),
        }
    }

    /// Plays each episode of later roll-outs with `lanes` lanes (one of [`EPISODE_LANES`]), or
    /// as [`spare_lanes`] decides for `None`. The bits of every episode are the same whichever
    /// it is; only the speed differs.
    pub fn set_episode_lanes(&self, lanes: Option<u32>) -> Result<()> {
        match lanes {
            Some(g) if !EPISODE_LANES.contains(&g) => Err(GpuError::Input(format!("{g} lanes an episode: the kernel takes one of {EPISODE_LANES:?}"))),
            _ => {
                self.episode_lanes.store(lanes.unwrap_or(0), std::sync::atomic::Ordering::Relaxed);
                Ok(())
            }
        }
    }

    /// The roll-out module of `m` for `n` episodes, built for the lanes an episode
    /// [`Self::episode_lanes`] gives or else [`spare_lanes`] picks (the widest whose block fits
    /// the GPU's shared memory): its kernels and the dynamic shared memory a block needs.
    /// Picked by [`spare_lanes`], a width whose module NVRTC would have to compile first is
    /// compiled on another thread ([`CudaEngine::module_ready`]) and the one-lane module plays
    /// these episodes meanwhile: the bits are the same at every width, and a run's first
    /// launches at a new batch size (its validation or test episodes) need not wait seconds for
    /// NVRTC. A width that was asked for is compiled and used.
    fn control_kernels(&self, m: &Model, n: usize) -> Result<ControlKernels> {
        let most = self.shared_per_block as usize;
        let fits = |g: u32| block_shared_bytes(m, g) <= most;
        match self.episode_lanes()? {
            Some(g) if !fits(g) => Err(GpuError::Input(format!(
                "{g} lanes an episode of {}: a block of {CONTROL_BLOCK} threads would need {} bytes of shared memory, more than this GPU's {most}",
                m.name,
                block_shared_bytes(m, g)
            ))),
            Some(g) => self.control_module(m, &sim_text(m), g),
            None => {
                let text = sim_text(m);
                let one = self.control_module(m, &text, 1)?;
                let resident = one.per_sm as u64 * self.sm_count.max(1) as u64 * CONTROL_BLOCK as u64;
                let mut g = spare_lanes(n, resident, self.lanes_share()?);
                while !fits(g) {
                    g /= 2;
                }
                if g == 1 {
                    return Ok(one);
                }
                match self.module_ready(&KernelSource { file: "sim.cu", text: &text }, &lane_defines(g))? {
                    Some(_) => self.control_module(m, &text, g),
                    None => Ok(one),
                }
            }
        }
    }

    /// `m`'s roll-out module built with `lanes` lanes an episode (`GROVE_CTRL_LANES`), from
    /// `text`, `m`'s [`sim_text`].
    fn control_module(&self, m: &Model, text: &str, lanes: u32) -> Result<ControlKernels> {
        let (module, _) = self.load(&KernelSource { file: "sim.cu", text }, &lane_defines(lanes))?;
        let find = |name: &str| module.load_function(name).during(|| format!("finding {name} in sim.cu"));
        let rollout = find(CONTROL_KERNEL)?;
        let shared = block_shared_bytes(m, lanes);
        if shared > 48 << 10 {
            let attr = cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
            rollout
                .set_attribute(attr, shared as i32)
                .during(|| format!("asking for {shared} bytes of shared memory a block of {CONTROL_KERNEL} ({lanes} lanes an episode of {})", m.name))?;
        }
        let per_sm = rollout
            .occupancy_max_active_blocks_per_multiprocessor(CONTROL_BLOCK, shared, None)
            .during(|| format!("asking how many blocks of {CONTROL_KERNEL} fit on an SM"))?
            .max(1);
        Ok(ControlKernels { rollout, reduce: find(CONTROL_REDUCE)?, compile: find(COMPILE_TREES)?, lanes, shared: shared as u32, per_sm })
    }

    /// Blocks of [`CONTROL_BLOCK`] threads for a roll-out of `n` episodes with `k`'s roll-out
    /// (its registers and shared memory decide how many blocks stay resident).
    fn rollout_blocks(&self, k: &ControlKernels, n: usize, grid: ControlGrid) -> u32 {
        let need = (n as u64 * k.lanes as u64).div_ceil(CONTROL_BLOCK as u64).max(1);
        let blocks = match grid {
            ControlGrid::Resident => k.per_sm as u64 * self.sm_count.max(1) as u64,
            ControlGrid::PerEpisode => need,
            ControlGrid::Threads(t) => (t as u64).div_ceil(CONTROL_BLOCK as u64).max(1),
        };
        blocks.min(need) as u32
    }

    /// Queues `grove_control_rollout` (`k`'s) over `params`' P·K episodes with the compiled
    /// programs `c` and skip classes `skip` (`[P]`), into `out`, zeroing the queue first.
    fn launch_rollout(&self, k: &ControlKernels, params: &ControlParams, c: &Compiled<'_>, skip: &CudaSlice<u8>, out: &mut RolloutOut<'_>, grid: ControlGrid) -> Result<()> {
        let n = params.n_trees as usize * params.episodes as usize;
        let blocks = self.rollout_blocks(k, n, grid);
        // A group's last take may return up to groups + n: it must fit the kernel's u32 sums.
        if n as u64 + blocks as u64 * CONTROL_BLOCK as u64 > u32::MAX as u64 {
            return Err(GpuError::Input(format!("{n} episodes are too many for one launch")));
        }
        self.stream.memset_zeros(&mut *out.queue).during(|| "clearing the episode queue".into())?;
        let mut b = self.stream.launch_builder(&k.rollout);
        b.arg(params).arg(&c.prog).arg(&c.n_instr).arg(skip);
        b.arg(&mut *out.returns).arg(&mut *out.lengths).arg(&mut *out.valid).arg(&mut *out.queue);
        let null = 0u64;
        match out.observed.as_mut() {
            Some(o) => b.arg(&mut **o),
            None => b.arg(&null),
        };
        match out.scale {
            Some(sc) => b.arg(sc),
            None => b.arg(&null),
        };
        let lc = LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (CONTROL_BLOCK, 1, 1), shared_mem_bytes: k.shared };
        // SAFETY: matches `grove_control_rollout(GroveControlParams, const GroveInstr* prog,
        // const unsigned short* n_instr, const unsigned char* skip, double* returns, unsigned*
        // lengths, unsigned* valid, unsigned* queue, double* observed, const float* scale)` with blocks of
        // GROVE_CTRL_BLOCK threads (its launch bound): prog holds P × L instructions (L = params.max_len) and n_instr P
        // counts (compiled for every row), skip P classes (every tree of class 0 passed
        // `stack_need` or its device twin grove_control_skip: opcodes, arities, variables <
        // obs_size, slots ≤ nu, stack ≤ GROVE_CTRL_STACK), returns, lengths and valid P·K
        // entries, queue one word, zero, observed null or P·K rows of 1 + 2·obs_size (the
        // module's GROVE_NOBS), scale null or 2·obs_size floats ([`Self::upload_scale`]);
        // built with k.lanes > 1 lanes an episode, CONTROL_BLOCK / k.lanes groups of
        // GROVE_LANE_WORDS floats (lane_words) of dynamic shared memory a block, k.shared bytes.
        // Threads write only items g < P·K, each taken once (the queue's
        // atomic; n + threads fits u32, checked above). (A kernel staged through
        // GROVE_KERNEL_DIR from before the queue takes the first seven arguments only: the
        // driver reads as many as the kernel declares; it needs `ControlGrid::PerEpisode`.)
        unsafe { b.launch(lc) }.during(|| format!("launching {CONTROL_KERNEL}"))?;
        Ok(())
    }

    /// `scale` as the roll-out kernel reads it (`[2 n_obs]` f32); an error when it does not have
    /// `m`'s observation count.
    fn upload_scale(&self, scale: &InputScale, m: &Model) -> Result<CudaSlice<f32>> {
        if scale.mean.len() != m.obs_size || scale.scale.len() != m.obs_size {
            return Err(GpuError::Input(format!("a normaliser of {} components for {}'s {} observations", scale.mean.len(), m.name, m.obs_size)));
        }
        self.stream.clone_htod(&scale.words()).during(|| "uploading the normaliser".into())
    }

    /// Queues the compilation of every tree of `pop` into `progs` (grown to `P × L`
    /// instructions) with `compile`, the sim module's `grove_compile_trees`.
    fn compile_policies<'p>(&self, compile: &CudaFunction, pop: &DevicePopulation, progs: &'p mut Programs) -> Result<Compiled<'p>> {
        let (p, max_len) = (pop.size(), pop.max_len());
        grow_device(&self.stream, &mut progs.prog, p * max_len * 4, "allocating the compiled policies")?;
        grow_device(&self.stream, &mut progs.n_instr, p, "allocating the policies' lengths")?;
        let (Some(prog), Some(n_instr)) = (progs.prog.as_mut(), progs.n_instr.as_mut()) else {
            unreachable!("grow_device filled both");
        };
        if p > 0 {
            let params = CompileParams { n_trees: p as u32, max_len: max_len as u32 };
            let no_ids = 0u64;
            let mut b = self.stream.launch_builder(compile);
            b.arg(&params).arg(&no_ids).arg(&pop.op).arg(&pop.value).arg(&pop.size).arg(&pop.out).arg(&pop.len);
            b.arg(&mut *prog).arg(&mut *n_instr);
            let lc = LaunchConfig { grid_dim: ((p as u32).div_ceil(128), 1, 1), block_dim: (128, 1, 1), shared_mem_bytes: 0 };
            // SAFETY: matches `grove_compile_trees(GroveCompileParams, const unsigned* tree_ids
            // (null: row g for thread g), const unsigned char* ops, const float* values, const
            // unsigned short* sizes, const unsigned char* outs, const unsigned short* lens,
            // GroveInstr* prog, unsigned short* n_instr)`: the population holds P × L nodes and
            // P lengths (each ≤ L; sizes kept by `upload_population`'s validation and the
            // device's operators), prog P × L instructions of 4 words and n_instr P entries
            // (grown above); threads g < P. The kernel reads only each tree's `len` nodes
            // (child positions clamped into them) and writes at most `len` instructions of its
            // own row.
            unsafe { b.launch(lc) }.during(|| format!("launching {COMPILE_TREES}"))?;
        }
        Ok(Compiled { prog: prog.slice(..), n_instr: n_instr.slice(..) })
    }
}

/// The device loop's control fitness step: buffers for `P` individuals of `K` episodes (skip
/// classes `[P]`, returns, lengths and validity `[P·K]`, means `[P]`, the roll-out's queue
/// counter).
pub struct ControlScratch {
    skip: CudaSlice<u8>,
    returns: CudaSlice<f64>,
    lengths: CudaSlice<u32>,
    valid: CudaSlice<u32>,
    means: CudaSlice<f64>,
    queue: CudaSlice<u32>,
    programs: Programs,
    p: usize,
    episodes: usize,
    /// A normalising run's observation sums `[P·K × (1 + 2 n_obs)]` and normaliser `[2 n_obs]`
    /// ([`CudaEngine::alloc_control_scratch`] with `n_obs`).
    learning: Option<(CudaSlice<f64>, CudaSlice<f32>, usize)>,
}

/// What the host did for one generation's control fitness on the device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ControlHostWork {
    /// Trees too deep for the roll-out kernel, played by the CPU reference.
    pub deep_trees: usize,
    /// Env steps of their episodes (the device's are counted in the mailbox).
    pub deep_steps: u64,
}

impl CudaEngine {
    /// Scratch for the control fitness of `p` individuals of `episodes` roll-outs each, and,
    /// with `n_obs` (a run that learns a normaliser, [`Learnt`]), for their observations' sums
    /// and the normaliser over `n_obs` components.
    pub fn alloc_control_scratch(&self, p: usize, episodes: usize, n_obs: Option<usize>) -> Result<ControlScratch> {
        let n = p.checked_mul(episodes).filter(|&n| n > 0 && n <= u32::MAX as usize);
        let n = n.ok_or_else(|| GpuError::Input(format!("{p} individuals × {episodes} episodes is out of range")))?;
        let s = &self.stream;
        Ok(ControlScratch {
            skip: s.alloc_zeros::<u8>(p).during(|| "allocating skip classes".into())?,
            returns: s.alloc_zeros::<f64>(n).during(|| "allocating returns".into())?,
            lengths: s.alloc_zeros::<u32>(n).during(|| "allocating lengths".into())?,
            valid: s.alloc_zeros::<u32>(n).during(|| "allocating validity".into())?,
            means: s.alloc_zeros::<f64>(p).during(|| "allocating means".into())?,
            queue: s.alloc_zeros::<u32>(1).during(|| "allocating the episode queue".into())?,
            programs: Programs::default(),
            p,
            episodes,
            learning: match n_obs {
                Some(d) => Some((
                    s.alloc_zeros::<f64>(n.checked_mul(1 + 2 * d).ok_or_else(|| GpuError::Input(format!("{n} episodes × {d} observations is out of range")))?)
                        .during(|| "allocating the observation sums".into())?,
                    s.alloc_zeros::<f32>(2 * d).during(|| "allocating the normaliser".into())?,
                    d,
                )),
                None => None,
            },
        })
    }

    /// Queues `grove_control_skip` over `pop` (the device twin of [`skip_mask`]) into `s`; the
    /// number of trees the CPU must play goes to the mailbox (read it with the generation's
    /// mailbox, [`super::MailboxRead::control_deep`]).
    pub fn control_classify(&self, pop: &DevicePopulation, m: &Model, s: &mut ControlScratch, mail: &mut Mailbox) -> Result<()> {
        let p = pop.size();
        if s.p != p || pop.engine != self.id || pop.n_outputs() != m.nu() {
            return Err(GpuError::Input(format!("classifying {p} policies of {} outputs with scratch for {} ({} actuators)", pop.n_outputs(), s.p, m.nu())));
        }
        let mut deep = mail.buf.slice_mut(CONTROL_DEEP_AT..CONTROL_DEEP_AT + 1);
        self.stream.memset_zeros(&mut deep).during(|| "clearing the deep-tree count".into())?;
        let params = ControlClassParams {
            n: p as u32,
            max_len: pop.max_len() as u32,
            n_vars: m.obs_size as u32,
            n_slots: m.nu() as u32,
            stack: CONTROL_STACK as u32,
            pad: 0,
        };
        let f = self.function(&GENERATION, &[], CONTROL_SKIP)?;
        let mut b = self.stream.launch_builder(&f);
        b.arg(&params).arg(&pop.op).arg(&pop.value).arg(&pop.out).arg(&pop.len).arg(&mut s.skip).arg(&mut deep);
        let lc = LaunchConfig { grid_dim: ((p as u32).div_ceil(256), 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: matches `grove_control_skip(GroveControlClassParams, const unsigned char* ops,
        // const float* values, const unsigned char* outs, const unsigned short* lens, unsigned
        // char* skip, unsigned* n_deep)`: the population holds P × L nodes and P lengths (a
        // thread reads at most min(len, L) nodes of its row), skip P entries, n_deep one word.
        unsafe { b.launch(lc) }.during(|| format!("launching {CONTROL_SKIP}"))?;
        Ok(())
    }

    /// Queues the control task's fitness of `pop` into `fit`: every policy plays `run`'s
    /// episodes on the device (classes from [`Self::control_classify`]), and the `n_deep`
    /// trees too deep for the kernel (the count the mailbox gave) are copied back and played by
    /// the CPU reference, their means patched in, as [`CudaEngine::control_returns`] does;
    /// then fitness `−mean + parsimony × len` (`+inf` when empty or invalid), and the env steps
    /// played on the device into the mailbox ([`super::MailboxRead::env_steps`]). With `learnt`
    /// (scratch made for it) the policies read their observations through its next normaliser
    /// ([`Learnt::next`]) and it learns what they saw ([`Learnt::learn`]), as the host loop's
    /// roll-outs do: the sums are read back before this returns.
    #[allow(clippy::too_many_arguments)]
    pub fn control_fitness(
        &self,
        pop: &DevicePopulation,
        m: &Model,
        run: &ControlRun,
        parsimony: f64,
        n_deep: usize,
        s: &mut ControlScratch,
        fit: &mut DeviceFitness,
        mail: &mut Mailbox,
        mut learnt: Option<&mut Learnt>,
    ) -> Result<ControlHostWork> {
        let (p, k) = (pop.size(), run.episodes);
        if s.p != p || s.episodes != k || fit.n != p || fit.engine != self.id {
            return Err(GpuError::Input(format!("control fitness of {p} × {k} with scratch for {} × {}", s.p, s.episodes)));
        }
        let scale = learnt.as_deref_mut().map(Learnt::next);
        match (&scale, s.learning.as_mut()) {
            (Some(sc), Some((_, d_scale, d))) if *d == m.obs_size && sc.mean.len() == *d => {
                self.stream.memcpy_htod(&sc.words(), d_scale).during(|| "uploading the normaliser".into())?
            }
            (None, _) => {}
            _ => return Err(GpuError::Input(format!("a normaliser for {}'s {} observations without scratch for it", m.name, m.obs_size))),
        }
        let params = ControlParams {
            n_trees: p as u32,
            episodes: k as u32,
            steps: u32::try_from(run.steps).map_err(|_| GpuError::Input(format!("{} steps per episode", run.steps)))?,
            generation: run.generation,
            seed: run.seed,
            max_len: pop.max_len() as u32,
            flags: if run.noise { FLAG_NOISE } else { 0 } | if run.ignore_termination { FLAG_NO_TERMINATION } else { 0 },
        };
        let kernels = self.control_kernels(m, p * k)?;
        let c = self.compile_policies(&kernels.compile, pop, &mut s.programs)?;
        let st = &self.stream;
        let lc = |threads: usize| LaunchConfig { grid_dim: ((threads as u32).div_ceil(64), 1, 1), block_dim: (64, 1, 1), shared_mem_bytes: 0 };
        let (observed, d_scale) = match (&scale, s.learning.as_mut()) {
            (Some(_), Some((o, sc, _))) => (Some(o), Some(&*sc)),
            _ => (None, None),
        };
        let mut out = RolloutOut { returns: &mut s.returns, lengths: &mut s.lengths, valid: &mut s.valid, queue: &mut s.queue, observed, scale: d_scale };
        self.launch_rollout(&kernels, &params, &c, &s.skip, &mut out, ControlGrid::Resident)?;
        let mut b = st.launch_builder(&kernels.reduce);
        b.arg(&params).arg(&s.returns).arg(&s.valid).arg(&mut s.means);
        // SAFETY: matches `grove_control_reduce(GroveControlParams, const double* returns, const
        // unsigned* valid, double* means)`: returns and valid hold P·K entries, means P.
        unsafe { b.launch(lc(p)) }.during(|| format!("launching {CONTROL_REDUCE}"))?;
        let mut work = ControlHostWork::default();
        let mut deep_seen: Vec<(usize, Vec<ObsStats>)> = Vec::new();
        if n_deep > 0 {
            // Rare: trees deeper than the kernel's stack. The CPU plays them, as the host loop's
            // roll-outs do, and their means replace the kernel's (which skipped them).
            let skip = st.clone_dtoh(&s.skip).during(|| "reading skip classes".into())?;
            let deep: Vec<u32> = (0..p as u32).filter(|&i| skip[i as usize] == SKIP_DEEP).collect();
            let trees = self.download_trees(pop, &deep)?;
            let mut sub = Population::new(deep.len(), pop.max_len(), pop.n_outputs());
            for (r, t) in trees.iter().enumerate() {
                sub.set_tree(r, t).map_err(GpuError::Input)?;
            }
            let (eps, seen) = match &scale {
                Some(sc) => control_rollout_observed(&sub, m, run, Some(sc)),
                None => (control_rollout(&sub, m, run), Vec::new()),
            };
            deep_seen = deep.iter().map(|&i| i as usize).zip(seen.chunks(k)).map(|(i, c)| (i, c.to_vec())).collect();
            let sub_means = mean_returns(&eps, k);
            let mut means = st.clone_dtoh(&s.means).during(|| "reading means".into())?;
            for (r, &i) in deep.iter().enumerate() {
                means[i as usize] = sub_means[r];
            }
            st.memcpy_htod(&means, &mut s.means).during(|| "writing the CPU's means".into())?;
            work = ControlHostWork { deep_trees: deep.len(), deep_steps: eps.iter().map(|e| e.steps as u64).sum() };
        }
        let mut steps = mail.buf.slice_mut(ENV_STEPS_AT..ENV_STEPS_AT + 2);
        st.memset_zeros(&mut steps).during(|| "clearing the env-step count".into())?;
        // SAFETY: the two mailbox words are a u64 (the mailbox is 256-byte aligned and the
        // offset is 88 bytes: 8-byte aligned).
        let mut steps = unsafe { steps.transmute_mut::<u64>(1) }.ok_or_else(|| GpuError::Input("the mailbox has no room for a u64".into()))?;
        let gen = GenParams { n: p as u32, max_len: pop.max_len() as u32, parsimony, ..GenParams::default() };
        let f = self.function(&GENERATION, &[], CONTROL_FITNESS)?;
        let (episodes, len) = (k as u32, &pop.len);
        let mut b = st.launch_builder(&f);
        b.arg(&gen).arg(&episodes).arg(&s.means).arg(&s.lengths).arg(len).arg(&mut fit.fit).arg(&mut steps);
        // SAFETY: matches `grove_control_fitness(GroveGenParams, unsigned episodes, const double*
        // means, const unsigned* lengths, const unsigned short* lens, double* fit, unsigned long
        // long* steps)`: means, lens and fit hold P entries, lengths P·K, steps one u64.
        unsafe { b.launch(lc(p)) }.during(|| format!("launching {CONTROL_FITNESS}"))?;
        if let (Some(l), Some((observed, _, d))) = (learnt, s.learning.as_ref()) {
            // Each episode's sums, the deep trees' from the CPU, merged as the host loop merges
            // them (`Backend::control_returns_observed`).
            let mut rows = st.clone_dtoh(observed).during(|| "reading the observation sums".into())?;
            let row = 1 + 2 * d;
            for (i, seen) in deep_seen {
                for (item, s) in rows[i * k * row..(i + 1) * k * row].chunks_mut(row).zip(&seen) {
                    s.write_item(item);
                }
            }
            l.learn_rows(&rows, k);
        }
        Ok(work)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spare_lanes_are_the_widest_that_take_their_share_of_the_resident_threads() {
        assert_eq!(spare_lanes(264, 33_792, 4), 32); // 264 × 4 × 32 = 33 792
        assert_eq!(spare_lanes(265, 33_792, 4), 16);
        assert_eq!(spare_lanes(2_048, 33_792, 4), 4);
        assert_eq!(spare_lanes(2_048, 67_584, 4), 8);
        assert_eq!(spare_lanes(8_448, 33_792, 4), 1);
        assert_eq!(spare_lanes(20_000, 67_584, 4), 1);
        // Half the resident threads: twice as wide.
        assert_eq!(spare_lanes(2_048, 33_792, 2), 8);
        assert_eq!(spare_lanes(528, 33_792, 2), 32);
        assert_eq!(spare_lanes(20_000, 67_584, 2), 1);
        assert_eq!(spare_lanes(2_048, 33_792, LANES_SHARE), 4, "the default share is a quarter");
        // A share of 1: the groups may fill every resident thread.
        assert_eq!(spare_lanes(2_048, 65_536, 1), 32);
        // More episodes than threads, or none resident: one lane.
        assert_eq!(spare_lanes(1 << 20, 33_792, 4), 1);
        assert_eq!(spare_lanes(5, 0, 4), 1);
        assert_eq!(spare_lanes(usize::MAX, 33_792, 4), 1);
        assert_eq!(spare_lanes(usize::MAX, 33_792, u64::MAX), 1);
    }

    #[test]
    fn a_groups_shared_words_hold_a_y_b_and_the_diagonal() {
        let walker = Model::load("walker2d", Some("brax")).unwrap();
        let s = walker.n_slots();
        assert_eq!(s, 2 * 6 + 6 * 3, "six limited joints, three colliding capsules");
        assert_eq!(lane_words(&walker), s * s + s * 9 + 2 * s);
        assert_eq!(block_shared_bytes(&walker, 1), 0, "one lane keeps its rows in local memory");
        assert_eq!(block_shared_bytes(&walker, 8), 8 * lane_words(&walker) * 4);
        let swimmer = Model::load("swimmer", Some("brax")).unwrap();
        assert_eq!(swimmer.n_slots(), 4, "two limited joints, no contacts");
        assert_eq!(swimmer.nv(), 5);
        assert_eq!(lane_words(&swimmer), 16 + 4 * 5 + 8);
        // A model without constraints still gets one slot's words.
        let mut free = swimmer.clone();
        free.joints.iter_mut().for_each(|j| j.range = None);
        assert_eq!(free.n_slots(), 0);
        assert_eq!(lane_words(&free), 1 + 5 + 2);
    }
}
