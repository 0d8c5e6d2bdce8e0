//! Checks of the GPU path that need no GPU: every kernel compiles under NVRTC, every kernel
//! Rust launches exists in the sources, the `.cu` structs are checked against the layout table of
//! the `#[repr(C)]` structs (`grove_common.h`), and
//! probing on a machine without a GPU answers `NoGpu` with a reason instead of panicking.
//!
//! NVRTC comes from the CUDA toolkit or the `nvidia-cuda-nvrtc` wheel (`.ci/run` installs it).
//! Where it cannot be loaded, the compile tests print `SKIPPED` and why, and pass, unless
//! `GROVE_REQUIRE_NVRTC=1` is set (as in CI), which makes them fail.

use std::io::Write;

use grove::backend::cuda::error::GpuError;
use grove::backend::cuda::common;
use grove::backend::cuda::kernels::{self, KernelSource, SOURCES};
use grove::backend::cuda::nvrtc::{self, ImageKind, Target};
use grove::backend::cuda::{cache, probe, CudaEngine, Origin};
use grove::rng::Purpose;

/// True when NVRTC is loaded; false (after saying why) when the test should skip.
fn have_nvrtc(test: &str) -> bool {
    match probe::nvrtc() {
        Ok(info) => {
            eprintln!("{test}: NVRTC {}.{} from {}", info.version.0, info.version.1, info.library);
            true
        }
        Err(e) if std::env::var("GROVE_REQUIRE_NVRTC").as_deref() == Ok("1") => {
            panic!("GROVE_REQUIRE_NVRTC=1 but NVRTC cannot be loaded: {}", e.reason)
        }
        Err(e) => {
            // Written to stderr directly, past the test harness's capture, so a skip is seen.
            let msg = format!("SKIPPED {test}: {} (set GROVE_REQUIRE_NVRTC=1 to make this a failure)\n", e.reason);
            let _ = std::io::stderr().lock().write_all(msg.as_bytes());
            false
        }
    }
}

#[test]
fn every_kernel_compiles_for_sm90_and_sm80() {
    if !have_nvrtc("every_kernel_compiles_for_sm90_and_sm80") {
        return;
    }
    for src in SOURCES {
        for arch in [90, 80] {
            let t = std::time::Instant::now();
            let image = nvrtc::compile(src, Target::Sm(arch), &[]).unwrap_or_else(|e| panic!("{e}"));
            eprintln!("{} for sm_{arch}: {} bytes in {:.2} s", src.file, image.bytes.len(), t.elapsed().as_secs_f64());
            assert_eq!(image.kind, ImageKind::Cubin);
            assert!(image.bytes.starts_with(b"\x7fELF"), "{} for sm_{arch} is not an ELF CUBIN", src.file);
            assert!(!image.log.contains("warning"), "{} for sm_{arch} compiles with warnings:\n{}", src.file, image.log);
        }
    }
}

#[test]
fn every_kernel_compiles_with_user_operators() {
    if !have_nvrtc("every_kernel_compiles_with_user_operators") {
        return;
    }
    // One and two arguments, composition, constants, every step kind: the generated
    // `grove_user_*` functions and GROVE_USER_PARTIALS compile in every kernel without warnings.
    let defs = ["k_softsign(x) = x / (1 + abs(x))", "k_hyp(a, b) = sqrt(a*a + b*b)", "k_mix(a, b) = -k_hyp(a, 2.5e-3) * np.sin(b) + 1", "k_id(x) = x"];
    let ops = grove::program::ops::user::register(&defs.iter().map(|d| d.to_string()).collect::<Vec<_>>()).unwrap();
    for src in SOURCES {
        let text = src.full_source();
        for op in &ops {
            assert!(text.contains(&format!("grove_user_{}(float a, float b)", *op as u8)), "{} lacks {op}", src.file);
        }
        let image = nvrtc::compile(src, Target::Sm(90), &[]).unwrap_or_else(|e| panic!("{e}"));
        assert!(!image.log.contains("warning"), "{} compiles with warnings:\n{}", src.file, image.log);
    }
}

