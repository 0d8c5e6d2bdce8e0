//! The files a run may leave beside its checkpoints: the JSON report, the hall of fame as CSV,
//! the plots.

use std::path::PathBuf;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::report::write_atomic;
use crate::task::base::report::FameRow;

/// The files a run may leave: the JSON report, the hall of fame as CSV, the plots.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Outputs {
    /// The JSON run report.
    pub report: Option<PathBuf>,
    /// The hall of fame ([`fame_csv`]).
    pub hall_of_fame: Option<PathBuf>,
    /// A directory for the plots (PNG and SVG).
    pub plots: Option<PathBuf>,
}

impl Outputs {
    /// The same files as absolute paths (where they can be made so), as a checkpoint keeps
    /// them.
    pub fn absolute(&self) -> Outputs {
        let absolute = |p: &Option<PathBuf>| p.as_ref().map(|p| std::path::absolute(p).unwrap_or_else(|_| p.clone()));
        Outputs { report: absolute(&self.report), hall_of_fame: absolute(&self.hall_of_fame), plots: absolute(&self.plots) }
    }

    /// Each of these, else `other`'s (a resumed run's flags over its checkpoint's).
    pub fn or(self, other: &Outputs) -> Outputs {
        Outputs {
            report: self.report.or_else(|| other.report.clone()),
            hall_of_fame: self.hall_of_fame.or_else(|| other.hall_of_fame.clone()),
            plots: self.plots.or_else(|| other.plots.clone()),
        }
    }
}

/// Writes what `outputs` asks for from a run's report (each file atomically); returns what was
/// written, in order (`("report", path)`, `("hall of fame", path)`, `("plot", path)`...).
pub fn write_outputs(report: &serde_json::Value, outputs: &Outputs) -> Result<Vec<(&'static str, PathBuf)>> {
    let mut written = Vec::new();
    if let Some(path) = &outputs.report {
        crate::report::write_json_atomic(path, report)?;
        written.push(("report", path.clone()));
    }
    if let Some(path) = &outputs.hall_of_fame {
        let rows: Vec<FameRow> = serde_json::from_value(report["hall_of_fame"].clone())?;
        write_atomic(path, fame_csv(&rows).as_bytes()).with_context(|| format!("cannot write the hall of fame {}", path.display()))?;
        written.push(("hall of fame", path.clone()));
    }
    if let Some(dir) = &outputs.plots {
        for p in crate::task::runner::plots::write_all(report, dir)? {
            written.push(("plot", p));
        }
    }
    Ok(written)
}

/// Writes hall-of-fame rows as CSV (`complexity,loss,equation,latex,sympy,validation_loss,
/// score,selected,description_length,cv_loss`, RFC 4180 quoting; an empty `validation_loss`,
/// `description_length` or `cv_loss` where there is none).
pub fn fame_csv(rows: &[FameRow]) -> String {
    let q = |s: &str| {
        if s.contains([',', '"', '\n']) { format!("\"{}\"", s.replace('"', "\"\"")) } else { s.to_string() }
    };
    let mut out = String::from("complexity,loss,equation,latex,sympy,validation_loss,score,selected,description_length,cv_loss\n");
    for r in rows {
        let v = r.validation_loss.map(|v| format!("{v:e}")).unwrap_or_default();
        let d = r.description_length.filter(|d| d.is_finite()).map(|d| format!("{d:e}")).unwrap_or_default();
        let cv = r.cv_loss.filter(|d| d.is_finite()).map(|d| format!("{d:e}")).unwrap_or_default();
        out += &format!(
            "{},{:e},{},{},{},{v},{:e},{},{d},{cv}\n",
            r.complexity,
            r.loss,
            q(&r.equation),
            q(&r.latex),
            q(&r.sympy),
            r.score,
            r.selected
        );
    }
    out
}
