//! The host generation loop: every island's population, fitness and genomes in host memory.
//! Per generation it maps (GE), evaluates through the task ([`Fitness`], on whatever backend
//! the task holds), fits constants, keeps the best program, migrates, and breeds on the CPU
//! through the breeding contract ([`CpuBreeder`], the steps the device loop runs on a GPU).
//! [`super::device`] is its twin with the population on a GPU; `GROVE_DEVICE_LOOP=0` runs this
//! loop instead, with the same results.

use std::time::Instant;

use anyhow::anyhow;

use super::islands::{self, HostIsland, HostIslands, IslandConfig, island_seed};
use super::{Archive, ArchiveRef, Best, EngineConfig, Fitness, GenerationStats, Observer, Outcome, Representation, Resume, Snapshot};
use crate::backend::breed::Breeder;
use crate::backend::cpu::breed::CpuBreeder;
use crate::genome::init::Genomes;
use crate::program::tree::Population;
use crate::select;

/// The host loop of either representation on `islands.count` islands (one: the plain run).
///
/// Per generation ([`HostLoop::generation`]), every island in turn: (GE: map its genomes,)
/// evaluate; then the best so far (the first island's among equals), [`Observer::evaluated`]
/// with the islands end to end, each island's statistics; then, at a migration generation,
/// [`islands::migrate`]; then each island breeds with its own seed ([`islands::island_seed`]).
/// Snapshots hold every island, end to end.
pub fn run(
    cfg: &EngineConfig,
    islands: &IslandConfig,
    rep: Representation<'_, '_>,
    task: &dyn Fitness,
    resume: Option<Resume>,
    observer: &mut dyn Observer,
) -> anyhow::Result<Outcome> {
    let cfg = &cfg.resolved(rep);
    if let Representation::Trees(rep) = rep {
        rep.vary.check().map_err(|e| anyhow!("tree settings: {e}"))?;
        rep.breed.check().map_err(|e| anyhow!("breeding settings: {e}"))?;
    }
    islands.check(cfg.pop_size)?;
    if cfg.selection.is_lexicase() {
        // Before the first generation: the task's cases and the down-sample agree.
        select::cases_per_generation(cfg.selection, cfg.down_sample, task.n_cases()).map_err(|e| anyhow!(e))?;
    }
    let mut run = HostLoop::new(cfg, islands, rep, task, resume)?;
    loop {
        if let Some((population, fitness)) = run.generation(observer)? {
            let HostLoop { best, history, island_history, cache, .. } = run;
            let fitness_cache = cache.map(|c| c.stats());
            return Ok(Outcome { best, history, island_history, population, fitness, transfers: None, fitness_cache });
        }
    }
}

/// The host loop between two generations: its settings, islands and books.
struct HostLoop<'a, 'r, 'g> {
    cfg: &'a EngineConfig,
    islands: &'a IslandConfig,
    rep: Representation<'r, 'g>,
    task: &'a dyn Fitness,
    isl: Vec<HostIsland>,
    best: Best,
    history: Vec<GenerationStats>,
    island_history: Vec<Vec<GenerationStats>>,
    /// The generation evaluated next.
    gen: usize,
    /// NSGA-II: each island's survivors of the last generation (none before the first).
    kept: Vec<Option<Kept>>,
    /// The fitness cache, where the settings ask for one and the task's fitness allows it.
    cache: Option<super::cache::FitnessCache>,
}

