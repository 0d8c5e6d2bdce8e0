//! `kernels/eval.cu`'s `grove_joint_sums`, `grove_head_sums` and `grove_class_head_sums` run on the CPU: built as host
//! C++ by g++ (`tests/cuda_host_shim.h`), their own code adds up the sums of issue 27's fits (a
//! program's weight fitted together with linear terms of the inputs; a linear head over a
//! program's outputs) from the programs' values, block by block with 256 real threads meeting at
//! each `__syncthreads`, and is compared with the CPU references
//! (`backend::cpu::eval::evaluate_joint`, `evaluate_head`), so that CI checks what every GPU run
//! with linear terms or a head sums, without a GPU. The values are the CPU's own predictions (the prediction
//! kernels' bits are checked against them in `tests/cuda_eval.rs`); the f64 sums differ only by
//! the order of their additions.

#[path = "support/emulator.rs"]
mod emulator;

use grove::backend::cpu::eval::{evaluate_class_head, evaluate_head, evaluate_joint, predict};
use grove::backend::cuda::kernels;
use grove::program::init::{TreeSpec, init_population};
use grove::program::head::{ClassHeadSums, HeadSums};
use grove::program::linear::JointSums;
use grove::program::ops::FUNCTIONS;
use grove::program::tree::Population;

type RunBlock = unsafe extern "C" fn(u32, extern "C" fn(*mut std::ffi::c_void), *mut std::ffi::c_void);
type SetBlock = unsafe extern "C" fn(u32);
type TakeY = unsafe extern "C" fn(u32);
type JointFn = unsafe extern "C" fn(u32, u32, *const f32, *const f32, *const f32, *const u32, *mut f64, *mut u32);
type JointFitnessFn = unsafe extern "C" fn(u32, u32, u32, u32, f64, *const f64, *const f64, *const u32, *const u16, *mut f64);
type HeadFn = unsafe extern "C" fn(u32, u32, *const f32, *const f32, *mut f64, *mut u32);
type ClassHeadFn = unsafe extern "C" fn(u32, u32, u32, *const f32, *const f32, *mut f64, *mut u32);

/// eval.cu as a host library: CUDA's min and max, `__ldg`, a block-wide `__shfl_down_sync`, the
/// dynamic shared memory spelled for g++, and a setter of `blockIdx.y` for the calling thread.
fn eval_library() -> Option<libloading::Library> {
    emulator::build(&kernels::EVAL, |s| {
        let prelude = format!("{}extern \"C\" void grove_emu_take_block_y(unsigned y) {{ blockIdx.y = y; }}\n", emulator::EVAL_PRELUDE);
        let dynamic = "extern __shared__ float slots[];";
        assert!(s.contains(dynamic), "eval.cu no longer has `{dynamic}`");
        let s = s.replace(dynamic, "static float slots[1 << 16] __attribute__((aligned(16)));");
        format!("{prelude}{s}")
    })
}

/// The kernel's sums for every tree of `pop` over `x` (`[F][n]`), `r` and the terms' `inputs`,
/// from the CPU's predictions (NaN for an empty tree, as the prediction kernels write).
fn kernel_sums(lib: &libloading::Library, pop: &Population, x: &[f32], r: &[f32], n: usize, inputs: &[usize]) -> Vec<JointSums> {
    let (out, bad) = kernel_raw_sums(lib, pop, x, r, n, inputs);
    joint_sums_of(&out, &bad, pop, n, inputs.len())
}

/// The kernel's sums as the GPU backend reads them back (`CudaEngine::evaluate_joint`).
fn joint_sums_of(out: &[f64], bad: &[u32], pop: &Population, n: usize, k: usize) -> Vec<JointSums> {
    (0..pop.size()).map(|t| JointSums::from_kernel(&out[t * (k + 3)..(t + 1) * (k + 3)], bad[t], pop.len[t] as usize, n)).collect()
}

