//! Parity of the constant-fitting kernels (`kernels/fit.cu`: `grove_fit_constants` for
//! regression, `grove_fit_class_constants` for classification) with their CPU references
//! (`backend::cpu::fit::fit_constants`, `fit_class_constants`): the fitted constants and every
//! field of the results must be the same bits.
//!
//! * `emulated_*`: the kernel's own code built as host C++ by g++ (`tests/cuda_host_shim.h`),
//!   each block a block of real threads meeting at its barriers, with libm poisoned (a kernel
//!   that called the C library's transcendental functions would not compile). Runs in CI.
//! * `gpu_*`: the real kernel, ignored unless `GROVE_TEST_GPU=1` (then a missing GPU is a
//!   failure). Run: `GROVE_TEST_GPU=1 cargo test --release --test cuda_fit`.

#[path = "support/emulator.rs"]
mod emulator;

use grove::backend::cuda::kernels;
use grove::backend::cuda::params::FitParams;
use grove::backend::cpu::fit::class::fit_class_constants;
use grove::backend::cpu::fit::{FitConfig, FitResult, fit_constants};
use grove::program::init::{TreeSpec, init_population};
use grove::program::ops::parse_function_set;
use grove::program::tree::Population;

/// A population with constants and the data to fit it on: `[2][n]` inputs, a target no tree
/// of the population is (so every fit has work to do), rows that fill no whole block.
fn problem(n_trees: usize, n_rows: usize, seed: u64, functions: &str) -> (Population, Vec<f32>, Vec<f32>) {
    let spec = TreeSpec::new(parse_function_set(functions).unwrap(), 2, 64).with_depth(2, 6).with_const_range(-2.0, 2.0).with_p_const(0.45);
    let pop = init_population(&spec, n_trees, seed).unwrap();
    let x: Vec<f32> = (0..2 * n_rows).map(|i| ((i * 37 % 97) as f32) * 0.05 - 2.4).collect();
    let y: Vec<f32> = (0..n_rows).map(|r| 1.7 * (0.9 * x[r]).sin() + x[r] * x[n_rows + r] - 0.3).collect();
    (pop, x, y)
}

/// Every function the kernels know, so that each operator's partial derivatives are compared.
const ALL: &str = "add,sub,mul,div,aq,pow,max,min,sin,cos,tan,exp,log,rlog,plog,sqrt,abs,neg,square,cube,tanh,sigmoid,sdiv,slog,ssqrt,spow";

fn same_results(got: &[FitResult], want: &[FitResult], what: &str) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let bits = |r: &FitResult| (r.sse_before.to_bits(), r.sse_after.to_bits(), r.a.to_bits(), r.b.to_bits(), r.constants, r.accepted);
        assert_eq!(bits(g), bits(w), "{what}: tree {i}: kernel {g:?}, reference {w:?}");
    }
}

fn same_values(got: &Population, want: &Population, what: &str) {
    for (i, (g, w)) in got.value.iter().zip(&want.value).enumerate() {
        assert_eq!(g.to_bits(), w.to_bits(), "{what}: value {i} (tree {}): kernel {g}, reference {w}", i / got.max_len);
    }
}

type FitFn = unsafe extern "C" fn(FitParams, *const u32, *const u8, *mut f32, *const u8, *const u16, *const f32, *const f32, *mut FitResult, *mut u8);
type ClassFitFn = unsafe extern "C" fn(FitParams, *const u32, *const u8, *mut f32, *const u8, *const u16, *const f32, *const u32, *const f32, *mut FitResult, *mut u8);
type RunBlock = unsafe extern "C" fn(u32, extern "C" fn(*mut std::ffi::c_void), *mut std::ffi::c_void);

/// Runs `f` as block `block` of `threads` real threads of `lib`.
fn run_block(lib: &libloading::Library, block: u32, threads: u32, f: &(dyn Fn() + Sync)) {
    extern "C" fn body(ctx: *mut std::ffi::c_void) {
        // SAFETY: ctx is the `&&dyn Fn` passed below, alive until the block has joined.
        let f = unsafe { &*(ctx as *const &(dyn Fn() + Sync)) };
        f();
    }
    let run: RunBlock = emulator::get(lib, "grove_emu_run_block");
    let at: unsafe extern "C" fn(u32) = emulator::get(lib, "grove_emu_set_block");
    // SAFETY: sets the block index the next run's threads take (a global in the library).
    unsafe { at(block) };
    // SAFETY: the library joins every thread before returning.
    unsafe { run(threads, body, &f as *const &(dyn Fn() + Sync) as *mut std::ffi::c_void) };
}

