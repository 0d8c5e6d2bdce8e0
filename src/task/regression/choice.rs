//! The resampled errors of the model choice (issue 56): every candidate of a regression run's
//! choice — the training target's mean, the linear terms of the inputs alone, and each program
//! on the hall of fame's front with its fitted numbers — scored on rows its numbers were not
//! fitted to. `--select folds` (below [`crate::task::base::defaults::EVOLVE_VALIDATION_ROWS`]
//! training rows, `auto`'s rule) deals the rows the search fitted into k folds and refits
//! every candidate without each one: the terms chosen and weighted again
//! ([`crate::program::linear::fit`]), each program's constants fitted again where the run
//! fits constants (the backend's Levenberg–Marquardt, on the device the run used), and its
//! scaling, head or joint weights from the backend's sums. With validation rows, the
//! candidates are fitted on the search's rows and scored on them. Both give each candidate the
//! mean and standard error of its per-row loss ([`Score`]) for
//! [`crate::task::base::validation::choose_resampled`].

use super::*;
use crate::task::base::crossval::{Difference, Score};
use crate::task::base::defaults::GUARD_TRIM;
use crate::task::base::validation::{Baseline, Pick};

/// The candidates' resampled errors.
#[derive(Clone, Debug, PartialEq)]
pub struct Resampled {
    /// Folds (0: scored on validation rows).
    pub folds: usize,
    /// Held-out rows, over every fold.
    pub rows: usize,
    /// The training target's mean.
    pub mean: Score,
    /// The linear terms alone, where some input was chosen (else they are the mean).
    pub linear: Option<Score>,
    /// The ridge regression on every input ([`crate::program::linear::fit_every`]).
    pub every: Option<Score>,
    /// `[front]` each member of the front, by size.
    pub members: Vec<Score>,
    /// `[SIMPLE + front][rows]` every candidate's held-out loss on each row (the mean's, the
    /// terms', the ridge's, then the front's), for paired comparisons ([`Resampled::paired`]).
    pub losses: Vec<Vec<f64>>,
    /// Seconds the refits and scoring took.
    pub seconds: f64,
}

impl Resampled {
    /// How the errors were measured, in the words of the choice's reason.
    pub fn how(&self) -> String {
        if self.folds == 0 { "validation".to_string() } else { format!("{}-fold cross-validated", self.folds) }
    }

    /// The paired difference of two candidates' held-out losses, `a`'s less `b`'s, row by row
    /// ([`crate::task::base::validation::Paired`]); `None` for a front member it did not score.
    pub fn paired(&self, a: Pick, b: Pick) -> Option<Difference> {
        let slot = |p: Pick| match p {
            Pick::Baseline(Baseline::Mean) => Some(0),
            Pick::Baseline(Baseline::Linear) => Some(1),
            Pick::Baseline(Baseline::Every) => Some(2),
            Pick::Member(m) => Some(SIMPLE + m).filter(|&i| i < self.losses.len()),
        };
        let (a, b) = (&self.losses[slot(a)?], &self.losses[slot(b)?]);
        Some(Difference::of(a, b, GUARD_TRIM))
    }
}

/// Per-row losses: squared errors, or absolute ones under `--metric mae`.
fn losses(pred: &[f64], y: &[f32], metric: Metric, out: &mut [f64]) {
    for ((o, p), y) in out.iter_mut().zip(pred).zip(y) {
        let e = p - *y as f64;
        let l = if metric == Metric::Mae { e.abs() } else { e * e };
        *o = if l.is_finite() { l } else { f64::INFINITY };
    }
}

