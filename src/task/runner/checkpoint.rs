//! The checkpoint file: the experiment, the run's state ([`RunState`]) and the files its results
//! go to, written atomically, with a format version and a checksum that [`Checkpoint::load`]
//! checks before it validates every tree and genome. [`FileCheckpoints`] is the runner's
//! [`Checkpoints`]: what a task's run saves through.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail, ensure};
use serde::{Deserialize, Serialize};

use super::experiment::Experiment;
use super::outputs::Outputs;
use crate::evolve::checkpoint::{SavedNode, Shape, check_tree};
use crate::task::base::options::Checkpoints;
use crate::task::base::state::RunState;

/// The checkpoint format this grove writes. Version 2 added the checksum and the output paths;
/// version 3 the record of the run's input files ([`InputRecord`]). Versions 2 and 3 are read
/// (a version 2 file's inputs are not checked, with a note that says so); any other is refused.
pub const CHECKPOINT_FORMAT: u64 = 3;

/// The oldest checkpoint format this grove reads.
pub const OLDEST_FORMAT: u64 = 2;

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

/// A checkpoint file: the experiment, where the run's results go, and the run's state. On
/// disk it is this object's JSON with a `checksum`; the state's fields are keys of the same
/// object ([`RunState::FIELDS`]), and any other key is refused ([`Self::from_json`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// Format marker and version ([`CHECKPOINT_FORMAT`]).
    pub grove_checkpoint: u64,
    /// grove's version that wrote it.
    pub version: String,
    /// The run's settings.
    pub experiment: Experiment,
    /// Generations between checkpoints (a resumed run keeps it).
    #[serde(default = "crate::task::base::defaults::checkpoint_every")]
    pub checkpoint_every: usize,
    /// Where the run writes its results (absolute paths).
    pub outputs: Outputs,
    /// The files the run reads, by absolute path and content hash, which a resume checks
    /// ([`Self::check_inputs`]); `None` in a version 2 checkpoint, which has no record. Its
    /// key is `input_files`: the state's `inputs` is a control run's learnt observation scaling.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "input_files")]
    pub inputs: Option<Vec<InputRecord>>,
    /// What the run has done.
    #[serde(flatten)]
    pub run: RunState,
}

/// The keys of a checkpoint's object besides the run's state's and the checksum.
const HEADER: [&str; 6] = ["grove_checkpoint", "version", "experiment", "checkpoint_every", "outputs", "input_files"];

/// One file a checkpointed run reads, as its checkpoint records it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputRecord {
    /// The flag that names it: `--data`, `--grammar`, `--env`.
    pub role: String,
    /// Its absolute path when the run started.
    pub path: PathBuf,
    /// FNV-1a of its bytes ([`hash_file`]), `fnv1a64:` and 16 hex digits.
    pub hash: String,
    /// Its size, bytes.
    pub bytes: u64,
}

/// FNV-1a of a file's bytes, read in blocks of 1 MiB (`fnv1a64:` and 16 hex digits), and its
/// size.
pub fn hash_file(path: &Path) -> Result<(String, u64)> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let (mut h, mut n, mut buf) = (0xcbf2_9ce4_8422_2325u64, 0u64, vec![0u8; 1 << 20]);
    loop {
        let k = match f.read(&mut buf) {
            Ok(0) => break,
            Ok(k) => k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        };
        h = buf[..k].iter().fold(h, |h, &b| (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3));
        n += k as u64;
    }
    Ok((format!("fnv1a64:{h:016x}"), n))
}

/// The record of `experiment`'s input files ([`Experiment::input_files`]) for its checkpoints.
/// A checkpointed run must be able to read its inputs again when resumed, so an input that is
/// not a regular file (standard input, `/dev/fd/N`, a FIFO, a device) is refused in one line.
pub fn record_inputs(experiment: &Experiment) -> Result<Vec<InputRecord>> {
    use crate::report::files::{Standing, standing};
    let mut out = Vec::new();
    for named in experiment.input_files() {
        let role = named.role.trim_end_matches(" file").to_string();
        let show = named.path.display();
        ensure!(
            !through_descriptor(&named.path),
            "{role} {show} is standard input or an open file descriptor: a checkpointed run reads its inputs again when resumed, so save it to a file first, or drop --checkpoint"
        );
        match standing(&named.path) {
            Standing::File => {}
            Standing::Nothing => bail!("{role} {show}: no such file"),
            _ => bail!(
                "{role} {show} is not a regular file (standard input, a pipe or a device): a checkpointed run reads its inputs again when resumed, so save it to a file first, or drop --checkpoint"
            ),
        }
        let (hash, bytes) = hash_file(&named.path)?;
        let path = std::path::absolute(&named.path).unwrap_or(named.path.clone());
        out.push(InputRecord { role, path, hash, bytes });
    }
    Ok(out)
}

