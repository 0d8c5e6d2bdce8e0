//! The generation loop, written once for both representations: grammatical evolution (genomes
//! mapped through a grammar to trees) and tree GP (trees varied directly). A task supplies the
//! fitness of a population; the loop evaluates, keeps statistics and the best program, selects
//! and breeds, and reports each generation to an [`Observer`] (progress bar, hall of fame,
//! checkpoints), which may ask for a [`Snapshot`] of the state between generations and may stop
//! the run; `run_*_from` continue from a [`Resume`] exactly as the uninterrupted run would.
//!
//! Fitness is minimised; `+inf` (or NaN) marks an invalid individual, which never breeds.

pub mod checkpoint;
pub mod device;
pub mod hof;
pub mod islands;

use std::time::Instant;

use rayon::prelude::*;

use crate::genome::init::{Genomes, InitConfig, init_genomes};
use crate::genome::vary::{GeVaryConfig, crossover, int_flip};
use crate::rng::{Purpose, Stream};
use crate::genome::{MapConfig, Mapper};
use crate::grammar::compile::RuleTable;
use crate::genome::build::build_tree;
use crate::grammar::template::Templates;
use crate::program::tree::{Node, Population};
use crate::select;
pub use islands::IslandConfig;
use islands::{HostIsland, HostIslands, island_seed};

/// Settings shared by both representations.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineConfig {
    /// Individuals per generation.
    pub pop_size: usize,
    /// Generations after the first evaluation (the initial population is generation 0).
    pub generations: usize,
    /// Seed of every random choice of the run.
    pub seed: u64,
    /// Tournament size.
    pub tournament: usize,
    /// Best individuals copied unchanged into the next generation.
    pub elite: usize,
    /// Longest program, in nodes (the population's row width `L`).
    pub max_len: usize,
    /// Bloat control by selection ([`select::Bloat`]); runs the host loop on every device.
    #[serde(default)]
    pub bloat: select::Bloat,
    /// Double tournament's `D` in `[1, 2]`: the smaller of two fitness-tournament winners
    /// becomes the parent with probability `D / 2`.
    #[serde(default = "default_size_pressure")]
    pub size_pressure: f64,
    /// Constants fitted during the run ([`ConstantFitting`]; off by default, which the
    /// regression task's defaults turn on).
    #[serde(default)]
    pub constants: ConstantFitting,
}

/// When and on which programs the task fits numeric constants by Levenberg–Marquardt
/// ([`Fitness::fit_constants`]): at every `every`-th generation (generation 0 among them), just
/// after evaluation, the best `fraction` of each island's population. Tree GP keeps the fitted
/// constants in the trees its children are bred from (Lamarckian); grammatical evolution maps
/// its genomes afresh each generation, so only the fitness (and the best program and hall of
/// fame) keep them (Baldwinian).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConstantFitting {
    /// Levenberg–Marquardt steps per fit; 0: no fitting.
    pub steps: u32,
    /// Generations between fits (1: every generation).
    pub every: usize,
    /// Fraction of the population fitted each time, the best first: `ceil(fraction · P)`
    /// programs, at least 1.
    pub fraction: f64,
}

impl Default for ConstantFitting {
    fn default() -> Self {
        Self { steps: 0, every: 1, fraction: 0.1 }
    }
}

impl ConstantFitting {
    /// Whether constants are fitted after evaluating generation `gen`.
    pub fn at(&self, gen: usize) -> bool {
        self.steps > 0 && gen % self.every.max(1) == 0
    }

    /// Programs fitted in a population of `p`.
    pub fn count(&self, p: usize) -> usize {
        ((p as f64 * self.fraction).ceil() as usize).clamp(1, p.max(1))
    }

    /// The rows fitted: the best [`Self::count`] valid ones by fitness (`select::elite`'s
    /// order).
    pub fn rows(&self, fit: &[f64]) -> Vec<usize> {
        let mut rows = select::elite(fit, self.count(fit.len()));
        rows.retain(|&i| select::key(fit[i]).is_finite());
        rows
    }

    /// Checks the settings; errors name the option.
    pub fn check(&self) -> anyhow::Result<()> {
        anyhow::ensure!(self.every >= 1, "--optimise-every (engine.constants.every) must be at least 1, got {}", self.every);
        anyhow::ensure!(
            self.fraction > 0.0 && self.fraction <= 1.0,
            "--optimise-fraction (engine.constants.fraction) must be in (0, 1], got {}",
            self.fraction
        );
        anyhow::ensure!(self.steps <= 1000, "--optimise-constants (engine.constants.steps) takes at most 1000 steps, got {}", self.steps);
        Ok(())
    }
}

