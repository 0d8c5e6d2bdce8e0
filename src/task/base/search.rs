//! The search base of the tasks: what regression, classification and control share, so that no
//! task is another's base. The result of a run, the checks of the engine's and GE's settings,
//! the tree settings of programs with output nodes (classification and control), the search
//! itself (the grammar loaded and compiled, or the function set's trees, evolved on the
//! task's islands), and the parts of the report and summary every task writes alike
//! (generations, island statistics, the devices, the hall of fame of a task without
//! validation rows).

use anyhow::{Context, Result, bail};

use super::defaults::GeConfigs;
use super::run::{FameRow, RunObserver};
use crate::evolve::{EngineConfig, GenerationStats, IslandConfig, Outcome, TreeRep};
use crate::grammar::template::Templates;
use crate::program::tree::Node;

/// The result of a run, ready to print and to write as the JSON report.
pub struct EvolveResult {
    /// The JSON report (`settings`, `generations`, `best`, `train`, `test`, `model`, `timing`,
    /// `version`).
    pub report: serde_json::Value,
    /// Lines to print for a person.
    pub summary: String,
}

/// Largest population, and largest population times islands: rows are indexed by 32-bit
/// numbers on every device.
pub const MAX_POP: usize = u32::MAX as usize;
/// Most generations a run may ask for (each is a line of the report).
pub const MAX_GENERATIONS: usize = 1_000_000;
/// Longest genome (`--genome-length`, `--genome-capacity`), in codons.
pub const MAX_GENOME: usize = 1 << 16;
/// Most extra passes over a genome (`--wraps`, also `grove map` and `grove bench`).
pub const MAX_WRAPS: u32 = 100;

/// Checks that a count `n` is in `least..=most`; the error names `what` (the flag and the
/// experiment-file field) and the bound it crosses.
pub fn check_count(what: &str, n: usize, least: usize, most: usize) -> Result<()> {
    anyhow::ensure!(n >= least, "{what} must be at least {least}, got {n}");
    anyhow::ensure!(n <= most, "{what} must be at most {most}, got {n}");
    Ok(())
}

/// Checks the engine's settings (shared by every task): every count within what its meaning
/// allows, before anything is allocated.
pub fn check_engine(e: &EngineConfig) -> Result<()> {
    use anyhow::ensure;
    check_count("--pop (engine.pop_size)", e.pop_size, 2, MAX_POP)?;
    check_count("--gens (engine.generations)", e.generations, 0, MAX_GENERATIONS)?;
    check_count("--tournament (engine.tournament)", e.tournament, 1, usize::MAX)?;
    ensure!(
        e.tournament <= e.pop_size,
        "--tournament (engine.tournament) must be at most the population (--pop {}), got {}",
        e.pop_size,
        e.tournament
    );
    ensure!(
        e.elite < e.pop_size,
        "--elite (engine.elite) must be less than the population (--pop {}), got {}",
        e.pop_size,
        e.elite
    );
    ensure!((1..=65535).contains(&e.max_len), "--max-len (engine.max_len) must be in 1..=65535, got {}", e.max_len);
    ensure!(
        (1.0..=2.0).contains(&e.size_pressure),
        "--size-pressure (engine.size_pressure) must be in [1, 2], got {}",
        e.size_pressure
    );
    e.constants.check()
}

/// Checks the engine's and the islands' settings together: each alone, then the population
/// of all islands at most [`MAX_POP`].
pub fn check_search(e: &EngineConfig, islands: &IslandConfig) -> Result<()> {
    check_engine(e)?;
    islands.check(e.pop_size)?;
    anyhow::ensure!(
        e.pop_size.saturating_mul(islands.count) <= MAX_POP,
        "--pop × --islands (engine.pop_size × islands.count) must be at most {MAX_POP}, got {} × {}",
        e.pop_size,
        islands.count
    );
    Ok(())
}

