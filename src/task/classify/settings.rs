//! What a classification run is given: its settings as reports and experiment files store
//! them ([`ClassifySettings`]), their checks and defaults, and the labelled data they name (split
//! by class and standardised).

use super::*;

/// The constant fitting of `grove classify`'s defaults: none, on either device. Measured on an
/// H200 (docs/benchmarks.md, "Constants fitted for classification"): on the four built-in sets
/// (5 seeds, the defaults otherwise) fitting moved the median test accuracy by −0.035 to
/// +0.013, within the seeds' spread, and a round cost 26 to 160 times a generation's
/// evaluation on digits. The steps, every and fraction here are what `--optimise-constants`
/// alone gets.
pub const DEFAULT_FIT: crate::evolve::ConstantFitting = crate::evolve::ConstantFitting { steps: 0, every: 5, fraction: 0.2 };

/// [`DEFAULT_FIT`] on either device (the signature matches the regression task's
/// `default_fit`, which differs by device).
pub fn default_fit(_on_gpu: bool) -> crate::evolve::ConstantFitting {
    DEFAULT_FIT
}

fn default_linear_inputs() -> LinearInputs {
    crate::task::base::defaults::CLASSIFY_LINEAR_INPUTS
}

/// Everything a `grove classify` run needs; stored in the report so the run can be repeated.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassifySettings {
    /// `builtin:NAME` or a CSV / tab-separated file.
    pub data: String,
    /// Label column (default: the last).
    pub label: Option<String>,
    /// Fraction of each class held out for testing (stratified; 0: none).
    pub test_fraction: f64,
    /// A test file of its own (`--test-data`): the same columns as the training data, by name,
    /// and labels among its classes; the training data is then not split (`test_fraction` 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_data: Option<String>,
    /// Fraction of each class's training rows held out to choose the returned program
    /// (`None`: the automatic choice of [`crate::task::base::validation::Plan::new`]).
    #[serde(default)]
    pub validation_fraction: Option<f64>,
    /// How the returned program is chosen from the hall of fame's front.
    #[serde(default)]
    pub select: crate::task::base::validation::Select,
    /// Standardise features with the training rows' means and deviations.
    pub standardize: bool,
    /// Grammar for grammatical evolution (`None`: tree GP from `functions`).
    pub grammar: Option<String>,
    /// Function set for tree GP.
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
    /// What evolution minimises.
    pub fitness: ClassFitness,
    /// Two classes: one output, class 1 where it is positive (instead of one output per class).
    pub binary: bool,
    /// Linear terms of the inputs added to each output, fitted by logistic regression before
    /// the search ([`crate::program::logistic`]).
    #[serde(default = "default_linear_inputs")]
    pub linear_inputs: LinearInputs,
    /// A head over the program's outputs (`--outputs K`, 1 to `MAX_HEAD`): class `c`'s logit
    /// is `c_c + Σ_m a_cm f_m`, least squares on one-hot targets during the search, multinomial
    /// logistic regression for the returned model. 0: one output per class, no head.
    #[serde(default)]
    pub outputs: usize,
    /// Added to the fitness per node.
    pub parsimony: f64,
    /// Tree GP settings.
    pub trees: ClassTreeSettings,
    /// Where populations are evaluated.
    pub device: crate::backend::DeviceChoice,
    /// Islands and migration (one island by default).
    #[serde(default)]
    pub islands: crate::evolve::IslandConfig,
    /// When the run ends before its last generation: a time limit, a target ([`crate::task::base::budget`]).
    #[serde(default)]
    pub budget: crate::task::base::budget::Budget,
}

impl Default for ClassifySettings {
    /// `grove classify`'s defaults (its constant fitting aside, which experiment files and
    /// the command line set by device: [`default_fit`]).
    fn default() -> Self {
        use crate::task::base::defaults::{CLASSIFY, CLASSIFY_DATA, CLASSIFY_TEST_FRACTION, FUNCTIONS, GE, PARSIMONY};
        let ge = GE.configs();
        Self {
            data: CLASSIFY_DATA.into(),
            label: None,
            test_fraction: CLASSIFY_TEST_FRACTION,
            test_data: None,
            validation_fraction: None,
            select: crate::task::base::validation::Select::default(),
            standardize: true,
            grammar: None,
            functions: Some(FUNCTIONS.into()),
            operators: Vec::new(),
            engine: CLASSIFY.config(crate::evolve::ConstantFitting::default()),
            map: ge.map,
            init: ge.init,
            vary: ge.vary,
            genome_capacity: ge.genome_capacity,
            fitness: ClassFitness::default(),
            binary: false,
            linear_inputs: crate::task::base::defaults::CLASSIFY_LINEAR_INPUTS,
            outputs: crate::task::base::defaults::CLASSIFY_OUTPUTS,
            parsimony: PARSIMONY,
            trees: ClassTreeSettings::default(),
            device: crate::backend::DeviceChoice::default(),
            islands: crate::evolve::IslandConfig::default(),
            budget: crate::task::base::budget::Budget::default(),
        }
    }
}

impl ClassifySettings {
    /// `grove classify`'s defaults on a GPU (`on_gpu`: the population and generations of
    /// [`crate::task::base::defaults::CLASSIFY_GPU`]) or the CPU ([`Self::default`]): what the
    /// command line, experiment files, reports and the Python estimator lay their fields over
    /// (the constant fitting, which also follows the device, is set beside this:
    /// [`default_fit`]).
    pub fn cli_default(on_gpu: bool) -> Self {
        use crate::task::base::defaults::{CLASSIFY, CLASSIFY_GPU};
        let base = Self::default();
        let engine = if on_gpu { CLASSIFY_GPU } else { CLASSIFY };
        Self { engine: engine.config(base.engine.constants), ..base }
    }
}

