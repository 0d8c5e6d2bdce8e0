//! The CUDA backend inside evolution: the fitness of the same GE populations computed by the CPU
//! and the GPU backends agrees (validity identical, errors equal but for the order of the f64 sums), and a whole run
//! with `--device cuda` completes with the CPU's quality. Needs a GPU (`GROVE_TEST_GPU=1`).

#[path = "support/stop.rs"]
mod stop;
use stop::StopAt;

use grove::backend::{Backend, DeviceChoice, Gpus};
use grove::data::DataSource;
use grove::evolve::GrammarRep;
use grove::backend::cpu::breed::map_population;
use grove::genome::init::init_genomes;
use grove::genome::{InitConfig, MapConfig};
use grove::grammar::template::{Vars, compile};
use grove::grammar::{DatasetShape, load};
use grove::program::tree::Population;

#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn gpu_and_cpu_fitness_agree_on_ge_populations() {
    let problem = DataSource::parse("builtin:pagie1").unwrap().load(None).unwrap();
    let train = &problem.train;
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("grammars/regression.bnf");
    let l = load(&path, &DatasetShape { n_vars: Some(2), n_is: Some(2), n_os: Some(1) }).unwrap();
    let tpl = compile(&l.grammar, &l.table, &Vars { names: train.names.clone(), n_outputs: 0 }).unwrap();
    let rep = GrammarRep {
        table: &l.table,
        templates: &tpl,
        map: MapConfig::default(),
        init: InitConfig { max_depth: 10, ..InitConfig::default() },
        vary: Default::default(),
        genome_capacity: 512,
    };
    let cpu = Backend::Cpu;
    let gpu = Backend::open(DeviceChoice::Cuda, &Gpus::All).expect("GROVE_TEST_GPU=1 needs a usable GPU").backend;
    let cpu_data = cpu.regression_data(&train.x, &train.y, train.n_rows, train.n_features).unwrap();
    let gpu_data = gpu.regression_data(&train.x, &train.y, train.n_rows, train.n_features).unwrap();
    let (mut checked, mut bad) = (0usize, Vec::new());
    for seed in 1..=4u64 {
        let genomes = init_genomes(&l.table, &rep.init, rep.map.codons, 3000, 512, seed);
        let mut pop = Population::new(3000, 256, 0);
        map_population(&rep.grammar(), &genomes, &mut pop);
        let a = cpu.regression_sums(&pop, &cpu_data).unwrap();
        let b = gpu.regression_sums(&pop, &gpu_data).unwrap();
        for (i, (a, b)) in a.iter().zip(&b).enumerate() {
            if pop.len[i] == 0 {
                continue;
            }
            checked += 1;
            // Both backends compute every point's f32 result bit for bit (grove's own
            // transcendental functions, no fused multiply-add), so the sums differ only by the
            // order of their f64 additions, chaotic programs included.
            let (ea, eb) = (a.mse(), b.mse());
            let ok = a.finite == b.finite && (!a.finite || (ea - eb).abs() <= 1e-12 * ea.abs().max(1e-300));
            if !ok {
                let text = grove::program::render::render(&pop.tree(i).nodes(), &train.names, grove::program::render::Style::Infix);
                bad.push(format!("seed {seed} tree {i}: cpu finite={} mse={ea:e}, gpu finite={} mse={eb:e}: {text}", a.finite, b.finite));
            }
        }
    }
    eprintln!("{checked} programs compared, {} differ", bad.len());
    assert!(checked > 10_000, "only {checked} programs compared");
    assert!(bad.is_empty(), "{} of {checked} differ:\n{}", bad.len(), bad[..bad.len().min(10)].join("\n"));
}

/// Every population of a whole GE run, evaluated by both backends: the run is driven by the
/// CPU's fitness, and every individual's validity and error must agree with the GPU's.
///
/// (Two whole runs, one per device, still part ways after a few generations: programs whose
/// error is dominated by one enormous point (fitness ~1e70) tie to within the last bit of an
/// f64 sum, and which of two such programs wins a tournament then depends on the order of the
/// sum's additions, which differs between the backends.)
#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn every_population_of_a_run_gets_the_same_fitness_on_both() {
    use grove::task::regression::{Regression, RegressionConfig};
    let problem = DataSource::parse("builtin:pagie1").unwrap().load(None).unwrap();
    let train = &problem.train;
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("grammars/regression.bnf");
    let l = load(&path, &DatasetShape { n_vars: Some(2), n_is: Some(2), n_os: Some(1) }).unwrap();
    let tpl = compile(&l.grammar, &l.table, &Vars { names: train.names.clone(), n_outputs: 0 }).unwrap();
    let rep = GrammarRep {
        table: &l.table,
        templates: &tpl,
        map: MapConfig::default(),
        init: InitConfig::default(),
        vary: Default::default(),
        genome_capacity: 512,
    };
    let cpu = Backend::Cpu;
    let gpu = Backend::open(DeviceChoice::Cuda, &Gpus::All).expect("GROVE_TEST_GPU=1 needs a usable GPU").backend;
    let config = RegressionConfig { linear_scaling: false, ..Default::default() };
    let c = Regression { backend: &cpu, data: cpu.regression_data(&train.x, &train.y, train.n_rows, train.n_features).unwrap(), config, outputs: 1, joint: None, rows: None, loss: None, fitness_fn: None };
    let g = Regression { backend: &gpu, data: gpu.regression_data(&train.x, &train.y, train.n_rows, train.n_features).unwrap(), config, outputs: 1, joint: None, rows: None, loss: None, fitness_fn: None };
    let bad = std::sync::Mutex::new(Vec::<String>::new());
    let checked = std::sync::atomic::AtomicUsize::new(0);
    let both = |pop: &Population| -> Vec<f64> {
        use grove::evolve::Fitness;
        let (a, b) = (c.evaluate(pop).unwrap(), g.evaluate(pop).unwrap());
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            checked.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let same = (x.is_infinite() && y.is_infinite()) || (x - y).abs() <= 1e-12 * x.abs();
            if !same {
                let text = grove::program::render::render(&pop.tree(i).nodes(), &train.names, grove::program::render::Style::Infix);
                bad.lock().unwrap().push(format!("cpu {x:e} gpu {y:e}: {text} ({:?})", pop.tree(i).nodes()));
            }
        }
        a
    };
    let engine = grove::evolve::EngineConfig { pop_size: 1000, generations: 20, seed: 11, ..Default::default() };
    grove::evolve::run(&engine, &grove::evolve::IslandConfig::single(), grove::evolve::Representation::Grammar(&rep), &both, None, &mut |_: &grove::evolve::GenerationStats, _: &grove::evolve::Best| {}).unwrap();
    let bad = bad.into_inner().unwrap();
    eprintln!("{} fitness values compared, {} differ", checked.into_inner(), bad.len());
    assert!(bad.is_empty(), "{} differ:\n{}", bad.len(), bad[..bad.len().min(10)].join("\n"));
}

/// Constant fitting of `steps` steps every `every` generations on the best `fraction`.
fn fitting(steps: u32, every: usize, fraction: f64) -> grove::evolve::ConstantFitting {
    grove::evolve::ConstantFitting { steps, every, fraction }
}

/// An observer keeping a hall of fame and the median sizes, from whole populations (host loop)
/// or from per-size summaries (device loop).
#[derive(Default)]
struct Fame {
    hof: grove::evolve::hof::HallOfFame,
    medians: Vec<f64>,
}

impl grove::evolve::Observer for Fame {
    fn generation(&mut self, _: &grove::evolve::GenerationStats, _: &grove::evolve::Best) {}
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

/// The device loop (population, selection, breeding and elitism on the GPU) against the host
/// loop evaluating on the same GPU: the same programs, fitness and history, for tree GP on W1's
/// data with several settings (elites, tournament sizes, scaling, metrics, a multi-output-free
/// function set with unary and binary operators). Also: no population data copied to the host
/// between generations.
#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn the_device_loop_equals_the_host_loop() {
    use grove::evolve::{EngineConfig, device};
    use grove::task::regression::{Metric, Regression, RegressionConfig, TreeSettings};
    let problem = DataSource::parse("builtin:pagie1").unwrap().load(None).unwrap();
    let train = &problem.train;
    let gpu = Backend::open(DeviceChoice::Cuda, &Gpus::All).expect("GROVE_TEST_GPU=1 needs a usable GPU").backend;
    let cases = [
        (EngineConfig { pop_size: 2000, generations: 15, seed: 3, tournament: 3, elite: 1, max_len: 128, ..Default::default() }, RegressionConfig::default(), "add,sub,mul,div,sin,cos,tan"),
        (EngineConfig { pop_size: 777, generations: 12, seed: 9, tournament: 5, elite: 4, max_len: 256, ..Default::default() }, RegressionConfig { metric: Metric::Mse, linear_scaling: false, parsimony: 1e-4 }, "add,sub,mul,div,exp,log,sqrt"),
        (EngineConfig { pop_size: 1000, generations: 10, seed: 1, tournament: 2, elite: 0, max_len: 64, ..Default::default() }, RegressionConfig { metric: Metric::R2, linear_scaling: true, parsimony: 0.0 }, "add,mul,sin,tanh"),
        (EngineConfig { pop_size: 500, generations: 8, seed: 5, tournament: 4, elite: 2, max_len: 512, ..Default::default() }, RegressionConfig { metric: Metric::Mae, linear_scaling: false, parsimony: 0.0 }, "add,sub,mul,div,pow"),
        // Constants fitted on the device (kernels/fit.cu) and on the host loop's GPU task.
        (EngineConfig { pop_size: 1500, generations: 12, seed: 7, tournament: 3, elite: 2, max_len: 128, constants: fitting(5, 2, 0.05), ..Default::default() }, RegressionConfig::default(), "add,sub,mul,div,sin,exp"),
        (EngineConfig { pop_size: 800, generations: 9, seed: 8, tournament: 3, elite: 1, max_len: 64, constants: fitting(8, 1, 0.1), ..Default::default() }, RegressionConfig { metric: Metric::Rmse, linear_scaling: false, parsimony: 1e-4 }, "add,sub,mul,aq,tanh"),
    ];
    for (cfg, reg, functions) in cases {
        let data = gpu.regression_data(&train.x, &train.y, train.n_rows, train.n_features).unwrap();
        let task = Regression { backend: &gpu, data, config: reg, outputs: 1, joint: None, rows: None, loss: None, fitness_fn: None };
        let rep = TreeSettings::default().rep(functions, train.n_features, cfg.max_len).unwrap();
        let d = grove::evolve::Fitness::device_task(&task).expect("resident data gives the device loop");
        let (mut da, mut ho) = (Fame::default(), Fame::default());
        let (a, tr) = device::run(&cfg, &grove::evolve::IslandConfig::single(), grove::evolve::Representation::Trees(&rep), &[d], None, &mut da).unwrap();
        let b = grove::evolve::host::run(&cfg, &grove::evolve::IslandConfig::single(), grove::evolve::Representation::Trees(&rep), &task, None, &mut ho).unwrap();
        let what = format!("{functions} {cfg:?} {reg:?}");
        assert_eq!(da.hof, ho.hof, "{what}: hall of fame");
        assert_eq!(da.medians, ho.medians, "{what}: median sizes");
        assert!(da.hof.by_size.iter().flatten().count() > 5, "{what}: the hall of fame fills");
        assert_eq!(a.best, b.best, "{what}: best program");
        assert_eq!(a.population, b.population, "{what}: last population");
        assert_eq!(a.fitness.iter().map(|f| f.to_bits()).collect::<Vec<_>>(), b.fitness.iter().map(|f| f.to_bits()).collect::<Vec<_>>(), "{what}: last fitness");
        assert_eq!(a.history.len(), b.history.len());
        for (x, y) in a.history.iter().zip(&b.history) {
            assert_eq!((x.generation, x.best.to_bits(), x.invalid), (y.generation, y.best.to_bits(), y.invalid), "{what}");
            assert!(x.mean_size == y.mean_size || (x.mean_size.is_nan() && y.mean_size.is_nan()), "{what}: {x:?} {y:?}");
            assert!((x.mean - y.mean).abs() <= 1e-9 * y.mean.abs() || (x.mean.is_nan() && y.mean.is_nan()), "{what}: {x:?} {y:?}");
        }
        assert_eq!(tr.population_bytes_between_generations, 0);
        assert_eq!(tr.generations, cfg.generations + 1);
        assert_eq!(tr.mailbox_reads, cfg.generations + 2);
        assert!(tr.best_trees >= 1 && tr.best_trees <= cfg.generations + 1);
        eprintln!("{what}: best {:e} at generation {}, {} best-tree copies", a.best.fitness, a.best.generation, tr.best_trees);
    }
}

