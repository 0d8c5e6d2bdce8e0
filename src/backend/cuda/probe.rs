//! Finds the CUDA driver and NVRTC before cudarc touches them: cudarc's dynamic loading panics
//! when a library is missing, so every path into cudarc goes through [`driver`] or [`nvrtc`]
//! first, which answer a one-line [`NoGpu`] instead.
//!
//! Library names are cudarc's own ([`cudarc::get_lib_name_candidates`], the list its loader tries
//! in order), opened by bare name through `dlopen`, so the system search path and
//! `LD_LIBRARY_PATH` (read by the loader when the process starts) behave exactly as they do for
//! cudarc. cudarc reads no other variable (no `CUDA_PATH`).
//!
//! NVRTC is often installed where `dlopen` does not look (a toolkit under `/usr/local/cuda`, or
//! the `nvidia-cuda-nvrtc` Python wheel), so when no name opens, [`nvrtc`] searches the
//! directories listed in [`nvrtc_search_dirs`] and loads the library found there by its full
//! path, together with its `libnvrtc-builtins` companion. The loader then matches cudarc's later
//! `dlopen("libnvrtc.so.13")` against the already loaded library's soname, so cudarc uses the
//! same one. This is what lets a test binary copied to a GPU machine find NVRTC by itself.

use std::ffi::c_int;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use libloading::Library;

/// Why the CUDA backend cannot run here, in one line ("libcuda.so.1 not found: no NVIDIA
/// driver", "no CUDA device", ...). The CLI prints it and falls back to the CPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoGpu {
    /// What is missing, in one line.
    pub reason: String,
}

impl NoGpu {
    /// A `NoGpu` with this reason.
    pub fn new(reason: impl Into<String>) -> Self {
        Self { reason: reason.into() }
    }
}

impl fmt::Display for NoGpu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "no usable CUDA GPU: {}", self.reason)
    }
}

impl std::error::Error for NoGpu {}

/// The oldest driver API grove accepts: the cudarc bindings are CUDA 13.0's, and a call to a
/// function an older driver lacks would panic inside cudarc.
pub const MIN_DRIVER_VERSION: i32 = 13000;

/// What [`driver`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DriverInfo {
    /// The library name that opened (`libcuda.so`, `libcuda.so.1`, ...).
    pub library: String,
    /// The CUDA version the driver supports, as `cuDriverGetVersion` gives it (13000 = 13.0).
    pub version: i32,
    /// Number of CUDA devices (at least 1).
    pub devices: i32,
}

/// What [`nvrtc`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NvrtcInfo {
    /// The library name that opened, or the full path it was loaded from.
    pub library: String,
    /// NVRTC's version, `(major, minor)`.
    pub version: (i32, i32),
}

/// Libraries this module opened; kept loaded for the life of the process so the soname match
/// described in the module docs keeps working and cudarc's symbols stay valid.
pub(super) fn keep(lib: Library) -> &'static Library {
    Box::leak(Box::new(lib))
}

/// Opens the first of `names` that `dlopen` finds by bare name, as cudarc does.
fn open_first(names: &[String]) -> Option<(String, Library)> {
    names.iter().find_map(|name| {
        // SAFETY: loading a vendor library runs its initialisers; libcuda and libnvrtc are the
        // libraries cudarc would load anyway, with the same name and flags.
        unsafe { Library::new(name) }.ok().map(|lib| (name.clone(), lib))
    })
}

/// cudarc's candidate names for a library, in its order.
fn candidates(libs: &[&str]) -> Vec<String> {
    libs.iter().flat_map(|l| cudarc::get_lib_name_candidates(l)).collect()
}

type CuInit = unsafe extern "C" fn(u32) -> c_int;
type CuIntOut = unsafe extern "C" fn(*mut c_int) -> c_int;
type CuErrorName = unsafe extern "C" fn(c_int, *mut *const std::ffi::c_char) -> c_int;

