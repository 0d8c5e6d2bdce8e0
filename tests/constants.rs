//! Constant fitting in the generation loop (the CPU side; `tests/cuda_fit.rs` holds the kernel
//! to the CPU reference and `tests/cuda_evolve.rs` the device loop to the host loop).

use grove::backend::{Backend, DeviceChoice};
use grove::evolve::{ConstantFitting, EngineConfig, Fitness, run_trees};
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
    let backend = Backend::open(DeviceChoice::Cpu, true).unwrap();
    let data = backend.regression_data(&x, &y, x.len(), 1).unwrap();
    let task = Regression { backend: &backend, data, config: RegressionConfig { linear_scaling: false, ..RegressionConfig::default() } };
    let cfg = EngineConfig { pop_size: 300, generations: 15, seed, max_len: 64, constants, ..EngineConfig::default() };
    let rep = TreeSettings::default().rep("add,sub,mul,sin", 1, 64).unwrap();
    run_trees(&cfg, &rep, &task, &mut |s, _| record.push((s.generation, s.best))).unwrap()
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
    let backend = Backend::open(DeviceChoice::Cpu, true).unwrap();
    let data = backend.regression_data(&x, &y, x.len(), 1).unwrap();
    let task = Regression { backend: &backend, data, config: RegressionConfig::default() };
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
    use grove::task::experiment::Experiment;
    use grove::task::regression::{DEFAULT_FIT, default_fit};
    let fitting = |given: serde_json::Value| match Experiment::from_parts("evolve", given, "test.ron") {
        Ok(Experiment::Evolve(s)) => Ok(s.engine.constants),
        Ok(_) => panic!("an evolve experiment"),
        Err(e) => Err(format!("{e:#}")),
    };
    let base = serde_json::json!({"functions": "add,mul", "device": "cpu"});
    assert_eq!(fitting(base.clone()), Ok(default_fit(false)));
    assert_eq!(default_fit(false).steps, 0);
    assert_eq!(fitting(serde_json::json!({"functions": "add,mul", "device": "cuda"})), Ok(DEFAULT_FIT));
    let mut some = base.clone();
    some["engine"] = serde_json::json!({"constants": {"steps": 4}});
    assert_eq!(fitting(some), Ok(ConstantFitting { steps: 4, ..DEFAULT_FIT }));
    let mut bad = base;
    bad["engine"] = serde_json::json!({"constants": {"steps": 4, "fraction": 0.0}});
    let e = fitting(bad).unwrap_err();
    assert!(e.contains("engine.constants.fraction"), "{e}");
}
