//! Parity of the control kernels (`grove_control_rollout`, `grove_control_reduce` in
//! `kernels/sim.cu`) with the CPU reference (`backend::cpu::control`) on a GPU, and the control task
//! run end to end on CUDA. Ignored unless built with `GROVE_TEST_GPU=1` (then a missing GPU is
//! a failure). Both sides run the same f32 stepper and interpreter bit for bit (grove's own
//! math, nothing fused, model constants combined on the host; `tests/control_kernel_host.rs`
//! checks the kernel's code under g++), so every episode's validity, length and return, and
//! every mean, must be equal, over whole 1000-step episodes of every shipped environment and
//! profile (and 300 steps without termination), and with the observations' statistics asked for
//! (the normaliser's sums), every episode's count, sums and sums of squares. On failure every
//! episode is printed. Each case
//! runs twice: with the engine's launch (as many threads as stay resident, here more than the
//! episodes) and with one block of 64 threads for 120 episodes, whose threads refill from the
//! kernel's queue as their episodes end, with the edge cases spread among the policies
//! (`support::interleaved`).

#![allow(clippy::needless_range_loop)] // parallel arrays (episodes, means, masks) indexed together

use grove::backend::cuda::control::ControlGrid;
use grove::backend::cuda::CudaEngine;
use grove::backend::cpu::control::{control_rollout, control_rollout_observed, mean_returns, ControlRun};
use grove::sim::Model;

#[path = "support/policies.rs"]
mod support;

fn engine() -> CudaEngine {
    CudaEngine::new().unwrap_or_else(|e| panic!("GROVE_TEST_GPU=1 but {e}"))
}

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
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn control_matches_reference() {
    let engine = engine();
    let mut failures = Vec::new();
    for &(env, profile) in CASES {
        for grid in [ControlGrid::Resident, ControlGrid::Threads(64)] {
            let m = Model::load(env, Some(profile)).unwrap();
            let (p, k) = (40usize, 3usize);
            let mut pop = if grid == ControlGrid::Resident { support::policies(&m, p, 11) } else { support::interleaved(&m, p, 11) };
            // Row 0: deeper than the kernel's stack; the host plays it on the CPU.
            pop.set_tree(0, &support::deep_chain(70)).unwrap();
            // Whole episodes as the task plays them, then (for robots that can fall) 300 steps
            // without termination, fallen robots included.
            for ignore_termination in [false, true] {
                if ignore_termination && !m.terminate_when_unhealthy {
                    continue;
                }
                let steps = if ignore_termination { 300 } else { m.episode_steps };
                let run = ControlRun { episodes: k, steps, seed: 3, generation: 2, noise: true, ignore_termination };
                let tag = format!("{env} {profile} T={steps}{} {grid:?}", if ignore_termination { " without termination" } else { "" });
                // The refilling launch also sums each episode's observations (the normaliser's
                // statistics), which must be the CPU's bits too.
                // Gymnasium's refilling launch has its policies read through a normaliser.
                let observe = grid != ControlGrid::Resident;
                let scale = (observe && profile == "gymnasium").then(|| support::test_scale(m.obs_size));
                let gpu = if observe { engine.control_returns_observed(&pop, &m, &run, grid, scale.as_ref()) } else { engine.control_returns_with(&pop, &m, &run, grid) }.unwrap();
                let (cpu, cpu_seen) = control_rollout_observed(&pop, &m, &run, scale.as_ref());
                failures.extend(compare(&tag, &gpu, &cpu, &cpu_seen, k, observe));
            }
        }
    }
    assert!(failures.is_empty(), "{} runs differ, the first: {}", failures.len(), failures[0]);
}