/// Pointers handed to the emulated threads (which only read them, or write disjoint parts).
#[derive(Clone, Copy)]
struct Ptrs {
    ids: *const u32,
    op: *const u8,
    value: *mut f32,
    out: *const u8,
    len: *const u16,
    x: *const f32,
    y: *const f32,
    labels: *const u32,
    offset: *const f32,
    res: *mut FitResult,
    scratch: *mut u8,
}
// SAFETY: the kernel's threads write only their block's tree and result (and thread 0 alone).
unsafe impl Sync for Ptrs {}
unsafe impl Send for Ptrs {}

impl Ptrs {
    /// One thread of the kernel over these arrays.
    fn launch(&self, fit: FitFn, params: FitParams) {
        // SAFETY: the arrays have the sizes grove_fit_constants reads (fit.rs's launch).
        unsafe { fit(params, self.ids, self.op, self.value, self.out, self.len, self.x, self.y, self.res, self.scratch) }
    }

    /// One thread of the classification kernel over these arrays.
    fn launch_class(&self, fit: ClassFitFn, params: FitParams) {
        // SAFETY: the arrays have the sizes grove_fit_class_constants reads (fit.rs's launch).
        unsafe { fit(params, self.ids, self.op, self.value, self.out, self.len, self.x, self.labels, self.offset, self.res, self.scratch) }
    }
}

/// What a fitting kernel fits: regression targets, or class labels with the offsets under the
/// outputs (`[max(1, n_outputs)][n_rows]`) or none.
#[derive(Clone, Copy)]
enum Target<'a> {
    Values(&'a [f32]),
    Labels(&'a [u32], Option<&'a [f32]>),
}

impl Target<'_> {
    /// The offsets, or a null pointer.
    fn offset(&self) -> *const f32 {
        match self {
            Target::Labels(_, Some(o)) => o.as_ptr(),
            _ => std::ptr::null(),
        }
    }
}

/// One emulated fitting kernel (grove_fit_constants for values, grove_fit_class_constants for
/// labels) over rows `rows` of `pop`, fitted in place: a block per row of `threads` threads.
fn emulate(lib: &libloading::Library, pop: &mut Population, rows: &[usize], x: &[f32], target: Target, params: FitParams, threads: u32) -> Vec<FitResult> {
    let ids: Vec<u32> = rows.iter().map(|&r| r as u32).collect();
    let mut res = vec![FitResult::default(); rows.len()];
    // Decoded nodes of trees longer than the kernel keeps in shared memory: a row per tree.
    let mut scratch = vec![0u64; rows.len() * pop.max_len];
    let (y, labels) = match target {
        Target::Values(y) => (y.as_ptr(), std::ptr::null()),
        Target::Labels(l, _) => (std::ptr::null(), l.as_ptr()),
    };
    let p = Ptrs {
        ids: ids.as_ptr(),
        op: pop.op.as_ptr(),
        value: pop.value.as_mut_ptr(),
        out: pop.out.as_ptr(),
        len: pop.len.as_ptr(),
        x: x.as_ptr(),
        y,
        labels,
        offset: target.offset(),
        res: res.as_mut_ptr(),
        scratch: scratch.as_mut_ptr() as *mut u8,
    };
    for b in 0..rows.len() as u32 {
        match target {
            Target::Values(_) => {
                let fit: FitFn = emulator::get(lib, kernels::FIT_CONSTANTS);
                run_block(lib, b, threads, &move || p.launch(fit, params));
            }
            Target::Labels(..) => {
                let fit: ClassFitFn = emulator::get(lib, kernels::FIT_CLASS_CONSTANTS);
                run_block(lib, b, threads, &move || p.launch_class(fit, params));
            }
        }
    }
    res
}

type SplitStartFn = unsafe extern "C" fn(FitParams, *const u32, *const u8, *const f32, *const u8, *const u16, *mut u8, *mut FitResult, *mut u8);
type SplitPassFn = unsafe extern "C" fn(FitParams, u32, *const u8, *const u8, *const f32, *const std::ffi::c_void, *mut f64);
type SplitPassClassFn = unsafe extern "C" fn(FitParams, u32, *const u8, *const u8, *const f32, *const u32, *const f32, *mut f64);
type SplitStepFn = unsafe extern "C" fn(FitParams, u32, *const u32, *const u8, *mut f32, *mut u8, *const f64, *mut FitResult);

