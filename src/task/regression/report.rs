//! A regression run's result: the program chosen from the front, scored on every part of the
//! data, written as the report, the saved model and the summary; and the formula's text.

use super::*;

/// A program under `readout` in infix, LaTeX and sympy text: `a·f + b` ([`scaled_texts`]) or
/// the head's `b + w1·(f1) + w2·(f2) + …` over the output slots' formulas (zero weights left
/// out).
pub fn readout_texts(nodes: &[Node], names: &[String], readout: &Readout) -> (String, String, String) {
    model_texts(nodes, names, readout, None)
}

/// [`readout_texts`] of the whole model: with `linear` terms, the intercepts are summed into
/// one number at the end and `+ a_j*x_j` follow the program (zero weights left out).
pub fn model_texts(nodes: &[Node], names: &[String], readout: &Readout, linear: Option<&Linear>) -> (String, String, String) {
    use crate::program::render::Style;
    let Some(l) = linear else {
        return program_texts(nodes, names, readout);
    };
    // A baseline of the model choice (the mean, the terms alone): the terms are the formula.
    let baseline = matches!((nodes, readout), ([n], Readout::Scale(a, _)) if n.op == crate::program::Op::Const && n.value as f64 * a == 0.0);
    if let (true, Readout::Scale(_, b)) = (baseline, readout) {
        let merged = Linear { c: l.c + b, a: l.a.clone() };
        let text = |style: Style| {
            let t = merged.render(names, style);
            match t.strip_prefix(" + ") {
                Some(rest) => rest.to_string(),
                None => t.strip_prefix(" - ").map_or(t.clone(), |rest| format!("-{rest}")),
            }
        };
        return (text(Style::Infix), text(Style::Latex), text(Style::Sympy));
    }
    // The program with its own intercept moved into the terms' one.
    let (inner, c) = match readout {
        Readout::Scale(a, b) => (Readout::Scale(*a, 0.0), l.c + b),
        Readout::Head(h) => (Readout::Head(Head { b: 0.0, ..h.clone() }), l.c + h.b),
    };
    let (pi, pl, ps) = program_texts(nodes, names, &inner);
    let pi = pi.strip_suffix(" + 0").map(str::to_string).unwrap_or(pi);
    let pl = pl.strip_suffix(" + 0").map(str::to_string).unwrap_or(pl);
    let ps = ps.strip_suffix(" + 0").map(str::to_string).unwrap_or(ps);
    let merged = Linear { c, a: l.a.clone() };
    let terms = |style: Style| merged.render(names, style);
    (pi + &terms(Style::Infix), pl + &terms(Style::Latex), ps + &terms(Style::Sympy))
}

/// [`readout_texts`] of the program alone.
fn program_texts(nodes: &[Node], names: &[String], readout: &Readout) -> (String, String, String) {
    use crate::program::render::{Style, number, outputs};
    let head = match readout {
        Readout::Scale(a, b) => return scaled_texts(nodes, names, (*a, *b)),
        Readout::Head(h) => h,
    };
    let text = |style: Style| -> String {
        let slots = outputs(nodes, head.w.len(), names, style);
        let mut s = number(head.b as f32);
        for (w, f) in head.w.iter().zip(&slots).filter(|(w, _)| **w != 0.0) {
            let sign = if *w < 0.0 { "-" } else { "+" };
            let w = number(w.abs() as f32);
            s += &match style {
                Style::Latex => format!(" {sign} {w} \\cdot \\left({f}\\right)"),
                Style::Sympy | Style::Infix => format!(" {sign} {w}*({f})"),
            };
        }
        s
    };
    (text(Style::Infix), text(Style::Latex), text(Style::Sympy))
}

