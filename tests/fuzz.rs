//! Random and mutated input into every reader of hostile files (issues 28 and 59): data
//! (CSV/TSV, regression and labelled), grammars (parse, resolve, check, compile), experiment
//! files, reports (the model, its tree, applying and exporting it; a control policy),
//! checkpoints (bytes, and edits of the JSON resealed with a valid checksum so the structural
//! checks see them), environment files (parsed and compiled), action files, genomes as `grove
//! map` reads them, `--define` definitions, files read through the bounded reader, and output
//! paths (files, directories, symbolic links, chains and loops of them, missing directories,
//! and, as root, device nodes the test makes itself). Every input must give `Ok` or `Err`,
//! never a panic; an output is written through or refused, never replacing a link, a device or
//! a directory. A panic names the reader, the seed, the case and the input. Seeded by grove's
//! own generator (`GROVE_FUZZ_SEED`, default 28); about 22,000 cases a run, a few seconds in
//! release on 2 cores.

use std::panic::{AssertUnwindSafe, catch_unwind};

use grove::rng::{Purpose, Stream};
use serde_json::Value;

mod support;
use support::resealed;

/// The run's seed.
fn seed() -> u64 {
    std::env::var("GROVE_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(28)
}

/// Numbers that sit on a limit somewhere: type bounds, f32 overflow, zero, negatives.
const EXTREMES: &[&str] = &[
    "0", "-1", "1.5", "255", "256", "65535", "65536", "4294967295", "4294967296", "18446744073709551615", "18446744073709551616",
    "1e39", "-1e39", "1e308", "1e309", "NaN", "inf", "-0", "3.4028236e38",
];

/// A generator of inputs: random bytes biased to a reader's syntax, and edits of valid inputs.
struct Fuzz(Stream);

impl Fuzz {
    fn new(reader: u32) -> Fuzz {
        Fuzz(Stream::new(seed(), reader, 0, Purpose::Bench))
    }

    /// Uniform in `0..n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize {
        self.0.below(n as u32) as usize
    }

    /// A random byte: from `alphabet` half the time, else any.
    fn byte(&mut self, alphabet: &[u8]) -> u8 {
        if self.0.chance(0.5) { alphabet[self.below(alphabet.len())] } else { self.0.next_u32() as u8 }
    }

    /// Up to `max` random bytes.
    fn bytes(&mut self, alphabet: &[u8], max: usize) -> Vec<u8> {
        let n = self.below(max + 1);
        (0..n).map(|_| self.byte(alphabet)).collect()
    }

    /// `input` after one to four edits: a byte replaced, bytes inserted, a range deleted or
    /// repeated, a digit changed, an extreme number inserted, the end cut off.
    fn mutate(&mut self, input: &[u8], alphabet: &[u8]) -> Vec<u8> {
        let mut v = input.to_vec();
        for _ in 0..1 + self.below(4) {
            let at = self.below(v.len() + 1);
            match self.below(7) {
                0 if at < v.len() => v[at] = self.byte(alphabet),
                1 => {
                    let b = self.bytes(alphabet, 8);
                    v.splice(at..at, b);
                }
                2 if at < v.len() => {
                    let end = (at + 1 + self.below(32)).min(v.len());
                    v.drain(at..end);
                }
                3 if at < v.len() => {
                    let end = (at + 1 + self.below(64)).min(v.len());
                    let piece = v[at..end].to_vec();
                    let to = self.below(v.len() + 1);
                    v.splice(to..to, piece);
                }
                4 => {
                    let digits: Vec<usize> = v.iter().enumerate().filter(|(_, b)| b.is_ascii_digit()).map(|(i, _)| i).collect();
                    if !digits.is_empty() {
                        let i = digits[self.below(digits.len())];
                        v[i] = b'0' + self.below(10) as u8;
                    }
                }
                5 => {
                    let x = EXTREMES[self.below(EXTREMES.len())].as_bytes().to_vec();
                    v.splice(at..at, x);
                }
                6 => v.truncate(at),
                _ => {}
            }
        }
        v
    }
}

/// Runs `read` on `cases` inputs from `make`; a panic fails the test naming the reader, the
/// seed, the case and the start of the input.
fn each_case(reader: &str, cases: usize, mut make: impl FnMut(&mut Fuzz, usize) -> Vec<u8>, read: impl Fn(&[u8]), fuzz: &mut Fuzz) {
    for case in 0..cases {
        let input = make(fuzz, case);
        if catch_unwind(AssertUnwindSafe(|| read(&input))).is_err() {
            let shown = String::from_utf8_lossy(&input[..input.len().min(400)]).into_owned();
            panic!("{reader}: a panic on case {case} of seed {} (GROVE_FUZZ_SEED); input begins {shown:?}", seed());
        }
    }
}

