//! Data for classification: a table of numeric features and one column of class labels
//! ([`Labeled`]), read from CSV / tab-separated text with the labels as integers or names
//! ([`parse_labeled`]), the four built-in data sets of EvoGP's Table II embedded in the binary
//! ([`builtin_classes`]), stratified train/test splits ([`stratified_split`]) and feature
//! standardisation ([`Standardize`]).
//!
//! Classes are numbered `0..K` in sorted order of their labels: numerically when every label
//! is an integer (`2 < 10`), else as strings. Errors are one line that names the file, line and
//! column and says how to fix the input.

use anyhow::{Context, Result, bail, ensure};

use super::read::Delimiter;
use super::{DataError, Dataset};
use crate::rng::{Purpose, Stream};

/// Most classes a program can have outputs for (output slots are stored as `u8` slot + 1).
pub const MAX_CLASSES: usize = 254;

/// Names of the built-in classification data sets (`builtin:NAME`).
pub const BUILTIN_NAMES: &[&str] = &["iris", "wine", "breast_cancer", "digits"];

/// The embedded CSV text of a built-in data set (`data/classification/*.csv`, label `class`).
fn builtin_text(name: &str) -> Option<&'static str> {
    Some(match name {
        "iris" => include_str!("../../data/classification/iris.csv"),
        "wine" => include_str!("../../data/classification/wine.csv"),
        "breast_cancer" => include_str!("../../data/classification/breast_cancer.csv"),
        "digits" => include_str!("../../data/classification/digits.csv"),
        _ => return None,
    })
}

/// A classification data set.
///
/// Invariants: `data.y[i] == labels[i] as f32`; every label is `< classes.len()`; there are at
/// least two classes in a data set read from a file (a subset may hold fewer); `classes` are
/// distinct, in class order.
#[derive(Clone, Debug, PartialEq)]
pub struct Labeled {
    /// Features `[n_features][n_rows]` (feature-major, f32) and their names; `y` holds each
    /// row's class index as f32; `target` is the label column's name.
    pub data: Dataset,
    /// `[n_rows]` class index of each row.
    pub labels: Vec<u32>,
    /// Class names (the labels as written in the file), indexed by class.
    pub classes: Vec<String>,
}

impl Labeled {
    /// Number of classes.
    pub fn n_classes(&self) -> usize {
        self.classes.len()
    }

    /// Rows per class, `[n_classes]`.
    pub fn class_counts(&self) -> Vec<usize> {
        let mut c = vec![0; self.classes.len()];
        for &l in &self.labels {
            c[l as usize] += 1;
        }
        c
    }

    /// A data set from features `x` (`[names.len()][n_rows]`, feature-major, f32), each row's
    /// class index `labels` (`[n_rows]`) and the class names. Fails (naming what is wrong) on
    /// mismatched lengths, fewer than two or more than [`MAX_CLASSES`] classes, repeated class
    /// names, a label past the classes, or a feature value that is not finite.
    pub fn from_codes(names: Vec<String>, target: &str, x: Vec<f32>, labels: Vec<u32>, classes: Vec<String>) -> Result<Labeled> {
        let k = classes.len();
        ensure!(k >= 2, "a classifier needs at least two classes; the labels hold {k}");
        ensure!(k <= MAX_CLASSES, "{k} classes: at most {MAX_CLASSES} are supported");
        let mut sorted: Vec<&String> = classes.iter().collect();
        sorted.sort();
        if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
            bail!("the class name `{}` is given twice", w[0]);
        }
        if let Some((i, l)) = labels.iter().enumerate().find(|(_, l)| **l as usize >= k) {
            bail!("row {}: class index {l} is past the {k} classes", i + 1);
        }
        let y = labels.iter().map(|&l| l as f32).collect();
        Ok(Labeled { data: Dataset::from_f32(names, target, x, y)?, labels, classes })
    }

    /// The rows `rows` (in that order), with the same classes.
    pub fn subset(&self, rows: &[usize]) -> Result<Labeled> {
        Ok(Labeled {
            data: self.data.subset(rows)?,
            labels: rows.iter().map(|&r| self.labels[r]).collect(),
            classes: self.classes.clone(),
        })
    }
}

