//! Choosing the returned program on rows evolution never saw (issue 16). On noisy data the
//! training-error minimum overfits, and more search makes it worse; so a seeded fraction of
//! the training rows is held out ([`Plan`]), the hall of fame's Pareto front (error against
//! size) is scored on them, and the returned program is chosen by a rule ([`Select`]):
//! the lowest validation error, PySR's score (the steepest drop of log-loss per node), or the
//! training-error minimum as before. The held-out rows never reach the fitness: the tasks
//! evolve on the rest and score the front on them only after the run.

use anyhow::{Result, bail, ensure};

use crate::program::tree::Node;
use super::crossval::{Difference, Score};
use super::defaults::GUARD_TRIM;
use super::report::FameRow;

/// How the returned program is chosen (`--select`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Select {
    /// `validation` when there are validation rows, else the task's rule for small data
    /// (`grove evolve`: `cv`; `grove classify`: `train`, or `mdl` with linear terms).
    #[default]
    Auto,
    /// The front member with the lowest validation error (ties: the smaller).
    Validation,
    /// PySR's score: the front member after the steepest drop of ln(training loss) per node
    /// (ties: the lower validation error, then the smaller).
    Pareto,
    /// The smallest description length on the training rows (the data's cost under the model
    /// plus the model's own, `description_length`), so no rows are held out.
    Mdl,
    /// `grove evolve` only: k-fold cross-validation of the whole fit on the training rows
    /// (`--folds`, default 5): the terms, the search and the fitted numbers repeated without
    /// each fold, so no rows are held out, at k more searches. The mean, the linear terms alone
    /// and the ridge on every input are candidates beside each size of the front, all scored
    /// on the same held-out rows, and the one of lowest error is returned (ties: the simpler;
    /// a simple model lowest gives way to a simpler one within one standard error of their
    /// paired difference)
    Cv,
    /// `grove evolve` only: k-fold cross-validation of the front (`--folds`, default
    /// [`super::defaults::FOLDS`]): every member's fitted numbers (its constants where the run
    /// fits them, its scaling or head, its linear terms) refitted without each fold and scored
    /// on it; the mean and the linear terms alone are candidates too, and the smallest
    /// candidate within one standard error of the lowest error is returned
    /// ([`choose_resampled`]).
    Folds,
    /// The lowest training fitness of the run (what grove returned before validation).
    Train,
}

impl Select {
    /// The name as the command line spells it.
    pub fn name(self) -> &'static str {
        match self {
            Select::Auto => "auto",
            Select::Validation => "validation",
            Select::Pareto => "pareto",
            Select::Mdl => "mdl",
            Select::Cv => "cv",
            Select::Folds => "folds",
            Select::Train => "train",
        }
    }
}

/// Training rows from which the automatic choice holds out validation rows. Measured
/// (`docs/benchmarks.md`, issue 16): with 150 or 225 training rows, losing a quarter of them to
/// validation cost more test R² than choosing on them gained; with 375 it gained.
pub const AUTO_MIN_ROWS: usize = 300;

/// The validation fraction the automatic choice holds out.
pub const AUTO_FRACTION: f64 = 0.25;

/// What `--select auto` does for a task: from `min_rows` training rows it holds out
/// [`AUTO_FRACTION`] of them and chooses on them; below, it applies `small` to the whole
/// training set. A bare [`Select`] is the rule below [`AUTO_MIN_ROWS`] (classification's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Auto {
    /// The rule without validation rows.
    pub small: Select,
    /// Training rows from which validation rows are held out.
    pub min_rows: usize,
}

impl From<Select> for Auto {
    fn from(small: Select) -> Auto {
        Auto { small, min_rows: AUTO_MIN_ROWS }
    }
}

/// The validation split and rule a run uses, resolved from the settings and the row count.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// Fraction of the training rows held out (0: none).
    pub fraction: f64,
    /// The rule asked for (may be `auto`).
    pub asked: Select,
    /// The rule applied: never `auto`.
    pub rule: Select,
    /// Why the rule is what it is, when `auto` decided.
    pub note: Option<String>,
}

/// Checks a validation fraction (`--validation-fraction`, field `validation_fraction`).
pub fn check_fraction(fraction: Option<f64>) -> Result<()> {
    if let Some(f) = fraction {
        ensure!((0.0..1.0).contains(&f), "--validation-fraction (validation_fraction) must be in [0, 1), got {f}");
    }
    Ok(())
}

/// Refuses a test file together with a test fraction (the test rows come from one place), and
/// an empty path.
pub fn check_test_data(test_data: Option<&str>, test_fraction: f64) -> Result<()> {
    let Some(path) = test_data else { return Ok(()) };
    ensure!(!path.trim().is_empty(), "--test-data (test_data) is empty: give a file with the training data's columns");
    ensure!(
        test_fraction == 0.0,
        "give --test-data (test_data) or --test-fraction (test_fraction) {test_fraction}, not both: the test rows come from the file, or from the training data"
    );
    Ok(())
}

impl Plan {
    /// The plan for `n_train` training rows: `fraction` `None` holds out [`AUTO_FRACTION`] when
    /// there are at least `auto.min_rows` rows and the rule does not choose on the training
    /// rows (`train`, `mdl`, `cv`, `folds`), else none; `auto` becomes `validation` with
    /// validation rows and `auto.small` (the task's choice: `cv` for regression, `train`
    /// for classification, `task::base::defaults`) without. `validation` without validation
    /// rows is an error.
    pub fn new(fraction: Option<f64>, select: Select, n_train: usize, auto: impl Into<Auto>) -> Result<Plan> {
        check_fraction(fraction)?;
        let Auto { small, min_rows } = auto.into();
        let enough = n_train >= min_rows;
        let chooses_on_train = matches!(select, Select::Train | Select::Mdl | Select::Cv | Select::Folds);
        let f = fraction.unwrap_or(if enough && !chooses_on_train { AUTO_FRACTION } else { 0.0 });
        let (rule, note) = match select {
            Select::Auto if f > 0.0 => (Select::Validation, None),
            Select::Auto => {
                let why = if fraction.is_some() {
                    "no validation rows (--validation-fraction 0)".to_string()
                } else {
                    format!("no validation rows ({n_train} training rows, fewer than the {min_rows} the automatic split needs)")
                };
                (small, Some(format!("{why}: {}", returned(small))))
            }
            Select::Validation if f == 0.0 => {
                if fraction.is_some() {
                    bail!("--select validation needs validation rows: give --validation-fraction above 0 (validation_fraction)");
                }
                bail!(
                    "--select validation needs validation rows, and {n_train} training rows are fewer than the {min_rows} the automatic split needs: give --validation-fraction F (validation_fraction)"
                );
            }
            other => (other, None),
        };
        Ok(Plan { fraction: f, asked: select, rule, note })
    }
}

