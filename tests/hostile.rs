//! Hostile input to every reader and every number (issue 59): binary and endless files, env
//! files whose numbers mean nothing physical, counts past their meaning, nesting that would
//! overflow a recursive parser or writer, and values too long to echo. Each gives one clear
//! line and a non-zero exit, or is handled correctly, in bounded time and memory.

mod support;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use support::{assert_ok, assert_one_line_error, dir, grove_cpu, grove_run, s, text};

/// A file of `n` NUL bytes and one of pseudo-random bytes with a NUL near the start, made by
/// the test.
fn binary_files(d: &Path) -> [PathBuf; 2] {
    let zeros = d.join("zeros.bin");
    std::fs::write(&zeros, vec![0u8; 1 << 20]).unwrap();
    let noise = d.join("noise.bin");
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let bytes: Vec<u8> = (0..1 << 20)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if i == 100 { 0 } else { (x >> 24) as u8 | 1 }
        })
        .collect();
    std::fs::write(&noise, bytes).unwrap();
    [zeros, noise]
}

// `check`, `predict`, `export`, `run`, `run --resume`, `plot`, `render --policy`, `rollout
// --env` and `--actions` read /dev/zero or /dev/urandom until allocation failed.
#[test]
fn binary_and_endless_input_stops_every_reader_at_once() {
    let d = dir("binary");
    let out = d.join("out");
    for bin in binary_files(&d).iter().map(|p| s(p).to_string()).chain(["/dev/zero".to_string()]) {
        let b = bin.as_str();
        let cases: Vec<(Vec<&str>, &str)> = vec![
            (vec!["check", b], "grammar"),
            (vec!["evolve", "--grammar", b, "--data", "builtin:pagie1:36"], "grammar"),
            (vec!["predict", "--model", b, "--data", "data/classification/iris.csv"], "the report"),
            (vec!["export", "--model", b, "--lang", "c"], "the report"),
            (vec!["run", b], "the experiment file"),
            (vec!["run", "--resume", b], "the checkpoint"),
            (vec!["plot", b, "--out", s(&out)], "the report"),
            (vec!["render", "--policy", b, "--out", "x.gif"], "the report"),
            (vec!["rollout", "--env", b], "the environment file"),
            (vec!["rollout", "--env", "swimmer", "--actions", b], "the action file"),
        ];
        for (args, what) in cases {
            let start = Instant::now();
            let o = grove_cpu(&args);
            assert!(start.elapsed() < Duration::from_secs(10), "{args:?} took {:?}", start.elapsed());
            let e = text(&o.stderr);
            assert_eq!(o.status.code(), Some(1), "{args:?}: {e}");
            assert_eq!(e.trim().lines().count(), 1, "{args:?}: {e}");
            assert!(e.contains(what) && e.contains("binary data"), "{args:?}: {e}");
        }
    }
}

/// swimmer.ron with `from` replaced by `to` (once), written to `d/name`.
fn swimmer_with(d: &Path, name: &str, from: &str, to: &str) -> PathBuf {
    let ron = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/envs/swimmer.ron")).unwrap();
    assert!(ron.contains(from), "{from}");
    let p = d.join(name);
    std::fs::write(&p, ron.replacen(from, to, 1)).unwrap();
    p
}

