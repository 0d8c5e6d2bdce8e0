//! Classification end to end: the built-in data sets, reading labelled files (and the errors a
//! user meets), stratified splits, fitness through the backend, and `grove classify` /
//! `grove predict` on the command line.

use std::process::Output;

use grove::data::classes::{ClassSource, builtin_classes, parse_labeled, stratified_split};

mod support;
use support::{Device, grove_run, temp_file, text};

/// `grove ARGS` on the device the binary chooses itself (`GROVE_DEVICE` unset).
fn grove(args: &[&str]) -> Output {
    grove_run(args, "", Device::Unset, None)
}

/// A built-in's name, rows, features and (class, rows) pairs.
type Expected = (&'static str, usize, usize, &'static [(&'static str, usize)]);

#[test]
fn each_builtin_has_its_shape_and_class_counts() {
    let want: [Expected; 4] = [
        ("iris", 150, 4, &[("setosa", 50), ("versicolor", 50), ("virginica", 50)]),
        ("wine", 178, 13, &[("class_0", 59), ("class_1", 71), ("class_2", 48)]),
        ("breast_cancer", 569, 30, &[("benign", 357), ("malignant", 212)]),
        (
            "digits",
            1797,
            64,
            &[("0", 178), ("1", 182), ("2", 177), ("3", 183), ("4", 181), ("5", 182), ("6", 181), ("7", 179), ("8", 174), ("9", 180)],
        ),
    ];
    for (name, rows, features, classes) in want {
        let d = builtin_classes(name).unwrap();
        d.data.validate().unwrap();
        assert_eq!(d.data.shape(), (rows, features), "{name}");
        let got: Vec<(&str, usize)> = d.classes.iter().map(String::as_str).zip(d.class_counts()).collect();
        assert_eq!(got, classes, "{name}");
        assert_eq!(d.data.target, "class");
        assert!(d.data.y.iter().zip(&d.labels).all(|(&y, &l)| y == l as f32));
    }
    // Spot values: Iris row 1 and Digits' first pixels.
    let iris = builtin_classes("iris").unwrap();
    assert_eq!(iris.data.row(0).unwrap(), [5.1, 3.5, 1.4, 0.2]);
    assert_eq!(iris.data.names[2], "petal_length_cm");
    let digits = builtin_classes("digits").unwrap();
    assert_eq!(&digits.data.row(0).unwrap()[..4], [0.0, 0.0, 5.0, 13.0]);
    assert_eq!(ClassSource::parse("builtin:Breast-Cancer").unwrap(), ClassSource::Builtin("breast_cancer".into()));
    let e = ClassSource::parse("builtin:pagie1").unwrap_err().to_string();
    assert!(e.contains("builtin:iris, builtin:wine"), "{e}");
}

#[test]
fn stratified_split_keeps_each_class_proportion_and_is_seeded() {
    let d = builtin_classes("wine").unwrap();
    let (train, test) = stratified_split(&d, 0.25, 7).unwrap();
    // round(59/4) = 15, round(71/4) = 18, round(48/4) = 12.
    assert_eq!(test.class_counts(), [15, 18, 12]);
    assert_eq!(train.class_counts(), [44, 53, 36]);
    // Every row lands in exactly one part.
    let mut rows: Vec<Vec<f32>> = (0..train.data.n_rows).map(|i| train.data.row(i).unwrap()).collect();
    rows.extend((0..test.data.n_rows).map(|i| test.data.row(i).unwrap()));
    rows.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let mut all: Vec<Vec<f32>> = (0..d.data.n_rows).map(|i| d.data.row(i).unwrap()).collect();
    all.sort_by(|a, b| a.partial_cmp(b).unwrap());
    assert_eq!(rows, all);
    // The same seed gives the same split; another seed another one.
    let (_, again) = stratified_split(&d, 0.25, 7).unwrap();
    assert_eq!(again, test);
    let (_, other) = stratified_split(&d, 0.25, 8).unwrap();
    assert_ne!(other.data.x, test.data.x);
    // A class of one row stays in training.
    let tiny = parse_labeled(b"a,c\n1,x\n2,x\n3,x\n4,y\n", "t", None).unwrap();
    let (tr, te) = stratified_split(&tiny, 0.5, 1).unwrap();
    assert_eq!((tr.class_counts(), te.class_counts()), (vec![1, 1], vec![2, 0]));
}

#[test]
fn labels_may_be_integers_or_names_in_sorted_order() {
    let d = parse_labeled(b"f,label\n1,10\n2,2\n3,10\n4,-1\n", "t", None).unwrap();
    assert_eq!(d.classes, ["-1", "2", "10"], "integers sort numerically");
    assert_eq!(d.labels, [2, 1, 2, 0]);
    let d = parse_labeled(b"kind;f\n\"b\";1\na;2\nb;3\n", "t", Some("kind")).unwrap();
    assert_eq!(d.classes, ["a", "b"]);
    assert_eq!(d.labels, [1, 0, 1]);
    assert_eq!(d.data.names, ["f"]);
    assert_eq!(d.data.x, [1.0, 2.0, 3.0]);
}

/// Each bad input is one line that names the place and says how to fix it.
#[test]
fn bad_label_columns_and_features_say_how_to_fix_them() {
    let cases: [(&[u8], Option<&str>, &[&str]); 6] = [
        (b"a,b,c\n1,2,x\n3,4,y\n", Some("class"), &["unknown label column `class`", "`a`, `b`, `c`", "--label"]),
        (b"a,Class\n1,x\n3,y\n", Some("class"), &["did you mean `Class`?"]),
        (b"a,c\n1,x\n2,x\n", None, &["column 2 (c)", "single class (`x`) in all 2 rows", "--label"]),
        (b"a,y\n1,0.5\n2,1.5\n", None, &["t:2: column 2 (y)", "label `0.5` is a number but not an integer", "grove evolve", "--label"]),
        (b"a,color,c\n1,red,x\n2,blue,y\n", None, &["t:2: column 2 (color)", "`red` is not a finite number", "encode the column", "--label"]),
        (b"a,c\n1,x\n,y\n", None, &["t:3: column 1 (a)", "an empty cell"]),
    ];
    for (body, label, wants) in cases {
        let e = parse_labeled(body, "t", label).unwrap_err().to_string();
        assert!(!e.contains('\n'), "one line: {e}");
        for w in wants {
            assert!(e.contains(w), "`{w}` missing from: {e}");
        }
    }
    let e = parse_labeled(b"a,c\n1,x\n2\n", "t", None).unwrap_err().to_string();
    assert!(e.contains("t:3: 1 cells, but the header names 2 columns"), "{e}");
    let e = parse_labeled(b"a,c\n1,\n2,y\n", "t", None).unwrap_err().to_string();
    assert!(e.contains("t:2: column 2 (c): empty class label"), "{e}");
}

#[test]
fn cli_errors_are_one_line_with_exit_code_1() {
    let f = temp_file("one.csv", "a,b,label\n1,2,x\n3,4,x\n5,6,x\n");
    let out = grove(&["classify", "--data", f.to_str().unwrap(), "--device", "cpu", "--pop", "10", "--gens", "1"]);
    assert_eq!(out.status.code(), Some(1));
    let e = text(&out.stderr);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(e.starts_with("error: ") && e.contains("single class"), "{e}");
    let out = grove(&["classify", "--data", "builtin:iris", "--binary", "--device", "cpu", "--pop", "10", "--gens", "1"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("--binary needs two classes; the data has 3"), "{}", text(&out.stderr));
}

#[test]
fn classify_reports_accuracy_and_confusion_and_predict_applies_the_model() {
    let report = temp_file("iris.json", "");
    let out = grove(&[
        "classify", "--data", "builtin:iris", "--pop", "300", "--gens", "5", "--device", "cpu", "--quiet", "--report",
        report.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(s.contains("class setosa") && s.contains("class virginica"), "{s}");
    assert!(s.contains("test          accuracy") && s.contains("true\\pred"), "{s}");
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    for part in ["train", "test"] {
        let p = &r[part];
        let conf = p["confusion"].as_array().unwrap();
        assert_eq!(conf.len(), 3);
        let rows: u64 = conf.iter().flat_map(|row| row.as_array().unwrap()).map(|v| v.as_u64().unwrap()).sum();
        let diag: u64 = (0..3).map(|k| conf[k][k].as_u64().unwrap()).sum();
        assert!((p["accuracy"].as_f64().unwrap() - diag as f64 / rows as f64).abs() < 1e-12, "{p}");
        assert!(p["balanced_accuracy"].as_f64().unwrap() > 0.5, "{p}");
    }
    assert_eq!(r["test"]["rows"], 39);
    assert!(r["test"]["accuracy"].as_f64().unwrap() > 0.7, "{}", r["test"]);
    assert_eq!(r["model"]["classes"], serde_json::json!(["setosa", "versicolor", "virginica"]));

    // grove predict on the Iris file itself: the columns are found by name, the label column
    // gives an accuracy, and the predictions agree with the report's own counts.
    let out = grove(&["predict", "--model", report.to_str().unwrap(), "--data", "data/classification/iris.csv"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lines: Vec<String> = text(&out.stdout).lines().map(String::from).collect();
    assert_eq!(lines.len(), 151);
    assert_eq!(lines[0], "prediction");
    // 111 training rows, fewer than the automatic validation split needs: all of them train.
    assert!(r["validation"].is_null());
    let right: u64 = ["train", "test"]
        .iter()
        .map(|p| {
            let c = &r[*p]["confusion"];
            (0..3).map(|k| c[k][k].as_u64().unwrap()).sum::<u64>()
        })
        .sum();
    let e = text(&out.stderr);
    assert!(e.contains(&format!("({right} of 150 rows, column `class`)")), "{e}");
    // Columns in another order, and a missing one.
    let shuffled = temp_file("cols.csv", "petal_width_cm,sepal_width_cm,petal_length_cm,sepal_length_cm\n0.2,3.5,1.4,5.1\n");
    let out = grove(&["predict", "--model", report.to_str().unwrap(), "--data", shuffled.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "prediction\nsetosa\n");
    let missing = temp_file("miss.csv", "sepal_width_cm,petal_length_cm\n3.5,1.4\n");
    let out = grove(&["predict", "--model", report.to_str().unwrap(), "--data", missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("lacks"), "{}", text(&out.stderr));
}

#[test]
fn predict_applies_a_regression_report_too() {
    let report = temp_file("reg.json", "");
    let data = temp_file("reg.csv", &(0..40).map(|i| format!("{i},{}\n", 3 * i + 1)).fold("x,y\n".to_string(), |a, l| a + &l));
    let out = grove(&[
        "evolve", "--data", data.to_str().unwrap(), "--functions", "add,mul", "--pop", "100", "--gens", "3", "--device", "cpu",
        "--quiet", "--report", report.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = grove(&["predict", "--model", report.to_str().unwrap(), "--data", data.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let preds: Vec<f64> = text(&out.stdout).lines().skip(1).map(|l| l.parse().unwrap()).collect();
    assert_eq!(preds.len(), 40);
    // Linear scaling fits y = 3x + 1 exactly with any program linear in x; the report's mse
    // and predict's agree either way.
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let mse: f64 = preds.iter().enumerate().map(|(i, p)| (p - (3 * i + 1) as f64).powi(2)).sum::<f64>() / 40.0;
    let want = r["train"]["mse"].as_f64().unwrap();
    assert!((mse - want).abs() <= 1e-6 * (1.0 + want), "predict mse {mse}, report {want}");
}

/// A program that overflows on rows unlike its training (exp of 100 in 32-bit floats) gives
/// `inf` there; predict's score says how many predictions are not finite and scores the rest,
/// and the run's own test scores count them, instead of a bare `mse inf` or `NaN`.
#[test]
fn scores_count_predictions_that_are_not_finite() {
    let grammar = temp_file("exp.bnf", "<e> ::= np.exp(x[:, 0])\n");
    let train = temp_file("exp-train.txt", "x y\n1 2.718\n2 7.389\n3 20.09\n4 54.6\n");
    let report = temp_file("exp.json", "");
    let out = grove(&[
        "evolve", "-g", grammar.to_str().unwrap(), "--data", train.to_str().unwrap(), "--pop", "10", "--gens", "2", "--device", "cpu",
        "--no-linear-scaling", "--linear-inputs", "off", "--select", "train", "--quiet", "--report", report.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let predict = |rows: &str| {
        let data = temp_file("exp-test.txt", &format!("x y\n{rows}"));
        let out = grove(&["predict", "--model", report.to_str().unwrap(), "--data", data.to_str().unwrap()]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        (text(&out.stdout), text(&out.stderr).trim().to_string())
    };
    let (preds, score) = predict("1 2.5\n100 1\n200 1\n");
    assert_eq!(preds.lines().skip(1).filter(|l| *l == "inf").count(), 2, "{preds}");
    // The one finite row: exp(1) against 2.5.
    let want = (std::f64::consts::E - 2.5).powi(2);
    let (head, rest) = score.split_once("over the other 1").unwrap_or_else(|| panic!("{score}"));
    assert!(head.starts_with("mse inf (3 rows, column `y`; predictions not finite: 2, mse "), "{score}");
    let mse: f64 = head.rsplit("mse ").next().unwrap().trim().parse().unwrap();
    assert!((mse - want).abs() < 1e-5, "{score}");
    assert_eq!(rest, ")");
    // Every row overflowing: no mse of the others; every row finite: the plain line.
    assert_eq!(predict("100 1\n").1, "mse inf (1 rows, column `y`; predictions not finite: 1)");
    let (_, score) = predict("1 2.718\n2 7.389\n");
    assert!(score.starts_with("mse ") && score.ends_with("(2 rows, column `y`)") && !score.contains("inf"), "{score}");
    // The same rows as the run's test file: the summary's test line and the report say it.
    let test = temp_file("exp-test-run.txt", "x y\n1 2.5\n100 1\n200 1\n");
    let out = grove(&[
        "evolve", "-g", grammar.to_str().unwrap(), "--data", train.to_str().unwrap(), "--test-data", test.to_str().unwrap(), "--pop", "10",
        "--gens", "2", "--device", "cpu", "--no-linear-scaling", "--linear-inputs", "off", "--select", "train", "--report",
        report.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let summary = text(&out.stdout) + &text(&out.stderr);
    let line = |name: &str| summary.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("{summary}")).to_string();
    assert!(line("test ").ends_with("(predictions not finite: 2)"), "{summary}");
    assert!(!line("train ").contains("not finite"), "{summary}");
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(r["test"]["not_finite"], 2, "{}", r["test"]);
    assert!(r["train"].get("not_finite").is_none(), "{}", r["train"]);
}

#[test]
fn classification_grammars_and_tree_gp_learn_iris_whatever_the_thread_count() {
    use grove::task::classify::{ClassifySettings, run};
    let dir = env!("CARGO_MANIFEST_DIR");
    let settings = |grammar: Option<&str>| ClassifySettings {
        grammar: grammar.map(|g| format!("{dir}/grammars/{g}")),
        functions: if grammar.is_some() { None } else { Some("add,sub,mul,div".into()) },
        engine: grove::evolve::EngineConfig { pop_size: 500, generations: 10, seed: 3, max_len: 64, ..Default::default() },
        device: grove::backend::DeviceChoice::Cpu,
        ..Default::default()
    };
    for s in [settings(Some("classify.bnf")), settings(Some("classify-3class.bnf")), settings(None)] {
        let run = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            pool.install(|| run(&s, &quiet())).unwrap().report
        };
        let (a, b) = (run(1), run(2));
        assert_eq!(a["best"], b["best"], "{:?}", s.grammar);
        assert_eq!(a["test"], b["test"]);
        // Chance is 1/3; ten small generations already do much better.
        let acc = a["train"]["accuracy"].as_f64().unwrap();
        assert!(acc > 0.6, "{:?}: train accuracy {acc}", s.grammar);
        assert_eq!(a["best"]["programs"].as_array().unwrap().len(), 3);
    }
}

#[test]
fn binary_mode_uses_one_output_and_its_sign() {
    use grove::task::classify::{ClassifySettings, run};
    let s = ClassifySettings {
        data: "builtin:breast_cancer".into(),
        binary: true,
        engine: grove::evolve::EngineConfig { pop_size: 200, generations: 4, seed: 2, max_len: 32, ..Default::default() },
        device: grove::backend::DeviceChoice::Cpu,
        ..Default::default()
    };
    let r = run(&s, &quiet()).unwrap().report;
    assert_eq!(r["model"]["n_outputs"], 0);
    assert_eq!(r["best"]["programs"].as_array().unwrap().len(), 1);
    assert!(r["train"]["accuracy"].as_f64().unwrap() > 0.8, "{}", r["train"]);
    assert_eq!(r["test"]["confusion"].as_array().unwrap().len(), 2);
}

#[test]
fn label_names_any_column_of_a_file() {
    // The class is the first column, as text; the features follow.
    let body: String = (0..40).fold("kind,a,b\n".to_string(), |s, i| {
        let kind = if i % 2 == 0 { "small" } else { "large" };
        s + &format!("{kind},{},{}\n", i % 2 * 10 + i % 3, i % 5)
    });
    let f = temp_file("kinds.csv", &body);
    let report = temp_file("kinds.json", "");
    let out = grove(&[
        "classify", "--data", f.to_str().unwrap(), "--label", "kind", "--pop", "100", "--gens", "3", "--device", "cpu", "-q",
        "--report", report.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(r["classes"], serde_json::json!(["large", "small"]));
    assert_eq!(r["model"]["features"], serde_json::json!(["a", "b"]));
    assert_eq!(r["model"]["target"], "kind");
    // `a` alone separates the classes (≥ 10 against ≤ 2): three generations find it.
    assert_eq!(r["test"]["accuracy"], 1.0, "{}", r["test"]);
    // Without --label the last column (numeric features only) is taken as the class column.
    let out = grove(&["classify", "--data", f.to_str().unwrap(), "--pop", "10", "--gens", "1", "--device", "cpu", "-q"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("column 1 (kind): `small` is not a finite number"), "{}", text(&out.stderr));
}

/// Options of a run that prints nothing.
fn quiet() -> grove::task::base::options::RunOptions {
    grove::task::base::options::RunOptions { quiet: true, ..Default::default() }
}

/// Issue 58: PonyGE2's classification files write classes as `1.000000`; labels whose value is
/// an integer are classes named by that integer, and any other number stays refused.
#[test]
fn integral_float_labels_are_integer_classes() {
    let d = parse_labeled(b"f,label\n1,1.000000\n2,2.0\n3,1\n4,1e0\n5,-3.00\n", "t", None).unwrap();
    assert_eq!(d.classes, ["-3", "1", "2"], "named by the integer, sorted numerically");
    assert_eq!(d.labels, [1, 2, 1, 1, 0]);
    let e = parse_labeled(b"f,label\n1,1.0\n2,2.5\n", "t", None).unwrap_err().to_string();
    assert!(e.contains("t:3: column 2 (label)") && e.contains("label `2.5` is a number but not an integer"), "{e}");
    assert!(!e.contains('\n'), "{e}");
    // Names stay names: `1.0` among names is a name of its own.
    let d = parse_labeled(b"f,label\n1,a\n2,1.0\n", "t", None).unwrap();
    assert_eq!(d.classes, ["1.0", "a"]);
}

/// A test file beside a training file: its columns by name in any order, its labels among the
/// training classes (`2.0` is class `2`), any number of classes present; anything else is one
/// line naming what differs.
#[test]
fn a_test_file_is_read_against_the_training_classes_and_columns() {
    use grove::data::classes::parse_labeled_like;
    let train = parse_labeled(b"a,b,label\n1,10,1\n2,20,2\n3,30,3\n", "train", None).unwrap();
    let test = parse_labeled_like(b"label,b,a\n2.0,5,6\n2,7,8\n", "test", &train).unwrap();
    assert_eq!(test.classes, train.classes);
    assert_eq!(test.labels, [1, 1], "one class present is fine in a test file");
    assert_eq!(test.data.names, ["a", "b"], "the training file's order");
    assert_eq!(test.data.x, [6.0, 8.0, 5.0, 7.0]);
    let cases: [(&[u8], &[&str]); 4] = [
        (b"a,c,label\n1,2,1\n", &["test:", "columns differ", "(a, b, label)", "missing `b`", "not in the training data `c`"]),
        (b"a,b\n1,2\n", &["missing `label`"]),
        (b"a,b,label\n1,2,4\n", &["test:2: column 3 (label)", "label `4` is not one of the training data's classes (1, 2, 3)"]),
        (b"a,b,label\n1,2,1.5\n", &["test:2", "label `1.5` is a number but not an integer"]),
    ];
    for (body, wants) in cases {
        let e = parse_labeled_like(body, "test", &train).unwrap_err().to_string();
        assert!(!e.contains('\n'), "one line: {e}");
        for w in wants {
            assert!(e.contains(w), "`{w}` missing from: {e}");
        }
    }
    // Named classes match by name only.
    let named = parse_labeled(b"a,label\n1,x\n2,y\n", "train", None).unwrap();
    let e = parse_labeled_like(b"a,label\n1,X\n", "test", &named).unwrap_err().to_string();
    assert!(e.contains("label `X` is not one of the training data's classes (x, y)"), "{e}");
}

/// `grove classify --test-data FILE`: the file's rows are the test rows (the training file is
/// not split), `--test-fraction 0` alone means no test rows, and both together are refused.
#[test]
fn classify_takes_a_test_file_or_no_test_rows() {
    let train = temp_file("tf_train.csv", "a,b,label\n1,2,1.000000\n2,3,2.000000\n3,1,1.000000\n4,4,2.000000\n5,5,1.000000\n6,2,2.000000\n7,1,1.000000\n8,3,2.000000\n");
    let test = temp_file("tf_test.csv", "b,label,a\n1,1.0,1\n9,2.0,9\n3,2,8\n");
    let report = temp_file("tf.json", "");
    let base = ["classify", "--data", train.to_str().unwrap(), "--device", "cpu", "--pop", "40", "--gens", "2", "--quiet"];
    let mut args = base.to_vec();
    args.extend(["--test-data", test.to_str().unwrap(), "--report", report.to_str().unwrap()]);
    let out = grove(&args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(s.contains("train         accuracy") && s.contains("(8 rows)"), "every training row is trained on: {s}");
    assert!(s.contains("test          accuracy") && s.contains("(3 rows)"), "{s}");
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(r["classes"], serde_json::json!(["1", "2"]));
    assert_eq!(r["test"]["rows"], 3);
    assert_eq!(r["settings"]["test_fraction"], 0.0, "a test file means no split");
    assert_eq!(r["settings"]["test_data"], test.to_str().unwrap());
    let mut args = base.to_vec();
    args.extend(["--test-fraction", "0"]);
    let out = grove(&args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(s.contains("test          (no test data: use --test-data or --test-fraction)") && s.contains("confusion on the training rows"), "{s}");
    let mut args = base.to_vec();
    args.extend(["--test-fraction", "0.3", "--test-data", test.to_str().unwrap()]);
    let out = grove(&args);
    assert_eq!(out.status.code(), Some(1));
    let e = text(&out.stderr);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(e.contains("give --test-data (test_data) or --test-fraction (test_fraction) 0.3, not both"), "{e}");
    let bad = temp_file("tf_bad.csv", "a,c,label\n1,2,1\n");
    let mut args = base.to_vec();
    args.extend(["--test-data", bad.to_str().unwrap()]);
    let out = grove(&args);
    assert_eq!(out.status.code(), Some(1));
    let e = text(&out.stderr);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(e.contains("--test-data (test_data)") && e.contains("missing `b`") && e.contains("`c`"), "{e}");
}

/// Issue 58: weighted F1, PonyGE2's classification fitness (`--fitness weighted-f1`, alias
/// `f1`): the returned program's fitness is 1 − its training rows' weighted F1, which every
/// part of the report shows beside accuracy.
#[test]
fn weighted_f1_is_a_fitness_and_a_reported_score() {
    let report = temp_file("wf1.json", "");
    for name in ["weighted-f1", "f1"] {
        let out = grove(&[
            "classify", "--data", "builtin:wine", "--fitness", name, "--pop", "200", "--gens", "4", "--device", "cpu", "--select", "train",
            "--linear-inputs", "off", "--quiet", "--report", report.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert!(text(&out.stdout).contains("weighted F1 "), "{}", text(&out.stdout));
        let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
        assert_eq!(r["settings"]["fitness"], "weighted-f1");
        let f1 = r["train"]["weighted_f1"].as_f64().unwrap();
        let fitness = r["best"]["fitness"].as_f64().unwrap();
        assert!((fitness - (1.0 - f1)).abs() < 1e-12, "fitness {fitness} vs 1 - F1 {}", 1.0 - f1);
        // The test rows' F1 from the confusion matrix (rows: true class), by hand.
        let m: Vec<Vec<f64>> = serde_json::from_value(r["test"]["confusion"].clone()).unwrap();
        let n: f64 = m.iter().flatten().sum();
        let by_hand: f64 = (0..m.len())
            .map(|c| {
                let (rows, pred) = (m[c].iter().sum::<f64>(), m.iter().map(|r| r[c]).sum::<f64>());
                if rows + pred == 0.0 { 0.0 } else { rows / n * 2.0 * m[c][c] / (rows + pred) }
            })
            .sum();
        assert!((r["test"]["weighted_f1"].as_f64().unwrap() - by_hand).abs() < 1e-12);
    }
}