/// The device loop with linear terms of the inputs (the joint fit scored on the GPU from the
/// values the evaluation keeps, `grove_joint_sums` then `grove_joint_fitness`) against the host
/// loop evaluating the joint fit on the same GPU (`CudaEngine::evaluate_joint`, the fitness on
/// the host): the same programs, fitness and history, with each metric, parsimony and constant
/// fitting, and with lexicase and down-sampled lexicase on the terms' residual.
#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn the_device_loop_equals_the_host_loop_with_linear_terms() {
    use grove::evolve::{EngineConfig, device};
    use grove::task::regression::{Metric, Regression, RegressionConfig, TreeSettings, residual};
    let train = line_and_interaction(300, 4);
    let fitted = grove::program::linear::fit(&train.x, &train.y, train.n_rows, train.n_features).unwrap().unwrap();
    let joint = fitted.joint.clone().expect("the terms are fitted");
    let rest = residual(&train, &fitted.linear);
    let gpu = Backend::open(DeviceChoice::Cuda, &Gpus::All).expect("GROVE_TEST_GPU=1 needs a usable GPU").backend;
    let cases = [
        (EngineConfig { pop_size: 1500, generations: 12, seed: 3, tournament: 3, elite: 1, max_len: 128, ..Default::default() }, RegressionConfig::default(), "add,sub,mul,div,sin"),
        (EngineConfig { pop_size: 700, generations: 10, seed: 9, tournament: 4, elite: 2, max_len: 64, ..Default::default() }, RegressionConfig { metric: Metric::Mse, linear_scaling: false, parsimony: 1e-4 }, "add,sub,mul,aq"),
        (EngineConfig { pop_size: 1000, generations: 10, seed: 5, tournament: 3, elite: 2, max_len: 128, constants: fitting(5, 2, 0.05), ..Default::default() }, RegressionConfig { metric: Metric::Rmse, linear_scaling: true, parsimony: 0.0 }, "add,sub,mul,div,exp"),
    ];
    for (cfg, reg, functions) in cases {
        let data = gpu.regression_data(&rest.x, &rest.y, rest.n_rows, rest.n_features).unwrap();
        let task = Regression { backend: &gpu, data, config: reg, outputs: 1, joint: Some(&joint), rows: None, loss: None, fitness_fn: None };
        let rep = TreeSettings::default().rep(functions, rest.n_features, cfg.max_len).unwrap();
        let d = grove::evolve::Fitness::device_task(&task).expect("the joint fit runs in the device loop");
        assert!(device::supports_tasks(&cfg, &grove::evolve::IslandConfig::single(), &[d]));
        let (mut da, mut ho) = (Fame::default(), Fame::default());
        let (a, tr) = device::run(&cfg, &grove::evolve::IslandConfig::single(), grove::evolve::Representation::Trees(&rep), &[d], None, &mut da).unwrap();
        let b = grove::evolve::host::run(&cfg, &grove::evolve::IslandConfig::single(), grove::evolve::Representation::Trees(&rep), &task, None, &mut ho).unwrap();
        let what = format!("{functions} {cfg:?} {reg:?}");
        assert_eq!(da.hof, ho.hof, "{what}: hall of fame");
        assert_eq!(a.best, b.best, "{what}: best program");
        assert_eq!(a.population, b.population, "{what}: last population");
        assert_eq!(a.fitness.iter().map(|f| f.to_bits()).collect::<Vec<_>>(), b.fitness.iter().map(|f| f.to_bits()).collect::<Vec<_>>(), "{what}: last fitness");
        for (x, y) in a.history.iter().zip(&b.history) {
            assert_eq!((x.generation, x.best.to_bits(), x.invalid), (y.generation, y.best.to_bits(), y.invalid), "{what}");
        }
        assert!(a.best.fitness < 0.5, "{what}: the program adds to the terms ({:e})", a.best.fitness);
        assert_eq!(tr.population_bytes_between_generations, 0);
    }
    // Lexicase with the joint fit: the device loop reads its cases from the values it keeps for
    // the fit, each tree's error under its scaling on the terms' residual, as the host loop
    // takes them from the task's `case_errors`.
    use grove::select::Selection;
    let lexicase = [
        (EngineConfig { pop_size: 1200, generations: 8, seed: 4, elite: 1, max_len: 128, selection: Selection::Lexicase, ..Default::default() }, RegressionConfig::default()),
        (
            EngineConfig { pop_size: 2000, generations: 8, seed: 6, elite: 1, max_len: 64, selection: Selection::DownSampled, lexicase_pool: 128, constants: fitting(5, 2, 0.05), ..Default::default() },
            RegressionConfig { metric: Metric::Mse, linear_scaling: false, parsimony: 1e-4 },
        ),
    ];
    for (cfg, reg) in lexicase {
        let data = gpu.regression_data(&rest.x, &rest.y, rest.n_rows, rest.n_features).unwrap();
        let task = Regression { backend: &gpu, data, config: reg, outputs: 1, joint: Some(&joint), rows: Some(&rest), loss: None, fitness_fn: None };
        let rep = TreeSettings::default().rep("add,sub,mul,div,sin", rest.n_features, cfg.max_len).unwrap();
        let d = grove::evolve::Fitness::device_task(&task).expect("the joint fit runs in the device loop");
        assert!(device::supports_tasks(&cfg, &grove::evolve::IslandConfig::single(), &[d]), "lexicase with the joint fit");
        both_loops(&format!("lexicase with the joint fit {cfg:?} {reg:?}"), &cfg, grove::evolve::Representation::Trees(&rep), &task);
    }
}

/// [`Fame`], declining the last population (as a regression or classification run's observer).
#[derive(Default)]
struct NoPopulation(Fame);

impl grove::evolve::Observer for NoPopulation {
    fn generation(&mut self, _: &grove::evolve::GenerationStats, _: &grove::evolve::Best) {}
    fn evaluated_sizes(&mut self, generation: usize, winners: &[(f64, Vec<grove::program::tree::Node>)], counts: &[u32]) {
        grove::evolve::Observer::evaluated_sizes(&mut self.0, generation, winners, counts);
    }
    fn wants_population(&self) -> bool {
        false
    }
}

/// A device run whose observer declines the last population copies none back (its outcome's
/// population and fitness are empty) and is otherwise the same run.
#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn a_device_run_declining_the_last_population_copies_none_and_runs_the_same() {
    use grove::evolve::{EngineConfig, device};
    use grove::task::regression::{Regression, RegressionConfig, TreeSettings};
    let problem = DataSource::parse("builtin:pagie1").unwrap().load(None).unwrap();
    let train = &problem.train;
    let gpu = Backend::open(DeviceChoice::Cuda, &Gpus::All).expect("GROVE_TEST_GPU=1 needs a usable GPU").backend;
    let cfg = EngineConfig { pop_size: 1200, generations: 8, seed: 4, tournament: 3, elite: 1, max_len: 64, constants: fitting(5, 2, 0.1), ..Default::default() };
    let data = gpu.regression_data(&train.x, &train.y, train.n_rows, train.n_features).unwrap();
    let task = Regression { backend: &gpu, data, config: RegressionConfig::default(), outputs: 1, joint: None, rows: None, loss: None, fitness_fn: None };
    let rep = TreeSettings::default().rep("add,sub,mul,div,sin", train.n_features, cfg.max_len).unwrap();
    let d = grove::evolve::Fitness::device_task(&task).expect("resident data gives the device loop");
    let (mut kept, mut declined) = (Fame::default(), NoPopulation::default());
    let (a, ta) = device::run(&cfg, &grove::evolve::IslandConfig::single(), grove::evolve::Representation::Trees(&rep), &[d], None, &mut kept).unwrap();
    let (b, tb) = device::run(&cfg, &grove::evolve::IslandConfig::single(), grove::evolve::Representation::Trees(&rep), &[d], None, &mut declined).unwrap();
    assert_eq!((a.population.size(), a.fitness.len()), (cfg.pop_size, cfg.pop_size));
    assert_eq!((b.population.size(), b.fitness.len()), (0, 0));
    assert!(ta.final_population_bytes > 0);
    assert_eq!(tb.final_population_bytes, 0);
    assert_eq!(a.best, b.best);
    assert_eq!(kept.hof, declined.0.hof);
    assert_eq!(a.history.iter().map(|h| h.best.to_bits()).collect::<Vec<_>>(), b.history.iter().map(|h| h.best.to_bits()).collect::<Vec<_>>());
}

