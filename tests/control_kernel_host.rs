//! Runs the control kernels' own code (`grove_control_rollout`, `grove_control_reduce` in
//! `kernels/sim.cu`) on the CPU: g++ compiles the full NVRTC source (operator table,
//! grove_math.cuh, rng.cuh, grove_env.h, sim.cu) as host C++ after `tests/cuda_host_shim.h`, and
//! the episodes and mean returns must match the CPU reference `program::policy::control_rollout`
//! and `mean_returns` for a population of random policies (plus an empty one, one with an
//! infinite output and one reading past the observation). `tests/cuda_control.rs` checks the
//! real GPU. Skips (saying so) without a C++20 compiler, unless `GROVE_REQUIRE_CXX=1`.
//! `GROVE_DEBUG_CONTROL=1` prints every episode of both sides.

#![allow(clippy::needless_range_loop)] // parallel arrays (episodes, means, masks) indexed together

use std::io::Write;
use std::process::{Command, Stdio};

use grove::backend::cuda::control::{skip_mask, SKIP_INVALID};
use grove::backend::cuda::sim::sim_full_source;
use grove::program::policy::{control_rollout, mean_returns, ControlRun};
use grove::sim::Model;

#[path = "support/policies.rs"]
mod support;
use support::policies;

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
fn the_control_kernel_run_on_the_host_matches_the_reference() {
    let Some(cxx) = cxx() else { return };
    let root = env!("CARGO_MANIFEST_DIR");
    let dir = std::env::temp_dir().join(format!("grove-control-host-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (env, profile) in [("swimmer", "brax"), ("hopper", "brax"), ("hopper", "gymnasium")] {
        let m = Model::load(env, Some(profile)).unwrap();
        let (p, k) = (10usize, 2usize);
        let pop = policies(&m, p, 5);
        let src = dir.join(format!("{env}_{profile}.cpp"));
        let body = format!(
            "#include \"{root}/tests/cuda_host_shim.h\"\n{}\n#include \"{root}/tests/support/control_host_main.cpp\"\n",
            sim_full_source(&m)
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
        // Five steps: rounding has not grown yet, so the returns agree closely. 150 steps: the
        // f32 rounding of libm and of the Rust reference is amplified by the feedback through
        // the policy (a few in a thousand on chaotic policies), so the bound is loose; a wrong
        // slot, sign or operator moves returns by far more.
        // The third run ignores termination (the benchmarks' mode): every valid episode is 60 steps.
        for (steps, tol, ignore_termination) in [(5usize, 1e-5, false), (150, 2e-2, false), (60, 2e-2, true)] {
            let run = ControlRun { episodes: k, steps, seed: 7, generation: 0, noise: true, ignore_termination };
            let skip = skip_mask(&pop, &m);
            // The empty tree and the one reading past the observation never reach the kernel; the
            // infinite output is the kernel's to find.
            assert_eq!(&skip[p - 3..], &[SKIP_INVALID, 0, SKIP_INVALID], "the host marks the edge cases");
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
            let mut child = Command::new(&exe)
                .args([p.to_string(), k.to_string(), steps.to_string(), pop.max_len.to_string(), run.seed.to_string(), (1 + 2 * ignore_termination as u32).to_string()])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
            let out = child.wait_with_output().unwrap();
            assert!(out.status.success(), "{env} {profile}: the host run failed ({:?})", out.status);
            let text = String::from_utf8_lossy(&out.stdout);
            let lines: Vec<&str> = text.lines().collect();
            assert_eq!(lines.len(), p * k + p);
            let cpu = control_rollout(&pop, &m, &run);
            let cpu_means = mean_returns(&cpu, k);
            let mut compared = 0;
            for g in 0..p * k {
                let f: Vec<&str> = lines[g].split(' ').collect();
                let (valid, len, ret): (bool, u32, f64) = (f[0] == "1", f[1].parse().unwrap(), f[2].parse().unwrap());
                let c = cpu[g];
                if ignore_termination && c.valid {
                    assert_eq!(c.steps as usize, steps, "{env} {profile}: the reference ignores termination");
                }
                assert_eq!(valid, c.valid, "{env} {profile}: validity of [individual {}, episode {}]", g / k, g % k);
                if !c.valid {
                    continue;
                }
                if std::env::var("GROVE_DEBUG_CONTROL").is_ok() {
                    eprintln!("{env} {profile} [{}, {}]: kernel {valid} {len} {ret:.9}, reference {} {} {:.9}", g / k, g % k, c.valid, c.steps, c.ret);
                }
                // Both sides step the same f32 equations; libm's and the Rust reference's rounding
                // may move a termination by a step where a state grazes a health bound.
                if len == c.steps {
                    assert!(
                        (ret - c.ret).abs() <= tol * c.ret.abs().max(1.0),
                        "{env} {profile}: first mismatch at [individual {}, episode {}] over {len} steps: kernel={ret} reference={}",
                        g / k,
                        g % k,
                        c.ret
                    );
                    compared += 1;
                }
            }
            assert!(compared * 10 >= cpu.iter().filter(|e| e.valid).count() * 9, "{env} {profile}: only {compared} episodes had the same length");
            for i in 0..p {
                let got: f64 = lines[p * k + i].parse().unwrap();
                assert_eq!(got.is_nan(), cpu_means[i].is_nan(), "{env} {profile}: mean of individual {i}: kernel={got} reference={}", cpu_means[i]);
            }
            assert!(cpu_means[..p - 3].iter().all(|r| r.is_finite()), "random policies are valid: {cpu_means:?}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
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
