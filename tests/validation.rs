//! Validation rows and the choice made on them (issue 16): the split is seeded, stratified for
//! classes and disjoint from the rows evolution fits and from the test rows; the validation
//! rows never reach the fitness; `validation` and `pareto` pick the front members they should;
//! bad settings are one-line errors; experiment files carry the settings; the report keeps the
//! front with both losses and says which member was returned and why.

use grove::backend::Backend;
use grove::data::Dataset;
use grove::data::classes::{Labeled, stratified_split_for};
use grove::data::split::{Holdout, split_for};
use grove::rng::{Purpose, Stream};
use grove::select::Bloat;
use grove::task::runner::experiment::{Experiment, Overrides, from_source, parse_ron};
use grove::task::regression::{EvolveSettings, fit, validation_split};
use grove::task::base::options::RunOptions;
use grove::task::base::validation::{Candidate, Plan, Select, choose, pareto_scores};
use serde_json::{Value, json};

mod support;

/// `n` rows whose one feature is the row number (so a part's rows can be read back).
fn numbered(n: usize) -> Dataset {
    let x: Vec<f64> = (0..n).map(|i| i as f64).collect();
    Dataset::new(vec!["i".into()], "y", x.clone(), x).unwrap()
}

fn rows_of(d: &Dataset) -> Vec<usize> {
    d.x.iter().map(|&v| v as usize).collect()
}

/// y = x0·x1 + sin(x2) + noise, `n` rows: noisy enough that the front's members differ on
/// validation rows.
fn noisy(n: usize, seed: u64) -> Dataset {
    let mut s = Stream::new(seed, 0, 9, Purpose::Bench);
    let mut x = vec![0.0; 3 * n];
    for v in x.iter_mut() {
        *v = s.unit_f64() * 4.0 - 2.0;
    }
    let y = (0..n).map(|i| x[i] * x[n + i] + x[2 * n + i].sin() + (s.unit_f64() - 0.5) * 2.0).collect();
    Dataset::new(vec!["x0".into(), "x1".into(), "x2".into()], "y", x, y).unwrap()
}

fn small_settings() -> EvolveSettings {
    let mut s = EvolveSettings::cli_default();
    s.functions = Some("add,sub,mul,div,sin".into());
    s.engine.pop_size = 200;
    s.engine.generations = 8;
    s.engine.seed = 3;
    s
}

fn quiet() -> RunOptions {
    RunOptions { quiet: true, ..Default::default() }
}

#[test]
fn the_validation_split_is_seeded_and_disjoint_from_the_training_and_test_rows() {
    let all = numbered(400);
    let (train, test) = grove::data::split(&all, 0.25, 7).unwrap();
    // The automatic split from 300 rows (classification's threshold; regression's is larger).
    let plan = Plan::new(None, Select::Auto, train.n_rows, Select::Mdl).unwrap();
    assert_eq!((plan.fraction, plan.rule), (0.25, Select::Validation));
    let (rows, validation) = validation_split(&train, &plan, 7).unwrap();
    let validation = validation.unwrap();
    let (r, v, t) = (rows_of(&rows), rows_of(&validation), rows_of(&test));
    assert_eq!((r.len(), v.len(), t.len()), (225, 75, 100));
    // A partition of all rows: fitted, validation and test rows never overlap.
    let mut every: Vec<usize> = r.iter().chain(&v).chain(&t).copied().collect();
    every.sort_unstable();
    assert_eq!(every, (0..400).collect::<Vec<_>>());
    // Seeded: the same seed gives the same rows, another seed others.
    assert_eq!(rows_of(&validation_split(&train, &plan, 7).unwrap().1.unwrap()), v);
    assert_ne!(rows_of(&validation_split(&train, &plan, 8).unwrap().1.unwrap()), v);
    // Its own stream: not the test split's shuffle of the same rows.
    let (_, as_test) = grove::data::split(&train, 0.25, 7).unwrap();
    assert_ne!(rows_of(&as_test), v);
    // No validation rows: the training rows are used as they are.
    let none = Plan::new(Some(0.0), Select::Auto, train.n_rows, grove::task::base::defaults::EVOLVE_AUTO).unwrap();
    let (same, nothing) = validation_split(&train, &none, 7).unwrap();
    assert!(nothing.is_none() && *same == train);
    let e = split_for(&numbered(3), 0.1, 1, Holdout::VALIDATION).unwrap_err().to_string();
    assert!(e.contains("leaves the validation set empty"), "{e}");
}