/// Classification: the device loop against the host loop on the same GPU, for each fitness
/// (accuracy, balanced accuracy, cross-entropy, balanced accuracy with the cross-entropy),
/// multi-output and binary programs.
#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn the_device_loop_equals_the_host_loop_for_classification() {
    use grove::data::classes::ClassSource;
    use grove::evolve::{EngineConfig, device, host};
    use grove::task::classify::{ClassFitness, Classification};
    use grove::task::base::search::ClassTreeSettings;
    let gpu = Backend::open(DeviceChoice::Cuda, &Gpus::All).expect("GROVE_TEST_GPU=1 needs a usable GPU").backend;
    let off = grove::evolve::ConstantFitting::default();
    for (data, fitness, binary, seed, constants, terms) in [
        ("builtin:wine", ClassFitness::CrossEntropy, false, 1u64, off, false),
        ("builtin:iris", ClassFitness::Accuracy, false, 2, off, false),
        ("builtin:digits", ClassFitness::BalancedAccuracy, false, 3, off, false),
        ("builtin:breast_cancer", ClassFitness::CrossEntropy, true, 4, off, false),
        // Balanced accuracy with the cross-entropy (generation.cu's metric 4).
        ("builtin:wine", ClassFitness::BalancedCe, false, 12, off, false),
        ("builtin:breast_cancer", ClassFitness::BalancedCe, true, 13, off, false),
        // Constants fitted on the device (grove_fit_class_constants) and on the host loop's GPU
        // task: multi-output programs, and the single output of two classes.
        ("builtin:wine", ClassFitness::CrossEntropy, false, 5, fitting(5, 2, 0.05), false),
        ("builtin:breast_cancer", ClassFitness::Accuracy, true, 6, fitting(4, 3, 0.1), false),
        ("builtin:digits", ClassFitness::CrossEntropy, false, 7, fitting(3, 4, 0.02), false),
        // Linear terms of the inputs under the outputs (offsets read by classify.cu).
        ("builtin:digits", ClassFitness::CrossEntropy, false, 8, off, true),
        ("builtin:breast_cancer", ClassFitness::CrossEntropy, true, 9, off, true),
        // Constants fitted with the terms' offsets under the outputs (fit.cu's offset pointer).
        ("builtin:wine", ClassFitness::CrossEntropy, false, 10, fitting(5, 2, 0.05), true),
        ("builtin:breast_cancer", ClassFitness::CrossEntropy, true, 11, fitting(4, 3, 0.1), true),
    ] {
        let all = ClassSource::parse(data).unwrap().load(None).unwrap();
        let k = all.n_classes();
        let n_out = if binary { 0 } else { k };
        let cfg = EngineConfig { pop_size: 1500, generations: 10, seed, tournament: 3, elite: 2, max_len: 64, constants, ..Default::default() };
        let offset = terms.then(|| {
            let f = grove::program::logistic::fit(&all.data.x, &all.labels, all.data.n_rows, all.data.n_features, k, binary).unwrap().unwrap();
            grove::program::logistic::offsets(&f.terms, &all.data.x, all.data.n_rows)
        });
        let data_dev = gpu.classification_data_with(&all.data.x, &all.labels, all.data.n_rows, k, offset.as_deref()).unwrap();
        let counts: Vec<u64> = all.class_counts().iter().map(|&c| c as u64).collect();
        let task = Classification { backend: &gpu, data: data_dev, counts, fitness, parsimony: 1e-5, head: None, rows: None };
        let rep = ClassTreeSettings::default().rep("add,sub,mul,div", all.data.n_features, n_out, cfg.max_len).unwrap();
        let d = grove::evolve::Fitness::device_task(&task).expect("resident data gives the device loop");
        let (a, tr) = device::run(&cfg, &grove::evolve::IslandConfig::single(), grove::evolve::Representation::Trees(&rep), &[d], None, &mut |_: &grove::evolve::GenerationStats, _: &grove::evolve::Best| {}).unwrap();
        let b = host::run(&cfg, &grove::evolve::IslandConfig::single(), grove::evolve::Representation::Trees(&rep), &task, None, &mut |_: &grove::evolve::GenerationStats, _: &grove::evolve::Best| {}).unwrap();
        let what = format!("{data} {fitness:?} binary={binary} fitting {} terms {terms}", constants.steps);
        assert_eq!(a.best, b.best, "{what}: best program");
        assert_eq!(a.population, b.population, "{what}: last population");
        assert_eq!(a.fitness.iter().map(|f| f.to_bits()).collect::<Vec<_>>(), b.fitness.iter().map(|f| f.to_bits()).collect::<Vec<_>>(), "{what}");
        for (x, y) in a.history.iter().zip(&b.history) {
            assert_eq!((x.best.to_bits(), x.invalid), (y.best.to_bits(), y.invalid), "{what}");
        }
        assert_eq!(tr.population_bytes_between_generations, 0);
        eprintln!("{what}: best fitness {:.4} at generation {}", a.best.fitness, a.best.generation);
    }
}

/// A GE representation over a loaded grammar.
fn ge<'a>(l: &'a grove::grammar::Loaded, tpl: &'a grove::grammar::template::Templates, map: MapConfig, init: InitConfig, vary: grove::genome::vary::GeVaryConfig) -> GrammarRep<'a> {
    GrammarRep { table: &l.table, templates: tpl, map, init, vary, genome_capacity: 256 }
}

/// The two loops' outcomes must be equal: best program and genome, last population and
/// fitness bits, history, hall of fame and median sizes.
fn assert_same_runs(what: &str, a: &grove::evolve::Outcome, b: &grove::evolve::Outcome, fa: &Fame, fb: &Fame) {
    assert_eq!(a.best, b.best, "{what}: best program (and genome)");
    assert_eq!(a.population, b.population, "{what}: last population");
    let bits = |f: &[f64]| f.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&a.fitness), bits(&b.fitness), "{what}: last fitness");
    assert_eq!(a.history.len(), b.history.len(), "{what}");
    for (x, y) in a.history.iter().zip(&b.history) {
        assert_eq!((x.generation, x.best.to_bits(), x.invalid), (y.generation, y.best.to_bits(), y.invalid), "{what}");
        assert!(x.mean_size == y.mean_size || (x.mean_size.is_nan() && y.mean_size.is_nan()), "{what}: {x:?} {y:?}");
        assert!((x.mean - y.mean).abs() <= 1e-9 * y.mean.abs() || (x.mean.is_nan() && y.mean.is_nan()), "{what}: {x:?} {y:?}");
    }
    assert_eq!(fa.hof, fb.hof, "{what}: hall of fame");
    assert_eq!(fa.medians, fb.medians, "{what}: median sizes");
}

/// Grammatical evolution: the device loop (genomes, mapping to trees, selection, crossover,
/// int-flip and elitism on the GPU) against the host loop evaluating on the same GPU, over 20+
/// generations, for three grammars with eager and lazy codons, wraps, random, sensible and PI
/// grow initialisation, several elites and metrics, one-point and subtree crossover, int-flip
/// at a fixed rate and at 1 / used codons (within the used codons and not), subtree mutation.
#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn the_device_ge_loop_equals_the_host_loop() {
    use grove::evolve::{EngineConfig, device, host};
    use grove::genome::{Codons, InitMethod};
    use grove::task::regression::{Metric, Regression, RegressionConfig};
    let problem = DataSource::parse("builtin:pagie1").unwrap().load(None).unwrap();
    let train = &problem.train;
    let gpu = Backend::open(DeviceChoice::Cuda, &Gpus::All).expect("GROVE_TEST_GPU=1 needs a usable GPU").backend;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let shape = DatasetShape { n_vars: Some(2), n_is: Some(2), n_os: Some(1) };
    let sensible = InitConfig { max_depth: 7, ..InitConfig::default() };
    let random = InitConfig { method: InitMethod::Random, length: 100, ..InitConfig::default() };
    // PI grow's genomes are made on the host and uploaded: the loops start from the same bits.
    let pi_grow = InitConfig { method: InitMethod::PiGrow, min_depth: 3, max_depth: 7, ..InitConfig::default() };
    let fixed = grove::genome::vary::GeVaryConfig { mutation: 0.05, ..Default::default() };
    // PonyGE2's rate: int-flip at 1 / used codons.
    let per_used = grove::genome::vary::GeVaryConfig { mutation_per_used: true, ..fixed };
    let subtree = grove::genome::vary::GeVaryConfig { crossover_op: grove::genome::vary::GeCrossover::Subtree, ..fixed };
    let cases = [
        ("regression.bnf", MapConfig { max_depth: 17, ..MapConfig::default() }, pi_grow, EngineConfig { pop_size: 1000, generations: 12, seed: 9, tournament: 3, elite: 1, max_len: 128, ..Default::default() }, RegressionConfig::default(), fixed),
        ("regression.bnf", MapConfig { max_depth: 17, ..MapConfig::default() }, sensible, EngineConfig { pop_size: 2000, generations: 20, seed: 3, tournament: 3, elite: 1, max_len: 128, ..Default::default() }, RegressionConfig::default(), fixed),
        ("ge-paper.bnf", MapConfig { max_wraps: 2, codons: Codons::Lazy, ..MapConfig::default() }, random, EngineConfig { pop_size: 1501, generations: 22, seed: 8, tournament: 4, elite: 3, max_len: 256, ..Default::default() }, RegressionConfig { metric: Metric::Mse, linear_scaling: false, parsimony: 1e-4 }, fixed),
        ("pagie1.bnf", MapConfig { max_wraps: 1, max_depth: 12, ..MapConfig::default() }, sensible, EngineConfig { pop_size: 1000, generations: 20, seed: 5, tournament: 2, elite: 0, max_len: 64, ..Default::default() }, RegressionConfig { metric: Metric::R2, linear_scaling: true, parsimony: 0.0 }, fixed),
        // Grammars' constants fitted (Baldwinian: the genomes keep their codons).
        ("regression.bnf", MapConfig { max_depth: 17, ..MapConfig::default() }, sensible, EngineConfig { pop_size: 1200, generations: 12, seed: 6, tournament: 3, elite: 2, max_len: 128, constants: fitting(5, 3, 0.05), ..Default::default() }, RegressionConfig::default(), fixed),
        ("regression.bnf", MapConfig { max_depth: 17, ..MapConfig::default() }, pi_grow, EngineConfig { pop_size: 1000, generations: 12, seed: 11, tournament: 3, elite: 1, max_len: 128, ..Default::default() }, RegressionConfig::default(), per_used),
        ("ge-paper.bnf", MapConfig { max_wraps: 2, codons: Codons::Lazy, ..MapConfig::default() }, random, EngineConfig { pop_size: 1001, generations: 15, seed: 12, tournament: 4, elite: 2, max_len: 256, ..Default::default() }, RegressionConfig::default(), grove::genome::vary::GeVaryConfig { within_used: false, ..per_used }),
        // Subtree crossover on the device (map.cu), with either int-flip rate.
        ("regression.bnf", MapConfig { max_depth: 17, ..MapConfig::default() }, pi_grow, EngineConfig { pop_size: 1000, generations: 15, seed: 13, tournament: 3, elite: 1, max_len: 128, ..Default::default() }, RegressionConfig::default(), subtree),
        ("pagie1.bnf", MapConfig { max_depth: 12, codons: Codons::Lazy, ..MapConfig::default() }, sensible, EngineConfig { pop_size: 1201, generations: 12, seed: 14, tournament: 2, elite: 2, max_len: 64, ..Default::default() }, RegressionConfig { metric: Metric::R2, linear_scaling: true, parsimony: 0.0 }, grove::genome::vary::GeVaryConfig { mutation_per_used: true, ..subtree }),
        // Subtree mutation on the device (map.cu), at PonyGE2's one event a child and below.
        ("regression.bnf", MapConfig { max_depth: 17, ..MapConfig::default() }, pi_grow, EngineConfig { pop_size: 1000, generations: 12, seed: 15, tournament: 3, elite: 1, max_len: 128, ..Default::default() }, RegressionConfig::default(), grove::genome::vary::GeVaryConfig { mutation: 1.0, mutation_op: grove::genome::vary::GeMutation::Subtree, ..subtree }),
        ("pagie1.bnf", MapConfig { max_depth: 12, codons: Codons::Lazy, ..MapConfig::default() }, sensible, EngineConfig { pop_size: 1201, generations: 12, seed: 16, tournament: 2, elite: 2, max_len: 64, ..Default::default() }, RegressionConfig { metric: Metric::R2, linear_scaling: true, parsimony: 0.0 }, grove::genome::vary::GeVaryConfig { mutation: 0.3, mutation_op: grove::genome::vary::GeMutation::Subtree, ..fixed }),
        // The command line's default operators (subtree crossover, int-flip at the larger of
        // 0.02 and 1 / used codons), with and without unique parents.
        ("regression.bnf", MapConfig { max_depth: 17, ..MapConfig::default() }, sensible, EngineConfig { pop_size: 1000, generations: 12, seed: 17, tournament: 3, elite: 1, max_len: 128, ..Default::default() }, RegressionConfig::default(), grove::task::base::defaults::GE.configs().vary),
        ("pagie1.bnf", MapConfig { max_depth: 12, ..MapConfig::default() }, pi_grow, EngineConfig { pop_size: 1000, generations: 12, seed: 18, tournament: 2, elite: 1, max_len: 64, diversity: grove::select::Diversity::Unique, ..Default::default() }, RegressionConfig { metric: Metric::Mse, linear_scaling: false, parsimony: 0.0 }, grove::task::base::defaults::GE.configs().vary),
    ];
    for (file, map, init, cfg, reg, vary) in cases {
        let l = load(&root.join("grammars").join(file), &shape).unwrap();
        let tpl = compile(&l.grammar, &l.table, &Vars { names: train.names.clone(), n_outputs: 0 }).unwrap();
        let rep = ge(&l, &tpl, map, init, vary);
        assert!(device::supports_grammar(&cfg, &rep), "{file}: {vary:?} runs on the device");
        let data = gpu.regression_data(&train.x, &train.y, train.n_rows, train.n_features).unwrap();
        let task = Regression { backend: &gpu, data, config: reg, outputs: 1, joint: None, rows: None, loss: None, fitness_fn: None };
        let d = grove::evolve::Fitness::device_task(&task).expect("resident data gives the device loop");
        let (mut fa, mut fb) = (Fame::default(), Fame::default());
        let (a, tr) = device::run(&cfg, &grove::evolve::IslandConfig::single(), grove::evolve::Representation::Grammar(&rep), &[d], None, &mut fa).unwrap();
        let b = host::run(&cfg, &grove::evolve::IslandConfig::single(), grove::evolve::Representation::Grammar(&rep), &task, None, &mut fb).unwrap();
        let what = format!("{file} {map:?} {cfg:?} {reg:?} {vary:?}");
        assert_same_runs(&what, &a, &b, &fa, &fb);
        assert!(a.best.genome.is_some(), "{what}: GE keeps the best genome");
        assert!(fa.hof.by_size.iter().flatten().count() > 3, "{what}: the hall of fame fills");
        assert_eq!(tr.population_bytes_between_generations, 0);
        assert_eq!(tr.generations, cfg.generations + 1);
        eprintln!("{what}: best {:e} at generation {}, {} best copies", a.best.fitness, a.best.generation, tr.best_trees);
    }
}