/// What `--data` names for classification: `builtin:NAME` or a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClassSource {
    /// One of [`BUILTIN_NAMES`].
    Builtin(String),
    /// A CSV or tab-separated file with a header.
    File(std::path::PathBuf),
}

impl ClassSource {
    /// Parses the command-line value; a built-in's name is checked (the error lists them).
    pub fn parse(text: &str) -> Result<Self> {
        match text.strip_prefix("builtin:") {
            Some(name) => {
                let name = name.to_ascii_lowercase().replace('-', "_");
                ensure!(
                    BUILTIN_NAMES.contains(&name.as_str()),
                    "`{text}`: unknown built-in classification data set; the built-ins are {}",
                    BUILTIN_NAMES.iter().map(|n| format!("builtin:{n}")).collect::<Vec<_>>().join(", ")
                );
                Ok(ClassSource::Builtin(name))
            }
            None => {
                ensure!(!text.is_empty(), "empty data source: give a file or builtin:NAME");
                Ok(ClassSource::File(text.into()))
            }
        }
    }

    /// Loads the data; `label` names the class column (default: the last column; a built-in's
    /// is `class`).
    pub fn load(&self, label: Option<&str>) -> Result<Labeled> {
        match self {
            ClassSource::Builtin(name) => {
                if let Some(l) = label.filter(|&l| l != "class") {
                    bail!("builtin:{name} has the label column `class`; --label `{l}` does not apply");
                }
                builtin_classes(name)
            }
            ClassSource::File(path) => {
                let bytes = super::read::read_text_file(path)?;
                Ok(parse_labeled(&bytes, &path.display().to_string(), label)?)
            }
        }
    }
}

/// A built-in data set by name (one of [`BUILTIN_NAMES`]).
pub fn builtin_classes(name: &str) -> Result<Labeled> {
    let text = builtin_text(name).with_context(|| format!("unknown built-in classification data set `{name}`"))?;
    Ok(parse_labeled(text.as_bytes(), &format!("builtin:{name}"), Some("class"))?)
}

/// A table read as text: the header's names and each data row's cells with its 1-based line.
#[derive(Clone, Debug)]
pub struct Table {
    /// Column names.
    pub names: Vec<String>,
    /// `(line, cells)` of each data row; every row has `names.len()` cells.
    pub rows: Vec<(usize, Vec<String>)>,
}

/// Splits one line into cells: `"` quotes (with `""` inside), spaces around cells trimmed.
fn cells(line: &str, delimiter: Delimiter) -> Result<Vec<String>, String> {
    if delimiter == Delimiter::Whitespace {
        return Ok(line.split_whitespace().map(|c| c.trim_matches('"').to_string()).collect());
    }
    let sep = match delimiter {
        Delimiter::Tab => '\t',
        Delimiter::Comma => ',',
        _ => ';',
    };
    let (mut out, mut cell, mut quoted, mut was_quoted) = (Vec::new(), String::new(), false, false);
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                chars.next();
                cell.push('"');
            }
            '"' => {
                if !quoted && cell.trim().is_empty() {
                    cell.clear(); // spaces before an opening quote
                }
                quoted = !quoted;
                was_quoted = true;
            }
            c if c == sep && !quoted => {
                out.push(if was_quoted { std::mem::take(&mut cell) } else { cell.trim().to_string() });
                cell.clear();
                was_quoted = false;
            }
            c if was_quoted && !quoted && c.is_whitespace() => {} // spaces after a closing quote
            c => cell.push(c),
        }
    }
    if quoted {
        return Err("unclosed quote".into());
    }
    out.push(if was_quoted { cell } else { cell.trim().to_string() });
    Ok(out)
}

/// The column names of a header line (`line` its number in `file`), as [`read_table`] reads
/// them: an optional leading `#`, the delimiter detected, every name non-empty and distinct.
pub fn header_names(header: &str, file: &str, line: usize) -> Result<Vec<String>, DataError> {
    let mut text = header.to_string();
    text.push('\n');
    // A header alone is a table without rows: its names are checked, and only the missing rows
    // are an error.
    match read_table(text.as_bytes(), file) {
        Ok(t) => Ok(t.names),
        Err(e) if e.line.is_none() && e.message.contains("no data rows") => {
            let header = header.trim_start().strip_prefix('#').unwrap_or(header);
            cells(header, Delimiter::detect(header.as_bytes())).map_err(|m| DataError { file: file.into(), line: Some(line), column: None, message: m })
        }
        Err(e) => Err(DataError { line: e.line.map(|_| line), ..e }),
    }
}

