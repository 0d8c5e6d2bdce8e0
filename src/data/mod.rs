//! The data layer for symbolic regression and classification: the [`Dataset`] type,
//! reading CSV and tab-separated files ([`read()`]), built-in benchmark problems generated from
//! their definitions ([`builtin()`]), seeded train/test splits ([`split()`]) and the command-line
//! value that names one of them ([`DataSource`]); [`classes`] adds class labels, the built-in
//! classification data sets and stratified splits.
//!
//! Values are stored twice on purpose: `f32` for the interpreters (CPU and GPU evaluate in f32)
//! and, optionally, `f64` for references and fitness in full precision. See [`Dataset`].

pub mod builtin;
pub mod classes;
pub mod read;
pub mod split;

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use anyhow::{Context, Result, bail, ensure};

pub use builtin::{Builtin, Problem, Sampling, builtin, builtins};
pub use read::{parse, parse_like, read, read_like};
pub use split::{split, split_indices};

/// A table of numeric features and one numeric target, for regression.
///
/// Invariants (checked by [`Dataset::validate`]):
/// - `names.len() == n_features`, names are non-empty, distinct, and differ from `target`;
/// - `x.len() == n_features * n_rows`, feature-major: feature `j` of row `i` is
///   `x[j * n_rows + i]`, so [`Dataset::feature`]`(j)` is one contiguous slice;
/// - `y.len() == n_rows`;
/// - every value is finite in f32 (readers and constructors reject NaN, infinities and values
///   beyond the f32 range);
/// - when present, `x64` and `y64` have the same shapes and `x[k] == x64[k] as f32`.
///
/// The f64 copies hold the values before rounding to f32: the text of a file parsed in f64,
/// or a built-in's target computed in f64. A built-in's *inputs* are f32 values, so for
/// built-ins `x64[k] == x[k] as f64` exactly and `y64` is the exact-in-f64 target at the very
/// inputs the f32 interpreter sees. To compare an f32 evaluation with an f64 reference on the
/// same inputs, widen `x` (`x as f64`); `x64` may differ from it for files written with more
/// digits than f32 keeps. Drop the copies with [`Dataset::drop_f64`] to save memory.
///
/// The struct is `#[non_exhaustive]` so that fields can be added without breaking callers:
/// classification will add class labels (an id per row and the class names) beside `y`. Build
/// one with [`Dataset::new`] or [`Dataset::from_f32`].
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Dataset {
    /// Feature names, one per feature, in file order (the target column removed).
    pub names: Vec<String>,
    /// Features, `[n_features][n_rows]`, feature-major, f32.
    pub x: Vec<f32>,
    /// Target, `[n_rows]`, f32.
    pub y: Vec<f32>,
    /// The target column's name.
    pub target: String,
    /// Number of rows (data points).
    pub n_rows: usize,
    /// Number of features (input variables).
    pub n_features: usize,
    /// Features before rounding to f32, `[n_features][n_rows]`, feature-major, f64; `None` once
    /// dropped or when built from f32 values.
    pub x64: Option<Vec<f64>>,
    /// Target before rounding to f32, `[n_rows]`, f64; `None` like `x64`.
    pub y64: Option<Vec<f64>>,
}

impl Dataset {
    /// A data set from f64 columns: `x64` is `[n_features][n_rows]` feature-major, `y64` is
    /// `[n_rows]`. Keeps the f64 values and rounds them to f32 for `x` and `y`. Fails (naming
    /// the feature and row) on mismatched lengths, bad names, or a value that is not finite in
    /// f32.
    pub fn new(names: Vec<String>, target: impl Into<String>, x64: Vec<f64>, y64: Vec<f64>) -> Result<Self> {
        let target = target.into();
        let n_rows = y64.len();
        let n_features = names.len();
        check_names(&names, &target)?;
        ensure!(
            x64.len() == n_features * n_rows,
            "x has {} values, expected {n_features} features × {n_rows} rows = {}",
            x64.len(),
            n_features * n_rows
        );
        // The first bad value, found in parallel (a data set may have 10^8 values).
        let first_bad = |v: &[f64]| {
            use rayon::prelude::*;
            v.par_iter().with_min_len(1 << 15).position_first(|&v| check_value(v).is_err())
        };
        if let Some(k) = first_bad(&x64) {
            check_value(x64[k]).with_context(|| {
                format!("feature {} ({}), row {}", k / n_rows + 1, names[k / n_rows], k % n_rows + 1)
            })?;
        }
        if let Some(i) = first_bad(&y64) {
            check_value(y64[i]).with_context(|| format!("target {target}, row {}", i + 1))?;
        }
        Ok(Self::from_parts(names, target, x64, y64))
    }