/// Checks GE's settings: variation probabilities, wraps and genome lengths.
pub fn check_ge(ge: &GeConfigs) -> Result<()> {
    use anyhow::ensure;
    let v = &ge.vary;
    ensure!((0.0..=1.0).contains(&v.crossover), "--crossover (vary.crossover) must be a probability, got {}", v.crossover);
    ensure!((0.0..=1.0).contains(&v.mutation), "--mutation (vary.mutation) must be a probability, got {}", v.mutation);
    ensure!(ge.map.max_wraps <= MAX_WRAPS, "--wraps (map.max_wraps) must be at most {MAX_WRAPS}, got {}", ge.map.max_wraps);
    check_count("--genome-length (init.length)", ge.init.length, 1, MAX_GENOME)?;
    check_count("--genome-capacity (genome_capacity)", ge.genome_capacity, ge.init.length, MAX_GENOME)?;
    Ok(())
}

/// Settings of tree GP for programs with output nodes, classification and control (used with
/// `functions`).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassTreeSettings {
    /// Fixed constants a constant leaf may take (EvoGP: −1, 0, 1).
    pub constants: Vec<f32>,
    /// Probability that a leaf is a constant.
    pub p_const: f32,
    /// Depths of ramped half-and-half initialisation (root = 0).
    pub init_depth: (u32, u32),
    /// Probability that a node of a new tree or subtree becomes an extra output node.
    pub p_out: f32,
    /// Probability that a child is made by crossover.
    pub p_crossover: f32,
    /// Probability that a child is then mutated.
    pub p_mutation: f32,
}

impl Default for ClassTreeSettings {
    fn default() -> Self {
        Self {
            constants: vec![-1.0, 0.0, 1.0],
            p_const: 0.2,
            init_depth: (2, 4),
            p_out: super::defaults::CLASSIFY_P_OUT,
            p_crossover: 0.9,
            p_mutation: 0.3,
        }
    }
}

impl ClassTreeSettings {
    /// The engine's tree representation for `functions` over `n_vars` variables and
    /// `n_outputs` output slots (0: single output).
    pub fn rep(&self, functions: &str, n_vars: usize, n_outputs: usize, max_len: usize) -> Result<TreeRep> {
        let spec = crate::program::TreeSpec::new(function_set(functions)?, n_vars as u32, max_len)
            .with_constants(&self.constants)
            .with_p_const(self.p_const)
            .with_outputs(n_outputs, if n_outputs > 0 { self.p_out } else { 0.0 })
            .with_depth(self.init_depth.0, self.init_depth.1);
        Ok(tree_rep(spec, self.p_crossover, self.p_mutation))
    }
}

/// Registers a run's own operators (`--define`, an experiment's `operators`) so that its
/// function set and grammar can name them; a bad definition is an error line naming it.
pub fn register_operators(defs: &[String]) -> Result<()> {
    crate::program::ops::user::register(defs).map(drop).map_err(|e| anyhow::anyhow!("--define (operators): {e}"))
}

/// The operators of a function set (`add,sub,mul,div`), an error naming `--functions` if it
/// does not parse.
pub fn function_set(functions: &str) -> Result<Vec<crate::program::ops::Op>> {
    crate::program::ops::parse_function_set(functions).map_err(|e| anyhow::anyhow!("--functions: {e}"))
}

/// Tree GP's representation of every task: trees as `spec` makes them; a child made by
/// one-point crossover with probability `p_crossover`, then mutated with probability
/// `p_mutation` by subtree, point, hoist (half as often) or constant mutation.
pub fn tree_rep(spec: crate::program::TreeSpec, p_crossover: f32, p_mutation: f32) -> TreeRep {
    use crate::program::{BreedConfig, Crossover, Mutation, VaryConfig};
    TreeRep {
        vary: VaryConfig::new(spec),
        breed: BreedConfig {
            p_crossover,
            crossovers: vec![(Crossover::OnePoint, 1.0)],
            p_mutation,
            mutations: vec![(Mutation::Subtree, 1.0), (Mutation::Point, 1.0), (Mutation::Hoist, 0.5), (Mutation::Constant, 1.0)],
        },
    }
}

