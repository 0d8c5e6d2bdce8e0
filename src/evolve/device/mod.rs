//! The whole generation on the GPU, for both representations: the population, its fitness,
//! selection, variation and elitism stay in device memory from the first generation to the
//! last. Tree GP breeds trees (`breed_trees`); grammatical evolution keeps genomes `[P × G]` on
//! the device, crosses and mutates them there and maps them straight to trees
//! (`map_trees`, `kernels/map.cu`). Evaluation, statistics, the elite, the hall of fame's view
//! and the host's reads are one loop for both. Per generation the host waits once and reads a
//! mailbox of 24 words (the statistics, the next population's evaluation order counts and
//! breeding counts: [`crate::backend::cuda::MailboxRead`]) and a per-size summary (for the hall
//! of fame and the median size), then, in one copy, the trees that improve the best program or
//! a size's best (and, for GE, the best genome); [`Transfers`] counts every copy. Snapshots
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
//! This file holds the tasks the loop runs, its copy counts and the loop; [`migrate`] moves
//! rows between islands, [`observe`] reads each generation back, [`profile`] times the steps.

mod migrate;
mod nsga2;
mod observe;
mod profile;

use std::time::Instant;

use anyhow::{Result, anyhow};

use super::{Best, EngineConfig, GenerationStats, GrammarRep, IslandConfig, Observer, Outcome, Representation, Resume, Snapshot};
use crate::backend::breed::Breeder;
use crate::backend::cuda::{Comms, CudaEngine, DeviceGenomes, DeviceMapping, DevicePopulation, Link};
use crate::backend::GpuLink;
pub use crate::backend::device_task::{DeviceClassification, DeviceControl, DeviceRegression, DeviceTask, Shard};
use crate::program::fitness::ClassFitness;
use migrate::migrate_on_device;
use observe::{Books, observe};
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
/// results): plain tournament selection with at most
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

/// Whether the device loop can run grammatical evolution with these settings besides
/// [`supports`]: rows the GPU tree builder takes (at most
/// [`BUILD_FRAMES`](crate::genome::build::BUILD_FRAMES) nodes).
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

impl<'t> Island<'t, '_, '_> {
    fn engine(&self) -> &'t CudaEngine {
        self.task.engine()
    }

    /// Orders (or, for control, classes) the trees of `next` (or `pop`) for the next evaluation,
    /// writing counts into the mailbox.
    fn prepare(&mut self, of_next: bool) -> Result<()> {
        let e = self.task.engine();
        let pop = if of_next { &self.next } else { &self.pop };
        match (&self.task, &mut self.fs) {
            (DeviceTask::Control(c), FitnessStep::Control(s)) => e.control_classify(pop, c.model, s, &mut self.mail)?,
            _ => e.order_trees(pop, &mut self.order, &mut self.mail)?,
        }
        Ok(())
    }

    /// Takes the next population's counts from a mailbox read.
    fn take_counts(&mut self, r: &crate::backend::cuda::MailboxRead, p: usize) -> Result<()> {
        if !matches!(self.task, DeviceTask::Control(_)) {
            self.order.set_counts(r, p)?;
        }
        self.n_deep = r.control_deep;
        Ok(())
    }
}

