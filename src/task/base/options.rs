//! How a run is carried out, which none of it changes: quiet or verbose, a stop flag, the
//! memory the run may plan for, where its notes go, the state it continues from and where its
//! checkpoints go ([`Checkpoints`], which the runner provides: a task saves its state through it
//! without knowing the file or the settings stored beside the state).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::{Context, Result};

use super::state::RunState;

/// How a run is carried out (none of it changes the result).
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Print nothing but the result.
    pub quiet: bool,
    /// Print a line per generation.
    pub verbose: bool,
    /// Where checkpoints go (`None`: none are written). The runner's
    /// `task::runner::checkpoint::FileCheckpoints` adds the run's settings and output paths to
    /// the state a task saves.
    pub checkpoint: Option<Arc<dyn Checkpoints>>,
    /// Continue from this state (a checkpoint's).
    pub resume: Option<RunState>,
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

    /// Whether the run is asked to stop (Ctrl-C).
    pub fn stop_requested(&self) -> bool {
        self.stop.as_ref().is_some_and(|s| s.load(std::sync::atomic::Ordering::SeqCst))
    }

    /// Whether a checkpoint is due before generation (or iteration) `next`: every
    /// [`Checkpoints::every`] and before the last one (`last`), where checkpoints are written.
    pub fn checkpoint_due(&self, next: usize, last: usize) -> bool {
        self.checkpoint.as_ref().is_some_and(|c| {
            let every = c.every();
            (every > 0 && next % every == 0) || next == last
        })
    }

    /// Where checkpoints go, for messages (`None` without checkpoints).
    pub fn checkpoint_path(&self) -> Option<PathBuf> {
        self.checkpoint.as_ref().map(|c| c.path().to_path_buf())
    }
}

/// Where a run's checkpoints go. A task hands it its whole state between generations; what is
/// stored beside the state (the settings, the output paths) is the implementation's business.
pub trait Checkpoints: Send + Sync + std::fmt::Debug {
    /// The file checkpoints are written to (named in messages).
    fn path(&self) -> &Path;
    /// Generations between checkpoints (0: only before the last generation and on a stop).
    fn every(&self) -> usize;
    /// Saves `state`, replacing the last checkpoint.
    fn save(&self, state: RunState) -> Result<()>;
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

/// The most worker threads a run may ask for: each holds a stack and a share of the work, and
/// past the machine's cores more only add switching.
pub const MAX_THREADS: usize = 1024;

/// Runs `run` on `threads` worker threads (`None`: rayon's global pool, all cores); a count
/// outside 1 to [`MAX_THREADS`] is refused in one line.
pub fn on_threads<T: Send>(threads: Option<usize>, run: impl FnOnce() -> Result<T> + Send) -> Result<T> {
    match threads {
        Some(n) => {
            anyhow::ensure!((1..=MAX_THREADS).contains(&n), "--threads must be 1 to {MAX_THREADS}, got {n}");
            rayon::ThreadPoolBuilder::new().num_threads(n).build().context("cannot start worker threads")?.install(run)
        }
        None => run(),
    }
}
