//! The shape of the house (shared/DESIGN.md, "Layers"; docs/ARCHITECTURE.md, "Folders"): the
//! command line runs a task, a task runs the engine, the engine drives a backend, a backend uses
//! the primitives, and never the other way round. Every top-level module of `src/` has a layer
//! ([`LAYERS`]); a module may name modules of its own layer or below, never above, and the
//! modules as a graph have no loop (so the primitives, all of one layer, use each other in one
//! direction only). Nothing below the command line, and nothing in the Python package, names
//! `cli`. References are read from code with comments blanked, in every form: `crate::m`,
//! `grove::m`, and the members of grouped `use crate::{…}` lists. Each offence is named with its
//! file and line. Below the modules: nothing of the primitives names CUDA, and the files of
//! each backend folder import each other in one direction.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Each top-level module of `src/` and its layer: the crate's roots (`lib.rs` declares the modules,
/// `main.rs` is the binary: 6), the command line (5), the tasks and the tools
/// they share with it (4), the engine and what it reports (3), the backends (2), the primitives
/// (1). A new top-level module must be placed here (the walk fails on an unknown one).
const LAYERS: [(&str, u8); 16] = [
    ("cli", 5),
    ("task", 4),
    ("bench", 4),
    ("evolve", 3),
    ("report", 3),
    ("backend", 2),
    ("program", 1),
    ("grammar", 1),
    ("genome", 1),
    ("data", 1),
    ("sim", 1),
    ("select", 1),
    ("rng", 1),
    ("input", 1),
    ("lib", 6),
    ("main", 6),
];

/// The layer of top-level module `m`, or `None` for a name that is not a module of ours.
fn layer(m: &str) -> Option<u8> {
    LAYERS.iter().find(|(name, _)| *name == m).map(|&(_, l)| l)
}

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

/// Blanks string and character literals (keeping newlines), for a text whose comments are
/// already blanked, so that a path inside a literal is not read as a reference.
fn blank_literals(code: &str) -> String {
    let c: Vec<char> = code.chars().collect();
    let mut out = String::with_capacity(code.len());
    let mut i = 0;
    while i < c.len() {
        let quote = c[i] == '"' || (c[i] == '\'' && (c.get(i + 2) == Some(&'\'') || c.get(i + 1) == Some(&'\\')));
        let raw = c[i] == 'r'
            && matches!(c.get(i + 1), Some('"') | Some('#'))
            && (i == 0 || !(c[i - 1].is_alphanumeric() || c[i - 1] == '_'));
        if raw {
            let hashes = c[i + 1..].iter().take_while(|&&h| h == '#').count();
            if c.get(i + 1 + hashes) == Some(&'"') {
                let mut j = i + 2 + hashes;
                while j < c.len() && !(c[j] == '"' && c[j + 1..].iter().take(hashes).filter(|&&h| h == '#').count() == hashes) {
                    out.push(if c[j] == '\n' { '\n' } else { ' ' });
                    j += 1;
                }
                out.push_str("r\"\"");
                i = (j + 1 + hashes).min(c.len());
                continue;
            }
        }
        if quote {
            let q = c[i];
            let mut j = i + 1;
            while j < c.len() && c[j] != q {
                let step = if c[j] == '\\' { 2 } else { 1 };
                // An escaped newline (a string continued on the next line) is a line too.
                out.extend(c[j..(j + step).min(c.len())].iter().filter(|&&ch| ch == '\n'));
                j += step;
            }
            out.push(q);
            out.push(q);
            i = (j + 1).min(c.len());
            continue;
        }
        out.push(c[i]);
        i += 1;
    }
    out
}

/// The top-level modules a file's code names, each with the 1-based line of the reference:
/// `crate::m` and `grove::m` paths, and every member of a grouped `use crate::{a::b, c, …}` list
/// (nested groups and lists over several lines included). `crate::{self, …}` names nothing.
fn references(text: &str) -> Vec<(usize, String)> {
    references_from(text, &["crate::", "grove::"])
}