/// A program as `a·f + b` in infix, LaTeX and sympy text (just `f` when `(a, b)` is `(1, 0)`).
fn scaled_texts(nodes: &[Node], names: &[String], (a, b): (f64, f64)) -> (String, String, String) {
    use crate::program::render::{Style, number, render};
    let wrap = |style: Style| -> String {
        let body = render(nodes, names, style);
        if (a, b) == (1.0, 0.0) {
            return body;
        }
        let (a, b) = (number(a as f32), number(b as f32));
        match style {
            Style::Latex => format!("{a} \\cdot \\left({body}\\right) + {b}"),
            Style::Sympy | Style::Infix => format!("{a}*({body}) + {b}"),
        }
    };
    (wrap(Style::Infix), wrap(Style::Latex), wrap(Style::Sympy))
}

/// Where the front's members get their readouts and linear terms: the rows evolution fitted
/// (less the linear terms, where the model has them) and the terms themselves.
struct Fitted<'a> {
    /// The rows each program's readout is fitted on.
    rows: &'a Dataset,
    /// The linear terms beside every program (fixed), where there are some.
    lin: Option<&'a Linear>,
    /// One output with terms: each program's joint fit with them.
    joint: Option<&'a Joint>,
    linear_scaling: bool,
    outputs: usize,
}

impl Fitted<'_> {
    /// A program's readout and linear terms ([`member_model`]).
    fn model_of(&self, nodes: &[Node]) -> anyhow::Result<(Readout, Option<Linear>)> {
        member_model(nodes, self.rows, self.lin, self.joint, self.linear_scaling, self.outputs)
    }
}

/// The hall of fame's front as candidates of the model choice: each member's readout and
/// terms (fitted on the fitted rows), its validation error and its description length.
struct Front<'h> {
    members: Vec<(usize, &'h crate::evolve::hof::Entry, f64)>,
    models: Vec<(Readout, Option<Linear>)>,
    cands: Vec<crate::task::base::validation::Candidate>,
    /// The kinds of node the description lengths count.
    primitives: usize,
}

/// Scores the front of `searched` for the model choice: each member's readout fitted by
/// `fitted`, its error on `validation`, its description length on `rows`.
fn score_front<'h>(
    settings: &EvolveSettings,
    searched: &'h Searched,
    fitted: &Fitted<'_>,
    rows: &Dataset,
    validation: Option<&Dataset>,
    backend: &crate::backend::Backend,
) -> anyhow::Result<Front<'h>> {
    use crate::task::base::validation::{Candidate, constants_of, description_length, gaussian_nll, primitives_of};
    let (parsimony, metric) = (settings.regression.parsimony, settings.regression.metric);
    // The terms' numbers count in every member's description.
    let lin_numbers = fitted.lin.map_or(0, |l| l.used() + 1);
    let members = searched.hof.front(|e| e.fitness - parsimony * e.nodes.len() as f64);
    let mut models = Vec::with_capacity(members.len());
    let mut cands = Vec::with_capacity(members.len());
    let primitives = primitives_of(members.iter().map(|(_, e, _)| &e.nodes[..]), rows.n_features);
    for (n, e, loss) in &members {
        let (r, l) = fitted.model_of(&e.nodes)?;
        let v = validation.map(|v| scores_with(&e.nodes, v, &r, l.as_ref())).transpose()?;
        // The readout's numbers (the scaling's two, or the head's K + 1; beside joint terms,
        // whose intercept is theirs, the program's weight) are fitted as much as the tree's
        // constants are.
        let numbers = match &r {
            Readout::Scale(..) if fitted.joint.is_some() => 1,
            Readout::Scale(..) if fitted.linear_scaling => 2,
            Readout::Scale(..) => 0,
            Readout::Head(h) => h.w.len() + 1,
        };
        let params = constants_of(&e.nodes) + numbers + lin_numbers;
        let nll = gaussian_nll(scores_with(&e.nodes, rows, &r, l.as_ref())?.mse, rows.n_rows);
        models.push((r, l));
        cands.push(Candidate {
            size: *n,
            loss: *loss,
            validation: v.map(|s| metric_of(&s, metric)),
            description: Some(description_length(nll, *n, primitives, params, rows.n_rows)),
            cv: searched.cv.as_ref().map(|c| c.mse(*n)),
            resampled: None,
        });
    }
    // With a fitness of the user's own, the validation error is that fitness on the validation
    // rows: a loss's, or the function's scores of the front in one batch.
    if let (Some(v), true) = (validation, settings.own_fitness()) {
        let loss = settings.compiled_loss()?;
        let fitness_fn = settings.fitness_fn.as_ref().map(|f| &*f.0);
        let batch: Vec<(&[Node], &Readout)> = members.iter().zip(&models).map(|((_, e, _), (r, _))| (&e.nodes[..], r)).collect();
        if let Some(scores) = own_scores(loss.as_ref(), fitness_fn, &batch, v, backend)? {
            for (c, s) in cands.iter_mut().zip(scores) {
                c.validation = Some(s);
            }
        }
    }
    Ok(Front { members, models, cands, primitives })
}

