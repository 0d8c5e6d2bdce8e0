//! The rest of a generation on the device: the host side of `kernels/generation.cu`. With
//! [`super::vary`] and [`super::select`] it lets a run keep its population, fitness and
//! statistics on the GPU (the loop is [`crate::evolve::device`]); the host reads a few words
//! per generation ([`Mailbox`]) and the best program when it improves.
//!
//! Each step has a CPU twin it equals exactly:
//! - [`CudaEngine::order_trees`]: the order [`super::pack::pack`] gives `tree_ids` (fast trees,
//!   then deep ones) and its checks;
//! - [`CudaEngine::regression_fitness`]: the regression task's fitness of the sums,
//!   [`crate::program::fitness::error`] plus parsimony (the sums are
//!   [`CudaEngine::evaluate_regression`]'s, `eval.cu`);
//! - [`CudaEngine::classification_fitness`]: the classification task's fitness of
//!   [`CudaEngine::evaluate_classification`]'s sums (`classify.cu`);
//! - [`CudaEngine::elite_and_stats`]: `select::elite(fit, e)` and the statistics of
//!   `evolve::stats` (the mean's sum in another order).
//!
//! The control task's two steps of this file (`grove_control_skip`, `grove_control_fitness`)
//! are launched from [`super::control`], beside the roll-out whose compiled policies they share.

use cudarc::driver::{CudaSlice, CudaView, LaunchConfig, PushKernelArg};

use super::error::{During, GpuError, Result};
use super::eval::{DeviceDataset, EvalConfig, Launch, Views};
use super::memory::grow_device;
use super::kernels::{
    ARGMIN_BLOCKS, ARGMIN_FINAL, GENERATION, MAX_ELITE, PARTITION, REDUCE_THREADS, REGRESSION_FITNESS, PARTITION_COUNT,
    PARTITION_SCAN, SCAN_THREADS, SIZES_INDEX, SIZES_KEYS, SIZES_RESET, STACK_CLASS, TILE, TILE_THREADS,
};
use super::params::{Argmin, GenParams, GenStats, RegSums};
use super::select::{DeviceFitness, DeviceIndices};
use super::classify::{ClassBuffers, DeviceClassData};
use super::kernels;
use super::peer::Link;
use super::population::DevicePopulation;
use super::CudaEngine;
use crate::program::fitness::{Metric, RegressionConfig};

/// Threads per block of the one-thread-per-individual kernels.
const THREADS: u32 = 256;

/// Words of the [`Mailbox`].
pub const MAILBOX_WORDS: usize = 32;
/// Mailbox word where the partition counts start (`n_fast, n_deep, n_bad, first_bad`).
const COUNTS_AT: usize = 8;
/// Mailbox word where the breeding outcome counts start (8 words, [`super::BredCounts`]).
pub const BRED_AT: usize = 12;
/// Mailbox word counting the next population's trees too deep for the control kernel.
pub const CONTROL_DEEP_AT: usize = 20;
/// Mailbox words (a u64) counting the env steps the generation's roll-outs played.
pub const ENV_STEPS_AT: usize = 22;
/// Mailbox word where NSGA-II's survivors' statistics start ([`GenStats`], 8 words).
pub const SURVIVORS_AT: usize = 24;

/// What the host reads after a generation, in one copy: [`GenStats`] (words 0..8), the
/// partition counts of the next population (8..12), its breeding counts (12..20), control's
/// counts (20..24) and NSGA-II's survivors' [`GenStats`] (24..32).
pub struct Mailbox {
    pub(super) buf: CudaSlice<u32>,
    engine: u64,
}

/// The mailbox as read on the host.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MailboxRead {
    /// The evaluated generation's statistics.
    pub stats: GenStats,
    /// The next population's trees for the fast kernels.
    pub n_fast: usize,
    /// ... for the deep ones.
    pub n_deep: usize,
    /// ... that no kernel can take (0 unless a kernel broke an invariant).
    pub n_bad: usize,
    /// The first of those (`u32::MAX`: none).
    pub first_bad: u32,
    /// The next population's breeding outcome counts.
    pub bred: [u32; 8],
    /// Control: the next population's trees too deep for the roll-out kernel.
    pub control_deep: usize,
    /// Control: env steps the evaluated generation's roll-outs played on the device.
    pub env_steps: u64,
    /// NSGA-II: the statistics of the generation's survivors (zero where none were posted:
    /// [`CudaEngine::post_stats`]).
    pub survivors: GenStats,
}

/// The evaluation order of a population: tree ids, fast ones first.
pub struct TreeOrder {
    ids: CudaSlice<u32>,
    cls: CudaSlice<u32>,
    /// Per tile of [`TILE`] trees: packed counts, then offsets (scan.cuh), and the first bad tree.
    tiles: CudaSlice<u64>,
    tile_bad: CudaSlice<u32>,
    /// Ids of the fast kernels' trees (the first entries).
    pub n_fast: usize,
    /// Ids of the deep kernels' trees (after them).
    pub n_deep: usize,
}

/// Scratch of [`CudaEngine::regression_fitness`] for one population size and data set.
pub struct FitnessScratch {
    partials: CudaSlice<RegSums>,
    sums: CudaSlice<RegSums>,
    launch: Launch,
    n: usize,
    /// Lexicase and the joint fit: every tree's value at every row (`[P × N]`), kept by the
    /// evaluation.
    values: Option<CudaSlice<f32>>,
    n_rows: usize,
    /// The joint fit with linear terms of the inputs, where the fitness is its error
    /// ([`CudaEngine::keep_joint`]).
    joint: Option<JointScratch>,
}

