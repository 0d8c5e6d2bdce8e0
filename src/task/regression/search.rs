//! A regression run's search: the linear terms beside the program, the validation rows, the
//! evolution on the rows it fits (islands, GPUs, row shards), and `--select cv`'s
//! cross-validation.

use super::*;

/// The linear terms [`fit`] puts beside the program, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct LinearChoice {
    /// The ridge fit on the rows evolution fits, where one was made.
    pub fit: Option<LinearFit>,
    /// The model has the terms.
    pub used: bool,
    /// Why (the report's `linear_inputs.why`).
    pub why: String,
}

impl LinearChoice {
    /// No terms, for `why`.
    pub fn none(why: impl Into<String>) -> Self {
        Self { fit: None, used: false, why: why.into() }
    }

    /// The terms, where the model has them.
    pub fn linear(&self) -> Option<&Linear> {
        if self.used { self.fit.as_ref().map(|f| &f.linear) } else { None }
    }

    /// What scoring a program together with the terms needs, where the model has them.
    pub fn joint(&self) -> Option<&Joint> {
        if self.used { self.fit.as_ref().and_then(|f| f.joint.as_ref()) } else { None }
    }

    /// The report's `linear_inputs`.
    pub fn json(&self) -> serde_json::Value {
        let mut v = serde_json::json!({"used": self.used, "why": self.why});
        if let Some(f) = &self.fit {
            v["penalty"] = serde_json::json!(crate::report::num(f.penalty));
            v["df"] = serde_json::json!(crate::report::num(f.df));
            v["gcv"] = serde_json::json!(crate::report::num(f.gcv));
            v["gcv_mean"] = serde_json::json!(crate::report::num(f.gcv_mean));
            v["train_r2"] = serde_json::json!(crate::report::num(1.0 - f.rss_ratio));
            // The terms alone as fitted (the model choice's simplest candidate but the mean),
            // whether or not the programs carry them.
            if f.inputs > 0 {
                v["terms"] = serde_json::json!({"c": f.linear.c, "a": f.linear.a});
            }
        }
        v
    }
}

/// Decides and fits the linear terms of `settings` on `rows` (the rows evolution fits).
pub fn linear_choice(settings: &EvolveSettings, rows: &Dataset) -> anyhow::Result<LinearChoice> {
    use crate::program::linear::{MAX_INPUTS, fit};
    let mode = settings.linear_inputs;
    let r = &settings.regression;
    match mode {
        LinearInputs::Off => return Ok(LinearChoice::none("off (--linear-inputs off)")),
        LinearInputs::Auto if settings.islands.shard_rows => return Ok(LinearChoice::none("off: --shard-rows (the joint fit is not split over GPUs)")),
        LinearInputs::Auto if !r.linear_scaling => return Ok(LinearChoice::none("off: --no-linear-scaling asks for the program alone")),
        LinearInputs::Auto if r.metric == Metric::Mae => return Ok(LinearChoice::none("off: --metric mae (the terms are a least-squares fit)")),
        LinearInputs::Auto if settings.loss.is_some() => return Ok(LinearChoice::none("off: --loss (the loss scores the program's prediction; the terms are a least-squares fit)")),
        LinearInputs::Auto if settings.fitness_function.is_some() => {
            return Ok(LinearChoice::none("off: a fitness function of your own scores the program's prediction (the terms are a least-squares fit)"));
        }
        LinearInputs::Auto if rows.n_features > MAX_INPUTS => {
            return Ok(LinearChoice::none(format!("off: {} inputs, more than the {MAX_INPUTS} the terms read", rows.n_features)));
        }
        _ => {}
    }
    let fitted = fit(&rows.x, &rows.y, rows.n_rows, rows.n_features).map_err(|e| anyhow::anyhow!("--linear-inputs (linear_inputs): {e}"))?;
    let Some(f) = fitted else {
        return Ok(LinearChoice::none("off: no input or target with a spread, or fewer than 3 rows"));
    };
    let saving = f.saving() / 2.0;
    let numbers = format!(
        "GCV {:.4e} against {:.4e} for the mean, {:.1} fitted numbers, description {} by {:.2} nats",
        f.gcv,
        f.gcv_mean,
        f.df,
        if saving > 0.0 { "shorter" } else { "longer" },
        saving.abs()
    );
    Ok(match mode {
        LinearInputs::On => LinearChoice { used: true, why: format!("on (--linear-inputs on): {numbers}"), fit: Some(f) },
        _ if f.helps() => LinearChoice { used: true, why: format!("auto, kept: {numbers}"), fit: Some(f) },
        _ => LinearChoice { used: false, why: format!("auto, left out: {numbers}"), fit: Some(f) },
    })
}