/// Compares a GPU roll-out with the CPU's episodes `cpu` (and with `observe` their statistics
/// `cpu_seen`), `k` episodes an individual; prints every episode on a difference and gives the
/// first.
fn compare(tag: &str, gpu: &grove::backend::cuda::control::ControlOutcome, cpu: &[grove::backend::cpu::control::Episode], cpu_seen: &[grove::sim::stats::ObsStats], k: usize, observe: bool) -> Option<String> {
    let p = cpu.len() / k;
    let cpu_means = mean_returns(cpu, k);
    assert_eq!(gpu.episodes.len(), p * k);
    let mut bad = Vec::new();
    let mut report = String::new();
    for g in 0..p * k {
        let (a, c) = (gpu.episodes[g], cpu[g]);
        report += &format!("  [{}, {}] gpu {} {} {:.17}  cpu {} {} {:.17}\n", g / k, g % k, a.valid, a.steps, a.ret, c.valid, c.steps, c.ret);
        if observe && gpu.observed[g] != cpu_seen[g] {
            let bits = |s: &grove::sim::stats::ObsStats| (s.n, s.sums().iter().chain(s.sums_of_squares()).map(|x| x.to_bits()).collect::<Vec<_>>());
            if bits(&gpu.observed[g]) != bits(&cpu_seen[g]) {
                bad.push(format!("{tag}: [individual {}, episode {}]: observation statistics gpu {:?} cpu {:?}", g / k, g % k, gpu.observed[g], cpu_seen[g]));
            }
        }
        if a.valid != c.valid || a.steps != c.steps || a.ret.to_bits() != c.ret.to_bits() {
            bad.push(format!(
                "{tag}: [individual {}, episode {}]: gpu valid {} over {} steps return {}; cpu valid {} over {} steps return {}",
                g / k,
                g % k,
                a.valid,
                a.steps,
                a.ret,
                c.valid,
                c.steps,
                c.ret
            ));
        }
    }
    for i in 0..p {
        if gpu.means[i].to_bits() != cpu_means[i].to_bits() && !(gpu.means[i].is_nan() && cpu_means[i].is_nan()) {
            bad.push(format!("{tag}: mean of individual {i}: gpu={} cpu={}", gpu.means[i], cpu_means[i]));
        }
    }
    let valid = cpu.iter().filter(|e| e.valid).count();
    eprintln!("{tag}: {} of {} episodes and means differ ({valid} valid episodes)", bad.len(), p * k + p);
    if !bad.is_empty() {
        eprintln!("{tag}, every episode (valid steps return):\n{report}{}", bad.join("\n"));
        return Some(bad[0].clone());
    }
    None
}

/// Every episode played by groups of 2 to 32 lanes (`CudaEngine::set_episode_lanes`; the
/// constraint rows shared out among them) has the one-lane kernel's bits, which are the CPU's: every shipped environment and profile, with the
/// engine's launch and with one block of 64 threads refilling from the queue (the observation
/// sums asked for, Gymnasium's policies reading through a normaliser), whole episodes.
#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn control_with_lanes_per_episode_matches_reference() {
    let engine = engine();
    assert!(engine.set_episode_lanes(Some(3)).unwrap_err().to_string().contains("3 lanes an episode"));
    let mut failures = Vec::new();
    for &(env, profile) in CASES {
        let m = Model::load(env, Some(profile)).unwrap();
        let (p, k) = (40usize, 3usize);
        let pop = support::interleaved(&m, p, 13);
        let run = ControlRun { episodes: k, steps: m.episode_steps, seed: 5, generation: 1, noise: true, ignore_termination: false };
        let scale = (profile == "gymnasium").then(|| support::test_scale(m.obs_size));
        let (cpu, cpu_seen) = control_rollout_observed(&pop, &m, &run, scale.as_ref());
        // Every width on every robot (Swimmer's limits give it rows too).
        for lanes in [2u32, 4, 8, 16, 32] {
            // Blocks too large for the GPU's shared memory are one clear error.
            let most = 227 << 10;
            engine.set_episode_lanes(Some(lanes)).unwrap();
            assert_eq!(engine.episode_lanes().unwrap(), Some(lanes));
            if grove::backend::cuda::control::block_shared_bytes(&m, lanes) > most {
                let err = engine.control_returns(&pop, &m, &run).unwrap_err().to_string();
                assert!(err.contains(&format!("{lanes} lanes an episode of {env}")) && err.contains("bytes of shared memory"), "{err}");
                eprintln!("{env} {profile} {lanes} lanes: {err}");
                continue;
            }
            for grid in [ControlGrid::Resident, ControlGrid::Threads(64)] {
                let tag = format!("{env} {profile} {lanes} lanes {grid:?}");
                let gpu = engine.control_returns_observed(&pop, &m, &run, grid, scale.as_ref()).unwrap();
                assert_eq!(gpu.lanes, lanes);
                failures.extend(compare(&tag, &gpu, &cpu, &cpu_seen, k, true));
            }
        }
    }
    // Left to itself the engine gives 120 episodes the widest groups (the device has room:
    // control::spare_lanes).
    engine.set_episode_lanes(None).unwrap();
    let m = Model::load("walker2d", None).unwrap();
    let pop = support::interleaved(&m, 40, 13);
    let run = ControlRun { episodes: 3, steps: 50, seed: 5, generation: 1, noise: true, ignore_termination: false };
    assert_eq!(engine.control_returns(&pop, &m, &run).unwrap().lanes, 32);
    // 20,000 episodes fill it: one lane each.
    let pop = support::interleaved(&m, 5000, 13);
    let run = ControlRun { episodes: 4, steps: 2, ..run };
    assert_eq!(engine.control_returns(&pop, &m, &run).unwrap().lanes, 1);
    assert!(failures.is_empty(), "{} runs differ, the first: {}", failures.len(), failures[0]);
}

