//! The commands that evolve nothing, as library functions: `grove check` ([`check`]), `grove
//! map` ([`map_stream`]), `grove predict` ([`predict`]), `grove export` ([`export`]), `grove
//! plot` ([`plot`]), `grove rollout` ([`rollout`]) and `grove render` ([`render`]). Each takes
//! its settings and returns its results (text for a person, written files); none prints or
//! exits: `cli.rs` parses the command line, calls one of these and prints what it returns.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::genome::{MapConfig, Mapper};
use crate::report::files::Named;
use crate::grammar::{self, DatasetShape, Severity};
use crate::task::base::search::{MAX_GENOME, MAX_WRAPS};

/// What `grove check` found: diagnostics (`file:line:col: severity: message`, for standard
/// error) and the summary of rules and the compiled table (for standard output).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckReport {
    /// One line per diagnostic.
    pub diagnostics: Vec<String>,
    /// The summary, one line per `\n`, ending with one.
    pub summary: String,
}

/// Parses and checks a grammar as `grove evolve` loads it; summarises its rules, whether every
/// production reads as an expression (what evolve, classify and control need; each that does
/// not is a warning) and, when `shape` gives what its `GE_RANGE:dataset_*` productions need,
/// the size of its compiled table.
pub fn check(path: &Path, shape: &DatasetShape) -> Result<CheckReport> {
    use std::fmt::Write as _;
    let parsed = grammar::parse_file(path)?;
    let file = parsed.file.clone();
    let analysis = grammar::check(&parsed)?;
    let mut diagnostics: Vec<String> = analysis.diagnostics.iter().map(|d| format!("{file}:{}: {}: {}", d.span, d.severity, d.message)).collect();
    let n_prods: usize = parsed.rules.iter().map(|r| r.productions.len()).sum();
    let mut s = String::new();
    writeln!(s, "grammar     {file}")?;
    writeln!(s, "rules       {}", parsed.rules.len())?;
    writeln!(s, "productions {n_prods}")?;
    writeln!(s, "start       <{}>", parsed.rules[0].name)?;
    writeln!(s)?;
    writeln!(s, "{:<24} {:>5} {:>9} {:>9}", "rule", "prods", "min depth", "recursive")?;
    for (r, rule) in parsed.rules.iter().enumerate() {
        let prods = if rule.productions.iter().any(|p| p.dataset_range.is_some()) {
            format!("{}+", rule.productions.iter().filter(|p| p.dataset_range.is_none()).count())
        } else {
            rule.productions.len().to_string()
        };
        writeln!(
            s,
            "{:<24} {:>5} {:>9} {:>9}",
            format!("<{}>", rule.name),
            prods,
            analysis.min_depth[r],
            if analysis.recursive[r] { "yes" } else { "no" }
        )?;
    }
    writeln!(s)?;
    let unknown = parsed.needs_dataset() && *shape == DatasetShape::default();
    // The rest is what `grove evolve` does with the grammar: resolve, compile the table and
    // read every production as an expression (with a data set of one variable where none is
    // given), so that what evolve refuses, check refuses too.
    let resolved = if unknown { DatasetShape { n_vars: Some(1), n_is: Some(1), n_os: Some(1) } } else { *shape };
    let loaded = grammar::load_parsed(parsed, &resolved)?;
    // A grammar for `grove map` alone may spell any text, so what evolve refuses is a warning.
    // Read twice, as the tasks read it: with output slots (classify, control) and with one
    // output (evolve, where `out(…)` is refused); the first reading's templates say where the
    // phenotype text and the derivation can mean different programs.
    let vars = check_vars(&loaded.grammar, shape);
    let mut differ = Vec::new();
    let mut errors = |vars: &grammar::template::Vars, notes: bool| match grammar::template::compile(&loaded.grammar, &loaded.table, vars) {
        Ok(t) => {
            if notes {
                differ = grammar::template::readings_differ(&loaded.grammar, &loaded.table, &t);
            }
            Vec::new()
        }
        Err(e) => e.errors,
    };
    let refused = errors(&vars, true);
    let single = if refused.is_empty() { errors(&grammar::template::Vars { n_outputs: 0, ..vars }, false) } else { Vec::new() };
    const SHOWN: usize = 20;
    let (problems, who) = if refused.is_empty() { (&single, "grove evolve refuses it") } else { (&refused, "grove evolve, classify and control refuse it") };
    for d in problems.iter().take(SHOWN) {
        diagnostics.push(format!("{file}:{}: warning: {} ({who})", d.span, d.message));
    }
    if problems.len() > SHOWN {
        diagnostics.push(format!("{file}: warning: … and {} more such productions", problems.len() - SHOWN));
    }
    for d in differ.iter().take(SHOWN) {
        diagnostics.push(format!("{file}:{}: note: {}", d.span, d.message));
    }
    if differ.len() > SHOWN {
        diagnostics.push(format!("{file}: note: … and {} more productions whose text and derivation can differ", differ.len() - SHOWN));
    }
    let plural = |n: usize| if n == 1 { "" } else { "s" };
    match (refused.len(), single.len()) {
        (0, 0) => writeln!(s, "expressions yes: grove evolve, classify and control can use it")?,
        (0, n) => writeln!(
            s,
            "expressions for classify and control only: {n} problem{} reading productions with one output (see the warnings): grove evolve refuses the grammar",
            plural(n)
        )?,
        (n, _) => writeln!(
            s,
            "expressions no: {n} problem{} reading productions as expressions (see the warnings): grove evolve, classify and control refuse the grammar; grove map can use it",
            plural(n)
        )?,
    }
    if refused.is_empty() {
        match differ.len() {
            0 => writeln!(s, "reading     the phenotype text and the derivation mean the same program")?,
            n => writeln!(
                s,
                "reading     the phenotype text and the derivation can mean different programs in {n} production{} (see the notes): grove evaluates the text, as PonyGE2 and Python do; --reading derivation evaluates the derivation",
                if n == 1 { "" } else { "s" }
            )?,
        }
    }
    if unknown {
        writeln!(s, "table size  depends on the data set (GE_RANGE:dataset_*): pass --n-vars etc.")?;
    } else {
        writeln!(s, "table size  {} bytes of {} in GPU constant memory", loaded.table.device_size_bytes(), grammar::TABLE_LIMIT_BYTES)?;
    }
    let warnings = analysis.diagnostics.iter().filter(|d| d.severity == Severity::Warning).count() + problems.len();
    writeln!(s, "warnings    {warnings}")?;
    Ok(CheckReport { diagnostics, summary: s })
}

