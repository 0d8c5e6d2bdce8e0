//! Classification (`grove classify`): programs with one output per class (EvoGP's output
//! nodes), the prediction being the argmax of the outputs, or for two classes optionally one
//! output whose sign decides (`binary`). Fitness is accuracy, balanced accuracy or the softmax
//! cross-entropy of the outputs (smooth, so it tells apart programs that accuracy ties); the
//! best program is reported with accuracy, balanced accuracy and a confusion matrix on the
//! training and test rows, and saved as a [`Model`] for `grove predict`.

use anyhow::{Context, Result, bail};

use super::model::{Model, ModelKind, classify_outputs};
use super::search::LinearInputs;
use super::search::{ClassTreeSettings, EvolveResult, add_island_stats, check_ge, check_search, describe_devices, device_loop_line, generations_json, islands_summary};
use crate::data::classes::{ClassSource, Labeled, Standardize, stratified_split};
/// The fitness measure and the fitness of the fused sums: defined in [`crate::program::fitness`],
/// below the engine, which reads them too.
pub use crate::program::fitness::{ClassFitness, accuracy_of, balanced_of, fitness_of};
use crate::program::tree::{Node, Population};

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

/// The classification task over a training set, evaluated by a backend.
pub struct Classification<'d> {
    /// Where populations are evaluated.
    pub backend: &'d crate::backend::Backend,
    /// The training data, where the backend reads it.
    pub data: crate::backend::ClassData<'d>,
    /// Training points per class.
    pub counts: Vec<u64>,
    /// What is minimised.
    pub fitness: ClassFitness,
    /// Added to the fitness per node.
    pub parsimony: f64,
    /// A head over the programs' outputs (`--outputs K`): the training data with the rows'
    /// class indices (as f32, `counts` of each) as the target, where the backend reads them;
    /// the fitness is then the Brier score of each class's least-squares head
    /// ([`crate::program::head::ClassHeadSums`]), and `data` is not read.
    pub head: Option<crate::backend::RegressionData<'d>>,
}

impl crate::evolve::Fitness for Classification<'_> {
    fn evaluate(&self, pop: &Population) -> Result<Vec<f64>> {
        if let Some(h) = &self.head {
            let sums = self.backend.class_head_sums(pop, h, &self.counts)?;
            return Ok(sums
                .iter()
                .enumerate()
                .map(|(i, s)| if pop.len[i] == 0 { f64::INFINITY } else { s.brier() + self.parsimony * pop.len[i] as f64 })
                .collect());
        }
        let sums = self.backend.classification_sums(pop, &self.data)?;
        Ok(sums
            .iter()
            .enumerate()
            .map(|(i, s)| {
                if pop.len[i] == 0 {
                    return f64::INFINITY;
                }
                fitness_of(s, &self.counts, self.fitness) + self.parsimony * pop.len[i] as f64
            })
            .collect())
    }

    fn fit_constants(&self, pop: &mut Population, rows: &[usize], steps: u32) -> Result<Option<Vec<f64>>> {
        if self.head.is_some() {
            bail!("--optimise-constants fits a classifier's own outputs, not a head's features (ClassifySettings::check refuses it)");
        }
        self.backend.fit_class_constants(pop, rows, &self.data, steps)?;
        self.evaluate(&pop.gather(rows)).map(Some)
    }

    fn device_task(&self) -> Option<crate::evolve::device::DeviceTask<'_>> {
        if self.head.is_some() {
            // The head's sums are summed on the GPU; selection and variation run on the host.
            return None;
        }
        self.backend.classification_task(&self.data, &self.counts, self.fitness, self.parsimony)
    }
}

fn default_linear_inputs() -> LinearInputs {
    super::defaults::CLASSIFY_LINEAR_INPUTS
}

/// Most work of one pass of the terms' fit, `(inputs + 1) × classes × rows`, where `auto` still
/// fits them: digits is 8.8·10⁵ and its fit took 0.62 s on two cores, so a fit at the limit
/// takes some 15 s.
pub const MAX_LINEAR_WORK: f64 = 2e7;

/// The linear terms of the inputs [`fit`] adds to a classifier's outputs, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct ClassLinear {
    /// The logistic fit on every training row, where one was made.
    pub fit: Option<crate::program::logistic::LogisticFit>,
    /// The model has the terms.
    pub used: bool,
    /// Why (the report's `linear_inputs.why`).
    pub why: String,
    /// Seconds the fit took (0 where none was made; the report's `timing.linear_inputs_seconds`).
    pub seconds: f64,
}

impl ClassLinear {
    /// No terms, for `why`.
    pub fn none(why: impl Into<String>) -> Self {
        Self { fit: None, used: false, why: why.into(), seconds: 0.0 }
    }

    /// The terms, one per output, where the model has them.
    pub fn terms(&self) -> Option<&[crate::program::linear::Linear]> {
        if self.used { self.fit.as_ref().map(|f| &f.terms[..]) } else { None }
    }

