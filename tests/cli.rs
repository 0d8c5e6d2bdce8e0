//! The command line as a user meets it: exit codes, one-line errors, and the outputs of
//! `grove check`, `grove map` and `grove evolve`.

use std::process::Output;

mod support;
use support::{Device, assert_one_line_error, control_experiment, control_settings, grove_run, scratch, temp_file, text};

/// `grove ARGS` from the repository root with `stdin` on its standard input.
fn grove(args: &[&str], stdin: &str) -> Output {
    grove_run(args, stdin, Device::Inherited, None)
}

#[test]
fn check_summarises_a_good_grammar() {
    let out = grove(&["check", "grammars/ge-paper.bnf"], "");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(s.contains("rules       3"), "{s}");
    assert!(s.contains("<expr>") && s.contains("yes"), "{s}");
    assert!(s.contains("bytes of 65536"), "{s}");
}

#[test]
fn check_reports_errors_with_position_and_fails() {
    let bad = temp_file("bad.bnf", "<e> ::= x\n  | <e> + <v>\n");
    let out = grove(&["check", bad.to_str().unwrap()], "");
    assert_eq!(out.status.code(), Some(1));
    let e = text(&out.stderr);
    assert!(e.contains("bad.bnf:2:11: error: non-terminal <v> is used but never defined"), "{e}");
    assert!(!e.contains("panicked"));
    let cyc = temp_file("cycle.bnf", "<s> ::= <a>\n<a> ::= <b>\n<b> ::= (<a>)\n");
    let out = grove(&["check", cyc.to_str().unwrap()], "");
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("never derives a finished string"));
    let out = grove(&["check", "no/such/file.bnf"], "");
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).starts_with("error: cannot read grammar"));
}

#[test]
fn map_prints_phenotypes_and_reports_bad_lines() {
    let out = grove(&["map", "-g", "grammars/vladislavleva4.bnf"], "0,9,10\n\n[14, 1, 2, 3, 4, 99]\n14 0 0 0\nx,1\n");
    assert_eq!(out.status.code(), Some(1), "a bad line makes the exit status 1");
    assert_eq!(text(&out.stdout), "x[:, 0]+x[:, 1]\n12.34\n<invalid: out of codons>\n");
    assert_eq!(text(&out.stderr).trim(), "line 5: codon 1 is `x`, not an integer from 0 to 4294967295");
}

#[test]
fn map_jsonl_with_wraps() {
    let out = grove(&["map", "-g", "grammars/vladislavleva4.bnf", "--wraps", "1", "--format", "jsonl"], "14,0,0,0\n");
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_str(text(&out.stdout).trim()).unwrap();
    assert_eq!(v["phenotype"], "00.04");
    assert_eq!(v["used_codons"], 5);
    assert_eq!(v["valid"], true);
}

#[test]
fn bad_options_give_one_clear_line() {
    for (args, needle) in [
        (vec!["evolve", "--data", "builtin:nope", "--grammar", "grammars/regression.bnf"], "nope"),
        (vec!["evolve", "--data", "missing.csv", "--grammar", "grammars/regression.bnf"], "missing.csv"),
        (vec!["evolve", "--pop", "1", "--grammar", "grammars/regression.bnf"], "--pop"),
        (vec!["evolve", "--test-fraction", "1.5", "--grammar", "grammars/regression.bnf"], "--test-fraction"),
        (vec!["evolve", "--data", "builtin:quartic", "--functions", "add,nope", "--device", "cpu"], "nope"),
        (vec!["evolve", "--optimise-fraction", "0", "--grammar", "grammars/regression.bnf"], "--optimise-fraction"),
        (vec!["evolve", "--optimise-fraction", "1.5", "--functions", "add,mul"], "--optimise-fraction"),
        (vec!["evolve", "--optimise-every", "0", "--functions", "add,mul"], "--optimise-every"),
        (vec!["evolve", "--optimise-constants", "5000", "--functions", "add,mul"], "--optimise-constants"),
        (vec!["classify", "--optimise-fraction", "0"], "--optimise-fraction"),
        (vec!["classify", "--optimise-every", "0", "--optimise-constants", "3"], "--optimise-every"),
        (vec!["classify", "--optimise-constants", "5000"], "--optimise-constants"),
    ] {
        let out = grove(&args, "");
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", text(&out.stderr));
        let e = text(&out.stderr);
        assert!(e.starts_with("error: ") && e.contains(needle), "{args:?}: {e}");
        assert_eq!(e.trim().lines().count(), 1, "{args:?}: one line expected: {e}");
    }
}

#[test]
fn bad_csv_names_row_and_column() {
    let csv = temp_file("bad.csv", "a,b,y\n1,2,3\n4,oops,6\n");
    let out = grove(&["evolve", "--data", csv.to_str().unwrap(), "--grammar", "grammars/regression.bnf", "--gens", "1"], "");
    assert_eq!(out.status.code(), Some(1));
    let e = text(&out.stderr);
    assert!(e.contains("oops") && e.contains('3') && e.contains('b'), "{e}");
    let ragged = temp_file("ragged.csv", "a,b,y\n1,2,3\n4,5\n");
    let out = grove(&["evolve", "--data", ragged.to_str().unwrap(), "--grammar", "grammars/regression.bnf", "--gens", "1"], "");
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains('3'), "{}", text(&out.stderr));
}

