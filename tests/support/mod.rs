//! What the command-line tests share: one runner of the `grove` binary, the text of its
//! output, scratch files and directories, and reading reports. Each test file includes it
//! with `mod support;` and uses what it needs.

#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

/// What `GROVE_DEVICE` (the device of `--device auto`'s commands) a run of `grove` sees.
#[derive(Clone, Copy, Debug)]
pub enum Device {
    /// The test's own environment.
    Inherited,
    /// None: the binary chooses (CUDA if usable, else the CPU).
    Unset,
    /// `cpu`.
    Cpu,
}

/// The `grove` binary with `args`, to run in `dir` (the repository root when `None`) with
/// `GROVE_DEVICE` as `device` says (for a test that spawns it and signals it).
pub fn grove_command(args: &[&str], device: Device, dir: Option<&Path>) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_grove"));
    command.args(args).current_dir(dir.unwrap_or(Path::new(env!("CARGO_MANIFEST_DIR"))));
    match device {
        Device::Inherited => &mut command,
        Device::Unset => command.env_remove("GROVE_DEVICE"),
        Device::Cpu => command.env("GROVE_DEVICE", "cpu"),
    };
    command
}

/// Runs the `grove` binary with `args` in `dir` (the repository root when `None`), `stdin` on
/// its standard input and `GROVE_DEVICE` as `device` says.
pub fn grove_run(args: &[&str], stdin: &str, device: Device, dir: Option<&Path>) -> Output {
    let mut child = grove_command(args, device, dir).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("grove runs");
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

/// `grove ARGS` from the repository root, in the test's environment.
pub fn grove(args: &[&str]) -> Output {
    grove_run(args, "", Device::Inherited, None)
}

/// `grove ARGS` from the repository root with `GROVE_DEVICE=cpu`.
pub fn grove_cpu(args: &[&str]) -> Output {
    grove_run(args, "", Device::Cpu, None)
}

/// `grove predict`'s classes (CPU) of the rows of `csv` under the report `rep`, as indices into
/// `classes`.
pub fn predicted_classes(rep: &Path, csv: &Path, classes: &[String]) -> Vec<usize> {
    let p = grove_cpu(&["predict", "--model", s(rep), "--data", s(csv)]);
    assert_ok(&p);
    text(&p.stdout).lines().skip(1).map(|l| classes.iter().position(|c| c == l).unwrap_or_else(|| panic!("class {l}"))).collect()
}

/// Bytes of output as text.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// This test binary's scratch directory (`grove-TEST-PID` in the system's temporary
/// directory), created.
pub fn scratch() -> PathBuf {
    let d = std::env::temp_dir().join(format!("grove-{}-{}", env!("CARGO_CRATE_NAME"), std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A file `name` in the scratch directory holding `body`.
pub fn temp_file(name: &str, body: &str) -> PathBuf {
    let p = scratch().join(name);
    std::fs::write(&p, body).unwrap();
    p
}

/// A fresh, empty directory `name` in the scratch directory, for one test's files.
pub fn dir(name: &str) -> PathBuf {
    let d = scratch().join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A path as a command-line argument.
pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A JSON file (a report, a checkpoint).
pub fn read_json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))).unwrap()
}

/// A checkpoint edited by a test, as file bytes with its checksum recomputed as grove
/// computes it (FNV-1a of the compact JSON without `checksum`), so that what the edit breaks
/// is found by the structural checks rather than the checksum.
pub fn resealed(mut checkpoint: Value) -> Vec<u8> {
    let content = checkpoint.as_object_mut().unwrap();
    content.remove("checksum");
    let sum = grove::task::runner::checkpoint::fnv1a64(&serde_json::to_vec(&Value::Object(content.clone())).unwrap());
    content.insert("checksum".into(), format!("fnv1a64:{sum:016x}").into());
    serde_json::to_vec(&checkpoint).unwrap()
}

/// Writes [`resealed`]`(checkpoint)` to `p`.
pub fn write_resealed(p: &Path, checkpoint: Value) {
    std::fs::write(p, resealed(checkpoint)).unwrap();
}

/// A report without what varies between identical runs (timings), or between a run and its
/// resumption (the fitness cache's counts: a resumed process starts with an empty cache).
pub fn without_timings(mut r: Value) -> Value {
    r.as_object_mut().unwrap().remove("timing");
    r.as_object_mut().unwrap().remove("fitness_cache");
    for g in r["generations"].as_array_mut().unwrap() {
        g.as_object_mut().unwrap().remove("seconds");
    }
    r
}

/// Asserts that a run succeeded, showing its output when not.
pub fn assert_ok(out: &Output) {
    assert!(out.status.success(), "status {:?}\nstdout: {}\nstderr: {}", out.status, text(&out.stdout), text(&out.stderr));
}

/// Asserts that `out` failed with exit status 1 and one `error:` line holding every needle
/// (no panic).
pub fn assert_one_line_error(out: &Output, needles: &[&str]) {
    let e = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{e}");
    assert!(e.starts_with("error: "), "{e}");
    assert_eq!(e.trim().lines().count(), 1, "one line expected: {e}");
    assert!(!e.contains("panicked"), "{e}");
    for n in needles {
        assert!(e.contains(n), "`{n}` missing from: {e}");
    }
}

/// Runs `grove ARGS` (`GROVE_DEVICE` as `device` says), sends it Ctrl-C (SIGINT) as soon as
/// `checkpoint` exists, and asserts that it stopped as Ctrl-C stops a run: exit status 130 and
/// a note that names the checkpoint and `grove run --resume`. Its output.
pub fn interrupt_once_saved(args: &[&str], device: Device, checkpoint: &Path) -> Output {
    let child = grove_command(args, device, None).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let t0 = std::time::Instant::now();
    while !checkpoint.exists() {
        assert!(t0.elapsed().as_secs() < 60, "no checkpoint appeared");
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let kill = Command::new("kill").args(["-INT", &child.id().to_string()]).status().expect("kill runs");
    assert!(kill.success());
    let out = child.wait_with_output().unwrap();
    let e = text(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "Ctrl-C exits with 130: {e}");
    assert!(e.contains("interrupted before generation") && e.contains(s(checkpoint)) && e.contains("grove run --resume"), "{e}");
    out
}

/// The settings `grove control ARGS` runs with on a GPU (`on_gpu`) or the CPU.
pub fn control_settings(args: &[&str], on_gpu: bool) -> grove::task::control::ControlSettings {
    let cli = <grove::cli::Cli as clap::Parser>::try_parse_from([&["grove", "control"], args].concat()).unwrap();
    let grove::cli::Command::Control(a) = cli.command else { panic!("not control") };
    a.settings(on_gpu).unwrap()
}

/// The settings of a control experiment file's text (`Control(...)`).
pub fn control_experiment(text: &str) -> grove::task::control::ControlSettings {
    use grove::task::runner::experiment::{Experiment, parse_ron};
    let (c, v) = parse_ron(text, "t.ron").unwrap();
    match Experiment::from_parts(&c, v, "t.ron").unwrap_or_else(|e| panic!("{e:#}")) {
        Experiment::Control(s) => s,
        other => panic!("not a control experiment: {other:?}"),
    }
}
