//! Control throughput on the GPU (`grove_control_rollout` + `grove_control_reduce`): P random
//! policies (tree GP with output nodes, `+ − × ÷`, up to 64 nodes, as `grove control` makes
//! them) × K episodes × T control steps, physics and policy evaluation in one launch, timed
//! after a warm-up call (which compiles or loads the module). Two modes per row: episodes end
//! when the robot falls (what evolution sees), and `full` (termination ignored: every episode
//! plays all T steps, the simulator's sustained rate). Prints env steps per second (steps
//! actually taken / wall time of the whole call: packing, upload, both kernels, read-back).
//!
//! `cargo run --release --example bench_control_gpu [ENV[:PROFILE] ...]` on a machine with a
//! GPU (default: hopper, swimmer, walker2d, half_cheetah, Brax profile). `GROVE_BENCH_POP`
//! (comma-separated, default 5000,20000), `GROVE_BENCH_EPISODES` (4), `GROVE_BENCH_STEPS`
//! (1000) and `GROVE_BENCH_BLOCK` (64) change the shape.

use std::time::Instant;

use grove::backend::cuda::CudaEngine;
use grove::program::policy::ControlRun;
use grove::program::{init_population, Op, TreeSpec};
use grove::sim::Model;

fn var(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.into())
}

fn main() -> anyhow::Result<()> {
    let mut envs: Vec<String> = std::env::args().skip(1).collect();
    if envs.is_empty() {
        envs = ["hopper", "swimmer", "walker2d", "half_cheetah"].iter().map(|s| s.to_string()).collect();
    }
    let pops: Vec<usize> = var("GROVE_BENCH_POP", "5000,20000").split(',').filter_map(|s| s.trim().parse().ok()).collect();
    let k: usize = var("GROVE_BENCH_EPISODES", "4").parse()?;
    let steps: usize = var("GROVE_BENCH_STEPS", "1000").parse()?;
    let block: u32 = var("GROVE_BENCH_BLOCK", "64").parse()?;
    let engine = CudaEngine::new().map_err(|e| anyhow::anyhow!("{e}"))?;
    println!("{} — {k} episodes per policy, {steps} control steps at most, {block} threads per block", engine.device_name());
    println!("| env | profile | policies | mode | seconds | env steps taken | env steps/s |");
    println!("|---|---|---|---|---|---|---|");
    for spec in &envs {
        let (env, profile) = spec.split_once(':').unwrap_or((spec, "brax"));
        let m = Model::load(env, Some(profile))?;
        let tree_spec = TreeSpec::new(vec![Op::Add, Op::Sub, Op::Mul, Op::Div], m.obs_size as u32, 64)
            .with_constants(&[-1.0, -0.5, 0.5, 1.0, 2.0])
            .with_p_const(0.2)
            .with_outputs(m.nu(), 0.1)
            .with_depth(2, 4);
        let warm = init_population(&tree_spec, 64, 9).map_err(|e| anyhow::anyhow!("{e}"))?;
        engine.control_returns(&warm, &m, &ControlRun { episodes: 1, steps: 2, seed: 1, generation: 0, noise: true, ignore_termination: false })?;
        for &p in &pops {
            let pop = init_population(&tree_spec, p, 1).map_err(|e| anyhow::anyhow!("{e}"))?;
            for ignore_termination in [false, true] {
                let run = ControlRun { episodes: k, steps, seed: 1, generation: 0, noise: true, ignore_termination };
                let t = Instant::now();
                let out = engine.control_returns_with(&pop, &m, &run, block)?;
                let secs = t.elapsed().as_secs_f64();
                let taken = out.env_steps();
                let mode = if ignore_termination { "full" } else { "falls end" };
                println!("| {env} | {profile} | {p} × {k} | {mode} | {secs:.3} | {taken} | {:.3e} |", taken as f64 / secs);
            }
        }
    }
    Ok(())
}
