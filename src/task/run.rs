//! What every task's run shares: the options of a run (quiet, checkpoints, resume, stop), the
//! observer that shows progress, keeps the hall of fame and writes checkpoints, and the
//! checkpoint file itself (settings + engine state + hall of fame, written atomically).

use std::path::{Path, PathBuf};

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::experiment::Experiment;
use super::search::EvolveResult;
use crate::evolve::checkpoint::{Saved, SavedNode, decode_nodes, encode_nodes};
use crate::evolve::hof::{Entry, HallOfFame};
use crate::evolve::{Best, EngineConfig, GenerationStats, IslandConfig, Observer, Snapshot};
use crate::program::tree::Population;

/// How a run is carried out (none of it changes the result).
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Print nothing but the result.
    pub quiet: bool,
    /// Print a line per generation.
    pub verbose: bool,
    /// Write checkpoints here.
    pub checkpoint: Option<PathBuf>,
    /// The run's experiment, which checkpoints save (the runner sets it: [`run_experiment`];
    /// a task never builds one).
    pub experiment: Option<Experiment>,
    /// Every this many generations (and on a stop).
    pub checkpoint_every: usize,
    /// Continue from this checkpoint.
    pub resume: Option<Checkpoint>,
    /// Set (by Ctrl-C) to stop between generations.
    pub stop: Option<Arc<AtomicBool>>,
    /// The most memory the run may plan for, bytes (`--max-memory`; `None`: what the machine
    /// has, [`super::plan`]).
    pub max_memory: Option<u64>,
}

/// The run stopped on request after saving a checkpoint.
#[derive(Debug)]
pub struct Stopped {
    /// The generation a resumed run starts at.
    pub generation: usize,
    /// Where the checkpoint is (none without `--checkpoint`).
    pub checkpoint: Option<PathBuf>,
}

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.checkpoint {
            Some(p) => write!(
                f,
                "interrupted before generation {}; saved {}: continue with `grove run --resume {}`",
                self.generation,
                p.display(),
                p.display()
            ),
            None => write!(f, "interrupted before generation {} (nothing saved: give --checkpoint PATH to keep runs)", self.generation),
        }
    }
}

impl std::error::Error for Stopped {}

/// A hall-of-fame entry, exactly.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedEntry {
    /// Size in nodes.
    pub size: usize,
    /// Fitness, f64 bits.
    pub fitness: u64,
    /// Tree.
    pub nodes: Vec<SavedNode>,
    /// Generation first seen.
    pub generation: usize,
}

/// A checkpoint file: the experiment, the engine's state and the task's (hall of fame,
/// evaluation count).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checkpoint {
    /// Format marker and version.
    pub grove_checkpoint: u32,
    /// grove's version that wrote it.
    pub version: String,
    /// The run's settings.
    pub experiment: Experiment,
    /// The engine's state.
    pub state: Saved,
    /// The hall of fame.
    pub hall_of_fame: Vec<SavedEntry>,
    /// Node evaluations so far (timing).
    pub node_evaluations: f64,
    /// Median program size of each generation so far (0 where none was valid).
    #[serde(default)]
    pub median_sizes: Vec<f64>,
    /// Generations between checkpoints (a resumed run keeps it).
    #[serde(default = "ten")]
    pub checkpoint_every: usize,
    /// Control runs: env steps played and seconds spent in roll-outs so far (timing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_steps: Option<(u64, f64)>,
}

fn ten() -> usize {
    10
}

impl Checkpoint {
    /// Reads a checkpoint, with errors that say what is wrong with the file.
    pub fn load(path: &Path) -> Result<Checkpoint> {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read the checkpoint {}", path.display()))?;
        let v: serde_json::Value = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a checkpoint (not JSON; was it cut short?)", path.display()))?;
        anyhow::ensure!(
            v.get("grove_checkpoint").is_some(),
            "{} is not a checkpoint: give a file written by --checkpoint (a report is repeated with --from)",
            path.display()
        );
        serde_json::from_value(v).with_context(|| format!("{}: the checkpoint cannot be read", path.display()))
    }

    /// The hall of fame it holds.
    pub fn hall_of_fame(&self) -> Result<HallOfFame> {
        let mut h = HallOfFame::default();
        for e in &self.hall_of_fame {
            if h.by_size.len() <= e.size {
                h.by_size.resize(e.size + 1, None);
            }
            h.by_size[e.size] =
                Some(Entry { fitness: f64::from_bits(e.fitness), nodes: decode_nodes(&e.nodes)?, generation: e.generation });
        }
        Ok(h)
    }
}

pub use crate::report::write_atomic;

