//! Variation on the GPU: the host side of `kernels/vary.cu`, twin of [`crate::program::vary`]
//! (the ten tree operators and [`breed`](crate::program::breed)) and [`crate::genome::vary`]
//! (GE crossover and int-flip), and the row copies (gather, scatter) of `vary.cu`. Populations
//! live in device buffers ([`DevicePopulation`], [`DeviceGenomes`], in [`super::population`]);
//! parents go in, children come out in another buffer (double-buffered: the caller swaps the
//! two each generation), and nothing is copied to the host.
//!
//! Children equal the CPU's bitwise: [`CudaEngine::breed_trees`] makes what `breed` makes from
//! the same parents and pairs, [`CudaEngine::vary_trees`] what one [`Operator`] makes, and the
//! GE kernels what `crossover` and `int_flip` make (`tests/cuda_vary.rs` checks each).

use cudarc::driver::{CudaSlice, CudaView, LaunchConfig, PushKernelArg};

use super::error::{During, GpuError, Result};
use super::kernels::{
    BREED_TREES, GATHER_GENOMES, INIT_TREES, GATHER_TREES, GE_CROSSOVER, GE_INT_FLIP, SCATTER_GENOMES, SCATTER_TREES, LANES,
    RNG_DRAWS, VARY, VARY_OP, op_code,
};
use super::params::{GeParams, MAX_CROSSOVERS, MAX_MUTATIONS, MapOut, VaryParams};
use super::map::DeviceMapOutput;
use super::population::{DeviceGenomes, DevicePopulation};
use super::memory::zeros;
use super::select::DeviceIndices;
use super::CudaEngine;
use crate::genome::vary::GeVaryConfig;
use crate::program::init::{InitMethod, TreeSpec};
use crate::program::vary::{Bred, BreedConfig, Crossover, Mutation, Operator, Outcome, VaryConfig, cumulative};
use crate::rng::Purpose;

/// Threads per block of the variation kernels (a multiple of [`LANES`]; `grove_breed_trees`
/// is bounded for blocks of 128 in vary.cu).
const THREADS: u32 = 128;
const _: () = assert!(THREADS % LANES == 0);

/// What [`CudaEngine::breed_trees`] did, on the device: one code per child and outcome counts.
pub struct DeviceBred {
    codes: CudaSlice<u32>,
    pub(super) counts: CudaSlice<u32>,
    n: usize,
}

/// Outcome counts of one generation's breeding, indexed by [`outcome_code`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BredCounts {
    /// Children made by crossover, by outcome.
    pub crossovers: [u32; 4],
    /// Children mutated, by outcome.
    pub mutations: [u32; 4],
}

impl BredCounts {
    /// Operators whose child was oversized (and replaced by its parent).
    pub fn oversized(&self) -> u32 {
        self.crossovers[2] + self.mutations[2]
    }
    /// Counts as `grove_breed_trees` leaves them: crossover outcomes, then mutation outcomes.
    pub fn from_raw(counts: &[u32]) -> Self {
        let mut c = Self::default();
        c.crossovers.copy_from_slice(&counts[..4]);
        c.mutations.copy_from_slice(&counts[4..8]);
        c
    }
    /// Counts from per-child results (the CPU side's, for comparison).
    pub fn from_bred(bred: &[Bred]) -> Self {
        let mut c = Self::default();
        for b in bred {
            if let Some((_, o)) = b.crossover {
                c.crossovers[outcome_code(o) as usize] += 1;
            }
            if let Some((_, o)) = b.mutation {
                c.mutations[outcome_code(o) as usize] += 1;
            }
        }
        c
    }
}

/// An [`Outcome`] as vary.cu codes it (`GROVE_CHANGED` 0 .. `GROVE_NO_ROOM_FOR_OUTPUTS` 3).
pub fn outcome_code(o: Outcome) -> u32 {
    match o {
        Outcome::Changed => 0,
        Outcome::Unchanged => 1,
        Outcome::Oversized => 2,
        Outcome::NoRoomForOutputs => 3,
    }
}

/// The [`Outcome`] of a vary.cu code.
pub fn outcome_of(code: u32) -> Result<Outcome> {
    [Outcome::Changed, Outcome::Unchanged, Outcome::Oversized, Outcome::NoRoomForOutputs]
        .get(code as usize)
        .copied()
        .ok_or_else(|| GpuError::Input(format!("vary kernel returned outcome {code}")))
}

