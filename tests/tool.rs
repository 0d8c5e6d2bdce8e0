//! The tool around the engine, as a user meets it: experiment files and `grove run`,
//! `--from` reports, checkpoints with Ctrl-C and `--resume`, plots, the hall of fame.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

mod support;
#[path = "support/exports.rs"]
mod exports;
use exports::{run_c_lines as run_c, run_python_lines as run_python};
use support::{Device, assert_ok, assert_one_line_error, dir, interrupt_once_saved, grove_cpu as grove, read_json, s, text, without_timings, write_resealed};


const SMALL_RUN: &[&str] =
    &["--data", "builtin:pagie1:64", "--functions", "add,sub,mul,div,sin", "--pop", "64", "--seed", "5", "--threads", "1", "-q"];

#[test]
fn ctrl_c_saves_a_checkpoint_and_the_resumed_run_ends_as_an_uninterrupted_one() {
    let d = dir("ctrlc");
    let (full, part, resumed, ck) = (d.join("full.json"), d.join("part.json"), d.join("resumed.json"), d.join("run.ckpt"));
    // Long enough (a few seconds) that the signal arrives mid-run, even on a fast machine.
    let gens = "3000";
    let mut args = vec!["evolve", "--gens", gens];
    args.extend(SMALL_RUN);
    let mut whole = args.clone();
    whole.extend(["--report", s(&full)]);
    assert_ok(&grove(&whole));

    let mut interrupted = args.clone();
    interrupted.extend(["--report", s(&part), "--checkpoint", s(&ck), "--checkpoint-every", "1"]);
    interrupt_once_saved(&interrupted, Device::Cpu, &ck);
    assert!(!part.exists(), "an interrupted run writes no report");
    // No temporary file is left beside the checkpoint.
    let names: Vec<String> = std::fs::read_dir(&d).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(names.iter().all(|n| !n.contains(".tmp")), "{names:?}");
    let saved = read_json(&ck);
    let at = saved["state"]["generation"].as_u64().unwrap();
    assert!((1..3000).contains(&at), "stopped at generation {at}");

    // Issue 28: the resumed run writes the report the interrupted one was given.
    assert_ok(&grove(&["run", "--resume", s(&ck), "-q"]));
    let (a, b) = (without_timings(read_json(&full)), without_timings(read_json(&part)));
    assert_eq!(a["best"], b["best"]);
    assert!(a == b, "the resumed report differs from the uninterrupted one");
    // Flags given to the resumed run win over the saved paths.
    assert_ok(&grove(&["run", "--resume", s(&ck), "--report", s(&resumed), "-q"]));
    assert!(without_timings(read_json(&resumed)) == a);
}

