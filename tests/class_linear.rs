//! Linear terms of the inputs under a classifier's outputs (`grove classify --linear-inputs`),
//! as a user meets them: kept where the classes are close to linear in the inputs and left out
//! where the labels are noise; the same classes from the report, `grove predict` and the
//! exports; saved models checked on load; the setting from the command line, experiment files
//! and `--set`, and with the constant fitting, which reads them.

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

/// A CSV of `n` rows, the class of each given by `label` (a name).
fn data_csv(path: &Path, n: usize, label: impl Fn(usize, &[f64]) -> &'static str) -> Vec<Vec<f64>> {
    let rows = inputs(n);
    let body: String = rows.iter().enumerate().map(|(i, r)| format!("{},{},{},{}\n", r[0], r[1], r[2], label(i, r))).collect();
    std::fs::write(path, format!("x0,x1,x2,class\n{body}")).unwrap();
    rows
}

/// Three classes by the largest of three lines in x0 and x1 (x2 unused), one row in 9 moved to
/// the next class so they are not separable.
fn linear_classes(i: usize, r: &[f64]) -> &'static str {
    let s = [0.0, 2.0 * r[0] - r[1], -r[0] + 2.0 * r[1] + 0.5];
    let mut k = (0..3).max_by(|&a, &b| s[a].total_cmp(&s[b])).unwrap();
    if i % 9 == 4 {
        k = (k + 1) % 3;
    }
    ["a", "b", "c"][k]
}

#[test]
fn linear_classes_keep_the_terms_and_every_output_agrees() {
    let d = dir("class-linear");
    let csv = d.join("d.csv");
    data_csv(&csv, 360, linear_classes);
    // New points, some near the boundaries, where the terms and the program both matter.
    let pts = inputs(700)[360..].to_vec();
    let pcsv = d.join("pts.csv");
    std::fs::write(&pcsv, format!("x0,x1,x2\n{}", pts.iter().map(|p| format!("{},{},{}\n", p[0], p[1], p[2])).collect::<String>())).unwrap();
    for binary in [false, true] {
        let rep = d.join(format!("r{binary}.json"));
        let mut args = vec!["classify", "--data", s(&csv), "--functions", "add,sub,mul", "--pop", "200", "--gens", "8", "--seed", "2", "--report", s(&rep), "-q"];
        // Two classes for the one-output program: a against the rest.
        let two = d.join("two.csv");
        if binary {
            data_csv(&two, 360, |i, r| if linear_classes(i, r) == "a" { "a" } else { "z" });
            args[2] = s(&two);
            args.push("--binary");
        }
        let out = grove(&args);
        assert_ok(&out);
        assert!(text(&out.stdout).contains("linear inputs auto, kept"), "{}", text(&out.stdout));
        let r = read_json(&rep);
        assert_eq!(r["linear_inputs"]["used"], true, "{}", r["linear_inputs"]);
        let terms = r["model"]["logit_terms"].as_array().unwrap();
        assert_eq!(terms.len(), if binary { 1 } else { 3 });
        assert!(r["test"]["accuracy"].as_f64().unwrap() > 0.8, "{}", r["test"]);
        // The report's programs carry the terms.
        assert!(r["best"]["programs"][0].as_str().unwrap().contains("*x0"), "{}", r["best"]["programs"]);
        let classes: Vec<String> = serde_json::from_value(r["classes"].clone()).unwrap();
        let want = predicted(&rep, &pcsv, &classes);
        assert_eq!(want.len(), pts.len());
        // Without the terms the same program predicts other classes: they are applied.
        let mut bare = r.clone();
        bare["model"].as_object_mut().unwrap().remove("logit_terms");
        let bare_rep = d.join("bare.json");
        std::fs::write(&bare_rep, bare.to_string()).unwrap();
        assert_ne!(predicted(&bare_rep, &pcsv, &classes), want, "binary {binary}");
        for (lang, file) in [("python", "m.py"), ("c", "m.c"), ("rust", "m.rs")] {
            assert_ok(&grove(&["export", "--model", s(&rep), "--lang", lang, "--out", s(&d.join(file))]));
        }
        compile_rust(&d.join("m.rs"));
        if let Some(got) = run_python(&d.join("m.py"), &pts) {
            assert_eq!(got.iter().map(|v| *v as usize).collect::<Vec<_>>(), want, "python, binary {binary}");
        }
        if let Some(got) = run_c_lines(&d.join("m.c"), &pts, "%d") {
            assert_eq!(got.iter().map(|v| v.parse().unwrap()).collect::<Vec<usize>>(), want, "C, binary {binary}");
        }
    }
}