/// What a search takes from a task's settings: the engine, the islands, the representation
/// (a grammar, else a function set) and the settings of grammatical evolution.
pub struct SearchSettings<'s> {
    /// Population, generations, seed, selection, program length.
    pub engine: &'s EngineConfig,
    /// Islands and migration.
    pub islands: &'s IslandConfig,
    /// Grammar for grammatical evolution (a path or the grammar's text).
    pub grammar: Option<&'s str>,
    /// Function set for tree GP.
    pub functions: Option<&'s str>,
    /// Mapping, initialisation, variation and genome capacity of grammatical evolution.
    pub ge: GeConfigs,
}

impl<'s> SearchSettings<'s> {
    /// The search settings of a task's settings, from the fields every task's settings have.
    pub fn of(engine: &'s EngineConfig, islands: &'s IslandConfig, grammar: &'s Option<String>, functions: &'s Option<String>, ge: GeConfigs) -> Self {
        Self { engine, islands, grammar: grammar.as_deref(), functions: functions.as_deref(), ge }
    }
}

/// What a task's programs read and write, and how its trees are made.
pub struct Programs<'a> {
    /// The variables a program reads, by name.
    pub names: &'a [String],
    /// Output slots (0: one output, the program's value).
    pub n_outputs: usize,
    /// What the programs are for, completing "GRAMMAR cannot be used …" when the grammar does
    /// not compile for them (e.g. "for evaluation").
    pub purpose: String,
    /// A further check of the compiled grammar (its path or name given), e.g. that its output
    /// nodes cover every actuator.
    pub check: &'a dyn Fn(&Templates, &str) -> Result<()>,
    /// The tree representation of a function set.
    pub trees: &'a dyn Fn(&str) -> Result<TreeRep>,
}

/// A check of the compiled grammar that accepts every grammar.
pub fn any_grammar(_: &Templates, _: &str) -> Result<()> {
    Ok(())
}

/// Evolves `task`'s programs as `settings` say: a grammar is loaded for the programs' data
/// shape and compiled for their variables and outputs, or the function set's trees are made;
/// then the islands evolve, resuming where the observer's checkpoint left off. Ends the
/// observer's progress display and turns a stop into [`super::run::Stopped`].
pub fn evolve(settings: &SearchSettings<'_>, programs: &Programs<'_>, task: &dyn crate::evolve::Fitness, observer: &mut RunObserver<'_>) -> Result<Outcome> {
    use crate::evolve::{self, GrammarRep, Representation};
    use crate::grammar::{self, DatasetShape};

    let resume = observer.resume()?;
    let outcome = match (settings.grammar, settings.functions) {
        (Some(path), _) => {
            let n = programs.names.len() as u32;
            let shape = DatasetShape { n_vars: Some(n), n_is: Some(n), n_os: Some(programs.n_outputs.max(1) as u32) };
            let loaded = grammar::load_spec(path, &shape)?;
            let vars = grammar::template::Vars { names: programs.names.to_vec(), n_outputs: programs.n_outputs };
            let templates = grammar::template::compile(&loaded.grammar, &loaded.table, &vars)
                .with_context(|| format!("{} cannot be used {}", grammar::spec_name(path), programs.purpose))?;
            (programs.check)(&templates, grammar::spec_name(path))?;
            let ge = &settings.ge;
            let rep = GrammarRep {
                table: &loaded.table,
                templates: &templates,
                map: ge.map,
                init: ge.init,
                vary: ge.vary,
                genome_capacity: ge.genome_capacity,
            };
            evolve::run(settings.engine, settings.islands, Representation::Grammar(&rep), task, resume, observer)
        }
        (None, Some(functions)) => {
            let rep = (programs.trees)(functions)?;
            evolve::run(settings.engine, settings.islands, Representation::Trees(&rep), task, resume, observer)
        }
        (None, None) => bail!("give either --grammar FILE or --functions LIST"),
    };
    observer.finish();
    outcome.map_err(|e| observer.explain(e))
}

