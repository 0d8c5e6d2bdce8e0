//! `grove control --policy linear` as a user meets it: a linear policy over normalised
//! observations, tuned by random search, that climbs from the zero policy, whose report
//! replays with `grove rollout`, whose run is the same at any thread count and resumes from a
//! checkpoint as if uninterrupted, and whose bad settings get one clear line. Runs are small and
//! on the CPU.

mod support;
#[path = "support/exports.rs"]
mod exports;
use support::{Device, assert_ok, assert_one_line_error, dir, grove, grove_command, interrupt_once_saved, read_json, s, text, without_timings, write_resealed};

fn linear(report: &std::path::Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["control", "--env", "swimmer", "--policy", "linear", "--device", "cpu", "--seed", "4", "--gens", "12"];
    args.extend(["--episode-steps", "200", "--test-episodes", "3", "--quiet", "--report", s(report)]);
    args.extend(extra);
    grove(&args)
}

#[test]
fn a_linear_policy_climbs_and_its_report_replays() {
    let d = dir("linear-policy");
    let report = d.join("swimmer.json");
    let (plots, fame) = (d.join("plots"), d.join("fame.csv"));
    let out = linear(&report, &["--plots", s(&plots), "--hall-of-fame", s(&fame)]);
    assert_ok(&out);
    let summary = text(&out.stdout);
    assert!(summary.contains("policy        linear: tanh(W (o - mean) / std), W 2 × 8"), "{summary}");
    assert!(summary.contains("8 directions, the best 4"), "{summary}");
    assert!(summary.contains("split         setup ") && summary.contains("(first iteration "), "{summary}");
    let r = read_json(&report);
    // Where the time went: the parts add up to no more than the whole run's wall time here.
    let t = &r["timing"];
    let part = |k: &str| t[k].as_f64().unwrap_or_else(|| panic!("timing.{k}: {t}"));
    assert!(part("setup_seconds") + part("search_seconds") <= part("seconds") + 1e-9, "{t}");
    assert!(part("median_generation_seconds") > 0.0 && part("final_seconds") > 0.0, "{t}");
    assert_eq!((t["kernels_compiled"].as_u64(), t["kernel_seconds"].as_f64()), (Some(0), Some(0.0)), "no kernels on the CPU");
    let g = r["generations"].as_array().unwrap();
    assert_eq!(g.len(), 12);
    // Iteration 0 plays the zero policy (actions 0): the search must improve on it.
    let first = g[0]["return"].as_f64().unwrap();
    let last = g[11]["return"].as_f64().unwrap();
    assert!(last > first + 10.0, "returns {first} → {last}");
    let train = r["train"]["returns"][0].as_f64().unwrap();
    assert!(train > first + 10.0, "train {train} against the zero policy's {first}");
    // The weights: one row of 8 per actuator, with each observation's mean and deviation.
    let lp = &r["linear_policy"];
    assert_eq!(lp["weights"].as_array().unwrap().len(), 2);
    assert!(lp["weights"].as_array().unwrap().iter().all(|w| w["weights"].as_array().unwrap().len() == 8));
    assert_eq!(lp["mean"].as_array().unwrap().len(), 8);
    assert!(lp["std"].as_array().unwrap().iter().all(|x| x.as_f64().unwrap() > 0.0));
    assert!(lp["weights"][0]["weights"].as_array().unwrap().iter().any(|x| x.as_f64().unwrap() != 0.0));
    // The plots hold the curve of the unperturbed policy; the hall of fame is the one policy.
    assert!(plots.join("fitness.png").exists() && plots.join("fitness.svg").exists());
    assert!(std::fs::read_to_string(plots.join("fitness.svg")).unwrap().contains("policy"));
    let rows: Vec<String> = std::fs::read_to_string(&fame).unwrap().lines().map(String::from).collect();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(rows[1].starts_with(&format!("{},{:e},tanh(", r["best"]["size"], -r["train"]["mean"].as_f64().unwrap())), "{}", rows[1]);
    // The saved policy is a program: `grove rollout` replays training episode 0.
    let out = grove(&["rollout", "--policy", s(&report), "--seed", "4", "--steps", "200"]);
    assert_ok(&out);
    let line = text(&out.stdout);
    assert!(line.starts_with(&format!("swimmer (brax): return {train:.6} over 200 steps")), "{line} vs {train}");
}

