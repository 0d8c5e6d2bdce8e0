//! What a run shows and keeps: live progress on the terminal and the JSON run report.

pub mod plot;
pub mod robot;
pub mod progress;

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result};

/// Where a run's progress and notes go when not to standard error: a function given one line
/// at a time, without its newline (the Python package writes them to `sys.stderr`, which a
/// notebook shows and the process's standard error is not).
#[derive(Clone)]
pub struct Log(pub Arc<dyn Fn(&str) + Send + Sync>);

impl std::fmt::Debug for Log {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Log(..)")
    }
}

/// Shows one line: through `log` when there is one, else on standard error.
pub fn say(log: Option<&Log>, line: &str) {
    match log {
        Some(l) => (l.0)(line),
        None => eprintln!("{line}"),
    }
}

/// Writes `value` as pretty JSON to `path`, atomically ([`write_atomic`]), so a crash while
/// writing never leaves a half-written report.
pub fn write_json_atomic(path: &Path, value: &serde_json::Value) -> Result<()> {
    let text = serde_json::to_string_pretty(value).context("cannot encode the report")?;
    write_atomic(path, (text + "\n").as_bytes())
}

/// The temporary file an atomic write of `path` goes through: a hidden file beside it, named
/// after it and this process.
pub fn temporary_path(path: &Path) -> std::path::PathBuf {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("grove");
    dir.join(format!(".{name}.tmp{}", std::process::id()))
}

/// Writes `bytes` to `path` atomically: a temporary file in the same directory, flushed to
/// disk, then renamed over `path`, so a crash leaves the old file or the new one, never half.
/// A directory at `path` is refused; on any failure the temporary file is removed.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    anyhow::ensure!(!path.is_dir(), "{} is a directory", path.display());
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let tmp = temporary_path(path);
    let mut f = std::fs::File::create(&tmp).with_context(|| format!("cannot write {}", tmp.display()))?;
    let written = f
        .write_all(bytes)
        .and_then(|_| f.sync_all())
        .with_context(|| format!("cannot write {}", tmp.display()))
        .and_then(|_| std::fs::rename(&tmp, path).with_context(|| format!("cannot move {} into place", path.display())));
    if written.is_err() {
        // The write's error is the one to report; the removal is cleanup only.
        drop(f);
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// A float for JSON: non-finite values become null.
pub fn num(x: f64) -> serde_json::Value {
    if x.is_finite() { serde_json::json!(x) } else { serde_json::Value::Null }
}