/// Left to itself, an engine that would have to compile the width of lanes it picks for a
/// launch plays that launch with one lane while NVRTC compiles the width on another thread
/// (`CudaEngine::module_ready`), then plays with the width once it is compiled: the CPU's bits
/// throughout. The compile is stored in the disk cache, where a fresh engine finds it at once.
#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn a_width_still_compiling_plays_with_one_lane_meanwhile() {
    use grove::backend::cuda::EngineOptions;
    let dir = std::env::temp_dir().join(format!("grove-lanes-behind-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let open = || CudaEngine::with_options(EngineOptions { ordinal: 0, cache_dir: Some(dir.clone()) }).unwrap_or_else(|e| panic!("GROVE_TEST_GPU=1 but {e}"));
    let engine = open();
    let m = Model::load("hopper", None).unwrap();
    let pop = support::interleaved(&m, 40, 13);
    let run = ControlRun { episodes: 3, steps: 60, seed: 5, generation: 1, noise: true, ignore_termination: false };
    let (cpu, cpu_seen) = control_rollout_observed(&pop, &m, &run, None);
    let mut widths = Vec::new();
    let start = std::time::Instant::now();
    loop {
        let gpu = engine.control_returns(&pop, &m, &run).unwrap();
        if let Some(f) = compare(&format!("launch {} ({} lanes)", widths.len(), gpu.lanes), &gpu, &cpu, &cpu_seen, run.episodes, false) {
            panic!("{f}");
        }
        widths.push(gpu.lanes);
        if gpu.lanes != 1 || start.elapsed().as_secs() > 600 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    assert_eq!(widths[0], 1, "the first launch cannot have waited for the 32-lane module: {widths:?}");
    assert_eq!(widths.last(), Some(&32), "the 32-lane module never came: {widths:?}");
    assert!(widths[..widths.len() - 1].iter().all(|&w| w == 1), "{widths:?}");
    let fresh = open();
    assert_eq!(fresh.control_returns(&pop, &m, &run).unwrap().lanes, 32, "a fresh engine reads the width from the disk cache");
    eprintln!("{} launches of one lane while the 32-lane module compiled ({:.1} s)", widths.len() - 1, start.elapsed().as_secs_f64());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn control_rejects_policies_of_the_wrong_width() {
    let engine = engine();
    let m = Model::load("hopper", None).unwrap();
    let pop = grove::program::Population::new(4, 8, 2);
    let err = engine.control_returns(&pop, &m, &ControlRun { episodes: 1, steps: 1, seed: 1, generation: 0, noise: true, ignore_termination: false }).unwrap_err();
    assert!(err.to_string().contains("2 outputs but hopper has 3 actuators"), "{err}");
}

/// The control task end to end on CUDA: a small Swimmer run improves on its first generation.
#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn control_task_runs_on_cuda() {
    use grove::task::control::{ControlSettings, fit};
    let backend = grove::backend::Backend::Cuda(Box::new(engine()));
    let mut s = ControlSettings::default();
    s.engine.pop_size = 500;
    s.engine.generations = 10;
    s.episodes = 2;
    let r = fit(&s, &backend, &grove::task::base::options::RunOptions { quiet: true, ..Default::default() }).unwrap();
    let gens = r.report["generations"].as_array().unwrap();
    let first = gens[0]["best_return"].as_f64().unwrap();
    let last = gens.last().unwrap()["best_return"].as_f64().unwrap();
    assert!(last > first && last > 50.0, "best return {first} → {last}");
    eprintln!("{}", r.summary);
}

/// Linear policies (`task::control::linear`, programs of up to 419 nodes) play the same episodes
/// on the GPU as on the CPU, and a whole `--policy linear` run on CUDA is the CPU's run: the
/// same report but for its timings.
#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn linear_policies_play_as_on_the_cpu_and_a_linear_run_equals_the_cpus() {
    use grove::task::control::linear::{LinearPolicy, Normaliser};
    let engine = engine();
    for &(env, profile) in CASES {
        let m = Model::load(env, Some(profile)).unwrap();
        let (nu, n) = (m.nu(), m.obs_size);
        let norm = Normaliser { mean: (0..n).map(|i| 0.1 * i as f64 - 0.3).collect(), std: (0..n).map(|i| 0.5 + 0.25 * i as f64).collect() };
        let dirs = grove::evolve::ars::directions(5, 0, 24, nu * n);
        let trees: Vec<_> = dirs.iter().map(|w| LinearPolicy { weights: w.iter().map(|x| 0.3 * x).collect(), norm: norm.clone(), nu }.tree()).collect();
        let mut pop = grove::program::Population::new(trees.len(), trees.iter().map(Vec::len).max().unwrap(), nu);
        for (r, t) in trees.iter().enumerate() {
            pop.set_tree(r, t).unwrap();
        }
        let run = ControlRun { episodes: 2, steps: m.episode_steps, seed: 9, generation: 4, noise: true, ignore_termination: false };
        let gpu = engine.control_returns(&pop, &m, &run).unwrap();
        let cpu = control_rollout(&pop, &m, &run);
        assert_eq!(gpu.episodes, cpu, "{env} {profile}: episodes");
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&gpu.means), bits(&mean_returns(&cpu, 2)), "{env} {profile}: means");
    }
    let mut s = grove::task::control::ControlSettings::cli_default(false);
    s.env = "hopper".into();
    s.policy = grove::task::control::PolicyKind::Linear;
    s.engine.generations = 6;
    s.episode_steps = Some(300);
    s.test_episodes = 2;
    let cuda = grove::backend::Backend::Cuda(Box::new(engine));
    assert_runs_equal(&s, &cuda, "hopper");
    // Three searches side by side in one roll-out call, and the choice on validation episodes.
    s.searches = 3;
    s.validation_episodes = 2;
    s.engine.generations = 3;
    assert_runs_equal(&s, &cuda, "hopper, three searches side by side");
}

