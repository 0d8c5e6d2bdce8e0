//! The one interpreter of the kernels (`kernels/interp.cuh`) run on the CPU: eval.cu is built as
//! host C++ by g++ (`tests/cuda_host_shim.h`), and its own code compiles random populations
//! (`grove_compile_trees`, against its twin `backend::cpu::interp::compile_trees`) and predicts
//! (`grove_predict_k*` and `grove_predict_deep`, each block compiling its tree with
//! `grove_compile_chunk`, against the CPU interpreter, bit for bit), so that CI checks what
//! every GPU evaluation runs without a GPU. The library is built with 16-node chunks, so that
//! trees both fit one chunk and span several.

#[path = "support/emulator.rs"]
mod emulator;

use grove::backend::cuda::kernels;
use grove::backend::cuda::params::{CompileParams, EvalParams};
use grove::backend::cpu::interp::{self, Instr};
use grove::program::init::{TreeSpec, init_population};
use grove::program::ops::FUNCTIONS;
use grove::program::tree::Population;

type SetThread = unsafe extern "C" fn(u32, u32, u32);
type RunBlock = unsafe extern "C" fn(u32, extern "C" fn(*mut std::ffi::c_void), *mut std::ffi::c_void);
type SetBlock = unsafe extern "C" fn(u32);
type CompileFn = unsafe extern "C" fn(CompileParams, *const u32, *const u8, *const f32, *const u16, *const u8, *const u16, *mut Instr, *mut u16);
type PredictFn = unsafe extern "C" fn(EvalParams, *const u32, *const u8, *const f32, *const u16, *const u8, *const u16, *const f32, *mut f32);

/// eval.cu as a host library: CUDA's min and max, `__ldg` and the dynamic shared memory spelled
/// for g++; the warp shuffles of the regression sums (not run here) trap; with the compile
/// kernel (interp.cuh's, as sim.cu compiles it) and 16-node chunks.
fn eval_library() -> Option<libloading::Library> {
    emulator::build(&kernels::EVAL, |s| {
        let prelude = "using std::min;\nusing std::max;\n#define __ldg(p) (*(p))\n\
                       template <class T> T __shfl_down_sync(unsigned, T, int) { abort(); }\n";
        let s = s.replace("extern __shared__ float slots[];", "static float slots[1 << 16] __attribute__((aligned(16)));");
        let chunk = format!("#define GROVE_CHUNK {}", kernels::CHUNK);
        assert!(s.contains(&chunk), "eval.cu no longer has `{chunk}`");
        // interp.cuh's compile kernel (one thread per tree, over grove_compile_tree), which only
        // sim.cu asks for.
        format!("{prelude}#define GROVE_COMPILE_TREES\n{}", s.replace(&chunk, "#define GROVE_CHUNK 16"))
    })
}

fn population(n_out: usize, seed: u64) -> Population {
    let spec = TreeSpec::new(FUNCTIONS.to_vec(), 3, 80).with_outputs(n_out, 0.2).with_depth(1, 8);
    let mut pop = init_population(&spec, 40, seed).unwrap();
    pop.clear(7); // an empty row: no program
    pop
}