/// [`references`] with other roots: the first segment after each of `roots` (`super::` gives the
/// siblings a file of a folder names).
fn references_from(text: &str, roots: &[&str]) -> Vec<(usize, String)> {
    let code = blank_literals(&strip_comments(text));
    let c: Vec<char> = code.chars().collect();
    let line_of = |k: usize| 1 + c[..k].iter().filter(|&&ch| ch == '\n').count();
    let ident = |k: usize| {
        let end = (k..c.len()).find(|&j| !(c[j].is_alphanumeric() || c[j] == '_')).unwrap_or(c.len());
        (c[k..end].iter().collect::<String>(), end)
    };
    let mut found = Vec::new();
    for root in roots {
        let r: Vec<char> = root.chars().collect();
        let mut k = 0;
        while k + r.len() <= c.len() {
            let starts = c[k..k + r.len()] == r[..] && (k == 0 || !(c[k - 1].is_alphanumeric() || c[k - 1] == '_'));
            if !starts {
                k += 1;
                continue;
            }
            let mut j = k + r.len();
            while j < c.len() && c[j].is_whitespace() {
                j += 1;
            }
            if j < c.len() && c[j] == '{' {
                // A group: the first segment of each member at depth 1.
                let mut depth = 0;
                let mut expect = true;
                while j < c.len() {
                    match c[j] {
                        '{' => {
                            depth += 1;
                            expect = depth == 1;
                            j += 1;
                        }
                        '}' => {
                            depth -= 1;
                            j += 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        ',' => {
                            expect = depth == 1;
                            j += 1;
                        }
                        ch if expect && (ch.is_alphabetic() || ch == '_') => {
                            let (name, end) = ident(j);
                            if name != "self" {
                                found.push((line_of(j), name));
                            }
                            expect = false;
                            j = end;
                        }
                        _ => j += 1,
                    }
                }
                k = j;
            } else {
                let (name, end) = ident(j);
                if !name.is_empty() {
                    found.push((line_of(k), name));
                }
                k = end.max(k + 1);
            }
        }
    }
    found.sort();
    found
}

/// The top-level module a file under `src/` belongs to (`src/task/run.rs` → `task`).
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel.components().next().unwrap().as_os_str().to_string_lossy().to_string();
    first.trim_end_matches(".rs").to_string()
}

/// One reference between top-level modules: from, to, and where (`src/x.rs:12: code`).
struct Edge {
    from: String,
    to: String,
    at: String,
}

/// Every reference in `src/` from one top-level module to another.
fn edges() -> Vec<Edge> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = root.join("src");
    let files = rust_files(&src);
    assert!(files.len() > 20, "only {} files under src/: the walk is broken", files.len());
    let mut out = Vec::new();
    for file in files {
        let from = module_of(&src, &file);
        assert!(layer(&from).is_some(), "src/{from} has no layer: place it in LAYERS in tests/layers.rs");
        let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
        let lines: Vec<&str> = text.lines().collect();
        let shown = file.strip_prefix(root).unwrap().display().to_string();
        for (line, to) in references(&text) {
            if to != from && layer(&to).is_some() {
                let code = lines.get(line - 1).unwrap_or(&"").trim();
                out.push(Edge { from: from.clone(), to, at: format!("{shown}:{line}: {code}") });
            }
        }
    }
    out
}

#[test]
fn every_module_names_only_its_own_layer_or_below() {
    let offences: Vec<String> = edges()
        .into_iter()
        .filter(|e| layer(&e.to) > layer(&e.from))
        .map(|e| format!("{} (layer {:?}) names {} (layer {:?}): {}", e.from, layer(&e.from), e.to, layer(&e.to), e.at))
        .collect();
    assert!(
        offences.is_empty(),
        "a module reaches up a layer (cli 5 > task, bench 4 > evolve, report 3 > backend 2 > primitives 1); \
         move what it needs down, or pass it in:\n{}",
        offences.join("\n")
    );
}

