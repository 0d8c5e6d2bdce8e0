//! The files grove writes, made safe: every output path is checked before a run starts
//! ([`check_output`], [`check_output_dir`]), written so that a crash leaves the old file or the
//! new one ([`write_output`]), and compared with the run's inputs and other outputs by what they
//! are on disk ([`FileKey`]), not by how they are spelled.
//!
//! What stands at an output path decides how it is written:
//! - nothing, or a regular file: a temporary file beside it, then renamed over it (atomic);
//! - a symbolic link: the same at the file it points to (followed to the end of the chain), so
//!   the link stays a link and its target gets the content, as a shell's `>` would do;
//! - a character or block device or a FIFO (`/dev/null`, `/dev/stdout`, a pipe of `>(…)`):
//!   written through, opened for writing without creating or replacing anything. Replacing one
//!   by a rename would turn the device node into a regular file (as root) or fail; writing
//!   through is what a user who names one means, and cannot damage it;
//! - a directory or a socket: refused.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail, ensure};

/// Most symbolic links followed from one path (Linux's own limit).
const MAX_LINKS: usize = 40;

/// What stands at a path, after following symbolic links.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Standing {
    /// Nothing (a new file will be made).
    Nothing,
    /// A regular file.
    File,
    /// A directory.
    Directory,
    /// A character or block device, or a FIFO: written through.
    Stream,
    /// A socket or anything else grove does not write.
    Other,
}

/// What stands at `path`, following symbolic links.
pub fn standing(path: &Path) -> Standing {
    use std::os::unix::fs::FileTypeExt;
    match std::fs::metadata(path) {
        Err(_) => Standing::Nothing,
        Ok(m) => {
            let t = m.file_type();
            if t.is_file() {
                Standing::File
            } else if t.is_dir() {
                Standing::Directory
            } else if t.is_char_device() || t.is_block_device() || t.is_fifo() {
                Standing::Stream
            } else {
                Standing::Other
            }
        }
    }
}

/// The path a symbolic link at `path` leads to, followed to the end of its chain (a link's
/// relative target is read from the link's directory); `path` itself where it is not a link.
/// A chain longer than [`MAX_LINKS`] is an error.
pub fn resolve_links(path: &Path) -> Result<PathBuf> {
    let mut at = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                let to = std::fs::read_link(&at).with_context(|| format!("cannot read the link {}", at.display()))?;
                at = match at.parent() {
                    Some(dir) if to.is_relative() => dir.join(to),
                    _ => to,
                };
            }
            _ => return Ok(at),
        }
    }
    bail!("{}: more than {MAX_LINKS} symbolic links in a chain", path.display())
}

