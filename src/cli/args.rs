//! The argument groups several commands share: the engine's (population, generations, seed,
//! selection, length limit, parsimony, device; one group for `evolve`, `classify` and
//! `control`, each with its own defaults from `task::base::defaults`), the representation (grammar,
//! function set, operators of one's own), grammatical evolution, the islands, constant fitting,
//! how the returned program is chosen, the budget and where a run's results go; and the
//! [`Overlay`] of settings fields the flags give, which `Experiment::from_flags` lays over the
//! command's defaults as it lays an experiment file's fields.

use std::marker::PhantomData;
use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use clap::builder::{OsStr, Resettable};
use serde_json::Value;

use crate::backend::DeviceChoice;
use crate::evolve::IslandConfig;
use crate::evolve::islands::MAX_ISLANDS;
use crate::task::base::defaults::{self, EngineDefaults, GeConfigs};
use crate::task::base::ge_names::{GeChoices, default_mutation};
use crate::task::base::search::{MAX_GENERATIONS, MAX_GENOME, MAX_POP, MAX_WRAPS};

/// The settings fields a command's flags give, as JSON: [`crate::task::runner::experiment::Experiment::from_flags`]
/// lays them over the command's defaults (a GPU's where the run has one), as it lays an
/// experiment file's. A flag whose default depends on the device, or that has none, adds its
/// field only when given, so the defaults decide it.
#[derive(Debug)]
pub struct Overlay(Value);

impl Default for Overlay {
    fn default() -> Self {
        Overlay(Value::Object(Default::default()))
    }
}

impl Overlay {
    /// Sets the field at `path` (`engine.pop_size`) to `value`.
    pub fn set(&mut self, path: &str, value: impl serde::Serialize) {
        let value = serde_json::to_value(value).unwrap_or(Value::Null);
        // The paths are the flags' own, blocks of fields all the way down.
        crate::task::runner::experiment::set_path(&mut self.0, path, value).expect("a flag's field path names blocks of fields");
    }

    /// Sets the field at `path` where the flag was given.
    pub fn set_some(&mut self, path: &str, value: Option<impl serde::Serialize>) {
        if let Some(v) = value {
            self.set(path, v);
        }
    }

    /// Sets the number field at `path` from the flag `flag`. JSON has no NaN or infinity, and
    /// no setting takes one, so such a value is refused here, naming the flag and the field.
    pub fn number(&mut self, flag: &str, path: &str, value: f64) -> Result<()> {
        self.set(path, finite(flag, path, value)?);
        Ok(())
    }

    /// [`Self::number`] where the flag was given.
    pub fn number_some(&mut self, flag: &str, path: &str, value: Option<f64>) -> Result<()> {
        value.map_or(Ok(()), |v| self.number(flag, path, v))
    }

    /// The fields, a JSON block.
    pub fn into_value(self) -> Value {
        self.0
    }
}

/// `value` of the flag `flag` (the field `path`) where it is a finite number, else an error that
/// names both.
pub fn finite(flag: &str, path: &str, value: f64) -> Result<f64> {
    anyhow::ensure!(value.is_finite(), "{flag} ({path}) must be a finite number, got {value}");
    Ok(value)
}

/// What the engine group of a command shows: its defaults and the help lines that differ
/// between commands.
pub trait EngineHelp {
    /// The command's engine defaults.
    const DEFAULTS: EngineDefaults;
    /// The engine defaults on a GPU where population and generations depend on the device
    /// (classify, control): the command line then has no default for them, and the help names
    /// both devices'.
    const GPU_DEFAULTS: Option<EngineDefaults> = None;
    /// Help of `--pop`.
    fn pop() -> String {
        match Self::GPU_DEFAULTS {
            Some(gpu) => format!("Population size, {} [default: {} on the CPU, {} on a GPU]", pop_bound(), Self::DEFAULTS.pop, gpu.pop),
            None => format!("Population size, {}", pop_bound()),
        }
    }
    /// Help of `--gens`.
    fn gens() -> String {
        match Self::GPU_DEFAULTS {
            Some(gpu) => format!("Generations, at most {MAX_GENERATIONS} [default: {} on the CPU, {} on a GPU]", Self::DEFAULTS.gens, gpu.gens),
            None => format!("Generations, at most {MAX_GENERATIONS}"),
        }
    }
    /// Help of `--seed`.
    const SEED: &'static str;
    /// Help of `--parsimony`.
    const PARSIMONY: &'static str = "Fitness penalty per program node";
    /// Help of `--device`.
    const DEVICE: &'static str = "Where to evaluate: auto (CUDA if usable, else CPU), cpu, cuda";
}

