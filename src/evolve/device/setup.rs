//! The device loop's setup, before the first generation: where the run starts (a checkpoint's
//! generation, books and rows split into the islands, or none), the GPUs connected, and every
//! island's buffers and first population on its GPU, ordered for the first evaluation.

use anyhow::{Result, anyhow};

use super::observe::Books;
use super::profile::StageTimes;
use super::{DeviceLoop, DeviceTask, FitnessStep, Genetic, Island, ShardBuffers, Transfers, bytes, nsga2};
use crate::backend::GpuLink;
use crate::backend::breed::Breeder;
use crate::backend::cuda::{Comms, CudaEngine, DevicePopulation, Link};
use crate::evolve::{Archive, Best, EngineConfig, GenerationStats, IslandConfig, Representation, Resume, islands};
use crate::genome::init::Genomes;
use crate::program::fitness::ClassFitness;
use crate::program::tree::Population;

/// Where a run starts: its first generation, books and history, the rows' shape, and on resume
/// each island's population (trees or genomes) and NSGA-II survivors, split from the
/// checkpoint's rows end to end.
pub(super) struct Start {
    gen: usize,
    best: Best,
    history: Vec<GenerationStats>,
    island_history: Vec<Vec<GenerationStats>>,
    /// Nodes a row holds.
    max_len: usize,
    /// Output slots (0: single-output programs).
    n_outputs: usize,
    trees: Option<Vec<Population>>,
    genomes: Option<Vec<Genomes>>,
    archive: Option<Vec<Archive>>,
}

impl Start {
    /// The start of a run of `rep` with `cfg` on `islands`, from `resume` when given (checked
    /// against the settings).
    pub(super) fn new(cfg: &EngineConfig, islands: &IslandConfig, rep: Representation<'_, '_>, resume: Option<Resume>) -> Result<Start> {
        let (n, p) = (islands.count, cfg.pop_size);
        let fresh = || Best { fitness: f64::INFINITY, nodes: Vec::new(), generation: 0, genome: None };
        let (gen, best, history, island_history) = match &resume {
            None => (0, fresh(), Vec::with_capacity(cfg.generations + 1), Vec::new()),
            Some(r) => {
                crate::evolve::check_resume(cfg, r)?;
                islands::check_resume(islands, r.islands)?;
                (r.generation, r.best.clone(), r.history.clone(), r.island_history.clone())
            }
        };
        let (max_len, n_outputs) = match rep {
            Representation::Trees(rep) => {
                rep.vary.check().map_err(|e| anyhow!("tree settings: {e}"))?;
                rep.breed.check().map_err(|e| anyhow!("breeding settings: {e}"))?;
                (rep.vary.spec.max_len, rep.vary.spec.n_outputs)
            }
            Representation::Grammar(rep) => {
                anyhow::ensure!(super::supports_grammar(cfg, rep), "the device loop does not support rows of {} nodes for GE", cfg.max_len);
                (cfg.max_len, rep.templates.n_outputs)
            }
        };
        // NSGA-II's survivors from a checkpoint, split into the islands.
        let archive = resume.as_ref().and_then(|r| r.archive.as_ref()).map(|a| split_archive(a, n, p)).transpose()?;
        let (mut trees, mut genomes) = (None, None);
        if let Some(r) = resume {
            match rep {
                Representation::Trees(_) => {
                    let host = r.population.ok_or_else(|| anyhow!("the checkpoint holds genomes, not the trees tree GP needs"))?;
                    anyhow::ensure!(
                        host.size() == n * p && host.max_len == max_len && host.n_outputs == n_outputs,
                        "the checkpoint's trees do not fit these settings"
                    );
                    trees = Some(islands::split_trees(&host, n, p)?);
                }
                Representation::Grammar(rep) => {
                    let g = r.genomes.ok_or_else(|| anyhow!("the checkpoint holds trees, not the genomes grammatical evolution needs"))?;
                    anyhow::ensure!(g.size() == n * p && g.capacity == rep.genome_capacity, "the checkpoint's genomes do not fit these settings");
                    genomes = Some(islands::split_genomes(&g, n, p)?);
                }
            }
        }
        Ok(Start { gen, best, history, island_history, max_len, n_outputs, trees, genomes, archive })
    }
}

