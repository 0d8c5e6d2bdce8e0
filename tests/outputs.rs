//! Output files that cannot lose work or damage anything (issue 59): every output path is
//! checked before the first generation; no output is an input of the run or another output;
//! devices, FIFOs and symbolic links are written through, not replaced; a write that fails at
//! the end still prints the summary, exits 1 and keeps the result in a file it names.

mod support;
use std::path::Path;

use support::{assert_ok, assert_one_line_error, dir, grove_cpu, s, text};

/// A small regression run's arguments on `data`, with `extra` after them.
fn evolve<'a>(data: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let gens = if extra.contains(&"--gens") { &[][..] } else { &["--gens", "2"][..] };
    let mut v = vec!["evolve", "--data", data, "--functions", "add,mul", "--pop", "12", "-q"];
    v.extend_from_slice(gens);
    v.extend_from_slice(extra);
    v
}

/// A small data file in `d`.
fn data(d: &Path) -> std::path::PathBuf {
    let p = d.join("d.csv");
    std::fs::write(&p, "x,y\n1,2\n2,4\n3,6\n4,8\n5,10\n6,12\n").unwrap();
    p
}

// `--report /proc/x.json`, a directory, or an unwritable path ran the whole search, then
// failed with nothing printed.
#[test]
fn unwritable_outputs_are_refused_before_the_first_generation() {
    let d = dir("unwritable");
    let csv = data(&d);
    let sub = d.join("sub");
    std::fs::create_dir(&sub).unwrap();
    let file = d.join("file");
    std::fs::write(&file, "x").unwrap();
    let cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
        (vec!["--report", "/proc/x.json"], vec!["cannot write the report /proc/x.json", "cannot create a file in /proc"]),
        (vec!["--report", s(&sub)], vec!["the report", "is a directory"]),
        (vec!["--hall-of-fame", s(&sub)], vec!["the hall of fame", "is a directory"]),
        (vec!["--plots", s(&file)], vec!["the plots go into a directory", "is a file"]),
        (vec!["--plots", "/proc/grove-plots"], vec!["cannot write the plots into /proc/grove-plots"]),
        (vec!["--gens", "1000000", "--hall-of-fame", "/proc/fame.csv"], vec!["cannot write the hall of fame /proc/fame.csv"]),
    ];
    for (extra, needles) in cases {
        // The long run would take minutes: the refusal comes first.
        let out = grove_cpu(&evolve(s(&csv), &extra));
        assert_one_line_error(&out, &needles);
        assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    }
}

// `--report` on the data or the grammar, `--hall-of-fame` or `--checkpoint` on the data, report
// and hall of fame on one path, report and checkpoint on one path, and `export --out` on its own
// `--model` all overwrote a file with exit 0.
#[test]
fn no_output_is_an_input_or_another_output() {
    let d = dir("distinct");
    let csv = data(&d);
    let grammar = d.join("g.bnf");
    std::fs::copy(format!("{}/grammars/regression.bnf", env!("CARGO_MANIFEST_DIR")), &grammar).unwrap();
    std::fs::hard_link(&csv, d.join("hard.csv")).unwrap();
    std::os::unix::fs::symlink(&csv, d.join("soft.csv")).unwrap();
    let (r, r2, ck) = (d.join("r.json"), d.join("./sub/../r.json"), d.join("run.ckpt"));
    std::fs::create_dir(d.join("sub")).unwrap();
    let (hard, soft, fit, pl) = (d.join("hard.csv"), d.join("soft.csv"), d.join("pl/fitness.svg"), d.join("pl"));
    let csv_s = s(&csv);
    let cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
        (evolve(csv_s, &["--report", csv_s]), vec!["the report", "is also the --data file"]),
        (evolve(csv_s, &["--report", s(&hard)]), vec!["hard.csv is also the --data file"]),
        (evolve(csv_s, &["--hall-of-fame", s(&soft)]), vec!["the hall of fame", "is also the --data file"]),
        (evolve(csv_s, &["--checkpoint", csv_s]), vec!["the checkpoint", "is also the --data file"]),
        (evolve(csv_s, &["--report", s(&r), "--hall-of-fame", s(&r2)]), vec!["the report and the hall of fame are one file"]),
        (evolve(csv_s, &["--report", s(&r), "--checkpoint", s(&r2)]), vec!["the report and the checkpoint are one file"]),
        (evolve(csv_s, &["--report", s(&fit), "--plots", s(&pl)]), vec!["the report and the plot fitness.svg are one file"]),
        (evolve(csv_s, &["--report", s(&r), "--plots", s(&r)]), vec!["the report and the plot directory are one file"]),
    ];
    for (args, needles) in &cases {
        assert_one_line_error(&grove_cpu(args), needles);
    }
    let g = ["evolve", "--data", csv_s, "--grammar", s(&grammar), "--pop", "12", "--gens", "1", "-q", "--report", s(&grammar)];
    assert_one_line_error(&grove_cpu(&g), &["the report", "is also the --grammar file"]);
    // An experiment file and a report repeated with --from are inputs too.
    let ron = d.join("e.ron");
    std::fs::write(&ron, format!("Evolve(functions: \"add\", data: \"{csv_s}\", engine: (pop_size: 12, generations: 1))")).unwrap();
    assert_one_line_error(&grove_cpu(&["run", s(&ron), "-q", "--hall-of-fame", s(&ron)]), &["is also the experiment file"]);
    assert_ok(&grove_cpu(&["run", s(&ron), "-q", "--report", s(&r)]));
    assert_one_line_error(&grove_cpu(&["run", "--from", s(&r), "-q", "--report", s(&r)]), &["is also the report --from repeats"]);
    // Export and plot do not write over what they read.
    assert_one_line_error(&grove_cpu(&["export", "--model", s(&r), "--lang", "c", "--out", s(&r)]), &["--out", "is also the --model"]);
    let (pl2, pareto) = (d.join("pl2"), d.join("pl2/pareto.png"));
    std::fs::create_dir(&pl2).unwrap();
    std::fs::copy(&r, &pareto).unwrap();
    assert_one_line_error(&grove_cpu(&["plot", s(&pareto), "--out", s(&pl2)]), &["is also the report it draws"]);
    assert_eq!(std::fs::read(&r).unwrap(), std::fs::read(&pareto).unwrap());
    // Every input survived.
    assert_eq!(std::fs::read_to_string(&csv).unwrap(), "x,y\n1,2\n2,4\n3,6\n4,8\n5,10\n6,12\n");
    assert!(std::fs::read_to_string(&grammar).unwrap().contains("::="));
    assert!(!ck.exists());
}

