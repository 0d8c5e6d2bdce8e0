//! Reading numeric tables: CSV with a header line, or tab-separated text as PonyGE2 ships its
//! data sets (a header of column names, then one row per line, target last).
//!
//! The format accepted:
//! - an optional UTF-8 byte-order mark; `\n` or `\r\n` line ends; blank lines are skipped
//!   anywhere (line numbers in messages still count them);
//! - the first non-blank line is the header: column names, which must be non-empty and distinct
//!   (a leading `#`, as in commented headers, is dropped);
//! - the delimiter is detected from the header, outside quotes: a tab if there is one, else a
//!   comma, else a semicolon, else runs of spaces and tabs;
//! - cells may be quoted with `"` (`""` inside is a quote); spaces around cells are ignored; a
//!   quoted field cannot span lines;
//! - every data cell is a number in f32 range (Rust's float syntax: `1`, `-2.5`, `.5`, `1e-3`);
//!   empty cells, `NaN` and infinities are rejected.
//!
//! Errors are one line, `file:line: column N (name): what`, with the 1-based line of the file.
//!
//! Speed: the body is cut into chunks of about [`CHUNK_BYTES`] at line ends. Pass 1 counts each
//! chunk's lines and data rows (in parallel, rayon); then the f64 columns are allocated and
//! each chunk's rows get their own range of every column, so pass 2 parses the chunks in
//! parallel straight into the feature-major [`Dataset`], with no copy to stitch. Each chunk
//! stops at its first bad line; the chunks before the first failing one were read whole, so
//! their line counts place the error reported, the first in file order, at its true line,
//! whatever the thread count. Plain decimals take Clinger's exact fast path (`fast_f64`);
//! anything else goes to `str::parse`.

use std::path::Path;

use anyhow::Context;
use rayon::prelude::*;

use super::{DataError, Dataset};

/// Bytes of the body per parallel parse chunk (cut at the next line end).
pub const CHUNK_BYTES: usize = 1 << 20;

/// The longest line a data file may have, in bytes (a header of 10⁵ columns with 20-character
/// names is 2 MB). Past it the file is not a table of one row per line, and reading stops.
pub const MAX_LINE_BYTES: usize = 64 << 20;

/// The most columns a data file may have.
pub const MAX_COLUMNS: usize = 1 << 20;

/// The longest cell, in bytes: a column name or a number's text.
pub const MAX_CELL_BYTES: usize = 1024;

/// Reads a text data file whole, refusing on the way (so that neither `/dev/zero` nor
/// `/dev/urandom` is read for ever): a NUL byte, which no text table has, and a line longer
/// than [`MAX_LINE_BYTES`]. Errors name the file and the line. The checks cost two `memchr`
/// scans per 1 MiB block; line numbers are counted only for an error.
pub fn read_text_file(path: &Path) -> anyhow::Result<Vec<u8>> {
    read_limited(path, MAX_LINE_BYTES, 1 << 20)
}

/// [`read_text_file`] with a chosen line limit and block size (tests use small ones); lines
/// within one block are not measured, so `max_line` must be at least `block`.
fn read_limited(path: &Path, max_line: usize, block: usize) -> anyhow::Result<Vec<u8>> {
    use std::io::Read;
    debug_assert!(max_line >= block);
    let file = path.display().to_string();
    let open = || format!("cannot read data file {file}");
    let mut f = std::fs::File::open(path).with_context(open)?;
    let size = f.metadata().ok().filter(|m| m.is_file()).map_or(0, |m| m.len() as usize);
    // A regular file's size is known: one allocation, filled in place block by block.
    let mut out: Vec<u8> = Vec::with_capacity(size.saturating_add(1));
    // Bytes of the current, unfinished line.
    let mut run = 0usize;
    let line_at = |out: &[u8], pos: usize| 1 + memchr::memchr_iter(b'\n', &out[..pos]).count();
    loop {
        let start = out.len();
        out.resize(start + block, 0);
        let k = loop {
            match f.read(&mut out[start..]) {
                Ok(k) => break k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e).with_context(open),
            }
        };
        out.truncate(start + k);
        if k == 0 {
            break;
        }
        let b = &out[start..];
        if let Some(p) = memchr::memchr(0, b) {
            let line = line_at(&out, start + p);
            return Err(DataError {
                file,
                line: Some(line),
                column: None,
                message: "a NUL byte: this is binary data, not a text table".into(),
            }
            .into());
        }
        let (first, last) = match (memchr::memchr(b'\n', b), memchr::memrchr(b'\n', b)) {
            (Some(f), Some(l)) => (f, l),
            _ => (k, k),
        };
        let too_long = run + first > max_line;
        run = if first == k { run + k } else { k - last - 1 };
        if too_long || run > max_line {
            let line = line_at(&out, if too_long { start } else { out.len() });
            return Err(DataError {
                file,
                line: Some(line),
                column: None,
                message: format!("a line longer than {max_line} bytes: this is not a table of one row per line"),
            }
            .into());
        }
    }
    Ok(out)
}

