//! `kernels/classify.cu` run on the CPU: built as host C++ by g++ (`tests/cuda_host_shim.h`),
//! its own code scores random multi-output and one-output populations, with and without the
//! offsets of linear terms of the inputs, against the CPU reference
//! (`backend::cpu::classify::evaluate_classification_with`), so that CI checks what every GPU
//! classification runs without a GPU. The kernel's exponentials and logarithm are
//! `grove_math.cuh`'s, the CPU's bits (C's own are poisoned here), so every count is the CPU's
//! and a point's cross-entropy too; the sums over points differ only by their order, a few ulps.

#[path = "support/emulator.rs"]
mod emulator;

use grove::backend::cpu::classify::evaluate_classification_with;
use grove::backend::cuda::kernels;
use grove::backend::cuda::params::{ClassPartial, ClassReduceParams, ClassifyParams};
use grove::program::fitness::ClassSums;
use grove::program::init::{TreeSpec, init_population};
use grove::program::ops::FUNCTIONS;
use grove::program::tree::Population;

type SetThread = unsafe extern "C" fn(u32, u32, u32);
type RunBlock = unsafe extern "C" fn(u32, extern "C" fn(*mut std::ffi::c_void), *mut std::ffi::c_void);
type SetBlock = unsafe extern "C" fn(u32);
type ClassifyFn = unsafe extern "C" fn(
    ClassifyParams,
    *const u32,
    *const u8,
    *const f32,
    *const u16,
    *const u8,
    *const u16,
    *const f32,
    *const u32,
    *const f32,
    *mut ClassPartial,
    *mut u32,
);
type ReduceFn = unsafe extern "C" fn(ClassReduceParams, *const ClassPartial, *const u32, *mut ClassPartial, *mut u32);

/// Threads per emulated block: one warp, so the kernel's warp-0 reduction is the whole block.
const THREADS: usize = 32;

/// classify.cu as a host library: CUDA's min and max, `__ldg`, a block-wide `__shfl_down_sync`
/// (the block is one warp) and the dynamic shared memory spelled for g++.
fn classify_library() -> Option<libloading::Library> {
    emulator::build(&kernels::CLASSIFY, |s| {
        let prelude = format!("{}{}", emulator::poison_libm(), emulator::EVAL_PRELUDE);
        let dynamic = "extern __shared__ unsigned grove_shared[];";
        assert!(s.contains(dynamic), "classify.cu no longer has `{dynamic}`");
        let s = s.replace(dynamic, "static unsigned grove_shared[1 << 16] __attribute__((aligned(16)));");
        format!("{prelude}{s}")
    })
}

/// The kernels' sums of every tree of `pop` (kernel `name`) over `x`, `labels` and `offset`.
#[allow(clippy::too_many_arguments)]
fn kernel_sums(lib: &libloading::Library, name: &str, pop: &Population, x: &[f32], labels: &[u32], n: usize, k: usize, offset: Option<&[f32]>) -> Vec<ClassSums> {
    let run_block: RunBlock = emulator::get(lib, "grove_emu_run_block");
    let set_block: SetBlock = emulator::get(lib, "grove_emu_set_block");
    let set_thread: SetThread = emulator::get(lib, "grove_emu_set_thread");
    let f: ClassifyFn = emulator::get(lib, name);
    let reduce: ReduceFn = emulator::get(lib, kernels::REDUCE_CLASSIFY);
    let (p, l) = (pop.size(), pop.max_len);
    let tile = THREADS * 3;
    let n_tiles = n.div_ceil(tile);
    let params = ClassifyParams {
        n_rows: n as u32,
        n_features: (x.len() / n) as u32,
        max_len: l as u32,
        n_outputs: pop.n_outputs as u32,
        n_classes: k as u32,
        n_trees: p as u32,
        tile_points: tile as u32,
        n_tiles: n_tiles as u32,
        has_offset: offset.is_some() as u32,
        reserved: 0,
    };
    let ids: Vec<u32> = (0..p as u32).collect();
    let off = offset.unwrap_or(x);
    let mut partials = vec![ClassPartial::default(); p * n_tiles];
    let mut correct = vec![0xdeadu32; p * n_tiles * 2 * k];
    let arrays = [pop.op.as_ptr() as usize, pop.value.as_ptr() as usize, pop.size.as_ptr() as usize, pop.out.as_ptr() as usize, pop.len.as_ptr() as usize];
    let addr = (ids.as_ptr() as usize, arrays, x.as_ptr() as usize, labels.as_ptr() as usize, off.as_ptr() as usize, partials.as_mut_ptr() as usize, correct.as_mut_ptr() as usize);
    let body = move || {
        let (i, [op, value, size, out, len], xx, lab, of, part, cor) = addr;
        // SAFETY: grove_classify_*(GroveClassifyParams, tree_ids, ops, values, sizes, outs, lens,
        // x, labels, offset, partials, correct) on P ids, the population's P × L nodes and P
        // lengths, F × N features, N labels, max(1, outputs) × N offsets (unread without
        // has_offset), P × n_tiles partials and P × n_tiles × 2K counts; each block writes its own.
        unsafe {
            f(params, i as *const u32, op as *const u8, value as *const f32, size as *const u16, out as *const u8, len as *const u16,
              xx as *const f32, lab as *const u32, of as *const f32, part as *mut ClassPartial, cor as *mut u32)
        }
    };
    let body: &(dyn Fn() + Sync) = &body;
    extern "C" fn call(ctx: *mut std::ffi::c_void) {
        // SAFETY: ctx is the `&&dyn Fn` below, alive until the block has joined.
        let f = unsafe { &*(ctx as *const &(dyn Fn() + Sync)) };
        f();
    }
    for b in 0..p * n_tiles {
        // SAFETY: one emulated block at a time; the library joins its threads.
        unsafe {
            set_block(b as u32);
            run_block(THREADS as u32, call, &body as *const &(dyn Fn() + Sync) as *mut std::ffi::c_void);
        }
    }
    let mut sums = vec![ClassPartial::default(); p];
    let mut sums_correct = vec![0u32; p * 2 * k];
    let rp = ClassReduceParams { n_trees: p as u32, n_tiles: n_tiles as u32, n_classes: k as u32, reserved: 0 };
    for t in 0..p {
        // SAFETY: one thread per tree over P × n_tiles partials (× 2K counts) into P sums and
        // P × 2K counts, as grove_reduce_classify reads and writes.
        unsafe {
            set_thread(t as u32 / 8, 8, t as u32 % 8);
            reduce(rp, partials.as_ptr(), correct.as_ptr(), sums.as_mut_ptr(), sums_correct.as_mut_ptr());
        }
    }
    sums.iter()
        .zip(sums_correct.chunks_exact(2 * k))
        .map(|(s, c)| ClassSums {
            correct: c[..k].iter().map(|&v| v as u64).collect(),
            predicted: c[k..].iter().map(|&v| v as u64).collect(),
            ce: s.ce,
            n: s.n as u64,
            bad: s.bad as u64,
        })
        .collect()
}

