//! A saved program (`model` in a run report): what `grove predict` needs to apply the best
//! program of a `grove evolve` or `grove classify` run to new rows — the tree, the feature
//! names it reads (by name, so the columns of a new file may be in any order), the class names,
//! the linear scaling or the fitted head over its outputs, the linear terms of the inputs, and
//! the standardisation fitted on the training data.

use anyhow::{Context, Result, anyhow, bail, ensure};

use crate::data::classes::{Standardize, Table, numeric_column};
use crate::program::fitness::argmax;
use crate::program::tree::{Node, Population};

/// How a program's outputs become its prediction.
#[derive(Clone, Debug, PartialEq)]
pub enum Readout {
    /// The program's one value as `a·f + b` (`(1, 0)`: unscaled).
    Scale(f64, f64),
    /// Its `K ≥ 2` output slots under a fitted linear head.
    Head(crate::program::head::Head),
}

impl Readout {
    /// The output slots of the programs it reads (0: the root's value).
    pub fn n_outputs(&self) -> usize {
        match self {
            Readout::Scale(..) => 0,
            Readout::Head(h) => h.w.len(),
        }
    }

    /// Predictions `[n_rows]` (f64) from the program's outputs `[max(1, n_outputs)][n_rows]`:
    /// what the report's scores, `grove predict` and the Python estimators all apply.
    pub fn apply(&self, out: &[f32], n_rows: usize) -> Vec<f64> {
        match self {
            Readout::Scale(a, b) => out[..n_rows].iter().map(|&f| a * f as f64 + b).collect(),
            Readout::Head(h) => h.predict(out, n_rows),
        }
    }
}

/// Whether a model has linear terms of the inputs beside its program (`--linear-inputs`, the
/// experiment field `linear_inputs`): a line in the inputs added to a regression program's
/// value (`program::linear`), or one per output added to a classifier's logits
/// (`program::logistic`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LinearInputs {
    /// Where they predict unseen rows better than the mean or the class frequencies
    /// (regression: generalised cross-validation and a shorter description; classification:
    /// 5-fold cross-validated cross-entropy); regression leaves them out with
    /// `--no-linear-scaling`, `--metric mae`, `--shard-rows` and on a GPU, classification with
    /// `--optimise-constants` and past its size limits.
    Auto,
    /// Always, where the inputs have a spread.
    On,
    /// Never: the program alone.
    Off,
}



/// Clamps predictions to `limits` (`(lo, hi)`; NaN stays NaN), where there are some.
pub fn limit(p: &mut [f64], limits: Option<(f64, f64)>) {
    if let Some((lo, hi)) = limits {
        for v in p.iter_mut() {
            *v = v.clamp(lo, hi);
        }
    }
}

/// The limits `--output-margin margin` sets for a training target `y`: its range widened by
/// `margin` times its width on each side.
pub fn limits_of(y: &[f32], margin: f64) -> Option<(f64, f64)> {
    let lo = y.iter().map(|&v| v as f64).fold(f64::INFINITY, f64::min);
    let hi = y.iter().map(|&v| v as f64).fold(f64::NEG_INFINITY, f64::max);
    (lo <= hi).then(|| (lo - margin * (hi - lo), hi + margin * (hi - lo)))
}

/// What kind of program a model holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelKind {
    /// A formula for a numeric target (`grove evolve`).
    Regression,
    /// A classifier (`grove classify`).
    Classification,
}