// `frame_skip: 4000000000` hung rollout, control and replays; NaN gear, NaN reset noise, a
// timestep of 1000 and negative viscosity gave NaN returns with exit 0; 1000 bodies took over
// 20 s for 10 steps.
#[test]
fn env_file_numbers_have_the_bounds_their_meaning_allows() {
    let d = dir("env_bounds");
    let cases = [
        ("frame_skip: 4,", "frame_skip: 4000000000,", "frame_skip is 4000000000: 1 to 1000"),
        ("frame_skip: 4,", "frame_skip: 200,", "timestep × frame_skip is 2 s: at most 1 s"),
        ("timestep: 0.01,", "timestep: 1000,", "timestep is 1000 s: at most 0.1 s"),
        ("timestep: 0.01,", "timestep: -0.01,", "timestep is -0.01: it must be more than 0"),
        ("viscosity: 0.1", "viscosity: -0.1", "fluid viscosity is -0.1: it must be at least 0"),
        ("gear: 150.0", "gear: NaN", "actuator on `rot2`: gear is NaN"),
        ("qpos: Uniform(0.1)", "qpos: Uniform(NaN)", "reset qpos noise is NaN"),
        ("mass: 35.604716740684324", "mass: 0.0", "body `torso`: mass is 0: it must be more than 0"),
        ("armature: 0.1", "armature: 1e300", "armature is 1e300: give a finite number of magnitude at most 1e9"),
        ("solver_iterations: 100,", "solver_iterations: 4000000000,", "solver_iterations is 4000000000: 1 to 10000"),
    ];
    for (i, (from, to, needle)) in cases.iter().enumerate() {
        let p = swimmer_with(&d, &format!("{i}.ron"), from, to);
        for args in [vec!["rollout", "--env", s(&p), "--steps", "2"], vec!["control", "--env", s(&p), "--gens", "1", "--pop", "4"]] {
            assert_one_line_error(&grove_cpu(&args), &["swimmer: ", needle]);
        }
    }
    // 1000 bodies: refused before the first step, not simulated slowly.
    let ron = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/envs/swimmer.ron")).unwrap();
    let start = ron.find("        (\n            name: \"back\"").unwrap();
    let end = start + ron[start..].find("\n        ),\n").unwrap() + "\n        ),\n".len();
    let body = &ron[start..end];
    let extra: String = (0..1000).map(|k| body.replace("\"back\"", &format!("\"b{k}\"")).replace("rot3", &format!("r{k}"))).collect();
    let p = d.join("many.ron");
    std::fs::write(&p, format!("{}{extra}{}", &ron[..end], &ron[end..])).unwrap();
    let t = Instant::now();
    assert_one_line_error(&grove_cpu(&["rollout", "--env", s(&p), "--steps", "10"]), &["1003 bodies: at most 32"]);
    assert!(t.elapsed() < Duration::from_secs(5));
}

// `--test-fraction -0.1` gave a clap parse message, `--threads 100000` had no bound,
// `--genome-capacity 100 --genome-length 65536` was silently raised, `--init-depth 100,200`
// grew without end, `check`/`map --n-vars 4000000000` aborted allocating 160 GB.
#[test]
fn command_line_numbers_are_checked_in_one_line() {
    let pagie = ["--data", "builtin:pagie1:36", "--gens", "1", "--pop", "8"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> { ["evolve"].iter().chain(extra).chain(&pagie).copied().collect() };
    let cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
        (with(&["--functions", "add", "--test-fraction", "-0.1"]), vec!["--test-fraction", "[0, 1)", "-0.1"]),
        (with(&["--functions", "add", "--threads", "100000"]), vec!["--threads must be 1 to 1024, got 100000"]),
        (with(&["--functions", "add", "--threads", "0"]), vec!["--threads must be 1 to 1024, got 0"]),
        (with(&["--grammar", "grammars/regression.bnf", "--genome-capacity", "100", "--genome-length", "65536"]), vec!["--genome-capacity", "at least 65536, got 100"]),
        (with(&["--grammar", "grammars/regression.bnf", "--init-depth", "100,200"]), vec!["--max-depth 17 (map.max_depth) is shallower", "--init-depth 100,200"]),
        (with(&["--functions", "add", "--parsimony", "-1"]), vec!["--parsimony"]),
        (vec!["classify", "--grammar", "grammars/classify.bnf", "--max-depth", "2", "--gens", "1"], vec!["--max-depth 2 (map.max_depth) is shallower", "--init-depth 3,8"]),
        (vec!["check", "grammars/regression.bnf", "--n-vars", "4000000000"], vec!["--n-vars must be 1 to 65536, got 4000000000"]),
        (vec!["check", "grammars/classify.bnf", "--n-outputs", "4000000000"], vec!["--n-outputs must be 1 to 255"]),
        (vec!["map", "-g", "grammars/regression.bnf", "--n-inputs", "4000000000"], vec!["--n-inputs must be 1 to 65536"]),
        (vec!["classify", "--test-fraction", "-0.5", "--gens", "1"], vec!["--test-fraction", "-0.5"]),
    ];
    for (args, needles) in &cases {
        assert_one_line_error(&grove_cpu(args), needles);
    }
    // A capacity not given makes room for a longer initial genome rather than refusing it.
    assert_ok(&grove_cpu(&with(&["--grammar", "grammars/regression.bnf", "--genome-length", "30000"])));
    // A deep ramp within --max-depth ends: growth stops past the genome's capacity.
    let t = Instant::now();
    assert_ok(&grove_cpu(&with(&["--grammar", "grammars/regression.bnf", "--init-depth", "100,200", "--max-depth", "300"])));
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
}