/// The split fit (grove_fit_split_*), emulated as `launch_split_fit` runs it: the start (blocks
/// of `threads` threads, one a tree), then `steps + 2` times a block per part of every tree and a
/// block per tree, in one group.
fn emulate_split(lib: &libloading::Library, pop: &mut Population, rows: &[usize], x: &[f32], target: Target, params: FitParams, threads: u32) -> Vec<FitResult> {
    let n = rows.len();
    let ids: Vec<u32> = rows.iter().map(|&r| r as u32).collect();
    let n_parts = (params.n_rows as usize).div_ceil(grove::backend::cpu::fit::FIT_PART);
    let mut res = vec![FitResult::default(); n];
    let mut fits = vec![0u64; n * kernels::FIT_SPLIT_BYTES / 8];
    let mut partials = vec![0.0f64; n * n_parts * grove::backend::cpu::fit::MAX_FIT_SUMS];
    let mut scratch = vec![0u64; n * pop.max_len];
    let (start, pass, step) = match target {
        Target::Values(_) => (kernels::FIT_SPLIT_START, kernels::FIT_SPLIT_PASS, kernels::FIT_SPLIT_STEP),
        Target::Labels(..) => (kernels::FIT_SPLIT_START_CLASS, kernels::FIT_SPLIT_PASS_CLASS, kernels::FIT_SPLIT_STEP_CLASS),
    };
    let classes = matches!(target, Target::Labels(..));
    let (start, step): (SplitStartFn, SplitStepFn) = (emulator::get(lib, start), emulator::get(lib, step));
    let (pass_values, pass_class): (Option<SplitPassFn>, Option<SplitPassClassFn>) =
        if classes { (None, Some(emulator::get(lib, pass))) } else { (Some(emulator::get(lib, pass)), None) };
    let t: *const std::ffi::c_void = match target {
        Target::Values(y) => y.as_ptr().cast(),
        Target::Labels(l, _) => l.as_ptr().cast(),
    };
    #[derive(Clone, Copy)]
    struct P {
        ids: *const u32,
        op: *const u8,
        value: *mut f32,
        out: *const u8,
        len: *const u16,
        x: *const f32,
        t: *const std::ffi::c_void,
        offset: *const f32,
        fits: *mut u8,
        partials: *mut f64,
        scratch: *mut u8,
        res: *mut FitResult,
    }
    // SAFETY: as Ptrs: each block writes its own tree's state, part, result and row.
    unsafe impl Sync for P {}
    unsafe impl Send for P {}
    let p = P {
        ids: ids.as_ptr(),
        op: pop.op.as_ptr(),
        value: pop.value.as_mut_ptr(),
        out: pop.out.as_ptr(),
        len: pop.len.as_ptr(),
        x: x.as_ptr(),
        t,
        offset: target.offset(),
        fits: fits.as_mut_ptr().cast(),
        partials: partials.as_mut_ptr(),
        scratch: scratch.as_mut_ptr().cast(),
        res: res.as_mut_ptr(),
    };
    let np = n_parts as u32;
    for b in 0..(n as u32).div_ceil(threads) {
        // SAFETY: the arrays have the sizes launch_split_fit gives the kernels.
        run_block(lib, b, threads, &move || unsafe {
            let p = p;
            start(params, p.ids, p.op, p.value, p.out, p.len, p.fits, p.res, p.scratch)
        });
    }
    for _ in 0..params.steps + 2 {
        for b in 0..(n * n_parts) as u32 {
            // SAFETY: as above.
            run_block(lib, b, threads, &move || unsafe {
                let p = p;
                match (pass_values, pass_class) {
                    (Some(pass), _) => pass(params, np, p.fits, p.scratch, p.x, p.t, p.partials),
                    (_, Some(pass)) => pass(params, np, p.fits, p.scratch, p.x, p.t.cast(), p.offset, p.partials),
                    _ => unreachable!(),
                }
            });
        }
        for b in 0..n as u32 {
            // SAFETY: as above.
            run_block(lib, b, threads, &move || unsafe {
                let p = p;
                step(params, np, p.ids, p.op, p.value, p.fits, p.partials, p.res)
            });
        }
    }
    res
}

/// The kernel, emulated: fits rows `rows` of `pop` in place with blocks of `threads` threads.
fn emulated_fit(lib: &libloading::Library, pop: &mut Population, rows: &[usize], x: &[f32], y: &[f32], cfg: FitConfig, threads: u32) -> Vec<FitResult> {
    let params = FitParams {
        n_trees: rows.len() as u32,
        max_len: pop.max_len as u32,
        n_rows: y.len() as u32,
        n_features: (x.len() / y.len()) as u32,
        steps: cfg.steps,
        scaling: cfg.linear_scaling as u32,
        n_classes: 0,
        n_outputs: 0,
    };
    emulate(lib, pop, rows, x, Target::Values(y), params, threads)
}