    /// A data set from f32 columns (`x` is `[n_features][n_rows]` feature-major), without f64
    /// copies. Fails like [`Dataset::new`].
    pub fn from_f32(names: Vec<String>, target: impl Into<String>, x: Vec<f32>, y: Vec<f32>) -> Result<Self> {
        let target = target.into();
        let n_rows = y.len();
        let n_features = names.len();
        check_names(&names, &target)?;
        ensure!(
            x.len() == n_features * n_rows,
            "x has {} values, expected {n_features} features × {n_rows} rows = {}",
            x.len(),
            n_features * n_rows
        );
        for (k, &v) in x.iter().enumerate() {
            check_value(v as f64).with_context(|| {
                format!("feature {} ({}), row {}", k / n_rows + 1, names[k / n_rows], k % n_rows + 1)
            })?;
        }
        for (i, &v) in y.iter().enumerate() {
            check_value(v as f64).with_context(|| format!("target {target}, row {}", i + 1))?;
        }
        Ok(Self { names, x, y, target, n_rows, n_features, x64: None, y64: None })
    }

    /// Builds from checked f64 values (the callers have checked names and values).
    pub(crate) fn from_parts(names: Vec<String>, target: String, x64: Vec<f64>, y64: Vec<f64>) -> Self {
        use rayon::prelude::*;
        let x = x64.par_iter().with_min_len(1 << 16).map(|&v| v as f32).collect();
        let y = y64.par_iter().with_min_len(1 << 16).map(|&v| v as f32).collect();
        Self {
            n_rows: y64.len(),
            n_features: names.len(),
            names,
            x,
            y,
            target,
            x64: Some(x64),
            y64: Some(y64),
        }
    }

    /// `(n_rows, n_features)`.
    pub fn shape(&self) -> (usize, usize) {
        (self.n_rows, self.n_features)
    }

    /// Feature `j`'s values, `[n_rows]`; `None` if `j >= n_features`.
    pub fn feature(&self, j: usize) -> Option<&[f32]> {
        (j < self.n_features).then(|| &self.x[j * self.n_rows..(j + 1) * self.n_rows])
    }

    /// The column called `name`, `[n_rows]`: a feature, or the target; `None` if no column has
    /// that name.
    pub fn column(&self, name: &str) -> Option<&[f32]> {
        if name == self.target {
            return Some(&self.y);
        }
        self.names.iter().position(|n| n == name).and_then(|j| self.feature(j))
    }

    /// Like [`Dataset::column`], from the f64 copies; `None` also when they were dropped.
    pub fn column64(&self, name: &str) -> Option<&[f64]> {
        if name == self.target {
            return self.y64.as_deref();
        }
        let j = self.names.iter().position(|n| n == name)?;
        self.x64.as_deref().map(|x| &x[j * self.n_rows..(j + 1) * self.n_rows])
    }

    /// Row `i`'s features, `[n_features]` (gathered from the feature-major store); `None` if
    /// `i >= n_rows`. The target is `y[i]`.
    pub fn row(&self, i: usize) -> Option<Vec<f32>> {
        (i < self.n_rows).then(|| (0..self.n_features).map(|j| self.x[j * self.n_rows + i]).collect())
    }