/// A regression run of `settings` as `opts` says (checkpoints, resume, a stop flag,
/// verbosity): loads the data `settings.data` names, opens the device (saying on standard
/// error, unless quiet, when `auto` falls back to the CPU), and runs [`fit`].
pub fn run(settings: &EvolveSettings, opts: &crate::task::base::options::RunOptions) -> anyhow::Result<EvolveResult> {
    let files: Vec<&str> = [Some(settings.data.as_str()), settings.test_data.as_deref()].into_iter().flatten().collect();
    crate::task::base::plan::check_data_files(&files, opts.max_memory)?;
    let (train, test) = load_data(settings)?;
    check_scaling(&settings.regression, settings.outputs)?;
    let backend = crate::backend::Backend::open(settings.device, &settings.islands.gpus)?.print_notes(opts.quiet);
    fit(settings, &train, test.as_ref(), &backend, opts)
}

/// The rows evolution fits on and the validation rows, for `plan` (no validation rows when its
/// fraction is 0): a seeded split of `train` ([`crate::data::split::Holdout::VALIDATION`]).
pub fn validation_split<'d>(
    train: &'d Dataset,
    plan: &crate::task::base::validation::Plan,
    seed: u64,
) -> anyhow::Result<(std::borrow::Cow<'d, Dataset>, Option<Dataset>)> {
    use anyhow::Context;
    if plan.fraction == 0.0 {
        return Ok((std::borrow::Cow::Borrowed(train), None));
    }
    let (rows, validation) = crate::data::split::split_for(train, plan.fraction, seed, crate::data::split::Holdout::VALIDATION)
        .context("--validation-fraction (validation_fraction)")?;
    Ok((std::borrow::Cow::Owned(rows), Some(validation)))
}

/// Evolves a formula for `train` on `backend` and returns the program `settings.select`
/// chooses, scored on the training, validation and `test` rows: the library's regression run,
/// under both the command line (`grove evolve`, `grove run`) and the Python package
/// (`SymbolicRegressor.fit`). A seeded fraction of `train` is held out as validation rows
/// ([`crate::task::base::validation::Plan`]); evolution sees only the rest. `settings.data`, `target` and
/// `test_fraction` are only recorded; `settings.device` is what `backend` was opened from.
/// Prints only what `opts` asks for (progress, per-generation lines).
pub fn fit(
    settings: &EvolveSettings,
    train: &Dataset,
    test: Option<&Dataset>,
    backend: &crate::backend::Backend,
    opts: &crate::task::base::options::RunOptions,
) -> anyhow::Result<EvolveResult> {
    // The run's own operators, before its function set or grammar names them, and its loss.
    crate::task::base::search::register_operators(&settings.operators)?;
    settings.compiled_loss()?;
    settings.check_fitness_fn()?;
    // With a fitness of the user's own, `auto` without validation rows returns the training
    // optimum of that fitness: the description length and the folds measure squared error.
    let auto = match settings.own_fitness() {
        true => crate::task::base::validation::Auto { small: crate::task::base::validation::Select::Train, ..crate::task::base::defaults::EVOLVE_AUTO },
        false => crate::task::base::defaults::EVOLVE_AUTO,
    };
    let plan = crate::task::base::validation::Plan::new(settings.validation_fraction, settings.select, train.n_rows, auto)?;
    let (rows, validation) = validation_split(train, &plan, settings.engine.seed)?;
    // A fold count the rows cannot take is refused before the search.
    crate::task::base::crossval::fold_count(settings.folds, rows.n_rows)?;
    // Linear terms of the inputs first; the program is evolved on what they leave.
    let linear = linear_choice(settings, &rows)?;
    // One output: each program is fitted together with the terms; a head fits what they leave.
    let joint = if settings.outputs <= 1 { linear.joint() } else { None };
    let mut searched = match linear.linear() {
        Some(l) => search_with(settings, &residual(&rows, l), backend, opts, joint)?,
        None => search(settings, &rows, backend, opts)?,
    };
    let mut plan = plan;
    use crate::task::base::validation::Select;
    if matches!(plan.rule, Select::Cv | Select::Folds) && rows.n_rows < 2 {
        plan = plan.instead(Select::Mdl, &format!("cross-validation needs 2 training rows, the data has {}", rows.n_rows));
    }
    // `folds` chooses by the front's cross-validation; `mdl` is guarded by it.
    if matches!(plan.rule, Select::Folds | Select::Mdl) && rows.n_rows >= 2 {
        let folds = crate::task::base::crossval::fold_count(settings.folds, rows.n_rows)?;
        let front = searched.hof.front(|e| e.fitness - settings.regression.parsimony * e.nodes.len() as f64);
        let nodes: Vec<&[Node]> = front.iter().map(|(_, e, _)| &e.nodes[..]).collect();
        match cross_validate_front(settings, &nodes, &rows, linear.used, folds, backend, opts)? {
            Some(r) => searched.resampled = Some(r),
            None if plan.rule == Select::Folds => plan = plan.instead(Select::Mdl, "the cross-validation was stopped"),
            None => {}
        }
    } else if let (Select::Validation, Some(v)) = (plan.rule, validation.as_ref()) {
        let front = searched.hof.front(|e| e.fitness - settings.regression.parsimony * e.nodes.len() as f64);
        let nodes: Vec<&[Node]> = front.iter().map(|(_, e, _)| &e.nodes[..]).collect();
        searched.resampled = Some(score_on_validation(settings, &nodes, &rows, v, linear.fit.as_ref(), linear.used, backend)?);
    }
    if plan.rule == Select::Cv {
        let start = std::time::Instant::now();
        let generations = searched.outcome.history.len().saturating_sub(1);
        let front = searched.hof.front(|e| e.fitness - settings.regression.parsimony * e.nodes.len() as f64);
        let sizes: Vec<usize> = front.iter().map(|(n, _, _)| *n).collect();
        match cross_validate(settings, &rows, &sizes, backend, opts, generations)? {
            Some((curve, resampled)) => {
                searched.cv = Some(curve);
                searched.resampled = Some(resampled);
            }
            None => plan = plan.instead(Select::Mdl, "the cross-validation was stopped"),
        }
        searched.cv_seconds = start.elapsed().as_secs_f64();
    }
    finish(settings, &plan, &searched, &rows, validation.as_ref(), test, backend, &linear)
}