#[test]
fn the_classifier_validation_split_keeps_each_class_share() {
    // Classes of 40, 20, 8 and 1 rows.
    let sizes = [40usize, 20, 8, 1];
    let labels: Vec<u32> = sizes.iter().enumerate().flat_map(|(c, &n)| std::iter::repeat_n(c as u32, n)).collect();
    let n = labels.len();
    let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let classes = (0..4).map(|c| format!("c{c}")).collect();
    let data = Labeled::from_codes(vec!["i".into()], "class", x, labels, classes).unwrap();
    let (rows, validation) = stratified_split_for(&data, 0.25, 5, Holdout::VALIDATION).unwrap();
    assert_eq!(validation.class_counts(), [10, 5, 2, 0], "round(n_c / 4) of each class; a lone row stays");
    assert_eq!(rows.class_counts(), [30, 15, 6, 1]);
    let mut every: Vec<usize> = rows.data.x.iter().chain(&validation.data.x).map(|&v| v as usize).collect();
    every.sort_unstable();
    assert_eq!(every, (0..n).collect::<Vec<_>>(), "disjoint, and nothing lost");
    let (_, again) = stratified_split_for(&data, 0.25, 5, Holdout::VALIDATION).unwrap();
    assert_eq!(again.data.x, validation.data.x, "seeded");
    let (_, other) = stratified_split_for(&data, 0.25, 6, Holdout::VALIDATION).unwrap();
    assert_ne!(other.data.x, validation.data.x);
}

#[test]
fn the_validation_rows_never_reach_the_fitness() {
    // Evolving with validation rows held out is evolving on the remaining rows alone.
    let train = noisy(160, 1);
    let mut s = small_settings();
    s.validation_fraction = Some(0.25);
    s.select = Select::Train;
    let backend = Backend::Cpu;
    let held = fit(&s, &train, None, &backend, &quiet()).unwrap().report;
    let plan = Plan::new(s.validation_fraction, s.select, train.n_rows, grove::task::base::defaults::EVOLVE_AUTO).unwrap();
    let (rows, _) = validation_split(&train, &plan, s.engine.seed).unwrap();
    let mut alone = s.clone();
    alone.validation_fraction = Some(0.0);
    let direct = fit(&alone, &rows, None, &backend, &quiet()).unwrap().report;
    let strip = |g: &Value| g.as_array().unwrap().iter().map(|g| (g["best"].clone(), g["mean"].clone())).collect::<Vec<_>>();
    assert_eq!(strip(&held["generations"]), strip(&direct["generations"]));
    assert_eq!(held["best"], direct["best"]);
    assert_eq!(held["train"], direct["train"]);
    assert_eq!(held["selection"]["training_rows"], json!(120));
    assert_eq!(held["selection"]["validation_rows"], json!(40));
}

/// A front by size whose training loss falls all the way while the validation loss turns up
/// after the third member: the training minimum (the last) overfits.
fn overfit_front() -> Vec<Candidate> {
    [(1, 10.0, 11.0), (3, 4.0, 5.0), (5, 2.0, 2.5), (9, 1.5, 3.0), (15, 1.0, 6.0)]
        .map(|(size, loss, v)| Candidate { size, loss, validation: Some(v), description: None, cv: None, resampled: None })
        .to_vec()
}

#[test]
fn validation_picks_the_lowest_validation_loss_not_the_lowest_training_loss() {
    let front = overfit_front();
    let (i, why) = choose(&front, Select::Validation).unwrap();
    assert_eq!(i, 2, "size 5 has the lowest validation loss; size 15 the lowest training loss");
    assert!(why.contains("lowest validation loss of the 5 programs"), "{why}");
    // Ties go to the smaller; NaN and missing validation losses never win.
    let mut tied = front.clone();
    tied[3].validation = Some(2.5);
    tied[1].validation = Some(f64::NAN);
    assert_eq!(choose(&tied, Select::Validation).unwrap().0, 2);
    let none: Vec<Candidate> = front.iter().map(|c| Candidate { validation: None, ..*c }).collect();
    assert_eq!(choose(&none, Select::Validation), None);
    assert_eq!(choose(&front, Select::Train), None, "train returns the run's best, not a member");
}