impl<'a, 'r, 'g> HostLoop<'a, 'r, 'g> {
    /// The loop's start: every island's first population (random trees, or GE's random
    /// genomes, from the island's seed), or on resume the checkpoint's rows, books and
    /// survivors split into the islands.
    fn new(cfg: &'a EngineConfig, islands: &'a IslandConfig, rep: Representation<'r, 'g>, task: &'a dyn Fitness, resume: Option<Resume>) -> anyhow::Result<Self> {
        let (n, p) = (islands.count, cfg.pop_size);
        let (max_len, n_outputs) = match rep {
            Representation::Trees(r) => (r.vary.spec.max_len, r.vary.spec.n_outputs),
            Representation::Grammar(r) => (cfg.max_len, r.templates.n_outputs),
        };
        let island = |i: usize, pop: Population, genomes: Option<Genomes>| HostIsland {
            seed: island_seed(cfg.seed, i),
            pop,
            fit: Vec::new(),
            genomes,
            used: Vec::new(),
        };
        let Some(r) = resume else {
            let isl = (0..n)
                .map(|i| {
                    let seed = island_seed(cfg.seed, i);
                    Ok(match rep {
                        Representation::Trees(r) => island(i, CpuBreeder.random_trees(&r.vary.spec, p, seed)?, None),
                        Representation::Grammar(r) => {
                            let g = CpuBreeder.random_genomes(&r.grammar(), &r.init, p, r.genome_capacity, seed)?;
                            island(i, Population::new(p, max_len, n_outputs), Some(g))
                        }
                    })
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            let best = Best { fitness: f64::INFINITY, nodes: Vec::new(), generation: 0, genome: None };
            let (history, island_history) = (Vec::with_capacity(cfg.generations + 1), Vec::new());
            let cache = (cfg.fitness_cache && task.cacheable()).then(super::cache::FitnessCache::new);
            return Ok(HostLoop { cfg, islands, rep, task, isl, best, history, island_history, gen: 0, kept: vec![None; n], cache });
        };
        super::check_resume(cfg, &r)?;
        islands::check_resume(islands, r.islands)?;
        let isl: Vec<HostIsland> = match rep {
            Representation::Trees(_) => {
                let all = r.population.ok_or_else(|| anyhow!("the checkpoint holds genomes, not the trees tree GP needs"))?;
                anyhow::ensure!(
                    all.size() == n * p && all.max_len == max_len && all.n_outputs == n_outputs,
                    "the checkpoint's trees do not fit these settings"
                );
                islands::split_trees(&all, n, p)?.into_iter().enumerate().map(|(i, pop)| island(i, pop, None)).collect()
            }
            Representation::Grammar(rep) => {
                let g = r.genomes.ok_or_else(|| anyhow!("the checkpoint holds trees, not the genomes grammatical evolution needs"))?;
                anyhow::ensure!(g.size() == n * p && g.capacity == rep.genome_capacity, "the checkpoint's genomes do not fit these settings");
                islands::split_genomes(&g, n, p)?
                    .into_iter()
                    .enumerate()
                    .map(|(i, g)| island(i, Population::new(p, max_len, n_outputs), Some(g)))
                    .collect()
            }
        };
        let kept = match r.archive {
            None => vec![None; n],
            Some(a) => split_archive(a, rep, n, p)?.into_iter().map(Some).collect(),
        };
        let cache = (cfg.fitness_cache && task.cacheable()).then(super::cache::FitnessCache::new);
        Ok(HostLoop { cfg, islands, rep, task, isl, best: r.best, history: r.history, island_history: r.island_history, gen: r.generation, kept, cache })
    }

    /// Runs generation `self.gen`: evaluation, the best so far, the observer's view, NSGA-II's
    /// survival, migration and breeding (but after the last), the statistics, then a snapshot
    /// when asked. Returns the outcome's rows (every island's evaluated population and fitness)
    /// when the run ends with it: at the last generation, or when the observer finishes it; an
    /// [`Interrupted`](super::Interrupted) error when it asks to stop.
    fn generation(&mut self, observer: &mut dyn Observer) -> anyhow::Result<Option<(Population, Vec<f64>)>> {
        let t0 = Instant::now();
        let (gen, p) = (self.gen, self.cfg.pop_size);
        self.evaluate()?;
        self.keep_best();
        match self.isl.as_slice() {
            [one] => observer.evaluated(gen, &one.pop, &one.fit),
            all => {
                let pop = islands::concat_trees(all.iter().map(|i| &i.pop));
                let fit: Vec<f64> = all.iter().flat_map(|i| i.fit.iter().copied()).collect();
                observer.evaluated(gen, &pop, &fit);
            }
        }
        if self.nsga2() {
            for (i, k) in self.isl.iter_mut().zip(self.kept.iter_mut()) {
                survive(i, k.take(), p);
            }
        }
        // The generation's statistics are its population's: with NSGA-II its survivors (the
        // children with the last survivors, the best of both kept), so that the best never
        // worsens; the device loop reads the same.
        let mut each: Vec<GenerationStats> = self.isl.iter().map(|i| stats(gen, &i.pop, &i.fit, 0.0)).collect();
        let last = gen == self.cfg.generations;
        // A generation that ends the run early keeps its evaluated population for the outcome
        // and breeds the next one for the snapshot (a checkpoint then continues the run).
        let ended = (!last && observer.finish(gen, &self.best)).then(|| outcome_rows(&self.isl));
        if !last {
            self.migrate_and_breed()?;
        }
        let seconds = t0.elapsed().as_secs_f64();
        each.iter_mut().for_each(|s| s.seconds = seconds);
        let s = islands::combine(gen, &each, p, seconds);
        if self.isl.len() > 1 {
            observer.islands(&each);
            self.island_history.push(each);
        }
        observer.generation(&s, &self.best);
        self.history.push(s);
        if last {
            return Ok(Some(outcome_rows(&self.isl)));
        }
        self.gen += 1;
        // Between generations: the islands end to end in a snapshot.
        super::snapshot_between_generations(observer, self.gen, ended.is_some(), |o| self.snapshot(o))?;
        Ok(ended)
    }

    /// Whether NSGA-II chooses the survivors.
    fn nsga2(&self) -> bool {
        self.cfg.bloat == select::Bloat::Nsga2
    }

    /// Every island in turn: (GE: its genomes mapped into its trees,) its trees evaluated and,
    /// at a fitting generation, its constants fitted.
    fn evaluate(&mut self) -> anyhow::Result<()> {
        let (cfg, gen) = (self.cfg, self.gen);
        for i in self.isl.iter_mut() {
            if let (Representation::Grammar(r), Some(g)) = (self.rep, &i.genomes) {
                CpuBreeder.map(&r.grammar(), &mut i.used, g, Some(&mut i.pop))?;
            }
            i.fit = match &self.cache {
                Some(c) => mark_empty(c.evaluate(self.task, &i.pop, gen)?, &i.pop)?,
                None => evaluate(self.task, &i.pop, gen)?,
            };
            if cfg.constants.at(gen) {
                fit_constants(self.task, cfg, i)?;
            }
        }
        Ok(())
    }

    /// The best so far: each island's best in turn replaces it when strictly better (so the
    /// first island's among equals), with its genome and phenotype for GE.
    fn keep_best(&mut self) {
        for i in &self.isl {
            if let Some(b) = best_of(&i.fit) {
                if i.fit[b] < self.best.fitness {
                    let genome = match (self.rep, &i.genomes) {
                        (Representation::Grammar(r), Some(g)) => {
                            let g = g.get(b).to_vec();
                            let text = super::phenotype(r, &g);
                            Some((g, text))
                        }
                        _ => None,
                    };
                    self.best = Best { fitness: i.fit[b], nodes: i.pop.tree(b).nodes(), generation: self.gen, genome };
                }
            }
        }
    }

    /// At a migration generation the islands migrate; then each island (NSGA-II: its survivors
    /// kept for the next survival) breeds generation `self.gen + 1`.
    fn migrate_and_breed(&mut self) -> anyhow::Result<()> {
        if self.islands.migrates_after(self.gen, self.cfg.generations) {
            islands::migrate(&mut HostIslands(&mut self.isl), self.islands.migrants)?;
        }
        let nsga2 = self.nsga2();
        for (i, k) in self.isl.iter_mut().zip(self.kept.iter_mut()) {
            if nsga2 {
                *k = Some(Kept { pop: i.pop.clone(), fit: i.fit.clone(), genomes: i.genomes.clone(), used: i.used.clone() });
            }
            breed_on_host(self.cfg, self.rep, self.task, i, self.gen, self.gen as u32 + 1)?;
        }
        Ok(())
    }

    /// Hands `observer` a snapshot of generation `self.gen` (bred, not yet evaluated): every
    /// island's trees or genomes end to end, and NSGA-II's survivors.
    fn snapshot(&self, observer: &mut dyn Observer) -> anyhow::Result<()> {
        let (trees, genomes) = match (self.rep, self.isl.as_slice()) {
            (Representation::Trees(_), [one]) => (Some(std::borrow::Cow::Borrowed(&one.pop)), None),
            (Representation::Trees(_), all) => (Some(std::borrow::Cow::Owned(islands::concat_trees(all.iter().map(|i| &i.pop)))), None),
            (Representation::Grammar(_), [one]) => (None, one.genomes.as_ref().map(std::borrow::Cow::Borrowed)),
            (Representation::Grammar(_), all) => {
                (None, Some(std::borrow::Cow::Owned(islands::concat_genomes(all.iter().filter_map(|i| i.genomes.as_ref())))))
            }
        };
        let archive = self.nsga2().then(|| join_archive(&self.kept)).flatten();
        observer.snapshot(&Snapshot {
            generation: self.gen,
            genomes: genomes.as_deref(),
            population: trees.as_deref(),
            best: &self.best,
            history: &self.history,
            islands: self.islands.count,
            island_history: &self.island_history,
            archive: archive.as_ref().map(|a| ArchiveRef { trees: &a.trees, genomes: a.genomes.as_ref(), fitness: &a.fitness }),
        })
    }
}

/// The outcome's population and fitness: every island's evaluated rows, end to end.
fn outcome_rows(isl: &[HostIsland]) -> (Population, Vec<f64>) {
    match isl {
        [one] => (one.pop.clone(), one.fit.clone()),
        all => (islands::concat_trees(all.iter().map(|i| &i.pop)), all.iter().flat_map(|i| i.fit.iter().copied()).collect()),
    }
}

/// Breeds island `i`'s next generation `next_gen` on the host from its evaluated population,
/// through the breeding contract's CPU side ([`CpuBreeder`]) in the device loop's order: tree
/// GP replaces its trees, GE its genomes (mapped at the next evaluation).
#[allow(clippy::too_many_arguments)]
fn breed_on_host(
    cfg: &EngineConfig,
    rep: Representation<'_, '_>,
    task: &dyn Fitness,
    i: &mut HostIsland,
    gen: usize,
    next_gen: u32,
) -> anyhow::Result<()> {
    let p = cfg.pop_size;
    let seed = i.seed;
    // NSGA-II's survival keeps the best already: no elite rows.
    let n_keep = if cfg.bloat == select::Bloat::Nsga2 { 0 } else { cfg.elite.min(p) };
    let elite: Vec<u32> = select::elite(&i.fit, n_keep).into_iter().map(|r| r as u32).collect();
    let n_elite = elite.len();
    let parents = cfg.parent_tournament();
    let select = |n_slots: usize| -> anyhow::Result<Vec<u32>> {
        if cfg.selection.is_lexicase() {
            lexicase_parents(cfg, task, i, gen, n_slots, next_gen)
        } else {
            CpuBreeder.select_parents(&i.fit, &i.pop, n_slots, &parents, seed, next_gen)
        }
    };
    match rep {
        Representation::Trees(rep) => {
            // Child k from the parents of slots 2k and 2k + 1; the elite over the first rows.
            let pairs = select(2 * p)?;
            let mut next = Population::new(p, i.pop.max_len, i.pop.n_outputs);
            CpuBreeder.breed(&i.pop, &pairs, &mut next, seed, next_gen, &rep.vary, &rep.breed)?;
            CpuBreeder.copy_trees(&i.pop, &elite, n_elite, &mut next)?;
            i.pop = next;
        }
        Representation::Grammar(rep) => {
            // Pair j from slots 2j and 2j + 1, its children at rows n_elite + 2j (+ 1); each
            // child mutated within its own used codons (mapped first); the elite copied to the
            // first rows.
            let genomes = i.genomes.as_ref().ok_or_else(|| anyhow!("a GE island without genomes"))?;
            let grammar = rep.grammar();
            let pairs = select(2 * (p - n_elite).div_ceil(2))?;
            let mut next = Genomes::new(p, rep.genome_capacity);
            CpuBreeder.crossover(&grammar, genomes, &i.used, &pairs, &mut next, n_elite, &rep.vary, seed, next_gen)?;
            let mut used = CpuBreeder.mapping(&grammar, p)?;
            CpuBreeder.map(&grammar, &mut used, &next, None)?;
            CpuBreeder.mutate(&grammar, &mut next, &used, n_elite, &rep.vary, seed, next_gen)?;
            CpuBreeder.copy_genomes(genomes, &elite, n_elite, &mut next)?;
            i.genomes = Some(next);
        }
    }
    Ok(())
}

/// `n_slots` parents of island `i` by epsilon-lexicase ([`select::epsilon_lexicase_slots`],
/// slot `s` from the stream `(seed, next_gen, s, Select)`) on the task's errors on generation
/// `gen`'s cases ([`select::generation_cases`]: every case, or a fresh down-sample drawn with
/// the island's seed), among the valid individuals, with each case's epsilon the median
/// absolute deviation of their errors on it ([`select::lexicase_epsilons`]).
fn lexicase_parents(cfg: &EngineConfig, task: &dyn Fitness, i: &HostIsland, gen: usize, n_slots: usize, next_gen: u32) -> anyhow::Result<Vec<u32>> {
    let n_cases = task.n_cases();
    let k = select::cases_per_generation(cfg.selection, cfg.down_sample, n_cases).map_err(|e| anyhow!(e))?;
    let cases = select::generation_cases(n_cases, k, i.seed, gen as u32);
    let errors = task.case_errors(&i.pop, gen, &cases)?;
    anyhow::ensure!(
        errors.len() == i.pop.size() * cases.len(),
        "the task gave {} case errors for {} individuals on {} cases",
        errors.len(),
        i.pop.size(),
        cases.len()
    );
    let pool = select::parent_pool(&i.fit, &i.pop.len, cfg.unique_parents());
    let eps = select::lexicase_epsilons(&errors, cases.len(), &pool, i.seed, next_gen);
    Ok(select::epsilon_lexicase_slots(&errors, cases.len(), &eps, &pool, cfg.lexicase_pool, n_slots, i.seed, next_gen))
}

/// NSGA-II's survivors of one island between two generations: the evaluated population, its
/// fitness and (GE) its genomes and their used codons.
#[derive(Clone, Debug)]
struct Kept {
    pop: Population,
    fit: Vec<f64>,
    genomes: Option<Genomes>,
    used: Vec<u32>,
}

/// NSGA-II's survival: island `i`'s evaluated children compete with `kept`, the survivors of
/// the generation before (none at generation 0: the first population survives whole), for the
/// `p` rows of the population, by front and crowding distance ([`select::pareto::survivors`];
/// merged rows: the survivors first, then the children). The island's rows become the
/// survivors, best first.
fn survive(i: &mut HostIsland, kept: Option<Kept>, p: usize) {
    let Some(k) = kept else { return };
    let fit: Vec<f64> = k.fit.iter().chain(&i.fit).copied().collect();
    let sizes: Vec<u16> = k.pop.len.iter().chain(&i.pop.len).copied().collect();
    let rows = select::pareto::survivors(&select::pareto::points(&fit, &sizes), p);
    let n_kept = k.fit.len();
    let mut pop = Population::new(rows.len(), i.pop.max_len, i.pop.n_outputs);
    let mut genomes = i.genomes.as_ref().map(|g| Genomes::new(rows.len(), g.capacity));
    let mut used = Vec::with_capacity(if i.used.is_empty() { 0 } else { rows.len() });
    for (j, &r) in rows.iter().enumerate() {
        let (from_pop, from_genomes, from_used, row) =
            if r < n_kept { (&k.pop, k.genomes.as_ref(), &k.used, r) } else { (&i.pop, i.genomes.as_ref(), &i.used, r - n_kept) };
        pop.copy_row(j, from_pop, row);
        if let (Some(g), Some(from)) = (genomes.as_mut(), from_genomes) {
            g.set(j, from.get(row));
        }
        if !i.used.is_empty() {
            used.push(from_used.get(row).copied().unwrap_or(0));
        }
    }
    i.fit = rows.iter().map(|&r| fit[r]).collect();
    i.pop = pop;
    i.genomes = genomes;
    i.used = used;
}

/// Every island's survivors end to end, for a snapshot (`None` before any survival).
fn join_archive(kept: &[Option<Kept>]) -> Option<Archive> {
    let all: Vec<&Kept> = kept.iter().map(|k| k.as_ref()).collect::<Option<Vec<_>>>()?;
    let trees = islands::concat_trees(all.iter().map(|k| &k.pop));
    let genomes = all.iter().map(|k| k.genomes.as_ref()).collect::<Option<Vec<_>>>().map(islands::concat_genomes);
    let fitness = all.iter().flat_map(|k| k.fit.iter().copied()).collect();
    Some(Archive { trees, genomes, fitness })
}

/// A checkpoint's survivors split into `n` islands of `p` (GE: their used codons mapped again).
fn split_archive(a: Archive, rep: Representation<'_, '_>, n: usize, p: usize) -> anyhow::Result<Vec<Kept>> {
    anyhow::ensure!(a.fitness.len() == n * p, "the checkpoint's survivors ({}) do not make {n} islands of {p}", a.fitness.len());
    let trees = islands::split_trees(&a.trees, n, p)?;
    let genomes: Vec<Option<Genomes>> = match (&a.genomes, rep) {
        (Some(g), Representation::Grammar(_)) => islands::split_genomes(g, n, p)?.into_iter().map(Some).collect(),
        (None, Representation::Trees(_)) => vec![None; n],
        _ => anyhow::bail!("the checkpoint's survivors do not fit this representation"),
    };
    trees
        .into_iter()
        .zip(genomes)
        .enumerate()
        .map(|(k, (pop, genomes))| {
            let mut used = Vec::new();
            if let (Representation::Grammar(r), Some(g)) = (rep, &genomes) {
                CpuBreeder.map(&r.grammar(), &mut used, g, None)?;
            }
            Ok(Kept { pop, fit: a.fitness[k * p..(k + 1) * p].to_vec(), genomes, used })
        })
        .collect()
}

/// One island's statistics of generation `generation`: the best, mean fitness and mean size
/// of its valid rows (finite fitness, a program), and how many are invalid.
fn stats(generation: usize, pop: &Population, fit: &[f64], seconds: f64) -> GenerationStats {
    let mut best = f64::INFINITY;
    let (mut sum, mut size, mut n) = (0.0, 0.0, 0usize);
    for (i, &f) in fit.iter().enumerate() {
        let f = select::key(f);
        if f.is_finite() && pop.len[i] > 0 {
            best = best.min(f);
            sum += f;
            size += pop.len[i] as f64;
            n += 1;
        }
    }
    let mean = if n > 0 { sum / n as f64 } else { f64::NAN };
    let mean_size = if n > 0 { size / n as f64 } else { f64::NAN };
    GenerationStats { generation, best, mean, mean_size, invalid: fit.len() - n, seconds }
}

/// The task's fitness of `pop` at generation `generation`, with rows that hold no program
/// marked invalid.
fn evaluate(task: &dyn Fitness, pop: &Population, generation: usize) -> anyhow::Result<Vec<f64>> {
    mark_empty(task.evaluate_at(pop, generation)?, pop)
}

/// `fit` with rows that hold no program marked invalid.
fn mark_empty(mut fit: Vec<f64>, pop: &Population) -> anyhow::Result<Vec<f64>> {
    anyhow::ensure!(fit.len() == pop.size(), "the task scored {} of {} individuals", fit.len(), pop.size());
    for (f, &len) in fit.iter_mut().zip(&pop.len) {
        if len == 0 {
            *f = f64::INFINITY;
        }
    }
    Ok(fit)
}

/// The host loop's constant fitting of one island after its evaluation: the rows
/// [`ConstantFitting::rows`] chooses, fitted by the task, their fitness replaced.
fn fit_constants(task: &dyn Fitness, cfg: &EngineConfig, i: &mut HostIsland) -> anyhow::Result<()> {
    let rows = cfg.constants.rows(&i.fit);
    if let Some(fit) = task.fit_constants(&mut i.pop, &rows, cfg.constants.steps)? {
        anyhow::ensure!(fit.len() == rows.len(), "the task fitted {} of {} programs", fit.len(), rows.len());
        for (&r, f) in rows.iter().zip(fit) {
            i.fit[r] = f;
        }
    }
    Ok(())
}

/// The row of the lowest fitness (the first among equals), if it is valid.
fn best_of(fit: &[f64]) -> Option<usize> {
    select::elite(fit, 1).into_iter().next().filter(|&i| select::key(fit[i]).is_finite())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evolve::{GrammarRep, Interrupted, TreeRep, checkpoint};
    use crate::genome::MapConfig;
    use crate::genome::init::InitConfig;
    use crate::genome::vary::GeVaryConfig;
    use crate::grammar::template::{Vars, compile};
    use crate::grammar::{DatasetShape, load_parsed, parse_str};

    /// Fitness: distance of the tree's length from 7 (a task that needs no interpreter).
    fn length_task(pop: &Population) -> Vec<f64> {
        (0..pop.size()).map(|i| if pop.len[i] == 0 { f64::INFINITY } else { (pop.len[i] as f64 - 7.0).abs() }).collect()
    }

    #[test]
    fn grammar_run_improves_and_is_reproducible() {
        let g = parse_str("<e> ::= (<op> <e> <e>) | <v>\n<op> ::= + | - | *\n<v> ::= x0 | 1.0", "g", false).unwrap();
        let l = load_parsed(g, &DatasetShape::default()).unwrap();
        let tpl = compile(&l.grammar, &l.table, &Vars { names: vec!["x0".into()], n_outputs: 0 }).unwrap();
        let rep = GrammarRep {
            table: &l.table,
            templates: &tpl,
            map: MapConfig::default(),
            init: InitConfig::default(),
            vary: GeVaryConfig::default(),
            genome_capacity: 256,
        };
        let cfg = EngineConfig { pop_size: 60, generations: 10, seed: 4, ..EngineConfig::default() };
        let mut seen = Vec::new();
        let grammar = Representation::Grammar(&rep);
        let one = IslandConfig::single();
        let a = run(&cfg, &one, grammar, &length_task, None, &mut |s: &GenerationStats, _: &Best| seen.push(s.best)).unwrap();
        assert_eq!(a.history.len(), 11);
        assert_eq!(a.best.fitness, 0.0, "a tree of 7 nodes is easy to find");
        assert!(seen.windows(2).all(|w| w[1] <= w[0]), "elitism keeps the best: {seen:?}");
        let (genome, text) = a.best.genome.clone().unwrap();
        assert!(text.starts_with('('), "{text}");
        assert!(!genome.is_empty());
        let b = run(&cfg, &IslandConfig::single(), grammar, &length_task, None, &mut |_: &GenerationStats, _: &Best| {}).unwrap();
        assert_eq!(a.best, b.best);
        assert_eq!(a.fitness, b.fitness);
    }

    #[test]
    fn tree_run_improves_and_is_reproducible() {
        use crate::program::{BreedConfig, Crossover, Mutation, Op, TreeSpec, VaryConfig};
        let spec = TreeSpec::new(vec![Op::Add, Op::Mul, Op::Sin], 2, 64).with_depth(1, 3);
        let rep = TreeRep {
            vary: VaryConfig::new(spec),
            breed: BreedConfig {
                p_crossover: 0.9,
                crossovers: vec![(Crossover::OnePoint, 1.0)],
                p_mutation: 0.3,
                mutations: vec![(Mutation::Subtree, 1.0), (Mutation::Point, 1.0)],
            },
        };
        let cfg = EngineConfig { pop_size: 60, generations: 10, seed: 4, ..EngineConfig::default() };
        let mut seen = Vec::new();
        let trees = Representation::Trees(&rep);
        let one = IslandConfig::single();
        let a = run(&cfg, &one, trees, &length_task, None, &mut |s: &GenerationStats, _: &Best| seen.push(s.best)).unwrap();
        assert_eq!(a.best.fitness, 0.0);
        assert!(seen.windows(2).all(|w| w[1] <= w[0]), "{seen:?}");
        a.population.validate().unwrap();
        let b = run(&cfg, &IslandConfig::single(), trees, &length_task, None, &mut |_: &GenerationStats, _: &Best| {}).unwrap();
        assert_eq!(a.best, b.best);
    }

    /// Stops at `stop_at` after saving a checkpoint, as Ctrl-C does.
    struct StopAt {
        stop_at: usize,
        seen: usize,
        saved: Option<checkpoint::Saved>,
    }

    impl Observer for StopAt {
        fn generation(&mut self, s: &GenerationStats, _: &Best) {
            self.seen = s.generation + 1;
        }
        fn snapshot(&mut self, state: &Snapshot<'_>) -> anyhow::Result<()> {
            self.saved = Some(checkpoint::Saved::of(state));
            Ok(())
        }
        fn stop_requested(&self) -> bool {
            self.seen == self.stop_at
        }
    }

    /// A stopped run, saved through JSON and resumed, ends exactly as an uninterrupted one.
    type RunFrom<'a> = dyn Fn(Option<Resume>, &mut dyn Observer) -> anyhow::Result<Outcome> + 'a;

    fn stop_and_resume(run: &RunFrom<'_>) {
        let whole = run(None, &mut |_: &GenerationStats, _: &Best| {}).unwrap();
        let mut obs = StopAt { stop_at: 4, seen: 0, saved: None };
        let err = run(None, &mut obs).unwrap_err();
        assert_eq!(err.downcast_ref::<Interrupted>(), Some(&Interrupted { generation: 4 }));
        let text = serde_json::to_string(&obs.saved.unwrap()).unwrap();
        let saved: checkpoint::Saved = serde_json::from_str(&text).unwrap();
        let resumed = run(Some(saved.resume().unwrap()), &mut |_: &GenerationStats, _: &Best| {}).unwrap();
        assert_eq!(resumed.best, whole.best);
        assert_eq!(resumed.fitness, whole.fitness);
        assert_eq!(resumed.population, whole.population);
        let strip = |h: &[GenerationStats]| h.iter().map(|s| GenerationStats { seconds: 0.0, ..s.clone() }).collect::<Vec<_>>();
        assert_eq!(strip(&resumed.history), strip(&whole.history));
    }

    /// Ends the run early after generation `at` (as a time budget or a target does), keeping
    /// the snapshot the loop offers.
    struct FinishAt {
        at: usize,
        asked: Vec<usize>,
        saved: Option<checkpoint::Saved>,
    }

    impl Observer for FinishAt {
        fn generation(&mut self, _: &GenerationStats, _: &Best) {}
        fn snapshot(&mut self, state: &Snapshot<'_>) -> anyhow::Result<()> {
            self.saved = Some(checkpoint::Saved::of(state));
            Ok(())
        }
        fn finish(&mut self, generation: usize, _: &Best) -> bool {
            self.asked.push(generation);
            generation == self.at
        }
    }

    /// A run ended early after generation `k` returns what a run of `k` generations returns,
    /// and its snapshot (of generation `k + 1`) resumes to the uninterrupted run's end.
    /// `run(generations, resume, observer)`.
    fn finish_and_continue(run: &dyn Fn(usize, Option<Resume>, &mut dyn Observer) -> anyhow::Result<Outcome>) {
        let quiet = |_: &GenerationStats, _: &Best| {};
        let strip = |h: &[GenerationStats]| h.iter().map(|s| GenerationStats { seconds: 0.0, ..s.clone() }).collect::<Vec<_>>();
        let whole = run(10, None, &mut { quiet }).unwrap();
        let short = run(4, None, &mut { quiet }).unwrap();
        let mut obs = FinishAt { at: 4, asked: Vec::new(), saved: None };
        let ended = run(10, None, &mut obs).unwrap();
        assert_eq!(obs.asked, [0, 1, 2, 3, 4]);
        assert_eq!(ended.best, short.best);
        assert_eq!(ended.fitness, short.fitness);
        assert_eq!(ended.population, short.population);
        assert_eq!(strip(&ended.history), strip(&short.history));
        let saved = obs.saved.expect("an early end offers its snapshot");
        let text = serde_json::to_string(&saved).unwrap();
        let saved: checkpoint::Saved = serde_json::from_str(&text).unwrap();
        let resume = saved.resume().unwrap();
        assert_eq!(resume.generation, 5);
        let resumed = run(10, Some(resume), &mut { quiet }).unwrap();
        assert_eq!(resumed.best, whole.best);
        assert_eq!(resumed.population, whole.population);
        assert_eq!(strip(&resumed.history), strip(&whole.history));
        // The last generation is never asked about: it ends the run anyway.
        let mut never = FinishAt { at: usize::MAX, asked: Vec::new(), saved: None };
        run(3, None, &mut never).unwrap();
        assert_eq!(never.asked, [0, 1, 2]);
        assert!(never.saved.is_none());
    }

    #[test]
    fn runs_ended_early_equal_shorter_runs_and_continue() {
        use crate::program::{BreedConfig, Crossover, Mutation, Op, TreeSpec, VaryConfig};
        let spec = TreeSpec::new(vec![Op::Add, Op::Mul, Op::Sin], 2, 64).with_depth(1, 3);
        let rep = TreeRep {
            vary: VaryConfig::new(spec),
            breed: BreedConfig { p_crossover: 0.9, crossovers: vec![(Crossover::OnePoint, 1.0)], p_mutation: 0.3, mutations: vec![(Mutation::Subtree, 1.0)] },
        };
        let far = |pop: &Population| -> Vec<f64> {
            (0..pop.size()).map(|i| if pop.len[i] == 0 { f64::INFINITY } else { (pop.len[i] as f64 - 40.0).abs() }).collect()
        };
        let cfg = |g: usize| EngineConfig { pop_size: 60, generations: g, seed: 9, ..EngineConfig::default() };
        let two = IslandConfig { count: 2, migrate_every: 3, migrants: 2, ..IslandConfig::single() };
        finish_and_continue(&|g, r, o| run(&cfg(g), &IslandConfig::single(), Representation::Trees(&rep), &far, r, o));
        finish_and_continue(&|g, r, o| run(&cfg(g), &two, Representation::Trees(&rep), &far, r, o));
        let gr = parse_str("<e> ::= (<op> <e> <e>) | <v>\n<op> ::= + | - | *\n<v> ::= x0 | 1.0", "g", false).unwrap();
        let l = load_parsed(gr, &DatasetShape::default()).unwrap();
        let tpl = compile(&l.grammar, &l.table, &Vars { names: vec!["x0".into()], n_outputs: 0 }).unwrap();
        let ge = GrammarRep {
            table: &l.table,
            templates: &tpl,
            map: MapConfig::default(),
            init: InitConfig::default(),
            vary: GeVaryConfig::default(),
            genome_capacity: 256,
        };
        finish_and_continue(&|g, r, o| run(&cfg(g), &IslandConfig::single(), Representation::Grammar(&ge), &far, r, o));
        let nsga2 = |g: usize| EngineConfig { bloat: select::Bloat::Nsga2, ..cfg(g) };
        finish_and_continue(&|g, r, o| run(&nsga2(g), &two, Representation::Grammar(&ge), &far, r, o));
    }

    #[test]
    fn resumed_runs_match_uninterrupted_ones() {
        use crate::program::{BreedConfig, Crossover, Mutation, Op, TreeSpec, VaryConfig};
        let cfg = EngineConfig { pop_size: 60, generations: 10, seed: 9, ..EngineConfig::default() };
        let spec = TreeSpec::new(vec![Op::Add, Op::Mul, Op::Sin], 2, 64).with_depth(1, 3);
        let rep = TreeRep {
            vary: VaryConfig::new(spec),
            breed: BreedConfig { p_crossover: 0.9, crossovers: vec![(Crossover::OnePoint, 1.0)], p_mutation: 0.3, mutations: vec![(Mutation::Subtree, 1.0)] },
        };
        // Tree GP, with a task whose optimum is not reached early (so later generations matter).
        let far = |pop: &Population| -> Vec<f64> {
            (0..pop.size()).map(|i| if pop.len[i] == 0 { f64::INFINITY } else { (pop.len[i] as f64 - 40.0).abs() }).collect()
        };
        stop_and_resume(&|r, o| run(&cfg, &IslandConfig::single(), Representation::Trees(&rep), &far, r, o));
        let g = parse_str("<e> ::= (<op> <e> <e>) | <v>\n<op> ::= + | - | *\n<v> ::= x0 | 1.0", "g", false).unwrap();
        let l = load_parsed(g, &DatasetShape::default()).unwrap();
        let tpl = compile(&l.grammar, &l.table, &Vars { names: vec!["x0".into()], n_outputs: 0 }).unwrap();
        let rep = GrammarRep {
            table: &l.table,
            templates: &tpl,
            map: MapConfig::default(),
            init: InitConfig::default(),
            vary: GeVaryConfig::default(),
            genome_capacity: 256,
        };
        stop_and_resume(&|r, o| run(&cfg, &IslandConfig::single(), Representation::Grammar(&rep), &far, r, o));
        // Two objectives: the survivors travel in the snapshot, with islands too.
        let nsga2 = EngineConfig { bloat: select::Bloat::Nsga2, ..cfg.clone() };
        let two = IslandConfig { count: 2, migrate_every: 3, migrants: 2, ..IslandConfig::single() };
        stop_and_resume(&|r, o| run(&nsga2, &IslandConfig::single(), Representation::Grammar(&rep), &far, r, o));
        stop_and_resume(&|r, o| run(&nsga2, &two, Representation::Grammar(&rep), &far, r, o));
        let trees = TreeRep {
            vary: VaryConfig::new(TreeSpec::new(vec![Op::Add, Op::Mul, Op::Sin], 2, 64).with_depth(1, 3)),
            breed: BreedConfig { p_crossover: 0.9, crossovers: vec![(Crossover::OnePoint, 1.0)], p_mutation: 0.3, mutations: vec![(Mutation::Subtree, 1.0)] },
        };
        stop_and_resume(&|r, o| run(&nsga2, &two, Representation::Trees(&trees), &far, r, o));
    }

    /// With error and size as two objectives, a task that rewards length without end keeps a
    /// front of sizes from the smallest program up, where plain tournaments favour long ones.
    #[test]
    fn nsga2_keeps_small_programs_beside_large_ones() {
        use crate::program::{BreedConfig, Crossover, Mutation, Op, TreeSpec, VaryConfig};
        let rep = TreeRep {
            vary: VaryConfig::new(TreeSpec::new(vec![Op::Add, Op::Mul, Op::Sin], 2, 64).with_depth(1, 4)),
            breed: BreedConfig { p_crossover: 0.9, crossovers: vec![(Crossover::OnePoint, 1.0)], p_mutation: 0.3, mutations: vec![(Mutation::Subtree, 1.0)] },
        };
        let longer = |pop: &Population| -> Vec<f64> {
            (0..pop.size()).map(|i| if pop.len[i] == 0 { f64::INFINITY } else { 100.0 / pop.len[i] as f64 }).collect()
        };
        let plain = EngineConfig { pop_size: 80, generations: 15, seed: 3, ..EngineConfig::default() };
        let nsga2 = EngineConfig { bloat: select::Bloat::Nsga2, ..plain.clone() };
        let quiet = |_: &GenerationStats, _: &Best| {};
        let a = run(&plain, &IslandConfig::single(), Representation::Trees(&rep), &longer, None, &mut { quiet }).unwrap();
        let b = run(&nsga2, &IslandConfig::single(), Representation::Trees(&rep), &longer, None, &mut { quiet }).unwrap();
        b.population.validate().unwrap();
        let sizes = |o: &Outcome| {
            let mut v: Vec<u16> = o.population.len.clone();
            v.sort_unstable();
            v.dedup();
            v
        };
        let (sa, sb) = (sizes(&a), sizes(&b));
        assert_eq!(sb[0], 1, "the one-node program ends the front: {sb:?}");
        assert!(sb.len() >= 10, "a front of many sizes: {sb:?}");
        // Plain tournaments crowd toward the long end: fewer small programs survive.
        let small = |o: &Outcome| o.population.len.iter().filter(|&&l| l > 0 && l <= 8).count();
        assert!(small(&b) > small(&a), "{} small programs with NSGA-II, {} without ({sa:?})", small(&b), small(&a));
        // The best program ever evaluated is never lost: the last survivors hold it, and the
        // history's best (each generation's survivors') never worsens (issue 59: with the
        // children's statistics it rose and fell).
        let bests: Vec<f64> = b.history.iter().map(|s| s.best).collect();
        let kept = b.fitness.iter().copied().fold(f64::INFINITY, f64::min);
        assert_eq!(kept, *bests.last().unwrap(), "{bests:?}");
        assert!(bests.windows(2).all(|w| w[1] <= w[0]), "{bests:?}");
        assert!(bests.windows(2).any(|w| w[1] < w[0]), "the front improves: {bests:?}");
        // The mean size is the survivors' too: the front's, which keeps its small programs.
        let last = b.history.last().unwrap();
        let valid: Vec<f64> = b.population.len.iter().zip(&b.fitness).filter(|(l, f)| **l > 0 && f.is_finite()).map(|(l, _)| *l as f64).collect();
        let mean_len = valid.iter().sum::<f64>() / valid.len() as f64;
        assert!((last.mean_size - mean_len).abs() < 1e-9, "{} against {mean_len}", last.mean_size);
        // The survivors come best first: front 0 leads.
        let r = select::pareto::Ranking::of(&b.fitness, &b.population.len);
        assert!(r.rank.windows(2).all(|w| w[0] <= w[1]), "{:?}", r.rank);
    }
}

