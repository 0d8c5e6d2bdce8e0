//! The island model on the CPU: runs repeat by seed, one island is the plain run, migration
//! moves each island's best over its neighbour's worst at fixed generations, checkpoints hold
//! every island and resume exactly, and bad settings give one clear line. The same engine path
//! runs on a GPU (tests/cuda_islands.rs).

use std::path::Path;
use std::process::Output;

use grove::evolve::{Best, EngineConfig, GenerationStats, IslandConfig, Observer, Representation, Snapshot, TreeRep, checkpoint, run};
use grove::program::tree::Population;
use serde_json::Value;

mod support;
use support::{assert_ok, dir, grove_cpu as grove, read_json, s, text, without_timings};

/// One line on standard error, exit status 1 (2 for clap's own), containing every needle.
fn assert_one_line_error(out: &Output, needles: &[&str]) {
    let e = text(&out.stderr);
    assert!(matches!(out.status.code(), Some(1) | Some(2)), "{e}");
    assert!(e.starts_with("error: "), "{e}");
    assert_eq!(e.trim().lines().filter(|l| !l.trim().is_empty() && !l.starts_with("Usage") && !l.starts_with("For more")).count(), 1, "one line expected: {e}");
    for n in needles {
        assert!(e.contains(n), "`{n}` missing from: {e}");
    }
}

const SMALL: &[&str] = &["evolve", "--data", "builtin:pagie1:64", "--functions", "add,sub,mul,div,sin", "--pop", "48", "--threads", "1", "-q"];

fn evolve(extra: &[&str], report: &Path) -> Value {
    let mut a = SMALL.to_vec();
    a.extend(extra);
    a.extend(["--report", s(report)]);
    assert_ok(&grove(&a));
    without_timings(read_json(report))
}

#[test]
fn island_runs_repeat_by_seed_and_report_every_island() {
    let d = dir("seed");
    let args = ["--gens", "8", "--islands", "3", "--migrate-every", "2", "--migrants", "3", "--seed", "4"];
    let a = evolve(&args, &d.join("a.json"));
    let b = evolve(&args, &d.join("b.json"));
    assert!(a == b, "two runs of one seed differ");
    let mut other = args.to_vec();
    let last = other.len() - 1;
    other[last] = "5";
    let c = evolve(&other, &d.join("c.json"));
    assert_ne!(a["generations"], c["generations"], "another seed, another run");
    assert_eq!(a["settings"]["islands"], serde_json::json!({"count": 3, "migrate_every": 2, "migrants": 3, "gpus": "all"}));
    let gens = a["generations"].as_array().unwrap();
    assert_eq!(gens.len(), 9);
    for g in gens {
        let each = g["islands"].as_array().unwrap();
        assert_eq!(each.len(), 3);
        // The run's best is the best island's; invalid ones add up.
        let best = each.iter().map(|i| i["best"].as_f64().unwrap()).fold(f64::INFINITY, f64::min);
        assert_eq!(best, g["best"].as_f64().unwrap());
        assert_eq!(each.iter().map(|i| i["invalid"].as_u64().unwrap()).sum::<u64>(), g["invalid"].as_u64().unwrap());
    }
    // Islands of one run start from different seeds.
    let first: Vec<f64> = gens[0]["islands"].as_array().unwrap().iter().map(|i| i["mean"].as_f64().unwrap()).collect();
    assert!(first[0] != first[1] && first[1] != first[2], "{first:?}");
}

#[test]
fn one_island_is_the_plain_run() {
    let d = dir("one");
    let plain = evolve(&["--gens", "6"], &d.join("plain.json"));
    let one = evolve(&["--gens", "6", "--islands", "1", "--migrants", "40", "--migrate-every", "1"], &d.join("one.json"));
    let strip = |mut r: Value| {
        r["settings"].as_object_mut().unwrap().remove("islands");
        r
    };
    assert_eq!(strip(plain.clone()), strip(one));
    assert!(plain["generations"][0].get("islands").is_none(), "no per-island statistics without islands");
}

