//! Linear terms of the inputs beside the program (`grove evolve --linear-inputs`), as a user
//! meets them: kept where the data has a linear part and left out where it has none; the same
//! predictions from the report, `grove predict`, the exports and sympy; saved models checked
//! on load; the setting from the command line, experiment files and `--set`.

use std::path::Path;

mod support;
use support::{assert_ok, assert_one_line_error, dir, grove_cpu as grove, read_json, s, text};
#[path = "support/exports.rs"]
mod exports;
use exports::{close, compile_rust, run_c, run_python, run_sympy};

/// A CSV of `n` rows of three inputs on a deterministic walk and the target `f(row)`.
fn data_csv(path: &Path, n: usize, f: impl Fn(&[f64]) -> f64) -> Vec<Vec<f64>> {
    let rows: Vec<Vec<f64>> = (0..n)
        .map(|i| vec![((i * 37) % 101) as f64 / 25.0 - 2.0, ((i * 53) % 97) as f64 / 24.0 - 2.0, ((i * 29) % 89) as f64 / 22.0 - 2.0])
        .collect();
    let body: String = rows.iter().map(|r| format!("{},{},{},{}\n", r[0], r[1], r[2], f(r))).collect();
    std::fs::write(path, format!("x0,x1,x2,y\n{body}")).unwrap();
    rows
}

fn weights(r: &serde_json::Value) -> Vec<f64> {
    serde_json::from_value(r["model"]["linear"]["a"].clone()).unwrap()
}

#[test]
fn a_linear_part_is_kept_with_its_weights_and_every_output_agrees() {
    let d = dir("linear-alike");
    let (csv, rep) = (d.join("d.csv"), d.join("r.json"));
    // A line in x0 and x1 (x2 unused) plus a product the program must find.
    data_csv(&csv, 240, |r| 3.0 * r[0] - 2.0 * r[1] + 0.5 + r[0] * r[1]);
    let args = ["evolve", "--data", s(&csv), "--functions", "add,sub,mul", "--pop", "300", "--gens", "12", "--seed", "3", "--report", s(&rep), "-q"];
    let out = grove(&args);
    assert_ok(&out);
    let summary = text(&out.stdout);
    assert!(summary.contains("linear inputs auto, kept"), "{summary}");
    let r = read_json(&rep);
    assert_eq!(r["linear_inputs"]["used"], true, "{}", r["linear_inputs"]);
    let a = weights(&r);
    // The terms and the program are fitted together, so the program may carry part of the
    // line; x2, which the target never reads, is not chosen.
    assert_eq!(a.len(), 3);
    assert_eq!(a[2], 0.0, "{a:?}");
    assert!(r["train"]["r2"].as_f64().unwrap() > 0.99, "{}", r["train"]);
    // `grove predict` on the training rows scores them as the report does.
    let p = grove(&["predict", "--model", s(&rep), "--data", s(&csv)]);
    assert_ok(&p);
    let score = text(&p.stderr) + &text(&p.stdout);
    let mse: f64 = score.split("mse ").nth(1).and_then(|t| t.split_whitespace().next()).and_then(|t| t.parse().ok()).expect(&score);
    let train = r["train"]["mse"].as_f64().unwrap();
    // grove evolve reads the target as f32, predict as f64: near an exact fit that rounding
    // (about 1e-7 of y) is most of the error.
    assert!((mse - train).abs() <= 1e-3 * train + 1e-10, "predict {mse} vs report {train}");
    // Every export and sympy give predict's values at new points.
    let pts: Vec<Vec<f64>> = vec![vec![0.5, -1.5, 2.0], vec![2.0, 3.0, -1.0], vec![-4.0, 0.25, 0.0], vec![1.25, 1.75, 3.5]];
    let pcsv = d.join("pts.csv");
    std::fs::write(&pcsv, format!("x0,x1,x2\n{}", pts.iter().map(|p| format!("{},{},{}\n", p[0], p[1], p[2])).collect::<String>())).unwrap();
    let p = grove(&["predict", "--model", s(&rep), "--data", s(&pcsv)]);
    assert_ok(&p);
    let want: Vec<f64> = text(&p.stdout).lines().skip(1).map(|l| l.parse().unwrap()).collect();
    assert_eq!(want.len(), pts.len());
    // The model is the line plus the program: far from the line alone where x0·x1 is large.
    let line: f64 = r["model"]["linear"]["c"].as_f64().unwrap() + a.iter().zip(&pts[1]).map(|(a, x)| a * x).sum::<f64>();
    assert!((want[1] - line).abs() > 1.0, "the program adds nothing at (2, 3): {} vs {line}", want[1]);
    for (lang, file) in [("python", "m.py"), ("c", "m.c"), ("rust", "m.rs")] {
        assert_ok(&grove(&["export", "--model", s(&rep), "--lang", lang, "--out", s(&d.join(file))]));
    }
    compile_rust(&d.join("m.rs"));
    let sympy = r["best"]["sympy"].as_str().unwrap();
    let names = ["x0", "x1", "x2"];
    for (what, got) in [("python", run_python(&d.join("m.py"), &pts)), ("C", run_c(&d.join("m.c"), &pts)), ("sympy", run_sympy(sympy, &names, &pts))] {
        let Some(got) = got else { continue };
        assert_eq!(got.len(), pts.len(), "{what}");
        for (g, w) in got.iter().zip(&want) {
            assert!(close(*g, *w), "{what} {g} vs grove predict {w}");
        }
    }
}

