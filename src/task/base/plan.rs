//! The resource plan of a run: before anything large is allocated, the host memory (and on a
//! GPU the device memory) that a run's settings need, estimated from its counts (populations,
//! genomes, fitness, data, episodes, history), against what the machine has (`MemAvailable` in
//! `/proc/meminfo`; the GPU's free memory) or `--max-memory`, whichever is lower. A run that will
//! not fit is refused in one line that gives the estimate and the limit. The estimate is meant
//! to be right within a factor of two, not exact.

use anyhow::{Result, bail};

use crate::task::base::search::SearchSettings;

/// Bytes a program node takes in a population: opcode (1), value (4), subtree size (2),
/// output slot (1).
pub const NODE_BYTES: u64 = 8;

/// Memory a run needs, bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Need {
    /// Host memory.
    pub host: u64,
    /// Memory on each GPU the run uses (0 on the CPU).
    pub device: u64,
}

/// What a task adds to the engine's need.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TaskNeed {
    /// Host bytes of the data the run copies (the rows it fits on, once more).
    pub data: u64,
    /// Device bytes of the data on each GPU.
    pub device_data: u64,
    /// Host bytes per individual beyond its program (sums, returns of each episode).
    pub per_individual: u64,
    /// Device bytes per individual beyond its program.
    pub device_per_individual: u64,
    /// Lexicase's cases (training rows, or episodes), of which a generation reads all or a
    /// down-sample.
    pub cases: u64,
}

/// The memory a search with `s`'s settings needs, with `task`'s data and per-individual
/// bytes, its islands spread over `gpus` GPUs (0: a CPU run). Host: the population and its
/// children, fitness and selection, genomes (GE), the history and hall of fame, the task's
/// data and per-individual bytes. Device: the same per GPU for the islands it holds, with the
/// mapper's derivation rows (GE). Lexicase adds each generation's errors (f64) and values (f32)
/// at its cases: on the host for a CPU run, on the device otherwise (the device loop's, with
/// its selections' candidate lists, at most 1 GiB).
pub fn search_need(s: &SearchSettings<'_>, task: &TaskNeed, gpus: usize) -> Need {
    let e = s.engine;
    let (p, n, l) = (e.pop_size as u64, s.islands.count as u64, e.max_len as u64);
    let row = l * NODE_BYTES + 4;
    let ge = s.grammar.is_some();
    let genome = if ge { s.ge.genome_capacity as u64 * 4 + 4 } else { 0 };
    let derivation = if ge { crate::evolve::max_derivation(s.ge.genome_capacity, &s.ge.map) as u64 * 4 } else { 0 };
    let per = |rows: u64, extra: u64| rows.saturating_mul(2 * row + 2 * genome + 64 + extra);
    let history = (e.generations as u64 + 1).saturating_mul(n).saturating_mul(256);
    let hof = l * l * NODE_BYTES;
    let cases = if e.selection.is_lexicase() && task.cases > 0 {
        crate::select::cases_per_generation(e.selection, e.down_sample, task.cases as usize).map_or(task.cases, |k| k as u64)
    } else {
        0
    };
    let host_cases = if gpus == 0 { cases * 12 } else { 0 };
    let host = per(p.saturating_mul(n), task.per_individual + host_cases).saturating_add(history + hof).saturating_add(task.data);
    let device = if gpus == 0 {
        0
    } else {
        let rows = p.saturating_mul(n.div_ceil(gpus as u64));
        let lists = if cases > 0 { (2 * rows).saturating_mul(12 * e.lexicase_pool.max(1) as u64 + 4 * cases).min(1 << 30) } else { 0 };
        per(rows, derivation + task.device_per_individual + 12 * cases).saturating_add(task.device_data).saturating_add(lists)
    };
    Need { host, device }
}

/// Host memory the machine has for a new run: `MemAvailable` of `/proc/meminfo` (`None` where
/// there is none, e.g. off Linux).
pub fn host_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.trim_start_matches("MemAvailable:").trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kb.saturating_mul(1024))
}

/// Parses a size: a number of bytes with an optional unit K, M, G or T (powers of 1024;
/// `2G`, `512M`, `1.5GiB`, `100000`).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let lower = t.to_ascii_lowercase();
    let body = lower.trim_end_matches("ib").trim_end_matches('b');
    let (digits, scale) = match body.chars().last() {
        Some('k') => (&body[..body.len() - 1], 1u64 << 10),
        Some('m') => (&body[..body.len() - 1], 1 << 20),
        Some('g') => (&body[..body.len() - 1], 1 << 30),
        Some('t') => (&body[..body.len() - 1], 1 << 40),
        _ => (body, 1),
    };
    let v: f64 = digits.trim().parse().map_err(|_| format!("`{t}` is not a size (e.g. 2G, 512M, 1000000)"))?;
    let bytes = v * scale as f64;
    if !(bytes.is_finite() && bytes >= 1.0 && bytes < u64::MAX as f64) {
        return Err(format!("`{t}` is not a size of at least one byte"));
    }
    Ok(bytes as u64)
}