// Issue 28: a checkpoint path that cannot be written was found out at the first save, after
// the work; a run shorter than --checkpoint-every left none; a damaged checkpoint resumed.
#[test]
fn checkpoints_are_checked_first_saved_at_the_end_sealed_and_validated() {
    let d = dir("trusted");
    let good = d.join("ok.ron");
    std::fs::write(&good, "Evolve(functions: \"add,mul\", data: \"builtin:pagie1:36\", engine: (pop_size: 12, generations: 3))").unwrap();
    // Bad paths are refused before the first generation, in one line, leaving no file behind.
    let sub = d.join("sub");
    std::fs::create_dir(&sub).unwrap();
    let cases: [(&Path, &[&str]); 3] = [
        (&sub, &["is a directory", "sub/run.ckpt"]),
        (&d.join("no/such/run.ckpt"), &["directory", "does not exist"]),
        (Path::new("/proc/grove.ckpt"), &["cannot create a file in /proc"]),
    ];
    for (path, needles) in cases {
        let out = grove(&["run", s(&good), "--gens", "100000", "--checkpoint", s(path), "-v"]);
        assert_one_line_error(&out, needles);
    }
    let left: Vec<String> = std::fs::read_dir(&d).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(left.iter().all(|n| !n.contains(".tmp")), "{left:?}");
    assert_eq!(std::fs::read_dir(&sub).unwrap().count(), 0);

    // A run shorter than --checkpoint-every saves before its last generation; resumed longer,
    // it ends as a longer run does, and writes the report, hall of fame and plots it was given.
    let (full, report, fame, plots, ck) = (d.join("full.json"), d.join("r.json"), d.join("fame.csv"), d.join("plots"), d.join("run.ckpt"));
    assert_ok(&grove(&["run", s(&good), "--gens", "5", "--report", s(&full)]));
    let first = ["run", s(&good), "--report", s(&report), "--hall-of-fame", s(&fame), "--plots", s(&plots), "--checkpoint", s(&ck), "-q"];
    assert_ok(&grove(&first));
    let saved = read_json(&ck);
    assert_eq!(saved["state"]["generation"], 3, "the final checkpoint is taken before the last generation");
    assert_eq!(saved["grove_checkpoint"], 3);
    assert!(saved["checksum"].as_str().is_some_and(|c| c.starts_with("fnv1a64:")), "{}", saved["checksum"]);
    assert!(saved["outputs"]["report"].as_str().is_some_and(|r| r.ends_with("r.json") && Path::new(r).is_absolute()));
    for p in [&report, &fame] {
        std::fs::remove_file(p).unwrap();
    }
    std::fs::remove_dir_all(&plots).unwrap();
    assert_ok(&grove(&["run", "--resume", s(&ck), "--gens", "5", "-q"]));
    assert!(without_timings(read_json(&full)) == without_timings(read_json(&report)), "the resumed run differs from a 5-generation one");
    assert!(fame.exists() && plots.is_dir(), "the resumed run writes the hall of fame and plots it was given");

    // Reformatting keeps the checksum; one flipped digit, an unknown version or no checksum
    // is refused in one line.
    let text_of = |v: &Value| serde_json::to_string_pretty(v).unwrap();
    let pretty = d.join("pretty.ckpt");
    std::fs::write(&pretty, text_of(&read_json(&ck))).unwrap();
    assert_ok(&grove(&["run", "--resume", s(&pretty), "-q"]));
    let raw = std::fs::read_to_string(&ck).unwrap();
    let at = raw.find("\"node_evaluations\":").unwrap() + "\"node_evaluations\":".len();
    let mut flipped = raw.clone().into_bytes();
    flipped[at] = if flipped[at] == b'1' { b'2' } else { b'1' };
    let flipped_path = d.join("flipped.ckpt");
    std::fs::write(&flipped_path, &flipped).unwrap();
    assert_one_line_error(&grove(&["run", "--resume", s(&flipped_path)]), &["flipped.ckpt", "checksum", "does not match"]);
    let edit = |name: &str, f: &dyn Fn(&mut Value), reseal: bool| {
        let mut v = read_json(&ck);
        f(&mut v);
        let p = d.join(name);
        if reseal {
            write_resealed(&p, v);
        } else {
            std::fs::write(&p, v.to_string()).unwrap();
        }
        p
    };
    let version = edit("v7.ckpt", &|v| v["grove_checkpoint"] = 7.into(), false);
    assert_one_line_error(&grove(&["run", "--resume", s(&version)]), &["format version 7", "reads versions 2 to 3"]);
    let old = edit("v1.ckpt", &|v| v["grove_checkpoint"] = 1.into(), false);
    assert_one_line_error(&grove(&["run", "--resume", s(&old)]), &["format version 1", "no checksum"]);
    let unsealed = edit("unsealed.ckpt", &|v| drop(v.as_object_mut().unwrap().remove("checksum")), false);
    assert_one_line_error(&grove(&["run", "--resume", s(&unsealed)]), &["has no checksum"]);

    // With a valid checksum, the structure is checked: every tree, the shape, the hall of fame.
    let nan = f32::NAN.to_bits();
    type Damage<'a> = (&'a str, &'a dyn Fn(&mut Value), &'a [&'a str]);
    let damaged: [Damage; 6] = [
        ("empty-fame.ckpt", &|v| v["hall_of_fame"][0]["nodes"] = serde_json::json!([]), &["hall-of-fame entry", "holds 0 nodes"]),
        ("nan.ckpt", &|v| v["state"]["trees"]["rows"][2] = serde_json::json!([[1, nan, 0]]), &["saved tree 2", "constant NaN"]),
        ("arity.ckpt", &|v| v["state"]["trees"]["rows"][0] = serde_json::json!([[2, 0, 0]]), &["saved tree 0", "needs 2 children"]),
        ("rows.ckpt", &|v| drop(v["state"]["trees"]["rows"].as_array_mut().unwrap().pop()), &["11 trees", "ask for 12"]),
        ("width.ckpt", &|v| v["state"]["trees"]["max_len"] = 4_000_000_000u64.into(), &["row width 4000000000"]),
        ("slot.ckpt", &|v| v["state"]["best"]["nodes"] = serde_json::json!([[0, 0, 3]]), &["the best program", "output slot"]),
    ];
    for (name, f, needles) in damaged {
        let p = edit(name, f, true);
        let mut want = vec![name, "the checkpoint is damaged"];
        want.extend(needles);
        assert_one_line_error(&grove(&["run", "--resume", s(&p)]), &want);
    }
}

#[test]
fn checkpoints_every_n_generations_resume_exactly_for_classification_by_grammar() {
    let d = dir("ge");
    let (full, ck, resumed) = (d.join("full.json"), d.join("ge.ckpt"), d.join("resumed.json"));
    let base = ["classify", "--data", "builtin:iris", "--grammar", "grammars/classify.bnf", "--pop", "60", "--threads", "1", "-q"];
    let mut a = base.to_vec();
    a.extend(["--gens", "6", "--report", s(&full)]);
    assert_ok(&grove(&a));
    // Stop early by asking for fewer generations, then continue to 6 from the checkpoint.
    let mut b = base.to_vec();
    b.extend(["--gens", "4", "--checkpoint", s(&ck), "--checkpoint-every", "2"]);
    assert_ok(&grove(&b));
    assert_eq!(read_json(&ck)["state"]["generation"], 4, "the last checkpoint is taken before generation 4");
    assert_ok(&grove(&["run", "--resume", s(&ck), "--gens", "6", "--report", s(&resumed), "-q"]));
    assert_eq!(without_timings(read_json(&full)), without_timings(read_json(&resumed)));
    // The resumed run kept checkpointing every 2 generations, into the same file.
    let again = read_json(&ck);
    assert_eq!((again["state"]["generation"].as_u64(), again["checkpoint_every"].as_u64()), (Some(6), Some(2)));
}

#[test]
fn run_from_a_report_repeats_the_run() {
    let d = dir("from");
    let (first, again) = (d.join("first.json"), d.join("again.json"));
    let mut args = vec!["evolve", "--gens", "8", "--test-fraction", "0.25", "--report", s(&first)];
    args.extend(SMALL_RUN);
    assert_ok(&grove(&args));
    let out = grove(&["run", "--from", s(&first), "--report", s(&again), "-q"]);
    assert_ok(&out);
    let (a, b) = (read_json(&first), read_json(&again));
    assert_eq!(a["best"]["infix"], b["best"]["infix"]);
    assert_eq!(a["command"], "evolve");
    assert_eq!(without_timings(a.clone()), without_timings(b));
    // A flag overrides the report's settings.
    let other = d.join("other.json");
    assert_ok(&grove(&["run", "--from", s(&first), "--seed", "6", "--gens", "2", "--report", s(&other), "-q"]));
    let o = read_json(&other);
    assert_eq!(o["settings"]["engine"]["seed"], 6);
    assert_eq!(o["generations"].as_array().unwrap().len(), 3);
    assert_eq!(o["settings"]["test_fraction"], 0.25, "the rest comes from the report");
}

#[test]
fn shipped_experiment_files_load_and_run() {
    use grove::task::runner::experiment::{Experiment, load_ron};
    let mut seen = 0;
    for entry in std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("examples")).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().and_then(|e| e.to_str()) != Some("ron") {
            continue;
        }
        let (command, value) = load_ron(&p).unwrap_or_else(|e| panic!("{}: {e:#}", p.display()));
        let exp = Experiment::from_parts(&command, value, &p.display().to_string()).unwrap_or_else(|e| panic!("{e:#}"));
        if p.ends_with("w1-pagie1.ron") {
            let Experiment::Evolve(s) = &exp else { panic!("W1 is a regression") };
            assert_eq!((s.engine.pop_size, s.engine.generations), (5000, 100));
            assert_eq!(s.functions.as_deref(), Some("add,sub,mul,div,sin,cos,tan"));
            assert_eq!(s.data, "builtin:pagie1:1024");
        }
        if p.ends_with("w5-iris.ron") {
            let Experiment::Classify(s) = &exp else { panic!("W5 is a classification") };
            assert_eq!((s.engine.pop_size, s.engine.generations, s.engine.max_len), (5000, 40, 64));
        }
        if p.ends_with("w6-hopper.ron") {
            let Experiment::Control(s) = &exp else { panic!("W6 is a control run") };
            assert_eq!((s.env.as_str(), s.engine.pop_size, s.engine.generations, s.episodes), ("hopper", 5000, 100, 4));
        }
        seen += 1;
        // Each runs, shrunk (a control run to short episodes too).
        let mut args = vec!["run", s(&p), "--pop", "40", "--gens", "2", "-q"];
        if exp.command() == "control" {
            args.extend(["--set", "episodes=1", "--set", "episode_steps=20", "--set", "test_episodes=1"]);
        }
        assert_ok(&grove(&args));
    }
    assert!(seen >= 3, "examples/*.ron");
}