/// Reads a table with a header (the first non-blank line; a leading `#` is dropped), the
/// delimiter detected as [`Delimiter::detect`] does. Blank lines are skipped.
pub fn read_table(bytes: &[u8], file: &str) -> Result<Table, DataError> {
    let err = |line: Option<usize>, message: String| DataError { file: file.into(), line, column: None, message };
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let text = std::str::from_utf8(bytes).map_err(|e| err(None, format!("not UTF-8 text ({e})")))?;
    let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
    let (h, header) = lines.next().ok_or_else(|| err(None, "the file is empty: expected a header line".into()))?;
    let header = header.trim_start().strip_prefix('#').unwrap_or(header);
    let delimiter = Delimiter::detect(header.as_bytes());
    let names = cells(header, delimiter).map_err(|m| err(Some(h + 1), m))?;
    if names.len() > super::read::MAX_COLUMNS {
        return Err(err(Some(h + 1), format!("the header has {} columns; grove reads at most {}", names.len(), super::read::MAX_COLUMNS)));
    }
    let mut seen = std::collections::HashMap::with_capacity(names.len());
    for (j, n) in names.iter().enumerate() {
        if n.is_empty() {
            return Err(err(Some(h + 1), format!("column {} has no name in the header", j + 1)));
        }
        if let Some(k) = seen.insert(n.as_str(), j) {
            return Err(err(Some(h + 1), format!("columns {} and {} are both called `{n}`", k + 1, j + 1)));
        }
    }
    let mut rows = Vec::new();
    for (i, line) in lines {
        // After the header, `#` starts a comment line.
        if line.trim_start().starts_with('#') {
            continue;
        }
        let c = cells(line, delimiter).map_err(|m| err(Some(i + 1), m))?;
        if c.len() != names.len() {
            return Err(err(Some(i + 1), format!("{} cells, but the header names {} columns", c.len(), names.len())));
        }
        rows.push((i + 1, c));
    }
    if rows.is_empty() {
        return Err(err(None, "the file has a header but no data rows".into()));
    }
    Ok(Table { names, rows })
}

/// Parses column `j` of every row as numbers, `[n_rows]` f64. A bad cell is an error naming
/// its line and column and saying how to fix it.
pub fn numeric_column(table: &Table, j: usize, file: &str) -> Result<Vec<f64>, DataError> {
    let mut col = Vec::with_capacity(table.rows.len());
    for (line, cells) in &table.rows {
        let s = &cells[j];
        let v: Option<f64> = s.parse().ok().filter(|v: &f64| v.is_finite() && (*v as f32).is_finite());
        let Some(v) = v else {
            let what = if s.is_empty() { "an empty cell".to_string() } else { format!("`{s}`") };
            return Err(DataError {
                file: file.into(),
                line: Some(*line),
                column: Some((j + 1, table.names[j].clone())),
                message: format!(
                    "{what} is not a finite number: features must be numeric; encode the column as numbers or \
                     remove it (if it holds the classes, name it with --label)"
                ),
            });
        };
        col.push(v);
    }
    Ok(col)
}

/// The integer a class label stands for: an integer (`2`), or a number with an integral value
/// (`2.0`, `1.000000`, `1e1`) within ±2^53; `None` for anything else.
pub fn integral_label(s: &str) -> Option<i64> {
    if let Ok(i) = s.parse::<i64>() {
        return Some(i);
    }
    let v: f64 = s.parse().ok()?;
    (v.is_finite() && v.fract() == 0.0 && v.abs() <= 9_007_199_254_740_992.0).then_some(v as i64)
}

/// Parses a classification table: `label` names the class column (default: the last).
pub fn parse_labeled(bytes: &[u8], file: &str, label: Option<&str>) -> Result<Labeled, DataError> {
    parse_labeled_as(bytes, file, label, None)
}

