//! NCCL, opened at run time as NVRTC is, for the bytes that cross between the GPUs of one run
//! when the run asks for it (`--gpu-link nccl`): a migration's rows, and a row shard's
//! population, evaluation order and sums. The default link is the driver's peer copies
//! (`peer.rs`); both move the same bytes, so a run's results do not depend on the link.
//!
//! grove asks NCCL only for point-to-point sends and receives (`ncclSend`/`ncclRecv` in a
//! group), never for a reduction: a row shard's sums are added on the first GPU in shard order,
//! as with peer copies, so the bits stay a function of the settings and the CPU can compute
//! them (`docs/scale.md`). One process drives every GPU, so the communicators come from
//! `ncclCommInitAll`, one rank per GPU.
//!
//! The library is searched as NVRTC is ([`super::probe::library_search_dirs`]):
//! `$GROVE_NCCL_PATH` (the file or its folder), then `libnccl.so.2` and `libnccl.so` by name,
//! then the toolkits' folders and the `nvidia-nccl-cu13` wheel's `nvidia/nccl/lib`. cudarc's own
//! NCCL loader is not used: it does not try NCCL's soname, `libnccl.so.2`.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::{sys, CudaStream, DevicePtr, DevicePtrMut};
use libloading::Library;

use super::error::{GpuError, Result};
use super::probe::{keep, library_search_dirs};
use super::CudaEngine;

/// `ncclComm_t`.
type Comm = *mut c_void;
/// `ncclUint8`: every transfer is counted in bytes.
const NCCL_UINT8: c_int = 1;
/// The oldest NCCL with point-to-point sends and receives.
pub const MIN_NCCL: (i32, i32) = (2, 7);
/// File names of NCCL, most preferred first.
const NCCL_FILES: &[&str] = &["libnccl.so.2", "libnccl.so"];

type GetVersion = unsafe extern "C" fn(*mut c_int) -> c_int;
type GetErrorString = unsafe extern "C" fn(c_int) -> *const c_char;
type CommInitAll = unsafe extern "C" fn(*mut Comm, c_int, *const c_int) -> c_int;
type CommDestroy = unsafe extern "C" fn(Comm) -> c_int;
type Group = unsafe extern "C" fn() -> c_int;
type SendFn = unsafe extern "C" fn(*const c_void, usize, c_int, c_int, Comm, sys::CUstream) -> c_int;
type RecvFn = unsafe extern "C" fn(*mut c_void, usize, c_int, c_int, Comm, sys::CUstream) -> c_int;

/// The NCCL library this process opened, with the calls grove makes.
pub struct Nccl {
    /// The name or full path it was opened by.
    pub library: String,
    /// Its version, (major, minor, patch).
    pub version: (i32, i32, i32),
    error_string: GetErrorString,
    comm_init_all: CommInitAll,
    comm_destroy: CommDestroy,
    group_start: Group,
    group_end: Group,
    send: SendFn,
    recv: RecvFn,
}

impl std::fmt::Debug for Nccl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nccl").field("library", &self.library).field("version", &self.version).finish()
    }
}

/// NCCL's version code as (major, minor, patch): `major·10000 + minor·100 + patch` from 2.9 on,
/// `major·1000 + minor·100 + patch` before.
pub fn decode_version(code: i32) -> (i32, i32, i32) {
    if code >= 10000 {
        (code / 10000, code % 10000 / 100, code % 100)
    } else {
        (code / 1000, code % 1000 / 100, code % 100)
    }
}

/// The line a run gets where NCCL cannot be opened.
fn not_found(why: &str) -> String {
    format!(
        "--gpu-link nccl: {why}; install NCCL (the system's libnccl2, or `pip install nvidia-nccl-cu13`), \
         add its folder to LD_LIBRARY_PATH or set GROVE_NCCL_PATH, or use --gpu-link peer"
    )
}

/// NCCL, opened on the first call and kept for the life of the process.
pub fn nccl() -> Result<&'static Nccl> {
    static NCCL: OnceLock<std::result::Result<Nccl, String>> = OnceLock::new();
    NCCL.get_or_init(open).as_ref().map_err(|e| GpuError::Nccl(e.clone()))
}