#[test]
fn experiment_files_take_the_command_line_defaults_and_flags_override_them() {
    use grove::task::runner::experiment::{Experiment, parse_ron};
    // A nested block keeps the defaults of the fields it leaves out.
    let (c, v) = parse_ron("// comment\nEvolve(functions: \"add\", engine: (pop_size: 77))", "t").unwrap();
    let Experiment::Evolve(e) = Experiment::from_parts(&c, v, "t").unwrap() else { panic!() };
    assert_eq!((e.engine.pop_size, e.engine.generations, e.engine.max_len), (77, 100, 128));
    // The same as `grove evolve --functions add --pop 77`.
    let cli = <grove::cli::Cli as clap::Parser>::try_parse_from(["grove", "evolve", "--functions", "add", "--pop", "77", "--device", "auto"]).unwrap();
    let grove::cli::Command::Evolve(args) = cli.command else { panic!() };
    assert_eq!(args.settings().unwrap(), e);
    let (c, v) = parse_ron("Classify()", "t").unwrap();
    let Experiment::Classify(k) = Experiment::from_parts(&c, v, "t").unwrap() else { panic!() };
    let cli = <grove::cli::Cli as clap::Parser>::try_parse_from(["grove", "classify", "--device", "auto"]).unwrap();
    let grove::cli::Command::Classify(args) = cli.command else { panic!() };
    assert_eq!(args.settings().unwrap(), k);
    let (c, v) = parse_ron("Classify(grammar: \"grammars/classify.bnf\", engine: (seed: 4))", "t").unwrap();
    let Experiment::Classify(k) = Experiment::from_parts(&c, v, "t").unwrap() else { panic!() };
    let cli = <grove::cli::Cli as clap::Parser>::try_parse_from(["grove", "classify", "-g", "grammars/classify.bnf", "--seed", "4", "--device", "auto"]).unwrap();
    let grove::cli::Command::Classify(args) = cli.command else { panic!() };
    assert_eq!(args.settings().unwrap(), k, "a grammar replaces the default function set");

    let d = dir("override");
    let f = d.join("e.ron");
    std::fs::write(&f, "Evolve(data: \"builtin:koza1\", functions: \"add,mul\", engine: (pop_size: 30, generations: 2))").unwrap();
    let r = d.join("r.json");
    assert_ok(&grove(&["run", s(&f), "--gens", "3", "--set", "engine.tournament=5", "--set", "regression.metric=\"rmse\"", "--report", s(&r), "-q"]));
    let rep = read_json(&r);
    assert_eq!(rep["settings"]["engine"]["generations"], 3);
    assert_eq!(rep["settings"]["engine"]["tournament"], 5);
    assert_eq!(rep["settings"]["engine"]["pop_size"], 30);
    assert_eq!(rep["settings"]["regression"]["metric"], "rmse");
}