#[test]
fn no_linear_part_leaves_the_terms_out() {
    let d = dir("linear-none");
    let (csv, rep) = (d.join("d.csv"), d.join("r.json"));
    // Even in every input: no straight line predicts it.
    data_csv(&csv, 200, |r| r[0] * r[0] + r[1] * r[1] * r[2] * r[2]);
    assert_ok(&grove(&["evolve", "--data", s(&csv), "--functions", "add,mul", "--pop", "64", "--gens", "2", "--report", s(&rep), "-q"]));
    let r = read_json(&rep);
    assert_eq!(r["linear_inputs"]["used"], false, "{}", r["linear_inputs"]);
    assert!(r["linear_inputs"]["why"].as_str().unwrap().starts_with("auto, left out"), "{}", r["linear_inputs"]);
    assert!(r["model"].get("linear").is_none(), "{}", r["model"]);
}

#[test]
fn on_off_and_the_raw_program_are_obeyed() {
    let d = dir("linear-modes");
    let csv = d.join("d.csv");
    data_csv(&csv, 120, |r| 2.0 * r[0] + r[1] * r[2]);
    let run = |extra: &[&str]| {
        let rep = d.join("r.json");
        let mut a = vec!["evolve", "--data", s(&csv), "--functions", "add,mul", "--pop", "32", "--gens", "2", "--report", s(&rep), "-q"];
        a.extend(extra);
        assert_ok(&grove(&a));
        read_json(&rep)
    };
    let off = run(&["--linear-inputs", "off"]);
    assert_eq!(off["linear_inputs"]["used"], false);
    assert!(off["model"].get("linear").is_none());
    let on = run(&["--linear-inputs", "on"]);
    assert_eq!(on["linear_inputs"]["used"], true);
    assert_eq!(weights(&on).len(), 3);
    // The raw program was asked for: auto adds nothing.
    let raw = run(&["--no-linear-scaling"]);
    assert_eq!(raw["linear_inputs"]["used"], false);
    assert!(raw["linear_inputs"]["why"].as_str().unwrap().contains("--no-linear-scaling"));
    let bad = grove(&["evolve", "--data", s(&csv), "--functions", "add", "--linear-inputs", "maybe"]);
    assert_eq!(bad.status.code(), Some(2), "clap's usage error");
    assert!(text(&bad.stderr).contains("possible values: auto, on, off"), "{}", text(&bad.stderr));
}

