//! A classification run's result: the returned program scored on the training, validation
//! and test rows, written as the report, the saved model and the summary (with the confusion
//! matrix).

use super::*;
use super::search::{Choice, Heads, Prepared, Searched};

/// The returned program's scores on the training, validation and test rows.
struct Scored {
    train: ClassScores,
    validation: Option<ClassScores>,
    test: Option<ClassScores>,
}

/// Scores the chosen program on every part of the data and writes the report and summary of
/// [`fit`] (the run began at `start`).
#[allow(clippy::too_many_arguments)]
pub(super) fn finish(
    settings: &ClassifySettings,
    p: &Prepared<'_>,
    searched: &Searched,
    choice: &Choice<'_>,
    test: Option<&Labeled>,
    standardize: Option<&Standardize>,
    backend: &crate::backend::Backend,
    start: std::time::Instant,
) -> Result<EvolveResult> {
    let (train, best, best_head, terms) = (p.train(), &choice.best, &choice.best_head, p.terms());
    let seconds = start.elapsed().as_secs_f64();
    let test_offset = test.zip(terms).map(|(t, terms)| crate::program::logistic::offsets(terms, &t.data.x, t.data.n_rows));
    let scored = Scored {
        train: p.score(&best.nodes, best_head, train, p.offset.as_deref())?,
        validation: p.validation.as_ref().map(|v| p.score(&best.nodes, best_head, v, p.validation_offset.as_deref())).transpose()?,
        test: test.map(|t| p.score(&best.nodes, best_head, t, test_offset.as_deref())).transpose()?,
    };
    let mut report = report_json(settings, p, searched, choice, &scored, standardize, backend, seconds)?;
    let mut summary = summary_lines(settings, p, searched, choice, &scored);
    let generations: Vec<f64> = searched.outcome.history.iter().map(|s| s.seconds).collect();
    let finish = start.elapsed().as_secs_f64() - searched.setup_seconds - searched.search_seconds;
    let split = crate::task::base::report::Split::of(searched.setup_seconds, searched.search_seconds, finish, &generations, backend.kernel_loads());
    let time = format!("time          {seconds:.2} s on {}{}", searched.device, device_loop_line(&searched.outcome));
    crate::task::base::report::close(&mut report, &mut summary, &split, &time);
    Ok(EvolveResult { report, summary })
}

/// Each output's text in `style`, with its linear terms of the inputs where the model has them;
/// with a head, each class's logit over the outputs.
fn texts_with(p: &Prepared<'_>, nodes: &[Node], head: &Heads, style: crate::program::render::Style) -> Vec<String> {
    use crate::program::render::{outputs, render};
    let names = &p.train().data.names;
    let progs = if p.n_outputs == 0 { vec![render(nodes, names, style)] } else { outputs(nodes, p.n_outputs, names, style) };
    match (p.terms(), head) {
        (_, Some(h)) => h.iter().map(|h| crate::task::base::model::head_text(h, &progs, style)).collect(),
        (None, None) => progs,
        (Some(t), None) => progs.into_iter().zip(t).map(|(p, t)| format!("{p}{}", t.render(names, style))).collect(),
    }
}