/// Parses a classification table whose rows belong to the classes of `like`, another data set
/// (a test file beside its training file): its columns must be `like`'s features and label
/// column, by name, in any order (they are put in `like`'s order); each label must be one of
/// `like`'s classes (integers compared by value, so `1.0` is class `1`). Any number of classes
/// may appear, one included. Errors are one line naming the file and what differs.
pub fn parse_labeled_like(bytes: &[u8], file: &str, like: &Labeled) -> Result<Labeled, DataError> {
    parse_labeled_as(bytes, file, Some(&like.data.target), Some(like))
}

/// [`parse_labeled`], or with `like` [`parse_labeled_like`].
fn parse_labeled_as(bytes: &[u8], file: &str, label: Option<&str>, like: Option<&Labeled>) -> Result<Labeled, DataError> {
    let table = read_table(bytes, file)?;
    let err = |line: Option<usize>, column: Option<(usize, String)>, message: String| DataError {
        file: file.into(),
        line,
        column,
        message,
    };
    if let Some(like) = like {
        let mut want: Vec<&str> = like.data.names.iter().map(String::as_str).collect();
        want.push(&like.data.target);
        if let Some(m) = super::column_mismatch(&table.names, &want) {
            return Err(err(None, None, m));
        }
    }
    let lc = match label {
        None => table.names.len() - 1,
        Some(l) => table.names.iter().position(|n| n == l).ok_or_else(|| {
            let list = table.names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ");
            let hint =
                table.names.iter().find(|n| n.eq_ignore_ascii_case(l)).map_or(String::new(), |n| format!(" (did you mean `{n}`?)"));
            err(None, None, format!("unknown label column `{l}`{hint}: the columns are {list}; name the class column with --label"))
        })?,
    };
    if table.names.len() < 2 {
        return Err(err(None, None, "the file has only one column: it needs at least one feature and a label column".into()));
    }
    let lname = table.names[lc].clone();
    let col = || Some((lc + 1, lname.clone()));
    // Labels: integers (integral numbers such as `1.0` included) sort numerically; anything
    // else sorts as text.
    let raw: Vec<&str> = table.rows.iter().map(|(_, c)| c[lc].as_str()).collect();
    for ((line, _), s) in table.rows.iter().zip(&raw) {
        if s.is_empty() {
            return Err(err(Some(*line), col(), "empty class label: every row needs one".into()));
        }
    }
    let ints: Option<Vec<i64>> = raw.iter().map(|s| integral_label(s)).collect();
    let numbers_of = |classes: &[String]| classes.iter().all(|c| integral_label(c).is_some());
    // A number that is not an integer is refused where the classes are numbers: the file's own
    // (every label a number), or those of the data set it must match.
    let numeric = match like {
        None => raw.iter().all(|s| s.parse::<f64>().is_ok()),
        Some(l) => numbers_of(&l.classes),
    };
    if ints.is_none() && numeric {
        if let Some(((line, _), s)) = table.rows.iter().zip(&raw).find(|(_, s)| integral_label(s).is_none() && s.parse::<f64>().is_ok()) {
            return Err(err(
                Some(*line),
                col(),
                format!(
                    "label `{s}` is a number but not an integer: class labels are integers (`1`, `1.0`) or names; for a \
                     numeric target use `grove evolve`, or name the class column with --label"
                ),
            ));
        }
    }
    let (classes, labels): (Vec<String>, Vec<u32>) = match like {
        Some(l) => {
            let by_number = numbers_of(&l.classes);
            let mut labels = Vec::with_capacity(raw.len());
            for ((line, _), s) in table.rows.iter().zip(&raw) {
                let at = if by_number {
                    integral_label(s).and_then(|v| l.classes.iter().position(|c| integral_label(c) == Some(v)))
                } else {
                    l.classes.iter().position(|c| c == s)
                };
                let Some(at) = at else {
                    return Err(err(
                        Some(*line),
                        col(),
                        format!(
                            "label `{}` is not one of the training data's classes ({}): a classifier predicts only the classes it was trained on",
                            crate::program::clip(s, 40),
                            l.classes.join(", ")
                        ),
                    ));
                };
                labels.push(at as u32);
            }
            (l.classes.clone(), labels)
        }
        None => {
            let mut classes: Vec<String> = match &ints {
                Some(v) => {
                    let mut u = v.clone();
                    u.sort_unstable();
                    u.dedup();
                    u.iter().map(|i| i.to_string()).collect()
                }
                None => {
                    let mut u: Vec<String> = raw.iter().map(|s| s.to_string()).collect();
                    u.sort();
                    u.dedup();
                    u
                }
            };
            if classes.len() < 2 {
                return Err(err(
                    None,
                    Some((lc + 1, lname.clone())),
                    format!(
                        "the label column has a single class (`{}`) in all {} rows: classification needs two or more; name \
                         the class column with --label",
                        classes[0],
                        raw.len()
                    ),
                ));
            }
            if classes.len() > MAX_CLASSES {
                return Err(err(
                    None,
                    Some((lc + 1, lname.clone())),
                    format!(
                        "the label column has {} distinct values, more than the {MAX_CLASSES} classes supported: is it the \
                         class column? name the class column with --label",
                        classes.len()
                    ),
                ));
            }
            let labels: Vec<u32> = match &ints {
                Some(v) => {
                    let keys: Vec<i64> = classes.iter().map(|c| c.parse().unwrap()).collect();
                    v.iter().map(|i| keys.binary_search(i).unwrap() as u32).collect()
                }
                None => raw.iter().map(|s| classes.binary_search_by(|c| c.as_str().cmp(s)).unwrap() as u32).collect(),
            };
            classes.shrink_to_fit();
            (classes, labels)
        }
    };
    // Features in `like`'s order where there is one, else the file's.
    let feats: Vec<usize> = match like {
        Some(l) => l.data.names.iter().map(|n| table.names.iter().position(|m| m == n).expect("columns checked")).collect(),
        None => (0..table.names.len()).filter(|&j| j != lc).collect(),
    };
    let mut x64 = Vec::with_capacity(feats.len() * table.rows.len());
    for &j in &feats {
        x64.extend(numeric_column(&table, j, file)?);
    }
    let names = feats.iter().map(|&j| table.names[j].clone()).collect();
    let y64 = labels.iter().map(|&l| l as f64).collect();
    let data = Dataset::new(names, lname, x64, y64).map_err(|e| err(None, None, format!("{e:#}")))?;
    Ok(Labeled { data, labels, classes })
}

