//! The same test bodies on every backend (`grove::test_device!`): regression sums against the
//! f64 reference evaluator, invalid programs, a whole evolution run, streamed data,
//! classification sums and control returns.

use grove::backend::Backend;
use grove::backend::cpu::eval::eval_reference;
use grove::program::fitness::RegressionSums;
use grove::program::tree::{Node, Population};
use grove::program::{Op, TreeSpec, init_population};

fn pagie() -> grove::data::Dataset {
    grove::data::DataSource::parse("builtin:pagie1:400").unwrap().load(None).unwrap().train
}

fn sums(backend: &Backend, pop: &Population, data: &grove::data::Dataset) -> Vec<RegressionSums> {
    let d = backend.regression_data(&data.x, &data.y, data.n_rows, data.n_features).unwrap();
    backend.regression_sums(pop, &d).unwrap()
}

/// The f64 reference MSE of tree `i`, or None when a point is not finite.
fn reference_mse(pop: &Population, i: usize, data: &grove::data::Dataset) -> Option<f64> {
    let x: Vec<f64> = data.x.iter().map(|&v| v as f64).collect();
    let mut s = 0.0;
    for r in 0..data.n_rows {
        let v = eval_reference(pop.tree(i), &x, data.n_rows, r, 0)[0];
        if !v.is_finite() {
            return None;
        }
        s += (v - data.y[r] as f64).powi(2);
    }
    Some(s / data.n_rows as f64)
}

grove::test_device!(regression_sums_match_the_reference, |backend: &Backend| {
    let data = pagie();
    // Well-conditioned random programs: arithmetic, sin, cos and protected division.
    let spec = TreeSpec::new(vec![Op::Add, Op::Sub, Op::Mul, Op::Div, Op::Sin, Op::Cos], 2, 64)
        .with_const_range(-2.0, 2.0)
        .with_p_const(0.3)
        .with_depth(1, 5);
    let pop = init_population(&spec, 400, 5).unwrap();
    let got = sums(backend, &pop, &data);
    let mut compared = 0;
    for (i, g) in got.iter().enumerate() {
        match reference_mse(&pop, i, &data) {
            // Programs with huge errors divide near a pole, where f32 itself decides the value.
            Some(m) if m < 1e3 => {
                assert!(g.finite, "tree {i}: the reference is finite");
                let e = g.mse();
                assert!((e - m).abs() <= 1e-4 * m.max(1e-6), "tree {i}: mse {e} vs reference {m}");
                assert_eq!(g.n, data.n_rows as u64);
                compared += 1;
            }
            _ => {}
        }
    }
    assert!(compared >= 300, "only {compared} programs compared");
});

grove::test_device!(invalid_programs_are_flagged, |backend: &Backend| {
    let data = pagie();
    let mut pop = Population::new(3, 8, 0);
    // 1 / (x0 - x0) is protected (1); strict division by zero is infinite; row 2 stays empty.
    pop.set_tree(0, &[Node::func(Op::Div), Node::constant(1.0), Node::func(Op::Sub), Node::var(0), Node::var(0)]).unwrap();
    pop.set_tree(1, &[Node::func(Op::Sdiv), Node::constant(1.0), Node::func(Op::Sub), Node::var(0), Node::var(0)]).unwrap();
    let got = sums(backend, &pop, &data);
    assert!(got[0].finite);
    assert!(!got[1].finite);
    assert!(!got[2].finite);
});

grove::test_device!(evolution_improves_on_every_backend, |backend: &Backend| {
    use grove::task::regression::{EvolveSettings, run};
    let device = match backend {
        Backend::Cpu => grove::backend::DeviceChoice::Cpu,
        Backend::Cuda(_) => grove::backend::DeviceChoice::Cuda,
    };
    let settings = EvolveSettings {
        data: "builtin:koza1".into(),
        grammar: Some(format!("{}/grammars/regression.bnf", env!("CARGO_MANIFEST_DIR"))),
        engine: grove::evolve::EngineConfig { pop_size: 300, generations: 15, seed: 3, ..Default::default() },
        genome_capacity: 256,
        device,
        ..Default::default()
    };
    let r = run(&settings, &grove::task::base::options::RunOptions { quiet: true, ..Default::default() }).unwrap();
    let gens = r.report["generations"].as_array().unwrap();
    let first = gens[0]["best"].as_f64().unwrap();
    let last = gens.last().unwrap()["best"].as_f64().unwrap();
    assert!(last < first, "no improvement: {first} -> {last}");
    assert!(r.report["train"]["r2"].as_f64().unwrap() > 0.9);
});

