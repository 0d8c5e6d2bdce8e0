//! Islands on GPUs: the device loop running several islands (one GPU, or spread over every
//! GPU the machine has) against the host loop's islands evaluating on the same GPU: the same
//! programs, fitness bits, statistics of every island, hall of fame and median sizes, for tree
//! GP and GE, regression, classification and control; a resumed island run ends as an
//! uninterrupted one. Needs a GPU (`GROVE_TEST_GPU=1`); the several-GPU test needs two.
//! `emulated_migration_matches_host_islands` runs the migration kernels (vary.cu's gather and
//! scatter) as host C++ on any machine with g++.

#[path = "support/emulator.rs"]
mod emulator;

#[path = "support/stop.rs"]
mod stop;
use stop::StopAt;

use grove::backend::cuda::{CudaEngine, EngineOptions};
use grove::backend::{Backend, DeviceChoice, Gpus};
use grove::data::DataSource;
use grove::evolve::islands::GpuLink;
use grove::evolve::{EngineConfig, GenerationStats, GrammarRep, IslandConfig, Outcome, Representation, device, host};
use grove::genome::{InitConfig, MapConfig};
use grove::grammar::template::{Vars, compile};
use grove::grammar::{DatasetShape, load};
use grove::program::tree::Population;
use grove::task::regression::{Regression, RegressionConfig, TreeSettings};

/// An observer keeping a hall of fame and the median sizes, from whole populations (host loop)
/// or from per-size summaries (device loop).
#[derive(Default)]
struct Fame {
    hof: grove::evolve::hof::HallOfFame,
    medians: Vec<f64>,
    islands: Vec<Vec<GenerationStats>>,
}

impl grove::evolve::Observer for Fame {
    fn generation(&mut self, _: &GenerationStats, _: &grove::evolve::Best) {}
    fn islands(&mut self, stats: &[GenerationStats]) {
        self.islands.push(stats.to_vec());
    }
    fn evaluated(&mut self, generation: usize, pop: &Population, fitness: &[f64]) {
        self.hof.update(generation, pop, fitness);
        let mut counts = vec![0u32; pop.max_len + 1];
        for (i, &f) in fitness.iter().enumerate() {
            if pop.len[i] > 0 && grove::select::key(f).is_finite() {
                counts[pop.len[i] as usize] += 1;
            }
        }
        self.medians.push(grove::task::base::observer::median_of_counts(&counts));
    }
    fn evaluated_sizes(&mut self, generation: usize, winners: &[(f64, Vec<grove::program::tree::Node>)], counts: &[u32]) {
        for (f, nodes) in winners {
            self.hof.offer(generation, *f, nodes);
        }
        self.medians.push(grove::task::base::observer::median_of_counts(counts));
    }
}

fn same_stats(what: &str, x: &GenerationStats, y: &GenerationStats) {
    assert_eq!((x.generation, x.best.to_bits(), x.invalid), (y.generation, y.best.to_bits(), y.invalid), "{what}");
    assert!(x.mean_size == y.mean_size || (x.mean_size.is_nan() && y.mean_size.is_nan()), "{what}: {x:?} {y:?}");
    assert!((x.mean - y.mean).abs() <= 1e-9 * y.mean.abs() || (x.mean.is_nan() && y.mean.is_nan()), "{what}: {x:?} {y:?}");
}

/// The two loops' outcomes must be equal: best program and genome, last populations and
/// fitness bits, the run's and every island's history, hall of fame and median sizes.
fn assert_same_runs(what: &str, a: &Outcome, b: &Outcome, fa: &Fame, fb: &Fame) {
    assert_eq!(a.best, b.best, "{what}: best program (and genome)");
    assert_eq!(a.population, b.population, "{what}: last populations");
    let bits = |f: &[f64]| f.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&a.fitness), bits(&b.fitness), "{what}: last fitness");
    assert_eq!(a.history.len(), b.history.len(), "{what}");
    for (x, y) in a.history.iter().zip(&b.history) {
        same_stats(what, x, y);
    }
    assert_eq!(a.island_history.len(), b.island_history.len(), "{what}");
    for (g, (x, y)) in a.island_history.iter().zip(&b.island_history).enumerate() {
        assert_eq!(x.len(), y.len());
        for (i, (x, y)) in x.iter().zip(y).enumerate() {
            same_stats(&format!("{what}: generation {g} island {i}"), x, y);
        }
    }
    assert_eq!(fa.islands.len(), a.island_history.len(), "{what}: the observer sees every island");
    assert_eq!(fa.hof, fb.hof, "{what}: hall of fame");
    assert_eq!(fa.medians, fb.medians, "{what}: median sizes");
}

/// A backend on each of GPUs `0..n`.
fn gpu_engines(n: usize) -> Vec<Backend> {
    (0..n).map(|o| Backend::Cuda(Box::new(CudaEngine::with_options(EngineOptions { ordinal: o, ..EngineOptions::default() }).unwrap()))).collect()
}

fn islands(count: usize, migrate_every: usize, migrants: usize) -> IslandConfig {
    IslandConfig { count, migrate_every, migrants, ..IslandConfig::default() }
}