// 10,000 nested parentheses in a grammar or a `--define` overflowed the stack.
#[test]
fn deep_nesting_in_grammars_and_definitions_is_refused_in_one_line() {
    let d = dir("nesting");
    let deep = format!("<e> ::= {}x0{}\n", "(".repeat(10_000), ")".repeat(10_000));
    let g = d.join("deep.bnf");
    std::fs::write(&g, &deep).unwrap();
    let o = grove_cpu(&["evolve", "--grammar", s(&g), "--data", "builtin:pagie1:36"]);
    let e = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert_eq!(e.trim().lines().count(), 1, "{e}");
    assert!(e.contains("deep.bnf:1:") && e.contains("nest more than 256 deep"), "{e}");
    // `check` says the same and does not crash.
    let o = grove_cpu(&["check", s(&g)]);
    assert!(!text(&o.stderr).contains("overflow"), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("nest more than 256 deep"), "{}", text(&o.stderr));
    let define = format!("f(x) = {}x{}", "(".repeat(10_000), ")".repeat(10_000));
    let o = grove_cpu(&["evolve", "--define", &define, "--functions", "add,f", "--data", "builtin:pagie1:36"]);
    assert_one_line_error(&o, &["--define", "more than the 1024 a definition may have", "more characters)"]);
    assert!(text(&o.stderr).len() < 400, "{}", text(&o.stderr));
    let define = format!("f(x) = {}x{}", "(".repeat(100), ")".repeat(100));
    assert_one_line_error(&grove_cpu(&["evolve", "--define", &define, "--functions", "add,f", "--data", "builtin:pagie1:36"]), &["nests more than 64 deep"]);
}