#[test]
fn the_modules_have_no_loop() {
    let all = edges();
    let mut graph: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for e in &all {
        graph.entry(&e.from).or_default().insert(&e.to);
    }
    // Depth-first search for a back edge; the loop found is printed with one place per step.
    fn visit<'a>(
        m: &'a str,
        graph: &BTreeMap<&'a str, BTreeSet<&'a str>>,
        state: &mut BTreeMap<&'a str, u8>,
        path: &mut Vec<&'a str>,
    ) -> Option<Vec<&'a str>> {
        state.insert(m, 1);
        path.push(m);
        for &n in graph.get(m).into_iter().flatten() {
            match state.get(n).copied().unwrap_or(0) {
                1 => {
                    let from = path.iter().position(|&p| p == n).unwrap();
                    let mut cycle = path[from..].to_vec();
                    cycle.push(n);
                    return Some(cycle);
                }
                0 => {
                    if let Some(c) = visit(n, graph, state, path) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        path.pop();
        state.insert(m, 2);
        None
    }
    let mut state = BTreeMap::new();
    for &m in graph.keys() {
        if state.get(m).copied().unwrap_or(0) == 0 {
            if let Some(cycle) = visit(m, &graph, &mut state, &mut Vec::new()) {
                let steps: Vec<String> = cycle
                    .windows(2)
                    .map(|w| {
                        let first = all.iter().find(|e| e.from == w[0] && e.to == w[1]).unwrap();
                        format!("  {} -> {}: {}", w[0], w[1], first.at)
                    })
                    .collect();
                panic!("the modules form a loop {}; break one step:\n{}", cycle.join(" -> "), steps.join("\n"));
            }
        }
    }
}

#[test]
fn nothing_but_main_names_the_command_line() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut offences: Vec<String> =
        edges().into_iter().filter(|e| e.to == "cli" && e.from != "main").map(|e| e.at).collect();
    let python = root.join("python/src");
    for file in rust_files(&python) {
        let text = std::fs::read_to_string(&file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (line, to) in references(&text) {
            if to == "cli" {
                let shown = file.strip_prefix(root).unwrap().display();
                offences.push(format!("{shown}:{line}: {}", lines.get(line - 1).unwrap_or(&"").trim()));
            }
        }
    }
    assert!(
        offences.is_empty(),
        "only src/main.rs runs the command line; call the task the command calls instead:\n{}",
        offences.join("\n")
    );
}

#[test]
fn the_scan_sees_code_in_every_form_and_skips_comments_and_literals() {
    let text = "//! crate::task in a file comment\n\
                use crate::program::fitness::Metric; // not crate::task\n\
                use crate::task::regression::Regression;\n\
                /* crate::cli\n   still a comment: grove::cli */ let s = \"crate::bench\"; use grove::evolve::run;\n\
                let q = '\"'; let r = r#\"crate::sim // \"#; use crate::{data, task::control};\n\
                use crate::{\n    self,\n    backend::{cuda, Backend},\n    genome::{map::Mapper, vary},\n};\n\
                /// [`crate::report::plot`] in a doc comment\n\
                let device_task = my_crate::device_task::x();\n";
    let found: Vec<(usize, String)> = references(text);
    let expect: Vec<(usize, String)> = [(2, "program"), (3, "task"), (5, "evolve"), (6, "data"), (6, "task"), (9, "backend"), (10, "genome")]
        .iter()
        .map(|&(l, m)| (l, m.to_string()))
        .collect();
    assert_eq!(found, expect);
}

#[test]
fn every_layer_is_placed_and_every_module_exists() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for (name, _) in LAYERS {
        assert!(
            src.join(name).is_dir() || src.join(format!("{name}.rs")).is_file(),
            "LAYERS names src/{name}, which is not there: the table is stale"
        );
    }
}

/// The levels inside `src/task/` (docs/ARCHITECTURE.md, "The task layer"): the base every task
/// stands on (1), the tasks (2: siblings, none naming another), the runner on top (3), which
/// alone knows the experiment of a run, checkpoints and outputs.
const TASK_LEVELS: [(&str, u8); 5] = [("base", 1), ("regression", 2), ("classify", 2), ("control", 2), ("runner", 3)];

/// The level of `task::m`, or `None` for a name that is not one of the task layer's folders.
fn task_level(m: &str) -> Option<u8> {
    TASK_LEVELS.iter().find(|(name, _)| *name == m).map(|&(_, l)| l)
}

