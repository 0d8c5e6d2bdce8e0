//! A classifier's head over a program's outputs (`grove classify --outputs K`), as a user meets
//! it: each class's logit `c + Σ a_k·f_k` fitted by multinomial logistic regression; the same
//! classes from the report, `grove predict`, the exports and sympy; the head applied (a model
//! without it predicts otherwise); saved heads checked on load; one-line errors for requests
//! that cannot be met; experiment files and `--set`.

use std::path::Path;

mod support;
use support::{assert_ok, assert_one_line_error, dir, grove_cpu as grove, predicted_classes as predicted, read_json, s, text};
#[path = "support/exports.rs"]
mod exports;
use exports::{compile_rust, run_c_lines, run_python};

/// Three inputs on a deterministic walk in [-2, 2].
fn inputs(n: usize) -> Vec<Vec<f64>> {
    (0..n)
        .map(|i| vec![((i * 37) % 101) as f64 / 25.0 - 2.0, ((i * 53) % 97) as f64 / 24.0 - 2.0, ((i * 29) % 89) as f64 / 22.0 - 2.0])
        .collect()
}

/// Three classes by a radius and a sign, `x0² + x1² < 1.5` first, then the sign of `x0·x2`: what
/// no line in the inputs separates, and two features of a program do.
fn classes(r: &[f64]) -> &'static str {
    if r[0] * r[0] + r[1] * r[1] < 1.5 {
        "in"
    } else if r[0] * r[2] > 0.0 {
        "same"
    } else {
        "other"
    }
}

fn data_csv(path: &Path, rows: &[Vec<f64>], label: bool) {
    let body: String = rows
        .iter()
        .map(|r| if label { format!("{},{},{},{}\n", r[0], r[1], r[2], classes(r)) } else { format!("{},{},{}\n", r[0], r[1], r[2]) })
        .collect();
    std::fs::write(path, format!("x0,x1,x2{}\n{body}", if label { ",class" } else { "" })).unwrap();
}

#[test]
fn a_head_predicts_alike_in_the_report_predict_and_the_exports() {
    let d = dir("class-head");
    let (csv, pcsv) = (d.join("d.csv"), d.join("pts.csv"));
    data_csv(&csv, &inputs(400), true);
    let pts = inputs(700)[400..].to_vec();
    data_csv(&pcsv, &pts, false);
    let rep = d.join("r.json");
    let out = grove(&["classify", "--data", s(&csv), "--functions", "add,sub,mul", "--outputs", "2", "--pop", "300", "--gens", "12", "--seed", "3", "--report", s(&rep)]);
    assert_ok(&out);
    let summary = text(&out.stdout);
    assert!(summary.contains("head          each class's logit") && summary.contains("output 1"), "{summary}");
    let r = read_json(&rep);
    let m = &r["model"];
    assert_eq!(m["n_outputs"], 2, "{m}");
    let head = m["class_head"].as_array().unwrap();
    assert_eq!(head.len(), 3);
    assert!(head.iter().all(|h| h["a"].as_array().map(Vec::len) == Some(2)), "{m}");
    assert!(m["logit_terms"].is_null() && r["linear_inputs"]["used"] == false, "{}", r["linear_inputs"]);
    // The head learns what a line cannot: well above the largest class's share.
    assert!(r["test"]["accuracy"].as_f64().unwrap() > 0.75, "{}", r["test"]);
    // The report's programs are each class's logit over the outputs.
    assert_eq!(r["best"]["programs"].as_array().unwrap().len(), 3);
    let classes: Vec<String> = serde_json::from_value(r["classes"].clone()).unwrap();
    let want = predicted(&rep, &pcsv, &classes);
    assert_eq!(want.len(), pts.len());
    // The head is applied: a model whose head gives every class the same logit predicts the
    // first class everywhere, and the exports follow the head, not the raw outputs.
    let mut flat = r.clone();
    for h in flat["model"]["class_head"].as_array_mut().unwrap() {
        h["c"] = serde_json::json!(0.0);
        h["a"] = serde_json::json!([0.0, 0.0]);
    }
    let flat_rep = d.join("flat.json");
    std::fs::write(&flat_rep, flat.to_string()).unwrap();
    assert!(predicted(&flat_rep, &pcsv, &classes).iter().all(|&c| c == 0));
    assert!(want.iter().any(|&c| c != 0), "{want:?}");
    for (lang, file) in [("python", "m.py"), ("c", "m.c"), ("rust", "m.rs")] {
        assert_ok(&grove(&["export", "--model", s(&rep), "--lang", lang, "--out", s(&d.join(file))]));
    }
    compile_rust(&d.join("m.rs"));
    if let Some(got) = run_python(&d.join("m.py"), &pts) {
        assert_eq!(got.iter().map(|v| *v as usize).collect::<Vec<_>>(), want, "python");
    }
    if let Some(got) = run_c_lines(&d.join("m.c"), &pts, "%d") {
        assert_eq!(got.iter().map(|v| v.parse().unwrap()).collect::<Vec<usize>>(), want, "C");
    }
    // A head over one output (the program's value).
    let one = d.join("one.json");
    assert_ok(&grove(&["classify", "--data", s(&csv), "--functions", "add,sub,mul", "--outputs", "1", "--pop", "100", "--gens", "3", "--report", s(&one), "-q"]));
    let r1 = read_json(&one);
    assert_eq!((r1["model"]["n_outputs"].as_u64(), r1["model"]["class_head"].as_array().map(Vec::len)), (Some(0), Some(3)));
    assert_eq!(predicted(&one, &pcsv, &classes).len(), pts.len());
}