impl Plan {
    /// This plan when its automatic validation split cannot be made (`why`: e.g. every class
    /// has one row): no validation rows, and `auto` becomes `small` with the reason in the
    /// note. An explicit fraction, or `validation`, keeps the error.
    pub fn without_validation(self, fraction: Option<f64>, why: anyhow::Error, small: Select) -> Result<Plan> {
        if fraction.is_some() || self.asked == Select::Validation {
            return Err(why);
        }
        let rule = if self.asked == Select::Auto { small } else { self.asked };
        let note = Some(format!("no validation rows ({why:#}): {}", returned(small)));
        Ok(Plan { fraction: 0.0, asked: self.asked, rule, note: if self.asked == Select::Auto { note } else { None } })
    }
}

impl Plan {
    /// This plan with `small` as the rule `auto` applies without validation rows (`why` says
    /// why it changed); a plan with validation rows or an asked rule is unchanged.
    pub fn with_small_rule(self, small: Select, why: &str) -> Plan {
        if self.asked != Select::Auto || self.fraction > 0.0 || self.rule == small {
            return self;
        }
        let note = self.note.map(|n| n.replace(returned(self.rule), &format!("{} ({why})", returned(small))));
        Plan { rule: small, note, ..self }
    }
}

impl Plan {
    /// This plan with `rule` applied instead of the one it had, `why` saying why in the note.
    pub fn instead(self, rule: Select, why: &str) -> Plan {
        let note = format!("{why}: {}", returned(rule));
        let note = Some(match self.note {
            Some(n) => format!("{n}; {note}"),
            None => note,
        });
        Plan { rule, note, ..self }
    }
}

/// What `auto` returns by `rule` without validation rows, in words.
fn returned(rule: Select) -> &'static str {
    match rule {
        Select::Mdl => "the smallest description length is returned",
        Select::Cv => "the candidates are cross-validated with the whole fit repeated on each fold, and the lowest is returned (a simple model gives way to a simpler one within one standard error)",
        Select::Folds => "the candidates are cross-validated and the smallest within one standard error of the lowest is returned",
        Select::Pareto => "the highest Pareto score on the front is returned",
        _ => "the training-error minimum is returned",
    }
}

/// One member of the front as the rules read it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Candidate {
    /// Size in nodes.
    pub size: usize,
    /// Training loss (the fitness without the parsimony penalty).
    pub loss: f64,
    /// Loss on the validation rows, in the same measure (`None` without validation rows;
    /// `+inf` where not finite).
    pub validation: Option<f64>,
    /// Its description length on the training rows ([`description_length`]; `None` where the
    /// task's loss is no likelihood).
    pub description: Option<f64>,
    /// The k-fold cross-validated mean squared error of its size on the training rows
    /// ([`super::crossval::SizeCurve`]; `None` where not computed, `+inf` where not finite).
    pub cv: Option<f64>,
    /// Its resampled error (`folds`: k-fold cross-validation of its fitted numbers; with
    /// validation rows: on them) and that error's standard error; `None` where not computed.
    pub resampled: Option<super::crossval::Score>,
}

/// A two-part description length, in nats, of a model of `size` nodes with `params` fitted
/// numbers, each node one of `primitives` kinds, whose negative log-likelihood on `n_rows`
/// training rows is `nll` (up to a constant that is the same for every model): `nll + size ·
/// ln(primitives) + params / 2 · ln(n_rows)`. The structure costs what naming each node costs
/// (Bartlett et al., 2023, without the Fisher-information refinement of each parameter's
/// precision), and each parameter what stating it to the precision the rows support costs
/// (Rissanen; the BIC's term). Under Gaussian errors `nll = n/2 · ln(MSE)`
/// ([`gaussian_nll`]); under cross-entropy it is `n · CE`.
pub fn description_length(nll: f64, size: usize, primitives: usize, params: usize, n_rows: usize) -> f64 {
    nll + size as f64 * (primitives.max(2) as f64).ln() + params as f64 / 2.0 * (n_rows.max(1) as f64).ln()
}

/// The Gaussian negative log-likelihood of `n_rows` residuals with mean square `mse`, less the
/// terms every model shares: `n/2 · ln(MSE)`, the MSE floored at the smallest positive f64 (a
/// perfect fit is then the best, not `-inf`); `+inf` for an invalid model.
pub fn gaussian_nll(mse: f64, n_rows: usize) -> f64 {
    if mse.is_nan() || mse == f64::INFINITY { f64::INFINITY } else { n_rows as f64 / 2.0 * mse.max(f64::MIN_POSITIVE).ln() }
}

/// The numbers a tree's fitting chose: its constant leaves, a grammar's constants `c[i]`
/// counted once each however often they occur.
pub fn constants_of(nodes: &[crate::program::tree::Node]) -> usize {
    use crate::program::Op;
    let tied = |i: usize| i > 0 && nodes[i - 1].op == Op::Slot;
    let own = (0..nodes.len()).filter(|&i| nodes[i].op == Op::Const && !tied(i)).count();
    own + crate::program::tree::slot_values(nodes).len()
}

/// The kinds of node the programs of a front are built of: every operator used (variables
/// and constants counted per kind), plus each of `n_features` variables. At least 2.
pub fn primitives_of<'a>(trees: impl IntoIterator<Item = &'a [crate::program::tree::Node]>, n_features: usize) -> usize {
    let mut ops = std::collections::BTreeSet::new();
    for t in trees {
        ops.extend(t.iter().filter(|n| n.op != crate::program::Op::Var).map(|n| n.op as u8));
    }
    (ops.len() + n_features).max(2)
}