// A symlinked report was replaced by a file and its target left as it was; `--report
// /dev/null` failed after the run; as root `--report /dev/full` turned the device into a file.
#[test]
fn links_devices_and_fifos_are_written_through() {
    let d = dir("through");
    let csv = data(&d);
    let target = d.join("target.json");
    let link = d.join("link.json");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    assert_ok(&grove_cpu(&evolve(s(&csv), &["--report", s(&link)])));
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink(), "the link stays a link");
    assert!(support::read_json(&target)["best"].is_object() || support::read_json(&target).get("best").is_some());
    // /dev/null takes the report and the hall of fame.
    let out = grove_cpu(&evolve(s(&csv), &["--report", "/dev/null", "--hall-of-fame", "/dev/null"]));
    assert_ok(&out);
    assert!(text(&out.stdout).contains("report        /dev/null"), "{}", text(&out.stdout));
    // A FIFO of the test's own: the report comes out of it.
    let fifo = d.join("pipe");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(&fifo).unwrap())
    };
    assert_ok(&grove_cpu(&evolve(s(&csv), &["--report", s(&fifo)])));
    let got: serde_json::Value = serde_json::from_slice(&reader.join().unwrap()).unwrap();
    assert_eq!(got["command"], "evolve");
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
    // A checkpoint is read back, so a device or FIFO is refused for one.
    assert_one_line_error(&grove_cpu(&evolve(s(&csv), &["--checkpoint", "/dev/null"])), &["the checkpoint /dev/null is not a regular file"]);
    assert_one_line_error(&grove_cpu(&evolve(s(&csv), &["--checkpoint", s(&fifo)])), &["not a regular file"]);
}

/// Whether this process runs as root (the owner of a file it makes is uid 0).
fn is_root(d: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let p = d.join("owner");
    std::fs::write(&p, "").unwrap();
    std::fs::metadata(&p).unwrap().uid() == 0
}

// As root, `--report /dev/full` and `--checkpoint /dev/full` turned the device node into a
// regular file. A device node of the test's own (mknod, as root only) is written through.
#[test]
fn a_device_node_of_our_own_is_never_replaced() {
    let d = dir("device");
    let csv = data(&d);
    if !is_root(&d) {
        eprintln!("not root: mknod cannot make a device node; /dev/full is checked without one");
    } else {
        // 1, 7 is /dev/full: every write fails with ENOSPC; 1, 3 is /dev/null.
        let (full, null) = (d.join("full"), d.join("null"));
        for (p, minor) in [(&full, "7"), (&null, "3")] {
            assert!(std::process::Command::new("mknod").args([s(p), "c", "1", minor]).status().unwrap().success());
        }
        assert_ok(&grove_cpu(&evolve(s(&csv), &["--report", s(&null)])));
        let out = grove_cpu(&evolve(s(&csv), &["--report", s(&full)]));
        assert_eq!(out.status.code(), Some(1));
        use std::os::unix::fs::FileTypeExt;
        for p in [&full, &null] {
            assert!(std::fs::metadata(p).unwrap().file_type().is_char_device(), "{} is still a device", p.display());
        }
        assert_one_line_error(&grove_cpu(&evolve(s(&csv), &["--checkpoint", s(&full)])), &["not a regular file"]);
    }
}

// When the report could not be written at the end, grove printed nothing and the result was
// lost. Now the summary prints, the exit status is 1, and the report is kept in a file named.
#[test]
fn a_report_that_cannot_be_written_is_kept_and_the_summary_printed() {
    let d = dir("kept");
    let csv = data(&d);
    if !Path::new("/dev/full").exists() {
        return;
    }
    let out = grove_cpu(&evolve(s(&csv), &["--report", "/dev/full", "--hall-of-fame", "/dev/full"]));
    let (o, e) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{e}");
    assert!(o.starts_with("best program"), "the summary prints: {o}");
    let lines: Vec<&str> = e.lines().collect();
    assert_eq!(lines.len(), 2, "one line per file: {e}");
    for (line, kept) in lines.iter().zip(["report.json", "hall-of-fame.csv"]) {
        assert!(line.starts_with("error: cannot write the ") && line.contains("/dev/full: No space left on device"), "{line}");
        let path = line.rsplit("kept it in ").next().unwrap();
        assert!(path.ends_with(kept), "{line}");
        let body = std::fs::read_to_string(path).unwrap();
        if kept.ends_with(".json") {
            let v: serde_json::Value = serde_json::from_str(&body).unwrap();
            assert_eq!(v["command"], "evolve");
        } else {
            assert!(body.starts_with("complexity,loss,"), "{body}");
        }
        std::fs::remove_file(path).unwrap();
    }
}
