//! One island's steps of a generation in the device loop, each queued on the island's GPU:
//! ordering its trees for the evaluation, evaluating them (row shards on other GPUs added in
//! order), fitting constants, choosing its elite and statistics, and breeding the next
//! population (tree GP, or GE's genomes mapped to trees).

use anyhow::Result;

use super::profile::StageTimes;
use super::{DeviceTask, FitnessStep, Island, Transfers, bytes, nsga2};
use crate::backend::breed::Breeder;
use crate::backend::cuda::{CudaEngine, Link};
use crate::evolve::{EngineConfig, Representation};

impl<'t> Island<'t, '_, '_> {
    /// The GPU the island lives on.
    pub(super) fn engine(&self) -> &'t CudaEngine {
        self.task.engine()
    }

    /// Orders (or, for control, classes) the trees of `next` (or `pop`) for the next evaluation,
    /// writing counts into the mailbox.
    pub(super) fn prepare(&mut self, of_next: bool) -> Result<()> {
        let e = self.task.engine();
        let pop = if of_next { &self.next } else { &self.pop };
        match (&self.task, &mut self.fs) {
            (DeviceTask::Control(c), FitnessStep::Control(s)) => e.control_classify(pop, c.model, s, &mut self.mail)?,
            _ => e.order_trees(pop, &mut self.order, &mut self.mail)?,
        }
        Ok(())
    }

    /// Takes the next population's counts from a mailbox read.
    pub(super) fn take_counts(&mut self, r: &crate::backend::cuda::MailboxRead, p: usize) -> Result<()> {
        if !matches!(self.task, DeviceTask::Control(_)) {
            self.order.set_counts(r, p)?;
        }
        self.n_deep = r.control_deep;
        Ok(())
    }
}


/// The device loop's constant fitting of one island after its evaluation (regression and
/// classification; control fits none), as the host loop's: the fitness read back, the rows
/// [`crate::evolve::ConstantFitting::rows`] chooses fitted in place (`kernels/fit.cu`), and the
/// population evaluated again.
pub(super) fn fit_constants(cfg: &EngineConfig, i: &mut Island<'_, '_, '_>, tr: &mut Transfers) -> Result<()> {
    if matches!(i.task, DeviceTask::Control(_)) {
        return Ok(());
    }
    let e = i.task.engine();
    let fit = e.download_fitness(&i.fit)?;
    let rows: Vec<u32> = cfg.constants.rows(&fit).into_iter().map(|r| r as u32).collect();
    tr.constant_fits += 1;
    tr.constant_fit_bytes += bytes::fitness(fit.len()) + bytes::of::<u32>(rows.len());
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
    tr.constant_fit_bytes += bytes::of::<crate::backend::cpu::fit::FitResult>(res.len());
    match (&i.task, &mut i.fs) {
        (DeviceTask::Regression(r), FitnessStep::Regression(s)) => e.regression_fitness(&i.pop, &i.order, r.data, &r.config, s, &mut i.fit)?,
        (DeviceTask::Classification(c), FitnessStep::Classification(s)) => e.classification_fitness(&i.pop, &i.order, c.data, s, &mut i.fit)?,
        _ => unreachable!("the fitness step was made for this task"),
    }
    Ok(())
}