/// The links to test: peer copies, and NCCL where it opens (else a `skipped:` line, or a
/// failure with `GROVE_REQUIRE_NCCL=1`).
fn links() -> Vec<GpuLink> {
    match grove::backend::cuda::nccl::nccl() {
        Ok(n) => {
            eprintln!("NCCL {}.{}.{} from {}", n.version.0, n.version.1, n.version.2, n.library);
            vec![GpuLink::Peer, GpuLink::Nccl]
        }
        Err(e) if std::env::var("GROVE_REQUIRE_NCCL").is_ok_and(|v| v == "1") => panic!("GROVE_REQUIRE_NCCL=1: {e}"),
        Err(e) => {
            eprintln!("skipped: the NCCL link ({e})");
            vec![GpuLink::Peer]
        }
    }
}

/// Tree GP regression on W1's data: several island counts, migration intervals and sizes
/// (up to a whole island), elites; the device's islands on one GPU against the host's.
#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn device_islands_equal_host_islands_for_tree_gp() {
    let problem = DataSource::parse("builtin:pagie1").unwrap().load(None).unwrap();
    let train = &problem.train;
    let gpu = Backend::open(DeviceChoice::Cuda, &Gpus::All).expect("GROVE_TEST_GPU=1 needs a usable GPU").backend;
    let cases = [
        (EngineConfig { pop_size: 625, generations: 12, seed: 3, tournament: 3, elite: 1, max_len: 128, ..EngineConfig::default() }, islands(8, 3, 10)),
        (EngineConfig { pop_size: 400, generations: 9, seed: 7, tournament: 4, elite: 3, max_len: 64, ..EngineConfig::default() }, islands(3, 2, 400)),
        (EngineConfig { pop_size: 1000, generations: 6, seed: 2, tournament: 3, elite: 0, max_len: 256, ..EngineConfig::default() }, islands(2, 1, 1)),
        (EngineConfig { pop_size: 300, generations: 6, seed: 5, tournament: 3, elite: 2, max_len: 128, ..EngineConfig::default() }, islands(4, 10, 5)),
    ];
    for (cfg, isl) in cases {
        let data = gpu.regression_data(&train.x, &train.y, train.n_rows, train.n_features).unwrap();
        let task = Regression { backend: &gpu, data, config: RegressionConfig::default(), outputs: 1, joint: None, rows: None, loss: None, fitness_fn: None };
        let rep = TreeSettings::default().rep("add,sub,mul,div,sin,cos", train.n_features, cfg.max_len).unwrap();
        let d = grove::evolve::Fitness::device_task(&task).expect("resident data gives the device loop");
        let (mut fa, mut fb) = (Fame::default(), Fame::default());
        let (a, tr) = device::run(&cfg, &isl, Representation::Trees(&rep), &[d], None, &mut fa).unwrap();
        let b = host::run(&cfg, &isl, Representation::Trees(&rep), &task, None, &mut fb).unwrap();
        let what = format!("{cfg:?} {isl:?}");
        assert_same_runs(&what, &a, &b, &fa, &fb);
        let migrations = (0..=cfg.generations).filter(|&g| isl.migrates_after(g, cfg.generations)).count();
        assert_eq!(tr.migrations, migrations, "{what}");
        assert_eq!(tr.generations, cfg.generations + 1);
        assert_eq!(tr.snapshots, 0);
        eprintln!("{what}: best {:e}, {} migrations moving {} bytes through the host", a.best.fitness, tr.migrations, tr.migration_bytes);
        assert_eq!(tr.migration_bytes, 0, "{what}: migration chooses and moves rows on the device");
        assert_eq!(tr.population_bytes_between_generations, 0, "{what}");
    }
}

/// Grammatical evolution over a loaded regression grammar, with the island tests' settings.
fn regression_ge<'a>(l: &'a grove::grammar::Loaded, tpl: &'a grove::grammar::template::Templates) -> GrammarRep<'a> {
    GrammarRep {
        table: &l.table,
        templates: tpl,
        map: MapConfig { max_depth: 17, ..MapConfig::default() },
        init: InitConfig { max_depth: 7, ..InitConfig::default() },
        vary: grove::genome::vary::GeVaryConfig { mutation: 0.05, ..Default::default() },
        genome_capacity: 256,
    }
}

/// GE regression: genomes, their used codons and trees migrate on the device.
#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn device_islands_equal_host_islands_for_ge() {
    let problem = DataSource::parse("builtin:pagie1").unwrap().load(None).unwrap();
    let train = &problem.train;
    let gpu = Backend::open(DeviceChoice::Cuda, &Gpus::All).expect("GROVE_TEST_GPU=1 needs a usable GPU").backend;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let l = load(&root.join("grammars/regression.bnf"), &DatasetShape { n_vars: Some(2), n_is: Some(2), n_os: Some(1) }).unwrap();
    let tpl = compile(&l.grammar, &l.table, &Vars { names: train.names.clone(), n_outputs: 0 }).unwrap();
    let rep = regression_ge(&l, &tpl);
    for (cfg, isl) in [
        (EngineConfig { pop_size: 500, generations: 12, seed: 4, tournament: 3, elite: 1, max_len: 128, ..EngineConfig::default() }, islands(4, 3, 20)),
        (EngineConfig { pop_size: 301, generations: 8, seed: 9, tournament: 3, elite: 2, max_len: 128, ..EngineConfig::default() }, islands(3, 2, 301)),
    ] {
        let data = gpu.regression_data(&train.x, &train.y, train.n_rows, train.n_features).unwrap();
        let task = Regression { backend: &gpu, data, config: RegressionConfig::default(), outputs: 1, joint: None, rows: None, loss: None, fitness_fn: None };
        let d = grove::evolve::Fitness::device_task(&task).unwrap();
        let (mut fa, mut fb) = (Fame::default(), Fame::default());
        let (a, _) = device::run(&cfg, &isl, Representation::Grammar(&rep), &[d], None, &mut fa).unwrap();
        let b = host::run(&cfg, &isl, Representation::Grammar(&rep), &task, None, &mut fb).unwrap();
        assert_same_runs(&format!("GE {cfg:?} {isl:?}"), &a, &b, &fa, &fb);
        assert!(a.best.genome.is_some());
    }
}