#[test]
fn evolve_writes_a_complete_report() {
    let dir = scratch();
    let report = dir.join("run.json");
    let out = grove(
        &["evolve", "--data", "builtin:koza1", "--grammar", "grammars/regression.bnf", "--pop", "50", "--gens", "3",
          "--test-fraction", "0.25", "--report", report.to_str().unwrap(), "-q", "--optimise-constants", "3", "--optimise-every", "2"],
        "",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(s.contains("best program") && s.contains("train") && s.contains("test"), "{s}");
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    for key in ["settings", "generations", "best", "train", "test", "timing", "version"] {
        assert!(!r[key].is_null(), "report lacks {key}");
    }
    assert_eq!(r["generations"].as_array().unwrap().len(), 4);
    for key in ["infix", "latex", "sympy", "size"] {
        assert!(!r["best"][key].is_null(), "best lacks {key}");
    }
    for key in ["mse", "rmse", "mae", "r2"] {
        assert!(r["train"][key].is_number() && r["test"][key].is_number(), "scores lack {key}");
    }
    assert_eq!(r["settings"]["engine"]["pop_size"], 50);
    let c = &r["settings"]["engine"]["constants"];
    assert_eq!((c["steps"].as_u64(), c["every"].as_u64(), c["fraction"].as_f64()), (Some(3), Some(2), Some(0.2)), "constant fitting settings: {c}");
}

#[test]
fn classify_refuses_to_fit_constants_for_more_classes_than_the_fit_takes() {
    let mut csv = String::from("a,b,label\n");
    for i in 0..200 {
        csv += &format!("{},{},{}\n", i % 7, i % 11, i % 20);
    }
    let data = temp_file("c20.csv", &csv);
    let out = grove(&["classify", "--data", data.to_str().unwrap(), "--pop", "20", "--gens", "1", "--device", "cpu", "--optimise-constants", "3"], "");
    assert_eq!(out.status.code(), Some(1));
    let e = text(&out.stderr);
    assert!(e.starts_with("error: ") && e.contains("at most 16 classes") && e.contains("20"), "{e}");
    assert_eq!(e.trim().lines().count(), 1, "{e}");
}

#[test]
fn classify_fits_constants_and_keeps_the_setting_in_its_report() {
    let dir = std::env::temp_dir().join(format!("grove-cli-classify-fit-{}", std::process::id()));
    let report = dir.join("run.json");
    let out = grove(
        &["classify", "--data", "builtin:iris", "--pop", "200", "--gens", "4", "--device", "cpu", "--report", report.to_str().unwrap(), "-q",
          "--optimise-constants", "4", "--optimise-every", "2", "--optimise-fraction", "0.1"],
        "",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let c = &r["settings"]["engine"]["constants"];
    assert_eq!((c["steps"].as_u64(), c["every"].as_u64(), c["fraction"].as_f64()), (Some(4), Some(2), Some(0.1)), "constant fitting settings: {c}");
    assert!(r["test"]["accuracy"].as_f64().is_some_and(|a| a > 0.5), "{}", r["test"]);
    // Not given: the CPU's default, no fitting.
    let out = grove(&["classify", "--data", "builtin:iris", "--pop", "50", "--gens", "1", "--device", "cpu", "--report", report.to_str().unwrap(), "-q"], "");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(r["settings"]["engine"]["constants"]["steps"], 0);
}

#[test]
fn rollout_replays_actions_and_writes_states_from_any_directory() {
    let actions = temp_file("hop.csv", "thigh,leg,foot\n0.1,-0.2,0.3\n0.1,-0.2,0.3\n1,1,1\n");
    let states = scratch().join("hop-states.csv");
    let out = grove_run(
        &["rollout", "--env", "hopper", "--actions", actions.to_str().unwrap(), "--states", states.to_str().unwrap(), "--no-noise"],
        "",
        Device::Inherited,
        Some(&std::env::temp_dir()),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("hopper (brax): return") && text(&out.stdout).contains("over 3 steps"), "{}", text(&out.stdout));
    let csv = std::fs::read_to_string(&states).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 5, "header, reset state, 3 steps");
    assert!(lines[0].starts_with("step,q_rootx,q_rootz,q_rooty,q_thigh_joint") && lines[0].ends_with("v_foot_joint,reward,done"), "{}", lines[0]);
    assert_eq!(lines[1].split(',').count(), 1 + 12 + 2);
    assert!(lines[1].starts_with("0,0,0,0,0,0,0,"), "rest pose without noise: {}", lines[1]);
    // Gymnasium's rootz has ref 1.25: qpos[1] starts at the world height.
    let args = ["rollout", "--env", "hopper", "--profile", "gymnasium", "--no-noise", "--steps", "1", "--states", states.to_str().unwrap()];
    let out = grove_run(&args, "", Device::Inherited, Some(&std::env::temp_dir()));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(std::fs::read_to_string(&states).unwrap().lines().nth(1).unwrap().starts_with("0,0,1.25,"));
}

#[test]
fn rollout_rejects_bad_input_with_one_clear_line() {
    let wrong = temp_file("wrong.csv", "0.1,0.2\n");
    let out = grove(&["rollout", "--env", "hopper", "--actions", wrong.to_str().unwrap()], "");
    assert!(!out.status.success());
    let e = text(&out.stderr);
    assert!(e.contains("wrong.csv:1:") && e.contains("2 columns") && e.contains("3 actuators"), "{e}");
    let short = temp_file("short.csv", "0.1,0.2\n0,0\n");
    let out = grove(&["rollout", "--env", "swimmer", "--actions", short.to_str().unwrap(), "--steps", "5"], "");
    assert!(text(&out.stderr).contains("--steps 5") && text(&out.stderr).contains("2 rows"), "{}", text(&out.stderr));
    let out = grove(&["rollout", "--env", "ant"], "");
    assert!(text(&out.stderr).contains("unknown environment `ant`"), "{}", text(&out.stderr));
    let out = grove(&["rollout", "--env", "swimmer", "--profile", "mjx"], "");
    assert!(text(&out.stderr).contains("no profile `mjx`"), "{}", text(&out.stderr));
    let bad = temp_file("bad.ron", "(name: \"x\", plane: XY, wings: 2)");
    let out = grove(&["rollout", "--env", bad.to_str().unwrap()], "");
    let e = text(&out.stderr);
    assert!(e.contains("bad.ron:1:") && e.contains("wings"), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
}

#[test]
fn rollout_on_cuda_refuses_what_the_gpu_replay_cannot_do_in_one_line() {
    let actions = temp_file("gpu-hop.csv", "thigh,leg,foot\n0.1,-0.2,0.3\n");
    for (extra, needle) in [(vec!["--states", "s.csv"], "--states"), (vec!["--actions", actions.to_str().unwrap(), "--ignore-termination"], "--ignore-termination")] {
        let mut args = vec!["rollout", "--env", "hopper", "--device", "cuda"];
        args.extend(extra);
        let out = grove(&args, "");
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let e = text(&out.stderr);
        assert!(e.starts_with("error: ") && e.contains(needle), "{args:?}: {e}");
        assert_eq!(e.trim().lines().count(), 1, "{args:?}: {e}");
    }
}

/// `grove ARGS` parsed as the command line parses it.
fn parsed(args: &[&str]) -> Result<grove::cli::Command, clap::Error> {
    <grove::cli::Cli as clap::Parser>::try_parse_from([&["grove"], args].concat()).map(|c| c.command)
}

/// The settings of an experiment file's text.
fn experiment(text: &str) -> grove::task::runner::experiment::Experiment {
    let (c, v) = grove::task::runner::experiment::parse_ron(text, "t.ron").unwrap();
    grove::task::runner::experiment::Experiment::from_parts(&c, v, "t.ron").unwrap_or_else(|e| panic!("{e:#}"))
}

/// Issue 56: an experiment file of `grove evolve` that names no representation evolves over the
/// default function set, as `grove evolve --data FILE` does; a grammar given leaves none.
#[test]
fn an_evolve_file_without_functions_takes_the_default_function_set() {
    use grove::task::runner::experiment::Experiment;
    let Experiment::Evolve(s) = experiment("Evolve(data: \"builtin:pagie1\")") else { panic!() };
    assert_eq!(s.functions.as_deref(), Some(grove::task::base::defaults::EVOLVE_FUNCTIONS));
    let Ok(grove::cli::Command::Evolve(a)) = parsed(&["evolve", "--data", "builtin:pagie1", "--device", "cpu"]) else { panic!() };
    assert_eq!(a.settings().unwrap().functions, s.functions, "the flags' default is the file's");
    let Experiment::Evolve(g) = experiment("Evolve(data: \"builtin:pagie1\", grammar: \"grammars/regression.bnf\")") else { panic!() };
    assert_eq!((g.functions, g.grammar.as_deref()), (None, Some("grammars/regression.bnf")));
    let Ok(grove::cli::Command::Evolve(a)) = parsed(&["evolve", "-g", "grammars/regression.bnf", "--device", "cpu"]) else { panic!() };
    assert_eq!(a.settings().unwrap().functions, None);
}

#[test]
fn shard_rows_is_a_flag_of_evolve_only() {
    // It was offered by classify and control and then refused by their checks.
    for command in [&["classify"][..], &["control", "--env", "swimmer"]] {
        let e = parsed(&[command, &["--shard-rows"]].concat()).unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::UnknownArgument, "{command:?}: {e}");
        let out = grove(&[command, &["--shard-rows", "--device", "cpu"]].concat(), "");
        assert_eq!(out.status.code(), Some(2), "{command:?}");
        assert!(text(&out.stderr).contains("unexpected argument '--shard-rows'"), "{}", text(&out.stderr));
    }
    let Ok(grove::cli::Command::Evolve(a)) = parsed(&["evolve", "--functions", "add", "--shard-rows", "--gpus", "2", "--device", "cpu"]) else { panic!() };
    assert!(a.settings().unwrap().islands.shard_rows);
    let Ok(grove::cli::Command::Evolve(a)) = parsed(&["evolve", "--functions", "add", "--device", "cpu"]) else { panic!() };
    assert!(!a.settings().unwrap().islands.shard_rows);
}

#[test]
fn help_groups_the_flags_under_headings_and_prints_the_defaults_from_the_constants() {
    use grove::task::base::defaults;
    let help = |args: &[&str]| {
        let out = grove(args, "");
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        text(&out.stdout)
    };
    let shared = ["Representation:", "Search:", "Grammatical evolution:", "Islands:", "Budget:", "Output and run:"];
    for (command, own) in [
        ("evolve", &["Data:", "Model:", "Constants:", "Model choice:"][..]),
        ("classify", &["Data:", "Model:", "Constants:", "Model choice:"]),
        ("control", &["Environment:", "Episodes:", "Policy:"]),
    ] {
        let h = help(&[command, "--help"]);
        for heading in shared.iter().chain(own) {
            assert!(h.lines().any(|l| l == *heading), "`grove {command} --help` lacks the heading {heading}");
        }
        // Every heading's flags follow it: the representation group is the same for all three.
        let at = |s: &str| h.find(s).unwrap_or_else(|| panic!("{command}: no {s}"));
        assert!(at("Representation:") < at("--grammar") && at("--define") < at("Search:"), "{command}");
        let words = h.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(words.contains(&format!("[default: {}; a resumed run keeps its own]", defaults::CHECKPOINT_EVERY)), "{command}");
        assert_eq!(h.lines().any(|l| l.trim_start().starts_with("--shard-rows")), command == "evolve", "{command}");
        let short = help(&[command, "-h"]);
        assert!(short.contains("Search:") && short.contains("Output and run:"), "{command} -h");
    }
    // The help wraps its lines: compare the words.
    let flat = |h: String| h.split_whitespace().collect::<Vec<_>>().join(" ");
    let h = flat(help(&["evolve", "--help"]));
    let v = grove::task::base::validation::AUTO_FRACTION;
    let rows = (grove::task::base::defaults::EVOLVE_VALIDATION_ROWS, grove::task::base::validation::AUTO_MIN_ROWS);
    assert!(h.contains(&format!("[default: {v} with at least {} training rows for evolve ({} for classify)", rows.0, rows.1)), "{h}");
    assert!(h.contains(&format!("--folds <K> Folds of --select cv (auto's rule below {} training rows:", rows.0)), "{h}");
    let fit = grove::task::regression::FITTING;
    assert!(h.contains(&format!("[default: {}]", fit.every)) && h.contains(&format!("[default: {}]", fit.fraction)), "{h}");
    assert!(h.contains("[default: evolve 0 and classify 0, on either device"), "{h}");
    assert!(h.contains("- eager: One codon at every non-terminal (PonyGE2)"), "the codons' help: {h}");
    assert!(h.contains("- sensible: Ramped half-and-half"), "the initialisations' help: {h}");
    let h = flat(help(&["control", "--help"]));
    let (c, g) = (defaults::CONTROL_CPU, defaults::CONTROL_GPU);
    assert!(h.contains(&format!("[default: {} on the CPU, {} on a GPU]", c.pop, g.pop)), "{h}");
    assert!(h.contains(&format!("[default: {} on the CPU, {} on a GPU]", defaults::CONTROL_CPU_EPISODES, defaults::CONTROL_GPU_EPISODES)), "{h}");
    assert!(h.contains(&format!("[default: {}]", defaults::FUNCTIONS)), "{h}");
}

#[test]
fn the_flags_give_the_settings_an_experiment_file_gives_for_the_same_values() {
    use grove::task::runner::experiment::Experiment;
    let Ok(grove::cli::Command::Evolve(a)) = parsed(&[
        "evolve", "-g", "grammars/regression.bnf", "--pop", "40", "--gens", "3", "--seed", "7", "--metric", "rmse", "--outputs", "1",
        "--optimise-every", "2", "--select", "train", "--bloat", "nsga2", "--codons", "lazy", "--init", "random", "--genome-length", "600",
        "--islands", "2", "--migrants", "3", "--time-limit", "9", "--device", "cpu",
    ]) else {
        panic!()
    };
    let file = experiment(
        "Evolve(grammar: \"grammars/regression.bnf\", engine: (pop_size: 40, generations: 3, seed: 7, bloat: \"nsga2\", constants: (every: 2)), \
         regression: (metric: \"rmse\"), select: \"train\", map: (codons: \"lazy\"), init: (method: \"random\", length: 600), \
         genome_capacity: 600, islands: (count: 2, migrants: 3), budget: (time_limit: 9.0), device: \"cpu\")",
    );
    assert_eq!(Experiment::Evolve(a.settings().unwrap()), file);

    let Ok(grove::cli::Command::Classify(a)) =
        parsed(&["classify", "-g", "grammars/classify.bnf", "--binary", "--data", "builtin:breast_cancer", "--p-out", "0.2", "--device", "cpu"])
    else {
        panic!()
    };
    let file = experiment("Classify(grammar: \"grammars/classify.bnf\", binary: true, data: \"builtin:breast_cancer\", trees: (p_out: 0.2), device: \"cpu\")");
    let Experiment::Classify(k) = &file else { panic!() };
    assert_eq!(k.functions, None, "a grammar leaves no function set");
    assert_eq!(Experiment::Classify(a.settings().unwrap()), file);

    // Control on either device: a file that says `device: "cuda"` gets a GPU's defaults, as the
    // command line does once it has opened one.
    for (device, on_gpu) in [("cpu", false), ("cuda", true)] {
        let flags = control_settings(&["--env", "hopper", "--policy", "residual", "--directions", "16", "--episode-steps", "50", "--device", device], on_gpu);
        let file = control_experiment(&format!(
            "Control(env: \"hopper\", policy: \"residual\", linear: (directions: 16), episode_steps: 50, device: \"{device}\")"
        ));
        assert_eq!(flags, file, "{device}");
    }
}

#[test]
fn control_takes_a_gpus_defaults_on_a_gpu_without_needing_one_to_compute_them() {
    use grove::task::base::defaults::{CONTROL_CPU, CONTROL_CPU_EPISODES, CONTROL_GPU, CONTROL_GPU_EPISODES, LINEAR_CPU, LINEAR_GPU};
    let gpu = control_settings(&["--env", "swimmer", "--device", "cuda"], true);
    assert_eq!((gpu.engine.pop_size, gpu.engine.generations, gpu.episodes), (CONTROL_GPU.pop, CONTROL_GPU.gens, CONTROL_GPU_EPISODES));
    assert_eq!((gpu.linear, gpu.linear_iterations), (LINEAR_GPU, CONTROL_GPU.gens));
    assert_eq!(gpu.engine.constants.steps, 0, "control fits no constants");
    let cpu = control_settings(&["--env", "swimmer", "--device", "cpu"], false);
    assert_eq!((cpu.engine.pop_size, cpu.engine.generations, cpu.episodes), (CONTROL_CPU.pop, CONTROL_CPU.gens, CONTROL_CPU_EPISODES));
    assert_eq!((cpu.linear, cpu.linear_iterations), (LINEAR_CPU, CONTROL_CPU.gens));
    // --directions alone keeps the device's share of top directions (GPU 128 of 1024).
    assert_eq!(control_settings(&["--env", "swimmer", "--directions", "256", "--device", "cuda"], true).linear.top, 32);
    assert_eq!(control_settings(&["--env", "swimmer", "--directions", "6", "--device", "cpu"], false).linear.top, 3);
    // What is given wins over either device's defaults.
    let s = control_settings(&["--env", "swimmer", "--pop", "30", "--episodes", "2", "--top-directions", "7", "--device", "cuda"], true);
    assert_eq!((s.engine.pop_size, s.engine.generations, s.episodes, s.linear.top), (30, CONTROL_GPU.gens, 2, 7));
    // The normaliser: on with one island, off with several, unless the flag says.
    assert!(s.normalise);
    assert!(!control_settings(&["--env", "swimmer", "--islands", "2", "--migrants", "3", "--device", "cpu"], false).normalise);
}

#[test]
fn classify_takes_a_gpus_population_and_generations_where_the_run_has_a_gpu() {
    use grove::task::base::defaults::{CLASSIFY, CLASSIFY_GPU};
    use grove::task::runner::experiment::Experiment;
    assert!(CLASSIFY_GPU.pop * CLASSIFY_GPU.gens > CLASSIFY.pop * CLASSIFY.gens, "a GPU's budget is the larger");
    let out = grove(&["classify", "--help"], "");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let h = text(&out.stdout).split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(h.contains(&format!("[default: {} on the CPU, {} on a GPU]", CLASSIFY.pop, CLASSIFY_GPU.pop)), "{h}");
    assert!(h.contains(&format!("[default: {} on the CPU, {} on a GPU]", CLASSIFY.gens, CLASSIFY_GPU.gens)), "{h}");
    let budget = |e: &Experiment| match e {
        Experiment::Classify(s) => (s.engine.pop_size, s.engine.generations),
        _ => panic!("not a classification"),
    };
    // The command line: `--device cuda` is a GPU's defaults without needing one to compute them.
    for (device, want) in [("cpu", CLASSIFY), ("cuda", CLASSIFY_GPU)] {
        let Ok(grove::cli::Command::Classify(a)) = parsed(&["classify", "--device", device]) else { panic!() };
        assert_eq!(budget(&Experiment::Classify(a.settings().unwrap())), (want.pop, want.gens), "{device}");
        // A file that names the device gets the same.
        let file = experiment(&format!("Classify(device: \"{device}\")"));
        assert_eq!(budget(&file), (want.pop, want.gens), "{device} (file)");
    }
    // What is given wins over either device's defaults.
    let Ok(grove::cli::Command::Classify(a)) = parsed(&["classify", "--pop", "300", "--device", "cuda"]) else { panic!() };
    assert_eq!(budget(&Experiment::Classify(a.settings().unwrap())), (300, CLASSIFY_GPU.gens));
    let file = experiment("Classify(engine: (generations: 7), device: \"cuda\")");
    assert_eq!(budget(&file), (CLASSIFY_GPU.pop, 7));
}

#[test]
fn the_representation_group_keeps_each_commands_function_set() {
    let Ok(grove::cli::Command::Classify(a)) = parsed(&["classify", "--device", "cpu"]) else { panic!() };
    assert_eq!(a.settings().unwrap().functions.as_deref(), Some(grove::task::base::defaults::FUNCTIONS));
    let s = control_settings(&["--env", "swimmer", "-g", "grammars/swimmer.bnf", "--device", "cpu"], false);
    assert_eq!((s.grammar.as_deref(), s.functions), (Some("grammars/swimmer.bnf"), None));
    let s = control_settings(&["--env", "swimmer", "--functions", "add,sin", "--define", "half(x) = x / 2", "--device", "cpu"], false);
    assert_eq!((s.functions.as_deref(), s.operators.as_slice()), (Some("add,sin"), &["half(x) = x / 2".to_string()][..]));
    // evolve's own is the regressor's (aq in place of div), and a grammar leaves none.
    let Ok(grove::cli::Command::Evolve(a)) = parsed(&["evolve", "--device", "cpu"]) else { panic!() };
    assert_eq!(a.settings().unwrap().functions.as_deref(), Some(grove::task::base::defaults::EVOLVE_FUNCTIONS));
    let Ok(grove::cli::Command::Evolve(a)) = parsed(&["evolve", "-g", "grammars/regression.bnf", "--device", "cpu"]) else { panic!() };
    let s = a.settings().unwrap();
    assert_eq!((s.grammar.as_deref(), s.functions), (Some("grammars/regression.bnf"), None));
    // An experiment file that names neither takes the same default (issue 56).
    let grove::task::runner::experiment::Experiment::Evolve(f) = experiment("Evolve(device: \"cpu\")") else { panic!() };
    assert_eq!(f.functions.as_deref(), Some(grove::task::base::defaults::EVOLVE_FUNCTIONS));
    for command in [&["evolve"][..], &["classify"], &["control", "--env", "swimmer"]] {
        let e = parsed(&[command, &["-g", "grammars/regression.bnf", "--functions", "add"]].concat()).unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::ArgumentConflict, "{command:?}");
    }
}