/// Issue 55's selection and diversity on CUDA: lexicase with each episode a case, unique
/// parents, and GE's default operators (subtree crossover, int-flip at the larger of 0.02 and
/// 1 / used codons) in a `grove control` run are the CPU's run: the same report but for its
/// timings, for tree GP and for a grammar.
#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn lexicase_on_episodes_and_unique_parents_on_cuda_equal_the_cpus_run() {
    use grove::select::{Diversity, Selection};
    let cuda = grove::backend::Backend::Cuda(Box::new(engine()));
    for (grammar, selection, diversity) in [
        (None, Selection::Lexicase, Diversity::None),
        (None, Selection::DownSampled, Diversity::Unique),
        (Some("grammars/swimmer.bnf"), Selection::Lexicase, Diversity::Unique),
        (Some("grammars/swimmer.bnf"), Selection::Tournament, Diversity::Unique),
    ] {
        let mut s = grove::task::control::ControlSettings::cli_default(false);
        s.env = "swimmer".into();
        if let Some(g) = grammar {
            s.functions = None;
            s.grammar = Some(format!("{}/{g}", env!("CARGO_MANIFEST_DIR")));
        }
        s.engine.selection = selection;
        s.engine.down_sample = 2.0;
        s.engine.diversity = diversity;
        s.engine.pop_size = 120;
        s.engine.generations = 4;
        s.episodes = 4;
        s.episode_steps = Some(200);
        s.test_episodes = 2;
        s.check().unwrap();
        assert_runs_equal(&s, &cuda, &format!("{} {selection:?} {diversity:?}", grammar.unwrap_or("tree GP")));
    }
}