/// Variables `grove check` assumes where `--n-vars` does not say.
const CHECK_VARS: usize = 4096;

/// The variables `grove check` reads a grammar's productions with, since the data's column
/// names are not known: every name its terminals spell that is not a function, then `x0 …` up
/// to `shape.n_vars` variables (else [`CHECK_VARS`]); output slots as `shape.n_os` says, else as
/// many as a program can have.
fn check_vars(g: &grammar::Grammar, shape: &DatasetShape) -> grammar::template::Vars {
    let mut names = Vec::new();
    let mut seen: std::collections::HashSet<String> = std::collections::HashSet::new();
    for rule in &g.rules {
        for p in &rule.productions {
            for sym in &p.symbols {
                let grammar::Symbol::Terminal { text, .. } = sym else { continue };
                for word in text.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
                    // `nan`, `inf` and `infinity` name numbers, not columns: evolve refuses them.
                    let named = word.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_') && word.parse::<f64>().is_err();
                    if named && crate::program::ops::Op::by_name(word).is_none() && seen.insert(word.to_string()) {
                        names.push(word.to_string());
                    }
                }
            }
        }
    }
    let n = shape.n_vars.map_or(CHECK_VARS, |n| n as usize).max(names.len());
    names.extend((names.len()..n).map(|i| format!("x{i}")));
    grammar::template::Vars { names, n_outputs: shape.n_os.map_or(u8::MAX as usize, |n| n as usize) }
}

/// Output format of `grove map`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum MapFormat {
    /// The phenotype, one line per genome (`<invalid: reason>` when it does not map).
    Text,
    /// One JSON object per genome: line, valid, phenotype, used_codons, depth, nodes.
    Jsonl,
}

/// Parses one genome line: codons separated by commas and/or spaces, optionally in brackets;
/// at most [`MAX_GENOME`] of them.
pub fn parse_genome(line: &str, out: &mut Vec<u32>) -> Result<(), String> {
    out.clear();
    let body = line.trim();
    let body = body.strip_prefix('[').map_or(body, |b| b.strip_suffix(']').unwrap_or(b));
    for (k, tok) in body.split([',', ' ', '\t']).filter(|t| !t.is_empty()).enumerate() {
        if k == MAX_GENOME {
            return Err(format!("more than {MAX_GENOME} codons (the longest genome grove maps)"));
        }
        let v: u32 = tok.parse().map_err(|_| format!("codon {} is `{}`, not an integer from 0 to {}", k + 1, crate::input::clip(tok, crate::input::ECHO), u32::MAX))?;
        out.push(v);
    }
    Ok(())
}

/// Longest line `grove map` reads, bytes: room for [`MAX_GENOME`] codons of 10 digits and a
/// separator each.
pub const MAX_GENOME_LINE: usize = 11 * MAX_GENOME + 2;
/// Most codon reads (genomes × the longest × passes over it) in a batch `grove map` maps at
/// once: 2²⁴, at most 64 MiB of genomes and 128 MiB of GPU derivation rows.
pub const MAP_CELLS: usize = 1 << 24;

/// How many lines that are not genomes `grove map` names one by one; the rest are counted.
pub const MAP_BAD_SHOWN: usize = 10;

/// Settings of `grove map` (its flags).
#[derive(Clone, Debug)]
pub struct MapSettings {
    /// The grammar file.
    pub grammar: PathBuf,
    /// The data-set shape its `GE_RANGE:dataset_*` productions need.
    pub shape: DatasetShape,
    /// Wraps, codon use and limits.
    pub config: MapConfig,
    /// Where to map.
    pub device: crate::backend::DeviceChoice,
    /// Output format.
    pub format: MapFormat,
    /// The most memory mapping may use, bytes (`--max-memory`; `None`: what the machine has).
    pub max_memory: Option<u64>,
}