#[test]
fn the_engines_own_enums_take_the_spellings_of_the_mirrors_they_replace() {
    use grove::genome::{Codons, InitMethod};
    let Ok(grove::cli::Command::Evolve(a)) = parsed(&["evolve", "-g", "grammars/regression.bnf", "--codons", "lazy", "--init", "random", "--device", "cpu"]) else {
        panic!()
    };
    let s = a.settings().unwrap();
    assert_eq!((s.map.codons, s.init.method), (Codons::Lazy, InitMethod::Random));
    let Ok(grove::cli::Command::Map(m)) = parsed(&["map", "-g", "grammars/ge-paper.bnf", "--codons", "eager"]) else { panic!() };
    assert_eq!(m.codons, Codons::Eager);
    for bad in [&["--codons", "Lazy"][..], &["--codons", "greedy"], &["--init", "ramped"], &["--init", ""]] {
        let e = parsed(&[&["evolve", "-g", "grammars/regression.bnf"][..], bad].concat()).unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::InvalidValue, "{bad:?}");
    }
}

#[test]
fn a_flag_given_nan_or_an_infinity_gets_one_line_that_names_it() {
    // JSON, the settings' road, has no NaN: the flag is refused before it could become null.
    let evolve = ["evolve", "--functions", "add", "--device", "cpu"];
    for (flag, value, field) in [
        ("--parsimony", "nan", "regression.parsimony"),
        ("--test-fraction", "inf", "test_fraction"),
        ("--validation-fraction", "NaN", "validation_fraction"),
        ("--size-pressure", "inf", "engine.size_pressure"),
        ("--crossover", "nan", "trees.p_crossover"),
        ("--mutation", "inf", "trees.p_mutation"),
        ("--optimise-fraction", "nan", "engine.constants.fraction"),
        ("--time-limit", "inf", "budget.time_limit"),
    ] {
        assert_one_line_error(&grove(&[&evolve[..], &[flag, value]].concat(), ""), &[&format!("{flag} ({field}) must be a finite number")]);
    }
    // With a grammar the rates are GE's.
    let ge = ["evolve", "--grammar", "tests/fixtures/grammars/arith_aq.bnf", "--device", "cpu"];
    for (flag, value, field) in [("--crossover", "nan", "vary.crossover"), ("--mutation", "inf", "vary.mutation")] {
        assert_one_line_error(&grove(&[&ge[..], &[flag, value]].concat(), ""), &[&format!("{flag} ({field}) must be a finite number")]);
    }
    assert_one_line_error(&grove(&["classify", "--p-out", "nan", "--device", "cpu"], ""), &["--p-out (trees.p_out) must be a finite number"]);
    assert_one_line_error(&grove(&["classify", "--parsimony", "inf", "--device", "cpu"], ""), &["--parsimony (parsimony)"]);
    let control = ["control", "--env", "swimmer", "--device", "cpu"];
    for (flag, field) in [("--healthy-reward", "healthy_reward"), ("--step-size", "linear.step_size"), ("--stop-at", "budget.stop_at")] {
        assert_one_line_error(&grove(&[&control[..], &[flag, "nan"]].concat(), ""), &[&format!("{flag} ({field}) must be a finite number, got NaN")]);
    }
    // A finite value past a limit still gets the check's own message.
    assert_one_line_error(&grove(&[&evolve[..], &["--crossover", "1.5"]].concat(), ""), &["--crossover (trees.p_crossover) must be a probability in [0, 1], got 1.5"]);
    assert_one_line_error(&grove(&[&ge[..], &["--crossover", "1.5"]].concat(), ""), &["--crossover (vary.crossover) must be a probability, got 1.5"]);
}

