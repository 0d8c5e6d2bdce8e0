//! A classification run's search: the linear terms of the inputs beside the program, the
//! task on each GPU, and the evolution.

use super::*;

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

/// A classification run of `settings` as `opts` says (checkpoints, resume, a stop flag,
/// verbosity): loads, splits and standardises the data `settings.data` names, opens the
/// device (saying on standard error, unless quiet, when `auto` falls back to the CPU), and
/// runs [`fit`].
pub fn run(settings: &ClassifySettings, opts: &crate::task::base::options::RunOptions) -> Result<EvolveResult> {
    let files: Vec<&str> = [Some(settings.data.as_str()), settings.test_data.as_deref()].into_iter().flatten().collect();
    crate::task::base::plan::check_data_files(&files, opts.max_memory)?;
    let (_, train, test, standardize) = load_data(settings)?;
    let backend = crate::backend::Backend::open(settings.device, &settings.islands.gpus)?.print_notes(opts.quiet);
    fit(settings, &train, test.as_ref(), standardize.as_ref(), &backend, opts)
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
    Ok(Classification { backend: b, data, counts, fitness: settings.fitness, parsimony: settings.parsimony, head, rows: Some((train, offset)) })
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
    opts: &crate::task::base::options::RunOptions,
) -> Result<EvolveResult> {
    // The run's own operators, before its function set or grammar names them.
    crate::task::base::search::register_operators(&settings.operators)?;
    let start = std::time::Instant::now();
    let prepared = prepare(settings, train, backend, opts)?;
    let searched = search(settings, &prepared, backend, opts, start)?;
    let choice = choose(settings, &prepared, &searched)?;
    super::report::finish(settings, &prepared, &searched, &choice, test, standardize, backend, start)
}

/// Heads over a program's outputs, one per class, where the model has a head (`--outputs`).
pub(super) type Heads = Option<Vec<crate::program::linear::Linear>>;

/// What a classification run's search and report start from: the model choice's plan, the rows
/// evolution fits and the validation rows, the program's outputs, the linear terms of the
/// inputs and their values at those rows.
pub(super) struct Prepared<'d> {
    /// How the returned program is chosen.
    pub plan: crate::task::base::validation::Plan,
    /// The rows evolution fits (the training rows less the validation rows).
    pub rows: std::borrow::Cow<'d, Labeled>,
    /// The validation rows, where there are some.
    pub validation: Option<Labeled>,
    /// The head's program outputs (`--outputs`; 0: no head).
    pub head_k: usize,
    /// The program's output slots (0: the root's value).
    pub n_outputs: usize,
    /// The linear terms of the inputs and why.
    pub linear: ClassLinear,
    /// The terms' values at the rows evolution fits.
    pub offset: Option<Vec<f32>>,
    /// The terms' values at the validation rows.
    pub validation_offset: Option<Vec<f32>>,
}

impl Prepared<'_> {
    /// The rows evolution fits.
    pub fn train(&self) -> &Labeled {
        &self.rows
    }

    /// The linear terms, where the model has them.
    pub fn terms(&self) -> Option<&[crate::program::linear::Linear]> {
        self.linear.terms()
    }

    /// A program's head, fitted on the rows evolution fitted ([`fit_class_head`]), where the
    /// model has one.
    pub fn head_of(&self, nodes: &[Node]) -> Result<Heads> {
        if self.head_k > 0 { fit_class_head(nodes, self.n_outputs, self.train()).map(Some) } else { Ok(None) }
    }

    /// Scores of a program with `head` on `data`, whose linear terms' values are `off`.
    pub fn score(&self, nodes: &[Node], head: &Heads, data: &Labeled, off: Option<&[f32]>) -> Result<ClassScores> {
        match head {
            Some(h) => head_scores(nodes, self.n_outputs, h, data),
            None => scores(nodes, self.n_outputs, data, off),
        }
    }
}