/// The driver library, initialised, with at least one device; cached after the first call.
pub fn driver() -> Result<DriverInfo, NoGpu> {
    static DRIVER: OnceLock<Result<DriverInfo, NoGpu>> = OnceLock::new();
    DRIVER.get_or_init(probe_driver).clone()
}

fn probe_driver() -> Result<DriverInfo, NoGpu> {
    let (name, lib) = open_first(&candidates(&["cuda", "nvcuda"]))
        .ok_or_else(|| NoGpu::new("libcuda.so.1 not found: no NVIDIA driver"))?;
    let lib = keep(lib);
    // SAFETY: the types are the driver API's: `CUresult cuInit(unsigned)`,
    // `CUresult cuDriverGetVersion(int*)`, `CUresult cuDeviceGetCount(int*)`,
    // `CUresult cuGetErrorName(CUresult, const char**)`; CUresult is a C enum (int).
    let (init, version, count, err_name) = unsafe {
        let missing = |s: &str| NoGpu::new(format!("{name} has no {s}: not a CUDA driver library"));
        (
            *lib.get::<CuInit>(b"cuInit\0").map_err(|_| missing("cuInit"))?,
            *lib.get::<CuIntOut>(b"cuDriverGetVersion\0").map_err(|_| missing("cuDriverGetVersion"))?,
            *lib.get::<CuIntOut>(b"cuDeviceGetCount\0").map_err(|_| missing("cuDeviceGetCount"))?,
            lib.get::<CuErrorName>(b"cuGetErrorName\0").ok().map(|s| *s),
        )
    };
    let describe = |code: c_int| -> String {
        let mut ptr: *const std::ffi::c_char = std::ptr::null();
        // SAFETY: cuGetErrorName writes a pointer to a static NUL-terminated string, or fails.
        match err_name.map(|f| unsafe { f(code, &mut ptr) }) {
            Some(0) if !ptr.is_null() => {
                // SAFETY: the driver returned a valid static C string.
                let s = unsafe { std::ffi::CStr::from_ptr(ptr) };
                format!("{} ({code})", s.to_string_lossy())
            }
            _ => format!("error {code}"),
        }
    };
    let mut v: c_int = 0;
    // SAFETY: `v` is a valid int to write; the driver allows this call before cuInit.
    if unsafe { version(&mut v) } != 0 || v < MIN_DRIVER_VERSION {
        return Err(NoGpu::new(format!(
            "the NVIDIA driver supports CUDA {}.{}; grove needs {}.{} or newer (driver 580+)",
            v / 1000,
            v % 1000 / 10,
            MIN_DRIVER_VERSION / 1000,
            MIN_DRIVER_VERSION % 1000 / 10
        )));
    }
    // SAFETY: cuInit(0) is the documented first call; it may be repeated.
    let rc = unsafe { init(0) };
    if rc != 0 {
        let why = match rc {
            100 => "no CUDA device".to_string(),
            _ => format!("cuInit failed: {}", describe(rc)),
        };
        return Err(NoGpu::new(format!("{why} (driver {name}, CUDA {}.{})", v / 1000, v % 1000 / 10)));
    }
    let mut n: c_int = 0;
    // SAFETY: `n` is a valid int to write; cuInit succeeded.
    let rc = unsafe { count(&mut n) };
    if rc != 0 {
        return Err(NoGpu::new(format!("cuDeviceGetCount failed: {}", describe(rc))));
    }
    if n < 1 {
        return Err(NoGpu::new("no CUDA device: the driver sees none"));
    }
    // SAFETY: only opens the library by cudarc's names; the one we opened is among them.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err(NoGpu::new(format!("cudarc cannot open the driver library that grove found ({name})")));
    }
    Ok(DriverInfo { library: name, version: v, devices: n })
}

type NvrtcVersion = unsafe extern "C" fn(*mut c_int, *mut c_int) -> c_int;

