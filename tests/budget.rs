//! Budgets (issue 31): `--time-limit` and `--stop-at` end a run at the end of a generation with
//! the complete report, hall of fame and checkpoint of a finished run, and the report says why;
//! experiment files take the same `budget` block; bad budgets get one clear line.

mod support;
use support::{assert_ok, assert_one_line_error, dir, grove_cpu, read_json, s, text};

/// The per-generation `best` of a report.
fn bests(report: &serde_json::Value) -> Vec<f64> {
    report["generations"].as_array().unwrap().iter().map(|g| g["best"].as_f64().unwrap()).collect()
}

#[test]
fn a_time_limit_ends_within_a_generation_of_it_with_a_complete_report_and_checkpoint() {
    let d = dir("time-limit");
    let (report, fame, ck) = (d.join("r.json"), d.join("hof.csv"), d.join("ck.json"));
    let out = grove_cpu(&[
        "evolve", "--data", "builtin:pagie1", "--functions", "add,sub,mul,div", "--pop", "2000", "--gens", "100000",
        "--time-limit", "2", "--threads", "1", "--report", s(&report), "--hall-of-fame", s(&fame), "--checkpoint", s(&ck),
    ]);
    assert_ok(&out);
    let r = read_json(&report);
    let ended = &r["ended"];
    assert_eq!(ended["reason"], "time-limit", "{ended}");
    let (seconds, last) = (ended["seconds"].as_f64().unwrap(), ended["generation"].as_u64().unwrap() as usize);
    let gens = r["generations"].as_array().unwrap();
    assert_eq!(gens.len(), last + 1);
    // Ended once one more generation would cross the limit (a generation here takes about
    // 0.03 s, one that writes a checkpoint about 0.1 s): close to the limit, never far past it.
    let longest = gens.iter().map(|g| g["seconds"].as_f64().unwrap()).fold(0.0, f64::max);
    assert!(seconds > 1.5 && seconds < 2.5, "{seconds} s, generations up to {longest} s");
    assert!(text(&out.stdout).contains(&format!("ended         after generation {last} of 100000: time limit 2 s")), "{}", text(&out.stdout));
    // The rest of a finished run's report, and its hall of fame.
    for key in ["best", "train", "model", "hall_of_fame", "selection", "timing"] {
        assert!(!r[key].is_null(), "{key} missing");
    }
    assert!(std::fs::read_to_string(&fame).unwrap().lines().count() > 1);
    // The checkpoint holds the next generation: resumed, the run goes on from there.
    let c = read_json(&ck);
    assert_eq!(c["state"]["generation"].as_u64().unwrap() as usize, last + 1);
    let resumed = d.join("resumed.json");
    assert_ok(&grove_cpu(&["run", "--resume", s(&ck), "--gens", &(last + 3).to_string(), "--report", s(&resumed), "-q"]));
    let rr = read_json(&resumed);
    assert_eq!(rr["generations"].as_array().unwrap().len(), last + 4);
    assert_eq!(bests(&rr)[..=last], bests(&r)[..]);
}

/// A limit that the first generation (or random-search iteration) crosses by itself: the run
/// keeps that generation's result and its summary says in one line that the limit is shorter
/// than a generation, and by how much.
#[test]
fn a_time_limit_shorter_than_one_generation_says_so_and_keeps_the_result() {
    let d = dir("time-limit-short");
    for (what, args) in [
        ("generation", &["evolve", "--data", "builtin:pagie1", "--functions", "add,sub,mul", "--pop", "300", "--gens", "50"][..]),
        ("iteration", &["control", "--env", "swimmer", "--policy", "linear", "--gens", "50", "--episode-steps", "20"][..]),
    ] {
        let report = d.join(format!("{what}.json"));
        let out = grove_cpu(&[args, &["--time-limit", "1e-6", "--threads", "1", "--report", s(&report), "-q"]].concat());
        assert_ok(&out);
        let r = read_json(&report);
        assert_eq!(r["ended"]["reason"], "time-limit", "{}", r["ended"]);
        assert_eq!(r["ended"]["shorter_than_one"], true, "{}", r["ended"]);
        assert_eq!(r["generations"].as_array().unwrap().len(), 1);
        assert!(!r["best"].is_null());
        let stdout = text(&out.stdout);
        let lines: Vec<&str> = stdout.lines().filter(|l| l.contains("shorter than one")).collect();
        assert_eq!(lines.len(), 1, "{stdout}");
        assert!(lines[0].contains(&format!("time limit 0.000001 s is shorter than one {what}")) && lines[0].contains("raise --time-limit"), "{}", lines[0]);
    }
}