/// Maps the genomes of `input` (one per line; blank lines skipped) as `s` says, writing one
/// result per genome to `out`, in input order. A line that is not a genome goes to `bad` as
/// `line N: why` (the first [`MAP_BAD_SHOWN`]; then one line counting the rest); a NUL byte
/// (binary input) is an error. Returns how many were bad.
pub fn map_stream(s: &MapSettings, input: impl BufRead, out: &mut impl Write, mut bad: impl FnMut(String)) -> Result<usize> {
    let (config, format) = (s.config, s.format);
    anyhow::ensure!(config.max_wraps <= MAX_WRAPS, "--wraps must be at most {MAX_WRAPS}, got {}", config.max_wraps);
    let loaded = grammar::load(&s.grammar, &s.shape)?;
    let backend = crate::backend::Backend::open(s.device, &crate::backend::Gpus::All)?.print_notes(false);
    // A batch's genomes, read and padded, its results, and one genome's derivation; on a GPU
    // its genomes and derivation rows.
    let cells = MAP_CELLS as u64 * 4;
    let need = crate::task::base::plan::Need { host: 3 * cells + 2 * MAX_GENOME_LINE as u64, device: if s.device.has_gpu() { 3 * cells } else { 0 } };
    crate::task::base::plan::check(&need, "mapping in batches", "give --max-memory a larger size", s.max_memory, backend.free_memory()?)?;
    let mut mapper = Mapper::new(&loaded.table, config);
    // Genomes are read in batches (line number, codons) and mapped batch by batch, so the GPU
    // gets many at once and the output keeps the input's order. A batch holds at most `BATCH`
    // genomes and `MAP_CELLS` codon reads (genomes × the longest × passes), which bounds its
    // memory on both devices whatever the input.
    const BATCH: usize = 1 << 16;
    let passes = config.max_wraps as usize + 1;
    let (mut batch, mut genome, mut n_bad, mut widest) = (Vec::<(usize, Vec<u32>)>::new(), Vec::new(), 0usize, 0usize);
    let mut flush = |batch: &mut Vec<(usize, Vec<u32>)>, mapper: &mut Mapper<'_>| -> Result<()> {
        let results = map_batch(&backend, &loaded.table, &config, mapper, batch)?;
        for ((line, _), (m, text)) in batch.iter().zip(results) {
            write_mapped(out, format, *line, &m, &text)?;
        }
        batch.clear();
        Ok(())
    };
    let (mut input, mut line, mut i) = (input, Vec::new(), 0usize);
    loop {
        line.clear();
        i += 1;
        let n = std::io::Read::take(&mut input, MAX_GENOME_LINE as u64 + 1).read_until(b'\n', &mut line).context("cannot read standard input")?;
        if n == 0 {
            break;
        }
        // No genome holds a NUL byte: binary data (/dev/urandom, an image) stops at once.
        if memchr::memchr(0, &line).is_some() {
            anyhow::bail!("standard input: a NUL byte on line {i}: this is binary data, not genomes");
        }
        if line.len() > MAX_GENOME_LINE {
            anyhow::bail!("standard input: line {i} is longer than {MAX_GENOME_LINE} bytes (a genome of {MAX_GENOME} codons takes less)");
        }
        let why = match std::str::from_utf8(&line) {
            Err(_) => Some("not UTF-8 text".to_string()),
            Ok(text) if text.trim().is_empty() => continue,
            Ok(text) => parse_genome(text, &mut genome).err(),
        };
        if let Some(msg) = why {
            // The first few are shown; the rest are counted once at the end.
            if n_bad < MAP_BAD_SHOWN {
                bad(format!("line {i}: {msg}"));
            }
            n_bad += 1;
            continue;
        }
        let wider = widest.max(genome.len()).max(1);
        if !batch.is_empty() && (batch.len() == BATCH || (batch.len() + 1) * wider * passes > MAP_CELLS) {
            flush(&mut batch, &mut mapper)?;
            widest = 0;
        }
        widest = widest.max(genome.len());
        batch.push((i, std::mem::take(&mut genome)));
    }
    if !batch.is_empty() {
        flush(&mut batch, &mut mapper)?;
    }
    if n_bad > MAP_BAD_SHOWN {
        bad(format!("… and {} more lines that are not genomes ({n_bad} in all; the first {MAP_BAD_SHOWN} are shown)", n_bad - MAP_BAD_SHOWN));
    }
    Ok(n_bad)
}

/// Maps one batch of genomes on the backend; returns each one's result and phenotype text
/// (empty when invalid). Genomes the GPU cannot finish (derivation past its buffer, stack
/// overflow) are mapped on the CPU, so the output never depends on the device.
fn map_batch(
    backend: &crate::backend::Backend,
    table: &crate::grammar::RuleTable,
    config: &MapConfig,
    mapper: &mut Mapper<'_>,
    batch: &[(usize, Vec<u32>)],
) -> Result<Vec<(crate::genome::Mapped, String)>> {
    let mut results = Vec::with_capacity(batch.len());
    match backend {
        crate::backend::Backend::Cpu => results.extend(batch.iter().map(|(_, g)| map_on_cpu(mapper, g))),
        crate::backend::Backend::Cuda(engine) => {
            let capacity = batch.iter().map(|(_, g)| g.len()).max().unwrap_or(0).max(1);
            let mut genomes = crate::genome::Genomes::new(batch.len(), capacity);
            for (k, (_, g)) in batch.iter().enumerate() {
                genomes.set(k, g);
            }
            let max_derivation = (capacity * (config.max_wraps as usize + 1) * 2 + 16).min(1 << 14);
            let gpu = engine.map_genomes(table, &genomes, config, max_derivation)?;
            for (k, (_, g)) in batch.iter().enumerate() {
                let m = gpu.mapped[k];
                if m.invalid == Some(crate::genome::map::Invalid::DerivationTooLong) {
                    results.push(map_on_cpu(mapper, g));
                    continue;
                }
                let mut text = String::new();
                if m.valid() {
                    crate::genome::map::render(table, gpu.derivation(k), &mut text);
                }
                results.push((m, text));
            }
        }
    }
    Ok(results)
}

