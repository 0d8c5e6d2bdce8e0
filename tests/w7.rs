//! Workload W7 (Pospichal et al., GE on the GPU): x + x² + x³ + x⁴ on 128 points in [0, 10]
//! with the paper's grammar and settings (population 32, 100 generations, 128-codon random
//! genomes, tournament 3, crossover 90 %, int-flip 5 %, one elite). The paper reports 77 %
//! solved on its GPU and 74 % for GEVA; we require at least 70 % of 30 seeded runs.

use grove::evolve::EngineConfig;
use grove::genome::vary::GeVaryConfig;
use grove::genome::{InitConfig, InitMethod};
use grove::task::regression::{EvolveSettings, Metric, RegressionConfig, run};

fn w7(seed: u64) -> EvolveSettings {
    EvolveSettings {
        data: "builtin:quartic".into(),
        grammar: Some(concat!(env!("CARGO_MANIFEST_DIR"), "/grammars/ge-paper.bnf").into()),
        engine: EngineConfig { pop_size: 32, generations: 100, seed, tournament: 3, elite: 1, max_len: 256, ..Default::default() },
        init: InitConfig { method: InitMethod::Random, length: 128, ..InitConfig::default() },
        vary: GeVaryConfig { crossover: 0.9, mutation: 0.05, ..GeVaryConfig::default() },
        genome_capacity: 512,
        regression: RegressionConfig { metric: Metric::Mae, linear_scaling: false, parsimony: 0.0 },
        device: grove::backend::DeviceChoice::Cpu,
        ..Default::default()
    }
}

#[test]
fn w7_is_solved_in_most_runs() {
    let runs = 30;
    let mut solved = 0;
    for seed in 1..=runs {
        let r = run(&w7(seed), &grove::task::base::options::RunOptions { quiet: true, ..Default::default() }).unwrap();
        let mae = r.report["train"]["mae"].as_f64().unwrap_or(f64::INFINITY);
        // x + x² + x³ + x⁴ averages 2,222 over [0, 10]: "zero within f32 rounding" is a
        // relative error far below anything a wrong formula reaches.
        if mae <= 1e-5 * 2222.0 {
            solved += 1;
        }
    }
    eprintln!("W7: {solved} of {runs} runs solved");
    assert!(solved * 10 >= runs * 7, "only {solved} of {runs} runs solved W7");
}
