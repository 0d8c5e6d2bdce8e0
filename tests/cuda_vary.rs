//! Parity of the GPU's selection and variation (`kernels/vary.cu`, `kernels/select.cu`,
//! `kernels/rng.cuh`) with their CPU references (`program::vary`, `genome::vary`, `select`,
//! `rng`): the first generation's random trees, every tree operator on random populations (several specs, seeds and sizes,
//! near-`L` trees, multi-output programs, empty rows), one generation of `breed`, GE crossover
//! and int-flip, tournaments with and without replacement, ranking, truncation, and the random
//! numbers themselves. Results must be equal bitwise (op, value bits, size, out, len, outcomes);
//! the first mismatch is reported with child, node and field.
//!
//! Each check runs on two devices:
//! * `gpu::*`: the real kernels, ignored unless `GROVE_TEST_GPU=1` (then a missing GPU is a
//!   failure). Run: `GROVE_TEST_GPU=1 cargo test --release --test cuda_vary`.
//! * `emulated::*`: the same kernel source compiled as host C++ by g++ (`cuda_host_shim.h`),
//!   blocks in order, each one thread, or real threads at a barrier for the valid pool's
//!   block-wide scan and for the tree kernels' lane groups (a group of [`EMU_LANES`] threads
//!   per child, where the GPU has a warp); skipped (with a message) where g++ is missing. It checks the kernels'
//!   logic and arithmetic on any machine.

#[path = "support/emulator.rs"]
mod emulator;

use grove::backend::cuda::kernels;
use grove::backend::cuda::params::{GeParams, SelectParams, VaryParams};
use grove::backend::cuda::select::lexicase_staged_shape;
use grove::backend::cuda::vary::{BredCounts, UsedCodons, decode_bred, ge_params, outcome_code, outcome_of, vary_params};
use grove::backend::cuda::CudaEngine;
use grove::genome::vary::{GeVaryConfig, crossover, int_flip};
use grove::genome::Genomes;
use grove::program::tree::Population;
use grove::program::vary::{Bred, Operator, Outcome, normal};
use grove::program::{BreedConfig, Crossover, Mutation, Op, TreeSpec, VaryConfig, breed, init_population};
use grove::rng::{Purpose, Stream};
use grove::select;

// ---------------------------------------------------------------------------------------------
// What each device must do, on host data.

trait Device {
    /// The first generation: `p` random trees.
    fn init(&self, spec: &TreeSpec, p: usize, seed: u64) -> Population;
    /// One operator for every child: `(children, outcomes)`.
    fn vary(&self, op: Operator, parents: &Population, pairs: &[u32], seed: u64, generation: u32, cfg: &VaryConfig) -> (Population, Vec<Outcome>);
    /// One generation of breeding: `(children, per-child codes, counts)`.
    fn breed(&self, parents: &Population, pairs: &[u32], seed: u64, generation: u32, cfg: &VaryConfig, mix: &BreedConfig) -> (Population, Vec<Bred>, BredCounts);
    /// GE crossover of `pairs.len() / 2` pairs into `n_rows` rows from `first_row`.
    #[allow(clippy::too_many_arguments)]
    fn ge_crossover(&self, parents: &Genomes, used: &[u32], pairs: &[u32], n_rows: usize, first_row: usize, cfg: &GeVaryConfig, seed: u64, generation: u32) -> Genomes;
    /// GE int-flip of rows `first_row ..`.
    fn ge_int_flip(&self, genomes: &Genomes, used: &[u32], first_row: usize, cfg: &GeVaryConfig, seed: u64, generation: u32) -> Genomes;
    /// `grove_rng_draws`.
    fn rng_draws(&self, n: usize, seed: u64, generation: u32, purpose: Purpose, bound: u32) -> Vec<u32>;
    /// `n_slots` tournament winners; with `sizes`, among unique parents only
    /// (`select::parent_pool`).
    #[allow(clippy::too_many_arguments)]
    fn tournament(&self, fit: &[f64], sizes: Option<&[u16]>, n_slots: usize, k: usize, distinct: bool, seed: u64, generation: u32) -> Vec<u32>;
    /// The ranking.
    fn rank(&self, fit: &[f64]) -> Vec<u32>;
    /// The radix select's slots: mode 0 the `k` best, 1 the `k` worst, 2 both.
    fn top_k(&self, fit: &[f64], k: usize, mode: u32) -> Vec<Vec<u32>>;
    /// `n_slots` truncation selections.
    fn truncation(&self, fit: &[f64], n_slots: usize, rate: f64, seed: u64, generation: u32) -> Vec<u32>;
    /// Lexicase's epsilons and `n_slots` epsilon-lexicase selections from pools of `k_pool`,
    /// the pool of valid individuals from `fit`.
    #[allow(clippy::too_many_arguments)]
    fn lexicase(&self, errors: &[f64], n_cases: usize, fit: &[f64], sizes: Option<&[u16]>, k_pool: usize, n_slots: usize, seed: u64, generation: u32) -> (Vec<f64>, Vec<u32>);
    /// NSGA-II of the points (fitness, size) of rows of `max_len` nodes: the ranking, the `keep`
    /// survivors and `n_slots` tournament winners of `k` contestants.
    #[allow(clippy::too_many_arguments)]
    fn pareto(&self, fit: &[f64], sizes: &[u16], max_len: usize, keep: usize, n_slots: usize, k: usize, seed: u64, generation: u32) -> ParetoOut;
}

/// What a device's NSGA-II gives.
#[derive(Debug, PartialEq)]
struct ParetoOut {
    rank: Vec<u32>,
    crowd: Vec<f64>,
    survivors: Vec<u32>,
    winners: Vec<u32>,
}

/// The row width that holds programs of `sizes` nodes.
fn rows_width(sizes: &[u16]) -> usize {
    sizes.iter().copied().max().unwrap_or(1).max(1) as usize
}

/// A population whose rows have the lengths `sizes`: `sin(sin(… x0))` (0: an empty row).
fn rows_of(sizes: &[u16], max_len: usize) -> Population {
    let mut pop = Population::new(sizes.len(), max_len, 1);
    for (i, &n) in sizes.iter().enumerate() {
        if n > 0 {
            let mut nodes = vec![grove::program::tree::Node::func(Op::Sin); n as usize - 1];
            nodes.push(grove::program::tree::Node::var(0));
            pop.set_tree(i, &nodes).unwrap();
        }
    }
    pop
}

struct Gpu(CudaEngine);

impl Device for Gpu {
    fn init(&self, spec: &TreeSpec, p: usize, seed: u64) -> Population {
        let e = &self.0;
        let d = e.init_trees(spec, p, seed).unwrap_or_else(|err| panic!("{err}"));
        e.download_population(&d).unwrap()
    }
    fn vary(&self, op: Operator, parents: &Population, pairs: &[u32], seed: u64, generation: u32, cfg: &VaryConfig) -> (Population, Vec<Outcome>) {
        let e = &self.0;
        let dp = e.upload_population(parents).unwrap();
        let idx = e.upload_indices(pairs, parents.size()).unwrap();
        let mut dc = e.alloc_population(pairs.len() / 2, parents.max_len, parents.n_outputs).unwrap();
        let outcomes = e.vary_trees(op, &dp, &idx, &mut dc, seed, generation, cfg).unwrap_or_else(|err| panic!("{err}"));
        (e.download_population(&dc).unwrap(), outcomes)
    }
    fn breed(&self, parents: &Population, pairs: &[u32], seed: u64, generation: u32, cfg: &VaryConfig, mix: &BreedConfig) -> (Population, Vec<Bred>, BredCounts) {
        let e = &self.0;
        let dp = e.upload_population(parents).unwrap();
        let idx = e.upload_indices(pairs, parents.size()).unwrap();
        let mut dc = e.alloc_population(pairs.len() / 2, parents.max_len, parents.n_outputs).unwrap();
        let bred = e.breed_trees(&dp, &idx, &mut dc, seed, generation, cfg, mix).unwrap_or_else(|err| panic!("{err}"));
        (e.download_population(&dc).unwrap(), e.download_bred(&bred, mix).unwrap(), e.bred_counts(&bred).unwrap())
    }
    fn ge_crossover(&self, parents: &Genomes, used: &[u32], pairs: &[u32], n_rows: usize, first_row: usize, cfg: &GeVaryConfig, seed: u64, generation: u32) -> Genomes {
        let e = &self.0;
        let dp = e.upload_genomes(parents).unwrap();
        let du = e.stream().clone_htod(used).unwrap();
        let idx = e.upload_indices(pairs, parents.size()).unwrap();
        let mut dc = e.alloc_genomes(n_rows, parents.capacity).unwrap();
        e.ge_crossover(&dp, UsedCodons::Counts(&du), &idx, &mut dc, first_row, cfg, seed, generation).unwrap_or_else(|err| panic!("{err}"));
        e.download_genomes(&dc).unwrap()
    }
    fn ge_int_flip(&self, genomes: &Genomes, used: &[u32], first_row: usize, cfg: &GeVaryConfig, seed: u64, generation: u32) -> Genomes {
        let e = &self.0;
        let mut dg = e.upload_genomes(genomes).unwrap();
        let du = e.stream().clone_htod(used).unwrap();
        e.ge_int_flip(&mut dg, UsedCodons::Counts(&du), first_row, cfg, seed, generation).unwrap_or_else(|err| panic!("{err}"));
        e.download_genomes(&dg).unwrap()
    }
    fn rng_draws(&self, n: usize, seed: u64, generation: u32, purpose: Purpose, bound: u32) -> Vec<u32> {
        self.0.rng_draws(n, seed, generation, purpose, bound).unwrap()
    }
    fn tournament(&self, fit: &[f64], sizes: Option<&[u16]>, n_slots: usize, k: usize, distinct: bool, seed: u64, generation: u32) -> Vec<u32> {
        let e = &self.0;
        let f = e.upload_fitness(fit).unwrap();
        let pop = sizes.map(|s| e.upload_population(&rows_of(s, rows_width(s))).unwrap());
        let w = e.select_tournament(&f, pop.as_ref(), n_slots, k, distinct, seed, generation).unwrap();
        e.download_indices(&w).unwrap()
    }
    fn rank(&self, fit: &[f64]) -> Vec<u32> {
        let e = &self.0;
        let f = e.upload_fitness(fit).unwrap();
        e.download_indices(&e.rank(&f).unwrap()).unwrap()
    }
    fn top_k(&self, fit: &[f64], k: usize, mode: u32) -> Vec<Vec<u32>> {
        let e = &self.0;
        let f = e.upload_fitness(fit).unwrap();
        let chosen = match mode {
            0 => vec![e.elite(&f, k).unwrap()],
            1 => vec![e.worst(&f, k).unwrap()],
            _ => {
                let (b, w) = e.elite_and_worst(&f, k).unwrap();
                vec![b, w]
            }
        };
        chosen.iter().map(|c| e.download_indices(c).unwrap()).collect()
    }
    fn truncation(&self, fit: &[f64], n_slots: usize, rate: f64, seed: u64, generation: u32) -> Vec<u32> {
        let e = &self.0;
        let f = e.upload_fitness(fit).unwrap();
        let ranked = e.rank(&f).unwrap();
        e.download_indices(&e.select_truncation(&ranked, n_slots, rate, seed, generation).unwrap()).unwrap()
    }
    fn lexicase(&self, errors: &[f64], n_cases: usize, fit: &[f64], sizes: Option<&[u16]>, k_pool: usize, n_slots: usize, seed: u64, generation: u32) -> (Vec<f64>, Vec<u32>) {
        let e = &self.0;
        let f = e.upload_fitness(fit).unwrap();
        let d = e.upload_errors(errors, n_cases).unwrap();
        let pop = sizes.map(|s| e.upload_population(&rows_of(s, rows_width(s))).unwrap());
        let eps = e.lexicase_epsilons(&d, &f, pop.as_ref(), seed, generation).unwrap();
        (eps, e.download_indices(&e.select_lexicase(&d, &f, pop.as_ref(), k_pool, n_slots, seed, generation).unwrap()).unwrap())
    }
    fn pareto(&self, fit: &[f64], sizes: &[u16], max_len: usize, keep: usize, n_slots: usize, k: usize, seed: u64, generation: u32) -> ParetoOut {
        let e = &self.0;
        let f = e.upload_fitness(fit).unwrap();
        let pop = e.upload_population(&rows_of(sizes, max_len)).unwrap();
        let r = e.pareto_ranking(&f, &pop).unwrap();
        let (rank, crowd) = e.download_ranking(&r).unwrap();
        let survivors = e.download_indices(&e.pareto_survivors(&f, &pop, keep).unwrap()).unwrap();
        let winners = e.download_indices(&e.select_pareto(&f, &r, n_slots, k, seed, generation).unwrap()).unwrap();
        ParetoOut { rank, crowd, survivors, winners }
    }
}

// ---------------------------------------------------------------------------------------------
// The emulator: the kernel sources built as a host library by g++.

/// Raw pointers of a population's five arrays, as the kernels take them.
type PopPtrs = (*mut u8, *mut f32, *mut u16, *mut u8, *mut u16);

fn ptrs(p: &mut Population) -> PopPtrs {
    (p.op.as_mut_ptr(), p.value.as_mut_ptr(), p.size.as_mut_ptr(), p.out.as_mut_ptr(), p.len.as_mut_ptr())
}

type VaryOpFn = unsafe extern "C" fn(
    VaryParams, *const u32, *const u8, *const f32,
    *mut u8, *mut f32, *mut u16, *mut u8, *mut u16,
    *mut u8, *mut f32, *mut u16, *mut u8, *mut u16,
    *mut u8, *mut f32, *mut u16, *mut u8, *mut u16,
    *mut u32, *mut u32,
);
type BreedFn = unsafe extern "C" fn(
    VaryParams, *const u32, *const u8, *const f32,
    *mut u8, *mut f32, *mut u16, *mut u8, *mut u16,
    *mut u8, *mut f32, *mut u16, *mut u8, *mut u16,
    *mut u8, *mut f32, *mut u16, *mut u8, *mut u16,
    *mut u32, *mut u32, *mut u32,
);
type GeCrossoverFn = unsafe extern "C" fn(GeParams, *const u32, *const u32, *const u32, *const u32, *mut u32, *mut u32);
type GeIntFlipFn = unsafe extern "C" fn(GeParams, *const u32, *mut u32, *const u32);
type RngFn = unsafe extern "C" fn(u32, u32, u32, u32, u32, u32, *mut u32);
type TournamentFn = unsafe extern "C" fn(SelectParams, *const f64, *const u32, *const u32, *mut u32);
type RankFn = unsafe extern "C" fn(SelectParams, *const f64, *mut u32);
type TruncationFn = unsafe extern "C" fn(SelectParams, *const u32, *mut u32);
type LexicaseFn = unsafe extern "C" fn(SelectParams, *const f64, *const f64, *const u32, *const u32, *const u32, *mut u32, *mut u32, *mut u32);
type StagedFn = unsafe extern "C" fn(SelectParams, *const f64, *const f64, *const u32, *const u32, *const u32, *mut u32);
type SetThreadFn = unsafe extern "C" fn(u32, u32, u32);

