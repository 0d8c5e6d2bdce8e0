//! The generation loop, written once for both representations: grammatical evolution (genomes
//! mapped through a grammar to trees) and tree GP (trees varied directly). A task supplies the
//! fitness of a population; the loop evaluates, keeps statistics and the best program, selects
//! and breeds, and reports each generation to an [`Observer`] (progress bar, hall of fame,
//! checkpoints), which may ask for a [`Snapshot`] of the state between generations and may stop
//! the run; a run continues from a [`Resume`] exactly as the uninterrupted run would.
//!
//! Two loops run a generation: [`host`] keeps the population in host memory (selection,
//! variation and mapping on the CPU, evaluation on whatever backend the task holds), [`device`]
//! keeps it on a GPU from the first generation to the last. [`run`] picks one; both give the
//! same results. This file holds what they share: settings, run records, the [`Observer`] and
//! [`Fitness`] traits.
//!
//! Fitness is minimised; `+inf` (or NaN) marks an invalid individual, which never breeds.

pub mod ars;
pub mod cache;
pub mod checkpoint;
pub mod device;
pub mod hof;
pub mod host;
pub mod islands;

use crate::backend::breed::Grammar;
use crate::genome::init::{Genomes, InitConfig};
use crate::genome::vary::GeVaryConfig;
use crate::genome::{MapConfig, Mapper};
use crate::grammar::compile::RuleTable;
use crate::grammar::template::Templates;
use crate::program::tree::{Node, Population};
use crate::select;
pub use islands::IslandConfig;

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
    /// Parent selection: tournaments, or lexicase on the task's cases ([`Fitness::case_errors`]).
    #[serde(default)]
    pub selection: select::Selection,
    /// Down-sampled lexicase: the cases read per generation, a share below 1 or a count
    /// ([`select::cases_per_generation`]).
    #[serde(default = "default_down_sample")]
    pub down_sample: f64,
    /// Lexicase's candidates per selection: a larger pool of valid individuals is drawn from
    /// (0: every selection starts from the whole pool; [`select::DEFAULT_LEXICASE_POOL`]).
    #[serde(default = "default_lexicase_pool")]
    pub lexicase_pool: usize,
    /// What keeps the population diverse ([`select::Diversity`]).
    #[serde(default)]
    pub diversity: select::Diversity,
    /// Score each distinct program once ([`cache`]), where the task's fitness depends on the
    /// program alone and its bits on nothing else (CPU evaluation): the same run, faster.
    #[serde(default = "default_fitness_cache")]
    pub fitness_cache: bool,
}

fn default_fitness_cache() -> bool {
    true
}

fn default_down_sample() -> f64 {
    select::DEFAULT_DOWN_SAMPLE
}

fn default_lexicase_pool() -> usize {
    select::DEFAULT_LEXICASE_POOL
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
            selection: select::Selection::Tournament,
            down_sample: select::DEFAULT_DOWN_SAMPLE,
            lexicase_pool: select::DEFAULT_LEXICASE_POOL,
            diversity: select::Diversity::default(),
            fitness_cache: true,
        }
    }
}

impl EngineConfig {
    /// These settings as a run of `rep` applies them: [`select::Bloat::Auto`] resolved by
    /// whether constants are fitted and the representation ([`select::Bloat::resolved`]).
    pub fn resolved(&self, rep: Representation<'_, '_>) -> EngineConfig {
        let grammar = matches!(rep, Representation::Grammar(_));
        // Lexicase replaces the parent tournament, and with it NSGA-II's.
        let bloat = match self.bloat {
            select::Bloat::Auto if self.selection.is_lexicase() => select::Bloat::None,
            b => b.resolved(self.constants.steps > 0, grammar),
        };
        EngineConfig { bloat, ..self.clone() }
    }

    /// Whether parents are chosen among unique representatives ([`select::parent_pool`]):
    /// [`select::Diversity::Unique`], except under NSGA-II, whose own ranking puts duplicates
    /// behind.
    pub fn unique_parents(&self) -> bool {
        self.diversity == select::Diversity::Unique && self.bloat != select::Bloat::Nsga2
    }

    /// The parent tournament these settings describe.
    pub fn parent_tournament(&self) -> select::Tournament {
        select::Tournament { size: self.tournament, bloat: self.bloat, size_pressure: self.size_pressure, unique: self.unique_parents() }
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
        max_derivation(self.genome_capacity, &self.map)
    }

    /// The grammar as both loops' mapping step reads it ([`crate::backend::breed::Breeder::map`]):
    /// the table, the templates, `map`'s settings and [`Self::max_derivation`].
    pub fn grammar(&self) -> Grammar<'_> {
        Grammar { table: self.table, templates: self.templates, map: self.map, max_derivation: self.max_derivation() }
    }

    /// The mapper of the evolution loops, on both devices ([`Grammar::mapper`]): `map`'s
    /// settings with the GPU mapper's bounds, so that host and device loops agree on every genome.
    pub fn mapper(&self) -> Mapper<'_> {
        self.grammar().mapper()
    }
}