/// `--crossover` and `--mutation` take a plain rate as before or an operator of GE with an
/// optional rate; bad values and GE operators named for tree GP get one line.
#[test]
fn ge_operators_are_named_with_an_optional_rate() {
    use grove::genome::vary::{GeCrossover, GeMutation};
    let ge = ["evolve", "-g", "grammars/regression.bnf", "--device", "cpu"];
    let vary = |flags: &[&str]| {
        let Ok(grove::cli::Command::Evolve(a)) = parsed(&[&ge[..], flags].concat()) else { panic!("{flags:?}") };
        a.settings().map(|s| s.vary).map_err(|e| format!("{e:#}"))
    };
    use grove::genome::vary::IntFlipRate::{AtLeastPerUsed, Fixed, PerUsed};
    let d = vary(&[]).unwrap();
    assert_eq!((d.crossover_op, d.crossover, d.mutation_op, d.mutation, d.int_flip_rate_kind()), (GeCrossover::Subtree, 0.9, GeMutation::IntFlip, 0.02, AtLeastPerUsed));
    for (flags, x_op, x, m_op, m, rate) in [
        (&["--crossover", "0.7"][..], GeCrossover::Subtree, 0.7, GeMutation::IntFlip, 0.02, AtLeastPerUsed),
        (&["--crossover", "subtree"], GeCrossover::Subtree, 0.9, GeMutation::IntFlip, 0.02, AtLeastPerUsed),
        (&["--crossover", "subtree:0.75"], GeCrossover::Subtree, 0.75, GeMutation::IntFlip, 0.02, AtLeastPerUsed),
        (&["--crossover", "onepoint:0.6"], GeCrossover::Onepoint, 0.6, GeMutation::IntFlip, 0.02, AtLeastPerUsed),
        (&["--mutation", "0.1"], GeCrossover::Subtree, 0.9, GeMutation::IntFlip, 0.1, Fixed),
        (&["--mutation", "int-flip"], GeCrossover::Subtree, 0.9, GeMutation::IntFlip, 0.02, Fixed),
        (&["--mutation", "int-flip:0.05"], GeCrossover::Subtree, 0.9, GeMutation::IntFlip, 0.05, Fixed),
        (&["--mutation", "int-flip:1/used"], GeCrossover::Subtree, 0.9, GeMutation::IntFlip, 0.02, PerUsed),
        (&["--mutation", "int-flip:max(0.05,1/used)"], GeCrossover::Subtree, 0.9, GeMutation::IntFlip, 0.05, AtLeastPerUsed),
        (&["--mutation", "int-flip: max(1/used, 0.1)"], GeCrossover::Subtree, 0.9, GeMutation::IntFlip, 0.1, AtLeastPerUsed),
        (&["--mutation", "subtree"], GeCrossover::Subtree, 0.9, GeMutation::Subtree, 1.0, Fixed),
        (&["--mutation", "subtree:0.3", "--crossover", "subtree"], GeCrossover::Subtree, 0.9, GeMutation::Subtree, 0.3, Fixed),
    ] {
        let v = vary(flags).unwrap();
        assert_eq!((v.crossover_op, v.crossover, v.mutation_op, v.mutation, v.int_flip_rate_kind()), (x_op, x, m_op, m, rate), "{flags:?}");
    }
    for (flags, needle) in [
        (&["--crossover", "uniform"][..], "--crossover `uniform`: expected a probability or onepoint[:P] or subtree[:P]"),
        (&["--mutation", "flip"], "--mutation `flip`: expected a probability or int-flip[:P|:1/used|:max(P,1/used)] or subtree[:P]"),
        (&["--crossover", "subtree:1.5"], "--crossover (vary.crossover) must be a probability, got 1.5"),
        (&["--mutation", "subtree:-0.1"], "--mutation (vary.mutation) must be a probability, got -0.1"),
        (&["--mutation", "subtree:1/used"], "1/used is a rate of int-flip"),
        (&["--mutation", "subtree:max(0.1,1/used)"], "max(P,1/used) is a rate of int-flip"),
        (&["--mutation", "int-flip:max(0.1)"], "expected max(P,1/used)"),
        (&["--mutation", "int-flip:max(0.1,0.2)"], "expected max(P,1/used)"),
        (&["--mutation", "int-flip:max(1/used,1/used)"], "not a number"),
        (&["--mutation", "int-flip:max(1.5,1/used)"], "--mutation (vary.mutation) must be a probability, got 1.5"),
        (&["--mutation", "int-flip:half"], "`half` is not a number"),
    ] {
        let e = vary(flags).unwrap_err();
        assert!(e.contains(needle), "{flags:?}: {e}");
    }
    // Tree GP: a plain rate is the trees' probability; an operator's name is refused, GE's
    // default typed out too (it names int-flip), and so is a rate outside [0, 1].
    let tree = ["evolve", "--functions", "add", "--device", "cpu"];
    let Ok(grove::cli::Command::Evolve(a)) = parsed(&[&tree[..], &["--crossover", "0.5", "--mutation", "0.1"]].concat()) else { panic!() };
    let t = a.settings().unwrap().trees;
    assert_eq!((t.p_crossover, t.p_mutation), (0.5, 0.1));
    let Ok(grove::cli::Command::Evolve(a)) = parsed(&tree) else { panic!() };
    let t = a.settings().unwrap().trees;
    assert_eq!((t.p_crossover, t.p_mutation), (grove::task::base::defaults::TREE_P_CROSSOVER, grove::task::base::defaults::TREE_P_MUTATION));
    let Ok(grove::cli::Command::Classify(a)) = parsed(&["classify", "--data", "builtin:iris", "--mutation", "0.7"]) else { panic!() };
    assert_eq!(a.settings().unwrap().trees.p_mutation, 0.7);
    let Ok(grove::cli::Command::Control(a)) = parsed(&["control", "--env", "swimmer", "--crossover", "0.25"]) else { panic!() };
    assert_eq!(a.settings(false).unwrap().trees.p_crossover, 0.25);
    let typed_default = grove(&[&tree[..], &["--mutation", "int-flip:max(0.02,1/used)"]].concat(), "");
    assert_one_line_error(&typed_default, &["--mutation `int-flip:max(0.02,1/used)` names an operator of grammatical evolution, and this run has no --grammar (tree GP takes a probability here, its trees.p_mutation)"]);
    for flag in ["--crossover", "--mutation"] {
        let value = if flag == "--crossover" { "onepoint" } else { "int-flip" };
        assert_one_line_error(&grove(&[&tree[..], &[flag, value]].concat(), ""), &[&format!("{flag} `{value}` names an operator of grammatical evolution, and this run has no --grammar")]);
        let field = if flag == "--crossover" { "p_crossover" } else { "p_mutation" };
        for bad in ["1.5", "-0.1"] {
            assert_one_line_error(&grove(&[&tree[..], &[flag, bad]].concat(), ""), &[&format!("{flag} (trees.{field}) must be a probability in [0, 1], got {bad}")]);
        }
        // The same fields of an experiment file are checked alike, for every task.
        for file in ["examples/w1-pagie1.ron", "examples/w5-iris.ron", "examples/w6-hopper.ron"] {
            let set = format!("trees.{field}=1.5");
            assert_one_line_error(&grove(&["run", file, "--device", "cpu", "--set", &set], ""), &[&format!("{flag} (trees.{field}) must be a probability in [0, 1], got 1.5")]);
        }
    }
    assert_one_line_error(&grove(&[&ge[..], &["--crossover", "uniform"]].concat(), ""), &["--crossover `uniform`"]);
}

