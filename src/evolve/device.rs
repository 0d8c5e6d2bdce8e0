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
//! It computes what the host loops ([`super::run_trees_on_host`], [`super::run_grammar_on_host`])
//! compute with the same engine evaluating: every kernel is the exact twin of the host step it
//! replaces (`init_trees` of `init_population`, `select_tournament` of `select::tournament`,
//! `breed_trees` of `breed`, `ge_crossover` / `ge_int_flip` of `genome::vary`, `map_trees` of
//! `map_population`, `elite_and_stats` of `select::elite`, the tasks' fitness kernels of their
//! host formulas, `size_summary` of the hall of fame's update), so the loops give the same
//! programs, fitness, history (the mean fitness summed in another order) and hall of fame.
//! `tests/cuda_evolve.rs` checks this on a GPU.

use std::time::Instant;

use anyhow::{Result, anyhow};

use super::{Best, EngineConfig, GenerationStats, GrammarRep, Observer, Outcome, Resume, Snapshot, TreeRep};
use crate::backend::cuda::{CudaEngine, DeviceClassData, DeviceDataset, DeviceGenomes, DevicePopulation, MapLaunch, MapTreesScratch};
use crate::grammar::template::DeviceTables;
use crate::program::fitness::{ClassFitness, RegressionConfig};

/// A regression task whose data lives on a GPU: what the device loop needs from the task.
#[derive(Clone, Copy)]
pub struct DeviceRegression<'a> {
    /// The engine holding the data.
    pub engine: &'a CudaEngine,
    /// The training data on the device.
    pub data: &'a DeviceDataset,
    /// Metric, scaling and parsimony.
    pub config: RegressionConfig,
}

/// A classification task whose data lives on a GPU.
#[derive(Clone, Copy)]
pub struct DeviceClassification<'a> {
    /// The engine holding the data.
    pub engine: &'a CudaEngine,
    /// The training data on the device.
    pub data: &'a DeviceClassData,
    /// Training points per class.
    pub counts: &'a [u64],
    /// What is minimised.
    pub fitness: ClassFitness,
    /// Added to the fitness per node.
    pub parsimony: f64,
}

/// A control task whose roll-outs run on a GPU: fitness is minus the mean return of `run`'s
/// episodes, plus parsimony.
#[derive(Clone, Copy)]
pub struct DeviceControl<'a> {
    /// The engine that plays the episodes.
    pub engine: &'a CudaEngine,
    /// The environment.
    pub model: &'a crate::sim::Model,
    /// Episodes, steps and reset noise.
    pub run: crate::program::policy::ControlRun,
    /// Added to the fitness per node.
    pub parsimony: f64,
    /// Env steps played and seconds of the generations that played them, as the task counts
    /// them for its report.
    pub played: &'a std::sync::Mutex<(u64, f64)>,
}

