//! Runs the GPU simulator's own code (`kernels/sim.cu`) on the CPU: g++ compiles it as host C++
//! after a small CUDA shim (`tests/cuda_host_shim.h`) and the generated `grove_env.h`,
//! and the result must match the Rust reference (`src/sim/`) for every shipped environment and
//! profile. This checks the kernel's equations, slots, solver and reset draws on a machine
//! without a GPU; `tests/cuda_sim.rs` checks the real thing on one. Skips (saying so) when no
//! C++ compiler is found, unless `GROVE_REQUIRE_CXX=1`.

use std::io::Write;
use std::process::{Command, Stdio};

use grove::backend::cuda::sim::sim_full_source;
use grove::sim::{Model, State};

fn cxx() -> Option<String> {
    for c in ["g++", "c++", "clang++"] {
        if Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success()) {
            return Some(c.into());
        }
    }
    if std::env::var("GROVE_REQUIRE_CXX").as_deref() == Ok("1") {
        panic!("GROVE_REQUIRE_CXX=1 but no C++ compiler (g++, c++, clang++) runs");
    }
    let _ = std::io::stderr().write_all(b"SKIPPED sim_kernel_host: no C++ compiler\n");
    None
}

#[test]
fn the_kernel_code_run_on_the_host_matches_the_reference() {
    let Some(cxx) = cxx() else { return };
    let root = env!("CARGO_MANIFEST_DIR");
    let dir = std::env::temp_dir().join(format!("grove-sim-host-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (n, seed) = (6usize, 9u64);
    for (env, _) in grove::sim::spec::SHIPPED {
        for profile in ["brax", "gymnasium"] {
            let m = Model::load(env, Some(profile)).unwrap();
            let steps = (0.5 / m.dt()).round() as usize; // half a second keeps the test quick
            let src = dir.join(format!("{env}_{profile}.cpp"));
            let body = format!(
                "#include \"{root}/tests/cuda_host_shim.h\"\n{}\n#include \"{root}/tests/support/sim_host_main.cpp\"\n",
                sim_full_source(&m)
            );
            std::fs::write(&src, body).unwrap();
            let exe = dir.join(format!("{env}_{profile}"));
            let out = Command::new(&cxx).args(["-O1", "-std=c++20", "-pthread", "-ffp-contract=off", "-o"]).arg(&exe).arg(&src).output().unwrap();
            assert!(out.status.success(), "{env} {profile}: {}", String::from_utf8_lossy(&out.stderr));
            let nu = m.nu();
            let acts: Vec<f32> =
                (0..steps * n * nu).map(|i| (1.2 * (0.21 * (i / (n * nu)) as f64 + 0.7 * (i % (n * nu)) as f64).sin()) as f32).collect();
            let mut child = Command::new(&exe)
                .args([n.to_string(), steps.to_string(), seed.to_string(), "1".into()])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            let text: String = acts.iter().map(|a| format!("{a:e} ")).collect();
            child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
            let out = child.wait_with_output().unwrap();
            assert!(out.status.success(), "{env} {profile}: the host run failed");
            let lines: Vec<Vec<f64>> =
                String::from_utf8_lossy(&out.stdout).lines().map(|l| l.split(' ').map(|x| x.parse().unwrap()).collect()).collect();
            assert_eq!(lines.len(), n);
            for (e, line) in lines.iter().enumerate() {
                let mut s: State<f32> = State::reset(&m, seed, 0, e as u32);
                let (mut ret, mut len) = (0.0f64, 0usize);
                for t in 0..steps {
                    let a = &acts[(t * n + e) * nu..(t * n + e + 1) * nu];
                    let r = s.step(&m, a);
                    ret += r.reward as f64;
                    len += 1;
                    if r.done {
                        break;
                    }
                }
                assert_eq!(line[0] as usize, len, "{env} {profile} env {e}: episode length");
                // Both sides are f32 with the same operation order; they differ by sinf/cosf
                // rounding, which HalfCheetah's stiff contacts amplify within half a second.
                let tol = if *env == "half_cheetah" { 1e-3 } else { 1e-5 };
                let got = &line[2..];
                for (i, (&g, &c)) in got.iter().zip(s.q.iter().chain(&s.v)).enumerate() {
                    assert!(
                        (g - c as f64).abs() <= tol * (c.abs() as f64).max(1.0),
                        "{env} {profile}: first mismatch at [env {e}, state {i}] after {len} steps: kernel={g} reference={c}"
                    );
                }
                assert!((line[1] - ret).abs() <= 1e-3 * ret.abs().max(1.0), "{env} {profile} env {e}: return kernel={} reference={ret}", line[1]);
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