    /// The report's `linear_inputs`.
    pub fn json(&self) -> serde_json::Value {
        let mut v = serde_json::json!({"used": self.used, "why": self.why});
        if let Some(f) = &self.fit {
            v["penalty"] = serde_json::json!(f.penalty);
            v["cv_cross_entropy"] = serde_json::json!(crate::report::num(f.cv_ce));
            v["prior_cross_entropy"] = serde_json::json!(crate::report::num(f.prior_ce));
            v["train_cross_entropy"] = serde_json::json!(crate::report::num(f.train_ce));
        }
        v
    }
}

/// Decides and fits the linear terms of `settings` on `rows` (every training row, validation
/// rows included, already standardised where asked) for programs of `n_outputs` outputs (0: one
/// output, two classes).
pub fn class_linear(settings: &ClassifySettings, rows: &Labeled, n_outputs: usize) -> Result<ClassLinear> {
    use crate::program::linear::MAX_INPUTS;
    let mode = settings.linear_inputs;
    let (n, f, k) = (rows.data.n_rows, rows.data.n_features, rows.n_classes());
    let work = (f as f64 + 1.0) * k as f64 * n as f64;
    match mode {
        LinearInputs::Off => return Ok(ClassLinear::none("off (--linear-inputs off)")),
        LinearInputs::Auto if settings.engine.constants.steps > 0 => {
            return Ok(ClassLinear::none("off: --optimise-constants (the constant fitting of classifiers does not read the terms)"));
        }
        LinearInputs::Auto if f > MAX_INPUTS => return Ok(ClassLinear::none(format!("off: {f} inputs, more than the {MAX_INPUTS} the terms read"))),
        LinearInputs::Auto if work > MAX_LINEAR_WORK => {
            return Ok(ClassLinear::none(format!(
                "off: {n} rows × {} inputs × {k} classes is past the {MAX_LINEAR_WORK:.0e} a pass of the fit takes in auto (--linear-inputs on fits them)",
                f + 1
            )));
        }
        _ => {}
    }
    let start = std::time::Instant::now();
    let fitted = crate::program::logistic::fit(&rows.data.x, &rows.labels, n, f, k, n_outputs == 0)
        .map_err(|e| anyhow::anyhow!("--linear-inputs (linear_inputs): {e}"))?;
    let seconds = start.elapsed().as_secs_f64();
    let Some(fit) = fitted else {
        return Ok(ClassLinear::none(format!("off: no input with a spread, or fewer than {} rows", 2 * crate::program::logistic::FOLDS)));
    };
    let numbers = format!(
        "5-fold cross-validated cross-entropy {:.4} against {:.4} for the class frequencies (penalty {}, {} inputs)",
        fit.cv_ce, fit.prior_ce, fit.penalty, fit.inputs
    );
    Ok(match mode {
        LinearInputs::On => ClassLinear { used: true, why: format!("on (--linear-inputs on): {numbers}"), fit: Some(fit), seconds },
        _ if fit.helps() => ClassLinear { used: true, why: format!("auto, kept: {numbers}"), fit: Some(fit), seconds },
        _ => ClassLinear { used: false, why: format!("auto, left out: {numbers}"), fit: Some(fit), seconds },
    })
}

/// A confusion matrix: `counts[true class][predicted class]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Confusion {
    /// `[K][K]` row counts, true class by predicted class.
    pub counts: Vec<Vec<u64>>,
}

impl Confusion {
    /// Counts `(labels[i], predicted[i])` pairs over `n_classes` classes.
    pub fn new(labels: &[u32], predicted: &[u32], n_classes: usize) -> Confusion {
        let mut counts = vec![vec![0; n_classes]; n_classes];
        for (&t, &p) in labels.iter().zip(predicted) {
            counts[t as usize][p as usize] += 1;
        }
        Confusion { counts }
    }
    /// Correct over all rows (0 for no rows).
    pub fn accuracy(&self) -> f64 {
        let total: u64 = self.counts.iter().flatten().sum();
        let diag: u64 = (0..self.counts.len()).map(|k| self.counts[k][k]).sum();
        if total == 0 { 0.0 } else { diag as f64 / total as f64 }
    }
    /// Mean recall over the classes that have rows.
    pub fn balanced_accuracy(&self) -> f64 {
        let recalls: Vec<f64> = (0..self.counts.len())
            .filter_map(|k| {
                let n: u64 = self.counts[k].iter().sum();
                (n > 0).then(|| self.counts[k][k] as f64 / n as f64)
            })
            .collect();
        if recalls.is_empty() { 0.0 } else { recalls.iter().sum::<f64>() / recalls.len() as f64 }
    }
    /// A table for people: rows are true classes, columns predicted ones.
    pub fn render(&self, classes: &[String]) -> String {
        let w = classes.iter().map(|c| c.len()).max().unwrap_or(1).max("true\\pred".len());
        let cw = self.counts.iter().flatten().map(|n| n.to_string().len()).max().unwrap_or(1).max(classes.iter().map(|c| c.len().min(10)).max().unwrap_or(1));
        let mut s = format!("{:>w$}  ", "true\\pred");
        for c in classes {
            s += &format!(" {:>cw$}", &c[..c.len().min(10)]);
        }
        for (k, row) in self.counts.iter().enumerate() {
            s += &format!("\n{:>w$}  ", classes[k]);
            for n in row {
                s += &format!(" {n:>cw$}");
            }
        }
        s
    }
}