#[test]
fn labels_of_noise_leave_the_terms_out() {
    let d = dir("class-linear-none");
    let (csv, rep) = (d.join("d.csv"), d.join("r.json"));
    // Classes by a hash of the row: no line in the inputs predicts them.
    data_csv(&csv, 200, |i, _| ["a", "b"][(i.wrapping_mul(2654435761) >> 7) % 2]);
    assert_ok(&grove(&["classify", "--data", s(&csv), "--functions", "add,mul", "--pop", "64", "--gens", "2", "--report", s(&rep), "-q"]));
    let r = read_json(&rep);
    assert_eq!(r["linear_inputs"]["used"], false, "{}", r["linear_inputs"]);
    assert!(r["linear_inputs"]["why"].as_str().unwrap().starts_with("auto, left out"), "{}", r["linear_inputs"]);
    assert!(r["model"].get("logit_terms").is_none(), "{}", r["model"]);
}

#[test]
fn on_off_and_the_constant_fitting_are_obeyed() {
    let d = dir("class-linear-modes");
    let csv = d.join("d.csv");
    data_csv(&csv, 120, linear_classes);
    let run = |extra: &[&str]| {
        let rep = d.join("r.json");
        let mut a = vec!["classify", "--data", s(&csv), "--functions", "add,mul", "--pop", "32", "--gens", "2", "--report", s(&rep), "-q"];
        a.extend(extra);
        assert_ok(&grove(&a));
        read_json(&rep)
    };
    let off = run(&["--linear-inputs", "off"]);
    assert_eq!(off["linear_inputs"]["used"], false);
    assert!(off["model"].get("logit_terms").is_none());
    let on = run(&["--linear-inputs", "on"]);
    assert_eq!(on["linear_inputs"]["used"], true);
    assert_eq!(on["model"]["logit_terms"].as_array().unwrap().len(), 3);
    // The constant fitting reads the terms (under the outputs, as the fitness): auto keeps
    // them where they beat the class frequencies, and on goes with it.
    for mode in ["auto", "on"] {
        let fitted = run(&["--linear-inputs", mode, "--optimise-constants", "2", "--optimise-every", "1"]);
        assert_eq!(fitted["linear_inputs"]["used"], true, "{mode}: {}", fitted["linear_inputs"]);
        assert_eq!(fitted["model"]["logit_terms"].as_array().unwrap().len(), 3, "{mode}");
    }
}

#[test]
fn auto_leaves_the_terms_out_past_its_size_limits() {
    // 600 inputs: more than the terms read in auto.
    let d = dir("class-linear-wide");
    let (csv, rep) = (d.join("wide.csv"), d.join("r.json"));
    let header: Vec<String> = (0..600).map(|j| format!("x{j}")).collect();
    let body: String = (0..40)
        .map(|i| {
            let row: Vec<String> = (0..600).map(|j| format!("{}", ((i * 31 + j * 17) % 23) as f64 / 7.0)).collect();
            format!("{},{}\n", row.join(","), ["a", "b"][i % 2])
        })
        .collect();
    std::fs::write(&csv, format!("{},class\n{body}", header.join(","))).unwrap();
    assert_ok(&grove(&["classify", "--data", s(&csv), "--functions", "add", "--pop", "16", "--gens", "1", "--report", s(&rep), "-q"]));
    let r = read_json(&rep);
    assert_eq!(r["linear_inputs"]["used"], false);
    assert!(r["linear_inputs"]["why"].as_str().unwrap().contains("600 inputs, more than the 512"), "{}", r["linear_inputs"]);
    // `on` fits them whatever the width.
    assert_ok(&grove(&["classify", "--data", s(&csv), "--functions", "add", "--pop", "16", "--gens", "1", "--linear-inputs", "on", "--report", s(&rep), "-q"]));
    let r = read_json(&rep);
    assert_eq!(r["linear_inputs"]["used"], true, "{}", r["linear_inputs"]);
    assert_eq!(r["model"]["logit_terms"][0]["a"].as_array().unwrap().len(), 600);
}

