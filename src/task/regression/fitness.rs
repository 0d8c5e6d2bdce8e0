//! How a regression program is scored: the fitness the engine minimises ([`Regression`], from
//! the interpreter's fused sums, a head's or a joint fit's), and the scores of one program on a
//! data set under its readout and linear terms.

use super::*;

/// A fitness function of the user's own (the Python package's `fitness=`): one score per
/// program, lower is better, from a batch of the programs' predictions at the rows (each
/// program's value under its linear scaling where the settings scale) and the rows' targets.
/// An error stops the run with its message; so does NaN for a program whose predictions are
/// finite (`+inf` is the worst score; a program with a non-finite prediction gets `+inf`
/// whatever the function says).
pub trait BatchFitness: Send + Sync {
    /// The function's name, for reports and messages.
    fn name(&self) -> String;
    /// One score per program of `batch` (`[programs × rows]`, on the host or on a GPU).
    fn score(&self, batch: crate::backend::PredictionBatch) -> anyhow::Result<Vec<f64>>;
}

/// Scores of one program on one data set.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scores {
    /// Mean squared error.
    pub mse: f64,
    /// Root mean squared error.
    pub rmse: f64,
    /// Mean absolute error.
    pub mae: f64,
    /// Coefficient of determination.
    pub r2: f64,
    /// The fitness of the user's own (a loss's mean or sum, or a fitness function's score),
    /// where the run has one.
    pub loss: Option<f64>,
    /// Rows whose prediction is not finite (a program that overflows 32-bit floats or divides
    /// by zero on rows unlike its training), which make the errors above infinite or NaN.
    pub not_finite: usize,
}

/// The regression task over a training set, evaluated by a backend.
pub struct Regression<'d> {
    /// Where populations are evaluated.
    pub backend: &'d crate::backend::Backend,
    /// The training data, where the backend reads it.
    pub data: crate::backend::RegressionData<'d>,
    /// Settings.
    pub config: RegressionConfig,
    /// Program outputs under the fitted head (`2 ..= MAX_HEAD`); 0 or 1: the program's value,
    /// scored from [`RegressionSums`] as `config` says; a head from
    /// [`crate::backend::Backend::head_sums`], on either backend.
    pub outputs: usize,
    /// Linear terms of the inputs each program is fitted with (`data`'s target is then their
    /// residual): the fitness is the joint fit's error
    /// ([`crate::program::linear::Joint`]).
    pub joint: Option<&'d Joint>,
    /// The rows of `data` in host memory (its target too), which lexicase selection's cases
    /// are read from ([`crate::evolve::Fitness::case_errors`]); `None`: no cases.
    pub rows: Option<&'d Dataset>,
    /// A per-row loss of the user's own, what is minimised instead of `config.metric`: the
    /// mean (or sum) over the rows of `loss(p, y)` at each program's prediction `p`, its value
    /// under linear scaling where `config` scales ([`crate::backend::Backend::loss_sums`]).
    pub loss: Option<Loss>,
    /// A fitness function of the user's own, what is minimised instead of `config.metric`
    /// ([`BatchFitness`]).
    pub fitness_fn: Option<&'d dyn BatchFitness>,
}

impl Regression<'_> {
    /// The fitness of `pop`'s trees from their sums (one output): the metric (of the linearly
    /// scaled program where the settings scale), plus parsimony per node; `+inf` for an empty
    /// tree.
    pub fn fitness_of_sums(&self, sums: &[RegressionSums], pop: &Population) -> Vec<f64> {
        sums.iter()
            .enumerate()
            .map(|(i, s)| {
                let e = error(s, self.config.metric, self.config.linear_scaling);
                if pop.len[i] == 0 { f64::INFINITY } else { e + self.config.parsimony * pop.len[i] as f64 }
            })
            .collect()
    }
}