impl Checkpoint {
    /// Reads a checkpoint, with errors that say what is wrong with the file ([`Self::from_json`]).
    pub fn load(path: &Path) -> Result<Checkpoint> {
        // Its JSON is read whole and then into the state, some times its size in memory.
        let limit = crate::task::base::plan::host_available().map_or(16 << 30, |a| (a / 8).max(64 << 20));
        let bytes = crate::input::read_bytes(path, "the checkpoint", limit)?;
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
        if !format.as_u64().is_some_and(|v| (OLDEST_FORMAT..=CHECKPOINT_FORMAT).contains(&v)) {
            let old = if format.as_u64() == Some(1) { " (version 1 has no checksum: start the run again)" } else { "" };
            bail!(
                "{origin}: checkpoint format version {} is not one this grove reads (it reads versions {OLDEST_FORMAT} to {CHECKPOINT_FORMAT}){old}",
                clip(&format.to_string(), 40)
            );
        }
        let given = match content.remove("checksum") {
            Some(Value::String(s)) => s,
            Some(other) => bail!("{origin}: the checkpoint's checksum is {}, not a string", clip(&other.to_string(), 40)),
            None => bail!("{origin}: the checkpoint has no checksum"),
        };
        if let Some(key) = content.keys().find(|k| !HEADER.contains(&k.as_str()) && !RunState::FIELDS.contains(&k.as_str())) {
            bail!("{origin}: the checkpoint's `{}` is not a field of a checkpoint", clip(key, 80));
        }
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

    /// Checks the files the run reads against the record the checkpoint holds, before a resume:
    /// each must exist at its recorded absolute path with its recorded hash. A changed file
    /// is refused in one line that names it and both hashes, unless it is one of `accept`
    /// (`--accept-changed`, by path or by its flag, e.g. `--data`); a missing one is refused.
    /// Returns the settings to resume with (a recorded input the settings' spelling no longer
    /// names, as from another directory, named by its absolute path, so the run reads the same
    /// files) and the notes to show (a
    /// version 2 checkpoint has no record, so its inputs are not checked).
    pub fn check_inputs(&self, origin: &str, accept: &[PathBuf]) -> Result<(Experiment, Vec<String>)> {
        use crate::report::files::FileKey;
        let Some(inputs) = &self.inputs else {
            let note = format!(
                "note: {origin} was written by an older grove (checkpoint format {}) and records no hashes of its input files: they are not checked against the run's",
                self.grove_checkpoint
            );
            return Ok((self.experiment.clone(), if self.experiment.input_files().is_empty() { Vec::new() } else { vec![note] }));
        };
        for a in accept {
            let named = inputs.iter().any(|r| a.as_os_str() == r.role.as_str() || FileKey::of(a) == FileKey::of(&r.path));
            ensure!(named, "--accept-changed {}: not an input file of {origin} (its inputs: {})", a.display(), list_inputs(inputs));
        }
        let mut notes = Vec::new();
        for r in inputs {
            let show = r.path.display();
            ensure!(
                r.path.is_file(),
                "{origin}: its {} file {show} is missing (it had {} bytes, {}): put it back to resume the run",
                r.role,
                r.bytes,
                r.hash
            );
            let (hash, bytes) = hash_file(&r.path)?;
            if hash == r.hash {
                continue;
            }
            let accepted = accept.iter().any(|a| a.as_os_str() == r.role.as_str() || FileKey::of(a) == FileKey::of(&r.path));
            ensure!(
                accepted,
                "{origin}: its {} file {show} changed since the run started ({} of {} bytes then, {hash} of {bytes} now): resume with --accept-changed {show} to continue on it as it is",
                r.role,
                r.hash,
                r.bytes
            );
            notes.push(format!("note: {} {show} changed since the run started ({} then, {hash} now); continuing on it as it is (--accept-changed)", r.role, r.hash));
        }
        // Where the settings' own spelling names the recorded file (the run resumed from its
        // own directory), it stays, so the report is the uninterrupted run's.
        let mut exp = self.experiment.clone();
        let given = exp.input_files();
        let moved = inputs.iter().filter(|r| {
            let spelled = given.iter().find(|g| g.role.trim_end_matches(" file") == r.role);
            spelled.is_none_or(|g| FileKey::of(&g.path) != FileKey::of(&r.path))
        });
        exp.set_input_paths(moved.map(|r| (r.role.as_str(), r.path.as_path())));
        Ok((exp, notes))
    }

    /// Registers the run's own operators and those the saved trees use, and rewrites the trees'
    /// user opcodes to this process's; a user opcode the checkpoint does not define is an error.
    fn renumber_operators(&mut self) -> Result<()> {
        let own = self.experiment.operators().to_vec();
        crate::task::base::search::register_operators(&own)?;
        let map = crate::program::ops::user::remap(&self.run.operators, "the checkpoint").map_err(|e| anyhow!(e))?;
        let mut bad = None;
        let mut fix = |nodes: &mut Vec<SavedNode>| {
            for n in nodes.iter_mut() {
                match map[n.0 as usize] {
                    Some(c) => n.0 = c,
                    None => bad = Some(n.0),
                }
            }
        };
        self.run.state.map_trees(&mut fix);
        self.run.hall_of_fame.iter_mut().for_each(|e| fix(&mut e.nodes));
        if let Some(code) = bad {
            bail!("a saved tree uses the user opcode {code}, which the checkpoint's `operators` do not define");
        }
        self.run.operators.clear();
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
        crate::report::write_atomic(path, &self.to_json()?).with_context(|| format!("cannot save the checkpoint {}", path.display()))
    }

    /// Checks that the state can continue the run its experiment describes, without allocating
    /// for it: the engine's state against the experiment's population × islands, row width and
    /// genome capacity ([`Saved::check`]), and every hall-of-fame entry (its size its length,
    /// its tree whole).
    pub fn check(&self) -> Result<()> {
        let run = &self.run;
        if let Some(l) = &run.linear {
            l.check()?;
            return check_tree(&run.state.best.nodes, u16::MAX as usize, u8::MAX as usize - 1).map_err(|m| anyhow!("the policy: {m}"));
        }
        if let Some(l) = &run.residual {
            l.check()?;
        }
        let (engine, islands) = (self.experiment.engine(), self.experiment.islands());
        let shape = Shape {
            rows: engine.pop_size.saturating_mul(islands.count),
            max_len: engine.max_len,
            genome_capacity: self.experiment.genome_capacity(),
        };
        ensure!(
            run.state.islands == islands.count,
            "the state holds {} island(s) and the settings {}",
            run.state.islands,
            islands.count
        );
        run.state.check(&shape)?;
        let n_outputs = run.state.trees.as_ref().map_or(u8::MAX as usize, |t| t.n_outputs);
        for e in &run.hall_of_fame {
            ensure!(e.size == e.nodes.len() && e.size > 0, "a hall-of-fame entry of size {} holds {} nodes", e.size, e.nodes.len());
            check_tree(&e.nodes, u16::MAX as usize, n_outputs).map_err(|m| anyhow!("the hall-of-fame entry of size {}: {m}", e.size))?;
        }
        Ok(())
    }

}

/// Whether `path` is `-` or reaches a file through a process's descriptors (`/dev/stdin`,
/// `/dev/fd/N`, `/proc/self/fd/N`): a name that means another file in another process.
fn through_descriptor(path: &Path) -> bool {
    let mut at = path.to_path_buf();
    for _ in 0..40 {
        if at.as_os_str() == "-" || at.starts_with("/proc") || at.starts_with("/dev/fd") || at == Path::new("/dev/stdin") {
            return true;
        }
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => match std::fs::read_link(&at) {
                Ok(to) => at = if to.is_relative() { at.parent().unwrap_or(Path::new("/")).join(to) } else { to },
                Err(_) => return false,
            },
            _ => return false,
        }
    }
    false
}

