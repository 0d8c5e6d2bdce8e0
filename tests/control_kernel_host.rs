//! Runs the control kernels' own code (`grove_control_rollout`, `grove_control_reduce` in
//! `kernels/sim.cu`) on the CPU: g++ compiles the full NVRTC source (operator table,
//! grove_math.cuh, rng.cuh, grove_env.h, sim.cu) as host C++ after `tests/cuda_host_shim.h`,
//! with nothing fused and the libm functions CUDA rounds differently poisoned (as in
//! `tests/sim_kernel_host.rs`), and every episode (validity, length, return, and the count, sums
//! and sums of squares of the observations its policy read) and every mean return must equal
//! the CPU reference `backend::cpu::control::control_rollout_observed` and `mean_returns` bit
//! for bit, over whole 1000-step episodes of every shipped environment and profile (and 300
//! steps without termination; fewer for groups of 8 and 32 lanes), for a population of random
//! policies with edge cases among them (an empty row and one reading past the observation,
//! which the host skips; one whose output is infinite at once and one whose output overflows
//! later: `support::interleaved`), and two linear policies as `grove control --policy linear`
//! writes them.
//!
//! The roll-out runs as the GPU runs it: fewer threads than episodes (2 blocks of 3 threads for
//! 20 episodes), each thread refilling from the kernel's work queue when its episode ends. Free
//! real threads take from the queue's atomic at once (Brax profiles, or Gymnasium without
//! termination), or a block's threads run one after another, so that one thread plays a long
//! run of episodes back to back (the other runs). Every episode must have been played exactly
//! as if alone, and the queue's final count must be the number of episodes.
//! `tests/cuda_control.rs` checks the real GPU. Skips (saying so) without a C++20 compiler,
//! unless `GROVE_REQUIRE_CXX=1`. `GROVE_DEBUG_CONTROL=1` prints every episode of both sides.

#![allow(clippy::needless_range_loop)] // parallel arrays (episodes, means, masks) indexed together

use std::io::Write;
use std::process::{Command, Stdio};

use grove::backend::cuda::control::{skip_mask, SKIP_INVALID};
use grove::backend::cuda::sim::sim_full_source;
use grove::backend::cpu::control::{control_rollout_observed, mean_returns, ControlRun};
use grove::sim::Model;

#[path = "support/policies.rs"]
mod support;
use support::{interleaved, test_scale};

#[path = "support/emulator.rs"]
mod emulator;
use emulator::poison_libm;

fn cxx() -> Option<String> {
    for c in ["g++", "c++"] {
        if Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success()) {
            return Some(c.into());
        }
    }
    if std::env::var("GROVE_REQUIRE_CXX").as_deref() == Ok("1") {
        panic!("GROVE_REQUIRE_CXX=1 but no C++ compiler (g++, c++) runs");
    }
    eprintln!("SKIPPED control_kernel_host: no C++ compiler");
    None
}

#[test]
fn the_control_kernel_run_on_the_host_equals_the_reference_bit_for_bit() {
    compare_with_reference(1, usize::MAX);
}

/// The kernel built with groups of lanes per episode (`GROVE_CTRL_LANES`): 3 groups of 4 lanes,
/// each group a block of real threads meeting at every `__syncwarp`, with the constraint rows
/// shared out among them, must play every episode with the one-lane kernel's bits.
#[test]
fn the_control_kernel_with_four_lanes_an_episode_equals_the_reference_bit_for_bit() {
    compare_with_reference(4, usize::MAX);
}

/// Two lanes: each takes several bodies, entries and rows (every robot has more than two).
#[test]
fn the_control_kernel_with_two_lanes_an_episode_equals_the_reference_bit_for_bit() {
    compare_with_reference(2, usize::MAX);
}

/// Eight lanes: about one body a lane (Swimmer 3 bodies, Hopper 4, Walker2d 7, HalfCheetah 8).
/// Episodes of at most 300 steps: eight real threads meeting at every `__syncwarp` on a small
/// machine are slow.
#[test]
fn the_control_kernel_with_eight_lanes_an_episode_equals_the_reference_bit_for_bit() {
    compare_with_reference(8, 300);
}