/// The error `metric` reads from a program's joint fit with the linear terms (1 − R² against
/// the target's own spread); `+inf` for an invalid program or MAE (refused earlier).
pub fn joint_error(joint: &Joint, s: &JointSums, metric: Metric) -> f64 {
    let Some(rss) = joint.objective_with(s) else { return f64::INFINITY };
    let n = s.n as f64;
    let e = match metric {
        Metric::Mse => rss / n,
        Metric::Rmse => (rss / n).sqrt(),
        Metric::R2 if joint.syy > 0.0 => (rss / joint.syy).min(1.0),
        Metric::R2 => 0.0,
        Metric::Mae => f64::INFINITY,
    };
    if e.is_finite() { e } else { f64::INFINITY }
}

impl Regression<'_> {
    /// Each program's fitness under the loss or the fitness function of the user's own, plus
    /// parsimony per node; `+inf` for an empty or invalid program.
    fn own_fitness(&self, pop: &Population) -> anyhow::Result<Vec<f64>> {
        let with_parsimony = |i: usize, e: f64| if pop.len[i] == 0 || !e.is_finite() { f64::INFINITY } else { e + self.config.parsimony * pop.len[i] as f64 };
        if let Some(loss) = &self.loss {
            let sums = self.backend.loss_sums(pop, &self.data, loss, self.config.linear_scaling)?;
            return Ok(sums.iter().enumerate().map(|(i, s)| with_parsimony(i, loss.value(s))).collect());
        }
        let f = self.fitness_fn.ok_or_else(|| anyhow::anyhow!("no fitness of the user's own"))?;
        if pop.size() == 0 {
            return Ok(Vec::new());
        }
        let batch = self.backend.prediction_batch(pop, &self.data, self.config.linear_scaling)?;
        let scores = checked_scores(f, batch)?;
        Ok(scores.into_iter().enumerate().map(|(i, e)| with_parsimony(i, e)).collect())
    }
}

/// Calls `f` on `batch` and checks what it returns: one score per program, NaN nowhere a
/// program's predictions are finite (an error naming the function and the program); invalid
/// programs score `+inf` whatever it said.
pub fn checked_scores(f: &dyn BatchFitness, batch: crate::backend::PredictionBatch) -> anyhow::Result<Vec<f64>> {
    let (p, _) = batch.shape();
    let valid = batch.valid();
    let scores = f.score(batch)?;
    anyhow::ensure!(scores.len() == p, "the fitness function {} returned {} scores for {p} programs: return one per program", f.name(), scores.len());
    scores
        .into_iter()
        .zip(valid)
        .enumerate()
        .map(|(i, (s, ok))| match (ok, s.is_nan()) {
            (false, _) => Ok(f64::INFINITY),
            (true, true) => Err(anyhow::anyhow!(
                "the fitness function {} returned NaN for program {i} of {p}, whose predictions are all finite: return a number (inf for the worst)",
                f.name()
            )),
            (true, false) => Ok(s),
        })
        .collect()
}