/// GE classification with `out(K, …)` grammars: device loop against host loop.
#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn the_device_ge_loop_equals_the_host_loop_for_classification() {
    use grove::data::classes::ClassSource;
    use grove::evolve::{EngineConfig, device, host};
    use grove::task::classify::{ClassFitness, Classification};
    let gpu = Backend::open(DeviceChoice::Cuda, &Gpus::All).expect("GROVE_TEST_GPU=1 needs a usable GPU").backend;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    // A third grammar, inline: two classes, nested outputs, read with lazy codons and wraps.
    let binary = "<p> ::= out(0, <e>) + out(1, <e>) | out(<k>, out(<k>, <e>))\n<e> ::= <e>+<e> | <e>*<e> | pdiv(<e>,<e>) | out(<k>, <e>) | x[:, <i>] | <c>\n<k> ::= GE_RANGE:dataset_n_os\n<i> ::= GE_RANGE:dataset_n_vars\n<c> ::= -1 | 0.5 | 2";
    for (data, file, fitness, seed, map, constants) in [
        ("builtin:iris", "classify.bnf", ClassFitness::CrossEntropy, 1u64, MapConfig { max_depth: 12, ..MapConfig::default() }, grove::evolve::ConstantFitting::default()),
        // The grammar's constants fitted (Baldwinian: the genomes keep their codons).
        ("builtin:wine", "classify-3class.bnf", ClassFitness::CrossEntropy, 5, MapConfig { max_depth: 12, ..MapConfig::default() }, fitting(4, 2, 0.05)),
        ("builtin:wine", "classify-3class.bnf", ClassFitness::Accuracy, 2, MapConfig { max_depth: 12, ..MapConfig::default() }, grove::evolve::ConstantFitting::default()),
        ("builtin:breast_cancer", "classify.bnf", ClassFitness::BalancedAccuracy, 3, MapConfig { max_depth: 12, ..MapConfig::default() }, grove::evolve::ConstantFitting::default()),
        ("builtin:breast_cancer", "inline", ClassFitness::CrossEntropy, 4, MapConfig { max_wraps: 1, codons: grove::genome::Codons::Lazy, max_depth: 14, ..MapConfig::default() }, grove::evolve::ConstantFitting::default()),
    ] {
        let all = ClassSource::parse(data).unwrap().load(None).unwrap();
        let k = all.n_classes();
        let shape = DatasetShape { n_vars: Some(all.data.n_features as u32), n_is: Some(all.data.n_features as u32), n_os: Some(k as u32) };
        let l = if file == "inline" {
            grove::grammar::load_parsed(grove::grammar::parse_str(binary, "binary.bnf", false).unwrap(), &shape).unwrap()
        } else {
            load(&root.join("grammars").join(file), &shape).unwrap()
        };
        let tpl = compile(&l.grammar, &l.table, &Vars { names: all.data.names.clone(), n_outputs: k }).unwrap();
        let rep = ge(&l, &tpl, map, InitConfig { max_depth: 6, ..InitConfig::default() }, Default::default());
        let cfg = EngineConfig { pop_size: 1200, generations: 20, seed, tournament: 3, elite: 2, max_len: 96, constants, ..Default::default() };
        let data_dev = gpu.classification_data(&all.data.x, &all.labels, all.data.n_rows, k).unwrap();
        let counts: Vec<u64> = all.class_counts().iter().map(|&c| c as u64).collect();
        let task = Classification { backend: &gpu, data: data_dev, counts, fitness, parsimony: 1e-5, head: None, rows: None };
        let d = grove::evolve::Fitness::device_task(&task).expect("resident data gives the device loop");
        let (mut fa, mut fb) = (Fame::default(), Fame::default());
        let (a, tr) = device::run(&cfg, &grove::evolve::IslandConfig::single(), grove::evolve::Representation::Grammar(&rep), &[d], None, &mut fa).unwrap();
        let b = host::run(&cfg, &grove::evolve::IslandConfig::single(), grove::evolve::Representation::Grammar(&rep), &task, None, &mut fb).unwrap();
        let what = format!("{data} {file} {fitness:?} fitting {}", constants.steps);
        assert_same_runs(&what, &a, &b, &fa, &fb);
        assert_eq!(tr.population_bytes_between_generations, 0);
        eprintln!("{what}: best fitness {:.4} at generation {}", a.best.fitness, a.best.generation);
    }
}

/// A device GE run stopped after a snapshot and resumed from it (through the checkpoint's
/// JSON) ends exactly as an uninterrupted one.
#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn a_resumed_device_ge_run_matches_an_uninterrupted_one() {
    use grove::evolve::{EngineConfig, checkpoint, device};
    use grove::task::regression::Regression;
    let problem = DataSource::parse("builtin:pagie1").unwrap().load(None).unwrap();
    let train = &problem.train;
    let gpu = Backend::open(DeviceChoice::Cuda, &Gpus::All).expect("GROVE_TEST_GPU=1 needs a usable GPU").backend;
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("grammars/regression.bnf");
    let l = load(&path, &DatasetShape { n_vars: Some(2), n_is: Some(2), n_os: Some(1) }).unwrap();
    let tpl = compile(&l.grammar, &l.table, &Vars { names: train.names.clone(), n_outputs: 0 }).unwrap();
    let rep = ge(&l, &tpl, MapConfig { max_depth: 17, ..MapConfig::default() }, InitConfig::default(), Default::default());
    let cfg = EngineConfig { pop_size: 1000, generations: 12, seed: 21, tournament: 3, elite: 1, max_len: 128, ..Default::default() };
    let data = gpu.regression_data(&train.x, &train.y, train.n_rows, train.n_features).unwrap();
    let task = Regression { backend: &gpu, data, config: Default::default(), outputs: 1, joint: None, rows: None, loss: None, fitness_fn: None };
    let d = grove::evolve::Fitness::device_task(&task).unwrap();
    let (whole, _) = device::run(&cfg, &grove::evolve::IslandConfig::single(), grove::evolve::Representation::Grammar(&rep), &[d], None, &mut |_: &grove::evolve::GenerationStats, _: &grove::evolve::Best| {}).unwrap();
    let mut stop = StopAt(5, 0, None);
    let err = device::run(&cfg, &grove::evolve::IslandConfig::single(), grove::evolve::Representation::Grammar(&rep), &[d], None, &mut stop).unwrap_err();
    assert!(err.downcast_ref::<grove::evolve::Interrupted>().is_some(), "{err:#}");
    let text = serde_json::to_string(&stop.2.expect("a snapshot before the stop")).unwrap();
    let saved: checkpoint::Saved = serde_json::from_str(&text).unwrap();
    let (resumed, tr) = device::run(&cfg, &grove::evolve::IslandConfig::single(), grove::evolve::Representation::Grammar(&rep), &[d], Some(saved.resume().unwrap()), &mut |_: &grove::evolve::GenerationStats, _: &grove::evolve::Best| {}).unwrap();
    assert_eq!(resumed.best, whole.best);
    assert_eq!(resumed.population, whole.population);
    assert_eq!(resumed.fitness.iter().map(|f| f.to_bits()).collect::<Vec<_>>(), whole.fitness.iter().map(|f| f.to_bits()).collect::<Vec<_>>());
    assert_eq!(tr.population_bytes_between_generations, 0);
}

/// Ends the run after generation `.0` (as a budget does), keeping the snapshot offered (`.1`).
struct FinishAt(usize, Option<grove::evolve::checkpoint::Saved>);