/// A warp of 32 lanes: more lanes than bodies, DOFs and most row counts, so many lanes idle in
/// each shared part and M's 15 to 45 lower entries leave some lanes one entry. Episodes of at
/// most 60 steps (long enough for the falling robots' contacts): 32 real threads meeting at every
/// `__syncwarp` take about a millisecond a meeting on two cores.
#[test]
fn the_control_kernel_with_a_warp_an_episode_equals_the_reference_bit_for_bit() {
    compare_with_reference(32, 60);
}

/// Builds the roll-out with `lanes` lanes per episode and compares every (env, profile) pair's
/// episodes, of at most `most_steps` steps, with the reference (see the file's head).
fn compare_with_reference(lanes: usize, most_steps: usize) {
    let Some(cxx) = cxx() else { return };
    let root = env!("CARGO_MANIFEST_DIR");
    let dir = std::env::temp_dir().join(format!("grove-control-host-{}-{lanes}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut compared_steps = 0;
    for (env, _) in grove::sim::spec::SHIPPED {
        for profile in ["brax", "gymnasium"] {
            let m = Model::load(env, Some(profile)).unwrap();
            let (p, k) = (10usize, 2usize);
            // One lane an episode: 2 blocks of 3 threads; several: 3 groups (a block each).
            let (grid, block) = if lanes == 1 { (2usize, 3usize) } else { (3, lanes) };
            // Rows 8 and 9: linear policies (`--policy linear`: programs of up to 419 nodes).
            let pop = with_linear_rows(&m, &interleaved(&m, p, 5), &[8, 9]);
            let src = dir.join(format!("{env}_{profile}.cpp"));
            let mut kernel = sim_full_source(&m);
            if lanes > 1 {
                // The group's rows in a static block of memory (one block runs at a time).
                let dynamic = "extern __shared__ float grove_ctrl_shared[];";
                assert!(kernel.contains(dynamic), "sim.cu no longer has `{dynamic}`");
                kernel = format!("#define GROVE_CTRL_LANES {lanes}\n{}", kernel.replace(dynamic, "static float grove_ctrl_shared[1 << 16];"));
            }
            let body = format!(
                "#include \"{root}/tests/cuda_host_shim.h\"\n{}{}\n#include \"{root}/tests/support/control_host_main.cpp\"\n",
                poison_libm(),
                kernel
            );
            std::fs::write(&src, body).unwrap();
            let exe = dir.join(format!("{env}_{profile}"));
            let out = Command::new(&cxx).args(["-O1", "-std=c++20", "-pthread", "-ffp-contract=off", "-w", "-o"]).arg(&exe).arg(&src).output().unwrap();
            if !out.status.success() {
                let err = String::from_utf8_lossy(&out.stderr);
                if err.contains("barrier") {
                    eprintln!("SKIPPED control_kernel_host: this g++ lacks C++20 <barrier>");
                    return;
                }
                panic!("{env} {profile}: {err}");
            }
            // Whole episodes with termination (the task's mode), then, for robots that can
            // fall, 300 steps without (the benchmarks' mode: fallen robots keep their contacts
            // busy; a fallen Gymnasium Walker2d's solves run to the sweep cap, so 1000 steps
            // would take half a minute).
            for ignore_termination in [false, true] {
                if ignore_termination && !m.terminate_when_unhealthy {
                    continue; // the same episodes again
                }
                let steps = if ignore_termination { 300 } else { m.episode_steps }.min(most_steps);
                let run = ControlRun { episodes: k, steps, seed: 7, generation: 0, noise: true, ignore_termination };
                // Free threads for Brax with termination and Gymnasium without; one after
                // another for the other two.
                let par = (profile == "brax") != ignore_termination;
                let skip = skip_mask(&pop, &m);
                // The empty tree and the one reading past the observation never reach the
                // kernel; the infinite and the overflowing outputs are the kernel's to find.
                assert_eq!(&skip[..7], &[0, SKIP_INVALID, 0, 0, 0, SKIP_INVALID, 0], "the host marks the edge cases");
                let mut input = String::new();
                for i in 0..p {
                    let t = pop.tree(i);
                    input += &format!("{} {}", skip[i], t.len());
                    for j in 0..t.len() {
                        // %a: the exact bits of each value.
                        input += &format!(" {} {} {} {}", t.op[j], hexf(t.value[j]), t.size[j], t.out[j]);
                    }
                    input.push('\n');
                }
                // Gymnasium's policies read their observations through a normaliser (one
                // component of zero deviation, which they read as 0), Brax's as they are.
                let scale = (profile == "gymnasium").then(|| test_scale(m.obs_size));
                if let Some(s) = &scale {
                    input += &s.words().iter().map(|&x| hexf(x)).collect::<Vec<_>>().join(" ");
                    input.push('\n');
                }
                let args = [p, k, steps, pop.max_len, run.seed as usize, 1 + 2 * ignore_termination as usize, grid, block];
                let mut child = Command::new(&exe)
                    .args(args.map(|a| a.to_string()))
                    .arg(if lanes > 1 { "lanes" } else if par { "par" } else { "seq" })
                    .args(scale.as_ref().map(|_| "scale"))
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .spawn()
                    .unwrap();
                child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
                // The reference plays while the kernel's code runs.
                let (cpu, cpu_seen) = control_rollout_observed(&pop, &m, &run, scale.as_ref());
                let out = child.wait_with_output().unwrap();
                assert!(out.status.success(), "{env} {profile}: the host run failed ({:?})", out.status);
                let text = String::from_utf8_lossy(&out.stdout);
                let lines: Vec<&str> = text.lines().collect();
                assert_eq!(lines.len(), p * k + p + 1);
                let cpu_means = mean_returns(&cpu, k);
                let tag = format!(
                    "{env} {profile}{}{} ({grid} × {block} {})",
                    if ignore_termination { " without termination" } else { "" },
                    if scale.is_some() { ", normalised" } else { "" },
                    if lanes > 1 { format!("of {lanes} lanes") } else if par { "free threads".into() } else { "sequential threads".into() }
                );
                for g in 0..p * k {
                    let f: Vec<&str> = lines[g].split(' ').collect();
                    let (valid, len, ret): (u32, u32, f64) = (f[0].parse().unwrap(), f[1].parse().unwrap(), f[2].parse().unwrap());
                    let c = cpu[g];
                    if std::env::var("GROVE_DEBUG_CONTROL").is_ok() {
                        eprintln!("{tag} [{}, {}]: kernel {valid} {len} {ret:.17}, reference {} {} {:.17}", g / k, g % k, c.valid, c.steps, c.ret);
                    }
                    let at = format!("{tag}: [individual {}, episode {}]", g / k, g % k);
                    assert!(valid <= 1, "{at}: no thread played this episode ({valid} {len} {ret})");
                    assert_eq!(valid == 1, c.valid, "{at}: validity");
                    if ignore_termination && c.valid {
                        assert_eq!(c.steps as usize, steps, "{at}: the reference ignores termination");
                    }
                    assert_eq!(len, c.steps, "{at}: episode length");
                    assert_eq!(ret.to_bits(), c.ret.to_bits(), "{at}: return over {len} steps: kernel={ret} reference={}", c.ret);
                    let seen: Vec<f64> = f[3..].iter().map(|x| x.parse().unwrap()).collect();
                    assert_eq!(seen.len(), 1 + 2 * m.obs_size, "{at}: a row of observation statistics");
                    let want = &cpu_seen[g];
                    assert_eq!(seen[0] as u64, want.n, "{at}: observations read");
                    // A policy reads the observation before it acts, so an invalid episode's last too.
                    assert_eq!(want.n, c.steps as u64 + u64::from(!c.valid && skip[g / k] == 0 && steps > 0), "{at}: observations against steps");
                    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&seen[1..1 + m.obs_size]), bits(want.sums()), "{at}: sums of the observations");
                    assert_eq!(bits(&seen[1 + m.obs_size..]), bits(want.sums_of_squares()), "{at}: sums of their squares");
                    compared_steps += len as usize;
                }
                for i in 0..p {
                    let got: f64 = lines[p * k + i].parse().unwrap();
                    assert!(got.to_bits() == cpu_means[i].to_bits() || got.is_nan() && cpu_means[i].is_nan(), "{tag}: mean of individual {i}: kernel={got} reference={}", cpu_means[i]);
                }
                let taken: usize = lines[p * k + p].parse().unwrap();
                assert_eq!(taken, p * k, "{tag}: every thread takes from the queue until it finds it empty, so the count ends at P·K");
                for i in [0, 2, 4, 7, 8, 9] {
                    assert!(cpu_means[i].is_finite(), "{tag}: random policy {i} is valid: {cpu_means:?}");
                }
                let lens: Vec<u32> = cpu.iter().map(|e| e.steps).collect();
                eprintln!("{tag}: lengths {lens:?}; late overflow {:?}", &cpu[6 * k..7 * k]);
            }
        }
    }
    eprintln!("control_kernel_host ({lanes} lanes an episode): {compared_steps} control steps of policies give equal returns");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `base` with rows `rows` replaced by linear policies (`task::control::linear`) of random
/// weights over a normaliser with means and deviations of every scale.
fn with_linear_rows(m: &Model, base: &grove::program::Population, rows: &[usize]) -> grove::program::Population {
    use grove::task::control::linear::{LinearPolicy, Normaliser};
    let (nu, n) = (m.nu(), m.obs_size);
    let norm = Normaliser { mean: (0..n).map(|i| 0.2 * i as f64 - 0.5).collect(), std: (0..n).map(|i| 0.3 + 0.4 * i as f64).collect() };
    let dirs = grove::evolve::ars::directions(11, 0, rows.len(), nu * n);
    let trees: Vec<_> = dirs.iter().map(|w| LinearPolicy { weights: w.iter().map(|x| 0.5 * x).collect(), norm: norm.clone(), nu }.tree()).collect();
    let width = trees.iter().map(Vec::len).max().unwrap_or(0).max(base.max_len);
    let mut pop = grove::program::Population::new(base.size(), width, base.n_outputs);
    for r in 0..base.size() {
        match rows.iter().position(|&x| x == r) {
            Some(k) => pop.set_tree(r, &trees[k]).unwrap(),
            None => {
                // Row by row across widths: the edge cases (an empty row, a bad variable) as
                // they are, which set_tree would refuse.
                let (d, b, n) = (r * width, r * base.max_len, base.len[r] as usize);
                pop.op[d..d + n].copy_from_slice(&base.op[b..b + n]);
                pop.value[d..d + n].copy_from_slice(&base.value[b..b + n]);
                pop.size[d..d + n].copy_from_slice(&base.size[b..b + n]);
                pop.out[d..d + n].copy_from_slice(&base.out[b..b + n]);
                pop.len[r] = base.len[r];
            }
        }
    }
    pop
}

/// An f32 as C's `%a` reads it (hexadecimal, exact).
fn hexf(x: f32) -> String {
    if x == 0.0 {
        return if x.is_sign_negative() { "-0x0p+0".into() } else { "0x0p+0".into() };
    }
    let b = x.to_bits();
    let sign = if b >> 31 == 1 { "-" } else { "" };
    let exp = ((b >> 23) & 0xff) as i32;
    let man = b & 0x7f_ffff;
    if exp == 0 {
        format!("{sign}0x0.{:06x}p-126", man << 1)
    } else {
        format!("{sign}0x1.{:06x}p{:+}", man << 1, exp - 127)
    }
}