    /// The f32 features (`[n_features][rows.len()]`) and target of the rows `rows`, in that
    /// order: what [`Self::subset`] keeps of them, without copying the rest. Fails on an index
    /// out of range, naming it.
    pub fn gather(&self, rows: &[u32]) -> Result<(Vec<f32>, Vec<f32>)> {
        if let Some((k, &i)) = rows.iter().enumerate().find(|&(_, &i)| i as usize >= self.n_rows) {
            bail!("gather: index {i} (position {k}) is out of range for {} rows", self.n_rows);
        }
        let n = self.n_rows.max(1);
        let x = self.x.chunks_exact(n).take(self.n_features).flat_map(|col| rows.iter().map(|&i| col[i as usize])).collect();
        Ok((x, rows.iter().map(|&i| self.y[i as usize]).collect()))
    }

    /// A new data set of the rows `rows`, in that order (repeats allowed). Fails on an index
    /// out of range, naming it.
    pub fn subset(&self, rows: &[usize]) -> Result<Dataset> {
        if let Some((k, &i)) = rows.iter().enumerate().find(|&(_, &i)| i >= self.n_rows) {
            bail!("subset: index {i} (position {k}) is out of range for {} rows", self.n_rows);
        }
        let gather = |col: &[f32]| rows.iter().map(|&i| col[i]).collect::<Vec<_>>();
        let gather64 = |col: &[f64]| rows.iter().map(|&i| col[i]).collect::<Vec<_>>();
        let n = self.n_rows;
        let x = self.x.chunks_exact(n.max(1)).take(self.n_features).flat_map(gather).collect();
        let x64 = self
            .x64
            .as_ref()
            .map(|x64| x64.chunks_exact(n.max(1)).take(self.n_features).flat_map(gather64).collect());
        Ok(Dataset {
            names: self.names.clone(),
            x,
            y: gather(&self.y),
            target: self.target.clone(),
            n_rows: rows.len(),
            n_features: self.n_features,
            x64,
            y64: self.y64.as_deref().map(gather64),
        })
    }

    /// The same rows with the features in the order `names` gives (each one of this data set's
    /// features, once). Fails naming a feature it does not have.
    pub fn with_feature_order(&self, names: &[String]) -> Result<Dataset> {
        let n = self.n_rows;
        let mut order = Vec::with_capacity(names.len());
        for name in names {
            let j = self.names.iter().position(|m| m == name).with_context(|| format!("no feature `{name}`"))?;
            order.push(j);
        }
        ensure!(order.len() == self.n_features, "{} feature names for {} features", order.len(), self.n_features);
        let x = order.iter().flat_map(|&j| self.x[j * n..(j + 1) * n].iter().copied()).collect();
        let x64 = self.x64.as_ref().map(|x64| order.iter().flat_map(|&j| x64[j * n..(j + 1) * n].iter().copied()).collect());
        Ok(Dataset { names: names.to_vec(), x, y: self.y.clone(), target: self.target.clone(), n_rows: n, n_features: self.n_features, x64, y64: self.y64.clone() })
    }

    /// Frees the f64 copies (`x64`, `y64`).
    pub fn drop_f64(&mut self) {
        self.x64 = None;
        self.y64 = None;
    }