#[test]
fn stop_at_ends_at_the_first_generation_that_reaches_it() {
    let d = dir("stop-at");
    let base = ["evolve", "--data", "builtin:pagie1", "--functions", "add,sub,mul,div", "--pop", "300", "--gens", "30", "--threads", "1"];
    let whole = d.join("whole.json");
    assert_ok(&grove_cpu(&[&base[..], &["--report", s(&whole), "-q"]].concat()));
    let all = bests(&read_json(&whole));
    assert_eq!(read_json(&whole)["ended"]["reason"], "generations");
    // A target the whole run reaches only after a few generations.
    let target = all[all.len() / 2];
    let first = all.iter().position(|&b| b <= target).unwrap();
    assert!(first > 0 && first < 30, "{all:?}");
    let report = d.join("r.json");
    let out = grove_cpu(&[&base[..], &["--stop-at", &format!("{target:e}"), "--report", s(&report)]].concat());
    assert_ok(&out);
    let r = read_json(&report);
    assert_eq!(r["ended"]["reason"], "stop-at");
    assert_eq!(r["ended"]["generation"].as_u64().unwrap() as usize, first);
    assert_eq!(r["ended"]["measure"], "loss");
    assert_eq!(bests(&r), all[..=first]);
    assert!(text(&out.stdout).contains(&format!("after generation {first} of 30: --stop-at")), "{}", text(&out.stdout));
}

#[test]
fn classify_and_control_stop_at_their_measures() {
    let d = dir("measures");
    let report = d.join("c.json");
    assert_ok(&grove_cpu(&[
        "classify", "--data", "builtin:iris", "--pop", "200", "--gens", "40", "--stop-at", "0.7", "--threads", "1", "--report", s(&report), "-q",
    ]));
    let r = read_json(&report);
    assert_eq!(r["ended"]["reason"], "stop-at", "{}", r["ended"]);
    assert_eq!(r["ended"]["measure"], "accuracy");
    assert!(r["ended"]["value"].as_f64().unwrap() >= 0.7);
    assert!(r["generations"].as_array().unwrap().len() < 41);
    let report = d.join("p.json");
    // A return any policy reaches: the first generation ends the run.
    assert_ok(&grove_cpu(&[
        "control", "--env", "swimmer", "--pop", "20", "--gens", "5", "--episodes", "1", "--episode-steps", "50", "--test-episodes", "1",
        "--validation-episodes", "0", "--stop-at", "-1000", "--report", s(&report), "-q",
    ]));
    let r = read_json(&report);
    assert_eq!(r["ended"]["reason"], "stop-at", "{}", r["ended"]);
    assert_eq!(r["ended"]["measure"], "return");
    assert_eq!(r["ended"]["generation"], 0);
    assert_eq!(r["generations"].as_array().unwrap().len(), 1);
}

#[test]
fn experiment_files_take_a_budget_block() {
    let d = dir("experiment");
    let file = d.join("e.ron");
    std::fs::write(
        &file,
        "Evolve(data: \"builtin:pagie1\", functions: \"add,mul\", engine: (pop_size: 100, generations: 1000), budget: (stop_at: 1e9))",
    )
    .unwrap();
    let report = d.join("r.json");
    assert_ok(&grove_cpu(&["run", s(&file), "--report", s(&report), "-q"]));
    let r = read_json(&report);
    assert_eq!(r["ended"]["reason"], "stop-at");
    assert_eq!(r["ended"]["generation"], 0);
    assert_eq!(r["settings"]["budget"]["stop_at"], 1e9);
    std::fs::write(&file, "Evolve(data: \"builtin:pagie1\", functions: \"add\", budget: (time_limit: -3))").unwrap();
    assert_one_line_error(&grove_cpu(&["run", s(&file)]), &["--time-limit (budget.time_limit)", "got -3"]);
    std::fs::write(&file, "Evolve(data: \"builtin:pagie1\", functions: \"add\", budget: (time_limt: 3))").unwrap();
    assert_one_line_error(&grove_cpu(&["run", s(&file)]), &["time_limt"]);
}

#[test]
fn bad_budgets_get_one_line() {
    let evolve = ["evolve", "--data", "builtin:pagie1", "--functions", "add"];
    for (flag, value, needles) in [
        ("--time-limit", "-1", &["--time-limit (budget.time_limit)", "positive", "got -1"][..]),
        ("--time-limit", "0", &["--time-limit", "got 0"][..]),
        ("--time-limit", "nan", &["--time-limit", "got NaN"][..]),
        ("--time-limit", "1e30", &["--time-limit", "at most"][..]),
        ("--stop-at", "inf", &["--stop-at (budget.stop_at)", "finite"][..]),
    ] {
        assert_one_line_error(&grove_cpu(&[&evolve[..], &[flag, value]].concat()), needles);
    }
    assert_one_line_error(&grove_cpu(&["classify", "--data", "builtin:iris", "--stop-at", "1.5"]), &["--stop-at", "accuracy, in [0, 1], got 1.5"]);
    assert_one_line_error(&grove_cpu(&["control", "--env", "swimmer", "--time-limit", "-2"]), &["--time-limit", "got -2"]);
}
