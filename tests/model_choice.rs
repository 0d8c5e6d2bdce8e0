//! The model choice of issue 56: the mean, the linear terms alone and the ridge on every input
//! are candidates beside the front. `grove evolve`'s `auto` below its large-data size is `cv`,
//! the whole fit cross-validated with the simple models in the same folds, which returns the
//! lowest (a simple model giving way to a simpler one within one standard error); `--select
//! folds` and validation rows return the smallest candidate within one standard error of the
//! lowest resampled error. On a line in noise the choice returns the terms; on noise alone, the mean;
//! a front every program of which is worse than the terms returns the terms; a fold count past
//! the rows and a negative output margin are one line each.

use grove::backend::Backend;
use grove::data::Dataset;
use grove::rng::{Purpose, Stream};
use grove::task::base::crossval::{Difference, Score};
use grove::task::base::options::RunOptions;
use grove::task::base::validation::{Band, Baseline, Candidate, Pick, choose_resampled, one_standard_error};
use grove::task::regression::{EvolveSettings, fit};
use serde_json::json;

mod support;

/// `y = 1 + 2·x0 − x1 + ε`, ε uniform of standard deviation `sd`, three inputs in [−1, 1]
/// (x2 unused); `slope` 0 makes the target noise alone.
fn line(n: usize, seed: u64, slope: f64, sd: f64) -> Dataset {
    let mut s = Stream::new(seed, 0, 13, Purpose::Bench);
    let x: Vec<f64> = (0..3 * n).map(|_| s.unit_f64() * 2.0 - 1.0).collect();
    let half = sd * 3f64.sqrt();
    let y = (0..n).map(|i| 1.0 + slope * (2.0 * x[i] - x[n + i]) + (s.unit_f64() * 2.0 - 1.0) * half).collect();
    Dataset::new(vec!["x0".into(), "x1".into(), "x2".into()], "y", x, y).unwrap()
}

fn settings() -> EvolveSettings {
    let mut s = EvolveSettings::cli_default();
    s.functions = Some(grove::task::base::defaults::EVOLVE_FUNCTIONS.into());
    s.engine.pop_size = 200;
    s.engine.generations = 8;
    s.engine.seed = 3;
    s
}

fn quiet() -> RunOptions {
    RunOptions { quiet: true, ..Default::default() }
}

fn score(mse: f64, se: f64) -> Score {
    Score { mse, se }
}

fn member(size: usize, mse: f64, se: f64) -> Candidate {
    Candidate { size, loss: mse, resampled: Some(score(mse, se)), ..Candidate::default() }
}

#[test]
fn the_one_standard_error_rule_picks_the_smaller_of_two_within_one_standard_error() {
    // The larger is lower by less than its standard error: the smaller is returned.
    let front = [member(3, 1.05, 0.08), member(25, 1.0, 0.1)];
    assert_eq!(one_standard_error(&[front[0].resampled, front[1].resampled]).unwrap().0, 0);
    let (pick, why) = choose_resampled(&front, &[(Baseline::Mean, score(4.0, 0.5))], "5-fold cross-validated", Band::OneSe, None).unwrap();
    assert_eq!(pick, Pick::Member(0));
    assert!(why.contains("within one standard error") && why.contains("the 3-node program"), "{why}");
    // Lower by more than one standard error: the larger is returned, as the lowest.
    let front = [member(3, 1.2, 0.08), member(25, 1.0, 0.1)];
    let (pick, why) = choose_resampled(&front, &[(Baseline::Mean, score(4.0, 0.5))], "5-fold cross-validated", Band::OneSe, None).unwrap();
    assert_eq!(pick, Pick::Member(1));
    assert!(why.contains("the 25-node program has the lowest 5-fold cross-validated error"), "{why}");
    // Exactly at the band's edge counts as within; a missing or NaN score is never picked.
    assert_eq!(one_standard_error(&[Some(score(1.1, 0.0)), Some(score(1.0, 0.1))]).unwrap().0, 0);
    assert_eq!(one_standard_error(&[None, Some(score(f64::NAN, 0.1)), Some(score(2.0, 0.1))]).unwrap().0, 2);
    assert_eq!(one_standard_error(&[None, Some(score(f64::INFINITY, 1.0))]), None);
}