/// A program and what it needs to be applied to new data.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Model {
    /// Regression or classification.
    pub kind: ModelKind,
    /// Feature names, in the order of the program's variable indices.
    pub features: Vec<String>,
    /// The target (regression) or label (classification) column's name.
    pub target: String,
    /// The tree in prefix order: `[operator name, value, output slot + 1 or 0]` per node.
    pub nodes: Vec<(String, f32, u8)>,
    /// The definitions of the user operators the tree uses, callees first
    /// ([`Model::operators_of`]); registered again when the model is read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub operators: Vec<String>,
    /// Output slots (0: the root's value is the output).
    pub n_outputs: usize,
    /// Classification: class names, by class index.
    #[serde(default)]
    pub classes: Option<Vec<String>>,
    /// Regression: the prediction is `a·f(x) + b`.
    #[serde(default)]
    pub scale: Option<(f64, f64)>,
    /// Regression with `n_outputs ≥ 2`: the prediction is `b + Σ w_k f_k(x)` over the output
    /// slots (reports before the head have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head: Option<crate::program::head::Head>,
    /// Regression: linear terms of the (unstandardised) inputs added to the prediction
    /// (`--linear-inputs`; reports before them have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub linear: Option<crate::program::linear::Linear>,
    /// Regression: `(lo, hi)`, the prediction is clamped to `[lo, hi]` (`--output-margin`; a NaN
    /// stays NaN). None: no limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<(f64, f64)>,
    /// Classification: linear terms of the inputs the program reads (after standardisation)
    /// added to each output, one per output (one for a one-output program of two classes:
    /// class 1's logit against class 0's); `--linear-inputs`, [`crate::program::logistic`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logit_terms: Option<Vec<crate::program::linear::Linear>>,
    /// Classification with a head over the program's outputs (`--outputs K`): class `c`'s logit
    /// is `c_c + Σ_m a_cm f_m` over the program's `max(1, n_outputs)` outputs, one
    /// [`crate::program::linear::Linear`] per class (fitted by multinomial logistic regression
    /// after the search; reports before it have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class_head: Option<Vec<crate::program::linear::Linear>>,
    /// Features are standardised with these statistics before the program reads them.
    #[serde(default)]
    pub standardize: Option<Standardize>,
}

/// Class `c`'s logit as text: `c + a_1*(f_1) …` over the outputs' texts `outs` (zero weights
/// left out), numbers as the renderer prints them.
pub fn head_text(h: &crate::program::linear::Linear, outs: &[String], style: crate::program::render::Style) -> String {
    use crate::program::render::{Style, number};
    let mut s = number(h.c as f32);
    for (o, &a) in outs.iter().zip(&h.a).filter(|(_, a)| **a != 0.0) {
        let sign = if a < 0.0 { "-" } else { "+" };
        let a = number(a.abs() as f32);
        s += &match style {
            Style::Latex => format!(" {sign} {a} \\left({o}\\right)"),
            Style::Sympy | Style::Infix => format!(" {sign} {a}*({o})"),
        };
    }
    s
}

/// Class `c`'s logit at each row from a classifier head and the program's outputs `out`
/// (`[K][n_rows]`, f32): `[C][n_rows]`, each summed in f64 in output order and rounded to f32,
/// as every output of grove computes it.
pub fn head_logits(head: &[crate::program::linear::Linear], out: &[f32], n_rows: usize) -> Vec<f32> {
    let mut z = vec![0.0f32; head.len() * n_rows];
    for (c, h) in head.iter().enumerate() {
        for r in 0..n_rows {
            let mut v = h.c;
            for (m, &a) in h.a.iter().enumerate() {
                v += a * out[m * n_rows + r] as f64;
            }
            z[c * n_rows + r] = v as f32;
        }
    }
    z
}

impl Model {
    /// Encodes a tree's nodes.
    pub fn encode(nodes: &[Node]) -> Vec<(String, f32, u8)> {
        nodes.iter().map(|n| (n.op.name().to_string(), n.value, n.out)).collect()
    }

    /// The definitions a tree's user operators need ([`Model::operators`]).
    pub fn operators_of(nodes: &[Node]) -> Vec<String> {
        crate::program::ops::user::definitions_for(nodes.iter().map(|n| n.op))
    }

