//! Running a model's exports and its sympy text at points, for the tests that check that every
//! output of grove gives the same predictions (tests/head.rs, tests/linear.rs). Each helper
//! returns `None`, saying so, where its tool (python3, sympy, cc) is not installed.

#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `(a, b, …,)` of one row, with every digit of each value (a tuple even of one value).
fn tuple(row: &[f64]) -> String {
    format!("({},)", row.iter().map(|v| format!("{v:?}")).collect::<Vec<_>>().join(", "))
}

/// Runs the exported Python's `predict` on `rows`: the `repr` of each result.
pub fn run_python_lines(src: &Path, rows: &[Vec<f64>]) -> Option<Vec<String>> {
    run_python_calls(src, "predict", rows)
}

/// Runs the exported Python's function `name` on `rows`: the `repr` of each result.
pub fn run_python_calls(src: &Path, name: &str, rows: &[Vec<f64>]) -> Option<Vec<String>> {
    if Command::new("python3").arg("--version").output().is_err() {
        eprintln!("skipped: python3 is not installed");
        return None;
    }
    let rows: Vec<String> = rows.iter().map(|r| tuple(r)).collect();
    let script = format!("import runpy\nm = runpy.run_path({:?})\nfor r in [{}]:\n    print(repr(m[{name:?}](*r)))\n", s(src), rows.join(", "));
    let out = Command::new("python3").args(["-c", &script]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    Some(text(&out.stdout).lines().map(str::to_string).collect())
}

/// Runs the exported Python's `predict` on `rows` (numbers).
pub fn run_python(src: &Path, rows: &[Vec<f64>]) -> Option<Vec<f64>> {
    run_python_lines(src, rows).map(|l| l.iter().map(|l| l.parse().unwrap()).collect())
}

/// Compiles the exported C with a main that prints `predict` for each row with the `printf`
/// format `fmt` (`%.17g` for a regression model, `%d` for a classifier's index).
pub fn run_c_lines(src: &Path, rows: &[Vec<f64>], fmt: &str) -> Option<Vec<String>> {
    let calls: String = rows
        .iter()
        .map(|r| {
            let args: Vec<String> = r.iter().map(|v| format!("{v:?}f")).collect();
            format!("    printf(\"{fmt}\\n\", predict({}));\n", args.join(", "))
        })
        .collect();
    run_c_main(src, &calls)
}

/// Compiles the exported control policy's C with a main that prints `act`'s `k` actions for
/// each row (`%.9g`, one line per row, the actions joined by spaces).
pub fn run_c_actions(src: &Path, rows: &[Vec<f64>], k: usize) -> Option<Vec<String>> {
    let calls: String = rows
        .iter()
        .map(|r| {
            let args: Vec<String> = r.iter().map(|v| format!("{v:?}f")).collect();
            let print = (0..k).map(|i| format!("printf(\"%.9g%s\", (double)g_a[{i}], {});", if i + 1 == k { "\"\\n\"" } else { "\" \"" })).collect::<String>();
            format!("    {{ float g_a[{k}]; act({}, g_a); {print} }}\n", args.join(", "))
        })
        .collect();
    run_c_main(src, &calls)
}

/// Runs the exported control policy's C (`src`, from `report`) on `rows` and asserts that each
/// row's `k` actions are those of the report's saved policy as grove plays it (within 1e-5);
/// nothing to check where cc is not installed.
pub fn assert_c_acts_as_saved(src: &Path, report: &Path, rows: &[Vec<f64>], k: usize) {
    let mut policy = grove::task::control::SavedPolicy::read(report).unwrap().compile().unwrap();
    let Some(lines) = run_c_actions(src, rows, k) else { return };
    for (line, row) in lines.iter().zip(rows) {
        let obs: Vec<f32> = row.iter().map(|&x| x as f32).collect();
        let mut want = vec![0.0f32; k];
        assert!(policy.act(&obs, &mut want));
        let got: Vec<f64> = line.split_whitespace().map(|x| x.parse().unwrap()).collect();
        assert_eq!(got.len(), k, "{line}");
        for (g, w) in got.iter().zip(&want) {
            assert!((g - *w as f64).abs() < 1e-5, "{line} against {want:?}");
        }
    }
}

/// Compiles the exported C with a main of `calls` and runs it: its lines.
fn run_c_main(src: &Path, calls: &str) -> Option<Vec<String>> {
    if Command::new("cc").arg("--version").output().is_err() {
        eprintln!("skipped: cc is not installed");
        return None;
    }
    let dir = src.parent().unwrap();
    let main = dir.join("main.c");
    std::fs::write(&main, format!("#include <stdio.h>\n#include \"{}\"\nint main(void) {{\n{calls}    return 0;\n}}\n", s(src))).unwrap();
    let bin = dir.join("model-bin");
    let cc = Command::new("cc").args(["-std=c99", "-Wall", "-Werror", "-o", s(&bin), s(&main), "-lm"]).output().unwrap();
    assert!(cc.status.success(), "the exported C does not compile: {}", text(&cc.stderr));
    let out = Command::new(&bin).output().unwrap();
    Some(text(&out.stdout).lines().map(str::to_string).collect())
}

/// [`run_c_lines`] of a regression model's `predict` (numbers).
pub fn run_c(src: &Path, rows: &[Vec<f64>]) -> Option<Vec<f64>> {
    run_c_lines(src, rows, "%.17g").map(|l| l.iter().map(|l| l.parse().unwrap()).collect())
}

/// Checks that the exported Rust compiles as a library (where rustc is on the path).
pub fn compile_rust(src: &Path) {
    let rustc = Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()))
        .args(["--edition", "2021", "--crate-type", "lib", "-o", s(&src.with_extension("rlib")), s(src)])
        .output();
    match rustc {
        Ok(o) => assert!(o.status.success(), "the exported Rust does not compile: {}", text(&o.stderr)),
        Err(_) => eprintln!("skipped: rustc is not on the path"),
    }
}

/// Evaluates the report's sympy text at `rows` (values of the symbols `names`) with sympy,
/// given render's prelude.
pub fn run_sympy(sympy: &str, names: &[&str], rows: &[Vec<f64>]) -> Option<Vec<f64>> {
    let has = Command::new("python3").args(["-c", "import sympy"]).output().is_ok_and(|o| o.status.success());
    if !has {
        eprintln!("skipped: python3 with sympy is not installed");
        return None;
    }
    let pts: Vec<String> = rows.iter().map(|r| tuple(r)).collect();
    let script = format!(
        "import sympy\nenv = {{'sympy': sympy}}\nexec({:?}, env)\ne = sympy.sympify({sympy:?}, locals=env)\n\
         syms = sympy.symbols({:?})\nfor r in [{}]:\n    print(float(e.subs(dict(zip(syms, r)))))\n",
        grove::program::render::SYMPY_PRELUDE,
        names.join(" ") + " ",
        pts.join(", ")
    );
    let out = Command::new("python3").args(["-c", &script]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    Some(text(&out.stdout).lines().map(|l| l.parse().unwrap()).collect())
}

/// `a` and `b` agree to float rounding (the exports sum each slot's terms in f32 in their own
/// order; sympy rounds the weights to f32 text).
pub fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-4 * a.abs().max(b.abs()) + 1e-4
}