/// With honest held-out losses (`--select cv`, whose folds search every shape again), the
/// lowest is returned, ties to the simpler; the one-standard-error band would return a simpler
/// candidate within it.
#[test]
fn the_lowest_band_returns_the_lowest_and_ties_go_to_the_simpler() {
    let front = [member(3, 1.05, 0.08), member(25, 1.0, 0.1)];
    let simple = [(Baseline::Mean, score(4.0, 0.5)), (Baseline::Linear, score(1.08, 0.2))];
    assert_eq!(choose_resampled(&front, &simple, "5-fold cross-validated", Band::OneSe, None).unwrap().0, Pick::Baseline(Baseline::Linear));
    let (pick, why) = choose_resampled(&front, &simple, "5-fold cross-validated", Band::Lowest, None).unwrap();
    assert_eq!(pick, Pick::Member(1));
    assert!(why.contains("the 25-node program has the lowest 5-fold cross-validated error of the 4 candidates"), "{why}");
    // A tie goes to the simpler: the terms before a program, a smaller program before a larger.
    let tie = [member(3, 1.0, 0.08), member(25, 1.0, 0.1)];
    assert_eq!(choose_resampled(&tie, &[(Baseline::Mean, score(4.0, 0.5))], "cv", Band::Lowest, None).unwrap().0, Pick::Member(0));
    let simple = [(Baseline::Mean, score(4.0, 0.5)), (Baseline::Linear, score(1.0, 0.2))];
    assert_eq!(choose_resampled(&tie, &simple, "cv", Band::Lowest, None).unwrap().0, Pick::Baseline(Baseline::Linear));
    // A simple model lowest gives way to a simpler one within the paired standard error: the
    // ridge on every input lower than the terms by 0.01, their paired difference ± 0.05.
    let front = [member(3, 1.2, 0.08)];
    let simple = [(Baseline::Mean, score(4.0, 0.5)), (Baseline::Linear, score(1.0, 0.1)), (Baseline::Every, score(0.99, 0.1))];
    let near = |a: Pick, b: Pick| match (a, b) {
        (Pick::Baseline(Baseline::Linear), Pick::Baseline(Baseline::Every)) => Some(Difference { score: score(0.01, 0.05), trimmed: 0.01 }),
        (Pick::Baseline(Baseline::Mean), Pick::Baseline(Baseline::Every)) => Some(Difference { score: score(3.01, 0.4), trimmed: 3.0 }),
        _ => None,
    };
    assert_eq!(choose_resampled(&front, &simple, "cv", Band::Lowest, None).unwrap().0, Pick::Baseline(Baseline::Every));
    let (pick, why) = choose_resampled(&front, &simple, "cv", Band::Lowest, Some(&near)).unwrap();
    assert_eq!(pick, Pick::Baseline(Baseline::Linear), "{why}");
    assert!(why.contains("within one standard error of the lowest cv error") && why.contains("for the ridge regression on every input"), "{why}");
    // Lower by more than the paired standard error: the ridge stays.
    let far = |a: Pick, b: Pick| match (a, b) {
        (Pick::Baseline(Baseline::Linear), Pick::Baseline(Baseline::Every)) => Some(Difference { score: score(0.01, 0.001), trimmed: 0.01 }),
        _ => near(a, b),
    };
    assert_eq!(choose_resampled(&front, &simple, "cv", Band::Lowest, Some(&far)).unwrap().0, Pick::Baseline(Baseline::Every));
    // A program lowest is returned whatever the simple models' pairs say.
    let front = [member(3, 0.5, 0.08)];
    assert_eq!(choose_resampled(&front, &simple, "cv", Band::Lowest, Some(&near)).unwrap().0, Pick::Member(0));
    // A missing or NaN score is never the lowest; none finite, no choice.
    let odd = [Candidate { size: 2, resampled: Some(score(f64::NAN, 0.1)), ..Candidate::default() }, Candidate { size: 4, resampled: None, ..Candidate::default() }];
    assert_eq!(choose_resampled(&odd, &[(Baseline::Mean, score(9.0, 1.0))], "cv", Band::Lowest, None).unwrap().0, Pick::Baseline(Baseline::Mean));
    assert_eq!(choose_resampled(&odd, &[(Baseline::Mean, score(f64::INFINITY, 1.0))], "cv", Band::Lowest, None), None);
}