/// Where NCCL is looked for, in order: `$GROVE_NCCL_PATH` alone when it names anything but a
/// folder; the files of [`NCCL_FILES`] in that folder when it names one; the bare names
/// (`dlopen`'s own search); then those files in every other search folder.
pub fn nccl_candidates() -> Vec<PathBuf> {
    let env = std::env::var_os("GROVE_NCCL_PATH").map(PathBuf::from);
    if let Some(p) = env.as_ref().filter(|p| !p.is_dir()) {
        return vec![p.clone()];
    }
    let in_dir = |dir: &Path| NCCL_FILES.iter().map(|f| dir.join(f)).filter(|p| p.is_file()).collect::<Vec<_>>();
    let mut out = env.as_deref().map(in_dir).unwrap_or_default();
    out.extend(NCCL_FILES.iter().map(PathBuf::from));
    for dir in library_search_dirs("GROVE_NCCL_PATH", &["nvidia/nccl/lib", "nvidia/cu13/lib"]) {
        if env.as_deref() != Some(dir.as_path()) {
            out.extend(in_dir(&dir));
        }
    }
    out
}

fn open() -> std::result::Result<Nccl, String> {
    let env = std::env::var_os("GROVE_NCCL_PATH").map(PathBuf::from);
    open_first_of(&nccl_candidates(), env.as_deref())
}

/// NCCL from the first of `candidates` that opens (`env`: the `GROVE_NCCL_PATH` they came
/// from, named in the line when none does).
fn open_first_of(candidates: &[PathBuf], env: Option<&Path>) -> std::result::Result<Nccl, String> {
    let (library, lib) = candidates
        .iter()
        // SAFETY: loading NCCL runs its initialisers, as any program linking it would.
        .find_map(|c| unsafe { Library::new(c) }.ok().map(|l| (c.display().to_string(), l)))
        .ok_or_else(|| match env {
            Some(p) => not_found(&format!("GROVE_NCCL_PATH={} does not open", p.display())),
            None => not_found("libnccl.so.2 not found"),
        })?;
    let lib = keep(lib);
    let sym = |name: &str| not_found(&format!("{library} has no {name}: not NCCL"));
    // SAFETY: each type is NCCL's C signature for the symbol (nccl.h): ncclResult_t and
    // ncclDataType_t are C enums (int), ncclComm_t a pointer, cudaStream_t the driver's CUstream.
    let (get_version, error_string, comm_init_all, comm_destroy, group_start, group_end, send, recv) = unsafe {
        (
            *lib.get::<GetVersion>(b"ncclGetVersion\0").map_err(|_| sym("ncclGetVersion"))?,
            *lib.get::<GetErrorString>(b"ncclGetErrorString\0").map_err(|_| sym("ncclGetErrorString"))?,
            *lib.get::<CommInitAll>(b"ncclCommInitAll\0").map_err(|_| sym("ncclCommInitAll"))?,
            *lib.get::<CommDestroy>(b"ncclCommDestroy\0").map_err(|_| sym("ncclCommDestroy"))?,
            *lib.get::<Group>(b"ncclGroupStart\0").map_err(|_| sym("ncclGroupStart"))?,
            *lib.get::<Group>(b"ncclGroupEnd\0").map_err(|_| sym("ncclGroupEnd"))?,
            *lib.get::<SendFn>(b"ncclSend\0").map_err(|_| sym("ncclSend (NCCL 2.7 or newer)"))?,
            *lib.get::<RecvFn>(b"ncclRecv\0").map_err(|_| sym("ncclRecv (NCCL 2.7 or newer)"))?,
        )
    };
    let mut code: c_int = 0;
    // SAFETY: ncclGetVersion writes one int.
    if unsafe { get_version(&mut code) } != 0 {
        return Err(not_found(&format!("ncclGetVersion failed in {library}")));
    }
    let version = decode_version(code);
    if (version.0, version.1) < MIN_NCCL {
        return Err(not_found(&format!(
            "{library} is NCCL {}.{}.{}; grove needs {}.{} or newer",
            version.0, version.1, version.2, MIN_NCCL.0, MIN_NCCL.1
        )));
    }
    Ok(Nccl { library, version, error_string, comm_init_all, comm_destroy, group_start, group_end, send, recv })
}