struct Emulator {
    /// vary.cu as a host library.
    vary: libloading::Library,
    /// select.cu as a host library.
    select: libloading::Library,
    /// generation.cu as a host library.
    generation: libloading::Library,
}

/// Lanes of a group in the emulated tree kernels (`GROVE_LANES` is [`kernels::LANES`] on the
/// device): every group runs as a block of this many real threads.
const EMU_LANES: u32 = 4;

/// Threads of a radix tile's block in the emulated sorts (`GROVE_RADIX_THREADS` is
/// [`kernels::RADIX_THREADS`] on the device).
const EMU_RADIX_THREADS: u32 = 32;

/// Threads of an epsilon block in the emulator (`GROVE_EPSILON_THREADS` is
/// [`kernels::EPSILON_THREADS`] on the device).
const EMU_EPSILON_THREADS: u32 = 16;

/// Cases whose order an emulated lexicase selection keeps in shared memory
/// (`GROVE_LEX_CASES` is [`kernels::LEXICASE_CASES`] on the device).
const EMU_LEXICASE_CASES: usize = 8;

/// Shared memory of an emulated `grove_lexicase_staged` block (the device's is its opt-in
/// limit): larger groups take the warp kernel, as they do on a device.
const EMU_STAGED_BYTES: usize = 64 << 10;

/// A kernel call shared by a block's threads: the closures copy raw pointers into the call, and
/// the kernel decides which thread writes what, as on the device.
struct Shared<F>(F);
// SAFETY: see above; the closure itself holds only addresses.
unsafe impl<F> Sync for Shared<F> {}

impl<F: Fn()> Shared<F> {
    fn call(&self) {
        (self.0)()
    }
}

/// One emulated launch at a time: shared memory is a static and the barrier a global in the
/// library, and the tests run on several threads.
static LAUNCH: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The emulator libraries, built once per test process; `None` without g++.
fn emulator() -> Option<&'static Emulator> {
    static LIB: std::sync::OnceLock<Option<Emulator>> = std::sync::OnceLock::new();
    LIB.get_or_init(|| {
        let build = |src: &kernels::KernelSource<'static>| emulator::build(src, |s| s);
        // The top-k kernels' grid-stride loops read gridDim, which the one-thread launches set.
        let grid = |s: String| format!("{s}\nextern \"C\" void grove_emu_set_grid(unsigned g) {{ gridDim.x = g; }}\n");
        // vary.cu's lane groups made small, so that a group is a block of a few real threads.
        let lanes = |s: String| {
            let define = format!("#define GROVE_LANES {}", kernels::LANES);
            assert!(s.contains(&define), "vary.cu no longer has `{define}`");
            s.replace(&define, &format!("#define GROVE_LANES {EMU_LANES}"))
        };
        // select.cu's radix tiles made small, so that a tile's block meets at its barriers quickly.
        let select = |s: String| {
            let define = format!("#define GROVE_RADIX_THREADS {}", kernels::RADIX_THREADS);
            assert!(s.contains(&define), "select.cu no longer has `{define}`");
            let eps = format!("#define GROVE_EPSILON_THREADS {}", kernels::EPSILON_THREADS);
            assert!(s.contains(&eps), "select.cu no longer has `{eps}`");
            let s = s.replace(&eps, &format!("#define GROVE_EPSILON_THREADS {EMU_EPSILON_THREADS}"));
            // Lexicase's groups of EMU_LANES threads, and case orders in shared memory only up
            // to EMU_LEXICASE_CASES cases, so that both places of the order are reached.
            let lanes = format!("#define GROVE_LANES {}", kernels::LANES);
            let cases = format!("#define GROVE_LEX_CASES {}", kernels::LEXICASE_CASES);
            assert!(s.contains(&lanes) && s.contains(&cases), "select.cu no longer has `{lanes}` and `{cases}`");
            let s = s.replace(&lanes, &format!("#define GROVE_LANES {EMU_LANES}")).replace(&cases, &format!("#define GROVE_LEX_CASES {EMU_LEXICASE_CASES}"));
            // The staged kernel's dynamic shared memory, a static of the emulator's size.
            let stage = "extern __shared__ double grove_lex_stage[];";
            assert!(s.contains(stage), "select.cu no longer has `{stage}`");
            let s = s.replace(stage, &format!("static double grove_lex_stage[{}];", EMU_STAGED_BYTES / 8));
            grid(s.replace(&define, &format!("#define GROVE_RADIX_THREADS {EMU_RADIX_THREADS}")))
        };
        let libs = emulator::build(&kernels::VARY, lanes).zip(emulator::build(&kernels::SELECT, select)).zip(build(&kernels::GENERATION));
        libs.map(|((vary, select), generation)| Emulator { vary, select, generation })
    })
    .as_ref()
}

impl Emulator {
    fn get<T: Copy>(lib: &libloading::Library, name: &str) -> T {
        // SAFETY: each type above is the kernel's C signature, as in its .cu definition.
        unsafe { *lib.get::<T>(name.as_bytes()).unwrap_or_else(|e| panic!("{name}: {e}")) }
    }
    /// Runs `f` as `n` blocks of one thread of `lib`.
    fn launch(lib: &libloading::Library, n: usize, mut f: impl FnMut()) {
        let set: SetThreadFn = Self::get(lib, "grove_emu_set_thread");
        let _one = LAUNCH.lock().unwrap_or_else(|e| e.into_inner());
        for b in 0..n {
            // SAFETY: sets the emulated thread indices (thread-local in the library).
            unsafe { set(b as u32, 1, 0) };
            f();
        }
    }
    /// Runs `f` as `n` groups of [`EMU_LANES`] real threads (vary.cu's tree kernels, lexicase).
    fn launch_groups(lib: &libloading::Library, n: usize, f: impl Fn()) {
        let f = Shared(f);
        for k in 0..n {
            Self::run_block_at(lib, k as u32, EMU_LANES, &|| f.call());
        }
    }
    /// Runs `f` as one block of `threads` real threads (for kernels that use __syncthreads).
    fn run_block(lib: &libloading::Library, threads: u32, f: &(dyn Fn() + Sync)) {
        Self::run_block_at(lib, 0, threads, f)
    }
    /// [`Self::run_block`] as block `block` of the grid.
    fn run_block_at(lib: &libloading::Library, block: u32, threads: u32, f: &(dyn Fn() + Sync)) {
        type RunBlock = unsafe extern "C" fn(u32, extern "C" fn(*mut std::ffi::c_void), *mut std::ffi::c_void);
        extern "C" fn body(ctx: *mut std::ffi::c_void) {
            // SAFETY: ctx is the `&&dyn Fn` passed below, alive until the block has joined.
            let f = unsafe { &*(ctx as *const &(dyn Fn() + Sync)) };
            f();
        }
        let run: RunBlock = Self::get(lib, "grove_emu_run_block");
        let at: unsafe extern "C" fn(u32) = Self::get(lib, "grove_emu_set_block");
        let _one = LAUNCH.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: sets the block index the next run's threads take (a global in the library).
        unsafe { at(block) };
        // SAFETY: the library joins every thread before returning.
        unsafe { run(threads, body, &f as *const &(dyn Fn() + Sync) as *mut std::ffi::c_void) };
    }
    /// The valid pool as the GPU makes it: `grove_valid_count` and `grove_valid_pool` a block of
    /// TILE_THREADS threads per tile, `grove_valid_scan` one block between them.
    fn valid_pool(&self, fit: &[f64], sizes: Option<&[u16]>) -> (Vec<u32>, [u32; 1]) {
        type CountFn = unsafe extern "C" fn(SelectParams, *const f64, *const u32, *mut u64);
        type ScanFn = unsafe extern "C" fn(SelectParams, *mut u64, *mut u32);
        type PoolFn = unsafe extern "C" fn(SelectParams, *const f64, *const u32, *const u64, *mut u32);
        let params = SelectParams { n: fit.len() as u32, ..SelectParams::default() };
        let group = sizes.map(|s| self.unique_groups(fit, s));
        let gp = group.as_ref().map_or(0usize, |g| g.as_ptr() as usize);
        let n_tiles = fit.len().div_ceil(kernels::TILE as usize).max(1);
        let mut pool = vec![u32::MAX; fit.len() + 1];
        let mut n_valid = [u32::MAX];
        let mut tiles = vec![u64::MAX; n_tiles];
        let count: CountFn = Self::get(&self.select, kernels::VALID_COUNT);
        let scan: ScanFn = Self::get(&self.select, kernels::VALID_SCAN);
        let write: PoolFn = Self::get(&self.select, kernels::VALID_POOL);
        // Addresses as integers: the threads write disjoint entries, as on the device.
        let (fp, pp, np, tp) = (fit.as_ptr() as usize, pool.as_mut_ptr() as usize, n_valid.as_mut_ptr() as usize, tiles.as_mut_ptr() as usize);
        for b in 0..n_tiles as u32 {
            // SAFETY: fit holds P entries, tiles n_tiles; block b of the tiles.
            Self::run_block_at(&self.select, b, kernels::TILE_THREADS, &|| unsafe { count(params, fp as *const f64, gp as *const u32, tp as *mut u64) });
        }
        // SAFETY: tiles n_tiles, n_valid one; one block.
        Self::run_block(&self.select, kernels::TILE_THREADS, &|| unsafe { scan(params, tp as *mut u64, np as *mut u32) });
        for b in 0..n_tiles as u32 {
            // SAFETY: fit and pool hold P entries, tiles n_tiles; block b of the tiles.
            Self::run_block_at(&self.select, b, kernels::TILE_THREADS, &|| unsafe { write(params, fp as *const f64, gp as *const u32, tp as *const u64, pp as *mut u32) });
        }
        (pool, n_valid)
    }
    /// The groups of unique parents as the GPU finds them: `grove_unique_insert`, then
    /// `grove_unique_groups`, a thread per individual, the table 2^bits >= 2P slots of all ones.
    fn unique_groups(&self, fit: &[f64], sizes: &[u16]) -> Vec<u32> {
        type InsertFn = unsafe extern "C" fn(SelectParams, *const f64, *const u16, u32, *mut u64, *mut u64);
        type GroupsFn = unsafe extern "C" fn(SelectParams, *const f64, u32, *const u64, *const u64, *mut u32);
        let p = fit.len();
        assert_eq!(sizes.len(), p);
        let params = SelectParams { n: p as u32, ..SelectParams::default() };
        let bits = (2 * p.max(1)).next_power_of_two().trailing_zeros();
        let (mut keys, mut vals, mut group) = (vec![u64::MAX; 1 << bits], vec![u64::MAX; 1 << bits], vec![u32::MAX; p]);
        let insert: InsertFn = Self::get(&self.select, kernels::UNIQUE_INSERT);
        let groups: GroupsFn = Self::get(&self.select, kernels::UNIQUE_GROUPS);
        let (kp, vp, gp) = (keys.as_mut_ptr(), vals.as_mut_ptr(), group.as_mut_ptr());
        // SAFETY: fit and sizes P entries, the table 2^bits >= 2P slots, group P.
        Self::launch(&self.select, p, || unsafe { insert(params, fit.as_ptr(), sizes.as_ptr(), bits, kp, vp) });
        Self::launch(&self.select, p, || unsafe { groups(params, fit.as_ptr(), bits, kp, vp, gp) });
        group
    }
    fn spec_tables(cfg: &VaryConfig) -> (Vec<u8>, Vec<f32>) {
        let mut f: Vec<u8> = cfg.spec.functions.iter().map(|f| *f as u8).collect();
        let mut c = cfg.spec.constants.clone();
        f.push(0);
        c.push(0.0);
        (f, c)
    }
}

/// The sort keys of NSGA-II's points on the emulator: (lo, hi, idx) after the sort.
type Sorted = (Vec<u64>, Vec<u64>, Vec<u32>);

impl Emulator {
    /// `grove_pareto_keys` then the radix passes, as `CudaEngine::pareto_sort` launches them.
    #[allow(clippy::too_many_arguments)]
    fn pareto_sort(&self, fit: &[f64], sizes: &[u16], max_len: usize, rank: &[u32], crowd: &[f64], mode: u32, lo_digits: u32, hi_digits: u32) -> Sorted {
        type KeysFn = unsafe extern "C" fn(u32, u32, u32, *const f64, *const u16, *const u32, *const f64, *mut u64, *mut u64, *mut u32);
        type CountFn = unsafe extern "C" fn(u32, u32, u32, *const u64, *const u64, *mut u64);
        type OffsetsFn = unsafe extern "C" fn(u32, *mut u64);
        type ScatterFn = unsafe extern "C" fn(u32, u32, u32, *const u64, *const u64, *const u32, *const u64, *mut u64, *mut u64, *mut u32);
        type GridFn = unsafe extern "C" fn(u32);
        let n = fit.len();
        let (mut lo, mut hi, mut idx) = (vec![u64::MAX; n], vec![u64::MAX; n], vec![u32::MAX; n]);
        let keys: KeysFn = Self::get(&self.select, kernels::PARETO_KEYS);
        let (lp, hp, ip) = (lo.as_mut_ptr(), hi.as_mut_ptr(), idx.as_mut_ptr());
        // SAFETY: every array holds n entries; one thread per point.
        Self::launch(&self.select, n, || unsafe { keys(n as u32, mode, max_len as u32, fit.as_ptr(), sizes.as_ptr(), rank.as_ptr(), crowd.as_ptr(), lp, hp, ip) });
        let tiles = n.div_ceil((EMU_RADIX_THREADS * kernels::RADIX_ITEMS) as usize) as u32;
        let mut counts = vec![u64::MAX; 16 * tiles as usize];
        let count: CountFn = Self::get(&self.select, kernels::RADIX_COUNT);
        let offsets: OffsetsFn = Self::get(&self.select, kernels::RADIX_OFFSETS);
        let scatter: ScatterFn = Self::get(&self.select, kernels::RADIX_SCATTER);
        let grid: GridFn = Self::get(&self.select, "grove_emu_set_grid");
        for d in 0..lo_digits + hi_digits {
            let (mut lo2, mut hi2, mut idx2) = (vec![u64::MAX; n], vec![u64::MAX; n], vec![u32::MAX; n]);
            let a = (lo.as_ptr() as usize, hi.as_ptr() as usize, idx.as_ptr() as usize, counts.as_mut_ptr() as usize);
            let z = (lo2.as_mut_ptr() as usize, hi2.as_mut_ptr() as usize, idx2.as_mut_ptr() as usize);
            for b in 0..tiles {
                // SAFETY: block b of the tiles over n keys; counts 16 per tile (grid set per thread).
                Self::run_block_at(&self.select, b, EMU_RADIX_THREADS, &|| unsafe {
                    grid(tiles);
                    count(n as u32, d, lo_digits, a.0 as *const u64, a.1 as *const u64, a.3 as *mut u64)
                });
            }
            // SAFETY: one block over the 16 x tiles counts.
            Self::run_block(&self.select, kernels::TILE_THREADS, &|| unsafe { offsets(16 * tiles, a.3 as *mut u64) });
            for b in 0..tiles {
                // SAFETY: as the counts; each key written once below n.
                Self::run_block_at(&self.select, b, EMU_RADIX_THREADS, &|| unsafe {
                    grid(tiles);
                    scatter(n as u32, d, lo_digits, a.0 as *const u64, a.1 as *const u64, a.2 as *const u32, a.3 as *const u64, z.0 as *mut u64, z.1 as *mut u64, z.2 as *mut u32)
                });
            }
            (lo, hi, idx) = (lo2, hi2, idx2);
        }
        (lo, hi, idx)
    }
}