/// Everything a `grove classify` run needs; stored in the report so the run can be repeated.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassifySettings {
    /// `builtin:NAME` or a CSV / tab-separated file.
    pub data: String,
    /// Label column (default: the last).
    pub label: Option<String>,
    /// Fraction of each class held out for testing (stratified).
    pub test_fraction: f64,
    /// Fraction of each class's training rows held out to choose the returned program
    /// (`None`: the automatic choice of [`super::validation::Plan::new`]).
    #[serde(default)]
    pub validation_fraction: Option<f64>,
    /// How the returned program is chosen from the hall of fame's front.
    #[serde(default)]
    pub select: super::validation::Select,
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
    /// When the run ends before its last generation: a time limit, a target ([`super::budget`]).
    #[serde(default)]
    pub budget: super::budget::Budget,
}

impl Default for ClassifySettings {
    /// `grove classify`'s defaults (its constant fitting aside, which experiment files and
    /// the command line set by device: [`default_fit`]).
    fn default() -> Self {
        use super::defaults::{CLASSIFY, CLASSIFY_DATA, CLASSIFY_TEST_FRACTION, FUNCTIONS, GE, PARSIMONY};
        let ge = GE.configs();
        Self {
            data: CLASSIFY_DATA.into(),
            label: None,
            test_fraction: CLASSIFY_TEST_FRACTION,
            validation_fraction: None,
            select: super::validation::Select::default(),
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
            linear_inputs: super::defaults::CLASSIFY_LINEAR_INPUTS,
            outputs: super::defaults::CLASSIFY_OUTPUTS,
            parsimony: PARSIMONY,
            trees: ClassTreeSettings::default(),
            device: crate::backend::DeviceChoice::default(),
            islands: crate::evolve::IslandConfig::default(),
            budget: super::budget::Budget::default(),
        }
    }
}

/// Scores of one program on one data set.
pub struct ClassScores {
    /// Confusion matrix.
    pub confusion: Confusion,
    /// Mean cross-entropy (NaN where an output is not finite).
    pub cross_entropy: f64,
}

impl ClassScores {
    /// Rows scored.
    pub fn rows(&self) -> u64 {
        self.confusion.counts.iter().flatten().sum()
    }

    /// The measure `fitness` minimises, from these scores (`+inf` where not finite).
    pub fn loss(&self, fitness: ClassFitness) -> f64 {
        let l = match fitness {
            ClassFitness::Accuracy => 1.0 - self.confusion.accuracy(),
            ClassFitness::BalancedAccuracy => 1.0 - self.confusion.balanced_accuracy(),
            ClassFitness::CrossEntropy => self.cross_entropy,
        };
        if l.is_finite() { l } else { f64::INFINITY }
    }

    fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "accuracy": self.confusion.accuracy(),
            "balanced_accuracy": self.confusion.balanced_accuracy(),
            "cross_entropy": crate::report::num(self.cross_entropy),
            "confusion": self.confusion.counts,
            "rows": self.rows(),
        })
    }
}

/// Scores of a tree with `n_outputs` outputs (0: binary) on `data`, with `offset` (the linear
/// terms of the inputs at `data`'s rows, [`crate::program::logistic::offsets`]) added to its
/// outputs where given.
pub fn scores(nodes: &[Node], n_outputs: usize, data: &Labeled, offset: Option<&[f32]>) -> Result<ClassScores> {
    let k = data.n_classes();
    let n = data.data.n_rows;
    let mut pop = Population::new(1, nodes.len().max(1), n_outputs);
    let _ = pop.set_tree(0, nodes);
    let mut out = crate::backend::cpu::eval::predict(&pop, 0, &data.data.x, n)?;
    if let Some(o) = offset {
        out.iter_mut().zip(o).for_each(|(v, o)| *v += o);
    }
    let predicted = classify_outputs(&out, n, n_outputs, k);
    let sums = crate::backend::cpu::classify::evaluate_classification_with(&pop, &data.data.x, &data.labels, n, k, offset)?;
    let ce = if sums[0].bad > 0 { f64::NAN } else { sums[0].ce / sums[0].n.max(1) as f64 };
    Ok(ClassScores { confusion: Confusion::new(&data.labels, &predicted, k), cross_entropy: ce })
}

/// A program's outputs on `data`: `[max(1, n_outputs)][n_rows]`.
fn program_outputs(nodes: &[Node], n_outputs: usize, data: &Labeled) -> Result<Vec<f32>> {
    let mut pop = Population::new(1, nodes.len().max(1), n_outputs);
    let _ = pop.set_tree(0, nodes);
    Ok(crate::backend::cpu::eval::predict(&pop, 0, &data.data.x, data.data.n_rows)?)
}