/// How cells are separated on a line; detected from the header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delimiter {
    /// `\t` (PonyGE2's data sets).
    Tab,
    /// `,` (CSV).
    Comma,
    /// `;` (CSV from locales with a decimal comma).
    Semicolon,
    /// Runs of spaces and tabs; leading and trailing ones are ignored.
    Whitespace,
}

impl Delimiter {
    /// Detects the delimiter of a header line: the first of tab, comma, semicolon found outside
    /// quotes, else whitespace.
    pub fn detect(header: &[u8]) -> Delimiter {
        let (mut quoted, mut tab, mut comma, mut semicolon) = (false, false, false, false);
        for &b in header {
            match b {
                b'"' => quoted = !quoted,
                b'\t' if !quoted => tab = true,
                b',' if !quoted => comma = true,
                b';' if !quoted => semicolon = true,
                _ => {}
            }
        }
        if tab {
            Delimiter::Tab
        } else if comma {
            Delimiter::Comma
        } else if semicolon {
            Delimiter::Semicolon
        } else {
            Delimiter::Whitespace
        }
    }

    fn byte(self) -> Option<u8> {
        match self {
            Delimiter::Tab => Some(b'\t'),
            Delimiter::Comma => Some(b','),
            Delimiter::Semicolon => Some(b';'),
            Delimiter::Whitespace => None,
        }
    }
}

/// Reads the data file at `path`; `target` names the target column (default: the last one).
/// Errors name the file, line and column (see the module documentation for the format).
pub fn read(path: impl AsRef<Path>, target: Option<&str>) -> anyhow::Result<Dataset> {
    let path = path.as_ref();
    let bytes = read_text_file(path)?;
    Ok(parse(&bytes, &path.display().to_string(), target)?)
}

/// Reads a test file for the training data `like`: its columns must be `like`'s features and
/// target, by name, in any order ([`super::column_mismatch`] says how they differ, in one line);
/// the features come back in `like`'s order.
pub fn read_like(path: impl AsRef<Path>, like: &Dataset) -> anyhow::Result<Dataset> {
    let path = path.as_ref();
    let bytes = read_text_file(path)?;
    Ok(parse_like(&bytes, &path.display().to_string(), like)?)
}

/// [`read_like`] of a file's bytes; `file` names it in errors.
pub fn parse_like(bytes: &[u8], file: &str, like: &Dataset) -> Result<Dataset, DataError> {
    let plain = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let error = |line: Option<usize>, message: String| DataError { file: file.to_string(), line, column: None, message };
    let header = read_header(plain).map_err(|(line, msg)| error(line, msg))?;
    let mut want: Vec<&str> = like.names.iter().map(String::as_str).collect();
    want.push(&like.target);
    if let Some(m) = super::column_mismatch(&header.names, &want) {
        return Err(error(Some(header.line), m));
    }
    let d = parse(bytes, file, Some(&like.target))?;
    d.with_feature_order(&like.names).map_err(|e| error(None, format!("{e:#}")))
}

/// Parses the bytes of a data file; `file` names it in errors.
pub fn parse(bytes: &[u8], file: &str, target: Option<&str>) -> Result<Dataset, DataError> {
    parse_chunked(bytes, file, target, CHUNK_BYTES)
}

/// The header, read: names of all columns and where the body starts.
struct Header {
    names: Vec<String>,
    delimiter: Delimiter,
    /// 1-based line of the header.
    line: usize,
    /// Byte offset of the line after the header.
    body: usize,
}