/// What evolution leaves for [`finish`] to choose from and report.
pub struct Searched {
    /// The engine's outcome (best program, history, last population).
    pub outcome: crate::evolve::Outcome,
    /// The hall of fame over the whole run.
    pub hof: crate::evolve::hof::HallOfFame,
    /// Median valid program size of each generation.
    pub median_sizes: Vec<f64>,
    /// Node evaluations (timing).
    pub node_evaluations: f64,
    /// Wall time of the search, seconds.
    pub seconds: f64,
    /// Of which before the generations (checks, data, devices).
    pub setup_seconds: f64,
    /// Of which the generations.
    pub search_seconds: f64,
    /// The devices the search ran on ([`describe_devices`]).
    pub device: String,
    /// Why the search ended.
    pub ended: crate::task::base::budget::Ending,
    /// `--select cv`: the cross-validated error by size limit ([`super::choice::cross_validate`]; `None`
    /// otherwise).
    pub cv: Option<crate::task::base::crossval::SizeCurve>,
    /// Seconds the cross-validation's searches took (0 without).
    pub cv_seconds: f64,
    /// The model choice's resampled errors (`--select folds`, or validation rows; `None`
    /// otherwise).
    pub resampled: Option<super::choice::Resampled>,
}

/// The evolution of [`fit`] on the rows it fits (`rows`: the training rows less the
/// validation rows): no choosing, no scoring.
pub fn search(settings: &EvolveSettings, rows: &Dataset, backend: &crate::backend::Backend, opts: &crate::task::base::options::RunOptions) -> anyhow::Result<Searched> {
    search_with(settings, rows, backend, opts, None)
}

/// The memory a regression search needs beyond its programs: the rows (on each of `shards`
/// GPUs, a share), a tree's fitness and sums, and with `terms` (a joint fit with that many
/// linear terms) or `outputs` > 1 or a fitness of the user's own, every tree's value at every
/// row on the device (that many outputs' each) with the joint fit's sums, a tree's
/// `terms + 3` f64s and a flag, on the device and back on the host.
fn task_need(rows: &Dataset, outputs: usize, terms: Option<usize>, own_fitness: bool, shards: usize) -> crate::task::base::plan::TaskNeed {
    let bytes = (rows.n_rows as u64).saturating_mul(rows.n_features as u64 + 1).saturating_mul(4);
    let values = if terms.is_some() || outputs > 1 || own_fitness { (rows.n_rows as u64).saturating_mul(4 * outputs.max(1) as u64) } else { 0 };
    let sums = terms.map_or(0, |t| (t as u64 + 3) * 8 + 4);
    crate::task::base::plan::TaskNeed {
        data: bytes,
        device_data: bytes / shards.max(1) as u64,
        per_individual: 32 + sums,
        device_per_individual: (32 + sums).saturating_add(values),
        cases: rows.n_rows as u64,
    }
}