    /// Checks every invariant listed on [`Dataset`]; the error says which one failed and where.
    pub fn validate(&self) -> Result<()> {
        ensure!(
            self.names.len() == self.n_features,
            "{} names for {} features",
            self.names.len(),
            self.n_features
        );
        check_names(&self.names, &self.target)?;
        ensure!(self.y.len() == self.n_rows, "y has {} values for {} rows", self.y.len(), self.n_rows);
        ensure!(
            self.x.len() == self.n_features * self.n_rows,
            "x has {} values for {} features × {} rows",
            self.x.len(),
            self.n_features,
            self.n_rows
        );
        let at = |k: usize| {
            let n = self.n_rows.max(1);
            format!("feature {} ({}), row {}", k / n + 1, self.names[k / n], k % n + 1)
        };
        for (k, &v) in self.x.iter().enumerate() {
            check_value(v as f64).with_context(|| at(k))?;
        }
        for (i, &v) in self.y.iter().enumerate() {
            check_value(v as f64).with_context(|| format!("target, row {}", i + 1))?;
        }
        if let Some(x64) = &self.x64 {
            ensure!(x64.len() == self.x.len(), "x64 has {} values, x has {}", x64.len(), self.x.len());
            if let Some(k) = (0..x64.len()).find(|&k| x64[k] as f32 != self.x[k]) {
                bail!("{}: x = {} is not x64 = {} rounded to f32", at(k), self.x[k], x64[k]);
            }
        }
        if let Some(y64) = &self.y64 {
            ensure!(y64.len() == self.n_rows, "y64 has {} values for {} rows", y64.len(), self.n_rows);
            if let Some(i) = (0..y64.len()).find(|&i| y64[i] as f32 != self.y[i]) {
                bail!("target, row {}: y = {} is not y64 = {} rounded to f32", i + 1, self.y[i], y64[i]);
            }
        }
        ensure!(self.x64.is_some() == self.y64.is_some(), "x64 and y64 must be both present or both absent");
        Ok(())
    }
}

/// Names must be non-empty, distinct, and differ from the target's.
fn check_names(names: &[String], target: &str) -> Result<()> {
    ensure!(!target.is_empty(), "the target column has an empty name");
    for (j, name) in names.iter().enumerate() {
        ensure!(!name.is_empty(), "feature {} has an empty name", j + 1);
        ensure!(name != target, "feature {} is called `{name}`, like the target", j + 1);
        if let Some(k) = names[..j].iter().position(|n| n == name) {
            bail!("features {} and {} are both called `{name}`", k + 1, j + 1);
        }
    }
    Ok(())
}

/// A value must be finite and within the f32 range.
fn check_value(v: f64) -> Result<()> {
    ensure!(v.is_finite(), "{v:?} is not a finite number");
    ensure!((v as f32).is_finite(), "{v:?} is outside the f32 range (±3.4e38)");
    Ok(())
}

/// Where a data problem is: the file, and when known the 1-based line and column. Its
/// `Display` is one line: `file:line: column 3 (x2): message`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataError {
    /// The file as the user named it (or a label such as `<memory>`).
    pub file: String,
    /// The 1-based line of the file, when the problem is on one line.
    pub line: Option<usize>,
    /// The 1-based column number and the column's name, when the problem is in one column.
    pub column: Option<(usize, String)>,
    /// What is wrong, in one sentence.
    pub message: String,
}

impl fmt::Display for DataError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if let Some((number, name)) = &self.column {
            write!(f, ": column {number} ({name})")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for DataError {}

/// How the columns `got` (a test file's header) differ from `want` (the training data's
/// features and target), by name and in any order: `None` when they are the same set, else one
/// line naming the columns missing and those extra.
pub fn column_mismatch(got: &[String], want: &[&str]) -> Option<String> {
    let missing: Vec<String> = want.iter().filter(|w| !got.iter().any(|g| g == *w)).map(|w| format!("`{w}`")).collect();
    let extra: Vec<String> = got.iter().filter(|g| !want.contains(&g.as_str())).map(|g| format!("`{g}`")).collect();
    if missing.is_empty() && extra.is_empty() {
        return None;
    }
    let mut parts = Vec::new();
    if !missing.is_empty() {
        parts.push(format!("missing {}", missing.join(", ")));
    }
    if !extra.is_empty() {
        parts.push(format!("not in the training data {}", extra.join(", ")));
    }
    Some(format!(
        "its columns differ from the training data's ({}): {}; give a test file with the same columns, by name, in any order",
        want.join(", "),
        parts.join("; ")
    ))
}

/// What the command line's data argument names: `builtin:NAME`, `builtin:NAME:N` (N points),
/// or a path to a CSV or tab-separated file. A file whose name starts with `builtin:` can be
/// named as `./builtin:…`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DataSource {
    /// A built-in problem (see [`builtins`]), with an optional number of training points.
    Builtin {
        /// The problem's name, lower case.
        name: String,
        /// Training points; `None` for the problem's default.
        n: Option<usize>,
    },
    /// A file to [`read()`].
    File(PathBuf),
}