/// The returned program's scores on the training, validation and test rows.
struct Scored {
    train: Scores,
    validation: Option<Scores>,
    test: Option<Scores>,
}

/// Chooses the returned program from a search as `plan` says (the front scored on
/// `validation`), scores it on `rows` (where evolution fitted; the linear scaling is fitted
/// there too), `validation` and `test`, and writes the report and summary of [`fit`]. With
/// `linear` terms the search ran on the residual of `rows` ([`residual`]): each program's
/// readout is fitted there, and every score is the whole model's on the data as given.
#[allow(clippy::too_many_arguments)]
pub fn finish(
    settings: &EvolveSettings,
    plan: &crate::task::base::validation::Plan,
    searched: &Searched,
    rows: &Dataset,
    validation: Option<&Dataset>,
    test: Option<&Dataset>,
    backend: &crate::backend::Backend,
    linear: &LinearChoice,
) -> anyhow::Result<EvolveResult> {
    use crate::task::base::validation::{Band, Baseline, Described, Select, chosen_program, decide, decide_described, decide_resampled, description_length, front_rows, gaussian_nll};

    let start = std::time::Instant::now();
    let outcome = &searched.outcome;
    let k = settings.outputs;
    let lin = linear.linear();
    // Where each program's readout is fitted: the rows, less the linear terms.
    let fit_rows = match lin {
        Some(l) => std::borrow::Cow::Owned(residual(rows, l)),
        None => std::borrow::Cow::Borrowed(rows),
    };
    // One output with terms: each program gets its own terms from its joint fit; a head reads
    // what the terms left.
    let joint = if k <= 1 { linear.joint() } else { None };
    let fitted = Fitted { rows: fit_rows.as_ref(), lin, joint, linear_scaling: settings.regression.linear_scaling, outputs: k };
    let mut front = score_front(settings, searched, &fitted, rows, validation, backend)?;
    let best_at = front.members.iter().position(|(_, e, _)| e.nodes == outcome.best.nodes);
    // The simplest candidates: the mean, and the terms alone where some input was chosen.
    let terms_alone = linear.fit.as_ref().filter(|f| f.inputs > 0 && f.joint.is_some()).map(|f| &f.linear);
    // And the ridge on every input, where the terms chose fewer (or none).
    let every_fit = match &linear.fit {
        Some(f) if f.inputs < f.used => terms_on(rows, true)?,
        _ => None,
    };
    let every = every_fit.as_ref().map(|f| &f.linear);
    let resampled = searched.resampled.as_ref().filter(|r| r.members.len() == front.cands.len());
    let decision = match resampled {
        Some(r) if matches!(plan.rule, Select::Folds | Select::Validation | Select::Cv) => {
            for (c, s) in front.cands.iter_mut().zip(&r.members) {
                c.resampled = Some(*s);
            }
            let mut simple = vec![(Baseline::Mean, r.mean)];
            simple.extend(r.linear.filter(|_| terms_alone.is_some()).map(|s| (Baseline::Linear, s)));
            simple.extend(r.every.filter(|_| every.is_some()).map(|s| (Baseline::Every, s)));
            // The whole fit's folds search every shape without the rows it is scored on: there
            // the lowest is returned; the front's refits keep shapes searched on every row.
            let band = if plan.rule == Select::Cv { Band::Lowest } else { Band::OneSe };
            let paired = |a, b| r.paired(a, b);
            decide_resampled(plan, &front.cands, &simple, &r.how(), band, Some(&paired), best_at)
        }
        _ if plan.rule == Select::Mdl => {
            if let Some(r) = resampled {
                for (c, s) in front.cands.iter_mut().zip(&r.members) {
                    c.resampled = Some(*s);
                }
            }
            // The simple candidates' lengths: no node, their own fitted numbers.
            let n = rows.n_rows;
            let mean_mse = {
                let m = rows.y.iter().map(|&y| y as f64).sum::<f64>() / n.max(1) as f64;
                rows.y.iter().map(|&y| (y as f64 - m).powi(2)).sum::<f64>() / n.max(1) as f64
            };
            let mut simple = vec![(Baseline::Mean, Described { description: description_length(gaussian_nll(mean_mse, n), 0, front.primitives, 1, n), resampled: resampled.map(|r| r.mean) })];
            for (b, l, s) in [(Baseline::Linear, terms_alone, resampled.and_then(|r| r.linear)), (Baseline::Every, every, resampled.and_then(|r| r.every))] {
                if let Some(l) = l {
                    let mse = scores_with(&[Node::constant(0.0)], rows, &Readout::Scale(1.0, 0.0), Some(l))?.mse;
                    let description = description_length(gaussian_nll(mse, n), 0, front.primitives, l.used() + 1, n);
                    simple.push((b, Described { description, resampled: s }));
                }
            }
            let paired = |a, b| resampled.and_then(|r| r.paired(a, b));
            decide_described(plan, &front.cands, &simple, Some(&paired), best_at)
        }
        _ => decide(plan, &front.cands, best_at),
    };
    let baseline_model = |b: Baseline| -> (Vec<Node>, Readout, Linear) {
        let mean = rows.y.iter().map(|&y| y as f64).sum::<f64>() / rows.n_rows.max(1) as f64;
        let l = match (b, terms_alone, every) {
            (Baseline::Linear, Some(l), _) | (Baseline::Every, _, Some(l)) => l.clone(),
            _ => Linear { c: mean, a: vec![0.0; rows.n_features] },
        };
        (vec![Node::constant(0.0)], Readout::Scale(1.0, 0.0), l)
    };
    let (best, chosen, chosen_linear) = match decision.baseline {
        Some(b) => {
            let (nodes, r, l) = baseline_model(b);
            let s = scores_with(&nodes, rows, &r, Some(&l))?;
            let best = crate::evolve::Best { fitness: metric_of(&s, settings.regression.metric), nodes, generation: 0, genome: None };
            (best, r, Some(l))
        }
        None => {
            let best = chosen_program(&front.members, &decision, outcome);
            let (r, l) = match decision.member {
                Some(i) => front.models[i].clone(),
                None => fitted.model_of(&best.nodes)?,
            };
            (best, r, l)
        }
    };
    let lin = chosen_linear.as_ref();
    let limits = settings.output_margin.and_then(|m| crate::task::base::model::limits_of(&rows.y, m));
    let mut scored = Scored {
        train: scores_limited(&best.nodes, rows, &chosen, lin, limits)?,
        validation: validation.map(|v| scores_limited(&best.nodes, v, &chosen, lin, limits)).transpose()?,
        test: test.map(|t| scores_limited(&best.nodes, t, &chosen, lin, limits)).transpose()?,
    };
    // The fitness of the user's own beside the standard scores, on every part of the data.
    if settings.own_fitness() {
        let loss = settings.compiled_loss()?;
        let fitness_fn = settings.fitness_fn.as_ref().map(|f| &*f.0);
        let one = [(&best.nodes[..], &chosen)];
        let own = |d: &Dataset| own_scores(loss.as_ref(), fitness_fn, &one, d, backend).map(|s| s.map(|s| s[0]));
        scored.train.loss = own(rows)?;
        if let (Some(s), Some(v)) = (scored.validation.as_mut(), validation) {
            s.loss = own(v)?;
        }
        if let (Some(s), Some(t)) = (scored.test.as_mut(), test) {
            s.loss = own(t)?;
        }
    }
    let names = &rows.names;
    let fame = front_rows(&front.members, &front.cands, decision.member, |nodes| {
        let (r, l) = fitted.model_of(nodes)?;
        Ok(model_texts(nodes, names, &r, l.as_ref()))
    })?;
    let texts = model_texts(&best.nodes, names, &chosen, lin);
    let model = Chosen { best: &best, readout: &chosen, linear: lin, texts: &texts, limits };
    let seconds = searched.seconds + searched.cv_seconds + searched.resampled.as_ref().map_or(0.0, |r| r.seconds) + start.elapsed().as_secs_f64();
    let mut selection = crate::task::base::validation::selection_json(plan, &decision, rows.n_rows, validation.map_or(0, |v| v.n_rows));
    if let Some(r) = resampled {
        let chosen_is = |p: Option<Baseline>, m: Option<usize>| decision.baseline == p && (p.is_some() || decision.member == m);
        let row = |name: String, size: usize, s: Option<crate::task::base::crossval::Score>, chosen: bool| {
            serde_json::json!({"candidate": name, "size": size,
                "mse": s.map(|s| crate::report::num(s.mse)), "se": s.map(|s| crate::report::num(s.se)), "chosen": chosen})
        };
        let mut rows_json = vec![row("mean".into(), 0, Some(r.mean), chosen_is(Some(Baseline::Mean), None))];
        if terms_alone.is_some() {
            rows_json.push(row("linear terms".into(), 0, r.linear, chosen_is(Some(Baseline::Linear), None)));
        }
        if every.is_some() {
            rows_json.push(row("every input".into(), 0, r.every, chosen_is(Some(Baseline::Every), None)));
        }
        for (i, ((n, _, _), c)) in front.members.iter().zip(&front.cands).enumerate() {
            rows_json.push(row(format!("front {i}"), *n, c.resampled, chosen_is(None, Some(i))));
        }
        let measure = if settings.regression.metric == crate::task::regression::Metric::Mae { "mae" } else { "mse" };
        selection["resampling"] = serde_json::json!({"how": r.how(), "folds": r.folds, "rows": r.rows, "loss": measure});
        selection["candidates"] = serde_json::json!(rows_json);
        if let Some(b) = decision.baseline {
            selection["baseline"] = serde_json::json!(match b {
                Baseline::Mean => "mean",
                Baseline::Linear => "linear terms",
                Baseline::Every => "every input",
            });
        }
    }
    if let Some(c) = &searched.cv {
        selection["cross_validation"] = serde_json::json!({
            "folds": c.folds, "rows": c.rows,
            "mse_by_size": c.sse.iter().map(|e| crate::report::num(e / c.rows as f64)).collect::<Vec<_>>(),
            "fold_mse_by_size": c.per_fold.iter().map(|(rows, e)| e.iter().map(|e| crate::report::num(e / (*rows).max(1) as f64)).collect::<Vec<_>>()).collect::<Vec<_>>(),
        });
    }
    let blocks = Blocks { selection, linear_inputs: linear.json(), hall_of_fame: fame };
    let mut report = report_json(settings, searched, rows, &model, &scored, blocks, seconds)?;
    let mut summary = summary_lines(settings, searched, &model, &scored, &linear.why, &format!("{}: {}", decision.rule.name(), decision.why));
    let generations: Vec<f64> = outcome.history.iter().map(|s| s.seconds).collect();
    let split = crate::task::base::report::Split::of(searched.setup_seconds, searched.search_seconds, start.elapsed().as_secs_f64(), &generations, backend.kernel_loads());
    let time = format!("time          {seconds:.2} s on {}{}", searched.device, device_loop_line(outcome));
    crate::task::base::report::close(&mut report, &mut summary, &split, &time);
    Ok(EvolveResult { report, summary })
}