/// The report of a classification run but for its time split.
#[allow(clippy::too_many_arguments)]
fn report_json(
    settings: &ClassifySettings,
    p: &Prepared<'_>,
    searched: &Searched,
    choice: &Choice<'_>,
    scored: &Scored,
    standardize: Option<&Standardize>,
    backend: &crate::backend::Backend,
    seconds: f64,
) -> Result<serde_json::Value> {
    use crate::program::render::{Style, render};
    let (train, best, n_outputs, outcome) = (p.train(), &choice.best, p.n_outputs, &searched.outcome);
    let names = &train.data.names;
    let texts = |nodes: &[Node], style: Style| texts_with(p, nodes, &choice.best_head, style);
    let programs = texts(&best.nodes, Style::Infix);
    let mut generations = generations_json(&outcome.history, &searched.median_sizes);
    add_island_stats(&mut generations, &outcome.island_history, false);
    let show = |nodes: &[Node], style: Style| {
        let head = choice.front.iter().position(|(_, e, _)| e.nodes == nodes).and_then(|i| choice.heads[i].clone());
        texts_with(p, nodes, &head, style).join("; ")
    };
    let fame = crate::task::base::validation::front_rows(&choice.front, &choice.cands, choice.decision.member, |nodes| {
        Ok((show(nodes, Style::Infix), show(nodes, Style::Latex), show(nodes, Style::Sympy)))
    })?;
    let mut best_json = serde_json::json!({
        "programs": programs,
        "infix": render(&best.nodes, names, Style::Infix),
        "sympy": if n_outputs == 0 { serde_json::json!(texts(&best.nodes, Style::Sympy)[0]) }
                 else { serde_json::json!(texts(&best.nodes, Style::Sympy)) },
        "size": best.nodes.len(), "fitness": crate::report::num(best.fitness), "generation": best.generation,
    });
    crate::task::base::report::add_genome(&mut best_json, best);
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
        limits: None,
        logit_terms: p.terms().map(<[_]>::to_vec),
        class_head: choice.best_head.clone(),
        standardize: standardize.cloned(),
    };
    let evals = searched.evals;
    let validation_rows = p.validation.as_ref().map_or(0, |v| v.data.n_rows);
    let mut report = serde_json::json!({
        "command": "classify",
        "settings": settings,
        "classes": train.classes,
        "generations": generations,
        "collapse": crate::task::base::report::collapse_json(&searched.median_sizes),
        "ended": searched.ended,
        "best": best_json,
        "linear_inputs": p.linear.json(),
        "selection": crate::task::base::validation::selection_json(&p.plan, &choice.decision, train.data.n_rows, validation_rows),
        "train": scored.train.json(),
        "validation": scored.validation.as_ref().map(ClassScores::json),
        "test": scored.test.as_ref().map(ClassScores::json),
        "model": model,
        "hall_of_fame": fame,
        "timing": {"seconds": seconds, "node_evaluations": evals, "node_evaluations_per_second": evals / seconds,
                   "threads": rayon::current_num_threads(), "device": searched.device,
                   "fitness_on_cpu": backend.classification_on_host() || !backend.is_gpu(),
                   "linear_inputs_seconds": p.linear.seconds},
        "transfers": outcome.transfers,
        "fitness_cache": outcome.fitness_cache,
        "version": env!("CARGO_PKG_VERSION"),
    });
    crate::task::base::report::add_operators(&mut report, &best.nodes);
    Ok(report)
}

/// The summary of a classification run up to its time split: each output's program, the head
/// or the class rule, the choice, the scores, the confusion matrix and the islands.
fn summary_lines(settings: &ClassifySettings, p: &Prepared<'_>, searched: &Searched, choice: &Choice<'_>, scored: &Scored) -> String {
    use crate::program::render::{Style, outputs, render};
    let (train, best, n_outputs) = (p.train(), &choice.best, p.n_outputs);
    let names = &train.data.names;
    let w = train.classes.iter().map(|c| c.len()).max().unwrap_or(1).max(8);
    let mut summary = String::new();
    // The programs alone: the terms of every input would bury them (the report has the whole model).
    let alone = if n_outputs == 0 { vec![render(&best.nodes, names, Style::Infix)] } else { outputs(&best.nodes, n_outputs, names, Style::Infix) };
    let plus = if p.terms().is_some() { " + linear terms" } else { "" };
    if let Some(h) = &choice.best_head {
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
    summary += &format!("linear inputs {}\n", p.linear.why);
    summary += &format!("size          {} nodes\n", best.nodes.len());
    summary += &format!("selected      {}: {}\n", choice.decision.rule.name(), choice.decision.why);
    summary += &searched.ended.line(settings.engine.generations).unwrap_or_default();
    summary += &crate::task::base::report::collapse_line(&searched.median_sizes, settings.engine.selection);
    for (name, s) in [("train", Some(&scored.train)), ("validation", scored.validation.as_ref()), ("test", scored.test.as_ref())] {
        if let Some(s) = s {
            summary += &format!(
                "{name:<13} accuracy {:.4}  balanced accuracy {:.4}  weighted F1 {:.4}  ({} rows)\n",
                s.confusion.accuracy(),
                s.confusion.balanced_accuracy(),
                s.confusion.weighted_f1(),
                s.rows()
            );
        }
    }
    if scored.test.is_none() {
        summary += "test          (no test data: use --test-data or --test-fraction)\n";
    }
    let (part, confusion) = match &scored.test {
        Some(s) => ("test", &s.confusion),
        None => ("training", &scored.train.confusion),
    };
    summary += &format!("confusion on the {part} rows (rows: true class, columns: predicted)\n{}\n", confusion.render(&train.classes));
    if let Some(line) = islands_summary(&settings.islands, settings.engine.pop_size, &searched.outcome.island_history, false) {
        summary += &line;
    }
    summary
}