/// One `grove_breed_trees` code as a [`Bred`], the operators named from `mix`'s lists:
/// `(crossover entry + 1 or 0) | crossover outcome << 8 | (mutation entry + 1 or 0) << 16 |
/// mutation outcome << 24`.
pub fn decode_bred(code: u32, mix: &BreedConfig) -> Result<Bred> {
    let entry = |e: u32, len: usize| -> Result<Option<usize>> {
        match e {
            0 => Ok(None),
            e if (e as usize) <= len => Ok(Some(e as usize - 1)),
            e => Err(GpuError::Input(format!("{BREED_TREES} returned operator entry {e} of {len}"))),
        }
    };
    let crossover: Option<(Crossover, Outcome)> = match entry(code & 0xff, mix.crossovers.len())? {
        Some(i) => Some((mix.crossovers[i].0, outcome_of((code >> 8) & 0xff)?)),
        None => None,
    };
    let mutation: Option<(Mutation, Outcome)> = match entry((code >> 16) & 0xff, mix.mutations.len())? {
        Some(i) => Some((mix.mutations[i].0, outcome_of(code >> 24)?)),
        None => None,
    };
    Ok(Bred { crossover, mutation })
}

/// Buffers the tree kernels work in, kept by the engine and grown as needed: a population of
/// `2P` rows (crossover results before mutation; new material) and the generator's stack.
#[derive(Default)]
pub(super) struct Scratch {
    pop: Option<DevicePopulation>,
    pending: Option<CudaSlice<u32>>,
    /// The function set and constants last uploaded, kept while they stay the same (a run
    /// uploads them once, not once per generation).
    tables: Option<SpecTables>,
}

/// A spec's function set and constants on the device, with the host copies they came from.
struct SpecTables {
    functions_host: Vec<u8>,
    constants_host: Vec<f32>,
    functions: CudaSlice<u8>,
    constants: CudaSlice<f32>,
}