/// Maps one genome on the CPU: the result and the phenotype (empty when invalid).
fn map_on_cpu(mapper: &mut Mapper<'_>, genome: &[u32]) -> (crate::genome::Mapped, String) {
    let m = mapper.map(genome);
    let mut text = String::new();
    if m.valid() {
        mapper.render(&mut text);
    }
    (m, text)
}

fn write_mapped(out: &mut impl Write, format: MapFormat, line: usize, m: &crate::genome::Mapped, text: &str) -> Result<()> {
    match format {
        MapFormat::Text if m.valid() => writeln!(out, "{text}")?,
        MapFormat::Text => {
            let why = serde_json::to_value(m.invalid).unwrap_or_default();
            writeln!(out, "<invalid: {}>", why.as_str().unwrap_or("?").replace('_', " "))?
        }
        MapFormat::Jsonl => {
            let obj = serde_json::json!({
                "line": line,
                "valid": m.valid(),
                "phenotype": if m.valid() { Some(text) } else { None },
                "used_codons": m.used_codons,
                "depth": m.depth,
                "nodes": m.nodes,
            });
            writeln!(out, "{obj}")?;
        }
    }
    Ok(())
}

/// Rows `grove predict` reads, parses and predicts at a time: its memory is that of one such
/// block and the model, whatever the file's length.
pub const PREDICT_BLOCK_ROWS: usize = 4096;

/// Applies the model of the report at `model` to the rows of the data file at `data`, block by
/// block ([`PREDICT_BLOCK_ROWS`]), writing one prediction per row (the class name, or the
/// number) to `out` as each block is done. The header is checked against the model's features
/// before any row is read; lines that are blank or start with `#` are skipped, a NUL byte or a
/// line longer than the data reader's limit stops it. Returns, when the file also holds the
/// model's target, how well the model does on it: `accuracy 0.9733 (146 of 150 rows, column
/// `class`)` or `mse … (N rows, column `y`)`.
pub fn predict_to(model: &Path, data: &Path, out: &mut dyn Write) -> Result<Option<String>> {
    use crate::task::base::model::ModelKind;
    use std::io::Read as _;
    let model = crate::task::base::model::load(model)?;
    let file = data.display().to_string();
    let f = std::fs::File::open(data).with_context(|| format!("cannot read data file {file}"))?;
    let mut input = std::io::BufReader::with_capacity(1 << 16, f);
    let max_line = crate::data::read::MAX_LINE_BYTES;
    let data_error = |line: usize, message: String| crate::data::DataError { file: file.clone(), line: Some(line), column: None, message };
    // The next line that is neither blank nor a comment, with its number; `None` at the end.
    let (mut buf, mut at) = (Vec::new(), 0usize);
    let mut next_line = |buf: &mut Vec<u8>, header: bool| -> Result<Option<usize>> {
        loop {
            buf.clear();
            at += 1;
            let n = (&mut input).take(max_line as u64 + 1).read_until(b'\n', buf).with_context(|| format!("cannot read data file {file}"))?;
            if n == 0 {
                return Ok(None);
            }
            if memchr::memchr(0, buf).is_some() {
                return Err(data_error(at, "a NUL byte: this is binary data, not a text table".into()).into());
            }
            if buf.len() > max_line {
                return Err(data_error(at, format!("a line longer than {max_line} bytes: this is not a table of one row per line")).into());
            }
            let text = std::str::from_utf8(buf).map_err(|_| data_error(at, "not UTF-8 text".into()))?.trim();
            // The header may start with `#` (a commented header); after it, `#` starts a comment.
            if text.is_empty() || (!header && text.starts_with('#')) {
                continue;
            }
            return Ok(Some(at));
        }
    };
    let Some(h) = next_line(&mut buf, true)? else {
        return Err(data_error(1, "the file is empty: expected a header line".into()).into());
    };
    let mut header = String::from_utf8(std::mem::take(&mut buf)).unwrap_or_default();
    if header.starts_with('\u{feff}') {
        header.remove(0);
    }
    let header = header.trim_end().to_string();
    // Each block is read as a table of the header and its rows, its line numbers the file's.
    let table_of = |rows: &str, lines: &[usize]| -> Result<crate::data::classes::Table> {
        let mut t = crate::data::classes::read_table(format!("{header}\n{rows}").as_bytes(), &file).map_err(|mut e| {
            e.line = e.line.map(|l| if l >= 2 { lines.get(l - 2).copied().unwrap_or(l) } else { h });
            e
        })?;
        for (row, &line) in t.rows.iter_mut().zip(lines) {
            row.0 = line;
        }
        Ok(t)
    };
    // The header against the model: a missing feature is refused before any row is read.
    let names = crate::data::classes::header_names(&header, &file, h)?;
    model.check_columns(&names, &file)?;
    let target = names.iter().position(|n| *n == model.target);
    // Regression: the squared errors of the finite predictions, and how many were not finite
    // (a program that overflows 32-bit floats or divides by zero on rows unlike its training).
    let (mut n_rows, mut right, mut sse, mut not_finite) = (0usize, 0usize, 0.0f64, 0usize);
    let (mut rows, mut lines) = (String::new(), Vec::new());
    let mut flush = |rows: &mut String, lines: &mut Vec<usize>, out: &mut dyn Write| -> Result<()> {
        if lines.is_empty() {
            return Ok(());
        }
        let table = table_of(rows, lines)?;
        let predictions = model.predict(&table, &file)?;
        for p in &predictions {
            writeln!(out, "{p}").context("cannot write standard output")?;
        }
        // Each block reaches the reader as it is done.
        out.flush().context("cannot write standard output")?;
        if let Some(j) = target {
            match model.kind {
                ModelKind::Classification => right += table.rows.iter().zip(&predictions).filter(|((_, c), p)| c[j] == **p).count(),
                ModelKind::Regression => {
                    let y = crate::data::classes::numeric_column(&table, j, &file)?;
                    for (y, p) in y.iter().zip(&predictions) {
                        match p.parse::<f64>() {
                            Ok(p) if p.is_finite() => sse += (p - y).powi(2),
                            _ => not_finite += 1,
                        }
                    }
                }
            }
        }
        n_rows += lines.len();
        rows.clear();
        lines.clear();
        Ok(())
    };
    while let Some(line) = next_line(&mut buf, false)? {
        rows.push_str(std::str::from_utf8(&buf).unwrap_or_default().trim_end());
        rows.push('\n');
        lines.push(line);
        if lines.len() == PREDICT_BLOCK_ROWS {
            flush(&mut rows, &mut lines, out)?;
        }
    }
    flush(&mut rows, &mut lines, out)?;
    drop(flush);
    anyhow::ensure!(n_rows > 0, crate::data::DataError { file: file.clone(), line: None, column: None, message: "the file has a header but no data rows".into() });
    // When the file also holds the target, say how well the model does on it.
    Ok(target.map(|_| match model.kind {
        ModelKind::Classification => format!("accuracy {:.4} ({right} of {n_rows} rows, column `{}`)", right as f64 / n_rows as f64, model.target),
        ModelKind::Regression => regression_score(sse, n_rows, not_finite, &model.target),
    }))
}