/// [`parse`] with a chosen chunk size (tests use small chunks to exercise the stitching).
pub(crate) fn parse_chunked(
    bytes: &[u8],
    file: &str,
    target: Option<&str>,
    chunk_bytes: usize,
) -> Result<Dataset, DataError> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let error = |line: Option<usize>, column: Option<(usize, String)>, message: String| DataError {
        file: file.to_string(),
        line,
        column,
        message,
    };
    let header = read_header(bytes).map_err(|(line, msg)| error(line, None, msg))?;
    let names = &header.names;
    let n_cols = names.len();
    let target_col = match target {
        None => n_cols - 1,
        Some(t) => names.iter().position(|n| n == t).ok_or_else(|| {
            let list = names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ");
            let hint = names
                .iter()
                .find(|n| n.eq_ignore_ascii_case(t))
                .map_or(String::new(), |n| format!(" (did you mean `{n}`?)"));
            error(
                Some(header.line),
                None,
                format!("unknown target column `{t}`{hint}: the columns are {list}"),
            )
        })?,
    };

    // Pass 1: cut the body at line ends and count each chunk's lines and data rows.
    let body = &bytes[header.body..];
    let chunks = chunk_bounds(body, chunk_bytes);
    let scans: Vec<Scan> = chunks.par_iter().map(|&(s, e)| scan_chunk(&body[s..e])).collect();
    let n_rows: usize = scans.iter().map(|c| c.rows).sum();
    if n_rows == 0 {
        return Err(error(Some(header.line), None, "header only: the file has no data rows".into()));
    }

    // Pass 2: each chunk parses its rows straight into its own row range of every column.
    let n_features = n_cols - 1;
    let mut x64 = vec![0.0f64; n_features * n_rows];
    let mut y64 = vec![0.0f64; n_rows];
    let mut features = x64.chunks_mut(n_rows);
    let mut y_column = Some(&mut y64[..]);
    let mut per_chunk: Vec<Vec<&mut [f64]>> = chunks.iter().map(|_| Vec::with_capacity(n_cols)).collect();
    for c in 0..n_cols {
        let column = if c == target_col { y_column.take() } else { features.next() };
        let mut rest = column.unwrap_or_default();
        for (pieces, scan) in per_chunk.iter_mut().zip(&scans) {
            let rows = scan.rows.min(rest.len());
            let (head, tail) = std::mem::take(&mut rest).split_at_mut(rows);
            pieces.push(head);
            rest = tail;
        }
    }
    let results: Vec<Result<(), RowError>> = chunks
        .par_iter()
        .zip(per_chunk.into_par_iter())
        .map(|(&(s, e), mut columns)| parse_chunk(&body[s..e], header.delimiter, &mut columns))
        .collect();

    // The first error in file order: the chunks before it were read whole, so their line
    // counts place it exactly.
    let mut line = header.line + 1;
    for (result, scan) in results.iter().zip(&scans) {
        if let Err(e) = result {
            let column = e.column.map(|c| (c + 1, names[c].clone()));
            return Err(error(Some(line + e.line), column, e.message.clone()));
        }
        line += scan.lines;
    }
    let feature_names = (0..n_cols).filter(|&c| c != target_col).map(|c| names[c].clone()).collect();
    Ok(Dataset::from_parts(feature_names, names[target_col].clone(), x64, y64))
}

/// Finds and reads the header: the first non-blank line. Errors carry the line, if any.
fn read_header(bytes: &[u8]) -> Result<Header, (Option<usize>, String)> {
    let (mut pos, mut line) = (0, 0);
    let (text, body) = loop {
        if pos >= bytes.len() {
            let what = if bytes.is_empty() { "the file is empty" } else { "the file has only blank lines" };
            return Err((None, format!("{what}: expected a header line of column names, then data rows")));
        }
        line += 1;
        let end = memchr::memchr(b'\n', &bytes[pos..]).map_or(bytes.len(), |p| pos + p);
        let text = &bytes[pos..end];
        pos = (end + 1).min(bytes.len());
        if !is_blank(text) {
            break (text.strip_suffix(b"\r").unwrap_or(text), pos);
        }
    };
    let at = |msg: String| (Some(line), msg);
    if text.contains(&b'\r') {
        return Err(at("the line ends in a lone carriage return (\\r): use \\n or \\r\\n line ends".into()));
    }
    let text = std::str::from_utf8(text).map_err(|_| at("the header is not valid UTF-8".into()))?;
    let text = text.strip_prefix('#').unwrap_or(text).as_bytes();
    let delimiter = Delimiter::detect(text);
    let mut cells = Vec::new();
    split_cells(text, delimiter, &mut cells)
        .map_err(|(c, msg)| at(format!("header column {}: {msg}", c + 1)))?;
    if cells.iter().all(|c| parse_number(&c.text(text)).is_ok()) {
        return Err(at("this looks like data, not a header (every field is a number): \
                       the first line must name the columns"
            .into()));
    }
    if cells.len() > MAX_COLUMNS {
        return Err(at(format!("the header has {} columns; grove reads at most {MAX_COLUMNS}", cells.len())));
    }
    let mut names: Vec<String> = Vec::with_capacity(cells.len());
    let mut seen = std::collections::HashMap::with_capacity(cells.len());
    for (c, cell) in cells.iter().enumerate() {
        let name = cell.text(text);
        if name.is_empty() {
            return Err(at(format!("header column {} has an empty name", c + 1)));
        }
        if name.len() > MAX_CELL_BYTES {
            return Err(at(format!("header column {} has a name of {} bytes; at most {MAX_CELL_BYTES}", c + 1, name.len())));
        }
        // The header is valid UTF-8 and cells are cut at ASCII bytes, so this is lossless.
        let name = String::from_utf8_lossy(&name).into_owned();
        if let Some(k) = seen.insert(name.clone(), c) {
            return Err(at(format!(
                "header column {} (`{name}`): duplicate column name, also column {}",
                c + 1,
                k + 1
            )));
        }
        names.push(name);
    }
    if names.len() < 2 {
        return Err(at(format!(
            "the header has one column (`{}`): need a target and at least one feature (delimiter detected: {delimiter:?})",
            names[0]
        )));
    }
    Ok(Header { names, delimiter, line, body })
}

