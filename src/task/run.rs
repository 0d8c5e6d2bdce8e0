//! What every task's run shares: the options of a run (quiet, checkpoints, resume, stop), the
//! observer that shows progress, keeps the hall of fame and writes checkpoints, and the
//! checkpoint file itself (settings + engine state + hall of fame + the run's output paths,
//! written atomically, with a format version and a checksum that [`Checkpoint::load`] checks
//! before it validates every tree and genome).

use std::path::{Path, PathBuf};

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result, anyhow, bail, ensure};
use serde::{Deserialize, Serialize};

use super::experiment::Experiment;
use super::search::EvolveResult;
use crate::evolve::checkpoint::{Saved, SavedNode, Shape, check_tree, encode_nodes};
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
    /// Every this many generations, before the last generation and on a stop.
    pub checkpoint_every: usize,
    /// The files the run's results go to (checkpoints keep them, so a resumed run writes them).
    pub outputs: Outputs,
    /// Continue from this checkpoint.
    pub resume: Option<Checkpoint>,
    /// Set (by Ctrl-C) to stop between generations.
    pub stop: Option<Arc<AtomicBool>>,
    /// The most memory the run may plan for, bytes (`--max-memory`; `None`: what the machine
    /// has, [`super::plan`]).
    pub max_memory: Option<u64>,
    /// Where progress lines and notes go (`None`: standard error).
    pub log: Option<crate::report::Log>,
}

impl RunOptions {
    /// Shows one line of progress or a note: through [`Self::log`], else on standard error.
    pub fn say(&self, line: &str) {
        crate::report::say(self.log.as_ref(), line);
    }
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

/// The checkpoint format this grove writes and reads. Version 2 added the checksum and the
/// output paths; a file of another version is refused.
pub const CHECKPOINT_FORMAT: u64 = 2;

/// FNV-1a, 64 bits, of `bytes`. Each step (xor a byte, multiply by an odd prime) is a bijection
/// of the state, so changing any one byte always changes the result.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3))
}

/// The checksum of a checkpoint's content (the file's JSON object without `checksum`): FNV-1a
/// of its compact JSON text, as `fnv1a64:` and 16 hex digits. The text is canonical: keys in
/// the file's order, numbers printed as they read back exactly (serde_json's float_roundtrip),
/// so reformatting the file keeps the checksum and changing one digit of it breaks it.
fn checksum(content: &serde_json::Value) -> Result<String> {
    let text = serde_json::to_vec(content).context("cannot encode the checkpoint")?;
    Ok(format!("fnv1a64:{:016x}", fnv1a64(&text)))
}

/// A checkpoint file: the experiment, the engine's state and the task's (hall of fame,
/// evaluation count, output paths). On disk it is this object's JSON with a `checksum`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checkpoint {
    /// Format marker and version ([`CHECKPOINT_FORMAT`]).
    pub grove_checkpoint: u64,
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
    /// Where the run writes its results (absolute paths).
    pub outputs: Outputs,
    /// `(opcode, definition)` of the user operators the saved trees use: opcodes are handed out
    /// per process, so a reader registers the definitions and renumbers the trees
    /// ([`Self::from_json`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub operators: Vec<(u8, String)>,
    /// A `--policy linear` search (`task::linear_policy`): its whole state. `state` then holds
    /// only the next iteration and the current policy as the best program.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub linear: Option<super::linear_policy::LinearState>,
    /// A `--policy residual` run past its linear search: that search's state at its end, the
    /// linear policy under the programs `state` holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub residual: Option<super::linear_policy::LinearState>,
    /// A `grove control --normalise` run: the normaliser its programs read through, and
    /// everything it has learnt from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<crate::sim::stats::LearntState>,
}

fn ten() -> usize {
    super::defaults::CHECKPOINT_EVERY
}

impl Checkpoint {
    /// Reads a checkpoint, with errors that say what is wrong with the file ([`Self::from_json`]).
    pub fn load(path: &Path) -> Result<Checkpoint> {
        let bytes = std::fs::read(path).with_context(|| format!("cannot read the checkpoint {}", path.display()))?;
        Self::from_json(&bytes, &path.display().to_string())
    }