/// The model choice's plan and the validation rows of `train`, the outputs the program has, the
/// memory the search needs (checked), and the linear terms of the inputs.
fn prepare<'d>(settings: &ClassifySettings, train: &'d Labeled, backend: &crate::backend::Backend, opts: &crate::task::base::options::RunOptions) -> Result<Prepared<'d>> {
    let plan = crate::task::base::validation::Plan::new(settings.validation_fraction, settings.select, train.data.n_rows, crate::task::base::defaults::CLASSIFY_SMALL_DATA_RULE)?;
    // The automatic split gives way when no class can spare a row.
    let (rows, validation, plan) = match validation_split(train, &plan, settings.engine.seed) {
        Ok((rows, validation)) => (rows, validation, plan),
        Err(e) => (std::borrow::Cow::Borrowed(train), None, plan.without_validation(settings.validation_fraction, e, crate::task::base::defaults::CLASSIFY_SMALL_DATA_RULE)?),
    };
    // Every training row, validation rows included: the linear terms are fitted on them.
    let all_rows = train;
    let train: &Labeled = &rows;
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
    let need = crate::task::base::plan::TaskNeed { data: bytes, device_data: bytes, per_individual: sums, device_per_individual: sums + head_values, cases: train.data.n_rows as u64 };
    crate::task::base::plan::check_search(&settings.search_settings(), &need, backend, opts.max_memory, "")?;
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
        plan.with_small_rule(crate::task::base::defaults::CLASSIFY_SMALL_DATA_RULE_WITH_TERMS, "the model has linear terms of the inputs")
    } else {
        plan
    };
    let offset = terms.map(|t| crate::program::logistic::offsets(t, &train.data.x, train.data.n_rows));
    // The terms at the validation rows, once (every front member is scored there).
    let validation_offset = validation.as_ref().zip(terms).map(|(v, t)| crate::program::logistic::offsets(t, &v.data.x, v.data.n_rows));
    Ok(Prepared { plan, rows, validation, head_k, n_outputs, linear, offset, validation_offset })
}

/// What a classification run's evolution leaves for the choice and the report.
pub(super) struct Searched {
    /// The engine's outcome.
    pub outcome: crate::evolve::Outcome,
    /// The hall of fame over the whole run.
    pub hof: crate::evolve::hof::HallOfFame,
    /// Median valid program size of each generation.
    pub median_sizes: Vec<f64>,
    /// Node evaluations (timing).
    pub evals: f64,
    /// Why the search ended.
    pub ended: crate::task::base::budget::Ending,
    /// The devices the search ran on.
    pub device: String,
    /// Seconds before the generations, and of them.
    pub setup_seconds: f64,
    /// Seconds of the generations.
    pub search_seconds: f64,
}

/// The evolution of a classification run (begun at `start`) on every GPU its islands use.
fn search(settings: &ClassifySettings, p: &Prepared<'_>, backend: &crate::backend::Backend, opts: &crate::task::base::options::RunOptions, start: std::time::Instant) -> Result<Searched> {
    let (train, head_k, n_outputs) = (p.train(), p.head_k, p.n_outputs);
    // With a head the search reads the labels as a regression target (the head's sums), and the
    // classification data stays on the host, unread.
    let head_labels: Vec<f32> = if head_k > 0 { train.labels.iter().map(|&l| l as f32).collect() } else { Vec::new() };
    // Islands spread over every GPU `islands.gpus` chooses, each with its own copy of the data.
    let more = backend.more_gpus(&settings.islands.gpus, settings.islands.count)?;
    let head = (head_k > 0).then_some(&head_labels[..]);
    let mut tasks = vec![task_on(backend, settings, train, p.offset.as_deref(), head)?];
    for b in &more {
        tasks.push(task_on(b, settings, train, p.offset.as_deref(), head)?);
    }
    let task = crate::evolve::OnGpus(&tasks);
    let device = describe_devices(backend, &more);
    crate::task::base::search::note_bloat(&settings.engine, backend, opts);
    // --stop-at is the best program's training accuracy (the fitness may be cross-entropy).
    let accuracy = |b: &crate::evolve::Best| {
        p.head_of(&b.nodes).and_then(|h| p.score(&b.nodes, &h, train, p.offset.as_deref())).map_or(f64::NAN, |s| s.confusion.accuracy())
    };
    let goal = crate::task::base::budget::Goal { measure: crate::task::base::budget::Measure::Accuracy, value: Box::new(accuracy) };
    let mut observer = crate::task::base::observer::RunObserver::new(&settings.engine, &settings.islands, opts, train.data.n_rows)?.with_budget(settings.budget, goal);
    let trees = |functions: &str| settings.trees.rep(functions, train.data.n_features, n_outputs, settings.engine.max_len);
    // A grammar under a head of K > 1 outputs must write K output slots; without a head, the
    // class scores are the out(k, …) slots, so a grammar must write one at least (else every
    // program scores 0 for every class, issue 59).
    let slots = |t: &crate::grammar::template::Templates, path: &str| {
        if head_k > 1 {
            crate::task::base::search::check_grammar_slots(t, head_k, path)
        } else if head_k == 0 && n_outputs > 1 && !crate::task::base::search::writes_output_slots(t) {
            bail!(
                "{path} writes no out(K, …) output slot: a classifier reads class k's score from out(k, …) ({n_outputs} classes here); give a grammar with out(0, …) to out({}, …) (grammars/classify.bnf is one)",
                n_outputs - 1
            )
        } else {
            Ok(())
        }
    };
    let programs = crate::task::base::search::Programs {
        names: &train.data.names,
        n_outputs,
        purpose: format!("for classification with {n_outputs} outputs"),
        check: &slots,
        trees: &trees,
    };
    let searching = std::time::Instant::now();
    let outcome = crate::task::base::search::evolve(&settings.search_settings(), &programs, &task, &mut observer)?;
    let (setup_seconds, search_seconds) = (searching.duration_since(start).as_secs_f64(), searching.elapsed().as_secs_f64());
    if outcome.best.nodes.is_empty() {
        bail!("no valid program was found: every individual failed to map or had a non-finite output");
    }
    Ok(Searched {
        outcome,
        hof: std::mem::take(&mut observer.hof),
        median_sizes: std::mem::take(&mut observer.median_sizes),
        evals: observer.evals,
        ended: std::mem::replace(&mut observer.ended, crate::task::base::budget::Ending::Generations),
        device,
        setup_seconds,
        search_seconds,
    })
}