/// [`GrammarRep::max_derivation`] for genomes of at most `genome_capacity` codons mapped as
/// `map` says (also what a run's resource plan counts before the grammar is loaded).
pub fn max_derivation(genome_capacity: usize, map: &MapConfig) -> usize {
    let budget = genome_capacity.saturating_mul(map.max_wraps as usize + 1);
    let per_codon = if map.codons == crate::genome::Codons::Lazy { 2 } else { 1 };
    budget.saturating_mul(per_codon).clamp(1, 1 << 16)
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
    /// The last population's trees (with several islands, every island's end to end); empty
    /// where the observer declined it ([`Observer::wants_population`]).
    pub population: Population,
    /// Fitness of the last population; empty with `population`.
    pub fitness: Vec<f64>,
    /// Copies between device and host, when the run stayed on the device ([`device`]).
    pub transfers: Option<device::Transfers>,
    /// With several islands, each island's statistics of every generation (`[generation][island]`);
    /// empty with one.
    pub island_history: Vec<Vec<GenerationStats>>,
    /// What the fitness cache answered, where the run had one ([`cache`]).
    pub fitness_cache: Option<cache::CacheStats>,
}

/// Everything the loop reports while it runs, and the two requests it takes back: a snapshot
/// of its state (for a checkpoint) and a stop (Ctrl-C). A plain closure
/// `FnMut(&GenerationStats, &Best)` is an observer that only watches.
///
/// The order within one generation `g`: evaluate; [`Observer::evaluated`]; select and breed;
/// [`Observer::generation`] with `g`'s statistics; then, between generations, with `g + 1` the
/// next to evaluate: if [`Observer::stop_requested`] or [`Observer::wants_snapshot`]`(g + 1)`,
/// [`Observer::snapshot`]; after a stop the run returns [`Interrupted`]. The last generation
/// gets no snapshot (the run is over). [`Observer::finish`] is asked once `g` is evaluated (the
/// device loop: once its best is read), before `g + 1` is bred; a generation it ends is
/// reported and snapshotted as any other, and the run then returns `g`'s outcome.
///
/// A loop other than the host one (the device-resident one) keeps resumability by calling
/// [`between_generations`] at the same point with the same state; it needs to copy its
/// population to the host only when that function is about to call `snapshot`, which it can
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
    /// Whether generation `generation`, evaluated (`best` the best program so far), ends the run
    /// early (a time budget spent, a target reached): the loop breeds the next generation as
    /// usual, reports `generation` to [`Self::generation`], offers the next generation to
    /// [`Self::snapshot`] (always, so a checkpoint continues the run), and returns the complete
    /// [`Outcome`] of `generation`, as a last generation's. Asked once per generation that is
    /// not already the last; the default never ends a run early.
    fn finish(&mut self, _generation: usize, _best: &Best) -> bool {
        false
    }
    /// Whether the [`Outcome`] should hold the last population and its fitness. A loop whose
    /// population lives on a GPU copies it to the host only when asked (10^6 programs of 128
    /// nodes are 1 GB, most of a short run's time); where declined, [`Outcome::population`] and
    /// [`Outcome::fitness`] are empty. The default: yes.
    fn wants_population(&self) -> bool {
        true
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
    /// Two objectives ([`select::Bloat::Nsga2`]): the evaluated survivors of the generation
    /// before, which the next generation's children compete with.
    pub archive: Option<ArchiveRef<'a>>,
}

/// NSGA-II's survivors between generations, borrowed: every island's rows end to end, as the
/// snapshot's other fields hold them.
#[derive(Clone, Copy, Debug)]
pub struct ArchiveRef<'a> {
    /// Their trees (GE: as mapped, with any fitted constants).
    pub trees: &'a Population,
    /// GE: their genomes.
    pub genomes: Option<&'a Genomes>,
    /// Their fitness.
    pub fitness: &'a [f64],
}

/// [`ArchiveRef`], owned.
#[derive(Clone, Debug, PartialEq)]
pub struct Archive {
    /// Their trees.
    pub trees: Population,
    /// GE: their genomes.
    pub genomes: Option<Genomes>,
    /// Their fitness.
    pub fitness: Vec<f64>,
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
    /// Two objectives: the survivors the next generation competes with ([`Snapshot::archive`]).
    pub archive: Option<Archive>,
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
    snapshot_between_generations(observer, state.generation, false, |o| o.snapshot(&state))
}