/// Splits into `(train, test)` keeping each class's proportion: class `c`'s rows are shuffled
/// by the stream `(seed; c + 1, SPLIT_STREAM, Purpose::Data)` (Fisher–Yates, as
/// [`super::split::shuffled`]) and `round(n_c · test_fraction)` of them go to the test set,
/// but never all of a class's rows (a class of one row stays in training). Both parts keep
/// the rows in file order. Fails if either part would be empty.
pub fn stratified_split(data: &Labeled, test_fraction: f64, seed: u64) -> Result<(Labeled, Labeled)> {
    let (train, test) = stratified_indices(&data.labels, data.n_classes(), test_fraction, seed)?;
    Ok((data.subset(&train)?, data.subset(&test)?))
}

/// The rows [`stratified_split`] puts in the training and the test part, each in increasing
/// order, for rows of class indices `labels` (`< n_classes`).
pub fn stratified_indices(labels: &[u32], n_classes: usize, test_fraction: f64, seed: u64) -> Result<(Vec<usize>, Vec<usize>)> {
    stratified_indices_for(labels, n_classes, test_fraction, seed, super::split::Holdout::TEST)
}

/// As [`stratified_split`], holding out `holdout`'s rows (each class shuffled by the stream
/// `(seed; c + 1, holdout.stream, Purpose::Data)`): `(kept, held out)`.
pub fn stratified_split_for(data: &Labeled, fraction: f64, seed: u64, holdout: super::split::Holdout) -> Result<(Labeled, Labeled)> {
    let (kept, held) = stratified_indices_for(&data.labels, data.n_classes(), fraction, seed, holdout)?;
    Ok((data.subset(&kept)?, data.subset(&held)?))
}