#[test]
fn a_linear_run_is_the_same_at_any_thread_count() {
    let d = dir("linear-threads");
    let (a, b) = (d.join("two.json"), d.join("one.json"));
    assert_ok(&linear(&a, &["--directions", "5"]));
    let args = ["control", "--env", "swimmer", "--policy", "linear", "--device", "cpu", "--seed", "4", "--gens", "12"];
    let mut one = grove_command(&args, Device::Inherited, None);
    one.env("RAYON_NUM_THREADS", "1");
    one.args(["--episode-steps", "200", "--test-episodes", "3", "--quiet", "--report", s(&b), "--directions", "5"]);
    assert_ok(&one.output().unwrap());
    let (ra, rb) = (read_json(&a), read_json(&b));
    assert_eq!(ra["settings"]["linear"]["top"], 3, "a smaller --directions keeps the default's share of the best");
    assert_eq!(without_timings(ra), without_timings(rb));
}

#[test]
fn linear_settings_come_from_flags_and_experiment_files() {
    use grove::task::control::PolicyKind;
    use support::{control_experiment as experiment, control_settings as cli};
    let c = cli(&["--env", "hopper", "--policy", "linear"], false);
    assert_eq!(c.policy, PolicyKind::Linear);
    assert_eq!(c.linear, grove::task::base::defaults::LINEAR_CPU);
    // On a GPU: 8 searches side by side of 128 directions; K ≥ 2 searches named keep the 128,
    // one search named or the directions named take the single search's 1024.
    use grove::task::base::defaults::{LINEAR_GPU, LINEAR_GPU_SIDE};
    let gpu = cli(&["--env", "hopper", "--policy", "linear"], true);
    assert_eq!((gpu.linear, gpu.searches), (LINEAR_GPU_SIDE, 8));
    let file = experiment("Control(env: \"hopper\", policy: \"linear\", device: \"cuda\")");
    assert_eq!((file.linear, file.searches), (LINEAR_GPU_SIDE, 8));
    let named = cli(&["--env", "hopper", "--policy", "linear", "--directions", "1024"], true);
    assert_eq!((named.linear, named.searches), (LINEAR_GPU, 1));
    let named = cli(&["--env", "hopper", "--policy", "linear", "--searches", "2"], true);
    assert_eq!((named.linear, named.searches), (LINEAR_GPU_SIDE, 2));
    let named = cli(&["--env", "hopper", "--policy", "linear", "--searches", "16"], true);
    assert_eq!((named.linear, named.searches), (LINEAR_GPU_SIDE, 16));
    let file = experiment("Control(env: \"hopper\", policy: \"linear\", device: \"cuda\", searches: 4)");
    assert_eq!((file.linear, file.searches), (LINEAR_GPU_SIDE, 4));
    let one = cli(&["--env", "hopper", "--policy", "linear", "--searches", "1"], true);
    assert_eq!((one.linear, one.searches), (LINEAR_GPU, 1));
    let both = cli(&["--env", "hopper", "--policy", "linear", "--searches", "4", "--directions", "256"], true);
    assert_eq!((both.linear.directions, both.linear.top, both.searches), (256, 32, 4), "the directions named keep the single search's share");
    // On the CPU nothing changes with the count.
    assert_eq!(cli(&["--env", "hopper", "--policy", "linear", "--searches", "4"], false).linear, grove::task::base::defaults::LINEAR_CPU);
    let residual = cli(&["--env", "hopper", "--policy", "residual"], true);
    assert_eq!((residual.linear, residual.searches), (LINEAR_GPU, 1));
    assert_eq!(experiment("Control(env: \"hopper\", policy: \"linear\")"), c);
    let tuned = cli(&["--env", "hopper", "--policy", "linear", "--directions", "40", "--top-directions", "30", "--step-size", "0.03", "--noise", "0.025"], false);
    assert_eq!(
        experiment("Control(env: \"hopper\", policy: \"linear\", linear: (directions: 40, top: 30, step_size: 0.03, noise: 0.025))"),
        tuned
    );
    assert_eq!(cli(&["--env", "hopper"], false).policy, PolicyKind::Program, "programs stay the default");
    assert_eq!(c.searches, 1, "one search by default");
    let side = cli(&["--env", "hopper", "--policy", "linear", "--searches", "4"], true);
    assert_eq!(side.searches, 4);
    assert_eq!(experiment("Control(env: \"hopper\", policy: \"linear\", searches: 4)").searches, 4);
    assert_eq!((side.exploit_every, c.exploit_every), (0, 0), "no copies unless asked");
    let e = cli(&["--env", "hopper", "--policy", "linear", "--searches", "4", "--exploit-every", "10"], true);
    assert_eq!(e.exploit_every, 10);
    assert_eq!(experiment("Control(env: \"hopper\", policy: \"linear\", searches: 4, exploit_every: 10)").exploit_every, 10);
}

