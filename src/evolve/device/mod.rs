//! The whole generation on the GPU, for both representations: the population, its fitness,
//! selection, variation and elitism stay in device memory from the first generation to the
//! last. Tree GP breeds trees (`breed_trees`); grammatical evolution keeps genomes `[P × G]` on
//! the device, crosses and mutates them there and maps them straight to trees
//! (`map_trees`, `kernels/map.cu`). Evaluation, statistics, the elite, the hall of fame's view
//! and the host's reads are one loop for both. Per generation the host waits once and reads a
//! mailbox of 32 words (the statistics, the next population's evaluation order counts and
//! breeding counts, NSGA-II's survivors' statistics: [`crate::backend::cuda::MailboxRead`])
//! and a per-size summary (for the hall of fame and the median size), then, in one copy, the
//! trees that improve the best program or a size's best (and, for GE, the best genome);
//! [`Transfers`] counts every copy. Snapshots
//! (checkpoints, Ctrl-C) copy the next population (trees or genomes) back.
//!
//! It computes what the host loop ([`super::host::run`]) computes with the same engine
//! evaluating. Both breed through the breeding contract ([`Breeder`]: selection, variation,
//! mapping, elitism's copies), whose CUDA side here is the exact twin of the CPU side the host
//! loop runs (`init_trees` of `init_population`, `select_tournament` of `select::tournament`,
//! `breed_trees` of `breed`, `ge_crossover` / `ge_int_flip` of `genome::vary`, `map_trees` of
//! `map_population`); `elite_and_stats` is the twin of `select::elite`, the tasks' fitness
//! kernels of their host formulas, `size_summary` of the hall of fame's update; so the loops
//! give the same programs, fitness, history (the mean fitness summed in another order) and hall
//! of fame. `tests/cuda_evolve.rs` checks this on a GPU.
//!
//! This file holds the loop's state and its top, [`run`], in three steps: [`setup`] builds the
//! islands (buffers, first populations, resume), [`step`] runs one generation (evaluate,
//! statistics, observer, migration, breed) and [`snapshot`] takes what a checkpoint and the
//! outcome need from the devices. [`island`] holds one island's steps, [`migrate`] moves rows
//! between islands, [`observe`] reads each generation back, [`bytes`] sizes every copy from its
//! buffers' shapes, [`profile`] times the steps. The tasks it runs ([`DeviceTask`]) are the
//! backend's ([`crate::backend::device_task`]), which builds them.

mod bytes;
mod island;
mod migrate;
mod nsga2;
mod observe;
mod profile;
mod setup;
mod snapshot;
mod step;

use anyhow::Result;

pub use crate::backend::device_task::{DeviceClassification, DeviceControl, DeviceRegression, DeviceTask, Shard};

use super::{EngineConfig, GenerationStats, GrammarRep, IslandConfig, Observer, Outcome, Representation, Resume};
use crate::backend::breed::Breeder;
use crate::backend::cuda::{CudaEngine, DeviceGenomes, DeviceMapping, DevicePopulation, Link};
use observe::Books;
use profile::StageTimes;

/// A shard's copy of the population and its buffers, on the shard's GPU.
struct ShardBuffers<'a> {
    shard: Shard<'a>,
    pop: DevicePopulation,
    order: crate::backend::cuda::TreeOrder,
    sums: crate::backend::cuda::FitnessScratch,
}


/// The fitness step's buffers.
enum FitnessStep {
    Regression(crate::backend::cuda::FitnessScratch),
    Classification(crate::backend::cuda::generation::ClassFitnessScratch),
    Control(crate::backend::cuda::control::ControlScratch),
}

