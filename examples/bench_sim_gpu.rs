//! GPU simulator throughput (`kernels/sim.cu`): for each shipped environment and profile, E
//! environments × T control steps of open-loop pseudo-random actions in one launch, timed after
//! a warm-up launch (which compiles or loads the module), terminated environments idle.
//! Prints env steps per second (steps actually taken / wall time of the whole call, transfers
//! included). `cargo run --release --example bench_sim_gpu [STEPS]` on a machine with a GPU.

use std::time::Instant;

use grove::backend::cuda::sim::SimRun;
use grove::backend::cuda::CudaEngine;
use grove::sim::Model;

fn main() -> anyhow::Result<()> {
    let steps: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(200);
    let engine = CudaEngine::new().map_err(|e| anyhow::anyhow!("{e}"))?;
    println!("{} — {steps} control steps per environment", engine.device_name());
    println!("| env | profile | envs | seconds | env steps taken | env steps/s |");
    println!("|---|---|---|---|---|---|");
    for (env, _) in grove::sim::spec::SHIPPED {
        for profile in ["brax", "gymnasium"] {
            let m = Model::load(env, Some(profile))?;
            let warm = SimRun { n_envs: 32, steps: 2, noise: Some((1, 0)), record: false, block: 128 };
            engine.sim_rollout(&m, &vec![0.0; 2 * 32 * m.nu()], &warm)?;
            for n in [1024usize, 16384] {
                let actions: Vec<f32> = (0..steps * n * m.nu()).map(|i| ((i as f64 * 0.61).sin()) as f32).collect();
                let run = SimRun { n_envs: n, steps, noise: Some((1, 0)), record: false, block: 128 };
                let t = Instant::now();
                let out = engine.sim_rollout(&m, &actions, &run)?;
                let secs = t.elapsed().as_secs_f64();
                let taken: u64 = out.lengths.iter().map(|&l| l as u64).sum();
                println!("| {env} | {profile} | {n} | {secs:.3} | {taken} | {:.3e} |", taken as f64 / secs);
            }
        }
    }
    Ok(())
}