impl DataSource {
    /// Parses the command-line value. A built-in's name is checked here (the error lists the
    /// known names); its `N` must be a positive integer.
    pub fn parse(text: &str) -> Result<Self> {
        let Some(rest) = text.strip_prefix("builtin:") else {
            ensure!(!text.is_empty(), "empty data source: give a file or builtin:NAME");
            return Ok(DataSource::File(PathBuf::from(text)));
        };
        let (name, n) = match rest.split_once(':') {
            Some((name, n)) => {
                let n: usize = n.parse().ok().filter(|&n| n > 0).with_context(|| {
                    format!(
                        "`{text}`: the number of points after `{name}:` must be a positive integer, got `{n}`"
                    )
                })?;
                (name, Some(n))
            }
            None => (rest, None),
        };
        let name = name.to_ascii_lowercase();
        builtin::find(&name).with_context(|| format!("`{text}`"))?;
        Ok(DataSource::Builtin { name, n })
    }

    /// Loads the data: generates a built-in (whose target is always `y`), or reads the file
    /// with `target` as its target column (default: the last column).
    pub fn load(&self, target: Option<&str>) -> Result<Problem> {
        match self {
            DataSource::Builtin { name, n } => {
                if let Some(t) = target.filter(|&t| t != "y") {
                    bail!("builtin:{name} has the target `y`; --target `{}` does not apply", crate::input::clip(t, crate::input::ECHO));
                }
                builtin(name, *n)
            }
            DataSource::File(path) => {
                let train = read(path, target)?;
                Ok(Problem { name: path.display().to_string(), train, test: None })
            }
        }
    }
}

impl FromStr for DataSource {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        DataSource::parse(s)
    }
}