/// `grove_joint_sums`' raw output: `[P × (k + 3)]` sums and `[P]` counts of rows whose value
/// is not finite.
fn kernel_raw_sums(lib: &libloading::Library, pop: &Population, x: &[f32], r: &[f32], n: usize, inputs: &[usize]) -> (Vec<f64>, Vec<u32>) {
    let f: JointFn = emulator::get(lib, kernels::JOINT_SUMS);
    let (p, k) = (pop.size(), inputs.len());
    let mut pred = vec![f32::NAN; p * n];
    for t in (0..p).filter(|&t| pop.len[t] > 0) {
        pred[t * n..(t + 1) * n].copy_from_slice(&predict(pop, t, x, n).unwrap());
    }
    let cols: Vec<u32> = if inputs.is_empty() { vec![0] } else { inputs.iter().map(|&j| j as u32).collect() };
    let mut out = vec![f64::NAN; p * (k + 3)];
    let mut bad = vec![0xdeadu32; p];
    let addr = (pred.as_ptr() as usize, x.as_ptr() as usize, r.as_ptr() as usize, cols.as_ptr() as usize, out.as_mut_ptr() as usize, bad.as_mut_ptr() as usize);
    let body = move || {
        let (pr, xx, rr, c, o, b) = addr;
        // SAFETY: grove_joint_sums(n_rows, k, pred, x, r, inputs, out, bad) on P × N values,
        // F × N inputs, N residuals, k column indices (< F), P × (k + 3) sums and P counts;
        // block (t, col) writes only its own entries of tree t.
        unsafe { f(n as u32, k as u32, pr as *const f32, xx as *const f32, rr as *const f32, c as *const u32, o as *mut f64, b as *mut u32) }
    };
    for t in 0..p {
        for col in 0..=k {
            run(lib, t, col, &body);
        }
    }
    (out, bad)
}