/// A size for a person: `137.4 GiB`, `512.0 MiB`.
pub fn show_size(bytes: u64) -> String {
    crate::input::show_size(bytes)
}

/// Host memory the reading of a data file takes, in multiples of its size: the bytes read,
/// the parsed columns (f32, at most about the text's size), the training and test splits and
/// the task's own copy (standardised, or the target's) of them. Measured: a 10⁷-row CSV peaked
/// at about 6 times its size through the whole run.
pub const DATA_READ_FACTOR: u64 = 6;

/// Refuses, before a byte is read, data files (`files`: their paths; built-ins and names that
/// are not files are skipped) whose reading needs more host memory ([`DATA_READ_FACTOR`]
/// times their size) than is available or than `max_memory` (`--max-memory`) allows.
pub fn check_data_files(files: &[&str], max_memory: Option<u64>) -> Result<()> {
    let sizes: Vec<(&str, u64)> =
        files.iter().filter_map(|f| std::fs::metadata(f).ok().filter(|m| m.is_file()).map(|m| (*f, m.len()))).collect();
    let Some(&(biggest, _)) = sizes.iter().max_by_key(|(_, n)| *n) else { return Ok(()) };
    let bytes: u64 = sizes.iter().map(|(_, n)| n).sum();
    let need = Need { host: bytes.saturating_mul(DATA_READ_FACTOR), device: 0 };
    let what = format!("reading the data ({} of text in {}{})", show_size(bytes), crate::input::clip(biggest, crate::input::ECHO), if sizes.len() > 1 { " and its test file" } else { "" });
    check(&need, &what, "give --max-memory a larger size, or sample the file's rows", max_memory, None)
}

/// Refuses `need` where it does not fit: host memory against the lower of
/// [`host_available`] and `max_memory`, device memory against the lower of the GPU's free
/// memory (`device_free`, `None` on the CPU) and `max_memory`. `what` says what the run is
/// (`--pop 2000 × --islands 65536 (programs of up to 128 nodes)`) and `advice` what to do
/// (`lower --pop, --islands or --max-len`).
pub fn check(need: &Need, what: &str, advice: &str, max_memory: Option<u64>, device_free: Option<u64>) -> Result<()> {
    let limit = |have: Option<u64>, source: &str| -> Option<(u64, String)> {
        match (have, max_memory) {
            (Some(h), Some(m)) if m < h => Some((m, "--max-memory".into())),
            (Some(h), _) => Some((h, format!("available ({source})"))),
            (None, Some(m)) => Some((m, "--max-memory".into())),
            (None, None) => None,
        }
    };
    let refuse = |need: u64, kind: &str, (have, source): (u64, String)| -> Result<()> {
        if need > have {
            bail!(
                "{what} needs about {} of {kind} memory, more than the {} {source}: {advice}",
                show_size(need),
                show_size(have)
            );
        }
        Ok(())
    };
    if let Some(l) = limit(host_available(), "MemAvailable") {
        refuse(need.host, "host", l)?;
    }
    if let (Some(free), true) = (device_free, need.device > 0) {
        if let Some(l) = limit(Some(free), "free on the GPU") {
            refuse(need.device, "GPU", l)?;
        }
    }
    Ok(())
}