#[test]
fn bad_experiments_and_checkpoints_give_one_clear_line() {
    let d = dir("bad");
    let file = |name: &str, body: &str| {
        let p = d.join(name);
        std::fs::write(&p, body).unwrap();
        p
    };
    let cases = [
        (file("a.ron", "Evolve(functions: \"add\", engine: (popsize: 3))"), vec!["engine.popsize", "pop_size"]),
        (file("b.ron", "Evolve(functions: \"add\", wings: 2)"), vec!["`wings`"]),
        (file("c.ron", "Evolve(functions: \"add\", regression: (metric: Mse))"), vec!["regression.metric", "as strings"]),
        (file("d.ron", "Swim(env: \"x\")"), vec!["Evolve, Classify", "Swim"]),
        (file("e.ron", "Evolve(functions: \"add\","), vec!["e.ron:1:"]),
        (file("f.ron", "Evolve(functions: \"add\", engine: (pop_size: 1))"), vec!["engine.pop_size", "at least 2"]),
        (file("g.ron", "Evolve(data: \"builtin:pagie1\", grammar: \"grammars/regression.bnf\", functions: \"add\")"), vec!["not both"]),
        (file("h.ron", "Classify(test_fraction: 1.5)"), vec!["test_fraction"]),
    ];
    for (p, needles) in &cases {
        assert_one_line_error(&grove(&["run", s(p), "-q"]), needles);
    }
    assert_one_line_error(&grove(&["run", "no/such.ron"]), &["cannot read the experiment file no/such.ron"]);
    assert_one_line_error(&grove(&["run"]), &["give an experiment file"]);
    let good = file("ok.ron", "Evolve(functions: \"add\", engine: (pop_size: 10, generations: 1))");
    assert_one_line_error(&grove(&["run", s(&good), "--set", "engine"]), &["FIELD=VALUE"]);
    assert_one_line_error(&grove(&["run", s(&good), "--set", "engine.pop_size.x=3"]), &["not a block"]);
    // Reports and checkpoints.
    let not_json = file("r.json", "{\"settings\": ");
    assert_one_line_error(&grove(&["run", "--from", s(&not_json)]), &["not a JSON report"]);
    let no_cmd = file("r2.json", "{\"settings\": {}}");
    assert_one_line_error(&grove(&["run", "--from", s(&no_cmd)]), &["no `command`"]);
    assert_one_line_error(&grove(&["run", "--resume", s(&no_cmd)]), &["not a checkpoint"]);
    assert_one_line_error(&grove(&["run", "--resume", s(&not_json)]), &["cut short"]);
    let ck = d.join("ok.ckpt");
    assert_ok(&grove(&["run", s(&good), "--gens", "3", "--checkpoint", s(&ck), "--checkpoint-every", "1", "-q"]));
    assert_one_line_error(&grove(&["run", "--resume", s(&ck), "--pop", "20"]), &["own settings"]);
    assert_one_line_error(&grove(&["run", "--resume", s(&ck), "--gens", "1", "-q"]), &["does not fit"]);
    assert_one_line_error(&grove(&["run", s(&good), "--checkpoint-every", "0", "--checkpoint", s(&ck)]), &["--checkpoint-every"]);
    // --verbose: a line per generation and each checkpoint; --quiet: nothing on standard error.
    let out = grove(&["run", s(&good), "--gens", "3", "--checkpoint", s(&ck), "--checkpoint-every", "1", "-v"]);
    assert_ok(&out);
    let e = text(&out.stderr);
    assert_eq!(e.lines().filter(|l| l.starts_with("gen ")).count(), 4, "{e}");
    assert_eq!(e.lines().filter(|l| l.starts_with("checkpoint before generation")).count(), 3, "{e}");
    let out = grove(&["run", s(&good), "-q", "--device", "cpu"]);
    assert_ok(&out);
    assert_eq!(text(&out.stderr), "");
    assert_eq!(grove(&["run", s(&good), "-q", "-v"]).status.code(), Some(2), "--quiet and --verbose conflict");
    // Clap's usage errors exit with 2.
    assert_eq!(grove(&["run", s(&good), "--from", s(&no_cmd)]).status.code(), Some(2));
}

/// Checks a PNG's signature and header, and that it decodes to the size it claims.
fn assert_png(p: &Path) {
    let b = std::fs::read(p).unwrap();
    assert!(b.starts_with(b"\x89PNG\r\n\x1a\n"), "{}: not a PNG", p.display());
    assert_eq!(&b[12..16], b"IHDR", "{}", p.display());
    let w = u32::from_be_bytes(b[16..20].try_into().unwrap());
    let h = u32::from_be_bytes(b[20..24].try_into().unwrap());
    assert!(w >= 400 && h >= 300, "{}: {w}×{h}", p.display());
    assert_eq!(&b[b.len() - 8..b.len() - 4], b"IEND", "{}: cut short", p.display());
}