/// The classification kernel, emulated: fits rows `rows` of `pop` in place on `labels` of
/// `n_classes`, with `offset` under the outputs where given, with blocks of `threads` threads.
#[allow(clippy::too_many_arguments)]
fn emulated_class_fit(
    lib: &libloading::Library,
    pop: &mut Population,
    rows: &[usize],
    x: &[f32],
    labels: &[u32],
    offset: Option<&[f32]>,
    n_classes: usize,
    steps: u32,
    threads: u32,
) -> Vec<FitResult> {
    let params = FitParams {
        n_trees: rows.len() as u32,
        max_len: pop.max_len as u32,
        n_rows: labels.len() as u32,
        n_features: (x.len() / labels.len()) as u32,
        steps,
        scaling: 0,
        n_classes: n_classes as u32,
        n_outputs: pop.n_outputs as u32,
    };
    emulate(lib, pop, rows, x, Target::Labels(labels, offset), params, threads)
}

/// Offsets under `slots` outputs of `n_rows` rows of `x` (`[3][n_rows]`), as a linear model's
/// terms would be: finite, of either sign, different per slot.
fn class_offset(x: &[f32], n_rows: usize, slots: usize) -> Vec<f32> {
    (0..slots * n_rows).map(|i| 0.6 * x[i % n_rows] - 0.4 * x[n_rows + i % n_rows] + 0.3 * (i / n_rows) as f32 - 0.2).collect()
}

/// A classification problem: programs of `n_outputs` slots (0: one output for two classes)
/// with constants, `[3][n_rows]` inputs, and labels of `n_classes` from the nearest of
/// `n_classes` centres.
fn class_problem(n_trees: usize, n_rows: usize, n_classes: usize, n_outputs: usize, seed: u64, functions: &str) -> (Population, Vec<f32>, Vec<u32>) {
    let spec = TreeSpec::new(parse_function_set(functions).unwrap(), 3, 64)
        .with_depth(2, 5)
        .with_const_range(-1.5, 1.5)
        .with_p_const(0.4)
        .with_outputs(n_outputs, if n_outputs > 0 { 0.2 } else { 0.0 });
    let pop = init_population(&spec, n_trees, seed).unwrap();
    let x: Vec<f32> = (0..3 * n_rows).map(|i| ((i * 53 % 101) as f32) * 0.04 - 2.0).collect();
    let labels: Vec<u32> = (0..n_rows)
        .map(|r| {
            let d = |k: usize| {
                let c = [k as f32 * 0.7 - 1.0, (k as f32 * 1.3).sin(), (k as f32 * 0.9).cos()];
                (0..3).map(|f| (x[f * n_rows + r] - c[f]).powi(2)).sum::<f32>()
            };
            (0..n_classes).min_by(|&a, &b| d(a).total_cmp(&d(b))).unwrap() as u32
        })
        .collect();
    (pop, x, labels)
}

fn emulator_lib() -> Option<libloading::Library> {
    emulator::build(&kernels::FIT, |s| format!("{}{s}", emulator::poison_libm()))
}

/// The kernel, emulated, keeping trees of at most `nodes` nodes in shared memory: longer ones
/// are decoded into the scratch array.
fn emulator_lib_keeping(nodes: usize) -> Option<libloading::Library> {
    emulator::build(&kernels::FIT, |s| {
        let define = format!("#define GROVE_FIT_NODES {}", kernels::FIT_NODES);
        assert!(s.contains(&define), "fit.cu no longer has `{define}`");
        format!("{}{}", emulator::poison_libm(), s.replace(&define, &format!("#define GROVE_FIT_NODES {nodes}")))
    })
}

/// Trees of more nodes than the emulated kernel of [`emulator_libs`] keeps in shared memory.
const KEPT: usize = 12;

/// The emulated kernel as built, and again decoding every tree of more than [`KEPT`] nodes into
/// the scratch array.
fn emulator_libs() -> Vec<(libloading::Library, &'static str)> {
    [(emulator_lib(), "shared nodes"), (emulator_lib_keeping(KEPT), "scratch nodes")].into_iter().filter_map(|(l, w)| Some((l?, w))).collect()
}

