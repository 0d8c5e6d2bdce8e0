//! Operators of the user's own from the command line, experiment files and grammars: a run
//! finds and uses one, shows it by name in its report and exports, predicts the same from the
//! saved report, resumes from a checkpoint exactly, and every bad definition is one line.

mod support;

use support::{assert_ok, dir, grove_cpu, read_json, s, text, without_timings};

const SOFTSIGN: &str = "softsign(x) = x / (1 + abs(x))";

/// `x,y` rows with `y = softsign(x)`, x from −4 to 4.
fn softsign_csv(d: &std::path::Path) -> std::path::PathBuf {
    let mut body = String::from("x,y\n");
    for i in 0..80 {
        let x = -4.0 + 0.1 * i as f64;
        body += &format!("{x},{}\n", x / (1.0 + x.abs()));
    }
    let p = d.join("softsign.csv");
    std::fs::write(&p, body).unwrap();
    p
}

#[test]
fn a_run_finds_a_user_operator_and_shows_it_by_name_everywhere() {
    let d = dir("found");
    let (data, report) = (softsign_csv(&d), d.join("r.json"));
    let out = grove_cpu(&[
        "evolve", "--data", s(&data), "--functions", "add,mul,softsign", "--define", SOFTSIGN, "--pop", "200", "--gens", "6",
        "--seed", "2", "--optimise-constants", "2", "--report", s(&report), "-q",
    ]);
    assert_ok(&out);
    let r = read_json(&report);
    assert_eq!(r["settings"]["operators"], serde_json::json!([SOFTSIGN]));
    let infix = r["best"]["infix"].as_str().unwrap();
    assert!(infix.contains("softsign("), "the best program should use softsign: {infix}");
    assert!(r["best"]["sympy"].as_str().unwrap().contains("softsign("));
    assert!(r["best"]["latex"].as_str().unwrap().contains("\\operatorname{softsign}"));
    assert_eq!(r["model"]["operators"], serde_json::json!([SOFTSIGN]));
    assert_eq!(r["operators"][0]["name"], "softsign");
    assert_eq!(r["operators"][0]["sympy"], "softsign = lambda a: div(a, 1+abs(a))");
    assert!(r["train"]["r2"].as_f64().unwrap() > 0.999, "{}", r["train"]);

    // predict from the saved report, in a fresh process: the definition comes from the report.
    let pred = grove_cpu(&["predict", "--model", s(&report), "--data", s(&data)]);
    assert_ok(&pred);
    let lines: Vec<f64> = text(&pred.stdout).lines().skip(1).map(|l| l.rsplit(',').next().unwrap().parse().unwrap()).collect();
    assert_eq!(lines.len(), 80);
    for (i, p) in lines.iter().enumerate() {
        let x = -4.0 + 0.1 * i as f64;
        assert!((p - x / (1.0 + x.abs())).abs() < 1e-3, "row {i}: {p}");
    }

    // Exports call a helper per user operator.
    for (lang, helper) in [("python", "def g_u_softsign(a): return g_div(a, (1.0 + abs(a)))"), ("rust", "fn g_u_softsign(a: f32) -> f32"), ("c", "static float g_u_softsign(float a)")] {
        let out = grove_cpu(&["export", "--model", s(&report), "--lang", lang]);
        assert_ok(&out);
        let src = text(&out.stdout);
        assert!(src.contains(helper) && src.contains("g_u_softsign(x"), "{lang}:\n{src}");
        if lang != "python" {
            assert!(src.contains("g_div("), "{lang}: the helper's own helpers are emitted:\n{src}");
        }
    }

    // A report whose tree names an operator it does not define is refused in one line.
    let mut bad = r.clone();
    bad["model"].as_object_mut().unwrap().remove("operators");
    let bad_path = d.join("bad.json");
    std::fs::write(&bad_path, serde_json::to_vec(&bad).unwrap()).unwrap();
    let out = grove_cpu(&["predict", "--model", s(&bad_path), "--data", s(&data)]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("unknown operator `softsign` in the tree: neither built in nor defined") && err.trim().lines().count() == 1, "{err}");
}

#[test]
fn a_resumed_run_with_user_operators_ends_as_an_uninterrupted_one() {
    let d = dir("resume");
    let (data, full, ck, resumed) = (softsign_csv(&d), d.join("full.json"), d.join("ck.json"), d.join("resumed.json"));
    let base = ["evolve", "--functions", "add,sub,softsign,hyp", "--define", SOFTSIGN, "--define", "hyp(a, b) = sqrt(a*a + b*b)", "--pop", "60", "--seed", "5", "--threads", "1", "-q"];
    let mut a = base.to_vec();
    a.extend(["--data", s(&data), "--gens", "6", "--report", s(&full)]);
    assert_ok(&grove_cpu(&a));
    let mut b = base.to_vec();
    b.extend(["--data", s(&data), "--gens", "3", "--checkpoint", s(&ck), "--checkpoint-every", "3"]);
    assert_ok(&grove_cpu(&b));
    let saved = read_json(&ck);
    let ops = saved["operators"].as_array().unwrap();
    assert!(!ops.is_empty(), "the checkpoint names the user operators its trees use");
    assert!(ops.iter().all(|o| o[1] == SOFTSIGN || o[1] == "hyp(a, b) = sqrt(a*a + b*b)"), "{ops:?}");
    assert_ok(&grove_cpu(&["run", "--resume", s(&ck), "--gens", "6", "--report", s(&resumed), "-q"]));
    assert_eq!(without_timings(read_json(&full)), without_timings(read_json(&resumed)));
}