    /// The tree, decoded and checked against the model ([`crate::program::tree::decode`]: it
    /// reads the model's features and writes its output slots), with the rest of the model that
    /// predictions read: class names that fit the outputs (one per output, or two for one
    /// output), a finite scaling, and a standardisation of one finite mean and one positive
    /// standard deviation per feature. Every path that applies a model (predict, export,
    /// plots, Python) reads the tree through here.
    pub fn tree(&self) -> Result<Vec<Node>> {
        let n = self.features.len();
        // Its own operators first; a tree naming one the model does not define is refused.
        crate::program::ops::user::load_saved(&self.operators, self.nodes.iter().map(|n| n.0.as_str()), "the model").map_err(|e| anyhow!(e))?;
        let nodes = crate::program::tree::decode(&self.nodes, n, self.n_outputs).map_err(|e| anyhow!("the model's tree: {e}"))?;
        if let Some(h) = &self.class_head {
            ensure!(self.kind == ModelKind::Classification, "a regression model with a classifier's head");
            ensure!(self.logit_terms.is_none(), "a classifier with both a head and linear terms per output");
            let classes = self.classes.as_ref().context("a classification model without class names")?;
            ensure!(h.len() == classes.len(), "the model's head has {} classes; it names {}", h.len(), classes.len());
            for (c, h) in h.iter().enumerate() {
                h.check(self.n_outputs.max(1)).map_err(|e| anyhow!("the head of class {c}: {e}").context("the model's head reads the program's outputs"))?;
            }
        } else if self.kind == ModelKind::Classification {
            let classes = self.classes.as_ref().context("a classification model without class names")?;
            let want = if self.n_outputs == 0 { 2 } else { self.n_outputs };
            ensure!(
                classes.len() == want,
                "the model has {} class names for {} output(s): one per output, or two for one output",
                classes.len(),
                self.n_outputs.max(1)
            );
        }
        if let Some((a, b)) = self.scale {
            ensure!(a.is_finite() && b.is_finite(), "the model's scaling ({a}, {b}) is not finite");
        }
        if let Some(l) = &self.linear {
            ensure!(self.kind == ModelKind::Regression, "a classification model with linear terms");
            l.check(n).map_err(|e| anyhow!("the model's linear terms: {e}"))?;
        }
        if let Some((lo, hi)) = self.limits {
            ensure!(self.kind == ModelKind::Regression && lo <= hi && lo.is_finite() && hi.is_finite(), "the model's limits [{lo}, {hi}] must be finite and in order, on a regression model");
        }
        if let Some(terms) = &self.logit_terms {
            ensure!(self.kind == ModelKind::Classification, "a regression model with linear terms per output");
            ensure!(
                terms.len() == self.n_outputs.max(1),
                "the model has linear terms for {} outputs; its program has {}",
                terms.len(),
                self.n_outputs.max(1)
            );
            for (k, t) in terms.iter().enumerate() {
                t.check(n).map_err(|e| anyhow!("the model's linear terms of output {k}: {e}"))?;
            }
        }
        if let Some(s) = &self.standardize {
            ensure!(
                s.mean.len() == n && s.std.len() == n,
                "the model's standardisation has {} means and {} deviations for {n} features",
                s.mean.len(),
                s.std.len()
            );
            let bad = s.mean.iter().zip(&s.std).position(|(m, d)| !(m.is_finite() && d.is_finite() && *d > 0.0));
            if let Some(j) = bad {
                bail!("the model's standardisation of feature {j} (mean {}, deviation {}) is not usable", s.mean[j], s.std[j]);
            }
        }
        Ok(nodes)
    }

    /// The program's outputs on the rows of `table`: `[max(1, n_outputs)][n_rows]` (a classifier
    /// head's logits, `[classes][n_rows]`, where the model has one: [`Model::outputs_of`]). The
    /// features are read by name; a missing one is an error that lists the file's columns.
    pub fn outputs(&self, table: &Table, file: &str) -> Result<(Vec<f32>, usize)> {
        let (x, n_rows) = self.features_of(table, file)?;
        self.outputs_of(x, n_rows).map(|out| (out, n_rows))
    }

    /// The model's features read by name from `table`: `[features][n_rows]`, f32, and the row
    /// count.
    fn features_of(&self, table: &Table, file: &str) -> Result<(Vec<f32>, usize)> {
        let n_rows = table.rows.len();
        let mut x = Vec::with_capacity(self.features.len() * n_rows);
        let columns = self.check_columns(&table.names, file)?;
        for j in columns {
            // The data reader's hint names training's --label, which predict has not.
            let col = numeric_column(table, j, file).map_err(|mut e| {
                if let Some(at) = e.message.find(" (if it holds the classes") {
                    e.message.truncate(at);
                }
                e
            })?;
            x.extend(col.into_iter().map(|v| v as f32));
        }
        Ok((x, n_rows))
    }

    /// The index in `names` (a data file's header) of each of the model's features, or an
    /// error naming the first one missing and (up to 20 of) the file's columns.
    pub fn check_columns(&self, names: &[String], file: &str) -> Result<Vec<usize>> {
        let index: std::collections::HashMap<&str, usize> = names.iter().enumerate().rev().map(|(j, n)| (n.as_str(), j)).collect();
        self.features
            .iter()
            .map(|name| {
                index.get(name.as_str()).copied().with_context(|| {
                    const SHOWN: usize = 20;
                    let mut shown: Vec<String> = names.iter().take(SHOWN).map(|n| crate::input::clip(n, crate::input::ECHO)).collect();
                    if names.len() > SHOWN {
                        shown.push(format!("… {} more", names.len() - SHOWN));
                    }
                    format!(
                        "{file}: the model reads the column `{}`, which the file lacks (its columns: {}); give a file with the \
                         training data's feature columns",
                        crate::input::clip(name, crate::input::ECHO),
                        shown.join(", ")
                    )
                })
            })
            .collect()
    }