/// The held-out predictions of every program `nodes` with its numbers fitted on `train`, as
/// the run fits them: the constants (where `refit_constants` and the run fits constants,
/// one output), then the joint weights with terms refitted on `train` (one output with
/// terms), the head (several outputs, beside fixed terms), or the scaling. `[programs][held]`.
#[allow(clippy::too_many_arguments)]
fn fitted_predictions(
    settings: &EvolveSettings,
    nodes: &[&[Node]],
    train: &Dataset,
    held: &Dataset,
    terms: Option<&LinearFit>,
    refit_constants: bool,
    backend: &crate::backend::Backend,
) -> anyhow::Result<Vec<Vec<f64>>> {
    let k = settings.outputs;
    let n_out = if k > 1 { k } else { 0 };
    let fit_rows = match terms {
        Some(t) => std::borrow::Cow::Owned(residual(train, &t.linear)),
        None => std::borrow::Cow::Borrowed(train),
    };
    let max_len = nodes.iter().map(|n| n.len()).max().unwrap_or(1).max(1);
    let mut pop = Population::new(nodes.len(), max_len, n_out);
    for (i, t) in nodes.iter().enumerate() {
        // A tree that does not fit leaves the row empty, which evaluates as invalid.
        let _ = pop.set_tree(i, t);
    }
    let data = backend.regression_data(&fit_rows.x, &fit_rows.y, fit_rows.n_rows, fit_rows.n_features)?;
    let steps = if settings.islands.shard_rows { 0 } else { settings.engine.constants.steps };
    if refit_constants && steps > 0 && k <= 1 && !nodes.is_empty() {
        let all: Vec<usize> = (0..pop.size()).collect();
        let cfg = crate::backend::cpu::fit::FitConfig { steps, linear_scaling: settings.regression.linear_scaling };
        backend.fit_constants(&mut pop, &all, &data, cfg)?;
    }
    let joint = if k <= 1 { terms.and_then(|t| t.joint.as_ref()) } else { None };
    let fixed = terms.map(|t| t.linear.clone());
    let readouts: Vec<(Readout, Option<Linear>)> = if let Some(j) = joint {
        backend
            .joint_sums(&pop, &data, &j.inputs)?
            .iter()
            .map(|s| match j.fit_with(s) {
                Some((w, l)) => (Readout::Scale(w, 0.0), Some(l)),
                None => (Readout::Scale(1.0, 0.0), Some(j.alone())),
            })
            .collect()
    } else if k > 1 {
        backend.head_sums(&pop, &data)?.iter().map(|s| (Readout::Head(s.fit().unwrap_or(Head { b: 0.0, w: vec![1.0; k] })), fixed.clone())).collect()
    } else {
        let scaling = settings.regression.linear_scaling;
        backend
            .regression_sums(&pop, &data)?
            .iter()
            .map(|s| {
                let (a, b) = if scaling && s.finite { s.scale() } else { (1.0, 0.0) };
                (Readout::Scale(a, b), fixed.clone())
            })
            .collect()
    };
    let n = held.n_rows;
    let pred = backend.predictions(&pop, &held.x, n, held.n_features)?;
    let per = n_out.max(1) * n;
    anyhow::ensure!(pred.len() == pop.size() * per, "{} predictions for {} programs at {n} rows", pred.len(), pop.size());
    Ok(readouts
        .iter()
        .enumerate()
        .map(|(i, (r, l))| {
            if pop.len[i] == 0 {
                return vec![f64::NAN; n];
            }
            let mut p = r.apply(&pred[i * per..(i + 1) * per], n);
            if let Some(l) = l {
                for (p, t) in p.iter_mut().zip(l.apply(&held.x, n)) {
                    *p += t;
                }
            }
            p
        })
        .collect())
}

/// The linear terms [`crate::program::linear::fit`] chooses and weighs on `rows` (`every`: the
/// ridge on every input, [`crate::program::linear::fit_every`]), where some input is chosen.
pub fn terms_on(rows: &Dataset, every: bool) -> anyhow::Result<Option<LinearFit>> {
    let fit = if every { crate::program::linear::fit_every } else { crate::program::linear::fit };
    let fit = fit(&rows.x, &rows.y, rows.n_rows, rows.n_features).map_err(|e| anyhow::anyhow!("--linear-inputs (linear_inputs): {e}"))?;
    Ok(fit.filter(|f| f.inputs > 0 && f.joint.is_some()))
}