impl fmt::Display for DataSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DataSource::Builtin { name, n: None } => write!(f, "builtin:{name}"),
            DataSource::Builtin { name, n: Some(n) } => write!(f, "builtin:{name}:{n}"),
            DataSource::File(path) => write!(f, "{}", path.display()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> Dataset {
        // Rows (a, b → t): (1, 10 → 100), (2, 20 → 200), (3, 30 → 300).
        Dataset::new(
            vec!["a".into(), "b".into()],
            "t",
            vec![1.0, 2.0, 3.0, 10.0, 20.0, 30.0],
            vec![100.0, 200.0, 300.0],
        )
        .unwrap()
    }

    #[test]
    fn helpers_see_the_feature_major_layout() {
        let d = small();
        d.validate().unwrap();
        assert_eq!(d.shape(), (3, 2));
        assert_eq!(d.row(1), Some(vec![2.0, 20.0]));
        assert_eq!(d.row(3), None);
        assert_eq!(d.column("b"), Some(&[10.0, 20.0, 30.0][..]));
        assert_eq!(d.column("t"), Some(&[100.0, 200.0, 300.0][..]));
        assert_eq!(d.column64("a"), Some(&[1.0, 2.0, 3.0][..]));
        assert_eq!(d.column("c"), None);
        assert_eq!(d.feature(0), Some(&[1.0, 2.0, 3.0][..]));
        assert_eq!(d.feature(2), None);
    }

    #[test]
    fn subset_gathers_rows_in_order_and_rejects_bad_indices() {
        let d = small();
        let s = d.subset(&[2, 0, 2]).unwrap();
        s.validate().unwrap();
        assert_eq!(s.shape(), (3, 2));
        assert_eq!(s.x, vec![3.0, 1.0, 3.0, 30.0, 10.0, 30.0]);
        assert_eq!(s.y, vec![300.0, 100.0, 300.0]);
        assert_eq!(s.y64, Some(vec![300.0, 100.0, 300.0]));
        let empty = d.subset(&[]).unwrap();
        assert_eq!(empty.shape(), (0, 2));
        empty.validate().unwrap();
        let err = d.subset(&[0, 3]).unwrap_err().to_string();
        assert!(err.contains("index 3 (position 1)"), "{err}");
    }

    #[test]
    fn constructors_reject_bad_values_and_names() {
        let names = || vec!["a".to_string(), "b".to_string()];
        let err = Dataset::new(names(), "t", vec![1.0, f64::NAN, 0.0, 0.0], vec![0.0, 0.0]).unwrap_err();
        assert!(format!("{err:#}").contains("feature 1 (a), row 2: NaN"), "{err:#}");
        let err = Dataset::new(names(), "t", vec![0.0; 4], vec![0.0, 1e39]).unwrap_err();
        assert!(format!("{err:#}").contains("row 2: 1e39 is outside"), "{err:#}");
        let err = Dataset::new(names(), "t", vec![0.0; 3], vec![0.0, 0.0]).unwrap_err();
        assert!(err.to_string().contains("x has 3 values"), "{err}");
        let err = Dataset::new(vec!["a".into(), "a".into()], "t", vec![0.0; 4], vec![0.0; 2]).unwrap_err();
        assert!(err.to_string().contains("features 1 and 2 are both called `a`"), "{err}");
        let err = Dataset::from_f32(vec!["t".into()], "t", vec![0.0], vec![0.0]).unwrap_err();
        assert!(err.to_string().contains("like the target"), "{err}");
        let d = Dataset::from_f32(names(), "t", vec![1.0; 4], vec![2.0; 2]).unwrap();
        assert_eq!(d.x64, None);
        d.validate().unwrap();
    }

    #[test]
    fn validate_catches_a_broken_invariant() {
        let mut d = small();
        d.x[4] = 21.0;
        let err = d.validate().unwrap_err().to_string();
        assert!(err.contains("feature 2 (b), row 2: x = 21 is not x64 = 20"), "{err}");
        let mut d = small();
        d.y.pop();
        assert!(d.validate().is_err());
        let mut d = small();
        d.drop_f64();
        d.validate().unwrap();
    }

    #[test]
    fn data_source_parses_builtins_and_paths() {
        assert_eq!(
            DataSource::parse("builtin:pagie1").unwrap(),
            DataSource::Builtin { name: "pagie1".into(), n: None }
        );
        assert_eq!(
            DataSource::parse("builtin:Sextic:100000").unwrap(),
            DataSource::Builtin { name: "sextic".into(), n: Some(100_000) }
        );
        assert_eq!(DataSource::parse("data/x.csv").unwrap(), DataSource::File("data/x.csv".into()));
        assert_eq!(
            DataSource::parse("./builtin:odd.csv").unwrap(),
            DataSource::File("./builtin:odd.csv".into())
        );
        let err = format!("{:#}", DataSource::parse("builtin:nope").unwrap_err());
        assert!(err.contains("unknown built-in problem `nope`") && err.contains("pagie1"), "{err}");
        for bad in ["builtin:pagie1:0", "builtin:pagie1:x", "builtin:pagie1:", "builtin:pagie1:-4"] {
            let err = format!("{:#}", DataSource::parse(bad).unwrap_err());
            assert!(err.contains("positive integer"), "{bad}: {err}");
        }
        assert!(DataSource::parse("").is_err());
        for text in ["builtin:quartic", "builtin:quartic:64", "some/file.txt"] {
            assert_eq!(DataSource::parse(text).unwrap().to_string(), text);
        }
        let parsed: DataSource = "builtin:koza1".parse().unwrap();
        assert_eq!(parsed.load(None).unwrap().train.shape(), (20, 1));
        let err = parsed.load(Some("z")).unwrap_err().to_string();
        assert!(err.contains("--target `z` does not apply"), "{err}");
    }
}