#[test]
fn a_front_whose_every_program_is_worse_than_the_linear_terms_returns_the_terms() {
    let front = [member(1, 2.5, 0.1), member(7, 2.2, 0.1), member(40, 2.1, 0.3)];
    let (pick, why) = choose_resampled(&front, &[(Baseline::Mean, score(5.0, 0.4)), (Baseline::Linear, score(2.0, 0.1))], "validation", Band::OneSe, None).unwrap();
    assert_eq!(pick, Pick::Baseline(Baseline::Linear));
    assert!(why.starts_with("the linear terms alone has the lowest validation error of the 5 candidates"), "{why}");
    // Whatever the rule picks, its error is at most the better of the mean's and the terms'.
    for (mean, terms) in [(1.0, 3.0), (3.0, 1.0), (2.0, 2.0)] {
        let (pick, _) = choose_resampled(&front, &[(Baseline::Mean, score(mean, 0.01)), (Baseline::Linear, score(terms, 0.01))], "validation", Band::OneSe, None).unwrap();
        let err = match pick {
            Pick::Baseline(Baseline::Mean) => mean,
            Pick::Baseline(Baseline::Linear) => terms,
            Pick::Baseline(Baseline::Every) => unreachable!("not a candidate here"),
            Pick::Member(i) => front[i].resampled.unwrap().mse,
        };
        assert!(err <= f64::min(mean, terms), "{pick:?} at {err} against {mean} and {terms}");
    }
    // Without terms, a front worse than the mean returns the mean.
    assert_eq!(choose_resampled(&front, &[(Baseline::Mean, score(2.0, 0.1))], "validation", Band::OneSe, None).unwrap().0, Pick::Baseline(Baseline::Mean));
}

