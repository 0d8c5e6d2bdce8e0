//! The on-disk cache of compiled kernels, so a second run pays no NVRTC time.
//!
//! An entry is keyed by a 128-bit FNV-1a hash of everything that decides the compiled bytes:
//! the full source (generated operator header + `.cu` file), the NVRTC options (target
//! architecture and the defines that pick a variant of the file), the device's
//! name and compute capability, and NVRTC's version. It lives in
//! `$GROVE_CACHE_DIR`, else `$XDG_CACHE_HOME/grove`, else `~/.cache/grove` (under `kernels/`),
//! as `<file stem>-<key>.<cubin|ptx>`, starting with a header line that repeats the key. Entries
//! are written to a temporary file and renamed into place, so a reader never sees half a file
//! and concurrent runs race harmlessly. A process that ends while it writes (a compile started
//! ahead on a thread of its own, its run already over) can leave its temporary file behind; each
//! write removes temporary files older than [`STALE_TEMP`]. A missing, unreadable or mismatched
//! entry is a miss; failing to write one is ignored (the cache only saves time).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use super::error::Result;
use super::kernels::KernelSource;
use super::nvrtc::{self, Defines, Image, ImageKind, Target};

/// Where a module came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Already loaded by this engine.
    Memory,
    /// Read from the disk cache.
    Disk,
    /// Compiled by NVRTC just now (and written to the disk cache when there is one).
    Compiled,
}

/// The default cache directory (see the module docs), or `None` when no variable names one.
pub fn default_dir() -> Option<PathBuf> {
    let env = |v: &str| std::env::var_os(v).filter(|s| !s.is_empty()).map(PathBuf::from);
    env("GROVE_CACHE_DIR")
        .or_else(|| env("XDG_CACHE_HOME").map(|d| d.join("grove")))
        .or_else(|| env("HOME").map(|h| h.join(".cache").join("grove")))
}

/// Everything that decides a compiled image.
#[derive(Clone, Debug)]
pub struct CacheKey {
    /// Hex digest naming the entry.
    pub digest: String,
    /// The file stem (`eval`), to make entries readable.
    pub stem: String,
}

impl CacheKey {
    /// The key of `src` compiled for `target` with `defines` on a device called `device` of
    /// compute capability `cc`, by NVRTC `nvrtc_version`.
    pub fn new(
        src: &KernelSource<'_>,
        target: Target,
        defines: Defines<'_>,
        device: &str,
        cc: (i32, i32),
        nvrtc_version: (i32, i32),
    ) -> Self {
        let mut h = Fnv128::new();
        h.field(b"grove kernel cache v1");
        h.field(src.file.as_bytes());
        h.field(src.full_source().as_bytes());
        for o in nvrtc::options(target, defines) {
            h.field(o.as_bytes());
        }
        h.field(device.as_bytes());
        h.field(format!("cc {}.{} nvrtc {}.{}", cc.0, cc.1, nvrtc_version.0, nvrtc_version.1).as_bytes());
        let mut stem = Path::new(src.file).file_stem().and_then(|s| s.to_str()).unwrap_or("kernel").to_string();
        for (k, v) in defines {
            stem.push_str(&format!("-{k}{v}"));
        }
        CacheKey { digest: format!("{:032x}", h.0), stem }
    }

    fn file_name(&self, kind: ImageKind) -> String {
        let ext = match kind {
            ImageKind::Cubin => "cubin",
            ImageKind::Ptx => "ptx",
        };
        format!("{}-{}.{ext}", self.stem, self.digest)
    }

    fn header(&self, kind: ImageKind) -> String {
        format!("grove kernel cache v1 {} {kind:?}\n", self.digest)
    }
}

/// 128-bit FNV-1a, with each field's length mixed in so that fields cannot run together.
struct Fnv128(u128);

