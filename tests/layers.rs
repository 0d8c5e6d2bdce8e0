//! Layering (shared/DESIGN.md, "Layers"): the command line runs a task, a task runs the engine,
//! never the other way round. So no file under `src/evolve/` (the engine), `src/backend/` (the
//! backends and kernels) or `src/report/` (progress, reports, plots) may name a task: what they
//! share with one lives below them (`program::fitness`, `backend::cpu::control::SavedPolicy`). Each
//! offending line is named with its file and line number; comments are not code and may.

use std::path::{Path, PathBuf};

/// The directories under `src/` that must not reach up into `src/task/`.
const BELOW_THE_TASKS: [&str; 3] = ["evolve", "backend", "report"];

/// Every `.rs` file under `dir`, recursively, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("reading {}: {e}", d.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|x| x == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// `text` with its comments (`//…`, nested `/* … */`, doc comments included) blanked out,
/// newlines kept so line numbers stay. String and character literals are kept as code, but a
/// `//` or `/*` inside one does not start a comment.
fn strip_comments(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    // Copies c[from..to] to the output; returns where the copy ended.
    let copy = |out: &mut String, from: usize, to: usize| {
        let to = to.min(c.len());
        out.extend(&c[from..to]);
        to
    };
    while i < c.len() {
        let at = |k: usize| c.get(i + k).copied().unwrap_or('\0');
        if at(0) == '/' && at(1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if at(0) == '/' && at(1) == '*' {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if c[i] == '\n' {
                        out.push('\n');
                    }
                    i += 1;
                }
            }
        } else if at(0) == '"' {
            // A string: up to the closing quote not escaped by a backslash.
            let mut j = i + 1;
            while j < c.len() && c[j] != '"' {
                j += if c[j] == '\\' { 2 } else { 1 };
            }
            i = copy(&mut out, i, j + 1);
        } else if at(0) == 'r' && (at(1) == '"' || at(1) == '#') && (i == 0 || !(c[i - 1].is_alphanumeric() || c[i - 1] == '_')) {
            // A raw string r#"…"#: up to a quote followed by as many hashes.
            let hashes = (1..).take_while(|&k| at(k) == '#').count();
            if at(1 + hashes) != '"' {
                i = copy(&mut out, i, i + 1);
                continue;
            }
            let close: String = std::iter::once('"').chain(std::iter::repeat_n('#', hashes)).collect();
            let body_from = i + 2 + hashes;
            let rest: String = c[body_from..].iter().collect();
            let end = rest.find(&close).map_or(c.len(), |b| body_from + rest[..b].chars().count() + close.chars().count());
            i = copy(&mut out, i, end);
        } else if at(0) == '\'' && (at(2) == '\'' || at(1) == '\\') {
            // A character literal ('"', '\'', '\n'); a lifetime ('a) is plain code.
            let mut j = i + 1;
            while j < c.len() && c[j] != '\'' {
                j += if c[j] == '\\' { 2 } else { 1 };
            }
            i = copy(&mut out, i, j + 1);
        } else {
            i = copy(&mut out, i, i + 1);
        }
    }
    out
}

/// Lines (1-based number, text) of `text` whose code names a task: `crate::task`,
/// `grove::task`, or a bare `task::` path segment (as in `use crate::{task::…}`).
fn task_references(text: &str) -> Vec<(usize, String)> {
    let code = strip_comments(text);
    let original: Vec<&str> = text.lines().collect();
    code.lines()
        .enumerate()
        .filter(|(_, line)| {
            line.contains("crate::task")
                || line.contains("grove::task")
                || line.match_indices("task::").any(|(k, _)| {
                    k == 0 || !line[..k].chars().next_back().is_some_and(|p| p.is_alphanumeric() || p == '_')
                })
        })
        .map(|(k, _)| (k + 1, original.get(k).unwrap_or(&"").trim().to_string()))
        .collect()
}

#[test]
fn engine_backends_and_reports_never_import_a_task() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut offences = Vec::new();
    for dir in BELOW_THE_TASKS {
        let files = rust_files(&src.join(dir));
        assert!(!files.is_empty(), "no .rs files under src/{dir}: the walk is broken");
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
            let shown = file.strip_prefix(env!("CARGO_MANIFEST_DIR")).unwrap_or(&file).display().to_string();
            for (line, code) in task_references(&text) {
                offences.push(format!("{shown}:{line}: {code}"));
            }
        }
    }
    assert!(
        offences.is_empty(),
        "src/evolve, src/backend and src/report must not import src/task (a layer above them); move what \
         they need below the engine (e.g. into src/program/fitness.rs) and re-export it from the task:\n{}",
        offences.join("\n")
    );
}

#[test]
fn the_scan_sees_code_and_skips_comments_and_literals() {
    let text = "//! crate::task in a file comment\n\
                use crate::program::fitness::Metric; // not crate::task\n\
                use crate::task::regression::Regression;\n\
                /* crate::task\n   still a comment: grove::task */ let s = \"http://x\"; use grove::task::run;\n\
                let q = '\"'; let r = r#\"// \"#; use crate::{data, task::control};\n\
                /// [`crate::task::model`] in a doc comment\n\
                let device_task = super::device_task::x();\n";
    let found: Vec<usize> = task_references(text).into_iter().map(|(line, _)| line).collect();
    assert_eq!(found, vec![3, 5, 6]);
}

/// The primitives under the engine: they may use each other, never the engine, a backend or a
/// task (`src/program/ops.rs` once read a backend's kernel override; the backend now passes it in).
const PRIMITIVES: [&str; 7] = ["program", "grammar", "genome", "data", "sim", "select.rs", "rng.rs"];

#[test]
fn primitives_never_import_the_engine_a_backend_or_a_task() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut offences = Vec::new();
    for name in PRIMITIVES {
        let path = src.join(name);
        let files = if path.is_dir() { rust_files(&path) } else { vec![path] };
        assert!(files.iter().all(|f| f.exists()) && !files.is_empty(), "src/{name} is missing: the walk is broken");
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
            let shown = file.strip_prefix(env!("CARGO_MANIFEST_DIR")).unwrap_or(&file).display().to_string();
            let original: Vec<&str> = text.lines().collect();
            for (k, line) in strip_comments(&text).lines().enumerate() {
                if ["crate::evolve", "crate::backend", "crate::task"].iter().any(|up| line.contains(up)) {
                    offences.push(format!("{shown}:{}: {}", k + 1, original.get(k).unwrap_or(&"").trim()));
                }
            }
        }
    }
    assert!(offences.is_empty(), "the primitives must not reach up a layer; pass what they need in:\n{}", offences.join("\n"));
}