/// Runs the control task of `s` on `cuda` and on the CPU and asserts the same reports but for
/// their timings.
fn assert_runs_equal(s: &grove::task::control::ControlSettings, cuda: &grove::backend::Backend, what: &str) {
    let strip = |mut r: serde_json::Value| {
        r.as_object_mut().unwrap().remove("timing");
        // What the device loop moved between the devices (null where the host loop ran).
        r.as_object_mut().unwrap().remove("transfers");
        for g in r["generations"].as_array_mut().unwrap() {
            g.as_object_mut().unwrap().remove("seconds");
        }
        r
    };
    let on_gpu = grove::task::control::fit(s, cuda, &grove::task::base::options::RunOptions { quiet: true, ..Default::default() }).unwrap();
    let on_cpu = grove::task::control::fit(s, &grove::backend::Backend::Cpu, &grove::task::base::options::RunOptions { quiet: true, ..Default::default() }).unwrap();
    assert_eq!(strip(on_gpu.report), strip(on_cpu.report), "{what}");
}

/// A whole `--policy residual` run on CUDA (the linear search, then programs over the normalised
/// observations composed with its policy, played by the roll-out kernel from the host loop) is
/// the CPU's run: the same report but for its timings, on two robots; half_cheetah's head is
/// tuned again between generations (`--head-every 2`), its policies' observations summed on the
/// device.
#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn a_residual_run_on_the_gpu_equals_the_cpus() {
    let cuda = grove::backend::Backend::Cuda(Box::new(engine()));
    for env in ["hopper", "half_cheetah"] {
        let mut s = grove::task::control::ControlSettings::cli_default(false);
        s.env = env.into();
        s.policy = grove::task::control::PolicyKind::Residual;
        s.linear_iterations = 5;
        s.engine.generations = 4;
        s.engine.pop_size = 64;
        s.episode_steps = Some(300);
        s.test_episodes = 2;
        if env == "half_cheetah" {
            (s.head_every, s.head_iterations) = (2, 2);
        }
        assert_runs_equal(&s, &cuda, env);
    }
}

/// `grove rollout --device cuda` (`task::runner::tools::rollout`) prints the line the CPU's f32
/// roll-out prints: fixed and zero actions, with and without reset noise, on two robots.
#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn gpu_rollout_replays_the_cpus_f32_episode() {
    use grove::backend::DeviceChoice;
    use grove::task::runner::tools::{RolloutSettings, rollout};
    let dir = std::env::temp_dir().join(format!("grove-gpu-rollout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (env, nu) in [("hopper", 3usize), ("half_cheetah", 6)] {
        let path = dir.join(format!("{env}.csv"));
        let mut text = (0..nu).map(|j| format!("a{j}")).collect::<Vec<_>>().join(",") + "\n";
        for t in 0..300 {
            text += &(0..nu).map(|j| format!("{:.3}", ((t * 7 + j * 13) as f64 * 0.37).sin())).collect::<Vec<_>>().join(",");
            text += "\n";
        }
        std::fs::write(&path, text).unwrap();
        for (actions, seed) in [(Some(path.clone()), Some(3u64)), (Some(path.clone()), None), (None, Some(5))] {
            let s = |device, f32| RolloutSettings {
                env: Some(env.into()),
                profile: None,
                actions: actions.clone(),
                policy: None,
                states: None,
                seed,
                steps: Some(300),
                ignore_termination: false,
                f32,
                solver_iterations: None,
                device,
            };
            let cpu = rollout(&s(DeviceChoice::Cpu, true)).unwrap();
            let gpu = rollout(&s(DeviceChoice::Cuda, false)).unwrap();
            assert_eq!(gpu, cpu, "{env}, actions {:?}, seed {seed:?}", actions.is_some());
            eprintln!("{gpu}");
        }
    }
}