/// The model choice: the front with each member's head and candidate scores, the decision, the
/// returned program and its head.
pub(super) struct Choice<'h> {
    /// The hall of fame's front.
    pub front: Vec<(usize, &'h crate::evolve::hof::Entry, f64)>,
    /// Each member as a candidate of the choice.
    pub cands: Vec<crate::task::base::validation::Candidate>,
    /// Each member's head.
    pub heads: Vec<Heads>,
    /// The rule's decision.
    pub decision: crate::task::base::validation::Decision,
    /// The returned program.
    pub best: crate::evolve::Best,
    /// Its head.
    pub best_head: Heads,
}

/// Scores the front on the validation rows and lets the plan's rule pick the returned program.
fn choose<'h>(settings: &ClassifySettings, p: &Prepared<'_>, searched: &'h Searched) -> Result<Choice<'h>> {
    use crate::task::base::validation::{Candidate, chosen_program, constants_of, decide, description_length, primitives_of};
    let train = p.train();
    let front = searched.hof.front(|e| e.fitness - settings.parsimony * e.nodes.len() as f64);
    let mut cands = Vec::with_capacity(front.len());
    let primitives = primitives_of(front.iter().map(|(_, e, _)| &e.nodes[..]), train.data.n_features);
    let mut heads = Vec::with_capacity(front.len());
    for (n, e, loss) in &front {
        let head = p.head_of(&e.nodes)?;
        let v = p.validation.as_ref().map(|v| p.score(&e.nodes, &head, v, p.validation_offset.as_deref())).transpose()?;
        // Cross-entropy is a likelihood whatever the fitness: every member gets a length.
        let ce = p.score(&e.nodes, &head, train, p.offset.as_deref())?.cross_entropy;
        let nll = if ce.is_finite() { ce * train.data.n_rows as f64 } else { f64::INFINITY };
        // A head's numbers count as the program's constants do.
        let params = constants_of(&e.nodes) + head.as_ref().map_or(0, |h| h.len() * (p.n_outputs.max(1) + 1));
        heads.push(head);
        let description = description_length(nll, *n, primitives, params, train.data.n_rows);
        cands.push(Candidate { size: *n, loss: *loss, validation: v.map(|s| s.loss(settings.fitness)), description: Some(description), cv: None, resampled: None });
    }
    let outcome = &searched.outcome;
    let best_at = front.iter().position(|(_, e, _)| e.nodes == outcome.best.nodes);
    let decision = decide(&p.plan, &cands, best_at);
    let best = chosen_program(&front, &decision, outcome);
    let best_head = match front.iter().position(|(_, e, _)| e.nodes == best.nodes) {
        Some(i) => heads[i].clone(),
        None => p.head_of(&best.nodes)?,
    };
    Ok(Choice { front, cands, heads, decision, best, best_head })
}