#[test]
fn the_device_compiler_and_interpreter_match_their_twins() {
    let Some(lib) = eval_library() else { return };
    let set_thread: SetThread = emulator::get(&lib, "grove_emu_set_thread");
    let run_block: RunBlock = emulator::get(&lib, "grove_emu_run_block");
    let set_block: SetBlock = emulator::get(&lib, "grove_emu_set_block");
    let compile: CompileFn = emulator::get(&lib, kernels::COMPILE_TREES);
    let (n_rows, n_feat) = (300usize, 3usize);
    let x: Vec<f32> = (0..n_feat * n_rows).map(|i| ((i * 53 % 97) as f32 - 48.0) * 0.21).collect();
    for n_out in [0usize, 2] {
        let pop = population(n_out, 5 + n_out as u64);
        let (p, l) = (pop.size(), pop.max_len);
        let ids: Vec<u32> = (0..p as u32).rev().collect();
        // The compiler: every row, in a scrambled order, against its twin.
        let mut prog = vec![Instr { a: 0xdead, ..Instr::default() }; p * l];
        let mut n_instr = vec![0xbeefu16; p];
        for g in 0..p {
            // SAFETY: thread indices of the emulated launch; the arrays hold P × L nodes (with
            // their sizes), P lengths, P × L instructions and P counts, as grove_compile_trees
            // reads and writes.
            unsafe {
                set_thread(g as u32 / 4, 4, g as u32 % 4);
                let cp = CompileParams { n_trees: p as u32, max_len: l as u32 };
                compile(cp, ids.as_ptr(), pop.op.as_ptr(), pop.value.as_ptr(), pop.size.as_ptr(), pop.out.as_ptr(), pop.len.as_ptr(), prog.as_mut_ptr(), n_instr.as_mut_ptr());
            }
        }
        let mut want = vec![Instr { a: 0xdead, ..Instr::default() }; p * l];
        let mut want_n = vec![0xbeefu16; p];
        interp::compile_trees(&ids, &pop.op, &pop.value, &pop.out, &pop.len, l, &mut want, &mut want_n);
        assert_eq!(n_instr, want_n, "instruction counts differ");
        for t in 0..p {
            let n = n_instr[t] as usize;
            assert_eq!(&prog[t * l..t * l + n], &want[t * l..t * l + n], "tree {t}: programs differ");
        }
        assert_eq!(n_instr[7], 0, "an empty row compiles to no program");

        // The interpreter: predictions of every kernel variant against the CPU's bits.
        let n_res = n_out.max(1);
        let expect: Vec<Vec<f32>> = (0..p).map(|t| grove::backend::cpu::eval::predict(&pop, t, &x, n_rows).unwrap()).collect();
        for (name, k) in [(kernels::PREDICT[0], 1usize), (kernels::PREDICT[2], 3), (kernels::PREDICT[3], 4), (kernels::PREDICT_DEEP, 1)] {
            let f: PredictFn = emulator::get(&lib, name);
            let threads = 32usize; // a warp: the kernels take multiples of 32
            let tile = threads * k * 2;
            let n_tiles = n_rows.div_ceil(tile);
            let params = EvalParams {
                n_rows: n_rows as u32,
                n_features: n_feat as u32,
                max_len: l as u32,
                n_outputs: n_out as u32,
                n_trees: p as u32,
                tile_points: tile as u32,
                n_tiles: n_tiles as u32,
                reserved: 0,
            };
            let mut pred = vec![f32::from_bits(0x7fa0_0bad); p * n_res * n_rows];
            let arrays = [pop.op.as_ptr() as usize, pop.value.as_ptr() as usize, pop.size.as_ptr() as usize, pop.out.as_ptr() as usize, pop.len.as_ptr() as usize];
            let addr = (ids.as_ptr() as usize, arrays, x.as_ptr() as usize, pred.as_mut_ptr() as usize);
            let body = move || {
                let (i, [op, value, size, out, len], xx, res) = addr;
                // SAFETY: grove_predict_*(GroveEvalParams, tree_ids, ops, values, sizes, outs,
                // lens, x, pred) on buffers of P ids, the population's P × L nodes and P
                // lengths, F × N features and P × R × N results; the block's threads write
                // disjoint results.
                unsafe {
                    f(params, i as *const u32, op as *const u8, value as *const f32, size as *const u16, out as *const u8,
                      len as *const u16, xx as *const f32, res as *mut f32)
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
                    run_block(threads as u32, call, &body as *const &(dyn Fn() + Sync) as *mut std::ffi::c_void);
                }
            }
            for &t in &ids {
                let t = t as usize;
                let got = &pred[t * n_res * n_rows..(t + 1) * n_res * n_rows];
                for (j, (g, w)) in got.iter().zip(&expect[t]).enumerate() {
                    if t == 7 {
                        assert!(g.is_nan() && w.is_nan(), "{name}: an empty row predicts NaN");
                        continue;
                    }
                    if w.is_nan() {
                        // NaN's bits are the hardware's (x86's here, the GPU's canonical one
                        // there): any NaN is the same result, as in tests/cuda_eval.rs.
                        assert!(g.is_nan(), "{name}, tree {t}, output {}, row {}: kernel {g}, CPU NaN", j / n_rows, j % n_rows);
                        continue;
                    }
                    assert_eq!(g.to_bits(), w.to_bits(), "{name}, tree {t}, output {}, row {}: kernel {g}, CPU {w}", j / n_rows, j % n_rows);
                }
            }
        }
    }
}