/// The rows evolution fits on and the validation rows, for `plan` (none when its fraction is
/// 0): a seeded split of `train`, stratified by class
/// ([`crate::data::split::Holdout::VALIDATION`]; a class of one row stays in `rows`).
pub fn validation_split<'d>(
    train: &'d Labeled,
    plan: &crate::task::base::validation::Plan,
    seed: u64,
) -> Result<(std::borrow::Cow<'d, Labeled>, Option<Labeled>)> {
    if plan.fraction == 0.0 {
        return Ok((std::borrow::Cow::Borrowed(train), None));
    }
    let (rows, validation) =
        crate::data::classes::stratified_split_for(train, plan.fraction, seed, crate::data::split::Holdout::VALIDATION)
            .context("--validation-fraction (validation_fraction)")?;
    Ok((std::borrow::Cow::Owned(rows), Some(validation)))
}

/// The data of `settings`: all rows of the training data, then the training and test parts
/// (standardised when asked; no test part with `test_fraction` 0 and no `test_data`), and the
/// standardisation. A test file (`test_data`) has the training data's columns, by name, and
/// labels among its classes; the training data is then not split.
pub fn load_data(settings: &ClassifySettings) -> Result<(Labeled, Labeled, Option<Labeled>, Option<Standardize>)> {
    let all = ClassSource::parse(&settings.data)?.load(settings.label.as_deref())?;
    let k = all.n_classes();
    if settings.binary && k != 2 {
        bail!("--binary needs two classes; the data has {k} ({}): drop --binary", all.classes.join(", "));
    }
    let (mut train, mut test) = match &settings.test_data {
        Some(path) => {
            let bytes = crate::data::read::read_text_file(std::path::Path::new(path)).context("--test-data (test_data)")?;
            let test = crate::data::classes::parse_labeled_like(&bytes, path, &all).context("--test-data (test_data)")?;
            (all.clone(), Some(test))
        }
        None if settings.test_fraction == 0.0 => (all.clone(), None),
        None => {
            let (train, test) = stratified_split(&all, settings.test_fraction, settings.engine.seed)?;
            (train, Some(test))
        }
    };
    let standardize = settings.standardize.then(|| Standardize::fit(&train.data.x, train.data.n_rows));
    if let Some(s) = &standardize {
        s.apply_to(&mut train.data);
        if let Some(t) = &mut test {
            s.apply_to(&mut t.data);
        }
    }
    Ok((all, train, test, standardize))
}

impl ClassifySettings {
    /// Checks values the types allow but a run cannot use.
    pub fn check(&self) -> Result<()> {
        use anyhow::ensure;
        crate::task::base::search::register_operators(&self.operators)?;
        check_search(&self.engine, &self.islands)?;
        ensure!(!self.islands.shard_rows, "--shard-rows (islands.shard_rows) splits regression rows over GPUs; grove classify has no row shards yet");
        self.budget.check(crate::task::base::budget::Measure::Accuracy)?;
        ensure!(
            (0.0..1.0).contains(&self.test_fraction),
            "--test-fraction (test_fraction) must be in [0, 1) (0: no test rows), got {}",
            self.test_fraction
        );
        crate::task::base::validation::check_test_data(self.test_data.as_deref(), self.test_fraction)?;
        crate::task::base::validation::check_fraction(self.validation_fraction)?;
        {
            use crate::task::base::validation::Select;
            ensure!(
                !matches!(self.select, Select::Cv | Select::Folds),
                "--select {} (select) refits a regression model's numbers without each fold; grove classify chooses by auto, validation, pareto, mdl or train",
                if self.select == Select::Cv { "cv" } else { "folds" }
            );
        }
        ensure!(self.parsimony >= 0.0 && self.parsimony.is_finite(), "--parsimony (parsimony) must be >= 0, got {}", self.parsimony);
        ensure!((0.0..=1.0).contains(&self.trees.p_out), "--p-out (trees.p_out) must be a probability, got {}", self.trees.p_out);
        crate::task::base::search::check_tree_rates(self.trees.p_crossover, self.trees.p_mutation)?;
        check_ge(&self.search_settings().ge)?;
        crate::task::base::search::check_diversity(&self.engine, self.grammar.is_some())?;
        ensure!(self.grammar.is_some() || self.functions.is_some(), "give --grammar FILE or --functions LIST (in an experiment file: grammar or functions)");
        let max = crate::program::head::MAX_HEAD;
        ensure!(self.outputs <= max, "--outputs (outputs) asks for {} outputs under the head; it reads at most {max}", self.outputs);
        if self.outputs > 0 {
            ensure!(!self.binary, "--outputs (outputs) gives every class a head over the program's outputs; --binary (binary) decides by one output's sign: drop one");
            ensure!(
                self.engine.constants.steps == 0,
                "--outputs (outputs) cannot go with --optimise-constants (engine.constants.steps): the constant fitting of classifiers fits their own outputs, not a head's features"
            );
            ensure!(
                self.linear_inputs != LinearInputs::On,
                "--outputs (outputs) cannot go with --linear-inputs on (linear_inputs): the head reads the program's outputs only"
            );
        }
        Ok(())
    }

    /// What the search takes from these settings.
    pub fn search_settings(&self) -> crate::task::base::search::SearchSettings<'_> {
        let ge = crate::task::base::defaults::GeConfigs { map: self.map, init: self.init, vary: self.vary, genome_capacity: self.genome_capacity };
        crate::task::base::search::SearchSettings::of(&self.engine, &self.islands, &self.grammar, &self.functions, ge)
    }
}