#[test]
fn every_launched_kernel_is_in_the_compiled_ptx() {
    if !have_nvrtc("every_launched_kernel_is_in_the_compiled_ptx") {
        return;
    }
    for src in SOURCES {
        let image = nvrtc::compile(src, Target::Compute(90), &[]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(image.kind, ImageKind::Ptx);
        let ptx = String::from_utf8_lossy(&image.bytes);
        for (name, from) in kernels::launched() {
            if from.file == src.file {
                assert!(ptx.contains(&format!(".entry {name}(")), "kernel {name} is not in the PTX of {}", src.file);
            }
        }
    }
}

#[test]
fn each_points_per_thread_module_holds_what_the_engine_launches_from_it() {
    if !have_nvrtc("each_points_per_thread_module_holds_what_the_engine_launches_from_it") {
        return;
    }
    for k in 1..=8u32 {
        let image = nvrtc::compile(&kernels::EVAL, Target::Compute(90), &[("GROVE_K", k)]).unwrap_or_else(|e| panic!("{e}"));
        let ptx = String::from_utf8_lossy(&image.bytes);
        let i = k as usize - 1;
        let wanted = [kernels::REGRESSION[i], kernels::PREDICT[i], kernels::REGRESSION_DEEP, kernels::PREDICT_DEEP, kernels::REDUCE_REGRESSION, kernels::JOINT_SUMS, kernels::JOINT_FITNESS, kernels::HEAD_SUMS, kernels::CLASS_HEAD_SUMS, kernels::LOSS_SUMS, kernels::SCALE_PREDICTIONS];
        for name in wanted {
            assert!(ptx.contains(&format!(".entry {name}(")), "GROVE_K={k}: {name} missing");
        }
        let entries = ptx.matches(".entry ").count();
        assert_eq!(entries, wanted.len(), "GROVE_K={k} holds other kernels too");
    }
}

#[test]
fn compile_errors_show_the_cu_line() {
    if !have_nvrtc("compile_errors_show_the_cu_line") {
        return;
    }
    let broken = KernelSource {
        file: "broken.cu",
        text: "extern \"C\" __global__ void k(float* o) {\n    o[0] = 1.0f;\n    o[1] = undefined_name;\n}\n",
    };
    let err = nvrtc::compile(&broken, Target::Sm(90), &[]).unwrap_err();
    let GpuError::Compile(c) = &err else { panic!("expected a compile error, got {err}") };
    assert!(c.excerpt.contains(">    3 |     o[1] = undefined_name;"), "{}", c.excerpt);
    assert!(c.excerpt.contains("     2 |     o[0] = 1.0f;"), "{}", c.excerpt);
    let msg = err.to_string();
    assert!(msg.contains("broken.cu:3:") && msg.contains("undefined_name") && msg.contains("NVRTC log"), "{msg}");
}

#[test]
fn the_disk_cache_compiles_once() {
    if !have_nvrtc("the_disk_cache_compiles_once") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("grove-disk-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let src = &kernels::EVAL;
    const V: &[(&str, u32)] = &[("GROVE_K", 1)]; // the smallest variant, to keep the test quick
    let (a, origin, _) = cache::compile_cached(Some(&dir), src, Target::Sm(90), V, "no device", (9, 0)).unwrap();
    assert_eq!(origin, Origin::Compiled);
    let (b, origin, secs) = cache::compile_cached(Some(&dir), src, Target::Sm(90), V, "no device", (9, 0)).unwrap();
    assert_eq!(origin, Origin::Disk);
    assert_eq!(a.bytes, b.bytes);
    assert!(secs < 0.5, "reading the cache took {secs} s");
    // Another device name is another entry.
    let (_, origin, _) = cache::compile_cached(Some(&dir), src, Target::Sm(90), V, "other device", (9, 0)).unwrap();
    assert_eq!(origin, Origin::Compiled);
    let files = std::fs::read_dir(dir.join("kernels")).unwrap().count();
    assert_eq!(files, 2, "one file per entry, no temporary files left");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `extern "C" __global__ void [BOUNDS] NAME(` definitions in a source (the name is the last
/// word before the parenthesis, so a launch-bounds macro may precede it).
fn global_kernels(text: &str) -> Vec<String> {
    let key = "extern \"C\" __global__ void ";
    text.match_indices(key)
        .map(|(i, _)| {
            let rest = &text[i + key.len()..];
            let head = rest[..rest.find('(').unwrap()].trim();
            head.rsplit(char::is_whitespace).next().unwrap().to_string()
        })
        .collect()
}

#[test]
fn launched_kernels_exist_in_the_sources() {
    let launched = kernels::launched();
    // The full sources: a kernel may live in an included header (interp.cuh's compiler).
    for (name, src) in &launched {
        assert!(global_kernels(&src.full_source()).iter().any(|k| k == name), "{name} is not an extern \"C\" __global__ in {}", src.file);
    }
    // And no kernel in the sources is left unlaunched. interp.cuh's grove_compile_trees is in
    // eval.cu's and classify.cu's text too, but compiled only where GROVE_COMPILE_TREES is
    // defined: into sim.cu, whose kernels the simulator test checks.
    for src in SOURCES {
        for k in global_kernels(&src.full_source()) {
            let known = launched.iter().any(|(n, _)| *n == k) || k == kernels::COMPILE_TREES;
            assert!(known, "{} defines {k}, which Rust never launches", src.file);
        }
    }
}

/// The kernel texts as written (before headers are substituted), `(file, text)`: every kernel
/// file, sim.cu among them, and every header.
fn kernel_texts() -> Vec<(&'static str, &'static str)> {
    let files = SOURCES.iter().map(|s| (s.file, s.text)).chain([("sim.cu", grove::backend::cuda::sim::SIM_TEXT)]);
    files.chain(kernels::HEADERS.iter().copied()).collect()
}

#[test]
fn every_shared_struct_is_checked_against_the_layout_table() {
    let texts = kernel_texts();
    // Each struct of the table is defined in one text and checked there, after its definition,
    // with the sizes and offsets generated from the table (which the compile tests then prove).
    for (name, _, _) in common::SIZES {
        let def = format!("struct {name} {{");
        let check = format!("GROVE_CHECK_LAYOUT({name});");
        let defined: Vec<&str> = texts.iter().filter(|(_, t)| t.contains(&def)).map(|(f, _)| *f).collect();
        assert_eq!(defined.len(), 1, "{name} should be defined in one kernel text, not in {defined:?}");
        let text = texts.iter().find(|(f, _)| *f == defined[0]).unwrap().1;
        let at = text.find(&check).unwrap_or_else(|| panic!("{} defines {name} but lacks `{check}`", defined[0]));
        assert!(at > text.find(&def).unwrap(), "{}: `{check}` comes before {name}'s definition", defined[0]);
    }
    for (file, text) in &texts {
        // No layout is asserted by hand, and every check names a struct of the table.
        assert!(!text.contains("static_assert(GROVE_OFFSETOF("), "{file} asserts a field offset by hand");
        for (i, _) in text.match_indices("GROVE_CHECK_LAYOUT(") {
            let rest = &text[i + "GROVE_CHECK_LAYOUT(".len()..];
            let name = &rest[..rest.find(')').unwrap()];
            assert!(common::SIZES.iter().any(|(n, _, _)| *n == name), "{file} checks {name}, which the layout table lacks");
        }
        // The offset macro and the arities are the common header's only.
        for rule in ["#define GROVE_OFFSETOF", "grove_arity(unsigned"] {
            assert!(!text.contains(rule), "{file} defines `{rule}` itself: it belongs to {}", common::COMMON_HEADER);
        }
    }
    // Every kernel file includes the common header.
    for (file, text) in texts.iter().filter(|(f, _)| f.ends_with(".cu")) {
        let include = format!("#include \"{}\"", common::COMMON_HEADER);
        assert!(text.contains(&include), "{file} does not include {}", common::COMMON_HEADER);
    }
}

#[test]
fn kernel_constants_match_the_cu_defines() {
    for (src, defines) in [(kernels::EVAL, kernels::EVAL_DEFINES), (kernels::CLASSIFY, kernels::CLASSIFY_DEFINES)] {
        for (name, value) in defines {
            let line = src
                .text
                .lines()
                .find(|l| l.starts_with(&format!("#define {name} ")))
                .unwrap_or_else(|| panic!("{} does not #define {name}", src.file));
            let got: usize = line.split_whitespace().nth(2).unwrap().parse().unwrap();
            assert_eq!(got, *value, "{name} is {got} in {} and {value} in kernels.rs", src.file);
        }
    }
}

#[test]
fn map_constants_and_status_codes_match_the_cu_defines() {
    let define = |name: &str| -> usize {
        let line = kernels::MAP
            .text
            .lines()
            .find(|l| l.starts_with(&format!("#define {name} ")))
            .unwrap_or_else(|| panic!("map.cu does not #define {name}"));
        line.split_whitespace().nth(2).unwrap().parse().unwrap()
    };
    for (name, value) in kernels::MAP_DEFINES {
        assert_eq!(define(name), *value, "{name} in map.cu and kernels.rs");
    }
    for (name, code) in kernels::MAP_STATUS_DEFINES {
        assert_eq!(define(name), *code as usize, "{name} in map.cu and kernels.rs");
    }
    assert!(kernels::MAP.text.contains(&format!("__constant__ unsigned {}[", kernels::MAP_TABLE_SYMBOL)));
}

/// The number a `.cu` file `#define`s `name` as.
fn define_in(src: &KernelSource<'_>, name: &str) -> usize {
    let line = src
        .text
        .lines()
        .find(|l| l.starts_with(&format!("#define {name} ")))
        .unwrap_or_else(|| panic!("{} does not #define {name}", src.file));
    let v = line.split_whitespace().nth(2).unwrap();
    v.trim_end_matches('u').parse().unwrap_or_else(|_| panic!("{name} in {} is {v}", src.file))
}

#[test]
fn vary_and_select_constants_match_the_cu_defines() {
    for (name, value) in kernels::VARY_DEFINES {
        assert_eq!(define_in(&kernels::VARY, name), *value, "{name} in vary.cu and kernels.rs");
    }
    for (name, code) in kernels::vary_code_defines() {
        assert_eq!(define_in(&kernels::VARY, name), code as usize, "{name} in vary.cu and kernels.rs");
    }
    for (name, value) in kernels::SELECT_DEFINES {
        assert_eq!(define_in(&kernels::SELECT, name), *value, "{name} in select.cu and kernels.rs");
    }
    for (name, value) in kernels::GENERATION_DEFINES {
        assert_eq!(define_in(&kernels::GENERATION, name), *value, "{name} in generation.cu and kernels.rs");
    }
    for (name, value) in kernels::SCAN_DEFINES {
        assert_eq!(define_in(&kernels::SCAN, name), *value, "{name} in scan.cuh and kernels.rs");
    }
    for (name, value) in kernels::FIT_DEFINES {
        assert_eq!(define_in(&kernels::FIT, name), *value, "{name} in fit.cu and kernels.rs");
    }
    // rng.cuh's purposes are rng::Purpose's.
    let rng = KernelSource { file: "rng.cuh", text: kernels::HEADERS[0].1 };
    for (name, p) in [("INIT", Purpose::Init), ("SELECT", Purpose::Select), ("CROSSOVER", Purpose::Crossover), ("MUTATE", Purpose::Mutate)] {
        assert_eq!(define_in(&rng, &format!("GROVE_PURPOSE_{name}")), p as usize, "GROVE_PURPOSE_{name}");
    }
}

#[test]
fn included_headers_keep_line_numbers() {
    // An error after an #include is reported at its own line of the .cu file, and one inside
    // the header at the header's line.
    let text = "#include \"rng.cuh\"\nextern \"C\" __global__ void k(unsigned* o) {\n    o[0] = undefined_name;\n}\n";
    let full = KernelSource { file: "inc.cu", text }.full_source();
    assert!(full.contains("#line 1 \"rng.cuh\"") && full.contains("#line 2 \"inc.cu\""), "{full}");
    assert!(!full.lines().any(|l| l.starts_with("#include")), "the include was not replaced");
    if !have_nvrtc("included_headers_keep_line_numbers") {
        return;
    }
    let err = nvrtc::compile(&KernelSource { file: "inc.cu", text }, Target::Sm(90), &[]).unwrap_err();
    assert!(err.to_string().contains("inc.cu:3:"), "{err}");
}

#[test]
fn probing_without_a_gpu_says_why() {
    // Never a panic, whatever this machine has.
    let engine = std::panic::catch_unwind(CudaEngine::new).expect("CudaEngine::new panicked");
    let driver = probe::driver();
    // SAFETY: only asks the loader whether the driver library exists.
    let has_driver = unsafe { libloading::Library::new("libcuda.so.1") }.is_ok();
    if !has_driver {
        let e = driver.expect_err("no libcuda.so.1, yet the probe found a driver");
        assert_eq!(e.reason, "libcuda.so.1 not found: no NVIDIA driver");
        assert_eq!(engine.as_ref().unwrap_err(), &e);
        assert_eq!(e.to_string(), "no usable CUDA GPU: libcuda.so.1 not found: no NVIDIA driver");
    }
    match engine {
        Ok(e) => eprintln!("found {} (compute capability {:?})", e.device_name(), e.compute_capability()),
        Err(e) => {
            assert!(!e.reason.is_empty() && !e.reason.contains('\n'), "reason must be one line: {e:?}");
            eprintln!("{e}");
        }
    }
}

// sim.cu is compiled once per environment and profile, after the header generated from the
// compiled model (src/backend/cuda/sim.rs), so it is checked here for every shipped env.
#[test]
fn the_simulator_kernel_compiles_for_every_shipped_env_and_profile() {
    use grove::backend::cuda::control::{CONTROL_BLOCK, CONTROL_KERNEL, CONTROL_REDUCE, CONTROL_STACK};
    use grove::backend::cuda::params::{control_params_layout, sim_params_layout};
    use grove::backend::cuda::sim::{sim_text, SIM_KERNEL, SIM_TEXT};
    if !have_nvrtc("the_simulator_kernel_compiles_for_every_shipped_env_and_profile") {
        return;
    }
    for (env, _) in grove::sim::spec::SHIPPED {
        for profile in ["brax", "gymnasium"] {
            let model = grove::sim::Model::load(env, Some(profile)).unwrap();
            let text = sim_text(&model);
            let src = KernelSource { file: "sim.cu", text: &text };
            // One lane an episode, and groups of 8 (GROVE_CTRL_LANES, as the engine builds it).
            for defines in [&[][..], &[("GROVE_CTRL_LANES", 8u32)][..]] {
                let t = std::time::Instant::now();
                let image = nvrtc::compile(&src, Target::Compute(90), defines).unwrap_or_else(|e| panic!("{env} {profile} {defines:?}: {e}"));
                eprintln!("sim.cu for {env} {profile} {defines:?}: {} bytes of PTX in {:.2} s", image.bytes.len(), t.elapsed().as_secs_f64());
                assert!(!image.log.contains("warning"), "{env} {profile} {defines:?} compiles with warnings:\n{}", image.log);
                let ptx = String::from_utf8_lossy(&image.bytes);
                for kernel in [SIM_KERNEL, CONTROL_KERNEL, CONTROL_REDUCE, kernels::COMPILE_TREES] {
                    assert!(ptx.contains(&format!(".entry {kernel}(")), "{env} {profile} {defines:?}: {kernel} missing");
                }
            }
        }
    }
    // A CUBIN for one model, as the engine loads it.
    let model = grove::sim::Model::load("hopper", None).unwrap();
    let text = sim_text(&model);
    let image = nvrtc::compile(&KernelSource { file: "sim.cu", text: &text }, Target::Sm(90), &[]).unwrap_or_else(|e| panic!("{e}"));
    assert!(image.bytes.starts_with(b"\x7fELF"));
    // SimParams' and ControlParams' offsets, as sim.rs and control.rs list them, are the layout
    // table's, which sim.cu checks (every_shared_struct_is_checked_against_the_layout_table).
    for (name, listed) in [("GroveSimParams", sim_params_layout()), ("GroveControlParams", control_params_layout())] {
        let table: Vec<(&str, usize)> = common::OFFSETS.iter().filter(|(s, _, _)| *s == name).map(|&(_, f, o)| (f, o)).collect();
        assert_eq!(listed, table, "{name}'s fields in the layout table");
    }
    assert!(SIM_TEXT.contains(&format!("#define GROVE_CTRL_STACK {CONTROL_STACK} ")));
    // The host launches blocks of CONTROL_BLOCK threads, the roll-out's launch bound.
    assert!(SIM_TEXT.contains(&format!("#define GROVE_CTRL_BLOCK {CONTROL_BLOCK}\n")));
    assert!(SIM_TEXT.contains("__global__ void GROVE_CTRL_BOUNDS grove_control_rollout("));
}