impl crate::evolve::Fitness for Regression<'_> {
    fn evaluate(&self, pop: &Population) -> anyhow::Result<Vec<f64>> {
        if self.loss.is_some() || self.fitness_fn.is_some() {
            return self.own_fitness(pop);
        }
        if let Some(j) = self.joint {
            let sums = self.backend.joint_sums(pop, &self.data, &j.inputs)?;
            let metric = self.config.metric;
            return Ok(sums
                .iter()
                .zip(&pop.len)
                .map(|(s, &len)| if len == 0 { f64::INFINITY } else { joint_error(j, s, metric) + self.config.parsimony * len as f64 })
                .collect());
        }
        if self.outputs > 1 {
            let metric = self.config.metric;
            let sums = self.backend.head_sums(pop, &self.data)?;
            return sums
                .iter()
                .zip(&pop.len)
                .map(|(s, &len)| {
                    let e = s.error(metric).ok_or_else(|| anyhow::anyhow!("{}", mae_with_head(self.outputs)))?;
                    Ok(if len == 0 { f64::INFINITY } else { e + self.config.parsimony * len as f64 })
                })
                .collect();
        }
        let sums = self.backend.regression_sums(pop, &self.data)?;
        Ok(self.fitness_of_sums(&sums, pop))
    }

    fn fit_constants(&self, pop: &mut Population, rows: &[usize], steps: u32) -> anyhow::Result<Option<Vec<f64>>> {
        // Levenberg–Marquardt fits no tree with output nodes (`backend::cpu::fit`).
        if self.outputs > 1 {
            return Ok(None);
        }
        let cfg = crate::backend::cpu::fit::FitConfig { steps, linear_scaling: self.config.linear_scaling };
        // Least squares is not the loss of the user's own: a fit is kept where it does not
        // make that worse, and undone where it does.
        let own = self.loss.is_some() || self.fitness_fn.is_some();
        let before = if own { Some((pop.gather(rows), self.evaluate(&pop.gather(rows))?)) } else { None };
        self.backend.fit_constants(pop, rows, &self.data, cfg)?;
        let mut after = self.evaluate(&pop.gather(rows))?;
        if let Some((old, old_fit)) = before {
            for (k, &r) in rows.iter().enumerate() {
                if !(after[k] <= old_fit[k]) {
                    pop.set_tree(r, &old.tree(k).nodes()).map_err(|e| anyhow::anyhow!("restoring a program after its constant fit: {e}"))?;
                    after[k] = old_fit[k];
                }
            }
        }
        Ok(Some(after))
    }

    fn n_cases(&self) -> usize {
        self.rows.map_or(0, |d| d.n_rows)
    }

    /// Each program's absolute error at each case row under the readout the fitness gives it:
    /// its linear scaling on all the rows (or none, as the settings say), or its fitted head.
    /// The target is the one the programs are evolved to fit (with linear terms of the inputs,
    /// the residual of the terms alone).
    fn case_errors(&self, pop: &Population, _generation: usize, cases: &[u32]) -> anyhow::Result<Vec<f64>> {
        let d = self.rows.ok_or_else(|| anyhow::anyhow!("this regression task keeps no rows for lexicase selection"))?;
        let k = cases.len();
        let (x, y) = d.gather(cases)?;
        let pred = self.backend.predictions(pop, &x, k, d.n_features)?;
        let n_out = pop.n_outputs.max(1);
        let readouts: Vec<Option<Readout>> = if self.outputs > 1 {
            let sums = self.backend.head_sums(pop, &self.data)?;
            sums.iter().map(|s| s.fit().map(Readout::Head)).collect()
        } else if self.config.linear_scaling {
            let sums = self.backend.regression_sums(pop, &self.data)?;
            sums.iter().map(|s| s.is_valid().then(|| { let (a, b) = s.scale(); Readout::Scale(a, b) })).collect()
        } else {
            vec![Some(Readout::Scale(1.0, 0.0)); pop.size()]
        };
        anyhow::ensure!(pred.len() == pop.size() * n_out * k, "{} predictions for {} programs at {k} rows", pred.len(), pop.size());
        anyhow::ensure!(self.fitness_fn.is_none(), "a fitness function gives no error per row for lexicase selection");
        let mut errors = vec![f64::INFINITY; pop.size() * k];
        for (i, readout) in readouts.iter().enumerate() {
            let Some(r) = readout.as_ref().filter(|_| pop.len[i] > 0) else { continue };
            let f = &pred[i * n_out * k..(i + 1) * n_out * k];
            // A loss of the user's own is each case's error, at the prediction it scores.
            if let (Some(loss), Readout::Scale(a, b)) = (&self.loss, r) {
                for (c, &f) in f.iter().enumerate() {
                    let e = loss.row(crate::program::fitness::scaled_prediction(f, *a, *b), y[c]) as f64;
                    errors[i * k + c] = if f.is_finite() && e.is_finite() { e } else { f64::INFINITY };
                }
                continue;
            }
            let p = r.apply(f, k);
            for (c, p) in p.into_iter().enumerate() {
                let e = (p - y[c] as f64).abs();
                errors[i * k + c] = if e.is_finite() { e } else { f64::INFINITY };
            }
        }
        Ok(errors)
    }

    /// On the CPU every fitness here scores each program on its own, in fixed chunks of rows;
    /// a fitness function of the user's own sees whole batches, and may read them together.
    fn cacheable(&self) -> bool {
        matches!(self.data, crate::backend::RegressionData::Host { .. }) && self.fitness_fn.is_none()
    }

    fn device_task(&self) -> Option<crate::evolve::device::DeviceTask<'_>> {
        // The device loop scores plain regression sums and the joint fit (from the values it
        // keeps); a head and a fitness of the user's own are scored by `evaluate`, selection
        // and variation on the host.
        if self.outputs > 1 || self.loss.is_some() || self.fitness_fn.is_some() {
            return None;
        }
        self.backend.regression_task(&self.data, self.config, self.joint)
    }
}