impl Device for Emulator {
    fn init(&self, spec: &TreeSpec, p: usize, seed: u64) -> Population {
        type InitFn = unsafe extern "C" fn(VaryParams, *const u8, *const f32, *mut u8, *mut f32, *mut u16, *mut u8, *mut u16, *mut u32);
        let cfg = VaryConfig::new(spec.clone());
        let params = vary_params(p, spec.max_len, &cfg, None, seed, 0, 0).unwrap();
        let (functions, constants) = Self::spec_tables(&cfg);
        let mut pop = Population::new(p, spec.max_len, spec.n_outputs);
        let mut pending = vec![0u32; p * spec.max_len];
        let f: InitFn = Self::get(&self.vary, kernels::INIT_TREES);
        let (q, pp) = (ptrs(&mut pop), pending.as_mut_ptr());
        Self::launch_groups(&self.vary, p, || {
            // SAFETY: P rows of L, pending P × L (as in CudaEngine::init_trees).
            unsafe { f(params, functions.as_ptr(), constants.as_ptr(), q.0, q.1, q.2, q.3, q.4, pp) }
        });
        pop
    }
    fn vary(&self, op: Operator, parents: &Population, pairs: &[u32], seed: u64, generation: u32, cfg: &VaryConfig) -> (Population, Vec<Outcome>) {
        let n = pairs.len() / 2;
        let l = parents.max_len;
        let params = vary_params(n, l, cfg, None, seed, generation, kernels::op_code(op)).unwrap();
        let (functions, constants) = Self::spec_tables(cfg);
        let mut parents = parents.clone();
        // Children and scratch rows start as old trees, as in the device loop's buffers.
        let mut children = used_rows(cfg, n);
        let mut scratch = used_rows(cfg, 2 * n);
        let mut pending = vec![0u32; n * l];
        let mut codes = vec![0u32; n];
        let f: VaryOpFn = Self::get(&self.vary, kernels::VARY_OP);
        let (p, c, s) = (ptrs(&mut parents), ptrs(&mut children), ptrs(&mut scratch));
        let (pp, cp) = (pending.as_mut_ptr(), codes.as_mut_ptr());
        Self::launch_groups(&self.vary, n, || {
            // SAFETY: the arrays have the sizes grove_vary_op expects (see vary.rs's launch).
            unsafe {
                f(params, pairs.as_ptr(), functions.as_ptr(), constants.as_ptr(), p.0, p.1, p.2, p.3, p.4, c.0, c.1, c.2, c.3, c.4, s.0, s.1, s.2, s.3, s.4, pp, cp)
            }
        });
        (children, codes.iter().map(|&c| outcome_of(c).unwrap()).collect())
    }
    fn breed(&self, parents: &Population, pairs: &[u32], seed: u64, generation: u32, cfg: &VaryConfig, mix: &BreedConfig) -> (Population, Vec<Bred>, BredCounts) {
        let n = pairs.len() / 2;
        let l = parents.max_len;
        let params = vary_params(n, l, cfg, Some(mix), seed, generation, 0).unwrap();
        let (functions, constants) = Self::spec_tables(cfg);
        let mut parents = parents.clone();
        let mut children = used_rows(cfg, n);
        let mut scratch = used_rows(cfg, 2 * n);
        let mut pending = vec![0u32; n * l];
        let mut codes = vec![0u32; n];
        let mut counts = [0u32; 8];
        let f: BreedFn = Self::get(&self.vary, kernels::BREED_TREES);
        let (p, c, s) = (ptrs(&mut parents), ptrs(&mut children), ptrs(&mut scratch));
        let (pp, cp, np) = (pending.as_mut_ptr(), codes.as_mut_ptr(), counts.as_mut_ptr());
        Self::launch_groups(&self.vary, n, || {
            // SAFETY: as above, for grove_breed_trees.
            unsafe {
                f(params, pairs.as_ptr(), functions.as_ptr(), constants.as_ptr(), p.0, p.1, p.2, p.3, p.4, c.0, c.1, c.2, c.3, c.4, s.0, s.1, s.2, s.3, s.4, pp, cp, np)
            }
        });
        let bred = codes.iter().map(|&c| decode_bred(c, mix).unwrap()).collect();
        (children, bred, BredCounts::from_raw(&counts))
    }
    fn ge_crossover(&self, parents: &Genomes, used: &[u32], pairs: &[u32], n_rows: usize, first_row: usize, cfg: &GeVaryConfig, seed: u64, generation: u32) -> Genomes {
        let n_pairs = pairs.len() / 2;
        let params = ge_params(n_pairs, n_rows, parents.capacity, first_row, cfg, seed, generation).unwrap();
        let mut out = Genomes::new(n_rows, parents.capacity);
        let f: GeCrossoverFn = Self::get(&self.vary, kernels::GE_CROSSOVER);
        let (oc, ol) = (out.codons.as_mut_ptr(), out.len.as_mut_ptr());
        Self::launch(&self.vary, n_pairs, || {
            // SAFETY: as in CudaEngine::ge_crossover.
            unsafe { f(params, pairs.as_ptr(), parents.codons.as_ptr(), parents.len.as_ptr(), used.as_ptr(), oc, ol) }
        });
        out
    }
    fn ge_int_flip(&self, genomes: &Genomes, used: &[u32], first_row: usize, cfg: &GeVaryConfig, seed: u64, generation: u32) -> Genomes {
        let params = ge_params(0, genomes.size(), genomes.capacity, first_row, cfg, seed, generation).unwrap();
        let mut g = genomes.clone();
        let f: GeIntFlipFn = Self::get(&self.vary, kernels::GE_INT_FLIP);
        let (gc, gl) = (g.codons.as_mut_ptr(), g.len.as_ptr());
        Self::launch(&self.vary, genomes.size() - first_row, || {
            // SAFETY: as in CudaEngine::ge_int_flip.
            unsafe { f(params, used.as_ptr(), gc, gl) }
        });
        g
    }
    fn rng_draws(&self, n: usize, seed: u64, generation: u32, purpose: Purpose, bound: u32) -> Vec<u32> {
        let mut out = vec![0u32; 16 * n];
        let f: RngFn = Self::get(&self.vary, kernels::RNG_DRAWS);
        let o = out.as_mut_ptr();
        Self::launch(&self.vary, n, || {
            // SAFETY: out holds 16 n words.
            unsafe { f(n as u32, seed as u32, (seed >> 32) as u32, generation, purpose as u32, bound, o) }
        });
        out
    }
    fn tournament(&self, fit: &[f64], sizes: Option<&[u16]>, n_slots: usize, k: usize, distinct: bool, seed: u64, generation: u32) -> Vec<u32> {
        let (pool, n_valid) = self.valid_pool(fit, sizes);
        let params = SelectParams {
            n: fit.len() as u32,
            n_slots: n_slots as u32,
            k: k as u32,
            distinct: distinct as u32,
            seed_lo: seed as u32,
            seed_hi: (seed >> 32) as u32,
            generation,
            ..SelectParams::default()
        };
        let mut w = vec![0u32; n_slots];
        let f: TournamentFn = Self::get(&self.select, kernels::TOURNAMENT);
        let wp = w.as_mut_ptr();
        Self::launch(&self.select, n_slots, || {
            // SAFETY: pool holds n_valid indices below P; w holds n_slots.
            unsafe { f(params, fit.as_ptr(), pool.as_ptr(), n_valid.as_ptr(), wp) }
        });
        w
    }
    fn rank(&self, fit: &[f64]) -> Vec<u32> {
        // One thread per block: each thread stages every tile itself, so the kernel is exact.
        let params = SelectParams { n: fit.len() as u32, ..SelectParams::default() };
        let mut ranked = vec![u32::MAX; fit.len()];
        let f: RankFn = Self::get(&self.select, kernels::RANK);
        let rp = ranked.as_mut_ptr();
        Self::launch(&self.select, fit.len(), || {
            // SAFETY: fit and ranked hold P entries.
            unsafe { f(params, fit.as_ptr(), rp) }
        });
        ranked
    }
    fn top_k(&self, fit: &[f64], k: usize, mode: u32) -> Vec<Vec<u32>> {
        type InitFn = unsafe extern "C" fn(u32, u32, *mut u64, *mut u32);
        type PassFn = unsafe extern "C" fn(u32, u32, u32, *const f64, *mut u64, *mut u32);
        type CollectFn = unsafe extern "C" fn(u32, u32, u32, *const f64, *mut u64, *mut u64, *mut u32);
        type OrderFn = unsafe extern "C" fn(u32, u32, *const u64, *const u32, *mut u32);
        type GridFn = unsafe extern "C" fn(u32);
        let slots = if mode == 2 { 2 } else { 1 };
        let (n, k) = (fit.len() as u32, k.min(fit.len()) as u32);
        if k == 0 {
            return vec![Vec::new(); slots];
        }
        let (ks, s) = (k as usize, slots);
        let (mut state, mut hist) = (vec![0u64; 4 * s], vec![u32::MAX; 256 * s + 1]);
        let (mut keys, mut rows, mut out) = (vec![0u64; s * ks], vec![u32::MAX; s * ks], vec![u32::MAX; s * ks]);
        // Fewer blocks than rows, so the grid-stride loops take several turns.
        let blocks = n.div_ceil(3).max(1);
        let grid: GridFn = Self::get(&self.select, "grove_emu_set_grid");
        let init: InitFn = Self::get(&self.select, kernels::TOPK_INIT);
        let pass: PassFn = Self::get(&self.select, kernels::TOPK_PASS);
        let collect: CollectFn = Self::get(&self.select, kernels::TOPK_COLLECT);
        let order: OrderFn = Self::get(&self.select, kernels::TOPK_ORDER);
        let (sp, hp, kp, rp, op) = (state.as_mut_ptr(), hist.as_mut_ptr(), keys.as_mut_ptr(), rows.as_mut_ptr(), out.as_mut_ptr());
        // SAFETY: as CudaEngine::top_k launches them: a 32-byte state per slot, 256 bins per
        // slot and the blocks' count, fit n entries, keys, rows and out k entries per slot. The
        // blocks of a pass run one after another, each as 8 real threads (so the last block's
        // scan over the bins runs as a block does), and the last one counted is the last block.
        Self::launch(&self.select, 1, || unsafe { init(k, mode, sp, hp) });
        let (fa, sa, ha) = (fit.as_ptr() as usize, sp as usize, hp as usize);
        // Three blocks of 8 threads: still several turns of the grid-stride loop.
        let pass_blocks = blocks.min(3);
        for d in 0..12 {
            for b in 0..pass_blocks {
                Self::run_block_at(&self.select, b, 8, &|| unsafe {
                    grid(pass_blocks);
                    pass(n, mode, d, fa as *const f64, sa as *mut u64, ha as *mut u32)
                });
            }
            assert_eq!(hist[256 * s], 0, "pass {d} left its count of blocks");
            assert!(hist[..256 * s].iter().all(|&b| b == 0), "pass {d} left its histogram");
        }
        Self::launch(&self.select, blocks as usize, || unsafe {
            grid(blocks);
            collect(n, mode, k, fit.as_ptr(), sp, kp, rp)
        });
        Self::launch(&self.select, s * ks, || unsafe { order(k, mode, kp, rp, op) });
        out.chunks(ks).map(<[u32]>::to_vec).collect()
    }
    fn truncation(&self, fit: &[f64], n_slots: usize, rate: f64, seed: u64, generation: u32) -> Vec<u32> {
        let ranked = self.rank(fit);
        let params = SelectParams {
            n: fit.len() as u32,
            n_slots: n_slots as u32,
            n_top: select::truncation_size(fit.len(), rate) as u32,
            seed_lo: seed as u32,
            seed_hi: (seed >> 32) as u32,
            generation,
            ..SelectParams::default()
        };
        let mut w = vec![0u32; n_slots];
        let f: TruncationFn = Self::get(&self.select, kernels::TRUNCATION);
        let wp = w.as_mut_ptr();
        Self::launch(&self.select, n_slots, || {
            // SAFETY: ranked holds P entries, n_top <= P; w holds n_slots.
            unsafe { f(params, ranked.as_ptr(), wp) }
        });
        w
    }
    fn pareto(&self, fit: &[f64], sizes: &[u16], max_len: usize, keep: usize, n_slots: usize, k: usize, seed: u64, generation: u32) -> ParetoOut {
        type RanksFn = unsafe extern "C" fn(u32, *const u64, *const u64, *const u32, *mut u64, *mut u32, *mut u32);
        type CrowdFn = unsafe extern "C" fn(u32, u32, *const u64, *const u32, *const f64, *const u16, *mut f64);
        type TournamentFn = unsafe extern "C" fn(SelectParams, *const u32, *const f64, *const u32, *const u32, *mut u32);
        let n = fit.len();
        let digits = |max: u64| (64 - max.leading_zeros()).div_ceil(4).max(1);
        let (size_digits, rank_digits) = (digits(max_len as u64 + 1), digits(n as u64 - 1));
        let (mut rank, mut crowd) = (vec![u32::MAX; n], vec![f64::NAN; n]);
        let (lo, hi, idx) = self.pareto_sort(fit, sizes, max_len, &rank, &crowd, 0, 16, size_digits);
        let (mut front_min, mut at) = (vec![u64::MAX; n], vec![u32::MAX; n]);
        let ranks: RanksFn = Self::get(&self.select, kernels::PARETO_RANKS);
        let p = (lo.as_ptr() as usize, hi.as_ptr() as usize, idx.as_ptr() as usize, front_min.as_mut_ptr() as usize, at.as_mut_ptr() as usize, rank.as_mut_ptr() as usize);
        // SAFETY: n entries each; one block of 64 real threads (two warps) meeting at its barriers.
        Self::run_block(&self.select, 64, &|| unsafe { ranks(n as u32, p.0 as *const u64, p.1 as *const u64, p.2 as *const u32, p.3 as *mut u64, p.4 as *mut u32, p.5 as *mut u32) });
        let crowding: CrowdFn = Self::get(&self.select, kernels::PARETO_CROWDING);
        for (m, mode, lo_digits) in [(0u32, 1u32, 16u32), (1, 2, size_digits)] {
            let (_, hi, idx) = self.pareto_sort(fit, sizes, max_len, &rank, &crowd, mode, lo_digits, rank_digits);
            let cp = crowd.as_mut_ptr();
            // SAFETY: n sorted entries, fit and sizes n; one thread per position.
            Self::launch(&self.select, n, || unsafe { crowding(n as u32, m, hi.as_ptr(), idx.as_ptr(), fit.as_ptr(), sizes.as_ptr(), cp) });
        }
        let (_, _, order) = self.pareto_sort(fit, sizes, max_len, &rank, &crowd, 3, 16, rank_digits);
        let survivors = order[..keep.min(n)].to_vec();
        let (pool, n_valid) = self.valid_pool(fit, None);
        let params = SelectParams { n: n as u32, n_slots: n_slots as u32, k: k as u32, seed_lo: seed as u32, seed_hi: (seed >> 32) as u32, generation, ..SelectParams::default() };
        let mut winners = vec![u32::MAX; n_slots];
        let tournament: TournamentFn = Self::get(&self.select, kernels::PARETO_TOURNAMENT);
        let wp = winners.as_mut_ptr();
        // SAFETY: rank and crowd n entries, the pool as the valid-pool kernels wrote it; one
        // thread per slot.
        Self::launch(&self.select, n_slots, || unsafe { tournament(params, rank.as_ptr(), crowd.as_ptr(), pool.as_ptr(), n_valid.as_ptr(), wp) });
        ParetoOut { rank, crowd, survivors, winners }
    }
    fn lexicase(&self, errors: &[f64], n_cases: usize, fit: &[f64], sizes: Option<&[u16]>, k_pool: usize, n_slots: usize, seed: u64, generation: u32) -> (Vec<f64>, Vec<u32>) {
        self.lexicase_emulated(errors, n_cases, fit, sizes, k_pool, n_slots, seed, generation)
    }
}