fn repo(path: &str) -> Vec<u8> {
    std::fs::read(format!("{}/{path}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

#[test]
fn data_readers_never_panic() {
    let iris: Vec<u8> = String::from_utf8(repo("data/classification/iris.csv")).unwrap().lines().take(25).flat_map(|l| format!("{l}\n").into_bytes()).collect();
    let valid = [iris, b"x0,x1,y\n1,2,3\n4.5,-6,7e3\n".to_vec(), b"a\tb\tclass\n1\t2\tyes\n3\t4\tno\n".to_vec(), b"\xef\xbb\xbfx,y\r\n1,2\r\n".to_vec()];
    let alphabet = b",\t\n\r\"#.-+e0123456789 xyNaninf";
    let mut f = Fuzz::new(1);
    let read = |b: &[u8]| {
        let _ = grove::data::parse(b, "fuzz.csv", None);
        let _ = grove::data::parse(b, "fuzz.csv", Some("y"));
        let _ = grove::data::classes::parse_labeled(b, "fuzz.csv", None);
        let _ = grove::data::classes::read_table(b, "fuzz.csv");
    };
    each_case("data (random)", 1000, |f, _| f.bytes(alphabet, 200), read, &mut f);
    each_case("data (mutated)", 2000, |f, i| f.mutate(&valid[i % valid.len()], alphabet), read, &mut f);
}

#[test]
fn grammar_readers_never_panic() {
    let dir = format!("{}/grammars", env!("CARGO_MANIFEST_DIR"));
    let mut valid: Vec<Vec<u8>> = std::fs::read_dir(&dir).unwrap().map(|e| std::fs::read(e.unwrap().path()).unwrap()).collect();
    valid.sort();
    let alphabet = b"<>:=|\"'\n ()_GE_RANGE:dataset_n_varsCODON0123456789";
    let shape = grove::grammar::DatasetShape { n_vars: Some(3), n_is: Some(3), n_os: Some(2) };
    let mut f = Fuzz::new(2);
    let read = |b: &[u8]| {
        let text = String::from_utf8_lossy(b);
        for python in [false, true] {
            if let Ok(g) = grove::grammar::parse::parse_str(&text, "fuzz.bnf", python) {
                let _ = grove::grammar::check(&g);
                let _ = grove::grammar::load_parsed(g, &shape);
            }
        }
    };
    each_case("grammar (random)", 800, |f, _| f.bytes(alphabet, 200), read, &mut f);
    each_case("grammar (mutated)", 1700, |f, i| f.mutate(&valid[i % valid.len()], alphabet), read, &mut f);
}

#[test]
fn experiment_files_never_panic() {
    let valid = [repo("examples/w1-pagie1.ron"), repo("examples/w5-iris.ron"), repo("examples/w6-hopper.ron")];
    let alphabet = b"():,\"[]{}_ \nEvolveClassifyControlengine:pop_size0123456789.-e";
    let mut f = Fuzz::new(3);
    let read = |b: &[u8]| {
        let text = String::from_utf8_lossy(b);
        if let Ok((command, given)) = grove::task::runner::experiment::parse_ron(&text, "fuzz.ron") {
            if let Ok(exp) = grove::task::runner::experiment::Experiment::from_parts(&command, given, "fuzz.ron") {
                let _ = exp.check();
            }
        }
    };
    each_case("experiment (random)", 500, |f, _| f.bytes(alphabet, 200), read, &mut f);
    each_case("experiment (mutated)", 2000, |f, i| f.mutate(&valid[i % valid.len()], alphabet), read, &mut f);
}

/// A small tree-GP regression run and a small GE classification run, checkpointed before
/// their last generation: each checkpoint's bytes and report.
// Regression: two tests ran this at once in one folder, and one removed it while the other
// was still saving its checkpoint ("cannot move … into place").
fn small_runs() -> Vec<(Vec<u8>, Value)> {
    use grove::task::runner::experiment::Experiment;
    // A folder of this call's own: two tests call it at once, and each removes its folder.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("grove-fuzz-{}-{call}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let runs = [
        ("evolve", serde_json::json!({"functions": "add,mul,sin", "data": "builtin:pagie1:36", "device": "cpu", "engine": {"pop_size": 8, "generations": 2}})),
        (
            "classify",
            serde_json::json!({"grammar": format!("{}/grammars/classify.bnf", env!("CARGO_MANIFEST_DIR")), "data": "builtin:iris", "device": "cpu",
                "engine": {"pop_size": 8, "generations": 2}}),
        ),
    ];
    let out = runs
        .into_iter()
        .enumerate()
        .map(|(i, (command, given))| {
            let exp = Experiment::from_parts(command, given, "fuzz").unwrap();
            let path = dir.join(format!("{i}.ckpt"));
            let keep = grove::task::runner::checkpoint::FileCheckpoints::new(path.clone(), 1, exp.clone(), &Default::default()).unwrap();
            let opts = grove::task::base::options::RunOptions { quiet: true, checkpoint: Some(std::sync::Arc::new(keep)), ..Default::default() };
            let result = grove::task::runner::run_experiment(&exp, &opts, Some(1)).unwrap();
            (std::fs::read(&path).unwrap(), result.report)
        })
        .collect();
    std::fs::remove_dir_all(&dir).unwrap();
    out
}

/// Applies a model read from `bytes` as predict and export do.
fn apply_model(bytes: &[u8]) {
    let Ok(m) = grove::task::base::model::from_json(bytes, "fuzz.json") else { return };
    let n = 3;
    let _ = m.outputs_of(vec![0.25; m.features.len() * n], n);
    if let Ok(nodes) = m.tree() {
        let program = grove::program::export::Program {
            nodes: &nodes,
            n_outputs: m.n_outputs,
            features: &m.features,
            scale: m.scale,
            head: m.head.as_ref().map(|h| (h.b, h.w.as_slice())),
            linear: m.linear.as_ref().map(|l| (l.c, l.a.as_slice())),
            limits: m.limits,
            logit_terms: m.logit_terms.as_deref(),
            class_head: m.class_head.as_deref(),
            standardize: m.standardize.as_ref().map(|s| (s.mean.as_slice(), s.std.as_slice())),
            classes: m.classes.as_deref(),
            actuators: None,
        };
        for lang in [grove::program::export::Lang::Python, grove::program::export::Lang::C] {
            let _ = grove::program::export::export(&program, lang);
        }
    }
}

#[test]
fn reports_and_policies_never_panic() {
    let reports: Vec<Vec<u8>> = small_runs().into_iter().map(|(_, r)| serde_json::to_vec(&r).unwrap()).collect();
    let policy = serde_json::to_vec(&serde_json::json!({"policy": {"env": "swimmer", "profile": "brax", "observations": ["a", "b", "c"],
        "actuators": ["u", "v"], "nodes": [["add", 0.0, 1], ["var", 2.0, 0], ["mul", 0.0, 2], ["const", -1.5, 0], ["var", 0.0, 0]]}}))
    .unwrap();
    let alphabet = b"[]{},:\"\n0123456789.-eaddmulvarconst";
    let mut f = Fuzz::new(4);
    each_case("report (random)", 500, |f, _| f.bytes(alphabet, 200), apply_model, &mut f);
    each_case("report (mutated)", 1500, |f, i| f.mutate(&reports[i % reports.len()], alphabet), apply_model, &mut f);
    let play = |b: &[u8]| {
        let Ok(v) = serde_json::from_slice::<Value>(b) else { return };
        if let Ok(p) = serde_json::from_value::<grove::task::control::SavedPolicy>(v["policy"].clone()) {
            let _ = p.compile();
        }
    };
    each_case("policy (mutated)", 500, |f, _| f.mutate(&policy, alphabet), play, &mut f);
}

/// Every leaf of `v` (numbers, strings, booleans, null) and every array, as JSON pointers.
fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => m.iter().for_each(|(k, x)| pointers(x, format!("{at}/{k}"), out)),
        Value::Array(a) => {
            out.push(at.clone());
            a.iter().enumerate().for_each(|(i, x)| pointers(x, format!("{at}/{i}"), out));
        }
        _ => out.push(at),
    }
}