/// `data` with the target less the linear terms: what the program is evolved to fit.
pub fn residual(data: &Dataset, linear: &Linear) -> Dataset {
    let mut d = data.clone();
    for (y, t) in d.y.iter_mut().zip(linear.apply(&data.x, data.n_rows)) {
        *y = (*y as f64 - t) as f32;
    }
    d
}

/// The readout a program gets on the training data: with `outputs ≤ 1` its [`scaling`], else
/// the head fitted to its `outputs` slots (`b = 0`, every weight 1 when the outputs are not
/// finite, as unscaled).
pub fn readout(nodes: &[Node], train: &Dataset, linear_scaling: bool, outputs: usize) -> anyhow::Result<Readout> {
    if outputs <= 1 {
        let (a, b) = scaling(nodes, train, linear_scaling)?;
        return Ok(Readout::Scale(a, b));
    }
    let mut pop = Population::new(1, nodes.len().max(1), outputs);
    // A tree that does not fit leaves the row empty, which evaluates as invalid.
    let _ = pop.set_tree(0, nodes);
    let sums = crate::backend::cpu::eval::evaluate_head(&pop, &train.x, &train.y, train.n_rows)?.remove(0);
    Ok(Readout::Head(sums.fit().unwrap_or(Head { b: 0.0, w: vec![1.0; outputs] })))
}

/// The scaling `(a, b)` a program gets on the training data (`(1, 0)` without scaling).
pub fn scaling(nodes: &[Node], train: &Dataset, linear_scaling: bool) -> anyhow::Result<(f64, f64)> {
    if !linear_scaling {
        return Ok((1.0, 0.0));
    }
    let s = sums_of(nodes, train)?;
    Ok(if s.finite { s.scale() } else { (1.0, 0.0) })
}

fn sums_of(nodes: &[Node], data: &Dataset) -> anyhow::Result<RegressionSums> {
    let mut pop = Population::new(1, nodes.len().max(1), 0);
    // A tree that does not fit leaves the row empty, which evaluates as invalid.
    let _ = pop.set_tree(0, nodes);
    Ok(evaluate_regression(&pop, &data.x, &data.y, data.n_rows)?.remove(0))
}

/// Scores of a program under `readout` on `data`, computed from predictions in f64.
pub fn scores(nodes: &[Node], data: &Dataset, readout: &Readout) -> anyhow::Result<Scores> {
    scores_with(nodes, data, readout, None)
}

/// [`scores`] of the whole model: the program under `readout`, plus `linear` terms of the
/// inputs where there are some.
pub fn scores_with(nodes: &[Node], data: &Dataset, readout: &Readout, linear: Option<&Linear>) -> anyhow::Result<Scores> {
    scores_limited(nodes, data, readout, linear, None)
}