/// A checkpoint's NSGA-II survivors `a` split into `n` islands of `p`.
fn split_archive(a: &Archive, n: usize, p: usize) -> Result<Vec<Archive>> {
    anyhow::ensure!(a.fitness.len() == n * p, "the checkpoint's survivors ({}) do not make {n} islands of {p}", a.fitness.len());
    let trees = islands::split_trees(&a.trees, n, p)?;
    let mut genomes = match &a.genomes {
        Some(g) => islands::split_genomes(g, n, p)?.into_iter().map(Some).collect(),
        None => vec![None; n],
    };
    Ok(trees
        .into_iter()
        .enumerate()
        .map(|(k, trees)| Archive { trees, genomes: genomes[k].take(), fitness: a.fitness[k * p..(k + 1) * p].to_vec() })
        .collect())
}

/// Connects the run's GPUs (the islands', and those holding row shards), which exchange
/// migrants and shards' data: with peer copies, lets each GPU reach the others directly where
/// the hardware allows (else the driver stages the copies; no communicator, `None`); with
/// NCCL, a communicator rank per GPU.
pub(super) fn connect(tasks: &[DeviceTask<'_>], link: GpuLink) -> Result<Option<Comms>> {
    let mut gpus: Vec<&CudaEngine> = Vec::new();
    for t in tasks {
        gpus.push(t.engine());
        if let DeviceTask::Regression(r) = t {
            gpus.extend(r.shards.iter().map(|s| s.engine));
        }
    }
    match link {
        GpuLink::Peer => {
            for (a, x) in gpus.iter().enumerate() {
                for y in &gpus[a + 1..] {
                    if x.ordinal() != y.ordinal() {
                        x.enable_peer_access(y)?;
                        y.enable_peer_access(x)?;
                    }
                }
            }
            Ok(None)
        }
        GpuLink::Nccl => Ok(Some(Comms::new(&gpus)?)),
    }
}

impl<'a, 't, 'r, 'g> DeviceLoop<'a, 't, 'r, 'g> {
    /// The loop at `start`: every island's buffers and first population on its GPU (island
    /// after island), ordered for the first evaluation, and the first mailbox reads. `prof`
    /// marks the setup.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        cfg: &'a EngineConfig,
        islands: &'a IslandConfig,
        rep: Representation<'r, 'g>,
        tasks: &'a [DeviceTask<'t>],
        start: Start,
        link: Link<'a>,
        mut prof: StageTimes,
    ) -> Result<Self> {
        let (n, p) = (islands.count, cfg.pop_size);
        // NSGA-II's survival keeps the best already: no elite rows (as the host loop).
        let n_elite = if cfg.bloat == crate::select::Bloat::Nsga2 { 0 } else { cfg.elite.min(p) };
        let mut isl: Vec<Island> = Vec::with_capacity(n);
        for i in 0..n {
            isl.push(new_island(cfg, rep, tasks[islands::device_of(i, n, tasks.len())], i, &start)?);
        }
        let mut books = Books { best: start.best, size_best: vec![f64::INFINITY; start.max_len + 1], tr: Transfers::default() };
        for i in isl.iter_mut() {
            i.prepare(false)?;
        }
        for i in isl.iter_mut() {
            let r = i.engine().read_mailbox(&i.mail)?;
            books.tr.mailbox_reads += 1;
            books.tr.mailbox_bytes += bytes::MAILBOX;
            i.take_counts(&r, p)?;
        }
        for i in &isl {
            prof.mark(i.engine(), "islands set up")?;
        }
        Ok(DeviceLoop {
            cfg,
            islands,
            rep,
            tasks,
            link,
            isl,
            n_elite,
            books,
            history: start.history,
            island_history: start.island_history,
            gen: start.gen,
            prof,
        })
    }
}

