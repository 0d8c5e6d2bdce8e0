//! The argument groups several commands share: the engine's (population, generations, seed,
//! selection, length limit, parsimony, device; one group for `evolve`, `classify` and
//! `control`, each with its own defaults from `task::base::defaults`), grammatical evolution, the
//! islands, constant fitting, how the returned program is chosen, and where a run's results go.

use std::marker::PhantomData;
use std::path::PathBuf;

use clap::builder::{OsStr, Resettable};
use clap::{Args, ValueEnum};

use crate::backend::DeviceChoice;
use crate::evolve::{ConstantFitting, EngineConfig, IslandConfig};
use crate::genome::{Codons, InitMethod};
use crate::evolve::islands::MAX_ISLANDS;
use crate::task::base::defaults::{self, EngineDefaults, GeConfigs};
use crate::task::base::search::{MAX_GENERATIONS, MAX_GENOME, MAX_POP, MAX_WRAPS};

/// What the engine group of a command shows: its defaults and the help lines that differ
/// between commands.
pub trait EngineHelp {
    /// The command's engine defaults.
    const DEFAULTS: EngineDefaults;
    /// Whether population and generations depend on the device (control), so the command
    /// line has no default for them.
    const BY_DEVICE: bool = false;
    /// Help of `--pop`.
    fn pop() -> String {
        format!("Population size, {}", pop_bound())
    }
    /// Help of `--gens`.
    fn gens() -> String {
        format!("Generations, at most {MAX_GENERATIONS}")
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
/// defaults and help.
#[derive(Debug, Args)]
pub struct EngineArgs<D: EngineHelp + Send + Sync + 'static> {
    /// Population size (the command's default, or for control the device's).
    #[arg(long, help = D::pop(), default_value = shown((!D::BY_DEVICE).then_some(D::DEFAULTS.pop)))]
    pub pop: Option<usize>,
    /// Generations (as `pop`).
    #[arg(long, help = D::gens(), default_value = shown((!D::BY_DEVICE).then_some(D::DEFAULTS.gens)))]
    pub gens: Option<usize>,
    /// Random seed.
    #[arg(long, help = D::SEED, default_value = shown(Some(D::DEFAULTS.seed)))]
    pub seed: u64,
    /// Fitness penalty per program node.
    #[arg(long, help = D::PARSIMONY, default_value_t = defaults::PARSIMONY)]
    pub parsimony: f64,
    /// Tournament size.
    #[arg(long, help = "Tournament size, 1 to --pop", default_value = shown(Some(D::DEFAULTS.tournament)))]
    pub tournament: usize,
    /// Best individuals copied unchanged to the next generation.
    #[arg(long, help = "Best individuals copied unchanged to the next generation, 0 to --pop − 1", default_value = shown(Some(D::DEFAULTS.elite)))]
    pub elite: usize,
    /// Longest program, in nodes.
    #[arg(long, help = "Longest program, in nodes, 1 to 65535", default_value = shown(Some(D::DEFAULTS.max_len)))]
    pub max_len: usize,
    /// Where to evaluate.
    #[arg(long, help = D::DEVICE, value_enum, default_value = "auto", env = "GROVE_DEVICE")]
    pub device: DeviceChoice,
    /// The command the group belongs to.
    #[arg(skip)]
    pub command: PhantomData<D>,
}

impl<D: EngineHelp + Send + Sync + 'static> EngineArgs<D> {
    /// The engine's settings: what was given, else `defaults` (the command's, or for control
    /// the device's); bloat control as `choice` says (the command's without); constants fitted as
    /// `constants` says.
    pub fn config(&self, defaults: &EngineDefaults, choice: Option<&ChoiceArgs>, constants: ConstantFitting) -> EngineConfig {
        let pop = self.pop.unwrap_or(defaults.pop);
        let base = EngineConfig::default();
        EngineConfig {
            pop_size: pop,
            generations: self.gens.unwrap_or(defaults.gens),
            seed: self.seed,
            tournament: self.tournament,
            elite: self.elite,
            max_len: self.max_len,
            bloat: choice.and_then(|c| c.bloat).unwrap_or(defaults.bloat),
            size_pressure: choice.map_or(base.size_pressure, |c| c.size_pressure),
            constants,
        }
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
    /// Generations between checkpoints (default 10; a resumed run keeps its own).
    #[arg(long, value_name = "N")]
    pub checkpoint_every: Option<usize>,
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
    /// The settings' `budget` block.
    pub fn config(&self) -> crate::task::base::budget::Budget {
        crate::task::base::budget::Budget { time_limit: self.time_limit, stop_at: self.stop_at }
    }
}

/// The island model, shared by every command that evolves.
#[derive(Clone, Debug, Args)]
pub struct IslandArgs {
    /// Islands: populations of --pop each that evolve side by side and exchange their best
    /// programs on a ring (1: one population).
    #[arg(long, default_value_t = IslandConfig::default().count, value_name = "N", help = format!(
        "Islands: populations of --pop each that evolve side by side and exchange their best programs on a ring (1: one population); 1 to {MAX_ISLANDS}, --pop × --islands at most {MAX_POP}"
    ))]
    pub islands: usize,
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
    /// Split the training rows of one population over the GPUs --gpus chooses (data parallel,
    /// for data larger than one GPU; regression): each GPU sums its rows and the first adds the
    /// sums. Results depend on the number of GPUs; --device cpu computes the same.
    #[arg(long)]
    pub shard_rows: bool,
    /// How the GPUs of a CUDA run exchange migrants and row shards' data: peer (the driver's
    /// copies over NVLink or PCIe) or nccl (NCCL's send and receive, loaded at run time; one
    /// line where it is missing). Results do not depend on it.
    #[arg(long, default_value_t = crate::evolve::islands::GpuLink::Peer, value_name = "peer|nccl")]
    pub gpu_link: crate::evolve::islands::GpuLink,
}