    /// The program's outputs on `x` (`[features][n_rows]`, feature-major, f32, in the order
    /// of [`Model::features`], before standardisation): `[max(1, n_outputs)][n_rows]`, with a
    /// classifier's linear terms added, or its head's logits `[classes][n_rows]` where it has
    /// one ([`head_logits`]). What `grove predict` and the Python package's `predict` both apply.
    pub fn outputs_of(&self, mut x: Vec<f32>, n_rows: usize) -> Result<Vec<f32>> {
        ensure!(
            x.len() == self.features.len() * n_rows,
            "the model reads {} features; got {} values for {n_rows} rows",
            self.features.len(),
            x.len()
        );
        let nodes = self.tree()?;
        if let Some(s) = &self.standardize {
            s.apply(&mut x, n_rows);
        }
        let mut pop = Population::new(1, nodes.len().max(1), self.n_outputs);
        pop.set_tree(0, &nodes).map_err(|e| anyhow::anyhow!("the model's tree: {e}"))?;
        let offsets = self.logit_terms.as_ref().map(|t| crate::program::logistic::offsets(t, &x, n_rows));
        // The interpreter reads at least one feature column; a program of constants needs none.
        if x.is_empty() {
            x = vec![0.0; n_rows];
        }
        let mut out = crate::backend::cpu::eval::predict(&pop, 0, &x, n_rows)?;
        // Added in f32, as the search scored them (`backend::cpu::classify`).
        if let Some(o) = offsets {
            out.iter_mut().zip(o).for_each(|(v, o)| *v += o);
        }
        if let Some(h) = &self.class_head {
            return Ok(head_logits(h, &out, n_rows));
        }
        Ok(out)
    }

    /// Rows of what [`Model::outputs_of`] gives a classifier: its logits, one per class (0: one
    /// output whose sign decides between two classes).
    pub fn class_outputs(&self) -> usize {
        match &self.class_head {
            Some(h) => h.len(),
            None => self.n_outputs,
        }
    }

    /// How a regression model's outputs become its prediction: its head, else its scale
    /// (`(1, 0)` when it has neither).
    pub fn readout(&self) -> Readout {
        match &self.head {
            Some(h) => Readout::Head(h.clone()),
            None => {
                let (a, b) = self.scale.unwrap_or((1.0, 0.0));
                Readout::Scale(a, b)
            }
        }
    }

    /// A regression model's predictions on `x` (`[features][n_rows]`, feature-major, f32, in
    /// the order of [`Model::features`]): the readout of the program's outputs plus the linear
    /// terms, in f64. What `grove predict`, the plots and the Python package all apply.
    pub fn regression_predictions(&self, x: Vec<f32>, n_rows: usize) -> Result<Vec<f64>> {
        let readout = self.readout();
        ensure!(
            readout.n_outputs() == self.n_outputs,
            "the model has {} outputs but its head reads {}",
            self.n_outputs,
            readout.n_outputs()
        );
        let terms = self.linear.as_ref().map(|l| l.apply(&x, n_rows));
        let out = self.outputs_of(x, n_rows)?;
        let mut p = readout.apply(&out, n_rows);
        if let Some(t) = terms {
            for (p, t) in p.iter_mut().zip(t) {
                *p += t;
            }
        }
        limit(&mut p, self.limits);
        Ok(p)
    }

    /// Predictions as text, one per row of `table`: the class name, or the number.
    pub fn predict(&self, table: &Table, file: &str) -> Result<Vec<String>> {
        if self.kind == ModelKind::Regression {
            let (x, n) = self.features_of(table, file)?;
            return Ok(self.regression_predictions(x, n)?.iter().map(|p| format!("{p}")).collect());
        }
        let (out, n) = self.outputs(table, file)?;
        match self.kind {
            ModelKind::Regression => unreachable!("handled above"),
            ModelKind::Classification => {
                let classes = self.classes.as_ref().context("a classification model without class names")?;
                Ok(classify_outputs(&out, n, self.class_outputs(), classes.len())
                    .into_iter()
                    .map(|c| classes[c as usize].clone())
                    .collect())
            }
        }
    }
}

