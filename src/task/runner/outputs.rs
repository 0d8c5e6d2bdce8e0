//! The files a run may leave beside its checkpoints: the JSON report, the hall of fame as CSV,
//! the plots; checked before the run ([`check_outputs`]) and written after it so that one that
//! cannot be written loses nothing ([`write_outputs`]).

use std::path::{Path, PathBuf};

use anyhow::Result;
use serde::{Deserialize, Serialize};

use crate::report::files::{Named, check_distinct, check_output, check_output_dir, fallback_path};
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

/// The files `grove run --plots DIR` may write in DIR (each as `.png` and `.svg`).
pub const PLOT_NAMES: [&str; 4] = ["fitness", "pareto", "predicted", "confusion"];

/// Checks, before a run starts, every file it will write: the report, hall of fame and plot
/// directory (`outputs`) and the checkpoint can be written ([`check_output`],
/// [`check_output_dir`], [`super::checkpoint::check_checkpoint_path`]), none of them is one of
/// the run's `inputs` (the data, grammar, environment file, experiment file...), and no two are
/// one file (a plot in the plot directory included). One error line naming the files.
pub fn check_outputs(outputs: &Outputs, checkpoint: Option<&Path>, inputs: &[Named]) -> Result<()> {
    // First the names, so that nothing is made (a missing directory) for a run refused.
    check_distinct(&outputs.named(checkpoint), inputs)?;
    if let Some(p) = &outputs.report {
        check_output(p, "the report")?;
    }
    if let Some(p) = &outputs.hall_of_fame {
        check_output(p, "the hall of fame")?;
    }
    if let Some(p) = checkpoint {
        super::checkpoint::check_checkpoint_path(p)?;
    }
    if let Some(d) = &outputs.plots {
        check_output_dir(d, "the plots")?;
    }
    Ok(())
}

impl Outputs {
    /// Every file these outputs (and a checkpoint at `checkpoint`) may write, named as
    /// messages name them: each plot of the plot directory as its own file.
    pub fn named(&self, checkpoint: Option<&Path>) -> Vec<Named> {
        let mut out = Vec::new();
        if let Some(p) = &self.report {
            out.push(Named::new("the report", p));
        }
        if let Some(p) = &self.hall_of_fame {
            out.push(Named::new("the hall of fame", p));
        }
        if let Some(p) = checkpoint {
            out.push(Named::new("the checkpoint", p));
        }
        if let Some(d) = &self.plots {
            out.push(Named::new("the plot directory", d));
            for name in PLOT_NAMES {
                for ext in ["png", "svg"] {
                    out.push(Named::new(format!("the plot {name}.{ext}"), d.join(format!("{name}.{ext}"))));
                }
            }
        }
        out
    }
}

/// What [`write_outputs`] did: the files written, in order (`("report", path)`, `("hall of
/// fame", path)`, `("plot", path)`...), and one line for each that could not be (saying where
/// its content was kept instead, if anywhere).
#[derive(Debug, Default)]
pub struct WriteOutcome {
    /// The files written.
    pub written: Vec<(&'static str, PathBuf)>,
    /// One line per file that could not be written.
    pub failed: Vec<String>,
}

/// Writes what `outputs` asks for from a run's report (each file as [`crate::report::files`]
/// writes it). A file that cannot be written does not stop the others: its content goes to a
/// file of its own in the temporary directory ([`fallback_path`]: `grove-PID-report.json`,
/// `grove-PID-hall-of-fame.csv`, plots into `grove-PID-plots`),
/// and its line in [`WriteOutcome::failed`] says why and where.
pub fn write_outputs(report: &serde_json::Value, outputs: &Outputs) -> WriteOutcome {
    let mut done = WriteOutcome::default();
    let keep = |what: &'static str, spare: &str, path: &Path, bytes: Vec<u8>, done: &mut WriteOutcome| match write_atomic(path, &bytes) {
        Ok(()) => done.written.push((what, path.to_path_buf())),
        Err(e) => {
            let spare = fallback_path(spare);
            let kept = match write_atomic(&spare, &bytes) {
                Ok(()) => format!("kept it in {}", spare.display()),
                Err(e2) => format!("nor could it be kept in {} ({})", spare.display(), e2.root_cause()),
            };
            done.failed.push(format!("cannot write the {what} {}: {}; {kept}", path.display(), e.root_cause()));
        }
    };
    if let Some(path) = &outputs.report {
        match serde_json::to_string_pretty(report) {
            Ok(text) => keep("report", "report.json", path, (text + "\n").into_bytes(), &mut done),
            Err(e) => done.failed.push(format!("cannot encode the report: {e}")),
        }
    }
    if let Some(path) = &outputs.hall_of_fame {
        match serde_json::from_value::<Vec<FameRow>>(report["hall_of_fame"].clone()) {
            Ok(rows) => keep("hall of fame", "hall-of-fame.csv", path, fame_csv(&rows).into_bytes(), &mut done),
            Err(e) => done.failed.push(format!("cannot write the hall of fame {}: the report's hall of fame does not read: {e}", path.display())),
        }
    }
    if let Some(dir) = &outputs.plots {
        match crate::task::runner::plots::write_all(report, dir) {
            Ok(files) => done.written.extend(files.into_iter().map(|p| ("plot", p))),
            Err(e) => {
                let spare = fallback_path("plots");
                let kept = match crate::task::runner::plots::write_all(report, &spare) {
                    Ok(_) => format!("drew them in {}", spare.display()),
                    Err(e2) => format!("nor could they be drawn in {} ({}); `grove plot` draws them from the report", spare.display(), e2.root_cause()),
                };
                done.failed.push(format!("cannot draw the plots into {}: {}; {kept}", dir.display(), e.root_cause()));
            }
        }
    }
    done
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