/// `--searches K` runs K random searches side by side and reports the one whose last policy
/// returns most on the validation episodes, saying so in the summary and the report; the
/// first search of K is the run of one, so K = 1 changes nothing.
#[test]
fn searches_side_by_side_report_the_one_that_validates_best() {
    let d = dir("linear-searches");
    let (one, three) = (d.join("one.json"), d.join("three.json"));
    assert_ok(&linear(&one, &[]));
    let out = linear(&three, &["--searches", "3", "--validation-episodes", "4"]);
    assert_ok(&out);
    let summary = text(&out.stdout);
    let r = read_json(&three);
    let block = &r["searches"];
    assert_eq!((block["count"].as_u64(), block["validation_episodes"].as_u64()), (Some(3), Some(4)), "{block}");
    let c = block["candidates"].as_array().unwrap();
    let v: Vec<f64> = c.iter().map(|x| x["validation_return"].as_f64().unwrap()).collect();
    let chosen = block["chosen"].as_u64().unwrap() as usize;
    assert_eq!(v[chosen - 1], v.iter().copied().fold(f64::NEG_INFINITY, f64::max), "{v:?}");
    assert!(summary.contains(&format!("chosen        search {chosen} of 3 side by side, by its validation return")), "{summary}");
    // Three searches play three times the policies of one in the same iterations.
    let (steps1, steps3) = (read_json(&one)["timing"]["env_steps"].as_u64().unwrap(), r["timing"]["env_steps"].as_u64().unwrap());
    assert_eq!(steps3, 3 * steps1, "swimmer's episodes never end early");
    // The first search is the run of one: where it is chosen, its history is that run's.
    let a = read_json(&one);
    if chosen == 1 {
        assert_eq!(a["generations"].as_array().unwrap().iter().map(|g| &g["return"]).collect::<Vec<_>>(), r["generations"].as_array().unwrap().iter().map(|g| &g["return"]).collect::<Vec<_>>());
    }
    assert!(a.get("searches").is_none() || a["searches"].is_null(), "a run of one has no choice");
}