impl Emulator {
    /// The lexicase kernels, the pool from the emulated grove_valid_pool: the epsilon sample
    /// (one thread), the epsilons (a block of EMU_EPSILON_THREADS real threads per case), the
    /// selections (one thread each, the buffers' stride the slots).
    #[allow(clippy::too_many_arguments)]
    fn lexicase_emulated(&self, errors: &[f64], n_cases: usize, fit: &[f64], sizes: Option<&[u16]>, k_pool: usize, n_slots: usize, seed: u64, generation: u32) -> (Vec<f64>, Vec<u32>) {
        type SampleFn = unsafe extern "C" fn(SelectParams, *const u32, *const u32, *mut u32, *mut u32);
        type EpsFn = unsafe extern "C" fn(SelectParams, *const f64, *const u32, *const u32, *mut f64);
        let (pool, n_valid) = self.valid_pool(fit, sizes);
        let params = SelectParams {
            n: fit.len() as u32,
            n_slots: n_slots as u32,
            k: k_pool as u32,
            seed_lo: seed as u32,
            seed_hi: (seed >> 32) as u32,
            generation,
            n_cases: n_cases as u32,
            stride: n_slots as u32,
            ..SelectParams::default()
        };
        let mut sample = vec![u32::MAX; grove::select::EPSILON_SAMPLE];
        let mut count = [u32::MAX];
        let f: SampleFn = Self::get(&self.select, kernels::EPSILON_SAMPLE_KERNEL);
        // SAFETY: the pool as grove_valid_pool wrote it, sample EPSILON_SAMPLE entries, count one.
        Self::launch(&self.select, 1, || unsafe { f(params, pool.as_ptr(), n_valid.as_ptr(), sample.as_mut_ptr(), count.as_mut_ptr()) });
        let mut eps = vec![f64::NAN; n_cases];
        let f: EpsFn = Self::get(&self.select, kernels::LEXICASE_EPSILONS);
        let (ep, sp, cp, outp) = (errors.as_ptr() as usize, sample.as_ptr() as usize, count.as_ptr() as usize, eps.as_mut_ptr() as usize);
        for c in 0..n_cases as u32 {
            // SAFETY: errors P × C, the sample count[0] individuals; block c writes eps[c].
            Self::run_block_at(&self.select, c, EMU_EPSILON_THREADS, &|| unsafe {
                f(params, ep as *const f64, sp as *const u32, cp as *const u32, outp as *mut f64)
            });
        }
        // The clone groups: the hash table, then each row checked against its hash's first.
        type InsertFn = unsafe extern "C" fn(SelectParams, *const f64, u32, *mut u64, *mut u32);
        type VerifyFn = unsafe extern "C" fn(SelectParams, *const f64, u32, *const u64, *const u32, *mut u32);
        let p = fit.len();
        let bits = (2 * p.max(1)).next_power_of_two().trailing_zeros();
        let (mut keys, mut vals, mut group) = (vec![0u64; 1 << bits], vec![u32::MAX; 1 << bits], vec![u32::MAX; p]);
        let insert: InsertFn = Self::get(&self.select, kernels::ERROR_GROUPS_INSERT);
        let verify: VerifyFn = Self::get(&self.select, kernels::ERROR_GROUPS_VERIFY);
        let (kp, vp, gp) = (keys.as_mut_ptr(), vals.as_mut_ptr(), group.as_mut_ptr());
        // SAFETY: errors P × C, the table 2^bits >= 2P slots, group P.
        Self::launch(&self.select, p, || unsafe { insert(params, errors.as_ptr(), bits, kp, vp) });
        Self::launch(&self.select, p, || unsafe { verify(params, errors.as_ptr(), bits, kp, vp, gp) });
        for i in 0..p {
            let rep = group[i] as usize;
            let row = |j: usize| errors[j * n_cases..(j + 1) * n_cases].iter().map(|e| e.to_bits()).collect::<Vec<_>>();
            assert!(rep <= i && row(rep) == row(i), "row {i}: group {rep}");
            assert!((0..i).all(|j| row(j) != row(i)) == (rep == i), "row {i}: group {rep} is the first of its clones");
        }
        let (ep, epsp, pp, nvp, gp) = (errors.as_ptr() as usize, eps.as_ptr() as usize, pool.as_ptr() as usize, n_valid.as_ptr() as usize, group.as_ptr() as usize);
        if let Some((threads, _)) = lexicase_staged_shape(k_pool, fit.len(), n_cases, EMU_STAGED_BYTES) {
            // A block of real threads per group of k_pool slots, as the engine launches it.
            let mut w = vec![u32::MAX; n_slots];
            let f: StagedFn = Self::get(&self.select, kernels::LEXICASE_STAGED);
            let wp = w.as_mut_ptr() as usize;
            for q in 0..n_slots.div_ceil(k_pool) {
                // SAFETY: errors P × C, eps C, pool n_valid entries, group P; block q writes the
                // winners of its group's slots.
                Self::run_block_at(&self.select, q as u32, threads, &|| unsafe {
                    f(params, ep as *const f64, epsp as *const f64, pp as *const u32, nvp as *const u32, gp as *const u32, wp as *mut u32)
                });
            }
            return (eps, w);
        }
        let width = if k_pool == 0 { fit.len() } else { k_pool.min(fit.len()) };
        let mut order = vec![0u32; if n_cases > EMU_LEXICASE_CASES { n_slots * n_cases } else { 1 }];
        let mut cand = vec![0u32; n_slots * width];
        let mut w = vec![u32::MAX; n_slots];
        let f: LexicaseFn = Self::get(&self.select, kernels::LEXICASE);
        let params = SelectParams { stride: width as u32, ..params };
        let (op, cap, wp) = (order.as_mut_ptr() as usize, cand.as_mut_ptr() as usize, w.as_mut_ptr() as usize);
        Self::launch_groups(&self.select, n_slots, || {
            // SAFETY: errors P × C, eps C, pool n_valid entries, group P, order n_slots × C
            // where C exceeds the shared orders, cand n_slots × width; group g writes w[g].
            unsafe {
                f(params, ep as *const f64, epsp as *const f64, pp as *const u32, nvp as *const u32, gp as *const u32, op as *mut u32, cap as *mut u32, wp as *mut u32)
            }
        });
        (eps, w)
    }
}

// ---------------------------------------------------------------------------------------------
// Inputs.

/// Specs that between them reach every branch: single and multi-output, fixed constants and a
/// range, no constants, one function per arity (no alternative for point mutation), and a
/// tiny L where most changes are oversized.
fn specs() -> Vec<(&'static str, VaryConfig)> {
    let fs = vec![Op::Add, Op::Sub, Op::Mul, Op::Div, Op::Sin, Op::Cos];
    let base = TreeSpec::new(fs.clone(), 3, 64).with_constants(&[-1.0, 0.0, 1.0]).with_const_range(-5.0, 5.0).with_depth(0, 7);
    let multi = TreeSpec::new(fs.clone(), 2, 32).with_const_range(-1.0, 1.0).with_outputs(3, 0.1).with_depth(0, 6);
    let vars = TreeSpec::new(vec![Op::Add, Op::Sin], 4, 48).with_depth(1, 8);
    let tiny = TreeSpec::new(fs, 2, 9).with_constants(&[0.5, 2.0]).with_depth(0, 4);
    let consts = TreeSpec::new(vec![Op::Mul, Op::Sub], 0, 40).with_const_range(-3.0, 3.0).with_depth(0, 6);
    let mut out = vec![
        ("base", VaryConfig::new(base)),
        ("multi-output", VaryConfig { subtree_depth: (1, 4), p_point: 0.3, ..VaryConfig::new(multi) }),
        ("variables only", VaryConfig { p_point: 0.5, ..VaryConfig::new(vars) }),
        ("tiny L", VaryConfig { subtree_depth: (0, 5), ..VaryConfig::new(tiny) }),
        ("constants only", VaryConfig { sigma: 1e30, p_constant: 0.9, ..VaryConfig::new(consts) }),
    ];
    // Subtree mutation that asks for deep trees in little room: the generator's fallbacks.
    let deep = TreeSpec::new(vec![Op::Add, Op::Mul, Op::Sin], 2, 24).with_const_range(0.0, 1.0).with_depth(2, 6).with_method(grove::program::init::InitMethod::Full);
    out.push(("deep subtrees", VaryConfig { subtree_depth: (3, 9), ..VaryConfig::new(deep) }));
    out
}

/// A population of `p` random trees of `cfg`'s spec, every 13th row empty.
fn population(cfg: &VaryConfig, p: usize, seed: u64) -> Population {
    let mut pop = init_population(&cfg.spec, p, seed).unwrap();
    for i in (0..p).step_by(13) {
        pop.clear(i);
    }
    pop
}

/// `n` rows that already hold trees (zero after their lengths, as every population's rows
/// are): the kernels write a child over an old tree and zero only what it leaves.
fn used_rows(cfg: &VaryConfig, n: usize) -> Population {
    let spec = cfg.spec.clone().with_depth(cfg.spec.max_depth / 2, cfg.spec.max_depth);
    init_population(&spec, n, 4321).unwrap()
}

/// `2n` uniform parent indices below `p`.
fn random_pairs(n: usize, p: usize, seed: u64) -> Vec<u32> {
    let mut s = Stream::new(seed, 99, 0, Purpose::Bench);
    (0..2 * n).map(|_| s.below(p as u32)).collect()
}

/// The first difference between two populations, as "child k, node i: field: device=.. cpu=..".
fn first_mismatch(dev: &Population, cpu: &Population) -> Option<String> {
    for k in 0..cpu.size() {
        if dev.len[k] != cpu.len[k] {
            return Some(format!("child {k}: len: device={} cpu={}", dev.len[k], cpu.len[k]));
        }
        for i in k * cpu.max_len..(k + 1) * cpu.max_len {
            let node = i - k * cpu.max_len;
            let fields = [
                ("op", dev.op[i] as u64, cpu.op[i] as u64),
                ("value bits", dev.value[i].to_bits() as u64, cpu.value[i].to_bits() as u64),
                ("size", dev.size[i] as u64, cpu.size[i] as u64),
                ("out", dev.out[i] as u64, cpu.out[i] as u64),
            ];
            if let Some((f, a, b)) = fields.iter().find(|(_, a, b)| a != b) {
                return Some(format!("child {k}, node {node}: {f}: device={a:#x} cpu={b:#x} (values {} vs {})", dev.value[i], cpu.value[i]));
            }
        }
    }
    None
}

// ---------------------------------------------------------------------------------------------
// The checks, each on any device.

fn init_matches_reference(dev: &dyn Device) {
    use grove::program::init::InitMethod;
    for (name, cfg) in specs() {
        for (seed, method) in [(1u64, InitMethod::HalfAndHalf), (2, InitMethod::Grow), (3, InitMethod::Full)] {
            let spec = cfg.spec.clone().with_method(method);
            let got = dev.init(&spec, 300, seed);
            let want = init_population(&spec, 300, seed).unwrap();
            if let Some(m) = first_mismatch(&got, &want) {
                panic!("first mismatch: init, spec {name}, {method:?}, seed {seed}: {m}");
            }
        }
    }
}

fn rng_matches_reference(dev: &dyn Device) {
    for (seed, generation, purpose, bound) in [(0u64, 0u32, Purpose::Select, 7u32), (0x1234_5678_9abc_def0, 17, Purpose::Mutate, 1), (u64::MAX, u32::MAX, Purpose::Crossover, u32::MAX)] {
        let n = 1000;
        let got = dev.rng_draws(n, seed, generation, purpose, bound);
        for i in 0..n {
            let mut s = Stream::new(seed, generation, i as u32, purpose);
            let mut want = Vec::with_capacity(16);
            want.extend((0..4).map(|_| s.next_u32()));
            want.extend((0..4).map(|_| s.below(bound)));
            want.extend((0..4).map(|_| s.unit_f32().to_bits()));
            want.extend((0..4).map(|_| normal(&mut s).to_bits()));
            assert_eq!(&got[16 * i..16 * i + 16], &want[..], "stream {i} of seed {seed:#x}, generation {generation}, {purpose:?}");
        }
    }
}

fn vary_ops_match_reference(dev: &dyn Device) {
    let mut seen = std::collections::HashMap::new();
    for (name, cfg) in specs() {
        for seed in [1u64, 2, 3] {
            let parents = population(&cfg, 150, seed);
            let pairs = random_pairs(200, parents.size(), seed);
            for op in Operator::ALL {
                let generation = 5 + seed as u32;
                let (got, outcomes) = dev.vary(op, &parents, &pairs, seed, generation, &cfg);
                let mut want = Population::new(200, parents.max_len, parents.n_outputs);
                let mut want_outcomes = Vec::new();
                for (k, mut row) in want.rows_mut().into_iter().enumerate() {
                    let (a, b) = (parents.tree(pairs[2 * k] as usize), parents.tree(pairs[2 * k + 1] as usize));
                    want_outcomes.push(op.apply(a, b, &mut row, seed, generation, k, &cfg));
                }
                if let Some(m) = first_mismatch(&got, &want) {
                    panic!("first mismatch: {op:?}, spec {name}, seed {seed}: {m}");
                }
                if let Some(k) = (0..want_outcomes.len()).find(|&k| outcomes[k] != want_outcomes[k]) {
                    panic!("{op:?}, spec {name}, seed {seed}: child {k}: outcome device={:?} cpu={:?}", outcomes[k], want_outcomes[k]);
                }
                got.validate().unwrap_or_else(|e| panic!("{op:?}, spec {name}: {e}"));
                for o in outcomes {
                    *seen.entry((op, outcome_code(o))).or_insert(0usize) += 1;
                }
            }
        }
    }
    // Every operator changed some child; the fallbacks happened.
    for op in Operator::ALL {
        assert!(seen.contains_key(&(op, 0)), "{op:?} never changed a child");
    }
    let count = |code: u32| seen.iter().filter(|((_, c), _)| *c == code).map(|(_, n)| n).sum::<usize>();
    assert!(count(2) > 0, "no oversized child");
    assert!(count(3) > 0, "no child without room for its outputs");
    eprintln!("outcomes by (operator, code): {seen:?}");
}

