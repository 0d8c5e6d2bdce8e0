//! Constant fitting in the generation loop (the CPU side; `tests/cuda_fit.rs` holds the kernel
//! to the CPU reference and `tests/cuda_evolve.rs` the device loop to the host loop).

use grove::backend::Backend;
use grove::evolve::{Best, ConstantFitting, EngineConfig, Fitness, GenerationStats, IslandConfig, Representation};
use grove::program::tree::Population;
use grove::task::regression::{Regression, RegressionConfig, TreeSettings};

/// `y = 2.7 sin(1.9 x) + 0.3` on 120 points: a curve whose inner constant search alone finds
/// slowly, and a least-squares fit finds at once.
fn curve() -> (Vec<f32>, Vec<f32>) {
    let x: Vec<f32> = (0..120).map(|i| -3.0 + 6.0 * i as f32 / 119.0).collect();
    let y = x.iter().map(|&v| 2.7 * (1.9 * v).sin() + 0.3).collect();
    (x, y)
}

fn run(constants: ConstantFitting, seed: u64, record: &mut Vec<(usize, f64)>) -> grove::evolve::Outcome {
    let (x, y) = curve();
    let backend = Backend::Cpu;
    let data = backend.regression_data(&x, &y, x.len(), 1).unwrap();
    let task = Regression { backend: &backend, data, config: RegressionConfig { linear_scaling: false, ..RegressionConfig::default() }, outputs: 1, joint: None, rows: None, loss: None, fitness_fn: None };
    let cfg = EngineConfig { pop_size: 300, generations: 15, seed, max_len: 64, constants, ..EngineConfig::default() };
    let rep = TreeSettings::default().rep("add,sub,mul,sin", 1, 64).unwrap();
    let one = IslandConfig::single();
    grove::evolve::run(&cfg, &one, Representation::Trees(&rep), &task, None, &mut |s: &GenerationStats, _: &Best| record.push((s.generation, s.best)))
        .unwrap()
}

#[test]
fn fitting_constants_finds_a_curve_that_search_alone_does_not() {
    let on = ConstantFitting { steps: 10, every: 1, fraction: 0.05 };
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let mut wins = 0;
    for seed in 1..=3 {
        let plain = run(ConstantFitting::default(), seed, &mut a);
        let fitted = run(on, seed, &mut b);
        eprintln!("seed {seed}: best MSE {:e} without fitting, {:e} with", plain.best.fitness, fitted.best.fitness);
        assert!(fitted.best.fitness.is_finite());
        wins += (fitted.best.fitness < 0.5 * plain.best.fitness) as usize;
    }
    assert!(wins >= 2, "fitting halved the error in only {wins} of 3 runs");
    // Reproducible: the same seed gives the same run.
    let (mut c, mut d) = (Vec::new(), Vec::new());
    let r1 = run(on, 7, &mut c);
    let r2 = run(on, 7, &mut d);
    assert_eq!(r1.best, r2.best);
    assert_eq!(c, d);
}

#[test]
fn the_task_fits_rows_in_place_and_scores_them_as_evaluation_does() {
    let (x, y) = curve();
    let backend = Backend::Cpu;
    let data = backend.regression_data(&x, &y, x.len(), 1).unwrap();
    let task = Regression { backend: &backend, data, config: RegressionConfig::default(), outputs: 1, joint: None, rows: None, loss: None, fitness_fn: None };
    let spec = TreeSettings::default().rep("add,mul,sin", 1, 64).unwrap().vary.spec;
    let pop: Population = grove::program::init_population(&spec, 60, 3).unwrap();
    let before = task.evaluate(&pop).unwrap();
    let mut fitted = pop.clone();
    let rows: Vec<usize> = (0..60).step_by(3).collect();
    let fit = task.fit_constants(&mut fitted, &rows, 6).unwrap().expect("regression fits constants");
    let after = task.evaluate(&fitted).unwrap();
    for (k, &r) in rows.iter().enumerate() {
        assert_eq!(fit[k].to_bits(), after[r].to_bits(), "row {r}: the fit's fitness is the evaluation's");
        assert!(after[r] <= before[r] * (1.0 + 1e-9) || !before[r].is_finite(), "row {r}: {} -> {}", before[r], after[r]);
    }
    for r in (0..60).filter(|r| r % 3 != 0) {
        assert_eq!(fitted.tree(r).value, pop.tree(r).value, "row {r} was not listed");
    }
    assert!(rows.iter().any(|&r| after[r] < 0.9 * before[r]), "no fit improved by 10 %");
}