/// Queues island `i`'s evaluation: its fitness into `i.fit` (control: the deep trees' steps
/// played on the CPU into `i.host_steps`).
pub(super) fn evaluate(i: &mut Island<'_, '_, '_>, gen: usize, link: Link<'_>) -> Result<()> {
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
/// with NSGA-II, its survivors and their statistics (the evaluated children stay for the host's
/// reads of the best and the hall of fame).
pub(super) fn elite_and_sizes(i: &mut Island<'_, '_, '_>, n_elite: usize) -> Result<()> {
    let e = i.task.engine();
    i.elite = Some(e.elite_and_stats(&i.fit, &i.pop, n_elite, &mut i.es, &mut i.mail)?);
    e.size_summary(&i.fit, &i.pop, &mut i.sizes)?;
    if let Some(s) = i.survival.as_mut() {
        s.survive(e, &i.pop, &i.fit, i.ge.as_ref().map(|g| (&g.genomes, g.mapping.scratch.used())))?;
        s.post_stats(e, &mut i.es, &mut i.mail)?;
    }
    Ok(())
}

/// Queues island `i`'s next population: selection, variation (GE: of the genomes, mapped),
/// elitism, and the next evaluation's order.
#[allow(clippy::too_many_arguments)]
pub(super) fn breed_island(
    i: &mut Island<'_, '_, '_>,
    rep: Representation<'_, '_>,
    p: usize,
    n_elite: usize,
    cfg: &EngineConfig,
    next_gen: u32,
    prof: &mut StageTimes,
) -> Result<()> {
    let e = i.task.engine();
    let parents = &cfg.parent_tournament();
    let elite = i.elite.take().expect("chosen above");
    // NSGA-II's parents: crowded-comparison tournaments among the survivors.
    let survivors = |s: &nsga2::Survival, slots: usize| -> Result<crate::backend::cuda::DeviceIndices> {
        let ranking = e.pareto_ranking(&s.surv.fit, &s.surv.trees)?;
        Ok(e.select_pareto(&s.surv.fit, &ranking, slots, parents.size, i.seed, next_gen)?)
    };
    let ev = Evaluated { task: &i.task, fs: &i.fs, pop: &i.pop, order: &i.order, fit: &i.fit, seed: i.seed };
    match (rep, i.ge.as_mut()) {
        (Representation::Trees(rep), _) => {
            let (from, pairs) = match &i.survival {
                Some(s) => (&s.surv.trees, survivors(s, 2 * p)?),
                None => (&i.pop, select_parents(ev, cfg, parents, 2 * p, next_gen)?),
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
                    e.ge_crossover_by_op(&grammar, &g.mapping.tables, genomes, used, &pairs, &mut g.next, n_elite, &rep.vary, i.seed, next_gen)?;
                }
                None => {
                    let pairs = select_parents(ev, cfg, parents, slots, next_gen)?;
                    prof.mark(e, "select")?;
                    e.crossover(&grammar, &g.genomes, &g.mapping, &pairs, &mut g.next, n_elite, &rep.vary, i.seed, next_gen)?;
                }
            }
            e.map(&grammar, &mut g.mapping, &g.next, None)?;
            e.mutate(&grammar, &mut g.next, &g.mapping, n_elite, &rep.vary, i.seed, next_gen)?;
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


/// What selection reads of an island: its task and fitness step, the evaluated population, its
/// order and fitness, and the seed.
#[derive(Clone, Copy)]
struct Evaluated<'a, 't> {
    task: &'a DeviceTask<'t>,
    fs: &'a FitnessStep,
    pop: &'a crate::backend::cuda::DevicePopulation,
    order: &'a crate::backend::cuda::TreeOrder,
    fit: &'a crate::backend::cuda::DeviceFitness,
    seed: u64,
}

/// `n_slots` parents of an island for generation `next_gen`: tournaments, or lexicase on the
/// evaluated generation's cases ([`lexicase_parents`]).
fn select_parents(i: Evaluated<'_, '_>, cfg: &EngineConfig, parents: &crate::select::Tournament, n_slots: usize, next_gen: u32) -> Result<crate::backend::cuda::DeviceIndices> {
    if cfg.selection.is_lexicase() {
        return lexicase_parents(i, cfg, n_slots, next_gen);
    }
    Ok(i.task.engine().select_parents(i.fit, i.pop, n_slots, parents, i.seed, next_gen)?)
}

/// Lexicase parents on the device, as the host loop's `lexicase_parents` chooses them: the
/// cases of the evaluated generation `next_gen − 1` ([`crate::select::generation_cases`]), each
/// tree's error at them under its scaling (from the sums its fitness left), the epsilons and
/// the selections (`kernels/select.cu`). Regression only, one island ([`super::supports_tasks`]).
fn lexicase_parents(i: Evaluated<'_, '_>, cfg: &EngineConfig, n_slots: usize, next_gen: u32) -> Result<crate::backend::cuda::DeviceIndices> {
    let (DeviceTask::Regression(r), FitnessStep::Regression(s)) = (i.task, i.fs) else {
        anyhow::bail!("the device loop selects by lexicase for regression only");
    };
    let e = i.task.engine();
    let n_cases = r.data.n_rows();
    let k = crate::select::cases_per_generation(cfg.selection, cfg.down_sample, n_cases).map_err(|m| anyhow::anyhow!(m))?;
    let cases = crate::select::generation_cases(n_cases, k, i.seed, next_gen - 1);
    Ok(e.regression_lexicase(i.pop, i.order, r.data, &r.config, s, &cases, i.fit, cfg.unique_parents(), cfg.lexicase_pool, n_slots, i.seed, next_gen)?)
}
