//! What a regression run is given: its settings as reports and experiment files store them
//! ([`EvolveSettings`], [`TreeSettings`]), their checks, their defaults, and the data they
//! name.

use super::*;

/// The constant fitting `--optimise-constants STEPS` asks for: STEPS Levenberg–Marquardt steps
/// every 5 generations on the best 20 % (10 steps were chosen by a side-by-side run of nine
/// settings on Friedman 1-3 and diabetes, docs/benchmarks.md, "Constants fitted by
/// Levenberg–Marquardt", and were a GPU's default until the suite below).
pub const FITTING: crate::evolve::ConstantFitting = crate::evolve::ConstantFitting { steps: 10, every: 5, fraction: 0.2 };

/// `grove evolve`'s constant fitting on either device: none (0 steps, the schedule of
/// [`FITTING`]). On the CPU the fit costs about 19 times a plain run (the CPU reference walks
/// each tree point by point). On a GPU it was the default until the quality suite ran there
/// (docs/quality.md, issue 56, 2026-12-05, an H100, 30 sets, 10 splits): with the model choice
/// and the linear terms, fitting met the target on 14 sets and no fitting (with the NSGA-II
/// that `--bloat auto` then runs) on 15, Friedman-1 0.909 against 0.949 with programs of 35
/// nodes against 14; no set of more than 12 training rows gained from fitting by more than
/// 0.007 (cpunish, 12 rows: −0.70 against −1.32, both far below the mean's 0).
pub fn default_fit(_on_gpu: bool) -> crate::evolve::ConstantFitting {
    crate::evolve::ConstantFitting { steps: 0, ..FITTING }
}

/// Everything a `grove evolve` run needs; stored in the report so the run can be repeated.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvolveSettings {
    /// `builtin:NAME[:N]` or a CSV / tab-separated file.
    pub data: String,
    /// Target column (default: the last).
    pub target: Option<String>,
    /// Fraction of rows held out for testing (0: use the built-in's own test set, if any).
    pub test_fraction: f64,
    /// A test file of its own (`--test-data`): the same columns as the training data, by name;
    /// its rows are scored beside the training rows and evolution never sees them (the
    /// training data is then not split: `test_fraction` must be 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_data: Option<String>,
    /// Fraction of the training rows held out to choose the returned program (`None`: the
    /// automatic choice of [`crate::task::base::validation::Plan::new`]).
    #[serde(default)]
    pub validation_fraction: Option<f64>,
    /// How the returned program is chosen from the hall of fame's front.
    #[serde(default)]
    pub select: crate::task::base::validation::Select,
    /// Folds of `select: folds` (`None`: [`crate::task::base::defaults::FOLDS`], fewer where the
    /// training rows are fewer); more than the training rows is an error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub folds: Option<usize>,
    /// Grammar file for grammatical evolution (`None`: tree GP from `functions`).
    pub grammar: Option<String>,
    /// Function set for tree GP, e.g. `add,sub,mul,div,sin`.
    pub functions: Option<String>,
    /// Operators of the user's own (`--define`), e.g. `softsign(x) = x / (1 + abs(x))`, which
    /// the function set and the grammar may name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub operators: Vec<String>,
    /// Population, generations, seed, selection, program length.
    pub engine: crate::evolve::EngineConfig,
    /// GE: mapping limits.
    pub map: crate::genome::MapConfig,
    /// GE: initialisation.
    pub init: crate::genome::InitConfig,
    /// GE: crossover and mutation.
    pub vary: crate::genome::vary::GeVaryConfig,
    /// GE: longest genome.
    pub genome_capacity: usize,
    /// Error measure, scaling, parsimony.
    pub regression: RegressionConfig,
    /// A per-row loss of the user's own, an expression of the prediction `p` and the target
    /// `y` (`--loss "abs(p - y)"`): what evolution minimises instead of `regression.metric`,
    /// at the linearly scaled prediction where `regression.linear_scaling` is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss: Option<String>,
    /// How the rows' losses become the fitness: their mean (default) or sum.
    #[serde(default, skip_serializing_if = "is_mean")]
    pub loss_reduce: LossReduce,
    /// The name of a fitness function of the user's own (the Python package's `fitness=`),
    /// recorded: such a run scores its programs by calling it, so it runs from Python only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fitness_function: Option<String>,
    /// That function, for the run (not stored).
    #[serde(skip)]
    pub fitness_fn: Option<FitnessFn>,
    /// Program outputs read by a fitted linear head: 1 is the program's value (linearly scaled
    /// unless `regression.linear_scaling` is off); `2 ..= 8` are output slots (tree GP's output
    /// nodes, a grammar's `out(K, …)`) under `b + Σ w_k f_k` fitted by least squares.
    #[serde(default = "default_outputs")]
    pub outputs: usize,
    /// Linear terms of the inputs beside the program ([`crate::program::linear`]): `auto`
    /// keeps them where they predict unseen rows better than the mean and pay for their
    /// numbers; `on` always (where the inputs have a spread); `off` never.
    #[serde(default = "default_linear_inputs")]
    pub linear_inputs: LinearInputs,
    /// Limits on the returned model's predictions (`--output-margin M`): the training target's
    /// range widened by `M` times its width on each side (0: the range itself); `None`: no
    /// limits ([`crate::task::base::model::Model::limits`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_margin: Option<f64>,
    /// Tree GP: constants, initial depths, operator probabilities.
    pub trees: TreeSettings,
    /// Where populations are evaluated.
    #[serde(default)]
    pub device: crate::backend::DeviceChoice,
    /// Islands and migration (one island by default).
    #[serde(default)]
    pub islands: crate::evolve::IslandConfig,
    /// When the run ends before its last generation: a time limit, a target ([`crate::task::base::budget`]).
    #[serde(default)]
    pub budget: crate::task::base::budget::Budget,
}