/// [`search`], each program scored by its joint fit with linear terms of the inputs where
/// `joint` is given (`rows`' target is then their residual).
pub fn search_with(
    settings: &EvolveSettings,
    rows: &Dataset,
    backend: &crate::backend::Backend,
    opts: &crate::task::base::options::RunOptions,
    joint: Option<&Joint>,
) -> anyhow::Result<Searched> {
    use anyhow::{bail, ensure};

    let start = std::time::Instant::now();
    check_scaling(&settings.regression, settings.outputs)?;
    let k = settings.outputs;
    let sharded = settings.islands.shard_rows;
    self::shard::check(&settings.islands, settings.device, k)?;
    // Rows split over GPUs: each holds its shard, and constant fitting (which needs every row
    // on one GPU) is off.
    let shards = if sharded { self::shard::count(&settings.islands.gpus, backend)? } else { 1 };
    let mut engine = settings.engine.clone();
    if sharded && engine.constants.steps > 0 {
        engine.constants.steps = 0;
        opts.say("note: constant fitting is off with --shard-rows (it needs every row on one GPU)");
    }
    let search_settings = crate::task::base::search::SearchSettings { engine: &engine, ..settings.search_settings() };
    let need = task_need(rows, k, joint.map(|j| j.inputs.len()), settings.own_fitness(), shards);
    crate::task::base::plan::check_search(&search_settings, &need, backend, opts.max_memory, "")?;
    crate::task::base::search::note_bloat(&settings.engine, backend, opts);
    let n_outputs = if k > 1 { k } else { 0 };
    // A joint fit alone stays in the device loop where the engine can keep its values (with
    // tournaments or lexicase), on rows that one GPU holds.
    let joint_on_host = joint.is_some() && !crate::evolve::device::joint_fit_in_device_loop(&settings.engine, rows.n_rows, sharded);
    if (k > 1 || joint_on_host || settings.own_fitness()) && backend.is_gpu() && !opts.quiet {
        let what = if k > 1 {
            format!("--outputs {k} (the fitted head)")
        } else if settings.loss.is_some() {
            "--loss (the loss of your own)".to_string()
        } else if settings.fitness_function.is_some() {
            "a fitness function of your own".to_string()
        } else {
            "the linear terms".to_string()
        };
        opts.say(&format!("note: {what} keep selection and variation on the CPU (the device loop scores programs alone); evaluation stays on the GPU"));
    }
    // Islands spread over every GPU `islands.gpus` chooses, each with its own copy of the data;
    // or, with --shard-rows, one population whose rows are split over them (on the CPU: the
    // same shards, one after another).
    let more = match (sharded, backend.is_gpu()) {
        (false, _) => backend.more_gpus(&settings.islands.gpus, settings.islands.count)?,
        (true, true) => backend.more_gpus(&settings.islands.gpus, shards)?,
        (true, false) => Vec::new(),
    };
    let parts = if sharded { self::shard::split_rows(rows, shards)? } else { Vec::new() };
    let backends: Vec<&crate::backend::Backend> =
        if sharded && !backend.is_gpu() { vec![backend; shards] } else { std::iter::once(backend).chain(&more).collect() };
    ensure!(!sharded || backends.len() == shards, "--shard-rows: {shards} shards but {} GPUs opened", backends.len());
    let loss = settings.compiled_loss()?;
    let fitness_fn = settings.fitness_fn.as_ref().map(|f| &*f.0);
    let tasks = backends
        .iter()
        .enumerate()
        .map(|(i, &b)| {
            let part = if sharded { &parts[i] } else { rows };
            let data = b.regression_data(&part.x, &part.y, part.n_rows, part.n_features)?;
            Ok(Regression { backend: b, data, config: settings.regression, outputs: k, joint, rows: Some(part), loss, fitness_fn })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let on_gpus = crate::evolve::OnGpus(&tasks);
    let by_shard = if sharded { Some(self::shard::ShardedRegression::new(&tasks)?) } else { None };
    let task: &dyn crate::evolve::Fitness = match &by_shard {
        Some(s) => s,
        None => &on_gpus,
    };
    let device = match (sharded, backend.is_gpu()) {
        (true, false) => format!("{} ({shards} row shard{})", backend.describe(), if shards == 1 { "" } else { "s" }),
        (true, _) => format!("{} (rows split over {shards} GPU{})", describe_devices(backend, &more), if shards == 1 { "" } else { "s" }),
        (false, _) => describe_devices(backend, &more),
    };
    // --stop-at is the training loss the progress line shows: the fitness.
    let goal = crate::task::base::budget::Goal { measure: crate::task::base::budget::Measure::Loss, value: Box::new(|b: &crate::evolve::Best| b.fitness) };
    let mut observer = crate::task::base::observer::RunObserver::new(&settings.engine, &settings.islands, opts, rows.n_rows)?.with_budget(settings.budget, goal);
    let trees = |functions: &str| settings.trees.rep_with_outputs(functions, rows.n_features, n_outputs, settings.engine.max_len);
    let slots = |t: &crate::grammar::template::Templates, path: &str| if k > 1 { check_grammar_slots(t, k, path) } else { Ok(()) };
    let programs = crate::task::base::search::Programs {
        names: &rows.names,
        n_outputs,
        purpose: if k > 1 { format!("for evaluation with {k} outputs") } else { "for evaluation".into() },
        check: &slots,
        trees: &trees,
    };
    let searching = std::time::Instant::now();
    let setup_seconds = searching.duration_since(start).as_secs_f64();
    let outcome = crate::task::base::search::evolve(&search_settings, &programs, task, &mut observer)?;
    let search_seconds = searching.elapsed().as_secs_f64();
    if outcome.best.nodes.is_empty() {
        bail!("no valid program was found: every individual failed to map or evaluate");
    }
    Ok(Searched {
        setup_seconds,
        search_seconds,
        outcome,
        hof: std::mem::take(&mut observer.hof),
        median_sizes: std::mem::take(&mut observer.median_sizes),
        node_evaluations: observer.evals,
        seconds: start.elapsed().as_secs_f64(),
        device,
        ended: std::mem::replace(&mut observer.ended, crate::task::base::budget::Ending::Generations),
        cv: None,
        cv_seconds: 0.0,
        resampled: None,
    })
}

/// A program's readout and linear terms, fitted on `fit_rows` (the training rows less any
/// fixed `lin` terms): with `joint` terms, the program's weight and the terms' weights
/// together; else the readout of its `k` outputs beside the fixed terms.
pub(super) fn member_model(nodes: &[Node], fit_rows: &Dataset, lin: Option<&Linear>, joint: Option<&Joint>, linear_scaling: bool, k: usize) -> anyhow::Result<(Readout, Option<Linear>)> {
    let Some(j) = joint else {
        return Ok((readout(nodes, fit_rows, linear_scaling, k)?, lin.cloned()));
    };
    let mut pop = Population::new(1, nodes.len().max(1), 0);
    // A tree that does not fit leaves the row empty, which evaluates as invalid.
    let _ = pop.set_tree(0, nodes);
    let sums = crate::backend::cpu::eval::evaluate_joint(&pop, &fit_rows.x, &fit_rows.y, fit_rows.n_rows, &j.inputs)?.remove(0);
    Ok(match j.fit_with(&sums) {
        Some((w, l)) => (Readout::Scale(w, 0.0), Some(l)),
        None => (Readout::Scale(1.0, 0.0), Some(j.alone())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(n_rows: usize, n_features: usize) -> Dataset {
        let names = (0..n_features).map(|j| format!("x{j}")).collect();
        Dataset::new(names, "y", vec![0.5; n_rows * n_features], vec![1.0; n_rows]).unwrap()
    }

    #[test]
    fn a_joint_fit_counts_its_values_and_its_sums_of_every_term() {
        let d = rows(20, 100);
        let plain = task_need(&d, 1, None, false, 1);
        assert_eq!((plain.per_individual, plain.device_per_individual), (32, 32));
        assert_eq!(plain.data, 20 * 101 * 4);
        // 100 terms: 103 f64 sums and a flag a tree, and its value at each of the 20 rows.
        let joint = task_need(&d, 1, Some(100), false, 1);
        assert_eq!(joint.per_individual, 32 + 103 * 8 + 4);
        assert_eq!(joint.device_per_individual, 32 + 103 * 8 + 4 + 20 * 4);
        // A head of 3 outputs keeps three values a row and has no joint sums.
        let head = task_need(&d, 3, None, false, 1);
        assert_eq!(head.device_per_individual, 32 + 20 * 3 * 4);
        assert_eq!(task_need(&d, 1, None, true, 1).device_per_individual, 32 + 20 * 4);
        // Rows split over 4 GPUs: each holds a quarter of the data.
        assert_eq!(task_need(&d, 1, None, false, 4).device_data, plain.data / 4);
    }
}
