//! `grove control --normalise` as a user meets it (on by default with one island): the programs
//! read each observation through the running mean and deviation of every state the population
//! has visited. Generation 0 reads
//! them as they are, later ones through what the earlier ones saw; the saved policy has the last
//! normaliser written into its tree, so it replays with `grove rollout` and exports unchanged;
//! a run resumes from its checkpoint as if uninterrupted; bad settings and damaged checkpoints
//! get one clear line. Runs are small and on the CPU.

mod support;
#[path = "support/exports.rs"]
mod exports;
use support::{assert_ok, assert_one_line_error, dir, grove, read_json, s, text, without_timings, write_resealed};

const BASE: [&str; 14] =
    ["control", "--env", "hopper", "--device", "cpu", "--seed", "6", "--episode-steps", "150", "--test-episodes", "3", "--pop", "40", "-q"];

fn normalised(extra: &[&str]) -> std::process::Output {
    grove(&[&BASE[..], extra].concat())
}

#[test]
fn normalised_programs_learn_the_states_mean_and_deviation_and_their_report_replays() {
    let d = dir("normalise-policy");
    let (report, raw) = (d.join("normalised.json"), d.join("raw.json"));
    assert_ok(&normalised(&["--gens", "4", "--report", s(&report)]));
    assert_ok(&grove(&[&BASE[..], &["--normalise", "off", "--gens", "4", "--report", s(&raw)]].concat()));
    let (r, w) = (read_json(&report), read_json(&raw));
    assert_eq!(r["settings"]["normalise"], true);
    assert_eq!(w["settings"]["normalise"], false);
    assert!(w.get("normaliser").is_none());
    // The normaliser of the states seen before the last generation: 11 means and deviations.
    let norm = &r["normaliser"];
    let (mean, std) = (norm["mean"].as_array().unwrap(), norm["std"].as_array().unwrap());
    assert_eq!((mean.len(), std.len(), norm["observations"].as_array().unwrap().len()), (11, 11, 11));
    assert!(norm["states"].as_u64().unwrap() > 40 * 4, "every generation's states: {norm}");
    assert!(std.iter().all(|x| x.as_f64().unwrap() >= 0.0) && std.iter().any(|x| x.as_f64().unwrap() > 0.0), "{norm}");
    // Generation 0 reads the raw observations (mean 0, deviation 1), so it is the raw run's;
    // later generations read through what the earlier ones saw.
    let best = |r: &serde_json::Value, g: usize| r["generations"][g]["best_return"].as_f64().unwrap();
    assert_eq!(best(&r, 0), best(&w, 0));
    assert_ne!((best(&r, 1), best(&r, 2), best(&r, 3)), (best(&w, 1), best(&w, 2), best(&w, 3)));
    // The programs read n_NAME; the saved policy has the normaliser written in, and replays
    // training episode 0.
    let actions: Vec<&str> = r["best"]["programs"].as_array().unwrap().iter().map(|p| p["action"].as_str().unwrap()).collect();
    assert!(actions.iter().all(|a| a.starts_with("tanh(")), "{actions:?}");
    assert!(actions.iter().any(|a| a.contains("n_")) || actions.iter().all(|a| !a.contains("_")), "{actions:?}");
    let train = r["train"]["returns"][0].as_f64().unwrap();
    let out = grove(&["rollout", "--policy", s(&report), "--seed", "6", "--steps", "150"]);
    assert_ok(&out);
    assert!(text(&out.stdout).starts_with(&format!("hopper (brax): return {train:.6} over ")), "{} vs {train}", text(&out.stdout));
    // Exported to C, the policy acts as grove plays it.
    let out = grove(&["export", "--model", s(&report), "--lang", "c"]);
    assert_ok(&out);
    let src = d.join("policy.h");
    std::fs::write(&src, &out.stdout).unwrap();
    let rows: Vec<Vec<f64>> = (0..4).map(|r| (0..11).map(|i| ((r * 11 + i) as f64 * 0.37).cos() * (1.0 + r as f64)).collect()).collect();
    exports::assert_c_acts_as_saved(&src, &report, &rows, 3);
    let summary = text(&normalised(&["--gens", "4"]).stdout);
    assert!(summary.contains("inputs        n = (o - mean) / std, learnt from the "), "{summary}");
}