impl grove::evolve::Observer for FinishAt {
    fn generation(&mut self, _: &grove::evolve::GenerationStats, _: &grove::evolve::Best) {}
    fn snapshot(&mut self, state: &grove::evolve::Snapshot<'_>) -> anyhow::Result<()> {
        self.1 = Some(grove::evolve::checkpoint::Saved::of(state));
        Ok(())
    }
    fn finish(&mut self, generation: usize, _: &grove::evolve::Best) -> bool {
        generation == self.0
    }
}

/// A device run ended early (a time limit, a target) returns what a shorter device run and the
/// host loop's early end return, and its snapshot continues to the uninterrupted run's end: tree
/// GP with constants fitted, and GE.
#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn a_device_run_ended_early_equals_a_shorter_one_and_continues() {
    use grove::evolve::{EngineConfig, IslandConfig, Representation, checkpoint, device, host};
    use grove::task::regression::{Regression, TreeSettings};
    let problem = DataSource::parse("builtin:pagie1").unwrap().load(None).unwrap();
    let train = &problem.train;
    let gpu = Backend::open(DeviceChoice::Cuda, &Gpus::All).expect("GROVE_TEST_GPU=1 needs a usable GPU").backend;
    let data = gpu.regression_data(&train.x, &train.y, train.n_rows, train.n_features).unwrap();
    let task = Regression { backend: &gpu, data, config: Default::default(), outputs: 1, joint: None, rows: None, loss: None, fitness_fn: None };
    let d = grove::evolve::Fitness::device_task(&task).unwrap();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("grammars/regression.bnf");
    let l = load(&path, &DatasetShape { n_vars: Some(2), n_is: Some(2), n_os: Some(1) }).unwrap();
    let tpl = compile(&l.grammar, &l.table, &Vars { names: train.names.clone(), n_outputs: 0 }).unwrap();
    let ge_rep = ge(&l, &tpl, MapConfig { max_depth: 17, ..MapConfig::default() }, InitConfig::default(), Default::default());
    let cfg = EngineConfig { pop_size: 1000, generations: 12, seed: 21, tournament: 3, elite: 1, max_len: 128, constants: fitting(5, 2, 0.05), ..Default::default() };
    let trees = TreeSettings::default().rep("add,sub,mul,div,sin", train.n_features, cfg.max_len).unwrap();
    let quiet = |_: &grove::evolve::GenerationStats, _: &grove::evolve::Best| {};
    for (what, rep) in [("trees", Representation::Trees(&trees)), ("GE", Representation::Grammar(&ge_rep))] {
        let one = IslandConfig::single();
        let (whole, _) = device::run(&cfg, &one, rep, &[d], None, &mut { quiet }).unwrap();
        let short_cfg = EngineConfig { generations: 5, ..cfg.clone() };
        let (short, _) = device::run(&short_cfg, &one, rep, &[d], None, &mut { quiet }).unwrap();
        let mut obs = FinishAt(5, None);
        let (ended, _) = device::run(&cfg, &one, rep, &[d], None, &mut obs).unwrap();
        let mut host_obs = FinishAt(5, None);
        let on_host = host::run(&cfg, &one, rep, &task, None, &mut host_obs).unwrap();
        let bits = |f: &[f64]| f.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        for (name, o) in [("shorter device run", &short), ("host loop ended early", &on_host)] {
            assert_eq!(ended.best, o.best, "{what}: {name}: best");
            assert_eq!(ended.population, o.population, "{what}: {name}: population");
            assert_eq!(bits(&ended.fitness), bits(&o.fitness), "{what}: {name}: fitness");
            assert_eq!(ended.history.len(), 6, "{what}");
        }
        let saved = obs.1.expect("an early end offers its snapshot");
        // The same next generation as the host loop's (the statistics' timings and f64 means
        // are the loops' own).
        let (r, h) = (saved.resume().unwrap(), host_obs.1.as_ref().unwrap().resume().unwrap());
        assert_eq!((r.generation, &r.population, &r.genomes, &r.best), (h.generation, &h.population, &h.genomes, &h.best), "{what}: the snapshots");
        let saved: checkpoint::Saved = serde_json::from_str(&serde_json::to_string(&saved).unwrap()).unwrap();
        let (resumed, _) = device::run(&cfg, &one, rep, &[d], Some(saved.resume().unwrap()), &mut { quiet }).unwrap();
        assert_eq!(resumed.best, whole.best, "{what}: resumed best");
        assert_eq!(resumed.population, whole.population, "{what}: resumed population");
    }
}

/// Control: the device loop (roll-outs, fitness, selection and variation on the GPU) against
/// the host loop playing the same roll-outs on the same GPU, for tree GP and GE policies on two
/// robots; the same programs, fitness bits, history and env steps. Two of them read their
/// observations through a normaliser learnt as they go (`--normalise`), which must end equal too.
#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn the_device_loop_equals_the_host_loop_for_control() {
    use grove::evolve::{EngineConfig, device, host};
    use grove::backend::cpu::control::{ControlRun, actuator_names, observation_names};
    use grove::task::base::search::ClassTreeSettings;
    use grove::task::control::Control;
    let gpu = Backend::open(DeviceChoice::Cuda, &Gpus::All).expect("GROVE_TEST_GPU=1 needs a usable GPU").backend;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let lazy = MapConfig { max_wraps: 1, codons: grove::genome::Codons::Lazy, max_depth: 10, ..MapConfig::default() };
    let eager = MapConfig { max_depth: 10, ..MapConfig::default() };
    for (env, grammar, seed, map, normalise) in [
        ("swimmer", Some("swimmer.bnf"), 1u64, eager, true),
        ("hopper", Some("hopper.bnf"), 2, eager, false),
        ("swimmer", Some("control.bnf"), 5, lazy, false),
        ("swimmer", None, 3, eager, false),
        ("hopper", None, 4, eager, true),
    ] {
        let m = grove::sim::Model::load(env, None).unwrap();
        let (nu, n_obs) = (m.nu(), m.obs_size);
        let run = ControlRun { episodes: 2, steps: 150, seed, generation: 0, noise: true, ignore_termination: false };
        let cfg = EngineConfig { pop_size: 400, generations: 8, seed, tournament: 3, elite: 2, max_len: 128, ..Default::default() };
        // Hopper plays fresh starts every generation (the generation reaches the roll-out).
        let fresh = env == "hopper";
        let learnt = || std::sync::Mutex::new(grove::sim::stats::Learnt::new(n_obs));
        let (host_inputs, dev_inputs) = (learnt(), learnt());
        let host = Control { backend: &gpu, model: &m, run, fresh, parsimony: 1e-3, played: std::sync::Mutex::new((0, 0.0)), episodes: Default::default(), residual: None, learnt: normalise.then_some(&host_inputs) };
        let dev = Control { backend: &gpu, model: &m, run, fresh, parsimony: 1e-3, played: std::sync::Mutex::new((0, 0.0)), episodes: Default::default(), residual: None, learnt: normalise.then_some(&dev_inputs) };
        let d = grove::evolve::Fitness::device_task(&dev).expect("a CUDA backend gives the device loop");
        let (mut fa, mut fb) = (Fame::default(), Fame::default());
        let shape = DatasetShape { n_vars: Some(n_obs as u32), n_is: Some(n_obs as u32), n_os: Some(nu as u32) };
        let (a, b) = match grammar {
            Some(file) => {
                let l = load(&root.join("grammars").join(file), &shape).unwrap();
                let tpl = compile(&l.grammar, &l.table, &Vars { names: observation_names(&m), n_outputs: nu }).unwrap();
                let rep = ge(&l, &tpl, map, InitConfig { max_depth: 6, ..InitConfig::default() }, Default::default());
                let (a, _) = device::run(&cfg, &grove::evolve::IslandConfig::single(), grove::evolve::Representation::Grammar(&rep), &[d], None, &mut fa).unwrap();
                (a, host::run(&cfg, &grove::evolve::IslandConfig::single(), grove::evolve::Representation::Grammar(&rep), &host, None, &mut fb).unwrap())
            }
            None => {
                let rep = ClassTreeSettings { constants: vec![-1.0, 0.5, 2.0], p_out: 0.1, ..Default::default() }.rep("add,sub,mul,div,tanh", n_obs, nu, cfg.max_len).unwrap();
                let (a, _) = device::run(&cfg, &grove::evolve::IslandConfig::single(), grove::evolve::Representation::Trees(&rep), &[d], None, &mut fa).unwrap();
                (a, host::run(&cfg, &grove::evolve::IslandConfig::single(), grove::evolve::Representation::Trees(&rep), &host, None, &mut fb).unwrap())
            }
        };
        let what = format!("{env} {} ({} actuators){}", grammar.unwrap_or("tree GP"), actuator_names(&m).len(), if normalise { ", normalised" } else { "" });
        assert_same_runs(&what, &a, &b, &fa, &fb);
        let (li, ld) = (host_inputs.lock().unwrap().state(), dev_inputs.lock().unwrap().state());
        assert_eq!(ld, li, "{what}: the normalisers learnt");
        assert_eq!(li.seen > 0, normalise, "{what}: states learnt from");
        assert!(a.best.fitness.is_finite(), "{what}: a valid policy");
        let (sa, sb) = (dev.played.lock().unwrap().0, host.played.lock().unwrap().0);
        assert_eq!(sa, sb, "{what}: env steps played");
        eprintln!("{what}: best return {:.2} at generation {}, {sa} env steps", -a.best.fitness, a.best.generation);
    }
}