/// Classes predicted from outputs `[max(1, n_outputs)][n_rows]`: argmax of the outputs, or
/// with one output and two classes, class 1 where it is positive (`backend::cpu::classify`).
pub fn classify_outputs(out: &[f32], n_rows: usize, n_outputs: usize, n_classes: usize) -> Vec<u32> {
    let mut z = vec![0.0f64; n_classes];
    (0..n_rows)
        .map(|i| {
            if n_outputs == 0 {
                z[1] = out[i] as f64;
            } else {
                for (k, v) in z.iter_mut().enumerate() {
                    *v = out[k * n_rows + i] as f64;
                }
            }
            argmax(&z) as u32
        })
        .collect()
}

/// Class probabilities `[n_rows][n_classes]` (row-major) from outputs `[n_outputs][n_rows]`:
/// the softmax of each row's outputs, consistent with [`classify_outputs`] (the predicted class
/// has the largest probability, and the lowest index among equal ones). A NaN output gets 0;
/// with +inf outputs the predicted class gets 1; a row of NaN only is uniform. Needs
/// `n_outputs == n_classes` (one output per class).
pub fn class_probabilities(out: &[f32], n_rows: usize, n_classes: usize) -> Vec<f64> {
    let mut p = vec![0.0f64; n_rows * n_classes];
    let mut z = vec![0.0f64; n_classes];
    for (i, row) in p.chunks_mut(n_classes.max(1)).enumerate().take(n_rows) {
        for (k, v) in z.iter_mut().enumerate() {
            *v = out[k * n_rows + i] as f64;
        }
        let best = argmax(&z);
        let top = z[best];
        if top.is_nan() {
            row.fill(1.0 / n_classes as f64);
        } else if top == f64::INFINITY {
            row[best] = 1.0;
        } else {
            for (q, &v) in row.iter_mut().zip(&z) {
                *q = if v.is_nan() { 0.0 } else { (v - top).exp() };
            }
            let sum: f64 = row.iter().sum();
            row.iter_mut().for_each(|q| *q /= sum);
        }
    }
    p
}

/// Reads the model of a run report (`model`), with an error that says what the file lacks.
pub fn load(path: &std::path::Path) -> Result<Model> {
    let bytes = crate::input::read_bytes(path, "the report", crate::input::REPORT_BYTES)?;
    from_json(&bytes, &path.display().to_string())
}

/// Reads the model of a run report from the report's bytes (`origin` names it in errors):
/// JSON with a `model` whose fields read and whose tree and rest check ([`Model::tree`]).
pub fn from_json(bytes: &[u8], origin: &str) -> Result<Model> {
    let v: serde_json::Value = serde_json::from_slice(bytes).with_context(|| format!("{origin} is not JSON"))?;
    from_value(&v, origin)
}

/// [`from_json`] of a report already read.
pub fn from_value(v: &serde_json::Value, origin: &str) -> Result<Model> {
    let Some(m) = v.get("model") else {
        bail!("{origin} has no `model`: give a report written by `grove classify --report` or `grove evolve --report`");
    };
    let model: Model = serde_json::from_value(m.clone())
        .map_err(|e| anyhow!("{origin}: the `model` cannot be read: {}", crate::program::clip(&e.to_string(), 200)))?;
    model.tree().with_context(|| format!("{origin}: the model cannot be applied"))?;
    // Two features of one name would read one column twice (predict) and declare one
    // parameter twice (export's C).
    let mut seen = std::collections::HashSet::new();
    if let Some(dup) = model.features.iter().find(|f| !seen.insert(f.as_str())) {
        bail!("{origin}: the model's features name `{}` twice: give the report as grove wrote it", crate::input::clip(dup, crate::input::ECHO));
    }
    Ok(model)
}

/// A report's `operators`: for each user operator `nodes` use (callees first), its name, its
/// definition and a line of Python that defines it for sympy (`name = lambda a: …`, over the
/// functions of [`SYMPY_PRELUDE`](crate::program::render::SYMPY_PRELUDE)), to run before
/// `sympify` as the prelude is; `None` when the tree uses none.
pub fn operators_json(nodes: &[Node]) -> Option<serde_json::Value> {
    use crate::program::ops::user;
    let texts = user::definitions_for(nodes.iter().map(|n| n.op));
    let ops: Vec<_> = user::registered().into_iter().filter(|u| texts.contains(&u.text)).collect();
    (!ops.is_empty()).then(|| {
        serde_json::Value::Array(
            ops.iter()
                .map(|u| serde_json::json!({"name": u.name, "definition": u.text, "sympy": crate::program::render::sympy_definition(u)}))
                .collect(),
        )
    })
}