/// What a run's progress counts: node evaluations (nodes × data points, regression and
/// classification) or env steps (control, read from the task's counter).
enum Work<'a> {
    /// Node evaluations; each program is run on this many points.
    Nodes { points: f64 },
    /// Env steps played and seconds of roll-outs, as the control task counts them.
    EnvSteps(&'a std::sync::Mutex<(u64, f64)>),
}

/// The observer of a task's run: progress, work count, hall of fame, checkpoints and the stop
/// request.
pub struct RunObserver<'a> {
    progress: crate::report::progress::Progress,
    /// Node evaluations so far (0 for a control run, which counts env steps instead).
    pub evals: f64,
    work: Work<'a>,
    /// Individuals per generation, every island's.
    pop_size: usize,
    /// Each island's statistics of the generation being reported (several islands only).
    island_stats: Vec<GenerationStats>,
    /// The hall of fame.
    pub hof: HallOfFame,
    /// Median size of the valid programs of each generation (0 where none was valid).
    pub median_sizes: Vec<f64>,
    opts: &'a RunOptions,
    verbose: bool,
}

impl<'a> RunObserver<'a> {
    /// An observer for a run of `engine` on `islands` scoring each program on `points` data
    /// points.
    pub fn new(engine: &EngineConfig, islands: &IslandConfig, opts: &'a RunOptions, points: usize) -> Result<Self> {
        Self::counting(engine, islands, opts, Work::Nodes { points: points as f64 })
    }

    /// An observer for a control run of `engine` on `islands`, whose progress counts the env steps of
    /// `played` (env steps, seconds of roll-outs: the task's counter, which a resumed run starts
    /// from the checkpoint's [`Checkpoint::env_steps`]) and shows returns, and whose checkpoints
    /// save that counter.
    pub fn for_control(engine: &EngineConfig, islands: &IslandConfig, opts: &'a RunOptions, played: &'a std::sync::Mutex<(u64, f64)>) -> Result<Self> {
        Self::counting(engine, islands, opts, Work::EnvSteps(played))
    }

    fn counting(engine: &EngineConfig, islands: &IslandConfig, opts: &'a RunOptions, work: Work<'a>) -> Result<Self> {
        let (hof, evals, median_sizes) = match &opts.resume {
            Some(c) => (c.hall_of_fame()?, c.node_evaluations, c.median_sizes.clone()),
            None => (HallOfFame::default(), 0.0, Vec::new()),
        };
        let mut progress = crate::report::progress::Progress::new(engine.generations, opts.quiet || opts.verbose);
        if matches!(work, Work::EnvSteps(_)) {
            progress = progress.with_unit("env steps").with_returns();
        }
        Ok(Self {
            progress,
            evals,
            work,
            pop_size: engine.pop_size * islands.count.max(1),
            island_stats: Vec::new(),
            hof,
            median_sizes,
            opts,
            verbose: opts.verbose && !opts.quiet,
        })
    }

    /// The resume state for the engine.
    pub fn resume(&self) -> Result<Option<crate::evolve::Resume>> {
        self.opts.resume.as_ref().map(|c| c.state.resume()).transpose()
    }

    /// Ends the progress display.
    pub fn finish(&self) {
        self.progress.finish();
    }

    /// Turns the engine's [`Interrupted`](crate::evolve::Interrupted) into [`Stopped`], which
    /// says where the checkpoint is.
    pub fn explain(&self, err: anyhow::Error) -> anyhow::Error {
        match err.downcast_ref::<crate::evolve::Interrupted>() {
            Some(i) => Stopped { generation: i.generation, checkpoint: self.opts.checkpoint.clone() }.into(),
            None => err,
        }
    }
}

/// What the progress line says of the islands: each one's best (a return with `returns`), in
/// island order, up to 8 of them and then the range of the rest; `None` without islands.
pub fn island_line(stats: &[GenerationStats], returns: bool) -> Option<String> {
    if stats.len() < 2 {
        return None;
    }
    let show = |f: f64| if returns { format!("{:.1}", -f) } else { format!("{f:.3e}") };
    let mut parts: Vec<String> = stats.iter().take(8).map(|s| show(s.best)).collect();
    if stats.len() > 8 {
        let rest = stats[8..].iter().map(|s| s.best);
        let (lo, hi) = rest.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), b| (lo.min(b), hi.max(b)));
        parts.push(format!("… {} more in {}..{}", stats.len() - 8, show(lo), show(hi)));
    }
    Some(format!("{} islands: {}", stats.len(), parts.join(" ")))
}