/// Control in the device loop, stopped after a snapshot and resumed from it (through the
/// checkpoint's JSON), ends exactly as an uninterrupted run: tree GP on Hopper (falls end
/// episodes, fresh starts every generation) and GE on Swimmer.
#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn a_resumed_device_control_run_matches_an_uninterrupted_one() {
    use grove::evolve::{EngineConfig, checkpoint, device};
    use grove::backend::cpu::control::{ControlRun, observation_names};
    use grove::task::base::search::ClassTreeSettings;
    use grove::task::control::Control;
    let gpu = Backend::open(DeviceChoice::Cuda, &Gpus::All).expect("GROVE_TEST_GPU=1 needs a usable GPU").backend;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let quiet = &mut |_: &grove::evolve::GenerationStats, _: &grove::evolve::Best| {};
    for (env, grammar, seed) in [("hopper", None, 31u64), ("swimmer", Some("swimmer.bnf"), 32)] {
        let m = grove::sim::Model::load(env, None).unwrap();
        let (nu, n_obs) = (m.nu(), m.obs_size);
        let run = ControlRun { episodes: 2, steps: 120, seed, generation: 0, noise: true, ignore_termination: false };
        let cfg = EngineConfig { pop_size: 300, generations: 9, seed, tournament: 3, elite: 2, max_len: 96, ..Default::default() };
        let task = Control { backend: &gpu, model: &m, run, fresh: env == "hopper", parsimony: 1e-3, played: std::sync::Mutex::new((0, 0.0)), episodes: Default::default(), residual: None, learnt: None };
        let d = grove::evolve::Fitness::device_task(&task).expect("a CUDA backend gives the device loop");
        let mut stop = StopAt(4, 0, None);
        let (whole, interrupted, resumed) = match grammar {
            Some(file) => {
                let shape = DatasetShape { n_vars: Some(n_obs as u32), n_is: Some(n_obs as u32), n_os: Some(nu as u32) };
                let l = load(&root.join("grammars").join(file), &shape).unwrap();
                let tpl = compile(&l.grammar, &l.table, &Vars { names: observation_names(&m), n_outputs: nu }).unwrap();
                let rep = ge(&l, &tpl, MapConfig { max_depth: 10, ..MapConfig::default() }, InitConfig { max_depth: 6, ..InitConfig::default() }, Default::default());
                let (whole, _) = device::run(&cfg, &grove::evolve::IslandConfig::single(), grove::evolve::Representation::Grammar(&rep), &[d], None, quiet).unwrap();
                let err = device::run(&cfg, &grove::evolve::IslandConfig::single(), grove::evolve::Representation::Grammar(&rep), &[d], None, &mut stop).unwrap_err();
                let saved: checkpoint::Saved = serde_json::from_str(&serde_json::to_string(stop.2.as_ref().expect("a snapshot before the stop")).unwrap()).unwrap();
                let (resumed, _) = device::run(&cfg, &grove::evolve::IslandConfig::single(), grove::evolve::Representation::Grammar(&rep), &[d], Some(saved.resume().unwrap()), quiet).unwrap();
                (whole, err, resumed)
            }
            None => {
                let rep = ClassTreeSettings { constants: vec![-1.0, 0.5, 2.0], p_out: 0.1, ..Default::default() }.rep("add,sub,mul,div,tanh", n_obs, nu, cfg.max_len).unwrap();
                let (whole, _) = device::run(&cfg, &grove::evolve::IslandConfig::single(), grove::evolve::Representation::Trees(&rep), &[d], None, quiet).unwrap();
                let err = device::run(&cfg, &grove::evolve::IslandConfig::single(), grove::evolve::Representation::Trees(&rep), &[d], None, &mut stop).unwrap_err();
                let saved: checkpoint::Saved = serde_json::from_str(&serde_json::to_string(stop.2.as_ref().expect("a snapshot before the stop")).unwrap()).unwrap();
                let (resumed, _) = device::run(&cfg, &grove::evolve::IslandConfig::single(), grove::evolve::Representation::Trees(&rep), &[d], Some(saved.resume().unwrap()), quiet).unwrap();
                (whole, err, resumed)
            }
        };
        let what = format!("{env} {}", grammar.unwrap_or("tree GP"));
        assert!(interrupted.downcast_ref::<grove::evolve::Interrupted>().is_some(), "{what}: {interrupted:#}");
        assert_eq!(resumed.best, whole.best, "{what}: best");
        assert_eq!(resumed.population, whole.population, "{what}: last population");
        assert_eq!(resumed.fitness.iter().map(|f| f.to_bits()).collect::<Vec<_>>(), whole.fitness.iter().map(|f| f.to_bits()).collect::<Vec<_>>(), "{what}: fitness");
        assert_eq!(resumed.history.len(), whole.history.len(), "{what}: history");
        for (x, y) in resumed.history.iter().zip(&whole.history) {
            assert_eq!(x.best.to_bits(), y.best.to_bits(), "{what}: generation {}", x.generation);
        }
        eprintln!("{what}: best return {:.2}, resumed after generation 3", -whole.best.fitness);
    }
}

/// y = 2 + 3·x0 − x1 + x0·x2 over `n` rows of inputs in [−2, 2] with a little noise, drawn from
/// stream `seed`: a line plus what a line cannot say.
fn line_and_interaction(n: usize, seed: u64) -> grove::data::Dataset {
    let mut s = grove::rng::Stream::new(seed, 0, 1, grove::rng::Purpose::Bench);
    let x: Vec<f64> = (0..3 * n).map(|_| s.unit_f64() * 4.0 - 2.0).collect();
    let y: Vec<f64> = (0..n).map(|i| 2.0 + 3.0 * x[i] - x[n + i] + x[i] * x[2 * n + i] + 0.1 * (s.unit_f64() - 0.5)).collect();
    grove::data::Dataset::new(vec!["x0".into(), "x1".into(), "x2".into()], "y", x, y).unwrap()
}

/// `grove evolve`'s defaults with `functions`, `pop` × `gens`, `seed`, no constant fitting and
/// plain tournaments: the GPU's sums differ from the CPU's in the last bits (their order), and
/// NSGA-II's crowding distances turn such a difference into other survivors (seen in the head's
/// test below: another model after 8 generations), where these runs' tournaments pick the same.
fn plain_tournaments(functions: &str, pop: usize, gens: usize, seed: u64) -> grove::task::regression::EvolveSettings {
    let mut settings = grove::task::regression::EvolveSettings::cli_default();
    settings.functions = Some(functions.into());
    settings.engine.pop_size = pop;
    settings.engine.generations = gens;
    settings.engine.seed = seed;
    settings.engine.constants.steps = 0;
    settings.engine.bloat = grove::select::Bloat::None;
    settings
}

/// A regression run with linear terms of the inputs on the GPU (`auto` keeps them there): the
/// device loop scores the joint fit (`grove_joint_sums` over the kept values, then
/// `grove_joint_fitness`), and the run returns what the CPU's run returns: the same model, its
/// training error equal but for the order of the f64 sums.
#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn a_run_with_linear_terms_on_the_gpu_returns_the_cpus_model() {
    let data = line_and_interaction(300, 4);
    let mut settings = plain_tournaments("add,sub,mul,div", 500, 8, 2);
    settings.validation_fraction = Some(0.0);
    let (rc, rg) = cpu_and_gpu_runs(&settings, &data, Loop::Device);
    assert_eq!(rg["linear_inputs"]["used"], true, "{}", rg["linear_inputs"]);
    assert_eq!(rg["linear_inputs"], rc["linear_inputs"]);
    // Grammatical evolution, the same way.
    settings.functions = None;
    settings.grammar = Some(concat!(env!("CARGO_MANIFEST_DIR"), "/grammars/regression.bnf").into());
    let (rc, rg) = cpu_and_gpu_runs(&settings, &data, Loop::Device);
    assert_eq!(rg["linear_inputs"]["used"], true, "GE: {}", rg["linear_inputs"]);
    assert_eq!(rg["linear_inputs"], rc["linear_inputs"]);
}

/// Issue 56: `--select folds` (the front cross-validated, each member's numbers refitted
/// without each fold) and `--output-margin` on a GPU run give the CPU's choice and limits.
#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn folds_and_an_output_margin_on_the_gpu_choose_and_limit_as_on_the_cpu() {
    let data = line_and_interaction(200, 9);
    let mut settings = plain_tournaments("add,sub,mul,aq", 400, 6, 5);
    settings.select = grove::task::base::validation::Select::Folds;
    settings.folds = Some(4);
    settings.output_margin = Some(0.1);
    // The terms on: the device loop scores the joint fit.
    settings.linear_inputs = grove::task::regression::LinearInputs::On;
    let (rc, rg) = cpu_and_gpu_runs(&settings, &data, Loop::Device);
    assert_eq!(rg["selection"]["rule"], "folds", "{}", rg["selection"]);
    assert_eq!(rg["selection"]["resampling"]["folds"], rc["selection"]["resampling"]["folds"]);
    assert!(rg["model"]["limits"].is_array(), "{}", rg["model"]);
    assert_eq!(rg["model"]["limits"], rc["model"]["limits"]);
}

/// Issue 58: a run minimising a loss of the user's own gives the same run on the GPU as on the
/// CPU: `grove_loss_sums` scores the prediction kernels' values (the CPU's bits) at the
/// linearly scaled prediction, selection and variation run on the host, and the returned
/// model, its training error and every generation's best agree but for the order of the f64
/// sums; with and without linear scaling, tree GP and GE, and with constant fitting (least
/// squares, kept where the loss does not get worse).
#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn a_run_with_a_loss_on_the_gpu_returns_the_cpus_model() {
    use grove::task::regression::EvolveSettings;
    let n = 400;
    let mut s = grove::rng::Stream::new(6, 0, 1, grove::rng::Purpose::Bench);
    let x: Vec<f64> = (0..2 * n).map(|_| s.unit_f64() * 4.0 - 2.0).collect();
    let y: Vec<f64> = (0..n).map(|i| x[i] * x[i] - 0.5 * x[n + i] + if i % 31 == 0 { 25.0 } else { 0.0 }).collect();
    let data = grove::data::Dataset::new(vec!["x0".into(), "x1".into()], "y", x, y).unwrap();
    let mut settings = EvolveSettings::cli_default();
    settings.functions = Some("add,sub,mul,div".into());
    settings.loss = Some("log(cosh(p - y))".into());
    settings.engine.pop_size = 500;
    settings.engine.generations = 8;
    settings.engine.seed = 4;
    settings.engine.constants.steps = 0;
    settings.engine.bloat = grove::select::Bloat::None;
    settings.validation_fraction = Some(0.0);
    let (rc, rg) = cpu_and_gpu_runs(&settings, &data, Loop::Host);
    let (g, c) = (rg["train"]["loss"].as_f64().unwrap(), rc["train"]["loss"].as_f64().unwrap());
    assert!((g - c).abs() <= 1e-9 * c.abs(), "train loss gpu {g:e} cpu {c:e}");
    settings.regression.linear_scaling = false;
    settings.loss = Some("abs(p - y)".into());
    cpu_and_gpu_runs(&settings, &data, Loop::Host);
    settings.regression.linear_scaling = true;
    settings.engine.constants = fitting(5, 2, 0.2);
    cpu_and_gpu_runs(&settings, &data, Loop::Host);
    settings.functions = None;
    settings.grammar = Some(concat!(env!("CARGO_MANIFEST_DIR"), "/grammars/regression.bnf").into());
    cpu_and_gpu_runs(&settings, &data, Loop::Host);
}

/// Which loop a GPU run takes: the host loop (selection and variation on the host, the GPU
/// evaluating) or the device loop (the whole generation on the GPU; its report has `transfers`).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Loop {
    Host,
    Device,
}