/// Settings of tree GP (used with `functions`).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TreeSettings {
    /// Constant leaves are drawn uniformly from `[lo, hi)`.
    pub const_range: (f32, f32),
    /// Probability that a leaf is a constant.
    pub p_const: f32,
    /// Depths of ramped half-and-half initialisation (root = 0).
    pub init_depth: (u32, u32),
    /// Probability that a child is made by crossover.
    pub p_crossover: f32,
    /// Probability that a child is then mutated.
    pub p_mutation: f32,
}

impl Default for TreeSettings {
    fn default() -> Self {
        Self {
            const_range: (-2.0, 2.0),
            p_const: 0.2,
            init_depth: (2, 6),
            p_crossover: crate::task::base::defaults::TREE_P_CROSSOVER,
            p_mutation: crate::task::base::defaults::TREE_P_MUTATION,
        }
    }
}

/// Whether `r` is the default reduction (reports leave it out).
fn is_mean(r: &LossReduce) -> bool {
    *r == LossReduce::Mean
}

/// A fitness function of the user's own, shared by the run's tasks: compared by identity, shown
/// by its name.
#[derive(Clone)]
pub struct FitnessFn(pub std::sync::Arc<dyn BatchFitness>);

impl PartialEq for FitnessFn {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl std::fmt::Debug for FitnessFn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FitnessFn({})", self.0.name())
    }
}

/// The default of [`EvolveSettings::linear_inputs`]
/// ([`crate::task::base::defaults::EVOLVE_LINEAR_INPUTS`]).
fn default_linear_inputs() -> LinearInputs {
    crate::task::base::defaults::EVOLVE_LINEAR_INPUTS
}

/// The default of [`EvolveSettings::outputs`] ([`crate::task::base::defaults::EVOLVE_OUTPUTS`]).
fn default_outputs() -> usize {
    crate::task::base::defaults::EVOLVE_OUTPUTS
}

impl TreeSettings {
    /// The engine's tree representation for `functions` over `n_vars` variables.
    pub fn rep(&self, functions: &str, n_vars: usize, max_len: usize) -> anyhow::Result<crate::evolve::TreeRep> {
        self.rep_with_outputs(functions, n_vars, 0, max_len)
    }

    /// As [`Self::rep`], for programs with `n_outputs` output slots (0: the root's value):
    /// each slot is placed once in a new tree, and extra output nodes appear with probability
    /// [`crate::task::base::defaults::EVOLVE_P_OUT`].
    pub fn rep_with_outputs(
        &self,
        functions: &str,
        n_vars: usize,
        n_outputs: usize,
        max_len: usize,
    ) -> anyhow::Result<crate::evolve::TreeRep> {
        let p_out = if n_outputs > 0 { crate::task::base::defaults::EVOLVE_P_OUT } else { 0.0 };
        let spec = crate::program::TreeSpec::new(crate::task::base::search::function_set(functions)?, n_vars as u32, max_len)
            .with_const_range(self.const_range.0, self.const_range.1)
            .with_p_const(self.p_const)
            .with_outputs(n_outputs, p_out)
            .with_depth(self.init_depth.0, self.init_depth.1);
        Ok(crate::task::base::search::tree_rep(spec, self.p_crossover, self.p_mutation))
    }
}