/// The bound of `--pop` every command's help states.
pub fn pop_bound() -> String {
    format!("2 to {MAX_POP} (--pop × --islands at most {MAX_POP})")
}

/// A default for the help and the parser, `None` for none.
fn shown(value: Option<impl ToString>) -> Resettable<OsStr> {
    match value {
        Some(v) => Resettable::Value(v.to_string().into()),
        None => Resettable::Reset,
    }
}

/// The engine's settings, shared by every command that evolves; `D` gives the command's
/// defaults and help. The help of each flag is `D`'s, so the fields carry no doc comment of
/// their own to shadow it.
#[derive(Debug, Args)]
pub struct EngineArgs<D: EngineHelp + Send + Sync + 'static> {
    // Without a default for control: the device's.
    #[arg(long, help = D::pop(), default_value = shown(D::GPU_DEFAULTS.is_none().then_some(D::DEFAULTS.pop)))]
    pub(crate) pop: Option<usize>,
    #[arg(long, help = D::gens(), default_value = shown(D::GPU_DEFAULTS.is_none().then_some(D::DEFAULTS.gens)))]
    pub(crate) gens: Option<usize>,
    #[arg(long, help = D::SEED, default_value = shown(Some(D::DEFAULTS.seed)))]
    pub(crate) seed: u64,
    #[arg(long, allow_negative_numbers = true, help = D::PARSIMONY, default_value_t = defaults::PARSIMONY)]
    pub(crate) parsimony: f64,
    /// Tournament size, 1 to --pop
    #[arg(long, default_value = shown(Some(D::DEFAULTS.tournament)))]
    pub tournament: usize,
    /// Best individuals copied unchanged to the next generation, 0 to --pop − 1
    #[arg(long, default_value = shown(Some(D::DEFAULTS.elite)))]
    pub elite: usize,
    /// Parent selection
    #[arg(long, value_enum, default_value_t = crate::select::Selection::default())]
    pub selection: crate::select::Selection,
    /// Down-sampled lexicase: cases read per generation, a share in (0, 1) or a count of at
    /// least 2
    #[arg(long, allow_negative_numbers = true, value_name = "F|N", default_value_t = crate::select::DEFAULT_DOWN_SAMPLE)]
    pub down_sample: f64,
    /// Lexicase: candidates each selection starts from, drawn from a larger pool of valid
    /// programs (0: the whole population)
    #[arg(long, value_name = "N", default_value_t = crate::select::DEFAULT_LEXICASE_POOL)]
    pub lexicase_pool: usize,
    /// What keeps the population diverse
    #[arg(long, value_enum, default_value_t = crate::select::Diversity::default())]
    pub diversity: crate::select::Diversity,
    /// Longest program, in nodes, 1 to 65535
    #[arg(long, default_value = shown(Some(D::DEFAULTS.max_len)))]
    pub max_len: usize,
    /// Score every program, duplicates too: by default, where programs are scored on the CPU
    /// (with the same bits in any population), each distinct program is scored once and looked
    /// up after that (PonyGE2's CACHE); the run is the same, only faster
    #[arg(long)]
    pub no_fitness_cache: bool,
    #[arg(long, help = D::DEVICE, value_enum, default_value_t = DeviceChoice::default(), env = "GROVE_DEVICE")]
    pub(crate) device: DeviceChoice,
    /// The command the group belongs to.
    #[arg(skip)]
    pub command: PhantomData<D>,
}