/// Classification (tree GP, multi-output) and control (tree GP and GE policies) on islands.
#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn device_islands_equal_host_islands_for_classification_and_control() {
    use grove::data::classes::ClassSource;
    use grove::backend::cpu::control::{ControlRun, observation_names};
    use grove::task::classify::{ClassFitness, Classification};
    use grove::task::base::search::ClassTreeSettings;
    use grove::task::control::Control;
    let gpu = Backend::open(DeviceChoice::Cuda, &Gpus::All).expect("GROVE_TEST_GPU=1 needs a usable GPU").backend;
    let all = ClassSource::parse("builtin:wine").unwrap().load(None).unwrap();
    let k = all.n_classes();
    let cfg = EngineConfig { pop_size: 500, generations: 8, seed: 2, tournament: 3, elite: 2, max_len: 64, ..EngineConfig::default() };
    let isl = islands(4, 2, 8);
    let data = gpu.classification_data(&all.data.x, &all.labels, all.data.n_rows, k).unwrap();
    let counts: Vec<u64> = all.class_counts().iter().map(|&c| c as u64).collect();
    let task = Classification { backend: &gpu, data, counts, fitness: ClassFitness::CrossEntropy, parsimony: 1e-5, head: None, rows: None };
    let rep = ClassTreeSettings::default().rep("add,sub,mul,div", all.data.n_features, k, cfg.max_len).unwrap();
    let d = grove::evolve::Fitness::device_task(&task).unwrap();
    let (mut fa, mut fb) = (Fame::default(), Fame::default());
    let (a, _) = device::run(&cfg, &isl, Representation::Trees(&rep), &[d], None, &mut fa).unwrap();
    let b = host::run(&cfg, &isl, Representation::Trees(&rep), &task, None, &mut fb).unwrap();
    assert_same_runs("wine", &a, &b, &fa, &fb);

    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let m = grove::sim::Model::load("swimmer", None).unwrap();
    let (nu, n_obs) = (m.nu(), m.obs_size);
    let run = ControlRun { episodes: 2, steps: 120, seed: 3, generation: 0, noise: true, ignore_termination: false };
    let cfg = EngineConfig { pop_size: 200, generations: 6, seed: 3, tournament: 3, elite: 1, max_len: 128, ..EngineConfig::default() };
    let shape = DatasetShape { n_vars: Some(n_obs as u32), n_is: Some(n_obs as u32), n_os: Some(nu as u32) };
    let l = load(&root.join("grammars/swimmer.bnf"), &shape).unwrap();
    let tpl = compile(&l.grammar, &l.table, &Vars { names: observation_names(&m), n_outputs: nu }).unwrap();
    let ge = GrammarRep { table: &l.table, templates: &tpl, map: MapConfig { max_depth: 10, ..MapConfig::default() }, init: InitConfig { max_depth: 6, ..InitConfig::default() }, vary: Default::default(), genome_capacity: 256 };
    let trees = ClassTreeSettings { constants: vec![-1.0, 0.5, 2.0], p_out: 0.1, ..Default::default() }.rep("add,sub,mul,div,tanh", n_obs, nu, cfg.max_len).unwrap();
    for rep in [Representation::Grammar(&ge), Representation::Trees(&trees)] {
        let host = Control { backend: &gpu, model: &m, run, fresh: true, parsimony: 1e-3, played: std::sync::Mutex::new((0, 0.0)), episodes: Default::default(), residual: None, learnt: None };
        let dev = Control { backend: &gpu, model: &m, run, fresh: true, parsimony: 1e-3, played: std::sync::Mutex::new((0, 0.0)), episodes: Default::default(), residual: None, learnt: None };
        let d = grove::evolve::Fitness::device_task(&dev).unwrap();
        let (mut fa, mut fb) = (Fame::default(), Fame::default());
        let (a, _) = device::run(&cfg, &islands(3, 2, 4), rep, &[d], None, &mut fa).unwrap();
        let b = host::run(&cfg, &islands(3, 2, 4), rep, &host, None, &mut fb).unwrap();
        assert_same_runs("swimmer", &a, &b, &fa, &fb);
        assert_eq!(dev.played.lock().unwrap().0, host.played.lock().unwrap().0, "env steps played");
    }
}

