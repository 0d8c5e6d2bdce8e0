//! The observer of a task's run: progress, the work counted, the hall of fame, checkpoints
//! (through [`super::options::Checkpoints`]), the budget and the stop request.

use anyhow::Result;

use super::options::{RunOptions, Stopped};
use super::state::{RunState, SavedEntry, TaskState};
use crate::evolve::checkpoint::{Saved, encode_nodes};
use crate::evolve::hof::HallOfFame;
use crate::evolve::{Best, EngineConfig, GenerationStats, IslandConfig, Observer, Snapshot};
use crate::program::tree::Population;

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
    /// The task's own parts of the state its checkpoints keep, read when one is saved.
    task_state: Option<&'a dyn TaskState>,
}

impl<'a> RunObserver<'a> {
    /// An observer for a run of `engine` on `islands` scoring each program on `points` data
    /// points.
    pub fn new(engine: &EngineConfig, islands: &IslandConfig, opts: &'a RunOptions, points: usize) -> Result<Self> {
        Self::counting(engine, islands, opts, Work::Nodes { points: points as f64 })
    }

    /// An observer for a control run of `engine` on `islands`, whose progress counts the env steps of
    /// `played` (env steps, seconds of roll-outs: the task's counter, which a resumed run starts
    /// from the checkpoint's `RunState::env_steps`) and shows returns, and whose checkpoints
    /// save that counter.
    pub fn for_control(engine: &EngineConfig, islands: &IslandConfig, opts: &'a RunOptions, played: &'a std::sync::Mutex<(u64, f64)>) -> Result<Self> {
        Self::counting(engine, islands, opts, Work::EnvSteps(played))
    }

    fn counting(engine: &EngineConfig, islands: &IslandConfig, opts: &'a RunOptions, work: Work<'a>) -> Result<Self> {
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
            task_state: None,
        })
    }

    /// Checkpoints keep `state`'s parts as they are when each is saved (a control run's linear
    /// search under its programs, its normaliser).
    pub fn with_task_state(mut self, state: &'a dyn TaskState) -> Self {
        self.task_state = Some(state);
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
            Some(i) => Stopped { generation: i.generation, checkpoint: self.opts.checkpoint_path() }.into(),
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
        self.opts.checkpoint_due(generation, self.generations)
    }

    fn snapshot(&mut self, state: &Snapshot<'_>) -> Result<()> {
        let Some(checkpoints) = &self.opts.checkpoint else { return Ok(()) };
        let mut saved = Saved::of(state);
        // The user operators any saved tree uses, so a reader can renumber them.
        let mut used = Vec::new();
        saved.map_trees(&mut |nodes| used.extend(nodes.iter().filter_map(|n| crate::program::Op::from_code(n.0))));
        used.extend(self.hof.by_size.iter().flatten().flat_map(|e| e.nodes.iter().map(|n| n.op)));
        let mut run = RunState {
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
            env_steps: match &self.work {
                Work::Nodes { .. } => None,
                Work::EnvSteps(played) => Some(played.lock().map_or((0, 0.0), |p| *p)),
            },
            linear: None,
            residual: None,
            inputs: None,
        };
        if let Some(t) = self.task_state {
            t.save_into(&mut run);
        }
        checkpoints.save(run)?;
        if self.verbose {
            self.opts.say(&format!("checkpoint before generation {} saved to {}", state.generation, checkpoints.path().display()));
        }
        Ok(())
    }

    fn stop_requested(&self) -> bool {
        self.opts.stop_requested()
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