/// The task-layer folders a file names, each with the 1-based line of the reference:
/// `crate::task::X` and `grove::task::X` paths (and the members of a grouped `task::{…}` list),
/// and `super::` paths resolved from where the file sits (`module` is the file's module path
/// below `task`, e.g. `["regression", "search"]`; a `mod.rs` is its folder's module).
fn task_references(text: &str, module: &[String]) -> Vec<(usize, String)> {
    let code = blank_literals(&strip_comments(text));
    let c: Vec<char> = code.chars().collect();
    let line_of = |k: usize| 1 + c[..k].iter().filter(|&&ch| ch == '\n').count();
    let ident_at = |k: usize| -> String { c[k..].iter().take_while(|ch| ch.is_alphanumeric() || **ch == '_').collect() };
    let boundary = |k: usize| k == 0 || !(c[k - 1].is_alphanumeric() || c[k - 1] == '_' || c[k - 1] == ':');
    let mut found = Vec::new();
    let mut k = 0;
    while k < c.len() {
        let rest: String = c[k..(k + 14).min(c.len())].iter().collect();
        if boundary(k) && (rest.starts_with("crate::task::") || rest.starts_with("grove::task::")) {
            let mut j = k + "crate::task::".len();
            if c.get(j) == Some(&'{') {
                // A group: the first segment of each member.
                let end = (j..c.len()).find(|&e| c[e] == '}').unwrap_or(c.len());
                let group: String = c[j + 1..end].iter().collect();
                for member in group.split(',') {
                    let name: String = member.trim().chars().take_while(|ch| ch.is_alphanumeric() || *ch == '_').collect();
                    if !name.is_empty() {
                        found.push((line_of(j), name));
                    }
                }
                j = end;
            } else {
                found.push((line_of(k), ident_at(j)));
            }
            k = j.max(k + 1);
            continue;
        }
        if boundary(k) && rest.starts_with("super::") {
            // Climb one module per `super::`, then the next segment names a module of the
            // level reached.
            let mut depth = 0;
            let mut j = k;
            while c[j..].iter().take(7).collect::<String>() == "super::" {
                depth += 1;
                j += 7;
            }
            let mut path = module.to_vec();
            for _ in 0..depth {
                path.pop();
            }
            let next = ident_at(j);
            let target = if path.is_empty() { next } else { path[0].clone() };
            found.push((line_of(k), target));
            k = j.max(k + 1);
            continue;
        }
        k += 1;
    }
    found
}

/// Every reference in `src/task/` from one of its folders to another: from, to, where.
fn task_edges() -> Vec<Edge> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let task = root.join("src/task");
    let mut out = Vec::new();
    for file in rust_files(&task) {
        let rel = file.strip_prefix(&task).unwrap();
        let mut module: Vec<String> = rel.components().map(|p| p.as_os_str().to_string_lossy().trim_end_matches(".rs").to_string()).collect();
        if module.last().is_some_and(|m| m == "mod") {
            module.pop();
        }
        let Some(from) = module.first().cloned() else { continue };
        if task_level(&from).is_none() {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let shown = file.strip_prefix(root).unwrap().display().to_string();
        for (line, to) in task_references(&text, &module) {
            if to != from && task_level(&to).is_some() {
                let code = lines.get(line - 1).unwrap_or(&"").trim();
                out.push(Edge { from: from.clone(), to, at: format!("{shown}:{line}: {code}") });
            }
        }
    }
    out
}

/// `code` with every `#[cfg(test)] mod NAME { … }` block blanked (newlines kept): a unit test may
/// use what its file's siblings offer without making an import of the file.
fn without_test_modules(code: &str) -> String {
    let mut out = code.to_string();
    let mut from = 0;
    while let Some(at) = out[from..].find("#[cfg(test)]").map(|i| from + i) {
        let rest = out[at + "#[cfg(test)]".len()..].trim_start();
        let Some(open) = rest.starts_with("mod ").then(|| out[at..].find('{')).flatten().map(|i| at + i) else {
            from = at + 1;
            continue;
        };
        let mut depth = 0;
        let mut end = out.len();
        for (i, ch) in out[open..].char_indices() {
            depth += (ch == '{') as i32 - (ch == '}') as i32;
            if depth == 0 {
                end = open + i + 1;
                break;
            }
        }
        let blank: String = out[at..end].chars().map(|ch| if ch == '\n' { '\n' } else { ' ' }).collect();
        out.replace_range(at..end, &blank);
        from = end;
    }
    out
}