impl<D: EngineHelp + Send + Sync + 'static> EngineArgs<D> {
    /// The device asked for.
    pub fn device(&self) -> DeviceChoice {
        self.device
    }

    /// The engine's fields and the device; the penalty per node goes to `parsimony`, where the
    /// command's settings keep it.
    pub fn overlay(&self, o: &mut Overlay, parsimony: &str) -> Result<()> {
        o.set_some("engine.pop_size", self.pop);
        o.set_some("engine.generations", self.gens);
        o.set("engine.seed", self.seed);
        o.set("engine.tournament", self.tournament);
        o.set("engine.elite", self.elite);
        o.set("engine.selection", self.selection);
        o.number("--down-sample", "engine.down_sample", self.down_sample)?;
        o.set("engine.lexicase_pool", self.lexicase_pool);
        o.set("engine.diversity", self.diversity);
        o.set("engine.max_len", self.max_len);
        o.set("engine.fitness_cache", !self.no_fitness_cache);
        o.set("device", self.device);
        o.number("--parsimony", parsimony, self.parsimony)
    }
}

/// A command's help for its representation group: what `--grammar` and `--functions` say and
/// the function set it has without either.
pub trait RepresentationHelp {
    /// Help of `--grammar`.
    const GRAMMAR: &'static str;
    /// Help of `--functions`.
    const FUNCTIONS: &'static str;
    /// The function set without `--grammar` or `--functions` (`None`: give one of the two).
    const DEFAULT_FUNCTIONS: Option<&'static str>;
}

/// What the programs are made of, shared by every command that evolves: a grammar or a function
/// set, and operators of one's own; `R` gives the command's help and default function set.
#[derive(Debug, Args)]
pub struct RepresentationArgs<R: RepresentationHelp + Send + Sync + 'static> {
    #[arg(long, short, conflicts_with = "functions", help = R::GRAMMAR)]
    pub(crate) grammar: Option<PathBuf>,
    #[arg(long, help = R::FUNCTIONS, default_value = shown(R::DEFAULT_FUNCTIONS))]
    pub(crate) functions: Option<String>,
    /// An operator of your own, usable in --functions and grammars (repeatable), e.g.
    /// --define "softsign(x) = x / (1 + abs(x))": a body over the built-ins (+ - * /, calls such
    /// as abs, sin, np.exp), the parameters (one or two), numbers and the operators defined before.
    #[arg(long = "define", value_name = "DEFINITION")]
    pub define: Vec<String>,
    /// The command the group belongs to.
    #[arg(skip)]
    pub command: PhantomData<R>,
}

impl<R: RepresentationHelp + Send + Sync + 'static> RepresentationArgs<R> {
    /// The fields `grammar`, `functions` and `operators`. The parser fills in the default
    /// function set beside `--grammar` too (with which `--functions` conflicts), so a grammar
    /// leaves `functions` to the settings, which have none beside one.
    pub fn overlay(&self, o: &mut Overlay) {
        match &self.grammar {
            Some(g) => o.set("grammar", g.display().to_string()),
            None => o.set_some("functions", self.functions.as_ref()),
        }
        o.set("operators", &self.define);
    }
}