impl IslandArgs {
    /// The settings' `islands` block.
    pub fn config(&self) -> IslandConfig {
        IslandConfig {
            count: self.islands,
            migrate_every: self.migrate_every,
            migrants: self.migrants,
            gpus: self.gpus.clone(),
            shard_rows: self.shard_rows,
            link: self.gpu_link,
        }
    }
}

/// How the returned program is chosen and how bloat is controlled, shared by `evolve` and
/// `classify`.
#[derive(Debug, Args)]
pub struct ChoiceArgs {
    /// Fraction of the training rows held out (seeded; per class for classify) to choose the
    /// returned program; never used for fitness [default: 0.25 with at least 300 training
    /// rows, else none].
    #[arg(long, value_name = "F")]
    pub validation_fraction: Option<f64>,
    /// How the returned program is chosen from the hall of fame's Pareto front (error against
    /// size).
    #[arg(long, value_enum, default_value_t = crate::task::base::validation::Select::default())]
    pub select: crate::task::base::validation::Select,
    /// Bloat control by selection (the linear penalty is --parsimony); nsga2: error and size
    /// as two objectives; auto: nsga2 without constant fitting, none with it [default: auto for
    /// evolve, none for classify].
    #[arg(long, value_enum)]
    pub bloat: Option<crate::select::Bloat>,
    /// Double tournament's D, in [1, 2].
    #[arg(long, value_name = "D", default_value_t = crate::evolve::DEFAULT_SIZE_PRESSURE)]
    pub size_pressure: f64,
}

/// How the first GE generation is made.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum InitArg {
    /// Uniformly random genomes of --genome-length codons.
    Random,
    /// Ramped half-and-half over derivation trees (PonyGE2's sensible initialisation).
    Sensible,
}

impl InitArg {
    /// The flag's value for `m`.
    fn of(m: InitMethod) -> Self {
        match m {
            InitMethod::Random => InitArg::Random,
            InitMethod::Sensible => InitArg::Sensible,
        }
    }
}

/// Codon use at single-production rules.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum CodonsArg {
    /// One codon at every non-terminal (PonyGE2).
    Eager,
    /// No codon at a rule with one production (GEVA, libGE).
    Lazy,
}

impl CodonsArg {
    /// The flag's value for `c`.
    pub fn of(c: Codons) -> Self {
        match c {
            Codons::Eager => CodonsArg::Eager,
            Codons::Lazy => CodonsArg::Lazy,
        }
    }

