//! `grove control` and `grove rollout --policy` as a user meets them: a run that prints a
//! policy and its return and writes a report whose policy replays to the same return, every
//! shipped control grammar usable with its environment, and one-line errors for bad input.
//! Runs are tiny (a few thousand env steps) and on the CPU.

mod support;
use support::{Device, assert_ok, control_experiment, dir, grove, interrupt_once_saved, read_json, s, scratch, text, without_timings, write_resealed};
use support::control_settings as cli_settings;

const SMALL: &[&str] = &["--device", "cpu", "--pop", "8", "--gens", "2", "--episode-steps", "20", "--test-episodes", "2", "--quiet"];

#[test]
fn control_prints_a_policy_and_its_report_replays() {
    let report = scratch().join("swimmer.json");
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
    // grove render draws the same episode: the policy plays in f32, as trained, so its return
    // is the replay's to the last digit; the environment comes from the report.
    let svg = scratch().join("swimmer.svg");
    let out = grove(&["render", "--policy", report.to_str().unwrap(), "--seed", "4", "--steps", "20", "--out", svg.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    assert!(said.starts_with(&format!("swimmer (brax): 20 control steps, return {train:.6};")), "{said} vs {train}");
    let drawn = std::fs::read_to_string(&svg).unwrap();
    assert!(drawn.starts_with("<svg") || drawn.contains("<svg"), "not an SVG");
    // grove plot draws the return over generations from the report.
    let dir = scratch().join("plots");
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
    let bad = scratch().join("bad.ron");
    std::fs::write(&bad, "(name: \"x\", plane: XY, wings: 2)").unwrap();
    one_line(&["control", "--env", bad.to_str().unwrap(), "--device", "cpu"], "bad.ron:1:");
    one_line(&["control", "--env", "hopper", "--grammar", "grammars/swimmer.bnf", "--device", "cpu"], "out(2, …) is missing");
    one_line(&["control", "--env", "swimmer", "--grammar", "grammars/regression.bnf", "--device", "cpu"], "no out(K, …) output nodes");
    one_line(&["control", "--env", "swimmer", "--episodes", "0", "--device", "cpu"], "--episodes (episodes) must be at least 1");
    one_line(&["control", "--env", "swimmer", "--functions", "add,frob", "--device", "cpu"], "--functions");
    let no_policy = scratch().join("no_policy.json");
    std::fs::write(&no_policy, "{\"settings\": {}}").unwrap();
    one_line(&["rollout", "--policy", no_policy.to_str().unwrap()], "has no `policy`");
    one_line(&["rollout", "--policy", "no/such/report.json"], "cannot read the report no/such/report.json");
    one_line(&["rollout"], "give --env ENV");
}

// Control runs kept like any other run: experiment files, reports repeated with --from,
// checkpoints, Ctrl-C and --resume, plots and the hall of fame (issue 15).

#[test]
fn control_experiment_files_take_grove_controls_settings_and_reports_repeat() {
    // The shipped W6 file is `grove control --env hopper` on a GPU.
    let w6 = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/w6-hopper.ron")).unwrap();
    assert_eq!(control_experiment(&w6), cli_settings(&["--env", "hopper", "--device", "auto"], true));
    // Fields left out take the command line's CPU defaults, or its GPU ones with device "cuda".
    assert_eq!(control_experiment("Control(env: \"hopper\")"), cli_settings(&["--env", "hopper", "--device", "auto"], false));
    assert_eq!(control_experiment("Control(env: \"hopper\", device: \"cuda\")"), cli_settings(&["--env", "hopper", "--device", "cuda"], true));
    assert_eq!(
        control_experiment("Control(env: \"swimmer\", grammar: \"grammars/swimmer.bnf\", engine: (seed: 3))"),
        cli_settings(&["--env", "swimmer", "-g", "grammars/swimmer.bnf", "--seed", "3", "--device", "auto"], false),
        "a grammar replaces the default function set"
    );

    // The file runs (shrunk), and its report repeats the run with --from.
    let d = dir("from");
    let (first, again, other) = (d.join("first.json"), d.join("again.json"), d.join("other.json"));
    let shrink = ["--pop", "12", "--gens", "2", "--set", "episodes=1", "--set", "episode_steps=20", "--set", "test_episodes=2"];
    let mut args = vec!["run", "examples/w6-hopper.ron", "--device", "cpu", "--report", s(&first), "-q"];
    args.extend(shrink);
    let out = grove(&args);
    assert_ok(&out);
    assert!(text(&out.stdout).contains("hopper (brax), 3 actuators, 11 observations"), "{}", text(&out.stdout));
    let a = read_json(&first);
    assert_eq!(a["command"], "control");
    assert_eq!(a["settings"]["env"], "hopper");
    assert_eq!((a["settings"]["engine"]["pop_size"].as_u64(), a["settings"]["episode_steps"].as_u64()), (Some(12), Some(20)));
    assert_ok(&grove(&["run", "--from", s(&first), "--report", s(&again), "-q"]));
    assert_eq!(without_timings(a.clone()), without_timings(read_json(&again)));
    // Flags and --set override the report's settings.
    assert_ok(&grove(&["run", "--from", s(&first), "--seed", "7", "--set", "episodes=2", "--report", s(&other), "-q"]));
    let o = read_json(&other);
    assert_eq!((o["settings"]["engine"]["seed"].as_u64(), o["settings"]["episodes"].as_u64()), (Some(7), Some(2)));
    assert_eq!(o["train"]["episodes"], 2);
    assert_eq!(o["settings"]["test_episodes"], 2, "the rest comes from the report");
}

#[test]
fn control_draws_plots_and_keeps_a_hall_of_fame() {
    let d = dir("plots");
    let (report, hof, plots) = (d.join("r.json"), d.join("hof.csv"), d.join("plots"));
    // The reported policy is the run's best (no validation episodes choose another), whose
    // row ends the hall of fame.
    let mut args = vec!["control", "--env", "swimmer", "--seed", "2", "--validation-episodes", "0", "--report", s(&report), "--plots", s(&plots), "--hall-of-fame", s(&hof)];
    args.extend_from_slice(SMALL);
    let out = grove(&args);
    assert_ok(&out);
    let said = text(&out.stdout);
    assert!(said.contains("hall of fame") && said.contains("pareto.svg"), "{said}");
    for name in ["fitness", "pareto"] {
        let png = std::fs::read(plots.join(format!("{name}.png"))).unwrap();
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 1000, "{name}.png is not a PNG");
        let svg = std::fs::read_to_string(plots.join(format!("{name}.svg"))).unwrap();
        assert!(svg.contains("<svg") && svg.trim_end().ends_with("</svg>"), "{name}.svg");
        assert!(svg.contains("control · swimmer"), "{name}.svg names the run");
    }
    assert!(std::fs::read_to_string(plots.join("fitness.svg")).unwrap().contains("return over generations"));
    assert!(std::fs::read_to_string(plots.join("pareto.svg")).unwrap().contains("best return of each size"));
    let r = read_json(&report);
    for g in r["generations"].as_array().unwrap() {
        for key in ["best_return", "mean_return", "mean_size", "median_size"] {
            assert!(g[key].as_f64().is_some(), "{key} in {g}");
        }
    }
    // The hall of fame: a front of size against minus the training return, ending at the best.
    let t = std::fs::read_to_string(&hof).unwrap();
    assert_eq!(t.lines().next(), Some("complexity,loss,equation,latex,sympy,validation_loss,score,selected,description_length,cv_loss"));
    let rows = r["hall_of_fame"].as_array().unwrap();
    assert_eq!(rows.len(), t.lines().count() - 1);
    assert!(!rows.is_empty());
    for w in rows.windows(2) {
        assert!(w[0]["complexity"].as_u64() < w[1]["complexity"].as_u64() && w[0]["loss"].as_f64() > w[1]["loss"].as_f64(), "{t}");
    }
    let last = rows.last().unwrap();
    assert_eq!(last["loss"].as_f64(), r["best"]["fitness"].as_f64());
    assert_eq!(last["complexity"], r["best"]["size"]);
    let actions: Vec<&str> = r["best"]["programs"].as_array().unwrap().iter().map(|p| p["action"].as_str().unwrap()).collect();
    assert_eq!(last["equation"].as_str().unwrap(), actions.join("; "));
}

#[test]
fn ctrl_c_saves_a_control_checkpoint_and_the_resumed_run_ends_as_an_uninterrupted_one() {
    let d = dir("ctrlc");
    let (full, resumed, ck) = (d.join("full.json"), d.join("resumed.json"), d.join("run.ckpt"));
    // Long enough (about a second) that the signal arrives mid-run.
    let run = ["control", "--env", "swimmer", "--device", "cpu", "--pop", "8", "--gens", "3000", "--episode-steps", "10", "--test-episodes", "2", "--seed", "5", "-q"];
    // On two threads here and one below: the result does not depend on the thread count.
    let mut whole = run.to_vec();
    whole.extend(["--threads", "2", "--report", s(&full)]);
    assert_ok(&grove(&whole));

    let mut interrupted = run.to_vec();
    interrupted.extend(["--threads", "1", "--checkpoint", s(&ck), "--checkpoint-every", "1"]);
    interrupt_once_saved(&interrupted, Device::Inherited, &ck);
    let saved = read_json(&ck);
    let at = saved["state"]["generation"].as_u64().unwrap();
    assert!((1..3000).contains(&at), "stopped at generation {at}");
    assert_eq!(saved["experiment"]["Control"]["env"], "swimmer");

    // The resumed run keeps saving to the same file; rarely here (each save is flushed to disk).
    assert_ok(&grove(&["run", "--resume", s(&ck), "--threads", "1", "--checkpoint-every", "1000", "--report", s(&resumed), "-q"]));
    let (a, b) = (read_json(&full), read_json(&resumed));
    // The env steps played go on from the checkpoint's count.
    assert_eq!(a["timing"]["env_steps"], b["timing"]["env_steps"]);
    let (a, b) = (without_timings(a), without_timings(b));
    assert_eq!(a["best"], b["best"]);
    assert!(a == b, "the resumed report differs from the uninterrupted one");
}

#[test]
fn control_checkpoints_every_n_generations_resume_exactly_for_grammar_policies() {
    let d = dir("ge");
    let (full, ck, resumed) = (d.join("full.json"), d.join("ge.ckpt"), d.join("resumed.json"));
    let (full_csv, resumed_csv) = (d.join("full.csv"), d.join("resumed.csv"));
    // Fresh starts every generation: the resumed run must play generation 4's starts, not 0's.
    let base = ["control", "--env", "hopper", "--grammar", "grammars/hopper.bnf", "--device", "cpu", "--pop", "10", "--episode-steps", "15", "--test-episodes", "2", "--threads", "1", "--fresh-starts", "-q"];
    let mut a = base.to_vec();
    a.extend(["--gens", "6", "--report", s(&full), "--hall-of-fame", s(&full_csv)]);
    assert_ok(&grove(&a));
    // Stop early by asking for fewer generations, then continue to 6 from the checkpoint.
    let mut b = base.to_vec();
    b.extend(["--gens", "4", "--checkpoint", s(&ck), "--checkpoint-every", "2"]);
    assert_ok(&grove(&b));
    let saved = read_json(&ck);
    assert_eq!(saved["state"]["generation"], 4, "the last checkpoint is taken before generation 4");
    assert!(saved["state"]["genomes"].is_array(), "GE saves genomes");
    assert_eq!(read_json(&full)["settings"]["fresh_starts"], true, "the report keeps --fresh-starts");
    assert!(saved["env_steps"][0].as_u64().is_some_and(|n| n > 0), "the env steps so far are saved");
    assert_ok(&grove(&["run", "--resume", s(&ck), "--gens", "6", "--report", s(&resumed), "--hall-of-fame", s(&resumed_csv), "-q"]));
    let (x, y) = (read_json(&full), read_json(&resumed));
    assert_eq!(x["timing"]["env_steps"], y["timing"]["env_steps"]);
    assert_eq!(without_timings(x), without_timings(y));
    assert_eq!(std::fs::read(&full_csv).unwrap(), std::fs::read(&resumed_csv).unwrap());
    let again = read_json(&ck);
    assert_eq!((again["state"]["generation"].as_u64(), again["checkpoint_every"].as_u64()), (Some(6), Some(2)));
}

#[test]
fn bad_control_experiments_and_checkpoints_give_one_clear_line() {
    let d = dir("bad");
    let one_line = |args: &[&str], want: &[&str]| {
        let out = grove(args);
        let e = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {e}");
        assert!(e.starts_with("error: "), "{args:?}: {e}");
        assert_eq!(e.trim().lines().count(), 1, "{args:?}: {e}");
        for w in want {
            assert!(e.contains(w), "{args:?}: `{e}` lacks `{w}`");
        }
    };
    let file = |name: &str, body: &str| {
        let p = d.join(name);
        std::fs::write(&p, body).unwrap();
        p
    };
    let cases = [
        (file("env.ron", "Control(env: \"ant\")"), vec!["unknown environment `ant`"]),
        (file("outs.ron", "Control(env: \"hopper\", grammar: \"grammars/swimmer.bnf\")"), vec!["swimmer.bnf", "out(2, …) is missing"]),
        (file("field.ron", "Control(env: \"hopper\", wings: 2)"), vec!["field.ron", "`wings`"]),
        (file("nested.ron", "Control(env: \"hopper\", trees: (p_ot: 0.5))"), vec!["trees.p_ot"]),
        (file("noenv.ron", "Control(episodes: 2)"), vec!["names its environment"]),
        (file("pop.ron", "Control(env: \"hopper\", engine: (pop_size: 1))"), vec!["engine.pop_size", "at least 2"]),
        (file("eps.ron", "Control(env: \"hopper\", episodes: 0)"), vec!["(episodes) must be at least 1"]),
        (file("cmd.ron", "Swim(env: \"hopper\")"), vec!["Evolve, Classify, Control"]),
    ];
    for (p, want) in &cases {
        one_line(&["run", s(p), "--device", "cpu", "-q"], want);
    }
    let ok = file("ok.ron", "Control(env: \"swimmer\", engine: (pop_size: 6, generations: 3), episode_steps: 5, test_episodes: 1)");
    one_line(&["run", s(&ok), "--data", "builtin:pagie1"], &["--data does not apply to a control experiment"]);

    // A report is repeated with --from, a checkpoint continued with --resume; each says so.
    let (report, ck) = (d.join("r.json"), d.join("c.ckpt"));
    assert_ok(&grove(&["run", s(&ok), "--device", "cpu", "--report", s(&report), "--checkpoint", s(&ck), "--checkpoint-every", "1", "-q"]));
    one_line(&["run", "--resume", s(&report)], &["not a checkpoint", "--from"]);
    one_line(&["run", "--from", s(&ck)], &["is a checkpoint", "grove run --resume"]);
    one_line(&["run", "--resume", s(&ck), "--set", "episodes=2"], &["own settings"]);
    // A checkpoint whose state is another task's (a regression's trees under control settings).
    let reg_ck = d.join("reg.ckpt");
    let reg = file("reg.ron", "Evolve(functions: \"add\", engine: (pop_size: 6, generations: 3))");
    assert_ok(&grove(&["run", s(&reg), "--device", "cpu", "--checkpoint", s(&reg_ck), "--checkpoint-every", "1", "-q"]));
    let mut mixed = read_json(&ck);
    mixed["state"] = read_json(&reg_ck)["state"].clone();
    let mixed_path = d.join("mixed.ckpt");
    write_resealed(&mixed_path, mixed);
    // (Its hall of fame, a control run's, writes output slots the regression trees lack.)
    one_line(&["run", "--resume", s(&mixed_path), "-q"], &["mixed.ckpt", "the checkpoint is damaged", "output slot"]);
}

/// Issue 57: every policy kind's report replays to its reported test return, to the bit
/// (`task::control::replay_test`), and `grove rollout --policy REPORT --test` prints it beside
/// the report's; its flags that would change the episodes are refused.
#[test]
fn every_policy_kind_replays_to_its_reported_test_return() {
    let kinds: [&[&str]; 5] = [
        &["--env", "hopper", "--pop", "12", "--gens", "2"],
        &["--env", "swimmer", "-g", "grammars/swimmer.bnf", "--pop", "12", "--gens", "2", "--normalise", "off", "--healthy-reward", "0.5"],
        &["--env", "swimmer", "--policy", "linear", "--gens", "3"],
        &["--env", "hopper", "--policy", "linear", "--gens", "2", "--searches", "2", "--validation-episodes", "2"],
        &["--env", "hopper", "--policy", "residual", "--linear-iterations", "2", "--pop", "10", "--gens", "2"],
    ];
    for (i, kind) in kinds.iter().enumerate() {
        let report = scratch().join(format!("replay-test-{}-{i}.json", std::process::id()));
        let mut args = vec!["control", "--device", "cpu", "--episode-steps", "60", "--test-episodes", "3", "--seed", "5", "--quiet", "--report", report.to_str().unwrap()];
        args.extend_from_slice(kind);
        let out = grove(&args);
        assert!(out.status.success(), "{kind:?}: {}", text(&out.stderr));
        let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
        let (scores, reported) = grove::task::control::replay_test(&r, "the report").unwrap();
        let returns: Vec<f64> = r["test"]["returns"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
        assert_eq!(scores.episodes.iter().map(|e| e.ret).collect::<Vec<_>>(), returns, "{kind:?}: each test episode");
        assert_eq!(Some(scores.mean()), reported, "{kind:?}: the test return");
        let out = grove(&["rollout", "--policy", report.to_str().unwrap(), "--test"]);
        assert!(out.status.success(), "{kind:?}: {}", text(&out.stderr));
        let line = text(&out.stdout);
        let mean = format!("{:.6}", reported.unwrap());
        assert!(line.contains(&format!("test return {mean} ± ")) && line.contains(&format!("over 3 episodes")) && line.trim_end().ends_with(&format!("(the report's: {mean})")), "{kind:?}: {line}");
    }
    let report = scratch().join(format!("replay-test-{}-0.json", std::process::id()));
    for flags in [&["--seed", "3"][..], &["--steps", "10"], &["--env", "swimmer"], &["--device", "cuda"]] {
        let out = grove(&[&["rollout", "--policy", report.to_str().unwrap(), "--test"][..], flags].concat());
        assert_eq!(out.status.code(), Some(2), "{flags:?}");
        assert!(text(&out.stderr).contains("cannot be used with"), "{flags:?}: {}", text(&out.stderr));
    }
    let out = grove(&["rollout", "--test"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--policy"), "{}", text(&out.stderr));
    // A report that is not a control run's gets one line.
    let bad = scratch().join(format!("replay-test-{}-bad.json", std::process::id()));
    std::fs::write(&bad, r#"{"policy": null}"#).unwrap();
    let out = grove(&["rollout", "--policy", bad.to_str().unwrap(), "--test"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out.stderr).trim().lines().count(), 1, "{}", text(&out.stderr));
}