#[test]
fn experiment_files_lay_constant_fitting_over_the_devices_defaults() {
    use grove::task::runner::experiment::Experiment;
    use grove::task::regression::{FITTING, default_fit};
    let fitting = |given: serde_json::Value| match Experiment::from_parts("evolve", given, "test.ron") {
        Ok(Experiment::Evolve(s)) => Ok(s.engine.constants),
        Ok(_) => panic!("an evolve experiment"),
        Err(e) => Err(format!("{e:#}")),
    };
    let base = serde_json::json!({"functions": "add,mul", "device": "cpu"});
    assert_eq!(fitting(base.clone()), Ok(default_fit(false)));
    // No fitting on either device (the quality suite measured no gain on a GPU).
    assert_eq!(default_fit(false).steps, 0);
    assert_eq!(fitting(serde_json::json!({"functions": "add,mul", "device": "cuda"})), Ok(default_fit(true)));
    assert_eq!(default_fit(true), default_fit(false));
    // Steps alone take the schedule of `FITTING`.
    let mut some = base.clone();
    some["engine"] = serde_json::json!({"constants": {"steps": 4}});
    assert_eq!(fitting(some), Ok(ConstantFitting { steps: 4, ..FITTING }));
    let mut bad = base;
    bad["engine"] = serde_json::json!({"constants": {"steps": 4, "fraction": 0.0}});
    let e = fitting(bad).unwrap_err();
    assert!(e.contains("engine.constants.fraction"), "{e}");
}

/// Three classes by the nearest of three centres in the plane, 150 rows.
fn centres() -> (Vec<f32>, Vec<u32>, usize) {
    let n = 150;
    let x: Vec<f32> = (0..2 * n).map(|i| ((i * 71 % 149) as f32) / 37.0 - 2.0).collect();
    let c = [(-1.0f32, -1.0f32), (1.0, 0.2), (-0.3, 1.1)];
    let labels = (0..n)
        .map(|r| {
            let d = |k: usize| (x[r] - c[k].0).powi(2) + (x[n + r] - c[k].1).powi(2);
            (0..3).min_by(|&a, &b| d(a).total_cmp(&d(b))).unwrap() as u32
        })
        .collect();
    (x, labels, n)
}

#[test]
fn the_classification_task_fits_rows_in_place_and_scores_them_as_evaluation_does() {
    use grove::task::classify::{ClassFitness, Classification};
    use grove::task::base::search::ClassTreeSettings;
    let (x, labels, n) = centres();
    let backend = Backend::Cpu;
    let data = backend.classification_data(&x, &labels, n, 3).unwrap();
    let counts = (0..3).map(|k| labels.iter().filter(|&&l| l == k).count() as u64).collect();
    let task = Classification { backend: &backend, data, counts, fitness: ClassFitness::CrossEntropy, parsimony: 0.0, head: None, rows: None };
    let spec = ClassTreeSettings::default().rep("add,sub,mul,div", 2, 3, 64).unwrap().vary.spec;
    let pop: Population = grove::program::init_population(&spec, 90, 5).unwrap();
    let before = task.evaluate(&pop).unwrap();
    let mut fitted = pop.clone();
    let rows: Vec<usize> = (0..90).step_by(2).collect();
    let fit = task.fit_constants(&mut fitted, &rows, 6).unwrap().expect("classification fits constants");
    let after = task.evaluate(&fitted).unwrap();
    for (k, &r) in rows.iter().enumerate() {
        assert_eq!(fit[k].to_bits(), after[r].to_bits(), "row {r}: the fit's fitness is the evaluation's");
        // The fit minimises the same summed cross-entropy the fitness averages (up to the
        // order of the sums).
        assert!(after[r] <= before[r] * (1.0 + 1e-6) || !before[r].is_finite(), "row {r}: {} -> {}", before[r], after[r]);
    }
    for r in (0..90).filter(|r| r % 2 != 0) {
        assert_eq!(fitted.tree(r).value, pop.tree(r).value, "row {r} was not listed");
    }
    assert!(rows.iter().any(|&r| after[r] < 0.8 * before[r]), "no fit lowered the cross-entropy by 20 %");
}