impl Default for EvolveSettings {
    /// `grove evolve`'s defaults without a representation: set `grammar` or `functions`.
    fn default() -> Self {
        Self {
            data: crate::task::base::defaults::EVOLVE_DATA.into(),
            target: None,
            test_fraction: crate::task::base::defaults::EVOLVE_TEST_FRACTION,
            test_data: None,
            validation_fraction: None,
            select: crate::task::base::validation::Select::default(),
            folds: None,
            grammar: None,
            functions: None,
            operators: Vec::new(),
            engine: crate::evolve::EngineConfig::default(),
            map: crate::genome::MapConfig::default(),
            init: crate::genome::InitConfig::default(),
            vary: crate::genome::vary::GeVaryConfig::default(),
            genome_capacity: crate::task::base::defaults::GE.genome_capacity,
            regression: RegressionConfig::default(),
            loss: None,
            loss_reduce: LossReduce::Mean,
            fitness_function: None,
            fitness_fn: None,
            outputs: crate::task::base::defaults::EVOLVE_OUTPUTS,
            linear_inputs: crate::task::base::defaults::EVOLVE_LINEAR_INPUTS,
            output_margin: None,
            trees: TreeSettings::default(),
            device: crate::backend::DeviceChoice::default(),
            islands: crate::evolve::IslandConfig::default(),
            budget: crate::task::base::budget::Budget::default(),
        }
    }
}

/// The training and test data of `settings` (the test part is `None` without a test set): a
/// test file of its own (`test_data`, its columns those of the training data by name), a
/// seeded share of the rows (`test_fraction`), or a built-in's own test set.
pub fn load_data(settings: &EvolveSettings) -> anyhow::Result<(Dataset, Option<Dataset>)> {
    use anyhow::Context;
    let problem = crate::data::DataSource::parse(&settings.data)?.load(settings.target.as_deref())?;
    if let Some(path) = &settings.test_data {
        let test = crate::data::read_like(path, &problem.train).context("--test-data (test_data)")?;
        return Ok((problem.train, Some(test)));
    }
    Ok(if settings.test_fraction > 0.0 {
        let (tr, te) = crate::data::split(&problem.train, settings.test_fraction, settings.engine.seed)?;
        (tr, Some(te))
    } else {
        (problem.train, problem.test)
    })
}

impl EvolveSettings {
    /// `grove evolve`'s defaults with no flags on the CPU: tree GP over the default function
    /// set (`defaults::EVOLVE_FUNCTIONS`, which a `grammar` given replaces); no constant fitting
    /// on either device ([`default_fit`]).
    pub fn cli_default() -> Self {
        let ge = crate::task::base::defaults::GE.configs();
        Self {
            functions: Some(crate::task::base::defaults::EVOLVE_FUNCTIONS.into()),
            engine: crate::task::base::defaults::EVOLVE.config(default_fit(false)),
            map: ge.map,
            init: ge.init,
            vary: ge.vary,
            genome_capacity: ge.genome_capacity,
            ..Self::default()
        }
    }

    /// What the search takes from these settings.
    pub fn search_settings(&self) -> crate::task::base::search::SearchSettings<'_> {
        let ge = crate::task::base::defaults::GeConfigs { map: self.map, init: self.init, vary: self.vary, genome_capacity: self.genome_capacity };
        crate::task::base::search::SearchSettings::of(&self.engine, &self.islands, &self.grammar, &self.functions, ge)
    }

    /// Checks values the types allow but a run cannot use; each message names the flag and
    /// the experiment-file field.
    pub fn check(&self) -> anyhow::Result<()> {
        use anyhow::ensure;
        crate::task::base::search::register_operators(&self.operators)?;
        check_search(&self.engine, &self.islands)?;
        crate::task::base::search::check_tree_rates(self.trees.p_crossover, self.trees.p_mutation)?;
        self.budget.check(crate::task::base::budget::Measure::Loss)?;
        ensure!((0.0..1.0).contains(&self.test_fraction), "--test-fraction (test_fraction) must be in [0, 1), got {}", self.test_fraction);
        crate::task::base::validation::check_test_data(self.test_data.as_deref(), self.test_fraction)?;
        crate::task::base::validation::check_fraction(self.validation_fraction)?;
        if let Some(m) = self.output_margin {
            ensure!(m >= 0.0 && m.is_finite(), "--output-margin (output_margin) must be a number at least 0, got {m}");
        }
        if let Some(k) = self.folds {
            ensure!(k >= 2, "--folds (folds) must be at least 2, got {k}");
        }
        let p = self.regression.parsimony;
        ensure!(p >= 0.0 && p.is_finite(), "--parsimony (regression.parsimony) must be >= 0, got {p}");
        check_scaling(&self.regression, self.outputs)?;
        self.check_own_fitness()?;
        if self.linear_inputs == LinearInputs::On {
            ensure!(
                self.regression.linear_scaling && self.regression.metric != Metric::Mae,
                "--linear-inputs on fits the terms and the program's weight by least squares, which --no-linear-scaling and --metric mae rule out: give one or the other"
            );
            ensure!(!self.islands.shard_rows, "--linear-inputs on is not split over GPUs: drop --shard-rows or use --linear-inputs off");
        }
        self::shard::check(&self.islands, self.device, self.outputs)?;
        ensure!(
            !(self.islands.shard_rows && self.engine.selection.is_lexicase()),
            "--selection lexicase and down-sampled read every program's error at each row, which --shard-rows splits over GPUs: use --selection tournament or drop --shard-rows"
        );
        check_ge(&self.search_settings().ge)?;
        crate::task::base::search::check_diversity(&self.engine, self.grammar.is_some())?;
        match (&self.grammar, &self.functions) {
            (None, None) => anyhow::bail!(
                "give --grammar FILE (grammatical evolution) or --functions LIST (tree GP), e.g. --grammar grammars/regression.bnf (in an experiment file: grammar or functions)"
            ),
            (Some(_), Some(_)) => anyhow::bail!("give --grammar or --functions, not both (in an experiment file: grammar or functions)"),
            _ => Ok(()),
        }
    }
}