    /// Reads a checkpoint from the bytes of a file (`origin` names it in errors): JSON, a
    /// `grove_checkpoint` of [`CHECKPOINT_FORMAT`], a checksum that matches the content, every
    /// field readable, and the state whole ([`Self::check`]). Anything else is an error line.
    pub fn from_json(bytes: &[u8], origin: &str) -> Result<Checkpoint> {
        use crate::program::clip;
        use serde_json::Value;
        let v: Value = serde_json::from_slice(bytes).with_context(|| format!("{origin} is not a checkpoint (not JSON; was it cut short?)"))?;
        let Value::Object(mut content) = v else {
            bail!("{origin} is not a checkpoint: give a file written by --checkpoint");
        };
        let Some(format) = content.get("grove_checkpoint") else {
            bail!("{origin} is not a checkpoint: give a file written by --checkpoint (a report is repeated with --from)");
        };
        if format.as_u64() != Some(CHECKPOINT_FORMAT) {
            let old = if format.as_u64() == Some(1) { " (version 1 has no checksum: start the run again)" } else { "" };
            bail!(
                "{origin}: checkpoint format version {} is not one this grove reads (it reads version {CHECKPOINT_FORMAT}){old}",
                clip(&format.to_string(), 40)
            );
        }
        let given = match content.remove("checksum") {
            Some(Value::String(s)) => s,
            Some(other) => bail!("{origin}: the checkpoint's checksum is {}, not a string", clip(&other.to_string(), 40)),
            None => bail!("{origin}: the checkpoint has no checksum"),
        };
        let content = Value::Object(content);
        let want = checksum(&content)?;
        ensure!(
            given == want,
            "{origin}: the checksum {} does not match the checkpoint's content ({want}): the file was changed or damaged",
            clip(&given, 40)
        );
        let c: Checkpoint = serde_path_to_error::deserialize(content).map_err(|e| {
            let path = e.path().to_string();
            anyhow!("{origin}: the checkpoint's `{}` cannot be read: {}", clip(&path, 80), clip(&e.into_inner().to_string(), 200))
        })?;
        let mut c = c;
        c.renumber_operators().with_context(|| format!("{origin}: the checkpoint's operators"))?;
        c.check().with_context(|| format!("{origin}: the checkpoint is damaged"))?;
        Ok(c)
    }

    /// Registers the run's own operators and those the saved trees use, and rewrites the trees'
    /// user opcodes to this process's; a user opcode the checkpoint does not define is an error.
    fn renumber_operators(&mut self) -> Result<()> {
        let own = self.experiment.operators().to_vec();
        crate::task::search::register_operators(&own)?;
        let map = crate::program::ops::user::remap(&self.operators, "the checkpoint").map_err(|e| anyhow!(e))?;
        let mut bad = None;
        let mut fix = |nodes: &mut Vec<SavedNode>| {
            for n in nodes.iter_mut() {
                match map[n.0 as usize] {
                    Some(c) => n.0 = c,
                    None => bad = Some(n.0),
                }
            }
        };
        self.state.map_trees(&mut fix);
        self.hall_of_fame.iter_mut().for_each(|e| fix(&mut e.nodes));
        if let Some(code) = bad {
            bail!("a saved tree uses the user opcode {code}, which the checkpoint's `operators` do not define");
        }
        self.operators.clear();
        Ok(())
    }

    /// The file's bytes: this checkpoint's JSON with its checksum added.
    pub fn to_json(&self) -> Result<Vec<u8>> {
        let mut v = serde_json::to_value(self).context("cannot encode the checkpoint")?;
        let sum = checksum(&v)?;
        v.as_object_mut().context("a checkpoint encodes as a JSON object")?.insert("checksum".into(), sum.into());
        serde_json::to_vec(&v).context("cannot encode the checkpoint")
    }

    /// Writes the checkpoint to `path` atomically.
    pub fn save(&self, path: &Path) -> Result<()> {
        write_atomic(path, &self.to_json()?).with_context(|| format!("cannot save the checkpoint {}", path.display()))
    }

    /// Checks that the state can continue the run its experiment describes, without allocating
    /// for it: the engine's state against the experiment's population × islands, row width and
    /// genome capacity ([`Saved::check`]), and every hall-of-fame entry (its size its length,
    /// its tree whole).
    pub fn check(&self) -> Result<()> {
        if let Some(l) = &self.linear {
            l.check()?;
            return check_tree(&self.state.best.nodes, u16::MAX as usize, u8::MAX as usize - 1).map_err(|m| anyhow!("the policy: {m}"));
        }
        if let Some(l) = &self.residual {
            l.check()?;
        }
        let (engine, islands) = (self.experiment.engine(), self.experiment.islands());
        let shape = Shape {
            rows: engine.pop_size.saturating_mul(islands.count),
            max_len: engine.max_len,
            genome_capacity: self.experiment.genome_capacity(),
        };
        ensure!(
            self.state.islands == islands.count,
            "the state holds {} island(s) and the settings {}",
            self.state.islands,
            islands.count
        );
        self.state.check(&shape)?;
        let n_outputs = self.state.trees.as_ref().map_or(u8::MAX as usize, |t| t.n_outputs);
        for e in &self.hall_of_fame {
            ensure!(e.size == e.nodes.len() && e.size > 0, "a hall-of-fame entry of size {} holds {} nodes", e.size, e.nodes.len());
            check_tree(&e.nodes, u16::MAX as usize, n_outputs).map_err(|m| anyhow!("the hall-of-fame entry of size {}: {m}", e.size))?;
        }
        Ok(())
    }