/// A task the device loop runs: its fitness is computed on the device.
#[derive(Clone, Copy)]
pub enum DeviceTask<'a> {
    /// Symbolic regression.
    Regression(DeviceRegression<'a>),
    /// Classification.
    Classification(DeviceClassification<'a>),
    /// Control.
    Control(DeviceControl<'a>),
}

impl DeviceTask<'_> {
    fn engine(&self) -> &CudaEngine {
        match self {
            DeviceTask::Regression(r) => r.engine,
            DeviceTask::Classification(c) => c.engine,
            DeviceTask::Control(c) => c.engine,
        }
    }
}

/// The fitness step's buffers.
enum FitnessStep {
    Regression(crate::backend::cuda::FitnessScratch),
    Classification(crate::backend::cuda::classify::ClassFitnessScratch),
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
}

/// Whether the device loop can run these settings (else the host loop runs, with the same
/// results): plain tournament selection (no size-based bloat control: `select_tournament`
/// reads fitness only) with at most [`crate::backend::cuda::kernels::MAX_ELITE`] elites, a
/// population the kernels index.
pub fn supports(cfg: &EngineConfig) -> bool {
    cfg.pop_size > 0
        && cfg.pop_size <= u32::MAX as usize / 2
        && cfg.elite <= crate::backend::cuda::kernels::MAX_ELITE
        && cfg.bloat == crate::select::Bloat::None
}

/// Whether the device loop can run grammatical evolution with these settings besides
/// [`supports`]: rows the GPU tree builder takes (at most
/// [`BUILD_FRAMES`](crate::grammar::template::BUILD_FRAMES) nodes).
pub fn supports_grammar(cfg: &EngineConfig, rep: &GrammarRep) -> bool {
    supports(cfg) && cfg.max_len <= crate::grammar::template::BUILD_FRAMES && rep.genome_capacity <= u32::MAX as usize
}

/// What the loop varies: trees, or genomes mapped to trees.
#[derive(Clone, Copy)]
pub enum Representation<'r, 'g> {
    /// Tree GP.
    Trees(&'r TreeRep),
    /// Grammatical evolution.
    Grammar(&'r GrammarRep<'g>),
}

/// GE's device state: the genomes of this generation and the next, the tables the mapper reads,
/// the mapper's scratch (used codons of the last mapping) and the population of each
/// generation's trees.
struct Genetic<'r, 'g> {
    rep: &'r GrammarRep<'g>,
    tables: DeviceTables,
    genomes: DeviceGenomes,
    next: DeviceGenomes,
    map: MapTreesScratch,
}

impl Genetic<'_, '_> {
    /// Maps `self.genomes` into `pop` (trees) and leaves their used codons in the scratch.
    fn map_into(&mut self, e: &CudaEngine, pop: &mut DevicePopulation) -> Result<()> {
        e.map_trees(&self.tables, &self.genomes, &self.rep.map, Some(pop), &mut self.map, &MapLaunch::default())?;
        Ok(())
    }
}

/// Runs tree GP on the device, from the start or from `resume`. `observer` sees every
/// generation's statistics and the best so far, each generation by size
/// ([`Observer::evaluated_sizes`]), and may take snapshots (the population is then copied back,
/// and counted) and stop the run between generations, as in the host loop.
pub fn run_trees(
    cfg: &EngineConfig,
    rep: &TreeRep,
    task: &DeviceTask<'_>,
    resume: Option<Resume>,
    observer: &mut dyn Observer,
) -> Result<(Outcome, Transfers)> {
    run(cfg, Representation::Trees(rep), task, resume, observer)
}

/// Runs grammatical evolution on the device, from the start or from `resume`, as
/// [`run_trees`] does tree GP: genomes stay on the device; each generation is mapped to trees
/// there (`map_trees`), and the best genome is copied back when the best improves.
pub fn run_grammar(
    cfg: &EngineConfig,
    rep: &GrammarRep,
    task: &DeviceTask<'_>,
    resume: Option<Resume>,
    observer: &mut dyn Observer,
) -> Result<(Outcome, Transfers)> {
    run(cfg, Representation::Grammar(rep), task, resume, observer)
}

/// The device loop of either representation.
pub fn run(
    cfg: &EngineConfig,
    rep: Representation<'_, '_>,
    task: &DeviceTask<'_>,
    resume: Option<Resume>,
    observer: &mut dyn Observer,
) -> Result<(Outcome, Transfers)> {
    anyhow::ensure!(supports(cfg), "the device loop does not support these settings (population {}, {} elites)", cfg.pop_size, cfg.elite);
    let e = task.engine();
    let p = cfg.pop_size;
    let n_elite = cfg.elite.min(p);
    let mailbox_bytes = crate::backend::cuda::generation::MAILBOX_WORDS * 4;
    let mut tr = Transfers::default();
    let fresh = || Best { fitness: f64::INFINITY, nodes: Vec::new(), generation: 0, genome: None };
    let (resume_at, best, history) = match &resume {
        None => (0, fresh(), Vec::with_capacity(cfg.generations + 1)),
        Some(r) => {
            super::check_resume(cfg, r)?;
            (r.generation, r.best.clone(), r.history.clone())
        }
    };
    let (mut best, mut history, mut gen) = (best, history, resume_at);
    // The first population, its row shape, and GE's genomes.
    let (max_len, n_outputs, mut pop, mut ge) = match rep {
        Representation::Trees(rep) => {
            rep.vary.check().map_err(|e| anyhow!("tree settings: {e}"))?;
            rep.breed.check().map_err(|e| anyhow!("breeding settings: {e}"))?;
            let spec = &rep.vary.spec;
            let pop = match resume {
                None => e.init_trees(spec, p, cfg.seed)?,
                Some(r) => {
                    let host = r.population.ok_or_else(|| anyhow!("the checkpoint holds genomes, not the trees tree GP needs"))?;
                    anyhow::ensure!(
                        host.size() == p && host.max_len == spec.max_len && host.n_outputs == spec.n_outputs,
                        "the checkpoint's trees do not fit these settings"
                    );
                    e.upload_population(&host)?
                }
            };
            (spec.max_len, spec.n_outputs, pop, None)
        }
        Representation::Grammar(rep) => {
            anyhow::ensure!(supports_grammar(cfg, rep), "the device loop does not support rows of {} nodes for GE", cfg.max_len);
            let tables = DeviceTables::new(rep.table, rep.templates).map_err(|m| anyhow!("{m}"))?;
            let genomes = match resume {
                // The first generation is made on the device (init_genomes' twin).
                None => e.init_genomes(rep.table, &tables, &rep.init, rep.map.codons, p, rep.genome_capacity, cfg.seed)?,
                Some(r) => {
                    let g = r.genomes.ok_or_else(|| anyhow!("the checkpoint holds trees, not the genomes grammatical evolution needs"))?;
                    anyhow::ensure!(g.size() == p && g.capacity == rep.genome_capacity, "the checkpoint's genomes do not fit these settings");
                    e.upload_genomes(&g)?
                }
            };
            let mut ge = Genetic {
                rep,
                tables,
                genomes,
                next: e.alloc_genomes(p, rep.genome_capacity)?,
                map: e.alloc_map_trees(p, rep.max_derivation())?,
            };
            let mut pop = e.alloc_population(p, cfg.max_len, rep.templates.n_outputs)?;
            ge.map_into(e, &mut pop)?;
            (cfg.max_len, rep.templates.n_outputs, pop, Some(ge))
        }
    };
    let mut next = e.alloc_population(p, max_len, n_outputs)?;
    let mut order = e.alloc_tree_order(p)?;
    let mut mail = e.alloc_mailbox()?;
    let mut fs = match task {
        DeviceTask::Regression(r) => FitnessStep::Regression(e.alloc_fitness_scratch(p, n_outputs, r.data)?),
        DeviceTask::Classification(c) => {
            let kind = match c.fitness {
                ClassFitness::Accuracy => 0,
                ClassFitness::BalancedAccuracy => 1,
                ClassFitness::CrossEntropy => 2,
            };
            FitnessStep::Classification(e.alloc_class_fitness_scratch(p, n_outputs, c.data, c.counts, kind, c.parsimony)?)
        }
        DeviceTask::Control(c) => FitnessStep::Control(e.alloc_control_scratch(p, c.run.episodes)?),
    };
    let mut es = e.alloc_elite_scratch(p)?;
    let mut fit = e.alloc_fitness(p)?;
    let mut sizes = e.alloc_size_scratch(max_len)?;
    let size_bytes = (max_len + 1) * 16;
    // The best fitness of each size over the generations so far: only programs that beat it
    // are copied back for the observer's hall of fame.
    let mut size_best = vec![f64::INFINITY; max_len + 1];
    // Control plays trees in the roll-out kernel (its own checks, `control_classify`); the
    // evaluation kernels take the others in `order_trees`' order.
    let prepare = |pop: &DevicePopulation, fs: &mut FitnessStep, order: &mut crate::backend::cuda::TreeOrder, mail: &mut crate::backend::cuda::Mailbox| -> Result<()> {
        match (task, fs) {
            (DeviceTask::Control(c), FitnessStep::Control(s)) => e.control_classify(pop, c.model, s, mail)?,
            _ => e.order_trees(pop, order, mail)?,
        }
        Ok(())
    };
    let control = matches!(task, DeviceTask::Control(_));
    prepare(&pop, &mut fs, &mut order, &mut mail)?;
    let r = e.read_mailbox(&mail)?;
    tr.mailbox_reads += 1;
    tr.mailbox_bytes += mailbox_bytes;
    if !control {
        order.set_counts(&r, p)?;
    }
    let mut n_deep = r.control_deep;

    // GROVE_LOOP_PROFILE=1: wait for the device after every step and print where the time went
    // (for tuning; the waits themselves cost a little).
    let mut prof = StageTimes::new(std::env::var("GROVE_LOOP_PROFILE").is_ok_and(|v| v == "1"));
    loop {
        let t0 = Instant::now();
        let mut host_steps = 0u64;
        prof.start();
        match (task, &mut fs) {
            (DeviceTask::Regression(r), FitnessStep::Regression(s)) => e.regression_fitness(&pop, &order, r.data, &r.config, s, &mut fit)?,
            (DeviceTask::Classification(c), FitnessStep::Classification(s)) => e.classification_fitness(&pop, &order, c.data, s, &mut fit)?,
            (DeviceTask::Control(c), FitnessStep::Control(s)) => {
                let w = e.control_fitness(&pop, c.model, &c.run, c.parsimony, n_deep, s, &mut fit, &mut mail)?;
                host_steps = w.deep_steps;
            }
            _ => unreachable!("the fitness step was made for this task"),
        }
        prof.mark(e, "evaluate")?;
        let elite = e.elite_and_stats(&fit, &pop, n_elite, &mut es, &mut mail)?;
        e.size_summary(&fit, &pop, &mut sizes)?;
        prof.mark(e, "elite and statistics")?;
        let last = gen == cfg.generations;
        if !last {
            let next_gen = gen as u32 + 1;
            match (rep, ge.as_mut()) {
                (Representation::Trees(rep), _) => {
                    let pairs = e.select_tournament(&fit, 2 * p, cfg.tournament, false, cfg.seed, next_gen)?;
                    prof.mark(e, "select")?;
                    let bred = e.breed_trees(&pop, &pairs, &mut next, cfg.seed, next_gen, &rep.vary, &rep.breed)?;
                    prof.mark(e, "breed")?;
                    e.gather_trees(&pop, &elite, n_elite, &mut next)?;
                    e.post_bred_counts(&bred, &mut mail)?;
                    prof.mark(e, "elitism")?;
                }
                (Representation::Grammar(rep), Some(g)) => {
                    // run_grammar_on_host's breeding: pair j from tournament slots 2j and 2j + 1,
                    // its children at rows n_elite + 2j (+ 1); each child mutated within its own
                    // used codons (mapped first); the elite copied to the first rows.
                    let pairs = e.select_tournament(&fit, 2 * (p - n_elite).div_ceil(2), cfg.tournament, false, cfg.seed, next_gen)?;
                    prof.mark(e, "select")?;
                    let used = crate::backend::cuda::vary::UsedCodons::Counts(g.map.used());
                    e.ge_crossover(&g.genomes, used, &pairs, &mut g.next, n_elite, &rep.vary, cfg.seed, next_gen)?;
                    e.map_trees(&g.tables, &g.next, &rep.map, None, &mut g.map, &MapLaunch::default())?;
                    let used = crate::backend::cuda::vary::UsedCodons::Counts(g.map.used());
                    e.ge_int_flip(&mut g.next, used, n_elite, &rep.vary, cfg.seed, next_gen)?;
                    e.gather_genomes(&g.genomes, &elite, n_elite, &mut g.next)?;
                    prof.mark(e, "breed")?;
                    std::mem::swap(&mut g.genomes, &mut g.next);
                    g.map_into(e, &mut next)?;
                    prof.mark(e, "map")?;
                }
                (Representation::Grammar(_), None) => unreachable!("GE keeps its genomes"),
            }
            prepare(&next, &mut fs, &mut order, &mut mail)?;
            prof.mark(e, "order trees")?;
        }
        let (r, summary) = e.read_generation(&mail, &sizes)?;
        prof.mark(e, "read mailbox")?;
        tr.mailbox_reads += 1;
        tr.mailbox_bytes += mailbox_bytes;
        tr.size_summaries += 1;
        tr.size_summary_bytes += size_bytes;
        tr.generations += 1;
        if let DeviceTask::Control(c) = task {
            if let Ok(mut played) = c.played.lock() {
                played.0 += r.env_steps + host_steps;
                played.1 += t0.elapsed().as_secs_f64();
            }
        }
        let s = r.stats;
        let n = s.n_valid as usize;
        // One copy brings back every tree the host needs: each size's new winner (for the
        // hall of fame) and the best program when it improves.
        let mut improved = Vec::new();
        for (size, b) in summary.best.iter().enumerate() {
            if let Some((f, i)) = *b {
                if f < size_best[size] {
                    size_best[size] = f;
                    improved.push((f, i));
                }
            }
        }
        let best_improves = s.best.is_finite() && s.best < best.fitness;
        let mut idx: Vec<u32> = improved.iter().map(|&(_, i)| i).collect();
        if best_improves {
            idx.push(s.best_idx);
        }
        let mut trees = e.download_trees(&pop, &idx)?;
        let row_bytes = max_len * 8 + 2;
        if best_improves {
            let nodes = trees.pop().expect("one tree per index");
            tr.best_trees += 1;
            tr.best_tree_bytes += row_bytes;
            // GE: the genome that made it, from the generation just evaluated (already swapped
            // into `next` when the next one was bred).
            let genome = match (&ge, last) {
                (Some(g), false) => Some(e.download_genome(&g.next, s.best_idx as usize)?),
                (Some(g), true) => Some(e.download_genome(&g.genomes, s.best_idx as usize)?),
                (None, _) => None,
            };
            if let Some(g) = &genome {
                tr.best_genome_bytes += g.len() * 4;
            }
            let genome = match (rep, genome) {
                (Representation::Grammar(rep), Some(g)) => {
                    let text = super::phenotype(rep, &g);
                    Some((g, text))
                }
                _ => None,
            };
            best = Best { fitness: s.best, nodes, generation: gen, genome };
        }
        tr.hall_of_fame_trees += trees.len();
        tr.hall_of_fame_bytes += trees.len() * row_bytes;
        let winners: Vec<(f64, Vec<crate::program::tree::Node>)> = improved.iter().map(|&(f, _)| f).zip(trees).collect();
        observer.evaluated_sizes(gen, &winners, &summary.counts);
        prof.mark(e, "hall of fame and best")?;
        let stats = GenerationStats {
            generation: gen,
            best: if s.best.is_finite() && n > 0 { s.best } else { f64::INFINITY },
            mean: if n > 0 { s.sum / n as f64 } else { f64::NAN },
            mean_size: if n > 0 { s.sum_len / n as f64 } else { f64::NAN },
            invalid: p - n,
            seconds: t0.elapsed().as_secs_f64(),
        };
        observer.generation(&stats, &best);
        history.push(stats);
        if last {
            break;
        }
        if !control {
            order.set_counts(&r, p)?;
        }
        n_deep = r.control_deep;
        std::mem::swap(&mut pop, &mut next);
        gen += 1;
        // Between generations (as `between_generations`, which needs the population on the
        // host): a snapshot when asked or before a stop, copying the next generation back.
        let stop = observer.stop_requested();
        if stop || observer.wants_snapshot(gen) {
            let (trees, genomes, bytes) = match &ge {
                None => {
                    let h = e.download_population(&pop)?;
                    let bytes = h.op.len() * 8 + h.len.len() * 2;
                    (Some(h), None, bytes)
                }
                Some(g) => {
                    let h = e.download_genomes(&g.genomes)?;
                    let bytes = (h.codons.len() + h.len.len()) * 4;
                    (None, Some(h), bytes)
                }
            };
            tr.snapshots += 1;
            tr.snapshot_bytes += bytes;
            tr.population_bytes_between_generations += bytes;
            let state = Snapshot { generation: gen, genomes: genomes.as_ref(), population: trees.as_ref(), best: &best, history: &history };
            observer.snapshot(&state)?;
        }
        if stop {
            return Err(super::Interrupted { generation: gen }.into());
        }
    }
    prof.print();
    let population = e.download_population(&pop)?;
    let fitness = e.download_fitness(&fit)?;
    tr.final_population_bytes = population.op.len() * 8 + population.len.len() * 2 + fitness.len() * 8;
    Ok((Outcome { best, history, population, fitness, transfers: Some(tr) }, tr))
}

/// Seconds per step of the loop, when profiling.
struct StageTimes {
    on: bool,
    last: Instant,
    total: Vec<(&'static str, f64)>,
}

impl StageTimes {
    fn new(on: bool) -> Self {
        Self { on, last: Instant::now(), total: Vec::new() }
    }
    fn start(&mut self) {
        self.last = Instant::now();
    }
    /// Waits for the device and adds the time since the last mark to `name`.
    fn mark(&mut self, e: &CudaEngine, name: &'static str) -> Result<()> {
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
    fn print(&self) {
        if self.on {
            let sum: f64 = self.total.iter().map(|(_, t)| t).sum();
            for (name, t) in &self.total {
                eprintln!("device loop: {name:22} {:9.3} ms ({:4.1} %)", t * 1e3, 100.0 * t / sum);
            }
        }
    }
}