/// The head of a classifier over a program's `max(1, n_outputs)` outputs, fitted on `data`: a
/// multinomial logistic regression of the classes on the outputs
/// ([`crate::program::logistic::fit`], its L2 penalty chosen by 5-fold cross-validated
/// cross-entropy), so the probabilities are calibrated; where it cannot be fitted (fewer than
/// 10 rows, or no output with a spread) each class's least-squares head on its one-hot target,
/// as the search scored the program ([`crate::program::head::ClassHeadSums`]). An error if an
/// output is not finite at some row.
pub fn fit_class_head(nodes: &[Node], n_outputs: usize, data: &Labeled) -> Result<Vec<crate::program::linear::Linear>> {
    use crate::program::linear::Linear;
    let out = program_outputs(nodes, n_outputs, data)?;
    let (k, n, c) = (n_outputs.max(1), data.data.n_rows, data.n_classes());
    if let Some(i) = out.iter().position(|v| !v.is_finite()) {
        bail!("the program's output {} is {} at row {}: a head cannot be fitted", i / n.max(1), out[i], i % n.max(1));
    }
    if let Some(fit) = crate::program::logistic::fit(&out, &data.labels, n, k, c, false).map_err(|e| anyhow::anyhow!("the head: {e}"))? {
        return Ok(fit.terms);
    }
    let mut sums = crate::program::head::ClassHeadSums::new(k, c);
    let mut f = vec![0.0; k];
    for r in 0..n {
        f.iter_mut().enumerate().for_each(|(m, v)| *v = out[m * n + r] as f64);
        sums.add_row(&f, data.labels[r] as usize);
    }
    let heads = sums.fit().context("the head's least-squares fit")?;
    Ok(heads.into_iter().map(|h| Linear { c: h.b, a: h.w }).collect())
}

/// Scores of a program with a classifier head (`head`, one per class, over its
/// `max(1, n_outputs)` outputs) on `data`: the logits as the model computes them
/// ([`super::model::head_logits`]).
pub fn head_scores(nodes: &[Node], n_outputs: usize, head: &[crate::program::linear::Linear], data: &Labeled) -> Result<ClassScores> {
    let (n, c) = (data.data.n_rows, data.n_classes());
    let out = program_outputs(nodes, n_outputs, data)?;
    let z = super::model::head_logits(head, &out, n);
    let predicted = classify_outputs(&z, n, c, c);
    let mut ce = 0.0;
    for (r, &l) in data.labels.iter().enumerate() {
        let top = (0..c).map(|k| z[k * n + r] as f64).fold(f64::NEG_INFINITY, f64::max);
        let lse = top + (0..c).map(|k| (z[k * n + r] as f64 - top).exp()).sum::<f64>().ln();
        ce += lse - z[l as usize * n + r] as f64;
    }
    let ce = if n == 0 { f64::NAN } else { ce / n as f64 };
    Ok(ClassScores { confusion: Confusion::new(&data.labels, &predicted, c), cross_entropy: if ce.is_finite() { ce } else { f64::NAN } })
}

/// The rows evolution fits on and the validation rows, for `plan` (none when its fraction is
/// 0): a seeded split of `train`, stratified by class
/// ([`crate::data::split::Holdout::VALIDATION`]; a class of one row stays in `rows`).
pub fn validation_split<'d>(
    train: &'d Labeled,
    plan: &super::validation::Plan,
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

/// The data of `settings`: all rows, then the training and test parts (standardised when
/// asked), and the standardisation.
pub fn load_data(settings: &ClassifySettings) -> Result<(Labeled, Labeled, Labeled, Option<Standardize>)> {
    let all = ClassSource::parse(&settings.data)?.load(settings.label.as_deref())?;
    let k = all.n_classes();
    if settings.binary && k != 2 {
        bail!("--binary needs two classes; the data has {k} ({}): drop --binary", all.classes.join(", "));
    }
    let (mut train, mut test) = stratified_split(&all, settings.test_fraction, settings.engine.seed)?;
    let standardize = settings.standardize.then(|| Standardize::fit(&train.data.x, train.data.n_rows));
    if let Some(s) = &standardize {
        s.apply_to(&mut train.data);
        s.apply_to(&mut test.data);
    }
    Ok((all, train, test, standardize))
}

impl ClassifySettings {
    /// Checks values the types allow but a run cannot use.
    pub fn check(&self) -> Result<()> {
        use anyhow::ensure;
        super::search::register_operators(&self.operators)?;
        check_search(&self.engine, &self.islands)?;
        ensure!(!self.islands.shard_rows, "--shard-rows (islands.shard_rows) splits regression rows over GPUs; grove classify has no row shards yet");
        self.budget.check(super::budget::Measure::Accuracy)?;
        ensure!(
            self.test_fraction > 0.0 && self.test_fraction < 1.0,
            "--test-fraction (test_fraction) must be in (0, 1), got {}",
            self.test_fraction
        );
        super::validation::check_fraction(self.validation_fraction)?;
        ensure!(
            self.select != super::validation::Select::Cv,
            "--select cv (select) refits a regression model's numbers without each fold; grove classify chooses by auto, validation, pareto, mdl or train"
        );
        ensure!(self.parsimony >= 0.0 && self.parsimony.is_finite(), "--parsimony (parsimony) must be >= 0, got {}", self.parsimony);
        ensure!((0.0..=1.0).contains(&self.trees.p_out), "--p-out (trees.p_out) must be a probability, got {}", self.trees.p_out);
        check_ge(&self.search_settings().ge)?;
        ensure!(self.grammar.is_some() || self.functions.is_some(), "give --grammar FILE or --functions LIST (in an experiment file: grammar or functions)");
        ensure!(
            !(self.linear_inputs == LinearInputs::On && self.engine.constants.steps > 0),
            "--linear-inputs on cannot go with --optimise-constants (engine.constants.steps): the constant fitting of classifiers does not read the terms"
        );
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
    pub fn search_settings(&self) -> super::search::SearchSettings<'_> {
        let ge = super::defaults::GeConfigs { map: self.map, init: self.init, vary: self.vary, genome_capacity: self.genome_capacity };
        super::search::SearchSettings::of(&self.engine, &self.islands, &self.grammar, &self.functions, ge)
    }
}