/// `v` with one edit at a random place: an extreme number, another type, an emptied or
/// shortened or lengthened array.
fn edit_json(f: &mut Fuzz, v: &Value, places: &[String]) -> Value {
    let mut v = v.clone();
    let place = &places[f.below(places.len())];
    // A second edit may aim at a place the first one removed.
    let Some(slot) = v.pointer_mut(place) else { return v };
    match (slot, f.below(4)) {
        (Value::Array(a), 0) => a.clear(),
        (Value::Array(a), 1) if !a.is_empty() => drop(a.pop()),
        (Value::Array(a), 2) if !a.is_empty() => a.push(a[0].clone()),
        (slot, 3) => *slot = [Value::Null, Value::from("x"), Value::from(true), serde_json::json!([])][f.below(4)].clone(),
        (slot, _) => *slot = serde_json::from_str(EXTREMES[f.below(EXTREMES.len())]).unwrap_or(Value::from(u64::MAX)),
    }
    v
}

#[test]
fn checkpoints_never_panic_and_every_byte_change_is_caught() {
    let runs = small_runs();
    let alphabet = b"[]{},:\"\n0123456789.-e";
    let mut f = Fuzz::new(5);
    let load = |b: &[u8]| {
        if let Ok(c) = grove::task::runner::checkpoint::Checkpoint::from_json(b, "fuzz.ckpt") {
            let _ = c.run.state.resume();
            let _ = c.run.hall_of_fame();
        }
    };
    each_case("checkpoint (random)", 300, |f, _| f.bytes(alphabet, 200), load, &mut f);
    // Byte edits: whatever still loads holds exactly the original content (the checksum).
    let contents: Vec<Value> = runs
        .iter()
        .map(|(b, _)| {
            let mut v: Value = serde_json::from_slice(b).unwrap();
            v.as_object_mut().unwrap().remove("checksum");
            v
        })
        .collect();
    let mut i = 0;
    each_case(
        "checkpoint (mutated bytes)",
        1500,
        |f, case| {
            i = case % runs.len();
            f.mutate(&runs[i].0, alphabet)
        },
        |b| {
            if grove::task::runner::checkpoint::Checkpoint::from_json(b, "fuzz.ckpt").is_ok() {
                let mut v: Value = serde_json::from_slice(b).unwrap();
                v.as_object_mut().unwrap().remove("checksum");
                assert!(contents.contains(&v), "an edited checkpoint loaded with changed content");
            }
        },
        &mut f,
    );
    // JSON edits resealed: the structural checks must refuse or accept without a panic.
    let values: Vec<(Value, Vec<String>)> = runs
        .iter()
        .map(|(b, _)| {
            let v: Value = serde_json::from_slice(b).unwrap();
            let mut places = Vec::new();
            pointers(&v, String::new(), &mut places);
            (v, places)
        })
        .collect();
    each_case(
        "checkpoint (resealed edits)",
        2500,
        |f, case| {
            let (v, places) = &values[case % values.len()];
            let mut edited = edit_json(f, v, places);
            if f.0.chance(0.3) {
                edited = edit_json(f, &edited, places);
            }
            resealed(edited)
        },
        load,
        &mut f,
    );
}