#[test]
fn a_normalised_run_resumes_as_if_uninterrupted_and_a_damaged_normaliser_is_one_line() {
    let d = dir("normalise-resume");
    let (full, resumed, ck) = (d.join("full.json"), d.join("resumed.json"), d.join("run.ckpt"));
    assert_ok(&normalised(&["--gens", "5", "--fresh-starts", "--report", s(&full)]));
    assert_ok(&normalised(&["--gens", "2", "--fresh-starts", "--checkpoint", s(&ck)]));
    let saved = read_json(&ck);
    assert_eq!(saved["inputs"]["sum"].as_array().map(Vec::len), Some(11));
    assert!(saved["inputs"]["seen"].as_u64().unwrap() > 0);
    assert_ok(&grove(&["run", "--resume", s(&ck), "--gens", "5", "--report", s(&resumed), "-q"]));
    let (a, b) = (read_json(&full), read_json(&resumed));
    assert_eq!(a["normaliser"], b["normaliser"]);
    assert_eq!(without_timings(a), without_timings(b));
    // A normaliser of the wrong size, none where the settings normalise, or one where they do
    // not: one line each.
    let reseal = |name: &str, edit: &dyn Fn(&mut serde_json::Value)| {
        let mut v = saved.clone();
        edit(&mut v);
        v.as_object_mut().unwrap().remove("checksum");
        let path = d.join(name);
        write_resealed(&path, v);
        path
    };
    let short = reseal("short.ckpt", &|v| {
        v["inputs"]["sumsq"].as_array_mut().unwrap().pop();
    });
    assert_one_line_error(&grove(&["run", "--resume", s(&short), "-q"]), &["the saved normaliser holds 10 sums of squares for 11 observations"]);
    let none = reseal("none.ckpt", &|v| {
        v.as_object_mut().unwrap().remove("inputs");
    });
    assert_one_line_error(&grove(&["run", "--resume", s(&none), "-q"]), &["holds no normaliser but its settings normalise"]);
    let off = reseal("off.ckpt", &|v| v["experiment"]["Control"]["normalise"] = false.into());
    assert_one_line_error(&grove(&["run", "--resume", s(&off), "-q"]), &["holds a normaliser but its settings do not normalise"]);
}

#[test]
fn normalise_comes_from_flags_and_experiment_files_and_bad_uses_get_one_line() {
    use grove::task::control::PolicyKind;
    use support::control_settings as cli;
    // On by default with one island, off with several; a linear or residual policy always is.
    assert!(cli(&["--env", "walker2d"], false).normalise);
    assert!(cli(&["--env", "walker2d"], true).normalise);
    assert!(!cli(&["--env", "walker2d", "--normalise", "off"], true).normalise);
    assert!(cli(&["--env", "walker2d", "--normalise", "on"], false).normalise);
    assert!(!cli(&["--env", "walker2d", "--islands", "2"], false).normalise);
    let linear = cli(&["--env", "walker2d", "--policy", "linear"], false);
    assert!(linear.policy == PolicyKind::Linear && linear.normalise);
    assert!(support::control_experiment("Control(env: \"hopper\")").normalise);
    assert!(!support::control_experiment("Control(env: \"hopper\", normalise: false)").normalise);
    assert!(!support::control_experiment("Control(env: \"hopper\", islands: (count: 2))").normalise);
    // A checkpoint or report of an older grove, without the field, ran on raw observations.
    let old: grove::task::control::ControlSettings =
        serde_json::from_value(serde_json::json!({"env": "hopper", "profile": null, "grammar": null, "functions": "add", "engine": grove::evolve::EngineConfig::default(),
            "map": grove::genome::MapConfig::default(), "init": grove::genome::InitConfig::default(), "vary": grove::genome::vary::GeVaryConfig::default(),
            "genome_capacity": 100, "episodes": 1, "episode_steps": null, "test_episodes": 1, "parsimony": 0.0, "trees": grove::task::base::search::ClassTreeSettings::default(),
            "device": "cpu"}))
        .unwrap();
    assert!(!old.normalise);
    let d = dir("normalise-bad");
    let report = d.join("r.json");
    let one = |extra: &[&str], needles: &[&str]| assert_one_line_error(&normalised(&[extra, &["--report", s(&report)]].concat()), needles);
    one(&["--policy", "linear", "--normalise", "off"], &["--normalise off is for --policy program", "linear policy always reads normalised"]);
    one(&["--policy", "residual", "--normalise", "off"], &["--normalise off is for --policy program"]);
    one(&["--islands", "2", "--normalise", "on"], &["--normalise on (normalise) learns one normaliser for one population", "--normalise off"]);
    let file = d.join("bad.ron");
    std::fs::write(&file, "Control(env: \"hopper\", policy: \"linear\", normalise: false)").unwrap();
    assert_one_line_error(&grove(&["run", s(&file), "--device", "cpu", "-q"]), &["normalise: false is for policy: program"]);
    std::fs::write(&file, "Control(env: \"hopper\", normalise: true, islands: (count: 2))").unwrap();
    assert_one_line_error(&grove(&["run", s(&file), "--device", "cpu", "-q"]), &["learns one normaliser for one population"]);
    assert!(!report.exists(), "a refused run writes nothing");
}