/// Byte ranges of `body`, each about `chunk_bytes` long and ending just after a `\n` (the last
/// one at the end of the body).
fn chunk_bounds(body: &[u8], chunk_bytes: usize) -> Vec<(usize, usize)> {
    let mut bounds = Vec::with_capacity(body.len() / chunk_bytes.max(1) + 1);
    let mut start = 0;
    while start < body.len() {
        let cut = (start + chunk_bytes.max(1)).min(body.len());
        let end = memchr::memchr(b'\n', &body[cut - 1..]).map_or(body.len(), |p| cut + p);
        bounds.push((start, end));
        start = end;
    }
    bounds
}

/// What pass 1 learns of a chunk.
struct Scan {
    /// Lines in the chunk.
    lines: usize,
    /// Data (non-blank) lines in the chunk.
    rows: usize,
}

fn scan_chunk(chunk: &[u8]) -> Scan {
    let mut scan = Scan { lines: 0, rows: 0 };
    for_each_line(chunk, |line| {
        scan.lines += 1;
        scan.rows += (!is_skipped(line)) as usize;
        true
    });
    scan
}

/// Calls `f` on each line of `chunk` (without `\n` or `\r\n`) while it returns true.
#[inline]
fn for_each_line(chunk: &[u8], mut f: impl FnMut(&[u8]) -> bool) {
    let mut start = 0;
    while start < chunk.len() {
        let end = memchr::memchr(b'\n', &chunk[start..]).map_or(chunk.len(), |p| start + p);
        let line = &chunk[start..end];
        if !f(line.strip_suffix(b"\r").unwrap_or(line)) {
            return;
        }
        start = end + 1;
    }
}

/// A bad line of a chunk.
struct RowError {
    /// 0-based line within the chunk.
    line: usize,
    /// 0-based column of the file, when one column is at fault.
    column: Option<usize>,
    message: String,
}

/// Parses a chunk's data rows into `columns` (`[n_cols]` slices of the chunk's row count, one
/// per file column), stopping at the first bad line.
fn parse_chunk(chunk: &[u8], delimiter: Delimiter, columns: &mut [&mut [f64]]) -> Result<(), RowError> {
    let mut cells = Vec::with_capacity(columns.len() + 1);
    let (mut line_index, mut row) = (0, 0);
    let mut result = Ok(());
    for_each_line(chunk, |line| {
        if !is_skipped(line) {
            if let Err((column, message)) = parse_row(line, delimiter, &mut cells, columns, row) {
                result = Err(RowError { line: line_index, column, message });
                return false;
            }
            row += 1;
        }
        line_index += 1;
        true
    });
    result
}