// `export` of a 40,000-deep tree that `predict` accepts overflowed the stack.
#[test]
fn deep_trees_render_and_export_without_recursion() {
    use grove::program::{Node, Op};
    let mut nodes = vec![Node::func(Op::Sin); 40_000];
    nodes.push(Node { op: Op::Var, value: 0.0, out: 0 });
    let names = vec!["x".to_string()];
    // On a thread with a small stack: any recursion per level would overflow it.
    std::thread::Builder::new()
        .stack_size(256 << 10)
        .spawn(move || {
            let c = grove::program::export::expression(&nodes, &names, grove::program::export::Lang::C);
            assert!(c.starts_with("sinf(sinf(") && c.ends_with(&format!("(x{}", ")".repeat(40_000))) && c.matches('(').count() == 40_000, "{}", &c[..100]);
            let r = grove::program::render::render(&nodes, &names, grove::program::render::Style::Infix);
            assert!(r.starts_with("sin(sin(") && r.matches("sin").count() == 40_000);
        })
        .unwrap()
        .join()
        .unwrap();
    // Through the command line: a report whose model is that tree.
    let d = dir("deep_export");
    let rep = d.join("r.json");
    assert_ok(&grove_cpu(&["evolve", "--functions", "add,sin", "--data", "builtin:pagie1:36", "--gens", "1", "--pop", "8", "--report", s(&rep)]));
    let mut v = support::read_json(&rep);
    let mut deep: Vec<serde_json::Value> = vec![serde_json::json!(["sin", 0.0, 0]); 40_000];
    deep.push(serde_json::json!(["var", 0.0, 0]));
    v["model"]["nodes"] = deep.into();
    std::fs::write(&rep, serde_json::to_vec(&v).unwrap()).unwrap();
    let csv = d.join("x.csv");
    std::fs::write(&csv, "x0,x1\n1,2\n").unwrap();
    assert_ok(&grove_cpu(&["predict", "--model", s(&rep), "--data", s(&csv)]));
    for lang in ["c", "python"] {
        let o = grove_cpu(&["export", "--model", s(&rep), "--lang", lang]);
        assert_ok(&o);
        assert!(text(&o.stdout).matches("sin").count() >= 40_000);
    }
}

// One production of N alternatives parsed in quadratic time (80k terms past 30 s).
#[test]
fn a_production_of_many_alternatives_parses_in_linear_time() {
    for n in [20_000, 200_000] {
        let text = format!("<e> ::= {}\n", (0..n).map(|i| format!("x{}", i % 7)).collect::<Vec<_>>().join(" | "));
        let t = Instant::now();
        let g = grove::grammar::parse_str(&text, "wide.bnf", false).unwrap();
        assert_eq!(g.rules[0].productions.len(), n);
        assert!(t.elapsed() < Duration::from_secs(3), "{n} alternatives took {:?}", t.elapsed());
    }
    // A long left-associative chain in one production reads in linear time too.
    let chain = format!("<e> ::= {}\n", vec!["x0"; 20_000].join(" + "));
    let d = dir("wide");
    let g = d.join("chain.bnf");
    std::fs::write(&g, chain).unwrap();
    let t = Instant::now();
    let _ = grove_cpu(&["check", s(&g)]);
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
}

// A 100 KB argument was echoed whole in its error.
#[test]
fn echoed_values_are_cut() {
    let long = "q".repeat(100_000);
    let cases: Vec<Vec<&str>> = vec![
        vec!["evolve", "--functions", &long, "--data", "builtin:pagie1:36"],
        vec!["evolve", "--functions", "add", "--target", &long, "--data", "builtin:pagie1:36"],
        vec!["evolve", "--functions", "add", "--select", &long],
        vec!["evolve", "--functions", "add", "--max-memory", &long],
        vec!["classify", "--fitness", &long],
    ];
    for args in cases {
        let o = grove_run(&args, "", support::Device::Cpu, None);
        let e = text(&o.stderr);
        assert!(!o.status.success());
        assert!(e.len() < 1000, "{} bytes echoed for {:?}: {}", e.len(), &args[..2], &e[..300]);
        assert!(e.contains("more characters)"), "{}", &e[..e.len().min(300)]);
    }
}

// Actions outside [-1, 1] were not clipped: `1e30` gave a 57-digit return.
#[test]
fn actions_outside_their_range_are_clipped_with_a_note() {
    let d = dir("actions");
    let big = d.join("big.csv");
    std::fs::write(&big, "1e30,-1e30\n1e30,1e30\n").unwrap();
    let edge = d.join("edge.csv");
    std::fs::write(&edge, "1,-1\n1,1\n").unwrap();
    let a = grove_cpu(&["rollout", "--env", "swimmer", "--actions", s(&big)]);
    let b = grove_cpu(&["rollout", "--env", "swimmer", "--actions", s(&edge)]);
    assert_ok(&a);
    assert_ok(&b);
    assert_eq!(text(&a.stdout), text(&b.stdout), "clipped actions play as the range's ends");
    assert!(text(&a.stderr).contains("note: 4 actions of") && text(&a.stderr).contains("clipped"), "{}", text(&a.stderr));
    assert!(text(&b.stderr).is_empty(), "{}", text(&b.stderr));
}