/// Luke & Panait's recommended `D` for the double tournament.
pub const DEFAULT_SIZE_PRESSURE: f64 = 1.4;

fn default_size_pressure() -> f64 {
    DEFAULT_SIZE_PRESSURE
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            pop_size: 1000,
            generations: 50,
            seed: 1,
            tournament: 3,
            elite: 1,
            max_len: 256,
            bloat: select::Bloat::None,
            size_pressure: DEFAULT_SIZE_PRESSURE,
            constants: ConstantFitting::default(),
        }
    }
}

impl EngineConfig {
    /// The parent tournament these settings describe.
    pub fn parent_tournament(&self) -> select::Tournament {
        select::Tournament { size: self.tournament, bloat: self.bloat, size_pressure: self.size_pressure }
    }
}

/// Grammatical evolution: a compiled grammar, its templates, and GE's operators' settings.
#[derive(Clone, Debug)]
pub struct GrammarRep<'g> {
    /// The compiled grammar.
    pub table: &'g RuleTable,
    /// Templates turning derivations into trees.
    pub templates: &'g Templates,
    /// Mapping limits.
    pub map: MapConfig,
    /// First generation.
    pub init: InitConfig,
    /// Crossover and mutation.
    pub vary: GeVaryConfig,
    /// Longest genome.
    pub genome_capacity: usize,
}

impl GrammarRep<'_> {
    /// The longest derivation the evolution loops allow: as many entries as a genome can read
    /// codons (eager codons read one per entry, so no valid mapping is cut), twice that with
    /// lazy codons (whose single-production rules read none), at most 2¹⁶.
    pub fn max_derivation(&self) -> usize {
        let budget = self.genome_capacity.saturating_mul(self.map.max_wraps as usize + 1);
        let per_codon = if self.map.codons == crate::genome::Codons::Lazy { 2 } else { 1 };
        budget.saturating_mul(per_codon).clamp(1, 1 << 16)
    }

    /// The mapper of the evolution loops, on both devices: `rep.map`'s settings with the GPU
    /// mapper's bounds ([`crate::genome::MAP_STACK`] pending symbols, [`Self::max_derivation`]
    /// entries), so that host and device loops agree on every genome.
    pub fn mapper(&self) -> Mapper<'_> {
        Mapper::new(self.table, self.map).with_max_stack(crate::genome::MAP_STACK).with_max_derivation(self.max_derivation())
    }
}

/// The best program found so far.
#[derive(Clone, Debug, PartialEq)]
pub struct Best {
    /// Its fitness (lower is better).
    pub fitness: f64,
    /// Its tree, prefix order.
    pub nodes: Vec<Node>,
    /// The generation it was found in.
    pub generation: usize,
    /// GE only: its genome and the phenotype text.
    pub genome: Option<(Vec<u32>, String)>,
}

/// Statistics of one generation.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct GenerationStats {
    /// Generation number (0: the initial population).
    pub generation: usize,
    /// Best fitness in this generation.
    pub best: f64,
    /// Mean fitness of the valid individuals.
    pub mean: f64,
    /// Mean tree length of the valid individuals.
    pub mean_size: f64,
    /// Individuals without a valid program or with a non-finite fitness.
    pub invalid: usize,
    /// Seconds this generation took (map or vary, evaluate, select, breed).
    pub seconds: f64,
}

/// What a run returns.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The best program of the run.
    pub best: Best,
    /// One entry per generation.
    pub history: Vec<GenerationStats>,
    /// The last population's trees (with several islands, every island's end to end).
    pub population: Population,
    /// Fitness of the last population.
    pub fitness: Vec<f64>,
    /// Copies between device and host, when the run stayed on the device ([`device`]).
    pub transfers: Option<device::Transfers>,
    /// With several islands, each island's statistics of every generation (`[generation][island]`);
    /// empty with one.
    pub island_history: Vec<Vec<GenerationStats>>,
}

