//! Reading input files within bounds, so that no file can drown a reader: every reader of a
//! text file (grammars, experiment files, reports, checkpoints, environment files, action
//! files) reads through [`read_text`] or [`read_bytes`], which stop at a size limit of the
//! reader's own and at the first NUL byte (binary data: `/dev/zero`, `/dev/urandom`, an image),
//! reading block by block so neither an endless device nor a huge file is read whole first.
//! Each stop is one error line naming the file. [`clip`] cuts what a message echoes.

use std::io::Read;
use std::path::Path;

use anyhow::{Context, Result, bail};

/// The largest grammar file, bytes (a production of 10⁵ alternatives is about 1 MB).
pub const GRAMMAR_BYTES: u64 = 16 << 20;
/// The largest experiment file, bytes.
pub const EXPERIMENT_BYTES: u64 = 4 << 20;
/// The largest environment file, bytes.
pub const ENV_BYTES: u64 = 4 << 20;
/// The largest run report, bytes (a million generations of statistics take about 300 MB).
pub const REPORT_BYTES: u64 = 512 << 20;
/// The largest action file, bytes (10⁶ control steps of 8 actions as text take about 200 MB).
pub const ACTIONS_BYTES: u64 = 512 << 20;
/// Bytes read at a time.
const BLOCK: usize = 1 << 16;

/// Host memory a file read whole takes while it is parsed, in multiples of its size: the text
/// and what is parsed from it (a JSON tree, a grammar's tables, rows of actions). Measured: a
/// 61 MB report of three million numbers peaked at 4.4 times its size in `grove export`.
pub const READ_FACTOR: u64 = 6;

/// The process's `--max-memory` (`GROVE_MAX_MEMORY`), bytes; 0: none.
static MAX_MEMORY: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Sets the memory limit every whole-file read honours ([`read_bytes`]): the command's
/// `--max-memory`, set once before it runs.
pub fn set_max_memory(limit: Option<u64>) {
    MAX_MEMORY.store(limit.unwrap_or(0), std::sync::atomic::Ordering::Relaxed);
}

/// The limit [`set_max_memory`] set, if any.
pub fn max_memory() -> Option<u64> {
    Some(MAX_MEMORY.load(std::sync::atomic::Ordering::Relaxed)).filter(|&m| m > 0)
}

/// The bytes of the file at `path` (`what` names it in errors: `the report`), refusing a file
/// larger than `limit` bytes (by its size where the file system knows it, else as it is read)
/// and a NUL byte, which no text file holds. Errors are one line: `cannot read the report
/// r.json: …`, `the report r.json is larger than …`, `the report /dev/zero: a NUL byte at byte
/// 0: this is binary data, not text`.
pub fn read_bytes(path: &Path, what: &str, limit: u64) -> Result<Vec<u8>> {
    let show = path.display();
    let mut f = std::fs::File::open(path).with_context(|| format!("cannot read {what} {show}"))?;
    let known = f.metadata().ok().filter(|m| m.is_file()).map(|m| m.len());
    if let Some(size) = known.filter(|&s| s > limit) {
        bail!("{what} {show} has {}, more than the {} grove reads for one", show_size(size), show_size(limit));
    }
    // Under --max-memory a file is refused before it is read where its reading would not fit
    // (a file whose size is unknown is cut at the limit as it is read).
    let max = max_memory();
    if let (Some(size), Some(m)) = (known, max) {
        let need = size.saturating_mul(READ_FACTOR);
        if need > m {
            bail!(
                "reading {what} {show} ({}) needs about {} of memory, more than the {} --max-memory allows",
                show_size(size),
                show_size(need),
                show_size(m)
            );
        }
    }
    let limit = max.map_or(limit, |m| limit.min(m / READ_FACTOR));
    let mut out: Vec<u8> = Vec::with_capacity(known.unwrap_or(0) as usize);
    loop {
        let start = out.len();
        out.resize(start + BLOCK, 0);
        let k = loop {
            match f.read(&mut out[start..]) {
                Ok(k) => break k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e).with_context(|| format!("cannot read {what} {show}")),
            }
        };
        out.truncate(start + k);
        if k == 0 {
            return Ok(out);
        }
        if let Some(p) = memchr::memchr(0, &out[start..]) {
            bail!("{what} {show}: a NUL byte at byte {}: this is binary data, not text", start + p);
        }
        if out.len() as u64 > limit {
            bail!("{what} {show} is longer than the {} grove reads for one (is it the file meant?)", show_size(limit));
        }
    }
}

/// [`read_bytes`] as UTF-8 text; text that is not UTF-8 is an error naming the byte.
pub fn read_text(path: &Path, what: &str, limit: u64) -> Result<String> {
    let bytes = read_bytes(path, what, limit)?;
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        anyhow::anyhow!("{what} {}: not UTF-8 text (byte {at})", path.display())
    })
}

/// `text` cut to `max` characters for a message, saying how many were left out:
/// `aaaa… (99900 more characters)`.
pub fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_string(),
        Some((cut, _)) => format!("{}… ({} more characters)", &text[..cut], text[cut..].chars().count()),
    }
}

/// How many characters a message echoes of a value it was given.
pub const ECHO: usize = 100;

/// A size for a person: `137.4 GiB`, `512.0 MiB`, `12 bytes`.
pub fn show_size(bytes: u64) -> String {
    let units = ["bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let (mut v, mut u) = (bytes as f64, 0);
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 { format!("{bytes} bytes") } else { format!("{v:.1} {}", units[u]) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endless_and_binary_inputs_stop_at_once() {
        for dev in ["/dev/zero", "/dev/urandom"] {
            let e = read_text(Path::new(dev), "the report", REPORT_BYTES).unwrap_err().to_string();
            assert!(e.starts_with(&format!("the report {dev}: a NUL byte at byte ")) && e.ends_with("binary data, not text"), "{e}");
        }
        let e = read_text(Path::new("/no/such"), "grammar", 10).unwrap_err();
        assert!(format!("{e:#}").starts_with("cannot read grammar /no/such: "), "{e:#}");
    }

    #[test]
    fn sizes_are_bounded_known_or_not() {
        let d = std::env::temp_dir().join(format!("grove-input-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let p = d.join("big.txt");
        std::fs::write(&p, "a".repeat(5000)).unwrap();
        assert_eq!(read_text(&p, "x", 5000).unwrap().len(), 5000);
        let e = read_text(&p, "the experiment file", 4999).unwrap_err().to_string();
        assert!(e.contains("has 4.9 KiB, more than the 4.9 KiB grove reads"), "{e}");
        // A FIFO's size is not known: the limit stops it as it is read.
        let fifo = d.join("fifo");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let writer = {
            let fifo = fifo.clone();
            std::thread::spawn(move || {
                use std::io::Write;
                let mut f = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
                for _ in 0..100 {
                    if f.write_all(&[b'a'; 1 << 16]).is_err() {
                        break;
                    }
                }
            })
        };
        let e = read_text(&fifo, "grammar", 1 << 18).unwrap_err().to_string();
        assert!(e.contains("is longer than the 256.0 KiB"), "{e}");
        drop(writer);
        std::fs::write(&p, b"ok \xff").unwrap();
        assert_eq!(read_text(&p, "grammar", 10).unwrap_err().to_string(), format!("grammar {}: not UTF-8 text (byte 3)", p.display()));
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn clip_says_what_it_left_out() {
        assert_eq!(clip("abc", 5), "abc");
        assert_eq!(clip(&"x".repeat(150), 100), format!("{}… (50 more characters)", "x".repeat(100)));
    }
}