// `grove map … < /dev/urandom` printed 9 million error lines (265 MB) in 30 s.
#[test]
fn map_stops_at_binary_input_and_counts_repeated_errors() {
    let mut noise = String::new();
    // Lines of text that are not genomes: named ten times, then counted once.
    for i in 0..5000 {
        noise.push_str(&format!("{}x,1\n", "q".repeat(i % 300)));
    }
    let o = grove_run(&["map", "-g", "grammars/regression.bnf", "--n-vars", "2"], &noise, support::Device::Cpu, None);
    let e = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert_eq!(e.lines().count(), 11, "{e}");
    assert!(e.lines().last().unwrap().contains("4990 more lines that are not genomes (5000 in all"), "{e}");
    assert!(e.lines().all(|l| l.len() < 300), "{e}");
    // Binary data: one line at the first NUL byte.
    let d = dir("map_binary");
    let [zeros, _] = binary_files(&d);
    let o = support::grove_command(&["map", "-g", "grammars/regression.bnf", "--n-vars", "2"], support::Device::Cpu, None)
        .stdin(std::fs::File::open(&zeros).unwrap())
        .output()
        .unwrap();
    assert_one_line_error(&o, &["standard input: a NUL byte on line 1", "binary data"]);
}

// `check` passed grammars that `evolve` refuses: a `nan` terminal, `out(2, …)` in a regression
// grammar, a constant of 1e39 or of 400 digits.
#[test]
fn check_reads_a_grammar_as_every_task_does() {
    let d = dir("check_tasks");
    let write = |name: &str, body: &str| {
        let p = d.join(name);
        std::fs::write(&p, body).unwrap();
        p
    };
    let cases = [
        (write("nan.bnf", "<e> ::= <e> + <e> | x0 | nan\n"), "`nan` is neither a function nor a variable", "expressions no"),
        (write("big.bnf", "<e> ::= <e> + <e> | x0 | 1e39\n"), "the constant `1e39` is beyond f32's range", "expressions no"),
        (write("long.bnf", &format!("<e> ::= <e> + <e> | x0 | {}\n", "9".repeat(400))), "is beyond f32's range", "expressions no"),
        (write("out.bnf", "<e> ::= out(2, <e>) | x0 + <e> | x1\n"), "this task has a single output (grove evolve refuses it)", "expressions for classify and control only"),
    ];
    for (g, warning, summary) in &cases {
        let o = grove_cpu(&["check", s(g)]);
        let (out, err) = (text(&o.stdout), text(&o.stderr));
        assert!(err.contains(warning), "{}: {err}", g.display());
        assert!(out.contains(summary), "{}: {out}", g.display());
        // And evolve refuses it in one line.
        let o = grove_cpu(&["evolve", "--grammar", s(g), "--data", "builtin:pagie1:36", "--gens", "1", "--pop", "8"]);
        assert_eq!(o.status.code(), Some(1), "{}", g.display());
        assert_eq!(text(&o.stderr).trim().lines().count(), 1, "{}", text(&o.stderr));
    }
    let o = grove_cpu(&["check", "grammars/regression.bnf", "--n-vars", "3"]);
    assert!(text(&o.stdout).contains("expressions yes"), "{}", text(&o.stdout));
}