/// The returned model: the program, its readout and its linear terms, and its formula
/// (infix, LaTeX, sympy).
struct Chosen<'a> {
    best: &'a crate::evolve::Best,
    readout: &'a Readout,
    linear: Option<&'a Linear>,
    texts: &'a (String, String, String),
    /// The prediction's limits (`--output-margin`).
    limits: Option<(f64, f64)>,
}

/// The report's blocks of the model choice: how the program was chosen (with `--select cv`'s
/// curve), the linear terms and why, and the hall of fame's rows.
struct Blocks {
    selection: serde_json::Value,
    linear_inputs: serde_json::Value,
    hall_of_fame: Vec<crate::task::base::report::FameRow>,
}

/// The report of a regression run but for its time split: the settings, generations, the
/// returned program, the choice's blocks, its scores and saved model, the timing (`seconds` in
/// all).
fn report_json(
    settings: &EvolveSettings,
    searched: &Searched,
    rows: &Dataset,
    m: &Chosen<'_>,
    scored: &Scored,
    blocks: Blocks,
    seconds: f64,
) -> anyhow::Result<serde_json::Value> {
    let (outcome, best, names, k) = (&searched.outcome, m.best, &rows.names, settings.outputs);
    let (infix, latex, sympy) = m.texts;
    let score_json = |s: &Scores| {
        let mut v = serde_json::json!({"mse": crate::report::num(s.mse), "rmse": crate::report::num(s.rmse),
                           "mae": crate::report::num(s.mae), "r2": crate::report::num(s.r2)});
        if let Some(l) = s.loss {
            v["loss"] = serde_json::json!(crate::report::num(l));
        }
        if s.not_finite > 0 {
            v["not_finite"] = serde_json::json!(s.not_finite);
        }
        v
    };
    let mut generations = generations_json(&outcome.history, &searched.median_sizes);
    add_island_stats(&mut generations, &outcome.island_history, false);
    let node_evals = searched.node_evaluations;
    let mut best_json = serde_json::json!({"infix": infix, "latex": latex, "sympy": sympy,
        "size": best.nodes.len(), "fitness": crate::report::num(best.fitness), "generation": best.generation});
    match m.readout {
        Readout::Scale(a, b) => best_json["scale"] = serde_json::json!([a, b]),
        Readout::Head(h) => {
            best_json["head"] = serde_json::json!(h);
            let slots = crate::program::render::outputs(&best.nodes, k, names, crate::program::render::Style::Infix);
            best_json["outputs"] = serde_json::json!(slots);
        }
    }
    crate::task::base::report::add_genome(&mut best_json, best);
    let model = crate::task::base::model::Model {
        kind: crate::task::base::model::ModelKind::Regression,
        features: names.clone(),
        target: rows.target.clone(),
        nodes: crate::task::base::model::Model::encode(&best.nodes),
        operators: crate::task::base::model::Model::operators_of(&best.nodes),
        n_outputs: m.readout.n_outputs(),
        classes: None,
        scale: match m.readout {
            Readout::Scale(a, b) => Some((*a, *b)),
            Readout::Head(_) => None,
        },
        head: match m.readout {
            Readout::Scale(..) => None,
            Readout::Head(h) => Some(h.clone()),
        },
        linear: m.linear.cloned(),
        limits: m.limits,
        logit_terms: None,
        class_head: None,
        standardize: None,
    };
    let mut report = serde_json::json!({
        "command": "evolve",
        "settings": settings,
        "generations": generations,
        "collapse": crate::task::base::report::collapse_json(&searched.median_sizes),
        "ended": searched.ended,
        "best": best_json,
        "selection": blocks.selection,
        "linear_inputs": blocks.linear_inputs,
        "train": score_json(&scored.train),
        "validation": scored.validation.as_ref().map(score_json),
        "test": scored.test.as_ref().map(score_json),
        "model": model,
        "hall_of_fame": blocks.hall_of_fame,
        "timing": {"seconds": seconds, "node_evaluations": node_evals,
                   "node_evaluations_per_second": node_evals / seconds, "threads": rayon::current_num_threads(),
                   "device": searched.device, "fitness_cache": outcome.fitness_cache},
        "transfers": outcome.transfers,
        "version": env!("CARGO_PKG_VERSION"),
    });
    crate::task::base::report::add_operators(&mut report, &best.nodes);
    if searched.cv.is_some() {
        report["timing"]["cross_validation_seconds"] = serde_json::json!(searched.cv_seconds);
    }
    if let Some(r) = searched.resampled.as_ref().filter(|_| searched.cv.is_none()) {
        report["timing"]["model_choice_seconds"] = serde_json::json!(r.seconds);
    }
    Ok(report)
}