#[test]
fn a_classification_run_with_fitting_is_reproducible_and_no_worse_at_its_fitness() {
    use grove::task::classify::{ClassFitness, Classification};
    use grove::task::base::search::ClassTreeSettings;
    let (x, labels, n) = centres();
    let backend = Backend::Cpu;
    let counts: Vec<u64> = (0..3).map(|k| labels.iter().filter(|&&l| l == k).count() as u64).collect();
    let rep = ClassTreeSettings::default().rep("add,sub,mul,div", 2, 3, 64).unwrap();
    let go = |constants: ConstantFitting, seed: u64| {
        let data = backend.classification_data(&x, &labels, n, 3).unwrap();
        let task = Classification { backend: &backend, data, counts: counts.clone(), fitness: ClassFitness::CrossEntropy, parsimony: 0.0, head: None, rows: None };
        let cfg = EngineConfig { pop_size: 200, generations: 8, seed, max_len: 64, constants, ..EngineConfig::default() };
        let one = IslandConfig::single();
        grove::evolve::run(&cfg, &one, Representation::Trees(&rep), &task, None, &mut |_: &GenerationStats, _: &Best| {}).unwrap()
    };
    let on = ConstantFitting { steps: 8, every: 2, fraction: 0.1 };
    let mut wins = 0;
    for seed in 1..=3 {
        let (plain, fitted) = (go(ConstantFitting::default(), seed), go(on, seed));
        eprintln!("seed {seed}: best cross-entropy {:.4} without fitting, {:.4} with", plain.best.fitness, fitted.best.fitness);
        wins += (fitted.best.fitness < plain.best.fitness) as usize;
    }
    assert!(wins >= 2, "fitting lowered the best training cross-entropy in only {wins} of 3 runs");
    assert_eq!(go(on, 9).best, go(on, 9).best, "the same seed gives the same run");
}

#[test]
fn classify_and_control_experiment_files_take_constant_fitting_as_they_can() {
    use grove::task::classify::{DEFAULT_FIT, default_fit};
    use grove::task::runner::experiment::Experiment;
    let fitting = |given: serde_json::Value| match Experiment::from_parts("classify", given, "test.ron") {
        Ok(Experiment::Classify(s)) => Ok(s.engine.constants),
        Ok(_) => panic!("a classify experiment"),
        Err(e) => Err(format!("{e:#}")),
    };
    assert_eq!(fitting(serde_json::json!({"device": "cpu"})), Ok(default_fit(false)));
    assert_eq!(fitting(serde_json::json!({"device": "cuda"})), Ok(DEFAULT_FIT));
    assert_eq!(fitting(serde_json::json!({"device": "cpu", "engine": {"constants": {"steps": 3}}})), Ok(ConstantFitting { steps: 3, ..default_fit(false) }));
    let e = fitting(serde_json::json!({"device": "cpu", "engine": {"constants": {"steps": 3, "every": 0}}})).unwrap_err();
    assert!(e.contains("engine.constants.every"), "{e}");
    // Control fits no constants: asking for it is an error, not a silent no-op.
    let e = Experiment::from_parts("control", serde_json::json!({"env": "swimmer", "device": "cpu", "engine": {"constants": {"steps": 5}}}), "w.ron").map(|_| ()).unwrap_err();
    let e = format!("{e:#}");
    assert!(e.contains("control fits no constants"), "{e}");
}