/// Everything the loop reports while it runs, and the two requests it takes back: a snapshot
/// of its state (for a checkpoint) and a stop (Ctrl-C). A plain closure
/// `FnMut(&GenerationStats, &Best)` is an observer that only watches.
///
/// The order within one generation `g`: evaluate; [`Observer::evaluated`]; select and breed;
/// [`Observer::generation`] with `g`'s statistics; then, between generations, with `g + 1` the
/// next to evaluate: if [`Observer::stop_requested`] or [`Observer::wants_snapshot`]`(g + 1)`,
/// [`Observer::snapshot`]; after a stop the run returns [`Interrupted`]. The last generation
/// gets no snapshot (the run is over).
///
/// A loop other than `run_grammar` / `run_trees` (the device-resident one) keeps resumability
/// by calling [`between_generations`] at the same point with the same state; it needs to copy
/// its population to the host only when that function is about to call `snapshot`, which it can
/// ask [`Observer::wants_snapshot`] / [`Observer::stop_requested`] first.
pub trait Observer {
    /// Generation `stats.generation` is done; `best` is the best program so far.
    fn generation(&mut self, stats: &GenerationStats, best: &Best);
    /// With several islands, each island's statistics of the generation about to be reported
    /// to [`Self::generation`] (whose statistics are all islands'), just before it. The default
    /// does nothing.
    fn islands(&mut self, _stats: &[GenerationStats]) {}
    /// Generation `generation` has been evaluated: its trees and their fitness (a hall of fame
    /// reads them; with several islands, every island's rows end to end). The default does
    /// nothing.
    fn evaluated(&mut self, _generation: usize, _pop: &Population, _fitness: &[f64]) {}
    /// What [`Self::evaluated`] learns of generation `generation` when its population stays
    /// on a GPU: `winners`, the best valid program of each size that improves on the sizes'
    /// best of earlier generations (`(fitness, nodes)`, the lowest index among equals, as a
    /// hall of fame taking whole populations in index order keeps), and `size_counts[n]`, the
    /// valid individuals of `n` nodes. The default does nothing.
    fn evaluated_sizes(&mut self, _generation: usize, _winners: &[(f64, Vec<crate::program::tree::Node>)], _size_counts: &[u32]) {}
    /// Whether to take a snapshot before evaluating `generation`. The default: never.
    fn wants_snapshot(&mut self, _generation: usize) -> bool {
        false
    }
    /// The run's state between generations, to save. The default does nothing.
    fn snapshot(&mut self, _state: &Snapshot<'_>) -> anyhow::Result<()> {
        Ok(())
    }
    /// Whether the run should stop at the next point between generations (after a snapshot).
    fn stop_requested(&self) -> bool {
        false
    }
    /// Whether this observer takes snapshots or may stop the run: a loop that cannot take
    /// snapshots (the device-resident one, until it calls [`between_generations`]) must not be
    /// chosen when this is true. The default: no.
    fn checkpointing(&self) -> bool {
        false
    }
}

impl<F: FnMut(&GenerationStats, &Best)> Observer for F {
    fn generation(&mut self, stats: &GenerationStats, best: &Best) {
        self(stats, best)
    }
}

/// The state of a run between generations, borrowed: everything needed to continue it exactly
/// (random numbers are addressed by seed and generation, so no generator state is needed).
#[derive(Clone, Copy, Debug)]
pub struct Snapshot<'a> {
    /// The next generation to evaluate.
    pub generation: usize,
    /// GE: the genomes of that generation (not yet mapped).
    pub genomes: Option<&'a Genomes>,
    /// Tree GP: the trees of that generation (not yet evaluated).
    pub population: Option<&'a Population>,
    /// The best program so far.
    pub best: &'a Best,
    /// Statistics of every generation before it.
    pub history: &'a [GenerationStats],
    /// Islands: `genomes` or `population` holds each island's rows end to end.
    pub islands: usize,
    /// With several islands, each island's statistics of every generation before it.
    pub island_history: &'a [Vec<GenerationStats>],
}

/// Where a resumed run starts: a [`Snapshot`], owned.
#[derive(Clone, Debug)]
pub struct Resume {
    /// The next generation to evaluate.
    pub generation: usize,
    /// GE: its genomes.
    pub genomes: Option<Genomes>,
    /// Tree GP: its trees.
    pub population: Option<Population>,
    /// The best program so far.
    pub best: Best,
    /// Statistics of every generation before it.
    pub history: Vec<GenerationStats>,
    /// Islands the rows are split into (end to end).
    pub islands: usize,
    /// With several islands, each island's statistics of every generation before it.
    pub island_history: Vec<Vec<GenerationStats>>,
}

/// The run stopped between generations because the observer asked it to (Ctrl-C), after
/// taking a snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interrupted {
    /// The next generation to evaluate: where a resumed run starts.
    pub generation: usize,
}

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "interrupted before generation {}", self.generation)
    }
}

impl std::error::Error for Interrupted {}