/// Checks an SVG is one well-formed `<svg>` element with drawing and text in it.
fn assert_svg(p: &Path) {
    let t = std::fs::read_to_string(p).unwrap();
    let body = t.trim();
    assert!(body.starts_with("<svg") || body.starts_with("<?xml"), "{}", p.display());
    assert!(body.ends_with("</svg>"), "{}", p.display());
    assert_eq!(body.matches("<svg").count(), 1);
    assert!(body.contains("<text") && (body.contains("<polyline") || body.contains("<rect") || body.contains("<circle")), "{}", p.display());
    // Tags balance: every opened element is closed or self-closing.
    let opened = body.matches('<').count() - body.matches("</").count() - body.matches("<?").count();
    let closed = body.matches("</").count() + body.matches("/>").count();
    assert_eq!(opened, closed, "{}: unbalanced tags", p.display());
}

#[test]
fn plots_render_for_each_task_and_grove_plot_redraws_them() {
    let d = dir("plots");
    let (r1, r2) = (d.join("reg.json"), d.join("cls.json"));
    let mut args = vec!["evolve", "--gens", "5", "--test-fraction", "0.25", "--report", s(&r1), "--plots"];
    let reg_dir = d.join("reg");
    args.push(s(&reg_dir));
    args.extend(SMALL_RUN);
    assert_ok(&grove(&args));
    let cls_dir = d.join("cls");
    assert_ok(&grove(&["classify", "--data", "builtin:iris", "--pop", "50", "--gens", "3", "--report", s(&r2), "--plots", s(&cls_dir), "-q"]));
    for (dir, names) in [(&reg_dir, ["fitness", "pareto", "predicted"]), (&cls_dir, ["fitness", "pareto", "confusion"])] {
        for n in names {
            assert_png(&dir.join(format!("{n}.png")));
            assert_svg(&dir.join(format!("{n}.svg")));
        }
    }
    // The report holds what the fitness plot draws: best, mean, mean and median size.
    for g in read_json(&r1)["generations"].as_array().unwrap() {
        for key in ["best", "mean", "mean_size", "median_size"] {
            assert!(g[key].as_f64().is_some_and(|v| v > 0.0), "{key} in {g}");
        }
    }
    let again = d.join("again");
    let out = grove(&["plot", s(&r1), "--out", s(&again)]);
    assert_ok(&out);
    assert_eq!(text(&out.stdout).lines().count(), 6, "{}", text(&out.stdout));
    assert_eq!(std::fs::read(again.join("fitness.svg")).unwrap(), std::fs::read(reg_dir.join("fitness.svg")).unwrap());
    assert_one_line_error(&grove(&["plot", "no/such.json"]), &["cannot read the report"]);
    let bad = d.join("bad.json");
    std::fs::write(&bad, "{}").unwrap();
    assert_one_line_error(&grove(&["plot", s(&bad)]), &["no `generations`"]);
    // A control report (returns, higher is better; `grove control` writes these) gets the
    // fitness curve as returns.
    let ctl = d.join("control.json");
    let gens: Vec<Value> = (0..5).map(|g| serde_json::json!({"generation": g, "best_return": 10.0 * g as f64 - 3.0,
        "mean_return": 2.0 * g as f64 - 8.0, "mean_size": 12.0, "invalid": 0, "seconds": 0.1})).collect();
    std::fs::write(&ctl, serde_json::json!({"settings": {"env": "swimmer"}, "generations": gens, "policy": {}}).to_string()).unwrap();
    let out = grove(&["plot", s(&ctl), "--out", s(&d.join("ctl"))]);
    assert_ok(&out);
    assert_eq!(text(&out.stdout).lines().count(), 2, "{}", text(&out.stdout));
    assert_png(&d.join("ctl/fitness.png"));
    let svg = std::fs::read_to_string(d.join("ctl/fitness.svg")).unwrap();
    assert!(svg.contains("return over generations") && svg.contains("control · swimmer"), "the axis says return");
    // A report whose data file is gone still gets its other plots, and a note says why one is missing.
    let mut moved = read_json(&r1);
    moved["settings"]["data"] = "gone/data.csv".into();
    let moved_path = d.join("moved.json");
    std::fs::write(&moved_path, moved.to_string()).unwrap();
    let out = grove(&["plot", s(&moved_path), "--out", s(&d.join("moved"))]);
    assert_ok(&out);
    assert_eq!(text(&out.stdout).lines().count(), 4, "fitness and pareto");
    let e = text(&out.stderr);
    assert!(e.starts_with("note: no predicted-against-actual plot") && e.contains("gone/data.csv") && e.lines().count() == 1, "{e}");
}