/// PySR's score of each member of a front sorted by size (losses decreasing):
/// `score_i = -(ln L_i - ln L_{i-1}) / (c_i - c_{i-1})`, 0 for the first. Losses are floored
/// at the smallest positive f64 so that a zero loss gives a large finite score.
pub fn pareto_scores(front: &[Candidate]) -> Vec<f64> {
    let ln = |l: f64| l.max(f64::MIN_POSITIVE).ln();
    let mut out = Vec::with_capacity(front.len());
    for (i, c) in front.iter().enumerate() {
        if i == 0 {
            out.push(0.0);
            continue;
        }
        let p = &front[i - 1];
        let dc = c.size as f64 - p.size as f64;
        let s = -(ln(c.loss) - ln(p.loss)) / dc;
        out.push(if s.is_nan() { f64::NEG_INFINITY } else { s });
    }
    out
}

/// The validation loss as the rules compare it: missing and NaN read as `+inf`.
fn val_key(c: &Candidate) -> f64 {
    finite_or_inf(c.validation)
}

/// The first member (the smallest, as `front` is sorted by size) with the lowest finite `key`.
fn lowest(front: &[Candidate], key: impl Fn(&Candidate) -> f64) -> Option<usize> {
    let (mut best, mut low) = (None, f64::INFINITY);
    for (i, c) in front.iter().enumerate() {
        if key(c) < low {
            low = key(c);
            best = Some(i);
        }
    }
    best
}

/// A score as the rules compare it: missing and NaN read as `+inf`.
fn finite_or_inf(v: Option<f64>) -> f64 {
    v.filter(|v| !v.is_nan()).unwrap_or(f64::INFINITY)
}

/// The front member `rule` returns, with a line saying why; `None` for `train` (the run's best
/// is returned, which may lie off the front) and for `validation` when no member has a finite
/// validation loss. `front` is sorted by size.
pub fn choose(front: &[Candidate], rule: Select) -> Option<(usize, String)> {
    let n = front.len();
    match rule {
        Select::Train | Select::Auto => None,
        Select::Validation => lowest(front, val_key).map(|i| (i, format!("lowest validation loss of the {n} programs on the front"))),
        Select::Mdl => lowest(front, |c| finite_or_inf(c.description))
            .map(|i| (i, format!("smallest description length (fit plus model, in nats) of the {n} programs on the front"))),
        Select::Cv => lowest(front, |c| finite_or_inf(c.cv))
            .map(|i| (i, format!("lowest cross-validated error at its size (the whole fit repeated without each fold) of the {n} programs on the front"))),
        Select::Folds => {
            let scores: Vec<Option<Score>> = front.iter().map(|c| c.resampled).collect();
            one_standard_error(&scores).map(|(i, low)| (i, format!("the smallest of the {n} programs on the front whose resampled error is within one standard error of the lowest ({})", low.describe())))
        }
        Select::Pareto => {
            let scores = pareto_scores(front);
            let mut best: Option<usize> = None;
            for i in 0..n {
                best = match best {
                    None => Some(i),
                    Some(b) if scores[i] > scores[b] || (scores[i] == scores[b] && val_key(&front[i]) < val_key(&front[b])) => Some(i),
                    keep => keep,
                };
            }
            best.map(|i| (i, format!("highest Pareto score (steepest drop of ln loss per node) of the {n} programs on the front")))
        }
    }
}

/// The one-standard-error rule (Breiman et al., 1984): of `scores`, ordered from the simplest
/// candidate to the most complex, the first whose error is at most the lowest error plus that
/// lowest error's standard error; with it, the lowest. `None` where no score is finite.
pub fn one_standard_error(scores: &[Option<Score>]) -> Option<(usize, Score)> {
    let key = |s: &Option<Score>| s.map_or(f64::INFINITY, |s| if s.mse.is_nan() { f64::INFINITY } else { s.mse });
    let low = lowest_index(scores.iter().map(key))?;
    let best = scores[low]?;
    let se = if best.se.is_finite() { best.se } else { 0.0 };
    let pick = scores.iter().position(|s| key(s) <= best.mse + se).unwrap_or(low);
    Some((pick, best))
}

/// The index of the first lowest finite value.
fn lowest_index(values: impl Iterator<Item = f64>) -> Option<usize> {
    let (mut best, mut low) = (None, f64::INFINITY);
    for (i, v) in values.enumerate() {
        if v < low {
            low = v;
            best = Some(i);
        }
    }
    best
}

/// A model simpler than any program on the front, which the resampled choice always weighs
/// ([`choose_resampled`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Baseline {
    /// The training target's mean.
    Mean,
    /// The linear terms of the inputs alone (`program::linear`), whether or not the run's
    /// programs carry them.
    Linear,
    /// A ridge regression on every input (`program::linear::fit_every`), where the terms chose
    /// fewer.
    Every,
}

impl Baseline {
    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Baseline::Mean => "the mean",
            Baseline::Linear => "the linear terms alone",
            Baseline::Every => "the ridge regression on every input",
        }
    }
}

/// What [`choose_resampled`] returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pick {
    /// A model simpler than the front's.
    Baseline(Baseline),
    /// The front member of this index.
    Member(usize),
}

/// How [`choose_resampled`] weighs a candidate against the lowest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Band {
    /// The one-standard-error rule: the simplest candidate within the lowest's standard error
    /// (`folds`, `validation`).
    OneSe,
    /// The lowest error, ties to the simpler (`cv`, whose folds search every shape again, so
    /// that no program's error is optimistic: measured in `docs/quality.md`, issue 56, the
    /// one-standard-error band there, even paired row by row, returned the terms or the mean
    /// where the programs predicted better on 12 to 46 rows). Where the lowest is a simple
    /// model, the simple models are weighed by the one-standard-error rule on their paired
    /// differences (the `paired` of [`choose_resampled`]): the ridge on every input is returned
    /// over the terms only where it is lower by more than that, as on a line in noise with an
    /// input that does not matter.
    Lowest,
}