impl Fnv128 {
    const PRIME: u128 = 0x0000000001000000000000000000013B;
    fn new() -> Self {
        Fnv128(0x6c62272e07bb014262b821756295c58d)
    }
    fn bytes(&mut self, b: &[u8]) {
        for &x in b {
            self.0 ^= x as u128;
            self.0 = self.0.wrapping_mul(Self::PRIME);
        }
    }
    fn field(&mut self, b: &[u8]) {
        self.bytes(&(b.len() as u64).to_le_bytes());
        self.bytes(b);
    }
}

/// Reads the entry for `key` from `dir`, if a whole one is there.
pub fn read(dir: &Path, key: &CacheKey, kind: ImageKind) -> Option<Image> {
    let data = std::fs::read(dir.join(key.file_name(kind))).ok()?;
    let header = key.header(kind);
    let bytes = data.strip_prefix(header.as_bytes())?;
    if bytes.is_empty() {
        return None;
    }
    Some(Image { kind, bytes: bytes.to_vec(), log: String::new() })
}

/// How old a temporary file in the cache must be before a write takes it for one left behind
/// by a process that ended mid-write (a write takes milliseconds; an hour leaves every live
/// writer alone, on a clock that is not too far off).
pub const STALE_TEMP: std::time::Duration = std::time::Duration::from_secs(3600);