// `--max-memory` was not honoured by `--policy linear` (`--directions 1048576 --max-memory
// 100M` used 2.9 GB), nor for large data (a 10M-row CSV with `--max-memory 100M` peaked at
// 1.2 GB).
#[test]
fn max_memory_bounds_linear_policies_and_large_data() {
    for policy in ["linear", "residual"] {
        let o = grove_cpu(&["control", "--env", "swimmer", "--policy", policy, "--directions", "1048576", "--max-memory", "100M", "--gens", "1"]);
        assert_one_line_error(&o, &["an iteration of --directions 1048576", "GiB of host memory", "100.0 MiB --max-memory", "lower --directions"]);
    }
    let d = dir("max_memory_data");
    let csv = d.join("big.csv");
    let mut text = String::from("x0,x1,y\n");
    for i in 0..200_000 {
        text.push_str(&format!("{}.25,{}.5,{}\n", i % 97, i % 89, i % 7));
    }
    std::fs::write(&csv, &text).unwrap();
    for cmd in ["evolve", "classify"] {
        let o = grove_cpu(&[cmd, "--functions", "add", "--data", s(&csv), "--max-memory", "10M", "--gens", "1"]);
        assert_one_line_error(&o, &["reading the data (", "big.csv", "10.0 MiB --max-memory"]);
    }
}

/// `--max-memory` (and `GROVE_MAX_MEMORY`) bounds the commands that read files whole and evolve
/// nothing: a report, grammar, action or env file whose reading would need more (about six
/// times its size) is refused before it is read, naming the file and the limit; the same file
/// is read under a limit that holds it.
#[test]
fn max_memory_bounds_every_reader() {
    let d = dir("max_memory_readers");
    let report = d.join("r.json");
    assert_ok(&grove_cpu(&["evolve", "--data", "builtin:pagie1", "--functions", "add,mul", "--pop", "50", "--gens", "1", "--quiet", "--report", s(&report)]));
    // The report grown past 1 MiB by a field no reader needs.
    let mut json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    json["padding"] = serde_json::Value::String("x".repeat(2 << 20));
    std::fs::write(&report, json.to_string()).unwrap();
    let data = d.join("rows.csv");
    std::fs::write(&data, "x0,x1\n1,2\n3,4\n").unwrap();
    let grammar = d.join("g.bnf");
    std::fs::write(&grammar, format!("<e> ::= <e> + <e> | x[:, 0] | 1\n# {}\n", "y".repeat(2 << 20))).unwrap();
    let refused = ["needs about", "of memory, more than the 4.0 MiB --max-memory allows"];
    for args in [
        vec!["export", "--model", s(&report), "--lang", "python"],
        vec!["predict", "--model", s(&report), "--data", s(&data)],
        vec!["plot", s(&report), "--out", s(&d.join("plots"))],
        vec!["check", s(&grammar)],
    ] {
        let o = grove_cpu(&[&args[..], &["--max-memory", "4M"]].concat());
        assert_one_line_error(&o, &refused);
        assert!(text(&o.stderr).contains(if args[0] == "check" { "g.bnf" } else { "r.json" }), "{}", text(&o.stderr));
        // The environment variable is the same limit.
        let mut c = support::grove_command(&args, support::Device::Cpu, None);
        let o = c.env("GROVE_MAX_MEMORY", "4M").output().unwrap();
        assert_one_line_error(&o, &refused);
        assert!(args[0] != "plot" || !d.join("plots").exists(), "a refused plot writes nothing");
        // A limit that holds the file lets it be read.
        let o = grove_cpu(&[&args[..], &["--max-memory", "1G"]].concat());
        assert!(!text(&o.stderr).contains("--max-memory allows"), "{}", text(&o.stderr));
    }
}

/// `grove predict` of `model` on a FIFO the test writes: `lines` first, then the FIFO held
/// open until `until` says so; returns the child (its stdout piped) and the writer.
fn predict_on_fifo(model: &Path, fifo: &Path, lines: String, hold: std::sync::mpsc::Receiver<()>) -> (std::process::Child, std::thread::JoinHandle<()>) {
    assert!(std::process::Command::new("mkfifo").arg(fifo).status().unwrap().success());
    let child = support::grove_command(&["predict", "--model", s(model), "--data", s(fifo)], support::Device::Cpu, None)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let path = fifo.to_path_buf();
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        let _ = f.write_all(lines.as_bytes());
        let _ = f.flush();
        let _ = hold.recv_timeout(Duration::from_secs(30));
    });
    (child, writer)
}