/// Copies between the device and the host during a run on the device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Transfers {
    /// Generations run (including generation 0).
    pub generations: usize,
    /// Mailbox reads (one per generation, plus one before the first).
    pub mailbox_reads: usize,
    /// Their bytes.
    pub mailbox_bytes: usize,
    /// Best programs copied back when the best improved.
    pub best_trees: usize,
    /// Their bytes (whole rows).
    pub best_tree_bytes: usize,
    /// GE: bytes of the best genomes copied back with them.
    pub best_genome_bytes: usize,
    /// Per-size summaries (hall of fame, median size), one per generation.
    pub size_summaries: usize,
    /// Their bytes.
    pub size_summary_bytes: usize,
    /// Per-size winners copied back for the hall of fame (improvements only).
    pub hall_of_fame_trees: usize,
    /// Their bytes (whole rows).
    pub hall_of_fame_bytes: usize,
    /// Population data (trees or fitness) copied to the host between generations: none,
    /// unless a checkpoint was taken (then [`Self::snapshot_bytes`]).
    pub population_bytes_between_generations: usize,
    /// Populations copied back for checkpoints.
    pub snapshots: usize,
    /// Their bytes (also counted in [`Self::population_bytes_between_generations`]).
    pub snapshot_bytes: usize,
    /// The last population and its fitness, copied once the run has ended (for the outcome).
    pub final_population_bytes: usize,
    /// Migrations between islands.
    pub migrations: usize,
    /// Bytes they moved between host and device: none (who moves is chosen on the devices and
    /// rows go GPU to GPU; kept so older reports read the same).
    pub migration_bytes: usize,
    /// Bytes of migrants copied between GPUs, peer to peer (rows, fitness, GE's genomes and
    /// used codons of islands on different GPUs).
    pub migration_peer_bytes: usize,
    /// Constant fits (per island and fitting generation).
    pub constant_fits: usize,
    /// Their bytes: the fitness read back to choose the rows, the rows, the fit's results (not
    /// in [`Self::population_bytes_between_generations`]; the trees are fitted in place).
    pub constant_fit_bytes: usize,
}

/// Whether the device loop can run these settings (else the host loop runs, with the same
/// results): tournament selection (or lexicase, where [`supports_tasks`] also holds) with at most
/// [`crate::backend::cuda::kernels::MAX_ELITE`] elites, or NSGA-II ([`nsga2`]) (the other
/// bloat controls read sizes in tournaments the device does not have), and a population the
/// kernels index (NSGA-II's pool holds two).
pub fn supports(cfg: &EngineConfig) -> bool {
    use crate::select::Bloat;
    cfg.pop_size > 0
        && cfg.pop_size <= u32::MAX as usize / 4
        && cfg.elite <= crate::backend::cuda::kernels::MAX_ELITE
        && matches!(cfg.bloat, Bloat::None | Bloat::Nsga2 | Bloat::Auto)
}

/// Whether the device loop scores a joint fit with linear terms of the inputs on `n_rows`
/// rows (the task layer says so to the user; [`supports_tasks`] decides by it): rows on one
/// GPU (`sharded` false) and every tree's value at every row within [`setup::KEPT_VALUES`]
/// bytes. Lexicase reads its cases from the same kept values, each tree's error under the
/// scaling of its evaluation's sums on the terms' residual, as the task's `case_errors` does.
pub fn joint_fit_in_device_loop(cfg: &EngineConfig, n_rows: usize, sharded: bool) -> bool {
    !sharded && cfg.pop_size.saturating_mul(n_rows).saturating_mul(4) <= setup::KEPT_VALUES
}