#[test]
fn checkpoints_hold_every_island_and_resume_exactly() {
    let d = dir("resume");
    // Tree GP (regression) and GE (classification), each stopped early by a shorter run with a
    // checkpoint, then resumed to the full length: the report equals the uninterrupted run's.
    let runs: [(&str, Vec<&str>); 2] = [
        ("trees", SMALL.iter().copied().chain(["--islands", "3", "--migrate-every", "2", "--migrants", "2"]).collect()),
        (
            "ge",
            vec![
                "classify", "--data", "builtin:iris", "--grammar", "grammars/classify.bnf", "--pop", "40", "--threads", "1", "-q", "--islands",
                "2", "--migrate-every", "3", "--migrants", "4",
            ],
        ),
    ];
    for (name, base) in runs {
        let (full, ck, resumed, hof_a, hof_b) =
            (d.join(format!("{name}-full.json")), d.join(format!("{name}.ckpt")), d.join(format!("{name}-resumed.json")), d.join(format!("{name}-a.csv")), d.join(format!("{name}-b.csv")));
        let mut a = base.clone();
        a.extend(["--gens", "9", "--report", s(&full), "--hall-of-fame", s(&hof_a)]);
        assert_ok(&grove(&a));
        let mut b = base.clone();
        // Checkpoints at 2 and before the last generation, 4.
        b.extend(["--gens", "4", "--checkpoint", s(&ck), "--checkpoint-every", "2"]);
        assert_ok(&grove(&b));
        let saved = read_json(&ck);
        assert_eq!(saved["state"]["generation"], 4, "{name}");
        let n = saved["state"]["islands"].as_u64().unwrap() as usize;
        assert_eq!(saved["state"]["island_history"].as_array().unwrap().len(), 4, "{name}");
        let rows = match name {
            "trees" => saved["state"]["trees"]["rows"].as_array().unwrap().len(),
            _ => saved["state"]["genomes"][1].as_array().unwrap().len(),
        };
        assert_eq!(rows, n * if name == "trees" { 48 } else { 40 }, "{name}: every island's rows");
        assert_ok(&grove(&["run", "--resume", s(&ck), "--gens", "9", "--report", s(&resumed), "--hall-of-fame", s(&hof_b), "-q"]));
        let (x, y) = (without_timings(read_json(&full)), without_timings(read_json(&resumed)));
        assert!(x == y, "{name}: the resumed report differs from the uninterrupted one");
        assert_eq!(std::fs::read_to_string(&hof_a).unwrap(), std::fs::read_to_string(&hof_b).unwrap());
        // Another island count is refused in one line.
        let out = grove(&["run", "--resume", s(&ck), "--islands", "4", "-q"]);
        assert_one_line_error(&out, &[&format!("holds {n} island"), "ask for 4"]);
    }
}

#[test]
fn bad_island_settings_give_one_clear_line() {
    let cases: [(&[&str], &[&str]); 6] = [
        (&["--islands", "0"], &["--islands", "at least 1"]),
        (&["--islands", "2", "--migrants", "49"], &["--migrants", "at most the population", "48"]),
        (&["--islands", "2", "--migrate-every", "0"], &["--migrate-every", "at least 1"]),
        (&["--gpus", "0"], &["--gpus", "at least one GPU"]),
        (&["--gpus", "1,1"], &["--gpus", "listed twice"]),
        (&["--gpu-link", "tcp"], &["--gpu-link", "peer", "nccl"]),
    ];
    for (extra, needles) in cases {
        let mut a = SMALL.to_vec();
        a.extend(["--gens", "2"]);
        a.extend(extra);
        assert_one_line_error(&grove(&a), needles);
    }
    // The same checks read experiment files.
    let d = dir("bad");
    let f = d.join("e.ron");
    std::fs::write(&f, "Evolve(functions: \"add,mul\", engine: (pop_size: 10), islands: (count: 2, migrants: 11))").unwrap();
    assert_one_line_error(&grove(&["run", s(&f), "-q"]), &["islands.migrants", "at most the population"]);
    std::fs::write(&f, "Evolve(functions: \"add,mul\", islands: (count: 2, migrnts: 1))").unwrap();
    assert_one_line_error(&grove(&["run", s(&f), "-q"]), &["islands.migrnts"]);
    std::fs::write(&f, "Evolve(functions: \"add,mul\", islands: (count: 2, link: \"tcp\"))").unwrap();
    assert_one_line_error(&grove(&["run", s(&f), "-q"]), &["islands.link", "tcp", "peer", "nccl"]);
}