#[test]
fn emulated_kernel_fits_the_references_bits() {
    for (lib, nodes) in emulator_libs() {
        for (functions, seed) in [("add,sub,mul,div,sin,cos,exp,log,sqrt,tanh", 3u64), (ALL, 4)] {
            for scaling in [false, true] {
                // 75 rows over 32 threads: a chunk of two rows a thread and a partial one; 90 over
                // 48: one partial chunk; 50 over 64: one row a thread; 150 over 64: chunks of two
                // rows a thread and a partial one.
                for (threads, n_rows) in [(32u32, 75usize), (48, 90), (64, 50), (64, 150)] {
                    let (pop, x, y) = problem(40, n_rows, seed, functions);
                    let rows: Vec<usize> = (0..pop.size()).rev().step_by(2).collect();
                    assert!(rows.iter().filter(|&&r| pop.len[r] as usize > KEPT).count() >= rows.len() / 4, "too few trees take the scratch array");
                    let cfg = FitConfig { steps: 6, linear_scaling: scaling };
                    let mut want = pop.clone();
                    let want_res = fit_constants(&mut want, &rows, &x, &y, n_rows, cfg);
                    let mut got = pop.clone();
                    let got_res = emulated_fit(&lib, &mut got, &rows, &x, &y, cfg, threads);
                    let what = format!("{functions}, scaling {scaling}, {threads} threads, {nodes}");
                    same_results(&got_res, &want_res, &what);
                    same_values(&got, &want, &what);
                    let accepted = want_res.iter().filter(|r| r.accepted > 0).count();
                    assert!(accepted >= rows.len() / 3, "{what}: only {accepted} of {} trees improved: the test fits too little", rows.len());
                    assert_ne!(want.value, pop.value, "{what}: nothing was fitted");
                }
            }
        }
    }
}

/// User operators (one composed of another) for the fits below: their partial derivatives are
/// forward mode through their bodies, in Rust on the CPU and in the generated
/// `GROVE_USER_PARTIALS` in the kernel.
const USER: &[&str] = &["f_softsign(x) = x / (1 + abs(x))", "f_hyp(a, b) = sqrt(a*a + b*b)", "f_bump(a, b) = exp(-f_hyp(a, b)) * sin(a) + 0.5"];
const WITH_USER: &str = "add,sub,mul,f_softsign,f_hyp,f_bump";

fn register_user() {
    grove::program::ops::user::register(&USER.iter().map(|d| d.to_string()).collect::<Vec<_>>()).unwrap();
}

#[test]
fn emulated_kernel_fits_user_operators_to_the_references_bits() {
    register_user();
    let Some(lib) = emulator_lib() else { return };
    for scaling in [false, true] {
        let (pop, x, y) = problem(40, 75, 21, WITH_USER);
        let rows: Vec<usize> = (0..pop.size()).collect();
        let cfg = FitConfig { steps: 6, linear_scaling: scaling };
        let mut want = pop.clone();
        let want_res = fit_constants(&mut want, &rows, &x, &y, 75, cfg);
        let mut got = pop.clone();
        let got_res = emulated_fit(&lib, &mut got, &rows, &x, &y, cfg, 32);
        let what = format!("user operators, scaling {scaling}");
        same_results(&got_res, &want_res, &what);
        same_values(&got, &want, &what);
        assert!(want_res.iter().filter(|r| r.accepted > 0).count() >= rows.len() / 3, "{what}: too little fitted");
    }
}

#[test]
fn emulated_kernel_leaves_trees_it_cannot_fit() {
    let Some(lib) = emulator_lib() else { return };
    // Output nodes (a multi-output population), empty rows, and a variable past the data's
    // features: every result says nothing was fitted and no value moves.
    let spec = TreeSpec::new(parse_function_set("add,mul,sin").unwrap(), 3, 32).with_depth(2, 4).with_const_range(-1.0, 1.0).with_outputs(2, 0.3);
    let pop = init_population(&spec, 6, 8).unwrap();
    let n_rows = 20;
    let x: Vec<f32> = (0..2 * n_rows).map(|i| i as f32 * 0.1).collect(); // 2 features: x2 is past them
    let y: Vec<f32> = (0..n_rows).map(|r| r as f32).collect();
    let cfg = FitConfig { steps: 4, linear_scaling: true };
    let mut with_empty = pop.clone();
    with_empty.clear(1);
    let rows: Vec<usize> = (0..with_empty.size()).collect();
    let mut got = with_empty.clone();
    let res = emulated_fit(&lib, &mut got, &rows, &x, &y, cfg, 32);
    let mut want = with_empty.clone();
    let want_res = fit_constants(&mut want, &rows, &x, &y, n_rows, cfg);
    same_results(&res, &want_res, "unfittable trees");
    assert!(res.iter().all(|r| r.constants == 0 && r.accepted == 0 && r.sse_before.is_nan()), "{res:?}");
    assert_eq!(got.value, with_empty.value);
}