/// The device loop's joint fitness (`grove_joint_fitness`) is the host's, `joint_error` plus
/// parsimony per node, bit for bit, from the same sums: every metric, with and without
/// parsimony, on programs that are valid, constant (nothing beyond the terms), not finite at
/// some row, or empty; one and several terms; two blocks of threads.
#[test]
fn the_joint_fitness_kernel_is_the_hosts_joint_error_bit_for_bit() {
    use grove::program::fitness::Metric;
    use grove::task::regression::joint_error;
    let Some(lib) = eval_library() else { return };
    let f = 3usize;
    let fitness: JointFitnessFn = emulator::get(&lib, kernels::JOINT_FITNESS);
    for (n, seed, deps) in [(300usize, 1u64, [2.0f32, 0.0, -1.0]), (37, 2, [0.0, 1.5, 0.0]), (90, 3, [1.0, -0.5, 0.7])] {
        let x: Vec<f32> = (0..f * n).map(|i| ((i * 53 % 97) as f32 - 48.0) * 0.05).collect();
        let y: Vec<f32> = (0..n).map(|i| (0..f).map(|j| deps[j] * x[j * n + i]).sum::<f32>() + 0.3 * x[i] * x[i] + ((i * 31 % 61) as f32 - 30.0) * 0.01).collect();
        let joint = grove::program::linear::fit(&x, &y, n, f).unwrap().and_then(|l| l.joint).expect("the terms are fitted");
        let k = joint.inputs.len();
        assert!(k >= 1, "a joint fit with terms");
        let spec = TreeSpec::new(FUNCTIONS.to_vec(), f as u32, 40).with_depth(1, 6);
        let mut pop = init_population(&spec, 300, seed).unwrap();
        pop.clear(4); // no program: +inf
        pop.set_tree(5, &[grove::program::tree::Node::constant(2.5)]).unwrap(); // nothing beyond the terms
        // The sums as grove_joint_sums lays them out (the CPU's, which that kernel matches
        // within rounding, `the_joint_sums_kernel_matches_the_cpu`).
        let cpu = evaluate_joint(&pop, &x, &y, n, &joint.inputs).unwrap();
        let mut out = vec![f64::NAN; pop.size() * (k + 3)];
        let bad: Vec<u32> = cpu.iter().map(|s| u32::from(!s.finite)).collect();
        for (t, s) in cpu.iter().enumerate() {
            out[t * (k + 3)..(t + 1) * (k + 3)].copy_from_slice(&[&[s.sum_f, s.sum_f2, s.sum_fr][..], &s.sum_xf].concat());
        }
        let sums = joint_sums_of(&out, &bad, &pop, n, k);
        let params = joint.device_params();
        assert_eq!(params.len(), 2 + 2 * k + k * k);
        let lens = &pop.len;
        let (mut finite, mut invalid) = (0, 0);
        for (metric, code) in [(Metric::Mse, 0u32), (Metric::Rmse, 1), (Metric::Mae, 2), (Metric::R2, 3)] {
            for parsimony in [0.0, 1e-3] {
                let mut got = vec![f64::NAN; pop.size()];
                let addr = (params.as_ptr() as usize, out.as_ptr() as usize, bad.as_ptr() as usize, lens.as_ptr() as usize, got.as_mut_ptr() as usize);
                let p = pop.size();
                let body = move || {
                    let (pa, o, b, l, g) = addr;
                    // SAFETY: grove_joint_fitness(p, k, n_rows, metric, parsimony, params, sums,
                    // bad, lens, fit) on 2 + 2k + k² params, P × (k + 3) sums, P counts, lengths
                    // and fitness values; thread t < P writes fit[t] only.
                    unsafe { fitness(p as u32, k as u32, n as u32, code, parsimony, pa as *const f64, o as *const f64, b as *const u32, l as *const u16, g as *mut f64) }
                };
                for block in 0..p.div_ceil(kernels::JOINT_THREADS as usize) {
                    run(&lib, block, 0, &body);
                }
                for t in 0..p {
                    let want = if pop.len[t] == 0 { f64::INFINITY } else { joint_error(&joint, &sums[t], metric) + parsimony * pop.len[t] as f64 };
                    assert_eq!(got[t].to_bits(), want.to_bits(), "n {n}, tree {t}, {metric:?}, parsimony {parsimony}: kernel {} host {}", got[t], want);
                    if metric == Metric::Mse {
                        if want.is_finite() { finite += 1 } else { invalid += 1 }
                    }
                }
            }
        }
        assert!(sums[5].finite, "a constant is a valid program");
        assert!(finite >= 100 && invalid >= 2, "{finite} finite and {invalid} invalid fitness values of {}", 2 * pop.size());
    }
}

#[test]
fn the_joint_sums_kernel_matches_the_cpu() {
    let Some(lib) = eval_library() else { return };
    let f = 3usize;
    for (n, inputs, seed) in [(300usize, vec![0usize, 2], 1u64), (37, vec![1], 2), (700, vec![], 3), (90, vec![2, 0, 1, 1], 4)] {
        let x: Vec<f32> = (0..f * n).map(|i| ((i * 53 % 97) as f32 - 48.0) * 0.05).collect();
        let r: Vec<f32> = (0..n).map(|i| ((i * 31 % 61) as f32 - 30.0) * 0.1).collect();
        let spec = TreeSpec::new(FUNCTIONS.to_vec(), f as u32, 40).with_depth(1, 6);
        let mut pop = init_population(&spec, 24, seed).unwrap();
        pop.clear(4); // no program: invalid
        let want = evaluate_joint(&pop, &x, &r, n, &inputs).unwrap();
        let got = kernel_sums(&lib, &pop, &x, &r, n, &inputs);
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * a.abs().max(b.abs()) || (a - b).abs() < 1e-9;
        let mut valid = 0;
        for (t, (g, c)) in got.iter().zip(&want).enumerate() {
            assert_eq!((g.finite, g.n, g.sum_xf.len()), (c.finite, c.n, c.sum_xf.len()), "n {n}, tree {t}");
            if !c.finite {
                continue;
            }
            valid += 1;
            let pairs = [(g.sum_f, c.sum_f), (g.sum_f2, c.sum_f2), (g.sum_fr, c.sum_fr)].into_iter().chain(g.sum_xf.iter().copied().zip(c.sum_xf.iter().copied()));
            for (a, b) in pairs {
                assert!(close(a, b), "n {n}, tree {t}: kernel {a:e} cpu {b:e}");
            }
        }
        assert!(!got[4].finite, "an empty tree is invalid");
        assert!(valid >= 6, "{valid} valid trees of 24");
    }
}