/// Parses one non-blank line into row `row` of `columns`. Errors give the 0-based column
/// when one is at fault.
fn parse_row(
    line: &[u8],
    delimiter: Delimiter,
    cells: &mut Vec<Cell>,
    columns: &mut [&mut [f64]],
    row: usize,
) -> Result<(), (Option<usize>, String)> {
    let n_cols = columns.len();
    split_cells(line, delimiter, cells).map_err(|(c, msg)| {
        if c < n_cols {
            (Some(c), msg)
        } else {
            (None, format!("cell {} (beyond the {n_cols} columns): {msg}", c + 1))
        }
    })?;
    if cells.len() != n_cols {
        let plural = if cells.len() == 1 { "" } else { "s" };
        return Err((
            None,
            format!("row has {} cell{plural}, expected {n_cols} as in the header", cells.len()),
        ));
    }
    for (c, (cell, column)) in cells.iter().zip(columns.iter_mut()).enumerate() {
        let v = parse_number(&line[cell.start..cell.end]).map_err(|msg| (Some(c), msg))?;
        // Pass 1 counted the same non-blank lines, so the slot exists.
        if let Some(slot) = column.get_mut(row) {
            *slot = v;
        }
    }
    Ok(())
}

/// A number in f32 range, or a message saying what the cell holds instead (every reader of
/// numbers says it alike: data files here, action files in `sim::rollout`).
pub fn parse_number(text: &[u8]) -> Result<f64, String> {
    let t = text.trim_ascii();
    if t.is_empty() {
        return Err("empty cell: missing values are not allowed".into());
    }
    if t.len() > MAX_CELL_BYTES {
        return Err(format!("a cell of {} bytes: a number is at most {MAX_CELL_BYTES}", t.len()));
    }
    let show = || {
        let s = String::from_utf8_lossy(t);
        if s.chars().count() > 40 {
            format!("{}…", s.chars().take(40).collect::<String>())
        } else {
            s.into_owned()
        }
    };
    let parsed = fast_f64(t).or_else(|| std::str::from_utf8(t).ok().and_then(|s| s.parse::<f64>().ok()));
    match parsed {
        Some(v) if v.is_finite() && (v as f32).is_finite() => Ok(v),
        Some(v) if v.is_finite() => Err(format!("`{}` is outside the f32 range (±3.4e38)", show())),
        Some(v) if v.is_nan() => Err(format!("`{}` is NaN: NaN and infinite values are not allowed", show())),
        Some(_) if t.iter().any(|b| b.is_ascii_alphabetic() && !matches!(b, b'e' | b'E')) => {
            Err(format!("`{}` is infinite: NaN and infinite values are not allowed", show()))
        }
        Some(_) => Err(format!("`{}` overflows to infinity: values must be within the f32 range", show())),
        None => Err(format!("`{}` is not a number", show())),
    }
}

/// Exact powers of ten in f64.
const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18,
    1e19, 1e20, 1e21, 1e22,
];

/// Clinger's fast path for plain decimals (`[+-]digits[.digits][e[+-]digits]`): when the
/// digits form an integer `m <= 2^53` and the decimal exponent `e` is within ±22, both `m` and
/// `10^|e|` are exact in f64 and one multiplication or division rounds correctly, giving the
/// same value as `str::parse`. `None` sends every other text to `str::parse`.
#[inline]
fn fast_f64(t: &[u8]) -> Option<f64> {
    let n = t.len();
    let mut i = 0;
    let negative = match t.first() {
        Some(b'-') => {
            i = 1;
            true
        }
        Some(b'+') => {
            i = 1;
            false
        }
        _ => false,
    };
    let (mut m, mut digits, mut exp) = (0u64, 0u32, 0i32);
    while i < n && t[i].is_ascii_digit() {
        m = m.wrapping_mul(10).wrapping_add((t[i] - b'0') as u64);
        digits += 1;
        i += 1;
    }
    if i < n && t[i] == b'.' {
        i += 1;
        while i < n && t[i].is_ascii_digit() {
            m = m.wrapping_mul(10).wrapping_add((t[i] - b'0') as u64);
            digits += 1;
            exp -= 1;
            i += 1;
        }
    }
    // 19 digits cannot overflow u64; more go to the slow path.
    if digits == 0 || digits > 19 {
        return None;
    }
    if i < n && (t[i] == b'e' || t[i] == b'E') {
        i += 1;
        let negative_exp = match t.get(i) {
            Some(b'-') => {
                i += 1;
                true
            }
            Some(b'+') => {
                i += 1;
                false
            }
            _ => false,
        };
        let (mut e, start) = (0i32, i);
        while i < n && t[i].is_ascii_digit() && i - start < 4 {
            e = e * 10 + (t[i] - b'0') as i32;
            i += 1;
        }
        if i == start {
            return None;
        }
        exp += if negative_exp { -e } else { e };
    }
    if i != n || m > 1 << 53 {
        return None;
    }
    let v = m as f64;
    let v = match exp {
        0 => v,
        1..=22 => v * POW10[exp as usize],
        -22..=-1 => v / POW10[(-exp) as usize],
        _ => return None,
    };
    Some(if negative { -v } else { v })
}