/// The median of sizes given as counts per size (`counts[n]`: how many have `n` nodes); 0
/// when there are none. Equals sorting the sizes and taking the middle (or the mean of the two
/// middle ones).
pub fn median_of_counts(counts: &[u32]) -> f64 {
    let total: u64 = counts.iter().map(|&c| c as u64).sum();
    if total == 0 {
        return 0.0;
    }
    // The size at sorted position k.
    let at = |k: u64| -> f64 {
        let mut seen = 0u64;
        for (n, &c) in counts.iter().enumerate() {
            seen += c as u64;
            if seen > k {
                return n as f64;
            }
        }
        0.0
    };
    if total % 2 == 1 { at(total / 2) } else { (at(total / 2 - 1) + at(total / 2)) / 2.0 }
}

impl Observer for RunObserver<'_> {
    fn generation(&mut self, s: &GenerationStats, _best: &Best) {
        let count = match &self.work {
            Work::Nodes { points } => {
                self.evals += s.mean_size.max(0.0) * (self.pop_size - s.invalid) as f64 * points;
                self.evals
            }
            Work::EnvSteps(played) => played.lock().map_or(0, |p| p.0) as f64,
        };
        let returns = matches!(self.work, Work::EnvSteps(_));
        let islands = island_line(&self.island_stats, returns);
        self.progress.update_with(s, count, islands.as_deref());
        if self.verbose {
            let islands = islands.map_or(String::new(), |l| format!(" · {l}"));
            match self.work {
                Work::Nodes { .. } => eprintln!(
                    "gen {:>4} · best {:.6e} · mean {:.6e} · mean size {:.1} · invalid {} · {:.3} s{islands}",
                    s.generation, s.best, s.mean, s.mean_size, s.invalid, s.seconds
                ),
                // Control minimises minus the return: show returns.
                Work::EnvSteps(_) => eprintln!(
                    "gen {:>4} · best return {:.2} · mean return {:.2} · mean size {:.1} · invalid {} · {:.3} s{islands}",
                    s.generation, -s.best, -s.mean, s.mean_size, s.invalid, s.seconds
                ),
            }
        }
        self.island_stats.clear();
    }

    fn islands(&mut self, stats: &[GenerationStats]) {
        self.island_stats = stats.to_vec();
    }

    fn evaluated(&mut self, generation: usize, pop: &Population, fitness: &[f64]) {
        self.hof.update(generation, pop, fitness);
        let mut sizes: Vec<u16> =
            pop.len.iter().zip(fitness).filter(|(n, f)| **n > 0 && crate::select::key(**f).is_finite()).map(|(n, _)| *n).collect();
        let median = match sizes.len() {
            0 => 0.0,
            n => {
                sizes.sort_unstable();
                if n % 2 == 1 { sizes[n / 2] as f64 } else { (sizes[n / 2 - 1] as f64 + sizes[n / 2] as f64) / 2.0 }
            }
        };
        self.median_sizes.truncate(generation);
        self.median_sizes.push(median);
    }

    fn evaluated_sizes(&mut self, generation: usize, winners: &[(f64, Vec<crate::program::tree::Node>)], size_counts: &[u32]) {
        for (f, nodes) in winners {
            self.hof.offer(generation, *f, nodes);
        }
        self.median_sizes.truncate(generation);
        self.median_sizes.push(median_of_counts(size_counts));
    }

    fn wants_snapshot(&mut self, generation: usize) -> bool {
        self.opts.checkpoint.is_some() && self.opts.checkpoint_every > 0 && generation % self.opts.checkpoint_every == 0
    }

    fn snapshot(&mut self, state: &Snapshot<'_>) -> Result<()> {
        let Some(path) = &self.opts.checkpoint else { return Ok(()) };
        let experiment = self.opts.experiment.clone().context("a checkpoint saves the run's experiment: set RunOptions::experiment")?;
        let c = Checkpoint {
            grove_checkpoint: 1,
            version: env!("CARGO_PKG_VERSION").into(),
            experiment,
            state: Saved::of(state),
            hall_of_fame: self
                .hof
                .by_size
                .iter()
                .enumerate()
                .filter_map(|(size, e)| {
                    e.as_ref().map(|e| SavedEntry {
                        size,
                        fitness: e.fitness.to_bits(),
                        nodes: encode_nodes(&e.nodes),
                        generation: e.generation,
                    })
                })
                .collect(),
            node_evaluations: self.evals,
            median_sizes: self.median_sizes.clone(),
            checkpoint_every: self.opts.checkpoint_every,
            env_steps: match &self.work {
                Work::Nodes { .. } => None,
                Work::EnvSteps(played) => Some(played.lock().map_or((0, 0.0), |p| *p)),
            },
        };
        let text = serde_json::to_vec(&c).context("cannot encode the checkpoint")?;
        write_atomic(path, &text).with_context(|| format!("cannot save the checkpoint {}", path.display()))?;
        if self.verbose {
            eprintln!("checkpoint before generation {} saved to {}", state.generation, path.display());
        }
        Ok(())
    }

    fn stop_requested(&self) -> bool {
        self.opts.stop.as_ref().is_some_and(|s| s.load(Ordering::SeqCst))
    }
}