/// How GPUs exchange data is a setting of CUDA runs on several GPUs: the CPU's islands run
/// the same with either link, and the report, experiment files and `grove run` carry it.
#[test]
fn the_gpu_link_is_reported_and_changes_no_result() {
    let d = dir("link");
    let args = ["--gens", "5", "--islands", "2", "--migrate-every", "2", "--migrants", "3", "--seed", "2"];
    let peer = evolve(&args, &d.join("peer.json"));
    let mut with = args.to_vec();
    with.extend(["--gpu-link", "nccl"]);
    let nccl = evolve(&with, &d.join("nccl.json"));
    assert!(peer["settings"]["islands"].get("link").is_none(), "the default link is left out: {}", peer["settings"]["islands"]);
    assert_eq!(nccl["settings"]["islands"]["link"], "nccl");
    let strip = |mut r: Value| {
        r["settings"]["islands"].as_object_mut().unwrap().remove("link");
        r
    };
    assert!(strip(peer) == strip(nccl.clone()), "the link changed a CPU run");
    // --from repeats it; grove run --gpu-link overrides it.
    let again = d.join("again.json");
    assert_ok(&grove(&["run", "--from", s(&d.join("nccl.json")), "--threads", "1", "-q", "--report", s(&again)]));
    assert!(without_timings(read_json(&again)) == nccl);
    let back = d.join("back.json");
    assert_ok(&grove(&["run", "--from", s(&d.join("nccl.json")), "--gpu-link", "peer", "--threads", "1", "-q", "--report", s(&back)]));
    assert!(read_json(&back)["settings"]["islands"].get("link").is_none());
}

#[test]
fn experiment_files_and_grove_run_take_islands() {
    let d = dir("file");
    let f = d.join("e.ron");
    std::fs::write(&f, "Evolve(data: \"builtin:pagie1:64\", functions: \"add,sub,mul,div,sin\", engine: (pop_size: 48, generations: 4), islands: (count: 2, migrate_every: 2, migrants: 3))").unwrap();
    let (a, b) = (d.join("a.json"), d.join("b.json"));
    assert_ok(&grove(&["run", s(&f), "--threads", "1", "-q", "--report", s(&a)]));
    let cli = evolve(&["--gens", "4", "--islands", "2", "--migrate-every", "2", "--migrants", "3"], &b);
    assert_eq!(without_timings(read_json(&a))["generations"], cli["generations"]);
    // --islands overrides the file; --from repeats the report.
    let c = d.join("c.json");
    assert_ok(&grove(&["run", s(&f), "--islands", "3", "--threads", "1", "-q", "--report", s(&c)]));
    assert_eq!(read_json(&c)["settings"]["islands"]["count"], 3);
    let e = d.join("e.json");
    assert_ok(&grove(&["run", "--from", s(&c), "--threads", "1", "-q", "--report", s(&e)]));
    assert!(without_timings(read_json(&c)) == without_timings(read_json(&e)));
}

// Engine level: the migration itself, seen through each island's statistics.