/// The resampled choice: the candidates, ordered from the simplest (the mean, then the linear
/// terms alone and the ridge on every input, where fitted, then the front by size: `simple`
/// holds the first, the mean first), are compared by their resampled
/// errors, and the one-standard-error rule returns the first within one standard error of the
/// lowest ([`one_standard_error`]), or with [`Band::Lowest`] the lowest. The returned model's
/// resampled error is then never above the better of the mean's and the terms' (a simpler
/// candidate would be within the band first), and where a tie between a program and a simpler
/// candidate is possible, the simpler wins. `None` where no candidate has a finite resampled
/// error.
pub fn choose_resampled(front: &[Candidate], simple: &[(Baseline, Score)], how: &str, band: Band, paired: Option<Paired>) -> Option<(Pick, String)> {
    let mut order: Vec<(Pick, Option<Score>)> = simple.iter().map(|(b, s)| (Pick::Baseline(*b), Some(*s))).collect();
    order.extend(front.iter().enumerate().map(|(i, c)| (Pick::Member(i), c.resampled)));
    let scores: Vec<Option<Score>> = order.iter().map(|o| o.1).collect();
    let key = |s: &Option<Score>| s.map_or(f64::INFINITY, |s| if s.mse.is_nan() { f64::INFINITY } else { s.mse });
    let (i, low) = match band {
        Band::OneSe => one_standard_error(&scores)?,
        Band::Lowest => {
            let i = lowest_index(scores.iter().map(key))?;
            // A simple model lowest: the simplest simple model within the paired standard error
            // of it, and then no simpler one lower than that.
            if let (Pick::Baseline(_), Some(f)) = (order[i].0, paired) {
                let within = |j: usize| {
                    f(order[j].0, order[i].0).map(|d| d.score).is_some_and(|d| d.mse.is_finite() && d.se.is_finite() && d.mse <= d.se)
                };
                let mut j = (0..i).find(|&j| within(j)).unwrap_or(i);
                while let Some(k) = (0..j).find(|&k| key(&scores[k]) <= key(&scores[j])) {
                    j = k;
                }
                (j, scores[i].expect("the lowest has a score"))
            } else {
                (i, scores[i].expect("the lowest has a score"))
            }
        }
    };
    let (pick, score) = (order[i].0, scores[i].expect("a pick has a score"));
    let n = order.len();
    let name = |p: Pick| match p {
        Pick::Baseline(b) => b.name().to_string(),
        Pick::Member(m) => format!("the {}-node program", front[m].size),
    };
    let (lowest, what) = (name(order[lowest_index(scores.iter().map(key))?].0), name(pick));
    let why = if score == low {
        format!("{what} has the lowest {how} error of the {n} candidates (the simple ones, then the front): {}", low.describe())
    } else {
        format!(
            "{what} is the simplest of the {n} candidates (the simple ones, then the front) within one standard error of the lowest {how} error: {} against {} for {lowest}",
            score.describe(),
            low.describe()
        )
    };
    Some((pick, why))
}

/// A simple candidate of the description-length choice: its description length on the
/// training rows and, where the front was cross-validated, its resampled error.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Described {
    /// Description length in nats ([`description_length`]).
    pub description: f64,
    /// Resampled error, where measured.
    pub resampled: Option<Score>,
}

/// The paired comparison of two candidates' resampled errors ([`Difference`]: the mean, over
/// the held-out rows, of the first's loss less the second's, its standard error and its
/// trimmed mean); `None` where the per-row losses were not kept. Two candidates scored on the
/// same rows err together on the hard rows, so the standard error of their difference is far
/// smaller than either's own.
pub type Paired<'a> = &'a dyn Fn(Pick, Pick) -> Option<Difference>;

/// The margin a comparison of [`lower_by_one_se`] was decided by.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Margin {
    /// The standard error of the two candidates' paired difference.
    Paired(Score),
    /// The first's own standard error.
    Own,
    /// The first's own standard error, which its trimmed gain (this) does not exceed.
    Trimmed(f64),
}

/// Whether `a` is lower than `b` in resampled error by more than one standard error, and the
/// margin that decided it. Between simple models, the standard error of their paired
/// difference where `paired` gives a finite one: there the folds' errors are honest (no shape
/// of theirs was searched), and pairing resolves the small gains of the ridge on every input
/// over the terms. Otherwise `a`'s own standard error. A program's shape was searched on every
/// row, so its cross-validated error is optimistic by an amount the folds do not see, and its
/// own standard error is the margin kept against that (measured in `docs/quality.md`, issue
/// 56: paired differences for programs too returned 34-node programs below the terms on the
/// noisy 4774-row set). Where a program is weighed against a simple model, its gain must
/// exceed that margin also with the most extreme [`GUARD_TRIM`] of the row differences
/// trimmed from each end: on noisy data the search memorises a few extreme rows, the folds
/// keep the shape that did, and the gain that rests on those rows alone is not kept.
fn lower_by_one_se(a: (Pick, Score), b: (Pick, Score), paired: Option<Paired>) -> (bool, Margin) {
    let d = paired.and_then(|f| f(a.0, b.0)).filter(|d| d.score.mse.is_finite() && d.score.se.is_finite());
    if let (Pick::Baseline(_), Pick::Baseline(_), Some(d)) = (a.0, b.0, d) {
        return (d.score.mse + d.score.se < 0.0, Margin::Paired(d.score));
    }
    let se = if a.1.se.is_finite() { a.1.se } else { 0.0 };
    if !(a.1.mse + se < b.1.mse) {
        return (false, Margin::Own);
    }
    match (a.0, b.0, d.filter(|d| d.trimmed.is_finite())) {
        (Pick::Member(_), Pick::Baseline(_), Some(d)) if !(-d.trimmed > se) => (false, Margin::Trimmed(-d.trimmed)),
        _ => (true, Margin::Own),
    }
}

/// The words for the margin of a comparison [`lower_by_one_se`] made.
fn one_se_words(m: Margin) -> String {
    match m {
        Margin::Paired(d) => format!("the standard error of their paired difference ({})", d.describe()),
        Margin::Own => "its standard error".to_string(),
        Margin::Trimmed(gain) => format!(
            "its standard error once the {} % most extreme row differences at each end are trimmed (a gain of {gain:.4e}: the rest rests on a few rows)",
            GUARD_TRIM * 100.0
        ),
    }
}