impl Nccl {
    /// `Ok` for ncclSuccess, else the error naming `what` and NCCL's words for the code.
    fn check(&self, code: c_int, what: impl FnOnce() -> String) -> Result<()> {
        if code == 0 {
            return Ok(());
        }
        // SAFETY: ncclGetErrorString returns a static NUL-terminated string for any code.
        let text = unsafe {
            let p = (self.error_string)(code);
            if p.is_null() { "unknown error".into() } else { CStr::from_ptr(p).to_string_lossy().into_owned() }
        };
        Err(GpuError::Nccl(format!("NCCL error while {}: {text} ({code})", what())))
    }
}

/// One rank of [`Comms`]: a GPU, the engine that drives it, and its communicator.
struct Rank {
    engine: u64,
    ordinal: usize,
    stream: Arc<CudaStream>,
    comm: Comm,
}

/// NCCL communicators over the GPUs of one run, a rank per GPU in the order given.
pub struct Comms {
    nccl: &'static Nccl,
    ranks: Vec<Rank>,
    /// Held through each group of calls, so that two threads never use a communicator at once.
    lock: Mutex<()>,
}

// SAFETY: a communicator is a handle NCCL lets any thread use, one at a time; every use goes
// through `lock`, and the streams are cudarc's (Send + Sync).
unsafe impl Send for Comms {}
// SAFETY: as above: `&Comms` only reaches the communicators under `lock`.
unsafe impl Sync for Comms {}

impl std::fmt::Debug for Comms {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Comms").field("gpus", &self.ordinals()).field("nccl", &self.nccl.version).finish()
    }
}

impl Comms {
    /// Communicators for `engines`, one rank per GPU in this order (`ncclCommInitAll`). An
    /// engine given twice is one rank; two engines on one GPU are refused (NCCL takes a GPU
    /// once per communicator).
    pub fn new(engines: &[&CudaEngine]) -> Result<Self> {
        let nccl = nccl()?;
        let mut chosen: Vec<&CudaEngine> = Vec::new();
        for e in engines {
            if chosen.iter().any(|c| c.id == e.id) {
                continue;
            }
            if chosen.iter().any(|c| c.ordinal == e.ordinal) {
                return Err(GpuError::Input(format!("two engines on GPU {} in one NCCL communicator", e.ordinal)));
            }
            chosen.push(e);
        }
        if chosen.is_empty() {
            return Err(GpuError::Input("NCCL communicators for no GPU".into()));
        }
        let devices: Vec<c_int> = chosen.iter().map(|e| e.ordinal as c_int).collect();
        let mut comms: Vec<Comm> = vec![std::ptr::null_mut(); devices.len()];
        // SAFETY: `comms` has room for one handle per device; `devices` lists distinct ordinals.
        let rc = unsafe { (nccl.comm_init_all)(comms.as_mut_ptr(), devices.len() as c_int, devices.as_ptr()) };
        nccl.check(rc, || format!("creating communicators over GPUs {devices:?}"))?;
        let ranks = chosen
            .iter()
            .zip(comms)
            .map(|(e, comm)| Rank { engine: e.id, ordinal: e.ordinal, stream: e.stream.clone(), comm })
            .collect();
        Ok(Self { nccl, ranks, lock: Mutex::new(()) })
    }

    /// The GPUs, by rank.
    pub fn ordinals(&self) -> Vec<usize> {
        self.ranks.iter().map(|r| r.ordinal).collect()
    }