/// The most device memory (bytes) an evaluation spends keeping every tree's value at every
/// row, for lexicase's cases (no second evaluation) and for the joint fit with linear terms
/// (which sums them per tree): 4 GiB, which is 10⁶ trees at 1000 rows.
pub(super) const KEPT_VALUES: usize = 4 << 30;

/// Island `i` of the run on `task`'s GPU: its first population (random, made on the device, or
/// the checkpoint's), and the buffers of every step.
fn new_island<'t, 'r, 'g>(cfg: &EngineConfig, rep: Representation<'r, 'g>, task: DeviceTask<'t>, i: usize, start: &Start) -> Result<Island<'t, 'r, 'g>> {
    let (p, max_len, n_outputs) = (cfg.pop_size, start.max_len, start.n_outputs);
    let e = task.engine();
    let seed = islands::island_seed(cfg.seed, i);
    let (pop, ge) = first_population(cfg, rep, e, i, seed, start)?;
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
        DeviceTask::Regression(r) => {
            let mut s = e.alloc_fitness_scratch(p, n_outputs, r.data)?;
            // Lexicase reads its cases' values from the evaluation where every tree's value at
            // every row fits in KEPT_VALUES; else it predicts the case rows on their own.
            if cfg.selection.is_lexicase() && n_outputs == 0 {
                e.keep_values(&mut s, KEPT_VALUES)?;
            }
            // A joint fit scores each tree from its values (`supports_tasks` checked they fit).
            if let Some(j) = r.joint {
                anyhow::ensure!(e.keep_joint(&mut s, j, r.data, KEPT_VALUES)?, "the joint fit's values of {p} trees at {} rows do not fit the device loop", r.data.n_rows());
            }
            FitnessStep::Regression(s)
        }
        DeviceTask::Classification(c) => {
            let kind = match c.fitness {
                ClassFitness::Accuracy => 0,
                ClassFitness::BalancedAccuracy => 1,
                ClassFitness::CrossEntropy => 2,
                ClassFitness::WeightedF1 => 3,
                ClassFitness::BalancedCe => 4,
            };
            FitnessStep::Classification(e.alloc_class_fitness_scratch(p, n_outputs, c.data, c.counts, kind, c.parsimony)?)
        }
        DeviceTask::Control(c) => FitnessStep::Control(e.alloc_control_scratch(p, c.run.episodes, c.learnt.map(|_| c.model.obs_size))?),
    };
    let nsga2 = cfg.bloat == crate::select::Bloat::Nsga2;
    Ok(Island {
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
        survival: if nsga2 { Some(nsga2::Survival::new(e, p, max_len, n_outputs, rep, start.archive.as_ref().map(|a| &a[i]))?) } else { None },
    })
}

/// Island `i`'s first population on `e`: tree GP's trees, random (`init_trees`, from `seed`) or
/// the checkpoint's; GE's genomes, random (made on the device: `init_genomes`' twin) or the
/// checkpoint's, mapped into trees.
fn first_population<'r, 'g>(
    cfg: &EngineConfig,
    rep: Representation<'r, 'g>,
    e: &CudaEngine,
    i: usize,
    seed: u64,
    start: &Start,
) -> Result<(DevicePopulation, Option<Genetic<'r, 'g>>)> {
    let p = cfg.pop_size;
    Ok(match rep {
        Representation::Trees(rep) => {
            let pop = match &start.trees {
                None => e.random_trees(&rep.vary.spec, p, seed)?,
                Some(all) => e.upload_population(&all[i])?,
            };
            (pop, None)
        }
        Representation::Grammar(rep) => {
            let genomes = match &start.genomes {
                None => e.random_genomes(&rep.grammar(), &rep.init, p, rep.genome_capacity, seed)?,
                Some(all) => e.upload_genomes(&all[i])?,
            };
            let next = e.alloc_genomes(p, rep.genome_capacity)?;
            let mut ge = Genetic { rep, genomes, next, mapping: e.mapping(&rep.grammar(), p)? };
            let mut pop = e.alloc_population(p, cfg.max_len, start.n_outputs)?;
            ge.map_into(e, &mut pop)?;
            (pop, Some(ge))
        }
    })
}