impl EvolveSettings {
    /// The loss of the user's own, compiled (registered as an operator `loss(p, y)`), where the
    /// settings give one.
    pub fn compiled_loss(&self) -> anyhow::Result<Option<Loss>> {
        self.loss
            .as_deref()
            .map(|e| Loss::compile(e, self.loss_reduce).map_err(|m| anyhow::anyhow!("--loss (loss): {m}")))
            .transpose()
    }

    /// Refuses settings that name a fitness function without it (a report or checkpoint of a
    /// Python run, repeated elsewhere), in one line.
    pub fn check_fitness_fn(&self) -> anyhow::Result<()> {
        if let (Some(name), None) = (&self.fitness_function, &self.fitness_fn) {
            anyhow::bail!(
                "this run's fitness was the function `{name}` of a Python session (SymbolicRegressor(fitness_function=...)): it runs from Python only, given the function again"
            );
        }
        Ok(())
    }

    /// Whether programs are scored by a fitness of the user's own (a loss or a function), which
    /// the device loop does not run.
    pub fn own_fitness(&self) -> bool {
        self.loss.is_some() || self.fitness_function.is_some()
    }

    /// Checks a loss or fitness function of the user's own against the rest: it scores one
    /// prediction per row, so no head over several outputs, no linear terms (`on`), no rows
    /// split over GPUs; a function gives no error per row, so no lexicase selection.
    fn check_own_fitness(&self) -> anyhow::Result<()> {
        use anyhow::ensure;
        if self.loss.is_some() && self.fitness_function.is_some() {
            anyhow::bail!("give a loss (--loss, loss) or a fitness function (fitness_function), not both");
        }
        let what = if self.loss.is_some() { "--loss (loss)" } else if self.fitness_function.is_some() { "a fitness function (fitness_function)" } else { return Ok(()) };
        self.compiled_loss()?;
        ensure!(
            self.outputs <= 1,
            "{what} scores one prediction per row; --outputs {} fits a head over several outputs by least squares: use --outputs 1",
            self.outputs
        );
        ensure!(
            self.linear_inputs != LinearInputs::On,
            "{what} scores the program's prediction; --linear-inputs on adds least-squares terms of the inputs the loss would not see: use --linear-inputs off or auto"
        );
        ensure!(!self.islands.shard_rows, "{what} is not split over GPUs: drop --shard-rows");
        if self.fitness_function.is_some() {
            ensure!(
                !self.engine.selection.is_lexicase(),
                "a fitness function gives one score per program, not an error per row, which --selection lexicase and down-sampled read: use --selection tournament"
            );
        }
        Ok(())
    }
}

/// Refuses MAE with linear scaling or a head (least-squares fits), a head without linear
/// scaling, and more outputs than a head reads.
pub(super) fn check_scaling(r: &RegressionConfig, outputs: usize) -> anyhow::Result<()> {
    anyhow::ensure!(
        (1..=MAX_HEAD).contains(&outputs),
        "--outputs (outputs) asks for {outputs} program outputs; the fitted head reads 1 to {MAX_HEAD}"
    );
    if outputs > 1 {
        anyhow::ensure!(r.metric != Metric::Mae, "{}", mae_with_head(outputs));
        anyhow::ensure!(
            r.linear_scaling,
            "--outputs {outputs} fits a linear head by least squares, which --no-linear-scaling (regression.linear_scaling) turns off: give one or the other"
        );
    }
    if r.linear_scaling && r.metric == Metric::Mae {
        anyhow::bail!("--metric mae cannot be used with linear scaling (it is a least-squares fit): add --no-linear-scaling");
    }
    Ok(())
}

/// The error line of MAE with a fitted head.
pub(super) fn mae_with_head(outputs: usize) -> String {
    format!("--metric mae is not supported with a fitted head (--outputs {outputs}; a least-squares fit): use mse, rmse or r2, or --outputs 1")
}