/// NVRTC, loaded so that cudarc finds it; cached after the first call. Needs no GPU.
pub fn nvrtc() -> Result<NvrtcInfo, NoGpu> {
    static NVRTC: OnceLock<Result<NvrtcInfo, NoGpu>> = OnceLock::new();
    NVRTC.get_or_init(probe_nvrtc).clone()
}

fn probe_nvrtc() -> Result<NvrtcInfo, NoGpu> {
    let (library, lib) = match open_first(&candidates(&["nvrtc"])) {
        Some((name, lib)) => (name, keep(lib)),
        None => preload_nvrtc()?,
    };
    // SAFETY: `nvrtcResult nvrtcVersion(int *major, int *minor)`.
    let version = unsafe {
        let f = *lib
            .get::<NvrtcVersion>(b"nvrtcVersion\0")
            .map_err(|_| NoGpu::new(format!("{library} has no nvrtcVersion: not NVRTC")))?;
        let (mut major, mut minor) = (0, 0);
        if f(&mut major, &mut minor) != 0 {
            return Err(NoGpu::new(format!("nvrtcVersion failed in {library}")));
        }
        (major, minor)
    };
    // SAFETY: only opens libraries by cudarc's names; the soname of ours is among them.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(NoGpu::new(format!(
            "found NVRTC at {library} but cudarc cannot open it by name: add its directory to LD_LIBRARY_PATH"
        )));
    }
    Ok(NvrtcInfo { library, version })
}

/// File names of NVRTC in a directory, most preferred first (the bindings are CUDA 13's).
const NVRTC_FILES: &[&str] = &["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"];

/// Directories searched for NVRTC when `dlopen` finds it by no name, in order:
/// `$GROVE_NVRTC_PATH` (the library file itself, or its directory); `$CUDA_PATH`, `$CUDA_HOME`,
/// `$CUDA_ROOT` and `/usr/local/cuda*`, `/opt/cuda` (`lib64`, `lib`, `targets/*/lib`); the
/// `nvidia-cuda-nvrtc` wheel's `nvidia/cu13/lib` (and CUDA 12's `nvidia/cuda_nvrtc/lib`) under
/// `pip/` beside any ancestor of the running executable (where `.ci/run` installs it:
/// `target/pip`), under `$VIRTUAL_ENV`, and under the usual Python site-packages roots.
pub fn nvrtc_search_dirs() -> Vec<PathBuf> {
    library_search_dirs("GROVE_NVRTC_PATH", &["nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib"])
}

/// Directories searched for a CUDA library that `dlopen` does not find by name, in order:
/// `$env_var` (the library file itself, or its directory); the toolkits' library directories
/// (`$CUDA_PATH`, `$CUDA_HOME`, `$CUDA_ROOT`, `/usr/local/cuda*`, `/opt/cuda`); then each of
/// `wheel_dirs` (a pip wheel's folder, such as `nvidia/cu13/lib`) under `pip/` beside any
/// ancestor of the running executable, under `$VIRTUAL_ENV`, and under the usual Python
/// site-packages roots.
pub fn library_search_dirs(env_var: &str, wheel_dirs: &[&str]) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(p) = std::env::var_os(env_var).map(PathBuf::from) {
        if p.is_file() {
            dirs.extend(p.parent().map(Path::to_path_buf));
        } else {
            dirs.push(p);
        }
    }
    let mut toolkits: Vec<PathBuf> = ["CUDA_PATH", "CUDA_HOME", "CUDA_ROOT"]
        .iter()
        .filter_map(|v| std::env::var_os(v).map(PathBuf::from))
        .collect();
    toolkits.push("/usr/local/cuda".into());
    toolkits.extend(children("/usr/local", |n| n.starts_with("cuda-")));
    toolkits.push("/opt/cuda".into());
    for t in toolkits {
        dirs.push(t.join("lib64"));
        dirs.push(t.join("lib"));
        dirs.extend(children(t.join("targets"), |_| true).into_iter().map(|d| d.join("lib")));
    }
    let mut site = Vec::new();
    if let Ok(exe) = std::env::current_exe() {
        site.extend(exe.ancestors().skip(1).map(|a| a.join("pip")));
    }
    let mut pythons: Vec<PathBuf> = Vec::new();
    if let Some(v) = std::env::var_os("VIRTUAL_ENV") {
        pythons.push(PathBuf::from(v).join("lib"));
    }
    if let Some(h) = std::env::var_os("HOME").map(PathBuf::from) {
        pythons.push(h.join(".local/lib"));
        pythons.extend(children(h.join(".pyenv/versions"), |_| true).into_iter().map(|d| d.join("lib")));
    }
    pythons.extend(["/usr/local/lib", "/usr/lib"].map(PathBuf::from));
    for opt in children("/opt", |_| true) {
        pythons.push(opt.join(".venv/lib"));
        pythons.push(opt.join("venv/lib"));
        pythons.push(opt.join("lib"));
    }
    for lib in pythons {
        for py in children(&lib, |n| n.starts_with("python3")) {
            site.push(py.join("site-packages"));
            site.push(py.join("dist-packages"));
        }
    }
    for s in site {
        dirs.extend(wheel_dirs.iter().map(|w| s.join(w)));
    }
    dirs
}

