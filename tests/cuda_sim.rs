//! Parity of the GPU simulator (`kernels/sim.cu`) with the CPU reference (`src/sim/`): reset
//! noise, 1 s trajectories and returns of many environments with their own open-loop actions,
//! for every shipped environment and profile.
//!
//! The GPU tests are compiled everywhere and ignored unless `GROVE_TEST_GPU=1` (then a missing
//! GPU is a failure). Both sides run the same f32 stepper bit for bit (no fused operations,
//! grove's own sin, cos, pow, ln and cos in f64, constants combined on the host: see
//! `src/sim/dynamics.rs`), so resets, every state of whole episodes, lengths and returns must be
//! equal, with termination and without; `tests/sim_kernel_host.rs` checks the same kernel code
//! under g++ without a GPU. The header generator is checked without a GPU.

use grove::backend::cuda::sim::{env_header, SimRun};
use grove::backend::cuda::CudaEngine;
use grove::sim::{Model, State};

const CASES: &[(&str, &str)] = &[
    ("swimmer", "brax"),
    ("swimmer", "gymnasium"),
    ("hopper", "brax"),
    ("hopper", "gymnasium"),
    ("walker2d", "brax"),
    ("walker2d", "gymnasium"),
    ("half_cheetah", "brax"),
    ("half_cheetah", "gymnasium"),
];

#[test]
fn env_header_carries_the_compiled_model() {
    let hb = env_header(&Model::load("hopper", Some("brax")).unwrap());
    for line in ["#define GROVE_NV 6", "#define GROVE_NU 3", "#define GROVE_NLIM 3", "#define GROVE_NCAP 1", "#define GROVE_RK4 0"] {
        assert!(hb.contains(line), "hopper brax lacks `{line}`:\n{hb}");
    }
    assert!(hb.contains("#define GROVE_BONUS_WHEN_TERMINAL 1") && hb.contains("#define GROVE_TERMINATE 1"));
    assert!(hb.contains("o[0] = pw[0];"), "obs[0] is the torso height");
    assert!(hb.contains("o[5] = fminf(fmaxf(v[0], -1e1f), 1e1f);"), "qvel clipped to ±10:\n{hb}");
    let hg = env_header(&Model::load("hopper", Some("gymnasium")).unwrap());
    assert!(hg.contains("#define GROVE_RK4 1") && hg.contains("#define GROVE_NCAP 4") && hg.contains("#define GROVE_BONUS_WHEN_TERMINAL 0"));
    let sw = env_header(&Model::load("swimmer", None).unwrap());
    assert!(sw.contains("#define GROVE_FLUID 1") && sw.contains("grove_fluid[3][5]") && sw.contains("#define GROVE_NCAP 0"));
    assert!(!sw.contains("grove_cap_body"), "no zero-length tables");
    let hc = env_header(&Model::load("half_cheetah", None).unwrap());
    assert!(hc.contains("#define GROVE_VNOISE_KIND 1"), "half_cheetah's qvel noise is normal");
}

fn engine() -> CudaEngine {
    CudaEngine::new().unwrap_or_else(|e| panic!("GROVE_TEST_GPU=1 but {e}"))
}

/// Deterministic open-loop actions, (T, E, nu): smooth, different per env, sometimes beyond ±1.
fn actions(t: usize, e: usize, nu: usize) -> Vec<f32> {
    let mut a = Vec::with_capacity(t * e * nu);
    for step in 0..t {
        for env in 0..e {
            for k in 0..nu {
                a.push((1.2 * (0.21 * step as f64 + 0.7 * env as f64 + 1.3 * k as f64).sin()) as f32);
            }
        }
    }
    a
}

#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn sim_resets_match_the_cpu() {
    let engine = engine();
    for &(env, profile) in CASES {
        let m = Model::load(env, Some(profile)).unwrap();
        let n = 257;
        let out = engine.sim_rollout(&m, &[], &SimRun { n_envs: n, steps: 0, noise: Some((11, 3)), record: false, block: 128 }).unwrap();
        for e in 0..n {
            let cpu: State<f32> = State::reset(&m, 11, 3, e as u32);
            for i in 0..m.nv() {
                let (g, c) = (out.q[e * m.nv() + i], cpu.q[i]);
                assert_eq!(g.to_bits(), c.to_bits(), "{env} {profile}: first mismatch at [env {e}, q {i}]: gpu={g} cpu={c}");
                let (g, c) = (out.v[e * m.nv() + i], cpu.v[i]);
                assert_eq!(g.to_bits(), c.to_bits(), "{env} {profile}: first mismatch at [env {e}, v {i}]: gpu={g} cpu={c}");
            }
            assert_eq!(out.lengths[e], 0);
        }
    }
}