#[test]
fn emulated_class_kernel_fits_the_references_bits() {
    for (lib, nodes) in emulator_libs() {
        // Three classes with output nodes, two with one output, and sixteen (the most: chunks of
        // few rows); rows that fill no whole chunk; 32, 48 and 64 threads.
        for (n_classes, n_outputs, functions, seed) in [(3usize, 3usize, "add,sub,mul,div,sin,tanh", 5u64), (2, 0, ALL, 6), (16, 16, "add,mul,sub,cos", 7)] {
            for (threads, n_rows) in [(32u32, 75usize), (48, 61), (64, 90)] {
                let (pop, x, labels) = class_problem(24, n_rows, n_classes, n_outputs, seed, functions);
                let rows: Vec<usize> = (0..pop.size()).rev().step_by(2).collect();
                assert!(rows.iter().any(|&r| pop.len[r] as usize > KEPT), "no program takes the scratch array");
                // Without offsets, and with the linear terms' offsets under the outputs.
                let offset = class_offset(&x, n_rows, n_outputs.max(1));
                for off in [None, Some(&offset[..])] {
                    let mut want = pop.clone();
                    let want_res = fit_class_constants(&mut want, &rows, &x, &labels, off, n_rows, n_classes, 5);
                    let mut got = pop.clone();
                    let got_res = emulated_class_fit(&lib, &mut got, &rows, &x, &labels, off, n_classes, 5, threads);
                    let what = format!("{n_classes} classes, {n_outputs} outputs, {threads} threads, {nodes}, offsets {}", off.is_some());
                    same_results(&got_res, &want_res, &what);
                    same_values(&got, &want, &what);
                    let accepted = want_res.iter().filter(|r| r.accepted > 0).count();
                    assert!(accepted >= rows.len() / 3, "{what}: only {accepted} of {} programs improved: the test fits too little", rows.len());
                }
            }
        }
    }
}

/// Data of more than one part (`FIT_PART` rows): the single-block kernels add the parts' sums
/// in order as the reference does, and the split fit (a block per part) gives the same bits,
/// for regression with and without scaling and for classification.
#[test]
fn emulated_kernels_fit_data_of_several_parts_to_the_references_bits() {
    let Some(lib) = emulator_lib() else { return };
    let n_rows = 2 * grove::backend::cpu::fit::FIT_PART + 300;
    for scaling in [false, true] {
        let (pop, x, y) = problem(8, n_rows, 31, "add,sub,mul,div,sin,exp");
        let rows: Vec<usize> = (0..pop.size()).collect();
        let cfg = FitConfig { steps: 4, linear_scaling: scaling };
        let mut want = pop.clone();
        let want_res = fit_constants(&mut want, &rows, &x, &y, n_rows, cfg);
        let mut got = pop.clone();
        let got_res = emulated_fit(&lib, &mut got, &rows, &x, &y, cfg, 64);
        let what = format!("{n_rows} rows, scaling {scaling}, one block a tree");
        same_results(&got_res, &want_res, &what);
        same_values(&got, &want, &what);
        let params = FitParams {
            n_trees: rows.len() as u32,
            max_len: pop.max_len as u32,
            n_rows: n_rows as u32,
            n_features: 2,
            steps: cfg.steps,
            scaling: scaling as u32,
            n_classes: 0,
            n_outputs: 0,
        };
        let mut split = pop.clone();
        let split_res = emulate_split(&lib, &mut split, &rows, &x, Target::Values(&y), params, 64);
        let what = format!("{n_rows} rows, scaling {scaling}, split");
        same_results(&split_res, &want_res, &what);
        same_values(&split, &want, &what);
        assert!(want_res.iter().filter(|r| r.accepted > 0).count() >= rows.len() / 3, "{what}: too little fitted");
    }
    let (n_classes, n_rows) = (3, grove::backend::cpu::fit::FIT_PART + 150);
    let (pop, x, labels) = class_problem(6, n_rows, n_classes, n_classes, 32, "add,sub,mul,tanh");
    let rows: Vec<usize> = (0..pop.size()).collect();
    let offset = class_offset(&x, n_rows, n_classes);
    for off in [None, Some(&offset[..])] {
        let what = format!("classes, offsets {}", off.is_some());
        let mut want = pop.clone();
        let want_res = fit_class_constants(&mut want, &rows, &x, &labels, off, n_rows, n_classes, 3);
        let mut got = pop.clone();
        let got_res = emulated_class_fit(&lib, &mut got, &rows, &x, &labels, off, n_classes, 3, 32);
        same_results(&got_res, &want_res, &format!("{what}, one block a program"));
        same_values(&got, &want, &format!("{what}, one block a program"));
        let params = FitParams {
            n_trees: rows.len() as u32,
            max_len: pop.max_len as u32,
            n_rows: n_rows as u32,
            n_features: 3,
            steps: 3,
            scaling: 0,
            n_classes: n_classes as u32,
            n_outputs: n_classes as u32,
        };
        let mut split = pop.clone();
        let split_res = emulate_split(&lib, &mut split, &rows, &x, Target::Labels(&labels, off), params, 32);
        same_results(&split_res, &want_res, &format!("{what}, split"));
        same_values(&split, &want, &format!("{what}, split"));
        assert!(want_res.iter().any(|r| r.accepted > 0), "{what}: nothing fitted");
    }
}

