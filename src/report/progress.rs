//! Live progress of a run: a progress bar with the generation, best fitness and evaluation rate
//! on a terminal; one plain line every few generations when the output is not a terminal or
//! goes to a [`Log`].

use std::io::IsTerminal;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};

use super::{Log, say};
use crate::evolve::GenerationStats;

/// Shows a run's progress on standard error or through a [`Log`].
pub struct Progress {
    bar: Option<ProgressBar>,
    log: Option<Log>,
    quiet: bool,
    total: usize,
    start: Instant,
    last_line: Instant,
    unit: &'static str,
    returns: bool,
}

impl Progress {
    /// Progress of a run of `generations` generations (plus the initial one). `quiet` shows
    /// nothing.
    pub fn new(generations: usize, quiet: bool) -> Self {
        let bar = (!quiet && std::io::stderr().is_terminal()).then(|| {
            let bar = ProgressBar::new(generations as u64 + 1);
            bar.set_style(
                ProgressStyle::with_template("{bar:30.cyan/blue} gen {pos}/{len} · {msg} · {elapsed_precise}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            bar
        });
        let now = Instant::now();
        Self { bar, log: None, quiet, total: generations + 1, start: now, last_line: now, unit: "node evals", returns: false }
    }

    /// Sends the progress lines to `log` (with one, no progress bar: plain lines).
    pub fn with_log(mut self, log: Option<Log>) -> Self {
        if log.is_some() {
            self.bar = None;
        }
        self.log = log;
        self
    }

    /// Names what `update`'s count counts (default `node evals`; control counts `env steps`).
    pub fn with_unit(mut self, unit: &'static str) -> Self {
        self.unit = unit;
        self
    }

    /// Shows the best fitness as a return (its negation), for control runs.
    pub fn with_returns(mut self) -> Self {
        self.returns = true;
        self
    }

    /// Records one generation. `evals` counts node evaluations (nodes × data points) so far, or
    /// what [`Progress::with_unit`] named.
    pub fn update(&mut self, s: &GenerationStats, evals: f64) {
        self.update_with(s, evals, None);
    }

    /// [`Progress::update`] with a note appended to the line (the islands' best programs).
    pub fn update_with(&mut self, s: &GenerationStats, evals: f64, note: Option<&str>) {
        let rate = evals / self.start.elapsed().as_secs_f64().max(1e-9);
        let best = if self.returns { format!("best return {:.2}", -s.best) } else { format!("best {:.6}", s.best) };
        let mut msg = format!("{best} · mean size {:.1} · invalid {} · {:.2e} {}/s", s.mean_size, s.invalid, rate, self.unit);
        if let Some(note) = note {
            msg += &format!(" · {note}");
        }
        if let Some(bar) = &self.bar {
            bar.set_position(s.generation as u64 + 1);
            bar.set_message(msg);
        } else if !self.quiet {
            let last = s.generation + 1 == self.total;
            if last || s.generation == 0 || self.last_line.elapsed().as_secs_f64() >= 2.0 {
                say(self.log.as_ref(), &format!("gen {:>4}/{} · {msg}", s.generation, self.total - 1));
                self.last_line = Instant::now();
            }
        }
    }

    /// Ends the display.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
