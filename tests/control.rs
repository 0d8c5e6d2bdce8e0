//! `grove control` and `grove rollout --policy` as a user meets them: a run that prints a
//! policy and its return and writes a report whose policy replays to the same return, every
//! shipped control grammar usable with its environment, and one-line errors for bad input.
//! Runs are tiny (a few thousand env steps) and on the CPU.

use std::process::{Command, Output};

fn grove(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_grove")).args(args).current_dir(env!("CARGO_MANIFEST_DIR")).output().expect("grove runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn temp(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("grove-control-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

const SMALL: &[&str] = &["--device", "cpu", "--pop", "8", "--gens", "2", "--episode-steps", "20", "--test-episodes", "2", "--quiet"];

#[test]
fn control_prints_a_policy_and_its_report_replays() {
    let report = temp("swimmer.json");
    let mut args = vec!["control", "--env", "swimmer", "--seed", "4", "--report", report.to_str().unwrap()];
    args.extend_from_slice(SMALL);
    let out = grove(&args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(s.contains("swimmer (brax), 2 actuators, 8 observations"), "{s}");
    assert!(s.lines().any(|l| l.starts_with("rot2") && l.contains("tanh(")), "{s}");
    assert!(s.contains("train return") && s.contains("test return"), "{s}");
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(r["generations"].as_array().unwrap().len(), 3);
    assert_eq!(r["policy"]["actuators"], serde_json::json!(["rot2", "rot3"]));
    assert_eq!(r["env"]["observations"].as_array().unwrap().len(), 8);
    let train = r["train"]["returns"][0].as_f64().unwrap();
    assert_eq!(r["best"]["fitness"].as_f64().unwrap(), -train, "fitness is minus the mean return");
    // Training episode 0 starts from reset (seed, 0, 0): `grove rollout --seed` replays it.
    let out = grove(&["rollout", "--policy", report.to_str().unwrap(), "--seed", "4", "--steps", "20"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let line = text(&out.stdout);
    assert!(line.starts_with(&format!("swimmer (brax): return {train:.6} over 20 steps")), "{line} vs {train}");
    // A policy cannot drive another body.
    let out = grove(&["rollout", "--policy", report.to_str().unwrap(), "--env", "hopper"]);
    assert_eq!(out.status.code(), Some(1));
    let e = text(&out.stderr);
    assert!(e.contains("evolved for swimmer (8 observations, 2 actuators); hopper (brax) has 11 and 3"), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
    // grove render draws the same policy: its return (stepped in f64) is the f32 replay's to
    // a few digits, and the file is an SVG.
    let svg = temp("swimmer.svg");
    let out = grove(&["render", "--env", "swimmer", "--policy", report.to_str().unwrap(), "--seed", "4", "--steps", "20", "--out", svg.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    let ret: f64 = said.split("return ").nth(1).and_then(|r| r.split(';').next()).and_then(|r| r.trim().parse().ok()).unwrap_or_else(|| panic!("{said}"));
    assert!((ret - train).abs() <= 1e-3 * train.abs().max(1.0), "render's return {ret} against the replay's {train}");
    let drawn = std::fs::read_to_string(&svg).unwrap();
    assert!(drawn.starts_with("<svg") || drawn.contains("<svg"), "not an SVG");
    // grove plot draws the return over generations from the report.
    let dir = temp("plots");
    let out = grove(&["plot", report.to_str().unwrap(), "--out", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let png = std::fs::read(dir.join("fitness.png")).unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 1000, "fitness.png is not a PNG");
    let plot = std::fs::read_to_string(dir.join("fitness.svg")).unwrap();
    assert!(plot.contains("<svg") && plot.contains("return over generations"), "the control plot shows returns");
}

#[test]
fn shipped_control_grammars_run_with_their_env() {
    for (env, grammar) in [
        ("swimmer", "grammars/swimmer.bnf"),
        ("hopper", "grammars/hopper.bnf"),
        ("walker2d", "grammars/walker2d.bnf"),
        ("half_cheetah", "grammars/half_cheetah.bnf"),
        ("hopper", "grammars/control.bnf"),
    ] {
        let args = ["control", "--env", env, "--grammar", grammar, "--device", "cpu", "--pop", "8", "--gens", "1", "--episode-steps", "5", "--test-episodes", "1", "-q"];
        let out = grove(&args);
        assert!(out.status.success(), "{env} {grammar}: {}", text(&out.stderr));
        assert!(text(&out.stdout).contains("test return"), "{env} {grammar}: {}", text(&out.stdout));
    }
}

#[test]
fn control_rejects_bad_input_with_one_clear_line() {
    let one_line = |args: &[&str], want: &str| {
        let out = grove(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", text(&out.stderr));
        let e = text(&out.stderr);
        assert!(e.contains(want), "{args:?}: `{e}` lacks `{want}`");
        assert_eq!(e.lines().count(), 1, "{args:?}: {e}");
        assert!(!e.contains("panicked"));
    };
    one_line(&["control", "--env", "ant", "--device", "cpu"], "unknown environment `ant`");
    one_line(&["control", "--env", "swimmer", "--profile", "mjx", "--device", "cpu"], "no profile `mjx`");
    let bad = temp("bad.ron");
    std::fs::write(&bad, "(name: \"x\", plane: XY, wings: 2)").unwrap();
    one_line(&["control", "--env", bad.to_str().unwrap(), "--device", "cpu"], "bad.ron:1:");
    one_line(&["control", "--env", "hopper", "--grammar", "grammars/swimmer.bnf", "--device", "cpu"], "out(2, …) is missing");
    one_line(&["control", "--env", "swimmer", "--grammar", "grammars/regression.bnf", "--device", "cpu"], "no out(K, …) output nodes");
    one_line(&["control", "--env", "swimmer", "--episodes", "0", "--device", "cpu"], "--episodes (episodes) must be at least 1");
    one_line(&["control", "--env", "swimmer", "--functions", "add,frob", "--device", "cpu"], "--functions");
    let no_policy = temp("no_policy.json");
    std::fs::write(&no_policy, "{\"settings\": {}}").unwrap();
    one_line(&["rollout", "--policy", no_policy.to_str().unwrap()], "has no `policy`");
    one_line(&["rollout", "--policy", "no/such/report.json"], "reading no/such/report.json");
    one_line(&["rollout"], "give --env ENV");
}
