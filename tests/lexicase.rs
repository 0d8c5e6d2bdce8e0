//! Lexicase selection and unique parents as a user reaches them (`--selection
//! lexicase|down-sampled`, `--diversity unique`): on regression, classification and control, in
//! experiment files, and one clear line for each setting they cannot run with.

mod support;
use support::{Device, grove_run, scratch, text};

fn grove(args: &[&str]) -> std::process::Output {
    grove_run(args, "", Device::Cpu, None)
}

/// Asserts that `grove ARGS` fails with one line, `error: …`, holding `needle`.
fn assert_one_clear_line(args: &[&str], needle: &str) {
    let out = grove(args);
    assert_ne!(out.status.code(), Some(0), "{args:?}");
    let e = text(&out.stderr);
    assert!(e.contains(needle), "{args:?}: {e}");
    assert!(e.starts_with("error: "), "{args:?}: {e}");
    assert_eq!(e.trim().lines().count(), 1, "{args:?}: one line expected: {e}");
}

fn report(args: &[&str]) -> serde_json::Value {
    // A file of its own per run: the tests run side by side.
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = scratch().join(format!("lexicase-{}-{n}.json", std::process::id()));
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--device", "cpu", "-q", "--report", path.to_str().unwrap()]);
    let out = grove(&all);
    assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

#[test]
fn every_task_runs_with_lexicase_and_records_it() {
    let r = report(&["evolve", "--functions", "add,sub,mul", "--data", "builtin:koza1", "--pop", "60", "--gens", "4", "--selection", "lexicase"]);
    assert_eq!(r["settings"]["engine"]["selection"], "lexicase");
    assert_eq!(r["generations"].as_array().unwrap().len(), 5);
    // Lexicase replaces NSGA-II's tournaments, so `auto` bloat control runs plain.
    assert!(r["best"]["fitness"].as_f64().unwrap().is_finite());
    let r = report(&["evolve", "-g", "grammars/regression.bnf", "--data", "builtin:koza1", "--pop", "60", "--gens", "3", "--selection", "down-sampled", "--down-sample", "5"]);
    assert_eq!((r["settings"]["engine"]["selection"].as_str(), r["settings"]["engine"]["down_sample"].as_f64()), (Some("down-sampled"), Some(5.0)));
    let r = report(&["classify", "--pop", "60", "--gens", "3", "--selection", "lexicase"]);
    assert!(r["train"]["accuracy"].as_f64().unwrap() > 0.5, "{}", r["train"]);
    let r = report(&["control", "--env", "swimmer", "--pop", "20", "--gens", "2", "--episodes", "3", "--episode-steps", "30", "--selection", "lexicase"]);
    assert_eq!(r["settings"]["engine"]["selection"], "lexicase");
}

#[test]
fn the_same_seed_repeats_a_lexicase_run_and_the_selection_changes_it() {
    let args = ["evolve", "--functions", "add,sub,mul", "--data", "builtin:koza1", "--pop", "80", "--gens", "5", "--bloat", "none"];
    let fits = |sel: &str| {
        let mut a = args.to_vec();
        a.extend(["--selection", sel]);
        let r = report(&a);
        r["generations"].as_array().unwrap().iter().map(|g| g["best"].as_f64().unwrap()).collect::<Vec<_>>()
    };
    assert_eq!(fits("lexicase"), fits("lexicase"));
    assert_ne!(fits("lexicase"), fits("tournament"));
}

#[test]
fn a_lexicase_pool_smaller_than_the_population_is_drawn_and_recorded() {
    let run = |pool: &str| {
        let r = report(&["evolve", "--functions", "add,sub,mul", "--data", "builtin:koza1", "--pop", "80", "--gens", "5", "--bloat", "none", "--selection", "lexicase", "--lexicase-pool", pool]);
        let best: Vec<f64> = r["generations"].as_array().unwrap().iter().map(|g| g["best"].as_f64().unwrap()).collect();
        (r["settings"]["engine"]["lexicase_pool"].as_u64(), best)
    };
    let (whole, a) = run("0");
    let (larger, b) = run("500");
    let (drawn, c) = run("8");
    assert_eq!((whole, larger, drawn), (Some(0), Some(500), Some(8)));
    // A pool at least the population's size is the whole population; a smaller one draws.
    assert_eq!(a, b);
    assert_ne!(a, c);
}

#[test]
fn what_lexicase_cannot_run_with_gets_one_clear_line() {
    for (args, needle) in [
        (vec!["evolve", "--functions", "add", "--selection", "lexicase", "--bloat", "nsga2"], "replaces the parent tournament"),
        (vec!["evolve", "--functions", "add", "--selection", "lexicase", "--bloat", "double-tournament"], "--bloat double-tournament"),
        (vec!["evolve", "--functions", "add", "--selection", "down-sampled", "--down-sample", "1.5"], "--down-sample"),
        (vec!["evolve", "--functions", "add", "--selection", "down-sampled", "--down-sample", "0"], "--down-sample"),
        (vec!["evolve", "--functions", "add", "--data", "builtin:koza1", "--selection", "down-sampled", "--down-sample", "5000", "--gens", "2"], "5000 cases of"),
        (vec!["evolve", "--functions", "add", "--selection", "lexicase", "--shard-rows"], "--shard-rows"),
        (vec!["control", "--env", "swimmer", "--selection", "lexicase", "--episodes", "1"], "--episodes 2"),
        (vec!["control", "--env", "swimmer", "--selection", "lexicase", "--policy", "linear"], "--policy linear"),
    ] {
        assert_one_clear_line(&args, needle);
    }
}

#[test]
fn a_collapse_to_a_constant_is_reported_and_lexicase_avoids_it() {
    // Plain grammatical evolution at PonyGE2's settings on Pagie-1: with tournaments of 2 and
    // one-point crossover and int-flip at 0.02 a codon (the defaults before subtree crossover
    // and the rate of at least one flip a child) the population of seed 1 ends as one-node
    // programs; lexicase keeps structure, and so do the default operators.
    let args = [
        "evolve", "-g", "tests/fixtures/grammars/arith_aq.bnf", "--data", "builtin:pagie1", "--pop", "500", "--gens", "50", "--tournament", "2",
        "--no-linear-scaling", "--linear-inputs", "off", "--select", "train", "--bloat", "none", "--seed", "1",
    ];
    let run = |more: &[&str]| {
        let mut a = args.to_vec();
        a.extend(more);
        report(&a)
    };
    let t = run(&["--crossover", "onepoint", "--mutation", "0.02", "--selection", "tournament"]);
    assert_eq!(t["best"]["size"], 1, "{}", t["best"]);
    let g = t["collapse"]["from_generation"].as_u64().expect("a collapse is reported");
    assert!(g < 50, "{g}");
    for more in [
        &["--crossover", "onepoint", "--mutation", "0.02", "--selection", "lexicase"][..],
        &["--crossover", "onepoint", "--mutation", "0.02", "--diversity", "unique"],
        &[],
    ] {
        let l = run(more);
        assert!(l["collapse"].is_null(), "{more:?}: {}", l["collapse"]);
        assert!(l["best"]["size"].as_u64().unwrap() > 5, "{more:?}");
        assert!(l["best"]["fitness"].as_f64().unwrap() < 0.5 * t["best"]["fitness"].as_f64().unwrap(), "{more:?}");
    }
}

#[test]
fn every_task_runs_with_unique_parents_and_the_flag_changes_the_run() {
    let ge = ["evolve", "-g", "grammars/regression.bnf", "--data", "builtin:koza1", "--pop", "60", "--gens", "5", "--seed", "3"];
    let best = |r: &serde_json::Value| -> Vec<f64> { r["generations"].as_array().unwrap().iter().map(|g| g["mean_size"].as_f64().unwrap()).collect() };
    let none = report(&ge);
    let unique = report(&[&ge[..], &["--diversity", "unique"]].concat());
    assert_eq!((none["settings"]["engine"]["diversity"].as_str(), unique["settings"]["engine"]["diversity"].as_str()), (Some("none"), Some("unique")));
    assert_ne!(best(&none), best(&unique), "the parents are drawn from another pool, so the populations differ");
    let r = report(&["evolve", "--functions", "add,sub,mul", "--data", "builtin:koza1", "--pop", "60", "--gens", "3", "--bloat", "none", "--diversity", "unique"]);
    assert_eq!(r["settings"]["engine"]["diversity"], "unique");
    let r = report(&["classify", "--pop", "60", "--gens", "3", "--diversity", "unique"]);
    assert!(r["train"]["accuracy"].as_f64().unwrap() > 0.5, "{}", r["train"]);
    let r = report(&["control", "--env", "swimmer", "--pop", "20", "--gens", "2", "--episode-steps", "30", "--diversity", "unique"]);
    assert_eq!(r["settings"]["engine"]["diversity"], "unique");
}

#[test]
fn unique_parents_where_they_would_change_nothing_get_one_clear_line() {
    for (args, needle) in [
        // `auto` is NSGA-II for tree GP without constant fitting, which ranks duplicates behind.
        (vec!["evolve", "--functions", "add", "--diversity", "unique"], "this run's bloat control is NSGA-II (--bloat auto"),
        (vec!["evolve", "-g", "grammars/regression.bnf", "--bloat", "nsga2", "--diversity", "unique"], "this run's bloat control is NSGA-II, which"),
        (vec!["control", "--env", "swimmer", "--policy", "linear", "--diversity", "unique"], "--policy linear"),
    ] {
        assert_one_clear_line(&args, needle);
    }
    // With lexicase, `auto` runs plain, and unique parents are its candidates.
    let r = report(&["evolve", "--functions", "add,sub", "--data", "builtin:koza1", "--pop", "40", "--gens", "2", "--selection", "lexicase", "--diversity", "unique"]);
    assert_eq!(r["settings"]["engine"]["diversity"], "unique");
}

/// A classifier's lexicase cases under `--fitness balanced-ce` are each row's misclassification
/// (1 or 0) plus its cross-entropy `c` as `c / (1 + c)`: the cases of `accuracy` and
/// `cross-entropy` for the same programs and rows, combined as the fitness combines them.
#[test]
fn balanced_ce_cases_combine_the_rows_misclassification_and_cross_entropy() {
    use grove::backend::Backend;
    use grove::data::classes::ClassSource;
    use grove::evolve::Fitness;
    use grove::task::base::search::ClassTreeSettings;
    use grove::task::classify::{ClassFitness, Classification};
    let all = ClassSource::parse("builtin:iris").unwrap().load(None).unwrap();
    let backend = Backend::Cpu;
    let counts: Vec<u64> = all.class_counts().iter().map(|&c| c as u64).collect();
    let spec = ClassTreeSettings::default().rep("add,sub,mul,div", all.data.n_features, 3, 64).unwrap().vary.spec;
    let pop = grove::program::init_population(&spec, 40, 3).unwrap();
    let cases: Vec<u32> = (0..all.data.n_rows as u32).step_by(7).collect();
    let errors = |fitness| {
        let data = backend.classification_data(&all.data.x, &all.labels, all.data.n_rows, 3).unwrap();
        let task = Classification { backend: &backend, data, counts: counts.clone(), fitness, parsimony: 0.0, head: None, rows: Some((&all, None)) };
        task.case_errors(&pop, 0, &cases).unwrap()
    };
    let (wrong, ce, both) = (errors(ClassFitness::Accuracy), errors(ClassFitness::CrossEntropy), errors(ClassFitness::BalancedCe));
    assert_eq!(both.len(), 40 * cases.len());
    let mut right_and_wrong = [0, 0];
    for i in 0..both.len() {
        if !ce[i].is_finite() {
            assert_eq!(both[i], f64::INFINITY, "case {i}");
            continue;
        }
        assert!(wrong[i] == 0.0 || wrong[i] == 1.0, "case {i}: {}", wrong[i]);
        right_and_wrong[wrong[i] as usize] += 1;
        assert_eq!(both[i].to_bits(), (wrong[i] + ce[i] / (1.0 + ce[i])).to_bits(), "case {i}");
    }
    assert!(right_and_wrong[0] > 0 && right_and_wrong[1] > 0, "the programs both hit and miss rows: {right_and_wrong:?}");
}

/// An experiment file reaches what the flags reach: down-sampled lexicase, unique parents and
/// GE's operators (PI grow, subtree crossover and mutation) are the run's settings, and they
/// change the run; a block of the other representation is one line, as GE's flags without a
/// grammar are on the command line.
#[test]
fn experiment_files_take_lexicase_unique_parents_and_ges_operators_and_refuse_the_other_representations_blocks() {
    let file = |name: &str, body: &str| {
        let p = scratch().join(format!("lexicase-{}-{name}.ron", std::process::id()));
        std::fs::write(&p, body).unwrap();
        p
    };
    let ge = file(
        "ge",
        r#"Evolve(data: "builtin:koza1", grammar: "grammars/regression.bnf",
            engine: (pop_size: 60, generations: 3, selection: "down-sampled", down_sample: 5, diversity: "unique"),
            init: (method: "pi_grow"),
            vary: (crossover_op: "subtree", mutation_op: "subtree", mutation: 0.3, mutation_at_least_per_used: false))"#,
    );
    let r = report(&["run", ge.to_str().unwrap()]);
    let s = &r["settings"];
    assert_eq!((s["engine"]["selection"].as_str(), s["engine"]["down_sample"].as_f64(), s["engine"]["diversity"].as_str()), (Some("down-sampled"), Some(5.0), Some("unique")));
    assert_eq!((s["init"]["method"].as_str(), s["vary"]["crossover_op"].as_str(), s["vary"]["mutation_op"].as_str()), (Some("pi_grow"), Some("subtree"), Some("subtree")));
    // The same file with tournaments and GE's default operators runs another search.
    let plain = file("plain", r#"Evolve(data: "builtin:koza1", grammar: "grammars/regression.bnf", engine: (pop_size: 60, generations: 3))"#);
    let best = |r: &serde_json::Value| r["generations"].as_array().unwrap().iter().map(|g| g["best"].as_f64().unwrap()).collect::<Vec<_>>();
    assert_ne!(best(&r), best(&report(&["run", plain.to_str().unwrap()])));
    let tree = file("tree", r#"Classify(data: "builtin:iris", functions: "add,sub,mul", engine: (pop_size: 60, generations: 2, selection: "lexicase", diversity: "unique"))"#);
    let r = report(&["run", tree.to_str().unwrap()]);
    assert_eq!((r["settings"]["engine"]["selection"].as_str(), r["settings"]["engine"]["diversity"].as_str()), (Some("lexicase"), Some("unique")));

    // GE's blocks without a grammar, each named; tree GP's block with one.
    for (body, needle) in [
        (r#"Evolve(data: "builtin:koza1", functions: "add,sub", init: (method: "pi_grow"))"#, "`init` is a setting of grammatical evolution's genome, and this experiment has no grammar"),
        (
            r#"Classify(data: "builtin:iris", functions: "add,sub", vary: (crossover_op: "subtree"), genome_capacity: 500)"#,
            "`vary`, `genome_capacity` are settings of grammatical evolution's genome, and this experiment has no grammar",
        ),
        (r#"Control(env: "swimmer", functions: "add,sub", map: (max_wraps: 2))"#, "`map` is a setting of grammatical evolution's genome"),
        (r#"Evolve(data: "builtin:koza1", grammar: "grammars/regression.bnf", trees: (p_crossover: 0.3, p_mutation: 0.7))"#, "`trees` holds tree GP's settings, and this experiment has a grammar"),
    ] {
        let f = file("bad", body);
        assert_one_clear_line(&["run", f.to_str().unwrap()], needle);
    }
    // A report's settings hold every block whatever ran, and repeat the run (`--from`).
    let rep = scratch().join(format!("lexicase-{}-from.json", std::process::id()));
    let out = grove(&["run", tree.to_str().unwrap(), "--device", "cpu", "-q", "--report", rep.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let again = report(&["run", "--from", rep.to_str().unwrap()]);
    assert_eq!(again["settings"], support::read_json(&rep)["settings"]);
}