/// The summary of a regression run up to its islands and time lines: the program, its head,
/// the linear terms' and the choice's reasons (`terms`, `selected`), the ending and the scores.
fn summary_lines(settings: &EvolveSettings, searched: &Searched, m: &Chosen<'_>, scored: &Scored, terms: &str, selected: &str) -> String {
    let (k, infix) = (settings.outputs, &m.texts.0);
    let mut summary = format!("best program  {infix}\nsize          {} nodes\n", m.best.nodes.len());
    summary += &crate::task::base::report::constants_line(&m.best.nodes);
    if let Some((lo, hi)) = m.limits {
        summary += &format!("limits        predictions clamped to [{lo:.6e}, {hi:.6e}] (--output-margin {})\n", settings.output_margin.unwrap_or(0.0));
    }
    if let Readout::Head(h) = m.readout {
        let w: Vec<String> = h.w.iter().map(|w| format!("{w:.6e}")).collect();
        summary += &format!("head          {k} outputs under b + Σ w_k·f_k: b {:.6e}, w [{}]\n", h.b, w.join(", "));
    }
    if let Some(line) = own_fitness_line(settings) {
        summary += &line;
    }
    summary += &format!("linear inputs {terms}\n");
    summary += &format!("selected      {selected}\n");
    if let Some(c) = &searched.cv {
        summary += &format!("cross-val     {} folds, the whole fit repeated on each: {:.2} s\n", c.folds, searched.cv_seconds);
    }
    // The whole fit's folds give the candidates' errors too; the front's own folds are a
    // line of their own.
    if let Some(r) = searched.resampled.as_ref().filter(|r| r.folds > 0 && searched.cv.is_none()) {
        summary += &format!("cross-val     {} folds of the front (each program's numbers refitted on each): {:.2} s\n", r.folds, r.seconds);
    }
    summary += &searched.ended.line(settings.engine.generations).unwrap_or_default();
    summary += &crate::task::base::report::collapse_line(&searched.median_sizes, settings.engine.selection);
    let line = |name: &str, s: &Scores| {
        let own = s.loss.map_or(String::new(), |l| format!("loss {l:.6e}  "));
        let odd = if s.not_finite > 0 { format!("  (predictions not finite: {})", s.not_finite) } else { String::new() };
        format!("{name:<13} {own}mse {:.6e}  rmse {:.6e}  mae {:.6e}  r2 {:.6}{odd}\n", s.mse, s.rmse, s.mae, s.r2)
    };
    summary += &line("train", &scored.train);
    if let Some(s) = &scored.validation {
        summary += &line("validation", s);
    }
    match &scored.test {
        Some(s) => summary += &line("test", s),
        None => summary += "test          (no test data: use --test-data or --test-fraction)\n",
    }
    if let Some(line) = islands_summary(&settings.islands, settings.engine.pop_size, &searched.outcome.island_history, false) {
        summary += &line;
    }
    summary
}

/// The summary's line on a fitness of the user's own: what it reduces and where it reads the
/// prediction.
fn own_fitness_line(settings: &EvolveSettings) -> Option<String> {
    let at = if settings.regression.linear_scaling {
        "at the prediction a·f + b (a, b fitted by least squares)"
    } else {
        "at the program's value (--no-linear-scaling)"
    };
    if let Some(l) = &settings.loss {
        let reduce = match settings.loss_reduce {
            LossReduce::Mean => "mean",
            LossReduce::Sum => "sum",
        };
        return Some(format!("loss          {reduce} of {} over the rows, {at}\n", l.trim()));
    }
    settings.fitness_function.as_ref().map(|f| format!("fitness       the function {f}, {at}\n"))
}