/// Loads the data, splits and standardises it, evolves, and scores the best program.
pub fn classify(settings: &ClassifySettings, quiet: bool) -> Result<EvolveResult> {
    classify_with(settings, &super::run::RunOptions { quiet, ..Default::default() })
}

/// As [`classify`], with checkpoints, resume, a stop flag and verbosity from `opts`: loads,
/// splits and standardises the data `settings.data` names, opens the device (saying on
/// standard error, unless quiet, when `auto` falls back to the CPU) and runs [`fit`].
pub fn classify_with(settings: &ClassifySettings, opts: &super::run::RunOptions) -> Result<EvolveResult> {
    let (_, train, test, standardize) = load_data(settings)?;
    let backend = crate::backend::Backend::open_on(settings.device, &settings.islands.gpus, opts.quiet)?;
    fit(settings, &train, Some(&test), standardize.as_ref(), &backend, opts)
}

/// The classification task of `settings` on `train` for backend `b`: with `head_labels` (the
/// rows' classes as f32, for a head over the program's outputs) the search reads them as a
/// regression target on `b` and the classification data stays on the host, unread; else the
/// classification data, with the linear terms' `offset`, goes where `b` reads it.
fn task_on<'d>(
    b: &'d crate::backend::Backend,
    settings: &ClassifySettings,
    train: &'d Labeled,
    offset: Option<&'d [f32]>,
    head_labels: Option<&'d [f32]>,
) -> Result<Classification<'d>> {
    let (n, f, k) = (train.data.n_rows, train.data.n_features, train.n_classes());
    let (data, head) = match head_labels {
        Some(labels) => {
            let host = crate::backend::ClassData::Host { x: &train.data.x, labels: &train.labels, n_rows: n, n_classes: k, offset: None };
            (host, Some(b.regression_data(&train.data.x, labels, n, f)?))
        }
        None => (b.classification_data_with(&train.data.x, &train.labels, n, k, offset)?, None),
    };
    let counts = train.class_counts().iter().map(|&c| c as u64).collect();
    Ok(Classification { backend: b, data, counts, fitness: settings.fitness, parsimony: settings.parsimony, head })
}