/// Names that belong to the CUDA backend: its crate and module, and the types they define.
fn names_cuda(code: &str) -> Option<&'static str> {
    let words = code.split(|ch: char| !(ch.is_alphanumeric() || ch == '_' || ch == ':'));
    for word in words {
        let segments: Vec<&str> = word.split("::").collect();
        if segments.contains(&"cudarc") {
            return Some("cudarc");
        }
        if segments.contains(&"cuda") && segments.len() > 1 {
            return Some("backend::cuda");
        }
        if segments.iter().any(|s| s.starts_with("Cuda") && s.len() > 4) {
            return Some("a Cuda type");
        }
    }
    None
}

#[test]
fn nothing_below_the_backends_names_cuda() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = root.join("src");
    let mut offences = Vec::new();
    for file in rust_files(&src) {
        if layer(&module_of(&src, &file)) != Some(1) {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        let code = blank_literals(&strip_comments(&text));
        for (n, (line, shown)) in code.lines().zip(text.lines()).enumerate() {
            if let Some(what) = names_cuda(line) {
                offences.push(format!("{}:{}: names {what}: {}", file.strip_prefix(root).unwrap().display(), n + 1, shown.trim()));
            }
        }
    }
    assert!(
        offences.is_empty(),
        "the primitives (layer 1) know nothing of devices: what a kernel needs of them is passed in, and CUDA types stay in backend::cuda:\n{}",
        offences.join("\n")
    );
}

#[test]
fn the_cuda_names_are_seen_and_others_are_not() {
    for line in ["use cudarc::driver::CudaSlice;", "fn f(e: &crate::backend::cuda::CudaEngine)", "let e: CudaEngine;", "use crate::backend::{cuda::x, y};"] {
        assert!(names_cuda(line).is_some(), "{line}");
    }
    for line in ["let s = ops::cuda_source();", "fn cuda(x: u32)", "use crate::backend::cpu::eval;", "let cudas = 1;"] {
        assert!(names_cuda(line).is_none(), "{line}");
    }
}

/// Edges between the files of one folder of `src/` (`backend/cuda`): a file's `super::NAME`
/// and `crate::backend::cuda::NAME` references to a sibling file, its unit tests left out. A
/// file in a subfolder counts as the file of that name (`cpu/eval/bench.rs` is `eval`); the
/// folder's `mod.rs`, which declares the files, is left out.
fn sibling_edges(folder: &str) -> Vec<Edge> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = root.join("src").join(folder);
    let path = format!("crate::{}::", folder.replace('/', "::"));
    let siblings: BTreeSet<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.unwrap().path().file_stem().map(|s| s.to_string_lossy().to_string()))
        .filter(|s| s != "mod")
        .collect();
    let mut out = Vec::new();
    for file in rust_files(&dir) {
        let rel = file.strip_prefix(&dir).unwrap();
        let from = module_of(&dir, &file);
        if from == "mod" {
            continue;
        }
        // `super::` in a subfolder's file names its parent file, not a sibling.
        let roots: Vec<&str> = if rel.components().count() == 1 { vec!["super::", path.as_str()] } else { vec![path.as_str()] };
        let text = std::fs::read_to_string(&file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let code = without_test_modules(&blank_literals(&strip_comments(&text)));
        for (line, to) in references_from(&code, &roots) {
            if to != from && siblings.contains(&to) {
                let at = format!("{}:{line}: {}", file.strip_prefix(root).unwrap().display(), lines.get(line - 1).unwrap_or(&"").trim());
                out.push(Edge { from: from.clone(), to, at });
            }
        }
    }
    out
}

#[test]
fn the_task_layer_runs_one_way_base_tasks_runner() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/task");
    for entry in std::fs::read_dir(&root).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        assert!(
            name == "mod" || task_level(&name).is_some(),
            "src/task/{name} has no level: place it in TASK_LEVELS in tests/layers.rs (base, a task, or the runner)"
        );
    }
    let offences: Vec<String> = task_edges()
        .into_iter()
        .filter(|e| {
            let (a, b) = (task_level(&e.from), task_level(&e.to));
            // Up a level, or across to a sibling task.
            b > a || (a == Some(2) && b == Some(2))
        })
        .map(|e| format!("task::{} names task::{}: {}", e.from, e.to, e.at))
        .collect();
    assert!(
        offences.is_empty(),
        "the task layer runs one way (base < regression, classify, control < runner) and no task names another; \
         move what both need into task::base, or let the runner pass it in:\n{}",
        offences.join("\n")
    );
}