/// The description-length choice with the simple candidates (issue 56): the shortest
/// description among `simple` (the mean, the linear terms alone, the ridge on every input) and
/// the front (ties to the simpler);
/// then, where resampled errors were measured, a guard: a pick whose resampled error is above
/// the better of the mean's and the terms' gives way to that one, so the choice never returns
/// a model the resampling finds worse than its simplest candidates; a program that is not
/// lower than them by more than one standard error gives way to the simplest of them within
/// it (the one-standard-error rule); and the ridge on every input replaces the pick where its
/// resampled error is lower by more than one standard error ([`lower_by_one_se`]: paired
/// between simple models, a program's own otherwise). `None` where no candidate has a finite
/// description length.
pub fn choose_described(front: &[Candidate], simple: &[(Baseline, Described)], paired: Option<Paired>) -> Option<(Pick, String)> {
    let mut order: Vec<(Pick, f64, Option<Score>)> = simple.iter().map(|(b, d)| (Pick::Baseline(*b), d.description, d.resampled)).collect();
    order.extend(front.iter().enumerate().map(|(i, c)| (Pick::Member(i), finite_or_inf(c.description), c.resampled)));
    let i = lowest_index(order.iter().map(|o| if o.1.is_nan() { f64::INFINITY } else { o.1 }))?;
    let n = order.len();
    let name = |p: Pick| match p {
        Pick::Baseline(b) => b.name().to_string(),
        Pick::Member(m) => format!("the {}-node program", front[m].size),
    };
    let why = format!("{} has the smallest description length (fit plus model, in nats) of the {n} candidates (the simple ones, then the front)", name(order[i].0));
    // The guard: the simplest candidates' (the mean's, the terms') resampled errors bound the
    // pick's; the ridge on every input, a model with more numbers, replaces it only where it is
    // lower by more than one standard error.
    let score_of = |b: Baseline| order.iter().find(|o| o.0 == Pick::Baseline(b)).and_then(|o| o.2).filter(|s| s.mse.is_finite());
    let strict = [Baseline::Mean, Baseline::Linear].into_iter().filter_map(|b| score_of(b).map(|s| (b, s)));
    let strict: Vec<(Baseline, Score)> = strict.collect();
    let best_simple = strict.iter().copied().min_by(|a, b| a.1.mse.total_cmp(&b.1.mse));
    let (mut pick, mut why) = (order[i].0, why);
    let mut mine = order[i].2;
    if let (Some(m), Some((b, theirs))) = (mine, best_simple) {
        if !(m.mse <= theirs.mse) {
            why = format!("{why}, but its resampled error {} is above {}'s {}: {} is returned", m.describe(), b.name(), theirs.describe(), b.name());
            pick = Pick::Baseline(b);
            mine = Some(theirs);
        } else if let Pick::Member(_) = pick {
            // One standard error toward the simpler: a program must beat the simple models by
            // more than one standard error, else the simplest within it is returned (the
            // front's resampling is optimistic for the programs, whose structure saw every row).
            let within = strict.iter().copied().find_map(|(b, s)| {
                let (lower, d) = lower_by_one_se((pick, m), (Pick::Baseline(b), s), paired);
                (!lower).then_some((b, s, d))
            });
            if let Some((b, theirs, d)) = within {
                why = format!(
                    "{why}, but its resampled error {} is not lower than {}'s {} by more than {}: {} is returned",
                    m.describe(),
                    b.name(),
                    theirs.describe(),
                    one_se_words(d),
                    b.name()
                );
                pick = Pick::Baseline(b);
                mine = Some(theirs);
            }
        }
    }
    if let (Some(m), Some(e)) = (mine, score_of(Baseline::Every)) {
        let every = Pick::Baseline(Baseline::Every);
        let (lower, d) = lower_by_one_se((every, e), (pick, m), paired);
        if pick != every && lower {
            let b = Baseline::Every;
            why = format!("{why}; {}'s resampled error {} is lower than the pick's {} by more than {}: it is returned", b.name(), e.describe(), m.describe(), one_se_words(d));
            pick = every;
        }
    }
    Some((pick, why))
}

/// The decision for `pick` under `plan`, its reason followed by the plan's note where `auto`
/// chose the rule or the rule asked gave way.
fn decided(plan: &Plan, pick: Pick, why: String) -> Decision {
    let why = match &plan.note {
        Some(note) if plan.asked == Select::Auto || plan.rule != plan.asked => format!("{why}; {note}"),
        _ => why,
    };
    match pick {
        Pick::Baseline(b) => Decision { baseline: Some(b), member: None, is_best: false, rule: plan.rule, why },
        Pick::Member(i) => Decision { baseline: None, member: Some(i), is_best: false, rule: plan.rule, why },
    }
}

/// [`decide`] for the description length with the simple candidates ([`choose_described`]).
pub fn decide_described(plan: &Plan, front: &[Candidate], simple: &[(Baseline, Described)], paired: Option<Paired>, best_at: Option<usize>) -> Decision {
    let Some((pick, why)) = choose_described(front, simple, paired) else {
        return decide(plan, front, best_at);
    };
    decided(plan, pick, why)
}

/// What a run returns after choosing.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    /// A model simpler than any program on the front, where one is returned
    /// ([`choose_resampled`]); `member` and `is_best` are then `None` and false.
    pub baseline: Option<Baseline>,
    /// The front member returned, or (for the run's best) the member equal to it, if any.
    pub member: Option<usize>,
    /// Whether the run's best (lowest training fitness) is returned.
    pub is_best: bool,
    /// The rule applied (`train` when the run's best is returned).
    pub rule: Select,
    /// Why, in one line.
    pub why: String,
}

