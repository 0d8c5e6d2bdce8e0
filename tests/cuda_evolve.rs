//! The CUDA backend inside evolution: the fitness of the same GE populations computed by the CPU
//! and the GPU backends agrees (validity identical, errors equal but for the order of the f64 sums), and a whole run
//! with `--device cuda` completes with the CPU's quality. Needs a GPU (`GROVE_TEST_GPU=1`).

use grove::backend::{Backend, DeviceChoice};
use grove::data::DataSource;
use grove::evolve::{GrammarRep, map_population};
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
    let cpu = Backend::open(DeviceChoice::Cpu, true).unwrap();
    let gpu = Backend::open(DeviceChoice::Cuda, true).expect("GROVE_TEST_GPU=1 needs a usable GPU");
    let cpu_data = cpu.regression_data(&train.x, &train.y, train.n_rows, train.n_features).unwrap();
    let gpu_data = gpu.regression_data(&train.x, &train.y, train.n_rows, train.n_features).unwrap();
    let (mut checked, mut bad) = (0usize, Vec::new());
    for seed in 1..=4u64 {
        let genomes = init_genomes(&l.table, &rep.init, rep.map.codons, 3000, 512, seed);
        let mut pop = Population::new(3000, 256, 0);
        map_population(&rep, &genomes, &mut pop);
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

/// A whole run on each device, from the same seed: since every fitness has the same bits up to
/// the order of the f64 sums, selection makes the same choices and the runs are the same run.
#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn whole_runs_on_cpu_and_gpu_are_the_same_run() {
    use grove::task::regression::{EvolveSettings, evolve};
    let run = |device: DeviceChoice, grammar: Option<&str>, functions: Option<&str>| {
        let settings = EvolveSettings {
            data: "builtin:pagie1".into(),
            grammar: grammar.map(|g| format!("{}/grammars/{g}", env!("CARGO_MANIFEST_DIR"))),
            functions: functions.map(str::to_string),
            engine: grove::evolve::EngineConfig { pop_size: 1000, generations: 20, seed: 11, ..Default::default() },
            device,
            ..Default::default()
        };
        evolve(&settings, true).unwrap().report
    };
    for (grammar, functions) in [(Some("regression.bnf"), None), (None, Some("add,sub,mul,div,sin,cos,exp,log,tanh,pow"))] {
        let (c, g) = (run(DeviceChoice::Cpu, grammar, functions), run(DeviceChoice::Cuda, grammar, functions));
        let (cg, gg) = (c["generations"].as_array().unwrap(), g["generations"].as_array().unwrap());
        assert_eq!(cg.len(), gg.len());
        for (k, (a, b)) in cg.iter().zip(gg).enumerate() {
            let (ba, bb) = (a["best"].as_f64().unwrap(), b["best"].as_f64().unwrap());
            assert!((ba - bb).abs() <= 1e-12 * ba.abs(), "{grammar:?}{functions:?} generation {k}: best cpu {ba:e} gpu {bb:e}");
        }
        assert_eq!(c["best"]["infix"], g["best"]["infix"], "{grammar:?}{functions:?}: different best programs");
    }
}