/// Adds the losses of the mean, the terms alone, the ridge on every input and every program,
/// fitted on `train` and scored on `held`, into `acc` at `held_rows` (`acc[0]` the mean,
/// `acc[1]` the terms, `acc[2]` the ridge, `acc[SIMPLE + m]` member `m`).
#[allow(clippy::too_many_arguments)]
fn score_part(
    settings: &EvolveSettings,
    nodes: &[&[Node]],
    train: &Dataset,
    held: &Dataset,
    held_rows: &[usize],
    program_terms: Option<&LinearFit>,
    alone: Option<&LinearFit>,
    every: Option<&LinearFit>,
    refit_constants: bool,
    backend: &crate::backend::Backend,
    acc: &mut [Vec<f64>],
) -> anyhow::Result<()> {
    let metric = settings.regression.metric;
    let n = held.n_rows;
    let mut part = vec![0.0; n];
    let mean = train.y.iter().map(|&y| y as f64).sum::<f64>() / train.n_rows.max(1) as f64;
    // The limits the model would get from these training rows (`--output-margin`).
    let limits = settings.output_margin.and_then(|m| crate::task::base::model::limits_of(&train.y, m));
    let mut put = |slot: &mut Vec<f64>, pred: &[f64]| {
        let mut pred = pred.to_vec();
        crate::task::base::model::limit(&mut pred, limits);
        losses(&pred, &held.y, metric, &mut part);
        for (&r, &l) in held_rows.iter().zip(&part) {
            slot[r] = l;
        }
    };
    put(&mut acc[0], &vec![mean; n]);
    let line = match alone {
        Some(t) => t.linear.apply(&held.x, n),
        None => vec![mean; n],
    };
    put(&mut acc[1], &line);
    let ridge = match every {
        Some(t) => t.linear.apply(&held.x, n),
        None => vec![mean; n],
    };
    put(&mut acc[2], &ridge);
    for (m, p) in fitted_predictions(settings, nodes, train, held, program_terms, refit_constants, backend)?.iter().enumerate() {
        put(&mut acc[SIMPLE + m], p);
    }
    Ok(())
}

/// `--select folds`: the front `nodes` (by size) and the two baselines cross-validated on
/// `rows` (the rows the search fitted) in `folds` folds dealt by the run's seed; `with_terms`:
/// the run's programs carry linear terms (refitted on each fold). `None` where the run was
/// stopped meanwhile.
pub fn cross_validate_front(
    settings: &EvolveSettings,
    nodes: &[&[Node]],
    rows: &Dataset,
    with_terms: bool,
    folds: usize,
    backend: &crate::backend::Backend,
    opts: &crate::task::base::options::RunOptions,
) -> anyhow::Result<Option<Resampled>> {
    let start = std::time::Instant::now();
    let f = crate::task::base::crossval::Folds::with_k(rows.n_rows, folds, settings.engine.seed);
    let mut acc = vec![vec![f64::INFINITY; rows.n_rows]; SIMPLE + nodes.len()];
    for fold in 0..f.k {
        if opts.stop.as_ref().is_some_and(|s| s.load(std::sync::atomic::Ordering::Relaxed)) {
            return Ok(None);
        }
        let (train_rows, held_rows) = (f.rows(fold, false), f.rows(fold, true));
        let train = rows.subset(&train_rows)?;
        let held = rows.subset(&held_rows)?;
        let alone = terms_on(&train, false)?;
        let every = terms_on(&train, true)?;
        let program_terms = if with_terms { alone.as_ref() } else { None };
        score_part(settings, nodes, &train, &held, &held_rows, program_terms, alone.as_ref(), every.as_ref(), true, backend, &mut acc)?;
    }
    Ok(Some(summarise(acc, f.k, rows.n_rows, start)))
}