/// One thread per item.
fn per_item(n: usize) -> LaunchConfig {
    LaunchConfig { grid_dim: ((n as u32).div_ceil(THREADS), 1, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 }
}

/// The tree kernels index their threads in 32 bits: at most `u32::MAX / LANES` groups.
fn check_groups(n: usize, what: &str) -> Result<()> {
    if n > (u32::MAX / LANES) as usize {
        return Err(GpuError::Input(format!("{n} {what}: too many (at most {})", u32::MAX / LANES)));
    }
    Ok(())
}

/// A launch of `n` groups of [`LANES`] threads (the tree kernels: a group per child or tree).
fn per_group(n: usize) -> LaunchConfig {
    let threads = n as u64 * LANES as u64;
    LaunchConfig { grid_dim: (threads.div_ceil(THREADS as u64) as u32, 1, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 }
}

/// The tree kernels' parameters for `n` children of length `max_len`, operator `op`
/// ([`op_code`], for `grove_vary_op`) and mix `mix` (for `grove_breed_trees`): the spec and
/// settings resolved as the CPU resolves them (grow's leaf probability, cumulative weights).
pub fn vary_params(n: usize, max_len: usize, vary: &VaryConfig, mix: Option<&BreedConfig>, seed: u64, generation: u32, op: u32) -> Result<VaryParams> {
    vary.check().map_err(|e| GpuError::Config(format!("variation settings: {e}")))?;
    let spec = &vary.spec;
    if spec.max_len != max_len {
        return Err(GpuError::Input(format!("the spec has L = {}, the populations {max_len}", spec.max_len)));
    }
    let mut p = VaryParams {
        n_children: n as u32,
        max_len: max_len as u32,
        n_outputs: spec.n_outputs as u32,
        seed_lo: seed as u32,
        seed_hi: (seed >> 32) as u32,
        generation,
        n_functions: spec.functions.len() as u32,
        n_vars: spec.n_vars,
        n_constants: spec.constants.len() as u32,
        has_range: spec.const_range.is_some() as u32,
        range_lo: spec.const_range.map_or(0.0, |r| r.0),
        range_hi: spec.const_range.map_or(0.0, |r| r.1),
        p_const: spec.p_const,
        p_leaf_grow: spec.grow_leaf_prob(),
        p_out: spec.p_out,
        p_leaf: vary.p_leaf,
        subtree_lo: vary.subtree_depth.0,
        subtree_hi: vary.subtree_depth.1,
        p_point: vary.p_point,
        sigma: vary.sigma,
        p_constant: vary.p_constant,
        op,
        init_method: match spec.method {
            InitMethod::Grow => 0,
            InitMethod::Full => 1,
            InitMethod::HalfAndHalf => 2,
        },
        min_depth: spec.min_depth,
        max_depth: spec.max_depth,
        ..VaryParams::default()
    };
    if let Some(mix) = mix {
        mix.check().map_err(|e| GpuError::Config(format!("breeding settings: {e}")))?;
        if mix.crossovers.len() > MAX_CROSSOVERS || mix.mutations.len() > MAX_MUTATIONS {
            return Err(GpuError::Config(format!(
                "{} crossovers and {} mutations listed: the GPU takes at most {MAX_CROSSOVERS} and {MAX_MUTATIONS}",
                mix.crossovers.len(),
                mix.mutations.len()
            )));
        }
        p.p_crossover = mix.p_crossover;
        p.p_mutation = mix.p_mutation;
        p.n_crossovers = mix.crossovers.len() as u32;
        p.n_mutations = mix.mutations.len() as u32;
        for (i, (c, (x, _))) in cumulative(mix.crossovers.iter().map(|c| c.1)).into_iter().zip(&mix.crossovers).enumerate() {
            p.cum_x[i] = c;
            p.kind_x[i] = op_code(Operator::Crossover(*x));
        }
        for (i, (c, (m, _))) in cumulative(mix.mutations.iter().map(|m| m.1)).into_iter().zip(&mix.mutations).enumerate() {
            p.cum_m[i] = c;
            p.kind_m[i] = op_code(Operator::Mutation(*m));
        }
    }
    Ok(p)
}

/// Where the GE kernels read each genome's used codons.
#[derive(Clone, Copy)]
pub enum UsedCodons<'a> {
    /// `[P]` counts.
    Counts(&'a CudaSlice<u32>),
    /// The mapper's results for the same genomes ([`CudaEngine::map_launch`]): their
    /// `used_codons`, read in place. Rows the mapper left to the CPU (a stack overflow,
    /// `MapStatus::StackOverflow`) have no count there; map those on the host and pass counts.
    Mapped(&'a DeviceMapOutput),
}

impl UsedCodons<'_> {
    /// Entries available.
    fn len(&self) -> usize {
        match self {
            UsedCodons::Counts(c) => c.len(),
            UsedCodons::Mapped(m) => m.n,
        }
    }
    /// A `u32` view whose entry `i * stride` is genome `i`'s count, and the stride.
    fn view(&self) -> Result<(CudaView<'_, u32>, u32)> {
        const WORDS: usize = size_of::<MapOut>() / 4;
        match self {
            UsedCodons::Counts(c) => Ok((c.slice(..), 1)),
            UsedCodons::Mapped(m) => {
                // SAFETY: MapOut is #[repr(C)] of five u32 fields (asserted in kernels.rs), so
                // its buffer is 5 n valid u32 words; used_codons is word 1 of each record.
                let words = unsafe { m.out.transmute::<u32>(WORDS * m.out.len()) }
                    .ok_or_else(|| GpuError::Input("map results cannot be read as words".into()))?;
                Ok((words.slice(1..), WORDS as u32))
            }
        }
    }
}

/// The GE kernels' parameters: `n_pairs` crossovers into children arrays of `n_rows` rows of
/// `capacity` codons, the first child at `first_row`.
pub fn ge_params(n_pairs: usize, n_rows: usize, capacity: usize, first_row: usize, cfg: &GeVaryConfig, seed: u64, generation: u32) -> Result<GeParams> {
    if n_rows > u32::MAX as usize || capacity > u32::MAX as usize || n_pairs > u32::MAX as usize || first_row > n_rows {
        return Err(GpuError::Input(format!("first child row {first_row} of {n_rows} genomes of capacity {capacity}")));
    }
    if cfg.codon_size == 0 {
        return Err(GpuError::Config("codon_size is 0".into()));
    }
    Ok(GeParams {
        n_pairs: n_pairs as u32,
        capacity: capacity as u32,
        first_row: first_row as u32,
        n_rows: n_rows as u32,
        seed_lo: seed as u32,
        seed_hi: (seed >> 32) as u32,
        generation,
        within_used: cfg.within_used as u32,
        p_crossover: cfg.crossover,
        p_mutation: cfg.mutation,
        codon_size: cfg.codon_size,
        used_stride: 1,
        per_used: cfg.int_flip_rate_code(),
    })
}

impl DeviceBred {
    /// Children bred.
    pub fn len(&self) -> usize {
        self.n
    }
    /// True when none were.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }
}

impl CudaEngine {
    /// Scratch for `n` children of length `max_len`, grown when too small.
    fn vary_scratch<'a>(&self, guard: &'a mut Scratch, n: usize, max_len: usize) -> Result<(&'a mut DevicePopulation, &'a mut CudaSlice<u32>)> {
        let fits = guard.pop.as_ref().is_some_and(|p| p.n >= 2 * n && p.max_len == max_len);
        if !fits {
            guard.pop = Some(self.alloc_population(2 * n, max_len, 0)?);
            guard.pending = Some(zeros(&self.stream, n * max_len, "allocating the generator's stack")?);
        }
        match (guard.pop.as_mut(), guard.pending.as_mut()) {
            (Some(p), Some(s)) => Ok((p, s)),
            _ => Err(GpuError::Input("vary scratch missing".into())),
        }
    }

    fn check_trees(&self, parents: &DevicePopulation, pairs: &DeviceIndices, children: &DevicePopulation, vary: &VaryConfig) -> Result<()> {
        if parents.engine != self.id || children.engine != self.id || pairs.engine != self.id {
            return Err(GpuError::Input("buffers of another engine".into()));
        }
        if vary.spec.n_outputs != children.n_outputs {
            return Err(GpuError::Input(format!("the spec has {} outputs, the populations {}", vary.spec.n_outputs, children.n_outputs)));
        }
        if (parents.max_len, parents.n_outputs) != (children.max_len, children.n_outputs) {
            return Err(GpuError::Input(format!(
                "parents have L = {} and {} outputs, children L = {} and {}",
                parents.max_len, parents.n_outputs, children.max_len, children.n_outputs
            )));
        }
        if pairs.n != 2 * children.n || pairs.bound > parents.n {
            return Err(GpuError::Input(format!(
                "{} parent indices below {} for {} children of {} parents: need two per child, each a parent",
                pairs.n, pairs.bound, children.n, parents.n
            )));
        }
        check_groups(children.n, "children")?;
        Ok(())
    }

    /// Launches a tree kernel (`grove_vary_op` or `grove_breed_trees`, which share their
    /// leading parameters); `tail` pushes the rest.
    #[allow(clippy::too_many_arguments)]
    fn launch_trees(
        &self,
        name: &'static str,
        params: &VaryParams,
        vary: &VaryConfig,
        parents: &DevicePopulation,
        pairs: &DeviceIndices,
        children: &mut DevicePopulation,
        tail: &mut [&mut CudaSlice<u32>],
    ) -> Result<()> {
        let f = self.function(&VARY, &[], name)?;
        let mut guard = self.vary_scratch.lock().unwrap_or_else(|e| e.into_inner());
        let tables = self.spec_tables(&mut guard, &vary.spec)?;
        let (scratch, pending) = self.vary_scratch(&mut guard, children.n, children.max_len)?;
        let mut b = self.stream.launch_builder(&f);
        b.arg(params).arg(&pairs.idx).arg(&tables.functions).arg(&tables.constants);
        b.arg(&parents.op).arg(&parents.value).arg(&parents.size).arg(&parents.out).arg(&parents.len);
        b.arg(&mut children.op).arg(&mut children.value).arg(&mut children.size).arg(&mut children.out).arg(&mut children.len);
        b.arg(&mut scratch.op).arg(&mut scratch.value).arg(&mut scratch.size).arg(&mut scratch.out).arg(&mut scratch.len);
        b.arg(&mut *pending);
        for t in tail.iter_mut() {
            b.arg(&mut **t);
        }
        // SAFETY: matches `grove_vary_op` / `grove_breed_trees(GroveVaryParams, const unsigned*
        // pairs, const unsigned char* functions, const float* constants, GROVE_POP_PARAMS x 3,
        // unsigned* pending, unsigned* outcome | unsigned* bred, unsigned* counts)` with
        // `VaryParams` laid out as `GroveVaryParams`. pairs holds 2 × n_children indices below
        // P of the parents (checked in check_trees; DeviceIndices are in range by
        // construction); the parents are a valid population (uploaded after validate() or
        // written by these kernels, which keep every invariant), so every node index stays
        // below len <= L of its row; children rows k < n_children, scratch rows k and
        // n_children + k < 2 n_children (its row stride is L) and pending row k (L entries:
        // the generator's stack never exceeds its budget <= L) are group k's alone (LANES
        // threads, per_group; check_groups keeps thread indices within 32 bits); the tail
        // buffers hold n_children entries (and 8 counts).
        unsafe { b.launch(per_group(children.n)) }.during(|| format!("launching {name}"))?;
        guard.tables = Some(tables);
        Ok(())
    }

    /// The spec's function set and constants on the device: the cached copy when the spec's
    /// are the same, else a new upload. Taken out of the scratch (put it back after use).
    fn spec_tables(&self, guard: &mut Scratch, spec: &TreeSpec) -> Result<SpecTables> {
        let functions: Vec<u8> = spec.functions.iter().map(|f| *f as u8).collect();
        if let Some(t) = guard.tables.take() {
            if t.functions_host == functions && t.constants_host.len() == spec.constants.len()
                && t.constants_host.iter().zip(&spec.constants).all(|(a, b)| a.to_bits() == b.to_bits())
            {
                return Ok(t);
            }
        }
        Ok(SpecTables {
            functions: self.upload(&functions, "uploading the function set")?,
            constants: self.upload(&spec.constants, "uploading the constants")?,
            functions_host: functions,
            constants_host: spec.constants.clone(),
        })
    }

    /// The first generation on the device: `p` random trees of `spec`, equal to
    /// [`init_population`](crate::program::init_population)`(spec, p, seed)`.
    pub fn init_trees(&self, spec: &TreeSpec, p: usize, seed: u64) -> Result<DevicePopulation> {
        let vary = VaryConfig::new(spec.clone());
        let params = vary_params(p, spec.max_len, &vary, None, seed, 0, 0)?;
        let mut pop = self.alloc_population(p, spec.max_len, spec.n_outputs)?;
        if p == 0 {
            return Ok(pop);
        }
        check_groups(p, "trees")?;
        let f = self.function(&VARY, &[], INIT_TREES)?;
        let mut guard = self.vary_scratch.lock().unwrap_or_else(|e| e.into_inner());
        let tables = self.spec_tables(&mut guard, spec)?;
        let (_, pending) = self.vary_scratch(&mut guard, p, spec.max_len)?;
        let mut b = self.stream.launch_builder(&f);
        b.arg(&params).arg(&tables.functions).arg(&tables.constants);
        b.arg(&mut pop.op).arg(&mut pop.value).arg(&mut pop.size).arg(&mut pop.out).arg(&mut pop.len);
        b.arg(&mut *pending);
        // SAFETY: matches `grove_init_trees(GroveVaryParams, const unsigned char* functions,
        // const float* constants, GROVE_POP_PARAMS(pop), unsigned* pending)`: the spec passed
        // check() (vary_params), so every function code has an arity and leaves exist; group
        // i (LANES threads) writes row i of P rows of stride L (trees never exceed L) and
        // pending row i (L entries, the generator's budget).
        unsafe { b.launch(per_group(p)) }.during(|| format!("launching {INIT_TREES}"))?;
        guard.tables = Some(tables);
        Ok(pop)
    }

    /// Applies one operator to make every child: child `k` from parent `pairs[2k]` (and donor
    /// `pairs[2k + 1]` for a crossover), on child `k`'s stream of `generation`, exactly as
    /// [`Operator::apply`] does. Returns each child's outcome, on the host (for tests and
    /// benchmarks; [`Self::breed_trees`] is the generation step).
    #[allow(clippy::too_many_arguments)]
    pub fn vary_trees(
        &self,
        op: Operator,
        parents: &DevicePopulation,
        pairs: &DeviceIndices,
        children: &mut DevicePopulation,
        seed: u64,
        generation: u32,
        vary: &VaryConfig,
    ) -> Result<Vec<Outcome>> {
        self.check_trees(parents, pairs, children, vary)?;
        let params = vary_params(children.n, children.max_len, vary, None, seed, generation, op_code(op))?;
        if children.n == 0 {
            return Ok(Vec::new());
        }
        let mut outcome = zeros::<u32>(&self.stream, children.n, "allocating outcomes")?;
        self.launch_trees(VARY_OP, &params, vary, parents, pairs, children, &mut [&mut outcome])?;
        let codes = self.stream.clone_dtoh(&outcome).during(|| format!("reading {VARY_OP} outcomes"))?;
        codes[..children.n].iter().map(|&c| outcome_of(c)).collect()
    }

    /// One generation of tree breeding, twin of [`breed`](crate::program::breed): child `k`
    /// of `children` from parents `pairs[2k]`, `pairs[2k + 1]` of `parents` (as
    /// [`Self::select_tournament`] lays them out), with `generation`'s streams. Asynchronous;
    /// what happened to each child stays on the device ([`Self::bred_counts`],
    /// [`Self::download_bred`]).
    #[allow(clippy::too_many_arguments)]
    pub fn breed_trees(
        &self,
        parents: &DevicePopulation,
        pairs: &DeviceIndices,
        children: &mut DevicePopulation,
        seed: u64,
        generation: u32,
        vary: &VaryConfig,
        mix: &BreedConfig,
    ) -> Result<DeviceBred> {
        self.check_trees(parents, pairs, children, vary)?;
        let params = vary_params(children.n, children.max_len, vary, Some(mix), seed, generation, 0)?;
        let mut codes = zeros::<u32>(&self.stream, children.n, "allocating breeding codes")?;
        let mut counts = zeros::<u32>(&self.stream, 8, "allocating outcome counts")?;
        if children.n > 0 {
            self.launch_trees(BREED_TREES, &params, vary, parents, pairs, children, &mut [&mut codes, &mut counts])?;
        }
        Ok(DeviceBred { codes, counts, n: children.n })
    }

    /// The outcome counts of a [`Self::breed_trees`] call (8 numbers read back).
    pub fn bred_counts(&self, bred: &DeviceBred) -> Result<BredCounts> {
        let c = self.stream.clone_dtoh(&bred.counts).during(|| "reading breeding counts".into())?;
        Ok(BredCounts::from_raw(&c))
    }

    /// What happened to each child of a [`Self::breed_trees`] call with mix `mix`, as
    /// [`breed`](crate::program::breed) returns it.
    pub fn download_bred(&self, bred: &DeviceBred, mix: &BreedConfig) -> Result<Vec<Bred>> {
        if bred.n == 0 {
            return Ok(Vec::new());
        }
        let codes = self.stream.clone_dtoh(&bred.codes).during(|| "reading breeding codes".into())?;
        codes[..bred.n].iter().map(|&c| decode_bred(c, mix)).collect()
    }

    /// Row `r` of `dst` becomes row `idx[r]` of `src`, for `r < n` (elites: `idx` a ranking).
    pub fn gather_trees(&self, src: &DevicePopulation, idx: &DeviceIndices, n: usize, dst: &mut DevicePopulation) -> Result<()> {
        if src.engine != self.id || dst.engine != self.id || idx.engine != self.id {
            return Err(GpuError::Input("buffers of another engine".into()));
        }
        if n > idx.n || n > dst.n || idx.bound > src.n || src.max_len != dst.max_len {
            return Err(GpuError::Input(format!(
                "gathering {n} rows by {} indices below {} from {} rows of L = {} into {} of L = {}",
                idx.n, idx.bound, src.n, src.max_len, dst.n, dst.max_len
            )));
        }
        if n == 0 {
            return Ok(());
        }
        // idx holds n entries below src's rows (checked), dst has at least n rows.
        self.launch_row_copy(GATHER_TREES, src, idx, n, dst)
    }

    /// Launches `grove_gather_trees` or `grove_scatter_trees` (one block per row, the same
    /// parameters) on `n` rows; the callers check the bounds their kernel reads and writes.
    fn launch_row_copy(&self, name: &'static str, src: &DevicePopulation, idx: &DeviceIndices, n: usize, dst: &mut DevicePopulation) -> Result<()> {
        let f = self.function(&VARY, &[], name)?;
        let (n32, l32) = (n as u32, src.max_len as u32);
        let mut b = self.stream.launch_builder(&f);
        b.arg(&n32).arg(&l32).arg(&idx.idx);
        b.arg(&src.op).arg(&src.value).arg(&src.size).arg(&src.out).arg(&src.len);
        b.arg(&mut dst.op).arg(&mut dst.value).arg(&mut dst.size).arg(&mut dst.out).arg(&mut dst.len);
        let lc = LaunchConfig { grid_dim: (n32, 1, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: matches `grove_gather_trees` / `grove_scatter_trees(unsigned n, unsigned
        // max_len, const unsigned* idx, GROVE_POP_PARAMS(src), GROVE_POP_PARAMS(dst))`: both
        // populations have row stride max_len (checked by the callers, as are the rows idx's n
        // entries name and the n rows read or written on the other side).
        unsafe { b.launch(lc) }.during(|| format!("launching {name}"))?;
        Ok(())
    }

    /// Row `idx[r]` of `dst` becomes row `r` of `src`, for `r < n` (migrants over an island's
    /// worst rows: [`Population::copy_row`] on the device). `idx`'s first `n` entries must be
    /// distinct (they are when chosen by `evolve::islands::plan`).
    pub fn scatter_trees(&self, src: &DevicePopulation, idx: &DeviceIndices, n: usize, dst: &mut DevicePopulation) -> Result<()> {
        if src.engine != self.id || dst.engine != self.id || idx.engine != self.id {
            return Err(GpuError::Input("buffers of another engine".into()));
        }
        if n > idx.n || n > src.n || idx.bound > dst.n || src.max_len != dst.max_len {
            return Err(GpuError::Input(format!(
                "scattering {n} rows of {} (L = {}) by {} indices below {} into {} rows of L = {}",
                src.n, src.max_len, idx.n, idx.bound, dst.n, dst.max_len
            )));
        }
        if n == 0 {
            return Ok(());
        }
        // src has at least n rows, idx n entries below dst's rows (checked; distinct, so no two
        // blocks write one row).
        self.launch_row_copy(SCATTER_TREES, src, idx, n, dst)
    }

    /// Genome `idx[r]` of `dst` becomes genome `r` of `src`, for `r < n` (migrants); `idx`'s
    /// first `n` entries must be distinct.
    pub fn scatter_genomes(&self, src: &DeviceGenomes, idx: &DeviceIndices, n: usize, dst: &mut DeviceGenomes) -> Result<()> {
        if src.engine != self.id || dst.engine != self.id || idx.engine != self.id {
            return Err(GpuError::Input("buffers of another engine".into()));
        }
        if n > idx.n || n > src.n || idx.bound > dst.n || src.capacity != dst.capacity {
            return Err(GpuError::Input(format!("scattering {n} genomes of {} by {} indices into {}", src.n, idx.n, dst.n)));
        }
        if n == 0 {
            return Ok(());
        }
        let f = self.function(&VARY, &[], SCATTER_GENOMES)?;
        let (n32, cap) = (n as u32, src.capacity as u32);
        let mut b = self.stream.launch_builder(&f);
        b.arg(&n32).arg(&cap).arg(&idx.idx).arg(&src.codons).arg(&src.len).arg(&mut dst.codons).arg(&mut dst.len);
        let lc = LaunchConfig { grid_dim: (n32, 1, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: matches `grove_scatter_genomes(unsigned n, unsigned capacity, const unsigned*
        // idx, const unsigned* src, const unsigned* src_len, unsigned* dst, unsigned* dst_len)`:
        // src has at least n rows, idx n distinct entries below dst's rows, both of stride
        // capacity.
        unsafe { b.launch(lc) }.during(|| format!("launching {SCATTER_GENOMES}"))?;
        Ok(())
    }

    /// GE crossover, twin of [`crossover`](crate::genome::vary::crossover) as the GE loops
    /// calls it: pair `j` crosses parents `pairs[2j]`, `pairs[2j + 1]` of `parents` (with
    /// `used` `[P]` their used codons) on stream `(seed, generation, j, Crossover)`; its
    /// children go to rows `first_row + 2j` and `+ 1` of `children` where those exist. Pairs:
    /// `pairs.len() / 2`. Parents and children must be different buffers of equal capacity.
    #[allow(clippy::too_many_arguments)]
    pub fn ge_crossover(
        &self,
        parents: &DeviceGenomes,
        used: UsedCodons<'_>,
        pairs: &DeviceIndices,
        children: &mut DeviceGenomes,
        first_row: usize,
        cfg: &GeVaryConfig,
        seed: u64,
        generation: u32,
    ) -> Result<()> {
        if cfg.crossover_op != crate::genome::vary::GeCrossover::Onepoint {
            return Err(GpuError::Config(format!("{:?} crossover is CudaEngine::ge_subtree_crossover (map.cu), not ge_crossover", cfg.crossover_op)));
        }
        if parents.engine != self.id || children.engine != self.id || pairs.engine != self.id {
            return Err(GpuError::Input("buffers of another engine".into()));
        }
        if parents.capacity != children.capacity || pairs.bound > parents.n || used.len() < parents.n {
            return Err(GpuError::Input(format!(
                "parents of capacity {} ({} used counts), children of {}, indices below {} of {} parents",
                parents.capacity,
                used.len(),
                children.capacity,
                pairs.bound,
                parents.n
            )));
        }
        let n_pairs = pairs.n / 2;
        let mut params = ge_params(n_pairs, children.n, children.capacity, first_row, cfg, seed, generation)?;
        if n_pairs == 0 {
            return Ok(());
        }
        let (used, stride) = used.view()?;
        params.used_stride = stride;
        let f = self.function(&VARY, &[], GE_CROSSOVER)?;
        let mut b = self.stream.launch_builder(&f);
        b.arg(&params).arg(&pairs.idx).arg(&parents.codons).arg(&parents.len).arg(&used);
        b.arg(&mut children.codons).arg(&mut children.len);
        // SAFETY: matches `grove_ge_crossover(GroveGeParams, const unsigned* pairs, const
        // unsigned* codons, const unsigned* len, const unsigned* used, unsigned* child_codons,
        // unsigned* child_len)`: pairs holds 2 n_pairs indices below the parents' P; parent
        // lengths are at most the capacity (DeviceGenomes' invariant), so reads stay in their
        // rows; used has an entry every used_stride words for each of the P parents; child
        // rows below n_rows are written, at most capacity
        // codons each, distinct per thread.
        unsafe { b.launch(per_item(n_pairs)) }.during(|| format!("launching {GE_CROSSOVER}"))?;
        Ok(())
    }

    /// GE int-flip in place, twin of [`int_flip`](crate::genome::vary::int_flip): rows
    /// `first_row ..` of `genomes`, row `k` within `min(used[k], len[k])` codons (all of them
    /// without `within_used`), each at `cfg.mutation` or, with `mutation_per_used`, at 1 / those
    /// codons, stream `(seed, generation, k, Mutate)`. `used` `[P]`: each
    /// child's used codons after mapping it.
    pub fn ge_int_flip(&self, genomes: &mut DeviceGenomes, used: UsedCodons<'_>, first_row: usize, cfg: &GeVaryConfig, seed: u64, generation: u32) -> Result<()> {
        if cfg.mutation_op != crate::genome::vary::GeMutation::IntFlip {
            return Err(GpuError::Config("subtree mutation runs on the host (the device has int-flip)".into()));
        }
        if genomes.engine != self.id || used.len() < genomes.n {
            return Err(GpuError::Input(format!("{} used counts for {} genomes", used.len(), genomes.n)));
        }
        let mut params = ge_params(0, genomes.n, genomes.capacity, first_row, cfg, seed, generation)?;
        let rows = genomes.n - first_row;
        if rows == 0 {
            return Ok(());
        }
        let (used, stride) = used.view()?;
        params.used_stride = stride;
        let f = self.function(&VARY, &[], GE_INT_FLIP)?;
        let mut b = self.stream.launch_builder(&f);
        b.arg(&params).arg(&used).arg(&mut genomes.codons).arg(&genomes.len);
        // SAFETY: matches `grove_ge_int_flip(GroveGeParams, const unsigned* used, unsigned*
        // codons, const unsigned* len)`: rows first_row .. P, each thread its own row, reads
        // used[k * used_stride] (an entry per genome, checked above), writes
        // below min(used, len) <= capacity codons.
        unsafe { b.launch(per_item(rows)) }.during(|| format!("launching {GE_INT_FLIP}"))?;
        Ok(())
    }

    /// Row `r` of `dst` becomes genome `idx[r]` of `src`, for `r < n` (elites).
    pub fn gather_genomes(&self, src: &DeviceGenomes, idx: &DeviceIndices, n: usize, dst: &mut DeviceGenomes) -> Result<()> {
        if src.engine != self.id || dst.engine != self.id || idx.engine != self.id {
            return Err(GpuError::Input("buffers of another engine".into()));
        }
        if n > idx.n || n > dst.n || idx.bound > src.n || src.capacity != dst.capacity {
            return Err(GpuError::Input(format!("gathering {n} genomes by {} indices from {} into {}", idx.n, src.n, dst.n)));
        }
        if n == 0 {
            return Ok(());
        }
        let f = self.function(&VARY, &[], GATHER_GENOMES)?;
        let (n32, cap) = (n as u32, src.capacity as u32);
        let mut b = self.stream.launch_builder(&f);
        b.arg(&n32).arg(&cap).arg(&idx.idx).arg(&src.codons).arg(&src.len).arg(&mut dst.codons).arg(&mut dst.len);
        let lc = LaunchConfig { grid_dim: (n32, 1, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: matches `grove_gather_genomes(unsigned n, unsigned capacity, const unsigned*
        // idx, const unsigned* src, const unsigned* src_len, unsigned* dst, unsigned*
        // dst_len)`: idx holds n entries below src's rows, dst has at least n rows, both of
        // stride capacity.
        unsafe { b.launch(lc) }.during(|| format!("launching {GATHER_GENOMES}"))?;
        Ok(())
    }

    /// Draws of `rng.cuh` for streams `(seed, generation, i, purpose)`, `i < n_streams`: 16
    /// words each, 4 `next_u32`, 4 `below(bound)`, 4 `unit_f32` bits and 4 `normal` bits, in
    /// that order from one stream (for the parity test of the random numbers).
    pub fn rng_draws(&self, n_streams: usize, seed: u64, generation: u32, purpose: Purpose, bound: u32) -> Result<Vec<u32>> {
        if n_streams == 0 {
            return Ok(Vec::new());
        }
        let mut out = zeros::<u32>(&self.stream, 16 * n_streams, "allocating draws")?;
        let f = self.function(&VARY, &[], RNG_DRAWS)?;
        let (n, lo, hi, purpose) = (n_streams as u32, seed as u32, (seed >> 32) as u32, purpose as u32);
        let mut b = self.stream.launch_builder(&f);
        b.arg(&n).arg(&lo).arg(&hi).arg(&generation).arg(&purpose).arg(&bound).arg(&mut out);
        // SAFETY: matches `grove_rng_draws(unsigned n_streams, unsigned seed_lo, unsigned
        // seed_hi, unsigned generation, unsigned purpose, unsigned bound, unsigned* out)`: out
        // holds 16 n_streams words.
        unsafe { b.launch(per_item(n_streams)) }.during(|| format!("launching {RNG_DRAWS}"))?;
        self.stream.clone_dtoh(&out).during(|| "reading draws".into())
    }
}