mod gpu {
    use super::*;
    use grove::backend::cuda::CudaEngine;

    fn engine() -> CudaEngine {
        CudaEngine::new().unwrap_or_else(|e| panic!("GROVE_TEST_GPU=1 but {e}"))
    }

    /// The GPU's fit of rows `rows` of `pop` on `x` (`[2][n]`) and `y` against the reference's:
    /// the same results and values. Returns the reference's results.
    fn regression_matches(e: &CudaEngine, pop: &Population, rows: &[usize], x: &[f32], y: &[f32], cfg: FitConfig, what: &str) -> Vec<FitResult> {
        let n_rows = y.len();
        let data = e.upload_dataset(x, y, n_rows, 2).unwrap();
        let mut want = pop.clone();
        let want_res = fit_constants(&mut want, rows, x, y, n_rows, cfg);
        let mut got = pop.clone();
        let got_res = e.fit_constants(&mut got, rows, &data, cfg).unwrap();
        same_results(&got_res, &want_res, what);
        same_values(&got, &want, what);
        want_res
    }

    /// As [`regression_matches`] for a classification fit on `x` (`[3][n]`) and `labels`,
    /// with the offsets of [`class_offset`] under the outputs where `offsets`.
    #[allow(clippy::too_many_arguments)]
    fn class_matches(e: &CudaEngine, pop: &Population, rows: &[usize], x: &[f32], labels: &[u32], n_classes: usize, steps: u32, offsets: bool, what: &str) -> Vec<FitResult> {
        let n_rows = labels.len();
        let mut data = e.upload_class_data(x, labels, n_rows, 3, n_classes).unwrap();
        let offset = class_offset(x, n_rows, pop.n_outputs.max(1));
        let off = offsets.then_some(&offset[..]);
        if let Some(o) = off {
            e.set_class_offset(&mut data, o).unwrap();
        }
        let mut want = pop.clone();
        let want_res = fit_class_constants(&mut want, rows, x, labels, off, n_rows, n_classes, steps);
        let mut got = pop.clone();
        let got_res = e.fit_class_constants(&mut got, rows, &data, steps).unwrap();
        same_results(&got_res, &want_res, what);
        same_values(&got, &want, what);
        want_res
    }

    #[test]
    #[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
    fn gpu_kernel_fits_the_references_bits() {
        let e = engine();
        for (functions, seed) in [("add,sub,mul,div,sin,cos,exp,log,sqrt,tanh", 13u64), (ALL, 14)] {
            for scaling in [false, true] {
                // 64 rows: one a thread, half the block idle in the walk (W2's shape).
                for n_rows in [64usize, 75, 1000] {
                    let (pop, x, y) = problem(500, n_rows, seed, functions);
                    let rows: Vec<usize> = (0..pop.size()).filter(|r| r % 3 != 1).collect();
                    let cfg = FitConfig { steps: 8, linear_scaling: scaling };
                    let what = format!("GPU, {functions}, scaling {scaling}, {n_rows} rows");
                    let want_res = regression_matches(&e, &pop, &rows, &x, &y, cfg, &what);
                    assert!(want_res.iter().filter(|r| r.accepted > 0).count() > rows.len() / 3, "{what}: too little fitted");
                }
            }
        }
    }