/// `--select cv` ([`crate::task::base::crossval`]): the whole fit repeated on every `k − 1` of
/// `k` folds of `rows` (the linear terms chosen again, the search run for `generations`
/// generations from its own seed, without a time limit or target, each front member's numbers
/// fitted), and every candidate scored on the held-out fold: the mean, the terms alone and the
/// ridge on every input fitted on the fold's other rows, and each size of the run's own front
/// (`sizes`, increasing) by the largest member of at most that size on the fold's front (its
/// smallest where none is that small). No shape a held-out row is scored by was searched on
/// that row, so the candidates' per-row losses are honest and may be paired
/// ([`Resampled::paired`]). Returns the curve over every size limit for the report, and the
/// candidates' errors; `None` where the run was stopped meanwhile (Ctrl-C).
pub fn cross_validate(
    settings: &EvolveSettings,
    rows: &Dataset,
    sizes: &[usize],
    backend: &crate::backend::Backend,
    opts: &crate::task::base::options::RunOptions,
    generations: usize,
) -> anyhow::Result<Option<(crate::task::base::crossval::SizeCurve, Resampled)>> {
    let start = std::time::Instant::now();
    let k = crate::task::base::crossval::fold_count(settings.folds, rows.n_rows)?;
    let folds = crate::task::base::crossval::Folds::with_k(rows.n_rows, k, settings.engine.seed);
    let mut curve = crate::task::base::crossval::SizeCurve::new(settings.engine.max_len);
    let mut acc = vec![vec![f64::INFINITY; rows.n_rows]; SIMPLE + sizes.len()];
    let quiet = crate::task::base::options::RunOptions { quiet: true, stop: opts.stop.clone(), max_memory: opts.max_memory, log: opts.log.clone(), ..Default::default() };
    let stopped = || opts.stop.as_ref().is_some_and(|s| s.load(std::sync::atomic::Ordering::Relaxed));
    for f in 0..folds.k {
        let mut fold = settings.clone();
        fold.engine.generations = generations;
        fold.engine.seed = settings.engine.seed.wrapping_add(1 + f as u64);
        fold.budget = crate::task::base::budget::Budget::default();
        let held_rows = folds.rows(f, true);
        let train = rows.subset(&folds.rows(f, false))?;
        let held = rows.subset(&held_rows)?;
        let linear = linear_choice(&fold, &train)?;
        let joint = if fold.outputs <= 1 { linear.joint() } else { None };
        let fit_rows = match linear.linear() {
            Some(l) => std::borrow::Cow::Owned(residual(&train, l)),
            None => std::borrow::Cow::Borrowed(&train),
        };
        let searched = search_with(&fold, &fit_rows, backend, &quiet, joint)?;
        if stopped() {
            return Ok(None);
        }
        let front = searched.hof.front(|e| e.fitness - fold.regression.parsimony * e.nodes.len() as f64);
        let nodes: Vec<&[Node]> = front.iter().map(|(_, e, _)| &e.nodes[..]).collect();
        let mut part = vec![vec![f64::INFINITY; rows.n_rows]; SIMPLE + nodes.len()];
        let (alone, every) = (terms_on(&train, false)?, terms_on(&train, true)?);
        let program_terms = if linear.used { linear.fit.as_ref() } else { None };
        score_part(&fold, &nodes, &train, &held, &held_rows, program_terms, alone.as_ref(), every.as_ref(), false, backend, &mut part)?;
        let sum = |slot: &[f64]| held_rows.iter().map(|&r| slot[r]).sum::<f64>();
        let members: Vec<(usize, f64)> = front.iter().enumerate().map(|(j, (n, _, _))| (*n, sum(&part[SIMPLE + j]))).collect();
        curve.add(&members, held_rows.len());
        for s in 0..SIMPLE {
            for &r in &held_rows {
                acc[s][r] = part[s][r];
            }
        }
        for (m, &size) in sizes.iter().enumerate() {
            let Some(j) = front.iter().rposition(|(n, _, _)| *n <= size).or((!front.is_empty()).then_some(0)) else { continue };
            for &r in &held_rows {
                acc[SIMPLE + m][r] = part[SIMPLE + j][r];
            }
        }
    }
    let mut resampled = summarise(acc, folds.k, rows.n_rows, start);
    // The searches' seconds are the run's `cross_validation_seconds`; none are counted twice.
    resampled.seconds = 0.0;
    Ok(Some((curve, resampled)))
}