/// `predict`'s score line of a regression model: `mse … (N rows, column `y`)`, or, where some
/// predictions are not finite, `mse inf` with how many and the mse over the others.
fn regression_score(sse: f64, n_rows: usize, not_finite: usize, target: &str) -> String {
    if not_finite == 0 {
        return format!("mse {:.6e} ({n_rows} rows, column `{target}`)", sse / n_rows as f64);
    }
    let finite = n_rows - not_finite;
    let rest = if finite == 0 { String::new() } else { format!(", mse {:.6e} over the other {finite}", sse / finite as f64) };
    format!("mse inf ({n_rows} rows, column `{target}`; predictions not finite: {not_finite}{rest})")
}

/// What `grove predict` computed: one prediction per row (the class name, or the number) and,
/// when the file also holds the model's target, how well the model does on it (one line).
#[derive(Clone, Debug, PartialEq)]
pub struct Predictions {
    /// One per data row.
    pub predictions: Vec<String>,
    /// `accuracy 0.9733 (146 of 150 rows, column `class`)` or `mse ... (N rows, column `y`)`.
    pub score: Option<String>,
}

/// [`predict_to`], its predictions kept (for a caller that wants them whole).
pub fn predict(model: &Path, data: &Path) -> Result<Predictions> {
    let mut out = Vec::new();
    let score = predict_to(model, data, &mut out)?;
    let predictions = String::from_utf8_lossy(&out).lines().map(str::to_string).collect();
    Ok(Predictions { predictions, score })
}

/// The best program of the report at `model` as source code in `lang`.
pub fn export(model: &Path, lang: crate::program::export::Lang) -> Result<String> {
    let origin = model.display().to_string();
    let bytes = crate::input::read_bytes(model, "the report", crate::input::REPORT_BYTES)?;
    let report: serde_json::Value = serde_json::from_slice(&bytes).with_context(|| format!("{origin} is not JSON"))?;
    // A `grove control` report holds a policy, not a model.
    if report.get("model").is_none() && report.get("policy").is_some() {
        let policy = crate::task::control::SavedPolicy::from_report(&report, &origin)?;
        let nodes = policy.nodes()?;
        let program = crate::program::export::Program {
            nodes: &nodes,
            n_outputs: policy.actuators.len(),
            features: &policy.observations,
            scale: None,
            head: None,
            linear: None,
            limits: None,
            logit_terms: None,
            class_head: None,
            standardize: None,
            classes: None,
            actuators: Some(&policy.actuators),
        };
        return crate::program::export::export(&program, lang).map_err(|e| anyhow::anyhow!("{origin}: {e}"));
    }
    let saved = crate::task::base::model::from_value(&report, &origin)?;
    let nodes = saved.tree()?;
    let program = crate::program::export::Program {
        nodes: &nodes,
        n_outputs: saved.n_outputs,
        features: &saved.features,
        scale: saved.scale,
        head: saved.head.as_ref().map(|h| (h.b, h.w.as_slice())),
        linear: saved.linear.as_ref().map(|l| (l.c, l.a.as_slice())),
        limits: saved.limits,
        logit_terms: saved.logit_terms.as_deref(),
        class_head: saved.class_head.as_deref(),
        standardize: saved.standardize.as_ref().map(|s| (s.mean.as_slice(), s.std.as_slice())),
        classes: saved.classes.as_deref(),
        actuators: None,
    };
    crate::program::export::export(&program, lang).map_err(|e| anyhow::anyhow!("{}: {e}", model.display()))
}