/// Whether the device loop runs these settings on these tasks besides [`supports`] (or
/// [`supports_grammar`]): lexicase selection takes its cases on the device for regression on
/// one island whose rows are on one GPU (`island::lexicase_parents`); classification, control,
/// islands and row shards select by lexicase in the host loop, which takes the cases from the
/// task (still evaluating on the GPU). A joint fit with linear terms of the inputs scores
/// each tree from its values at every row, kept on the device where they take at most
/// [`setup::KEPT_VALUES`] bytes, on rows held by one GPU ([`joint_fit_in_device_loop`]); the
/// host loop runs it otherwise (it evaluates the joint fit on the GPU too).
pub fn supports_tasks(cfg: &EngineConfig, islands: &IslandConfig, tasks: &[DeviceTask<'_>]) -> bool {
    let joint_fits = tasks.iter().all(|t| match t {
        DeviceTask::Regression(r) if r.joint.is_some() => joint_fit_in_device_loop(cfg, r.data.n_rows(), !r.shards.is_empty()),
        _ => true,
    });
    joint_fits
        && (!cfg.selection.is_lexicase()
            || (islands.count <= 1 && tasks.len() == 1 && matches!(tasks[0], DeviceTask::Regression(r) if r.shards.is_empty())))
}

/// Whether the device loop can run grammatical evolution with these settings besides
/// [`supports`]: rows the GPU tree builder takes (at most
/// [`BUILD_FRAMES`](crate::genome::build::BUILD_FRAMES) nodes). Every GE operator has a kernel
/// (one-point and subtree crossover, int-flip at either rate, subtree mutation).
pub fn supports_grammar(cfg: &EngineConfig, rep: &GrammarRep) -> bool {
    supports(cfg) && cfg.max_len <= crate::genome::build::BUILD_FRAMES && rep.genome_capacity <= u32::MAX as usize
}

/// GE's device state: the genomes of this generation and the next, and the mapping step's
/// state (the tables the mapper reads, the used codons of the last mapping).
struct Genetic<'r, 'g> {
    rep: &'r GrammarRep<'g>,
    genomes: DeviceGenomes,
    next: DeviceGenomes,
    mapping: DeviceMapping,
}

impl Genetic<'_, '_> {
    /// Maps `self.genomes` into `pop` (trees) and leaves their used codons in the mapping.
    fn map_into(&mut self, e: &CudaEngine, pop: &mut DevicePopulation) -> Result<()> {
        e.map(&self.rep.grammar(), &mut self.mapping, &self.genomes, Some(pop))
    }
}

/// One island of the device loop: its task (engine and data), seed, populations of this
/// generation and the next, fitness and the scratch of every step.
struct Island<'t, 'r, 'g> {
    task: DeviceTask<'t>,
    seed: u64,
    pop: DevicePopulation,
    next: DevicePopulation,
    order: crate::backend::cuda::TreeOrder,
    mail: crate::backend::cuda::Mailbox,
    fs: FitnessStep,
    es: crate::backend::cuda::EliteScratch,
    fit: crate::backend::cuda::DeviceFitness,
    sizes: crate::backend::cuda::generation::SizeScratch,
    ge: Option<Genetic<'r, 'g>>,
    /// Control: trees of the population too deep for the roll-out kernel.
    n_deep: usize,
    /// This generation's elite (after a migration: chosen again on the host).
    elite: Option<crate::backend::cuda::DeviceIndices>,
    /// Env steps the CPU played this generation (control's deep trees).
    host_steps: u64,
    /// Regression with rows split over GPUs: the other shards' buffers.
    shards: Vec<ShardBuffers<'t>>,
    /// NSGA-II: the pool and the survivors (the parents are drawn from them).
    survival: Option<nsga2::Survival>,
}

/// The device loop between two generations: its settings, islands and books.
struct DeviceLoop<'a, 't, 'r, 'g> {
    cfg: &'a EngineConfig,
    islands: &'a IslandConfig,
    rep: Representation<'r, 'g>,
    /// The run's tasks, one per GPU the islands use (the first counts control's env steps).
    tasks: &'a [DeviceTask<'t>],
    /// How rows cross between GPUs (migrants, row shards).
    link: Link<'a>,
    /// Island `i` runs on `tasks[islands::device_of(i, N, tasks.len())]`: each GPU's islands
    /// are contiguous.
    isl: Vec<Island<'t, 'r, 'g>>,
    /// Elite rows each island keeps (none with NSGA-II, whose survival keeps the best).
    n_elite: usize,
    /// The best so far, each size's best and the copies counted.
    books: Books,
    history: Vec<GenerationStats>,
    island_history: Vec<Vec<GenerationStats>>,
    /// The generation evaluated next.
    gen: usize,
    prof: StageTimes,
}