/// An island run on the device stopped after a snapshot and resumed from it (through the
/// checkpoint's JSON) ends exactly as an uninterrupted one; the snapshot holds every island.
#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn a_resumed_device_island_run_matches_an_uninterrupted_one() {
    use grove::evolve::checkpoint;
    let problem = DataSource::parse("builtin:pagie1").unwrap().load(None).unwrap();
    let train = &problem.train;
    let gpu = Backend::open(DeviceChoice::Cuda, &Gpus::All).expect("GROVE_TEST_GPU=1 needs a usable GPU").backend;
    let cfg = EngineConfig { pop_size: 500, generations: 12, seed: 21, tournament: 3, elite: 1, max_len: 128, ..EngineConfig::default() };
    let isl = islands(4, 3, 6);
    let data = gpu.regression_data(&train.x, &train.y, train.n_rows, train.n_features).unwrap();
    let task = Regression { backend: &gpu, data, config: Default::default(), outputs: 1, joint: None, rows: None, loss: None, fitness_fn: None };
    let rep = TreeSettings::default().rep("add,sub,mul,div,sin", train.n_features, cfg.max_len).unwrap();
    let d = grove::evolve::Fitness::device_task(&task).unwrap();
    let quiet = |_: &GenerationStats, _: &grove::evolve::Best| {};
    let (whole, _) = device::run(&cfg, &isl, Representation::Trees(&rep), &[d], None, &mut { quiet }).unwrap();
    let mut stop = StopAt(7, 0, None);
    let err = device::run(&cfg, &isl, Representation::Trees(&rep), &[d], None, &mut stop).unwrap_err();
    assert!(err.downcast_ref::<grove::evolve::Interrupted>().is_some(), "{err:#}");
    let saved = stop.2.expect("a snapshot before the stop");
    assert_eq!(saved.islands, 4);
    assert_eq!(saved.trees.as_ref().unwrap().rows.len(), 4 * 500);
    let text = serde_json::to_string(&saved).unwrap();
    let saved: checkpoint::Saved = serde_json::from_str(&text).unwrap();
    let (resumed, tr) = device::run(&cfg, &isl, Representation::Trees(&rep), &[d], Some(saved.resume().unwrap()), &mut { quiet }).unwrap();
    assert_eq!(resumed.best, whole.best);
    assert_eq!(resumed.population, whole.population);
    assert_eq!(resumed.fitness.iter().map(|f| f.to_bits()).collect::<Vec<_>>(), whole.fitness.iter().map(|f| f.to_bits()).collect::<Vec<_>>());
    assert_eq!(resumed.island_history.len(), whole.island_history.len());
    assert!(tr.migrations > 0);
    // The host loop resumes the device's checkpoint too, to the same end.
    let host = host::run(&cfg, &isl, Representation::Trees(&rep), &task, Some(saved.resume().unwrap()), &mut { quiet }).unwrap();
    assert_eq!(host.best, whole.best);
    assert_eq!(host.population, whole.population);
}

/// NSGA-II on islands: each island's survivors choose and receive the migrants on the device,
/// as the host loop's islands do (tree GP and GE), and a run stopped and resumed from its
/// checkpoint (every island's survivors end to end) ends as the uninterrupted one, on the
/// device loop and on the host loop.
#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn nsga2_islands_on_the_device_equal_host_islands() {
    use grove::evolve::checkpoint;
    use grove::select::Bloat;
    let problem = DataSource::parse("builtin:pagie1").unwrap().load(None).unwrap();
    let train = &problem.train;
    let gpu = Backend::open(DeviceChoice::Cuda, &Gpus::All).expect("GROVE_TEST_GPU=1 needs a usable GPU").backend;
    let data = gpu.regression_data(&train.x, &train.y, train.n_rows, train.n_features).unwrap();
    let task = Regression { backend: &gpu, data, config: RegressionConfig::default(), outputs: 1, joint: None, rows: None, loss: None, fitness_fn: None };
    let d = grove::evolve::Fitness::device_task(&task).unwrap();
    let nsga2 = |pop_size, generations, seed| EngineConfig { pop_size, generations, seed, tournament: 2, elite: 1, max_len: 128, bloat: Bloat::Nsga2, ..EngineConfig::default() };
    let trees = TreeSettings::default().rep("add,sub,mul,div,sin,cos", train.n_features, 128).unwrap();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let l = load(&root.join("grammars/regression.bnf"), &DatasetShape { n_vars: Some(2), n_is: Some(2), n_os: Some(1) }).unwrap();
    let tpl = compile(&l.grammar, &l.table, &Vars { names: train.names.clone(), n_outputs: 0 }).unwrap();
    let ge = regression_ge(&l, &tpl);
    for (cfg, isl, r) in [
        (nsga2(500, 12, 3), islands(4, 3, 10), Representation::Trees(&trees)),
        (nsga2(301, 9, 4), islands(3, 2, 301), Representation::Trees(&trees)),
        (nsga2(400, 10, 5), islands(3, 2, 12), Representation::Grammar(&ge)),
    ] {
        let (mut fa, mut fb) = (Fame::default(), Fame::default());
        let (a, tr) = device::run(&cfg, &isl, r, &[d], None, &mut fa).unwrap();
        let b = host::run(&cfg, &isl, r, &task, None, &mut fb).unwrap();
        let what = format!("NSGA-II {cfg:?} {isl:?}");
        assert_same_runs(&what, &a, &b, &fa, &fb);
        assert!(tr.migrations > 0, "{what}");
        assert_eq!(tr.population_bytes_between_generations, 0, "{what}");
    }
    let cfg = nsga2(500, 12, 21);
    let isl = islands(4, 3, 6);
    for r in [Representation::Trees(&trees), Representation::Grammar(&ge)] {
        let quiet = |_: &GenerationStats, _: &grove::evolve::Best| {};
        let (whole, _) = device::run(&cfg, &isl, r, &[d], None, &mut { quiet }).unwrap();
        let mut stop = StopAt(7, 0, None);
        let err = device::run(&cfg, &isl, r, &[d], None, &mut stop).unwrap_err();
        assert!(err.downcast_ref::<grove::evolve::Interrupted>().is_some(), "{err:#}");
        let text = serde_json::to_string(&stop.2.expect("a snapshot before the stop")).unwrap();
        let saved: checkpoint::Saved = serde_json::from_str(&text).unwrap();
        let (resumed, _) = device::run(&cfg, &isl, r, &[d], Some(saved.resume().unwrap()), &mut { quiet }).unwrap();
        assert_eq!(resumed.best, whole.best);
        assert_eq!(resumed.population, whole.population);
        assert_eq!(resumed.fitness.iter().map(|f| f.to_bits()).collect::<Vec<_>>(), whole.fitness.iter().map(|f| f.to_bits()).collect::<Vec<_>>());
        let host = host::run(&cfg, &isl, r, &task, Some(saved.resume().unwrap()), &mut { quiet }).unwrap();
        assert_eq!(host.population, whole.population, "the host loop resumes the device's checkpoint to the same end");
    }
}