grove::test_device!(streamed_data_gives_the_resident_sums, |backend: &Backend| {
    // A budget of 1000 rows of (2 features + target) × 4 bytes cuts 4096 points into 5 chunks,
    // the last one short; the merged sums must equal those of the data set in one piece.
    let data = grove::data::DataSource::parse("builtin:pagie1:4096").unwrap().load(None).unwrap().train;
    let spec = TreeSpec::new(vec![Op::Add, Op::Sub, Op::Mul, Op::Div, Op::Sin, Op::Exp], 2, 64).with_depth(1, 5);
    let pop = init_population(&spec, 300, 9).unwrap();
    let whole = backend.regression_data(&data.x, &data.y, data.n_rows, data.n_features).unwrap();
    let streamed = backend.regression_data_within(&data.x, &data.y, data.n_rows, data.n_features, Some(1000 * 12)).unwrap();
    if matches!(backend, Backend::Cuda(_)) {
        assert!(matches!(streamed, grove::backend::RegressionData::Streamed { chunk_rows: 1000, .. }));
    }
    let (a, b) = (backend.regression_sums(&pop, &whole).unwrap(), backend.regression_sums(&pop, &streamed).unwrap());
    for (i, (a, b)) in a.iter().zip(&b).enumerate() {
        assert_eq!((a.finite, a.n), (b.finite, b.n), "tree {i}");
        if a.finite {
            assert!((a.mse() - b.mse()).abs() <= 1e-12 * a.mse().abs().max(1e-300), "tree {i}: {} vs {}", a.mse(), b.mse());
            // Σfy may cancel: measure against its Cauchy–Schwarz bound.
            let bound = (a.sum_f2 * a.sum_y2).sqrt().max(1e-300);
            assert!((a.sum_fy - b.sum_fy).abs() <= 1e-12 * bound, "tree {i}: Σfy {} vs {}", a.sum_fy, b.sum_fy);
        }
    }
});

// Classification sums through the backend against a per-point recomputation from the f64
// reference evaluator (argmax of the outputs, softmax cross-entropy), on Iris.
grove::test_device!(classification_sums_match_the_reference, |backend: &Backend| {
    use grove::program::fitness::{argmax, softmax_ce};
    let iris = grove::data::classes::builtin_classes("iris").unwrap();
    let (x, n, k) = (&iris.data.x, iris.data.n_rows, iris.n_classes());
    let spec = TreeSpec::new(vec![Op::Add, Op::Sub, Op::Mul, Op::Div], 4, 32)
        .with_constants(&[-1.0, 0.0, 1.0])
        .with_outputs(k, 0.05)
        .with_depth(1, 4);
    let pop = init_population(&spec, 200, 9).unwrap();
    let d = backend.classification_data(x, &iris.labels, n, k).unwrap();
    let got = backend.classification_sums(&pop, &d).unwrap();
    let x64: Vec<f64> = x.iter().map(|&v| v as f64).collect();
    let mut some_right = 0;
    for (i, g) in got.iter().enumerate() {
        let (mut correct, mut ce) = (vec![0u64; k], 0.0);
        for r in 0..n {
            let z = eval_reference(pop.tree(i), &x64, n, r, k);
            let y = iris.labels[r] as usize;
            correct[y] += (argmax(&z) == y) as u64;
            ce += softmax_ce(&z, y);
        }
        assert_eq!((g.n, g.bad), (n as u64, 0), "tree {i}");
        // f32 evaluation may flip an argmax at a near-tie; these programs have few.
        let diff: u64 = g.correct.iter().zip(&correct).map(|(a, b)| a.abs_diff(*b)).sum();
        assert!(diff <= 2, "tree {i}: correct {:?}, reference {correct:?}", g.correct);
        assert!((g.ce - ce).abs() <= 1e-4 * ce.max(1.0), "tree {i}: ce {} vs {ce}", g.ce);
        some_right += (g.correct.iter().sum::<u64>() > 60) as usize;
    }
    assert!(some_right > 0, "some random program beats chance on Iris");
});

grove::test_device!(control_returns_match_the_reference, |backend: &Backend| {
    use grove::backend::cpu::control::{ControlRun, control_rollout, mean_returns};
    // Hopper (contacts, termination): 24 random policies × 2 episodes × 10 steps, plus an
    // empty row and an infinite output, which are invalid (NaN) on every backend.
    let m = grove::sim::Model::load("hopper", None).unwrap();
    let spec = TreeSpec::new(vec![Op::Add, Op::Sub, Op::Mul, Op::Div], m.obs_size as u32, 48)
        .with_const_range(-1.0, 1.0)
        .with_p_const(0.3)
        .with_outputs(m.nu(), 0.1)
        .with_depth(1, 4);
    let mut pop = init_population(&spec, 26, 3).unwrap();
    pop.clear(24);
    let mut inf = Node::func(Op::Mul);
    inf.out = 2;
    pop.set_tree(25, &[inf, Node::constant(1e30), Node::constant(1e30)]).unwrap();
    let run = ControlRun { episodes: 2, steps: 10, seed: 5, generation: 0, noise: true, ignore_termination: false };
    let (got, steps) = backend.control_returns(&pop, &m, &run).unwrap();
    let cpu = control_rollout(&pop, &m, &run);
    let want = mean_returns(&cpu, 2);
    assert_eq!(steps, cpu.iter().map(|e| e.steps as u64).sum::<u64>(), "control steps played");
    // Every backend steps the same f32 simulator bit for bit (src/sim/dynamics.rs).
    for i in 0..pop.size() {
        assert_eq!(got[i].is_nan(), want[i].is_nan(), "individual {i}: {} vs {}", got[i], want[i]);
        if want[i].is_finite() {
            assert_eq!(got[i].to_bits(), want[i].to_bits(), "individual {i}: {} vs {}", got[i], want[i]);
        }
    }
    assert!(got[24].is_nan() && got[25].is_nan());
});