#[test]
fn env_and_action_files_never_panic() {
    let dir = format!("{}/envs", env!("CARGO_MANIFEST_DIR"));
    let mut valid: Vec<Vec<u8>> = std::fs::read_dir(&dir).unwrap().map(|e| std::fs::read(e.unwrap().path()).unwrap()).collect();
    valid.sort();
    let alphabet = b"():,\"[]_ \nSomeNoneHingeSlideUniformtimestepframe_skipmassgear0123456789.-eNaN";
    let mut f = Fuzz::new(6);
    let read = |b: &[u8]| {
        let text = String::from_utf8_lossy(b);
        if let Ok(spec) = grove::sim::EnvSpec::parse(&text, "fuzz.ron") {
            for profile in [None, Some("brax"), Some("gymnasium")] {
                if let Ok(m) = grove::sim::Model::new(&spec, profile) {
                    // A model that compiles takes a few steps without a panic (where they are
                    // cheap: the bounds allow 10⁷ solver sweeps a step, too slow for a fuzz case).
                    if m.frame_skip * m.solver_iterations > 20_000 {
                        continue;
                    }
                    let opts = grove::sim::rollout::RolloutOptions { steps: 3, seed: Some(1), ignore_termination: false };
                    let _ = grove::sim::rollout::rollout::<f64>(&m, &grove::sim::rollout::ActionSource::Zero, &opts, None);
                }
            }
        }
    };
    each_case("env (random)", 300, |f, _| f.bytes(alphabet, 200), read, &mut f);
    each_case("env (mutated)", 1200, |f, i| f.mutate(&valid[i % valid.len()], alphabet), read, &mut f);
    let actions = b"a,b\n0.5,-1\n# note\n1e-3,2\n\n0,0\n".to_vec();
    let alphabet = b",\n#.-+e0123456789 abNaninf";
    let read = |b: &[u8]| {
        let _ = grove::sim::rollout::read_actions(&String::from_utf8_lossy(b), "fuzz.csv", 2);
    };
    each_case("actions (random)", 400, |f, _| f.bytes(alphabet, 200), read, &mut f);
    each_case("actions (mutated)", 600, |f, _| f.mutate(&actions, alphabet), read, &mut f);
}