fn is_blank(line: &[u8]) -> bool {
    line.iter().all(u8::is_ascii_whitespace)
}

/// A data line that is no row: blank, or a comment (`#` first, after any spaces). Only the
/// header may start with `#` (a commented header, as numpy writes).
fn is_skipped(line: &[u8]) -> bool {
    is_blank(line) || line.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'#')
}

/// One cell of a line: `start..end` inside the line, without quotes and surrounding spaces.
#[derive(Clone, Copy, Debug)]
struct Cell {
    start: usize,
    end: usize,
    /// Quoted with `""` inside, to be unescaped.
    escaped: bool,
}

impl Cell {
    /// The cell's text, quotes unescaped.
    fn text<'a>(&self, line: &'a [u8]) -> std::borrow::Cow<'a, [u8]> {
        let raw = &line[self.start..self.end];
        if !self.escaped {
            return raw.into();
        }
        let mut out = Vec::with_capacity(raw.len());
        let mut i = 0;
        while i < raw.len() {
            out.push(raw[i]);
            i += if raw[i] == b'"' { 2 } else { 1 };
        }
        out.into()
    }
}

/// Splits one line (without its line end) into `cells`. Errors give the 0-based cell index.
fn split_cells(line: &[u8], delimiter: Delimiter, cells: &mut Vec<Cell>) -> Result<(), (usize, String)> {
    cells.clear();
    let n = line.len();
    let mut i = 0;
    let Some(d) = delimiter.byte() else {
        // Runs of spaces and tabs separate cells.
        let blank = |b: u8| b == b' ' || b == b'\t';
        loop {
            while i < n && blank(line[i]) {
                i += 1;
            }
            if i == n {
                return Ok(());
            }
            if line[i] == b'"' {
                let (cell, next) = quoted(line, i, cells.len())?;
                i = next;
                if i < n && !blank(line[i]) {
                    return Err((cells.len(), "text after the closing quote".into()));
                }
                cells.push(cell);
            } else {
                let s = i;
                while i < n && !blank(line[i]) {
                    i += 1;
                }
                cells.push(Cell { start: s, end: i, escaped: false });
            }
        }
    };
    // Spaces (and tabs, unless tab is the delimiter) around a cell are padding.
    let pad = |b: u8| b == b' ' || (b == b'\t' && d != b'\t');
    loop {
        while i < n && pad(line[i]) {
            i += 1;
        }
        if i < n && line[i] == b'"' {
            let (cell, next) = quoted(line, i, cells.len())?;
            i = next;
            while i < n && pad(line[i]) {
                i += 1;
            }
            if i < n && line[i] != d {
                return Err((cells.len(), "text after the closing quote".into()));
            }
            cells.push(cell);
        } else {
            let s = i;
            i = memchr::memchr(d, &line[i..]).map_or(n, |p| i + p);
            let mut e = i;
            while e > s && pad(line[e - 1]) {
                e -= 1;
            }
            cells.push(Cell { start: s, end: e, escaped: false });
        }
        if i == n {
            return Ok(());
        }
        i += 1; // the delimiter; a cell (perhaps empty) follows
    }
}

/// Reads the quoted cell whose opening quote is at `open`: the cell and the index after its
/// closing quote. `index` is the cell's 0-based position, for errors.
fn quoted(line: &[u8], open: usize, index: usize) -> Result<(Cell, usize), (usize, String)> {
    let mut j = open + 1;
    let mut escaped = false;
    loop {
        let Some(p) = memchr::memchr(b'"', &line[j..]).map(|p| j + p) else {
            return Err((index, "unterminated quote (a quoted field cannot span lines)".into()));
        };
        if line.get(p + 1) == Some(&b'"') {
            escaped = true;
            j = p + 2;
        } else {
            let (s, e) = trim_range(line, open + 1, p);
            return Ok((Cell { start: s, end: e, escaped }, p + 1));
        }
    }
}

/// `start..end` without the spaces at either end.
fn trim_range(line: &[u8], mut start: usize, mut end: usize) -> (usize, usize) {
    while start < end && line[start] == b' ' {
        start += 1;
    }
    while end > start && line[end - 1] == b' ' {
        end -= 1;
    }
    (start, end)
}

#[cfg(test)]
mod tests;