/// Runs `run` on `threads` worker threads (`None`: rayon's global pool, all cores).
pub fn on_threads<T: Send>(threads: Option<usize>, run: impl FnOnce() -> Result<T> + Send) -> Result<T> {
    match threads {
        Some(n) => rayon::ThreadPoolBuilder::new().num_threads(n.max(1)).build().context("cannot start worker threads")?.install(run),
        None => run(),
    }
}

/// Runs an experiment (evolve, classify or control) as `opts` says, on `threads` worker
/// threads: the library's run of `grove evolve`, `grove classify` and `grove run`. Checkpoints
/// save `exp` (`opts.experiment` is set to it).
pub fn run_experiment(exp: &Experiment, opts: &RunOptions, threads: Option<usize>) -> Result<EvolveResult> {
    let opts = &RunOptions { experiment: Some(exp.clone()), ..opts.clone() };
    on_threads(threads, || match exp {
        Experiment::Evolve(s) => super::regression::evolve_with(s, opts),
        Experiment::Classify(s) => super::classify::classify_with(s, opts),
        Experiment::Control(s) => super::control::control_run(s, opts),
    })
}

/// The files a run may leave: the JSON report, the hall of fame as CSV, the plots.
#[derive(Clone, Debug, Default)]
pub struct Outputs {
    /// The JSON run report.
    pub report: Option<PathBuf>,
    /// The hall of fame ([`fame_csv`]).
    pub hall_of_fame: Option<PathBuf>,
    /// A directory for the plots (PNG and SVG).
    pub plots: Option<PathBuf>,
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
        for p in super::plots::write_all(report, dir)? {
            written.push(("plot", p));
        }
    }
    Ok(written)
}

/// One row of the hall of fame as reports and CSV files hold it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FameRow {
    /// Size in nodes.
    pub complexity: usize,
    /// The error on the training rows (fitness without the parsimony penalty).
    pub loss: f64,
    /// The same error on the validation rows (`None` without them, or where not finite).
    #[serde(default)]
    pub validation_loss: Option<f64>,
    /// PySR's score: the drop of ln(loss) per node from the previous row (0 for the first).
    #[serde(default)]
    pub score: f64,
    /// Its description length on the training rows, in nats (`--select mdl`; `None` where the
    /// fitness is no likelihood).
    #[serde(default)]
    pub description_length: Option<f64>,
    /// Whether this is the program the run returned (`best`, `model`).
    #[serde(default)]
    pub selected: bool,
    /// Infix formula.
    pub equation: String,
    /// LaTeX.
    pub latex: String,
    /// Text sympy's `sympify` parses.
    pub sympy: String,
}

/// Writes hall-of-fame rows as CSV (`complexity,loss,equation,latex,sympy,validation_loss,
/// score,selected,description_length`, RFC 4180 quoting; an empty `validation_loss` or
/// `description_length` where there is none).
pub fn fame_csv(rows: &[FameRow]) -> String {
    let q = |s: &str| {
        if s.contains([',', '"', '\n']) { format!("\"{}\"", s.replace('"', "\"\"")) } else { s.to_string() }
    };
    let mut out = String::from("complexity,loss,equation,latex,sympy,validation_loss,score,selected,description_length\n");
    for r in rows {
        let v = r.validation_loss.map(|v| format!("{v:e}")).unwrap_or_default();
        let d = r.description_length.filter(|d| d.is_finite()).map(|d| format!("{d:e}")).unwrap_or_default();
        out += &format!(
            "{},{:e},{},{},{},{v},{:e},{},{d}\n",
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_counts_equals_the_median_of_the_sorted_sizes() {
        let mut s = crate::rng::Stream::new(3, 0, 0, crate::rng::Purpose::Bench);
        assert_eq!(median_of_counts(&[0, 0, 0]), 0.0);
        assert_eq!(median_of_counts(&[0, 1]), 1.0);
        assert_eq!(median_of_counts(&[0, 1, 0, 1]), 2.0);
        for _ in 0..200 {
            let counts: Vec<u32> = (0..1 + s.below(12)).map(|n| if n == 0 { 0 } else { s.below(4) }).collect();
            let mut sizes: Vec<usize> = counts.iter().enumerate().flat_map(|(n, &c)| std::iter::repeat_n(n, c as usize)).collect();
            sizes.sort_unstable();
            let want = match sizes.len() {
                0 => 0.0,
                n if n % 2 == 1 => sizes[n / 2] as f64,
                n => (sizes[n / 2 - 1] + sizes[n / 2]) as f64 / 2.0,
            };
            assert_eq!(median_of_counts(&counts), want, "{counts:?}");
        }
    }
}