// `predict` needed about 13 times the CSV (3.4 GB for 270 MB) and read the whole file before it
// checked the header.
#[test]
fn predict_checks_the_header_first_and_streams_its_rows() {
    use std::io::BufRead;
    let d = dir("predict_stream");
    let rep = d.join("r.json");
    assert_ok(&grove_cpu(&["evolve", "--functions", "add,mul", "--data", "builtin:pagie1:36", "--gens", "1", "--pop", "8", "--report", s(&rep)]));
    // A wrong header is refused while the rest of the file has not even been written.
    let (tx, rx) = std::sync::mpsc::channel();
    let (child, writer) = predict_on_fifo(&rep, &d.join("bad.fifo"), "a,b\n1,2\n".into(), rx);
    let (done_tx, done) = std::sync::mpsc::channel();
    std::thread::spawn(move || done_tx.send(child.wait_with_output().unwrap()).unwrap());
    let o = done.recv_timeout(Duration::from_secs(20)).expect("predict answers a wrong header before the file ends");
    tx.send(()).unwrap();
    writer.join().unwrap();
    assert_one_line_error(&o, &["bad.fifo: the model reads the column `x0`, which the file lacks (its columns: a, b)"]);
    // Predictions come out block by block, before the file ends.
    let mut rows = String::from("x0,x1\n# a comment line is skipped\n");
    for i in 0..5000 {
        rows.push_str(&format!("{},{}\n", i % 10, i % 3));
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let (mut child, writer) = predict_on_fifo(&rep, &d.join("rows.fifo"), rows, rx);
    let stdout = child.stdout.take().unwrap();
    let (lines_tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in std::io::BufReader::new(stdout).lines() {
            if lines_tx.send(l.unwrap()).is_err() {
                break;
            }
        }
    });
    let first: Vec<String> = (0..4097).map(|_| lines.recv_timeout(Duration::from_secs(20)).expect("a block's predictions before the file ends")).collect();
    assert_eq!(first[0], "prediction");
    tx.send(()).unwrap();
    writer.join().unwrap();
    let rest: Vec<String> = lines.iter().collect();
    assert!(child.wait().unwrap().success());
    assert_eq!(first.len() - 1 + rest.len(), 5000);
}

// A missing column in a 100,000-column file listed every column (1 MB on one line); duplicate
// feature names in an edited report made `predict` read the wrong column and `export` write
// invalid C.
#[test]
fn reports_and_headers_are_named_briefly_and_checked() {
    let d = dir("columns");
    let rep = d.join("r.json");
    assert_ok(&grove_cpu(&["evolve", "--functions", "add,mul", "--data", "builtin:pagie1:36", "--gens", "1", "--pop", "8", "--report", s(&rep)]));
    let wide = d.join("wide.csv");
    let names: Vec<String> = (0..100_000).map(|i| format!("c{i}")).collect();
    std::fs::write(&wide, format!("{}\n{}\n", names.join(","), vec!["1"; 100_000].join(","))).unwrap();
    let o = grove_cpu(&["predict", "--model", s(&rep), "--data", s(&wide)]);
    assert_one_line_error(&o, &["lacks (its columns: c0, c1,", "… 99980 more)"]);
    assert!(o.stderr.len() < 1000, "{} bytes", o.stderr.len());
    let mut v = support::read_json(&rep);
    v["model"]["features"] = serde_json::json!(["x0", "x0"]);
    std::fs::write(&rep, serde_json::to_vec(&v).unwrap()).unwrap();
    for args in [vec!["export", "--model", s(&rep), "--lang", "c"], vec!["predict", "--model", s(&rep), "--data", s(&wide)]] {
        assert_one_line_error(&grove_cpu(&args), &["the model's features name `x0` twice"]);
    }
}