fn breed_matches_reference(dev: &dyn Device) {
    for (name, cfg) in specs() {
        let mix = BreedConfig {
            p_crossover: 0.7,
            crossovers: vec![(Crossover::OnePoint, 1.0), (Crossover::LeafBiased, 2.0)],
            p_mutation: 0.6,
            mutations: Mutation::ALL.iter().enumerate().map(|(i, m)| (*m, (i % 3) as f32 + 0.5)).collect(),
        };
        for seed in [7u64, 8] {
            let parents = population(&cfg, 200, seed);
            let pairs = random_pairs(256, parents.size(), seed);
            let (got, got_bred, counts) = dev.breed(&parents, &pairs, seed, 3, &cfg, &mix);
            let mut want = Population::new(256, parents.max_len, parents.n_outputs);
            let pair_list: Vec<[u32; 2]> = pairs.chunks(2).map(|c| [c[0], c[1]]).collect();
            let want_bred = breed(&parents, &pair_list, &mut want, seed, 3, &cfg, &mix).unwrap();
            if let Some(m) = first_mismatch(&got, &want) {
                panic!("first mismatch: breed, spec {name}, seed {seed}: {m}");
            }
            if let Some(k) = (0..want_bred.len()).find(|&k| got_bred[k] != want_bred[k]) {
                panic!("breed, spec {name}, seed {seed}: child {k}: device={:?} cpu={:?}", got_bred[k], want_bred[k]);
            }
            assert_eq!(counts, BredCounts::from_bred(&want_bred), "breed counts, spec {name}, seed {seed}");
            got.validate().unwrap();
        }
    }
}

/// `p` random genomes of capacity `cap` (lengths 0..=cap) and used counts around their lengths.
fn genomes(p: usize, cap: usize, seed: u64) -> (Genomes, Vec<u32>) {
    let mut s = Stream::new(seed, 1, 2, Purpose::Bench);
    let mut g = Genomes::new(p, cap);
    let mut used = Vec::with_capacity(p);
    for i in 0..p {
        let len = s.below(cap as u32 + 1) as usize;
        let row: Vec<u32> = (0..len).map(|_| s.next_u32() % 1000).collect();
        g.set(i, &row);
        used.push(s.below(len as u32 + 6));
    }
    (g, used)
}

fn ge_matches_reference(dev: &dyn Device) {
    // Then int-flip at 1 / used codons (PonyGE2's rate) and at the larger of 0.1 and that (1 /
    // used wins below 10 codons), each within the used codons and not.
    use grove::genome::vary::IntFlipRate::{AtLeastPerUsed, Fixed, PerUsed};
    let cases = [(1u64, 50usize, true, Fixed), (2, 8, false, Fixed), (3, 1, true, Fixed), (4, 50, true, PerUsed), (5, 37, false, PerUsed), (6, 50, true, AtLeastPerUsed), (7, 37, false, AtLeastPerUsed), (8, 9, true, AtLeastPerUsed)];
    for (seed, cap, within_used, per_used) in cases {
        let cfg = GeVaryConfig { crossover: 0.8, mutation: 0.1, within_used, codon_size: 1000, ..GeVaryConfig::default() }.with_int_flip_rate(per_used);
        let (parents, used) = genomes(301, cap, seed);
        let (p, first_row) = (parents.size(), 3);
        let n_pairs = (p - first_row).div_ceil(2);
        let pairs = random_pairs(n_pairs, p, seed);
        let got = dev.ge_crossover(&parents, &used, &pairs, p, first_row, &cfg, seed, 4);
        let mut want = Genomes::new(p, cap);
        let (mut c0, mut c1) = (Vec::new(), Vec::new());
        for j in 0..n_pairs {
            let (a, b) = (pairs[2 * j] as usize, pairs[2 * j + 1] as usize);
            let mut s = Stream::new(seed, 4, j as u32, Purpose::Crossover);
            crossover(parents.get(a), parents.get(b), used[a], used[b], &cfg, cap, &mut s, &mut c0, &mut c1);
            for (w, c) in [&c0, &c1].into_iter().enumerate() {
                if first_row + 2 * j + w < p {
                    want.set(first_row + 2 * j + w, c);
                }
            }
        }
        assert_eq!(got.len, want.len, "GE crossover lengths, seed {seed}");
        assert_eq!(got.codons, want.codons, "GE crossover codons, seed {seed}");

        let (_, child_used) = genomes(p, cap, seed + 10);
        let got = dev.ge_int_flip(&want, &child_used, first_row, &cfg, seed, 4);
        let mut flipped = want.clone();
        for (k, &u) in child_used.iter().enumerate().skip(first_row) {
            let len = flipped.len[k] as usize;
            let row = &mut flipped.codons[k * cap..k * cap + len];
            int_flip(row, u, &cfg, &mut Stream::new(seed, 4, k as u32, Purpose::Mutate));
        }
        if let Some(i) = (0..got.codons.len()).find(|&i| got.codons[i] != flipped.codons[i]) {
            panic!("GE int-flip (rate {per_used:?}), seed {seed}: first mismatch at [row {}, codon {}]: gpu={} cpu={}", i / cap, i % cap, got.codons[i], flipped.codons[i]);
        }
        assert_ne!(flipped.codons, want.codons, "int-flip changed nothing");
    }
}

/// Fitness lists with ties, NaN, infinities, signed zeros, all-invalid, and one individual.
fn fitness_cases() -> Vec<Vec<f64>> {
    let mut s = Stream::new(5, 0, 0, Purpose::Bench);
    let mut big: Vec<f64> = (0..3000).map(|_| (s.below(200) as f64) * 0.25 - 10.0).collect();
    for (i, f) in big.iter_mut().enumerate() {
        match i % 29 {
            0 => *f = f64::NAN,
            1 => *f = f64::INFINITY,
            2 => *f = -0.0,
            3 => *f = 0.0,
            4 => *f = f64::NEG_INFINITY,
            _ => {}
        }
    }
    vec![
        big,
        vec![3.0, 1.0, 2.0, 1.0, f64::NAN],
        vec![f64::NAN, f64::INFINITY, f64::NAN],
        vec![4.0],
        (0..1000).map(|i| (i % 7) as f64).collect(),
    ]
}

fn selection_matches_reference(dev: &dyn Device) {
    for (c, fit) in fitness_cases().iter().enumerate() {
        let pool = select::valid_indices(fit);
        for (k, distinct) in [(1, false), (2, false), (3, false), (7, false), (2, true), (5, true), (64, true)] {
            let slots = 2 * fit.len() + 3;
            let got = dev.tournament(fit, None, slots, k, distinct, 11, 2);
            for (s, &g) in got.iter().enumerate() {
                let want = if distinct {
                    select::tournament_distinct(fit, &pool, k, 11, 2, s)
                } else {
                    select::tournament(fit, &pool, k, 11, 2, s)
                };
                assert_eq!(g as usize, want, "fitness case {c}, k {k}, distinct {distinct}: slot {s}");
            }
        }
        let ranked: Vec<usize> = dev.rank(fit).iter().map(|&i| i as usize).collect();
        assert_eq!(ranked, select::elite(fit, fit.len()), "ranking of fitness case {c}");
        for rate in [0.1, 0.5, 1.0] {
            let got = dev.truncation(fit, 500, rate, 3, 9);
            for (s, &g) in got.iter().enumerate() {
                assert_eq!(g as usize, select::truncation(&ranked, rate, 3, 9, s), "truncation {rate}, fitness case {c}, slot {s}");
            }
        }
    }
}

/// The radix select of migration gives `select::elite(fit, k)` and `islands::worst(fit, k)`:
/// ties, NaN, both infinities and both zeros; k from none to more than P.
/// NSGA-II on a device: ranks, crowding distances (bit for bit), survivors and tournament
/// winners equal `select::pareto`'s, on points with many ties (integer sizes, repeated errors),
/// invalid programs (NaN, +-inf), -0 beside +0, one point, and more than one radix tile.
fn pareto_matches_reference(dev: &dyn Device) {
    let mut s = Stream::new(17, 0, 0, Purpose::Bench);
    let mut cases: Vec<(Vec<f64>, Vec<u16>, usize)> = Vec::new();
    for (n, levels, max_len) in [(1usize, 3u32, 8usize), (2, 2, 8), (7, 3, 8), (60, 5, 16), (300, 40, 64), (2500, 25, 300)] {
        let fit: Vec<f64> = (0..n)
            .map(|i| match (i * 7 + n) % 23 {
                0 => f64::NAN,
                1 => f64::INFINITY,
                2 => f64::NEG_INFINITY,
                3 => -0.0,
                4 => 0.0,
                _ => (s.below(levels) as f64) * 0.5 - 2.0,
            })
            .collect();
        let sizes: Vec<u16> = (0..n).map(|_| 1 + s.below(max_len.min(levels as usize * 2) as u32) as u16).collect();
        cases.push((fit, sizes, max_len));
    }
    // Every point on one front (a line), and every point equal.
    cases.push(((0..50).map(|i| i as f64).collect(), (0..50).map(|i| 60 - i as u16).collect(), 64));
    cases.push((vec![1.5; 40], vec![9; 40], 16));
    for (c, (fit, sizes, max_len)) in cases.iter().enumerate() {
        let n = fit.len();
        let want = select::pareto::Ranking::of(fit, sizes);
        let pool = select::valid_indices(fit);
        {
            let keep = n - n / 3;
            let got = dev.pareto(fit, sizes, *max_len, keep, 2 * n + 1, 2, 9, 4);
            assert_eq!(got.rank, want.rank, "case {c}: ranks");
            let bits = |d: &[f64]| d.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got.crowd), bits(&want.distance), "case {c}: crowding distances");
            let survivors: Vec<u32> = select::pareto::survivors(&select::pareto::points(fit, sizes), keep).iter().map(|&i| i as u32).collect();
            assert_eq!(got.survivors, survivors, "case {c}: the {keep} survivors");
            let winners: Vec<u32> = (0..2 * n + 1).map(|slot| want.tournament(&pool, 2, 9, 4, slot) as u32).collect();
            assert_eq!(got.winners, winners, "case {c}: tournament winners");
        }
    }
}

fn top_k_matches_reference(dev: &dyn Device) {
    let mut s = Stream::new(21, 0, 0, Purpose::Bench);
    let mut cases = fitness_cases();
    cases.push((0..3000).map(|i| match s.below(9) { 0 => f64::NAN, 1 => f64::INFINITY, 2 => f64::NEG_INFINITY, 3 => -0.0, 4 => 0.0, _ => (i % 13) as f64 * 0.25 - 1.0 }).collect());
    cases.push((0..4000).map(|_| s.unit_f64() * 1e-3).collect());
    cases.push(vec![f64::NAN; 700]);
    for (c, fit) in cases.iter().enumerate() {
        let n = fit.len();
        let usize_of = |v: &Vec<u32>| v.iter().map(|&i| i as usize).collect::<Vec<usize>>();
        for k in [0, 1, 2, 7, n / 2, n.saturating_sub(1), n, n + 5] {
            let (best, worst) = (select::elite(fit, k), grove::evolve::islands::worst(fit, k));
            let what = format!("fitness case {c} (P = {n}), k = {k}");
            assert_eq!(dev.top_k(fit, k, 0).iter().map(usize_of).collect::<Vec<_>>(), [best.clone()], "elite of {what}");
            assert_eq!(dev.top_k(fit, k, 1).iter().map(usize_of).collect::<Vec<_>>(), [worst.clone()], "worst of {what}");
            assert_eq!(dev.top_k(fit, k, 2).iter().map(usize_of).collect::<Vec<_>>(), [best, worst], "both of {what}");
        }
    }
}

/// The valid pool's block-wide scan at sizes around its 1024 threads: tournaments of size 1
/// pick only valid individuals, uniformly, in the CPU's order.
fn valid_pool_matches_reference(dev: &dyn Device) {
    for n in [1usize, 2, 1023, 1024, 1025, 4097, 100_000] {
        let fit: Vec<f64> = (0..n).map(|i| if i % 3 == 1 { f64::NAN } else { (i % 11) as f64 }).collect();
        let pool = select::valid_indices(&fit);
        let got = dev.tournament(&fit, None, 5000, 1, false, 1, 1);
        for (s, &g) in got.iter().enumerate() {
            assert_eq!(g as usize, select::tournament(&fit, &pool, 1, 1, 1, s), "P = {n}, slot {s}");
        }
    }
}

fn lexicase_matches_reference(dev: &dyn Device) {
    let mut s = Stream::new(8, 0, 0, Purpose::Bench);
    // (P, cases, coarse errors, pool): whole pools and drawn ones; P 1500 samples its
    // epsilons (more than EPSILON_SAMPLE valid individuals). Drawn pools of 256 over 120 cases
    // take the warp kernel on a device and in the emulator, over 40 cases the staged kernel on
    // a device and the warp kernel in the emulator (its smaller shared memory); the rest the
    // staged kernel on both, P 90 with a pool of 128 staging the whole valid pool.
    for (p, n_cases, coarse, k_pool) in [(200usize, 30usize, true, 0usize), (300, 5, false, 0), (7, 1, true, 0), (50, 64, false, 0), (300, 12, true, 40), (1500, 9, false, 64), (1500, 7, true, 0), (50, 4, true, 1), (1, 3, false, 0), (2, 2, true, 0), (600, 3, true, 200), (300, 120, true, 256), (270, 40, true, 256), (90, 6, true, 128)] {
        // Coarse errors tie often (long filters); fine ones separate quickly. Some NaN.
        let mut errors: Vec<f64> = (0..p * n_cases)
            .map(|i| match (i % 97, coarse) {
                (0, _) => f64::NAN,
                (_, true) => s.below(4) as f64,
                (_, false) => s.unit_f64() * 10.0,
            })
            .collect();
        // Clones: every fifth row repeats one of three, so selections end among clones.
        for i in (5..p).step_by(5) {
            let from = [1, 2, 3][i % 3];
            let row = errors[from * n_cases..(from + 1) * n_cases].to_vec();
            errors[i * n_cases..(i + 1) * n_cases].copy_from_slice(&row);
        }
        let fit: Vec<f64> = (0..p).map(|i| if i % 11 == 3 { f64::INFINITY } else { errors[i * n_cases..(i + 1) * n_cases].iter().sum() }).collect();
        let pool = select::valid_indices(&fit);
        let n_slots = if p > 1000 { 300 } else { 2 * p };
        let (eps, got) = dev.lexicase(&errors, n_cases, &fit, None, k_pool, n_slots, 13, 6);
        let want_eps = select::lexicase_epsilons(&errors, n_cases, &pool, 13, 6);
        assert_eq!(eps.iter().map(|e| e.to_bits()).collect::<Vec<_>>(), want_eps.iter().map(|e| e.to_bits()).collect::<Vec<_>>(), "P {p}: epsilons");
        for (slot, &g) in got.iter().enumerate() {
            let want = select::epsilon_lexicase(&errors, n_cases, &eps, &pool, k_pool, 13, 6, slot);
            assert_eq!(g as usize, want, "P {p}, {n_cases} cases, pool {k_pool}: slot {slot}");
        }
    }
    // No valid individual: every one competes.
    let errors: Vec<f64> = (0..40 * 3).map(|_| s.below(5) as f64).collect();
    let fit = vec![f64::INFINITY; 40];
    for k_pool in [0, 8] {
        let (eps, got) = dev.lexicase(&errors, 3, &fit, None, k_pool, 60, 2, 1);
        for (slot, &g) in got.iter().enumerate() {
            assert_eq!(g as usize, select::epsilon_lexicase(&errors, 3, &eps, &[], k_pool, 2, 1, slot), "none valid, pool {k_pool}");
        }
    }
}