#[test]
fn the_hall_of_fame_is_a_pareto_front_of_error_against_size() {
    let d = dir("hof");
    let (csv, rep) = (d.join("hof.csv"), d.join("r.json"));
    // The training minimum is returned (`--select train`), so it is the front's last entry.
    let mut args = vec!["evolve", "--gens", "10", "--hall-of-fame", s(&csv), "--report", s(&rep), "--select", "train"];
    args.extend(SMALL_RUN);
    assert_ok(&grove(&args));
    let t = std::fs::read_to_string(&csv).unwrap();
    let mut lines = t.lines();
    assert_eq!(lines.next(), Some("complexity,loss,equation,latex,sympy,validation_loss,score,selected,description_length,cv_loss"));
    let r = read_json(&rep);
    let rows = r["hall_of_fame"].as_array().unwrap();
    assert_eq!(rows.len(), t.lines().count() - 1);
    assert!(rows.len() >= 2, "{t}");
    for w in rows.windows(2) {
        assert!(w[0]["complexity"].as_u64() < w[1]["complexity"].as_u64());
        assert!(w[0]["loss"].as_f64() > w[1]["loss"].as_f64(), "larger programs must be better: {t}");
    }
    // The last entry is the run's best program (no parsimony: fitness is the loss).
    let last = rows.last().unwrap();
    assert_eq!(last["loss"].as_f64(), r["best"]["fitness"].as_f64());
    assert_eq!(last["equation"], r["best"]["infix"]);
    assert_eq!(last["complexity"], r["best"]["size"]);
    // The sympy column parses with sympy (given render's prelude) and evaluates as grove does.
    let has_sympy = Command::new("python3").args(["-c", "import sympy"]).output().is_ok_and(|o| o.status.success());
    if !has_sympy {
        eprintln!("skipped: python3 with sympy is not installed");
        return;
    }
    let pts = d.join("pts.csv");
    std::fs::write(&pts, "x0,x1\n0.5,-1.5\n2,3\n-4,0.25\n").unwrap();
    let want: Vec<f64> = grove_predictions(&rep, &pts).iter().map(|p| p.parse().unwrap()).collect();
    let script = format!(
        "import csv, sympy\nenv = {{'sympy': sympy}}\nexec({:?}, env)\nrows = list(csv.DictReader(open({:?})))\n\
         for r in rows:\n    sympy.sympify(r['sympy'], locals=env)\n\
         e = sympy.sympify(rows[-1]['sympy'], locals=env)\nx0, x1 = sympy.symbols('x0 x1')\n\
         for a, b in [(0.5, -1.5), (2, 3), (-4, 0.25)]:\n    print(float(e.subs({{x0: a, x1: b}})))\n",
        grove::program::render::SYMPY_PRELUDE,
        s(&csv)
    );
    let out = Command::new("python3").args(["-c", &script]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let got: Vec<f64> = text(&out.stdout).lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(got.len(), 3);
    for (g, w) in got.iter().zip(&want) {
        assert!(close(*g, *w), "sympy {g} vs grove {w}");
    }
}

/// Runs `grove predict` on `csv` and returns its predictions.
fn grove_predictions(report: &Path, csv: &Path) -> Vec<String> {
    let out = grove(&["predict", "--model", s(report), "--data", s(csv)]);
    assert_ok(&out);
    text(&out.stdout).lines().skip(1).map(str::to_string).collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-3 * a.abs().max(b.abs()) + 1e-4
}

#[test]
fn exported_python_and_c_agree_with_the_interpreter() {
    let d = dir("export");
    let rep = d.join("reg.json");
    let mut args = vec!["evolve", "--gens", "6", "--functions", "add,sub,mul,div,sin,cos,exp,plog,sqrt,aq,square", "--report", s(&rep)];
    args.extend(["--data", "builtin:pagie1:64", "--pop", "200", "--seed", "3", "-q"]);
    assert_ok(&grove(&args));
    let rows: Vec<Vec<f64>> = vec![vec![0.0, 0.0], vec![1.5, -2.0], vec![-4.25, 3.0], vec![0.3, 0.7], vec![5.0, -5.0]];
    let csv = d.join("pts.csv");
    std::fs::write(&csv, format!("x0,x1\n{}", rows.iter().map(|r| format!("{},{}\n", r[0], r[1])).collect::<String>())).unwrap();
    let want: Vec<f64> = grove_predictions(&rep, &csv).iter().map(|p| p.parse().unwrap()).collect();
    for (lang, file) in [("python", "m.py"), ("c", "m.c"), ("rust", "m.rs")] {
        let out = grove(&["export", "--model", s(&rep), "--lang", lang, "--out", s(&d.join(file))]);
        assert_ok(&out);
    }
    let rust = std::fs::read_to_string(d.join("m.rs")).unwrap();
    assert!(rust.contains("pub fn predict(x0: f32, x1: f32) -> f64"), "{rust}");
    let rustc = Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()))
        .args(["--edition", "2021", "--crate-type", "lib", "-o", s(&d.join("m.rlib")), s(&d.join("m.rs"))])
        .output();
    match rustc {
        Ok(o) => assert!(o.status.success(), "the exported Rust does not compile: {}", text(&o.stderr)),
        Err(_) => eprintln!("skipped: rustc is not on the path"),
    }
    if let Some(got) = run_python(&d.join("m.py"), &rows) {
        for (g, w) in got.iter().zip(&want) {
            assert!(close(g.parse().unwrap(), *w), "python {g} vs grove {w}");
        }
    }
    if let Some(got) = run_c(&d.join("m.c"), &rows, "%.9g") {
        assert_eq!(got.len(), rows.len());
        for (g, w) in got.iter().zip(&want) {
            assert!(close(g.parse().unwrap(), *w), "C {g} vs grove {w}");
        }
    }
    // A classifier (multi-output, standardised features) predicts the same classes.
    let cls = d.join("cls.json");
    assert_ok(&grove(&["classify", "--data", "builtin:iris", "--pop", "100", "--gens", "4", "--report", s(&cls), "-q"]));
    let iris = d.join("iris.csv");
    let rows: Vec<Vec<f64>> = vec![vec![5.1, 3.5, 1.4, 0.2], vec![6.4, 3.2, 4.5, 1.5], vec![6.3, 3.3, 6.0, 2.5], vec![5.9, 3.0, 5.1, 1.8]];
    std::fs::write(&iris, format!("sepal_length_cm,sepal_width_cm,petal_length_cm,petal_width_cm\n{}", rows.iter().map(|r| format!("{},{},{},{}\n", r[0], r[1], r[2], r[3])).collect::<String>())).unwrap();
    let want = grove_predictions(&cls, &iris);
    let classes: Vec<String> = serde_json::from_value(read_json(&cls)["classes"].clone()).unwrap();
    for (lang, file) in [("python", "c.py"), ("c", "c.c")] {
        assert_ok(&grove(&["export", "--model", s(&cls), "--lang", lang, "--out", s(&d.join(file))]));
    }
    if let Some(got) = run_python(&d.join("c.py"), &rows) {
        let got: Vec<String> = got.iter().map(|k| classes[k.parse::<usize>().unwrap()].clone()).collect();
        assert_eq!(got, want);
    }
    if let Some(got) = run_c(&d.join("c.c"), &rows, "%d") {
        let got: Vec<String> = got.iter().map(|k| classes[k.parse::<usize>().unwrap()].clone()).collect();
        assert_eq!(got, want);
    }
    assert_one_line_error(&grove(&["export", "--model", s(&csv), "--lang", "c"]), &["not JSON"]);
}