/// On two GPUs, a run stopped after generation 6 and resumed from its checkpoint (through the
/// checkpoint's JSON) ends exactly as the uninterrupted run: islands spread over the GPUs
/// (migrating GPU to GPU, a thread per GPU), and one population whose rows are split over them.
#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn a_resumed_run_on_two_gpus_matches_an_uninterrupted_one() {
    use grove::evolve::checkpoint;
    use grove::task::regression::shard::{ShardedRegression, split_rows};
    let count = grove::backend::cuda::probe::driver().map(|d| d.devices as usize).unwrap_or(0);
    if count < 2 {
        eprintln!("skipped: the driver sees {count} GPU (two are needed)");
        return;
    }
    let problem = DataSource::parse("builtin:pagie1").unwrap().load(None).unwrap();
    let train = &problem.train;
    let engines = gpu_engines(2);
    let cfg = EngineConfig { pop_size: 400, generations: 12, seed: 23, tournament: 3, elite: 2, max_len: 96, ..EngineConfig::default() };
    let rep = TreeSettings::default().rep("add,sub,mul,div,sin", train.n_features, cfg.max_len).unwrap();
    let quiet = |_: &GenerationStats, _: &grove::evolve::Best| {};
    let whole_and_resumed = |isl: &IslandConfig, d: &[grove::evolve::device::DeviceTask<'_>]| {
        let (whole, _) = device::run(&cfg, isl, Representation::Trees(&rep), d, None, &mut { quiet }).unwrap();
        let mut stop = StopAt(7, 0, None);
        let err = device::run(&cfg, isl, Representation::Trees(&rep), d, None, &mut stop).unwrap_err();
        assert!(err.downcast_ref::<grove::evolve::Interrupted>().is_some(), "{err:#}");
        let text = serde_json::to_string(&stop.2.expect("a snapshot before the stop")).unwrap();
        let saved: checkpoint::Saved = serde_json::from_str(&text).unwrap();
        let (resumed, _) = device::run(&cfg, isl, Representation::Trees(&rep), d, Some(saved.resume().unwrap()), &mut { quiet }).unwrap();
        (whole, resumed)
    };
    let same = |what: &str, whole: &Outcome, resumed: &Outcome| {
        assert_eq!(resumed.best, whole.best, "{what}");
        assert_eq!(resumed.population, whole.population, "{what}");
        assert_eq!(resumed.fitness.iter().map(|f| f.to_bits()).collect::<Vec<_>>(), whole.fitness.iter().map(|f| f.to_bits()).collect::<Vec<_>>(), "{what}");
        assert_eq!(resumed.history.len(), whole.history.len(), "{what}");
    };
    // Islands on two GPUs, each with its own copy of the data.
    let tasks: Vec<Regression> = engines
        .iter()
        .map(|b| Regression { backend: b, data: b.regression_data(&train.x, &train.y, train.n_rows, train.n_features).unwrap(), config: RegressionConfig::default(), outputs: 1, joint: None, rows: None, loss: None, fitness_fn: None })
        .collect();
    let d: Vec<_> = tasks.iter().map(|t| grove::evolve::Fitness::device_task(t).unwrap()).collect();
    let (whole, resumed) = whole_and_resumed(&islands(4, 3, 10), &d);
    same("4 islands on two GPUs", &whole, &resumed);
    // One population, its rows split over the two GPUs.
    let parts = split_rows(train, 2).unwrap();
    let shards: Vec<Regression> = engines
        .iter()
        .zip(&parts)
        .map(|(b, p)| Regression { backend: b, data: b.regression_data(&p.x, &p.y, p.n_rows, p.n_features).unwrap(), config: RegressionConfig::default(), outputs: 1, joint: None, rows: None, loss: None, fitness_fn: None })
        .collect();
    let sharded = ShardedRegression::new(&shards).unwrap();
    let d = grove::evolve::Fitness::device_task(&sharded).unwrap();
    let (whole, resumed) = whole_and_resumed(&IslandConfig::single(), &[d]);
    same("rows split over two GPUs", &whole, &resumed);
}