#[test]
fn the_pareto_score_is_the_drop_of_log_loss_per_node() {
    let front = overfit_front();
    let scores = pareto_scores(&front);
    let want = [0.0, (10.0f64 / 4.0).ln() / 2.0, (4.0f64 / 2.0).ln() / 2.0, (2.0f64 / 1.5).ln() / 4.0, (1.5f64).ln() / 6.0];
    for (g, w) in scores.iter().zip(want) {
        assert!((g - w).abs() < 1e-15, "{scores:?} vs {want:?}");
    }
    assert_eq!(choose(&front, Select::Pareto).unwrap().0, 1, "ln(10/4)/2 is the steepest drop");
    // Equal scores: the lower validation loss wins, then the smaller program.
    let tie = |v1: f64, v2: f64| {
        vec![
            Candidate { size: 1, loss: 4.0, validation: Some(9.0), description: None, cv: None, resampled: None },
            Candidate { size: 2, loss: 2.0, validation: Some(v1), description: None, cv: None, resampled: None },
            Candidate { size: 3, loss: 1.0, validation: Some(v2), description: None, cv: None, resampled: None },
        ]
    };
    assert_eq!(pareto_scores(&tie(0.0, 0.0))[1], pareto_scores(&tie(0.0, 0.0))[2]);
    assert_eq!(choose(&tie(5.0, 3.0), Select::Pareto).unwrap().0, 2);
    assert_eq!(choose(&tie(3.0, 5.0), Select::Pareto).unwrap().0, 1);
    assert_eq!(choose(&tie(3.0, 3.0), Select::Pareto).unwrap().0, 1);
    // A zero loss scores high but finite.
    let zero = [Candidate { size: 1, loss: 1.0, validation: None, description: None, cv: None, resampled: None }, Candidate { size: 2, loss: 0.0, validation: None, description: None, cv: None, resampled: None }];
    assert!(pareto_scores(&zero)[1].is_finite() && pareto_scores(&zero)[1] > 700.0);
}

