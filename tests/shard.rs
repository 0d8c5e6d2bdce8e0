//! Rows split over GPUs (`--shard-rows`, data parallel) on the CPU, which computes what that
//! many GPUs compute: runs repeat by seed, a shard's rows are a contiguous block, the fitness is
//! the metric of the shards' sums added in order, and bad settings give one clear line. The
//! device loop's shards are checked against these on a GPU (tests/cuda_islands.rs).

use grove::backend::Backend;
use grove::data::DataSource;
use grove::evolve::Fitness;
use grove::program::fitness::RegressionSums;
use grove::program::{Op, TreeSpec, init_population};
use grove::task::regression::{Regression, RegressionConfig};
use grove::task::regression::shard::{ShardedRegression, split_rows};

mod support;
use support::{assert_ok, assert_one_line_error, dir, grove_cpu as grove, read_json, s, text, without_timings};

const RUN: &[&str] = &["evolve", "--data", "builtin:pagie1:900", "--functions", "add,sub,mul,div,sin", "--pop", "64", "--gens", "6", "--threads", "1", "-q"];

fn run(extra: &[&str], name: &str) -> serde_json::Value {
    let d = dir("shard");
    let report = d.join(name);
    let mut a = RUN.to_vec();
    a.extend(extra);
    a.extend(["--report", s(&report)]);
    assert_ok(&grove(&a));
    read_json(&report)
}

#[test]
fn sharded_runs_repeat_by_seed_and_say_so() {
    let a = run(&["--shard-rows", "--gpus", "3", "--seed", "2"], "a.json");
    let b = run(&["--shard-rows", "--gpus", "3", "--seed", "2"], "b.json");
    assert_eq!(without_timings(a.clone()), without_timings(b), "two runs of one seed and shard count differ");
    assert_eq!(a["settings"]["islands"]["shard_rows"], true);
    assert!(a["timing"]["device"].as_str().unwrap().contains("3 row shards"), "{}", a["timing"]);
    // Off, the field stays out of the report (reports of runs without shards are unchanged).
    let c = run(&["--seed", "2"], "c.json");
    assert!(c["settings"]["islands"].get("shard_rows").is_none(), "{}", c["settings"]["islands"]);
}

#[test]
fn shards_are_contiguous_blocks_in_order() {
    let train = DataSource::parse("builtin:pagie1:900").unwrap().load(None).unwrap().train;
    for n in [1, 2, 3, 7, 900] {
        let parts = split_rows(&train, n).unwrap();
        assert_eq!(parts.len(), n);
        let sizes: Vec<usize> = parts.iter().map(|p| p.n_rows).collect();
        assert_eq!(sizes.iter().sum::<usize>(), 900);
        assert!(sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1, "{sizes:?}");
        assert!(sizes.windows(2).all(|w| w[0] >= w[1]), "the larger shards come first: {sizes:?}");
        let mut at = 0;
        for p in &parts {
            for r in 0..p.n_rows {
                assert_eq!(p.row(r), train.row(at + r), "{n} shards: row {}", at + r);
            }
            assert_eq!(p.y, train.y[at..at + p.n_rows]);
            at += p.n_rows;
        }
    }
    assert!(split_rows(&train, 901).unwrap_err().to_string().contains("at least 901 training rows"));
    assert!(split_rows(&train, 0).is_err());
}

#[test]
fn fitness_is_the_metric_of_the_shards_sums_added_in_order() {
    // 1000 rows in 3 shards (334, 333, 333): block boundaries the CPU's own chunks do not share.
    let train = DataSource::parse("builtin:pagie1").unwrap().load(None).unwrap().train.subset(&(0..1000).collect::<Vec<_>>()).unwrap();
    let cpu = Backend::Cpu;
    let spec = TreeSpec::new(vec![Op::Add, Op::Mul, Op::Sub, Op::Div, Op::Sin], 2, 32).with_depth(1, 5);
    let pop = init_population(&spec, 200, 3).unwrap();
    let config = RegressionConfig::default();
    let parts = split_rows(&train, 3).unwrap();
    let tasks: Vec<Regression> = parts
        .iter()
        .map(|d| Regression { backend: &cpu, data: cpu.regression_data(&d.x, &d.y, d.n_rows, d.n_features).unwrap(), config, outputs: 1, joint: None, rows: None, loss: None, fitness_fn: None })
        .collect();
    let sharded = ShardedRegression::new(&tasks).unwrap();
    let got = sharded.evaluate(&pop).unwrap();
    // The sums by hand: each shard's, added in order.
    let each: Vec<Vec<RegressionSums>> = tasks.iter().map(|t| cpu.regression_sums(&pop, &t.data).unwrap()).collect();
    let whole = Regression { backend: &cpu, data: cpu.regression_data(&train.x, &train.y, train.n_rows, train.n_features).unwrap(), config, outputs: 1, joint: None, rows: None, loss: None, fitness_fn: None };
    let all = cpu.regression_sums(&pop, &whole.data).unwrap();
    for i in 0..pop.size() {
        let mut s = each[0][i];
        s.merge(&each[1][i]);
        s.merge(&each[2][i]);
        assert_eq!(s.n, 1000);
        let want = tasks[0].fitness_of_sums(&[s], &pop.gather(&[i]))[0];
        assert_eq!(got[i].to_bits(), want.to_bits(), "tree {i}");
        // The same sums as the whole data's, up to the order of the additions.
        assert_eq!(s.finite, all[i].finite, "tree {i}");
        if s.finite {
            assert!((s.sum_e2 - all[i].sum_e2).abs() <= 1e-9 * all[i].sum_e2.abs().max(1.0), "tree {i}: {} vs {}", s.sum_e2, all[i].sum_e2);
        }
    }
    // No device task from shards on the CPU: the host loop runs them.
    assert!(sharded.device_task().is_none());
}

#[test]
fn bad_shard_settings_give_one_line() {
    let one = |extra: &[&str], needles: &[&str]| {
        let mut a = RUN.to_vec();
        a.extend(extra);
        assert_one_line_error(&grove(&a), needles);
    };
    one(&["--shard-rows"], &["--shard-rows on the CPU", "--gpus N"]);
    one(&["--shard-rows", "--gpus", "2", "--islands", "2"], &["--shard-rows", "one island"]);
    one(&["--shard-rows", "--gpus", "2000"], &["at most 1024"]);
    one(&["--shard-rows", "--gpus", "1000"], &["at least 1000 training rows"]);
    one(&["--shard-rows", "--gpus", "2", "--outputs", "2"], &["--shard-rows", "--outputs 2"]);
    // classify and control do not offer the flag; a file that sets the field is refused.
    for args in [&["classify", "--data", "builtin:iris", "--gens", "2", "--shard-rows", "--gpus", "2"][..], &["control", "--env", "swimmer", "--gens", "1", "--shard-rows"]] {
        let out = grove(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(text(&out.stderr).contains("unexpected argument '--shard-rows'"), "{}", text(&out.stderr));
    }
    let d = dir("shard-files");
    for (command, body) in [("classify", "Classify(islands: (shard_rows: true, gpus: \"2\"))"), ("control", "Control(env: \"swimmer\", islands: (shard_rows: true, gpus: \"2\"))")] {
        let f = d.join(format!("{command}.ron"));
        std::fs::write(&f, body).unwrap();
        assert_one_line_error(&grove(&["run", s(&f)]), &["--shard-rows", &format!("grove {command}")]);
    }
}