#[test]
fn experiment_files_and_grammars_define_operators() {
    let d = dir("files");
    let data = softsign_csv(&d);
    let exp = d.join("e.ron");
    std::fs::write(
        &exp,
        format!("Evolve(data: {:?}, functions: \"add,mul,softsign\", operators: [{SOFTSIGN:?}], engine: (pop_size: 100, generations: 3))", s(&data)),
    )
    .unwrap();
    let report = d.join("e.json");
    assert_ok(&grove_cpu(&["run", s(&exp), "--report", s(&report), "-q"]));
    assert_eq!(read_json(&report)["settings"]["operators"], serde_json::json!([SOFTSIGN]));

    // A grammar's own operator: a directive PonyGE2 reads as a comment.
    let g = d.join("g.bnf");
    // Every phenotype of this grammar calls it, so the best program does.
    std::fs::write(&g, "#grove:define cube3(x) = x*x*x\n<e> ::= cube3(<e>) | cube3(x[0])\n").unwrap();
    let report = d.join("g.json");
    assert_ok(&grove_cpu(&["evolve", "--data", s(&data), "--grammar", s(&g), "--pop", "50", "--gens", "2", "--report", s(&report), "-q"]));
    let r = read_json(&report);
    assert!(r["best"]["infix"].as_str().unwrap().contains("cube3(x)"), "{}", r["best"]);
    assert_eq!(r["model"]["operators"], serde_json::json!(["cube3(x) = x*x*x"]));
}

#[test]
fn bad_definitions_give_one_clear_line() {
    let cases: &[(&[&str], &str)] = &[
        (&["--define", "f(x) = f(x) + 1"], "`f` calls itself"),
        (&["--define", "f(x) = g(x)", "--define", "g(x) = f(x)"], "calls itself through"),
        (&["--define", "f(x) = blah(x)"], "unknown operator `blah`"),
        (&["--define", "f(x) = x + y"], "unknown variable `y`"),
        (&["--define", "np.sin(x) = x"], "is not a name"),
        (&["--define", "tanh(x) = x"], "shadows the built-in operator `tanh`"),
        (&["--define", "f(x) = x", "--define", "f(x) = 2*x"], "`f` is defined twice"),
        (&["--define", "f(x) = max(x)"], "`max` takes 2 arguments, given 1"),
    ];
    for (args, want) in cases {
        let mut a = vec!["evolve", "--functions", "add,f", "--gens", "1", "--pop", "10"];
        a.extend(*args);
        let out = grove_cpu(&a);
        assert!(!out.status.success(), "{args:?}");
        let err = text(&out.stderr);
        assert!(err.contains(want) && err.contains("--define") && err.trim().lines().count() == 1, "{args:?}: {err}");
    }
    let many: Vec<String> = (0..17).map(|i| format!("f{i}(x) = x")).collect();
    let mut a = vec!["evolve", "--functions", "add", "--gens", "1"];
    for m in &many {
        a.extend(["--define", m.as_str()]);
    }
    let err = text(&grove_cpu(&a).stderr);
    assert!(err.contains("17 operator definitions; at most 16") && err.trim().lines().count() == 1, "{err}");
}

#[test]
fn control_policies_use_user_operators_and_replay_from_their_report() {
    let d = dir("control");
    let report = d.join("c.json");
    // The only function is the user's, so the policy's tree calls it.
    assert_ok(&grove_cpu(&[
        "control", "--env", "hopper", "--functions", "softsign", "--define", SOFTSIGN, "--device", "cpu", "--pop", "12", "--gens", "2",
        "--episode-steps", "10", "--test-episodes", "1", "--threads", "1", "--report", s(&report), "-q",
    ]));
    let r = read_json(&report);
    let uses = r["policy"]["nodes"].as_array().unwrap().iter().any(|n| n[0] == "softsign");
    assert_eq!(r["policy"]["operators"], if uses { serde_json::json!([SOFTSIGN]) } else { serde_json::Value::Null });
    // A fresh process replays the saved policy, registering its definition from the report.
    assert_ok(&grove_cpu(&["rollout", "--policy", s(&report), "--steps", "5"]));
}