/// Islands spread over two GPUs (rows between them copied GPU to GPU) give the host
/// loop's run, with each GPU holding its own copy of the data. Skipped, saying so, on a
/// machine with one GPU.
#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn islands_on_two_gpus_equal_host_islands() {
    let count = grove::backend::cuda::probe::driver().expect("GROVE_TEST_GPU=1 needs a usable GPU").devices as usize;
    if count < 2 {
        eprintln!("skipped: the driver sees {count} GPU (two are needed)");
        return;
    }
    let problem = DataSource::parse("builtin:pagie1").unwrap().load(None).unwrap();
    let train = &problem.train;
    let engines = gpu_engines(2);
    let cfg = EngineConfig { pop_size: 700, generations: 10, seed: 6, tournament: 3, elite: 1, max_len: 128, ..EngineConfig::default() };
    let rep = TreeSettings::default().rep("add,sub,mul,div,sin,cos", train.n_features, cfg.max_len).unwrap();
    let tasks: Vec<Regression> = engines
        .iter()
        .map(|b| Regression { backend: b, data: b.regression_data(&train.x, &train.y, train.n_rows, train.n_features).unwrap(), config: RegressionConfig::default(), outputs: 1, joint: None, rows: None, loss: None, fitness_fn: None })
        .collect();
    let d: Vec<_> = tasks.iter().map(|t| grove::evolve::Fitness::device_task(t).unwrap()).collect();
    for (isl, link) in [islands(2, 2, 7), islands(6, 3, 20)].into_iter().flat_map(|i| links().into_iter().map(move |l| (i.clone(), l))) {
        let isl = IslandConfig { link, ..isl };
        let (mut fa, mut fb) = (Fame::default(), Fame::default());
        let (a, tr) = device::run(&cfg, &isl, Representation::Trees(&rep), &d, None, &mut fa).unwrap();
        let b = host::run(&cfg, &isl, Representation::Trees(&rep), &tasks[0], None, &mut fb).unwrap();
        assert_same_runs(&format!("two GPUs {isl:?}"), &a, &b, &fa, &fb);
        // Rows went GPU to GPU; nothing of a migration came through the host.
        assert!(tr.migration_peer_bytes > 0);
        assert_eq!(tr.migration_bytes, 0);
    }
}

/// Islands whose rows move as the device loop moves them: vary.cu's `grove_gather_trees` /
/// `grove_gather_genomes` into a staging population, `grove_scatter_trees` /
/// `grove_scatter_genomes` over the receiver's rows, built as host C++; fitness and used
/// codons patched on the host.
struct EmuIslands<'a> {
    lib: &'a libloading::Library,
    isl: &'a mut [grove::evolve::islands::HostIsland],
    staging: Vec<(Population, grove::genome::Genomes)>,
}

type MoveTreesFn = unsafe extern "C" fn(u32, u32, *const u32, *mut u8, *mut f32, *mut u16, *mut u8, *mut u16, *mut u8, *mut f32, *mut u16, *mut u8, *mut u16);
type MoveGenomesFn = unsafe extern "C" fn(u32, u32, *const u32, *const u32, *const u32, *mut u32, *mut u32);

impl EmuIslands<'_> {
    /// Runs `f` as `n` blocks of one thread.
    fn launch(&self, n: usize, mut f: impl FnMut()) {
        type SetThreadFn = unsafe extern "C" fn(u32, u32, u32);
        let set: SetThreadFn = emulator::get(self.lib, "grove_emu_set_thread");
        for b in 0..n {
            // SAFETY: sets the emulated thread indices (thread-local in the library).
            unsafe { set(b as u32, 1, 0) };
            f();
        }
    }
    fn trees(&self, name: &str, idx: &[u32], a: &mut Population, b: &mut Population) {
        let f: MoveTreesFn = emulator::get(self.lib, name);
        let l = a.max_len as u32;
        let (pa, pb) = (
            (a.op.as_mut_ptr(), a.value.as_mut_ptr(), a.size.as_mut_ptr(), a.out.as_mut_ptr(), a.len.as_mut_ptr()),
            (b.op.as_mut_ptr(), b.value.as_mut_ptr(), b.size.as_mut_ptr(), b.out.as_mut_ptr(), b.len.as_mut_ptr()),
        );
        self.launch(idx.len(), || {
            // SAFETY: as CudaEngine::gather_trees / scatter_trees launch them: idx entries below
            // the indexed population's rows, the other has idx.len() rows, both of stride L.
            unsafe { f(idx.len() as u32, l, idx.as_ptr(), pa.0, pa.1, pa.2, pa.3, pa.4, pb.0, pb.1, pb.2, pb.3, pb.4) }
        });
    }
    fn genomes(&self, name: &str, idx: &[u32], a: &grove::genome::Genomes, b: &mut grove::genome::Genomes) {
        let f: MoveGenomesFn = emulator::get(self.lib, name);
        let (bc, bl) = (b.codons.as_mut_ptr(), b.len.as_mut_ptr());
        self.launch(idx.len(), || {
            // SAFETY: as CudaEngine::gather_genomes / scatter_genomes launch them.
            unsafe { f(idx.len() as u32, a.capacity as u32, idx.as_ptr(), a.codons.as_ptr(), a.len.as_ptr(), bc, bl) }
        });
    }
}