/// Unique parents (`Diversity::Unique`): of each fitness value, bit for bit, only the smallest
/// program (then the first) enters the tournaments and lexicase's pool, on tables across tile
/// and probe boundaries, with invalid individuals, signed zeros and every one equal.
fn unique_parents_match_reference(dev: &dyn Device) {
    let mut s = Stream::new(31, 0, 0, Purpose::Bench);
    for n in [1usize, 2, 7, 1025, 5000, 100_000] {
        // Few distinct values (long probe chains, many groups), sizes 0 to 40.
        let fit: Vec<f64> = (0..n)
            .map(|i| match s.below(23) {
                0 => f64::NAN,
                1 => f64::INFINITY,
                2 => -0.0,
                3 => 0.0,
                r => if i % 2 == 0 { r as f64 * 0.5 } else { s.unit_f64() },
            })
            .collect();
        let sizes: Vec<u16> = (0..n).map(|_| 1 + s.below(40) as u16).collect();
        let pool = select::parent_pool(&fit, &sizes, true);
        assert!(pool.len() < select::valid_indices(&fit).len() || n < 8, "P = {n}: duplicates to remove");
        for k in [1usize, 3] {
            let got = dev.tournament(&fit, Some(&sizes), 3000, k, false, 5, 3);
            for (slot, &g) in got.iter().enumerate() {
                assert_eq!(g as usize, select::tournament(&fit, &pool, k, 5, 3, slot), "P = {n}, k = {k}, slot {slot}");
            }
        }
    }
    // Every one equal: the smallest, then the first of the smallest, is the only parent.
    let fit = vec![0.25; 300];
    let sizes: Vec<u16> = (0..300).map(|i| if i == 17 || i == 200 { 2 } else { 5 }).collect();
    assert_eq!(dev.tournament(&fit, Some(&sizes), 100, 3, false, 1, 1), vec![17; 100]);
    // Lexicase draws its pool and sets its epsilons from the unique parents.
    let (p, n_cases) = (600usize, 6usize);
    let mut errors: Vec<f64> = (0..p * n_cases).map(|_| s.below(5) as f64).collect();
    for i in (3..p).step_by(3) {
        let row = errors[..n_cases].to_vec();
        errors[i * n_cases..(i + 1) * n_cases].copy_from_slice(&row);
    }
    let fit: Vec<f64> = (0..p).map(|i| errors[i * n_cases..(i + 1) * n_cases].iter().sum()).collect();
    let sizes: Vec<u16> = (0..p).map(|i| (i % 7 + 1) as u16).collect();
    let pool = select::parent_pool(&fit, &sizes, true);
    for k_pool in [0, 32] {
        let (eps, got) = dev.lexicase(&errors, n_cases, &fit, Some(&sizes), k_pool, 400, 4, 2);
        let want_eps = select::lexicase_epsilons(&errors, n_cases, &pool, 4, 2);
        assert_eq!(eps.iter().map(|e| e.to_bits()).collect::<Vec<_>>(), want_eps.iter().map(|e| e.to_bits()).collect::<Vec<_>>(), "unique pool {k_pool}: epsilons");
        for (slot, &g) in got.iter().enumerate() {
            assert_eq!(g as usize, select::epsilon_lexicase(&errors, n_cases, &eps, &pool, k_pool, 4, 2, slot), "unique pool {k_pool}: slot {slot}");
            assert!(pool.contains(&g), "slot {slot}: {g} is not a unique parent");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The tests.

macro_rules! on_devices {
    ($($check:ident),+ $(,)?) => {
        /// On the GPU (`GROVE_TEST_GPU=1`).
        mod gpu {
            use super::*;
            fn engine() -> Gpu {
                Gpu(CudaEngine::new().unwrap_or_else(|e| panic!("GROVE_TEST_GPU=1 but {e}")))
            }
            $(
                #[test]
                #[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
                fn $check() {
                    super::$check(&engine());
                }
            )+
        }
        /// The kernel sources as host C++.
        mod emulated {
            $(
                #[test]
                fn $check() {
                    match super::emulator() {
                        Some(e) => super::$check(e),
                        None => eprintln!("SKIPPED {}: no g++", stringify!($check)),
                    }
                }
            )+
        }
    };
}

on_devices!(
    init_matches_reference,
    rng_matches_reference,
    vary_ops_match_reference,
    breed_matches_reference,
    ge_matches_reference,
    selection_matches_reference,
    lexicase_matches_reference,
    valid_pool_matches_reference,
    unique_parents_match_reference,
    top_k_matches_reference,
    pareto_matches_reference,
);

/// A toy fitness: distance of the length from 12 plus a little of the first value; empty
/// trees are invalid (NaN).
fn toy_fitness(pop: &Population) -> Vec<f64> {
    (0..pop.size())
        .map(|i| {
            let t = pop.tree(i);
            if t.is_empty() { f64::NAN } else { (t.len() as f64 - 12.0).abs() + 1e-3 * t.value[0] as f64 }
        })
        .collect()
}

/// Generations as the host tree loop makes them (tournament, breed, elites), with the population
/// staying on the device: only fitness goes up and, for the comparison, the population comes
/// back. Children are double-buffered: two device populations swapped each generation.
#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn device_resident_generations_match_the_host_tree_loop() {
    let e = CudaEngine::new().unwrap_or_else(|err| panic!("GROVE_TEST_GPU=1 but {err}"));
    let (p, n_elite, k, seed) = (300usize, 2usize, 3usize, 21u64);
    let mix = BreedConfig {
        p_crossover: 0.9,
        crossovers: vec![(Crossover::OnePoint, 1.0), (Crossover::LeafBiased, 1.0)],
        p_mutation: 0.5,
        mutations: Mutation::ALL.iter().map(|m| (*m, 1.0)).collect(),
    };
    for (name, cfg) in specs() {
        let mut cpu = population(&cfg, p, seed);
        let mut a = e.upload_population(&cpu).unwrap();
        let mut b = e.alloc_population(p, cpu.max_len, cpu.n_outputs).unwrap();
        for gen in 1..=6u32 {
            let fit = toy_fitness(&cpu);
            // CPU: as the host tree loop.
            let pool = select::valid_indices(&fit);
            let elite = select::elite(&fit, n_elite);
            let pairs: Vec<[u32; 2]> = (0..p)
                .map(|c| [select::tournament(&fit, &pool, k, seed, gen, 2 * c) as u32, select::tournament(&fit, &pool, k, seed, gen, 2 * c + 1) as u32])
                .collect();
            let mut next = Population::new(p, cpu.max_len, cpu.n_outputs);
            breed(&cpu, &pairs, &mut next, seed, gen, &cfg, &mix).unwrap();
            for (r, &i) in elite.iter().enumerate() {
                next.copy_row(r, &cpu, i);
            }
            // GPU: the same steps on device buffers.
            let dfit = e.upload_fitness(&fit).unwrap();
            let winners = e.select_tournament(&dfit, None, 2 * p, k, false, seed, gen).unwrap();
            let bred = e.breed_trees(&a, &winners, &mut b, seed, gen, &cfg, &mix).unwrap();
            let ranked = e.rank(&dfit).unwrap();
            e.gather_trees(&a, &ranked, n_elite, &mut b).unwrap();
            std::mem::swap(&mut a, &mut b);
            let got = e.download_population(&a).unwrap();
            if let Some(m) = first_mismatch(&got, &next) {
                panic!("first mismatch: spec {name}, generation {gen}: {m}");
            }
            let counts = e.bred_counts(&bred).unwrap();
            eprintln!("{name}, generation {gen}: {} oversized", counts.oversized());
            cpu = next;
        }
    }
}

/// GE generations as the host GE loop makes them (map, tournament, crossover within the parents'
/// used codons, map the children, int-flip within theirs, elites), on the device: the used
/// codons are read from the mapper's results in place ([`UsedCodons::Mapped`]).
#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn device_resident_ge_generations_match_the_host_ge_loop() {
    use grove::backend::cuda::MapLaunch;
    use grove::genome::{MapConfig, Mapper};
    let e = CudaEngine::new().unwrap_or_else(|err| panic!("GROVE_TEST_GPU=1 but {err}"));
    let shape = grove::grammar::DatasetShape { n_vars: Some(3), n_is: None, n_os: None };
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("grammars/regression.bnf");
    let loaded = grove::grammar::load(&path, &shape).unwrap();
    let table = &loaded.table;
    let (p, cap, n_elite, k, seed, max_derivation) = (400usize, 120usize, 3usize, 3usize, 17u64, 4096usize);
    let map_cfg = MapConfig { max_wraps: 1, ..MapConfig::default() };
    let vary = GeVaryConfig { crossover: 0.9, mutation: 0.05, within_used: true, codon_size: 256, ..GeVaryConfig::default() };
    let (mut cpu, _) = genomes(p, cap, seed);
    let mut mapper = Mapper::new(table, map_cfg).with_max_derivation(max_derivation);
    let mut a = e.upload_genomes(&cpu).unwrap();
    let mut b = e.alloc_genomes(p, cap).unwrap();
    let mut out_a = e.alloc_map_output(p, max_derivation).unwrap();
    let mut out_b = e.alloc_map_output(p, max_derivation).unwrap();
    let launch = MapLaunch::default();
    for gen in 1..=5u32 {
        // CPU, as the host GE loop.
        let mapped: Vec<_> = (0..p).map(|i| mapper.map(cpu.get(i))).collect();
        let used: Vec<u32> = mapped.iter().map(|m| m.used_codons).collect();
        let fit: Vec<f64> = mapped.iter().map(|m| if m.valid() { (m.nodes as f64 - 20.0).abs() } else { f64::NAN }).collect();
        let pool = select::valid_indices(&fit);
        let elite = select::elite(&fit, n_elite);
        let mut next = Genomes::new(p, cap);
        for (r, &i) in elite.iter().enumerate() {
            next.set(r, cpu.get(i));
        }
        let n_pairs = (p - n_elite).div_ceil(2);
        let (mut c0, mut c1) = (Vec::new(), Vec::new());
        for j in 0..n_pairs {
            let x = select::tournament(&fit, &pool, k, seed, gen, 2 * j);
            let y = select::tournament(&fit, &pool, k, seed, gen, 2 * j + 1);
            let mut s = Stream::new(seed, gen, j as u32, Purpose::Crossover);
            crossover(cpu.get(x), cpu.get(y), used[x], used[y], &vary, cap, &mut s, &mut c0, &mut c1);
            let k0 = n_elite + 2 * j;
            for (c, row) in [(&mut c0, k0), (&mut c1, k0 + 1)] {
                let u = mapper.map(c).used_codons.min(c.len() as u32);
                int_flip(c, u, &vary, &mut Stream::new(seed, gen, row as u32, Purpose::Mutate));
                if row < p {
                    next.set(row, c);
                }
            }
        }
        // GPU, on device buffers.
        e.map_launch(table, &a, &map_cfg, &mut out_a, &launch).unwrap();
        let dfit = e.upload_fitness(&fit).unwrap();
        let winners = e.select_tournament(&dfit, None, 2 * n_pairs, k, false, seed, gen).unwrap();
        e.ge_crossover(&a, UsedCodons::Mapped(&out_a), &winners, &mut b, n_elite, &vary, seed, gen).unwrap();
        e.map_launch(table, &b, &map_cfg, &mut out_b, &launch).unwrap();
        e.ge_int_flip(&mut b, UsedCodons::Mapped(&out_b), n_elite, &vary, seed, gen).unwrap();
        let ranked = e.rank(&dfit).unwrap();
        e.gather_genomes(&a, &ranked, n_elite, &mut b).unwrap();
        std::mem::swap(&mut a, &mut b);
        let got = e.download_genomes(&a).unwrap();
        if let Some(i) = (0..p).find(|&i| got.get(i) != next.get(i)) {
            panic!("generation {gen}: genome {i}: gpu={:?} cpu={:?}", got.get(i), next.get(i));
        }
        assert_eq!(got.codons, next.codons, "generation {gen}: padding");
        cpu = next;
    }
}

// ---------------------------------------------------------------------------------------------
// Selection pressure on the CPU reference (which the GPU equals).

/// `wins` of `n` Bernoulli trials at `p`, within 4.5 binomial standard deviations (a false
/// alarm about once in 150,000 runs; the streams are fixed, so it is either always or never).
fn assert_rate(what: &str, wins: usize, n: usize, p: f64) {
    let sd = (n as f64 * p * (1.0 - p)).sqrt();
    let dev = (wins as f64 - n as f64 * p).abs();
    assert!(dev <= 4.5 * sd, "{what}: {wins} of {n}, expected {:.1} ± {:.1} (4.5 SD = {:.1})", n as f64 * p, sd, 4.5 * sd);
}

#[test]
fn binary_tournament_picks_the_better_at_the_expected_rate() {
    // Population of two distinct fitnesses: with replacement, the better wins unless both
    // draws are the worse one: 3/4. Without replacement it always wins.
    let fit = [2.0, 1.0];
    let pool = select::valid_indices(&fit);
    let n = 20_000;
    let wins = (0..n).filter(|&s| select::tournament(&fit, &pool, 2, 42, 1, s) == 1).count();
    assert_rate("k = 2 with replacement", wins, n, 0.75);
    assert!((0..1000).all(|s| select::tournament_distinct(&fit, &pool, 2, 42, 1, s) == 1));
    // Among m ranked individuals, size 2 with replacement picks rank r (0 best) with
    // probability ((m - r)² - (m - r - 1)²) / m²; without replacement 2 (m - 1 - r) / (m (m - 1)).
    let m = 10;
    let fit: Vec<f64> = (0..m).map(|i| i as f64).collect();
    let pool = select::valid_indices(&fit);
    let mut with = vec![0usize; m];
    let mut without = vec![0usize; m];
    for s in 0..n {
        with[select::tournament(&fit, &pool, 2, 5, 2, s)] += 1;
        without[select::tournament_distinct(&fit, &pool, 2, 5, 2, s)] += 1;
    }
    for r in 0..m {
        let (a, b) = ((m - r) as f64, (m - r - 1) as f64);
        assert_rate(&format!("rank {r} with replacement"), with[r], n, (a * a - b * b) / (m * m) as f64);
        assert_rate(&format!("rank {r} without replacement"), without[r], n, 2.0 * b / (m * (m - 1)) as f64);
    }
}

// ---------------------------------------------------------------------------------------------
// generation.cu, emulated (its GPU twin runs inside the device loop, which tests/cuda_evolve.rs
// checks against the host loop on a GPU).

/// Runs generation.cu's `grove_stack_class` and the partition (`grove_partition_count`, a
/// block per tile; `grove_partition_scan`, one block; `grove_partition`, a block per tile) on
/// `pop`: (ids, counts).
fn emulated_order(e: &Emulator, pop: &mut Population) -> (Vec<u32>, [u32; 4]) {
    use grove::backend::cuda::params::GenParams;
    type ClassFn = unsafe extern "C" fn(GenParams, *const u8, *const u16, *mut u32);
    type CountFn = unsafe extern "C" fn(GenParams, *const u32, *mut u64, *mut u32);
    type ScanFn = unsafe extern "C" fn(GenParams, *mut u64, *const u32, *mut u32);
    type PartitionFn = unsafe extern "C" fn(GenParams, *const u32, *const u64, *const u32, *mut u32);
    let p = pop.size();
    let params = GenParams { n: p as u32, max_len: pop.max_len as u32, ..GenParams::default() };
    let mut cls = vec![u32::MAX; p];
    let class: ClassFn = Emulator::get(&e.generation, kernels::STACK_CLASS);
    let (op, len) = (pop.op.as_ptr(), pop.len.as_ptr());
    let c = cls.as_mut_ptr();
    Emulator::launch(&e.generation, p, || {
        // SAFETY: op P × L, len and cls P; thread b handles tree b.
        unsafe { class(params, op, len, c) }
    });
    let mut ids = vec![u32::MAX; p];
    let mut counts = [u32::MAX; 4];
    let n_tiles = p.div_ceil(kernels::TILE as usize).max(1);
    let (mut tiles, mut tile_bad) = (vec![u64::MAX; n_tiles], vec![u32::MAX; n_tiles]);
    let count: CountFn = Emulator::get(&e.generation, kernels::PARTITION_COUNT);
    let scan: ScanFn = Emulator::get(&e.generation, kernels::PARTITION_SCAN);
    let part: PartitionFn = Emulator::get(&e.generation, kernels::PARTITION);
    let (cp, ip, np) = (cls.as_ptr() as usize, ids.as_mut_ptr() as usize, counts.as_mut_ptr() as usize);
    let (tp, bp) = (tiles.as_mut_ptr() as usize, tile_bad.as_mut_ptr() as usize);
    for b in 0..n_tiles as u32 {
        // SAFETY: cls holds P entries, tiles and tile_bad n_tiles; block b of the tiles.
        Emulator::run_block_at(&e.generation, b, kernels::TILE_THREADS, &|| unsafe { count(params, cp as *const u32, tp as *mut u64, bp as *mut u32) });
    }
    // SAFETY: tiles and tile_bad n_tiles, counts 4; one block.
    Emulator::run_block(&e.generation, kernels::TILE_THREADS, &|| unsafe { scan(params, tp as *mut u64, bp as *const u32, np as *mut u32) });
    for b in 0..n_tiles as u32 {
        // SAFETY: cls and ids hold P entries, tiles n_tiles, counts 4; block b of the tiles.
        Emulator::run_block_at(&e.generation, b, kernels::TILE_THREADS, &|| unsafe {
            part(params, cp as *const u32, tp as *const u64, np as *const u32, ip as *mut u32)
        });
    }
    (ids, counts)
}

#[test]
fn emulated_evaluation_order_matches_pack() {
    use grove::backend::cuda::pack::pack;
    let Some(e) = emulator() else { return eprintln!("SKIPPED emulated_evaluation_order_matches_pack: no g++") };
    let long = TreeSpec::new(vec![Op::Add, Op::Mul, Op::Sin], 2, 128).with_depth(1, 6);
    for (name, cfg) in specs().into_iter().chain([("long", VaryConfig::new(long))]) {
        for (p, seed) in [(1usize, 1u64), (700, 2), (2100, 3)] {
            let mut pop = population(&cfg, p, seed);
            // Combs deeper than the fast kernels' stack: n functions, then n + 1 leaves.
            let binary = cfg.spec.functions.iter().copied().find(|f| f.arity() == 2);
            if let (Some(f), true) = (binary, pop.max_len >= 67) {
                for (i, n) in [(p / 2, 33usize), (p - 1, 20)] {
                    let mut nodes = vec![grove::program::tree::Node { op: f, value: 0.0, out: 0 }; n];
                    nodes.extend(std::iter::repeat_n(grove::program::tree::Node { op: Op::Const, value: 1.5, out: 0 }, n + 1));
                    pop.set_tree(i, &nodes).unwrap();
                }
            }
            let mut buf = vec![0u8; grove::backend::cuda::pack::Layout::new(p, pop.max_len).bytes + 16];
            let off = buf.as_ptr().align_offset(4);
            let packed = pack(&pop, cfg.spec.n_vars.max(1) as usize, &mut buf[off..]).unwrap();
            let lay = packed.layout;
            let want: Vec<u32> = buf[off + lay.ids..off + lay.ids + 4 * p].chunks(4).map(|c| u32::from_ne_bytes(c.try_into().unwrap())).collect();
            let (ids, counts) = emulated_order(e, &mut pop);
            assert_eq!((counts[0] as usize, counts[1] as usize, counts[2], counts[3]), (packed.n_fast, packed.n_deep, 0, u32::MAX), "{name} P={p}");
            assert_eq!(ids, want, "{name} P={p}: evaluation order");
            if binary.is_some() && pop.max_len >= 67 && p > 1 {
                assert!(packed.n_deep >= 1, "{name}: the comb needs the deep kernels");
            }
        }
    }
    // A malformed row (a function missing a child) is counted bad and named.
    let cfg = &specs()[0].1;
    let mut pop = population(cfg, 50, 4);
    let i = (0..50).find(|&i| pop.len[i] > 1).unwrap();
    pop.len[i] = 1;
    pop.op[i * pop.max_len] = Op::Add as u8;
    let (_, counts) = emulated_order(e, &mut pop);
    assert_eq!((counts[2], counts[3]), (1, i as u32));
}

#[test]
fn emulated_regression_fitness_matches_the_task() {
    use grove::backend::cuda::params::{GenParams, RegSums};
    use grove::program::fitness::RegressionSums;
    use grove::task::regression::{Metric, error};
    type FitnessFn = unsafe extern "C" fn(GenParams, *const RegSums, *const u16, *mut f64);
    let Some(e) = emulator() else { return eprintln!("SKIPPED emulated_regression_fitness_matches_the_task: no g++") };
    let mut s = Stream::new(5, 0, 0, Purpose::Bench);
    let mut sums = Vec::new();
    for i in 0..400u32 {
        let n = [0u32, 1, 2, 64, 1024][i as usize % 5];
        let y: Vec<f64> = (0..n).map(|_| if i % 7 == 0 { 2.5 } else { normal(&mut s) as f64 }).collect();
        let f: Vec<f64> = (0..n).map(|k| if i % 11 == 0 { 1.0 } else { 3.0 * y[k as usize] + normal(&mut s) as f64 * (i % 4) as f64 }).collect();
        let mut r = RegSums { n, bad: (i % 17 == 0) as u32, ..RegSums::default() };
        for (f, y) in f.iter().zip(&y) {
            r.sse += (f - y) * (f - y);
            r.sae += (f - y).abs();
            r.sum_f += f;
            r.sum_ff += f * f;
            r.sum_fy += f * y;
            r.sum_y += y;
            r.sum_yy += y * y;
        }
        sums.push(r);
    }
    let lens: Vec<u16> = (0..sums.len()).map(|i| [0u16, 1, 7, 300][i % 4]).collect();
    let f: FitnessFn = Emulator::get(&e.generation, kernels::REGRESSION_FITNESS);
    for (metric, code) in [(Metric::Mse, 0), (Metric::Rmse, 1), (Metric::Mae, 2), (Metric::R2, 3)] {
        for scaled in [false, true] {
            for parsimony in [0.0, 1e-3] {
                let params = GenParams { n: sums.len() as u32, metric: code, scaled: scaled as u32, parsimony, ..GenParams::default() };
                let mut fit = vec![f64::NAN; sums.len()];
                let (sp, lp, fp) = (sums.as_ptr(), lens.as_ptr(), fit.as_mut_ptr());
                Emulator::launch(&e.generation, sums.len(), || {
                    // SAFETY: sums, lens and fit hold n entries; thread b handles entry b.
                    unsafe { f(params, sp, lp, fp) }
                });
                for (i, r) in sums.iter().enumerate() {
                    let want = if lens[i] == 0 { f64::INFINITY } else { error(&RegressionSums::from(r), metric, scaled) + parsimony * lens[i] as f64 };
                    assert_eq!(fit[i].to_bits(), want.to_bits(), "{metric:?} scaled={scaled} parsimony={parsimony} sums {i}: {} vs {want}", fit[i]);
                }
            }
        }
    }
}

#[test]
fn emulated_elite_and_statistics_match_the_host() {
    use grove::backend::cuda::params::{Argmin, GenParams, GenStats};
    type BlocksFn = unsafe extern "C" fn(GenParams, *const f64, *const u16, *const u32, *mut Argmin);
    type FinalFn = unsafe extern "C" fn(GenParams, *const Argmin, *const f64, *mut u32, *mut GenStats);
    let Some(e) = emulator() else { return eprintln!("SKIPPED emulated_elite_and_statistics_match_the_host: no g++") };
    let blocks: BlocksFn = Emulator::get(&e.generation, kernels::ARGMIN_BLOCKS);
    let fin: FinalFn = Emulator::get(&e.generation, kernels::ARGMIN_FINAL);
    for (c, fit) in fitness_cases().into_iter().enumerate() {
        let p = fit.len();
        let lens: Vec<u16> = (0..p).map(|i| if i % 9 == 4 { 0 } else { 1 + (i * 7 % 50) as u16 }).collect();
        for n_blocks in [1u32, 3] {
            let n_elite = p.min(5);
            let mut chosen = vec![u32::MAX; kernels::MAX_ELITE];
            let mut partials = vec![Argmin::default(); n_blocks as usize];
            let mut stats = GenStats::default();
            for j in 0..n_elite {
                let params = GenParams { n: p as u32, n_blocks, n_chosen: j as u32, ..GenParams::default() };
                let (fp, lp, cp, pp) = (fit.as_ptr() as usize, lens.as_ptr() as usize, chosen.as_mut_ptr() as usize, partials.as_mut_ptr() as usize);
                for b in 0..n_blocks {
                    Emulator::run_block_at(&e.generation, b, kernels::REDUCE_THREADS, &|| {
                        // SAFETY: fit and lens P entries, chosen MAX_ELITE, partials n_blocks.
                        unsafe { blocks(params, fp as *const f64, lp as *const u16, cp as *const u32, pp as *mut Argmin) }
                    });
                }
                let sp = &mut stats as *mut GenStats as usize;
                Emulator::run_block(&e.generation, kernels::SCAN_THREADS, &|| {
                    // SAFETY: partials n_blocks, chosen MAX_ELITE, one GenStats.
                    unsafe { fin(params, pp as *const Argmin, fp as *const f64, cp as *mut u32, sp as *mut GenStats) }
                });
            }
            let want: Vec<u32> = select::elite(&fit, n_elite).into_iter().map(|i| i as u32).collect();
            assert_eq!(&chosen[..n_elite], &want[..], "case {c}, {n_blocks} blocks: elite");
            let valid: Vec<usize> = (0..p).filter(|&i| select::key(fit[i]).is_finite() && lens[i] > 0).collect();
            assert_eq!(stats.n_valid as usize, valid.len(), "case {c}");
            assert_eq!(stats.best_idx, want[0], "case {c}");
            assert_eq!(stats.best.to_bits(), select::key(fit[want[0] as usize]).to_bits(), "case {c}");
            let sum: f64 = valid.iter().map(|&i| fit[i]).sum();
            assert!((stats.sum - sum).abs() <= 1e-12 * sum.abs().max(1.0), "case {c}: {} vs {sum}", stats.sum);
            assert_eq!(stats.sum_len, valid.iter().map(|&i| lens[i] as f64).sum::<f64>(), "case {c}");
        }
    }
}

#[test]
fn emulated_classification_fitness_matches_the_task() {
    use grove::backend::cuda::params::{ClassPartial, GenParams};
    use grove::program::fitness::ClassSums;
    use grove::task::classify::{ClassFitness, fitness_of};
    type FitnessFn = unsafe extern "C" fn(GenParams, u32, *const ClassPartial, *const u32, *const u64, *const u16, *mut f64);
    let Some(e) = emulator() else { return eprintln!("SKIPPED emulated_classification_fitness_matches_the_task: no g++") };
    let f: FitnessFn = Emulator::get(&e.generation, kernels::CLASSIFY_FITNESS);
    let mut s = Stream::new(8, 0, 0, Purpose::Bench);
    for k in [2usize, 3, 10] {
        // Some classes without training points (balanced accuracy skips them).
        let counts: Vec<u64> = (0..k).map(|c| if c == 1 && k == 10 { 0 } else { 5 + s.below(40) as u64 }).collect();
        let n = counts.iter().sum::<u64>() as u32;
        let p = 300;
        let mut sums = Vec::new();
        let mut correct = Vec::new();
        for i in 0..p {
            let bad = (i % 13 == 0) as u32;
            let pts = if i % 17 == 0 { 0 } else { n };
            sums.push(ClassPartial { ce: s.below(1000) as f64 * 0.37, n: pts, bad });
            // Each tree's correct counts per class, then its prediction counts (at least the
            // correct ones).
            let right: Vec<u32> = (0..k).map(|c| if pts == 0 { 0 } else { s.below(counts[c] as u32 + 1) }).collect();
            correct.extend_from_slice(&right);
            correct.extend(right.iter().map(|&r| if pts == 0 { 0 } else { r + s.below(20) }));
        }
        let lens: Vec<u16> = (0..p).map(|i| [0u16, 3, 40][i % 3]).collect();
        for (fitness, code) in [(ClassFitness::Accuracy, 0u32), (ClassFitness::BalancedAccuracy, 1), (ClassFitness::CrossEntropy, 2), (ClassFitness::WeightedF1, 3), (ClassFitness::BalancedCe, 4)] {
            let params = GenParams { n: p as u32, metric: code, parsimony: 1e-3, ..GenParams::default() };
            let mut fit = vec![f64::NAN; p];
            let (sp, cp, np, lp, fp) = (sums.as_ptr(), correct.as_ptr(), counts.as_ptr(), lens.as_ptr(), fit.as_mut_ptr());
            Emulator::launch(&e.generation, p, || {
                // SAFETY: sums, lens and fit P entries, correct P × 2K, counts K.
                unsafe { f(params, k as u32, sp, cp, np, lp, fp) }
            });
            for i in 0..p {
                let at = &correct[i * 2 * k..(i + 1) * 2 * k];
                let cs = ClassSums {
                    correct: at[..k].iter().map(|&c| c as u64).collect(),
                    predicted: at[k..].iter().map(|&c| c as u64).collect(),
                    ce: sums[i].ce,
                    n: sums[i].n as u64,
                    bad: sums[i].bad as u64,
                };
                let want = if lens[i] == 0 { f64::INFINITY } else { fitness_of(&cs, &counts, fitness) + 1e-3 * lens[i] as f64 };
                assert_eq!(fit[i].to_bits(), want.to_bits(), "K={k} {fitness:?} individual {i}: {} vs {want}", fit[i]);
            }
        }
    }
}

#[test]
fn emulated_size_summary_matches_the_host() {
    use grove::backend::cuda::params::GenParams;
    type ResetFn = unsafe extern "C" fn(GenParams, *mut u64, *mut u32, *mut u32);
    type KeysFn = unsafe extern "C" fn(GenParams, *const f64, *const u16, *mut u64, *mut u32);
    type IndexFn = unsafe extern "C" fn(GenParams, *const f64, *const u16, *const u64, *mut u32);
    let Some(e) = emulator() else { return eprintln!("SKIPPED emulated_size_summary_matches_the_host: no g++") };
    let reset: ResetFn = Emulator::get(&e.generation, kernels::SIZES_RESET);
    let keys: KeysFn = Emulator::get(&e.generation, kernels::SIZES_KEYS);
    let index: IndexFn = Emulator::get(&e.generation, kernels::SIZES_INDEX);
    let l = 20usize;
    for (c, fit) in fitness_cases().into_iter().enumerate() {
        let p = fit.len();
        let lens: Vec<u16> = (0..p).map(|i| ((i * 7 + c) % (l + 1)) as u16).collect();
        let params = GenParams { n: p as u32, max_len: l as u32, ..GenParams::default() };
        let (mut key, mut idx, mut hist) = (vec![7u64; l + 1], vec![7u32; l + 1], vec![7u32; l + 1]);
        let (kp, ip, hp) = (key.as_mut_ptr(), idx.as_mut_ptr(), hist.as_mut_ptr());
        // SAFETY (all three): the buffers hold L + 1 entries, fit and lens P; one thread each.
        Emulator::launch(&e.generation, l + 1, || unsafe { reset(params, kp, ip, hp) });
        Emulator::launch(&e.generation, p, || unsafe { keys(params, fit.as_ptr(), lens.as_ptr(), kp, hp) });
        Emulator::launch(&e.generation, p, || unsafe { index(params, fit.as_ptr(), lens.as_ptr(), kp, ip) });
        for n in 0..=l {
            let valid: Vec<usize> = (0..p).filter(|&i| lens[i] as usize == n && n > 0 && select::key(fit[i]).is_finite()).collect();
            assert_eq!(hist[n] as usize, valid.len(), "case {c} size {n}: count");
            let want = valid.iter().copied().min_by(|&a, &b| fit[a].total_cmp(&fit[b]).then(a.cmp(&b)));
            match want {
                None => assert_eq!(idx[n], u32::MAX, "case {c} size {n}"),
                Some(i) => assert_eq!(idx[n], i as u32, "case {c} size {n}: first of the best ({})", fit[i]),
            }
        }
    }
}

/// `grove_control_skip` against `control::skip_mask` on populations with valid policies,
/// combs deeper than the roll-out kernel's stack, and broken rows (a variable past the
/// observation, a fractional or negative index, a slot past the actuators, a missing child).
#[test]
fn emulated_control_skip_matches_skip_mask() {
    use grove::backend::cuda::control::{CONTROL_STACK, skip_mask};
    use grove::backend::cuda::params::ControlClassParams;
    type SkipFn = unsafe extern "C" fn(ControlClassParams, *const u8, *const f32, *const u8, *const u16, *mut u8, *mut u32);
    let Some(e) = emulator() else { return eprintln!("SKIPPED emulated_control_skip_matches_skip_mask: no g++") };
    let m = grove::sim::Model::load("hopper", None).unwrap();
    let nu = m.nu();
    let spec = TreeSpec::new(vec![Op::Add, Op::Mul, Op::Sin, Op::Tanh], m.obs_size as u32, 160).with_depth(1, 6).with_outputs(nu, 0.2);
    let mut pop = population(&VaryConfig::new(spec), 600, 3);
    let comb = |n: usize| {
        let mut v = vec![grove::program::tree::Node { op: Op::Add, value: 0.0, out: 0 }; n];
        v.extend(std::iter::repeat_n(grove::program::tree::Node::var(0), n + 1));
        v[0].out = 1;
        v
    };
    pop.set_tree(10, &comb(CONTROL_STACK)).unwrap(); // needs CONTROL_STACK + 1 slots
    pop.set_tree(11, &comb(CONTROL_STACK - 1)).unwrap(); // needs exactly CONTROL_STACK
    let l = pop.max_len;
    let var_row = |pop: &Population| (0..pop.size()).find(|&i| (0..pop.len[i] as usize).any(|k| pop.op[i * l + k] == Op::Var as u8)).unwrap();
    let with_var = pop.tree(var_row(&pop)).nodes();
    for (row, value) in [(20usize, m.obs_size as f32), (21, 0.5), (22, -1.0), (23, f32::NAN)] {
        let mut t = with_var.clone();
        let k = t.iter().position(|n| n.op == Op::Var).unwrap();
        t[k].value = value;
        pop.set_tree(row, &t).unwrap();
    }
    let mut t = pop.tree(30).nodes();
    t[0].out = nu as u8 + 1;
    pop.set_tree(30, &t).unwrap();
    pop.len[31] = 1;
    pop.op[31 * l] = Op::Add as u8;
    pop.clear(32);
    let want = skip_mask(&pop, &m);
    let params = ControlClassParams { n: pop.size() as u32, max_len: l as u32, n_vars: m.obs_size as u32, n_slots: nu as u32, stack: CONTROL_STACK as u32, pad: 0 };
    let mut skip = vec![u8::MAX; pop.size()];
    let mut deep = [0u32];
    let f: SkipFn = Emulator::get(&e.generation, kernels::CONTROL_SKIP);
    let (op, value, out, len, sp, dp) = (pop.op.as_ptr(), pop.value.as_ptr(), pop.out.as_ptr(), pop.len.as_ptr(), skip.as_mut_ptr(), deep.as_mut_ptr());
    Emulator::launch(&e.generation, pop.size(), || {
        // SAFETY: the population holds P × L nodes and P lengths, skip P entries, deep one word.
        unsafe { f(params, op, value, out, len, sp, dp) }
    });
    assert_eq!(skip, want);
    assert_eq!(deep[0] as usize, want.iter().filter(|&&s| s == 2).count());
    assert_eq!((want[10], want[11], want[20], want[21], want[22], want[23], want[30], want[31], want[32]), (2, 0, 1, 1, 1, 1, 1, 1, 1));
}

/// `grove_control_fitness` against the control task's formula, bit for bit, and its count of
/// env steps.
#[test]
fn emulated_control_fitness_matches_the_task() {
    use grove::backend::cuda::params::GenParams;
    type FitnessFn = unsafe extern "C" fn(GenParams, u32, *const f64, *const u32, *const u16, *mut f64, *mut u64);
    let Some(e) = emulator() else { return eprintln!("SKIPPED emulated_control_fitness_matches_the_task: no g++") };
    let mut s = Stream::new(9, 0, 0, Purpose::Bench);
    let p = 500;
    let k = 3u32;
    let means: Vec<f64> = (0..p)
        .map(|i| match i % 9 {
            0 => f64::NAN,
            1 => f64::INFINITY,
            2 => f64::NEG_INFINITY,
            _ => normal(&mut s) as f64 * 1000.0,
        })
        .collect();
    let lens: Vec<u16> = (0..p).map(|i| [0u16, 1, 17, 128][i % 4]).collect();
    let lengths: Vec<u32> = (0..p * k as usize).map(|_| s.below(1001)).collect();
    let f: FitnessFn = Emulator::get(&e.generation, kernels::CONTROL_FITNESS);
    for parsimony in [0.0, 0.37] {
        let params = GenParams { n: p as u32, parsimony, ..GenParams::default() };
        let mut fit = vec![0.0f64; p];
        let mut steps = [0u64];
        let (mp, lp, np, fp, sp) = (means.as_ptr(), lengths.as_ptr(), lens.as_ptr(), fit.as_mut_ptr(), steps.as_mut_ptr());
        Emulator::launch(&e.generation, p, || {
            // SAFETY: means, lens and fit hold P entries, lengths P·K, steps one u64.
            unsafe { f(params, k, mp, lp, np, fp, sp) }
        });
        for i in 0..p {
            let r = means[i];
            let want = if lens[i] == 0 || !r.is_finite() { f64::INFINITY } else { -r + parsimony * lens[i] as f64 };
            assert_eq!(fit[i].to_bits(), want.to_bits(), "individual {i}: {} vs {want}", fit[i]);
        }
        assert_eq!(steps[0], lengths.iter().map(|&l| l as u64).sum::<u64>());
    }
}

/// generation.cu's lexicase cases: `grove_gather_rows` and `grove_case_errors` (the device
/// loop's twin of the regression task's `case_errors`) on the CPU's predictions and sums, bit
/// for bit, with and without scaling, on random populations with empty and invalid trees.
#[test]
fn emulated_case_errors_match_the_task() {
    use grove::backend::Backend;
    use grove::backend::cuda::params::{GenParams, RegSums};
    use grove::evolve::Fitness;
    use grove::task::regression::{Metric, Regression, RegressionConfig};
    type GatherFn = unsafe extern "C" fn(u32, u32, u32, *const f32, *const f32, *const u32, *mut f32, *mut f32);
    type ErrorsFn = unsafe extern "C" fn(GenParams, u32, u32, u32, *const u32, *const f32, *const f32, *const RegSums, *const u16, *mut f64);
    let Some(e) = emulator() else { return eprintln!("SKIPPED emulated_case_errors_match_the_task: no g++") };
    let data = grove::data::DataSource::parse("builtin:pagie1").unwrap().load(None).unwrap().train;
    let (n, nf) = (data.n_rows, data.n_features);
    let gather: GatherFn = Emulator::get(&e.generation, kernels::GATHER_ROWS);
    let errors_of: ErrorsFn = Emulator::get(&e.generation, kernels::CASE_ERRORS);
    for (name, cfg) in specs().into_iter().filter(|(_, c)| c.spec.n_outputs == 0 && c.spec.n_vars as usize <= nf) {
        let pop = population(&cfg, 90, 3);
        let cases = select::generation_cases(n, 37, 5, 2);
        let k = cases.len();
        let (mut xc, mut yc) = (vec![f32::NAN; nf * k], vec![f32::NAN; k]);
        let (xp, yp, rp, xcp, ycp) = (data.x.as_ptr() as usize, data.y.as_ptr() as usize, cases.as_ptr() as usize, xc.as_mut_ptr() as usize, yc.as_mut_ptr() as usize);
        Emulator::launch(&e.generation, k, || {
            // SAFETY: x F × N and y N floats, rows k indices below N, xc F × k and yc k.
            unsafe { gather(n as u32, nf as u32, k as u32, xp as *const f32, yp as *const f32, rp as *const u32, xcp as *mut f32, ycp as *mut f32) }
        });
        let (hx, hy) = data.gather(&cases).unwrap();
        assert_eq!((xc.clone(), yc.clone()), (hx, hy), "{name}: gathered rows");
        let pred: Vec<f32> = (0..pop.size()).flat_map(|t| grove::backend::cpu::eval::predict(&pop, t, &xc, k).unwrap()).collect();
        let sums: Vec<RegSums> = grove::backend::cpu::eval::evaluate_regression(&pop, &data.x, &data.y, n)
            .unwrap()
            .iter()
            .map(|s| RegSums {
                sse: s.sum_e2,
                sae: s.sum_abs_e,
                sum_f: s.sum_f,
                sum_ff: s.sum_f2,
                sum_fy: s.sum_fy,
                sum_y: s.sum_y,
                sum_yy: s.sum_y2,
                n: s.n as u32,
                bad: (!s.finite) as u32,
            })
            .collect();
        for linear_scaling in [true, false] {
            let config = RegressionConfig { metric: Metric::Mse, linear_scaling, parsimony: 0.0 };
            let cpu = Backend::Cpu;
            let rd = cpu.regression_data(&data.x, &data.y, n, nf).unwrap();
            let task = Regression { backend: &cpu, data: rd, config, outputs: 1, joint: None, rows: Some(&data), loss: None, fitness_fn: None };
            let want = task.case_errors(&pop, 0, &cases).unwrap();
            let params = GenParams { n: pop.size() as u32, max_len: pop.max_len as u32, scaled: linear_scaling as u32, ..GenParams::default() };
            // The cases' values predicted on their own ([P × k]) or kept at every row ([P × N]).
            let all: Vec<f32> = (0..pop.size()).flat_map(|t| grove::backend::cpu::eval::predict(&pop, t, &data.x, n).unwrap()).collect();
            for (values, stride, by_row) in [(&pred, k as u32, 0u32), (&all, n as u32, 1)] {
                let mut got = vec![f64::NAN; pop.size() * k];
                let (vp, yp, sp, lp, gp) = (values.as_ptr() as usize, data.y.as_ptr() as usize, sums.as_ptr() as usize, pop.len.as_ptr() as usize, got.as_mut_ptr() as usize);
                Emulator::launch(&e.generation, pop.size() * k, || {
                    // SAFETY: rows k indices below N, values P × stride, y N, sums and lens P,
                    // errors P × k; thread b writes errors[b].
                    unsafe { errors_of(params, k as u32, stride, by_row, rp as *const u32, vp as *const f32, yp as *const f32, sp as *const RegSums, lp as *const u16, gp as *mut f64) }
                });
                let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&got), bits(&want), "{name}, scaling {linear_scaling}, by row {by_row}");
            }
            assert!(want.iter().any(|e| e.is_infinite()) && want.iter().any(|e| e.is_finite()), "{name}: empty rows and programs both checked");
        }
    }
}