/// Draws the plots of the report at `report` into `out`; returns the files written.
pub fn plot(report: &Path, out: &Path) -> Result<Vec<PathBuf>> {
    let plots = super::outputs::Outputs { plots: Some(out.to_path_buf()), ..Default::default() };
    crate::report::files::check_distinct(&plots.named(None), &[Named::new("report it draws", report)])?;
    let text = crate::input::read_text(report, "the report", crate::input::REPORT_BYTES)?;
    let value: serde_json::Value = serde_json::from_str(&text).with_context(|| format!("{} is not a JSON report", report.display()))?;
    anyhow::ensure!(
        value.get("generations").is_some_and(|g| g.is_array()),
        "{} has no `generations`: give a report written with --report",
        report.display()
    );
    // The directory is made only for a report that draws (a refused one leaves nothing).
    crate::report::files::check_output_dir(out, "the plots")?;
    super::plots::write_all(&value, out)
}

/// Settings of `grove rollout` (its flags).
#[derive(Clone, Debug, Default)]
pub struct RolloutSettings {
    /// A shipped environment or a `.ron` path (default with `policy`: the policy's).
    pub env: Option<String>,
    /// Profile (default with `policy`: the policy's).
    pub profile: Option<String>,
    /// Actions from a CSV file.
    pub actions: Option<PathBuf>,
    /// A `grove control` report whose policy chooses the actions (played in f32).
    pub policy: Option<PathBuf>,
    /// Write `step,q...,v...,reward,done` rows here.
    pub states: Option<PathBuf>,
    /// Reset-noise seed; `None`: the rest pose.
    pub seed: Option<u64>,
    /// Control steps (default: the action file's rows, else the episode length).
    pub steps: Option<usize>,
    /// Keep stepping after termination.
    pub ignore_termination: bool,
    /// Step in f32 instead of f64.
    pub f32: bool,
    /// Cap on constraint-solver sweeps.
    pub solver_iterations: Option<usize>,
    /// Where the episode is played: the CPU (f64 or f32), or the GPU (`cuda`: the simulator and
    /// control kernels, f32, the CPU f32 stepper's bits).
    pub device: crate::backend::DeviceChoice,
}

impl RolloutSettings {
    /// The files a roll-out reads: `--env` (a file, not a shipped environment), `--actions`,
    /// `--policy`.
    pub fn inputs(&self) -> Vec<Named> {
        let mut out = Vec::new();
        if let Some(e) = self.env.as_deref().filter(|e| !crate::sim::spec::SHIPPED.iter().any(|(n, _)| n == e)) {
            out.push(Named::new("--env file", e));
        }
        if let Some(a) = &self.actions {
            out.push(Named::new("--actions file", a));
        }
        if let Some(p) = &self.policy {
            out.push(Named::new("--policy report", p));
        }
        out
    }
}

/// The environment and profile asked for, defaulting to a replayed policy's (`grove rollout`,
/// `grove render`).
fn env_of(env: Option<&str>, profile: Option<&str>, saved: Option<&crate::task::control::SavedPolicy>) -> Result<(String, Option<String>)> {
    let env = match (env, saved) {
        (Some(e), _) => e.to_string(),
        (None, Some(p)) => p.env.clone(),
        (None, None) => anyhow::bail!("give --env ENV (swimmer, hopper, walker2d, half_cheetah or a .ron file), or --policy REPORT"),
    };
    Ok((env, profile.map(str::to_string).or_else(|| saved.map(|p| p.profile.clone()))))
}

/// The environment a roll-out plays in (with the policy it replays, if any): for `grove
/// rollout --print-model` and [`rollout`].
pub fn rollout_model(s: &RolloutSettings) -> Result<(crate::sim::Model, Option<crate::task::control::SavedPolicy>)> {
    let saved = s.policy.as_deref().map(crate::task::control::SavedPolicy::read).transpose()?;
    let (env, profile) = env_of(s.env.as_deref(), s.profile.as_deref(), saved.as_ref())?;
    let mut model = crate::sim::Model::load(&env, profile.as_deref())?;
    if let Some(n) = s.solver_iterations {
        model.solver_iterations = n;
    }
    Ok((model, saved))
}

/// The action file at `p`, each value clipped to its actuator's range with a note saying how
/// many were outside.
fn read_clipped(p: &Path, model: &crate::sim::Model) -> Result<Vec<Vec<f64>>> {
    let mut rows = crate::sim::rollout::read_actions_file(p, model.nu())?;
    let n = crate::sim::rollout::clip_to_ranges(&mut rows, model);
    if n > 0 {
        eprintln!("note: {n} actions of {} were outside their actuator's ctrl_range and were clipped to it", p.display());
    }
    Ok(rows)
}