/// Every state, length and return of `n` whole episodes (open-loop `actions`, reset noise from
/// seed 5) on the GPU, against `State<f32>` on the CPU; `None` when all are equal, else every
/// mismatch, the first first.
fn compare_rollout(engine: &CudaEngine, m: &Model, n: usize, steps: usize, acts: &[f32]) -> Option<Vec<String>> {
    use rayon::prelude::*;
    let (nv, nu) = (m.nv(), m.nu());
    let run = SimRun { n_envs: n, steps, noise: Some((5, 0)), record: true, block: 64 };
    let gpu = engine.sim_rollout(m, acts, &run).unwrap();
    let tag = format!("{} {}{}", m.name, m.profile, if m.terminate_when_unhealthy { "" } else { " without termination" });
    let bad: Vec<String> = (0..n)
        .into_par_iter()
        .filter_map(|e| {
            let mut cpu: State<f32> = State::reset(m, 5, 0, e as u32);
            let row = |t: usize| &gpu.trajectory[(t * n + e) * 2 * nv..(t * n + e + 1) * 2 * nv];
            let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<u32>>();
            let (mut ret, mut len) = (0.0f64, 0u32);
            for t in 0..steps {
                let r = cpu.step(m, &acts[(t * n + e) * nu..(t * n + e + 1) * nu]);
                ret += r.reward as f64;
                len += 1;
                let want: Vec<f32> = cpu.q.iter().chain(&cpu.v).copied().collect();
                if bits(row(t + 1)) != bits(&want) {
                    let i = (0..2 * nv).find(|&i| row(t + 1)[i].to_bits() != want[i].to_bits()).unwrap();
                    return Some(format!("{tag}: first mismatch at [env {e}, step {}, state {i}]: gpu={} cpu={}", t + 1, row(t + 1)[i], want[i]));
                }
                if r.done {
                    break;
                }
            }
            if len != gpu.lengths[e] || ret.to_bits() != gpu.returns[e].to_bits() {
                return Some(format!("{tag}: env {e}: gpu {} steps, return {}; cpu {len} steps, return {ret}", gpu.lengths[e], gpu.returns[e]));
            }
            None
        })
        .collect();
    (!bad.is_empty()).then_some(bad)
}

#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn sim_rollout_matches_reference() {
    let engine = engine();
    let mut failures = Vec::new();
    for &(env, profile) in CASES {
        let mut m = Model::load(env, Some(profile)).unwrap();
        // Whole episodes (1000 steps), and 300 steps more of fallen robots without termination.
        for terminate in [true, false] {
            if !terminate && !m.terminate_when_unhealthy {
                continue;
            }
            m.terminate_when_unhealthy = terminate;
            let (n, steps) = (64, if terminate { m.episode_steps } else { 300 });
            if let Some(bad) = compare_rollout(&engine, &m, n, steps, &actions(steps, n, m.nu())) {
                eprintln!("{} of {n} episodes differ:\n  {}", bad.len(), bad.join("\n  "));
                failures.push(bad[0].clone());
            }
        }
    }
    assert!(failures.is_empty(), "{} (env, profile) runs differ, the first: {}", failures.len(), failures[0]);
}

/// Regression: the engine cached modules by file name, so every model after the first ran the
/// first one's sim.cu (Hopper's resets came from Swimmer's module, Gymnasium's RK4 Swimmer ran
/// Brax's Euler one).
#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn sim_modules_are_per_model() {
    let engine = engine();
    let models = [Model::load("swimmer", Some("brax")).unwrap(), Model::load("swimmer", Some("gymnasium")).unwrap(), Model::load("hopper", Some("brax")).unwrap()];
    for m in &models {
        let nv = m.nv();
        let out = engine.sim_rollout(m, &[], &SimRun { n_envs: 4, steps: 0, noise: Some((1, 0)), record: false, block: 32 }).unwrap();
        let cpu: State<f32> = State::reset(m, 1, 0, 3);
        assert_eq!(&out.q[3 * nv..4 * nv], &cpu.q[..], "{} {}: reset q of env 3 (gpu, cpu)", m.name, m.profile);
        assert_eq!(&out.v[3 * nv..4 * nv], &cpu.v[..], "{} {}: reset v of env 3 (gpu, cpu)", m.name, m.profile);
    }
    let sims = engine.module_loads().iter().filter(|l| l.module.starts_with("sim.cu")).count();
    assert_eq!(sims, 3, "one sim.cu module per (env, profile): {:?}", engine.module_loads().iter().map(|l| &l.module).collect::<Vec<_>>());
}

#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn sim_rejects_a_wrong_action_buffer() {
    let engine = engine();
    let m = Model::load("hopper", None).unwrap();
    let err = engine.sim_rollout(&m, &[0.0; 10], &SimRun { n_envs: 4, steps: 2, noise: None, record: false, block: 64 }).unwrap_err();
    assert!(err.to_string().contains("steps × envs × nu = 24"), "{err}");
}
