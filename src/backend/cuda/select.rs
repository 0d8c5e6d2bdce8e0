//! Selection on the GPU: the host side of `kernels/select.cu`, twin of [`crate::select`]. Each
//! call takes fitness already on the device and returns indices on the device, so a generation
//! can select and breed without copying the population or its fitness to the host.
//!
//! Results equal the CPU's exactly: [`CudaEngine::select_tournament`] gives, for slot `s`,
//! `select::tournament(fit, &valid_indices(fit), k, seed, generation, s)` (or
//! `tournament_distinct`); [`CudaEngine::rank`] gives `select::elite(fit, P)`;
//! [`CudaEngine::select_truncation`] gives `select::truncation(&ranked, rate, …)`;
//! [`CudaEngine::select_lexicase`] gives `select::epsilon_lexicase`; [`CudaEngine::elite`] and
//! [`CudaEngine::worst`] give `select::elite(fit, k)` and `islands::worst(fit, k)` for any `k`
//! without ranking everyone (migration).

use cudarc::driver::{CudaSlice, LaunchConfig, PushKernelArg};

use super::error::{During, GpuError, Result};
use super::kernels::{
    EPSILON_SAMPLE_KERNEL, EPSILON_THREADS, ERROR_GROUPS_INSERT, ERROR_GROUPS_VERIFY, GATHER_WORDS, LANES, LEXICASE, LEXICASE_CASES, LEXICASE_EPSILONS, LEXICASE_GROUPS, LEXICASE_STAGED, LEXICASE_STAGED_MAX, MAX_DISTINCT, RANK, RANK_TILE, SCATTER_WORDS, SELECT, TILE, TILE_THREADS, TOPK_COLLECT, TOPK_PASS,
    TOPK_INIT, TOPK_ORDER, TOURNAMENT, TRUNCATION, UNIQUE_GROUPS, UNIQUE_INSERT, VALID_COUNT, VALID_POOL, VALID_SCAN,
};
use super::population::DevicePopulation;
use super::params::SelectParams;
use super::CudaEngine;
use super::memory::{fill_words, grow_device};
use crate::select::EPSILON_SAMPLE;

/// Threads per block of the per-slot selection kernels.
const THREADS: u32 = 256;

/// Fitness on the device: `[P]` f64, minimised; NaN or infinite marks an invalid individual.
pub struct DeviceFitness {
    pub(super) fit: CudaSlice<f64>,
    pub(super) n: usize,
    pub(super) engine: u64,
}

impl DeviceFitness {
    /// `P`.
    pub fn size(&self) -> usize {
        self.n
    }
}

/// Per-case errors on the device for lexicase selection: `[P × n_cases]` f64, row `i`
/// individual `i`'s.
pub struct DeviceErrors {
    pub(super) errors: CudaSlice<f64>,
    pub(super) n: usize,
    pub(super) n_cases: usize,
    pub(super) engine: u64,
}

impl DeviceErrors {
    /// `P`.
    pub fn size(&self) -> usize {
        self.n
    }
    /// Cases per individual.
    pub fn n_cases(&self) -> usize {
        self.n_cases
    }
}

/// Lexicase's device buffers, kept by the engine between generations (they only grow): the
/// case rows (their indices and the gathered data), the trees' predictions and errors at them,
/// the epsilon sample and the epsilons, and the selections' candidates and case orders.
#[derive(Default)]
pub struct LexicaseScratch {
    pub(super) rows: Option<CudaSlice<u32>>,
    pub(super) cases: Option<super::eval::DeviceDataset>,
    pub(super) pred: Option<CudaSlice<f32>>,
    pub(super) errors: Option<CudaSlice<f64>>,
    sample: Option<CudaSlice<u32>>,
    eps: Option<CudaSlice<f64>>,
    order: Option<CudaSlice<u32>>,
    cand: Option<CudaSlice<u32>>,
    keys: Option<CudaSlice<u64>>,
    vals: Option<CudaSlice<u32>>,
}

/// Indices on the device, each below `bound` (parents chosen by selection, a ranking, rows to
/// copy). Only selection kernels and [`CudaEngine::upload_indices`] (which checks) make them,
/// so kernels may index arrays of `bound` rows with them.
pub struct DeviceIndices {
    pub(super) idx: CudaSlice<u32>,
    pub(super) n: usize,
    pub(super) bound: usize,
    pub(super) engine: u64,
}

impl DeviceIndices {
    /// Number of indices.
    pub fn len(&self) -> usize {
        self.n
    }
    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }
    /// Every index is below this.
    pub fn bound(&self) -> usize {
        self.bound
    }
}

/// The block of `grove_lexicase_staged` for pools of `k_pool` among `n` individuals and
/// `n_cases` cases, as (threads, bytes of shared memory), or `None` where it does not apply:
/// `k_pool` 0 (the whole population) or above [`LEXICASE_STAGED_MAX`], 65,536 cases or more,
/// or more shared memory than `limit` bytes. The block stages at most `min(k_pool, n)`
/// candidates' errors (f64) and their indices and groups, and a case order of 16-bit entries
/// per thread; a thread per slot of the group (whole warps).
pub fn lexicase_staged_shape(k_pool: usize, n: usize, n_cases: usize, limit: usize) -> Option<(u32, usize)> {
    if k_pool == 0 || k_pool > LEXICASE_STAGED_MAX || n_cases >= 1 << 16 {
        return None;
    }
    let width = k_pool.min(n);
    let threads = k_pool.next_multiple_of(32);
    let bytes = width * n_cases * 8 + width * 8 + threads * n_cases * 2;
    (bytes <= limit).then_some((threads as u32, bytes))
}