/// `grove rollout --policy REPORT --test`: the report's policy on its run's own test episodes
/// ([`crate::task::control::replay_test`]); returns the line printed, their mean return and
/// spread beside the report's test return.
pub fn rollout_test(path: &Path) -> Result<String> {
    let text = crate::input::read_text(path, "the report", crate::input::REPORT_BYTES)?;
    let report: serde_json::Value = serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
    let (scores, reported) = crate::task::control::replay_test(&report, &path.display().to_string())?;
    let env = report.pointer("/policy/env").and_then(serde_json::Value::as_str).unwrap_or("?");
    let profile = report.pointer("/policy/profile").and_then(serde_json::Value::as_str).unwrap_or("?");
    Ok(format!(
        "{env} ({profile}): test return {:.6} ± {:.6} over {} episodes of {:.0} steps on average (the report's: {})",
        scores.mean(),
        scores.std(),
        scores.episodes.len(),
        scores.mean_steps(),
        reported.map_or_else(|| "none".to_string(), |r| format!("{r:.6}"))
    ))
}

/// Plays one episode as `s` says, writing the states when asked; returns the line `grove
/// rollout` prints (`swimmer (brax): return ... over N steps`).
pub fn rollout(s: &RolloutSettings) -> Result<String> {
    use crate::sim::rollout::{ActionSource, RolloutOptions};
    if let Some(p) = &s.states {
        crate::report::files::check_output(p, "--states")?;
        crate::report::files::check_distinct(&[Named::new("--states", p)], &s.inputs())?;
    }
    let (model, saved) = rollout_model(s)?;
    let nodes = match (&s.actions, &saved) {
        (None, Some(saved)) => Some(
            saved.tree(&model).with_context(|| format!("replaying {}", s.policy.as_deref().unwrap_or(Path::new("")).display()))?,
        ),
        _ => None,
    };
    let actions = match (&s.actions, &nodes) {
        (Some(p), _) => ActionSource::Fixed(read_clipped(p, &model)?),
        (None, Some(nodes)) => ActionSource::Policy(Box::new(crate::backend::cpu::control::Policy::for_model(nodes, &model)?)),
        (None, None) => ActionSource::Zero,
    };
    let steps = match (&actions, s.steps) {
        (ActionSource::Fixed(rows), Some(n)) if n > rows.len() => {
            anyhow::bail!("--steps {n} asks for more control steps than the action file's {} rows", rows.len())
        }
        (_, Some(n)) => n,
        (ActionSource::Fixed(rows), None) => rows.len(),
        (_, None) => model.episode_steps,
    };
    crate::task::base::search::check_count("--steps (or the environment's episode_steps)", steps, 1, crate::task::control::MAX_EPISODE_STEPS)?;
    let summary = if s.device == crate::backend::DeviceChoice::Cuda {
        rollout_on_gpu(s, &model, &actions, nodes.as_deref(), steps)?
    } else {
        let opts = RolloutOptions { steps, seed: s.seed, ignore_termination: s.ignore_termination };
        // A policy plays in f32, as it was trained (backend::cpu::control).
        let f32 = s.f32 || saved.is_some();
        match &s.states {
            Some(p) => {
                let file = std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?;
                let mut w = std::io::BufWriter::new(file);
                let r = if f32 {
                    crate::sim::rollout::rollout::<f32>(&model, &actions, &opts, Some(&mut w))?
                } else {
                    crate::sim::rollout::rollout::<f64>(&model, &actions, &opts, Some(&mut w))?
                };
                w.flush().with_context(|| format!("writing {}", p.display()))?;
                r
            }
            None if f32 => crate::sim::rollout::rollout::<f32>(&model, &actions, &opts, None)?,
            None => crate::sim::rollout::rollout::<f64>(&model, &actions, &opts, None)?,
        }
    };
    Ok(format!(
        "{} ({}): return {:.6} over {} steps{}",
        model.name,
        model.profile,
        summary.total,
        summary.steps,
        if summary.terminated { " (terminated)" } else { "" }
    ))
}

