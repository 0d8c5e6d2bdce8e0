//! The data layer through its public API: reading the Vladislavleva-4 files PonyGE2 ships
//! (copied to `tests/fixtures/reference/datasets`), reading files from disk, and the
//! command-line data source.

use std::path::{Path, PathBuf};

use grove::data::{self, DataError, DataSource, builtins};

fn reference(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reference/datasets").join(rel)
}

/// The Vladislavleva-4 target, in f64.
fn vladislavleva4(x: &[f64]) -> f64 {
    10.0 / (5.0 + x.iter().map(|v| (v - 3.0) * (v - 3.0)).sum::<f64>())
}

#[test]
fn reads_ponyge2_vladislavleva4_train_and_test() {
    for (file, rows) in [("Vladislavleva4/Train.txt", 1024), ("Vladislavleva4/Test.txt", 5000)] {
        let d = data::read(reference(file), None).unwrap();
        d.validate().unwrap();
        assert_eq!(d.shape(), (rows, 5), "{file}");
        assert_eq!(d.names, ["x0", "x1", "x2", "x3", "x4"]);
        assert_eq!(d.target, "response");
        // The file's targets are the formula at its inputs (printed with 12 digits).
        let (x64, y64) = (d.x64.as_ref().unwrap(), d.y64.as_ref().unwrap());
        for i in 0..rows {
            let row: Vec<f64> = (0..5).map(|j| x64[j * rows + i]).collect();
            let want = vladislavleva4(&row);
            assert!((y64[i] - want).abs() < 1e-9, "{file} row {i}: {} vs {want}", y64[i]);
        }
    }
    // First data row of Train.txt, as printed.
    let d = data::read(reference("Vladislavleva4/Train.txt"), None).unwrap();
    let first = [5.21896597549, 3.87632579435, 4.58430178475, 2.40145364039, 5.57705550933, 0.495019071419];
    for (name, want) in ["x0", "x1", "x2", "x3", "x4", "response"].into_iter().zip(first) {
        assert_eq!(d.column64(name).unwrap()[0], want, "{name}");
        assert_eq!(d.column(name).unwrap()[0], want as f32, "{name}");
    }
    // Another target column, by name.
    let d = data::read(reference("Vladislavleva4/Train.txt"), Some("x0")).unwrap();
    assert_eq!((d.target.as_str(), d.names.last().map(String::as_str)), ("x0", Some("response")));
}

#[test]
fn read_errors_name_the_file() {
    let missing = reference("Vladislavleva4/Nope.txt");
    let err = format!("{:#}", data::read(&missing, None).unwrap_err());
    assert!(err.starts_with(&format!("cannot read data file {}", missing.display())), "{err}");

    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let path = dir.join("grove-data-bad.csv");
    std::fs::write(&path, "a,b,y\n1,2,3\n4,5,inf\n").unwrap();
    let err = data::read(&path, None).unwrap_err();
    let typed = err.downcast_ref::<DataError>().expect("a DataError inside");
    assert_eq!((typed.line, typed.column.clone()), (Some(3), Some((3, "y".to_string()))));
    assert_eq!(
        format!("{err:#}"),
        format!(
            "{}:3: column 3 (y): `inf` is infinite: NaN and infinite values are not allowed",
            path.display()
        )
    );
    let err = format!("{:#}", data::read(&path, Some("z")).unwrap_err());
    assert!(err.contains(":1: unknown target column `z`: the columns are `a`, `b`, `y`"), "{err}");
    std::fs::remove_file(&path).ok();
}

#[test]
fn data_sources_load_files_and_builtins() {
    let file = reference("Vladislavleva4/Train.txt");
    let source: DataSource = file.to_str().unwrap().parse().unwrap();
    let p = source.load(None).unwrap();
    assert_eq!((p.train.shape(), p.test.is_none()), ((1024, 5), true));
    assert_eq!(p.name, file.display().to_string());

    for b in builtins() {
        let p: DataSource = format!("builtin:{}", b.name).parse().unwrap();
        let loaded = p.load(Some("y")).unwrap();
        assert_eq!(loaded.train.n_rows, b.default_n, "{}", b.name);
        assert_eq!(loaded.train.n_features, b.n_vars, "{}", b.name);
        assert_eq!(loaded.test.is_some(), b.test.is_some(), "{}", b.name);
    }
    let p: DataSource = "builtin:sextic:100000".parse().unwrap();
    assert_eq!(p.load(None).unwrap().train.shape(), (100_000, 1));
}

#[test]
fn split_of_a_read_file_is_deterministic() {
    let d = data::read(reference("Vladislavleva4/Train.txt"), None).unwrap();
    let (train, test) = data::split(&d, 0.2, 42).unwrap();
    assert_eq!((train.n_rows, test.n_rows), (819, 205));
    let again = data::split(&d, 0.2, 42).unwrap();
    assert_eq!((train, test), again);
}

/// Issue 58: a test file is read against the training data: the same columns by name in any
/// order (put in the training order), and any difference is one line naming the columns.
#[test]
fn a_test_file_matches_the_training_columns_by_name() {
    let train = data::read(reference("Vladislavleva4/Train.txt"), None).unwrap();
    let test = data::read_like(reference("Vladislavleva4/Test.txt"), &train).unwrap();
    assert_eq!((test.shape(), test.names.clone(), test.target.as_str()), ((5000, 5), train.names.clone(), "response"));
    // Another column order: the same data set.
    let like = data::Dataset::new(vec!["a".into(), "b".into()], "t", vec![1.0, 2.0, 3.0, 4.0], vec![5.0, 6.0]).unwrap();
    let d = data::parse_like(b"t\tb\ta\n7\t8\t9\n", "f", &like).unwrap();
    assert_eq!((d.names.clone(), d.x.clone(), d.y.clone()), (vec!["a".to_string(), "b".into()], vec![9.0, 8.0], vec![7.0]));
    assert_eq!(d.x64.as_deref(), Some(&[9.0, 8.0][..]));
    for (body, wants) in [
        (&b"a,b\n1,2\n"[..], &["f:1:", "columns differ", "(a, b, t)", "missing `t`"][..]),
        (b"a,b,t,z\n1,2,3,4\n", &["not in the training data `z`"]),
        (b"A,b,t\n1,2,3\n", &["missing `a`", "not in the training data `A`"]),
    ] {
        let e = data::parse_like(body, "f", &like).unwrap_err().to_string();
        assert!(!e.contains('\n'), "one line: {e}");
        for w in wants {
            assert!(e.contains(w), "`{w}` missing from: {e}");
        }
    }
}