/// Where a run's results go and how it runs: shared by every command that evolves.
#[derive(Clone, Debug, Default, Args)]
pub struct RunFlags {
    /// Write the JSON run report here (`grove predict --model`, `grove plot` and `grove run
    /// --from` read it).
    #[arg(long, value_name = "PATH")]
    pub report: Option<PathBuf>,
    /// Write plots (PNG and SVG) into this directory.
    #[arg(long, value_name = "DIR")]
    pub plots: Option<PathBuf>,
    /// Write the hall of fame (best program of each size: complexity, loss, equation, latex,
    /// sympy) as CSV here.
    #[arg(long, value_name = "PATH")]
    pub hall_of_fame: Option<PathBuf>,
    /// Save a checkpoint here every --checkpoint-every generations, before the last one and on
    /// Ctrl-C (continue with `grove run --resume PATH`, which keeps the report, hall-of-fame
    /// and plot paths). Checked before the first generation.
    #[arg(long, value_name = "PATH")]
    pub checkpoint: Option<PathBuf>,
    // No parser default: a resumed run keeps its own.
    #[arg(long, value_name = "N", help = format!(
        "Generations between checkpoints [default: {}; a resumed run keeps its own]", defaults::CHECKPOINT_EVERY
    ))]
    pub(crate) checkpoint_every: Option<usize>,
    /// Worker threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// The most memory the run may use, host and GPU (e.g. 2G, 512M; default: what the machine
    /// has available); a run whose estimate is larger is refused before it starts.
    #[arg(long, value_name = "SIZE", value_parser = crate::task::base::plan::parse_size, env = "GROVE_MAX_MEMORY")]
    pub max_memory: Option<u64>,
    /// Print only the result.
    #[arg(long, short, conflicts_with = "verbose")]
    pub quiet: bool,
    /// Print a line per generation and where checkpoints go.
    #[arg(long, short)]
    pub verbose: bool,
}

impl RunFlags {
    /// Generations between checkpoints: `--checkpoint-every`, else a resumed run's (`resumed`),
    /// else [`defaults::CHECKPOINT_EVERY`].
    pub fn checkpoint_every(&self, resumed: Option<usize>) -> usize {
        self.checkpoint_every.or(resumed).unwrap_or(defaults::CHECKPOINT_EVERY)
    }
}

/// When a run ends before its last generation, shared by every command that evolves.
#[derive(Clone, Copy, Debug, Default, Args)]
pub struct BudgetArgs {
    /// End the run after the generation past which one more would cross this many seconds of
    /// search; the report, hall of fame and checkpoint are those of a finished run.
    #[arg(long, value_name = "SECONDS", allow_negative_numbers = true)]
    pub time_limit: Option<f64>,
    /// End the run after the first generation whose best program reaches VALUE: a training loss
    /// at or below it (evolve), a training accuracy at or above it (classify), a return at or
    /// above it (control).
    #[arg(long, value_name = "VALUE", allow_negative_numbers = true)]
    pub stop_at: Option<f64>,
}

impl BudgetArgs {
    /// The settings' `budget` block, the fields given.
    pub fn overlay(&self, o: &mut Overlay) -> Result<()> {
        o.number_some("--time-limit", "budget.time_limit", self.time_limit)?;
        o.number_some("--stop-at", "budget.stop_at", self.stop_at)
    }
}

/// The island model, shared by every command that evolves.
#[derive(Clone, Debug, Args)]
pub struct IslandArgs {
    #[arg(long, default_value_t = IslandConfig::default().count, value_name = "N", help = format!(
        "Islands: populations of --pop each that evolve side by side and exchange their best programs on a ring (1: one population); 1 to {MAX_ISLANDS}, --pop × --islands at most {MAX_POP}"
    ))]
    pub(crate) islands: usize,
    /// Generations between migrations (with --islands).
    #[arg(long, default_value_t = IslandConfig::default().migrate_every, value_name = "M")]
    pub migrate_every: usize,
    /// Programs each island sends to the next at a migration, replacing its worst (0: none).
    #[arg(long, default_value_t = IslandConfig::default().migrants, value_name = "K")]
    pub migrants: usize,
    /// GPUs the islands are spread over on a CUDA run: all, a number (the first N), or a list
    /// of device ordinals (0,2; a single one as 3,). Results do not depend on it.
    #[arg(long, default_value_t = IslandConfig::default().gpus, value_name = "all|N|LIST")]
    pub gpus: crate::evolve::islands::Gpus,
    /// How the GPUs of a CUDA run exchange migrants and row shards' data: peer (the driver's
    /// copies over NVLink or PCIe) or nccl (NCCL's send and receive, loaded at run time; one
    /// line where it is missing). Results do not depend on it.
    #[arg(long, default_value_t = IslandConfig::default().link, value_name = "peer|nccl")]
    pub gpu_link: crate::evolve::islands::GpuLink,
}

impl IslandArgs {
    /// The number of islands asked for.
    pub fn count(&self) -> usize {
        self.islands
    }