/// As [`stratified_indices`], holding out `holdout`'s rows with its stream.
pub fn stratified_indices_for(
    labels: &[u32],
    n_classes: usize,
    test_fraction: f64,
    seed: u64,
    holdout: super::split::Holdout,
) -> Result<(Vec<usize>, Vec<usize>)> {
    let name = holdout.name;
    ensure!((0.0..1.0).contains(&test_fraction), "the {name} fraction must be in [0, 1), got {test_fraction}");
    let mut per_class: Vec<Vec<usize>> = vec![Vec::new(); n_classes];
    for (i, &l) in labels.iter().enumerate() {
        ensure!((l as usize) < n_classes, "row {}: class index {l} is past the {n_classes} classes", i + 1);
        per_class[l as usize].push(i);
    }
    let (mut train, mut test) = (Vec::new(), Vec::new());
    for (c, rows) in per_class.iter().enumerate() {
        let n = rows.len();
        let mut order = rows.clone();
        let mut s = Stream::new(seed, c as u32 + 1, holdout.stream, Purpose::Data);
        for i in (1..n).rev() {
            order.swap(i, s.below(i as u32 + 1) as usize);
        }
        let n_test = ((n as f64 * test_fraction).round() as usize).min(n.saturating_sub(1));
        test.extend_from_slice(&order[..n_test]);
        train.extend_from_slice(&order[n_test..]);
    }
    ensure!(!test.is_empty(), "a {name} fraction of {test_fraction} leaves the {name} set empty: use a larger --{name}-fraction");
    ensure!(!train.is_empty(), "a {name} fraction of {test_fraction} leaves the training set empty");
    train.sort_unstable();
    test.sort_unstable();
    Ok((train, test))
}

/// Feature standardisation fitted on training data: `x' = (x − mean) / std` per feature
/// (population standard deviation; a constant feature gets std 1, so it becomes 0).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Standardize {
    /// `[n_features]` means.
    pub mean: Vec<f64>,
    /// `[n_features]` standard deviations (1 for a constant feature).
    pub std: Vec<f64>,
}

impl Standardize {
    /// Fits means and deviations to `x` (`[n_features][n_rows]`, f32), in f64.
    pub fn fit(x: &[f32], n_rows: usize) -> Standardize {
        let n_features = x.len().checked_div(n_rows).unwrap_or(0);
        let (mut mean, mut std) = (Vec::with_capacity(n_features), Vec::with_capacity(n_features));
        for col in x.chunks(n_rows.max(1)).take(n_features) {
            let m = col.iter().map(|&v| v as f64).sum::<f64>() / n_rows as f64;
            let var = col.iter().map(|&v| (v as f64 - m).powi(2)).sum::<f64>() / n_rows as f64;
            mean.push(m);
            std.push(if var > 0.0 { var.sqrt() } else { 1.0 });
        }
        Standardize { mean, std }
    }

    /// Applies to `x` (`[n_features][n_rows]`, f32) in place.
    pub fn apply(&self, x: &mut [f32], n_rows: usize) {
        for (j, col) in x.chunks_mut(n_rows.max(1)).enumerate().take(self.mean.len()) {
            for v in col {
                *v = ((*v as f64 - self.mean[j]) / self.std[j]) as f32;
            }
        }
    }

    /// Applies to a data set's features (its f64 copies are dropped: they no longer match).
    pub fn apply_to(&self, d: &mut Dataset) {
        let n = d.n_rows;
        self.apply(&mut d.x, n);
        d.x64 = None;
        d.y64 = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_handle_quotes_and_spaces() {
        assert_eq!(cells(" a , \"b,c\" ,\"d\"\"e\"", Delimiter::Comma).unwrap(), ["a", "b,c", "d\"e"]);
        assert_eq!(cells("1\t2", Delimiter::Tab).unwrap(), ["1", "2"]);
        assert_eq!(cells("  1   2 ", Delimiter::Whitespace).unwrap(), ["1", "2"]);
        assert!(cells("\"a,b", Delimiter::Comma).is_err());
    }

    #[test]
    fn standardize_centres_and_scales() {
        let mut x = vec![1.0, 2.0, 3.0, 5.0, 5.0, 5.0];
        let s = Standardize::fit(&x, 3);
        assert_eq!(s.mean, [2.0, 5.0]);
        assert!((s.std[0] - (2.0f64 / 3.0).sqrt()).abs() < 1e-12);
        assert_eq!(s.std[1], 1.0, "a constant feature keeps scale 1");
        s.apply(&mut x, 3);
        assert!((x[0] + 1.2247449).abs() < 1e-6 && x[1] == 0.0 && (x[2] - 1.2247449).abs() < 1e-6, "{x:?}");
        assert_eq!(&x[3..], [0.0, 0.0, 0.0]);
    }
}