/// [`scores_with`] with the predictions clamped to `limits` (`--output-margin`).
pub fn scores_limited(nodes: &[Node], data: &Dataset, readout: &Readout, linear: Option<&Linear>, limits: Option<(f64, f64)>) -> anyhow::Result<Scores> {
    let mut pop = Population::new(1, nodes.len().max(1), readout.n_outputs());
    if pop.set_tree(0, nodes).is_err() {
        return Ok(Scores { mse: f64::NAN, rmse: f64::NAN, mae: f64::NAN, r2: f64::NAN, loss: None, not_finite: 0 });
    }
    let f = crate::backend::cpu::eval::predict(&pop, 0, &data.x, data.n_rows)?;
    let mut predictions = readout.apply(&f, data.n_rows);
    if let Some(l) = linear {
        for (p, t) in predictions.iter_mut().zip(l.apply(&data.x, data.n_rows)) {
            *p += t;
        }
    }
    crate::task::base::model::limit(&mut predictions, limits);
    let n = data.n_rows as f64;
    let mean_y = data.y.iter().map(|&y| y as f64).sum::<f64>() / n;
    let (mut sse, mut sae, mut sst, mut not_finite) = (0.0, 0.0, 0.0, 0usize);
    for (&p, &y) in predictions.iter().zip(&data.y) {
        not_finite += usize::from(!p.is_finite());
        let e = p - y as f64;
        sse += e * e;
        sae += e.abs();
        sst += (y as f64 - mean_y).powi(2);
    }
    let mse = sse / n;
    let r2 = if sst > 0.0 { 1.0 - sse / sst } else if sse == 0.0 { 1.0 } else { 0.0 };
    Ok(Scores { mse, rmse: mse.sqrt(), mae: sae / n, r2, loss: None, not_finite })
}

/// The fitness of the user's own of programs `members` (each with its readout, fitted on the
/// training rows) on `data`: a loss's mean or sum at each row's prediction (`a·f + b` rounded to
/// f32, as the search scores it), or the fitness function's scores of one batch of them;
/// `+inf` for a program with a non-finite prediction. `None` without a fitness of the user's
/// own. The predictions are computed on the host; on a GPU `backend` the function's batch is
/// copied onto the device, so that it gets device arrays at every call of the run.
pub fn own_scores(
    loss: Option<&Loss>,
    fitness_fn: Option<&dyn BatchFitness>,
    members: &[(&[Node], &Readout)],
    data: &Dataset,
    backend: &crate::backend::Backend,
) -> anyhow::Result<Option<Vec<f64>>> {
    if loss.is_none() && fitness_fn.is_none() {
        return Ok(None);
    }
    let n = data.n_rows;
    let mut pred = Vec::with_capacity(members.len() * n);
    for (nodes, readout) in members {
        let mut pop = Population::new(1, nodes.len().max(1), 0);
        let f = if pop.set_tree(0, nodes).is_ok() { crate::backend::cpu::eval::predict(&pop, 0, &data.x, n)? } else { vec![f32::NAN; n] };
        match readout {
            Readout::Scale(a, b) => pred.extend(f.iter().map(|&f| crate::program::fitness::scaled_prediction(f, *a, *b))),
            Readout::Head(_) => pred.extend(readout.apply(&f, n).iter().map(|&p| p as f32)),
        }
    }
    if let Some(loss) = loss {
        return Ok(Some(
            pred.chunks(n.max(1))
                .map(|p| {
                    let mut s = crate::program::fitness::LossSums { n: n as u64, finite: true, sum: 0.0 };
                    for (&p, &y) in p.iter().zip(&data.y) {
                        let l = loss.row(p, y);
                        s.finite &= p.is_finite() && l.is_finite();
                        s.sum += l as f64;
                    }
                    loss.value(&s)
                })
                .collect(),
        ));
    }
    let f = fitness_fn.expect("checked above");
    let batch = backend.host_prediction_batch(pred, &data.y, members.len(), n)?;
    checked_scores(f, batch).map(Some)
}

/// The error `metric` reads from scores (1 − R² for `r2`), or the fitness of the user's own
/// where the scores have one; `+inf` where not finite.
pub fn metric_of(s: &Scores, metric: Metric) -> f64 {
    if let Some(l) = s.loss {
        return if l.is_finite() { l } else { f64::INFINITY };
    }
    let e = match metric {
        Metric::Mse => s.mse,
        Metric::Rmse => s.rmse,
        Metric::Mae => s.mae,
        Metric::R2 => 1.0 - s.r2,
    };
    if e.is_finite() { e } else { f64::INFINITY }
}