    /// The settings' `islands` block (its `shard_rows` the command's own: `grove evolve
    /// --shard-rows`).
    pub fn overlay(&self, o: &mut Overlay) {
        o.set("islands.count", self.islands);
        o.set("islands.migrate_every", self.migrate_every);
        o.set("islands.migrants", self.migrants);
        o.set("islands.gpus", self.gpus.to_string());
        o.set("islands.link", self.gpu_link);
    }
}

/// How the returned program is chosen and how bloat is controlled, shared by `evolve` and
/// `classify`.
#[derive(Debug, Args)]
pub struct ChoiceArgs {
    #[arg(long, allow_negative_numbers = true, value_name = "F", help = format!(
        "Fraction of the training rows held out (seeded; per class for classify) to choose the returned program; never used for fitness [default: {} with at least {} training rows for evolve ({} for classify), else none]",
        crate::task::base::validation::AUTO_FRACTION, defaults::EVOLVE_VALIDATION_ROWS, crate::task::base::validation::AUTO_MIN_ROWS
    ))]
    pub(crate) validation_fraction: Option<f64>,
    /// How the returned program is chosen from the hall of fame's Pareto front (error against
    /// size).
    #[arg(long, value_enum, default_value_t = crate::task::base::validation::Select::default())]
    pub select: crate::task::base::validation::Select,
    #[arg(long, value_enum, help = format!(
        "Bloat control by selection (the linear penalty is --parsimony); nsga2: error and size as two objectives; auto: nsga2 without constant fitting, none with it [default: {} for evolve, {} for classify]",
        value_name(defaults::EVOLVE_BLOAT), value_name(defaults::CLASSIFY_BLOAT)
    ))]
    pub(crate) bloat: Option<crate::select::Bloat>,
    /// Double tournament's D, in [1, 2].
    #[arg(long, allow_negative_numbers = true, value_name = "D", default_value_t = crate::evolve::DEFAULT_SIZE_PRESSURE)]
    pub size_pressure: f64,
}

impl ChoiceArgs {
    /// The fields `validation_fraction`, `select`, `engine.bloat` (given) and
    /// `engine.size_pressure`.
    pub fn overlay(&self, o: &mut Overlay) -> Result<()> {
        o.number_some("--validation-fraction", "validation_fraction", self.validation_fraction)?;
        o.set("select", self.select);
        o.set_some("engine.bloat", self.bloat);
        o.number("--size-pressure", "engine.size_pressure", self.size_pressure)
    }
}

/// The name the command line gives a value of `v`'s enum.
pub fn value_name(v: impl clap::ValueEnum) -> String {
    v.to_possible_value().map_or_else(String::new, |p| p.get_name().to_string())
}

/// The smallest and largest depth of sensible initialisation's ramp, written `MIN,MAX`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InitDepth(pub u32, pub u32);

impl std::fmt::Display for InitDepth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{},{}", self.0, self.1)
    }
}

fn parse_range(s: &str) -> Result<InitDepth, String> {
    let (a, b) = s.split_once([',', '-', ':']).ok_or_else(|| format!("`{s}`: expected MIN,MAX"))?;
    let a: u32 = a.trim().parse().map_err(|_| format!("`{a}` is not a whole number"))?;
    let b: u32 = b.trim().parse().map_err(|_| format!("`{b}` is not a whole number"))?;
    if a > b || a == 0 {
        return Err(format!("`{s}`: need 1 <= MIN <= MAX"));
    }
    Ok(InitDepth(a, b))
}