#[test]
fn render_draws_robots_as_svg_strips_and_gif_animations() {
    let d = dir("render");
    let acts = d.join("acts.csv");
    std::fs::write(&acts, "thigh,leg,foot\n".to_string() + &"0.5,-0.5,0.8\n".repeat(12)).unwrap();
    let svg = d.join("hop.svg");
    let out = grove(&["render", "--env", "hopper", "--actions", s(&acts), "--out", s(&svg), "--frames", "4", "--no-noise"]);
    assert_ok(&out);
    assert!(text(&out.stdout).contains("hopper (brax): 12 control steps"), "{}", text(&out.stdout));
    assert_svg(&svg);
    let t = std::fs::read_to_string(&svg).unwrap();
    assert_eq!(t.matches("step ").count(), 4, "four labelled frames");
    // The swimmer has no capsules in its description: its rods come from the inertias.
    let gif = d.join("swim.gif");
    assert_ok(&grove(&["render", "--env", "swimmer", "--steps", "9", "--every", "3", "--out", s(&gif)]));
    let bytes = std::fs::read(&gif).unwrap();
    assert!(bytes.starts_with(b"GIF89a") && bytes.ends_with(b";"), "not a complete GIF");
    let mut opts = gif::DecodeOptions::new();
    opts.set_color_output(gif::ColorOutput::RGBA);
    let mut dec = opts.read_info(std::fs::File::open(&gif).unwrap()).unwrap();
    let (w, h) = (dec.width() as usize, dec.height() as usize);
    let mut frames = 0;
    let mut coloured = 0;
    while let Some(f) = dec.read_next_frame().unwrap() {
        frames += 1;
        assert_eq!((f.width as usize, f.height as usize), (w, h));
        coloured += f.buffer.chunks(4).filter(|p| p[0] != p[1] || p[1] != p[2]).count();
    }
    assert_eq!(frames, 4, "steps 0, 3, 6 and 9");
    assert!(coloured > 100, "the bodies are drawn");
    let png = d.join("walker.png");
    assert_ok(&grove(&["render", "--env", "walker2d", "--steps", "3", "--out", s(&png)]));
    assert_png(&png);
    // Bad input.
    assert_one_line_error(&grove(&["render", "--env", "hopper", "--out", s(&d.join("x.jpg"))]), &[".svg", ".gif"]);
    assert_one_line_error(&grove(&["render", "--env", "hopper", "--actions", s(&acts), "--steps", "20", "--out", s(&svg)]), &["--steps 20", "12 rows"]);
    assert_one_line_error(&grove(&["render", "--env", "ant", "--out", s(&svg)]), &["unknown environment `ant`"]);
    assert_one_line_error(&grove(&["render", "--out", s(&svg)]), &["--env ENV", "--policy REPORT"]);
    let rep = d.join("r.json");
    std::fs::write(&rep, "{\"command\": \"evolve\"}").unwrap();
    assert_one_line_error(&grove(&["render", "--env", "hopper", "--policy", s(&rep), "--out", s(&svg)]), &["grove control", "--actions"]);
}

#[test]
fn the_command_line_definition_is_consistent() {
    // clap checks these only in debug builds; CI tests release builds.
    <grove::cli::Cli as clap::CommandFactory>::command().debug_assert();
}