#[test]
fn bad_linear_settings_get_one_clear_line() {
    let d = dir("linear-bad");
    let report = d.join("r.json");
    let one = |extra: &[&str], needles: &[&str]| assert_one_line_error(&linear(&report, extra), needles);
    one(&["--directions", "0"], &["--directions (linear.directions) must be 1 to"]);
    one(&["--directions", "8", "--top-directions", "9"], &["--top-directions (linear.top) must be 1 to --directions (8), got 9"]);
    one(&["--step-size=-1"], &["--step-size (linear.step_size) must be a positive number"]);
    one(&["--step-size", "1e300"], &["--step-size (linear.step_size) must be a positive number, at most 1000"]);
    one(&["--noise", "inf"], &["--noise (linear.noise) must be a finite number, got inf"]);
    one(&["--noise", "0"], &["--noise (linear.noise) must be a positive number"]);
    one(&["--directions", "65536", "--episodes", "100"], &["episode pairs per iteration"]);
    one(&["--islands", "2"], &["--policy linear", "--islands"]);
    one(&["--searches", "0"], &["--searches (searches) must be 1 to 1024, got 0"]);
    one(&["--searches", "2000"], &["--searches (searches) must be 1 to 1024, got 2000"]);
    one(&["--searches", "1000", "--directions", "8192", "--top-directions", "8"], &["× --searches (1000)", "episode pairs per iteration"]);
    // More searches than the memory given holds: one line naming --searches.
    one(&["--searches", "64", "--max-memory", "1M"], &["--searches 64 side by side", "lower --searches"]);
    for policy in ["program", "residual"] {
        let out = grove(&["control", "--env", "swimmer", "--policy", policy, "--device", "cpu", "--searches", "2", "--gens", "1", "-q"]);
        assert_one_line_error(&out, &["--searches (searches)", &format!("this run's policy is {policy}")]);
    }
    // Exploitation needs searches side by side to copy between.
    one(&["--exploit-every", "5"], &["--exploit-every (exploit_every)", "this run has 1 search: give --searches 2 or more"]);
    let out = linear(&report, &["--exploit-every=-1", "--searches", "2"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("invalid value '-1' for '--exploit-every <E>'"), "{}", text(&out.stderr));
    let out = linear(&report, &["--policy", "tabular"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    // An experiment file with a bad field says which.
    let file = d.join("bad.ron");
    std::fs::write(&file, "Control(env: \"swimmer\", policy: \"linear\", linear: (directions: 4, top: 0, step_size: 0.02, noise: 0.03))").unwrap();
    assert_one_line_error(&grove(&["run", s(&file), "--device", "cpu", "-q"]), &["--top-directions (linear.top)"]);
    assert!(!report.exists(), "a refused run writes nothing");
}

/// An iteration of more than `LARGE_ITERATION_STEPS` env steps is announced before its first
/// roll-out, with its steps and memory (issue 59: `--directions 1048576` ran for minutes without a
/// line); a small one is not.
#[test]
fn a_large_iteration_is_announced_before_it_plays() {
    use std::io::BufRead;
    let d = dir("linear-large");
    // 2 × 60000 + 1 policies × 1 episode × 1000 steps: 1.2 × 10⁸ steps, over the line.
    let report = d.join("r.json");
    let args = ["control", "--env", "hopper", "--policy", "linear", "--directions", "60000", "--top-directions", "8", "--gens", "1", "--episodes", "1", "--report", s(&report)];
    let mut child = grove_command(&args, Device::Cpu, None).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    let mut note = None;
    for line in std::io::BufReader::new(child.stderr.take().unwrap()).lines() {
        let line = line.unwrap();
        if line.starts_with("note: an iteration") {
            note = Some(line);
            break;
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let note = note.expect("the note comes before the first roll-out");
    assert!(note.contains("--directions 60000") && note.contains("1.20e8 env steps") && note.contains("episodes of up to 1000 steps") && note.contains("of memory"), "{note}");
    // Small iterations say nothing of it.
    let small = d.join("small.json");
    let out = grove(&["control", "--env", "swimmer", "--policy", "linear", "--device", "cpu", "--directions", "4", "--top-directions", "2", "--gens", "1", "--episode-steps", "20", "--test-episodes", "1", "--report", s(&small)]);
    assert_ok(&out);
    assert!(small.exists());
    assert!(!text(&out.stderr).contains("note: an iteration"), "{}", text(&out.stderr));
}

/// `grove export` of a control report: `act` (tanh of each output) in Python, C and Rust gives
/// the actions grove plays, for a linear policy and an evolved program alike.
#[test]
fn control_policies_export_to_python_c_and_rust() {
    use grove::task::control::SavedPolicy;
    let d = dir("linear-export");
    let linear_report = d.join("linear.json");
    assert_ok(&linear(&linear_report, &[]));
    let program_report = d.join("program.json");
    let args = ["control", "--env", "swimmer", "--device", "cpu", "--pop", "30", "--gens", "3", "--episode-steps", "50"];
    assert_ok(&grove(&[&args[..], &["--test-episodes", "1", "-q", "--report", s(&program_report)]].concat()));
    let rows: Vec<Vec<f64>> = (0..5).map(|r| (0..8).map(|i| ((r * 8 + i) as f64 * 0.37).sin() * (1.0 + r as f64)).collect()).collect();
    for report in [&linear_report, &program_report] {
        let mut policy = SavedPolicy::read(report).unwrap().compile().unwrap();
        let want: Vec<Vec<f32>> = rows
            .iter()
            .map(|r| {
                let obs: Vec<f32> = r.iter().map(|&x| x as f32).collect();
                let mut a = vec![0.0f32; 2];
                assert!(policy.act(&obs, &mut a));
                a
            })
            .collect();
        let agree = |got: &[String], lang: &str| {
            for (line, w) in got.iter().zip(&want) {
                let v: Vec<f64> = line.trim_matches(|c| c == '[' || c == ']').split([',', ' ']).filter(|t| !t.is_empty()).map(|t| t.parse().unwrap()).collect();
                assert_eq!(v.len(), 2, "{lang}: {line}");
                for (a, b) in v.iter().zip(w) {
                    assert!((a - *b as f64).abs() < 1e-5, "{lang} {}: {line} against {w:?}", report.display());
                }
            }
            assert_eq!(got.len(), rows.len());
        };
        for (lang, ext) in [("python", "py"), ("c", "h"), ("rust", "rs")] {
            let out = grove(&["export", "--model", s(report), "--lang", lang]);
            assert_ok(&out);
            let src = d.join(format!("{}-policy.{ext}", report.file_stem().unwrap().to_str().unwrap()));
            std::fs::write(&src, &out.stdout).unwrap();
            let head = text(&out.stdout);
            assert!(head.contains("grove control policy: act returns one action per actuator (rot2, rot3)"), "{head}");
            match lang {
                "python" => {
                    if let Some(got) = exports::run_python_calls(&src, "act", &rows) {
                        agree(&got, lang);
                    }
                }
                "c" => {
                    if let Some(got) = exports::run_c_actions(&src, &rows, 2) {
                        agree(&got, lang);
                    }
                }
                _ => exports::compile_rust(&src),
            }
        }
    }
}

#[test]
fn a_linear_run_resumes_from_its_checkpoint_as_if_uninterrupted() {
    let d = dir("linear-resume");
    let (full, resumed, ck) = (d.join("full.json"), d.join("resumed.json"), d.join("run.ckpt"));
    let base = ["control", "--env", "hopper", "--policy", "linear", "--device", "cpu", "--seed", "3", "--episode-steps", "80", "--test-episodes", "2", "-q"];
    assert_ok(&grove(&[&base[..], &["--gens", "10", "--report", s(&full)]].concat()));
    // Six iterations, saved after the fourth and at the end; then on to ten from the file.
    assert_ok(&grove(&[&base[..], &["--gens", "6", "--checkpoint", s(&ck), "--checkpoint-every", "4", "--threads", "1"]].concat()));
    let saved = read_json(&ck);
    assert_eq!((saved["linear"]["iteration"].as_u64(), saved["state"]["generation"].as_u64()), (Some(6), Some(6)));
    assert_eq!(saved["linear"]["weights"].as_array().unwrap().len(), 3 * 11);
    assert!(saved["env_steps"][0].as_u64().is_some_and(|n| n > 0));
    assert_ok(&grove(&["run", "--resume", s(&ck), "--gens", "10", "--report", s(&resumed), "-q"]));
    let (a, b) = (read_json(&full), read_json(&resumed));
    assert_eq!(a["timing"]["env_steps"], b["timing"]["env_steps"], "the env steps go on from the checkpoint's");
    assert_eq!(without_timings(a), without_timings(b));
    assert_eq!(read_json(&ck)["linear"]["iteration"], 10, "the resumed run saves to the same file");
    // A damaged search in a well-sealed file, and a program's run on a linear checkpoint, get one line.
    let mut bad = saved.clone();
    bad["linear"]["weights"].as_array_mut().unwrap().pop();
    bad.as_object_mut().unwrap().remove("checksum");
    let damaged = d.join("damaged.ckpt");
    write_resealed(&damaged, bad);
    assert_one_line_error(&grove(&["run", "--resume", s(&damaged), "-q"]), &["damaged", "not whole rows of 11 observations"]);
    let mut program = saved;
    program["experiment"]["Control"]["policy"] = "program".into();
    program.as_object_mut().unwrap().remove("checksum");
    let other = d.join("program.ckpt");
    write_resealed(&other, program);
    assert_one_line_error(&grove(&["run", "--resume", s(&other), "-q"]), &["holds a --policy linear search"]);
}

#[test]
fn searches_side_by_side_resume_as_if_uninterrupted() {
    let d = dir("linear-resume-searches");
    let (full, resumed, ck) = (d.join("full.json"), d.join("resumed.json"), d.join("run.ckpt"));
    let base = ["control", "--env", "hopper", "--policy", "linear", "--device", "cpu", "--seed", "3", "--episode-steps", "60", "--test-episodes", "2", "--searches", "3", "--validation-episodes", "2", "-q"];
    assert_ok(&grove(&[&base[..], &["--gens", "7", "--report", s(&full)]].concat()));
    assert_ok(&grove(&[&base[..], &["--gens", "4", "--checkpoint", s(&ck)]].concat()));
    let saved = read_json(&ck);
    assert_eq!(saved["linear"]["side"].as_array().map(Vec::len), Some(2), "the other two searches are in the checkpoint");
    assert_ok(&grove(&["run", "--resume", s(&ck), "--gens", "7", "--report", s(&resumed), "-q"]));
    assert_eq!(without_timings(read_json(&full)), without_timings(read_json(&resumed)));
    // A checkpoint whose settings name another count of searches than it holds: one line.
    let mut other = saved;
    other["experiment"]["Control"]["searches"] = 2.into();
    other.as_object_mut().unwrap().remove("checksum");
    let two = d.join("two.ckpt");
    write_resealed(&two, other);
    assert_one_line_error(&grove(&["run", "--resume", s(&two), "-q"]), &["holds 3 random searches side by side", "--searches (searches) is 2"]);
}

/// `--exploit-every E` copies the better searches over the worse every E iterations; a run
/// stopped between two copies resumes to the same report, and the copies change the run.
#[test]
fn exploiting_searches_resume_as_if_uninterrupted() {
    let d = dir("linear-exploit");
    let (full, resumed, ck, plain) = (d.join("full.json"), d.join("resumed.json"), d.join("run.ckpt"), d.join("plain.json"));
    let base = ["control", "--env", "hopper", "--policy", "linear", "--device", "cpu", "--seed", "3", "--episode-steps", "60", "--test-episodes", "2", "--searches", "4", "--validation-episodes", "2", "-q"];
    assert_ok(&grove(&[&base[..], &["--exploit-every", "2", "--gens", "7", "--report", s(&full)]].concat()));
    assert_ok(&grove(&[&base[..], &["--exploit-every", "2", "--gens", "5", "--checkpoint", s(&ck)]].concat()));
    assert_ok(&grove(&["run", "--resume", s(&ck), "--gens", "7", "--report", s(&resumed), "-q"]));
    let full = without_timings(read_json(&full));
    assert_eq!(full, without_timings(read_json(&resumed)));
    assert_eq!(full["settings"]["exploit_every"].as_u64(), Some(2));
    assert_ok(&grove(&[&base[..], &["--gens", "7", "--report", s(&plain)]].concat()));
    let returns = |r: &serde_json::Value| r["searches"]["candidates"].as_array().unwrap().iter().map(|c| c["validation_return"].as_f64().unwrap()).collect::<Vec<_>>();
    assert_ne!(returns(&full), returns(&without_timings(read_json(&plain))), "the copies change the searches");
}

#[test]
fn ctrl_c_saves_a_linear_checkpoint_and_the_resumed_run_ends_as_an_uninterrupted_one() {
    let d = dir("linear-ctrlc");
    let (full, resumed, ck) = (d.join("full.json"), d.join("resumed.json"), d.join("run.ckpt"));
    // Long enough (about a second) that the signal arrives mid-run.
    let run = ["control", "--env", "swimmer", "--policy", "linear", "--device", "cpu", "--gens", "3000", "--episode-steps", "10", "--test-episodes", "2", "--seed", "5", "-q"];
    assert_ok(&grove(&[&run[..], &["--report", s(&full)]].concat()));
    let interrupted = [&run[..], &["--checkpoint", s(&ck), "--checkpoint-every", "1"]].concat();
    interrupt_once_saved(&interrupted, Device::Inherited, &ck);
    let at = read_json(&ck)["linear"]["iteration"].as_u64().unwrap();
    assert!((1..3000).contains(&at), "stopped at iteration {at}");
    assert_ok(&grove(&["run", "--resume", s(&ck), "--checkpoint-every", "1000", "--report", s(&resumed), "-q"]));
    let (a, b) = (read_json(&full), read_json(&resumed));
    assert_eq!(a["timing"]["env_steps"], b["timing"]["env_steps"]);
    assert!(without_timings(a) == without_timings(b), "the resumed report differs from the uninterrupted one");
}