    /// The hall of fame it holds (its entries checked by [`Self::check`]).
    pub fn hall_of_fame(&self) -> Result<HallOfFame> {
        let mut h = HallOfFame::default();
        for e in &self.hall_of_fame {
            ensure!(e.size == e.nodes.len() && e.size <= u16::MAX as usize, "a hall-of-fame entry of size {} holds {} nodes", e.size, e.nodes.len());
            if h.by_size.len() <= e.size {
                h.by_size.resize(e.size + 1, None);
            }
            h.by_size[e.size] = Some(Entry {
                fitness: f64::from_bits(e.fitness),
                nodes: crate::evolve::checkpoint::decode_nodes(&e.nodes)?,
                generation: e.generation,
            });
        }
        Ok(h)
    }
}

/// Checks, before a run's first generation, that checkpoints can be saved at `path`: it is not
/// a directory, its directory exists, and a file can be created there (the temporary file an
/// atomic save writes, created and removed). One error line naming the path and the problem.
pub fn check_checkpoint_path(path: &Path) -> Result<()> {
    let show = path.display();
    ensure!(!path.is_dir(), "the checkpoint {show} is a directory: give a file path, e.g. {}", path.join("run.ckpt").display());
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    ensure!(dir.is_dir(), "cannot save the checkpoint {show}: the directory {} does not exist", dir.display());
    let probe = crate::report::temporary_path(path);
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&probe)
        .with_context(|| format!("cannot save the checkpoint {show}: cannot create a file in {}", dir.display()))?;
    std::fs::remove_file(&probe).with_context(|| format!("cannot remove {}", probe.display()))?;
    Ok(())
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
    /// The run's last generation (the last snapshot is taken before it).
    generations: usize,
    /// Each island's statistics of the generation being reported (several islands only).
    island_stats: Vec<GenerationStats>,
    /// The hall of fame.
    pub hof: HallOfFame,
    /// Median size of the valid programs of each generation (0 where none was valid).
    pub median_sizes: Vec<f64>,
    opts: &'a RunOptions,
    verbose: bool,
    /// The run's budget, when it has one.
    watch: Option<super::budget::Watch<'a>>,
    /// Why the run ended (every generation ran, until the budget says otherwise).
    pub ended: super::budget::Ending,
    /// The linear search under a `--policy residual` run's programs, which its checkpoints keep.
    /// It may be tuned between generations ([`super::residual::Head`]), so a checkpoint reads it
    /// when it is saved.
    residual: Option<&'a super::residual::Head<'a>>,
    /// A `--normalise` control run's normaliser, which its checkpoints keep.
    inputs: Option<&'a std::sync::Mutex<crate::sim::stats::Learnt>>,
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
        if let Some(path) = &opts.checkpoint {
            check_checkpoint_path(path)?;
        }
        let (hof, evals, median_sizes) = match &opts.resume {
            Some(c) => (c.hall_of_fame()?, c.node_evaluations, c.median_sizes.clone()),
            None => (HallOfFame::default(), 0.0, Vec::new()),
        };
        let mut progress =
            crate::report::progress::Progress::new(engine.generations, opts.quiet || opts.verbose).with_log(opts.log.clone());
        if matches!(work, Work::EnvSteps(_)) {
            progress = progress.with_unit("env steps").with_returns();
        }
        Ok(Self {
            progress,
            evals,
            work,
            pop_size: engine.pop_size * islands.count.max(1),
            generations: engine.generations,
            island_stats: Vec::new(),
            hof,
            median_sizes,
            opts,
            verbose: opts.verbose && !opts.quiet,
            watch: None,
            ended: super::budget::Ending::Generations,
            residual: None,
            inputs: None,
        })
    }

    /// Checkpoints keep `head`'s search as it is when they are saved: the linear search under the
    /// programs of a `--policy residual` run ([`Checkpoint::residual`]).
    pub fn with_residual(mut self, head: Option<&'a super::residual::Head<'a>>) -> Self {
        self.residual = head;
        self
    }

    /// Checkpoints keep `learnt` as it is when they are saved: a `--normalise` control run's
    /// normaliser ([`Checkpoint::inputs`]).
    pub fn with_inputs(mut self, learnt: Option<&'a std::sync::Mutex<crate::sim::stats::Learnt>>) -> Self {
        self.inputs = learnt;
        self
    }

    /// Ends the run early as `budget` says, measuring the best program by `goal`
    /// ([`super::budget`]).
    pub fn with_budget(mut self, budget: super::budget::Budget, goal: super::budget::Goal<'a>) -> Self {
        self.watch = (!budget.is_empty()).then(|| super::budget::Watch::new(budget, goal));
        self
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
                Work::Nodes { .. } => self.opts.say(&format!(
                    "gen {:>4} · best {:.6e} · mean {:.6e} · mean size {:.1} · invalid {} · {:.3} s{islands}",
                    s.generation, s.best, s.mean, s.mean_size, s.invalid, s.seconds
                )),
                // Control minimises minus the return: show returns.
                Work::EnvSteps(_) => self.opts.say(&format!(
                    "gen {:>4} · best return {:.2} · mean return {:.2} · mean size {:.1} · invalid {} · {:.3} s{islands}",
                    s.generation, -s.best, -s.mean, s.mean_size, s.invalid, s.seconds
                )),
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

    /// Every `checkpoint_every` generations and before the last one, so that every run with a
    /// checkpoint path leaves one (resumed, it evaluates the last generation again, to the same
    /// end; with more `--gens` it goes on as a longer run would).
    /// A control run chooses its policy among the last population's best on validation
    /// episodes; regression and classification choose from the hall of fame, so a GPU run
    /// leaves its last population on the device.
    fn wants_population(&self) -> bool {
        matches!(self.work, Work::EnvSteps(_))
    }
    fn wants_snapshot(&mut self, generation: usize) -> bool {
        let every = self.opts.checkpoint_every > 0 && generation % self.opts.checkpoint_every == 0;
        self.opts.checkpoint.is_some() && (every || generation == self.generations)
    }

    fn snapshot(&mut self, state: &Snapshot<'_>) -> Result<()> {
        let Some(path) = &self.opts.checkpoint else { return Ok(()) };
        let experiment = self.opts.experiment.clone().context("a checkpoint saves the run's experiment: set RunOptions::experiment")?;
        let outputs = &self.opts.outputs;
        let mut saved = Saved::of(state);
        // The user operators any saved tree uses, so a reader can renumber them.
        let mut used = Vec::new();
        saved.map_trees(&mut |nodes| used.extend(nodes.iter().filter_map(|n| crate::program::Op::from_code(n.0))));
        used.extend(self.hof.by_size.iter().flatten().flat_map(|e| e.nodes.iter().map(|n| n.op)));
        let c = Checkpoint {
            grove_checkpoint: CHECKPOINT_FORMAT,
            version: env!("CARGO_PKG_VERSION").into(),
            experiment,
            operators: crate::program::ops::user::saved_codes(used),
            state: saved,
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
            outputs: outputs.absolute(),
            linear: None,
            residual: self.residual.map(|r| r.state()),
            inputs: self.inputs.map(|l| l.lock().unwrap_or_else(|e| e.into_inner()).state()),
        };
        c.save(path)?;
        if self.verbose {
            self.opts.say(&format!("checkpoint before generation {} saved to {}", state.generation, path.display()));
        }
        Ok(())
    }

    fn stop_requested(&self) -> bool {
        self.opts.stop.as_ref().is_some_and(|s| s.load(Ordering::SeqCst))
    }

    fn finish(&mut self, generation: usize, best: &Best) -> bool {
        match self.watch.as_mut().and_then(|w| w.finish(generation, best)) {
            Some(e) => {
                self.ended = e;
                true
            }
            None => false,
        }
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
    /// The k-fold cross-validated mean squared error of its size on the training rows
    /// (`--select cv`; `None` where not computed).
    #[serde(default)]
    pub cv_loss: Option<f64>,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_control_run_asks_for_the_last_population() {
        let (engine, islands, opts) = (EngineConfig::default(), IslandConfig::single(), RunOptions { quiet: true, ..Default::default() });
        let played = std::sync::Mutex::new((0u64, 0.0f64));
        assert!(!RunObserver::new(&engine, &islands, &opts, 10).unwrap().wants_population());
        assert!(RunObserver::for_control(&engine, &islands, &opts, &played).unwrap().wants_population());
        // A plain closure, as a library user passes, keeps the default: the population comes back.
        assert!((|_: &GenerationStats, _: &Best| {}).wants_population());
    }

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
