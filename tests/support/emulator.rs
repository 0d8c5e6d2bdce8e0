//! Kernel sources built as host C++ by g++ (`tests/cuda_host_shim.h`), so that tests run the
//! kernels' own code on machines without a GPU (CI) and compare it with the CPU reference.
// Each test crate that includes this uses part of it.
#![allow(dead_code)]

use grove::backend::cuda::KernelSource;

/// Builds `src` (one kernel file, its text passed through `edit`) as a host library in a fresh
/// temporary folder; `None` (after saying why) where g++ is missing or lacks C++20.
pub fn build(src: &KernelSource<'_>, edit: impl Fn(String) -> String) -> Option<libloading::Library> {
    // A folder per build: tests running in parallel each build their own library.
    static BUILDS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let k = BUILDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("grove-emu-{}-{}-{k}", src.file, std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let shim = include_str!("../cuda_host_shim.h");
    let setter = "extern \"C\" void grove_emu_set_thread(unsigned b, unsigned d, unsigned t) { blockIdx.x = b; blockDim.x = d; threadIdx.x = t; }\n";
    let cpp = dir.join(format!("{}.cpp", src.file));
    std::fs::write(&cpp, format!("{shim}\n{setter}\n{}\n", edit(src.full_source()))).unwrap();
    let so = dir.join(format!("lib{}.so", src.file));
    let out = std::process::Command::new("g++")
        // -fno-gnu-unique: the function-local statics of the shim's inline warp intrinsics would
        // otherwise be one object in the whole process (STB_GNU_UNIQUE), shared by the libraries
        // of tests running at once, whose warps would then read each other's lanes.
        .args(["-std=c++20", "-O1", "-ffp-contract=off", "-fno-fast-math", "-fno-strict-aliasing", "-fno-gnu-unique", "-shared", "-fPIC", "-pthread", "-w", "-o"])
        .arg(&so)
        .arg(&cpp)
        // Extra flags for debugging a kernel (`-g`, `-fsanitize=address`).
        .args(std::env::var("GROVE_EMU_CFLAGS").unwrap_or_default().split_whitespace())
        .output();
    let lib = match out {
        Err(e) => {
            eprintln!("SKIPPED emulated kernels: g++ not runnable ({e})");
            None
        }
        Ok(o) if !o.status.success() => {
            let err = String::from_utf8_lossy(&o.stderr);
            if err.contains("barrier") || err.contains("c++20") {
                eprintln!("SKIPPED emulated kernels: this g++ lacks C++20 <barrier>");
                return None;
            }
            panic!("g++ failed on {}:\n{err}", src.file)
        }
        // SAFETY: a library built just now from our own sources; it has no constructors.
        Ok(_) => Some(unsafe { libloading::Library::new(&so) }.unwrap()),
    };
    // A loaded library stays mapped after its file is gone (kept for a debugger with flags).
    if std::env::var_os("GROVE_EMU_CFLAGS").is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    lib
}

/// What eval.cu and classify.cu need beyond the shim: CUDA's min and max, `__ldg`, and a
/// block-wide `__shfl_down_sync` (every thread of the block calls it together; a thread reads
/// the value `d` threads above its own, or keeps its own past the block's end), so a block of
/// at most 32 threads is one warp.
pub const EVAL_PRELUDE: &str = "using std::min;\nusing std::max;\n#define __ldg(p) (*(p))\n\
    template <class T> T __shfl_down_sync(unsigned, T v, int d) {\n\
        static T buf[1024];\n\
        buf[threadIdx.x] = v;\n\
        grove_emu_barrier->arrive_and_wait();\n\
        const unsigned from = threadIdx.x + (unsigned)d;\n\
        const T r = from < blockDim.x ? buf[from] : v;\n\
        grove_emu_barrier->arrive_and_wait();\n\
        return r;\n\
    }\n";

/// The function `name` of `lib`, as the C signature `T`.
pub fn get<T: Copy>(lib: &libloading::Library, name: &str) -> T {
    // SAFETY: each caller names the kernel's C signature, as in its .cu definition.
    unsafe { *lib.get::<T>(name.as_bytes()).unwrap_or_else(|e| panic!("{name}: {e}")) }
}

/// Every C math function whose CUDA version may round differently from glibc's: after the shim,
/// each becomes a call to an undeclared function, so a kernel calling one does not compile here.
/// (sqrt, fabs, fmin, fmax, fma, trunc and fmod are exact on both and stay.)
pub const POISONED_LIBM: &[&str] = &[
    "sinf", "cosf", "tanf", "sincosf", "asinf", "acosf", "atanf", "atan2f", "sinhf", "coshf", "tanhf", "expf", "exp2f", "expm1f", "logf",
    "log2f", "log10f", "log1pf", "powf", "cbrtf", "hypotf", "erff", "__sinf", "__cosf", "__expf", "__logf", "__powf", "__fdividef", "sin",
    "cos", "tan", "sincos", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p",
    "pow", "cbrt", "hypot", "erf",
];

/// `#define`s that turn each of [`POISONED_LIBM`] into a compile error where it is called.
pub fn poison_libm() -> String {
    POISONED_LIBM.iter().map(|f| format!("#define {f}(...) grove_libm_{f}_is_not_the_gpus(__VA_ARGS__)\n")).collect()
}