/// The program a decision returns: the chosen front member (with the run's GE genome when it
/// is the run's best; the hall of fame keeps trees only), or the run's best.
pub fn chosen_program(front: &[(usize, &crate::evolve::hof::Entry, f64)], decision: &Decision, outcome: &crate::evolve::Outcome) -> crate::evolve::Best {
    match decision.member.filter(|_| !decision.is_best) {
        Some(i) => {
            let e = front[i].1;
            let genome = if e.nodes == outcome.best.nodes { outcome.best.genome.clone() } else { None };
            crate::evolve::Best { fitness: e.fitness, nodes: e.nodes.clone(), generation: e.generation, genome }
        }
        None => outcome.best.clone(),
    }
}

/// Applies `plan`'s rule to `front`; `best_at` is the front member equal to the run's best,
/// if any. Falls back to the run's best when the rule finds nothing (`train`, or no finite
/// validation loss), saying why.
pub fn decide(plan: &Plan, front: &[Candidate], best_at: Option<usize>) -> Decision {
    match choose(front, plan.rule) {
        Some((i, why)) => {
            // When `auto` chose the rule, or the rule asked gave way, say why that rule.
            let why = match &plan.note {
                Some(note) if plan.asked == Select::Auto || plan.rule != plan.asked => format!("{why}; {note}"),
                _ => why,
            };
            Decision { baseline: None, member: Some(i), is_best: false, rule: plan.rule, why }
        }
        None => {
            let why = match (plan.rule, &plan.note) {
                (Select::Validation, _) => {
                    "no program on the front has a finite validation loss: the training-error minimum is returned".to_string()
                }
                (Select::Mdl, _) => {
                    "no program on the front has a description length (the fitness is no likelihood): the training-error minimum is returned".to_string()
                }
                (Select::Cv | Select::Folds, _) => {
                    "no program on the front has a finite cross-validated error: the training-error minimum is returned".to_string()
                }
                (_, Some(note)) => note.clone(),
                _ => "the lowest training fitness of the run (--select train)".to_string(),
            };
            Decision { baseline: None, member: best_at, is_best: true, rule: Select::Train, why }
        }
    }
}

/// [`decide`] for a rule that compares resampled errors (`folds`, `cv`, and regression's
/// `validation`): the baselines `mean` and `linear` join the front ([`choose_resampled`]
/// with `band`); `how` names the resampling ("5-fold
/// cross-validated", "validation"). Falls back to
/// [`decide`] where no candidate has a resampled error.
pub fn decide_resampled(plan: &Plan, front: &[Candidate], simple: &[(Baseline, Score)], how: &str, band: Band, paired: Option<Paired>, best_at: Option<usize>) -> Decision {
    let Some((pick, why)) = choose_resampled(front, simple, how, band, paired) else {
        return decide(plan, front, best_at);
    };
    decided(plan, pick, why)
}

/// The report's `selection`: the rule asked and applied, why, the split's sizes and the front
/// member returned (its index in `hall_of_fame`; null when the run's best is off the front).
pub fn selection_json(plan: &Plan, d: &Decision, training_rows: usize, validation_rows: usize) -> serde_json::Value {
    serde_json::json!({
        "asked": plan.asked.name(), "rule": d.rule.name(), "why": d.why,
        "validation_fraction": plan.fraction, "training_rows": training_rows, "validation_rows": validation_rows,
        "front_index": d.member,
    })
}

/// The report's rows of a front (`(size, entry, training loss)` by increasing size, as
/// [`HallOfFame::front`](crate::evolve::hof::HallOfFame::front) gives it) with their
/// validation losses and scores from `cands`; `selected` marks the returned program; `render`
/// gives a tree's (infix, LaTeX, sympy).
pub fn front_rows(
    front: &[(usize, &crate::evolve::hof::Entry, f64)],
    cands: &[Candidate],
    selected: Option<usize>,
    render: impl Fn(&[crate::program::tree::Node]) -> Result<(String, String, String)>,
) -> Result<Vec<crate::task::base::report::FameRow>> {
    let scores = pareto_scores(cands);
    front
        .iter()
        .zip(cands)
        .enumerate()
        .map(|(i, ((n, e, loss), c))| {
            let (equation, latex, sympy) = render(&e.nodes)?;
            Ok(crate::task::base::report::FameRow {
                complexity: *n,
                loss: *loss,
                validation_loss: c.validation.filter(|v| v.is_finite()),
                score: scores[i],
                description_length: c.description.filter(|d| d.is_finite()),
                cv_loss: c.resampled.map(|s| s.mse).or(c.cv).filter(|d| d.is_finite()),
                cv_se: c.resampled.map(|s| s.se).filter(|d| d.is_finite()),
                selected: selected == Some(i),
                equation,
                latex,
                sympy,
            })
        })
        .collect()
}