    /// The mapper's codon use.
    pub fn codons(self) -> Codons {
        match self {
            CodonsArg::Eager => Codons::Eager,
            CodonsArg::Lazy => Codons::Lazy,
        }
    }
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

/// Settings of grammatical evolution, shared by `evolve`, `classify` and `control`.
#[derive(Debug, Args)]
pub struct GeArgs {
    /// GE: extra passes over the genome.
    #[arg(long, default_value_t = defaults::GE.wraps, help = format!("GE: extra passes over the genome, at most {MAX_WRAPS}"))]
    pub wraps: u32,
    /// GE: codon use at single-production rules.
    #[arg(long, value_enum, default_value_t = CodonsArg::of(defaults::GE.codons))]
    pub codons: CodonsArg,
    /// GE: largest derivation depth (PonyGE2's count).
    #[arg(long, default_value_t = defaults::GE.max_depth)]
    pub max_depth: u32,
    /// GE: initialisation.
    #[arg(long, value_enum, default_value_t = InitArg::of(defaults::GE.init))]
    pub init: InitArg,
    /// GE: smallest and largest depth of sensible initialisation's ramp.
    #[arg(long, default_value_t = InitDepth(defaults::GE.init_depth.0, defaults::GE.init_depth.1), value_parser = parse_range)]
    pub init_depth: InitDepth,
    /// GE: genome length of random initialisation.
    #[arg(long, default_value_t = defaults::GE.genome_length, help = format!("GE: genome length of random initialisation, 1 to {MAX_GENOME}"))]
    pub genome_length: usize,
    /// GE: longest genome crossover may make.
    #[arg(long, default_value_t = defaults::GE.genome_capacity, help = format!("GE: longest genome crossover may make, --genome-length to {MAX_GENOME}"))]
    pub genome_capacity: usize,
    /// GE: probability of crossing a pair of parents.
    #[arg(long, default_value_t = defaults::GE.crossover)]
    pub crossover: f32,
    /// GE: per-codon mutation probability.
    #[arg(long, default_value_t = defaults::GE.mutation)]
    pub mutation: f32,
}

impl GeArgs {
    /// The mapping, initialisation and variation configs and the genome capacity.
    pub fn configs(&self) -> GeConfigs {
        defaults::Ge {
            wraps: self.wraps,
            codons: self.codons.codons(),
            max_depth: self.max_depth,
            init: match self.init {
                InitArg::Random => InitMethod::Random,
                InitArg::Sensible => InitMethod::Sensible,
            },
            init_depth: (self.init_depth.0, self.init_depth.1),
            genome_length: self.genome_length,
            genome_capacity: self.genome_capacity,
            crossover: self.crossover,
            mutation: self.mutation,
        }
        .configs()
    }
}

/// Constant fitting by Levenberg–Marquardt (`grove evolve`, `grove classify`).
#[derive(Debug, Args)]
pub struct FitArgs {
    /// Levenberg–Marquardt steps fitting the numeric constants of the best programs on the
    /// training rows (regression: the squared error, with the scale and offset of linear
    /// scaling; classification: the softmax cross-entropy); 0: no fitting [default: evolve 10
    /// on a GPU and 0 on the CPU, where the fit costs many times a plain run; classify 0]
    #[arg(long, value_name = "STEPS")]
    pub optimise_constants: Option<u32>,
    /// Generations between constant fits (1: every generation) [default: 5]
    #[arg(long, value_name = "G")]
    pub optimise_every: Option<usize>,
    /// Fraction of the population whose constants are fitted, the best first [default: 0.2]
    #[arg(long, value_name = "F")]
    pub optimise_fraction: Option<f64>,
}

impl FitArgs {
    /// Constant fitting as asked, each setting not given taken from `defaults(on_gpu)` for
    /// the device the run will use.
    pub fn config(&self, device: DeviceChoice, defaults: fn(bool) -> ConstantFitting) -> ConstantFitting {
        let d = defaults(device.has_gpu());
        ConstantFitting {
            steps: self.optimise_constants.unwrap_or(d.steps),
            every: self.optimise_every.unwrap_or(d.every),
            fraction: self.optimise_fraction.unwrap_or(d.fraction),
        }
    }
}