impl CudaEngine {
    /// Fitness on the device for `p` individuals, uninitialised (kernels fill it).
    pub fn alloc_fitness(&self, p: usize) -> Result<DeviceFitness> {
        let fit = self.stream.alloc_zeros::<f64>(p.max(1)).during(|| "allocating fitness".into())?;
        Ok(DeviceFitness { fit, n: p, engine: self.id })
    }

    /// Copies fitness back.
    pub fn download_fitness(&self, fit: &DeviceFitness) -> Result<Vec<f64>> {
        let mut v = self.stream.clone_dtoh(&fit.fit).during(|| "reading fitness".into())?;
        v.truncate(fit.n);
        Ok(v)
    }

    /// Copies fitness to the device.
    pub fn upload_fitness(&self, fit: &[f64]) -> Result<DeviceFitness> {
        if fit.len() > u32::MAX as usize {
            return Err(GpuError::Input(format!("{} individuals: at most {}", fit.len(), u32::MAX)));
        }
        Ok(DeviceFitness { fit: self.upload(fit, "uploading fitness")?, n: fit.len(), engine: self.id })
    }

    /// Copies indices to the device, checking each is below `bound`.
    pub fn upload_indices(&self, idx: &[u32], bound: usize) -> Result<DeviceIndices> {
        if let Some(i) = idx.iter().position(|&x| x as usize >= bound) {
            return Err(GpuError::Input(format!("index {} at {i} is not below {bound}", idx[i])));
        }
        Ok(DeviceIndices { idx: self.upload(idx, "uploading indices")?, n: idx.len(), bound, engine: self.id })
    }

    /// Reads indices back.
    pub fn download_indices(&self, idx: &DeviceIndices) -> Result<Vec<u32>> {
        if idx.n == 0 {
            return Ok(Vec::new());
        }
        let mut v = self.stream.clone_dtoh(&idx.idx).during(|| "reading indices".into())?;
        v.truncate(idx.n);
        Ok(v)
    }

    pub(super) fn check_fitness(&self, fit: &DeviceFitness) -> Result<()> {
        if fit.engine != self.id {
            return Err(GpuError::Input("the fitness was uploaded by another engine".into()));
        }
        if fit.n == 0 {
            return Err(GpuError::Input("selection from an empty population".into()));
        }
        Ok(())
    }

    pub(super) fn select_params(&self, fit: &DeviceFitness, n_slots: usize, seed: u64, generation: u32) -> Result<SelectParams> {
        if n_slots > u32::MAX as usize {
            return Err(GpuError::Input(format!("{n_slots} selections: at most {}", u32::MAX)));
        }
        Ok(SelectParams {
            n: fit.n as u32,
            n_slots: n_slots as u32,
            seed_lo: seed as u32,
            seed_hi: (seed >> 32) as u32,
            generation,
            ..SelectParams::default()
        })
    }

    /// `n_slots` tournament winners: slot `s` is `select::tournament` (or, with `distinct`,
    /// `select::tournament_distinct`) over the valid pool with `k` contestants, stream
    /// `(seed, generation, s, Select)`. For the tree loops' parents, `n_slots = 2P`: child `k`'s
    /// pair is slots `2k, 2k + 1`, which is the layout [`CudaEngine::breed_trees`] reads.
    #[allow(clippy::too_many_arguments)]
    pub fn select_tournament(
        &self,
        fit: &DeviceFitness,
        unique: Option<&DevicePopulation>,
        n_slots: usize,
        k: usize,
        distinct: bool,
        seed: u64,
        generation: u32,
    ) -> Result<DeviceIndices> {
        self.check_fitness(fit)?;
        if distinct && k > MAX_DISTINCT {
            return Err(GpuError::Config(format!("tournament of {k} without replacement: the GPU takes at most {MAX_DISTINCT}")));
        }
        let mut params = self.select_params(fit, n_slots, seed, generation)?;
        params.k = k.min(u32::MAX as usize) as u32;
        params.distinct = distinct as u32;
        let (pool, n_valid) = self.valid_pool(fit, unique, &params)?;
        let mut winners = self.alloc::<u32>(n_slots, false, "allocating winners")?;
        if n_slots > 0 {
            let f = self.function(&SELECT, &[], TOURNAMENT)?;
            let mut b = self.stream.launch_builder(&f);
            b.arg(&params).arg(&fit.fit).arg(&pool).arg(&n_valid).arg(&mut winners);
            // SAFETY: matches `grove_tournament(GroveSelectParams, const double* fit, const
            // unsigned* pool, const unsigned* n_valid, unsigned* winners)`: the pool holds
            // n_valid[0] <= P indices below P, written by grove_valid_pool just before on this
            // stream; draws index below n_valid (or P); winners holds n_slots entries; k <=
            // GROVE_MAX_DISTINCT without replacement (checked above).
            unsafe { b.launch(per_slot(n_slots)) }.during(|| format!("launching {TOURNAMENT}"))?;
        }
        Ok(DeviceIndices { idx: winners, n: n_slots, bound: fit.n, engine: self.id })
    }

