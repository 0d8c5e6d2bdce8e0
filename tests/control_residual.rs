//! `grove control --policy residual` as a user meets it: the linear policy's search, then
//! programs over the normalised observations evolved on top of it. Its linear stage is the
//! `--policy linear` search itself; its report replays with `grove rollout` and exports; it
//! resumes from a checkpoint of either stage as if uninterrupted; bad settings and mismatched
//! checkpoints get one clear line. Runs are small and on the CPU.

mod support;
#[path = "support/exports.rs"]
mod exports;
use support::{Device, assert_ok, assert_one_line_error, dir, grove, interrupt_once_saved, read_json, s, text, without_timings, write_resealed};

const BASE: [&str; 14] =
    ["control", "--env", "hopper", "--device", "cpu", "--seed", "4", "--episode-steps", "150", "--test-episodes", "3", "--pop", "40", "-q"];

fn residual(extra: &[&str]) -> std::process::Output {
    grove(&[&BASE[..], &["--policy", "residual"], extra].concat())
}

#[test]
fn a_residual_policy_is_the_linear_search_then_programs_on_top_and_its_report_replays() {
    let d = dir("residual-policy");
    let (report, linear) = (d.join("residual.json"), d.join("linear.json"));
    assert_ok(&residual(&["--linear-iterations", "8", "--gens", "4", "--report", s(&report)]));
    assert_ok(&grove(&[&BASE[..], &["--policy", "linear", "--gens", "8", "--report", s(&linear)]].concat()));
    let (r, l) = (read_json(&report), read_json(&linear));
    // The linear stage is the linear search: the same return at every iteration, the same W.
    let returns: Vec<f64> = l["generations"].as_array().unwrap().iter().map(|g| g["return"].as_f64().unwrap()).collect();
    let stage: Vec<f64> = r["linear_search"]["returns"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
    assert_eq!((stage.len(), r["linear_search"]["iterations"].as_u64()), (8, Some(8)));
    assert_eq!(stage, returns);
    assert_eq!(r["linear_policy"], l["linear_policy"]);
    // Then the programs' generations, whose programs read the normalised observations.
    assert_eq!(r["generations"].as_array().unwrap().len(), 5);
    let actions: Vec<&str> = r["best"]["programs"].as_array().unwrap().iter().map(|p| p["action"].as_str().unwrap()).collect();
    assert_eq!(actions.len(), 3);
    for (a, name) in actions.iter().zip(["thigh_joint", "leg_joint", "foot_joint"]) {
        assert!(a.starts_with(&format!("tanh(lin_{name} + ")), "{a}");
        assert!(!a.contains("q_") || a.contains("n_q_") || a.contains("n_v_"), "{a}");
    }
    // The saved policy is the whole composed program, longer than the evolved one and the
    // linear policy's, and replays training episode 0.
    let size = r["best"]["size"].as_u64().unwrap() as usize;
    assert!(r["policy"]["nodes"].as_array().unwrap().len() > size + l["best"]["size"].as_u64().unwrap() as usize);
    let train = r["train"]["returns"][0].as_f64().unwrap();
    let out = grove(&["rollout", "--policy", s(&report), "--seed", "4", "--steps", "150"]);
    assert_ok(&out);
    assert!(text(&out.stdout).starts_with(&format!("hopper (brax): return {train:.6} over ")), "{} vs {train}", text(&out.stdout));
    // Exported to C, the policy acts as grove plays it.
    let out = grove(&["export", "--model", s(&report), "--lang", "c"]);
    assert_ok(&out);
    let src = d.join("policy.h");
    std::fs::write(&src, &out.stdout).unwrap();
    let rows: Vec<Vec<f64>> = (0..4).map(|r| (0..11).map(|i| ((r * 11 + i) as f64 * 0.41).sin() * (1.0 + r as f64)).collect()).collect();
    exports::assert_c_acts_as_saved(&src, &report, &rows, 3);
    let summary = text(&residual(&["--linear-iterations", "8", "--gens", "4"]).stdout);
    assert!(summary.contains("policy        residual: tanh(lin + f(n)), n = (o - mean) / std; lin = W n tuned by random search (8 iterations"), "{summary}");
}

#[test]
fn a_residual_run_resumes_from_either_stage_as_if_uninterrupted() {
    let d = dir("residual-resume");
    let (full, resumed, ck) = (d.join("full.json"), d.join("resumed.json"), d.join("run.ckpt"));
    assert_ok(&residual(&["--linear-iterations", "6", "--gens", "4", "--report", s(&full)]));
    // The programs' stage saved after generation 2; then on to 4 from the file.
    assert_ok(&residual(&["--linear-iterations", "6", "--gens", "2", "--checkpoint", s(&ck)]));
    let saved = read_json(&ck);
    assert_eq!(saved["residual"]["iteration"].as_u64(), Some(6));
    assert!(saved.get("linear").is_none());
    assert_ok(&grove(&["run", "--resume", s(&ck), "--gens", "4", "--report", s(&resumed), "-q"]));
    let (a, b) = (read_json(&full), read_json(&resumed));
    assert_eq!(a["timing"]["env_steps"], b["timing"]["env_steps"], "the env steps go on from the checkpoint's");
    assert_eq!(without_timings(a.clone()), without_timings(b));
    // Interrupted in the linear stage, it resumes there and goes on to the programs.
    let (long, again, ck2) = (d.join("long.json"), d.join("again.json"), d.join("linear.ckpt"));
    // Episodes of 10 steps, so that the linear stage lasts long enough for the signal.
    let short: Vec<&str> = BASE.iter().map(|&a| if a == "150" { "10" } else { a }).collect();
    let run = [&short[..], &["--policy", "residual", "--linear-iterations", "2000", "--gens", "2"]].concat();
    assert_ok(&grove(&[&run[..], &["--report", s(&long)]].concat()));
    interrupt_once_saved(&[&run[..], &["--checkpoint", s(&ck2), "--checkpoint-every", "1"]].concat(), Device::Inherited, &ck2);
    let at = read_json(&ck2)["linear"]["iteration"].as_u64().unwrap();
    assert!((1..2000).contains(&at), "stopped at iteration {at}");
    assert_ok(&grove(&["run", "--resume", s(&ck2), "--checkpoint-every", "1000", "--report", s(&again), "-q"]));
    let (a, b) = (read_json(&long), read_json(&again));
    assert_eq!(a["timing"]["env_steps"], b["timing"]["env_steps"]);
    assert!(without_timings(a) == without_timings(b), "the resumed report differs from the uninterrupted one");
    // A checkpoint of the programs' stage under other settings, or read as a program's run, gets one line.
    let mut damaged = saved.clone();
    damaged["residual"]["weights"].as_array_mut().unwrap().pop();
    damaged.as_object_mut().unwrap().remove("checksum");
    let broken = d.join("damaged.ckpt");
    write_resealed(&broken, damaged);
    assert_one_line_error(&grove(&["run", "--resume", s(&broken), "-q"]), &["damaged", "not whole rows of 11 observations"]);
    let mut other = saved.clone();
    other["experiment"]["Control"]["linear_iterations"] = 7.into();
    other.as_object_mut().unwrap().remove("checksum");
    let moved = d.join("moved.ckpt");
    write_resealed(&moved, other);
    assert_one_line_error(&grove(&["run", "--resume", s(&moved), "-q"]), &["at iteration 6 of --linear-iterations 7"]);
    let mut program = saved;
    program["experiment"]["Control"]["policy"] = "program".into();
    program.as_object_mut().unwrap().remove("checksum");
    let plain = d.join("program.ckpt");
    write_resealed(&plain, program);
    assert_one_line_error(&grove(&["run", "--resume", s(&plain), "-q"]), &["programs evolved on a linear policy", "policy=residual"]);
}

#[test]
fn a_head_tuned_between_generations_moves_the_linear_policy_and_resumes_as_if_uninterrupted() {
    let d = dir("residual-head");
    let (full, frozen, resumed, ck) = (d.join("full.json"), d.join("frozen.json"), d.join("resumed.json"), d.join("run.ckpt"));
    let head = ["--linear-iterations", "4", "--head-every", "2", "--head-iterations", "3"];
    assert_ok(&residual(&[&head[..], &["--gens", "5", "--report", s(&full)]].concat()));
    assert_ok(&residual(&["--linear-iterations", "4", "--gens", "5", "--report", s(&frozen)]));
    let (a, f) = (read_json(&full), read_json(&frozen));
    // Generations 0 to 5: tuned after 1, 3 and 5, three iterations each, after the 4 before.
    let returns = |r: &serde_json::Value| r["linear_search"]["returns"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect::<Vec<_>>();
    assert_eq!(a["linear_search"]["iterations"].as_u64(), Some(13));
    assert_eq!((a["linear_search"]["head_every"].as_u64(), a["linear_search"]["head_iterations"].as_u64()), (Some(2), Some(3)));
    assert_eq!(returns(&a)[..4], returns(&f)[..], "the stage before the programs is the same search");
    assert_eq!(f["linear_search"]["iterations"].as_u64(), Some(4));
    assert_ne!(a["linear_policy"]["weights"], f["linear_policy"]["weights"], "the tunings moved W");
    assert_ne!(a["linear_policy"]["mean"], f["linear_policy"]["mean"], "and the normaliser, from what the tunings' policies observed");
    // The same first two generations; from generation 2 on, the programs play over the new head.
    let best = |r: &serde_json::Value, g: usize| r["generations"][g]["best_return"].as_f64().unwrap();
    assert_eq!((best(&a, 0), best(&a, 1)), (best(&f, 0), best(&f, 1)));
    assert_ne!(best(&a, 2), best(&f, 2));
    // The report's policy is the chosen program over the last head, and replays.
    let train = a["train"]["returns"][0].as_f64().unwrap();
    let out = grove(&["rollout", "--policy", s(&full), "--seed", "4", "--steps", "150"]);
    assert_ok(&out);
    assert!(text(&out.stdout).starts_with(&format!("hopper (brax): return {train:.6} over ")), "{}", text(&out.stdout));
    let summary = text(&residual(&[&head[..], &["--gens", "5"]].concat()).stdout);
    assert!(summary.contains("(4 iterations, then 9 more under the programs, 3 every 2 generations, return "), "{summary}");
    // A run of 3 generations saves before its last (after the tuning of generation 1), and
    // goes on to 5 from the file: the same run.
    assert_ok(&residual(&[&head[..], &["--gens", "3", "--checkpoint", s(&ck)]].concat()));
    assert_eq!(read_json(&ck)["residual"]["iteration"].as_u64(), Some(7));
    assert_ok(&grove(&["run", "--resume", s(&ck), "--gens", "5", "--report", s(&resumed), "-q"]));
    let b = read_json(&resumed);
    assert_eq!(a["timing"]["env_steps"], b["timing"]["env_steps"], "the tunings' env steps are counted once");
    assert_eq!(without_timings(a), without_timings(b));
}

#[test]
fn residual_settings_come_from_flags_and_experiment_files_and_bad_ones_get_one_line() {
    use grove::task::control::PolicyKind;
    use support::control_settings as cli;
    let c = cli(&["--env", "walker2d", "--policy", "residual"], false);
    assert_eq!((c.policy, c.linear_iterations), (PolicyKind::Residual, grove::task::base::defaults::LINEAR_ITERATIONS_CPU));
    assert_eq!(cli(&["--env", "walker2d", "--policy", "residual"], true).linear_iterations, grove::task::base::defaults::LINEAR_ITERATIONS_GPU);
    assert_eq!(cli(&["--env", "walker2d", "--policy", "residual", "--linear-iterations", "7"], false).linear_iterations, 7);
    let e = support::control_experiment("Control(env: \"walker2d\", policy: \"residual\", linear_iterations: 7)");
    assert_eq!((e.policy, e.linear_iterations), (PolicyKind::Residual, 7));
    assert_eq!((e.head_every, e.head_iterations), (0, grove::task::base::defaults::HEAD_ITERATIONS), "the head stays frozen unless asked");
    let c = cli(&["--env", "hopper", "--policy", "residual", "--head-every", "5", "--head-iterations", "2"], false);
    assert_eq!((c.head_every, c.head_iterations), (5, 2));
    let e = support::control_experiment("Control(env: \"hopper\", policy: \"residual\", head_every: 4, head_iterations: 9)");
    assert_eq!((e.head_every, e.head_iterations), (4, 9));

    let d = dir("residual-bad");
    let report = d.join("r.json");
    let one = |extra: &[&str], needles: &[&str]| assert_one_line_error(&residual(&[extra, &["--report", s(&report)]].concat()), needles);
    one(&["--linear-iterations", "0"], &["--linear-iterations (linear_iterations) must be"]);
    one(&["--directions", "0"], &["--directions (linear.directions) must be 1 to"]);
    one(&["--head-every", "2", "--head-iterations", "0"], &["--head-iterations (head_iterations) must be"]);
    one(&["--head-every", "2", "--islands", "2"], &["--head-every (head_every) tunes one linear policy", "--islands"]);
    assert_one_line_error(&grove(&[&BASE[..], &["--head-every", "2", "--report", s(&report)]].concat()), &["--head-every (head_every)", "--policy residual"]);
    let file = d.join("bad.ron");
    std::fs::write(&file, "Control(env: \"hopper\", policy: \"residual\", linear_iterations: 0)").unwrap();
    assert_one_line_error(&grove(&["run", s(&file), "--device", "cpu", "-q"]), &["--linear-iterations (linear_iterations)"]);
    assert!(!report.exists(), "a refused run writes nothing");
}