#[test]
fn genomes_and_definitions_never_panic() {
    let genomes = [b"1,2,3,4,5\n".to_vec(), b"[0, 17, 4294967295, 3]\n\n12 7 9\n".to_vec(), b"0\t1\t2\n".to_vec()];
    let alphabet = b",[] \t\n0123456789-x";
    let mut f = Fuzz::new(7);
    let read = |b: &[u8]| {
        let mut out = Vec::new();
        let _ = grove::task::runner::tools::parse_genome(&String::from_utf8_lossy(b), &mut out);
    };
    each_case("genome line (random)", 500, |f, _| f.bytes(alphabet, 200), read, &mut f);
    each_case("genome line (mutated)", 500, |f, i| f.mutate(&genomes[i % genomes.len()], alphabet), read, &mut f);
    // Whole inputs through `grove map`'s reader and mapper, on the CPU.
    let settings = grove::task::runner::tools::MapSettings {
        grammar: format!("{}/grammars/regression.bnf", env!("CARGO_MANIFEST_DIR")).into(),
        shape: grove::grammar::DatasetShape { n_vars: Some(2), n_is: Some(2), n_os: Some(1) },
        config: grove::genome::MapConfig { max_wraps: 2, ..Default::default() },
        device: grove::backend::DeviceChoice::Cpu,
        format: grove::task::runner::tools::MapFormat::Jsonl,
        max_memory: None,
    };
    let map = |b: &[u8]| {
        let mut out = Vec::new();
        let mut shown = 0;
        let r = grove::task::runner::tools::map_stream(&settings, std::io::Cursor::new(b.to_vec()), &mut out, |_| shown += 1);
        // Lines that are not genomes are named at most ten times, and counted once.
        assert!(shown <= grove::task::runner::tools::MAP_BAD_SHOWN + 1, "{shown} lines of errors");
        let _ = r;
    };
    each_case("map input (mutated)", 200, |f, i| f.mutate(&genomes[i % genomes.len()], alphabet), map, &mut f);
    let defs = ["softsign(x) = x / (1 + abs(x))", "hyp(a, b) = sqrt(a*a + b*b)", "g(x) = -(x ^ 2) + exp(-x) * 3e-2"];
    let alphabet = b"()=,+-*/^ xabsqrtexpabs0123456789.e";
    let read = |b: &[u8]| {
        let text = String::from_utf8_lossy(b).into_owned();
        let _ = grove::program::ops::user::register(&[text]);
    };
    each_case("definition (random)", 400, |f, _| f.bytes(alphabet, 120), read, &mut f);
    each_case("definition (mutated)", 600, |f, i| f.mutate(defs[i % defs.len()].as_bytes(), alphabet), read, &mut f);
}