#[test]
fn impossible_heads_are_one_line_errors() {
    let base = ["classify", "--data", "builtin:iris", "--pop", "16", "--gens", "1", "-q"];
    let with = |extra: &[&str]| {
        let mut a = base.to_vec();
        a.extend(extra);
        grove(&a)
    };
    assert_one_line_error(&with(&["--outputs", "9"]), &["--outputs", "9", "at most 8"]);
    assert_one_line_error(&with(&["--outputs", "2", "--optimise-constants", "3"]), &["--outputs", "--optimise-constants"]);
    assert_one_line_error(&with(&["--outputs", "2", "--linear-inputs", "on"]), &["--outputs", "--linear-inputs on"]);
    assert_one_line_error(&grove(&["classify", "--data", "builtin:breast_cancer", "--outputs", "2", "--binary", "-q"]), &["--outputs", "--binary"]);
    // A grammar must write the K slots the head reads.
    assert_one_line_error(&with(&["--grammar", "grammars/classify-3class.bnf", "--outputs", "4"]), &["writes 3 output slots", "asks for 4"]);
    // Three slots serve a head of three outputs; the grammar's own outputs per class too.
    let d = dir("class-head-ge");
    let rep = d.join("ge.json");
    assert_ok(&with(&["--grammar", "grammars/classify-3class.bnf", "--outputs", "3", "--report", s(&rep)]));
    assert_eq!(read_json(&rep)["model"]["class_head"].as_array().map(Vec::len), Some(3));
}

#[test]
fn saved_heads_are_checked_on_load() {
    let d = dir("class-head-load");
    let rep = d.join("r.json");
    assert_ok(&grove(&["classify", "--data", "builtin:iris", "--outputs", "2", "--pop", "60", "--gens", "2", "--report", s(&rep), "-q"]));
    let r = read_json(&rep);
    let csv = "data/classification/iris.csv";
    let bad = |edit: &dyn Fn(&mut serde_json::Value), needles: &[&str]| {
        let mut v = r.clone();
        edit(&mut v["model"]);
        let p = d.join("bad.json");
        std::fs::write(&p, v.to_string()).unwrap();
        assert_one_line_error(&grove(&["predict", "--model", s(&p), "--data", csv]), needles);
    };
    bad(&|m| m["class_head"].as_array_mut().unwrap().truncate(2), &["head has 2 classes", "names 3"]);
    bad(&|m| m["class_head"][1]["a"] = serde_json::json!([1.0]), &["head of class 1", "1 weights for 2"]);
    bad(&|m| m["class_head"][0]["c"] = serde_json::json!(null), &["class_head"]);
    bad(&|m| m["logit_terms"] = serde_json::json!([]), &["both a head and linear terms"]);
}

#[test]
fn experiment_files_and_set_take_outputs() {
    let d = dir("class-head-ron");
    let (ron, rep) = (d.join("e.ron"), d.join("r.json"));
    std::fs::write(&ron, "Classify(data: \"builtin:wine\", outputs: 3, engine: (pop_size: 60, generations: 2))").unwrap();
    assert_ok(&grove(&["run", s(&ron), "--report", s(&rep), "-q"]));
    let r = read_json(&rep);
    assert_eq!((r["settings"]["outputs"].as_u64(), r["model"]["class_head"].as_array().map(Vec::len)), (Some(3), Some(3)));
    assert_one_line_error(&grove(&["run", s(&ron), "--set", "outputs=12", "-q"]), &["outputs", "12", "at most 8"]);
    // The report's settings run again as the same experiment.
    let again = d.join("again.json");
    assert_ok(&grove(&["run", "--from", s(&rep), "--report", s(&again), "-q"]));
    assert_eq!(read_json(&again)["model"]["class_head"], r["model"]["class_head"]);
}
