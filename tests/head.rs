//! The fitted linear head over a program's outputs (`grove evolve --outputs K`), as a user
//! meets it: the errors of impossible requests, and one model giving the same predictions in
//! the report, `grove predict`, the exported Python, C and Rust, and sympy.

use std::path::Path;
use std::process::Output;

mod support;
use support::{assert_ok, dir, grove_cpu as grove, read_json, s, text};
#[path = "support/exports.rs"]
mod exports;
use exports::{close, compile_rust, run_c, run_python, run_sympy};

/// One line on standard error, exit status 1, containing every needle.
fn assert_one_line_error(out: &Output, needles: &[&str]) {
    let e = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{e}");
    assert!(e.starts_with("error: ") && e.trim().lines().count() == 1, "one error line expected: {e}");
    for n in needles {
        assert!(e.contains(n), "`{n}` missing from: {e}");
    }
}

/// A CSV of `n` rows: `x0, x1` on a grid-like walk and `y = x0·x1 + sin(3·x0) + 0.1·x1`.
fn data_csv(path: &Path, n: usize) -> Vec<[f64; 2]> {
    let rows: Vec<[f64; 2]> = (0..n).map(|i| [((i * 37) % 101) as f64 / 25.0 - 2.0, ((i * 53) % 97) as f64 / 24.0 - 2.0]).collect();
    let body: String = rows.iter().map(|[a, b]| format!("{a},{b},{}\n", a * b + (3.0 * a).sin() + 0.1 * b)).collect();
    std::fs::write(path, format!("x0,x1,y\n{body}")).unwrap();
    rows
}

#[test]
fn impossible_outputs_are_one_line_errors_naming_both_numbers() {
    // `--select train`: the head's plumbing, not the model choice (which may return the mean here).
    let base = ["evolve", "--data", "builtin:pagie1:64", "--pop", "16", "--gens", "1", "--select", "train", "-q"];
    let with = |extra: &[&str]| {
        let mut a = base.to_vec();
        a.extend(extra);
        grove(&a)
    };
    assert_one_line_error(&with(&["--functions", "add,mul", "--outputs", "9"]), &["--outputs", "9", "1 to 8"]);
    assert_one_line_error(&with(&["--functions", "add,mul", "--outputs", "0"]), &["--outputs", "0"]);
    assert_one_line_error(&with(&["--functions", "add,mul", "--outputs", "3", "--metric", "mae", "--no-linear-scaling"]), &[
        "mae",
        "not supported with a fitted head",
    ]);
    assert_one_line_error(&with(&["--functions", "add,mul", "--outputs", "2", "--no-linear-scaling"]), &["--outputs 2", "--no-linear-scaling"]);
    // A grammar without out(K, …) writes no slot; classify-3class.bnf writes exactly three.
    assert_one_line_error(&with(&["--grammar", "grammars/regression.bnf", "--outputs", "3"]), &["writes 0 output slots", "asks for 3"]);
    assert_one_line_error(&with(&["--grammar", "grammars/classify-3class.bnf", "--outputs", "4"]), &["writes 3 output slots", "asks for 4"]);
    // The same grammar serves three outputs.
    let d = dir("head-ge");
    let rep = d.join("ge.json");
    assert_ok(&with(&["--grammar", "grammars/classify-3class.bnf", "--outputs", "3", "--report", s(&rep)]));
    let r = read_json(&rep);
    assert_eq!(r["model"]["n_outputs"], 3);
    assert_eq!(r["model"]["head"]["w"].as_array().map(Vec::len), Some(3));
}

