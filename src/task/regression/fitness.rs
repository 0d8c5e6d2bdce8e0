//! How a regression program is scored: the fitness the engine minimises ([`Regression`], from
//! the interpreter's fused sums, a head's or a joint fit's), and the scores of one program on a
//! data set under its readout and linear terms.

use super::*;

/// Scores of one program on one data set.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Scores {
    /// Mean squared error.
    pub mse: f64,
    /// Root mean squared error.
    pub rmse: f64,
    /// Mean absolute error.
    pub mae: f64,
    /// Coefficient of determination.
    pub r2: f64,
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

impl crate::evolve::Fitness for Regression<'_> {
    fn evaluate(&self, pop: &Population) -> anyhow::Result<Vec<f64>> {
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
        self.backend.fit_constants(pop, rows, &self.data, cfg)?;
        self.evaluate(&pop.gather(rows)).map(Some)
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
        let mut errors = vec![f64::INFINITY; pop.size() * k];
        for (i, readout) in readouts.iter().enumerate() {
            let Some(r) = readout.as_ref().filter(|_| pop.len[i] > 0) else { continue };
            let p = r.apply(&pred[i * n_out * k..(i + 1) * n_out * k], k);
            for (c, p) in p.into_iter().enumerate() {
                let e = (p - y[c] as f64).abs();
                errors[i * k + c] = if e.is_finite() { e } else { f64::INFINITY };
            }
        }
        Ok(errors)
    }

    fn device_task(&self) -> Option<crate::evolve::device::DeviceTask<'_>> {
        // The device loop's fused fitness reads plain regression sums: the joint fit and the
        // head are scored by `evaluate`, selection and variation on the host.
        if self.joint.is_some() || self.outputs > 1 {
            return None;
        }
        self.backend.regression_task(&self.data, self.config)
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
        return Ok(Scores { mse: f64::NAN, rmse: f64::NAN, mae: f64::NAN, r2: f64::NAN });
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
    let (mut sse, mut sae, mut sst) = (0.0, 0.0, 0.0);
    for (&p, &y) in predictions.iter().zip(&data.y) {
        let e = p - y as f64;
        sse += e * e;
        sae += e.abs();
        sst += (y as f64 - mean_y).powi(2);
    }
    let mse = sse / n;
    let r2 = if sst > 0.0 { 1.0 - sse / sst } else if sse == 0.0 { 1.0 } else { 0.0 };
    Ok(Scores { mse, rmse: mse.sqrt(), mae: sae / n, r2 })
}

/// The error `metric` reads from scores (1 − R² for `r2`); `+inf` where not finite.
pub fn metric_of(s: &Scores, metric: Metric) -> f64 {
    let e = match metric {
        Metric::Mse => s.mse,
        Metric::Rmse => s.rmse,
        Metric::Mae => s.mae,
        Metric::R2 => 1.0 - s.r2,
    };
    if e.is_finite() { e } else { f64::INFINITY }
}
