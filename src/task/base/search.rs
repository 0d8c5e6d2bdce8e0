//! The search base of the tasks: what regression, classification and control share, so that no
//! task is another's base. The result of a run, the checks of the engine's and GE's settings,
//! the tree settings of programs with output nodes (classification and control), the search
//! itself (the grammar loaded and compiled, or the function set's trees, evolved on the
//! task's islands), and the checks of a grammar's output slots. The report's common blocks are
//! in [`super::report`].

use anyhow::{Context, Result, bail};

use super::defaults::GeConfigs;
use super::observer::RunObserver;
use crate::evolve::{EngineConfig, IslandConfig, Outcome, TreeRep};
use crate::grammar::template::Templates;

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
    crate::select::check_down_sample(e.down_sample).map_err(|m| anyhow::anyhow!(m))?;
    if e.selection.is_lexicase() {
        use crate::select::Bloat;
        ensure!(
            matches!(e.bloat, Bloat::None | Bloat::Auto),
            "--selection {} replaces the parent tournament, so --bloat {} (which works through tournaments) cannot run with it: use --bloat none or --parsimony",
            flag_value(e.selection),
            flag_value(e.bloat)
        );
    }
    e.constants.check()
}

/// The name a flag gives `v` (`double-tournament`).
fn flag_value(v: impl clap::ValueEnum) -> String {
    v.to_possible_value().map_or_else(String::new, |p| p.get_name().to_string())
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

/// Checks that `--diversity unique` has parents to choose among: it picks them among unique
/// programs in the tournaments and in lexicase, and NSGA-II (`--bloat nsga2`, or `auto` where
/// it resolves to NSGA-II: tree GP without constant fitting) ranks duplicates behind by itself,
/// so there the flag would change nothing and is refused with a line that says what to give.
pub fn check_diversity(e: &EngineConfig, grammar: bool) -> Result<()> {
    use crate::select::{Bloat, Diversity};
    if e.diversity != Diversity::Unique || e.selection.is_lexicase() {
        return Ok(());
    }
    let bloat = e.bloat.resolved(e.constants.steps > 0, grammar);
    anyhow::ensure!(
        bloat != Bloat::Nsga2,
        "--diversity unique (engine.diversity) chooses parents among unique programs, and this run's bloat control is NSGA-II{}, which ranks duplicates behind by itself: leave --diversity out, or give --bloat none, double-tournament or lexicographic to use it",
        if e.bloat == Bloat::Auto { " (--bloat auto, for tree GP without constant fitting)" } else { "" }
    );
    Ok(())
}

/// Checks GE's settings: variation probabilities, wraps and genome lengths.
pub fn check_ge(ge: &GeConfigs) -> Result<()> {
    use anyhow::ensure;
    let v = &ge.vary;
    ensure!((0.0..=1.0).contains(&v.crossover), "--crossover (vary.crossover) must be a probability, got {}", v.crossover);
    ensure!((0.0..=1.0).contains(&v.mutation), "--mutation (vary.mutation) must be a probability, got {}", v.mutation);
    ensure!(
        !((v.mutation_per_used || v.mutation_at_least_per_used) && v.mutation_op != crate::genome::vary::GeMutation::IntFlip),
        "vary.mutation_per_used and vary.mutation_at_least_per_used are rates of int-flip, and vary.mutation_op is {:?}",
        v.mutation_op
    );
    ensure!(
        !(v.mutation_per_used && v.mutation_at_least_per_used),
        "vary.mutation_per_used (1 / the used codons) and vary.mutation_at_least_per_used (the larger of vary.mutation and that) are two rates of int-flip: set one"
    );
    ensure!(ge.map.max_wraps <= MAX_WRAPS, "--wraps (map.max_wraps) must be at most {MAX_WRAPS}, got {}", ge.map.max_wraps);
    check_count("--genome-length (init.length)", ge.init.length, 1, MAX_GENOME)?;
    check_count("--genome-capacity (genome_capacity)", ge.genome_capacity, ge.init.length, MAX_GENOME)?;
    if ge.init.method != crate::genome::InitMethod::Random {
        ensure!(
            ge.init.min_depth >= 1 && ge.init.min_depth <= ge.init.max_depth,
            "--init-depth {},{} (init.min_depth, init.max_depth): need 1 <= MIN <= MAX",
            ge.init.min_depth,
            ge.init.max_depth
        );
        ensure!(
            ge.init.max_depth <= ge.map.max_depth,
            "--max-depth {} (map.max_depth) is shallower than the initial trees of --init-depth {},{} (init.min_depth, init.max_depth), which would all be invalid: give a --max-depth of at least {} or a smaller --init-depth",
            ge.map.max_depth,
            ge.init.min_depth,
            ge.init.max_depth,
            ge.init.max_depth
        );
    }
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
            p_crossover: super::defaults::TREE_P_CROSSOVER,
            p_mutation: super::defaults::TREE_P_MUTATION,
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

/// Tree GP's two rates, as every task checks them: each a probability (`--crossover P` and
/// `--mutation P` without a grammar, or `trees.p_crossover` and `trees.p_mutation`).
pub fn check_tree_rates(p_crossover: f32, p_mutation: f32) -> Result<()> {
    for (flag, field, p) in [("--crossover", "p_crossover", p_crossover), ("--mutation", "p_mutation", p_mutation)] {
        anyhow::ensure!((0.0..=1.0).contains(&p), "{flag} (trees.{field}) must be a probability in [0, 1], got {p}");
    }
    Ok(())
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

/// Whether a grammar's templates write any output slot (`out(K, …)`).
pub fn writes_output_slots(templates: &crate::grammar::template::Templates) -> bool {
    templates.expr.iter().flatten().flatten().any(|item| matches!(item, crate::grammar::template::Item::Output(_)))
}

/// Checks that a grammar writes at least `k` output slots: a literal `out(K, …)` writes slot
/// K; an `out(<k>, …)` spelled by a rule (e.g. `GE_RANGE:dataset_n_os`) may write any of the
/// `k` slots.
pub fn check_grammar_slots(templates: &crate::grammar::template::Templates, k: usize, path: &str) -> anyhow::Result<()> {
    use crate::grammar::template::{Item, Part};
    let (mut literal, mut spelled) = (std::collections::BTreeSet::new(), false);
    for item in templates.expr.iter().flatten().flatten() {
        if let Item::Output(parts) = item {
            match parts.as_slice() {
                [Part::Text(t)] => {
                    literal.insert(t.trim().to_string());
                }
                _ => spelled = true,
            }
        }
    }
    let slots = if spelled { k } else { literal.len() };
    anyhow::ensure!(
        slots >= k,
        "{path} writes {slots} output slot{} (out(K, …)) but --outputs (outputs) asks for {k}: give a grammar with out(0, …) to out({}, …), or --outputs {}",
        if slots == 1 { "" } else { "s" },
        k - 1,
        slots.max(1)
    );
    Ok(())
}

/// Evolves `task`'s programs as `settings` say: a grammar is loaded for the programs' data
/// shape and compiled for their variables and outputs, or the function set's trees are made;
/// then the islands evolve, resuming where the observer's checkpoint left off. Ends the
/// observer's progress display and turns a stop into [`super::options::Stopped`].
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
            anyhow::ensure!(
                !templates.has_slots() || settings.engine.constants.steps > 0,
                "{} writes constants c[i], whose values Levenberg–Marquardt fits: give --optimise-constants N \
                 (engine.constants.steps, e.g. 10; with --optimise-every 1 --optimise-fraction 1 every program is fitted, as PonyGE2 fits them){}",
                grammar::spec_name(path),
                if programs.n_outputs > 0 && programs.purpose.starts_with("as a policy") { "; grove control fits no constants" } else { "" }
            );
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

/// Says, unless quiet ([`super::options::RunOptions::say`]), that bloat control keeps selection and
/// variation on the CPU of a GPU run.
pub fn note_bloat(engine: &EngineConfig, backend: &crate::backend::Backend, opts: &super::options::RunOptions) {
    use crate::select::Bloat;
    if matches!(engine.bloat, Bloat::DoubleTournament | Bloat::Lexicographic) && backend.is_gpu() && !opts.quiet {
        opts.say("note: --bloat double-tournament and lexicographic keep selection and variation on the CPU (the device loop runs plain and NSGA-II tournaments); evaluation stays on the GPU");
    }
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