/// [`between_generations`] for a loop whose snapshot costs copies: before generation
/// `generation`, `take` hands the observer a snapshot when it asks for one, before a stop, or
/// when the run `ended` (the observer finished it); then [`Interrupted`] when a stop was
/// requested.
pub(crate) fn snapshot_between_generations(
    observer: &mut dyn Observer,
    generation: usize,
    ended: bool,
    take: impl FnOnce(&mut dyn Observer) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let stop = observer.stop_requested();
    if stop || ended || observer.wants_snapshot(generation) {
        take(observer)?;
    }
    if stop {
        return Err(Interrupted { generation }.into());
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

    /// The cases lexicase selection reads ([`select::Selection`]): the training rows, or the
    /// episodes of a generation; 0 (the default) for a task without them.
    fn n_cases(&self) -> usize {
        0
    }

    /// Each individual's error on each of `cases` (indices below [`Self::n_cases`]) at
    /// generation `generation`: `[P × cases.len()]`, row `i` individual `i`'s, lower is better,
    /// non-finite where the individual is invalid. The default: an error (no cases).
    fn case_errors(&self, _pop: &Population, _generation: usize, _cases: &[u32]) -> anyhow::Result<Vec<f64>> {
        anyhow::bail!("this task has no cases for lexicase selection: use --selection tournament")
    }

    /// Whether a program's fitness is a function of its tree alone, with the same bits in any
    /// population it is scored in (no generation, no batch, no device launch shape in it), so
    /// that the host loop may look it up in a [`cache::FitnessCache`]; false by default.
    fn cacheable(&self) -> bool {
        false
    }

    /// The task as the device loop runs it, when its data lives on a GPU and the whole
    /// generation can stay there ([`device`]); `None` (the default) runs the host loop.
    fn device_task(&self) -> Option<device::DeviceTask<'_>> {
        None
    }

    /// The task on every GPU it has a copy on, for islands spread over several
    /// ([`device::run`]); by default [`Self::device_task`] alone.
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

    fn cacheable(&self) -> bool {
        self.0.first().is_some_and(|f| f.cacheable())
    }

    fn evaluate_at(&self, pop: &Population, generation: usize) -> anyhow::Result<Vec<f64>> {
        let first = self.0.first().ok_or_else(|| anyhow::anyhow!("a task on no device"))?;
        first.evaluate_at(pop, generation)
    }

    fn fit_constants(&self, pop: &mut Population, rows: &[usize], steps: u32) -> anyhow::Result<Option<Vec<f64>>> {
        let first = self.0.first().ok_or_else(|| anyhow::anyhow!("a task on no device"))?;
        first.fit_constants(pop, rows, steps)
    }

    fn n_cases(&self) -> usize {
        self.0.first().map_or(0, |t| t.n_cases())
    }

    fn case_errors(&self, pop: &Population, generation: usize, cases: &[u32]) -> anyhow::Result<Vec<f64>> {
        let first = self.0.first().ok_or_else(|| anyhow::anyhow!("a task on no device"))?;
        first.case_errors(pop, generation, cases)
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

/// Renders genome `i`'s phenotype text (it must map validly).
pub(crate) fn phenotype(rep: &GrammarRep, genome: &[u32]) -> String {
    let mut m = Mapper::new(rep.table, rep.map);
    let mut s = String::new();
    if m.map(genome).valid() {
        m.render(&mut s);
    }
    s
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

/// Runs either representation on `islands.count` islands of `cfg.pop_size` each (one island,
/// [`IslandConfig::single`]: the plain run), from the start or from `resume` (`None`: from the
/// start), reporting to `observer` (which may take snapshots and stop the run: see
/// [`Observer`]; a closure `|s: &GenerationStats, b: &Best| ..` only watches). When the task's
/// data lives on a GPU ([`Fitness::device_tasks`]) the device loop runs ([`device::run`]),
/// unless `GROVE_DEVICE_LOOP=0` or the settings ask for the host loop ([`host::run`]), which
/// gives the same results.
pub fn run(
    cfg: &EngineConfig,
    islands: &IslandConfig,
    rep: Representation<'_, '_>,
    task: &dyn Fitness,
    resume: Option<Resume>,
    observer: &mut dyn Observer,
) -> anyhow::Result<Outcome> {
    // `host::run` and `device::run` resolve `Bloat::Auto` as they start.
    let tasks = task.device_tasks();
    if !tasks.is_empty() {
        let supported = match rep {
            Representation::Trees(_) => device::supports(cfg),
            Representation::Grammar(g) => device::supports_grammar(cfg, g),
        };
        if device_loop_enabled() && supported && device::supports_tasks(cfg, islands, &tasks) {
            return device::run(cfg, islands, rep, &tasks, resume, observer).map(|(o, _)| o);
        }
    }
    host::run(cfg, islands, rep, task, resume, observer)
}

/// False when `GROVE_DEVICE_LOOP=0`: GPU runs then evaluate each generation's population
/// after copying it to the device, with variation on the host.
pub fn device_loop_enabled() -> bool {
    std::env::var("GROVE_DEVICE_LOOP").map_or(true, |v| v != "0")
}