/// Settings of grammatical evolution, shared by `evolve`, `classify` and `control`. Each is an
/// `Option` so that one given without `--grammar` (tree GP, which has no genome) is an error
/// line, not ignored; not given, it is `defaults::GE`'s.
#[derive(Debug, Args)]
pub struct GeArgs {
    #[arg(long, help = format!("GE: extra passes over the genome, at most {MAX_WRAPS} [default: {}]", defaults::GE.wraps))]
    pub(crate) wraps: Option<u32>,
    #[arg(long, value_enum, help = format!("GE: codon use at single-production rules [default: {}]", value_name(defaults::GE.codons)))]
    pub(crate) codons: Option<crate::genome::Codons>,
    #[arg(long, help = format!("GE: largest derivation depth (PonyGE2's count) [default: {}]", defaults::GE.max_depth))]
    pub(crate) max_depth: Option<u32>,
    #[arg(long, value_enum, help = format!("GE: initialisation [default: {}]", value_name(defaults::GE.init)))]
    pub(crate) init: Option<crate::genome::InitMethod>,
    #[arg(long, value_parser = parse_range, help = format!(
        "GE: smallest and largest depth of the ramp of sensible initialisation and PI grow [default: {}]",
        InitDepth(defaults::GE.init_depth.0, defaults::GE.init_depth.1)
    ))]
    pub(crate) init_depth: Option<InitDepth>,
    #[arg(long, help = format!("GE: genome length of random initialisation, 1 to {MAX_GENOME} [default: {}]", defaults::GE.genome_length))]
    pub(crate) genome_length: Option<usize>,
    #[arg(long, help = format!(
        "GE: longest genome crossover may make, --genome-length to {MAX_GENOME} [default: {}, or --genome-length where that is longer]",
        defaults::GE.genome_capacity
    ))]
    pub(crate) genome_capacity: Option<usize>,
    /// Crossover: P, the probability that a child is made by crossing two parents (GE: by its
    /// crossover operator; tree GP: trees.p_crossover), or GE's OPERATOR[:P] (help below).
    #[arg(long, allow_negative_numbers = true, value_name = "P|OPERATOR[:P]", help = format!(
        "Crossover: P, the probability that a child is made by crossing two parents (GE by its operator; tree GP by one-point crossover, its trees.p_crossover), or, with --grammar, OPERATOR[:P]: subtree (subtrees of one non-terminal swapped between the parents' derivation trees), onepoint (variable one-point crossover within the used codons) [default: {}; tree GP {}]",
        defaults::GE.crossover, defaults::TREE_P_CROSSOVER
    ))]
    pub crossover: Option<String>,
    /// Mutation: a probability or, for GE, an operator with its rate (help below, from the defaults).
    #[arg(long, allow_negative_numbers = true, value_name = "P|OPERATOR[:RATE]", help = format!(
        "Mutation: P (GE: int-flip's per-codon probability; tree GP: the probability that a child is then mutated, its trees.p_mutation) or, with --grammar, OPERATOR[:RATE]: int-flip[:P|:1/used|:max(P,1/used)] (each used codon replaced by a random one with probability P, {p} if not given; 1/used: one over the used codons, PonyGE2's default; max(P,1/used): the larger of the two, at least one flip expected in every child), subtree[:P] (with probability P, {} if not given, one subtree of the derivation tree regrown at random) [default: {}; tree GP {}]",
        defaults::GE_SUBTREE_MUTATION, default_mutation(), defaults::TREE_P_MUTATION, p = defaults::GE.mutation
    ))]
    pub mutation: Option<String>,
    #[arg(long, value_enum, help = format!(
        "GE: how a derivation becomes a program: text (what its phenotype says under Python's precedence and associativity, PonyGE2's meaning: x-<e> with <e> deriving a+b is (x-a)+b) or derivation (the derivation tree's nesting, each production's operators by precedence within it: x-(a+b), for grammars written for it) [default: {}]",
        value_name(defaults::GE.reading)
    ))]
    pub(crate) reading: Option<crate::grammar::template::Reading>,
}

impl GeArgs {
    /// What the flags give, as both front ends name GE's settings.
    fn choices(&self) -> GeChoices {
        GeChoices {
            wraps: self.wraps,
            codons: self.codons,
            max_depth: self.max_depth,
            init: self.init,
            init_depth: self.init_depth.map(|r| (r.0, r.1)),
            genome_length: self.genome_length,
            genome_capacity: self.genome_capacity,
            crossover: self.crossover.clone(),
            mutation: self.mutation.clone(),
            reading: self.reading,
        }
    }