#[test]
fn on_a_line_in_noise_the_choice_returns_the_linear_terms() {
    let all = line(240, 1, 1.0, 1.0);
    let (train, test) = grove::data::split(&all, 0.25, 2).unwrap();
    let r = fit(&settings(), &train, Some(&test), &Backend::Cpu, &quiet()).unwrap().report;
    let sel = &r["selection"];
    assert_eq!((sel["asked"].as_str(), sel["rule"].as_str()), (Some("auto"), Some("cv")), "{sel}");
    assert_eq!(sel["baseline"], json!("linear terms"), "{sel}");
    assert_eq!((sel["resampling"]["folds"].as_u64(), sel["resampling"]["rows"].as_u64()), (Some(5), Some(180)), "{sel}");
    // Every candidate's scores are kept: the mean, the terms (x0, x1), the ridge on every
    // input, each program on the front.
    let cands = sel["candidates"].as_array().unwrap();
    assert_eq!(cands.len(), 3 + r["hall_of_fame"].as_array().unwrap().len());
    let names: Vec<&str> = cands[..3].iter().map(|c| c["candidate"].as_str().unwrap()).collect();
    assert_eq!(names, ["mean", "linear terms", "every input"]);
    assert_eq!(cands.iter().filter(|c| c["chosen"] == json!(true)).count(), 1);
    assert_eq!(cands[1]["chosen"], json!(true));
    assert!(cands[1]["mse"].as_f64().unwrap() < cands[0]["mse"].as_f64().unwrap());
    // The ridge on every input (x2 too) is not lower by more than its standard error, and no
    // program is lower than the ridge: the rule would have returned it.
    let (terms, ridge, ridge_se) = (cands[1]["mse"].as_f64().unwrap(), cands[2]["mse"].as_f64().unwrap(), cands[2]["se"].as_f64().unwrap());
    assert!(ridge + ridge_se >= terms, "{terms} against {ridge} ± {ridge_se}");
    let low = cands.iter().map(|c| c["mse"].as_f64().unwrap()).fold(f64::INFINITY, f64::min);
    assert!(low == ridge.min(terms), "{sel}");
    if ridge < terms {
        assert!(sel["why"].as_str().unwrap().contains("within one standard error of the lowest"), "{sel}");
    }
    assert!(r["hall_of_fame"].as_array().unwrap().iter().all(|row| row["selected"] == json!(false) && row["cv_loss"].is_f64()));
    // The model is the terms: x0 and x1 with about their weights, and nothing else.
    let model: grove::task::base::model::Model = serde_json::from_value(r["model"].clone()).unwrap();
    let l = model.linear.as_ref().unwrap();
    assert!((l.a[0] - 2.0).abs() < 0.3 && (l.a[1] + 1.0).abs() < 0.3 && l.a[2] == 0.0, "{l:?}");
    assert!(!r["best"]["infix"].as_str().unwrap().contains('('), "{}", r["best"]["infix"]);
    // The saved model predicts what the report scored.
    let pred = model.regression_predictions(test.x.clone(), test.n_rows).unwrap();
    let mean = test.y.iter().map(|&y| y as f64).sum::<f64>() / test.n_rows as f64;
    let sse: f64 = pred.iter().zip(&test.y).map(|(&p, &y)| (p - y as f64).powi(2)).sum();
    let sst: f64 = test.y.iter().map(|&y| (y as f64 - mean).powi(2)).sum();
    assert!((1.0 - sse / sst - r["test"]["r2"].as_f64().unwrap()).abs() < 1e-5);
    // The same run gives the same report.
    let again = fit(&settings(), &train, Some(&test), &Backend::Cpu, &quiet()).unwrap().report;
    assert_eq!(support::without_timings(again), support::without_timings(r));
}

#[test]
fn on_noise_alone_the_choice_returns_the_mean() {
    let train = line(120, 4, 0.0, 1.0);
    let r = fit(&settings(), &train, None, &Backend::Cpu, &quiet()).unwrap().report;
    assert_eq!(r["selection"]["baseline"], json!("mean"), "{}", r["selection"]);
    let model: grove::task::base::model::Model = serde_json::from_value(r["model"].clone()).unwrap();
    let pred = model.regression_predictions(train.x.clone(), train.n_rows).unwrap();
    let mean = train.y.iter().map(|&y| y as f64).sum::<f64>() / train.n_rows as f64;
    assert!(pred.iter().all(|&p| (p - mean).abs() < 1e-9), "{:?}", &pred[..3]);
}

#[test]
fn validation_rows_choose_by_the_same_rule_and_folds_are_checked() {
    let train = line(200, 5, 1.0, 1.0);
    let mut s = settings();
    s.validation_fraction = Some(0.25);
    let r = fit(&s, &train, None, &Backend::Cpu, &quiet()).unwrap().report;
    let sel = &r["selection"];
    assert_eq!(sel["rule"], json!("validation"));
    assert_eq!((sel["resampling"]["folds"].as_u64(), sel["resampling"]["rows"].as_u64()), (Some(0), Some(50)), "{sel}");
    assert_eq!(sel["baseline"], json!("linear terms"), "{sel}");
    // An explicit fold count the rows cannot take is refused before the search, in one line.
    let mut s = settings();
    s.folds = Some(30);
    let e = fit(&s, &line(20, 1, 1.0, 1.0), None, &Backend::Cpu, &quiet()).err().expect("refused").to_string();
    assert_eq!(e, "--folds 30 (folds) is more than the 20 training rows it deals into folds: give --folds 20 or fewer");
    s.folds = Some(1);
    assert!(s.check().unwrap_err().to_string().contains("--folds (folds) must be at least 2, got 1"));
    let out = support::grove_cpu(&["evolve", "--data", "builtin:pagie1:36", "--folds", "40", "--gens", "2", "--pop", "20"]);
    support::assert_one_line_error(&out, &["--folds 40 (folds) is more than the"]);
    // Three folds: the report says so.
    let mut s = settings();
    s.folds = Some(3);
    let r = fit(&s, &line(60, 2, 1.0, 1.0), None, &Backend::Cpu, &quiet()).unwrap().report;
    assert_eq!(r["selection"]["resampling"]["folds"], json!(3), "{}", r["selection"]);
}