/// The point between generations: takes a snapshot when asked (or before a stop) and returns
/// [`Interrupted`] when a stop was requested. Call it from any generation loop.
pub fn between_generations(observer: &mut dyn Observer, state: Snapshot<'_>) -> anyhow::Result<()> {
    let stop = observer.stop_requested();
    if stop || observer.wants_snapshot(state.generation) {
        observer.snapshot(&state)?;
    }
    if stop {
        return Err(Interrupted { generation: state.generation }.into());
    }
    Ok(())
}

pub(crate) fn check_resume(cfg: &EngineConfig, r: &Resume) -> anyhow::Result<()> {
    anyhow::ensure!(
        r.generation <= cfg.generations && r.history.len() == r.generation,
        "the checkpoint is at generation {} of {} with {} generations of history: it does not fit these settings",
        r.generation,
        cfg.generations,
        r.history.len()
    );
    Ok(())
}

/// Everything the loop needs from a task.
pub trait Fitness: Sync {
    /// Fitness of every individual of `pop` (lower is better; `+inf` for invalid ones,
    /// including rows of length 0). An error stops the run.
    fn evaluate(&self, pop: &Population) -> anyhow::Result<Vec<f64>>;

    /// Fitness of `pop` at generation `generation` of a run: [`Self::evaluate`], unless the
    /// task changes with the generation (control playing fresh starts every generation).
    fn evaluate_at(&self, pop: &Population, _generation: usize) -> anyhow::Result<Vec<f64>> {
        self.evaluate(pop)
    }

    /// Fits the numeric constants of rows `rows` of `pop` in place by Levenberg–Marquardt
    /// (`steps` steps) and returns those rows' fitness afterwards, in `rows`' order; `None`
    /// (the default) for a task that fits no constants. [`ConstantFitting`] says when the
    /// loops call it.
    fn fit_constants(&self, _pop: &mut Population, _rows: &[usize], _steps: u32) -> anyhow::Result<Option<Vec<f64>>> {
        Ok(None)
    }

    /// The task as the device loop runs it, when its data lives on a GPU and the whole
    /// generation can stay there ([`device`]); `None` (the default) runs the host loop.
    fn device_task(&self) -> Option<device::DeviceTask<'_>> {
        None
    }

    /// The task on every GPU it has a copy on, for islands spread over several
    /// ([`device::run_islands`]); by default [`Self::device_task`] alone.
    fn device_tasks(&self) -> Vec<device::DeviceTask<'_>> {
        self.device_task().into_iter().collect()
    }
}

/// A task with a copy on each of several GPUs (each with its own data): it evaluates with the
/// first copy and gives the device loop every copy, so that islands spread over the GPUs.
pub struct OnGpus<'a, F: Fitness>(pub &'a [F]);

impl<F: Fitness> Fitness for OnGpus<'_, F> {
    fn evaluate(&self, pop: &Population) -> anyhow::Result<Vec<f64>> {
        let first = self.0.first().ok_or_else(|| anyhow::anyhow!("a task on no device"))?;
        first.evaluate(pop)
    }

    fn evaluate_at(&self, pop: &Population, generation: usize) -> anyhow::Result<Vec<f64>> {
        let first = self.0.first().ok_or_else(|| anyhow::anyhow!("a task on no device"))?;
        first.evaluate_at(pop, generation)
    }

    fn fit_constants(&self, pop: &mut Population, rows: &[usize], steps: u32) -> anyhow::Result<Option<Vec<f64>>> {
        let first = self.0.first().ok_or_else(|| anyhow::anyhow!("a task on no device"))?;
        first.fit_constants(pop, rows, steps)
    }

    fn device_task(&self) -> Option<device::DeviceTask<'_>> {
        self.0.first().and_then(|t| t.device_task())
    }

    fn device_tasks(&self) -> Vec<device::DeviceTask<'_>> {
        // Only while the first has one (else the host loop runs on the first alone).
        match self.device_task() {
            Some(_) => self.0.iter().filter_map(|t| t.device_task()).collect(),
            None => Vec::new(),
        }
    }
}

impl<F: Fn(&Population) -> Vec<f64> + Sync> Fitness for F {
    fn evaluate(&self, pop: &Population) -> anyhow::Result<Vec<f64>> {
        Ok(self(pop))
    }
}

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
    let mut fit = task.evaluate_at(pop, generation)?;
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

fn best_of(fit: &[f64]) -> Option<usize> {
    select::elite(fit, 1).into_iter().next().filter(|&i| select::key(fit[i]).is_finite())
}