/// [`rollout`] on the GPU: a policy through the control kernel (`grove_control_rollout`, one
/// individual, one episode), fixed or zero actions through the simulator kernel
/// (`grove_sim_rollout`); both step in f32 with the reset noise of `State::reset(seed, 0, 0)`,
/// as the CPU's f32 roll-out does, so the return is the CPU's.
fn rollout_on_gpu(
    s: &RolloutSettings,
    model: &crate::sim::Model,
    actions: &crate::sim::rollout::ActionSource,
    policy: Option<&[crate::program::tree::Node]>,
    steps: usize,
) -> Result<crate::sim::rollout::RolloutSummary> {
    use crate::sim::rollout::{ActionSource, RolloutSummary};
    anyhow::ensure!(
        s.states.is_none(),
        "--states with --device cuda: the GPU replay gives the return only; write the states with --device cpu --f32 (the same bits)"
    );
    anyhow::ensure!(
        !s.ignore_termination || matches!(actions, ActionSource::Policy(_)),
        "--ignore-termination with --device cuda replays only a --policy: the simulator kernel ends fixed-action episodes where they terminate; replay on the CPU instead"
    );
    let backend = crate::backend::Backend::open(crate::backend::DeviceChoice::Cuda, &crate::backend::Gpus::All)?.backend;
    let crate::backend::Backend::Cuda(engine) = &backend else { anyhow::bail!("--device cuda: no CUDA backend") };
    let (total, played) = match actions {
        ActionSource::Policy(_) => {
            let nodes = policy.context("a policy source comes with its tree")?;
            let mut pop = crate::program::tree::Population::new(1, nodes.len().max(1), model.nu());
            pop.set_tree(0, nodes).map_err(|e| anyhow::anyhow!("the policy's tree is malformed: {e}"))?;
            let run = crate::backend::cpu::control::ControlRun {
                episodes: 1,
                steps,
                seed: s.seed.unwrap_or(0),
                generation: 0,
                noise: s.seed.is_some(),
                ignore_termination: s.ignore_termination,
            };
            let out = engine.control_returns(&pop, model, &run)?;
            let ep = out.episodes.first().context("the control kernel returned no episode")?;
            (ep.ret, ep.steps as usize)
        }
        ActionSource::Fixed(_) | ActionSource::Zero => {
            let nu = model.nu();
            let mut flat = Vec::with_capacity(steps * nu);
            for t in 0..steps {
                match actions {
                    ActionSource::Fixed(rows) => flat.extend(rows[t].iter().map(|&a| a as f32)),
                    _ => flat.extend(std::iter::repeat_n(0.0f32, nu)),
                }
            }
            let run = crate::backend::cuda::sim::SimRun { n_envs: 1, steps, noise: s.seed.map(|seed| (seed, 0)), record: false, block: 32 };
            let out = engine.sim_rollout(model, &flat, &run)?;
            (out.returns[0], out.lengths[0] as usize)
        }
    };
    Ok(RolloutSummary { total, steps: played, terminated: !s.ignore_termination && played < steps })
}

/// Settings of `grove render` (its flags).
#[derive(Clone, Debug)]
pub struct RenderSettings {
    /// A shipped environment or a `.ron` path (default: the policy's).
    pub env: Option<String>,
    /// Profile (default: the policy's, else the environment's).
    pub profile: Option<String>,
    /// Actions from a `grove control` report's policy.
    pub policy: Option<PathBuf>,
    /// Actions from a CSV file (default: zeros).
    pub actions: Option<PathBuf>,
    /// The picture: `.svg`, `.png` (a strip) or `.gif` (an animation).
    pub out: PathBuf,
    /// Control steps (default: the action file's rows, else the episode length).
    pub steps: Option<usize>,
    /// Frames in a strip.
    pub frames: usize,
    /// An animation shows every N-th control step.
    pub every: usize,
    /// Reset-noise seed; `None`: the rest pose.
    pub seed: Option<u64>,
}

/// Draws an episode as `s` says; returns the line `grove render` prints.
pub fn render(s: &RenderSettings) -> Result<String> {
    use crate::report::robot::{Policy, episode, read_policy, saved_policy, write};
    crate::report::files::check_output(&s.out, "--out")?;
    let inputs = RolloutSettings { env: s.env.clone(), actions: s.actions.clone(), policy: s.policy.clone(), ..Default::default() }.inputs();
    crate::report::files::check_distinct(&[Named::new("--out", &s.out)], &inputs)?;
    let saved = s.policy.as_deref().map(read_policy).transpose()?;
    let (env, profile) = env_of(s.env.as_deref(), s.profile.as_deref(), saved.as_ref())?;
    let model = crate::sim::Model::load(&env, profile.as_deref())?;
    let nu = model.nu();
    let (mut policy, rows): (Policy<'static>, Option<usize>) = match (&saved, &s.actions) {
        (Some(p), _) => (saved_policy(p, &model)?, None),
        (None, Some(f)) => {
            let rows = read_clipped(f, &model)?;
            let n = rows.len();
            (Box::new(move |t: usize, _: &[f64]| rows[t].clone()), Some(n))
        }
        (None, None) => (Box::new(move |_: usize, _: &[f64]| vec![0.0; nu]), None),
    };
    let steps = match (rows, s.steps) {
        (Some(r), Some(n)) if n > r => anyhow::bail!("--steps {n} asks for more control steps than the action file's {r} rows"),
        (_, Some(n)) => n,
        (Some(r), None) => r,
        (None, None) => model.episode_steps,
    };
    crate::task::base::search::check_count("--steps (or the environment's episode_steps)", steps, 1, crate::task::control::MAX_EPISODE_STEPS)?;
    anyhow::ensure!(s.frames >= 1 && s.every >= 1, "--frames and --every must be at least 1");
    // A policy plays in f32, as it was trained (the episode `grove rollout --policy` replays).
    let (model, frames) = if saved.is_some() {
        episode::<f32>(&env, profile.as_deref(), &mut policy, steps, s.seed)?
    } else {
        episode::<f64>(&env, profile.as_deref(), &mut policy, steps, s.seed)?
    };
    write(&s.out, &model, &frames, s.frames, s.every)?;
    let last = frames.last().map_or(0.0, |f| f.total);
    Ok(format!("{} ({}): {} control steps, return {last:.6}; drew {}", model.name, model.profile, frames.len() - 1, s.out.display()))
}