/// Says, unless quiet ([`super::run::RunOptions::say`]), that bloat control keeps selection and
/// variation on the CPU of a GPU run.
pub fn note_bloat(engine: &EngineConfig, backend: &crate::backend::Backend, opts: &super::run::RunOptions) {
    use crate::select::Bloat;
    if matches!(engine.bloat, Bloat::DoubleTournament | Bloat::Lexicographic) && matches!(backend, crate::backend::Backend::Cuda(_)) && !opts.quiet {
        opts.say("note: --bloat double-tournament and lexicographic keep selection and variation on the CPU (the device loop runs plain and NSGA-II tournaments); evaluation stays on the GPU");
    }
}

/// The summary's last line about a run that stayed on the GPU (empty otherwise).
pub fn device_loop_line(outcome: &Outcome) -> String {
    match &outcome.transfers {
        Some(t) => format!(
            "\ndevice loop   {} generations on the GPU; {} bytes of population copied to the host between them",
            t.generations, t.population_bytes_between_generations
        ),
        None => String::new(),
    }
}

/// The hall of fame's Pareto front as rows, for a task without validation rows; `render` gives
/// a tree's (infix, LaTeX, sympy) and `parsimony` is taken off each fitness to give the loss.
/// No row is marked selected. (Regression and classification score the front on their
/// validation rows instead: [`super::validation::front_rows`].)
pub fn fame_rows(
    hof: &crate::evolve::hof::HallOfFame,
    parsimony: f64,
    render: impl Fn(&[Node]) -> Result<(String, String, String)>,
) -> Result<Vec<FameRow>> {
    let front = hof.front(|e| e.fitness - parsimony * e.nodes.len() as f64);
    let cands: Vec<_> = front.iter().map(|(n, _, loss)| super::validation::Candidate { size: *n, loss: *loss, validation: None, description: None, cv: None }).collect();
    super::validation::front_rows(&front, &cands, None, render)
}

/// The generations of a run as the report holds them (`median_sizes` by generation).
pub fn generations_json(history: &[GenerationStats], median_sizes: &[f64]) -> Vec<serde_json::Value> {
    history
        .iter()
        .map(|s| {
            serde_json::json!({"generation": s.generation, "best": crate::report::num(s.best),
                "mean": crate::report::num(s.mean), "mean_size": crate::report::num(s.mean_size),
                "median_size": median_sizes.get(s.generation).copied().map(crate::report::num),
                "invalid": s.invalid, "seconds": s.seconds})
        })
        .collect()
}

/// The devices of a run: the backend's description, and how many more GPUs its islands used.
pub fn describe_devices(backend: &crate::backend::Backend, more: &[crate::backend::Backend]) -> String {
    match more.len() {
        0 => backend.describe(),
        n => format!("{} and {n} more GPU{}", backend.describe(), if n == 1 { "" } else { "s" }),
    }
}

/// Adds each island's statistics to the report's generations, when the run had several
/// islands: `islands`, one entry per island (`best`, `mean`, `mean_size`, `invalid`; with
/// `returns`, a control run's `best_return` and `mean_return` instead of the fitness).
pub fn add_island_stats(generations: &mut [serde_json::Value], island_history: &[Vec<GenerationStats>], returns: bool) {
    use crate::report::num;
    for (g, each) in generations.iter_mut().zip(island_history) {
        g["islands"] = each
            .iter()
            .map(|s| {
                if returns {
                    serde_json::json!({"best_return": num(-s.best), "mean_return": num(-s.mean), "mean_size": num(s.mean_size), "invalid": s.invalid})
                } else {
                    serde_json::json!({"best": num(s.best), "mean": num(s.mean), "mean_size": num(s.mean_size), "invalid": s.invalid})
                }
            })
            .collect();
    }
}