/// Fitness: distance of the tree's length from 40 (a task that needs no interpreter and whose
/// optimum is not reached early).
fn far(pop: &Population) -> Vec<f64> {
    (0..pop.size()).map(|i| if pop.len[i] == 0 { f64::INFINITY } else { (pop.len[i] as f64 - 40.0).abs() + 1e-3 * (i % 7) as f64 }).collect()
}

fn tree_rep() -> TreeRep {
    use grove::program::{BreedConfig, Crossover, Mutation, Op, TreeSpec, VaryConfig};
    let spec = TreeSpec::new(vec![Op::Add, Op::Mul, Op::Sin], 2, 64).with_depth(1, 3);
    TreeRep {
        vary: VaryConfig::new(spec),
        breed: BreedConfig { p_crossover: 0.9, crossovers: vec![(Crossover::OnePoint, 1.0)], p_mutation: 0.3, mutations: vec![(Mutation::Subtree, 1.0)] },
    }
}

/// Records each island's statistics and what `evaluated` saw.
#[derive(Default)]
struct Watch {
    islands: Vec<Vec<GenerationStats>>,
    evaluated_rows: Vec<usize>,
    saved: Option<checkpoint::Saved>,
    stop_at: Option<usize>,
    seen: usize,
}

impl Observer for Watch {
    fn generation(&mut self, s: &GenerationStats, _: &Best) {
        self.seen = s.generation + 1;
    }
    fn islands(&mut self, stats: &[GenerationStats]) {
        self.islands.push(stats.to_vec());
    }
    fn evaluated(&mut self, _: usize, pop: &Population, fit: &[f64]) {
        assert_eq!(pop.size(), fit.len());
        self.evaluated_rows.push(pop.size());
    }
    fn snapshot(&mut self, state: &Snapshot<'_>) -> anyhow::Result<()> {
        self.saved = Some(checkpoint::Saved::of(state));
        Ok(())
    }
    fn stop_requested(&self) -> bool {
        self.stop_at == Some(self.seen)
    }
}

#[test]
fn each_island_receives_its_neighbours_best_at_migration_generations() {
    let cfg = EngineConfig { pop_size: 40, generations: 12, seed: 3, tournament: 3, elite: 1, max_len: 64, ..EngineConfig::default() };
    let islands = IslandConfig { count: 4, migrate_every: 3, migrants: 2, ..IslandConfig::default() };
    let rep = tree_rep();
    let mut w = Watch::default();
    let out = run(&cfg, &islands, Representation::Trees(&rep), &far, None, &mut w).unwrap();
    assert_eq!(w.evaluated_rows, vec![160; 13], "the hall of fame sees every island");
    assert_eq!(out.population.size(), 160);
    assert_eq!(out.island_history, w.islands);
    for g in 0..12 {
        for i in 0..4 {
            let (sender, receiver) = (w.islands[g][(i + 3) % 4].best, w.islands[g + 1][i].best);
            if islands.migrates_after(g, 12) {
                // The immigrant best survives as the receiver's elite.
                assert!(receiver <= sender, "generation {g}: island {i} has {receiver}, its neighbour sent {sender}");
            }
            // Elitism: no island gets worse.
            assert!(w.islands[g + 1][i].best <= w.islands[g][i].best);
        }
    }
    // Without migration, some generation must show an island behind its neighbour afterwards.
    let apart = IslandConfig { migrants: 0, ..islands.clone() };
    let mut v = Watch::default();
    run(&cfg, &apart, Representation::Trees(&rep), &far, None, &mut v).unwrap();
    let strip = |h: &[Vec<GenerationStats>]| {
        h.iter().map(|g| g.iter().map(|s| GenerationStats { seconds: 0.0, ..s.clone() }).collect::<Vec<_>>()).collect::<Vec<_>>()
    };
    assert_eq!(strip(&v.islands[..4]), strip(&w.islands[..4]), "identical until the first migration");
    assert_ne!(strip(&v.islands), strip(&w.islands), "migration changes the run");
}