#[test]
fn the_classification_kernels_match_the_cpu_with_and_without_offsets() {
    let Some(lib) = classify_library() else { return };
    let (n, f) = (250usize, 3usize);
    let x: Vec<f32> = (0..f * n).map(|i| ((i * 53 % 97) as f32 - 48.0) * 0.05).collect();
    for (k, n_out, seed) in [(3usize, 3usize, 1u64), (2, 0, 2), (4, 4, 3)] {
        let spec = TreeSpec::new(FUNCTIONS.to_vec(), f as u32, 40).with_outputs(n_out, 0.2).with_depth(1, 6);
        let mut pop = init_population(&spec, 12, seed).unwrap();
        pop.clear(5); // no program: every point bad
        let labels: Vec<u32> = (0..n).map(|i| ((i * 7 + i / 5) % k) as u32).collect();
        let offset: Vec<f32> = (0..n_out.max(1) * n).map(|i| ((i * 31 % 61) as f32 - 30.0) * 0.1).collect();
        for off in [None, Some(&offset[..])] {
            let want = evaluate_classification_with(&pop, &x, &labels, n, k, off).unwrap();
            for name in [kernels::CLASSIFY_FAST, kernels::CLASSIFY_DEEP] {
                let got = kernel_sums(&lib, name, &pop, &x, &labels, n, k, off);
                for t in 0..pop.size() {
                    let (g, c) = (&got[t], &want[t]);
                    let at = format!("{name}, K={k} outputs={n_out} offsets={}, tree {t}", off.is_some());
                    assert_eq!((g.n, g.bad), (c.n, c.bad), "{at}");
                    // The same f32 logits: the same argmax at every point.
                    assert_eq!((&g.correct, &g.predicted), (&c.correct, &c.predicted), "{at}: correct and predicted counts");
                    assert_eq!(g.predicted.iter().sum::<u64>(), g.n - g.bad, "{at}: every finite point predicts one class");
                    // Each point's cross-entropy has the CPU's bits; only the order of the f64
                    // sums over points differs (the tiles' threads against the rows in order).
                    assert!((g.ce - c.ce).abs() <= 1e-12 * c.ce.abs().max(1.0), "{at}: ce kernel {} cpu {}", g.ce, c.ce);
                }
                assert_eq!(got[5].bad, n as u64, "an empty row: every point bad");
            }
        }
        // The offsets move the sums.
        let plain = evaluate_classification_with(&pop, &x, &labels, n, k, None).unwrap();
        let moved = evaluate_classification_with(&pop, &x, &labels, n, k, Some(&offset)).unwrap();
        assert_ne!(plain, moved);
    }
}