/// Islands whose best the summary's line shows; the rest are counted.
pub const SUMMARY_ISLANDS: usize = 8;

/// The summary's line about islands (none for one island): how many, of what size, how they
/// migrated, and the best in the last generation of the first [`SUMMARY_ISLANDS`] islands (a
/// return, with `returns`) and how many more there are (the report holds every island's).
pub fn islands_summary(islands: &IslandConfig, pop: usize, island_history: &[Vec<GenerationStats>], returns: bool) -> Option<String> {
    let last = island_history.last()?;
    let mut bests: Vec<String> =
        last.iter().take(SUMMARY_ISLANDS).map(|s| if returns { format!("{:.2}", -s.best) } else { format!("{:.4e}", s.best) }).collect();
    if last.len() > SUMMARY_ISLANDS {
        bests.push(format!("… ({} more in the report)", last.len() - SUMMARY_ISLANDS));
    }
    let migration = if islands.migrants == 0 {
        "no migration".to_string()
    } else {
        format!("{} migrants every {} generations", islands.migrants, islands.migrate_every)
    };
    let what = if returns { "best returns" } else { "best" };
    Some(format!("islands       {} × {pop}, {migration}; {what} {}\n", islands.count, bests.join(" ")))
}

/// Lays `over` onto `base`: blocks merge field by field, anything else replaces (settings given
/// as JSON fields over a command's defaults).
pub fn merge(base: &mut serde_json::Value, over: serde_json::Value) {
    use serde_json::Value;
    match (base, over) {
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
                match b.get_mut(&k) {
                    Some(slot) if slot.is_object() && v.is_object() => merge(slot, v),
                    _ => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (b, o) => *b = o,
    }
}

/// Whether a model has linear terms of the inputs beside its program (`--linear-inputs`, the
/// experiment field `linear_inputs`): a line in the inputs added to a regression program's
/// value (`program::linear`), or one per output added to a classifier's logits
/// (`program::logistic`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LinearInputs {
    /// Where they predict unseen rows better than the mean or the class frequencies
    /// (regression: generalised cross-validation and a shorter description; classification:
    /// 5-fold cross-validated cross-entropy); regression leaves them out with
    /// `--no-linear-scaling`, `--metric mae`, `--shard-rows` and on a GPU, classification with
    /// `--optimise-constants` and past its size limits.
    Auto,
    /// Always, where the inputs have a spread.
    On,
    /// Never: the program alone.
    Off,
}

impl Default for LinearInputs {
    fn default() -> Self {
        super::defaults::EVOLVE_LINEAR_INPUTS
    }
}


/// Where a run's wall time went (issue 30): setup before the search (data, checks, devices
/// opened), the search (every generation, constant fitting and the kernels compiled or read
/// on the way included), and the final scoring and choosing after it; beside the first
/// generation's seconds (which hold the kernels' compiles and the data's copies) and the median
/// of the others, so that a cost only some generations pay shows. The report's `timing` holds
/// it ([`Split::add_to`]) and the summary prints [`Split::line`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Split {
    /// Seconds before the search.
    pub setup: f64,
    /// Seconds of the search.
    pub search: f64,
    /// Seconds after it, to the report.
    pub finish: f64,
    /// The first generation's seconds (this process's first, for a resumed run; NaN for a
    /// search of none).
    pub first_generation: f64,
    /// The median of the other generations' seconds (NaN where there are none).
    pub median_generation: f64,
    /// Kernel modules the backend compiled or read from disk, and their seconds.
    pub kernels: crate::backend::KernelLoads,
}