/// The directory a file at `path` goes in (`.` for a bare name).
fn directory_of(path: &Path) -> &Path {
    path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

/// The temporary file an atomic write of `path` goes through: a hidden file beside it, named
/// after it and this process.
pub fn temporary_path(path: &Path) -> PathBuf {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("grove");
    directory_of(path).join(format!(".{name}.tmp{}", std::process::id()))
}

/// Checks, before anything is computed, that `what` (`the report`) can be written at `path`
/// as [`write_output`] will write it: not a directory or a socket; a device opens for writing
/// (a FIFO is taken as it is); otherwise (followed through symbolic links) its directory exists or can be made, a
/// file can be created there (a temporary file, made and removed), and an existing file is
/// writable. One error line naming `what`, the path and the problem.
pub fn check_output(path: &Path, what: &str) -> Result<()> {
    let show = path.display();
    match standing(path) {
        Standing::Directory => bail!("{what} {show} is a directory: give a file path, e.g. {}", path.join("out").display()),
        Standing::Other => bail!("cannot write {what} {show}: it is neither a file, a device nor a FIFO"),
        Standing::Stream => return open_stream(path, true).map(drop).with_context(|| format!("cannot write {what} {show}")),
        Standing::File | Standing::Nothing => {}
    }
    let target = resolve_links(path)?;
    let dir = directory_of(&target);
    std::fs::create_dir_all(dir).with_context(|| format!("cannot write {what} {show}: cannot create the directory {}", dir.display()))?;
    ensure!(dir.is_dir(), "cannot write {what} {show}: {} is not a directory", dir.display());
    probe_directory(dir).with_context(|| format!("cannot write {what} {show}: cannot create a file in {}", dir.display()))?;
    if standing(&target) == Standing::File {
        std::fs::OpenOptions::new().write(true).open(&target).with_context(|| format!("cannot write {what} {show}"))?;
    }
    Ok(())
}

/// Checks that `what` (`the plots`) can be written into the directory `dir`: it is a
/// directory or can be made one, and a file can be created in it.
pub fn check_output_dir(dir: &Path, what: &str) -> Result<()> {
    let show = dir.display();
    ensure!(
        matches!(standing(dir), Standing::Directory | Standing::Nothing),
        "{what} go into a directory, and {show} is a file: give a directory path"
    );
    std::fs::create_dir_all(dir).with_context(|| format!("cannot write {what} into {show}: cannot create the directory"))?;
    probe_directory(dir).with_context(|| format!("cannot write {what} into {show}: cannot create a file there"))
}

/// Creates and removes a temporary file in `dir`.
fn probe_directory(dir: &Path) -> Result<()> {
    let probe = temporary_path(&dir.join("probe"));
    std::fs::OpenOptions::new().write(true).create(true).truncate(true).open(&probe)?;
    std::fs::remove_file(&probe).with_context(|| format!("cannot remove {}", probe.display()))
}

/// Opens a device or FIFO for writing, creating nothing. With `probe` (the check before a
/// run), a FIFO is not opened: opening it would hand a reader waiting on it an end of file,
/// and without one it waits; its write at the end says whether it can be written.
fn open_stream(path: &Path, probe: bool) -> Result<Option<std::fs::File>> {
    use std::os::unix::fs::FileTypeExt;
    if probe && std::fs::metadata(path).is_ok_and(|m| m.file_type().is_fifo()) {
        return Ok(None);
    }
    Ok(Some(std::fs::OpenOptions::new().write(true).open(path)?))
}

/// Writes `bytes` to `path` as [`check_output`] checked it: through a device or FIFO; else
/// atomically (a temporary file in the same directory, flushed to disk, then renamed over the
/// file) at the end of any chain of symbolic links, so a crash leaves the old file or the new
/// one, never half, and a link stays a link. A directory is refused; on any failure the
/// temporary file is removed.
pub fn write_output(path: &Path, bytes: &[u8]) -> Result<()> {
    match standing(path) {
        Standing::Directory => bail!("{} is a directory", path.display()),
        Standing::Other => bail!("{} is neither a file, a device nor a FIFO", path.display()),
        Standing::Stream => {
            let mut f = open_stream(path, false)?.ok_or_else(|| anyhow!("cannot open {}", path.display()))?;
            return f.write_all(bytes).and_then(|_| f.flush()).with_context(|| format!("cannot write {}", path.display()));
        }
        Standing::File | Standing::Nothing => {}
    }
    let target = resolve_links(path)?;
    let dir = directory_of(&target);
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let tmp = temporary_path(&target);
    let mut f = std::fs::File::create(&tmp).with_context(|| format!("cannot write {}", tmp.display()))?;
    let written = f
        .write_all(bytes)
        .and_then(|_| f.sync_all())
        .with_context(|| format!("cannot write {}", tmp.display()))
        .and_then(|_| std::fs::rename(&tmp, &target).with_context(|| format!("cannot move {} into place", target.display())));
    if written.is_err() {
        // The write's error is the one to report; the removal is cleanup only.
        drop(f);
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// What a path is on disk, for telling whether two paths name one file: the device and inode
/// of what exists (so hard links and different spellings agree), else the absolute path with
/// its existing part canonical (symbolic links followed).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum FileKey {
    /// An existing file: its device and inode.
    Inode(u64, u64),
    /// A path where nothing stands yet.
    Path(PathBuf),
}

impl FileKey {
    /// The key of `path`.
    pub fn of(path: &Path) -> FileKey {
        use std::os::unix::fs::MetadataExt;
        if let Ok(m) = std::fs::metadata(path) {
            return FileKey::Inode(m.dev(), m.ino());
        }
        let target = resolve_links(path).unwrap_or_else(|_| path.to_path_buf());
        let absolute = std::path::absolute(&target).unwrap_or(target);
        let dir = absolute.parent().and_then(|d| std::fs::canonicalize(d).ok());
        match (dir, absolute.file_name()) {
            (Some(d), Some(name)) => FileKey::Path(d.join(name)),
            _ => FileKey::Path(absolute),
        }
    }
}

/// A file of a run, named by its role for messages (`the report`, `--data`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Named {
    /// What it is, as messages name it: `the report`, `the data`.
    pub role: String,
    /// Where it is.
    pub path: PathBuf,
}

impl Named {
    /// `role` at `path`.
    pub fn new(role: impl Into<String>, path: impl Into<PathBuf>) -> Named {
        Named { role: role.into(), path: path.into() }
    }
}

/// Refuses outputs that would overwrite an input or each other: no output is one of `inputs`,
/// and no two outputs are one file (by [`FileKey`]). Devices and FIFOs are written through and
/// replace nothing, so they may be named twice (`/dev/null`). One error line naming both roles
/// and the path.
pub fn check_distinct(outputs: &[Named], inputs: &[Named]) -> Result<()> {
    let keys: Vec<FileKey> = outputs.iter().map(|o| FileKey::of(&o.path)).collect();
    for (i, o) in outputs.iter().enumerate() {
        if standing(&o.path) == Standing::Stream {
            continue;
        }
        for input in inputs {
            if FileKey::of(&input.path) == keys[i] {
                let named = if input.path == o.path { String::new() } else { format!(" ({})", input.path.display()) };
                bail!(
                    "{} {} is also the {}{named}: writing it would destroy an input of the run; give another path",
                    o.role,
                    o.path.display(),
                    input.role
                );
            }
        }
        for (j, other) in outputs.iter().enumerate().skip(i + 1) {
            if keys[j] == keys[i] {
                bail!("{} and {} are one file ({}): give each its own path", o.role, other.role, other.path.display());
            }
        }
    }
    Ok(())
}

/// Where a result that could not be written is kept instead: a file of this process's own in
/// the system's temporary directory, `grove-PID-NAME` (`grove-1234-report.json`).
pub fn fallback_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("grove-{}-{name}", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("grove-files-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_symlink_is_written_through_and_stays_a_link() {
        let d = scratch("link");
        let target = d.join("target.json");
        std::fs::write(&target, "old").unwrap();
        let link = d.join("link.json");
        std::os::unix::fs::symlink("target.json", &link).unwrap();
        check_output(&link, "the report").unwrap();
        write_output(&link, b"new").unwrap();
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
        // A dangling link makes its target.
        let dangling = d.join("dangling.json");
        std::os::unix::fs::symlink(d.join("made.json"), &dangling).unwrap();
        write_output(&dangling, b"made").unwrap();
        assert_eq!(std::fs::read_to_string(d.join("made.json")).unwrap(), "made");
        // A loop is one error line.
        std::os::unix::fs::symlink(d.join("loop.json"), d.join("loop.json")).unwrap();
        let e = write_output(&d.join("loop.json"), b"x").unwrap_err().to_string();
        assert!(e.contains("more than 40 symbolic links"), "{e}");
    }

    #[test]
    fn a_fifo_is_written_through_and_not_replaced() {
        let d = scratch("fifo");
        let fifo = d.join("pipe");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        // No reader yet: the check does not wait.
        check_output(&fifo, "the report").unwrap();
        // With a reader waiting, the check does not end its reading.
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read(&fifo).unwrap())
        };
        check_output(&fifo, "the report").unwrap();
        write_output(&fifo, b"through").unwrap();
        assert_eq!(reader.join().unwrap(), b"through");
        use std::os::unix::fs::FileTypeExt;
        assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
    }

    #[test]
    fn dev_null_is_written_through_and_dev_full_fails_without_being_replaced() {
        check_output(Path::new("/dev/null"), "the report").unwrap();
        write_output(Path::new("/dev/null"), b"x").unwrap();
        if Path::new("/dev/full").exists() {
            let e = write_output(Path::new("/dev/full"), b"x").unwrap_err();
            assert!(format!("{e:#}").contains("No space left"), "{e:#}");
            assert_eq!(standing(Path::new("/dev/full")), Standing::Stream);
        }
    }

    #[test]
    fn directories_and_unmakeable_paths_are_refused_before_anything_is_written() {
        let d = scratch("refused");
        let e = check_output(&d, "the report").unwrap_err().to_string();
        assert!(e.contains("is a directory"), "{e}");
        let file = d.join("f");
        std::fs::write(&file, "x").unwrap();
        let e = format!("{:#}", check_output(&file.join("x.json"), "the report").unwrap_err());
        assert!(e.starts_with("cannot write the report"), "{e}");
        let e = check_output_dir(&file, "the plots").unwrap_err().to_string();
        assert!(e.contains("is a file"), "{e}");
        // A missing directory is made, as the write would make it.
        check_output(&d.join("new/sub/r.json"), "the report").unwrap();
        assert!(d.join("new/sub").is_dir());
        assert_eq!(std::fs::read_dir(d.join("new/sub")).unwrap().count(), 0, "the probe is removed");
    }

    #[test]
    fn one_file_by_any_name_is_one_file() {
        let d = scratch("keys");
        let a = d.join("a.csv");
        std::fs::write(&a, "x").unwrap();
        std::fs::hard_link(&a, d.join("hard.csv")).unwrap();
        std::os::unix::fs::symlink(&a, d.join("soft.csv")).unwrap();
        std::fs::create_dir(d.join("sub")).unwrap();
        for other in ["hard.csv", "soft.csv", "sub/../a.csv", "./a.csv"] {
            assert_eq!(FileKey::of(&d.join(other)), FileKey::of(&a), "{other}");
        }
        assert_eq!(FileKey::of(&d.join("sub/../new.json")), FileKey::of(&d.join("new.json")));
        assert_ne!(FileKey::of(&d.join("b.json")), FileKey::of(&d.join("new.json")));
        let inputs = [Named::new("--data file", &a)];
        let e = check_distinct(&[Named::new("the report", d.join("hard.csv"))], &inputs).unwrap_err().to_string();
        assert!(e.starts_with("the report ") && e.contains("hard.csv is also the --data file (") && e.contains("destroy an input"), "{e}");
        let e = check_distinct(&[Named::new("the report", d.join("r.json")), Named::new("the checkpoint", d.join("sub/../r.json"))], &inputs)
            .unwrap_err()
            .to_string();
        assert!(e.contains("the report and the checkpoint are one file"), "{e}");
        let null = [Named::new("the report", "/dev/null"), Named::new("the hall of fame", "/dev/null")];
        check_distinct(&null, &inputs).unwrap();
    }
}