/// This test's scratch directory, fresh.
fn scratch(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("grove-fuzz-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn files_through_the_bounded_reader_never_panic() {
    let d = scratch("files");
    let mut f = Fuzz::new(8);
    let n = std::cell::Cell::new(0usize);
    each_case(
        "bounded reader",
        400,
        |f, _| {
            let mut b = f.bytes(b"abc\n\t{}()[]\"", 300);
            // Some with a NUL, some not UTF-8.
            if f.0.chance(0.2) && !b.is_empty() {
                let at = f.below(b.len());
                b[at] = 0;
            }
            b
        },
        |b| {
            n.set(n.get() + 1);
            let p = d.join(format!("{}.txt", n.get()));
            std::fs::write(&p, b).unwrap();
            let limit = [16u64, 256, 1 << 20][n.get() % 3];
            match grove::input::read_text(&p, "the file", limit) {
                Ok(t) => assert!(t.len() as u64 <= limit && !t.contains('\0')),
                Err(e) => assert_eq!(e.to_string().lines().count(), 1, "{e}"),
            }
        },
        &mut f,
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// Whether this process runs as root (so `mknod` can make device nodes).
fn is_root(d: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let p = d.join("owner");
    std::fs::write(&p, "").unwrap();
    std::fs::metadata(&p).unwrap().uid() == 0
}

// Outputs: `--report` on a symlink replaced the link by a file, on a device node (as root) the
// node by a file, and a directory made the run end with nothing written.
#[test]
fn outputs_are_written_through_or_refused_never_replacing_what_stands_there() {
    use std::os::unix::fs::{FileTypeExt, symlink};
    let d = scratch("outputs");
    let root = is_root(&d);
    if !root {
        eprintln!("not root: the output cases skip device nodes (mknod needs root)");
    }
    let mut f = Fuzz::new(9);
    for case in 0..300 {
        let c = d.join(format!("c{case}"));
        std::fs::create_dir_all(&c).unwrap();
        let path = c.join("out.json");
        let kinds = if root { 11 } else { 9 };
        let kind = f.below(kinds);
        match kind {
            0 => {}
            1 => std::fs::write(&path, b"old").unwrap(),
            2 => std::fs::create_dir(&path).unwrap(),
            3 => {
                std::fs::write(c.join("target"), b"old").unwrap();
                symlink("target", &path).unwrap();
            }
            4 => symlink("missing/target", &path).unwrap(),
            5 => {
                symlink("b", &path).unwrap();
                symlink("out.json", c.join("b")).unwrap();
            }
            6 => {
                std::fs::create_dir(c.join("dir")).unwrap();
                symlink("dir", &path).unwrap();
            }
            7 => {
                std::fs::write(c.join("t2"), b"old").unwrap();
                symlink("t2", c.join("l1")).unwrap();
                symlink("l1", &path).unwrap();
            }
            8 => {
                std::fs::write(c.join("file"), b"").unwrap();
                // A path under a regular file: its directory cannot exist.
                let _ = std::fs::remove_file(&path);
            }
            9 => assert!(std::process::Command::new("mknod").args([path.to_str().unwrap(), "c", "1", "3"]).status().unwrap().success()),
            _ => {
                assert!(std::process::Command::new("mknod").args([c.join("null").to_str().unwrap(), "c", "1", "3"]).status().unwrap().success());
                symlink("null", &path).unwrap();
            }
        }
        let path = if kind == 8 { c.join("file").join("out.json") } else { path };
        let bytes = f.bytes(b"{}[]\":,0123456789", 64);
        let link_before = std::fs::symlink_metadata(&path).ok().map(|m| m.file_type());
        let checked = catch_unwind(AssertUnwindSafe(|| grove::report::files::check_output(&path, "the report")));
        let written = catch_unwind(AssertUnwindSafe(|| grove::report::files::write_output(&path, &bytes)));
        let (Ok(checked), Ok(written)) = (checked, written) else {
            panic!("outputs: a panic on case {case} (kind {kind}) of seed {} (GROVE_FUZZ_SEED)", seed());
        };
        // What stood at the path still stands there, of the same kind.
        let after = std::fs::symlink_metadata(&path).ok().map(|m| m.file_type());
        if let Some(t) = link_before {
            let a = after.unwrap_or_else(|| panic!("case {case} (kind {kind}): the path was removed"));
            assert_eq!((t.is_symlink(), t.is_dir(), t.is_char_device()), (a.is_symlink(), a.is_dir(), a.is_char_device()), "case {case} (kind {kind})");
        }
        // A check that passed is a write that succeeds, and a written regular file holds the bytes.
        if checked.is_ok() {
            assert!(written.is_ok(), "case {case} (kind {kind}): checked, then {:?}", written.err());
        }
        if written.is_ok() && std::fs::metadata(&path).is_ok_and(|m| m.is_file()) {
            assert_eq!(std::fs::read(&path).unwrap(), bytes, "case {case} (kind {kind})");
        }
        if let (Err(e), _) | (_, Err(e)) = (&checked, &written) {
            assert_eq!(format!("{e:#}").lines().count(), 1, "{e:#}");
        }
        // No temporary file is left behind.
        let left: Vec<_> = std::fs::read_dir(&c).unwrap().filter_map(|e| e.ok()).filter(|e| e.file_name().to_string_lossy().contains(".tmp")).collect();
        assert!(left.is_empty(), "case {case} (kind {kind}): {left:?} left behind");
    }
    let _ = std::fs::remove_dir_all(&d);
}