impl Split {
    /// The split of a run whose generations took `generations` seconds each.
    pub fn of(setup: f64, search: f64, finish: f64, generations: &[f64], kernels: crate::backend::KernelLoads) -> Split {
        let mut rest: Vec<f64> = generations.iter().skip(1).copied().collect();
        rest.sort_by(f64::total_cmp);
        let median = if rest.is_empty() { f64::NAN } else { rest[rest.len() / 2] };
        Split { setup, search, finish, first_generation: generations.first().copied().unwrap_or(f64::NAN), median_generation: median, kernels }
    }

    /// Adds the split to `report["timing"]`: `setup_seconds`, `search_seconds`,
    /// `final_seconds`, `first_generation_seconds`, `median_generation_seconds`,
    /// `kernels_compiled`, `kernels_from_disk`, `kernel_seconds`.
    pub fn add_to(&self, report: &mut serde_json::Value) {
        use crate::report::num;
        let fields = [
            ("setup_seconds", serde_json::json!(self.setup)),
            ("search_seconds", serde_json::json!(self.search)),
            ("final_seconds", serde_json::json!(self.finish)),
            ("first_generation_seconds", num(self.first_generation)),
            ("median_generation_seconds", num(self.median_generation)),
            ("kernels_compiled", serde_json::json!(self.kernels.compiled)),
            ("kernels_from_disk", serde_json::json!(self.kernels.from_disk)),
            ("kernel_seconds", serde_json::json!(self.kernels.seconds)),
        ];
        if let Some(t) = report.get_mut("timing").and_then(serde_json::Value::as_object_mut) {
            for (k, v) in fields {
                t.insert(k.into(), v);
            }
        }
    }

    /// The summary's line: `split  setup …, search … (first generation …, then … median; kernels …),
    /// final …` (`what` names a generation: `generation` or `iteration`).
    pub fn line(&self, what: &str) -> String {
        let ms = |s: f64| if s < 1.0 { format!("{:.1} ms", s * 1e3) } else { format!("{s:.2} s") };
        let mut gens = format!("first {what} {}", ms(self.first_generation));
        if self.median_generation.is_finite() {
            gens += &format!(", then {} median", ms(self.median_generation));
        }
        let k = &self.kernels;
        if k.compiled + k.from_disk > 0 {
            gens += &format!("; kernels {} ({} compiled, {} from disk)", ms(k.seconds), k.compiled, k.from_disk);
        }
        format!("split         setup {}, search {} ({gens}), final scoring {}\n", ms(self.setup), ms(self.search), ms(self.finish))
    }
}

#[cfg(test)]
mod split_tests {
    use super::*;

    #[test]
    fn the_split_keeps_the_first_generation_apart_from_the_median_of_the_rest() {
        let k = crate::backend::KernelLoads { compiled: 2, from_disk: 1, seconds: 0.25 };
        let s = Split::of(0.01, 1.5, 0.02, &[0.9, 0.1, 0.3, 0.2], k);
        assert_eq!((s.first_generation, s.median_generation), (0.9, 0.2));
        assert_eq!(s.line("generation"), "split         setup 10.0 ms, search 1.50 s (first generation 900.0 ms, then 200.0 ms median; kernels 250.0 ms (2 compiled, 1 from disk)), final scoring 20.0 ms\n");
        let mut r = serde_json::json!({"timing": {"seconds": 1.53}});
        s.add_to(&mut r);
        assert_eq!(r["timing"]["median_generation_seconds"], 0.2);
        assert_eq!(r["timing"]["kernels_compiled"], 2);
        assert_eq!(r["timing"]["seconds"], 1.53, "the total stays");
        // One generation: no median; the CPU: no kernels.
        let one = Split::of(0.0, 0.5, 0.0, &[0.5], crate::backend::KernelLoads::default());
        assert!(one.median_generation.is_nan());
        assert!(!one.line("iteration").contains("median") && !one.line("iteration").contains("kernels"));
        assert!(one.line("iteration").contains("first iteration 500.0 ms"));
        let mut r = serde_json::json!({"timing": {}});
        one.add_to(&mut r);
        assert!(r["timing"]["median_generation_seconds"].is_null());
    }
}