/// Runs `body` as block (`x`, `y`) of [`kernels::JOINT_THREADS`] emulated threads.
fn run(lib: &libloading::Library, x: usize, y: usize, body: &(dyn Fn() + Sync)) {
    let run_block: RunBlock = emulator::get(lib, "grove_emu_run_block");
    let set_block: SetBlock = emulator::get(lib, "grove_emu_set_block");
    let take_y: TakeY = emulator::get(lib, "grove_emu_take_block_y");
    let with_y = move || {
        // SAFETY: sets the calling emulated thread's blockIdx.y.
        unsafe { take_y(y as u32) };
        body();
    };
    let with_y: &(dyn Fn() + Sync) = &with_y;
    extern "C" fn call(ctx: *mut std::ffi::c_void) {
        // SAFETY: ctx is the `&&dyn Fn` below, alive until the block has joined.
        let f = unsafe { &*(ctx as *const &(dyn Fn() + Sync)) };
        f();
    }
    // SAFETY: one emulated block at a time; the library joins its threads.
    unsafe {
        set_block(x as u32);
        run_block(kernels::JOINT_THREADS, call, &with_y as *const &(dyn Fn() + Sync) as *mut std::ffi::c_void);
    }
}

/// The head kernel's sums for every tree of `pop` (`K = max(1, outputs)`) over `x` and `y`,
/// from the CPU's predictions (NaN for an empty tree).
fn head_kernel_sums(lib: &libloading::Library, pop: &Population, x: &[f32], y: &[f32], n: usize) -> Vec<HeadSums> {
    let f: HeadFn = emulator::get(lib, kernels::HEAD_SUMS);
    let (p, k) = (pop.size(), pop.n_outputs.max(1));
    let mut pred = vec![f32::NAN; p * k * n];
    for t in (0..p).filter(|&t| pop.len[t] > 0) {
        pred[t * k * n..(t + 1) * k * n].copy_from_slice(&predict(pop, t, x, n).unwrap());
    }
    let pairs = k * (k + 1) / 2;
    let cols = 2 * k + pairs + 1;
    let mut out = vec![f64::NAN; p * (cols + 1)];
    let mut bad = vec![0xdeadu32; p];
    let addr = (pred.as_ptr() as usize, y.as_ptr() as usize, out.as_mut_ptr() as usize, bad.as_mut_ptr() as usize);
    let body = move || {
        let (pr, yy, o, b) = addr;
        // SAFETY: grove_head_sums(n_rows, k, pred, y, out, bad) on P × K × N values, N targets,
        // P × (C + 1) sums and P counts; block (t, col) writes only its own entries of tree t.
        unsafe { f(n as u32, k as u32, pr as *const f32, yy as *const f32, o as *mut f64, b as *mut u32) }
    };
    for t in 0..p {
        for col in 0..cols {
            run(lib, t, col, &body);
        }
    }
    (0..p)
        .map(|t| {
            let o = &out[t * (cols + 1)..(t + 1) * (cols + 1)];
            if bad[t] != 0 || pop.len[t] == 0 {
                return HeadSums::invalid(k, n as u64);
            }
            let mut h = HeadSums::new(k);
            h.n = n as u64;
            let q = h.read_features(o);
            h.sum_fy[..k].copy_from_slice(&o[q..q + k]);
            h.sum_y = o[cols - 1];
            h.sum_y2 = o[cols];
            h
        })
        .collect()
}