/// The recorded inputs for a message: `--data /a/d.csv, --grammar /a/g.bnf`.
fn list_inputs(inputs: &[InputRecord]) -> String {
    if inputs.is_empty() {
        return "none".into();
    }
    inputs.iter().map(|r| format!("{} {}", r.role, r.path.display())).collect::<Vec<_>>().join(", ")
}

/// Checks, before a run's first generation, that checkpoints can be saved at `path`: it is a
/// regular file or nothing yet (a checkpoint is read back by `grove run --resume`, so a device
/// or FIFO is refused), and [`crate::report::files::check_output`] passes. One error line naming
/// the path and the problem.
pub fn check_checkpoint_path(path: &Path) -> Result<()> {
    use crate::report::files::{Standing, standing};
    let show = path.display();
    match standing(path) {
        Standing::Directory => bail!("the checkpoint {show} is a directory: give a file path, e.g. {}", path.join("run.ckpt").display()),
        Standing::Stream | Standing::Other => bail!(
            "the checkpoint {show} is not a regular file (a device or a FIFO): `grove run --resume` reads a checkpoint back, so give a file path"
        ),
        Standing::File | Standing::Nothing => {}
    }
    let dir = crate::report::files::resolve_links(path)?;
    let dir = dir.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    ensure!(dir.is_dir(), "cannot save the checkpoint {show}: the directory {} does not exist", dir.display());
    crate::report::files::check_output(path, "the checkpoint")
        .map_err(|e| anyhow!("{}", format!("{e:#}").replacen("cannot write the checkpoint", "cannot save the checkpoint", 1)))
}

