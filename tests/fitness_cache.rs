//! The fitness cache (issue 58, PonyGE2's `CACHE`): on the CPU each distinct program is scored
//! once, and a run with the cache is the run without it, bit for bit (every generation's
//! statistics, the hall of fame, the returned model), for regression (the built-in metric and a
//! loss of one's own, tree GP and GE) and classification; `--no-fitness-cache` turns it off.

mod support;
use support::{grove_cpu, read_json, scratch, text};

/// The report of `grove ARGS --report R` (quiet, on the CPU), with and without the cache.
fn both(name: &str, args: &[&str]) -> (serde_json::Value, serde_json::Value) {
    let dir = scratch();
    let run = |extra: &[&str], file: &str| {
        let path = dir.join(file);
        let mut a = args.to_vec();
        a.extend_from_slice(extra);
        a.extend(["-q", "--report", path.to_str().unwrap()]);
        let out = grove_cpu(&a);
        assert!(out.status.success(), "{name}: {}", text(&out.stderr));
        read_json(&path)
    };
    (run(&[], &format!("{name}-cached.json")), run(&["--no-fitness-cache"], &format!("{name}-plain.json")))
}

/// Every generation's statistics but its time.
fn generations(r: &serde_json::Value) -> Vec<serde_json::Value> {
    r["generations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            let mut g = g.clone();
            g.as_object_mut().unwrap().remove("seconds");
            g
        })
        .collect()
}

fn assert_same_run(name: &str, a: &serde_json::Value, b: &serde_json::Value) {
    assert_eq!(generations(a), generations(b), "{name}: generations");
    for key in ["best", "hall_of_fame", "model", "train", "test", "selection"] {
        assert_eq!(a[key], b[key], "{name}: {key}");
    }
    assert!(b["fitness_cache"].is_null(), "{name}: --no-fitness-cache keeps none");
}

#[test]
fn a_cached_run_is_the_same_run() {
    let root = "tests/fixtures/reference";
    let (train, grammar) = (format!("{root}/datasets/Vladislavleva4/Train.txt"), format!("{root}/grammars/ponyge2/Vladislavleva4.bnf"));
    let cases: Vec<(&str, Vec<&str>)> = vec![
        ("ge", vec!["evolve", "--data", &train, "--grammar", &grammar, "--pop", "150", "--gens", "8"]),
        ("ge-loss", vec!["evolve", "--data", &train, "--grammar", &grammar, "--pop", "150", "--gens", "6", "--loss", "abs(p - y)", "--optimise-constants", "3"]),
        ("trees", vec!["evolve", "--data", "builtin:koza1", "--functions", "add,sub,mul,div", "--pop", "200", "--gens", "8"]),
        ("classify", vec!["classify", "--data", "builtin:iris", "--grammar", "grammars/classify-3class.bnf", "--pop", "150", "--gens", "6"]),
    ];
    for (name, args) in cases {
        let (cached, plain) = both(name, &args);
        assert_same_run(name, &cached, &plain);
        let stats = &cached["fitness_cache"];
        let (hits, evaluated) = (stats["hits"].as_u64().unwrap(), stats["evaluated"].as_u64().unwrap());
        let pop: u64 = args[args.iter().position(|a| *a == "--pop").unwrap() + 1].parse().unwrap();
        let gens: u64 = args[args.iter().position(|a| *a == "--gens").unwrap() + 1].parse().unwrap();
        // Every program with a tree was answered or scored (empty rows are neither).
        assert!(hits + evaluated <= pop * (gens + 1), "{name}: {stats}");
        assert!(hits > 0 && evaluated > pop / 2, "{name}: {stats}");
    }
}