// `--test-fraction 0.999` trained on one row and reported R² 1.000; a `#` comment line in a CSV
// read as "row has 1 cell"; a NaN in `predict` data suggested `--label`, which predict lacks;
// `parsimony: NaN` in an experiment file talked about enums.
#[test]
fn weak_answers_get_the_right_line() {
    let o = grove_cpu(&["evolve", "--functions", "add", "--data", "builtin:pagie1", "--test-fraction", "0.999", "--gens", "1"]);
    assert_one_line_error(&o, &["test fraction of 0.999", "leaves 1 training row, fewer than the 2 a fit needs"]);
    let d = dir("weak");
    let csv = d.join("c.csv");
    std::fs::write(&csv, "x0,y\n# a comment\n1,2\n2,3\n  # another\n3,5\n4,4\n5,7\n").unwrap();
    let rep = d.join("r.json");
    assert_ok(&grove_cpu(&["evolve", "--functions", "add", "--data", s(&csv), "--gens", "1", "--pop", "8", "--report", s(&rep)]));
    assert_eq!(support::read_json(&rep)["selection"]["training_rows"], 5);
    let nan = d.join("nan.csv");
    std::fs::write(&nan, "x0\nnan\n").unwrap();
    let o = grove_cpu(&["predict", "--model", s(&rep), "--data", s(&nan)]);
    assert_one_line_error(&o, &["`nan` is not a finite number"]);
    assert!(!text(&o.stderr).contains("--label"), "{}", text(&o.stderr));
    let ron = d.join("p.ron");
    std::fs::write(&ron, "Evolve(functions: \"add\", data: \"builtin:pagie1:36\", regression: (parsimony: NaN))\n").unwrap();
    let o = grove_cpu(&["run", s(&ron)]);
    assert_one_line_error(&o, &["regression.parsimony", "NaN or an infinity: give a finite number"]);
    assert!(!text(&o.stderr).contains("enum"), "{}", text(&o.stderr));
    // A grammar that writes no out(K, …) slot scores every class 0 in classify: refused, where
    // one output read as a logit (--binary) takes it.
    let o = grove_cpu(&["classify", "--data", "builtin:iris", "--grammar", "grammars/regression.bnf", "--gens", "1"]);
    assert_one_line_error(&o, &["regression.bnf writes no out(K, …) output slot", "3 classes here", "out(0, …) to out(2, …)"]);
    assert_ok(&grove_cpu(&["classify", "--data", "builtin:breast_cancer", "--grammar", "grammars/regression.bnf", "--binary", "--gens", "1", "--pop", "50", "--quiet"]));
}

// A checkpoint whose tree is empty (checksum recomputed) loaded.
#[test]
fn a_checkpoint_with_an_empty_tree_is_refused() {
    let d = dir("empty_tree");
    let ck = d.join("c.ckpt");
    let csv = d.join("d.csv");
    std::fs::write(&csv, "x0,y\n1,2\n2,3\n3,5\n4,4\n5,7\n6,8\n").unwrap();
    assert_ok(&grove_cpu(&["evolve", "--functions", "add", "--data", s(&csv), "--gens", "3", "--pop", "8", "--checkpoint", s(&ck), "-q"]));
    let saved = support::read_json(&ck);
    for (name, edit) in [("row", "/state/trees/rows/0"), ("best", "/state/best/nodes")] {
        let mut v = saved.clone();
        *v.pointer_mut(edit).unwrap_or_else(|| panic!("{edit}")) = serde_json::json!([]);
        let p = d.join(format!("{name}.ckpt"));
        support::write_resealed(&p, v);
        assert_one_line_error(&grove_cpu(&["run", "--resume", s(&p)]), &["is empty: every tree has at least one node"]);
    }
}