#[test]
fn the_head_sums_kernel_matches_the_cpu() {
    let Some(lib) = eval_library() else { return };
    let f = 3usize;
    for (n, k, seed) in [(300usize, 3usize, 5u64), (37, 8, 6), (120, 0, 7)] {
        let x: Vec<f32> = (0..f * n).map(|i| ((i * 53 % 97) as f32 - 48.0) * 0.05).collect();
        let y: Vec<f32> = (0..n).map(|i| ((i * 31 % 61) as f32 - 30.0) * 0.1).collect();
        let spec = TreeSpec::new(FUNCTIONS.to_vec(), f as u32, 60).with_outputs(k, 0.3).with_depth(1, 6);
        let mut pop = init_population(&spec, 8, seed).unwrap();
        pop.clear(3); // no program: invalid
        let want = evaluate_head(&pop, &x, &y, n).unwrap();
        let got = head_kernel_sums(&lib, &pop, &x, &y, n);
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * a.abs().max(b.abs()) || (a - b).abs() < 1e-9;
        let mut valid = 0;
        for (t, (g, c)) in got.iter().zip(&want).enumerate() {
            assert_eq!((g.finite, g.n, g.k), (c.finite, c.n, c.k), "n {n}, k {k}, tree {t}");
            if !c.finite {
                continue;
            }
            valid += 1;
            let all = |h: &HeadSums| -> Vec<f64> { h.sum_f.iter().chain(&h.sum_ff).chain(&h.sum_fy).copied().chain([h.sum_y, h.sum_y2]).collect() };
            for (a, b) in all(g).into_iter().zip(all(c)) {
                assert!(close(a, b), "n {n}, k {k}, tree {t}: kernel {a:e} cpu {b:e}");
            }
        }
        assert!(!got[3].finite, "an empty tree is invalid");
        assert!(valid >= 3, "{valid} valid trees of 8");
    }
}

/// The class head kernel's sums for every tree of `pop` over `x` and the class indices
/// `labels`, from the CPU's predictions (NaN for an empty tree).
fn class_head_kernel_sums(lib: &libloading::Library, pop: &Population, x: &[f32], labels: &[f32], n: usize, n_classes: usize) -> Vec<ClassHeadSums> {
    let f: ClassHeadFn = emulator::get(lib, kernels::CLASS_HEAD_SUMS);
    let (p, k) = (pop.size(), pop.n_outputs.max(1));
    let mut pred = vec![f32::NAN; p * k * n];
    for t in (0..p).filter(|&t| pop.len[t] > 0) {
        pred[t * k * n..(t + 1) * k * n].copy_from_slice(&predict(pop, t, x, n).unwrap());
    }
    let pairs = k * (k + 1) / 2;
    let cols = k + pairs + k * n_classes + 1;
    let mut out = vec![f64::NAN; p * cols];
    let mut bad = vec![0xdeadu32; p];
    let addr = (pred.as_ptr() as usize, labels.as_ptr() as usize, out.as_mut_ptr() as usize, bad.as_mut_ptr() as usize);
    let body = move || {
        let (pr, ll, o, b) = addr;
        // SAFETY: grove_class_head_sums(n_rows, k, n_classes, pred, labels, out, bad) on
        // P × K × N values, N labels, P × C sums and P counts; block (t, col) writes only its
        // own entries of tree t.
        unsafe { f(n as u32, k as u32, n_classes as u32, pr as *const f32, ll as *const f32, o as *mut f64, b as *mut u32) }
    };
    for t in 0..p {
        for col in 0..cols {
            run(lib, t, col, &body);
        }
    }
    (0..p)
        .map(|t| {
            let o = &out[t * cols..(t + 1) * cols];
            let mut h = if bad[t] != 0 || pop.len[t] == 0 { ClassHeadSums::invalid(k, n_classes, n as u64) } else { ClassHeadSums::new(k, n_classes) };
            if !h.sums.finite {
                return h;
            }
            h.sums.n = n as u64;
            let q = h.sums.read_features(o);
            for (c, f) in h.class_f.iter_mut().enumerate() {
                f[..k].copy_from_slice(&o[q + c * k..q + (c + 1) * k]);
            }
            h
        })
        .collect()
}