/// Evolves a classifier for `train` (already standardised with `standardize`, which the saved
/// model repeats) on `backend` and scores the best program on `train` and `test`: the
/// library's classification run, under both the command line (`grove classify`, `grove run`)
/// and the Python package (`SymbolicClassifier.fit`). `settings.data`, `label`,
/// `test_fraction` and `standardize` are only recorded. Prints only what `opts` asks for.
pub fn fit(
    settings: &ClassifySettings,
    train: &Labeled,
    test: Option<&Labeled>,
    standardize: Option<&Standardize>,
    backend: &crate::backend::Backend,
    opts: &super::run::RunOptions,
) -> Result<EvolveResult> {
    // The run's own operators, before its function set or grammar names them.
    super::search::register_operators(&settings.operators)?;
    use crate::program::render::{Style, outputs, render};

    let start = std::time::Instant::now();
    let plan = super::validation::Plan::new(settings.validation_fraction, settings.select, train.data.n_rows, super::defaults::CLASSIFY_SMALL_DATA_RULE)?;
    // The automatic split gives way when no class can spare a row.
    let (rows, validation, plan) = match validation_split(train, &plan, settings.engine.seed) {
        Ok((rows, validation)) => (rows, validation, plan),
        Err(e) => (std::borrow::Cow::Borrowed(train), None, plan.without_validation(settings.validation_fraction, e, super::defaults::CLASSIFY_SMALL_DATA_RULE)?),
    };
    // Every training row, validation rows included: the linear terms are fitted on them.
    let all_rows = train;
    let train: &Labeled = &rows;
    let validation = validation.as_ref();
    let k = train.n_classes();
    if settings.binary && k != 2 {
        bail!("--binary needs two classes; the data has {k} ({}): drop --binary", train.classes.join(", "));
    }
    let max_fit = crate::backend::cpu::fit::MAX_FIT_CLASSES;
    if settings.engine.constants.steps > 0 && k > max_fit {
        bail!("--optimise-constants (engine.constants.steps) fits programs of at most {max_fit} classes; the data has {k}: drop it");
    }
    // With a head (`--outputs K`) the program has K outputs (K = 1: its value) and every class
    // reads all of them; else one output per class, or one for two classes (`binary`).
    let head_k = settings.outputs;
    let n_outputs = match (settings.binary, head_k) {
        (true, _) => 0,
        (false, 0) => k,
        (false, 1) => 0,
        (false, h) => h,
    };
    let bytes = (train.data.n_rows as u64).saturating_mul(train.data.n_features as u64 + 1).saturating_mul(4);
    let sums = 16 * k as u64 + 32;
    // A head on a GPU writes every output of every program at every row before summing them.
    let head_values = if head_k > 0 { (train.data.n_rows as u64).saturating_mul(4 * n_outputs.max(1) as u64) } else { 0 };
    let need = super::plan::TaskNeed { data: bytes, device_data: bytes, per_individual: sums, device_per_individual: sums + head_values };
    super::plan::check_search(&settings.search_settings(), &need, backend, opts.max_memory, "")?;
    if backend.classification_on_host() && !opts.quiet {
        opts.say("note: classification fitness runs on the CPU (GROVE_CLASSIFY_KERNEL=0)");
    }
    // The terms are fitted on every training row (their penalty chosen by their own
    // cross-validation): they are the same for every program, so the validation rows still
    // tell programs apart, and with a quarter of the rows held out the line would lose
    // (breast cancer, `docs/quality.md`).
    let linear = if head_k > 0 {
        ClassLinear::none("off: the head over the program's outputs (--outputs) reads no linear terms")
    } else {
        class_linear(settings, all_rows, n_outputs)?
    };
    let terms = linear.terms();
    let plan = if terms.is_some() {
        plan.with_small_rule(super::defaults::CLASSIFY_SMALL_DATA_RULE_WITH_TERMS, "the model has linear terms of the inputs")
    } else {
        plan
    };
    let offset = terms.map(|t| crate::program::logistic::offsets(t, &train.data.x, train.data.n_rows));
    // The terms at the validation rows, once (every front member is scored there).
    let validation_offset = validation.zip(terms).map(|(v, t)| crate::program::logistic::offsets(t, &v.data.x, v.data.n_rows));
    // With a head the search reads the labels as a regression target (the head's sums), and the
    // classification data stays on the host, unread.
    let head_labels: Vec<f32> = if head_k > 0 { train.labels.iter().map(|&l| l as f32).collect() } else { Vec::new() };
    // Islands spread over every GPU `islands.gpus` chooses, each with its own copy of the data.
    let more = backend.more_gpus(&settings.islands.gpus, settings.islands.count)?;
    let head = (head_k > 0).then_some(&head_labels[..]);
    let mut tasks = vec![task_on(backend, settings, train, offset.as_deref(), head)?];
    for b in &more {
        tasks.push(task_on(b, settings, train, offset.as_deref(), head)?);
    }
    let task = crate::evolve::OnGpus(&tasks);
    let device = describe_devices(backend, &more);
    super::search::note_bloat(&settings.engine, backend, opts);
    // --stop-at is the best program's training accuracy (the fitness may be cross-entropy).
    // Scores of a program on `data` (its head, where the model has one, fitted on the rows
    // evolution fitted: `fit_class_head`).
    type Heads = Option<Vec<crate::program::linear::Linear>>;
    let head_of = |nodes: &[Node]| -> Result<Heads> { if head_k > 0 { fit_class_head(nodes, n_outputs, train).map(Some) } else { Ok(None) } };
    let score = |nodes: &[Node], head: &Heads, data: &Labeled, off: Option<&[f32]>| match head {
        Some(h) => head_scores(nodes, n_outputs, h, data),
        None => scores(nodes, n_outputs, data, off),
    };
    let accuracy = |b: &crate::evolve::Best| {
        head_of(&b.nodes).and_then(|h| score(&b.nodes, &h, train, offset.as_deref())).map_or(f64::NAN, |s| s.confusion.accuracy())
    };
    let goal = super::budget::Goal { measure: super::budget::Measure::Accuracy, value: Box::new(accuracy) };
    let mut observer = super::run::RunObserver::new(&settings.engine, &settings.islands, opts, train.data.n_rows)?.with_budget(settings.budget, goal);
    let names = train.data.names.clone();
    let trees = |functions: &str| settings.trees.rep(functions, train.data.n_features, n_outputs, settings.engine.max_len);
    // A grammar under a head of K > 1 outputs must write K output slots.
    let slots = |t: &crate::grammar::template::Templates, path: &str| if head_k > 1 { super::regression::check_grammar_slots(t, head_k, path) } else { Ok(()) };
    let programs = super::search::Programs {
        names: &names,
        n_outputs,
        purpose: format!("for classification with {n_outputs} outputs"),
        check: &slots,
        trees: &trees,
    };
    let searching = std::time::Instant::now();
    let outcome = super::search::evolve(&settings.search_settings(), &programs, &task, &mut observer)?;
    let (setup_seconds, search_seconds) = (searching.duration_since(start).as_secs_f64(), searching.elapsed().as_secs_f64());
    let evals = observer.evals;
    if outcome.best.nodes.is_empty() {
        bail!("no valid program was found: every individual failed to map or had a non-finite output");
    }
    // The front, scored on the validation rows; the rule picks the returned program.
    let front = observer.hof.front(|e| e.fitness - settings.parsimony * e.nodes.len() as f64);
    let mut cands = Vec::with_capacity(front.len());
    let primitives = super::validation::primitives_of(front.iter().map(|(_, e, _)| &e.nodes[..]), train.data.n_features);
    let mut heads = Vec::with_capacity(front.len());
    for (n, e, loss) in &front {
        let head = head_of(&e.nodes)?;
        let v = validation.map(|v| score(&e.nodes, &head, v, validation_offset.as_deref())).transpose()?;
        // Cross-entropy is a likelihood whatever the fitness: every member gets a length.
        let ce = score(&e.nodes, &head, train, offset.as_deref())?.cross_entropy;
        let nll = if ce.is_finite() { ce * train.data.n_rows as f64 } else { f64::INFINITY };
        // A head's numbers count as the program's constants do.
        let params = super::validation::constants_of(&e.nodes) + head.as_ref().map_or(0, |h| h.len() * (n_outputs.max(1) + 1));
        heads.push(head);
        let description = super::validation::description_length(nll, *n, primitives, params, train.data.n_rows);
        cands.push(super::validation::Candidate {
            size: *n,
            loss: *loss,
            validation: v.map(|s| s.loss(settings.fitness)),
            description: Some(description),
            cv: None,
        });
    }
    let best_at = front.iter().position(|(_, e, _)| e.nodes == outcome.best.nodes);
    let decision = super::validation::decide(&plan, &cands, best_at);
    let chosen = super::validation::chosen_program(&front, &decision, &outcome);
    let best = &chosen;
    let best_head = match front.iter().position(|(_, e, _)| e.nodes == best.nodes) {
        Some(i) => heads[i].clone(),
        None => head_of(&best.nodes)?,
    };
    let seconds = start.elapsed().as_secs_f64();
    let train_scores = score(&best.nodes, &best_head, train, offset.as_deref())?;
    let validation_scores = validation.map(|v| score(&best.nodes, &best_head, v, validation_offset.as_deref())).transpose()?;
    let test_offset = test.zip(terms).map(|(t, terms)| crate::program::logistic::offsets(terms, &t.data.x, t.data.n_rows));
    let test_scores = test.map(|t| score(&best.nodes, &best_head, t, test_offset.as_deref())).transpose()?;
    // Each output's text, with its linear terms of the inputs where the model has them; with a
    // head, each class's logit over the outputs.
    let texts_with = |nodes: &[Node], head: &Heads, style: Style| -> Vec<String> {
        let progs = if n_outputs == 0 { vec![render(nodes, &names, style)] } else { outputs(nodes, n_outputs, &names, style) };
        match (terms, head) {
            (_, Some(h)) => h.iter().map(|h| super::model::head_text(h, &progs, style)).collect(),
            (None, None) => progs,
            (Some(t), None) => progs.into_iter().zip(t).map(|(p, t)| format!("{p}{}", t.render(&names, style))).collect(),
        }
    };
    let texts = |nodes: &[Node], style: Style| texts_with(nodes, &best_head, style);
    let programs = texts(&best.nodes, Style::Infix);
    let mut generations = generations_json(&outcome.history, &observer.median_sizes);
    add_island_stats(&mut generations, &outcome.island_history, false);
    let show = |nodes: &[Node], style: Style| {
        let head = front.iter().position(|(_, e, _)| e.nodes == nodes).and_then(|i| heads[i].clone());
        texts_with(nodes, &head, style).join("; ")
    };
    let fame = super::validation::front_rows(&front, &cands, decision.member, |nodes| {
        Ok((show(nodes, Style::Infix), show(nodes, Style::Latex), show(nodes, Style::Sympy)))
    })?;
    let mut best_json = serde_json::json!({
        "programs": programs,
        "infix": render(&best.nodes, &names, Style::Infix),
        "sympy": if n_outputs == 0 { serde_json::json!(texts(&best.nodes, Style::Sympy)[0]) }
                 else { serde_json::json!(texts(&best.nodes, Style::Sympy)) },
        "size": best.nodes.len(), "fitness": crate::report::num(best.fitness), "generation": best.generation,
    });
    if let Some((genome, text)) = &best.genome {
        best_json["genome"] = serde_json::json!(genome);
        best_json["phenotype"] = serde_json::json!(text);
    }
    let model = Model {
        kind: ModelKind::Classification,
        features: names.clone(),
        target: train.data.target.clone(),
        nodes: Model::encode(&best.nodes),
        operators: Model::operators_of(&best.nodes),
        n_outputs,
        classes: Some(train.classes.clone()),
        scale: None,
        head: None,
        linear: None,
        logit_terms: terms.map(<[_]>::to_vec),
        class_head: best_head.clone(),
        standardize: standardize.cloned(),
    };
    let mut report = serde_json::json!({
        "command": "classify",
        "settings": settings,
        "classes": train.classes,
        "generations": generations,
        "ended": observer.ended,
        "best": best_json,
        "linear_inputs": linear.json(),
        "selection": super::validation::selection_json(&plan, &decision, train.data.n_rows, validation.map_or(0, |v| v.data.n_rows)),
        "train": train_scores.json(),
        "validation": validation_scores.as_ref().map(ClassScores::json),
        "test": test_scores.as_ref().map(ClassScores::json),
        "model": model,
        "hall_of_fame": fame,
        "timing": {"seconds": seconds, "node_evaluations": evals, "node_evaluations_per_second": evals / seconds,
                   "threads": rayon::current_num_threads(), "device": device,
                   "fitness_on_cpu": backend.classification_on_host() || matches!(backend, crate::backend::Backend::Cpu),
                   "linear_inputs_seconds": linear.seconds},
        "transfers": outcome.transfers,
        "version": env!("CARGO_PKG_VERSION"),
    });
    // The user operators the program uses, with the Python that gives them to sympy.
    if let Some(o) = super::model::operators_json(&best.nodes) {
        report["operators"] = o;
    }
    let w = train.classes.iter().map(|c| c.len()).max().unwrap_or(1).max(8);
    let mut summary = String::new();
    // The programs alone: the terms of every input would bury them (the report has the whole model).
    let alone = if n_outputs == 0 { vec![render(&best.nodes, &names, Style::Infix)] } else { outputs(&best.nodes, n_outputs, &names, Style::Infix) };
    let plus = if terms.is_some() { " + linear terms" } else { "" };
    if let Some(h) = &best_head {
        for (m, p) in alone.iter().enumerate() {
            summary += &format!("output {m:<w$}  {p}\n", w = w - 1);
        }
        summary += &format!("head          each class's logit c + Σ a_k·output_k ({} classes × {} outputs, multinomial logistic regression)\n", h.len(), alone.len());
    } else if n_outputs == 0 {
        summary += &format!("program       {}{plus}  (class {} where positive, else {})\n", alone[0], train.classes[1], train.classes[0]);
    } else {
        for (c, p) in train.classes.iter().zip(&alone) {
            summary += &format!("class {c:<w$}  {p}{plus}\n");
        }
    }
    summary += &format!("linear inputs {}\n", linear.why);
    summary += &format!("size          {} nodes\n", best.nodes.len());
    summary += &format!("selected      {}: {}\n", decision.rule.name(), decision.why);
    summary += &observer.ended.line(settings.engine.generations).unwrap_or_default();
    for (name, s) in [("train", Some(&train_scores)), ("validation", validation_scores.as_ref()), ("test", test_scores.as_ref())] {
        if let Some(s) = s {
            summary += &format!(
                "{name:<13} accuracy {:.4}  balanced accuracy {:.4}  ({} rows)\n",
                s.confusion.accuracy(),
                s.confusion.balanced_accuracy(),
                s.rows()
            );
        }
    }
    let (part, confusion) = match &test_scores {
        Some(s) => ("test", &s.confusion),
        None => ("training", &train_scores.confusion),
    };
    summary += &format!("confusion on the {part} rows (rows: true class, columns: predicted)\n{}\n", confusion.render(&train.classes));
    if let Some(line) = islands_summary(&settings.islands, settings.engine.pop_size, &outcome.island_history, false) {
        summary += &line;
    }
    let generations: Vec<f64> = outcome.history.iter().map(|s| s.seconds).collect();
    let finish = start.elapsed().as_secs_f64() - setup_seconds - search_seconds;
    let split = super::search::Split::of(setup_seconds, search_seconds, finish, &generations, backend.kernel_loads());
    split.add_to(&mut report);
    summary += &split.line("generation");
    summary += &format!("time          {seconds:.2} s on {device}");
    summary += &device_loop_line(&outcome);
    Ok(EvolveResult { report, summary })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confusion_metrics_match_a_hand_computation() {
        // True: 0 0 0 0 1 1 2 2 2 2; predicted: 0 0 0 1 1 0 2 2 2 1.
        let t = [0, 0, 0, 0, 1, 1, 2, 2, 2, 2];
        let p = [0, 0, 0, 1, 1, 0, 2, 2, 2, 1];
        let c = Confusion::new(&t, &p, 3);
        assert_eq!(c.counts, vec![vec![3, 1, 0], vec![1, 1, 0], vec![0, 1, 3]]);
        assert_eq!(c.accuracy(), 0.7);
        // Recalls 3/4, 1/2, 3/4: mean 2/3.
        assert!((c.balanced_accuracy() - 2.0 / 3.0).abs() < 1e-15);
        // A class with no rows does not count in the balanced accuracy.
        let c = Confusion::new(&[0, 0, 1], &[0, 1, 1], 3);
        assert!((c.balanced_accuracy() - 0.75).abs() < 1e-15);
        let text = c.render(&["a".into(), "b".into(), "c".into()]);
        assert_eq!(text.lines().count(), 4, "{text}");
        assert!(text.lines().nth(1).unwrap().ends_with(" 1 1 0"), "{text}");
    }
}