/// Subdirectories of `dir` whose names pass `keep`, sorted (newest version last).
fn children(dir: impl AsRef<Path>, keep: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_str().is_some_and(&keep) && e.path().is_dir())
        .map(|e| e.path())
        .collect();
    out.sort();
    out
}

/// Loads NVRTC from the first search directory that has it, builtins first.
fn preload_nvrtc() -> Result<(String, &'static Library), NoGpu> {
    for dir in nvrtc_search_dirs() {
        let Some(file) = NVRTC_FILES.iter().map(|f| dir.join(f)).find(|p| p.is_file()) else { continue };
        // NVRTC opens its builtins library by bare name when it compiles; loading it first by
        // full path lets that lookup match the loaded library's soname.
        let mut builtins: Vec<PathBuf> = std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("libnvrtc-builtins.so") && !n.contains(".alt."))
            })
            .collect();
        builtins.sort();
        for b in builtins {
            // SAFETY: NVRTC's own companion library, loaded as NVRTC would load it.
            if let Ok(lib) = unsafe { Library::new(&b) } {
                keep(lib);
            }
        }
        // SAFETY: loading NVRTC by path runs its initialisers, as loading it by name would.
        match unsafe { Library::new(&file) } {
            Ok(lib) => return Ok((file.display().to_string(), keep(lib))),
            Err(_) => continue,
        }
    }
    Err(NoGpu::new(
        "libnvrtc not found: install the CUDA toolkit or `pip install nvidia-cuda-nvrtc`, \
         then add its lib directory to LD_LIBRARY_PATH or set GROVE_NVRTC_PATH",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_gpu_is_one_line() {
        let e = NoGpu::new("no CUDA device");
        assert_eq!(e.to_string(), "no usable CUDA GPU: no CUDA device");
    }

    #[test]
    fn search_dirs_include_the_ci_wheel_location() {
        // `.ci/run` installs the wheel into target/pip and test binaries live in target/*/deps,
        // so every folder above the binary is searched for pip/nvidia/...: here, and where a
        // copied test binary runs (a GPU machine's staging folder).
        let dirs = nvrtc_search_dirs();
        let exe = std::env::current_exe().unwrap();
        for above in exe.ancestors().skip(1) {
            let want = above.join("pip/nvidia/cu13/lib");
            assert!(dirs.contains(&want), "{} not in {dirs:?}", want.display());
        }
        if exe.ancestors().any(|a| a.ends_with("target")) {
            assert!(dirs.iter().any(|d| d.ends_with("target/pip/nvidia/cu13/lib")), "{dirs:?}");
        }
    }
}