    /// Data of several parts: the split fit (a block per part of each tree) for regression and
    /// classification, the reference's bits.
    #[test]
    #[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
    fn gpu_split_fits_give_the_references_bits() {
        let e = engine();
        let n_rows = 3 * grove::backend::cpu::fit::FIT_PART + 77;
        for scaling in [false, true] {
            let (pop, x, y) = problem(60, n_rows, 33, "add,sub,mul,div,sin,cos,exp,log,sqrt,tanh");
            let rows: Vec<usize> = (0..pop.size()).filter(|r| r % 4 != 1).collect();
            let cfg = FitConfig { steps: 8, linear_scaling: scaling };
            let what = format!("GPU split, scaling {scaling}");
            let want_res = regression_matches(&e, &pop, &rows, &x, &y, cfg, &what);
            assert!(want_res.iter().filter(|r| r.accepted > 0).count() > rows.len() / 3, "{what}: too little fitted");
        }
        for (n_classes, n_outputs) in [(3usize, 3usize), (2, 0)] {
            let n_rows = 2 * grove::backend::cpu::fit::FIT_PART + 5;
            let (pop, x, labels) = class_problem(40, n_rows, n_classes, n_outputs, 34, "add,sub,mul,div,tanh");
            let rows: Vec<usize> = (0..pop.size()).collect();
            for offsets in [false, true] {
                let what = format!("GPU split, {n_classes} classes, offsets {offsets}");
                let want_res = class_matches(&e, &pop, &rows, &x, &labels, n_classes, 5, offsets, &what);
                assert!(want_res.iter().any(|r| r.accepted > 0), "{what}: nothing fitted");
            }
        }
    }

    #[test]
    #[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
    fn gpu_kernel_fits_user_operators_to_the_references_bits() {
        register_user();
        let e = engine();
        for scaling in [false, true] {
            let (pop, x, y) = problem(300, 1000, 22, WITH_USER);
            let rows: Vec<usize> = (0..pop.size()).collect();
            let cfg = FitConfig { steps: 8, linear_scaling: scaling };
            regression_matches(&e, &pop, &rows, &x, &y, cfg, &format!("GPU, user operators, scaling {scaling}"));
        }
    }

    #[test]
    #[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
    fn gpu_class_kernel_fits_the_references_bits() {
        let e = engine();
        for (n_classes, n_outputs, functions, seed) in [(3usize, 3usize, "add,sub,mul,div,sin,tanh", 15u64), (2, 0, ALL, 16), (10, 10, "add,sub,mul,div", 17), (16, 16, "add,mul,sub,cos", 18)] {
            for n_rows in [64usize, 75, 1000] {
                let (pop, x, labels) = class_problem(300, n_rows, n_classes, n_outputs, seed, functions);
                let rows: Vec<usize> = (0..pop.size()).filter(|r| r % 3 != 1).collect();
                for offsets in [false, true] {
                    let what = format!("GPU, {n_classes} classes, {n_outputs} outputs, {n_rows} rows, offsets {offsets}");
                    let want_res = class_matches(&e, &pop, &rows, &x, &labels, n_classes, 6, offsets, &what);
                    assert!(want_res.iter().filter(|r| r.accepted > 0).count() > rows.len() / 3, "{what}: too little fitted");
                }
            }
        }
        // Outputs that are not the classes: one clear error.
        let (pop, x, labels) = class_problem(4, 20, 3, 2, 1, "add,mul");
        let data = e.upload_class_data(&x, &labels, 20, 3, 3).unwrap();
        let err = e.fit_class_constants(&mut pop.clone(), &[0, 1], &data, 3).unwrap_err().to_string();
        assert!(err.contains("2 outputs cannot be fitted to 3 classes"), "{err}");
    }

    #[test]
    #[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
    fn gpu_fits_device_rows_in_place() {
        let e = engine();
        let n_rows = 200;
        let (pop, x, y) = problem(300, n_rows, 21, "add,sub,mul,div,sin,exp");
        let data = e.upload_dataset(&x, &y, n_rows, 2).unwrap();
        let rows: Vec<u32> = (0..300).filter(|r| r % 2 == 0).collect();
        let mut dev = e.upload_population(&pop).unwrap();
        let idx = e.upload_indices(&rows, pop.size()).unwrap();
        let cfg = FitConfig { steps: 5, linear_scaling: true };
        let res = e.fit_constants_on_device(&mut dev, &idx, &data, cfg).unwrap();
        let got = e.download_population(&dev).unwrap();
        let mut want = pop.clone();
        let rows_us: Vec<usize> = rows.iter().map(|&r| r as usize).collect();
        let want_res = fit_constants(&mut want, &rows_us, &x, &y, n_rows, cfg);
        same_results(&res, &want_res, "device rows");
        same_values(&got, &want, "device rows");
        // Rows not listed are untouched.
        for r in (0..300).filter(|r| r % 2 == 1) {
            assert_eq!(got.tree(r).value, pop.tree(r).value, "row {r} was not to be fitted");
        }
    }
}