#[test]
fn the_class_head_sums_kernel_matches_the_cpu() {
    let Some(lib) = eval_library() else { return };
    let f = 3usize;
    for (n, k, c, seed) in [(300usize, 3usize, 4usize, 5u64), (37, 8, 2, 6), (120, 0, 10, 7)] {
        let x: Vec<f32> = (0..f * n).map(|i| ((i * 53 % 97) as f32 - 48.0) * 0.05).collect();
        let labels: Vec<f32> = (0..n).map(|i| ((i * 7 + i / 5) % c) as f32).collect();
        let spec = TreeSpec::new(FUNCTIONS.to_vec(), f as u32, 60).with_outputs(k, 0.3).with_depth(1, 6);
        let mut pop = init_population(&spec, 8, seed).unwrap();
        pop.clear(3); // no program: invalid
        let want = evaluate_class_head(&pop, &x, &labels, n, c).unwrap();
        let got = class_head_kernel_sums(&lib, &pop, &x, &labels, n, c);
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * a.abs().max(b.abs()) || (a - b).abs() < 1e-9;
        let mut valid = 0;
        for (t, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!((g.sums.finite, g.sums.n, g.sums.k), (w.sums.finite, w.sums.n, w.sums.k), "n {n}, k {k}, tree {t}");
            if !w.sums.finite {
                continue;
            }
            valid += 1;
            let all = |h: &ClassHeadSums| -> Vec<f64> { h.sums.sum_f.iter().chain(&h.sums.sum_ff).chain(h.class_f.iter().flatten()).copied().collect() };
            for (a, b) in all(g).into_iter().zip(all(w)) {
                assert!(close(a, b), "n {n}, k {k}, c {c}, tree {t}: kernel {a:e} cpu {b:e}");
            }
        }
        assert!(!got[3].sums.finite, "an empty tree is invalid");
        assert!(valid >= 3, "{valid} valid trees of 8");
    }
}

type LossFn = unsafe extern "C" fn(u32, u32, u32, *const f32, *const f32, *mut f64, *mut u32);
type ScaleFn = unsafe extern "C" fn(u32, u32, *mut f32, *const f32, *mut u32);

/// The CPU's predictions of every tree of `pop` (`[P × N]`, NaN for an empty tree), as the
/// prediction kernels write them.
fn values(pop: &Population, x: &[f32], n: usize) -> Vec<f32> {
    let mut pred = vec![f32::NAN; pop.size() * n];
    for t in (0..pop.size()).filter(|&t| pop.len[t] > 0) {
        pred[t * n..(t + 1) * n].copy_from_slice(&predict(pop, t, x, n).unwrap());
    }
    pred
}