/// Issue 55: a flag of GE's genome (`--init`, `--wraps`, ...) given without a grammar gets one
/// line on every command, where it used to be ignored; with a grammar it reaches the settings.
#[test]
fn genome_flags_without_a_grammar_get_one_line() {
    let commands: [&[&str]; 3] = [
        &["evolve", "--functions", "add,sub,mul", "--data", "builtin:pagie1", "--device", "cpu", "--gens", "1"],
        &["classify", "--data", "builtin:iris", "--device", "cpu", "--gens", "1"],
        &["control", "--env", "swimmer", "--device", "cpu", "--gens", "1"],
    ];
    for command in commands {
        for (flags, named) in [
            (&["--init", "pi-grow"][..], "--init is a flag"),
            (&["--wraps", "2"], "--wraps is a flag"),
            (&["--codons", "lazy"], "--codons is a flag"),
            (&["--max-depth", "12"], "--max-depth is a flag"),
            (&["--init-depth", "2,5"], "--init-depth is a flag"),
            (&["--genome-length", "50"], "--genome-length is a flag"),
            (&["--genome-capacity", "500"], "--genome-capacity is a flag"),
            (&["--reading", "derivation"], "--reading is a flag"),
            (&["--wraps", "0", "--init", "random"], "--wraps, --init are flags"),
        ] {
            let out = grove(&[command, flags].concat(), "");
            assert_one_line_error(&out, &[named, "of grammatical evolution, and this run has no --grammar"]);
        }
    }
    // With a grammar each reaches its block.
    let ge = ["evolve", "-g", "grammars/regression.bnf", "--device", "cpu"];
    let Ok(grove::cli::Command::Evolve(a)) = parsed(&[&ge[..], &["--init", "pi-grow", "--wraps", "2", "--max-depth", "12", "--init-depth", "2,5"]].concat()) else {
        panic!()
    };
    let s = a.settings().unwrap();
    assert_eq!((s.init.method, s.map.max_wraps, s.map.max_depth, s.init.min_depth, s.init.max_depth), (grove::genome::InitMethod::PiGrow, 2, 12, 2, 5));
    let Ok(grove::cli::Command::Evolve(a)) = parsed(&ge) else { panic!() };
    let s = a.settings().unwrap();
    let d = grove::task::base::defaults::GE.configs();
    assert_eq!((s.map, s.init, s.vary, s.genome_capacity), (d.map, d.init, d.vary, d.genome_capacity));
}