#[test]
fn bad_settings_are_one_line_errors() {
    let err = |command: &str, given: Value| format!("{:#}", Experiment::from_parts(command, given, "e.ron").unwrap_err());
    let base = |extra: Value| {
        let mut v = json!({"functions": "add,sub"});
        grove::task::base::search::merge(&mut v, extra);
        v
    };
    for f in [1.0, -0.5, 2.0] {
        let e = err("evolve", base(json!({"validation_fraction": f})));
        assert_eq!(e, format!("e.ron: bad settings: --validation-fraction (validation_fraction) must be in [0, 1), got {f}"));
        let e = err("classify", json!({"validation_fraction": f}));
        assert!(e.ends_with(&format!("--validation-fraction (validation_fraction) must be in [0, 1), got {f}")), "{e}");
    }
    let e = err("evolve", base(json!({"select": "best"})));
    assert!(e.starts_with("e.ron: field `select`: unknown variant `best`, expected one of"), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
    let e = err("classify", json!({"engine": {"bloat": "tiny"}}));
    assert!(e.starts_with("e.ron: field `engine.bloat`: unknown variant `tiny`"), "{e}");
    let e = err("evolve", base(json!({"engine": {"size_pressure": 2.5}})));
    assert!(e.ends_with("--size-pressure (engine.size_pressure) must be in [1, 2], got 2.5"), "{e}");
    // A rule that needs validation rows, without them: one line at the start of the run.
    let mut s = small_settings();
    s.select = Select::Validation;
    s.validation_fraction = Some(0.0);
    let e = format!("{:#}", fit(&s, &noisy(50, 1), None, &Backend::Cpu, &quiet()).err().unwrap());
    assert_eq!(e, "--select validation needs validation rows: give --validation-fraction above 0 (validation_fraction)");
    // The command line says the same.
    let out = support::grove(&["evolve", "--functions", "add", "--validation-fraction", "1.5"]);
    let stderr = support::text(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(stderr.trim(), "error: --validation-fraction (validation_fraction) must be in [0, 1), got 1.5");
}

#[test]
fn experiment_files_and_set_carry_the_settings_and_round_trip() {
    let text = r#"Evolve(
        data: "builtin:pagie1",
        functions: "add,sub,mul",
        validation_fraction: 0.3,
        select: "pareto",
        engine: (bloat: "double-tournament", size_pressure: 1.6),
    )"#;
    let (command, given) = parse_ron(text, "e.ron").unwrap();
    let exp = Experiment::from_parts(&command, given, "e.ron").unwrap();
    let Experiment::Evolve(s) = &exp else { panic!("an evolve experiment") };
    assert_eq!((s.validation_fraction, s.select), (Some(0.3), Select::Pareto));
    assert_eq!((s.engine.bloat, s.engine.size_pressure), (Bloat::DoubleTournament, 1.6));
    // The report's settings read back as the same experiment (`grove run --from`).
    let again = Experiment::from_parts("evolve", exp.settings_json(), "report").unwrap();
    assert_eq!(again, exp);
    // Defaults: automatic choice, plain tournaments (each command's default, from
    // task::base::defaults); --set changes them.
    let (c, g) = parse_ron(r#"Classify(data: "builtin:iris")"#, "c.ron").unwrap();
    let Experiment::Classify(d) = Experiment::from_parts(&c, g, "c.ron").unwrap() else { panic!() };
    assert_eq!((d.validation_fraction, d.select, d.engine.bloat), (None, Select::Auto, Bloat::None));
    let (c, g) = parse_ron(r#"Evolve(data: "builtin:pagie1", functions: "add,mul")"#, "e.ron").unwrap();
    let Experiment::Evolve(d) = Experiment::from_parts(&c, g, "e.ron").unwrap() else { panic!() };
    assert_eq!(d.engine.bloat, grove::task::base::defaults::EVOLVE_BLOAT);
    let path = std::env::temp_dir().join(format!("grove-validation-{}.ron", std::process::id()));
    std::fs::write(&path, text).unwrap();
    let o = Overrides {
        set: vec!["select=validation".into(), "validation_fraction=0.2".into(), "engine.bloat=lexicographic".into()],
        ..Default::default()
    };
    let Experiment::Evolve(s) = from_source(Some(&path), None, &o).unwrap() else { panic!() };
    assert_eq!((s.validation_fraction, s.select, s.engine.bloat), (Some(0.2), Select::Validation, Bloat::Lexicographic));
    let _ = std::fs::remove_file(path);
}

#[test]
fn the_report_keeps_the_front_with_both_losses_and_the_choice() {
    let all = noisy(400, 2);
    let (train, test) = grove::data::split(&all, 0.25, 3).unwrap();
    let mut s = small_settings();
    s.validation_fraction = Some(0.25);
    let r = fit(&s, &train, Some(&test), &Backend::Cpu, &quiet()).unwrap().report;
    let sel = &r["selection"];
    assert_eq!((sel["asked"].as_str(), sel["rule"].as_str()), (Some("auto"), Some("validation")));
    assert_eq!((sel["training_rows"].as_u64(), sel["validation_rows"].as_u64()), (Some(225), Some(75)));
    let rows = r["hall_of_fame"].as_array().unwrap();
    assert!(rows.len() >= 2, "{rows:?}");
    for row in rows {
        assert!(row["loss"].as_f64().is_some() && row["validation_loss"].as_f64().is_some(), "{row}");
    }
    // A front member is returned (x0·x1 is no line), the smallest within one standard error of
    // the lowest validation error among the mean, the terms and the front (issue 56).
    let picked: Vec<usize> = (0..rows.len()).filter(|&i| rows[i]["selected"] == json!(true)).collect();
    assert_eq!(picked.len(), 1, "{sel}");
    let i = picked[0];
    assert_eq!(sel["front_index"], json!(i));
    let cands = sel["candidates"].as_array().unwrap();
    let key = |c: &Value| (c["mse"].as_f64().unwrap(), c["se"].as_f64().unwrap());
    let low = cands.iter().map(key).fold((f64::INFINITY, 0.0), |a, b| if b.0 < a.0 { b } else { a });
    let first = cands.iter().position(|c| key(c).0 <= low.0 + low.1).unwrap();
    assert_eq!(cands[first]["chosen"], json!(true), "{sel}");
    assert_eq!(cands[first]["candidate"], json!(format!("front {i}")));
    assert_eq!(rows[i]["validation_loss"].as_f64(), Some(key(&cands[first]).0), "the metric is the MSE here");
    assert_eq!(r["best"]["size"], rows[i]["complexity"]);
    assert_eq!(r["best"]["infix"], rows[i]["equation"]);
    // The validation scores are the selected program's on the validation rows (MSE, the
    // metric), and the test scores are on the untouched test rows: the saved model applied to
    // them gives the same R².
    assert!((r["validation"]["mse"].as_f64().unwrap() - key(&cands[first]).0).abs() < 1e-9 * key(&cands[first]).0);
    let model: grove::task::base::model::Model = serde_json::from_value(r["model"].clone()).unwrap();
    let pred = model.regression_predictions(test.x.clone(), test.n_rows).unwrap();
    let mean = test.y.iter().map(|&y| y as f64).sum::<f64>() / test.n_rows as f64;
    let sse: f64 = pred.iter().zip(&test.y).map(|(&p, &y)| (p - y as f64).powi(2)).sum();
    let sst: f64 = test.y.iter().map(|&y| (y as f64 - mean).powi(2)).sum();
    let r2 = r["test"]["r2"].as_f64().unwrap();
    assert!((1.0 - sse / sst - r2).abs() < 1e-5, "{} vs {r2}", 1.0 - sse / sst);
    // By default, fewer than 20000 training rows: no validation rows, the whole fit
    // cross-validated, and why.
    let r = fit(&small_settings(), &noisy(60, 2), None, &Backend::Cpu, &quiet()).unwrap().report;
    assert_eq!(r["selection"]["rule"], json!("cv"));
    assert_eq!(r["selection"]["resampling"]["folds"], json!(5), "{}", r["selection"]);
    assert!(r["selection"]["why"].as_str().unwrap().contains("60 training rows, fewer than the 20000"), "{}", r["selection"]);
    assert!(r["validation"].is_null());
    assert!(r["hall_of_fame"].as_array().unwrap().iter().all(|row| row["validation_loss"].is_null()));
}

#[test]
fn a_classifier_report_keeps_the_front_with_both_losses() {
    let mut s = grove::task::classify::ClassifySettings { data: "builtin:breast_cancer".into(), ..Default::default() };
    s.engine.pop_size = 200;
    s.engine.generations = 5;
    let (_, train, test, standardize) = grove::task::classify::load_data(&s).unwrap();
    let r = grove::task::classify::fit(&s, &train, test.as_ref(), standardize.as_ref(), &Backend::Cpu, &quiet()).unwrap().report;
    assert_eq!(r["selection"]["rule"], json!("validation"));
    let n_train = train.data.n_rows as u64;
    let (t, v) = (r["selection"]["training_rows"].as_u64().unwrap(), r["selection"]["validation_rows"].as_u64().unwrap());
    assert_eq!(t + v, n_train);
    assert_eq!(r["validation"]["rows"].as_u64(), Some(v));
    assert_eq!(r["test"]["rows"].as_u64(), test.as_ref().map(|t| t.data.n_rows as u64), "the test rows are untouched");
    let rows = r["hall_of_fame"].as_array().unwrap();
    assert!(rows.iter().all(|row| row["validation_loss"].as_f64().is_some()));
    let i = r["selection"]["front_index"].as_u64().unwrap() as usize;
    let lowest = rows.iter().map(|r| r["validation_loss"].as_f64().unwrap()).fold(f64::INFINITY, f64::min);
    assert_eq!(rows[i]["validation_loss"].as_f64(), Some(lowest));
    // `balanced-ce`'s held-out loss, from the validation rows' scores: 1 − balanced accuracy,
    // its cross-entropy term c / (1 + c) a tie-break below half of one row's step.
    let (bal, ce) = (r["validation"]["balanced_accuracy"].as_f64().unwrap(), r["validation"]["cross_entropy"].as_f64().unwrap());
    let step = 1.0 / (2.0 * v as f64);
    let tie = lowest - (1.0 - bal);
    assert!(tie > 0.0 && tie < 0.5 * step, "tie-break {tie} (cross-entropy {ce})");
    assert!((tie - 0.5 * step * ce / (1.0 + ce)).abs() < 1e-12, "{tie} against cross-entropy {ce}");
}

#[test]
fn bloat_control_by_selection_runs_on_the_host_and_shrinks_programs() {
    let train = noisy(120, 4);
    let mut s = small_settings();
    s.validation_fraction = Some(0.0);
    s.select = Select::Train;
    s.engine.generations = 15;
    let size = |bloat: Bloat, d: f64| {
        let mut s = s.clone();
        s.engine.bloat = bloat;
        s.engine.size_pressure = d;
        let r = fit(&s, &train, None, &Backend::Cpu, &quiet()).unwrap().report;
        let g = r["generations"].as_array().unwrap();
        (g.last().unwrap()["mean_size"].as_f64().unwrap(), r["best"].clone())
    };
    let (plain, best) = size(Bloat::None, 1.4);
    let (double, _) = size(Bloat::DoubleTournament, 2.0);
    assert!(double < plain, "double tournament with D = 2: mean size {double} against {plain}");
    assert_eq!(size(Bloat::None, 1.4).1, best, "reproducible");
    use grove::evolve::{EngineConfig, device::supports};
    assert!(supports(&EngineConfig::default()));
    for b in [Bloat::Lexicographic, Bloat::DoubleTournament] {
        let cfg = EngineConfig { bloat: b, ..Default::default() };
        assert!(!supports(&cfg), "{b:?}: the device loop has no size-reading tournaments: the host loop runs");
    }
    // NSGA-II runs on the device.
    assert!(supports(&EngineConfig { bloat: Bloat::Nsga2, ..Default::default() }));
}

/// `auto` runs NSGA-II where constants are not fitted and plain tournaments where they are: the
/// same generations, bit for bit, as asking for either by name.
#[test]
fn auto_bloat_follows_the_constant_fitting() {
    let train = noisy(120, 4);
    let mut s = small_settings();
    s.validation_fraction = Some(0.0);
    s.select = Select::Train;
    s.engine.generations = 6;
    let run_on = |ge: bool, bloat: Bloat, steps: u32| {
        let mut s = s.clone();
        if ge {
            s.functions = None;
            s.grammar = Some(concat!(env!("CARGO_MANIFEST_DIR"), "/grammars/regression.bnf").into());
        }
        s.engine.bloat = bloat;
        s.engine.constants = grove::evolve::ConstantFitting { steps, every: 2, fraction: 0.2 };
        let mut r = fit(&s, &train, None, &Backend::Cpu, &quiet()).unwrap().report;
        let g = r["generations"].as_array_mut().unwrap();
        g.iter_mut().for_each(|g| g["seconds"] = json!(0));
        (json!(g), r["best"].clone())
    };
    let run = |bloat: Bloat, steps: u32| run_on(false, bloat, steps);
    let (auto_plain, nsga2) = (run(Bloat::Auto, 0), run(Bloat::Nsga2, 0));
    assert_eq!(auto_plain, nsga2, "without fitting, auto is NSGA-II");
    assert_ne!(auto_plain.0, run(Bloat::None, 0).0, "and NSGA-II differs from plain tournaments here");
    assert_eq!(run(Bloat::Auto, 3), run(Bloat::None, 3), "with fitting, auto is plain tournaments");
    assert_eq!(run_on(true, Bloat::Auto, 0), run_on(true, Bloat::None, 0), "grammatical evolution: plain tournaments");
    // Grammatical evolution runs plain tournaments under `auto`; the device loop runs either.
    assert_eq!(Bloat::Auto.resolved(false, false), Bloat::Nsga2);
    assert_eq!(Bloat::Auto.resolved(true, false), Bloat::None);
    assert_eq!(Bloat::Auto.resolved(false, true), Bloat::None);
    assert_eq!(Bloat::Lexicographic.resolved(true, true), Bloat::Lexicographic);
    use grove::evolve::EngineConfig;
    assert!(grove::evolve::device::supports(&EngineConfig { bloat: Bloat::Auto, ..Default::default() }));
}

/// `--select mdl` chooses by the description length: the report says so, marks the member it
/// returned, and that member has the smallest length on the front (here on a two-objective
/// search).
#[test]
fn small_data_is_chosen_by_description_length_on_a_two_objective_search() {
    let d = support::dir("mdl");
    let rep = d.join("r.json");
    let out = support::grove_cpu(&[
        "evolve", "--data", "builtin:pagie1:100", "--functions", "add,sub,mul,div", "--pop", "200", "--gens", "15", "--seed", "3",
        "--bloat", "nsga2", "--select", "mdl", "--report", support::s(&rep), "-q",
    ]);
    support::assert_ok(&out);
    let r = support::read_json(&rep);
    assert_eq!(r["selection"]["rule"], "mdl", "{}", r["selection"]);
    let why = r["selection"]["why"].as_str().unwrap();
    assert!(why.contains("description length"), "{why}");
    assert_eq!(r["settings"]["engine"]["bloat"], "nsga2");
    let rows = r["hall_of_fame"].as_array().unwrap();
    let lengths: Vec<f64> = rows.iter().map(|row| row["description_length"].as_f64().unwrap()).collect();
    let chosen = rows.iter().position(|row| row["selected"] == true).expect("a member is returned");
    let low = lengths.iter().cloned().fold(f64::INFINITY, f64::min);
    assert_eq!(lengths[chosen], low, "{lengths:?}");
    assert_eq!(rows[chosen]["complexity"], r["best"]["size"]);
    // By default, grove evolve's bloat control; asked for, the training minimum.
    let rep2 = d.join("r2.json");
    let out = support::grove_cpu(&[
        "evolve", "--data", "builtin:pagie1:100", "--functions", "add,sub,mul,div", "--pop", "200", "--gens", "15", "--seed", "3",
        "--select", "train", "--report", support::s(&rep2), "-q",
    ]);
    support::assert_ok(&out);
    let r2 = support::read_json(&rep2);
    assert_eq!(r2["settings"]["engine"]["bloat"], serde_json::to_value(grove::task::base::defaults::EVOLVE_BLOAT).unwrap());
    let last = r2["hall_of_fame"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["complexity"], r2["best"]["size"]);
}

/// y = 3·x0 plus noise as large as the signal, with two inputs of pure noise: no program says
/// more than a scaled x0, so a choice that predicts unseen rows returns a short one.
fn line_in_noise(n: usize, seed: u64) -> Dataset {
    let mut s = Stream::new(seed, 0, 11, Purpose::Bench);
    let x: Vec<f64> = (0..3 * n).map(|_| s.unit_f64() * 2.0 - 1.0).collect();
    let y = (0..n).map(|i| 3.0 * x[i] + (s.unit_f64() - 0.5) * 6.0).collect();
    Dataset::new(vec!["x0".into(), "x1".into(), "x2".into()], "y", x, y).unwrap()
}

/// `--select cv` repeats the whole fit on each of 5 folds and scores each member of the run's
/// front at its size on rows that fit never saw, beside the mean: the report keeps the curve
/// and each candidate's score, the candidate returned has the lowest, and on a line in noise it
/// is short where the training minimum is not. The same run gives the same report.
#[test]
fn cross_validation_repeats_the_fit_without_each_fold_and_returns_what_predicts_best() {
    let train = line_in_noise(60, 5);
    let mut s = small_settings();
    s.functions = Some("add,sub,mul,div".into());
    s.engine.generations = 10;
    s.linear_inputs = grove::task::regression::LinearInputs::Off;
    s.select = Select::Cv;
    let r = fit(&s, &train, None, &Backend::Cpu, &quiet()).unwrap().report;
    let sel = &r["selection"];
    assert_eq!(sel["rule"], json!("cv"), "{sel}");
    assert_eq!((sel["validation_rows"].as_u64(), sel["training_rows"].as_u64()), (Some(0), Some(60)), "no row is held out");
    let cv = &sel["cross_validation"];
    assert_eq!((cv["folds"].as_u64(), cv["rows"].as_u64()), (Some(5), Some(60)), "{cv}");
    let curve: Vec<f64> = cv["mse_by_size"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    assert_eq!(curve.len(), s.engine.max_len);
    let rows = r["hall_of_fame"].as_array().unwrap();
    for row in rows {
        let size = row["complexity"].as_u64().unwrap() as usize;
        let (cv, at) = (row["cv_loss"].as_f64().unwrap(), curve[size - 1]);
        assert!((cv - at).abs() <= 1e-12 * at.abs(), "each member scores the curve at its size: {cv} against {at}");
    }
    // The candidates: the mean, then the front; the lowest is returned, ties to the simpler.
    let cands = sel["candidates"].as_array().unwrap();
    assert_eq!(cands.len(), rows.len() + 1, "{sel}");
    assert_eq!(cands[0]["candidate"], json!("mean"));
    let mse = |c: &serde_json::Value| c["mse"].as_f64().unwrap();
    let low = cands.iter().map(mse).fold(f64::INFINITY, f64::min);
    let chosen = cands.iter().position(|c| c["chosen"] == true).expect("a candidate is returned");
    assert_eq!(mse(&cands[chosen]), low, "{sel}");
    assert!(cands[..chosen].iter().all(|c| mse(c) > low), "ties go to the simpler: {sel}");
    assert!(chosen > 0, "a line of slope 3 in noise of spread 6 beats the mean: {sel}");
    assert!(rows[chosen - 1]["selected"] == true);
    let size = r["best"]["size"].as_u64().unwrap();
    assert!(size <= 5, "a line in noise: {size} nodes, {}", r["best"]["infix"]);
    // The held-out error is no better than the training error of the member returned.
    assert!(low >= r["train"]["mse"].as_f64().unwrap());
    assert!(r["timing"]["cross_validation_seconds"].as_f64().unwrap() > 0.0);
    // The training minimum on the same run is longer and fits the training rows closer.
    let mut t = s.clone();
    t.select = Select::Train;
    let rt = fit(&t, &train, None, &Backend::Cpu, &quiet()).unwrap().report;
    assert!(rt["best"]["size"].as_u64().unwrap() > size, "{}", rt["best"]["infix"]);
    assert!(rt["selection"]["cross_validation"].is_null());
    assert!(rt["hall_of_fame"].as_array().unwrap().iter().all(|row| row["cv_loss"].is_null()));
    // Reproducible.
    let again = fit(&s, &train, None, &Backend::Cpu, &quiet()).unwrap().report;
    assert_eq!(support::without_timings(again), support::without_timings(r.clone()));
    // Four rows: four folds of one row, and a choice all the same.
    let r4 = fit(&s, &line_in_noise(4, 6), None, &Backend::Cpu, &quiet()).unwrap().report;
    assert_eq!(r4["selection"]["cross_validation"]["folds"], json!(4), "{}", r4["selection"]);
    // One row: no fold can be fitted, so the description length chooses, saying why.
    let r1 = fit(&s, &line_in_noise(1, 6), None, &Backend::Cpu, &quiet()).unwrap().report;
    assert_eq!(r1["selection"]["rule"], json!("mdl"), "{}", r1["selection"]);
    assert!(r1["selection"]["why"].as_str().unwrap().contains("cross-validation needs 2 training rows, the data has 1"), "{}", r1["selection"]);
    // Needs no validation rows; the classifier refuses it in one line.
    let p = Plan::new(None, Select::Cv, 1000, grove::task::base::defaults::EVOLVE_AUTO).unwrap();
    assert_eq!((p.fraction, p.rule), (0.0, Select::Cv));
    let out = support::grove_cpu(&["classify", "--data", "builtin:iris", "--functions", "add,sub", "--select", "cv"]);
    support::assert_one_line_error(&out, &["--select cv", "grove classify chooses by"]);
    let out = support::grove_cpu(&["classify", "--data", "builtin:iris", "--functions", "add,sub", "--select", "folds"]);
    support::assert_one_line_error(&out, &["--select folds", "grove classify chooses by"]);
}