impl grove::evolve::islands::Transport for EmuIslands<'_> {
    type Rows = Vec<usize>;
    type Packet = (usize, Vec<f64>, Vec<u32>);
    fn islands(&self) -> usize {
        self.isl.len()
    }
    fn choose(&mut self, i: usize, k: usize) -> anyhow::Result<(Vec<usize>, Vec<usize>)> {
        let fit = &self.isl[i].fit;
        Ok((grove::select::elite(fit, k), grove::evolve::islands::worst(fit, k)))
    }
    fn send(&mut self, i: usize, rows: &Vec<usize>) -> anyhow::Result<Self::Packet> {
        let idx: Vec<u32> = rows.iter().map(|&r| r as u32).collect();
        let mut st = std::mem::replace(&mut self.staging[i], (Population::new(0, 1, 0), grove::genome::Genomes::new(0, 1)));
        let mut pop = self.isl[i].pop.clone();
        self.trees(grove::backend::cuda::kernels::GATHER_TREES, &idx, &mut pop, &mut st.0);
        let g = self.isl[i].genomes.clone().unwrap();
        self.genomes(grove::backend::cuda::kernels::GATHER_GENOMES, &idx, &g, &mut st.1);
        self.staging[i] = st;
        Ok((i, rows.iter().map(|&r| self.isl[i].fit[r]).collect(), rows.iter().map(|&r| self.isl[i].used[r]).collect()))
    }
    fn receive(&mut self, j: usize, rows: &Vec<usize>, (from, fit, used): Self::Packet) -> anyhow::Result<()> {
        let idx: Vec<u32> = rows.iter().map(|&r| r as u32).collect();
        let mut st = self.staging[from].clone();
        let mut pop = std::mem::replace(&mut self.isl[j].pop, Population::new(0, 1, 0));
        // grove_scatter_trees(n, L, idx, src = staging, dst = the island).
        self.trees(grove::backend::cuda::kernels::SCATTER_TREES, &idx, &mut st.0, &mut pop);
        let mut g = self.isl[j].genomes.take().unwrap();
        self.genomes(grove::backend::cuda::kernels::SCATTER_GENOMES, &idx, &st.1, &mut g);
        let isl = &mut self.isl[j];
        (isl.pop, isl.genomes) = (pop, Some(g));
        for (k, &r) in rows.iter().enumerate() {
            isl.fit[r] = fit[k];
            isl.used[r] = used[k];
        }
        Ok(())
    }
}

/// The migration kernels, run as host C++, move exactly what the host islands move: trees,
/// genomes, fitness and used codons, for several island counts and migrant numbers (up to a
/// whole island).
#[test]
fn emulated_migration_matches_host_islands() {
    use grove::evolve::islands::{HostIsland, HostIslands, migrate};
    use grove::program::{Op, TreeSpec, init_population};
    let Some(lib) = emulator::build(&grove::backend::cuda::kernels::VARY, |s| s) else {
        return eprintln!("SKIPPED emulated_migration_matches_host_islands: no g++");
    };
    for (n, p, k, seed) in [(2usize, 30usize, 5usize, 1u64), (3, 17, 17, 2), (5, 40, 1, 3), (4, 25, 12, 4)] {
        let spec = TreeSpec::new(vec![Op::Add, Op::Mul, Op::Sin], 2, 48).with_depth(1, 5);
        let islands: Vec<HostIsland> = (0..n)
            .map(|i| {
                let s = seed * 100 + i as u64;
                let pop = init_population(&spec, p, s).unwrap();
                let mut rng = grove::rng::Stream::new(s, 0, 0, grove::rng::Purpose::Bench);
                // Ties and invalid ones included.
                let fit = (0..p).map(|_| match rng.below(10) { 0 => f64::INFINITY, 1 => f64::NAN, v => (v % 4) as f64 + rng.below(3) as f64 * 0.5 }).collect();
                let mut g = grove::genome::Genomes::new(p, 12);
                for r in 0..p {
                    let len = rng.below(13) as usize;
                    g.set(r, &(0..len).map(|_| rng.below(1000)).collect::<Vec<_>>());
                }
                let used = (0..p).map(|_| rng.below(12)).collect();
                HostIsland { seed: s, pop, fit, genomes: Some(g), used }
            })
            .collect();
        let mut host = islands.clone();
        let plan = migrate(&mut HostIslands(&mut host), k).unwrap();
        let mut emu = islands.clone();
        let staging = (0..n).map(|_| (Population::new(k, 48, 0), grove::genome::Genomes::new(k, 12))).collect();
        let plan2 = migrate(&mut EmuIslands { lib: &lib, isl: &mut emu, staging }, k).unwrap();
        assert_eq!(plan, plan2);
        for (i, (a, b)) in host.iter().zip(&emu).enumerate() {
            let what = format!("{n} islands of {p}, {k} migrants: island {i}");
            assert_eq!(a.pop, b.pop, "{what}: trees");
            b.pop.validate().unwrap();
            let (ga, gb) = (a.genomes.as_ref().unwrap(), b.genomes.as_ref().unwrap());
            assert_eq!((&ga.codons, &ga.len), (&gb.codons, &gb.len), "{what}: genomes");
            assert_eq!(a.fit.iter().map(|f| f.to_bits()).collect::<Vec<_>>(), b.fit.iter().map(|f| f.to_bits()).collect::<Vec<_>>(), "{what}: fitness");
            assert_eq!(a.used, b.used, "{what}: used codons");
            assert_ne!(a.pop, islands[i].pop, "{what}: something moved");
        }
    }
}