/// Maps every genome to a tree in `pop` (rows of invalid ones emptied), with the loops' mapper
/// ([`GrammarRep::mapper`]). Returns used codons. The CPU reference of `grove_map_trees`.
pub fn map_population(rep: &GrammarRep, genomes: &Genomes, pop: &mut Population) -> Vec<u32> {
    let results: Vec<(u32, Option<Vec<Node>>)> = (0..genomes.size())
        .into_par_iter()
        .with_min_len(64)
        .map_init(
            || (rep.mapper(), Vec::new(), Vec::new()),
            |(mapper, nodes, scratch), i| {
                let m = mapper.map(genomes.get(i));
                if !m.valid() {
                    return (m.used_codons, None);
                }
                match build_tree(rep.table, rep.templates, mapper.derivation(), pop.max_len, nodes, scratch) {
                    Ok(()) => (m.used_codons, Some(nodes.clone())),
                    Err(_) => (m.used_codons, None),
                }
            },
        )
        .collect();
    let mut used = Vec::with_capacity(results.len());
    for (i, (u, nodes)) in results.into_iter().enumerate() {
        used.push(u);
        // A row that cannot take its tree is left empty by `set_tree`: an invalid individual.
        match nodes {
            Some(n) => {
                let _ = pop.set_tree(i, &n);
            }
            None => pop.clear(i),
        }
    }
    used
}

/// Renders genome `i`'s phenotype text (it must map validly).
pub(crate) fn phenotype(rep: &GrammarRep, genome: &[u32]) -> String {
    let mut m = Mapper::new(rep.table, rep.map);
    let mut s = String::new();
    if m.map(genome).valid() {
        m.render(&mut s);
    }
    s
}

/// Runs grammatical evolution. `observe` sees every generation's statistics and the best so far.
pub fn run_grammar(
    cfg: &EngineConfig,
    rep: &GrammarRep,
    task: &dyn Fitness,
    mut observe: &mut dyn FnMut(&GenerationStats, &Best),
) -> anyhow::Result<Outcome> {
    run_grammar_from(cfg, rep, task, None, &mut observe)
}

/// Runs grammatical evolution from the start or from `resume`, reporting to `observer` (which
/// may take snapshots and stop the run: see [`Observer`]). On a GPU with resident data the
/// device loop runs ([`device::run_grammar`]: genomes, mapping and variation on the device),
/// unless `GROVE_DEVICE_LOOP=0` asks for the host loop ([`run_grammar_on_host_from`]), which
/// gives the same results.
pub fn run_grammar_from(
    cfg: &EngineConfig,
    rep: &GrammarRep,
    task: &dyn Fitness,
    resume: Option<Resume>,
    observer: &mut dyn Observer,
) -> anyhow::Result<Outcome> {
    run_islands(cfg, &IslandConfig::single(), Representation::Grammar(rep), task, resume, observer)
}

/// Grammatical evolution with the genomes on the host (mapping, variation and selection on the
/// CPU), whatever backend the task evaluates on.
pub fn run_grammar_on_host(
    cfg: &EngineConfig,
    rep: &GrammarRep,
    task: &dyn Fitness,
    mut observe: &mut dyn FnMut(&GenerationStats, &Best),
) -> anyhow::Result<Outcome> {
    run_grammar_on_host_from(cfg, rep, task, None, &mut observe)
}

/// [`run_grammar_on_host`] from the start or from `resume`, reporting to `observer`.
pub fn run_grammar_on_host_from(
    cfg: &EngineConfig,
    rep: &GrammarRep,
    task: &dyn Fitness,
    resume: Option<Resume>,
    observer: &mut dyn Observer,
) -> anyhow::Result<Outcome> {
    run_islands_on_host(cfg, &IslandConfig::single(), Representation::Grammar(rep), task, resume, observer)
}

/// Tree GP without a grammar (EvoGP's mode): the spec of random trees and the operator mix.
#[derive(Clone, Debug)]
pub struct TreeRep {
    /// Random trees and mutation's new subtrees.
    pub vary: crate::program::VaryConfig,
    /// Crossover and mutation probabilities and weights.
    pub breed: crate::program::BreedConfig,
}