/// With validation rows: every candidate fitted on `rows` (the programs' constants as the
/// search left them; `terms`: the run's fitted terms, `with_terms`: the programs carry them)
/// and scored on `validation`.
pub fn score_on_validation(
    settings: &EvolveSettings,
    nodes: &[&[Node]],
    rows: &Dataset,
    validation: &Dataset,
    terms: Option<&LinearFit>,
    with_terms: bool,
    backend: &crate::backend::Backend,
) -> anyhow::Result<Resampled> {
    let start = std::time::Instant::now();
    let terms = terms.filter(|t| t.inputs > 0 && t.joint.is_some());
    let every = terms_on(rows, true)?;
    let mut acc = vec![vec![f64::INFINITY; validation.n_rows]; SIMPLE + nodes.len()];
    let all: Vec<usize> = (0..validation.n_rows).collect();
    let program_terms = if with_terms { terms } else { None };
    score_part(settings, nodes, rows, validation, &all, program_terms, terms, every.as_ref(), false, backend, &mut acc)?;
    Ok(summarise(acc, 0, validation.n_rows, start))
}

/// The simple candidates' slots before the front's: the mean, the terms, the ridge.
const SIMPLE: usize = 3;

/// The scores of the losses `acc` (the simple candidates' slots, then the front's). The
/// terms' and the ridge's are kept whether or not the run's own fits have inputs; the choice
/// weighs only those it fitted ([`super::finish`]).
fn summarise(acc: Vec<Vec<f64>>, folds: usize, rows: usize, start: std::time::Instant) -> Resampled {
    let mut scores = acc.iter().map(|l| Score::of(l));
    let mean = scores.next().expect("the mean's losses");
    let linear = scores.next();
    let every = scores.next();
    let members = scores.collect();
    Resampled { folds, rows, mean, linear, every, members, losses: acc, seconds: start.elapsed().as_secs_f64() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_paired_difference_is_taken_row_by_row() {
        // Two candidates whose losses swing together over the rows: each one's own standard
        // error is wide, their difference's is zero.
        let rows = [1.0, 9.0, 2.0, 7.0];
        let mean: Vec<f64> = rows.iter().map(|l| l + 0.5).collect();
        let acc = vec![mean, rows.to_vec(), vec![0.0; 4], rows.iter().map(|l| l - 0.25).collect()];
        let r = summarise(acc, 2, 4, std::time::Instant::now());
        assert!(r.members[0].se > 1.0 && r.linear.unwrap().se > 1.0);
        let d = r.paired(Pick::Member(0), Pick::Baseline(Baseline::Linear)).unwrap();
        assert!((d.score.mse + 0.25).abs() < 1e-12 && d.score.se.abs() < 1e-12, "{d:?}");
        assert!((d.trimmed + 0.25).abs() < 1e-12, "{d:?}");
        let d = r.paired(Pick::Baseline(Baseline::Mean), Pick::Member(0)).unwrap();
        assert!((d.score.mse - 0.75).abs() < 1e-12, "{d:?}");
        // A member it did not score has none.
        assert_eq!(r.paired(Pick::Member(1), Pick::Baseline(Baseline::Mean)), None);
    }
}