/// Rows split over GPUs (`--shard-rows`): the device loop, each shard's GPU summing its rows
/// and the first adding the sums, equals the host loop adding the same shards' sums
/// (`ShardedRegression`) bit for bit: three shards on one GPU, and two GPUs where there are.
#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn sharded_rows_on_the_device_equal_host_shards() {
    use grove::task::regression::shard::{ShardedRegression, split_rows};
    let count = grove::backend::cuda::probe::driver().map(|d| d.devices as usize).unwrap_or(0);
    let problem = DataSource::parse("builtin:pagie1:4096").unwrap().load(None).unwrap();
    let train = &problem.train;
    let engines = gpu_engines(count.min(2));
    let cfg = EngineConfig { pop_size: 600, generations: 8, seed: 9, tournament: 3, elite: 2, max_len: 64, ..EngineConfig::default() };
    assert_eq!(cfg.constants.steps, 0, "shards fit no constants");
    let rep = TreeSettings::default().rep("add,sub,mul,div,sin,cos", train.n_features, cfg.max_len).unwrap();
    for layout in [vec![0usize, 0, 0], vec![0, 1]] {
        if layout.iter().any(|&g| g >= engines.len()) {
            eprintln!("skipped: shards on GPUs {layout:?} (the driver sees {count})");
            continue;
        }
        let parts = split_rows(train, layout.len()).unwrap();
        let tasks: Vec<Regression> = layout
            .iter()
            .zip(&parts)
            .map(|(&g, d)| {
                let b = &engines[g];
                Regression { backend: b, data: b.regression_data(&d.x, &d.y, d.n_rows, d.n_features).unwrap(), config: RegressionConfig::default(), outputs: 1, joint: None, rows: None, loss: None, fitness_fn: None }
            })
            .collect();
        let sharded = ShardedRegression::new(&tasks).unwrap();
        let d = grove::evolve::Fitness::device_task(&sharded).expect("every shard on a GPU gives the device loop");
        let single = IslandConfig::single();
        let mut fb = Fame::default();
        let b = host::run(&cfg, &single, Representation::Trees(&rep), &sharded, None, &mut fb).unwrap();
        // Over NCCL even shards on one GPU send their population, order and sums (to
        // themselves): the bytes, and so the bits, are the peer copies'.
        for link in links() {
            let mut fa = Fame::default();
            let (a, _) = device::run(&cfg, &IslandConfig { link, ..single.clone() }, Representation::Trees(&rep), &[d], None, &mut fa).unwrap();
            assert_same_runs(&format!("shards on GPUs {layout:?} over {link:?}"), &a, &b, &fa, &fb);
        }
        // Constant fitting is refused with shards.
        let fitting = EngineConfig { constants: grove::task::regression::FITTING, ..cfg.clone() };
        let err = device::run(&fitting, &single, Representation::Trees(&rep), &[d], None, &mut Fame::default()).err().unwrap().to_string();
        assert!(err.contains("--shard-rows"), "{err}");
    }
}

/// NCCL's sends move rows, fitness and genomes between every pair of the machine's GPUs (a GPU
/// to itself included) exactly as peer copies do; two engines on one GPU are not two ranks.
#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn nccl_moves_the_bytes_peer_copies_move() {
    use grove::backend::cuda::{Comms, Link};
    if !links().contains(&GpuLink::Nccl) {
        return;
    }
    let count = grove::backend::cuda::probe::driver().expect("GROVE_TEST_GPU=1 needs a usable GPU").devices as usize;
    let engines: Vec<CudaEngine> = (0..count.min(4)).map(|o| CudaEngine::with_options(EngineOptions { ordinal: o, ..EngineOptions::default() }).unwrap()).collect();
    let refs: Vec<&CudaEngine> = engines.iter().collect();
    let comms = Comms::new(&refs).unwrap();
    assert_eq!(comms.ordinals(), (0..engines.len()).collect::<Vec<_>>());
    let rep = TreeSettings::default().rep("add,sub,mul,div,sin,cos", 2, 64).unwrap();
    let pop = grove::program::init::init_population(&rep.vary.spec, 300, 5).unwrap();
    let fit: Vec<f64> = (0..300).map(|i| (i as f64).sin() * 1e3).collect();
    let mut genomes = grove::genome::Genomes::new(300, 40);
    for (i, c) in genomes.codons.iter_mut().enumerate() {
        *c = (i as u32).wrapping_mul(2_654_435_761);
    }
    genomes.len.iter_mut().enumerate().for_each(|(i, l)| *l = (i % 41) as u32);
    for (a, ea) in engines.iter().enumerate() {
        let (dp, df, dg) = (ea.upload_population(&pop).unwrap(), ea.upload_fitness(&fit).unwrap(), ea.upload_genomes(&genomes).unwrap());
        for (b, eb) in engines.iter().enumerate() {
            for link in [Link::Peer, Link::Nccl(&comms)] {
                let what = format!("GPU {a} to GPU {b} over {link:?}");
                let p = eb.copy_population_from(&dp, link).unwrap();
                let f = eb.copy_fitness_from(&df, link).unwrap();
                let g = eb.copy_genomes_from(&dg, link).unwrap();
                let back = eb.download_population(&p).unwrap();
                assert_eq!((&back.op, &back.size, &back.out, &back.len), (&pop.op, &pop.size, &pop.out, &pop.len), "{what}");
                assert!(back.value.iter().zip(&pop.value).all(|(x, y)| x.to_bits() == y.to_bits()), "{what}");
                let f: Vec<u64> = eb.download_fitness(&f).unwrap().iter().map(|v| v.to_bits()).collect();
                assert_eq!(f, fit.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), "{what}");
                let g = eb.download_genomes(&g).unwrap();
                assert_eq!((&g.codons, &g.len), (&genomes.codons, &genomes.len), "{what}");
            }
        }
    }
    // A second engine on GPU 0 is refused in one line.
    let again = CudaEngine::with_options(EngineOptions { ordinal: 0, ..EngineOptions::default() }).unwrap();
    let err = Comms::new(&[&engines[0], &again]).unwrap_err().to_string();
    assert!(err.contains("two engines on GPU 0") && !err.contains('\n'), "{err}");
}