    /// The valid individuals' indices in order (`select::valid_indices`) and their number; with
    /// `unique` (the population whose sizes break ties), only each fitness value's
    /// representative (`select::parent_pool`, [`Self::unique_groups`]).
    pub(super) fn valid_pool(&self, fit: &DeviceFitness, unique: Option<&DevicePopulation>, params: &SelectParams) -> Result<(CudaSlice<u32>, CudaSlice<u32>)> {
        let group = match unique {
            Some(pop) => Some(self.unique_groups(fit, pop, params)?),
            None => None,
        };
        let null: u64 = 0;
        let mut pool = self.alloc::<u32>(fit.n, false, "allocating the valid pool")?;
        let mut n_valid = self.alloc::<u32>(1, false, "allocating the pool size")?;
        // The stable compaction over tiles (scan.cuh): counts, offsets, indices.
        let n_tiles = fit.n.div_ceil(TILE as usize).max(1);
        let mut tiles = self.alloc::<u64>(n_tiles, false, "allocating the pool's tile counts")?;
        let grid = LaunchConfig { grid_dim: (n_tiles as u32, 1, 1), block_dim: (TILE_THREADS, 1, 1), shared_mem_bytes: 0 };
        let f = self.function(&SELECT, &[], VALID_COUNT)?;
        let mut b = self.stream.launch_builder(&f);
        b.arg(params).arg(&fit.fit);
        match &group {
            Some(g) => b.arg(g),
            None => b.arg(&null),
        };
        b.arg(&mut tiles);
        // SAFETY: matches `grove_valid_count(GroveSelectParams, const double* fit, const
        // unsigned* group, unsigned long long* tiles)`: a block of GROVE_TILE_THREADS threads per
        // tile of GROVE_TILE individuals; reads fit (and group, P entries, or null) below P =
        // params.n, writes its tile's entry (n_tiles held).
        unsafe { b.launch(grid) }.during(|| format!("launching {VALID_COUNT}"))?;
        let f = self.function(&SELECT, &[], VALID_SCAN)?;
        let mut b = self.stream.launch_builder(&f);
        b.arg(params).arg(&mut tiles).arg(&mut n_valid);
        let one = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (TILE_THREADS, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: matches `grove_valid_scan(GroveSelectParams, unsigned long long* tiles,
        // unsigned* n_valid)`: one block of GROVE_TILE_THREADS threads over the tiles written
        // just before on this stream; n_valid holds one.
        unsafe { b.launch(one) }.during(|| format!("launching {VALID_SCAN}"))?;
        let f = self.function(&SELECT, &[], VALID_POOL)?;
        let mut b = self.stream.launch_builder(&f);
        b.arg(params).arg(&fit.fit);
        match &group {
            Some(g) => b.arg(g),
            None => b.arg(&null),
        };
        b.arg(&tiles).arg(&mut pool);
        // SAFETY: matches `grove_valid_pool(GroveSelectParams, const double* fit, const unsigned*
        // group, const unsigned long long* tiles, unsigned* pool)`: a block per tile as above;
        // each index in the pool gets one place below n_valid <= P in pool (held).
        unsafe { b.launch(grid) }.during(|| format!("launching {VALID_POOL}"))?;
        Ok((pool, n_valid))
    }

    /// Each individual's group under [`crate::select::Diversity::Unique`]: the valid individual
    /// of fewest nodes (`pop`'s lengths), then lowest index, whose fitness equals its own bit for
    /// bit (itself where invalid). An open table of `2^bits >= 2P` slots keyed by the fitness's
    /// bits (`grove_unique_insert`, `grove_unique_groups`).
    fn unique_groups(&self, fit: &DeviceFitness, pop: &DevicePopulation, params: &SelectParams) -> Result<CudaSlice<u32>> {
        use cudarc::driver::DevicePtrMut;
        if pop.engine != self.id || pop.size() != fit.n {
            return Err(GpuError::Input(format!("unique parents of {} individuals from a population of {}", fit.n, pop.size())));
        }
        let n = fit.n;
        let bits = (2 * n.max(1)).next_power_of_two().trailing_zeros();
        let slots = 1usize << bits;
        let stream: &std::sync::Arc<_> = &self.stream;
        let mut keys = self.alloc::<u64>(slots, false, "allocating the table of unique parents")?;
        let mut vals = self.alloc::<u64>(slots, false, "allocating the table of unique parents")?;
        for t in [&mut keys, &mut vals] {
            let (ptr, _rec) = t.device_ptr_mut(stream);
            fill_words(ptr, 2 * slots, u32::MAX, stream, "the table of unique parents")?;
        }
        let lc = LaunchConfig { grid_dim: ((n as u32).div_ceil(THREADS).max(1), 1, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 };
        let f = self.function(&SELECT, &[], UNIQUE_INSERT)?;
        let mut b = self.stream.launch_builder(&f);
        b.arg(params).arg(&fit.fit).arg(&pop.len).arg(&bits).arg(&mut keys).arg(&mut vals);
        // SAFETY: matches `grove_unique_insert(GroveSelectParams, const double* fit, const
        // unsigned short* lens, unsigned bits, unsigned long long* keys, unsigned long long*
        // vals)`: fit and lens P = params.n entries (checked), keys and vals 2^bits >= 2P slots
        // filled with all ones just before (at most P keys go in, so a probe always ends).
        unsafe { b.launch(lc) }.during(|| format!("launching {UNIQUE_INSERT}"))?;
        let mut group = self.alloc::<u32>(n, false, "allocating the groups of unique parents")?;
        let f = self.function(&SELECT, &[], UNIQUE_GROUPS)?;
        let mut b = self.stream.launch_builder(&f);
        b.arg(params).arg(&fit.fit).arg(&bits).arg(&keys).arg(&vals).arg(&mut group);
        // SAFETY: matches `grove_unique_groups(GroveSelectParams, const double* fit, unsigned
        // bits, const unsigned long long* keys, const unsigned long long* vals, unsigned*
        // group)`: every valid fitness is in the table (inserted above), its value an index
        // below P in the low word; thread i < P writes group[i] of P.
        unsafe { b.launch(lc) }.during(|| format!("launching {UNIQUE_GROUPS}"))?;
        Ok(group)
    }

    /// Copies per-case errors `[P × n_cases]` (row `i`: individual `i`) to the device.
    pub fn upload_errors(&self, errors: &[f64], n_cases: usize) -> Result<DeviceErrors> {
        if n_cases == 0 || errors.len() % n_cases != 0 || n_cases > u32::MAX as usize {
            return Err(GpuError::Input(format!("{} errors are not rows of {n_cases} cases", errors.len())));
        }
        Ok(DeviceErrors { errors: self.upload(errors, "uploading errors")?, n: errors.len() / n_cases, n_cases, engine: self.id })
    }

    /// Lexicase's per-case epsilons, as `select::lexicase_epsilons(errors, n_cases,
    /// &valid_indices(fit), seed, generation)` computes them, read back (the parity tests').
    pub fn lexicase_epsilons(&self, errors: &DeviceErrors, fit: &DeviceFitness, unique: Option<&DevicePopulation>, seed: u64, generation: u32) -> Result<Vec<f64>> {
        let params = self.lexicase_params(errors.engine, errors.n, errors.n_cases, fit, 0, seed, generation)?;
        let (pool, n_valid) = self.valid_pool(fit, unique, &params)?;
        let mut guard = self.lexicase_scratch.lock().unwrap_or_else(|e| e.into_inner());
        let s = &mut *guard;
        self.epsilons_on_device(&errors.errors, errors.n_cases, &params, &pool, &n_valid, s)?;
        let eps = s.eps.as_ref().expect("just filled").slice(..errors.n_cases);
        let out = self.stream.clone_dtoh(&eps).during(|| "reading the epsilons".into())?;
        self.stream.synchronize().during(|| "running the epsilon kernels".into())?;
        Ok(out)
    }

    #[allow(clippy::too_many_arguments)]
    fn lexicase_params(&self, engine: u64, n: usize, n_cases: usize, fit: &DeviceFitness, n_slots: usize, seed: u64, generation: u32) -> Result<SelectParams> {
        self.check_fitness(fit)?;
        if engine != self.id || n != fit.n || n_cases == 0 || n_cases > u32::MAX as usize {
            return Err(GpuError::Input(format!("errors of {n} individuals and {n_cases} cases, fitness of {}", fit.n)));
        }
        let mut params = self.select_params(fit, n_slots, seed, generation)?;
        params.n_cases = n_cases as u32;
        Ok(params)
    }

    /// Queues `grove_epsilon_sample` and `grove_lexicase_epsilons`: the epsilons into `s.eps`
    /// (its first `n_cases` entries).
    fn epsilons_on_device(
        &self,
        errors: &CudaSlice<f64>,
        n_cases: usize,
        params: &SelectParams,
        pool: &CudaSlice<u32>,
        n_valid: &CudaSlice<u32>,
        s: &mut LexicaseScratch,
    ) -> Result<()> {
        let sample = grow_device(&self.stream, &mut s.sample, EPSILON_SAMPLE + 1, "allocating the epsilon sample")?;
        let (mut sample, mut count) = sample.split_at_mut(EPSILON_SAMPLE);
        let f = self.function(&SELECT, &[], EPSILON_SAMPLE_KERNEL)?;
        let mut b = self.stream.launch_builder(&f);
        b.arg(params).arg(pool).arg(n_valid).arg(&mut sample).arg(&mut count);
        let one = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (1, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: matches `grove_epsilon_sample(GroveSelectParams, const unsigned* pool, const
        // unsigned* n_valid, unsigned* sample, unsigned* count)`: the pool as grove_valid_pool
        // wrote it (n_valid[0] <= P entries), sample EPSILON_SAMPLE entries (the kernel writes
        // at most that many), count one.
        unsafe { b.launch(one) }.during(|| format!("launching {EPSILON_SAMPLE_KERNEL}"))?;
        let eps = grow_device(&self.stream, &mut s.eps, n_cases, "allocating the epsilons")?;
        let f = self.function(&SELECT, &[], LEXICASE_EPSILONS)?;
        let mut b = self.stream.launch_builder(&f);
        b.arg(params).arg(errors).arg(&mut sample).arg(&mut count).arg(eps);
        let lc = LaunchConfig { grid_dim: (n_cases as u32, 1, 1), block_dim: (EPSILON_THREADS, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: matches `grove_lexicase_epsilons(GroveSelectParams, const double* errors, const
        // unsigned* sample, const unsigned* count, double* eps)`: errors P × n_cases, the sample
        // count[0] <= EPSILON_SAMPLE individuals below P written just before; block c writes
        // eps[c] of at least n_cases.
        unsafe { b.launch(lc) }.during(|| format!("launching {LEXICASE_EPSILONS}"))?;
        Ok(())
    }

    /// Queues the clone groups of `errors` (`grove_error_groups_insert`, then `_verify`): each
    /// individual's lowest-index twin with the same errors bit for bit, `[P]`. The hash table
    /// has 2^bits ≥ 2P slots.
    fn error_groups(&self, errors: &CudaSlice<f64>, params: &SelectParams, s: &mut LexicaseScratch) -> Result<CudaSlice<u32>> {
        use cudarc::driver::DevicePtrMut;
        let n = params.n as usize;
        let bits = (2 * n.max(1)).next_power_of_two().trailing_zeros();
        let slots = 1usize << bits;
        let stream: &std::sync::Arc<_> = &self.stream;
        let keys = grow_device(&self.stream, &mut s.keys, slots, "allocating the clone table")?;
        {
            let (ptr, _rec) = keys.device_ptr_mut(stream);
            fill_words(ptr, 2 * slots, 0, stream, "the clone table")?;
        }
        let vals = grow_device(&self.stream, &mut s.vals, slots, "allocating the clone table")?;
        {
            let (ptr, _rec) = vals.device_ptr_mut(stream);
            fill_words(ptr, slots, u32::MAX, stream, "the clone table")?;
        }
        let lc = LaunchConfig { grid_dim: ((n as u32).div_ceil(THREADS).max(1), 1, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 };
        let f = self.function(&SELECT, &[], ERROR_GROUPS_INSERT)?;
        let mut b = self.stream.launch_builder(&f);
        b.arg(params).arg(errors).arg(&bits).arg(&mut *keys).arg(&mut *vals);
        // SAFETY: matches `grove_error_groups_insert(GroveSelectParams, const double* errors,
        // unsigned bits, unsigned long long* keys, unsigned* vals)`: errors P × n_cases, keys
        // and vals 2^bits >= 2P entries (at most P keys go in, so a probe always ends), zeroed
        // and filled just before; thread i < P reads row i.
        unsafe { b.launch(lc) }.during(|| format!("launching {ERROR_GROUPS_INSERT}"))?;
        let mut group = self.alloc::<u32>(n, false, "allocating the clone groups")?;
        let f = self.function(&SELECT, &[], ERROR_GROUPS_VERIFY)?;
        let mut b = self.stream.launch_builder(&f);
        b.arg(params).arg(errors).arg(&bits).arg(&*keys).arg(&*vals).arg(&mut group);
        // SAFETY: matches `grove_error_groups_verify(GroveSelectParams, const double* errors,
        // unsigned bits, const unsigned long long* keys, const unsigned* vals, unsigned* group)`:
        // every row's hash is in the table (inserted above), its value an index below P;
        // thread i < P writes group[i] of P.
        unsafe { b.launch(lc) }.during(|| format!("launching {ERROR_GROUPS_VERIFY}"))?;
        Ok(group)
    }

    /// `n_slots` epsilon-lexicase selections: slot `s` is `select::epsilon_lexicase(errors,
    /// n_cases, eps, &valid_indices(fit), k_pool, seed, generation, s)` with `eps` from
    /// [`Self::lexicase_epsilons`], all on the device: the pool taken from `fit` (invalid
    /// individuals never selected while a valid one exists).
    pub fn select_lexicase(
        &self,
        errors: &DeviceErrors,
        fit: &DeviceFitness,
        unique: Option<&DevicePopulation>,
        k_pool: usize,
        n_slots: usize,
        seed: u64,
        generation: u32,
    ) -> Result<DeviceIndices> {
        let params = self.lexicase_params(errors.engine, errors.n, errors.n_cases, fit, n_slots, seed, generation)?;
        let mut guard = self.lexicase_scratch.lock().unwrap_or_else(|e| e.into_inner());
        self.lexicase_on_device(&errors.errors, params, fit, unique, k_pool, &mut guard)
    }

    /// [`Self::select_lexicase`] on errors `[P × params.n_cases]` (in `errors`, or in the
    /// scratch's own buffer when `None`). Where a group's candidates and their errors fit in a
    /// block's shared memory ([`lexicase_staged_shape`]), a block serves each group of `k_pool`
    /// selections (`grove_lexicase_staged`). Else each selection, a warp, keeps a candidate list
    /// of `min(P, k_pool)` entries (`P` when `k_pool` is 0) and, past [`LEXICASE_CASES`] cases,
    /// its case order; slots run in batches of at most 1 GiB of such lists, the buffers kept
    /// in `s`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn lexicase_on_device(
        &self,
        errors: &CudaSlice<f64>,
        mut params: SelectParams,
        fit: &DeviceFitness,
        unique: Option<&DevicePopulation>,
        k_pool: usize,
        s: &mut LexicaseScratch,
    ) -> Result<DeviceIndices> {
        // A pool at least the population's size is the whole population (P < 2^32 here).
        params.k = k_pool.min(u32::MAX as usize) as u32;
        let (n_slots, n_cases) = (params.n_slots as usize, params.n_cases as usize);
        let (pool, n_valid) = self.valid_pool(fit, unique, &params)?;
        self.epsilons_on_device(errors, n_cases, &params, &pool, &n_valid, s)?;
        let group = self.error_groups(errors, &params, s)?;
        let mut winners = self.alloc::<u32>(n_slots, false, "allocating winners")?;
        let eps = s.eps.as_ref().expect("filled above");
        if let Some((threads, bytes)) = lexicase_staged_shape(k_pool, fit.n, n_cases, self.shared_per_block as usize) {
            if n_slots > 0 {
                let f = self.function(&SELECT, &[], LEXICASE_STAGED)?;
                if bytes > 48 << 10 {
                    let attr = cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
                    f.set_attribute(attr, bytes as i32).during(|| format!("asking for {bytes} bytes of shared memory a block of {LEXICASE_STAGED}"))?;
                }
                let groups = (n_slots - 1) / k_pool + 1;
                let p = SelectParams { slot_offset: 0, ..params };
                let mut b = self.stream.launch_builder(&f);
                b.arg(&p).arg(errors).arg(eps).arg(&pool).arg(&n_valid).arg(&group).arg(&mut winners);
                let lc = LaunchConfig { grid_dim: (groups as u32, 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: bytes as u32 };
                // SAFETY: matches `grove_lexicase_staged(GroveSelectParams, const double* errors,
                // const double* eps, const unsigned* pool, const unsigned* n_valid, const unsigned*
                // group, unsigned* winners)`: errors P × n_cases, eps n_cases, group P entries
                // below P, the pool (n_valid[0] <= P indices below P) written before on this
                // stream; block q stages at most min(k_pool, P) candidates in `bytes` of shared
                // memory (lexicase_staged_shape, within the device's limit) and writes the winners
                // of slots q·k_pool .. min((q + 1)·k_pool, n_slots).
                unsafe { b.launch(lc) }.during(|| format!("launching {LEXICASE_STAGED}"))?;
            }
            return Ok(DeviceIndices { idx: winners, n: n_slots, bound: fit.n, engine: self.id });
        }
        // Each selection's candidate list (the pool, or k_pool drawn from it) and, where its
        // cases do not fit in shared memory, its case order.
        let width = if k_pool == 0 { fit.n } else { k_pool.min(fit.n) };
        let order_words = if n_cases > LEXICASE_CASES { n_cases } else { 0 };
        let per_slot_bytes = 4 * (width + order_words);
        let batch = ((1usize << 30) / per_slot_bytes).clamp(1, n_slots.max(1));
        let order = grow_device(&self.stream, &mut s.order, (batch * order_words).max(1), "allocating case orders")?;
        let cand = grow_device(&self.stream, &mut s.cand, batch * width, "allocating candidates")?;
        let f = self.function(&SELECT, &[], LEXICASE)?;
        let mut start = 0;
        while start < n_slots {
            let count = batch.min(n_slots - start);
            let p = SelectParams { n_slots: count as u32, slot_offset: start as u32, stride: width as u32, ..params };
            let mut out = winners.slice_mut(start..start + count);
            let mut b = self.stream.launch_builder(&f);
            b.arg(&p).arg(errors).arg(eps).arg(&pool).arg(&n_valid).arg(&group).arg(&mut *order).arg(&mut *cand).arg(&mut out);
            let threads = LANES * LEXICASE_GROUPS;
            let lc = LaunchConfig { grid_dim: ((count as u32).div_ceil(LEXICASE_GROUPS), 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: 0 };
            // SAFETY: matches `grove_lexicase(GroveSelectParams, const double* errors, const
            // double* eps, const unsigned* pool, const unsigned* n_valid, const unsigned* group,
            // unsigned* order, unsigned* cand, unsigned* winners)`: errors holds P × n_cases,
            // eps n_cases, group P entries below P (error_groups); the pool (n_valid[0] <= P
            // indices below P) was written just before on this stream; selection g < count
            // (a group of LANES threads, LEXICASE_GROUPS a block, the block's shared case orders
            // sized for that) uses entries g × width .. + width of cand (the pool in full only
            // when it holds at most width, else k_pool = width draws), g × n_cases .. + n_cases of
            // order where n_cases > LEXICASE_CASES (buffers of batch × width and batch ×
            // n_cases), and writes winners[start + g].
            unsafe { b.launch(lc) }.during(|| format!("launching {LEXICASE}"))?;
            start += count;
        }
        Ok(DeviceIndices { idx: winners, n: n_slots, bound: fit.n, engine: self.id })
    }

    /// Every individual ranked by fitness, best first, ties by index, invalid ones last:
    /// `select::elite(fit, P)`. Its first `n` entries are the elite; it is the `ranked` list of
    /// truncation selection. O(P²) comparisons (10¹⁰ at P = 10⁵; not yet timed).
    pub fn rank(&self, fit: &DeviceFitness) -> Result<DeviceIndices> {
        self.check_fitness(fit)?;
        let params = self.select_params(fit, 0, 0, 0)?;
        let mut ranked = self.alloc::<u32>(fit.n, false, "allocating the ranking")?;
        let f = self.function(&SELECT, &[], RANK)?;
        let mut b = self.stream.launch_builder(&f);
        b.arg(&params).arg(&fit.fit).arg(&mut ranked);
        let lc = LaunchConfig { grid_dim: ((fit.n as u32).div_ceil(RANK_TILE), 1, 1), block_dim: (RANK_TILE, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: matches `grove_rank(GroveSelectParams, const double* fit, unsigned* ranked)`:
        // fit and ranked hold P entries; ranks form a permutation of 0..P (a strict total
        // order), so each thread writes its own entry.
        unsafe { b.launch(lc) }.during(|| format!("launching {RANK}"))?;
        Ok(DeviceIndices { idx: ranked, n: fit.n, bound: fit.n, engine: self.id })
    }

    /// `n_slots` truncation selections from a ranking ([`Self::rank`]): slot `s` is
    /// `select::truncation(ranked, rate, seed, generation, s)`.
    pub fn select_truncation(&self, ranked: &DeviceIndices, n_slots: usize, rate: f64, seed: u64, generation: u32) -> Result<DeviceIndices> {
        if ranked.engine != self.id || ranked.n == 0 || ranked.n != ranked.bound {
            return Err(GpuError::Input("truncation needs a whole ranking made by this engine".into()));
        }
        if n_slots > u32::MAX as usize {
            return Err(GpuError::Input(format!("{n_slots} selections: at most {}", u32::MAX)));
        }
        let n_top = crate::select::truncation_size(ranked.n, rate);
        let params = SelectParams {
            n: ranked.n as u32,
            n_slots: n_slots as u32,
            n_top: n_top as u32,
            seed_lo: seed as u32,
            seed_hi: (seed >> 32) as u32,
            generation,
            ..SelectParams::default()
        };
        let mut winners = self.alloc::<u32>(n_slots, false, "allocating winners")?;
        if n_slots > 0 {
            let f = self.function(&SELECT, &[], TRUNCATION)?;
            let mut b = self.stream.launch_builder(&f);
            b.arg(&params).arg(&ranked.idx).arg(&mut winners);
            // SAFETY: matches `grove_truncation(GroveSelectParams, const unsigned* ranked,
            // unsigned* winners)`: draws index below n_top <= P entries of ranked; winners
            // holds n_slots entries.
            unsafe { b.launch(per_slot(n_slots)) }.during(|| format!("launching {TRUNCATION}"))?;
        }
        Ok(DeviceIndices { idx: winners, n: n_slots, bound: ranked.bound, engine: self.id })
    }
}

/// Radix-select passes of [`CudaEngine::elite`]: eight bits of the 96-bit key each.
const TOPK_PASSES: u32 = 12;
/// Most blocks of the grid-stride top-k kernels.
const TOPK_BLOCKS: u32 = 1024;

impl CudaEngine {
    /// `select::elite(fit, k)` on the device: the `k` best (lowest key, ties to the lower
    /// index; invalid ones last), best first. Launches only (no wait): a radix select of twelve
    /// passes over `P` and an ordering of the `k` in O(k²), so it suits the few hundred rows of a
    /// migration at any `P` (at `k` near `P`, [`Self::rank`] is the better tool).
    pub fn elite(&self, fit: &DeviceFitness, k: usize) -> Result<DeviceIndices> {
        Ok(self.top_k(fit, k, 0)?.0)
    }

    /// `islands::worst(fit, k)` on the device: the `k` worst, worst first (the reverse of
    /// [`Self::elite`]'s full order).
    pub fn worst(&self, fit: &DeviceFitness, k: usize) -> Result<DeviceIndices> {
        Ok(self.top_k(fit, k, 1)?.0)
    }

    /// [`Self::elite`] and [`Self::worst`] in the same launches (who leaves an island and whose
    /// rows its immigrants replace).
    pub fn elite_and_worst(&self, fit: &DeviceFitness, k: usize) -> Result<(DeviceIndices, DeviceIndices)> {
        let (best, worst) = self.top_k(fit, k, 2)?;
        Ok((best, worst.expect("mode 2 gives both")))
    }

    /// The radix select of `grove_topk_*`: mode 0 the best, 1 the worst, 2 both (the second
    /// result).
    fn top_k(&self, fit: &DeviceFitness, k: usize, mode: u32) -> Result<(DeviceIndices, Option<DeviceIndices>)> {
        self.check_fitness(fit)?;
        let n = fit.n;
        let k = k.min(n);
        let slots = if mode == 2 { 2 } else { 1 };
        let split = |out: CudaSlice<u32>| -> Result<(DeviceIndices, Option<DeviceIndices>)> {
            let idx = |s: CudaSlice<u32>| DeviceIndices { idx: s, n: k, bound: n, engine: self.id };
            if slots == 1 {
                return Ok((idx(out), None));
            }
            let second = self.stream.clone_dtod(&out.slice(k.max(1)..2 * k.max(1))).during(|| "splitting the chosen rows".into())?;
            Ok((idx(out), Some(idx(second))))
        };
        let mut out = self.alloc::<u32>(slots * k.max(1), false, "allocating the chosen rows")?;
        if k == 0 {
            return split(out);
        }
        if n > u32::MAX as usize / 2 || slots * k > u32::MAX as usize / 2 {
            return Err(GpuError::Input(format!("{n} individuals: the top-k select takes at most {}", u32::MAX / 2)));
        }
        // A GroveTopk (32 bytes) and 256 bins per slot; the k keys and rows of each slot in the
        // order collected.
        let mut state = self.alloc::<u64>(4 * slots, false, "allocating the top-k state")?;
        let mut hist = self.alloc::<u32>(256 * slots + 1, false, "allocating the top-k histogram")?;
        let mut keys = self.alloc::<u64>(slots * k, false, "allocating the top-k keys")?;
        let mut rows = self.alloc::<u32>(slots * k, false, "allocating the top-k rows")?;
        let (n32, k32) = (n as u32, k as u32);
        let grid = LaunchConfig { grid_dim: (n32.div_ceil(THREADS).clamp(1, TOPK_BLOCKS), 1, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 };
        let one = |threads: u32| LaunchConfig { grid_dim: (1, 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: 0 };
        let f = self.function(&SELECT, &[], TOPK_INIT)?;
        let mut b = self.stream.launch_builder(&f);
        b.arg(&k32).arg(&mode).arg(&mut state).arg(&mut hist);
        // SAFETY: matches `grove_topk_init(unsigned k, unsigned mode, GroveTopk* st, unsigned*
        // hist)`: state holds a 32-byte GroveTopk per slot, hist 256 words per slot and the count.
        unsafe { b.launch(one(256)) }.during(|| format!("launching {TOPK_INIT}"))?;
        let pass_f = self.function(&SELECT, &[], TOPK_PASS)?;
        for d in 0..TOPK_PASSES {
            let mut b = self.stream.launch_builder(&pass_f);
            b.arg(&n32).arg(&mode).arg(&d).arg(&fit.fit).arg(&mut state).arg(&mut hist);
            // SAFETY: matches `grove_topk_pass(unsigned n, unsigned mode, unsigned d, const
            // double* fit, GroveTopk* st, unsigned* hist)`: fit holds n entries (checked), hist
            // 256 words per slot (each bin added to atomically) and then the blocks' count; the
            // last block to count updates st.
            unsafe { b.launch(grid) }.during(|| format!("launching {TOPK_PASS}"))?;
        }
        let f = self.function(&SELECT, &[], TOPK_COLLECT)?;
        let mut b = self.stream.launch_builder(&f);
        b.arg(&n32).arg(&mode).arg(&k32).arg(&fit.fit).arg(&mut state).arg(&mut keys).arg(&mut rows);
        // SAFETY: matches `grove_topk_collect(unsigned n, unsigned mode, unsigned k, const double*
        // fit, GroveTopk* st, unsigned long long* keys, unsigned* idx)`: after the twelve passes
        // each slot's prefix is the k-th of n distinct keys, so exactly k keys are at or below it
        // and the slot's atomic counter hands out entries q k .. (q + 1) k of keys and rows.
        unsafe { b.launch(grid) }.during(|| format!("launching {TOPK_COLLECT}"))?;
        let f = self.function(&SELECT, &[], TOPK_ORDER)?;
        let mut b = self.stream.launch_builder(&f);
        b.arg(&k32).arg(&mode).arg(&keys).arg(&rows).arg(&mut out);
        // SAFETY: matches `grove_topk_order(unsigned k, unsigned mode, const unsigned long long*
        // keys, const unsigned* idx, unsigned* out)`: keys, rows and out hold k entries per slot;
        // a slot's keys (with their rows) are distinct, so its ranks are a permutation of 0..k.
        unsafe { b.launch(per_slot(slots * k)) }.during(|| format!("launching {TOPK_ORDER}"))?;
        split(out)
    }

    /// The fitness of rows `idx[..n]`, in that order (a migrant's fitness travels with it).
    pub fn gather_fitness(&self, fit: &DeviceFitness, idx: &DeviceIndices, n: usize) -> Result<DeviceFitness> {
        self.check_fitness(fit)?;
        if idx.engine != self.id || n > idx.n || idx.bound > fit.n {
            return Err(GpuError::Input(format!("gathering {n} of {} fitness values by {} indices below {}", fit.n, idx.n, idx.bound)));
        }
        let mut out = self.alloc::<f64>(n, false, "allocating gathered fitness")?;
        self.words(GATHER_WORDS, n, 2, &idx.idx, &fit.fit, &mut out)?;
        Ok(DeviceFitness { fit: out, n, engine: self.id })
    }

    /// Rows `idx[..n]` of `dst` take `src`'s values in order (immigrants keep the fitness they
    /// were evaluated with). `idx`'s entries are distinct.
    pub fn scatter_fitness(&self, src: &DeviceFitness, idx: &DeviceIndices, n: usize, dst: &mut DeviceFitness) -> Result<()> {
        self.check_fitness(src)?;
        self.check_fitness(dst)?;
        if idx.engine != self.id || n > idx.n || n > src.n || idx.bound > dst.n {
            return Err(GpuError::Input(format!("scattering {n} of {} fitness values by {} indices below {} into {}", src.n, idx.n, idx.bound, dst.n)));
        }
        self.words(SCATTER_WORDS, n, 2, &idx.idx, &src.fit, &mut dst.fit)
    }

    /// `grove_gather_words` / `grove_scatter_words` over rows of `words` 32-bit words; the
    /// callers check `idx` and the buffers' rows.
    pub(super) fn words<S: cudarc::driver::DeviceRepr, D: cudarc::driver::DeviceRepr>(
        &self,
        kernel: &'static str,
        n: usize,
        words: u32,
        idx: &CudaSlice<u32>,
        src: &CudaSlice<S>,
        dst: &mut CudaSlice<D>,
    ) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        let total = n as u64 * u64::from(words);
        if total > u64::from(u32::MAX) {
            return Err(GpuError::Input(format!("{n} rows of {words} words: too many for one launch")));
        }
        let f = self.function(&SELECT, &[], kernel)?;
        let n32 = n as u32;
        let mut b = self.stream.launch_builder(&f);
        b.arg(&n32).arg(&words).arg(idx).arg(src).arg(dst);
        // SAFETY: matches `grove_gather_words` / `grove_scatter_words(unsigned n, unsigned
        // words, const unsigned* idx, const unsigned* src, unsigned* dst)`: the callers check
        // that idx holds n entries below the indexed buffer's rows and that the other holds n
        // rows; a row is `words` 32-bit words of the element type.
        unsafe { b.launch(per_slot(total as usize)) }.during(|| format!("launching {kernel}"))?;
        Ok(())
    }
}

/// One thread per slot.
fn per_slot(n: usize) -> LaunchConfig {
    LaunchConfig { grid_dim: ((n as u32).div_ceil(THREADS), 1, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_staged_lexicase_block_fits_its_shared_memory_or_is_not_used() {
        let h100 = 232_448;
        // Pools of 256 over 68 cases: a thread a slot, 176,128 bytes.
        assert_eq!(lexicase_staged_shape(256, 1_000_000, 68, h100), Some((256, 256 * 68 * 8 + 256 * 8 + 256 * 68 * 2)));
        // Over 103 cases they need 259 KiB: the warp kernel (fewer threads than slots measured slower).
        assert_eq!(lexicase_staged_shape(256, 1_000_000, 103, h100), None);
        // A population smaller than the pool stages only its own rows; a pool of 40 has 64 threads.
        assert_eq!(lexicase_staged_shape(40, 30, 10, h100), Some((64, 30 * 10 * 8 + 30 * 8 + 64 * 10 * 2)));
        // Not used: the whole population, pools above 256, 65,536 cases or more.
        assert_eq!(lexicase_staged_shape(0, 1000, 10, h100), None);
        assert_eq!(lexicase_staged_shape(257, 1000, 10, h100), None);
        assert_eq!(lexicase_staged_shape(64, 1000, 1 << 16, usize::MAX), None);
    }
}
