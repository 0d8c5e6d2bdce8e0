//! What a run shows and keeps: live progress on the terminal and the JSON run report.

pub mod files;
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

pub use files::{temporary_path, write_output as write_atomic};

/// A float for JSON: non-finite values become null.
pub fn num(x: f64) -> serde_json::Value {
    if x.is_finite() { serde_json::json!(x) } else { serde_json::Value::Null }
}
