//! Resumes that know their data (issue 59): a checkpoint records each input file's absolute path
//! and content hash; `grove run --resume` refuses a changed or missing one in one line naming
//! the file and the hashes, `--accept-changed` lets a changed one through, a run resumed from
//! another directory reads the files it started on, and standard input or a descriptor is
//! refused for a checkpointed run. A version 2 checkpoint, which has no record, still resumes.

mod support;
use std::path::Path;

use support::{assert_ok, assert_one_line_error, dir, grove_cpu, grove_run, read_json, s, text, write_resealed};

/// 60 rows of y = 2x + 1.
fn rows(n: usize) -> String {
    let mut t = String::from("x,y\n");
    for i in 0..n {
        let x = i as f64 / n as f64;
        t += &format!("{x},{}\n", 2.0 * x + 1.0);
    }
    t
}

/// A checkpointed regression run on `data` (run in `d`), leaving `c.ckpt` and `r.json` there.
fn checkpointed(d: &Path, data: &str, extra: &[&str]) {
    let mut args = vec!["evolve", "--data", data, "--functions", "add,mul", "--pop", "12", "--gens", "3", "-q", "--checkpoint", "c.ckpt", "--report", "r.json"];
    args.extend_from_slice(extra);
    assert_ok(&grove_run(&args, "", support::Device::Cpu, Some(d)));
}

// A data file cut from 60 rows to 2 after the save resumed silently.
#[test]
fn a_changed_or_missing_input_is_refused_naming_the_file_and_the_hashes() {
    let d = dir("changed");
    std::fs::write(d.join("d.csv"), rows(60)).unwrap();
    checkpointed(&d, "d.csv", &[]);
    let ck = d.join("c.ckpt");
    let saved = read_json(&ck);
    assert_eq!(saved["grove_checkpoint"], 3);
    let rec = &saved["input_files"][0];
    let abs = d.join("d.csv");
    assert_eq!((rec["role"].as_str(), rec["path"].as_str()), (Some("--data"), Some(s(&abs))));
    assert!(rec["hash"].as_str().unwrap().starts_with("fnv1a64:"));
    let before = rec["hash"].as_str().unwrap().to_string();
    // Unchanged, it resumes.
    assert_ok(&grove_cpu(&["run", "--resume", s(&ck), "-q"]));
    std::fs::write(&abs, rows(2)).unwrap();
    let out = grove_cpu(&["run", "--resume", s(&ck), "-q"]);
    assert_one_line_error(&out, &[s(&abs), "changed since the run started", &before, "--accept-changed"]);
    // Named by path or by its flag, the change is accepted, with a note; the checkpoint it saves
    // next records the new content.
    let out = grove_cpu(&["run", "--resume", s(&ck), "-q", "--gens", "5", "--accept-changed", s(&abs)]);
    assert_ok(&out);
    assert!(text(&out.stderr).starts_with("note: --data ") && text(&out.stderr).contains("--accept-changed"), "{}", text(&out.stderr));
    assert_ne!(read_json(&ck)["input_files"][0]["hash"].as_str().unwrap(), before);
    assert_ok(&grove_cpu(&["run", "--resume", s(&ck), "-q"]));
    std::fs::write(&abs, rows(5)).unwrap();
    assert_one_line_error(&grove_cpu(&["run", "--resume", s(&ck), "-q"]), &["changed"]);
    assert_ok(&grove_cpu(&["run", "--resume", s(&ck), "-q", "--accept-changed", "--data"]));
    // A file that is no input of the run, and a missing input, are refused.
    let out = grove_cpu(&["run", "--resume", s(&ck), "-q", "--accept-changed", "/etc/hostname"]);
    assert_one_line_error(&out, &["--accept-changed /etc/hostname: not an input file", s(&abs)]);
    std::fs::remove_file(&abs).unwrap();
    assert_one_line_error(&grove_cpu(&["run", "--resume", s(&ck), "-q"]), &[s(&abs), "is missing"]);
}

