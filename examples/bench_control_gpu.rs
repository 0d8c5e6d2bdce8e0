//! Control throughput on the GPU (`grove_control_rollout` + `grove_control_reduce`): P random
//! policies (tree GP with output nodes, `+ − × ÷`, up to 64 nodes, as `grove control` makes
//! them) × K episodes × T control steps, physics and policy evaluation in one launch, timed
//! after a warm-up call of the same shape (which compiles or loads the module). Two modes per row: episodes end
//! when the robot falls (what evolution sees), and `full` (termination ignored: every episode
//! plays all T steps, the simulator's sustained rate). Prints env steps per second (steps
//! actually taken / wall time of the whole call: packing, upload, both kernels, read-back),
//! the wall time per control step of the batch (`µs/step`: seconds / T), and `bits`, a hash of every episode's return bits, length and validity, which two kernels
//! computing the same episodes must print alike.
//!
//! `cargo run --release --example bench_control_gpu [ENV[:PROFILE] ...]` on a machine with a
//! GPU (default: hopper, swimmer, walker2d, half_cheetah, Brax profile). `GROVE_BENCH_POP`
//! (comma-separated, default 5000,20000), `GROVE_BENCH_EPISODES` (4) and `GROVE_BENCH_STEPS`
//! (1000) change the shape; `GROVE_BENCH_MODES` (`falls,full`) which modes run;
//! `GROVE_BENCH_GRID` how many threads play: `resident` (default: as many as stay resident,
//! refilling from the kernel's queue) or `episodes` (one thread per episode: the launch of the
//! kernel before the queue, which `GROVE_KERNEL_DIR` can stage for a side-by-side run);
//! `GROVE_BENCH_LANES` (comma-separated, `auto` for the engine's choice per launch, the
//! default) the lanes that play one episode (`CudaEngine::set_episode_lanes`), each a row.

use std::time::Instant;

use grove::backend::cuda::control::ControlGrid;
use grove::backend::cuda::CudaEngine;
use grove::backend::cpu::control::ControlRun;
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
    let grid = match var("GROVE_BENCH_GRID", "resident").as_str() {
        "resident" => ControlGrid::Resident,
        "episodes" => ControlGrid::PerEpisode,
        other => anyhow::bail!("GROVE_BENCH_GRID={other}: use resident or episodes"),
    };
    let modes = var("GROVE_BENCH_MODES", "falls,full");
    let lanes: Vec<Option<u32>> = match std::env::var("GROVE_BENCH_LANES") {
        Ok(v) => v.split(',').map(|s| if s.trim() == "auto" { Ok(None) } else { s.trim().parse().map(Some) }).collect::<Result<_, _>>()?,
        Err(_) => vec![None],
    };
    let engine = CudaEngine::new().map_err(|e| anyhow::anyhow!("{e}"))?;
    let dir = std::env::var("GROVE_KERNEL_DIR").map(|d| format!(", sim.cu from {d}")).unwrap_or_default();
    println!("{} — {k} episodes per policy, {steps} control steps at most, grid {grid:?}{dir}", engine.device_name());
    println!("| env | profile | lanes | policies | mode | seconds | µs/step | env steps taken | env steps/s | bits |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for spec in &envs {
        let (env, profile) = spec.split_once(':').unwrap_or((spec, "brax"));
        let m = Model::load(env, Some(profile))?;
        let tree_spec = TreeSpec::new(vec![Op::Add, Op::Sub, Op::Mul, Op::Div], m.obs_size as u32, 64)
            .with_constants(&[-1.0, -0.5, 0.5, 1.0, 2.0])
            .with_p_const(0.2)
            .with_outputs(m.nu(), 0.1)
            .with_depth(2, 4);
        for &g in &lanes {
            engine.set_episode_lanes(g)?;
            for &p in &pops {
                let pop = init_population(&tree_spec, p, 1).map_err(|e| anyhow::anyhow!("{e}"))?;
                // A warm-up of the same shape compiles or loads the module the timed calls use.
                let warm_run = ControlRun { episodes: k, steps: 2, seed: 1, generation: 0, noise: true, ignore_termination: false };
                if let Err(e) = engine.control_returns_with(&pop, &m, &warm_run, grid) {
                    println!("| {env} | {profile} | {g:?} | {p} × {k} | {e} |");
                    continue;
                }
                for ignore_termination in [false, true] {
                    if !modes.split(',').any(|m| m.trim() == if ignore_termination { "full" } else { "falls" }) {
                        continue;
                    }
                    let run = ControlRun { episodes: k, steps, seed: 1, generation: 0, noise: true, ignore_termination };
                    let t = Instant::now();
                    let out = engine.control_returns_with(&pop, &m, &run, grid)?;
                    let secs = t.elapsed().as_secs_f64();
                    let taken = out.env_steps();
                    let mode = if ignore_termination { "full" } else { "falls end" };
                    let bits = out.episodes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, e| {
                        [e.ret.to_bits(), e.steps as u64, e.valid as u64].iter().fold(h, |h, &x| (h ^ x).wrapping_mul(0x0100_0000_01b3))
                    });
                    println!(
                        "| {env} | {profile} | {} | {p} × {k} | {mode} | {secs:.3} | {:.1} | {taken} | {:.3e} | {bits:016x} |",
                        out.lanes,
                        secs * 1e6 / steps as f64,
                        taken as f64 / secs
                    );
                }
            }
        }
    }
    Ok(())
}