/// Issue 58: a PonyGE2 problem as its users run it, with its own Train and Test files: the
/// report's test scores are the test file's (5000 rows), the training rows all 1024 (no split),
/// the settings name the file, and `grove run --from` repeats the run with it.
#[test]
fn evolve_scores_a_test_file_of_its_own() {
    let dir = scratch();
    let report = dir.join("v4.json");
    let root = "tests/fixtures/reference";
    let (train, test) = (format!("{root}/datasets/Vladislavleva4/Train.txt"), format!("{root}/datasets/Vladislavleva4/Test.txt"));
    let grammar = format!("{root}/grammars/ponyge2/Vladislavleva4.bnf");
    let out = grove(
        &["evolve", "--data", &train, "--test-data", &test, "--grammar", &grammar, "--pop", "40", "--gens", "2",
          "--select", "train", "--device", "cpu", "-q", "--report", report.to_str().unwrap()],
        "",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(s.contains("\ntrain         mse") && s.contains("\ntest          mse"), "{s}");
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(r["settings"]["test_data"], test.as_str());
    assert_eq!(r["selection"]["training_rows"], 1024, "every training row, no split");
    // The test score is the program's on the test file's rows, scored here again.
    let test_set = grove::data::read(&test, None).unwrap();
    let m = grove::task::base::model::from_value(&r, "the report").unwrap();
    let p = m.regression_predictions(test_set.x.clone(), test_set.n_rows).unwrap();
    let mse = p.iter().zip(&test_set.y).map(|(p, &y)| (p - y as f64).powi(2)).sum::<f64>() / 5000.0;
    let got = r["test"]["mse"].as_f64().unwrap();
    assert!((got - mse).abs() <= 1e-9 * mse.max(1e-12), "test mse {got} vs {mse} recomputed");
    let again = grove(&["run", "--from", report.to_str().unwrap(), "--device", "cpu", "-q"], "");
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert_eq!(text(&again.stdout).lines().find(|l| l.starts_with("test")), s.lines().find(|l| l.starts_with("test")));
    // A test file without the training data's columns is one line that names them.
    let bad = temp_file("v4bad.csv", "x0,x1,x2,x3,y\n1,2,3,4,5\n");
    let out = grove(&["evolve", "--data", &train, "--test-data", bad.to_str().unwrap(), "--grammar", &grammar, "--pop", "10", "--gens", "1"], "");
    assert_one_line_error(&out, &["--test-data (test_data)", "missing `x4`, `response`", "not in the training data `y`"]);
}

/// Issue 58: a grammar's program is its phenotype text's unless `--reading derivation` (or an
/// experiment file's `map.reading`) asks for the derivation's; `grove check` says where a
/// grammar's two readings can differ.
#[test]
fn programs_read_as_their_text_unless_the_derivation_is_asked_for() {
    use grove::grammar::template::Reading;
    let ge = ["evolve", "-g", "grammars/regression.bnf", "--device", "cpu"];
    let reading = |flags: &[&str]| {
        let Ok(grove::cli::Command::Evolve(a)) = parsed(&[&ge[..], flags].concat()) else { panic!("{flags:?}") };
        a.settings().unwrap().map.reading
    };
    assert_eq!(reading(&[]), Reading::Text);
    assert_eq!(reading(&["--reading", "derivation"]), Reading::Derivation);
    assert_eq!(reading(&["--reading", "text"]), Reading::Text);
    let from_file = |map: serde_json::Value| match grove::task::runner::experiment::Experiment::from_parts("evolve", serde_json::json!({"grammar": "grammars/regression.bnf", "map": map}), "test.ron").unwrap() {
        grove::task::runner::experiment::Experiment::Evolve(s) => s.map.reading,
        _ => unreachable!("an evolve experiment"),
    };
    assert_eq!(from_file(serde_json::json!({"reading": "derivation"})), Reading::Derivation);
    assert_eq!(from_file(serde_json::json!({"max_wraps": 1})), Reading::Text);
    let out = grove(&[&ge[..], &["--reading", "python"]].concat(), "");
    assert!(!out.status.success() && text(&out.stderr).contains("invalid value 'python' for '--reading <READING>'") && text(&out.stderr).contains("[possible values: text, derivation]"), "{}", text(&out.stderr));
    // PonyGE2's Vladislavleva-4 leaves its operators bare; its supervised_learning brackets them.
    let out = grove(&["check", "tests/fixtures/reference/grammars/ponyge2/Vladislavleva4.bnf"], "");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let (s, e) = (text(&out.stdout), text(&out.stderr));
    assert!(s.contains("can mean different programs in 3 productions"), "{s}");
    assert!(e.contains("Vladislavleva4.bnf:2:11: note: the phenotype text and the derivation can mean different programs: where <e> after `-` derives `a + b`, the text `x - a + b` means `(x - a) + b`, the derivation `x - (a + b)`"), "{e}");
    let out = grove(&["check", "--n-vars", "3", "tests/fixtures/reference/grammars/ponyge2/supervised_learning.bnf"], "");
    assert!(text(&out.stdout).contains("reading     the phenotype text and the derivation mean the same program"), "{}", text(&out.stdout));
    assert!(!text(&out.stderr).contains("note: the phenotype text"), "{}", text(&out.stderr));
}