// Resumed from another directory, the run trained on that directory's file of the same
// relative name, and overwrote the first run's report.
#[test]
fn a_run_resumed_elsewhere_reads_the_files_it_started_on() {
    let d = dir("elsewhere");
    std::fs::write(d.join("d.csv"), rows(60)).unwrap();
    let grammar = std::fs::read_to_string(format!("{}/grammars/regression.bnf", env!("CARGO_MANIFEST_DIR"))).unwrap();
    std::fs::write(d.join("g.bnf"), &grammar).unwrap();
    let args = ["evolve", "--data", "d.csv", "--grammar", "g.bnf", "--pop", "12", "--gens", "3", "-q", "--checkpoint", "c.ckpt", "--report", "r.json"];
    assert_ok(&grove_run(&args, "", support::Device::Cpu, Some(&d)));
    let other = d.join("other");
    std::fs::create_dir(&other).unwrap();
    // Files of the same names there that would not even read.
    std::fs::write(other.join("d.csv"), "not,a\ntable").unwrap();
    std::fs::write(other.join("g.bnf"), "nonsense").unwrap();
    let out = grove_run(&["run", "--resume", "../c.ckpt", "-q"], "", support::Device::Cpu, Some(&other));
    assert_ok(&out);
    let report = read_json(&d.join("r.json"));
    assert_eq!(report["settings"]["data"].as_str(), Some(s(&d.join("d.csv"))));
    assert!(!other.join("r.json").exists());
    // The grammar is checked as the data is.
    std::fs::write(d.join("g.bnf"), grammar + "\n# one more comment\n").unwrap();
    assert_one_line_error(&grove_cpu(&["run", "--resume", s(&d.join("c.ckpt")), "-q"]), &["its --grammar file", "g.bnf", "changed"]);
}

// `/dev/fd/63` or `/dev/stdin` were stored as paths.
#[test]
fn standard_input_and_descriptors_are_refused_for_a_checkpointed_run() {
    let d = dir("stdin");
    let ck = d.join("c.ckpt");
    let csv = d.join("d.csv");
    std::fs::write(&csv, rows(30)).unwrap();
    let with_stdin = |args: &[&str]| {
        let stdin = std::fs::File::open(&csv).unwrap();
        support::grove_command(args, support::Device::Cpu, None).stdin(stdin).output().unwrap()
    };
    for data in ["/dev/stdin", "/proc/self/fd/0", "/dev/fd/0", "-"] {
        let out = with_stdin(&["evolve", "--data", data, "--functions", "add", "--pop", "12", "--gens", "2", "-q", "--checkpoint", s(&ck)]);
        assert_one_line_error(&out, &[data, "standard input or an open file descriptor", "save it to a file first"]);
    }
    // A FIFO of our own, too: it cannot be read again.
    let fifo = d.join("pipe");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let out = grove_cpu(&["evolve", "--data", s(&fifo), "--functions", "add", "--pop", "12", "--gens", "2", "-q", "--checkpoint", s(&ck)]);
    assert_one_line_error(&out, &["is not a regular file"]);
    assert!(!ck.exists());
    // Without a checkpoint, standard input is read as before.
    assert_ok(&with_stdin(&["evolve", "--data", "/dev/stdin", "--functions", "add", "--pop", "12", "--gens", "2", "-q"]));
}

// A checkpoint of the previous format, without the record, still resumes, with a note.
#[test]
fn a_version_2_checkpoint_resumes_with_a_note() {
    let d = dir("v2");
    std::fs::write(d.join("d.csv"), rows(60)).unwrap();
    checkpointed(&d, "d.csv", &[]);
    let ck = d.join("c.ckpt");
    let mut v = read_json(&ck);
    v["grove_checkpoint"] = 2.into();
    v.as_object_mut().unwrap().remove("input_files");
    write_resealed(&ck, v);
    let out = grove_run(&["run", "--resume", "c.ckpt", "-q", "--gens", "5"], "", support::Device::Cpu, Some(&d));
    assert_ok(&out);
    let e = text(&out.stderr);
    assert!(e.starts_with("note: c.ckpt was written by an older grove") && e.contains("not checked"), "{e}");
    // It saves in the new format, with the record.
    assert_eq!(read_json(&ck)["grove_checkpoint"], 3);
    assert!(read_json(&ck)["input_files"].is_array());
}