#[test]
fn the_task_scan_resolves_super_and_groups() {
    let text = "use super::base::options::RunOptions;\n\
                use super::super::runner::x;\n\
                use crate::task::{base::model, classify::fit};\n\
                // crate::task::runner in a comment\n\
                let s = \"crate::task::control\"; use grove::task::control::fit;\n\
                fn f() { super::fitness::x(); }\n";
    let at_mod: Vec<(usize, String)> = task_references(text, &["regression".to_string()]);
    let expect = [(1, "base"), (2, "runner"), (3, "base"), (3, "classify"), (5, "control"), (6, "fitness")];
    assert_eq!(at_mod, expect.iter().map(|&(l, m)| (l, m.to_string())).collect::<Vec<_>>());
    // From a file inside the folder, one `super::` stays in it.
    let inner = task_references("use super::fitness::x;\nuse super::super::classify::y;\n", &["regression".into(), "search".into()]);
    assert_eq!(inner, vec![(1, "regression".to_string()), (2, "classify".to_string())]);
}

/// The first loop among `edges`, one step per line with the place of the reference, if any.
fn first_loop(edges: &[Edge]) -> Option<String> {
    let mut graph: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for e in edges {
        graph.entry(&e.from).or_default().insert(&e.to);
    }
    // Removes files that name no file left until none is left (no loop) or each left names one.
    let mut left: BTreeSet<&str> = graph.keys().copied().chain(graph.values().flatten().copied()).collect();
    loop {
        let leaf = left.iter().copied().find(|m| graph.get(m).is_none_or(|to| to.iter().all(|t| !left.contains(t))));
        match leaf {
            Some(m) => {
                left.remove(m);
            }
            None => break,
        }
    }
    let start = *left.iter().next()?;
    let (mut path, mut at) = (vec![start], start);
    while !path[..path.len() - 1].contains(&at) || path.len() == 1 {
        at = graph[at].iter().copied().find(|t| left.contains(t)).unwrap();
        path.push(at);
    }
    let from = path.iter().position(|&p| p == at).unwrap();
    let steps: Vec<String> = path[from..]
        .windows(2)
        .map(|w| format!("  {} -> {}: {}", w[0], w[1], edges.iter().find(|e| e.from == w[0] && e.to == w[1]).unwrap().at))
        .collect();
    Some(format!("{}\n{}", path[from..].join(" -> "), steps.join("\n")))
}

#[test]
fn the_files_of_each_backend_import_each_other_in_one_direction() {
    for folder in ["backend/cuda", "backend/cpu"] {
        let edges = sibling_edges(folder);
        assert!(!edges.is_empty(), "src/{folder}: no references between its files found: the scan is broken");
        if let Some(cycle) = first_loop(&edges) {
            panic!(
                "the files of src/{folder} form a loop {cycle}\nmove what both need into a file both import (as params.rs holds the structs the kernels and the layout table share)"
            );
        }
    }
}

#[test]
fn no_task_names_cuda() {
    // The tasks and their base ask the backend (`Backend::is_gpu`, `regression_task`, …); only
    // the runner's tools, which replay and map on the device directly, may name the CUDA engine.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut offences = Vec::new();
    for folder in ["base", "regression", "classify", "control"] {
        for file in rust_files(&root.join("src/task").join(folder)) {
            let text = std::fs::read_to_string(&file).unwrap();
            let code = without_test_modules(&blank_literals(&strip_comments(&text)));
            for (n, (line, shown)) in code.lines().zip(text.lines()).enumerate() {
                let what = names_cuda(line).or_else(|| line.contains("Backend::Cuda").then_some("Backend::Cuda"));
                if let Some(what) = what {
                    offences.push(format!("{}:{}: names {what}: {}", file.strip_prefix(root).unwrap().display(), n + 1, shown.trim()));
                }
            }
        }
    }
    assert!(
        offences.is_empty(),
        "a task names no CUDA type: ask the backend (Backend::is_gpu, regression_task, classification_task, control_task, shard):\n{}",
        offences.join("\n")
    );
}
