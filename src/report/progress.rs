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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    fn stats(generation: usize) -> GenerationStats {
        GenerationStats { generation, best: 0.5, mean: 1.0, mean_size: 7.0, invalid: 0, seconds: 0.01 }
    }

    #[test]
    fn progress_with_a_log_sends_plain_lines_there() {
        let lines = Arc::new(Mutex::new(Vec::<String>::new()));
        let sink = lines.clone();
        let log = Log(Arc::new(move |l: &str| sink.lock().unwrap().push(l.to_string())));
        let mut p = Progress::new(3, false).with_log(Some(log.clone()));
        assert!(p.bar.is_none());
        for g in 0..=3 {
            p.update(&stats(g), 100.0);
        }
        p.finish();
        let got = lines.lock().unwrap().clone();
        // The first and the last generation always; the others only 2 s apart.
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(got[0].starts_with("gen    0/3 · best 0.500000") && got[1].starts_with("gen    3/3"), "{got:?}");
        // Quiet: nothing.
        let mut q = Progress::new(3, true).with_log(Some(log));
        q.update(&stats(0), 1.0);
        assert_eq!(lines.lock().unwrap().len(), 2);
    }
}