#[test]
fn one_island_with_migration_settings_is_the_plain_run() {
    let cfg = EngineConfig { pop_size: 50, generations: 6, seed: 8, tournament: 3, elite: 2, max_len: 64, ..EngineConfig::default() };
    let rep = tree_rep();
    let plain = run(&cfg, &IslandConfig::single(), Representation::Trees(&rep), &far, None, &mut |_: &GenerationStats, _: &Best| {}).unwrap();
    let one = IslandConfig { count: 1, migrate_every: 1, migrants: 50, ..IslandConfig::default() };
    let mut w = Watch::default();
    let isl = run(&cfg, &one, Representation::Trees(&rep), &far, None, &mut w).unwrap();
    assert_eq!(plain.best, isl.best);
    assert_eq!(plain.population, isl.population);
    assert_eq!(plain.fitness, isl.fitness);
    assert!(w.islands.is_empty() && isl.island_history.is_empty());
}

#[test]
fn a_checkpoint_resumes_only_on_its_island_count() {
    let cfg = EngineConfig { pop_size: 30, generations: 8, seed: 2, tournament: 3, elite: 1, max_len: 64, ..EngineConfig::default() };
    let islands = IslandConfig { count: 3, migrate_every: 2, migrants: 2, ..IslandConfig::default() };
    let rep = tree_rep();
    let whole = run(&cfg, &islands, Representation::Trees(&rep), &far, None, &mut Watch::default()).unwrap();
    let mut w = Watch { stop_at: Some(5), ..Watch::default() };
    let err = run(&cfg, &islands, Representation::Trees(&rep), &far, None, &mut w).unwrap_err();
    assert!(err.downcast_ref::<grove::evolve::Interrupted>().is_some());
    let text = serde_json::to_string(&w.saved.unwrap()).unwrap();
    let saved: checkpoint::Saved = serde_json::from_str(&text).unwrap();
    assert_eq!(saved.islands, 3);
    let resumed = run(&cfg, &islands, Representation::Trees(&rep), &far, Some(saved.resume().unwrap()), &mut Watch::default()).unwrap();
    assert_eq!(resumed.best, whole.best);
    assert_eq!(resumed.population, whole.population);
    assert_eq!(resumed.fitness, whole.fitness);
    let strip = |h: &[Vec<GenerationStats>]| {
        h.iter().map(|g| g.iter().map(|s| GenerationStats { seconds: 0.0, ..s.clone() }).collect::<Vec<_>>()).collect::<Vec<_>>()
    };
    assert_eq!(strip(&resumed.island_history), strip(&whole.island_history));
    let other = IslandConfig { count: 2, ..islands };
    let err = run(&cfg, &other, Representation::Trees(&rep), &far, Some(saved.resume().unwrap()), &mut Watch::default()).unwrap_err();
    assert!(err.to_string().contains("holds 3 island(s) and these settings ask for 2"), "{err}");
}

#[test]
fn islands_select_parents_with_bloat_control() {
    let rep = tree_rep();
    let islands = IslandConfig { count: 3, migrate_every: 2, migrants: 2, ..IslandConfig::default() };
    let plain = EngineConfig { pop_size: 40, generations: 6, seed: 5, tournament: 3, elite: 1, max_len: 64, ..EngineConfig::default() };
    let run = |cfg: &EngineConfig| run(cfg, &islands, Representation::Trees(&rep), &far, None, &mut Watch::default()).unwrap();
    for bloat in [grove::select::Bloat::DoubleTournament, grove::select::Bloat::Lexicographic] {
        let cfg = EngineConfig { bloat, ..plain.clone() };
        let (a, b) = (run(&cfg), run(&cfg));
        assert_eq!(a.population, b.population, "{bloat:?} repeats");
        if bloat == grove::select::Bloat::DoubleTournament {
            assert_ne!(a.population, run(&plain).population, "{bloat:?} changes the parents");
        }
    }
}
