//! What a run shows and keeps: live progress on the terminal and the JSON run report.

pub mod plot;
pub mod robot;
pub mod progress;

use std::path::Path;

use anyhow::{Context, Result};

/// Writes `value` as pretty JSON to `path`, atomically (a temporary file renamed into place),
/// so a crash while writing never leaves a half-written report.
pub fn write_json_atomic(path: &Path, value: &serde_json::Value) -> Result<()> {
    let text = serde_json::to_string_pretty(value).context("cannot encode the report")?;
    let tmp = path.with_extension(format!(
        "{}.tmp{}",
        path.extension().and_then(|e| e.to_str()).unwrap_or("json"),
        std::process::id()
    ));
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    std::fs::write(&tmp, text + "\n").with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot move the report into {}", path.display()))?;
    Ok(())
}

/// A float for JSON: non-finite values become null.
pub fn num(x: f64) -> serde_json::Value {
    if x.is_finite() { serde_json::json!(x) } else { serde_json::Value::Null }
}