/// The runner's checkpoints: each state a run saves is written to one file with the run's
/// experiment and output paths ([`Checkpoint`]), atomically.
#[derive(Debug)]
pub struct FileCheckpoints {
    path: PathBuf,
    every: usize,
    experiment: Experiment,
    outputs: Outputs,
    inputs: Vec<InputRecord>,
}

impl FileCheckpoints {
    /// Checkpoints of `experiment` into `path` every `every` generations (0: only before the
    /// last and on a stop), keeping `outputs` (made absolute) for a resumed run to write and
    /// the record of the run's input files ([`record_inputs`]: each must be a regular file).
    /// The path is checked here, before the run ([`check_checkpoint_path`]).
    pub fn new(path: PathBuf, every: usize, experiment: Experiment, outputs: &Outputs) -> Result<Self> {
        check_checkpoint_path(&path)?;
        let inputs = record_inputs(&experiment)?;
        Ok(Self { path, every, experiment, outputs: outputs.absolute(), inputs })
    }

    /// Checkpoints of a fit whose data its caller holds in memory (the Python estimators'
    /// warm starts, `data: "python"`): the path is checked as by [`Self::new`], and no input
    /// file is recorded, since the caller hands the same data to the resumed fit itself.
    pub fn of_data_in_memory(path: PathBuf, every: usize, experiment: Experiment) -> Result<Self> {
        check_checkpoint_path(&path)?;
        Ok(Self { path, every, experiment, outputs: Outputs::default(), inputs: Vec::new() })
    }
}

impl Checkpoints for FileCheckpoints {
    fn path(&self) -> &Path {
        &self.path
    }

    fn every(&self) -> usize {
        self.every
    }

    fn save(&self, run: RunState) -> Result<()> {
        let c = Checkpoint {
            grove_checkpoint: CHECKPOINT_FORMAT,
            version: env!("CARGO_PKG_VERSION").into(),
            experiment: self.experiment.clone(),
            checkpoint_every: self.every,
            outputs: self.outputs.clone(),
            inputs: Some(self.inputs.clone()),
            run,
        };
        c.save(&self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A checkpoint of a tiny regression run, saved through [`FileCheckpoints`] and read back.
    fn saved() -> Checkpoint {
        let exp = Experiment::from_parts(
            "evolve",
            serde_json::json!({"functions": "add,mul", "data": "builtin:pagie1:25", "device": "cpu", "engine": {"pop_size": 8, "generations": 2}}),
            "test",
        )
        .unwrap();
        // A folder of each call's own: the tests run at once.
        static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("grove-checkpoint-test-{}-{call}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("run.ckpt");
        let keep = FileCheckpoints::new(path.clone(), 1, exp.clone(), &Outputs::default()).unwrap();
        let opts = crate::task::base::options::RunOptions { quiet: true, checkpoint: Some(std::sync::Arc::new(keep)), ..Default::default() };
        crate::task::runner::run_experiment(&exp, &opts, Some(1)).unwrap();
        let c = Checkpoint::load(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        c
    }

    #[test]
    fn run_state_fields_are_the_keys_it_writes() {
        // With every optional part filled in, the state writes exactly the keys the reader
        // accepts beside the header's: a field added to RunState without FIELDS would be refused.
        let mut run = saved().run;
        run.env_steps = Some((1, 0.5));
        run.operators = vec![(200, "f(x) = x".into())];
        let linear = crate::evolve::ars::LinearState { iteration: 0, weights: vec![0], seen: 0, sum: vec![0], sumsq: vec![0], history: Vec::new(), side: Vec::new() };
        run.linear = Some(linear.clone());
        run.residual = Some(linear);
        run.inputs = Some(crate::sim::stats::LearntState { seen: 0, sum: vec![0], sumsq: vec![0], mean: vec![0], std: vec![0], played_from: 0 });
        let v = serde_json::to_value(&run).unwrap();
        let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort_unstable();
        let mut fields = RunState::FIELDS.to_vec();
        fields.sort_unstable();
        assert_eq!(keys, fields);
    }

    #[test]
    fn an_unknown_key_is_refused_by_name_even_with_a_valid_checksum() {
        let c = saved();
        let mut v = serde_json::to_value(&c).unwrap();
        v.as_object_mut().unwrap().insert("stray".into(), serde_json::json!(1));
        let sum = checksum(&v).unwrap();
        v.as_object_mut().unwrap().insert("checksum".into(), sum.into());
        let err = Checkpoint::from_json(&serde_json::to_vec(&v).unwrap(), "x.ckpt").unwrap_err().to_string();
        assert_eq!(err, "x.ckpt: the checkpoint's `stray` is not a field of a checkpoint");
        // The same file without the stray key reads back whole.
        assert_eq!(Checkpoint::from_json(&c.to_json().unwrap(), "x.ckpt").unwrap(), c);
    }
}