/// The reports of `settings` run on the CPU and on the GPU, after checking that the GPU's run
/// took `expected` loop and returned the CPU's model, its training error and every
/// generation's best equal but for the order of the f64 sums.
fn cpu_and_gpu_runs(settings: &grove::task::regression::EvolveSettings, data: &grove::data::Dataset, expected: Loop) -> (serde_json::Value, serde_json::Value) {
    use grove::task::regression::fit;
    let quiet = grove::task::base::options::RunOptions { quiet: true, ..Default::default() };
    let cpu = Backend::Cpu;
    let gpu = Backend::open(DeviceChoice::Cuda, &Gpus::All).expect("GROVE_TEST_GPU=1 needs a usable GPU").backend;
    let rc = fit(settings, data, None, &cpu, &quiet).unwrap().report;
    let rg = fit(settings, data, None, &gpu, &quiet).unwrap().report;
    assert!(rg["timing"]["device"].as_str().unwrap().contains("cuda"), "{}", rg["timing"]["device"]);
    let took = if rg["transfers"].is_null() { Loop::Host } else { Loop::Device };
    assert_eq!(took, expected, "the loop the GPU's run took: {}", rg["transfers"]);
    assert_eq!(rg["best"]["infix"], rc["best"]["infix"]);
    // The model choice (`auto`: the whole fit cross-validated) picks the same candidate by the
    // same rule: its folds' searches and the simple models agree between the devices.
    for key in ["asked", "rule", "front_index", "training_rows", "validation_rows"] {
        assert_eq!(rg["selection"][key], rc["selection"][key], "selection.{key}: gpu {} cpu {}", rg["selection"], rc["selection"]);
    }
    let picked = |r: &serde_json::Value| r["selection"]["candidates"].as_array().map(|c| c.iter().map(|c| (c["candidate"].clone(), c["size"].clone(), c["chosen"].clone())).collect::<Vec<_>>());
    assert_eq!(picked(&rg), picked(&rc), "the candidates and the one chosen");
    let (g, c) = (rg["train"]["mse"].as_f64().unwrap(), rc["train"]["mse"].as_f64().unwrap());
    assert!((g - c).abs() <= 1e-9 * c.abs().max(1e-12), "train mse gpu {g:e} cpu {c:e}");
    for (a, b) in rg["generations"].as_array().unwrap().iter().zip(rc["generations"].as_array().unwrap()) {
        let (a, b) = (a["best"].as_f64().unwrap(), b["best"].as_f64().unwrap());
        assert!((a - b).abs() <= 1e-9 * b.abs().max(1e-12), "best fitness gpu {a:e} cpu {b:e}");
    }
    (rc, rg)
}

/// A regression run with a fitted head over three outputs on the GPU: the head's sums come
/// from `grove_head_sums`, and the run returns what the CPU's run returns (the same model, its
/// training error equal but for the order of the f64 sums).
#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn a_run_with_a_head_on_the_gpu_returns_the_cpus_model() {
    use grove::task::regression::LinearInputs;
    let n = 400;
    let mut s = grove::rng::Stream::new(5, 0, 1, grove::rng::Purpose::Bench);
    let x: Vec<f64> = (0..3 * n).map(|_| s.unit_f64() * 4.0 - 2.0).collect();
    let y: Vec<f64> = (0..n).map(|i| x[i] * x[n + i] + 2.0 * x[2 * n + i] * x[2 * n + i] - x[i] + 0.1 * (s.unit_f64() - 0.5)).collect();
    let data = grove::data::Dataset::new(vec!["x0".into(), "x1".into(), "x2".into()], "y", x, y).unwrap();
    let mut settings = plain_tournaments("add,sub,mul,div", 500, 8, 3);
    settings.outputs = 3;
    settings.linear_inputs = LinearInputs::Off;
    settings.validation_fraction = Some(0.0);
    let (_, rg) = cpu_and_gpu_runs(&settings, &data, Loop::Host);
    assert_eq!(rg["best"]["head"]["w"].as_array().map(Vec::len), Some(3), "a head over 3 outputs: {}", rg["best"]);
    // Grammatical evolution: a grammar that writes three output slots.
    settings.functions = None;
    settings.grammar = Some(concat!(env!("CARGO_MANIFEST_DIR"), "/grammars/classify-3class.bnf").into());
    let (_, rg) = cpu_and_gpu_runs(&settings, &data, Loop::Host);
    assert_eq!(rg["best"]["head"]["w"].as_array().map(Vec::len), Some(3), "GE, a head over 3 outputs: {}", rg["best"]);
}

/// A classifier with a head over three outputs on the GPU (`grove classify --outputs 3`): the
/// head's sums come from `grove_class_head_sums`, selection and variation from the host, and the
/// run returns what the CPU's run returns (the same program and head, its training accuracy
/// equal), for tree GP and grammatical evolution.
#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn a_classifier_with_a_head_on_the_gpu_returns_the_cpus_model() {
    use grove::task::classify::ClassifySettings;
    for grammar in [None, Some("grammars/classify-3class.bnf")] {
        let mut s = ClassifySettings { data: "builtin:wine".into(), outputs: 3, ..ClassifySettings::default() };
        s.engine.pop_size = 400;
        s.engine.generations = 6;
        s.engine.seed = 5;
        if let Some(g) = grammar {
            s.functions = None;
            s.grammar = Some(format!("{}/{g}", env!("CARGO_MANIFEST_DIR")));
        }
        let what = grammar.unwrap_or("tree GP");
        let rg = cpu_and_gpu_classifier_runs(&s, what);
        assert_eq!(rg["model"]["class_head"].as_array().map(Vec::len), Some(3), "{what}");
    }
}

/// Runs the classifier of `s` on the CPU and on the GPU and asserts the GPU's report returns the
/// CPU's program with the same training accuracy, each generation's best within 1e-9 of the CPU's
/// (the f64 sums' order); returns the GPU's report.
fn cpu_and_gpu_classifier_runs(s: &grove::task::classify::ClassifySettings, what: &str) -> serde_json::Value {
    use grove::task::classify::{fit, load_data};
    let quiet = grove::task::base::options::RunOptions { quiet: true, ..Default::default() };
    let gpu = Backend::open(DeviceChoice::Cuda, &Gpus::All).expect("GROVE_TEST_GPU=1 needs a usable GPU").backend;
    let (_, train, test, st) = load_data(s).unwrap();
    let rc = fit(s, &train, test.as_ref(), st.as_ref(), &Backend::Cpu, &quiet).unwrap().report;
    let rg = fit(s, &train, test.as_ref(), st.as_ref(), &gpu, &quiet).unwrap().report;
    assert!(rg["timing"]["device"].as_str().unwrap().contains("cuda"), "{what}: {}", rg["timing"]["device"]);
    assert_eq!(rg["best"]["infix"], rc["best"]["infix"], "{what}");
    assert_eq!(rg["train"]["accuracy"], rc["train"]["accuracy"], "{what}");
    assert_eq!(rg["generations"].as_array().map(Vec::len), rc["generations"].as_array().map(Vec::len), "{what}");
    for (a, b) in rg["generations"].as_array().unwrap().iter().zip(rc["generations"].as_array().unwrap()) {
        let (a, b) = (a["best"].as_f64().unwrap(), b["best"].as_f64().unwrap());
        assert!((a - b).abs() <= 1e-9 * b.abs().max(1e-12), "{what}: best fitness gpu {a:e} cpu {b:e}");
    }
    rg
}

/// Issue 55's selection and diversity in a classifier's run on the GPU (`grove classify
/// --selection lexicase|down-sampled --diversity unique`, no head): the tournaments and unique
/// parents read the fitness from classify.cu, whose cross-entropy has the CPU's bits at every
/// point (only its sums' order differs), and lexicase reads each row's error from the programs'
/// predictions; the run returns the CPU's program, with the same training accuracy and the
/// same best fitness each generation, for tree GP and grammatical evolution.
#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn a_classifier_with_lexicase_and_unique_parents_on_the_gpu_returns_the_cpus_model() {
    use grove::select::{Diversity, Selection};
    use grove::task::classify::ClassifySettings;
    for (grammar, selection, diversity) in [
        (None, Selection::Lexicase, Diversity::None),
        (None, Selection::DownSampled, Diversity::Unique),
        (Some("grammars/classify-3class.bnf"), Selection::Lexicase, Diversity::Unique),
        (Some("grammars/classify-3class.bnf"), Selection::Tournament, Diversity::Unique),
    ] {
        let mut s = ClassifySettings { data: "builtin:wine".into(), ..ClassifySettings::default() };
        s.engine.pop_size = 400;
        s.engine.generations = 8;
        s.engine.seed = 7;
        s.engine.selection = selection;
        s.engine.diversity = diversity;
        if let Some(g) = grammar {
            s.functions = None;
            s.grammar = Some(format!("{}/{g}", env!("CARGO_MANIFEST_DIR")));
        }
        cpu_and_gpu_classifier_runs(&s, &format!("{} {selection:?} {diversity:?}", grammar.unwrap_or("tree GP")));
    }
}

