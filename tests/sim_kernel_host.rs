//! Runs the GPU simulator's own code (`kernels/sim.cu`) on the CPU: g++ compiles it as host C++
//! after a small CUDA shim (`tests/cuda_host_shim.h`) and the generated `grove_env.h`, and the
//! result must equal the Rust f32 reference (`src/sim/`) bit for bit: every state of whole
//! 1000-step episodes under random actions, the lengths and the returns, for every shipped
//! environment and profile, with termination and without (a fallen robot lying on the floor
//! keeps its contacts busy). The build is the GPU's arithmetic: `-ffp-contract=off` fuses
//! nothing, as `--fmad=false` on the device, and the libm functions whose CUDA versions round
//! differently (`sinf`, `powf`, `log`, `cos`, …) are poisoned, so the kernel can only compute
//! with IEEE `+ − × ÷ √` and grove's own math (`grove_math.cuh`). `tests/cuda_sim.rs` checks
//! the real GPU. Skips (saying so) when no C++ compiler is found, unless `GROVE_REQUIRE_CXX=1`.

use std::io::Write;
use std::process::{Command, Stdio};

use grove::backend::cuda::sim::sim_full_source;
use grove::rng::{Purpose, Stream};
use grove::sim::{Model, State};

#[path = "support/emulator.rs"]
mod emulator;
use emulator::poison_libm;

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

/// One row of f32 bits (hexadecimal) from the host program.
fn bits32(line: &str) -> Vec<u32> {
    line.split(' ').map(|x| u32::from_str_radix(x, 16).unwrap()).collect()
}

#[test]
fn the_kernel_code_run_on_the_host_equals_the_reference_bit_for_bit() {
    let Some(cxx) = cxx() else { return };
    let root = env!("CARGO_MANIFEST_DIR");
    let dir = std::env::temp_dir().join(format!("grove-sim-host-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (n, seed) = (3usize, 9u64);
    let mut compared_steps = 0;
    for (env, _) in grove::sim::spec::SHIPPED {
        for profile in ["brax", "gymnasium"] {
            for terminate in [true, false] {
                let mut m = Model::load(env, Some(profile)).unwrap();
                m.terminate_when_unhealthy &= terminate;
                let steps = m.episode_steps;
                let tag = format!("{env}_{profile}_{terminate}");
                let src = dir.join(format!("{tag}.cpp"));
                let body = format!(
                    "#include \"{root}/tests/cuda_host_shim.h\"\n{}{}\n#include \"{root}/tests/support/sim_host_main.cpp\"\n",
                    poison_libm(),
                    sim_full_source(&m)
                );
                std::fs::write(&src, body).unwrap();
                let exe = dir.join(&tag);
                let out = Command::new(&cxx).args(["-O1", "-std=c++20", "-pthread", "-ffp-contract=off", "-o"]).arg(&exe).arg(&src).output().unwrap();
                assert!(out.status.success(), "{tag}: {}", String::from_utf8_lossy(&out.stderr));
                // Uniform on ±1.2 (past the control range now and then, so clipping is exercised).
                let nu = m.nu();
                let mut rng = Stream::new(seed, 0, 0, Purpose::Bench);
                let acts: Vec<f32> = (0..steps * n * nu).map(|_| 2.4 * rng.unit_f32() - 1.2).collect();
                let mut child = Command::new(&exe)
                    .args([n.to_string(), steps.to_string(), seed.to_string(), "1".into(), "1".into()])
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .spawn()
                    .unwrap();
                let text: String = acts.iter().map(|a| format!("{a:e} ")).collect();
                child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
                let out = child.wait_with_output().unwrap();
                assert!(out.status.success(), "{tag}: the host run failed");
                let stdout = String::from_utf8_lossy(&out.stdout);
                let lines: Vec<&str> = stdout.lines().collect();
                assert_eq!(lines.len(), n + (steps + 1) * n);
                let nv = m.nv();
                for e in 0..n {
                    let mut s: State<f32> = State::reset(&m, seed, 0, e as u32);
                    let row = |t: usize| bits32(lines[n + t * n + e]);
                    let state_bits = |s: &State<f32>| s.q.iter().chain(&s.v).map(|x| x.to_bits()).collect::<Vec<u32>>();
                    assert_eq!(row(0), state_bits(&s), "{tag} env {e}: the reset state");
                    let (mut ret, mut len) = (0.0f64, 0usize);
                    for t in 0..steps {
                        let a = &acts[(t * n + e) * nu..(t * n + e + 1) * nu];
                        let r = s.step(&m, a);
                        ret += r.reward as f64;
                        len += 1;
                        let (got, want) = (row(t + 1), state_bits(&s));
                        if let Some(i) = (0..2 * nv).find(|&i| got[i] != want[i]) {
                            panic!(
                                "{tag}: first mismatch at [env {e}, step {}, state {i}]: kernel={} reference={}",
                                t + 1,
                                f32::from_bits(got[i]),
                                f32::from_bits(want[i])
                            );
                        }
                        if r.done {
                            break;
                        }
                    }
                    compared_steps += len;
                    let f: Vec<&str> = lines[e].split(' ').collect();
                    assert_eq!(f[0].parse::<usize>().unwrap(), len, "{tag} env {e}: episode length");
                    let got = f64::from_bits(u64::from_str_radix(f[1], 16).unwrap());
                    assert_eq!(got.to_bits(), ret.to_bits(), "{tag} env {e}: return kernel={got} reference={ret}");
                    if !terminate {
                        assert_eq!(len, steps, "{tag} env {e}: without termination every episode is whole");
                    }
                }
            }
        }
    }
    eprintln!("sim_kernel_host: {compared_steps} control steps equal bit for bit");
    let _ = std::fs::remove_dir_all(&dir);
}