#[test]
fn a_head_predicts_alike_in_the_report_predict_export_and_sympy() {
    let d = dir("head-alike");
    let (csv, rep) = (d.join("d.csv"), d.join("r.json"));
    data_csv(&csv, 300);
    let args = [
        "evolve", "--data", s(&csv), "--functions", "add,sub,mul,sin", "--outputs", "3", "--pop", "200", "--gens", "8", "--seed", "4",
        "--validation-fraction", "0", "--select", "train", "--report", s(&rep), "-q",
    ];
    let out = grove(&args);
    assert_ok(&out);
    let summary = text(&out.stdout);
    assert!(summary.contains("head          3 outputs"), "{summary}");
    let r = read_json(&rep);
    let head = &r["model"]["head"];
    let w: Vec<f64> = serde_json::from_value(head["w"].clone()).unwrap();
    assert_eq!((w.len(), r["model"]["n_outputs"].as_u64()), (3, Some(3)));
    assert!(w.iter().any(|w| *w != 0.0), "{head}");
    assert_eq!(r["best"]["head"], *head);
    assert!(r["model"]["scale"].is_null());
    // `grove predict` on the training rows scores them as the report does.
    let p = grove(&["predict", "--model", s(&rep), "--data", s(&csv)]);
    assert_ok(&p);
    let score = text(&p.stderr) + &text(&p.stdout);
    let mse: f64 = score.split("mse ").nth(1).and_then(|t| t.split_whitespace().next()).and_then(|t| t.parse().ok()).expect(&score);
    let train = r["train"]["mse"].as_f64().unwrap();
    assert!((mse - train).abs() <= 1e-6 * train.max(1e-6), "predict {mse} vs report {train}");
    // Every export and sympy give predict's values at new points.
    let pts = [[0.5, -1.5], [2.0, 3.0], [-4.0, 0.25], [1.25, 1.75]];
    let pcsv = d.join("pts.csv");
    std::fs::write(&pcsv, format!("x0,x1\n{}", pts.iter().map(|[a, b]| format!("{a},{b}\n")).collect::<String>())).unwrap();
    let p = grove(&["predict", "--model", s(&rep), "--data", s(&pcsv)]);
    assert_ok(&p);
    let want: Vec<f64> = text(&p.stdout).lines().skip(1).map(|l| l.parse().unwrap()).collect();
    assert_eq!(want.len(), pts.len());
    for (lang, file) in [("python", "m.py"), ("c", "m.c"), ("rust", "m.rs")] {
        assert_ok(&grove(&["export", "--model", s(&rep), "--lang", lang, "--out", s(&d.join(file))]));
    }
    compile_rust(&d.join("m.rs"));
    let sympy = r["best"]["sympy"].as_str().unwrap();
    let pts: Vec<Vec<f64>> = pts.iter().map(|p| p.to_vec()).collect();
    for (what, got) in [("python", run_python(&d.join("m.py"), &pts)), ("C", run_c(&d.join("m.c"), &pts)), ("sympy", run_sympy(sympy, &["x0", "x1"], &pts))] {
        let Some(got) = got else { continue };
        assert_eq!(got.len(), pts.len(), "{what}");
        for (g, w) in got.iter().zip(&want) {
            assert!(close(*g, *w), "{what} {g} vs grove predict {w}");
        }
    }
}

#[test]
fn a_model_saved_before_the_head_predicts_as_before() {
    // A report's model as grove wrote it before heads existed: no `head` field.
    let json = r#"{"kind": "regression", "features": ["x0", "x1"], "target": "y",
        "nodes": [["add", 0.0, 0], ["var", 0.0, 0], ["var", 1.0, 0]], "n_outputs": 0, "classes": null,
        "scale": [2.0, 0.5], "standardize": null}"#;
    let m: grove::task::base::model::Model = serde_json::from_str(json).unwrap();
    assert!(m.head.is_none());
    let out = m.outputs_of(vec![1.0, 2.0, 10.0, 20.0], 2).unwrap();
    assert_eq!(m.readout().apply(&out, 2), vec![2.0 * 11.0 + 0.5, 2.0 * 22.0 + 0.5]);
}

#[test]
fn experiment_files_take_outputs() {
    let d = dir("head-ron");
    let (ron, rep) = (d.join("e.ron"), d.join("r.json"));
    std::fs::write(&ron, "Evolve(data: \"builtin:pagie1:64\", functions: \"add,sub,mul\", outputs: 3, select: \"train\", engine: (pop_size: 32, generations: 2))").unwrap();
    assert_ok(&grove(&["run", s(&ron), "--report", s(&rep), "-q"]));
    let r = read_json(&rep);
    assert_eq!((r["settings"]["outputs"].as_u64(), r["model"]["n_outputs"].as_u64()), (Some(3), Some(3)));
    assert_one_line_error(&grove(&["run", s(&ron), "--set", "outputs=12", "-q"]), &["outputs", "12", "1 to 8"]);
}