/// Writes the entry for `key` into `dir` atomically (temporary file, then rename), and removes
/// temporary files older than [`STALE_TEMP`] left there.
pub fn write(dir: &Path, key: &CacheKey, image: &Image) -> std::io::Result<()> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    std::fs::create_dir_all(dir)?;
    let name = key.file_name(image.kind);
    let tmp = dir.join(format!(".{name}.tmp-{}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed)));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(key.header(image.kind).as_bytes())?;
        f.write_all(&image.bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, dir.join(&name))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    remove_stale_temps(dir, STALE_TEMP);
    result
}

/// Removes the temporary files (`.<entry>.tmp-<pid>-<n>`) in `dir` last modified more than
/// `age` ago. Best effort: what cannot be read or removed stays.
fn remove_stale_temps(dir: &Path, age: std::time::Duration) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let now = std::time::SystemTime::now();
    for e in entries.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if !(name.starts_with('.') && name.contains(".tmp-")) {
            continue;
        }
        let old = e.metadata().and_then(|m| m.modified()).ok().and_then(|t| now.duration_since(t).ok()).is_some_and(|d| d > age);
        if old {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// The kernel image for `src` with `defines` in the disk cache under `dir`, if it is there (a
/// missing, unreadable or mismatched entry is `None`).
pub fn lookup(dir: Option<&Path>, src: &KernelSource<'_>, target: Target, defines: Defines<'_>, device: &str, cc: (i32, i32)) -> Result<Option<Image>> {
    let Some(dir) = dir else { return Ok(None) };
    let key = CacheKey::new(src, target, defines, device, cc, nvrtc::version()?);
    Ok(read(&dir.join("kernels"), &key, image_kind(target)))
}

/// What NVRTC makes for `target`: CUBIN for a real architecture, PTX for a virtual one.
fn image_kind(target: Target) -> ImageKind {
    match target {
        Target::Sm(_) => ImageKind::Cubin,
        Target::Compute(_) => ImageKind::Ptx,
    }
}

/// The kernel image for `src` with `defines`: from `dir` when cached there, else compiled and
/// stored. Returns the image, where it came from, and the seconds it took.
pub fn compile_cached(
    dir: Option<&Path>,
    src: &KernelSource<'_>,
    target: Target,
    defines: Defines<'_>,
    device: &str,
    cc: (i32, i32),
) -> Result<(Image, Origin, f64)> {
    let start = Instant::now();
    let key = CacheKey::new(src, target, defines, device, cc, nvrtc::version()?);
    let dir = dir.map(|d| d.join("kernels"));
    if let Some(image) = dir.as_deref().and_then(|d| read(d, &key, image_kind(target))) {
        return Ok((image, Origin::Disk, start.elapsed().as_secs_f64()));
    }
    let image = nvrtc::compile(src, target, defines)?;
    if let Some(d) = &dir {
        let _ = write(d, &key, &image);
    }
    Ok((image, Origin::Compiled, start.elapsed().as_secs_f64()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cuda::kernels::EVAL;

    #[test]
    fn keys_change_with_every_input() {
        let k = |src: &KernelSource<'_>, t, d: &str, cc, v| CacheKey::new(src, t, &[], d, cc, v).digest;
        let base = k(&EVAL, Target::Sm(90), "H100", (9, 0), (13, 0));
        assert_eq!(base, k(&EVAL, Target::Sm(90), "H100", (9, 0), (13, 0)));
        let other = KernelSource { file: "eval.cu", text: "// changed" };
        for d in [
            k(&other, Target::Sm(90), "H100", (9, 0), (13, 0)),
            k(&EVAL, Target::Sm(80), "H100", (9, 0), (13, 0)),
            k(&EVAL, Target::Sm(90), "H200", (9, 0), (13, 0)),
            k(&EVAL, Target::Sm(90), "H100", (8, 0), (13, 0)),
            k(&EVAL, Target::Sm(90), "H100", (9, 0), (13, 1)),
            CacheKey::new(&EVAL, Target::Sm(90), &[("GROVE_K", 4)], "H100", (9, 0), (13, 0)).digest,
        ] {
            assert_ne!(d, base);
        }
    }

    #[test]
    fn entries_round_trip_and_reject_other_keys() {
        let dir = std::env::temp_dir().join(format!("grove-cache-test-{}", std::process::id()));
        let key = CacheKey::new(&EVAL, Target::Sm(90), &[], "test", (9, 0), (13, 0));
        let image = Image { kind: ImageKind::Cubin, bytes: vec![1, 2, 3], log: String::new() };
        write(&dir, &key, &image).unwrap();
        assert_eq!(read(&dir, &key, ImageKind::Cubin).unwrap().bytes, [1, 2, 3]);
        assert!(read(&dir, &key, ImageKind::Ptx).is_none());
        let other = CacheKey { stem: key.stem.clone(), digest: "0".repeat(32) };
        assert!(read(&dir, &other, ImageKind::Cubin).is_none());
        // A truncated entry (header only) is a miss.
        std::fs::write(dir.join(key.file_name(ImageKind::Cubin)), key.header(ImageKind::Cubin)).unwrap();
        assert!(read(&dir, &key, ImageKind::Cubin).is_none());
        let leftovers: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().filter(|e| e.file_name().to_string_lossy().contains(".tmp-")).collect();
        assert!(leftovers.is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_write_removes_temporary_files_left_long_ago_and_keeps_fresh_ones() {
        let dir = std::env::temp_dir().join(format!("grove-cache-stale-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let key = CacheKey::new(&EVAL, Target::Sm(90), &[], "test", (9, 0), (13, 0));
        let name = key.file_name(ImageKind::Cubin);
        let old = dir.join(format!(".{name}.tmp-999999-0"));
        let fresh = dir.join(format!(".{name}.tmp-999999-1"));
        // An entry and a user's file that merely look old stay: only temporary files go.
        let entry = dir.join("eval-0123.cubin");
        let dotfile = dir.join(".notes");
        for f in [&old, &fresh, &entry, &dotfile] {
            std::fs::write(f, b"x").unwrap();
        }
        let long_ago = std::time::SystemTime::now() - STALE_TEMP - std::time::Duration::from_secs(60);
        for f in [&old, &entry, &dotfile] {
            std::fs::File::options().write(true).open(f).unwrap().set_modified(long_ago).unwrap();
        }
        let image = Image { kind: ImageKind::Cubin, bytes: vec![7], log: String::new() };
        write(&dir, &key, &image).unwrap();
        assert!(!old.exists(), "a temporary file older than STALE_TEMP is removed");
        assert!(fresh.exists(), "a temporary file another run may be writing stays");
        assert!(entry.exists() && dotfile.exists(), "only temporary files are removed");
        assert_eq!(read(&dir, &key, ImageKind::Cubin).unwrap().bytes, [7]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