// Issue 28: an empty tree in an edited report predicted NaN with exit 0 and exported a function
// that disagreed; 1e39 predicted finite-looking numbers; a bad variable index or output slot
// was misreported; a 10 MB value was echoed whole.
#[test]
fn every_tree_read_from_a_report_is_checked_in_one_line() {
    let d = dir("edited");
    let (data, report) = (d.join("ab.csv"), d.join("r.json"));
    std::fs::write(&data, (0..20).map(|i| format!("{i},{},{}\n", i % 3, 2 * i)).fold("a,b,y\n".to_string(), |t, l| t + &l)).unwrap();
    assert_ok(&grove(&["evolve", "--data", s(&data), "--functions", "add,mul", "--pop", "20", "--gens", "2", "-q", "--report", s(&report)]));
    let huge = "7".repeat(10_000_000);
    let cases: [(&str, Value, &[&str]); 8] = [
        ("empty", serde_json::json!({"nodes": []}), &["the tree is empty"]),
        ("index", serde_json::json!({"nodes": [["var", 2.0, 0]]}), &["node 0: variable index 2, but the program reads 2 variables (indices 0 to 1)"]),
        ("fraction", serde_json::json!({"nodes": [["var", 0.5, 0]]}), &["variable index 0.5"]),
        ("overflow", serde_json::json!({"nodes": [["add", 0.0, 0], ["const", 1e39, 0], ["var", 0.0, 0]]}), &["node 1: constant inf", "finite f32"]),
        ("slot", serde_json::json!({"nodes": [["var", 0.0, 5]]}), &["node 0: output slot 4 in a program with one output"]),
        ("classes", serde_json::json!({"kind": "classification", "classes": ["a"]}), &["1 class names for 1 output(s)"]),
        ("huge", serde_json::json!({"nodes": [["const", huge, 0]]}), &["more characters"]),
        ("name", serde_json::json!({"nodes": [[huge, 0.0, 0]]}), &["unknown operator", "more characters"]),
    ];
    for (name, edit, needles) in cases {
        let mut r = read_json(&report);
        for (k, v) in edit.as_object().unwrap() {
            r["model"][k] = v.clone();
        }
        let p = d.join(format!("{name}.json"));
        std::fs::write(&p, r.to_string()).unwrap();
        for args in [vec!["predict", "--model", s(&p), "--data", s(&data)], vec!["export", "--model", s(&p), "--lang", "python"]] {
            let out = grove(&args);
            assert_one_line_error(&out, needles);
            assert!(out.stderr.len() < 2000, "{name}: {} bytes of error", out.stderr.len());
            assert!(out.stdout.is_empty(), "{name}: {}", text(&out.stdout));
        }
    }
}

// Issue 28: column names with spaces, commas or leading digits were printed raw into the
// equations and the hall of fame's sympy column (sympy could not parse it); `export` renamed
// them its own way.
#[test]
fn equations_name_columns_as_identifiers_that_sympy_and_export_agree_on() {
    let d = dir("names");
    let (data, report, fame, py) = (d.join("names.csv"), d.join("r.json"), d.join("fame.csv"), d.join("m.py"));
    let rows: String = (0..30).map(|i| format!("{i},{},{},{}\n", i % 4, 30 - i, i * (i % 4) + 30 - i)).collect();
    std::fs::write(&data, format!("my col,2nd,lambda,y\n{rows}")).unwrap();
    let args = ["evolve", "--data", s(&data), "--functions", "add,mul,sub", "--pop", "200", "--gens", "8", "--seed", "2", "-q"];
    let mut a = args.to_vec();
    a.extend(["--report", s(&report), "--hall-of-fame", s(&fame)]);
    assert_ok(&grove(&a));
    let r = read_json(&report);
    let ids = ["x0__my_col", "x1__2nd", "x2__lambda"];
    let mut texts: Vec<String> = ["infix", "latex", "sympy"].iter().map(|k| r["best"][k].as_str().unwrap().to_string()).collect();
    for row in r["hall_of_fame"].as_array().unwrap() {
        texts.extend(["equation", "sympy"].iter().map(|k| row[k].as_str().unwrap().to_string()));
    }
    let mut seen = std::collections::BTreeSet::new();
    for t in texts.iter().filter(|t| !t.contains("mathrm")) {
        assert!(!t.contains("my col") && !t.contains(" 2nd") && !t.starts_with("2nd"), "{t}");
        for w in t.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.')).filter(|w| !w.is_empty()) {
            let number = w.parse::<f64>().is_ok() || w.starts_with(|c: char| c.is_ascii_digit());
            assert!(number || w.starts_with(|c: char| c.is_ascii_alphabetic()), "`{w}` in {t}");
            if ids.contains(&w) {
                seen.insert(w.to_string());
            }
        }
    }
    assert!(!seen.is_empty(), "no variable in {texts:?}");
    // The exported function's parameters are the same names.
    assert_ok(&grove(&["export", "--model", s(&report), "--lang", "python", "--out", s(&py)]));
    assert!(std::fs::read_to_string(&py).unwrap().contains(&format!("def predict({}):", ids.join(", "))));
    // sympy parses every row of the sympy column into the same symbols.
    let has_sympy = Command::new("python3").args(["-c", "import sympy"]).output().is_ok_and(|o| o.status.success());
    if !has_sympy {
        eprintln!("skipped the sympy part: python3 with sympy is not installed");
        return;
    }
    let script = format!(
        "import csv, sympy\nenv = {{'sympy': sympy}}\nexec({:?}, env)\n\
         for r in csv.DictReader(open({:?})):\n    e = sympy.sympify(r['sympy'], locals=env)\n    print(' '.join(sorted(str(x) for x in e.free_symbols)))\n",
        grove::program::render::SYMPY_PRELUDE,
        s(&fame)
    );
    let out = Command::new("python3").args(["-c", &script]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    for line in text(&out.stdout).lines() {
        assert!(line.split_whitespace().all(|w| ids.contains(&w)), "sympy read symbols {line}");
    }
}