    /// The NCCL these communicators came from.
    pub fn nccl(&self) -> &'static Nccl {
        self.nccl
    }

    fn rank_of(&self, engine: u64) -> Result<usize> {
        self.ranks
            .iter()
            .position(|r| r.engine == engine)
            .ok_or_else(|| GpuError::Input("an engine outside the run's NCCL communicators".into()))
    }

    /// The first `n` elements of `src` (engine `from`'s memory) into the first `n` of `dst`
    /// (engine `to`'s): a send on `from`'s stream after its queued work, and a receive on
    /// `to`'s stream before the work queued there later, in one NCCL group. `from == to` is a
    /// send to oneself.
    pub fn copy<T, S: DevicePtr<T>, D: DevicePtrMut<T>>(&self, from: u64, src: &S, to: u64, dst: &mut D, n: usize) -> Result<()> {
        if n > src.len() || n > dst.len() {
            return Err(GpuError::Input(format!("sending {n} elements of {} into {}", src.len(), dst.len())));
        }
        if n == 0 {
            return Ok(());
        }
        let (a, b) = (self.rank_of(from)?, self.rank_of(to)?);
        let (ra, rb) = (&self.ranks[a], &self.ranks[b]);
        let bytes = n * std::mem::size_of::<T>();
        let _one = self.lock.lock().map_err(|_| GpuError::Nccl("a thread panicked holding the NCCL communicators".into()))?;
        // The pointers' guards live until the group has queued its work, so cudarc records the
        // buffers' use after the send and the receive.
        let (s, _read) = src.device_ptr(&ra.stream);
        let (d, _write) = dst.device_ptr_mut(&rb.stream);
        let what = || format!("sending {bytes} bytes from GPU {} to GPU {}", ra.ordinal, rb.ordinal);
        let nccl = self.nccl;
        // SAFETY: the group brackets one send and its matching receive; the pointers hold
        // `bytes` bytes on their ranks' devices (checked above), and each stream is its rank's
        // engine's, on that rank's GPU.
        unsafe {
            nccl.check((nccl.group_start)(), what)?;
            let sent = (nccl.send)(s as *const c_void, bytes, NCCL_UINT8, b as c_int, ra.comm, ra.stream.cu_stream());
            let got = (nccl.recv)(d as *mut c_void, bytes, NCCL_UINT8, a as c_int, rb.comm, rb.stream.cu_stream());
            let end = (nccl.group_end)();
            nccl.check(sent, what)?;
            nccl.check(got, what)?;
            nccl.check(end, what)
        }
    }
}

impl Drop for Comms {
    fn drop(&mut self) {
        for r in &self.ranks {
            // Queued sends and receives finish before their communicator goes.
            let _ = r.stream.synchronize();
            // SAFETY: the handle came from ncclCommInitAll and is destroyed once.
            unsafe { (self.nccl.comm_destroy)(r.comm) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_decode_in_both_encodings() {
        assert_eq!(decode_version(22805), (2, 28, 5));
        assert_eq!(decode_version(21903), (2, 19, 3));
        assert_eq!(decode_version(2708), (2, 7, 8));
        assert!((decode_version(2604).0, decode_version(2604).1) < MIN_NCCL);
        assert!((decode_version(20900).0, decode_version(20900).1) >= MIN_NCCL);
    }

    #[test]
    fn the_missing_library_is_one_line_with_the_way_out() {
        let line = not_found("libnccl.so.2 not found");
        assert!(!line.contains('\n'));
        for want in ["--gpu-link nccl", "GROVE_NCCL_PATH", "--gpu-link peer", "libnccl.so.2 not found"] {
            assert!(line.contains(want), "{line}");
        }
    }

    #[test]
    fn a_path_that_does_not_open_or_is_not_nccl_is_one_line() {
        let missing = Path::new("/nonexistent/grove/libnccl.so.2");
        let e = open_first_of(&[missing.to_path_buf()], Some(missing)).unwrap_err();
        assert!(e.contains("GROVE_NCCL_PATH=/nonexistent/grove/libnccl.so.2 does not open") && !e.contains('\n'), "{e}");
        // A library that opens but is not NCCL (the C library every Linux process has).
        let e = open_first_of(&[PathBuf::from("libc.so.6")], None).unwrap_err();
        assert!(e.contains("libc.so.6 has no ncclGetVersion: not NCCL") && e.contains("--gpu-link peer"), "{e}");
    }

    #[test]
    fn the_bare_names_come_first() {
        if std::env::var_os("GROVE_NCCL_PATH").is_some() {
            return;
        }
        let c = nccl_candidates();
        assert_eq!(c[..2], [PathBuf::from("libnccl.so.2"), PathBuf::from("libnccl.so")]);
        assert!(c[2..].iter().all(|p| p.is_file()), "{c:?}");
    }
}