/// The outcome's population and fitness: every island's evaluated rows (`pop`), copied to the
/// host end to end; none where they are not `wanted` ([`super::Observer::wants_population`]).
fn outcome_rows(isl: &[Island<'_, '_, '_>], wanted: bool) -> Result<(crate::program::tree::Population, Vec<f64>)> {
    if !wanted {
        let first = &isl[0].pop;
        return Ok((crate::program::tree::Population::new(0, first.max_len(), first.n_outputs()), Vec::new()));
    }
    let mut pops = Vec::with_capacity(isl.len());
    let mut fitness = Vec::new();
    for i in isl {
        // NSGA-II: the survivors are the population.
        let (pop, fit) = match &i.survival {
            Some(s) => (&s.surv.trees, &s.surv.fit),
            None => (&i.pop, &i.fit),
        };
        pops.push(i.engine().download_population(pop)?);
        fitness.extend(i.engine().download_fitness(fit)?);
    }
    let population = if pops.len() == 1 { pops.pop().expect("one island") } else { super::islands::concat_trees(&pops) };
    Ok((population, fitness))
}

/// The device loop's constant fitting of one island after its evaluation (regression and
/// classification; control fits none), as the host loop's: the fitness read back, the rows
/// [`super::ConstantFitting::rows`] chooses fitted in place (`kernels/fit.cu`), and the
/// population evaluated again.
fn fit_constants(cfg: &EngineConfig, i: &mut Island<'_, '_, '_>, tr: &mut Transfers) -> Result<()> {
    if matches!(i.task, DeviceTask::Control(_)) {
        return Ok(());
    }
    let e = i.task.engine();
    let fit = e.download_fitness(&i.fit)?;
    let rows: Vec<u32> = cfg.constants.rows(&fit).into_iter().map(|r| r as u32).collect();
    tr.constant_fits += 1;
    tr.constant_fit_bytes += fit.len() * 8 + rows.len() * 4;
    if rows.is_empty() {
        return Ok(());
    }
    let idx = e.upload_indices(&rows, fit.len())?;
    let res = match &i.task {
        DeviceTask::Regression(r) => {
            let fc = crate::backend::cpu::fit::FitConfig { steps: cfg.constants.steps, linear_scaling: r.config.linear_scaling };
            e.fit_constants_on_device(&mut i.pop, &idx, r.data, fc)?
        }
        DeviceTask::Classification(c) => e.fit_class_constants_on_device(&mut i.pop, &idx, c.data, cfg.constants.steps)?,
        DeviceTask::Control(_) => unreachable!("control fits no constants"),
    };
    tr.constant_fit_bytes += res.len() * std::mem::size_of::<crate::backend::cpu::fit::FitResult>();
    match (&i.task, &mut i.fs) {
        (DeviceTask::Regression(r), FitnessStep::Regression(s)) => e.regression_fitness(&i.pop, &i.order, r.data, &r.config, s, &mut i.fit)?,
        (DeviceTask::Classification(c), FitnessStep::Classification(s)) => e.classification_fitness(&i.pop, &i.order, c.data, s, &mut i.fit)?,
        _ => unreachable!("the fitness step was made for this task"),
    }
    Ok(())
}

/// Runs `f` on the islands of each GPU (contiguous: [`super::islands::device_of`]), each GPU's
/// on a scoped thread of its own when there are several: a step that waits for its GPU (a
/// constant fit reads the fitness back) or queues many launches then keeps every GPU busy
/// (measured on four H100s: one thread fitting island after island took 3.2x one GPU's whole
/// run per generation). Returns each group's result in order.
fn on_every_gpu<'t, 'r, 'g, T: Send>(
    isl: &mut [Island<'t, 'r, 'g>],
    f: impl Fn(&mut [Island<'t, 'r, 'g>]) -> Result<T> + Sync,
) -> Result<Vec<T>> {
    let mut groups: Vec<&mut [Island<'t, 'r, 'g>]> = Vec::new();
    let mut rest = isl;
    while !rest.is_empty() {
        let e = rest[0].engine();
        let n = rest.iter().take_while(|i| std::ptr::eq(i.engine(), e)).count();
        let (group, tail) = rest.split_at_mut(n);
        groups.push(group);
        rest = tail;
    }
    if groups.len() == 1 {
        return Ok(vec![f(groups.pop().expect("one group"))?]);
    }
    let f = &f;
    std::thread::scope(|s| {
        let handles: Vec<_> = groups.into_iter().map(|g| s.spawn(move || f(g))).collect();
        handles.into_iter().map(|h| h.join().map_err(|_| anyhow!("a GPU's thread panicked"))?).collect()
    })
}

/// Queues island `i`'s evaluation: its fitness into `i.fit` (control: the deep trees' steps
/// played on the CPU into `i.host_steps`).
fn evaluate(i: &mut Island<'_, '_, '_>, gen: usize, link: Link<'_>) -> Result<()> {
    let e = i.task.engine();
    i.host_steps = 0;
    match (&i.task, &mut i.fs) {
        (DeviceTask::Regression(r), FitnessStep::Regression(s)) if i.shards.is_empty() => {
            e.regression_fitness(&i.pop, &i.order, r.data, &r.config, s, &mut i.fit)?
        }
        (DeviceTask::Regression(r), FitnessStep::Regression(s)) => {
            // Rows split over GPUs: every shard's GPU gets the population and its order
            // first (a copy waits for everything queued on the first GPU so far, so
            // the first GPU's own sums are queued after the copies: else the shards
            // wait for them, measured: two GPUs no faster than one), then every GPU sums
            // its rows and the first adds the shards' sums in order.
            for sh in i.shards.iter_mut() {
                let se = sh.shard.engine;
                se.copy_population_into(&i.pop, &mut sh.pop, link)?;
                se.copy_order_into(e, &i.order, &mut sh.order, link)?;
                se.regression_shard_sums(&sh.pop, &sh.order, sh.shard.data, &mut sh.sums)?;
            }
            e.regression_shard_sums(&i.pop, &i.order, r.data, s)?;
            for sh in &i.shards {
                e.add_shard_sums(s, sh.shard.engine, &sh.sums, link)?;
            }
            e.regression_fitness_from_sums(&i.pop, &r.config, s, &mut i.fit)?;
        }
        (DeviceTask::Classification(c), FitnessStep::Classification(s)) => {
            e.classification_fitness(&i.pop, &i.order, c.data, s, &mut i.fit)?
        }
        (DeviceTask::Control(c), FitnessStep::Control(s)) => {
            let run = if c.fresh { c.run.at_generation(gen) } else { c.run };
            let mut learnt = c.learnt.map(|l| l.lock().unwrap_or_else(|e| e.into_inner()));
            let w = e.control_fitness(&i.pop, c.model, &run, c.parsimony, i.n_deep, s, &mut i.fit, &mut i.mail, learnt.as_deref_mut())?;
            i.host_steps = w.deep_steps;
        }
        _ => unreachable!("the fitness step was made for this task"),
    }
    Ok(())
}

/// Queues island `i`'s elite and statistics (into its mailbox) and its per-size summary; then,
/// with NSGA-II, its survivors (the evaluated children stay for the host's reads).
fn elite_and_sizes(i: &mut Island<'_, '_, '_>, n_elite: usize) -> Result<()> {
    let e = i.task.engine();
    i.elite = Some(e.elite_and_stats(&i.fit, &i.pop, n_elite, &mut i.es, &mut i.mail)?);
    e.size_summary(&i.fit, &i.pop, &mut i.sizes)?;
    if let Some(s) = i.survival.as_mut() {
        s.survive(e, &i.pop, &i.fit, i.ge.as_ref().map(|g| (&g.genomes, g.mapping.scratch.used())))?;
    }
    Ok(())
}

/// Queues island `i`'s next population: selection, variation (GE: of the genomes, mapped),
/// elitism, and the next evaluation's order.
#[allow(clippy::too_many_arguments)]
fn breed_island(
    i: &mut Island<'_, '_, '_>,
    rep: Representation<'_, '_>,
    p: usize,
    n_elite: usize,
    parents: &crate::select::Tournament,
    next_gen: u32,
    prof: &mut StageTimes,
) -> Result<()> {
    let e = i.task.engine();
    let elite = i.elite.take().expect("chosen above");
    // NSGA-II's parents: crowded-comparison tournaments among the survivors.
    let survivors = |s: &nsga2::Survival, slots: usize| -> Result<crate::backend::cuda::DeviceIndices> {
        let ranking = e.pareto_ranking(&s.surv.fit, &s.surv.trees)?;
        Ok(e.select_pareto(&s.surv.fit, &ranking, slots, parents.size, i.seed, next_gen)?)
    };
    match (rep, i.ge.as_mut()) {
        (Representation::Trees(rep), _) => {
            let (from, pairs) = match &i.survival {
                Some(s) => (&s.surv.trees, survivors(s, 2 * p)?),
                None => (&i.pop, e.select_parents(&i.fit, &i.pop, 2 * p, parents, i.seed, next_gen)?),
            };
            prof.mark(e, "select")?;
            let bred = e.breed(from, &pairs, &mut i.next, i.seed, next_gen, &rep.vary, &rep.breed)?;
            prof.mark(e, "breed")?;
            e.copy_trees(&i.pop, &elite, n_elite, &mut i.next)?;
            e.post_bred_counts(&bred, &mut i.mail)?;
            prof.mark(e, "elitism")?;
        }
        (Representation::Grammar(rep), Some(g)) => {
            // The host loop's breeding: pair j from tournament slots 2j and
            // 2j + 1, its children at rows n_elite + 2j (+ 1); each child mutated
            // within its own used codons (mapped first); the elite copied to the
            // first rows.
            let grammar = rep.grammar();
            let slots = 2 * (p - n_elite).div_ceil(2);
            match &i.survival {
                Some(s) => {
                    let pairs = survivors(s, slots)?;
                    prof.mark(e, "select")?;
                    let (Some(genomes), Some(used)) = (&s.surv.genomes, &s.surv.used) else {
                        anyhow::bail!("GE's survivors keep their genomes");
                    };
                    let used = crate::backend::cuda::vary::UsedCodons::Counts(e.used_counts(used));
                    e.ge_crossover(genomes, used, &pairs, &mut g.next, n_elite, &rep.vary, i.seed, next_gen)?;
                }
                None => {
                    let pairs = e.select_parents(&i.fit, &i.pop, slots, parents, i.seed, next_gen)?;
                    prof.mark(e, "select")?;
                    e.crossover(&g.genomes, &g.mapping, &pairs, &mut g.next, n_elite, &rep.vary, i.seed, next_gen)?;
                }
            }
            e.map(&grammar, &mut g.mapping, &g.next, None)?;
            e.mutate(&mut g.next, &g.mapping, n_elite, &rep.vary, i.seed, next_gen)?;
            e.copy_genomes(&g.genomes, &elite, n_elite, &mut g.next)?;
            prof.mark(e, "breed")?;
            std::mem::swap(&mut g.genomes, &mut g.next);
            g.map_into(e, &mut i.next)?;
            prof.mark(e, "map")?;
        }
        (Representation::Grammar(_), None) => unreachable!("GE keeps its genomes"),
    }
    i.prepare(true)?;
    prof.mark(e, "order trees")?;
    Ok(())
}

/// The device loop of either representation on `islands.count` islands: island `i` runs on
/// `tasks[islands::device_of(i, N, tasks.len())]` (its GPU and data) with its own seed, and
/// the islands migrate as the host loop's do ([`super::host::run`], whose results it gives).
/// One island and one task is the plain run. Per generation, every island is evaluated, then
/// (at a migration generation) the host reads every island, the islands migrate
/// ([`migrate_on_device`]) and each island's elite is chosen again; then every island breeds;
/// the host waits once per island and reads its mailbox (at a migration generation, a second
/// time for the next population's counts). `observer` sees every generation's statistics and
/// the best so far, each generation by size ([`Observer::evaluated_sizes`]), and may take
/// snapshots (the population is then copied back, and counted) and stop the run between
/// generations, as in the host loop.
pub fn run(
    cfg: &EngineConfig,
    islands: &IslandConfig,
    rep: Representation<'_, '_>,
    tasks: &[DeviceTask<'_>],
    resume: Option<Resume>,
    observer: &mut dyn Observer,
) -> Result<(Outcome, Transfers)> {
    let cfg = &cfg.resolved(rep);
    anyhow::ensure!(
        supports(cfg),
        "the device loop does not support these settings (population {}, {} elites, {:?})",
        cfg.pop_size,
        cfg.elite,
        cfg.bloat
    );
    anyhow::ensure!(!tasks.is_empty(), "the device loop needs a GPU");
    islands.check(cfg.pop_size)?;
    let sharded = tasks.iter().any(|t| matches!(t, DeviceTask::Regression(r) if !r.shards.is_empty()));
    anyhow::ensure!(
        !sharded || cfg.constants.steps == 0,
        "constant fitting needs every row on one GPU: rows split over GPUs (--shard-rows) take --optimise-constants 0"
    );
    let n = islands.count;
    let p = cfg.pop_size;
    // GROVE_LOOP_PROFILE=1: wait for the device after every step and print where the time went
    // (for tuning; the waits themselves cost a little), from the islands' setup to the final
    // population's read.
    let mut prof = StageTimes::new(std::env::var("GROVE_LOOP_PROFILE").is_ok_and(|v| v == "1"));
    let e0 = tasks[0].engine();
    let nsga2 = cfg.bloat == crate::select::Bloat::Nsga2;
    // NSGA-II's survival keeps the best already: no elite rows (as the host loop).
    let n_elite = if nsga2 { 0 } else { cfg.elite.min(p) };
    let mailbox_bytes = crate::backend::cuda::generation::MAILBOX_WORDS * 4;
    let fresh = || Best { fitness: f64::INFINITY, nodes: Vec::new(), generation: 0, genome: None };
    let (resume_at, best, history, island_history) = match &resume {
        None => (0, fresh(), Vec::with_capacity(cfg.generations + 1), Vec::new()),
        Some(r) => {
            super::check_resume(cfg, r)?;
            super::islands::check_resume(islands, r.islands)?;
            (r.generation, r.best.clone(), r.history.clone(), r.island_history.clone())
        }
    };
    let (mut history, mut island_history, mut gen) = (history, island_history, resume_at);
    let mut books = Books { best, size_best: Vec::new(), tr: Transfers::default() };
    // The first populations (each island's, from the checkpoint's rows end to end on resume).
    let (max_len, n_outputs) = match rep {
        Representation::Trees(rep) => {
            rep.vary.check().map_err(|e| anyhow!("tree settings: {e}"))?;
            rep.breed.check().map_err(|e| anyhow!("breeding settings: {e}"))?;
            (rep.vary.spec.max_len, rep.vary.spec.n_outputs)
        }
        Representation::Grammar(rep) => {
            anyhow::ensure!(supports_grammar(cfg, rep), "the device loop does not support rows of {} nodes for GE", cfg.max_len);
            (cfg.max_len, rep.templates.n_outputs)
        }
    };
    let (mut resumed_trees, mut resumed_genomes) = (None, None);
    // NSGA-II's survivors from a checkpoint, split into the islands.
    let resumed_archive: Option<Vec<super::Archive>> = match resume.as_ref().and_then(|r| r.archive.as_ref()) {
        None => None,
        Some(a) => {
            anyhow::ensure!(a.fitness.len() == n * p, "the checkpoint's survivors ({}) do not make {n} islands of {p}", a.fitness.len());
            let trees = super::islands::split_trees(&a.trees, n, p)?;
            let mut genomes = match &a.genomes {
                Some(g) => super::islands::split_genomes(g, n, p)?.into_iter().map(Some).collect(),
                None => vec![None; n],
            };
            Some(
                trees
                    .into_iter()
                    .enumerate()
                    .map(|(k, trees)| super::Archive { trees, genomes: genomes[k].take(), fitness: a.fitness[k * p..(k + 1) * p].to_vec() })
                    .collect(),
            )
        }
    };
    if let Some(r) = resume {
        match rep {
            Representation::Trees(_) => {
                let host = r.population.ok_or_else(|| anyhow!("the checkpoint holds genomes, not the trees tree GP needs"))?;
                anyhow::ensure!(
                    host.size() == n * p && host.max_len == max_len && host.n_outputs == n_outputs,
                    "the checkpoint's trees do not fit these settings"
                );
                resumed_trees = Some(super::islands::split_trees(&host, n, p)?);
            }
            Representation::Grammar(rep) => {
                let g = r.genomes.ok_or_else(|| anyhow!("the checkpoint holds trees, not the genomes grammatical evolution needs"))?;
                anyhow::ensure!(g.size() == n * p && g.capacity == rep.genome_capacity, "the checkpoint's genomes do not fit these settings");
                resumed_genomes = Some(super::islands::split_genomes(&g, n, p)?);
            }
        }
    }
    // The run's GPUs (the islands', and those holding row shards) exchange migrants and shards'
    // data over `link`. Peer copies: let each GPU reach the others directly where the hardware
    // allows (else the driver stages the copies). NCCL: a communicator rank per GPU.
    let mut gpus: Vec<&CudaEngine> = Vec::new();
    for t in tasks {
        gpus.push(t.engine());
        if let DeviceTask::Regression(r) = t {
            gpus.extend(r.shards.iter().map(|s| s.engine));
        }
    }
    let comms = match islands.link {
        GpuLink::Peer => {
            for (a, x) in gpus.iter().enumerate() {
                for y in &gpus[a + 1..] {
                    if x.ordinal() != y.ordinal() {
                        x.enable_peer_access(y)?;
                        y.enable_peer_access(x)?;
                    }
                }
            }
            None
        }
        GpuLink::Nccl => Some(Comms::new(&gpus)?),
    };
    let link = comms.as_ref().map_or(Link::Peer, Link::Nccl);
    let mut isl: Vec<Island> = Vec::with_capacity(n);
    for i in 0..n {
        let task = tasks[super::islands::device_of(i, n, tasks.len())];
        let e = task.engine();
        let seed = super::islands::island_seed(cfg.seed, i);
        let (pop, ge) = match rep {
            Representation::Trees(rep) => {
                let pop = match &resumed_trees {
                    None => e.random_trees(&rep.vary.spec, p, seed)?,
                    Some(all) => e.upload_population(&all[i])?,
                };
                (pop, None)
            }
            Representation::Grammar(rep) => {
                let genomes = match &resumed_genomes {
                    // The first generation is made on the device (init_genomes' twin).
                    None => e.random_genomes(&rep.grammar(), &rep.init, p, rep.genome_capacity, seed)?,
                    Some(all) => e.upload_genomes(&all[i])?,
                };
                let next = e.alloc_genomes(p, rep.genome_capacity)?;
                let mut ge = Genetic { rep, genomes, next, mapping: e.mapping(&rep.grammar(), p)? };
                let mut pop = e.alloc_population(p, cfg.max_len, n_outputs)?;
                ge.map_into(e, &mut pop)?;
                (pop, Some(ge))
            }
        };
        let shards = match &task {
            DeviceTask::Regression(r) => r
                .shards
                .iter()
                .map(|&sh| {
                    let se = sh.engine;
                    Ok(ShardBuffers {
                        shard: sh,
                        pop: se.alloc_population(p, max_len, n_outputs)?,
                        order: se.alloc_tree_order(p)?,
                        sums: se.alloc_fitness_scratch(p, n_outputs, sh.data)?,
                    })
                })
                .collect::<Result<Vec<_>>>()?,
            _ => Vec::new(),
        };
        let fs = match &task {
            DeviceTask::Regression(r) => FitnessStep::Regression(e.alloc_fitness_scratch(p, n_outputs, r.data)?),
            DeviceTask::Classification(c) => {
                let kind = match c.fitness {
                    ClassFitness::Accuracy => 0,
                    ClassFitness::BalancedAccuracy => 1,
                    ClassFitness::CrossEntropy => 2,
                };
                FitnessStep::Classification(e.alloc_class_fitness_scratch(p, n_outputs, c.data, c.counts, kind, c.parsimony)?)
            }
            DeviceTask::Control(c) => FitnessStep::Control(e.alloc_control_scratch(p, c.run.episodes, c.learnt.map(|_| c.model.obs_size))?),
        };
        isl.push(Island {
            task,
            seed,
            next: e.alloc_population(p, max_len, n_outputs)?,
            order: e.alloc_tree_order(p)?,
            mail: e.alloc_mailbox()?,
            fs,
            es: e.alloc_elite_scratch(p)?,
            fit: e.alloc_fitness(p)?,
            sizes: e.alloc_size_scratch(max_len)?,
            pop,
            ge,
            n_deep: 0,
            elite: None,
            host_steps: 0,
            shards,
            survival: if nsga2 { Some(nsga2::Survival::new(e, p, max_len, n_outputs, rep, resumed_archive.as_ref().map(|a| &a[i]))?) } else { None },
        });
    }
    books.size_best = vec![f64::INFINITY; max_len + 1];
    for i in isl.iter_mut() {
        i.prepare(false)?;
    }
    for i in isl.iter_mut() {
        let r = i.engine().read_mailbox(&i.mail)?;
        books.tr.mailbox_reads += 1;
        books.tr.mailbox_bytes += mailbox_bytes;
        i.take_counts(&r, p)?;
    }

    for i in &isl {
        prof.mark(i.engine(), "islands set up")?;
    }
    // With islands on several GPUs a thread per GPU queues its islands' work (one thread
    // queueing every GPU's launches delays the last GPU's; the profile, which waits after each
    // step, keeps one thread).
    let threaded = !prof.on() && isl.iter().any(|i| !std::ptr::eq(i.engine(), e0));
    let (population, fitness) = loop {
        let t0 = Instant::now();
        // The host's books since the last generation's read (history, observer, snapshots).
        prof.mark(e0, "host between generations")?;
        let fitting = cfg.constants.at(gen);
        if threaded {
            // A thread per GPU queues its islands' evaluation, fitting and statistics.
            for t in on_every_gpu(&mut isl, |group| {
                let mut t = Transfers::default();
                for i in group.iter_mut() {
                    evaluate(i, gen, link)?;
                    if fitting {
                        fit_constants(cfg, i, &mut t)?;
                    }
                    elite_and_sizes(i, n_elite)?;
                }
                Ok(t)
            })? {
                books.tr.constant_fits += t.constant_fits;
                books.tr.constant_fit_bytes += t.constant_fit_bytes;
            }
        } else {
            for i in isl.iter_mut() {
                evaluate(i, gen, link)?;
            }
            prof.mark(e0, "evaluate")?;
            if fitting {
                for t in on_every_gpu(&mut isl, |group| {
                    let mut t = Transfers::default();
                    for i in group.iter_mut() {
                        fit_constants(cfg, i, &mut t)?;
                    }
                    Ok(t)
                })? {
                    books.tr.constant_fits += t.constant_fits;
                    books.tr.constant_fit_bytes += t.constant_fit_bytes;
                }
                prof.mark(e0, "constants")?;
            }
            for i in isl.iter_mut() {
                elite_and_sizes(i, n_elite)?;
            }
            prof.mark(e0, "elite and statistics")?;
        }
        let last = gen == cfg.generations;
        // At a migration generation the host reads the generation first (migrants overwrite
        // rows the hall of fame may want), then the islands migrate.
        let mut seen = None;
        if islands.migrates_after(gen, cfg.generations) {
            seen = Some(observe(&isl, rep, gen, false, &mut books, observer)?);
            prof.mark(e0, "read mailbox, hall of fame and best")?;
            migrate_on_device(&mut isl, islands.migrants, n_elite, link, &mut books.tr)?;
            for i in &isl {
                prof.mark(i.engine(), "migration")?;
            }
        }
        if !last {
            let next_gen = gen as u32 + 1;
            let parents = cfg.parent_tournament();
            if threaded {
                on_every_gpu(&mut isl, |group| {
                    let mut off = StageTimes::new(false);
                    for i in group.iter_mut() {
                        breed_island(i, rep, p, n_elite, &parents, next_gen, &mut off)?;
                    }
                    Ok(())
                })?;
            } else {
                for i in isl.iter_mut() {
                    breed_island(i, rep, p, n_elite, &parents, next_gen, &mut prof)?;
                }
            }
        }
        let reads = match seen {
            Some(seen) if !last => {
                // The next populations' counts, queued after the first read.
                let mut reads = seen.reads;
                for (i, r) in isl.iter().zip(reads.iter_mut()) {
                    let again = i.engine().read_mailbox(&i.mail)?;
                    books.tr.mailbox_reads += 1;
                    books.tr.mailbox_bytes += mailbox_bytes;
                    *r = crate::backend::cuda::MailboxRead { stats: r.stats, env_steps: r.env_steps, ..again };
                }
                reads
            }
            Some(seen) => seen.reads,
            None => observe(&isl, rep, gen, !last, &mut books, observer)?.reads,
        };
        prof.mark(e0, "read mailbox, hall of fame and best")?;
        books.tr.generations += 1;
        let seconds = t0.elapsed().as_secs_f64();
        // Control: every island's env steps go to the first task's counter (the one the run's
        // observer reads).
        if let DeviceTask::Control(c) = tasks[0] {
            if let Ok(mut played) = c.played.lock() {
                played.0 += isl.iter().zip(&reads).map(|(i, r)| r.env_steps + i.host_steps).sum::<u64>();
                played.1 += seconds;
            }
        }
        let each: Vec<GenerationStats> = reads
            .iter()
            .map(|r| {
                let s = r.stats;
                let nv = s.n_valid as usize;
                GenerationStats {
                    generation: gen,
                    best: if s.best.is_finite() && nv > 0 { s.best } else { f64::INFINITY },
                    mean: if nv > 0 { s.sum / nv as f64 } else { f64::NAN },
                    mean_size: if nv > 0 { s.sum_len / nv as f64 } else { f64::NAN },
                    invalid: p - nv,
                    seconds,
                }
            })
            .collect();
        let stats = super::islands::combine(gen, &each, p, seconds);
        // A generation that ends the run early: its evaluated rows for the outcome, the next
        // generation (bred above) for the snapshot.
        let ended = if !last && observer.finish(gen, &books.best) { Some(outcome_rows(&isl, observer.wants_population())?) } else { None };
        if n > 1 {
            observer.islands(&each);
            island_history.push(each);
        }
        observer.generation(&stats, &books.best);
        history.push(stats);
        if last {
            let rows = outcome_rows(&isl, observer.wants_population())?;
            prof.mark(e0, "final population read")?;
            break rows;
        }
        for (i, r) in isl.iter_mut().zip(&reads) {
            i.take_counts(r, p)?;
            std::mem::swap(&mut i.pop, &mut i.next);
        }
        gen += 1;
        // Between generations (as `between_generations`, which needs the population on the
        // host): a snapshot when asked or before a stop, copying every island's next
        // generation back, end to end.
        let stop = observer.stop_requested();
        if stop || ended.is_some() || observer.wants_snapshot(gen) {
            let (trees, genomes, bytes) = match rep {
                Representation::Trees(_) => {
                    let each = isl.iter().map(|i| i.engine().download_population(&i.pop)).collect::<std::result::Result<Vec<_>, _>>()?;
                    let h = if n == 1 { each.into_iter().next().expect("one island") } else { super::islands::concat_trees(&each) };
                    let bytes = h.op.len() * 8 + h.len.len() * 2;
                    (Some(h), None, bytes)
                }
                Representation::Grammar(_) => {
                    let each = isl
                        .iter()
                        .map(|i| i.engine().download_genomes(&i.ge.as_ref().expect("GE keeps its genomes").genomes))
                        .collect::<std::result::Result<Vec<_>, _>>()?;
                    let h = if n == 1 { each.into_iter().next().expect("one island") } else { super::islands::concat_genomes(&each) };
                    let bytes = (h.codons.len() + h.len.len()) * 4;
                    (None, Some(h), bytes)
                }
            };
            // NSGA-II: the survivors the next generation competes with, every island's end to end.
            let archive = if nsga2 {
                let each = isl
                    .iter()
                    .map(|i| i.survival.as_ref().expect("NSGA-II keeps survivors").archive(i.engine()))
                    .collect::<Result<Vec<_>>>()?;
                Some(if n == 1 {
                    each.into_iter().next().expect("one island")
                } else {
                    super::Archive {
                        trees: super::islands::concat_trees(each.iter().map(|a| &a.trees)),
                        genomes: each.iter().map(|a| a.genomes.as_ref()).collect::<Option<Vec<_>>>().map(super::islands::concat_genomes),
                        fitness: each.iter().flat_map(|a| a.fitness.iter().copied()).collect(),
                    }
                })
            } else {
                None
            };
            let bytes = bytes + archive.as_ref().map_or(0, |a| a.trees.op.len() * 8 + a.trees.len.len() * 2 + a.fitness.len() * 8 + a.genomes.as_ref().map_or(0, |g| (g.codons.len() + g.len.len()) * 4));
            let tr = &mut books.tr;
            tr.snapshots += 1;
            tr.snapshot_bytes += bytes;
            tr.population_bytes_between_generations += bytes;
            let state = Snapshot {
                generation: gen,
                genomes: genomes.as_ref(),
                population: trees.as_ref(),
                best: &books.best,
                history: &history,
                islands: n,
                island_history: &island_history,
                archive: archive.as_ref().map(|a| super::ArchiveRef { trees: &a.trees, genomes: a.genomes.as_ref(), fitness: &a.fitness }),
            };
            observer.snapshot(&state)?;
        }
        if stop {
            return Err(super::Interrupted { generation: gen }.into());
        }
        if let Some(rows) = ended {
            break rows;
        }
    };
    prof.print();
    let mut tr = books.tr;
    tr.final_population_bytes = population.op.len() * 8 + population.len.len() * 2 + fitness.len() * 8;
    Ok((Outcome { best: books.best, history, population, fitness, transfers: Some(tr), island_history }, tr))
}