/// Refuses settings the device loop does not run (before anything is allocated).
fn check(cfg: &EngineConfig, islands: &IslandConfig, tasks: &[DeviceTask<'_>]) -> Result<()> {
    anyhow::ensure!(
        supports(cfg),
        "the device loop does not support these settings (population {}, {} elites, {:?})",
        cfg.pop_size,
        cfg.elite,
        cfg.bloat
    );
    anyhow::ensure!(!tasks.is_empty(), "the device loop needs a GPU");
    anyhow::ensure!(supports_tasks(cfg, islands, tasks), "the device loop selects by lexicase for regression on one island only");
    islands.check(cfg.pop_size)?;
    let sharded = tasks.iter().any(|t| matches!(t, DeviceTask::Regression(r) if !r.shards.is_empty()));
    anyhow::ensure!(
        !sharded || cfg.constants.steps == 0,
        "constant fitting needs every row on one GPU: rows split over GPUs (--shard-rows) take --optimise-constants 0"
    );
    Ok(())
}

/// The device loop of either representation on `islands.count` islands: island `i` runs on
/// `tasks[islands::device_of(i, N, tasks.len())]` (its GPU and data) with its own seed, and
/// the islands migrate as the host loop's do ([`super::host::run`], whose results it gives).
/// One island and one task is the plain run. Per generation ([`step`]), every island is
/// evaluated, then (at a migration generation) the host reads every island, the islands
/// migrate ([`migrate::migrate_on_device`]) and each island's elite is chosen again; then every
/// island breeds; the host waits once per island and reads its mailbox (at a migration
/// generation, a second time for the next population's counts). Each GPU's islands are queued
/// by a thread of their own when there are several GPUs; one GPU is the same code on one
/// thread. `observer` sees every generation's statistics and the best so far, each generation
/// by size ([`Observer::evaluated_sizes`]), and may take snapshots (the population is then
/// copied back, and counted) and stop the run between generations, as in the host loop.
pub fn run(
    cfg: &EngineConfig,
    islands: &IslandConfig,
    rep: Representation<'_, '_>,
    tasks: &[DeviceTask<'_>],
    resume: Option<Resume>,
    observer: &mut dyn Observer,
) -> Result<(Outcome, Transfers)> {
    let cfg = &cfg.resolved(rep);
    check(cfg, islands, tasks)?;
    // GROVE_LOOP_PROFILE=1: wait for the device after every step and print where the time went
    // (for tuning; the waits themselves cost a little), from the islands' setup to the final
    // population's read.
    let prof = StageTimes::new(std::env::var("GROVE_LOOP_PROFILE").is_ok_and(|v| v == "1"));
    // A machine without the kernels in its disk cache compiles them all at once, on threads
    // of their own, while the run sets up.
    for t in tasks {
        t.compile_ahead(matches!(rep, Representation::Grammar(_)), cfg.constants.steps > 0);
    }
    let start = setup::Start::new(cfg, islands, rep, resume)?;
    let comms = setup::connect(tasks, islands.link)?;
    let link = comms.as_ref().map_or(Link::Peer, Link::Nccl);
    let mut run = DeviceLoop::new(cfg, islands, rep, tasks, start, link, prof)?;
    let (population, fitness) = loop {
        if let Some(rows) = run.generation(observer)? {
            break rows;
        }
    };
    run.prof.print();
    let mut tr = run.books.tr;
    tr.final_population_bytes = bytes::population(&population) + bytes::fitness(fitness.len());
    let outcome = Outcome { best: run.books.best, history: run.history, population, fitness, transfers: Some(tr), island_history: run.island_history, fitness_cache: None };
    Ok((outcome, tr))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::select::Selection;

    #[test]
    fn the_joint_fit_leaves_the_device_loop_for_shards_and_values_past_the_limit() {
        let cfg = EngineConfig { pop_size: 30_000, ..EngineConfig::default() };
        assert!(joint_fit_in_device_loop(&cfg, 20, false));
        assert!(!joint_fit_in_device_loop(&cfg, 20, true), "rows split over GPUs");
        // Lexicase reads its cases from the kept values.
        for selection in [Selection::Lexicase, Selection::DownSampled] {
            assert!(joint_fit_in_device_loop(&EngineConfig { selection, ..cfg.clone() }, 20, false));
        }
        // 30,000 trees × rows × 4 bytes against the limit, on either side of it.
        let rows = setup::KEPT_VALUES / (4 * cfg.pop_size);
        assert!(joint_fit_in_device_loop(&cfg, rows, false));
        assert!(!joint_fit_in_device_loop(&cfg, rows + 1, false));
        assert!(!joint_fit_in_device_loop(&EngineConfig { pop_size: usize::MAX, ..cfg }, 20, false), "no overflow");
    }
}