/// NSGA-II (`--bloat nsga2`) on the device loop (survival of children and last survivors,
/// crowded tournaments, all on the GPU) against the host loop on the same GPU: the same best
/// program, survivors, fitness, history, hall of fame and median sizes, for tree GP (with
/// constants fitted and without), grammatical evolution, and classification; a run stopped after
/// a snapshot and resumed from its JSON (which carries the survivors) ends as the uninterrupted
/// one.
#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn nsga2_on_the_device_equals_the_host_loop() {
    use grove::data::classes::ClassSource;
    use grove::evolve::{EngineConfig, IslandConfig, Representation, checkpoint, device, host};
    use grove::select::Bloat;
    use grove::task::classify::{ClassFitness, Classification};
    use grove::task::regression::{Regression, RegressionConfig, TreeSettings};
    let problem = DataSource::parse("builtin:pagie1").unwrap().load(None).unwrap();
    let train = &problem.train;
    let gpu = Backend::open(DeviceChoice::Cuda, &Gpus::All).expect("GROVE_TEST_GPU=1 needs a usable GPU").backend;
    let one = IslandConfig::single();
    let nsga2 = |pop_size, generations, seed, max_len, constants| EngineConfig {
        pop_size,
        generations,
        seed,
        tournament: 2,
        elite: 1,
        max_len,
        bloat: Bloat::Nsga2,
        constants,
        ..Default::default()
    };
    let off = grove::evolve::ConstantFitting::default();
    let data = gpu.regression_data(&train.x, &train.y, train.n_rows, train.n_features).unwrap();
    let task = Regression { backend: &gpu, data, config: RegressionConfig::default(), outputs: 1, joint: None, rows: None, loss: None, fitness_fn: None };
    let d = grove::evolve::Fitness::device_task(&task).unwrap();
    // Tree GP.
    for cfg in [nsga2(1500, 15, 3, 128, off), nsga2(777, 12, 4, 64, fitting(5, 2, 0.05)), nsga2(3, 6, 5, 32, off)] {
        let rep = TreeSettings::default().rep("add,sub,mul,div,sin,cos", train.n_features, cfg.max_len).unwrap();
        let (mut fa, mut fb) = (Fame::default(), Fame::default());
        let (a, tr) = device::run(&cfg, &one, Representation::Trees(&rep), &[d], None, &mut fa).unwrap();
        let b = host::run(&cfg, &one, Representation::Trees(&rep), &task, None, &mut fb).unwrap();
        let what = format!("trees {cfg:?}");
        assert_same_runs(&what, &a, &b, &fa, &fb);
        assert_eq!(tr.population_bytes_between_generations, 0);
        eprintln!("{what}: best {:e}, last mean size {:.1}", a.best.fitness, a.history.last().unwrap().mean_size);
    }
    // Grammatical evolution.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let l = load(&root.join("grammars/regression.bnf"), &DatasetShape { n_vars: Some(2), n_is: Some(2), n_os: Some(1) }).unwrap();
    let tpl = compile(&l.grammar, &l.table, &Vars { names: train.names.clone(), n_outputs: 0 }).unwrap();
    let vary = grove::genome::vary::GeVaryConfig { mutation: 0.05, ..Default::default() };
    let rep = ge(&l, &tpl, MapConfig { max_depth: 17, ..MapConfig::default() }, InitConfig::default(), vary);
    // Subtree crossover crosses the survivors' genomes on the device too.
    let subtree = ge(&l, &tpl, MapConfig { max_depth: 17, ..MapConfig::default() }, InitConfig::default(), grove::genome::vary::GeVaryConfig { crossover_op: grove::genome::vary::GeCrossover::Subtree, ..vary });
    for (cfg, r) in [(nsga2(1201, 14, 6, 128, off), &rep), (nsga2(800, 10, 7, 128, fitting(4, 3, 0.05)), &rep), (nsga2(900, 10, 8, 128, off), &subtree)] {
        let (mut fa, mut fb) = (Fame::default(), Fame::default());
        let (a, _) = device::run(&cfg, &one, Representation::Grammar(r), &[d], None, &mut fa).unwrap();
        let b = host::run(&cfg, &one, Representation::Grammar(r), &task, None, &mut fb).unwrap();
        assert_same_runs(&format!("GE {cfg:?} {:?}", r.vary.crossover_op), &a, &b, &fa, &fb);
    }
    // Resumed from a checkpoint: trees and GE.
    let cfg = nsga2(1000, 12, 21, 128, off);
    let trees = TreeSettings::default().rep("add,sub,mul,div,sin,cos", train.n_features, cfg.max_len).unwrap();
    for r in [Representation::Trees(&trees), Representation::Grammar(&rep)] {
        let quiet = |_: &grove::evolve::GenerationStats, _: &grove::evolve::Best| {};
        let (whole, _) = device::run(&cfg, &one, r, &[d], None, &mut { quiet }).unwrap();
        let mut stop = StopAt(5, 0, None);
        let err = device::run(&cfg, &one, r, &[d], None, &mut stop).unwrap_err();
        assert!(err.downcast_ref::<grove::evolve::Interrupted>().is_some(), "{err:#}");
        let text = serde_json::to_string(&stop.2.expect("a snapshot before the stop")).unwrap();
        let saved: checkpoint::Saved = serde_json::from_str(&text).unwrap();
        let resume = saved.resume().unwrap();
        assert!(resume.archive.is_some(), "the checkpoint keeps the survivors");
        let (resumed, _) = device::run(&cfg, &one, r, &[d], Some(resume), &mut { quiet }).unwrap();
        assert_eq!(resumed.best, whole.best);
        assert_eq!(resumed.population, whole.population);
        assert_eq!(resumed.fitness.iter().map(|f| f.to_bits()).collect::<Vec<_>>(), whole.fitness.iter().map(|f| f.to_bits()).collect::<Vec<_>>());
    }
    // Classification.
    let all = ClassSource::parse("builtin:wine").unwrap().load(None).unwrap();
    let k = all.n_classes();
    let data_dev = gpu.classification_data(&all.data.x, &all.labels, all.data.n_rows, k).unwrap();
    let counts: Vec<u64> = all.class_counts().iter().map(|&c| c as u64).collect();
    let task = Classification { backend: &gpu, data: data_dev, counts, fitness: ClassFitness::CrossEntropy, parsimony: 0.0, head: None, rows: None };
    let rep = grove::task::base::search::ClassTreeSettings::default().rep("add,sub,mul,div", all.data.n_features, k, 64).unwrap();
    let d = grove::evolve::Fitness::device_task(&task).unwrap();
    let cfg = nsga2(1000, 10, 8, 64, off);
    let (mut fa, mut fb) = (Fame::default(), Fame::default());
    let (a, _) = device::run(&cfg, &one, Representation::Trees(&rep), &[d], None, &mut fa).unwrap();
    let b = host::run(&cfg, &one, Representation::Trees(&rep), &task, None, &mut fb).unwrap();
    assert_same_runs("classification", &a, &b, &fa, &fb);
}

/// Lexicase selection in the device loop (the cases' errors, epsilons and selections on the
/// GPU) against the host loop taking the cases from the task on the same GPU: the same runs,
/// bit for bit, for tree GP and GE, on every case and down-sampled, with whole and drawn pools,
/// with and without scaling, and with constants fitted.
#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn lexicase_on_the_device_equals_the_host_loop() {
    use grove::evolve::{EngineConfig, IslandConfig, Representation, device};
    use grove::select::Selection;
    use grove::task::regression::{Metric, Regression, RegressionConfig, TreeSettings};
    let problem = DataSource::parse("builtin:pagie1").unwrap().load(None).unwrap();
    let train = &problem.train;
    let gpu = Backend::open(DeviceChoice::Cuda, &Gpus::All).expect("GROVE_TEST_GPU=1 needs a usable GPU").backend;
    let lex = |pop_size: usize, seed: u64, selection: Selection, lexicase_pool: usize| EngineConfig {
        pop_size,
        generations: 8,
        seed,
        elite: 1,
        max_len: 128,
        selection,
        lexicase_pool,
        ..Default::default()
    };
    let scaled = RegressionConfig::default();
    let plain = RegressionConfig { metric: Metric::Mse, linear_scaling: false, parsimony: 1e-4 };
    let trees = [
        (lex(600, 3, Selection::Lexicase, 0), scaled),
        (lex(3000, 4, Selection::DownSampled, 256), scaled),
        (lex(2000, 5, Selection::Lexicase, 64), plain),
        (EngineConfig { constants: fitting(5, 2, 0.05), ..lex(1500, 6, Selection::DownSampled, 128) }, scaled),
        // Unique parents: lexicase's candidates, and a tournament's.
        (EngineConfig { diversity: grove::select::Diversity::Unique, ..lex(1000, 10, Selection::Lexicase, 128) }, plain),
        (EngineConfig { diversity: grove::select::Diversity::Unique, tournament: 3, ..lex(1500, 11, Selection::Tournament, 0) }, scaled),
    ];
    for (cfg, reg) in trees {
        let data = gpu.regression_data(&train.x, &train.y, train.n_rows, train.n_features).unwrap();
        let task = Regression { backend: &gpu, data, config: reg, outputs: 1, joint: None, rows: Some(train), loss: None, fitness_fn: None };
        let rep = TreeSettings::default().rep("add,sub,mul,div,sin,cos", train.n_features, cfg.max_len).unwrap();
        let d = grove::evolve::Fitness::device_task(&task).expect("resident data gives the device loop");
        assert!(device::supports(&cfg) && device::supports_tasks(&cfg, &IslandConfig::single(), &[d]));
        both_loops(&format!("trees {cfg:?} {reg:?}"), &cfg, Representation::Trees(&rep), &task);
    }
    // GE: the same selections feed its crossover and mutation.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let shape = DatasetShape { n_vars: Some(2), n_is: Some(2), n_os: Some(1) };
    let l = load(&root.join("grammars/regression.bnf"), &shape).unwrap();
    let tpl = compile(&l.grammar, &l.table, &Vars { names: train.names.clone(), n_outputs: 0 }).unwrap();
    let init = InitConfig { max_depth: 7, ..InitConfig::default() };
    let vary = grove::genome::vary::GeVaryConfig { crossover_op: grove::genome::vary::GeCrossover::Subtree, mutation_per_used: true, ..Default::default() };
    let rep = ge(&l, &tpl, MapConfig { max_depth: 17, ..MapConfig::default() }, init, vary);
    for (cfg, reg) in [(lex(1000, 7, Selection::Lexicase, 0), plain), (lex(2500, 8, Selection::DownSampled, 256), scaled)] {
        let data = gpu.regression_data(&train.x, &train.y, train.n_rows, train.n_features).unwrap();
        let task = Regression { backend: &gpu, data, config: reg, outputs: 1, joint: None, rows: Some(train), loss: None, fitness_fn: None };
        assert!(device::supports_grammar(&cfg, &rep));
        both_loops(&format!("GE {cfg:?} {reg:?}"), &cfg, Representation::Grammar(&rep), &task);
    }
    // Data too large for the evaluation to keep every value (2000 trees × 600 000 rows × 4
    // bytes is over 4 GiB): the case rows are gathered and predicted on their own.
    let mut s = grove::rng::Stream::new(4, 0, 0, grove::rng::Purpose::Bench);
    let n = 600_000;
    let x64: Vec<f64> = (0..2 * n).map(|_| s.unit_f64() * 10.0 - 5.0).collect();
    let y64: Vec<f64> = (0..n).map(|r| x64[r] * x64[r] + (x64[n + r] * 0.7).sin()).collect();
    let big = grove::data::Dataset::new(vec!["a".into(), "b".into()], "y", x64, y64).unwrap();
    let cfg = EngineConfig { generations: 5, down_sample: 64.0, ..lex(2000, 9, Selection::DownSampled, 128) };
    let data = gpu.regression_data(&big.x, &big.y, big.n_rows, big.n_features).unwrap();
    let task = Regression { backend: &gpu, data, config: scaled, outputs: 1, joint: None, rows: Some(&big), loss: None, fitness_fn: None };
    let rep = TreeSettings::default().rep("add,sub,mul,sin", 2, cfg.max_len).unwrap();
    both_loops("600 000 rows, cases predicted on their own", &cfg, Representation::Trees(&rep), &task);
    // Islands take the host loop.
    let cfg = lex(600, 3, Selection::Lexicase, 0);
    let data = gpu.regression_data(&train.x, &train.y, train.n_rows, train.n_features).unwrap();
    let task = Regression { backend: &gpu, data, config: scaled, outputs: 1, joint: None, rows: Some(train), loss: None, fitness_fn: None };
    let d = grove::evolve::Fitness::device_task(&task).unwrap();
    let two = IslandConfig { count: 2, ..IslandConfig::single() };
    assert!(!device::supports_tasks(&cfg, &two, &[d, d]));
}

/// One island's run of `rep` on `task` in the device loop and in the host loop: the same runs.
fn both_loops(what: &str, cfg: &grove::evolve::EngineConfig, rep: grove::evolve::Representation<'_, '_>, task: &grove::task::regression::Regression<'_>) {
    use grove::evolve::{IslandConfig, device, host};
    let d = grove::evolve::Fitness::device_task(task).expect("resident data gives the device loop");
    let (mut fa, mut fb) = (Fame::default(), Fame::default());
    let (a, _) = device::run(cfg, &IslandConfig::single(), rep, &[d], None, &mut fa).unwrap();
    let b = host::run(cfg, &IslandConfig::single(), rep, task, None, &mut fb).unwrap();
    assert_same_runs(what, &a, &b, &fa, &fb);
    eprintln!("{what}: best {:e} at generation {}", a.best.fitness, a.best.generation);
}