/// The device loop's joint fit (`kernels/eval.cu`'s `grove_joint_sums` and
/// `grove_joint_fitness`): the fit's numbers, the terms' columns, and each tree's sums.
struct JointScratch {
    /// [`crate::program::linear::Joint::device_params`].
    params: CudaSlice<f64>,
    /// The terms' columns (one unread entry where there are none).
    cols: CudaSlice<u32>,
    /// Terms.
    k: usize,
    /// `[P × (k + 3)]` sums.
    sums: CudaSlice<f64>,
    /// `[P]` rows whose value is not finite.
    bad: CudaSlice<u32>,
}

impl FitnessScratch {
    /// Whether the evaluation keeps every tree's value at every row.
    pub fn keeps_values(&self) -> bool {
        self.values.is_some()
    }
}

/// Scratch of [`CudaEngine::elite_and_stats`].
pub struct EliteScratch {
    partials: CudaSlice<Argmin>,
    chosen: CudaSlice<u32>,
    n_blocks: u32,
}

/// The metric's code in generation.cu.
fn metric_code(m: Metric) -> u32 {
    match m {
        Metric::Mse => 0,
        Metric::Rmse => 1,
        Metric::Mae => 2,
        Metric::R2 => 3,
    }
}

fn per_item(n: usize) -> LaunchConfig {
    LaunchConfig { grid_dim: ((n as u32).div_ceil(THREADS), 1, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 }
}

impl Mailbox {
    /// Decodes the words read back.
    pub fn decode(words: &[u32]) -> MailboxRead {
        let f = |i: usize| f64::from_bits(words[i] as u64 | ((words[i + 1] as u64) << 32));
        let mut bred = [0u32; 8];
        bred.copy_from_slice(&words[BRED_AT..BRED_AT + 8]);
        MailboxRead {
            stats: GenStats { best: f(0), sum: f(2), sum_len: f(4), best_idx: words[6], n_valid: words[7] },
            n_fast: words[COUNTS_AT] as usize,
            n_deep: words[COUNTS_AT + 1] as usize,
            n_bad: words[COUNTS_AT + 2] as usize,
            first_bad: words[COUNTS_AT + 3],
            bred,
            control_deep: words[CONTROL_DEEP_AT] as usize,
            env_steps: words[ENV_STEPS_AT] as u64 | (words[ENV_STEPS_AT + 1] as u64) << 32,
            survivors: GenStats {
                best: f(SURVIVORS_AT),
                sum: f(SURVIVORS_AT + 2),
                sum_len: f(SURVIVORS_AT + 4),
                best_idx: words[SURVIVORS_AT + 6],
                n_valid: words[SURVIVORS_AT + 7],
            },
        }
    }
}

impl CudaEngine {
    /// A mailbox, zeroed.
    pub fn alloc_mailbox(&self) -> Result<Mailbox> {
        let buf = self.stream.alloc_zeros::<u32>(MAILBOX_WORDS).during(|| "allocating the mailbox".into())?;
        Ok(Mailbox { buf, engine: self.id })
    }

    /// Reads the mailbox (waits for the work queued before it): the one synchronisation of a
    /// generation.
    pub fn read_mailbox(&self, m: &Mailbox) -> Result<MailboxRead> {
        let mut words = [0u32; MAILBOX_WORDS];
        self.stream.memcpy_dtoh(&m.buf, &mut words[..]).during(|| "reading the mailbox".into())?;
        self.stream.synchronize().during(|| "running a generation".into())?;
        Ok(Mailbox::decode(&words))
    }

    /// Copies breeding counts (8 words, device to device) into the mailbox.
    pub fn post_bred_counts(&self, bred: &super::DeviceBred, m: &mut Mailbox) -> Result<()> {
        let mut dst = m.buf.slice_mut(BRED_AT..BRED_AT + 8);
        self.stream.memcpy_dtod(&bred.counts.slice(..8), &mut dst).during(|| "posting breeding counts".into())
    }

    /// Scratch for ordering populations of `p` trees.
    pub fn alloc_tree_order(&self, p: usize) -> Result<TreeOrder> {
        let ids = self.stream.alloc_zeros::<u32>(p.max(1)).during(|| "allocating tree ids".into())?;
        let cls = self.stream.alloc_zeros::<u32>(p.max(1)).during(|| "allocating tree classes".into())?;
        let n_tiles = p.div_ceil(TILE as usize).max(1);
        let tiles = self.stream.alloc_zeros::<u64>(n_tiles).during(|| "allocating tile counts".into())?;
        let tile_bad = self.stream.alloc_zeros::<u32>(n_tiles).during(|| "allocating tile counts".into())?;
        Ok(TreeOrder { ids, cls, tiles, tile_bad, n_fast: 0, n_deep: 0 })
    }

    /// Queues the ordering of `pop`'s trees for evaluation into `order`; the counts go to the
    /// mailbox (read them with [`Self::read_mailbox`], then [`TreeOrder::set_counts`]).
    pub fn order_trees(&self, pop: &DevicePopulation, order: &mut TreeOrder, m: &mut Mailbox) -> Result<()> {
        let p = pop.size();
        if order.ids.len() < p || m.engine != self.id || pop.engine != self.id {
            return Err(GpuError::Input(format!("ordering {p} trees with scratch for {}", order.ids.len())));
        }
        if p == 0 || p > u32::MAX as usize / 2 {
            return Err(GpuError::Input(format!("{p} trees: the device loop takes 1 to {}", u32::MAX / 2)));
        }
        let params = GenParams { n: p as u32, max_len: pop.max_len() as u32, ..GenParams::default() };
        let f = self.function(&GENERATION, &[], STACK_CLASS)?;
        let mut b = self.stream.launch_builder(&f);
        b.arg(&params).arg(&pop.op).arg(&pop.len).arg(&mut order.cls);
        // SAFETY: matches `grove_stack_class(GroveGenParams, const unsigned char* ops, const
        // unsigned short* lens, unsigned* cls)`: ops holds P × L, lens and cls P (checked); a
        // thread reads at most min(len, L) entries of its row (longer rows are classed bad
        // without reading).
        unsafe { b.launch(per_item(p)) }.during(|| format!("launching {STACK_CLASS}"))?;
        // The stable partition by class over tiles (scan.cuh): counts, offsets, ids.
        let n_tiles = p.div_ceil(TILE as usize);
        if order.tiles.len() < n_tiles {
            return Err(GpuError::Input(format!("ordering {p} trees with tile scratch for {}", order.tiles.len())));
        }
        let tiles = LaunchConfig { grid_dim: (n_tiles as u32, 1, 1), block_dim: (TILE_THREADS, 1, 1), shared_mem_bytes: 0 };
        let f = self.function(&GENERATION, &[], PARTITION_COUNT)?;
        let mut b = self.stream.launch_builder(&f);
        b.arg(&params).arg(&order.cls).arg(&mut order.tiles).arg(&mut order.tile_bad);
        // SAFETY: matches `grove_partition_count(GroveGenParams, const unsigned* cls, unsigned
        // long long* tiles, unsigned* tile_bad)`: blocks of GROVE_TILE_THREADS threads, one per
        // tile of GROVE_TILE trees; a block reads cls below P (held) and writes its tile's
        // entries (n_tiles held, checked above).
        unsafe { b.launch(tiles) }.during(|| format!("launching {PARTITION_COUNT}"))?;
        let f = self.function(&GENERATION, &[], PARTITION_SCAN)?;
        let mut counts = m.buf.slice_mut(COUNTS_AT..COUNTS_AT + 4);
        let mut b = self.stream.launch_builder(&f);
        b.arg(&params).arg(&mut order.tiles).arg(&order.tile_bad).arg(&mut counts);
        let one = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (TILE_THREADS, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: matches `grove_partition_scan(GroveGenParams, unsigned long long* tiles, const
        // unsigned* tile_bad, unsigned* counts)`: one block of GROVE_TILE_THREADS threads over
        // the n_tiles entries written just before on this stream; counts holds 4.
        unsafe { b.launch(one) }.during(|| format!("launching {PARTITION_SCAN}"))?;
        let f = self.function(&GENERATION, &[], PARTITION)?;
        let counts = m.buf.slice(COUNTS_AT..COUNTS_AT + 4);
        let mut b = self.stream.launch_builder(&f);
        b.arg(&params).arg(&order.cls).arg(&order.tiles).arg(&counts).arg(&mut order.ids);
        // SAFETY: matches `grove_partition(GroveGenParams, const unsigned* cls, const unsigned
        // long long* tiles, const unsigned* counts, unsigned* ids)`: a block per tile as above;
        // offsets and counts come from the scan just before, so every fast or deep tree gets
        // one place below n_fast + n_deep <= P in ids (held).
        unsafe { b.launch(tiles) }.during(|| format!("launching {PARTITION}"))?;
        Ok(())
    }

    /// Scratch for the regression fitness of `p` trees on `data`.
    pub fn alloc_fitness_scratch(&self, p: usize, n_outputs: usize, data: &DeviceDataset) -> Result<FitnessScratch> {
        let launch = EvalConfig::default().resolve(data.n_rows(), p, n_outputs, self.sm_count)?;
        let n_part = p * launch.n_tiles as usize;
        // SAFETY: uninitialised; the kernels write every entry they later read (each tree's
        // tiles, then its sums) before reading it.
        let partials = unsafe { self.stream.alloc::<RegSums>(n_part.max(1)) }.during(|| "allocating partial sums".into())?;
        let sums = unsafe { self.stream.alloc::<RegSums>(p.max(1)) }.during(|| "allocating sums".into())?;
        Ok(FitnessScratch { partials, sums, launch, n: p, values: None, n_rows: data.n_rows(), joint: None })
    }

    /// Makes `scratch`'s fitness the error of each tree fitted together with `joint`'s linear
    /// terms of `data`'s inputs (the regression task's `joint_error` plus parsimony, bit for bit
    /// from the same sums as [`Self::evaluate_joint`]'s), in place of the fused sums' metric:
    /// the trees' values are kept ([`Self::keep_values`]) where they take at most `budget`
    /// bytes. `Ok(false)`, and `scratch` unchanged, where they do not.
    pub fn keep_joint(&self, scratch: &mut FitnessScratch, joint: &crate::program::linear::Joint, data: &DeviceDataset, budget: usize) -> Result<bool> {
        if let Some(&j) = joint.inputs.iter().find(|&&j| j >= data.n_features()) {
            return Err(GpuError::Input(format!("linear term of input {j} of {}", data.n_features())));
        }
        if scratch.n_rows != data.n_rows() {
            return Err(GpuError::Input(format!("a joint fit over {} rows for scratch of {}", data.n_rows(), scratch.n_rows)));
        }
        if scratch.values.is_none() && !self.keep_values(scratch, budget)? {
            return Ok(false);
        }
        let k = joint.inputs.len();
        let params = self.stream.clone_htod(&joint.device_params()).during(|| "copying the joint fit".into())?;
        let cols: Vec<u32> = if k == 0 { vec![0] } else { joint.inputs.iter().map(|&j| j as u32).collect() };
        let cols = self.stream.clone_htod(&cols).during(|| "copying the terms' inputs".into())?;
        let p = scratch.n.max(1);
        let sums = self.alloc::<f64>(p * (k + 3), false, "allocating the joint sums")?;
        let bad = self.alloc::<u32>(p, false, "allocating the joint sums")?;
        scratch.joint = Some(JointScratch { params, cols, k, sums, bad });
        Ok(true)
    }

    /// Makes `scratch`'s evaluations keep every tree's value at every row (`P × N` floats),
    /// where [`Self::regression_lexicase`] reads its cases' values: the device loop asks for it
    /// under lexicase where those values take at most `budget` bytes.
    pub fn keep_values(&self, scratch: &mut FitnessScratch, budget: usize) -> Result<bool> {
        let bytes = scratch.n.saturating_mul(scratch.n_rows).saturating_mul(4);
        if bytes > budget || scratch.n == 0 {
            return Ok(false);
        }
        scratch.values = Some(self.alloc::<f32>(scratch.n * scratch.n_rows, false, "allocating the kept values")?);
        Ok(true)
    }

    /// Queues the regression fitness of every tree of `pop` on `data` into `fit`, as the
    /// regression task computes it on the host from [`Self::evaluate_regression`]'s sums:
    /// `error(sums, metric, scaled) + parsimony × len`, `+inf` for empty rows. `order` must
    /// hold `pop`'s evaluation order with its counts set, and name every tree.
    pub fn regression_fitness(
        &self,
        pop: &DevicePopulation,
        order: &TreeOrder,
        data: &DeviceDataset,
        cfg: &RegressionConfig,
        scratch: &mut FitnessScratch,
        fit: &mut DeviceFitness,
    ) -> Result<()> {
        self.regression_shard_sums(pop, order, data, scratch)?;
        if scratch.joint.is_some() {
            return self.joint_fitness_from_values(pop, data, cfg, scratch, fit);
        }
        self.regression_fitness_from_sums(pop, cfg, scratch, fit)
    }

    /// Queues the joint fit's fitness of every tree of `pop` ([`Self::keep_joint`]) from the
    /// values its evaluation kept in `scratch`: the sums of each tree's fit with the terms, then
    /// its error under `cfg`'s metric plus parsimony per node.
    fn joint_fitness_from_values(&self, pop: &DevicePopulation, data: &DeviceDataset, cfg: &RegressionConfig, scratch: &mut FitnessScratch, fit: &mut DeviceFitness) -> Result<()> {
        let p = pop.size();
        if fit.n != p || fit.engine != self.id || pop.n_outputs() > 0 {
            return Err(GpuError::Input(format!("the joint fitness of {p} trees ({} outputs) into fitness for {}", pop.n_outputs(), fit.n)));
        }
        let (Some(values), Some(j)) = (scratch.values.as_ref(), scratch.joint.as_mut()) else {
            return Err(GpuError::Input("the joint fitness needs the values kept".into()));
        };
        if p == 0 {
            return Ok(());
        }
        let (n32, k32, p32) = (data.n_rows() as u32, j.k as u32, p as u32);
        let f = self.function(&kernels::EVAL, &[("GROVE_K", 1)], kernels::JOINT_SUMS)?;
        let mut b = self.stream.launch_builder(&f);
        b.arg(&n32).arg(&k32).arg(values).arg(data.x()).arg(data.y()).arg(&j.cols).arg(&mut j.sums).arg(&mut j.bad);
        let lc = LaunchConfig { grid_dim: (p32, k32 + 1, 1), block_dim: (kernels::JOINT_THREADS, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: matches `grove_joint_sums(unsigned n_rows, unsigned k, const float* pred,
        // const float* x, const float* r, const unsigned* inputs, double* out, unsigned* bad)`:
        // values holds P × N floats (kept for P trees of N rows, checked when kept), written by
        // the evaluation just queued for every tree; x F × N and r N (the dataset); cols k
        // indices below F (checked in keep_joint; one unread entry when k = 0); sums P × (k + 3)
        // and bad P entries, one per block row of the grid (P, k + 1).
        unsafe { b.launch(lc) }.during(|| format!("launching {}", kernels::JOINT_SUMS))?;
        let metric = metric_code(cfg.metric);
        let f = self.function(&kernels::EVAL, &[("GROVE_K", 1)], kernels::JOINT_FITNESS)?;
        let mut b = self.stream.launch_builder(&f);
        b.arg(&p32).arg(&k32).arg(&n32).arg(&metric).arg(&cfg.parsimony).arg(&j.params).arg(&j.sums).arg(&j.bad).arg(&pop.len).arg(&mut fit.fit);
        // SAFETY: matches `grove_joint_fitness(unsigned p, unsigned k, unsigned n_rows, unsigned
        // metric, double parsimony, const double* params, const double* sums, const unsigned*
        // bad, const unsigned short* lens, double* fit)`: params 2 + 2k + k² numbers
        // (Joint::device_params), sums P × (k + 3), bad, lens and fit P entries (checked); thread
        // t < P reads and writes tree t's only.
        unsafe { b.launch(per_item(p)) }.during(|| format!("launching {}", kernels::JOINT_FITNESS))?;
        Ok(())
    }

    /// Queues the regression sums of every tree of `pop` over `data` into `scratch` (one shard of
    /// the rows when they are split over GPUs; [`Self::regression_fitness`]'s first half).
    pub fn regression_shard_sums(&self, pop: &DevicePopulation, order: &TreeOrder, data: &DeviceDataset, scratch: &mut FitnessScratch) -> Result<()> {
        let p = pop.size();
        if scratch.n != p || pop.engine != self.id || order.n_fast + order.n_deep != p {
            return Err(GpuError::Input(format!(
                "sums of {p} trees with scratch for {}, {} + {} trees ordered",
                scratch.n, order.n_fast, order.n_deep
            )));
        }
        self.check_dataset(data)?;
        let v = Views { ids: order.ids.slice(..p), op: pop.op.slice(..), value: pop.value.slice(..), size: pop.size.slice(..), out: pop.out.slice(..), len: pop.len.slice(..) };
        if scratch.values.is_some() && scratch.n_rows != data.n_rows() {
            return Err(GpuError::Input(format!("values kept for {} rows, data of {}", scratch.n_rows, data.n_rows())));
        }
        self.launch_regression(&v, order.n_fast, p, pop.max_len(), pop.n_outputs(), data, &scratch.launch, &mut scratch.partials, &mut scratch.sums, scratch.values.as_mut())
    }

    /// Adds another shard's sums (`other`, on engine `from`'s GPU: copied over `link` first)
    /// to `scratch`'s, tree by tree (`RegressionSums::merge`'s twin; call in shard order).
    pub fn add_shard_sums(&self, scratch: &mut FitnessScratch, from: &CudaEngine, other: &FitnessScratch, link: Link<'_>) -> Result<()> {
        let p = scratch.n;
        if other.n != p {
            return Err(GpuError::Input(format!("adding the sums of {} trees to {p}", other.n)));
        }
        if p == 0 {
            return Ok(());
        }
        // SAFETY: written in full by the copy below before the kernel reads it.
        let mut here = unsafe { self.stream.alloc::<RegSums>(p) }.during(|| "allocating a shard's sums".into())?;
        self.cross_first(link, from.id, &other.sums, p, &mut here)?;
        let f = self.function(&GENERATION, &[], kernels::ADD_REGRESSION_SUMS)?;
        let n = p as u32;
        let mut b = self.stream.launch_builder(&f);
        b.arg(&n).arg(&here).arg(&mut scratch.sums);
        // SAFETY: matches `grove_add_regression_sums(unsigned n, const GroveRegSums* other,
        // GroveRegSums* sums)`: both hold n = P entries, each thread its own.
        unsafe { b.launch(per_item(p)) }.during(|| format!("launching {}", kernels::ADD_REGRESSION_SUMS))?;
        Ok(())
    }

    /// Lexicase parents on the device for regression: every tree's absolute error at each
    /// training row of `cases` (`[P × cases]`, f64) under the readout its fitness gives it (its
    /// linear scaling from the sums in `scratch`, which [`Self::regression_fitness`] left for
    /// this `pop`, or none, as `cfg` says), then `n_slots` selections from pools of `k_pool`
    /// ([`Self::select_lexicase`]). The errors are the twin of the regression task's
    /// `case_errors` on the host: the rows gathered, the trees' predictions at them (`order` as
    /// for the fitness), then `grove_case_errors`. The buffers stay in the engine.
    #[allow(clippy::too_many_arguments)]
    pub fn regression_lexicase(
        &self,
        pop: &DevicePopulation,
        order: &TreeOrder,
        data: &DeviceDataset,
        cfg: &RegressionConfig,
        scratch: &FitnessScratch,
        cases: &[u32],
        fit: &DeviceFitness,
        unique: bool,
        k_pool: usize,
        n_slots: usize,
        seed: u64,
        generation: u32,
    ) -> Result<DeviceIndices> {
        let p = pop.size();
        if scratch.n != p || fit.size() != p || pop.engine != self.id || order.n_fast + order.n_deep != p || pop.n_outputs() > 0 {
            return Err(GpuError::Input(format!(
                "case errors of {p} trees ({} outputs) with sums for {}, fitness for {}, {} + {} trees ordered",
                pop.n_outputs(),
                scratch.n,
                fit.size(),
                order.n_fast,
                order.n_deep
            )));
        }
        let mut guard = self.lexicase_scratch.lock().unwrap_or_else(|e| e.into_inner());
        let s = &mut *guard;
        let k = cases.len();
        let k32 = k as u32;
        // The cases' values: kept by the evaluation, or the case rows gathered and predicted.
        let (stride, by_row) = match &scratch.values {
            Some(_) => {
                self.copy_rows(data, cases, &mut s.rows)?;
                (data.n_rows() as u32, 1u32)
            }
            None => {
                self.gather_rows(data, cases, &mut s.rows, &mut s.cases)?;
                let rows = s.cases.as_ref().expect("gathered");
                let pred = grow_device(&self.stream, &mut s.pred, p * k, "allocating the case predictions")?;
                let v = Views { ids: order.ids.slice(..p), op: pop.op.slice(..), value: pop.value.slice(..), size: pop.size.slice(..), out: pop.out.slice(..), len: pop.len.slice(..) };
                self.launch_predict(&v, order.n_fast, p, p, pop.max_len(), 0, rows, pred)?;
                (k32, 0u32)
            }
        };
        let errors = grow_device(&self.stream, &mut s.errors, p * k, "allocating the case errors")?;
        let pred = match &scratch.values {
            Some(v) => v,
            None => s.pred.as_ref().expect("predicted above"),
        };
        let d_rows = s.rows.as_ref().expect("copied above");
        let params = GenParams { n: p as u32, max_len: pop.max_len() as u32, scaled: cfg.linear_scaling as u32, ..GenParams::default() };
        let f = self.function(&GENERATION, &[], kernels::CASE_ERRORS)?;
        let mut b = self.stream.launch_builder(&f);
        b.arg(&params).arg(&k32).arg(&stride).arg(&by_row).arg(d_rows).arg(pred).arg(data.y()).arg(&scratch.sums).arg(&pop.len).arg(&mut *errors);
        let n = p * k;
        let lc = LaunchConfig { grid_dim: (n.div_ceil(THREADS as usize) as u32, 1, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: matches `grove_case_errors(GroveGenParams, unsigned k, unsigned stride,
        // unsigned by_row, const unsigned* rows, const float* pred, const float* y, const
        // GroveRegSums* sums, const unsigned short* lens, double* errors)`: rows k indices below
        // N (checked), pred P × stride values with stride N (kept, read at the rows) or k (the
        // cases predicted, read at j < k), y N, sums and lens P, errors at least P × k; thread
        // `at < P × k` writes errors[at].
        unsafe { b.launch(lc) }.during(|| format!("launching {}", kernels::CASE_ERRORS))?;
        let mut sel = self.select_params(fit, n_slots, seed, generation)?;
        sel.n_cases = k32;
        let errors = s.errors.take().expect("filled above");
        let out = self.lexicase_on_device(&errors, sel, fit, unique.then_some(pop), k_pool, s);
        s.errors = Some(errors);
        out
    }

    /// Queues the fitness of `pop`'s trees from the sums in `scratch` into `fit`
    /// ([`Self::regression_fitness`]'s second half).
    pub fn regression_fitness_from_sums(&self, pop: &DevicePopulation, cfg: &RegressionConfig, scratch: &FitnessScratch, fit: &mut DeviceFitness) -> Result<()> {
        let p = pop.size();
        if scratch.n != p || fit.n != p || fit.engine != self.id || pop.engine != self.id {
            return Err(GpuError::Input(format!("fitness of {p} trees with sums for {}, fitness for {}", scratch.n, fit.n)));
        }
        let params = GenParams {
            n: p as u32,
            max_len: pop.max_len() as u32,
            metric: metric_code(cfg.metric),
            scaled: cfg.linear_scaling as u32,
            parsimony: cfg.parsimony,
            ..GenParams::default()
        };
        let f = self.function(&GENERATION, &[], REGRESSION_FITNESS)?;
        let mut b = self.stream.launch_builder(&f);
        b.arg(&params).arg(&scratch.sums).arg(&pop.len).arg(&mut fit.fit);
        // SAFETY: matches `grove_regression_fitness(GroveGenParams, const GroveRegSums* sums,
        // const unsigned short* lens, double* fit)`: sums, lens and fit hold P entries (checked),
        // every sum written by the reduction just queued.
        unsafe { b.launch(per_item(p)) }.during(|| format!("launching {REGRESSION_FITNESS}"))?;
        Ok(())
    }

    /// A copy on this engine of `src`'s evaluation order (ids and counts), from engine `from`'s
    /// GPU over `link`: a row shard's GPU evaluates the population in the order the first GPU
    /// chose.
    pub fn copy_order_into(&self, from: &CudaEngine, src: &TreeOrder, dst: &mut TreeOrder, link: Link<'_>) -> Result<()> {
        if dst.ids.len() < src.ids.len() {
            return Err(GpuError::Input(format!("copying an order of {} trees into one of {}", src.ids.len(), dst.ids.len())));
        }
        self.cross(link, from.id, &src.ids, &mut dst.ids)?;
        dst.n_fast = src.n_fast;
        dst.n_deep = src.n_deep;
        Ok(())
    }

    /// Scratch for [`Self::elite_and_stats`] over `p` individuals.
    pub fn alloc_elite_scratch(&self, p: usize) -> Result<EliteScratch> {
        let n_blocks = p.div_ceil(16 * REDUCE_THREADS as usize).clamp(1, SCAN_THREADS as usize) as u32;
        let partials = self.stream.alloc_zeros::<Argmin>(n_blocks as usize).during(|| "allocating argmin partials".into())?;
        let chosen = self.stream.alloc_zeros::<u32>(MAX_ELITE).during(|| "allocating the elite".into())?;
        Ok(EliteScratch { partials, chosen, n_blocks })
    }

    /// Queues `select::elite(fit, n_elite)` (at least the best one is always found, for the
    /// statistics) and the statistics of `fit` and `pop`'s lengths into the mailbox. Returns
    /// the elite as indices on the device.
    pub fn elite_and_stats(
        &self,
        fit: &DeviceFitness,
        pop: &DevicePopulation,
        n_elite: usize,
        scratch: &mut EliteScratch,
        m: &mut Mailbox,
    ) -> Result<DeviceIndices> {
        let p = fit.n;
        if pop.size() != p || fit.engine != self.id || m.engine != self.id || pop.engine != self.id {
            return Err(GpuError::Input(format!("statistics of {p} fitness values for {} trees", pop.size())));
        }
        if n_elite > MAX_ELITE || n_elite > p {
            return Err(GpuError::Config(format!("{n_elite} elites: the device loop keeps at most {MAX_ELITE} (and at most P)")));
        }
        for j in 0..n_elite.max(1) {
            self.argmin_pass(fit, pop, j, scratch, m, 0)?;
        }
        // The chosen buffer's first n_elite entries are indices below P by construction.
        let idx = self.stream.clone_dtod(&scratch.chosen.slice(..n_elite.max(1))).during(|| "copying the elite".into())?;
        Ok(DeviceIndices { idx, n: n_elite, bound: p, engine: self.id })
    }

    /// Queues the statistics of `fit` and `pop`'s lengths (as [`Self::elite_and_stats`]'s)
    /// into the mailbox's words from [`SURVIVORS_AT`], where [`MailboxRead::survivors`] reads
    /// them: NSGA-II's survivors, whose statistics are the generation's. `scratch`'s chosen
    /// entry 0 is overwritten (queue this after the elite's copy).
    pub fn post_stats(&self, fit: &DeviceFitness, pop: &DevicePopulation, scratch: &mut EliteScratch, m: &mut Mailbox) -> Result<()> {
        let p = fit.n;
        if pop.size() != p || fit.engine != self.id || m.engine != self.id || pop.engine != self.id {
            return Err(GpuError::Input(format!("statistics of {p} fitness values for {} trees", pop.size())));
        }
        self.argmin_pass(fit, pop, 0, scratch, m, SURVIVORS_AT)
    }

    /// One pass of `grove_argmin_blocks` and `grove_argmin_final`: the best of `fit` not among
    /// `scratch`'s first `j` chosen, into chosen entry `j`, and (the first pass) the statistics
    /// into the mailbox's 8 words from `at`.
    fn argmin_pass(&self, fit: &DeviceFitness, pop: &DevicePopulation, j: usize, scratch: &mut EliteScratch, m: &mut Mailbox, at: usize) -> Result<()> {
        let p = fit.n;
        let blocks = self.function(&GENERATION, &[], ARGMIN_BLOCKS)?;
        let fin = self.function(&GENERATION, &[], ARGMIN_FINAL)?;
        let params = GenParams { n: p as u32, max_len: pop.max_len() as u32, n_blocks: scratch.n_blocks, n_chosen: j as u32, ..GenParams::default() };
        let mut b = self.stream.launch_builder(&blocks);
        b.arg(&params).arg(&fit.fit).arg(&pop.len).arg(&scratch.chosen).arg(&mut scratch.partials);
        let lc = LaunchConfig { grid_dim: (scratch.n_blocks, 1, 1), block_dim: (REDUCE_THREADS, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: matches `grove_argmin_blocks(GroveGenParams, const double* fit, const
        // unsigned short* lens, const unsigned* chosen, GroveArgmin* partials)`: fit and
        // lens hold P entries, chosen MAX_ELITE (j < MAX_ELITE read), partials n_blocks
        // (one per block); blocks split 0..P without overlap.
        unsafe { b.launch(lc) }.during(|| format!("launching {ARGMIN_BLOCKS}"))?;
        let mut b = self.stream.launch_builder(&fin);
        let mut stats = m.buf.slice_mut(at..at + 8);
        b.arg(&params).arg(&scratch.partials).arg(&fit.fit).arg(&mut scratch.chosen).arg(&mut stats);
        let lc = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (SCAN_THREADS, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: matches `grove_argmin_final(GroveGenParams, const GroveArgmin* partials,
        // const double* fit, unsigned* chosen, GroveGenStats* stats)`: n_blocks <=
        // GROVE_SCAN_THREADS partials, all written just before; chosen[j], j < MAX_ELITE;
        // stats is 8 words (32 bytes, GenStats) of the mailbox from word `at` (0 or
        // SURVIVORS_AT: 8-byte aligned, as its doubles need).
        unsafe { b.launch(lc) }.during(|| format!("launching {ARGMIN_FINAL}"))?;
        Ok(())
    }

}

/// Scratch of [`CudaEngine::size_summary`] for rows of up to `L` nodes.
pub struct SizeScratch {
    key: CudaSlice<u64>,
    idx: CudaSlice<u32>,
    hist: CudaSlice<u32>,
    max_len: usize,
}

/// A generation seen by size, on the host: for each size `n` (index `n`, 0 unused) the best
/// valid fitness and the lowest index reaching it (`None` where no valid individual has `n`
/// nodes), and the number of valid individuals of that size.
#[derive(Clone, Debug, PartialEq)]
pub struct SizeSummary {
    /// `(fitness, individual)` per size.
    pub best: Vec<Option<(f64, u32)>>,
    /// Valid individuals per size.
    pub counts: Vec<u32>,
}

/// The f64 of an ordered integer (`grove_ordered_u64`'s inverse).
fn from_ordered(u: u64) -> f64 {
    f64::from_bits(if u >> 63 == 1 { u & !(1u64 << 63) } else { !u })
}

impl CudaEngine {
    /// Scratch for populations of rows of `max_len` nodes.
    pub fn alloc_size_scratch(&self, max_len: usize) -> Result<SizeScratch> {
        let n = max_len + 1;
        Ok(SizeScratch {
            key: self.stream.alloc_zeros::<u64>(n).during(|| "allocating size keys".into())?,
            idx: self.stream.alloc_zeros::<u32>(n).during(|| "allocating size indices".into())?,
            hist: self.stream.alloc_zeros::<u32>(n).during(|| "allocating size counts".into())?,
            max_len,
        })
    }

    /// Queues the per-size summary of `fit` over `pop` (see [`SizeSummary`]); read it with
    /// [`Self::read_generation`].
    pub fn size_summary(&self, fit: &DeviceFitness, pop: &DevicePopulation, s: &mut SizeScratch) -> Result<()> {
        let p = pop.size();
        if fit.n != p || pop.max_len() != s.max_len || fit.engine != self.id || pop.engine != self.id {
            return Err(GpuError::Input(format!("size summary of {} fitness values, {p} trees of L = {} (scratch for {})", fit.n, pop.max_len(), s.max_len)));
        }
        let params = GenParams { n: p as u32, max_len: s.max_len as u32, ..GenParams::default() };
        let f = self.function(&GENERATION, &[], SIZES_RESET)?;
        let mut b = self.stream.launch_builder(&f);
        b.arg(&params).arg(&mut s.key).arg(&mut s.idx).arg(&mut s.hist);
        // SAFETY: matches `grove_sizes_reset(GroveGenParams, unsigned long long* best_key,
        // unsigned* best_idx, unsigned* hist)`: each holds L + 1 entries, one thread each.
        unsafe { b.launch(per_item(s.max_len + 1)) }.during(|| format!("launching {SIZES_RESET}"))?;
        let f = self.function(&GENERATION, &[], SIZES_KEYS)?;
        let mut b = self.stream.launch_builder(&f);
        b.arg(&params).arg(&fit.fit).arg(&pop.len).arg(&mut s.key).arg(&mut s.hist);
        // SAFETY: matches `grove_sizes_keys(GroveGenParams, const double* fit, const unsigned
        // short* lens, unsigned long long* best_key, unsigned* hist)`: fit and lens P entries,
        // the others L + 1, indexed by a length checked to be at most L.
        unsafe { b.launch(per_item(p)) }.during(|| format!("launching {SIZES_KEYS}"))?;
        let f = self.function(&GENERATION, &[], SIZES_INDEX)?;
        let mut b = self.stream.launch_builder(&f);
        b.arg(&params).arg(&fit.fit).arg(&pop.len).arg(&s.key).arg(&mut s.idx);
        // SAFETY: as above, for `grove_sizes_index(..., const unsigned long long* best_key,
        // unsigned* best_idx)`.
        unsafe { b.launch(per_item(p)) }.during(|| format!("launching {SIZES_INDEX}"))?;
        Ok(())
    }

    /// Reads the mailbox and the size summary queued by [`Self::size_summary`], waiting once
    /// for the generation's work: the per-generation read of the device loop.
    pub fn read_generation(&self, m: &Mailbox, s: &SizeScratch) -> Result<(MailboxRead, SizeSummary)> {
        let n = s.max_len + 1;
        let mut words = [0u32; MAILBOX_WORDS];
        let (mut key, mut idx, mut hist) = (vec![0u64; n], vec![0u32; n], vec![0u32; n]);
        self.stream.memcpy_dtoh(&m.buf, &mut words[..]).during(|| "reading the mailbox".into())?;
        self.stream.memcpy_dtoh(&s.key.slice(..n), &mut key[..]).during(|| "reading size keys".into())?;
        self.stream.memcpy_dtoh(&s.idx.slice(..n), &mut idx[..]).during(|| "reading size indices".into())?;
        self.stream.memcpy_dtoh(&s.hist.slice(..n), &mut hist[..]).during(|| "reading size counts".into())?;
        self.stream.synchronize().during(|| "running a generation".into())?;
        let best = key.iter().zip(&idx).map(|(&k, &i)| (i != u32::MAX).then(|| (from_ordered(k), i))).collect();
        Ok((Mailbox::decode(&words), SizeSummary { best, counts: hist }))
    }

}

/// The classification fitness settings the device computes: [`fitness_of`](crate::program::fitness::fitness_of)
/// of the sums plus parsimony per node.
pub struct ClassFitnessScratch {
    buffers: ClassBuffers,
    counts: CudaSlice<u64>,
    kind: u32,
    parsimony: f64,
}

impl CudaEngine {
    /// Scratch for the classification fitness of `p` trees on `data`: `kind` 0 accuracy, 1
    /// balanced accuracy, 2 cross-entropy, 3 weighted F1, 4 balanced accuracy with the
    /// cross-entropy; `counts` the training points per class; programs with `n_out` outputs.
    #[allow(clippy::too_many_arguments)]
    pub fn alloc_class_fitness_scratch(&self, p: usize, n_out: usize, data: &DeviceClassData, counts: &[u64], kind: u32, parsimony: f64) -> Result<ClassFitnessScratch> {
        if counts.len() != data.n_classes || kind > 4 {
            return Err(GpuError::Input(format!("{} class counts for {} classes, fitness kind {kind}", counts.len(), data.n_classes)));
        }
        Ok(ClassFitnessScratch { buffers: self.alloc_class_buffers(p, n_out, data)?, counts: self.upload(counts, "uploading class counts")?, kind, parsimony })
    }

    /// Queues the classification fitness of every tree of `pop` into `fit`, as the
    /// classification task computes it from [`Self::evaluate_classification`]'s sums.
    pub fn classification_fitness(
        &self,
        pop: &super::DevicePopulation,
        order: &super::TreeOrder,
        data: &DeviceClassData,
        scratch: &mut ClassFitnessScratch,
        fit: &mut super::DeviceFitness,
    ) -> Result<()> {
        let p = pop.size();
        let (k, n_out) = (data.n_classes, pop.n_outputs());
        if data.engine != self.id || fit.n != p || !(n_out == k || (n_out == 0 && k == 2)) || order.n_fast + order.n_deep != p {
            return Err(GpuError::Input(format!("classification fitness of {p} trees with {n_out} outputs for {k} classes")));
        }
        let v = super::eval::Views {
            ids: order.ids_view(p),
            op: pop.op.slice(..),
            value: pop.value.slice(..),
            size: pop.size.slice(..),
            out: pop.out.slice(..),
            len: pop.len.slice(..),
        };
        self.launch_classification(&v, order.n_fast, p, pop.max_len(), n_out, data, &mut scratch.buffers)?;
        let params = GenParams { n: p as u32, max_len: pop.max_len() as u32, metric: scratch.kind, parsimony: scratch.parsimony, ..Default::default() };
        let k32 = k as u32;
        let f = self.function(&kernels::GENERATION, &[], kernels::CLASSIFY_FITNESS)?;
        let mut lb = self.stream.launch_builder(&f);
        lb.arg(&params).arg(&k32).arg(&scratch.buffers.sums).arg(&scratch.buffers.sums_correct).arg(&scratch.counts).arg(&pop.len).arg(&mut fit.fit);
        let lc = LaunchConfig { grid_dim: ((p as u32).div_ceil(256), 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: matches `grove_classify_fitness(GroveGenParams, unsigned n_classes, const
        // GroveClassPartial* sums, const unsigned* correct, const unsigned long long* counts,
        // const unsigned short* lens, double* fit)`: sums, lens and fit hold P entries, correct
        // P × 2K (the correct counts, then the prediction counts), counts K (checked at
        // allocation).
        unsafe { lb.launch(lc) }.during(|| format!("launching {}", kernels::CLASSIFY_FITNESS))?;
        Ok(())
    }
}

impl TreeOrder {
    /// Takes the counts read from the mailbox; an error names the first tree no kernel takes.
    pub fn set_counts(&mut self, r: &MailboxRead, p: usize) -> Result<()> {
        if r.n_bad > 0 || r.n_fast + r.n_deep != p {
            return Err(GpuError::Input(format!(
                "tree {} of the device population is malformed or needs more than {} stack slots ({} such trees)",
                r.first_bad,
                super::kernels::DEEP_STACK,
                r.n_bad
            )));
        }
        self.n_fast = r.n_fast;
        self.n_deep = r.n_deep;
        Ok(())
    }

    /// The first `p` ids.
    pub(super) fn ids_view(&self, p: usize) -> CudaView<'_, u32> {
        self.ids.slice(..p)
    }
}