/// Checks a search's plan on `backend` (its islands over as many GPUs as `s.islands.gpus`
/// chooses): [`search_need`] against [`check`]'s limits. `extra` names the task's own options
/// that shrink it (e.g. `--episodes`).
pub fn check_search(s: &SearchSettings<'_>, task: &TaskNeed, backend: &crate::backend::Backend, max_memory: Option<u64>, extra: &str) -> Result<()> {
    let gpus = backend.gpus_for(s.islands.gpus.clone(), s.islands.count);
    let free = backend.free_memory()?;
    // Data larger than half the GPU's free memory stays on the host and is streamed
    // (`backend::device_data_budget`).
    let task = TaskNeed { device_data: task.device_data.min(free.unwrap_or(0) / 2), ..*task };
    let need = search_need(s, &task, gpus);
    let what = format!("--pop {} × --islands {} (programs of up to {} nodes)", s.engine.pop_size, s.islands.count, s.engine.max_len);
    let ge = if s.grammar.is_some() { ", --genome-capacity" } else { "" };
    let lexicase = if s.engine.selection.is_lexicase() { ", or take --selection down-sampled with a smaller --down-sample" } else { "" };
    let advice = format!("lower --pop, --islands, --max-len{ge}{extra}{lexicase}");
    check(&need, &what, &advice, max_memory, free)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("512m"), Ok(512 << 20));
        assert_eq!(parse_size("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse_size("100000"), Ok(100_000));
        assert_eq!(parse_size("4kb"), Ok(4096));
        assert!(parse_size("lots").is_err());
        assert!(parse_size("0").is_err());
        assert!(parse_size("-3G").is_err());
        assert_eq!(show_size(3 << 29), "1.5 GiB");
        assert_eq!(show_size(12), "12 bytes");
    }

    #[test]
    fn the_estimate_counts_every_island_and_node() {
        let engine = crate::evolve::EngineConfig { pop_size: 1000, max_len: 100, generations: 0, ..Default::default() };
        let one = crate::evolve::IslandConfig::single();
        let four = crate::evolve::IslandConfig { count: 4, ..one.clone() };
        let ge = super::super::defaults::GE.configs();
        let functions = Some("add".to_string());
        let s1 = SearchSettings::of(&engine, &one, &None, &functions, ge);
        let s4 = SearchSettings::of(&engine, &four, &None, &functions, ge);
        let none = TaskNeed::default();
        let n1 = search_need(&s1, &none, 0);
        // Two populations of 1000 rows of 100 nodes at 8 bytes dominate.
        assert!(n1.host >= 2 * 1000 * 100 * NODE_BYTES && n1.host < 4 * 1000 * 100 * NODE_BYTES, "{n1:?}");
        assert_eq!(n1.device, 0);
        let n4 = search_need(&s4, &none, 0);
        assert!(n4.host > 3 * n1.host, "{n4:?} against {n1:?}");
        // Four islands over two GPUs: each holds two.
        let d = search_need(&s4, &none, 2);
        assert!(d.device > search_need(&s1, &none, 1).device, "{d:?}");
        // A grammar adds genomes and derivation rows.
        let grammar = Some("g.bnf".to_string());
        let g = search_need(&SearchSettings::of(&engine, &one, &grammar, &None, ge), &none, 1);
        assert!(g.host > n1.host + 1000 * 512 * 4 && g.device > g.host - n1.host, "{g:?}");
        // Hostile counts saturate instead of overflowing.
        let huge = crate::evolve::EngineConfig { pop_size: usize::MAX, ..engine };
        assert_eq!(search_need(&SearchSettings::of(&huge, &four, &None, &functions, ge), &none, 1).host, u64::MAX);
    }

    #[test]
    fn lexicase_counts_its_cases_where_they_are_kept() {
        use crate::select::Selection;
        let engine = crate::evolve::EngineConfig { pop_size: 10_000, max_len: 50, generations: 0, ..Default::default() };
        let one = crate::evolve::IslandConfig::single();
        let ge = super::super::defaults::GE.configs();
        let functions = Some("add".to_string());
        let rows = TaskNeed { cases: 5000, ..TaskNeed::default() };
        let need = |selection, down_sample, gpus| {
            let e = crate::evolve::EngineConfig { selection, down_sample, ..engine };
            search_need(&SearchSettings::of(&e, &one, &None, &functions, ge), &rows, gpus)
        };
        let t = need(Selection::Tournament, 0.1, 0);
        let all = need(Selection::Lexicase, 0.1, 0);
        let some = need(Selection::DownSampled, 0.1, 0);
        // 10⁴ programs × 5000 cases × 12 bytes on the host; a tenth of that down-sampled.
        assert_eq!(all.host - t.host, 10_000 * 5000 * 12);
        assert_eq!(some.host - t.host, 10_000 * 500 * 12);
        // On a GPU the device holds them, and the candidate lists.
        let (tg, ag) = (need(Selection::Tournament, 0.1, 1), need(Selection::Lexicase, 0.1, 1));
        assert_eq!(ag.host, tg.host);
        assert!(ag.device >= tg.device + 10_000 * 5000 * 12 && ag.device <= tg.device + 10_000 * 5000 * 12 + (1 << 30), "{ag:?}");
    }

    #[test]
    fn check_refuses_beyond_the_lower_limit() {
        let need = Need { host: 3 << 30, device: 0 };
        let e = check(&need, "--pop 10", "lower --pop", Some(1 << 30), None).unwrap_err().to_string();
        assert_eq!(e, "--pop 10 needs about 3.0 GiB of host memory, more than the 1.0 GiB --max-memory: lower --pop");
        assert!(check(&Need { host: 1 << 20, device: 0 }, "x", "lower --pop", Some(1 << 30), None).is_ok());
        let gpu = Need { host: 1, device: 5 << 30 };
        let e = check(&gpu, "x", "lower --pop", None, Some(4 << 30)).unwrap_err().to_string();
        assert!(e.contains("5.0 GiB of GPU memory") && e.contains("4.0 GiB available (free on the GPU)"), "{e}");
    }
}