    /// The mapping, initialisation and variation configs and the genome capacity; an error
    /// line for a `--crossover` or `--mutation` that does not parse.
    pub fn configs(&self) -> Result<GeConfigs> {
        self.choices().configs("--")
    }

    /// The blocks `map`, `init` and `vary` and the field `genome_capacity`. `grammar`: the run
    /// has one; else (tree GP) a `--crossover` or `--mutation` that is a number sets the
    /// experiment's `trees.p_crossover` or `trees.p_mutation`, and one that names a GE
    /// operator, or any flag of GE's genome (`--init`, `--wraps`, ...), is an error line: tree
    /// GP has no genome, and the flag would change nothing ([`GeChoices::tree_rates`]).
    pub fn overlay(&self, o: &mut Overlay, grammar: bool) -> Result<()> {
        let ge = if grammar {
            self.configs()?
        } else {
            let rates = self.choices().tree_rates("--", "flag")?;
            o.set_some("trees.p_crossover", rates.crossover);
            o.set_some("trees.p_mutation", rates.mutation);
            // The rates went to the trees; GE's blocks keep their defaults.
            defaults::GE.configs()
        };
        // Checked first: the block would carry a NaN as null.
        finite("--crossover", "vary.crossover", ge.vary.crossover.into())?;
        finite("--mutation", "vary.mutation", ge.vary.mutation.into())?;
        o.set("map", ge.map);
        o.set("init", ge.init);
        o.set("vary", ge.vary);
        o.set("genome_capacity", ge.genome_capacity);
        Ok(())
    }
}

/// Constant fitting by Levenberg–Marquardt (`grove evolve`, `grove classify`); each setting not
/// given is the device's default.
#[derive(Debug, Args)]
pub struct FitArgs {
    #[arg(long, value_name = "STEPS", help = format!(
        "Levenberg–Marquardt steps fitting the numeric constants of the best programs on the training rows (regression: the squared error, with the scale and offset of linear scaling; classification: the softmax cross-entropy); 0: no fitting [default: evolve {} and classify {}, on either device: docs/quality.md measured no gain on unseen rows; given alone, every 5 generations on the best 20 %]",
        crate::task::regression::default_fit(true).steps, crate::task::classify::DEFAULT_FIT.steps
    ))]
    pub(crate) optimise_constants: Option<u32>,
    #[arg(long, value_name = "G", help = format!(
        "Generations between constant fits (1: every generation) [default: {}]", crate::task::regression::FITTING.every
    ))]
    pub(crate) optimise_every: Option<usize>,
    #[arg(long, allow_negative_numbers = true, value_name = "F", help = format!(
        "Fraction of the population whose constants are fitted, the best first [default: {}]", crate::task::regression::FITTING.fraction
    ))]
    pub(crate) optimise_fraction: Option<f64>,
}

impl FitArgs {
    /// The `engine.constants` fields given.
    pub fn overlay(&self, o: &mut Overlay) -> Result<()> {
        o.set_some("engine.constants.steps", self.optimise_constants);
        o.set_some("engine.constants.every", self.optimise_every);
        o.number_some("--optimise-fraction", "engine.constants.fraction", self.optimise_fraction)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_help_prints_the_defaults_where_both_fittings_agree() {
        // `--optimise-every` and `--optimise-fraction` state one default for both commands.
        let (r, c) = (crate::task::regression::FITTING, crate::task::classify::DEFAULT_FIT);
        assert_eq!((r.every, r.fraction), (c.every, c.fraction));
    }

    #[test]
    fn a_nan_or_an_infinity_is_refused_naming_the_flag() {
        let mut o = Overlay::default();
        for v in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let e = o.number("--noise", "linear.noise", v).unwrap_err().to_string();
            assert!(e.starts_with("--noise (linear.noise) must be a finite number, got "), "{e}");
        }
        o.number("--noise", "linear.noise", -0.5).unwrap();
        o.set_some("a.b", None::<u32>);
        assert_eq!(o.into_value(), serde_json::json!({"linear": {"noise": -0.5}}));
    }
}