/// What a loop varies: trees, or genomes mapped to trees.
#[derive(Clone, Copy)]
pub enum Representation<'r, 'g> {
    /// Tree GP.
    Trees(&'r TreeRep),
    /// Grammatical evolution.
    Grammar(&'r GrammarRep<'g>),
}

/// Runs tree GP. `observe` sees every generation's statistics and the best so far.
///
/// When the task's data lives on a GPU ([`Fitness::device_task`]) the whole run stays on
/// the device ([`device::run_trees`]), unless `GROVE_DEVICE_LOOP=0` asks for the host loop
/// ([`run_trees_on_host`]), which gives the same results.
pub fn run_trees(
    cfg: &EngineConfig,
    rep: &TreeRep,
    task: &dyn Fitness,
    mut observe: &mut dyn FnMut(&GenerationStats, &Best),
) -> anyhow::Result<Outcome> {
    run_trees_from(cfg, rep, task, None, &mut observe)
}

/// Runs tree GP from the start or from `resume`, reporting to `observer` (which may take
/// snapshots and stop the run: see [`Observer`]). On a GPU with resident data the device loop
/// runs ([`device::run_trees`]), unless `GROVE_DEVICE_LOOP=0`.
pub fn run_trees_from(
    cfg: &EngineConfig,
    rep: &TreeRep,
    task: &dyn Fitness,
    resume: Option<Resume>,
    observer: &mut dyn Observer,
) -> anyhow::Result<Outcome> {
    run_islands(cfg, &IslandConfig::single(), Representation::Trees(rep), task, resume, observer)
}

/// Runs either representation on `islands.count` islands of `cfg.pop_size` each (one island:
/// the plain run), from the start or from `resume`, reporting to `observer`. On a GPU with
/// resident data the device loop runs ([`device::run`]), unless `GROVE_DEVICE_LOOP=0` asks for
/// the host loop ([`run_islands_on_host`]), which gives the same results.
pub fn run_islands(
    cfg: &EngineConfig,
    islands: &IslandConfig,
    rep: Representation<'_, '_>,
    task: &dyn Fitness,
    resume: Option<Resume>,
    observer: &mut dyn Observer,
) -> anyhow::Result<Outcome> {
    let tasks = task.device_tasks();
    if !tasks.is_empty() {
        let supported = match rep {
            Representation::Trees(_) => device::supports(cfg),
            Representation::Grammar(g) => device::supports_grammar(cfg, g),
        };
        if device_loop_enabled() && supported {
            return device::run_islands(cfg, islands, rep, &tasks, resume, observer).map(|(o, _)| o);
        }
    }
    run_islands_on_host(cfg, islands, rep, task, resume, observer)
}

/// False when `GROVE_DEVICE_LOOP=0`: GPU runs then evaluate each generation's population
/// after copying it to the device, with variation on the host.
pub fn device_loop_enabled() -> bool {
    std::env::var("GROVE_DEVICE_LOOP").map_or(true, |v| v != "0")
}

/// Tree GP with the population on the host (variation and selection on the CPU), whatever
/// backend the task evaluates on.
pub fn run_trees_on_host(
    cfg: &EngineConfig,
    rep: &TreeRep,
    task: &dyn Fitness,
    mut observe: &mut dyn FnMut(&GenerationStats, &Best),
) -> anyhow::Result<Outcome> {
    run_trees_on_host_from(cfg, rep, task, None, &mut observe)
}

/// [`run_trees_on_host`] from the start or from `resume`, reporting to `observer`.
pub fn run_trees_on_host_from(
    cfg: &EngineConfig,
    rep: &TreeRep,
    task: &dyn Fitness,
    resume: Option<Resume>,
    observer: &mut dyn Observer,
) -> anyhow::Result<Outcome> {
    run_islands_on_host(cfg, &IslandConfig::single(), Representation::Trees(rep), task, resume, observer)
}

/// The host loop of either representation on `islands.count` islands (one: the plain run).
///
/// Per generation, every island in turn: (GE: map its genomes,) evaluate; then the best so far
/// (the first island's among equals), [`Observer::evaluated`] with the islands end to end,
/// each island's statistics; then, at a migration generation, [`islands::migrate`]; then each
/// island breeds with its own seed ([`islands::island_seed`]). Snapshots hold every island,
/// end to end.
pub fn run_islands_on_host(
    cfg: &EngineConfig,
    islands: &IslandConfig,
    rep: Representation<'_, '_>,
    task: &dyn Fitness,
    resume: Option<Resume>,
    observer: &mut dyn Observer,
) -> anyhow::Result<Outcome> {
    use anyhow::anyhow;
    let p = cfg.pop_size;
    let n = islands.count;
    if let Representation::Trees(rep) = rep {
        rep.vary.check().map_err(|e| anyhow!("tree settings: {e}"))?;
        rep.breed.check().map_err(|e| anyhow!("breeding settings: {e}"))?;
    }
    islands.check(p)?;
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
    let (mut isl, mut best, mut history, mut island_history, mut gen) = match resume {
        None => {
            let isl = (0..n)
                .map(|i| {
                    let seed = island_seed(cfg.seed, i);
                    Ok(match rep {
                        Representation::Trees(r) => {
                            island(i, crate::program::init_population(&r.vary.spec, p, seed).map_err(|e| anyhow!("{e}"))?, None)
                        }
                        Representation::Grammar(r) => {
                            let g = init_genomes(r.table, &r.init, r.map.codons, p, r.genome_capacity, seed);
                            island(i, Population::new(p, max_len, n_outputs), Some(g))
                        }
                    })
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            let best = Best { fitness: f64::INFINITY, nodes: Vec::new(), generation: 0, genome: None };
            (isl, best, Vec::with_capacity(cfg.generations + 1), Vec::new(), 0usize)
        }
        Some(r) => {
            check_resume(cfg, &r)?;
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
            (isl, r.best, r.history, r.island_history, r.generation)
        }
    };
    loop {
        let t0 = Instant::now();
        for i in isl.iter_mut() {
            if let (Representation::Grammar(r), Some(g)) = (rep, &i.genomes) {
                i.used = map_population(r, g, &mut i.pop);
            }
            i.fit = evaluate(task, &i.pop, gen)?;
            if cfg.constants.at(gen) {
                fit_constants(task, cfg, i)?;
            }
        }
        for i in &isl {
            if let Some(b) = best_of(&i.fit) {
                if i.fit[b] < best.fitness {
                    let genome = match (rep, &i.genomes) {
                        (Representation::Grammar(r), Some(g)) => {
                            let g = g.get(b).to_vec();
                            let text = phenotype(r, &g);
                            Some((g, text))
                        }
                        _ => None,
                    };
                    best = Best { fitness: i.fit[b], nodes: i.pop.tree(b).nodes(), generation: gen, genome };
                }
            }
        }
        match isl.as_slice() {
            [one] => observer.evaluated(gen, &one.pop, &one.fit),
            all => {
                let pop = islands::concat_trees(all.iter().map(|i| &i.pop));
                let fit: Vec<f64> = all.iter().flat_map(|i| i.fit.iter().copied()).collect();
                observer.evaluated(gen, &pop, &fit);
            }
        }
        let mut each: Vec<GenerationStats> = isl.iter().map(|i| stats(gen, &i.pop, &i.fit, 0.0)).collect();
        let last = gen == cfg.generations;
        if !last {
            if islands.migrates_after(gen, cfg.generations) {
                islands::migrate(&mut HostIslands(&mut isl), islands.migrants)?;
            }
            for i in isl.iter_mut() {
                breed_on_host(cfg, rep, i, gen as u32 + 1)?;
            }
        }
        let seconds = t0.elapsed().as_secs_f64();
        each.iter_mut().for_each(|s| s.seconds = seconds);
        let s = islands::combine(gen, &each, p, seconds);
        if n > 1 {
            observer.islands(&each);
            island_history.push(each);
        }
        observer.generation(&s, &best);
        history.push(s);
        if last {
            let (population, fitness) = match isl.len() {
                1 => {
                    let one = isl.pop().expect("one island");
                    (one.pop, one.fit)
                }
                _ => (islands::concat_trees(isl.iter().map(|i| &i.pop)), isl.iter().flat_map(|i| i.fit.iter().copied()).collect()),
            };
            return Ok(Outcome { best, history, island_history, population, fitness, transfers: None });
        }
        gen += 1;
        // Between generations (as `between_generations`): the islands end to end in a snapshot.
        let stop = observer.stop_requested();
        if stop || observer.wants_snapshot(gen) {
            let (trees, genomes) = match (rep, isl.as_slice()) {
                (Representation::Trees(_), [one]) => (Some(std::borrow::Cow::Borrowed(&one.pop)), None),
                (Representation::Trees(_), all) => (Some(std::borrow::Cow::Owned(islands::concat_trees(all.iter().map(|i| &i.pop)))), None),
                (Representation::Grammar(_), [one]) => (None, one.genomes.as_ref().map(std::borrow::Cow::Borrowed)),
                (Representation::Grammar(_), all) => {
                    (None, Some(std::borrow::Cow::Owned(islands::concat_genomes(all.iter().filter_map(|i| i.genomes.as_ref())))))
                }
            };
            observer.snapshot(&Snapshot {
                generation: gen,
                genomes: genomes.as_deref(),
                population: trees.as_deref(),
                best: &best,
                history: &history,
                islands: n,
                island_history: &island_history,
            })?;
        }
        if stop {
            return Err(Interrupted { generation: gen }.into());
        }
    }
}

/// Breeds island `i`'s next generation `next_gen` on the host from its evaluated population:
/// tree GP replaces its trees, GE its genomes (mapped at the next evaluation).
fn breed_on_host(cfg: &EngineConfig, rep: Representation<'_, '_>, i: &mut HostIsland, next_gen: u32) -> anyhow::Result<()> {
    let p = cfg.pop_size;
    let (fit, seed) = (&i.fit, i.seed);
    let pool = select::valid_indices(fit);
    let elite = select::elite(fit, cfg.elite.min(p));
    let parents = cfg.parent_tournament();
    let lens = &i.pop.len;
    match rep {
        Representation::Trees(rep) => {
            let pairs: Vec<[u32; 2]> = (0..p)
                .into_par_iter()
                .with_min_len(256)
                .map(|k| {
                    let a = parents.pick(fit, lens, &pool, seed, next_gen, 2 * k);
                    let b = parents.pick(fit, lens, &pool, seed, next_gen, 2 * k + 1);
                    [a as u32, b as u32]
                })
                .collect();
            let pop = &i.pop;
            let mut next = Population::new(p, pop.max_len, pop.n_outputs);
            crate::program::breed(pop, &pairs, &mut next, seed, next_gen, &rep.vary, &rep.breed).map_err(|e| anyhow::anyhow!("{e}"))?;
            for (k, &e) in elite.iter().enumerate() {
                next.copy_row(k, pop, e);
            }
            i.pop = next;
        }
        Representation::Grammar(rep) => {
            let genomes = i.genomes.as_ref().ok_or_else(|| anyhow::anyhow!("a GE island without genomes"))?;
            let used = &i.used;
            let mut next = Genomes::new(p, rep.genome_capacity);
            for (k, &e) in elite.iter().enumerate() {
                next.set(k, genomes.get(e));
            }
            let n_children = p - elite.len();
            let pairs = n_children.div_ceil(2);
            let children: Vec<(Vec<u32>, Vec<u32>)> = (0..pairs)
                .into_par_iter()
                .with_min_len(32)
                .map_init(|| rep.mapper(), |mapper, j| {
                    let a = parents.pick(fit, lens, &pool, seed, next_gen, 2 * j);
                    let b = parents.pick(fit, lens, &pool, seed, next_gen, 2 * j + 1);
                    let (mut c0, mut c1) = (Vec::new(), Vec::new());
                    let mut s = Stream::new(seed, next_gen, j as u32, Purpose::Crossover);
                    crossover(genomes.get(a), genomes.get(b), used[a], used[b], &rep.vary, rep.genome_capacity, &mut s, &mut c0, &mut c1);
                    // As PonyGE2 does, mutate within the child's own used codons (its mapping's),
                    // with streams addressed by the child's final row.
                    let k0 = (elite.len() + 2 * j) as u32;
                    for (c, k) in [(&mut c0, k0), (&mut c1, k0 + 1)] {
                        let u = mapper.map(c).used_codons.min(c.len() as u32);
                        int_flip(c, u, &rep.vary, &mut Stream::new(seed, next_gen, k, Purpose::Mutate));
                    }
                    (c0, c1)
                })
                .collect();
            let mut k = elite.len();
            for (c0, c1) in children {
                for c in [c0, c1] {
                    if k < p {
                        next.set(k, &c);
                        k += 1;
                    }
                }
            }
            i.genomes = Some(next);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
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
        let a = run_grammar(&cfg, &rep, &length_task, &mut |s, _| seen.push(s.best)).unwrap();
        assert_eq!(a.history.len(), 11);
        assert_eq!(a.best.fitness, 0.0, "a tree of 7 nodes is easy to find");
        assert!(seen.windows(2).all(|w| w[1] <= w[0]), "elitism keeps the best: {seen:?}");
        let (genome, text) = a.best.genome.clone().unwrap();
        assert!(text.starts_with('('), "{text}");
        assert!(!genome.is_empty());
        let b = run_grammar(&cfg, &rep, &length_task, &mut |_, _| {}).unwrap();
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
        let a = run_trees(&cfg, &rep, &length_task, &mut |s, _| seen.push(s.best)).unwrap();
        assert_eq!(a.best.fitness, 0.0);
        assert!(seen.windows(2).all(|w| w[1] <= w[0]), "{seen:?}");
        a.population.validate().unwrap();
        let b = run_trees(&cfg, &rep, &length_task, &mut |_, _| {}).unwrap();
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
        stop_and_resume(&|r, o| run_trees_from(&cfg, &rep, &far, r, o));
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
        stop_and_resume(&|r, o| run_grammar_from(&cfg, &rep, &far, r, o));
    }
}