#[test]
fn experiment_files_and_set_take_linear_inputs() {
    let d = dir("class-linear-ron");
    let (ron, rep) = (d.join("e.ron"), d.join("r.json"));
    std::fs::write(&ron, r#"Classify(data: "builtin:iris", functions: "add,sub,mul", linear_inputs: "off", engine: (pop_size: 32, generations: 2))"#).unwrap();
    assert_ok(&grove(&["run", s(&ron), "--report", s(&rep), "-q"]));
    let r = read_json(&rep);
    assert_eq!(r["settings"]["linear_inputs"], "off");
    assert_eq!(r["linear_inputs"]["used"], false);
    assert_ok(&grove(&["run", s(&ron), "--set", "linear_inputs=on", "--report", s(&rep), "-q"]));
    assert_eq!(read_json(&rep)["linear_inputs"]["used"], true);
    assert_one_line_error(&grove(&["run", s(&ron), "--set", "linear_inputs=sometimes", "-q"]), &["linear_inputs"]);
}

#[test]
fn saved_terms_are_applied_and_checked_on_load() {
    let base = |n_outputs: usize, classes: &str, terms: &str| {
        format!(
            r#"{{"model": {{"kind": "classification", "features": ["x0", "x1"], "target": "y",
            "nodes": [["var", 0.0, 0]], "n_outputs": {n_outputs}, "classes": {classes}, "scale": null, "standardize": null{terms}}}}}"#
        )
    };
    // One output, two classes: class 1 where x0 + (1 − 2·x1) > 0.
    let good = grove::task::base::model::from_json(base(0, r#"["a", "b"]"#, r#", "logit_terms": [{"c": 1.0, "a": [0.0, -2.0]}]"#).as_bytes(), "r.json").unwrap();
    // At (0.5, 1): 0.5 + 1 − 2 = −0.5; at (0.5, 0): 1.5.
    assert_eq!(good.outputs_of(vec![0.5, 0.5, 1.0, 0.0], 2).unwrap(), vec![-0.5, 1.5]);
    for (json, needle) in [
        (base(0, r#"["a", "b"]"#, r#", "logit_terms": [{"c": 1.0, "a": [2.0]}]"#), "1 weights for 2 features"),
        (base(0, r#"["a", "b"]"#, r#", "logit_terms": [{"c": 1.0, "a": [2.0, 0.0]}, {"c": 0.0, "a": [0.0, 0.0]}]"#), "terms for 2 outputs"),
        (base(0, r#"["a", "b"]"#, r#", "logit_terms": [{"c": 1.0, "a": [2.0, "x"]}]"#), "cannot be read"),
    ] {
        let e = grove::task::base::model::from_json(json.as_bytes(), "r.json").unwrap_err();
        assert!(format!("{e:#}").contains(needle), "{json}: {e:#}");
    }
    let mut m = good.clone();
    m.logit_terms.as_mut().unwrap()[0].c = f64::INFINITY;
    assert!(format!("{:#}", m.tree().unwrap_err()).contains("not finite"));
    let mut m = good;
    m.kind = grove::task::base::model::ModelKind::Regression;
    m.classes = None;
    m.scale = Some((1.0, 0.0));
    assert!(format!("{:#}", m.tree().unwrap_err()).contains("regression model with linear terms per output"));
}