/// `--output-margin M` clamps the returned model's predictions to the training target's range
/// widened by M times its width: far outside the training inputs the model stays inside, the
/// saved model, the report's scores and the exported source apply the same limits, and a
/// negative margin is one line.
#[test]
fn an_output_margin_keeps_predictions_within_the_training_range() {
    let train = line(120, 7, 1.0, 0.5);
    let mut s = settings();
    s.output_margin = Some(0.1);
    let r = fit(&s, &train, None, &Backend::Cpu, &quiet()).unwrap().report;
    let model: grove::task::base::model::Model = serde_json::from_value(r["model"].clone()).unwrap();
    let (lo, hi) = model.limits.expect("limits");
    let (ymin, ymax) = train.y.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &y| (a.min(y as f64), b.max(y as f64)));
    let w = ymax - ymin;
    assert!((lo - (ymin - 0.1 * w)).abs() < 1e-9 && (hi - (ymax + 0.1 * w)).abs() < 1e-9, "{lo} {hi}");
    // Inputs far outside [−1, 1]: a line through them would leave the limits.
    let far = vec![50.0f32, -50.0, 0.0, -50.0, 50.0, 0.0];
    let p = model.regression_predictions(far, 2).unwrap();
    assert_eq!(p, vec![hi, lo], "clamped at both ends");
    // The report's training scores are the clamped model's.
    let pred = model.regression_predictions(train.x.clone(), train.n_rows).unwrap();
    let mse = pred.iter().zip(&train.y).map(|(&p, &y)| (p - y as f64).powi(2)).sum::<f64>() / train.n_rows as f64;
    assert!((mse - r["train"]["mse"].as_f64().unwrap()).abs() < 1e-9 * mse.max(1.0));
    assert!(r["settings"]["output_margin"].as_f64() == Some(0.1));
    // The exported Python applies them too.
    let d = support::dir("limits");
    let rep = d.join("r.json");
    std::fs::write(&rep, serde_json::to_string(&r).unwrap()).unwrap();
    let out = support::grove_cpu(&["export", "--model", support::s(&rep), "--lang", "python"]);
    support::assert_ok(&out);
    let src = String::from_utf8_lossy(&out.stdout);
    assert!(src.contains(&format!("return {lo:?} if g_v < {lo:?} else ({hi:?} if g_v > {hi:?} else g_v)")), "{src}");
    // Without the flag, no limits.
    let r = fit(&settings(), &train, None, &Backend::Cpu, &quiet()).unwrap().report;
    assert!(r["model"]["limits"].is_null() && r["settings"]["output_margin"].is_null());
    // A negative margin: one line, from the settings and from the command line.
    let mut bad = settings();
    bad.output_margin = Some(-0.5);
    assert_eq!(bad.check().unwrap_err().to_string(), "--output-margin (output_margin) must be a number at least 0, got -0.5");
    let out = support::grove_cpu(&["evolve", "--data", "builtin:pagie1:36", "--functions", "add", "--output-margin=-1"]);
    support::assert_one_line_error(&out, &["--output-margin (output_margin) must be a number at least 0, got -1"]);
    // The space-separated form reaches the same check (clap would take "-0.5" for a flag).
    let out = support::grove_cpu(&["evolve", "--data", "builtin:pagie1:36", "--functions", "add", "--output-margin", "-0.5"]);
    support::assert_one_line_error(&out, &["--output-margin (output_margin) must be a number at least 0, got -0.5"]);
}