/// The hall of fame's Pareto front as rows, for a task without validation rows; `render` gives
/// a tree's (infix, LaTeX, sympy) and `parsimony` is taken off each fitness to give the loss.
/// No row is marked selected. (Regression and classification score the front on their
/// validation rows instead: [`front_rows`].)
pub fn fame_rows(
    hof: &crate::evolve::hof::HallOfFame,
    parsimony: f64,
    render: impl Fn(&[Node]) -> Result<(String, String, String)>,
) -> Result<Vec<FameRow>> {
    let front = hof.front(|e| e.fitness - parsimony * e.nodes.len() as f64);
    let cands: Vec<_> = front.iter().map(|(n, _, loss)| Candidate { size: *n, loss: *loss, ..Candidate::default() }).collect();
    front_rows(&front, &cands, None, render)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_resolves_by_row_count_and_validation_needs_rows() {
        let p = Plan::new(None, Select::Auto, 300, Select::Mdl).unwrap();
        // A task's own threshold: regression's cross-validates up to its large-data size.
        let big = Auto { small: Select::Folds, min_rows: 20_000 };
        let p2 = Plan::new(None, Select::Auto, 19_999, big).unwrap();
        assert_eq!((p2.fraction, p2.rule), (0.0, Select::Folds));
        assert!(p2.note.unwrap().contains("fewer than the 20000"));
        assert_eq!(Plan::new(None, Select::Auto, 20_000, big).unwrap().rule, Select::Validation);
        assert_eq!(Plan::new(None, Select::Folds, 1_000_000, big).unwrap().fraction, 0.0, "folds needs no validation rows");
        assert_eq!((p.fraction, p.rule, p.note.is_none()), (AUTO_FRACTION, Select::Validation, true));
        let p = Plan::new(None, Select::Auto, 299, Select::Mdl).unwrap();
        assert_eq!((p.fraction, p.rule), (0.0, Select::Mdl));
        assert_eq!(Plan::new(None, Select::Mdl, 5000, Select::Mdl).unwrap().fraction, 0.0, "mdl needs no validation rows");
        assert!(p.note.unwrap().contains("299 training rows, fewer than the 300"));
        assert_eq!(Plan::new(None, Select::Train, 500, Select::Mdl).unwrap().fraction, 0.0, "train needs no validation rows");
        assert_eq!(Plan::new(None, Select::Pareto, 500, Select::Mdl).unwrap().fraction, AUTO_FRACTION);
        assert_eq!(Plan::new(Some(0.1), Select::Auto, 20, Select::Mdl).unwrap().rule, Select::Validation, "an explicit fraction is kept");
        let e = Plan::new(Some(0.0), Select::Validation, 500, Select::Mdl).unwrap_err().to_string();
        assert!(e.contains("--select validation needs validation rows"), "{e}");
        let e = Plan::new(None, Select::Validation, 50, Select::Mdl).unwrap_err().to_string();
        assert!(e.contains("50 training rows"), "{e}");
        // An automatic split that cannot be made gives way; an explicit one does not.
        let why = || anyhow::anyhow!("no class can spare a row");
        let p = Plan::new(None, Select::Auto, 300, Select::Mdl).unwrap().without_validation(None, why(), Select::Mdl).unwrap();
        assert_eq!((p.fraction, p.rule), (0.0, Select::Mdl));
        assert!(p.note.unwrap().contains("no class can spare a row"));
        assert!(Plan::new(Some(0.2), Select::Auto, 300, Select::Mdl).unwrap().without_validation(Some(0.2), why(), Select::Mdl).is_err());
        assert!(Plan::new(None, Select::Validation, 300, Select::Mdl).unwrap().without_validation(None, why(), Select::Mdl).is_err());
        for f in [1.0, -0.1, f64::NAN] {
            let e = Plan::new(Some(f), Select::Auto, 500, Select::Mdl).unwrap_err().to_string();
            assert!(e.starts_with("--validation-fraction (validation_fraction) must be in [0, 1)"), "{e}");
        }
    }

    fn cand(size: usize, loss: f64, description: Option<f64>) -> Candidate {
        Candidate { size, loss, description, ..Candidate::default() }
    }

    #[test]
    fn mdl_takes_the_shortest_description_and_says_so() {
        // n = 50 Gaussian rows, 10 primitives: a 3-node model at MSE 1.0 against a 25-node one
        // at MSE 0.8 (nats saved by the fit: 25 ln 1.25 = 5.6; paid for 22 nodes: 50.7).
        let (n, m) = (50, 10);
        let small = description_length(gaussian_nll(1.0, n), 3, m, 2, n);
        let large = description_length(gaussian_nll(0.8, n), 25, m, 4, n);
        assert!(small < large);
        // With 100 times the rows the better fit pays for itself.
        let (n, m) = (5000, 10);
        let small_n = description_length(gaussian_nll(1.0, n), 3, m, 2, n);
        let large_n = description_length(gaussian_nll(0.8, n), 25, m, 4, n);
        assert!(large_n < small_n);
        let front = [cand(3, 1.0, Some(small)), cand(25, 0.8, Some(large)), cand(30, 0.7, None)];
        let (i, why) = choose(&front, Select::Mdl).unwrap();
        assert_eq!(i, 0);
        assert!(why.contains("description length"), "{why}");
        // A perfect fit is the best, not -inf; an invalid one never is.
        assert!(gaussian_nll(0.0, 10).is_finite() && gaussian_nll(f64::NAN, 10) == f64::INFINITY);
        // No member with a length: the run's best, saying why.
        let plan = Plan::new(None, Select::Mdl, 100, Select::Mdl).unwrap();
        let d = decide(&plan, &[cand(3, 1.0, None)], Some(0));
        assert!(d.is_best && d.why.contains("no likelihood"), "{}", d.why);
    }

    #[test]
    fn the_description_lengths_pick_gives_way_to_a_simple_model_within_its_standard_error() {
        use super::super::crossval::Score;
        let simple = |mean: Score, terms: Score| {
            vec![
                (Baseline::Mean, Described { description: 100.0, resampled: Some(mean) }),
                (Baseline::Linear, Described { description: 90.0, resampled: Some(terms) }),
            ]
        };
        let program = |mse: f64, se: f64| Candidate { size: 31, loss: 0.5, description: Some(50.0), resampled: Some(Score { mse, se }), ..Candidate::default() };
        // The program has the shortest description; the terms are within its standard error
        // (1.00 <= 0.95 + 0.1), the mean is not: the terms are returned.
        let (pick, why) = choose_described(&[program(0.95, 0.1)], &simple(Score { mse: 1.2, se: 0.1 }, Score { mse: 1.0, se: 0.1 }), None).unwrap();
        assert_eq!(pick, Pick::Baseline(Baseline::Linear), "{why}");
        assert!(why.contains("by more than its standard error"), "{why}");
        // Both within it: the simplest, the mean.
        let (pick, _) = choose_described(&[program(0.95, 0.1)], &simple(Score { mse: 1.0, se: 0.1 }, Score { mse: 0.98, se: 0.1 }), None).unwrap();
        assert_eq!(pick, Pick::Baseline(Baseline::Mean));
        // Lower by more than its standard error: the program stays.
        let (pick, _) = choose_described(&[program(0.7, 0.1)], &simple(Score { mse: 1.2, se: 0.1 }, Score { mse: 1.0, se: 0.1 }), None).unwrap();
        assert_eq!(pick, Pick::Member(0));
        // Worse than the terms: the terms, as before.
        let (pick, why) = choose_described(&[program(1.1, 0.01)], &simple(Score { mse: 1.2, se: 0.1 }, Score { mse: 1.0, se: 0.1 }), None).unwrap();
        assert_eq!(pick, Pick::Baseline(Baseline::Linear));
        assert!(why.contains("is above"), "{why}");
    }

    #[test]
    fn paired_differences_decide_between_simple_models_only() {
        use super::super::crossval::Score;
        let simple = vec![
            (Baseline::Mean, Described { description: 100.0, resampled: Some(Score { mse: 1.2, se: 0.1 }) }),
            (Baseline::Linear, Described { description: 90.0, resampled: Some(Score { mse: 1.0, se: 0.1 }) }),
            (Baseline::Every, Described { description: 95.0, resampled: Some(Score { mse: 0.95, se: 0.1 }) }),
        ];
        // The ridge is lower than the terms by 0.05: within its own standard error (0.1), but
        // by five paired standard errors on the same rows.
        let diff = |mse: f64, se: f64| Some(Difference { score: Score { mse, se }, trimmed: mse });
        let paired = |a: Pick, b: Pick| match (a, b) {
            (Pick::Baseline(Baseline::Every), Pick::Baseline(Baseline::Linear)) => diff(-0.05, 0.01),
            (Pick::Member(0), _) => diff(-0.3, 0.01),
            _ => None,
        };
        let (pick, why) = choose_described(&[], &simple, Some(&paired)).unwrap();
        assert_eq!(pick, Pick::Baseline(Baseline::Every), "{why}");
        assert!(why.contains("paired difference (-5.0000e-2 ± 1.00e-2)"), "{why}");
        // Without the pairing (or with a non-finite difference) the terms stay.
        let (pick, _) = choose_described(&[], &simple, None).unwrap();
        assert_eq!(pick, Pick::Baseline(Baseline::Linear));
        let broken = |_: Pick, _: Pick| Some(Difference { score: Score { mse: f64::INFINITY, se: f64::INFINITY }, trimmed: f64::INFINITY });
        let (pick, _) = choose_described(&[], &simple, Some(&broken)).unwrap();
        assert_eq!(pick, Pick::Baseline(Baseline::Linear));
        // A program is held to its own standard error, however tight its paired difference: its
        // shape saw every row. 0.95 ± 0.1 is within the terms' 1.0, so the terms and then the
        // ridge's paired gain over them are returned.
        let program = [Candidate { size: 5, loss: 0.5, description: Some(50.0), resampled: Some(Score { mse: 0.95, se: 0.1 }), ..Candidate::default() }];
        let (pick, why) = choose_described(&program, &simple, Some(&paired)).unwrap();
        assert_eq!(pick, Pick::Baseline(Baseline::Every), "{why}");
        assert!(why.contains("by more than its standard error"), "{why}");
        // Lower than the simple models by more than its own: the program stays.
        let program = [Candidate { resampled: Some(Score { mse: 0.7, se: 0.1 }), ..program[0] }];
        let (pick, _) = choose_described(&program, &simple, Some(&paired)).unwrap();
        assert_eq!(pick, Pick::Member(0));
    }

    #[test]
    fn a_programs_gain_that_rests_on_a_few_rows_gives_way_to_the_terms() {
        // 400 held-out rows. The terms lose 1.0 on every row, 40 on four of them; the program
        // memorised those four (its shape was searched on every row): its mean loss is far
        // lower than the terms', by much more than its standard error, but with 1 % of the row
        // differences trimmed from each end it is no better.
        let n = 400;
        let mut terms = vec![1.0; n];
        let mut program = vec![1.0; n];
        for i in 0..4 {
            terms[i * 100] = 1600.0;
            program[i * 100] = 0.0;
        }
        for i in (0..n).step_by(2) {
            program[i] += 0.002; // slightly worse on half the rows
        }
        let mean: Vec<f64> = terms.iter().map(|l| l + 1.0).collect();
        let losses = [mean, terms, program];
        let slot = |p: Pick| match p {
            Pick::Baseline(Baseline::Mean) => 0,
            Pick::Baseline(Baseline::Linear) => 1,
            Pick::Member(0) => 2,
            _ => unreachable!(),
        };
        let paired = |a: Pick, b: Pick| Some(Difference::of(&losses[slot(a)], &losses[slot(b)], GUARD_TRIM));
        let simple = vec![
            (Baseline::Mean, Described { description: 100.0, resampled: Some(Score::of(&losses[0])) }),
            (Baseline::Linear, Described { description: 90.0, resampled: Some(Score::of(&losses[1])) }),
        ];
        let own = Score::of(&losses[2]);
        let t = Score::of(&losses[1]);
        assert!(own.mse + own.se < t.mse, "the plain gain passes: {own:?} against {t:?}");
        let cand = [Candidate { size: 9, loss: 0.5, description: Some(50.0), resampled: Some(own), ..Candidate::default() }];
        let (pick, why) = choose_described(&cand, &simple, Some(&paired)).unwrap();
        assert_eq!(pick, Pick::Baseline(Baseline::Linear), "{why}");
        assert!(why.contains("most extreme row differences"), "{why}");
        // Without the per-row losses the plain gain decides, as before.
        let (pick, _) = choose_described(&cand, &simple, None).unwrap();
        assert_eq!(pick, Pick::Member(0));
        // A gain on every row survives the trimming: the program stays.
        let spread: Vec<f64> = losses[1].iter().map(|_| 0.5).collect();
        let losses = [losses[0].clone(), losses[1].clone(), spread];
        let paired = |a: Pick, b: Pick| Some(Difference::of(&losses[slot(a)], &losses[slot(b)], GUARD_TRIM));
        let cand = [Candidate { resampled: Some(Score::of(&losses[2])), ..cand[0] }];
        let (pick, why) = choose_described(&cand, &simple, Some(&paired)).unwrap();
        assert_eq!(pick, Pick::Member(0), "{why}");
    }

    #[test]
    fn primitives_count_operators_and_every_feature() {
        use crate::program::{Op, tree::Node};
        let a = [Node::func(Op::Add), Node::var(0), Node::constant(1.0)];
        let b = [Node::func(Op::Sin), Node::var(3)];
        // add, const, sin, and 4 features.
        assert_eq!(primitives_of([&a[..], &b[..]], 4), 7);
        assert_eq!(constants_of(&a), 1);
        assert_eq!(primitives_of(std::iter::empty(), 0), 2);
    }
}