/// Issue 58: `grove_loss_sums`, a loss of the user's own summed at each program's (linearly
/// scaled) prediction, against the CPU's `evaluate_loss` (whose scaling comes from the fused
/// sums): validity the same, the sums equal but for the order of their additions; and
/// `grove_scale_predictions` against the host batch a fitness function receives.
#[test]
fn the_loss_kernels_match_the_cpu() {
    use grove::backend::cpu::eval::{evaluate_loss, evaluate_regression};
    use grove::program::fitness::{Loss, LossReduce};
    // Registered before the library is built: its grove_apply holds the loss.
    let loss = Loss::compile("log(cosh(p - y)) + 0.5*abs(p - y)/(1 + y*y)", LossReduce::Mean).unwrap();
    let Some(lib) = eval_library() else { return };
    let lf: LossFn = emulator::get(&lib, kernels::LOSS_SUMS);
    let sf: ScaleFn = emulator::get(&lib, kernels::SCALE_PREDICTIONS);
    let f = 3usize;
    for (n, seed) in [(300usize, 1u64), (37, 2), (700, 3)] {
        let x: Vec<f32> = (0..f * n).map(|i| ((i * 53 % 97) as f32 - 48.0) * 0.05).collect();
        let y: Vec<f32> = (0..n).map(|i| ((i * 31 % 61) as f32 - 30.0) * 0.1).collect();
        let spec = TreeSpec::new(FUNCTIONS.to_vec(), f as u32, 40).with_depth(1, 6);
        let mut pop = init_population(&spec, 24, seed).unwrap();
        pop.clear(4); // no program: invalid
        let p = pop.size();
        let pred = values(&pop, &x, n);
        for scaled in [false, true] {
            let scale: Vec<(f64, f64)> = if scaled {
                evaluate_regression(&pop, &x, &y, n).unwrap().iter().map(|s| if s.is_valid() { s.scale() } else { (1.0, 0.0) }).collect()
            } else {
                vec![(1.0, 0.0); p]
            };
            let want = evaluate_loss(&pop, &x, &y, n, loss.op, &scale).unwrap();
            let (mut out, mut bad) = (vec![f64::NAN; p], vec![0xdeadu32; p]);
            let addr = (pred.as_ptr() as usize, y.as_ptr() as usize, out.as_mut_ptr() as usize, bad.as_mut_ptr() as usize);
            let body = move || {
                let (pr, yy, o, b) = addr;
                // SAFETY: grove_loss_sums(n_rows, scaled, loss, pred, y, out, bad) on P × N
                // values, N targets, P sums and P counts; block t writes only entry t.
                unsafe { lf(n as u32, scaled as u32, loss.op as u8 as u32, pr as *const f32, yy as *const f32, o as *mut f64, b as *mut u32) }
            };
            for t in 0..p {
                run(&lib, t, 0, &body);
            }
            let mut valid = 0;
            for t in 0..p {
                let finite = bad[t] == 0 && pop.len[t] > 0;
                assert_eq!(finite, want[t].finite, "n {n}, scaled {scaled}, tree {t}: kernel bad {} cpu finite {}", bad[t], want[t].finite);
                if !finite {
                    continue;
                }
                valid += 1;
                let (a, b) = (out[t], want[t].sum);
                assert!((a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0), "n {n}, scaled {scaled}, tree {t}: kernel {a:e} cpu {b:e}");
            }
            assert!(valid >= 6, "{valid} valid trees of {p}");
            // The predictions a fitness function gets: the host batch, and the kernel's in place.
            let data = grove::backend::RegressionData::Host { x: &x, y: &y, n_rows: n };
            let grove::backend::PredictionBatch::Host { pred: host, .. } = grove::backend::Backend::Cpu.prediction_batch(&pop, &data, scaled).unwrap() else {
                panic!("a host batch on the CPU")
            };
            let mut dev = pred.clone();
            let mut bad = vec![0xdeadu32; p];
            let addr = (dev.as_mut_ptr() as usize, y.as_ptr() as usize, bad.as_mut_ptr() as usize);
            let body = move || {
                let (pr, yy, b) = addr;
                // SAFETY: grove_scale_predictions(n_rows, scaled, pred, y, bad) on P × N
                // values, N targets and P counts; block t rewrites only row t and entry t.
                unsafe { sf(n as u32, scaled as u32, pr as *mut f32, yy as *const f32, b as *mut u32) }
            };
            for t in 0..p {
                run(&lib, t, 0, &body);
            }
            for t in 0..p {
                assert_eq!(bad[t] == 0, pred[t * n..(t + 1) * n].iter().all(|v| v.is_finite()), "n {n}, tree {t}: bad {}", bad[t]);
                if !want[t].finite {
                    continue;
                }
                for i in 0..n {
                    let (a, b) = (dev[t * n + i], host[t * n + i]);
                    assert!((a - b).abs() <= 1e-6 * a.abs().max(1e-30), "n {n}, scaled {scaled}, tree {t}, row {i}: kernel {a:e} host {b:e}");
                }
            }
        }
    }
}