#[test]
fn experiment_files_and_set_take_linear_inputs() {
    let d = dir("linear-ron");
    let (ron, rep) = (d.join("e.ron"), d.join("r.json"));
    std::fs::write(&ron, r#"Evolve(data: "builtin:pagie1:64", functions: "add,sub,mul", linear_inputs: "on", engine: (pop_size: 32, generations: 2))"#).unwrap();
    assert_ok(&grove(&["run", s(&ron), "--report", s(&rep), "-q"]));
    let r = read_json(&rep);
    assert_eq!(r["settings"]["linear_inputs"], "on");
    assert_eq!(r["linear_inputs"]["used"], true);
    assert_ok(&grove(&["run", s(&ron), "--set", "linear_inputs=off", "--report", s(&rep), "-q"]));
    assert_eq!(read_json(&rep)["linear_inputs"]["used"], false);
    assert_one_line_error(&grove(&["run", s(&ron), "--set", "linear_inputs=sometimes", "-q"]), &["linear_inputs"]);
}

#[test]
fn saved_linear_terms_are_checked_on_load() {
    let base = |linear: &str| {
        format!(
            r#"{{"model": {{"kind": "regression", "features": ["x0", "x1"], "target": "y",
            "nodes": [["var", 0.0, 0]], "n_outputs": 0, "classes": null, "scale": [1.0, 0.0], "standardize": null{linear}}}}}"#
        )
    };
    let good = grove::task::base::model::from_json(base(r#", "linear": {"c": 1.0, "a": [0.0, 2.0]}"#).as_bytes(), "r.json").unwrap();
    // x0 + 1 + 2·x1 at (1, 10) and (2, 20).
    assert_eq!(good.regression_predictions(vec![1.0, 2.0, 10.0, 20.0], 2).unwrap(), vec![22.0, 43.0]);
    for (linear, needle) in [
        (r#", "linear": {"c": 1.0, "a": [2.0]}"#, "1 weights for 2 features"),
        (r#", "linear": {"c": 1.0, "a": [2.0, null]}"#, "cannot be read"),
        (r#", "linear": {"c": 1.0, "a": [2.0, 1.0], "b": 3}"#, "cannot be read"),
    ] {
        let e = grove::task::base::model::from_json(base(linear).as_bytes(), "r.json").unwrap_err();
        assert!(format!("{e:#}").contains(needle), "{linear}: {e:#}");
    }
    // JSON has no NaN; a model built in memory is checked as a loaded one.
    let mut m = good.clone();
    m.linear.as_mut().unwrap().a[1] = f64::NAN;
    assert!(format!("{:#}", m.tree().unwrap_err()).contains("not finite"));
    let mut m = good;
    m.kind = grove::task::base::model::ModelKind::Classification;
    m.classes = Some(vec!["a".into(), "b".into()]);
    assert!(format!("{:#}", m.tree().unwrap_err()).contains("classification model with linear terms"));
}

/// A report without what differs between two runs of the same settings (the timings) or a
/// run and its resumption (the fitness cache's counts, of each process).
fn without_timings(mut v: serde_json::Value) -> serde_json::Value {
    v.as_object_mut().unwrap().remove("timing");
    v.as_object_mut().unwrap().remove("fitness_cache");
    for g in v["generations"].as_array_mut().unwrap() {
        g.as_object_mut().unwrap().remove("seconds");
    }
    v
}

#[test]
fn a_resumed_run_with_linear_terms_ends_as_an_uninterrupted_one() {
    let d = dir("linear-resume");
    let csv = d.join("d.csv");
    data_csv(&csv, 160, |r| 2.0 * r[0] - r[2] + r[0] * r[1] * r[1]);
    let (full, ck, resumed) = (d.join("full.json"), d.join("l.ckpt"), d.join("resumed.json"));
    let base = ["evolve", "--data", s(&csv), "--functions", "add,sub,mul", "--pop", "60", "--threads", "1", "-q"];
    let mut a = base.to_vec();
    a.extend(["--gens", "6", "--report", s(&full)]);
    assert_ok(&grove(&a));
    let mut b = base.to_vec();
    b.extend(["--gens", "3", "--checkpoint", s(&ck), "--checkpoint-every", "2"]);
    assert_ok(&grove(&b));
    assert_ok(&grove(&["run", "--resume", s(&ck), "--gens", "6", "--report", s(&resumed), "-q"]));
    let (x, y) = (read_json(&full), read_json(&resumed));
    assert_eq!(x["linear_inputs"]["used"], true, "{}", x["linear_inputs"]);
    assert_eq!(without_timings(x), without_timings(y));
}
