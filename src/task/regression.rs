//! Symbolic regression: fitness from the fused error sums of the interpreter (MSE, RMSE, MAE or
//! 1 − R², optionally after linear scaling as Operon does, plus parsimony pressure), or, for
//! programs with several outputs, from the fitted linear head over them
//! ([`crate::program::head`]); and the scores reported for the best program on the training and
//! test data.

use super::search::{EvolveResult, add_island_stats, check_ge, check_search, describe_devices, device_loop_line, generations_json, islands_summary};
use crate::backend::cpu::eval::evaluate_regression;
use crate::data::Dataset;
use crate::program::fitness::RegressionSums;
use crate::program::head::{Head, MAX_HEAD};
use crate::program::linear::{Joint, JointSums, Linear, LinearFit};
use crate::program::tree::{Node, Population};
/// The error measure, the task's settings and the error of the fused sums: defined in
/// [`crate::program::fitness`], below the engine, which reads them too.
pub use crate::program::fitness::{Metric, RegressionConfig, error};

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

/// The constant fitting of `grove evolve`'s defaults on a GPU: 10 steps every 5 generations on
/// the best 20 %, chosen by a side-by-side run of nine settings on Friedman 1-3 and diabetes
/// (docs/benchmarks.md, "Constants fitted by Levenberg–Marquardt"): +0.08 median test R² on
/// Friedman-1, within ±0.01 elsewhere, for 3.5 times a plain run's time.
pub const DEFAULT_FIT: crate::evolve::ConstantFitting = crate::evolve::ConstantFitting { steps: 10, every: 5, fraction: 0.2 };

/// The defaults of [`DEFAULT_FIT`] on a GPU; on the CPU none (0 steps, the rest as on a GPU):
/// there the same fitting costs about 19 times a plain run (the CPU reference walks each tree
/// point by point, where the interpreter runs blocks of 256 points), which a user who does not
/// know the option should not pay.
pub fn default_fit(on_gpu: bool) -> crate::evolve::ConstantFitting {
    if on_gpu { DEFAULT_FIT } else { crate::evolve::ConstantFitting { steps: 0, ..DEFAULT_FIT } }
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

    fn device_task(&self) -> Option<crate::evolve::device::DeviceTask<'_>> {
        // The device loop's fused fitness reads plain regression sums: the joint fit and the
        // head are scored by `evaluate`, selection and variation on the host.
        if self.joint.is_some() || self.outputs > 1 {
            return None;
        }
        self.backend.regression_task(&self.data, self.config)
    }
}

pub use super::search::LinearInputs;

/// The linear terms [`fit`] puts beside the program, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct LinearChoice {
    /// The ridge fit on the rows evolution fits, where one was made.
    pub fit: Option<LinearFit>,
    /// The model has the terms.
    pub used: bool,
    /// Why (the report's `linear_inputs.why`).
    pub why: String,
}

impl LinearChoice {
    /// No terms, for `why`.
    pub fn none(why: impl Into<String>) -> Self {
        Self { fit: None, used: false, why: why.into() }
    }

    /// The terms, where the model has them.
    pub fn linear(&self) -> Option<&Linear> {
        if self.used { self.fit.as_ref().map(|f| &f.linear) } else { None }
    }

    /// What scoring a program together with the terms needs, where the model has them.
    pub fn joint(&self) -> Option<&Joint> {
        if self.used { self.fit.as_ref().and_then(|f| f.joint.as_ref()) } else { None }
    }

    /// The report's `linear_inputs`.
    pub fn json(&self) -> serde_json::Value {
        let mut v = serde_json::json!({"used": self.used, "why": self.why});
        if let Some(f) = &self.fit {
            v["penalty"] = serde_json::json!(crate::report::num(f.penalty));
            v["df"] = serde_json::json!(crate::report::num(f.df));
            v["gcv"] = serde_json::json!(crate::report::num(f.gcv));
            v["gcv_mean"] = serde_json::json!(crate::report::num(f.gcv_mean));
            v["train_r2"] = serde_json::json!(crate::report::num(1.0 - f.rss_ratio));
        }
        v
    }
}

/// Decides and fits the linear terms of `settings` on `rows` (the rows evolution fits).
pub fn linear_choice(settings: &EvolveSettings, rows: &Dataset) -> anyhow::Result<LinearChoice> {
    use crate::program::linear::{MAX_INPUTS, fit};
    let mode = settings.linear_inputs;
    let r = &settings.regression;
    match mode {
        LinearInputs::Off => return Ok(LinearChoice::none("off (--linear-inputs off)")),
        LinearInputs::Auto if settings.islands.shard_rows => return Ok(LinearChoice::none("off: --shard-rows (the joint fit is not split over GPUs)")),
        LinearInputs::Auto if !r.linear_scaling => return Ok(LinearChoice::none("off: --no-linear-scaling asks for the program alone")),
        LinearInputs::Auto if r.metric == Metric::Mae => return Ok(LinearChoice::none("off: --metric mae (the terms are a least-squares fit)")),
        LinearInputs::Auto if rows.n_features > MAX_INPUTS => {
            return Ok(LinearChoice::none(format!("off: {} inputs, more than the {MAX_INPUTS} the terms read", rows.n_features)));
        }
        _ => {}
    }
    let fitted = fit(&rows.x, &rows.y, rows.n_rows, rows.n_features).map_err(|e| anyhow::anyhow!("--linear-inputs (linear_inputs): {e}"))?;
    let Some(f) = fitted else {
        return Ok(LinearChoice::none("off: no input or target with a spread, or fewer than 3 rows"));
    };
    let saving = f.saving() / 2.0;
    let numbers = format!(
        "GCV {:.4e} against {:.4e} for the mean, {:.1} fitted numbers, description {} by {:.2} nats",
        f.gcv,
        f.gcv_mean,
        f.df,
        if saving > 0.0 { "shorter" } else { "longer" },
        saving.abs()
    );
    Ok(match mode {
        LinearInputs::On => LinearChoice { used: true, why: format!("on (--linear-inputs on): {numbers}"), fit: Some(f) },
        _ if f.helps() => LinearChoice { used: true, why: format!("auto, kept: {numbers}"), fit: Some(f) },
        _ => LinearChoice { used: false, why: format!("auto, left out: {numbers}"), fit: Some(f) },
    })
}

/// `data` with the target less the linear terms: what the program is evolved to fit.
pub fn residual(data: &Dataset, linear: &Linear) -> Dataset {
    let mut d = data.clone();
    for (y, t) in d.y.iter_mut().zip(linear.apply(&data.x, data.n_rows)) {
        *y = (*y as f64 - t) as f32;
    }
    d
}

/// How a program's outputs become its prediction.
#[derive(Clone, Debug, PartialEq)]
pub enum Readout {
    /// The program's one value as `a·f + b` (`(1, 0)`: unscaled).
    Scale(f64, f64),
    /// Its `K ≥ 2` output slots under a fitted linear head.
    Head(Head),
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

/// Everything a `grove evolve` run needs; stored in the report so the run can be repeated.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvolveSettings {
    /// `builtin:NAME[:N]` or a CSV / tab-separated file.
    pub data: String,
    /// Target column (default: the last).
    pub target: Option<String>,
    /// Fraction of rows held out for testing (0: use the built-in's own test set, if any).
    pub test_fraction: f64,
    /// Fraction of the training rows held out to choose the returned program (`None`: the
    /// automatic choice of [`super::validation::Plan::new`]).
    #[serde(default)]
    pub validation_fraction: Option<f64>,
    /// How the returned program is chosen from the hall of fame's front.
    #[serde(default)]
    pub select: super::validation::Select,
    /// Grammar file for grammatical evolution (`None`: tree GP from `functions`).
    pub grammar: Option<String>,
    /// Function set for tree GP, e.g. `add,sub,mul,div,sin`.
    pub functions: Option<String>,
    /// Operators of the user's own (`--define`), e.g. `softsign(x) = x / (1 + abs(x))`, which
    /// the function set and the grammar may name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub operators: Vec<String>,
    /// Population, generations, seed, selection, program length.
    pub engine: crate::evolve::EngineConfig,
    /// GE: mapping limits.
    pub map: crate::genome::MapConfig,
    /// GE: initialisation.
    pub init: crate::genome::InitConfig,
    /// GE: crossover and mutation.
    pub vary: crate::genome::vary::GeVaryConfig,
    /// GE: longest genome.
    pub genome_capacity: usize,
    /// Error measure, scaling, parsimony.
    pub regression: RegressionConfig,
    /// Program outputs read by a fitted linear head: 1 is the program's value (linearly scaled
    /// unless `regression.linear_scaling` is off); `2 ..= 8` are output slots (tree GP's output
    /// nodes, a grammar's `out(K, …)`) under `b + Σ w_k f_k` fitted by least squares.
    #[serde(default = "default_outputs")]
    pub outputs: usize,
    /// Linear terms of the inputs beside the program ([`crate::program::linear`]): `auto`
    /// keeps them where they predict unseen rows better than the mean and pay for their
    /// numbers; `on` always (where the inputs have a spread); `off` never.
    #[serde(default)]
    pub linear_inputs: LinearInputs,
    /// Tree GP: constants, initial depths, operator probabilities.
    pub trees: TreeSettings,
    /// Where populations are evaluated.
    #[serde(default)]
    pub device: crate::backend::DeviceChoice,
    /// Islands and migration (one island by default).
    #[serde(default)]
    pub islands: crate::evolve::IslandConfig,
    /// When the run ends before its last generation: a time limit, a target ([`super::budget`]).
    #[serde(default)]
    pub budget: super::budget::Budget,
}

/// Settings of tree GP (used with `functions`).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TreeSettings {
    /// Constant leaves are drawn uniformly from `[lo, hi)`.
    pub const_range: (f32, f32),
    /// Probability that a leaf is a constant.
    pub p_const: f32,
    /// Depths of ramped half-and-half initialisation (root = 0).
    pub init_depth: (u32, u32),
    /// Probability that a child is made by crossover.
    pub p_crossover: f32,
    /// Probability that a child is then mutated.
    pub p_mutation: f32,
}

impl Default for TreeSettings {
    fn default() -> Self {
        Self { const_range: (-2.0, 2.0), p_const: 0.2, init_depth: (2, 6), p_crossover: 0.9, p_mutation: 0.3 }
    }
}

/// The default of [`EvolveSettings::outputs`] ([`super::defaults::EVOLVE_OUTPUTS`]).
fn default_outputs() -> usize {
    super::defaults::EVOLVE_OUTPUTS
}

impl TreeSettings {
    /// The engine's tree representation for `functions` over `n_vars` variables.
    pub fn rep(&self, functions: &str, n_vars: usize, max_len: usize) -> anyhow::Result<crate::evolve::TreeRep> {
        self.rep_with_outputs(functions, n_vars, 0, max_len)
    }

    /// As [`Self::rep`], for programs with `n_outputs` output slots (0: the root's value):
    /// each slot is placed once in a new tree, and extra output nodes appear with probability
    /// [`super::defaults::EVOLVE_P_OUT`].
    pub fn rep_with_outputs(
        &self,
        functions: &str,
        n_vars: usize,
        n_outputs: usize,
        max_len: usize,
    ) -> anyhow::Result<crate::evolve::TreeRep> {
        let p_out = if n_outputs > 0 { super::defaults::EVOLVE_P_OUT } else { 0.0 };
        let spec = crate::program::TreeSpec::new(super::search::function_set(functions)?, n_vars as u32, max_len)
            .with_const_range(self.const_range.0, self.const_range.1)
            .with_p_const(self.p_const)
            .with_outputs(n_outputs, p_out)
            .with_depth(self.init_depth.0, self.init_depth.1);
        Ok(super::search::tree_rep(spec, self.p_crossover, self.p_mutation))
    }
}

impl Default for EvolveSettings {
    /// `grove evolve`'s defaults without a representation: set `grammar` or `functions`.
    fn default() -> Self {
        Self {
            data: super::defaults::EVOLVE_DATA.into(),
            target: None,
            test_fraction: super::defaults::EVOLVE_TEST_FRACTION,
            validation_fraction: None,
            select: super::validation::Select::default(),
            grammar: None,
            functions: None,
            operators: Vec::new(),
            engine: crate::evolve::EngineConfig::default(),
            map: crate::genome::MapConfig::default(),
            init: crate::genome::InitConfig::default(),
            vary: crate::genome::vary::GeVaryConfig::default(),
            genome_capacity: super::defaults::GE.genome_capacity,
            regression: RegressionConfig::default(),
            outputs: super::defaults::EVOLVE_OUTPUTS,
            linear_inputs: LinearInputs::default(),
            trees: TreeSettings::default(),
            device: crate::backend::DeviceChoice::default(),
            islands: crate::evolve::IslandConfig::default(),
            budget: super::budget::Budget::default(),
        }
    }
}

/// The training and test data of `settings` (the test part is `None` without a test set).
pub fn load_data(settings: &EvolveSettings) -> anyhow::Result<(Dataset, Option<Dataset>)> {
    let problem = crate::data::DataSource::parse(&settings.data)?.load(settings.target.as_deref())?;
    Ok(if settings.test_fraction > 0.0 {
        let (tr, te) = crate::data::split(&problem.train, settings.test_fraction, settings.engine.seed)?;
        (tr, Some(te))
    } else {
        (problem.train, problem.test)
    })
}

impl EvolveSettings {
    /// `grove evolve`'s defaults with no flags on the CPU (no representation: set `grammar` or
    /// `functions`); a run on a GPU fits constants by default ([`default_fit`]).
    pub fn cli_default() -> Self {
        let ge = super::defaults::GE.configs();
        Self {
            engine: super::defaults::EVOLVE.config(default_fit(false)),
            map: ge.map,
            init: ge.init,
            vary: ge.vary,
            genome_capacity: ge.genome_capacity,
            ..Self::default()
        }
    }

    /// What the search takes from these settings.
    pub fn search_settings(&self) -> super::search::SearchSettings<'_> {
        let ge = super::defaults::GeConfigs { map: self.map, init: self.init, vary: self.vary, genome_capacity: self.genome_capacity };
        super::search::SearchSettings::of(&self.engine, &self.islands, &self.grammar, &self.functions, ge)
    }

    /// Checks values the types allow but a run cannot use; each message names the flag and
    /// the experiment-file field.
    pub fn check(&self) -> anyhow::Result<()> {
        use anyhow::ensure;
        super::search::register_operators(&self.operators)?;
        check_search(&self.engine, &self.islands)?;
        self.budget.check(super::budget::Measure::Loss)?;
        ensure!((0.0..1.0).contains(&self.test_fraction), "--test-fraction (test_fraction) must be in [0, 1), got {}", self.test_fraction);
        super::validation::check_fraction(self.validation_fraction)?;
        let p = self.regression.parsimony;
        ensure!(p >= 0.0 && p.is_finite(), "--parsimony (regression.parsimony) must be >= 0, got {p}");
        check_scaling(&self.regression, self.outputs)?;
        if self.linear_inputs == LinearInputs::On {
            ensure!(
                self.regression.linear_scaling && self.regression.metric != Metric::Mae,
                "--linear-inputs on fits the terms and the program's weight by least squares, which --no-linear-scaling and --metric mae rule out: give one or the other"
            );
            ensure!(!self.islands.shard_rows, "--linear-inputs on is not split over GPUs: drop --shard-rows or use --linear-inputs off");
        }
        super::shard::check(&self.islands, self.device, self.outputs)?;
        check_ge(&self.search_settings().ge)?;
        match (&self.grammar, &self.functions) {
            (None, None) => anyhow::bail!(
                "give --grammar FILE (grammatical evolution) or --functions LIST (tree GP), e.g. --grammar grammars/regression.bnf (in an experiment file: grammar or functions)"
            ),
            (Some(_), Some(_)) => anyhow::bail!("give --grammar or --functions, not both (in an experiment file: grammar or functions)"),
            _ => Ok(()),
        }
    }
}

/// A program under `readout` in infix, LaTeX and sympy text: `a·f + b` ([`scaled_texts`]) or
/// the head's `b + w1·(f1) + w2·(f2) + …` over the output slots' formulas (zero weights left
/// out).
pub fn readout_texts(nodes: &[Node], names: &[String], readout: &Readout) -> (String, String, String) {
    model_texts(nodes, names, readout, None)
}

/// [`readout_texts`] of the whole model: with `linear` terms, the intercepts are summed into
/// one number at the end and `+ a_j*x_j` follow the program (zero weights left out).
pub fn model_texts(nodes: &[Node], names: &[String], readout: &Readout, linear: Option<&Linear>) -> (String, String, String) {
    use crate::program::render::Style;
    let Some(l) = linear else {
        return program_texts(nodes, names, readout);
    };
    // The program with its own intercept moved into the terms' one.
    let (inner, c) = match readout {
        Readout::Scale(a, b) => (Readout::Scale(*a, 0.0), l.c + b),
        Readout::Head(h) => (Readout::Head(Head { b: 0.0, ..h.clone() }), l.c + h.b),
    };
    let (pi, pl, ps) = program_texts(nodes, names, &inner);
    let pi = pi.strip_suffix(" + 0").map(str::to_string).unwrap_or(pi);
    let pl = pl.strip_suffix(" + 0").map(str::to_string).unwrap_or(pl);
    let ps = ps.strip_suffix(" + 0").map(str::to_string).unwrap_or(ps);
    let merged = Linear { c, a: l.a.clone() };
    let terms = |style: Style| merged.render(names, style);
    (pi + &terms(Style::Infix), pl + &terms(Style::Latex), ps + &terms(Style::Sympy))
}

/// [`readout_texts`] of the program alone.
fn program_texts(nodes: &[Node], names: &[String], readout: &Readout) -> (String, String, String) {
    use crate::program::render::{Style, number, outputs};
    let head = match readout {
        Readout::Scale(a, b) => return scaled_texts(nodes, names, (*a, *b)),
        Readout::Head(h) => h,
    };
    let text = |style: Style| -> String {
        let slots = outputs(nodes, head.w.len(), names, style);
        let mut s = number(head.b as f32);
        for (w, f) in head.w.iter().zip(&slots).filter(|(w, _)| **w != 0.0) {
            let sign = if *w < 0.0 { "-" } else { "+" };
            let w = number(w.abs() as f32);
            s += &match style {
                Style::Latex => format!(" {sign} {w} \\cdot \\left({f}\\right)"),
                Style::Sympy | Style::Infix => format!(" {sign} {w}*({f})"),
            };
        }
        s
    };
    (text(Style::Infix), text(Style::Latex), text(Style::Sympy))
}

/// A program as `a·f + b` in infix, LaTeX and sympy text (just `f` when `(a, b)` is `(1, 0)`).
fn scaled_texts(nodes: &[Node], names: &[String], (a, b): (f64, f64)) -> (String, String, String) {
    use crate::program::render::{Style, number, render};
    let wrap = |style: Style| -> String {
        let body = render(nodes, names, style);
        if (a, b) == (1.0, 0.0) {
            return body;
        }
        let (a, b) = (number(a as f32), number(b as f32));
        match style {
            Style::Latex => format!("{a} \\cdot \\left({body}\\right) + {b}"),
            Style::Sympy | Style::Infix => format!("{a}*({body}) + {b}"),
        }
    };
    (wrap(Style::Infix), wrap(Style::Latex), wrap(Style::Sympy))
}

/// Loads the data, builds the representation, evolves and scores the best program.
pub fn evolve(settings: &EvolveSettings, quiet: bool) -> anyhow::Result<EvolveResult> {
    evolve_with(settings, &super::run::RunOptions { quiet, ..Default::default() })
}

/// As [`evolve`], with checkpoints, resume, a stop flag and verbosity from `opts`: loads the
/// data `settings.data` names, opens the device (saying on standard error, unless quiet, when
/// `auto` falls back to the CPU) and runs [`fit`].
pub fn evolve_with(settings: &EvolveSettings, opts: &super::run::RunOptions) -> anyhow::Result<EvolveResult> {
    let (train, test) = load_data(settings)?;
    check_scaling(&settings.regression, settings.outputs)?;
    let backend = crate::backend::Backend::open_on(settings.device, &settings.islands.gpus, opts.quiet)?;
    fit(settings, &train, test.as_ref(), &backend, opts)
}

/// Refuses MAE with linear scaling or a head (least-squares fits), a head without linear
/// scaling, and more outputs than a head reads.
fn check_scaling(r: &RegressionConfig, outputs: usize) -> anyhow::Result<()> {
    anyhow::ensure!(
        (1..=MAX_HEAD).contains(&outputs),
        "--outputs (outputs) asks for {outputs} program outputs; the fitted head reads 1 to {MAX_HEAD}"
    );
    if outputs > 1 {
        anyhow::ensure!(r.metric != Metric::Mae, "{}", mae_with_head(outputs));
        anyhow::ensure!(
            r.linear_scaling,
            "--outputs {outputs} fits a linear head by least squares, which --no-linear-scaling (regression.linear_scaling) turns off: give one or the other"
        );
    }
    if r.linear_scaling && r.metric == Metric::Mae {
        anyhow::bail!("--metric mae cannot be used with linear scaling (it is a least-squares fit): add --no-linear-scaling");
    }
    Ok(())
}

/// The error line of MAE with a fitted head.
fn mae_with_head(outputs: usize) -> String {
    format!("--metric mae is not supported with a fitted head (--outputs {outputs}; a least-squares fit): use mse, rmse or r2, or --outputs 1")
}

/// Checks that a grammar writes at least `k` output slots: a literal `out(K, …)` writes slot
/// K; an `out(<k>, …)` spelled by a rule (e.g. `GE_RANGE:dataset_n_os`) may write any of the
/// `k` slots.
pub(super) fn check_grammar_slots(templates: &crate::grammar::template::Templates, k: usize, path: &str) -> anyhow::Result<()> {
    use crate::grammar::template::{Item, Part};
    let (mut literal, mut spelled) = (std::collections::BTreeSet::new(), false);
    for item in templates.expr.iter().flatten().flatten() {
        if let Item::Output(parts) = item {
            match parts.as_slice() {
                [Part::Text(t)] => {
                    literal.insert(t.trim().to_string());
                }
                _ => spelled = true,
            }
        }
    }
    let slots = if spelled { k } else { literal.len() };
    anyhow::ensure!(
        slots >= k,
        "{path} writes {slots} output slot{} (out(K, …)) but --outputs (outputs) asks for {k}: give a grammar with out(0, …) to out({}, …), or --outputs {}",
        if slots == 1 { "" } else { "s" },
        k - 1,
        slots.max(1)
    );
    Ok(())
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

/// The rows evolution fits on and the validation rows, for `plan` (no validation rows when its
/// fraction is 0): a seeded split of `train` ([`crate::data::split::Holdout::VALIDATION`]).
pub fn validation_split<'d>(
    train: &'d Dataset,
    plan: &super::validation::Plan,
    seed: u64,
) -> anyhow::Result<(std::borrow::Cow<'d, Dataset>, Option<Dataset>)> {
    use anyhow::Context;
    if plan.fraction == 0.0 {
        return Ok((std::borrow::Cow::Borrowed(train), None));
    }
    let (rows, validation) = crate::data::split::split_for(train, plan.fraction, seed, crate::data::split::Holdout::VALIDATION)
        .context("--validation-fraction (validation_fraction)")?;
    Ok((std::borrow::Cow::Owned(rows), Some(validation)))
}

/// Evolves a formula for `train` on `backend` and returns the program `settings.select`
/// chooses, scored on the training, validation and `test` rows: the library's regression run,
/// under both the command line (`grove evolve`, `grove run`) and the Python package
/// (`SymbolicRegressor.fit`). A seeded fraction of `train` is held out as validation rows
/// ([`super::validation::Plan`]); evolution sees only the rest. `settings.data`, `target` and
/// `test_fraction` are only recorded; `settings.device` is what `backend` was opened from.
/// Prints only what `opts` asks for (progress, per-generation lines).
pub fn fit(
    settings: &EvolveSettings,
    train: &Dataset,
    test: Option<&Dataset>,
    backend: &crate::backend::Backend,
    opts: &super::run::RunOptions,
) -> anyhow::Result<EvolveResult> {
    // The run's own operators, before its function set or grammar names them.
    super::search::register_operators(&settings.operators)?;
    let plan = super::validation::Plan::new(settings.validation_fraction, settings.select, train.n_rows, super::defaults::EVOLVE_SMALL_DATA_RULE)?;
    let (rows, validation) = validation_split(train, &plan, settings.engine.seed)?;
    // Linear terms of the inputs first; the program is evolved on what they leave.
    let linear = linear_choice(settings, &rows)?;
    // One output: each program is fitted together with the terms; a head fits what they leave.
    let joint = if settings.outputs <= 1 { linear.joint() } else { None };
    let mut searched = match linear.linear() {
        Some(l) => search_with(settings, &residual(&rows, l), backend, opts, joint)?,
        None => search(settings, &rows, backend, opts)?,
    };
    let mut plan = plan;
    if plan.rule == super::validation::Select::Cv && rows.n_rows < 2 {
        plan = plan.instead(super::validation::Select::Mdl, &format!("cross-validation needs 2 training rows, the data has {}", rows.n_rows));
    }
    if plan.rule == super::validation::Select::Cv {
        let start = std::time::Instant::now();
        let generations = searched.outcome.history.len().saturating_sub(1);
        match cross_validate(settings, &rows, backend, opts, generations)? {
            Some(curve) => searched.cv = Some(curve),
            None => plan = plan.instead(super::validation::Select::Mdl, "the cross-validation was stopped"),
        }
        searched.cv_seconds = start.elapsed().as_secs_f64();
    }
    finish(settings, &plan, &searched, &rows, validation.as_ref(), test, backend, &linear)
}

/// What evolution leaves for [`finish`] to choose from and report.
pub struct Searched {
    /// The engine's outcome (best program, history, last population).
    pub outcome: crate::evolve::Outcome,
    /// The hall of fame over the whole run.
    pub hof: crate::evolve::hof::HallOfFame,
    /// Median valid program size of each generation.
    pub median_sizes: Vec<f64>,
    /// Node evaluations (timing).
    pub node_evaluations: f64,
    /// Wall time of the search, seconds.
    pub seconds: f64,
    /// Of which before the generations (checks, data, devices).
    pub setup_seconds: f64,
    /// Of which the generations.
    pub search_seconds: f64,
    /// The devices the search ran on ([`describe_devices`]).
    pub device: String,
    /// Why the search ended.
    pub ended: super::budget::Ending,
    /// `--select cv`: the cross-validated error by size limit ([`cross_validate`]; `None`
    /// otherwise).
    pub cv: Option<super::crossval::SizeCurve>,
    /// Seconds the cross-validation's searches took (0 without).
    pub cv_seconds: f64,
}

/// The evolution of [`fit`] on the rows it fits (`rows`: the training rows less the
/// validation rows): no choosing, no scoring.
pub fn search(settings: &EvolveSettings, rows: &Dataset, backend: &crate::backend::Backend, opts: &super::run::RunOptions) -> anyhow::Result<Searched> {
    search_with(settings, rows, backend, opts, None)
}

/// [`search`], each program scored by its joint fit with linear terms of the inputs where
/// `joint` is given (`rows`' target is then their residual).
pub fn search_with(
    settings: &EvolveSettings,
    rows: &Dataset,
    backend: &crate::backend::Backend,
    opts: &super::run::RunOptions,
    joint: Option<&Joint>,
) -> anyhow::Result<Searched> {
    use anyhow::{bail, ensure};

    let start = std::time::Instant::now();
    check_scaling(&settings.regression, settings.outputs)?;
    let k = settings.outputs;
    let sharded = settings.islands.shard_rows;
    super::shard::check(&settings.islands, settings.device, k)?;
    // Rows split over GPUs: each holds its shard, and constant fitting (which needs every row
    // on one GPU) is off.
    let shards = if sharded { super::shard::count(&settings.islands.gpus, backend)? } else { 1 };
    let mut engine = settings.engine.clone();
    if sharded && engine.constants.steps > 0 {
        engine.constants.steps = 0;
        opts.say("note: constant fitting is off with --shard-rows (it needs every row on one GPU)");
    }
    let search_settings = super::search::SearchSettings { engine: &engine, ..settings.search_settings() };
    let bytes = (rows.n_rows as u64).saturating_mul(rows.n_features as u64 + 1).saturating_mul(4);
    // The joint fit on a GPU writes every program's value at every row before summing them
    // (and a head's, every output's).
    let joint_values = if joint.is_some() || k > 1 { (rows.n_rows as u64).saturating_mul(4 * k.max(1) as u64) } else { 0 };
    let need = super::plan::TaskNeed { data: bytes, device_data: bytes / shards as u64, per_individual: 32, device_per_individual: 32 + joint_values };
    super::plan::check_search(&search_settings, &need, backend, opts.max_memory, "")?;
    super::search::note_bloat(&settings.engine, backend, opts);
    let n_outputs = if k > 1 { k } else { 0 };
    if (k > 1 || joint.is_some()) && matches!(backend, crate::backend::Backend::Cuda(_)) && !opts.quiet {
        let what = if k > 1 { format!("--outputs {k} (the fitted head)") } else { "the linear terms".to_string() };
        opts.say(&format!("note: {what} keep selection and variation on the CPU (the device loop scores programs alone); evaluation stays on the GPU"));
    }
    // Islands spread over every GPU `islands.gpus` chooses, each with its own copy of the data;
    // or, with --shard-rows, one population whose rows are split over them (on the CPU: the
    // same shards, one after another).
    let more = match (sharded, backend) {
        (false, _) => backend.more_gpus(&settings.islands.gpus, settings.islands.count)?,
        (true, crate::backend::Backend::Cuda(_)) => backend.more_gpus(&settings.islands.gpus, shards)?,
        (true, crate::backend::Backend::Cpu) => Vec::new(),
    };
    let parts = if sharded { super::shard::split_rows(rows, shards)? } else { Vec::new() };
    let backends: Vec<&crate::backend::Backend> = match backend {
        crate::backend::Backend::Cpu if sharded => vec![backend; shards],
        _ => std::iter::once(backend).chain(&more).collect(),
    };
    ensure!(!sharded || backends.len() == shards, "--shard-rows: {shards} shards but {} GPUs opened", backends.len());
    let tasks = backends
        .iter()
        .enumerate()
        .map(|(i, &b)| {
            let part = if sharded { &parts[i] } else { rows };
            let data = b.regression_data(&part.x, &part.y, part.n_rows, part.n_features)?;
            Ok(Regression { backend: b, data, config: settings.regression, outputs: k, joint })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let on_gpus = crate::evolve::OnGpus(&tasks);
    let by_shard = if sharded { Some(super::shard::ShardedRegression::new(&tasks)?) } else { None };
    let task: &dyn crate::evolve::Fitness = match &by_shard {
        Some(s) => s,
        None => &on_gpus,
    };
    let device = match (sharded, backend) {
        (true, crate::backend::Backend::Cpu) => format!("{} ({shards} row shard{})", backend.describe(), if shards == 1 { "" } else { "s" }),
        (true, _) => format!("{} (rows split over {shards} GPU{})", describe_devices(backend, &more), if shards == 1 { "" } else { "s" }),
        (false, _) => describe_devices(backend, &more),
    };
    // --stop-at is the training loss the progress line shows: the fitness.
    let goal = super::budget::Goal { measure: super::budget::Measure::Loss, value: Box::new(|b: &crate::evolve::Best| b.fitness) };
    let mut observer = super::run::RunObserver::new(&settings.engine, &settings.islands, opts, rows.n_rows)?.with_budget(settings.budget, goal);
    let trees = |functions: &str| settings.trees.rep_with_outputs(functions, rows.n_features, n_outputs, settings.engine.max_len);
    let slots = |t: &crate::grammar::template::Templates, path: &str| if k > 1 { check_grammar_slots(t, k, path) } else { Ok(()) };
    let programs = super::search::Programs {
        names: &rows.names,
        n_outputs,
        purpose: if k > 1 { format!("for evaluation with {k} outputs") } else { "for evaluation".into() },
        check: &slots,
        trees: &trees,
    };
    let searching = std::time::Instant::now();
    let setup_seconds = searching.duration_since(start).as_secs_f64();
    let outcome = super::search::evolve(&search_settings, &programs, task, &mut observer)?;
    let search_seconds = searching.elapsed().as_secs_f64();
    if outcome.best.nodes.is_empty() {
        bail!("no valid program was found: every individual failed to map or evaluate");
    }
    Ok(Searched {
        setup_seconds,
        search_seconds,
        outcome,
        hof: std::mem::take(&mut observer.hof),
        median_sizes: std::mem::take(&mut observer.median_sizes),
        node_evaluations: observer.evals,
        seconds: start.elapsed().as_secs_f64(),
        device,
        ended: std::mem::replace(&mut observer.ended, super::budget::Ending::Generations),
        cv: None,
        cv_seconds: 0.0,
    })
}

/// `--select cv` ([`super::crossval`]): the whole fit repeated on every `k − 1` of `k` folds of
/// `rows` (the linear terms chosen again, the search run for `generations` generations from
/// its own seed, without a time limit or target, each front member's numbers fitted), its
/// front scored on the held-out fold; `None` where the run was stopped meanwhile (Ctrl-C).
pub fn cross_validate(
    settings: &EvolveSettings,
    rows: &Dataset,
    backend: &crate::backend::Backend,
    opts: &super::run::RunOptions,
    generations: usize,
) -> anyhow::Result<Option<super::crossval::SizeCurve>> {
    let folds = super::crossval::Folds::new(rows.n_rows, settings.engine.seed);
    let mut curve = super::crossval::SizeCurve::new(settings.engine.max_len);
    let quiet = super::run::RunOptions { quiet: true, stop: opts.stop.clone(), max_memory: opts.max_memory, log: opts.log.clone(), ..Default::default() };
    let stopped = || opts.stop.as_ref().is_some_and(|s| s.load(std::sync::atomic::Ordering::Relaxed));
    for f in 0..folds.k {
        let mut fold = settings.clone();
        fold.engine.generations = generations;
        fold.engine.seed = settings.engine.seed.wrapping_add(1 + f as u64);
        fold.budget = super::budget::Budget::default();
        let train = rows.subset(&folds.rows(f, false))?;
        let held = rows.subset(&folds.rows(f, true))?;
        let linear = linear_choice(&fold, &train)?;
        let lin = linear.linear();
        let joint = if fold.outputs <= 1 { linear.joint() } else { None };
        let fit_rows = match lin {
            Some(l) => std::borrow::Cow::Owned(residual(&train, l)),
            None => std::borrow::Cow::Borrowed(&train),
        };
        let searched = search_with(&fold, &fit_rows, backend, &quiet, joint)?;
        if stopped() {
            return Ok(None);
        }
        let front = searched.hof.front(|e| e.fitness - fold.regression.parsimony * e.nodes.len() as f64);
        let mut errors = Vec::with_capacity(front.len());
        for (n, e, _) in &front {
            let (r, l) = member_model(&e.nodes, &fit_rows, lin, joint, fold.regression.linear_scaling, fold.outputs)?;
            let mse = scores_with(&e.nodes, &held, &r, l.as_ref())?.mse;
            errors.push((*n, mse * held.n_rows as f64));
        }
        curve.add(&errors, held.n_rows);
    }
    Ok(Some(curve))
}

/// A program's readout and linear terms, fitted on `fit_rows` (the training rows less any
/// fixed `lin` terms): with `joint` terms, the program's weight and the terms' weights
/// together; else the readout of its `k` outputs beside the fixed terms.
fn member_model(nodes: &[Node], fit_rows: &Dataset, lin: Option<&Linear>, joint: Option<&Joint>, linear_scaling: bool, k: usize) -> anyhow::Result<(Readout, Option<Linear>)> {
    let Some(j) = joint else {
        return Ok((readout(nodes, fit_rows, linear_scaling, k)?, lin.cloned()));
    };
    let mut pop = Population::new(1, nodes.len().max(1), 0);
    // A tree that does not fit leaves the row empty, which evaluates as invalid.
    let _ = pop.set_tree(0, nodes);
    let sums = crate::backend::cpu::eval::evaluate_joint(&pop, &fit_rows.x, &fit_rows.y, fit_rows.n_rows, &j.inputs)?.remove(0);
    Ok(match j.fit_with(&sums) {
        Some((w, l)) => (Readout::Scale(w, 0.0), Some(l)),
        None => (Readout::Scale(1.0, 0.0), Some(j.alone())),
    })
}

/// Chooses the returned program from a search as `plan` says (the front scored on
/// `validation`), scores it on `rows` (where evolution fitted; the linear scaling is fitted
/// there too), `validation` and `test`, and writes the report and summary of [`fit`]. With
/// `linear` terms the search ran on the residual of `rows` ([`residual`]): each program's
/// readout is fitted there, and every score is the whole model's on the data as given.
#[allow(clippy::too_many_arguments)]
pub fn finish(
    settings: &EvolveSettings,
    plan: &super::validation::Plan,
    searched: &Searched,
    rows: &Dataset,
    validation: Option<&Dataset>,
    test: Option<&Dataset>,
    backend: &crate::backend::Backend,
    linear: &LinearChoice,
) -> anyhow::Result<EvolveResult> {
    use super::validation::{Candidate, chosen_program, constants_of, decide, description_length, front_rows, gaussian_nll, primitives_of, selection_json};

    let start = std::time::Instant::now();
    let outcome = &searched.outcome;
    let linear_scaling = settings.regression.linear_scaling;
    let k = settings.outputs;
    let parsimony = settings.regression.parsimony;
    let metric = settings.regression.metric;
    let lin = linear.linear();
    // Where each program's readout is fitted: the rows, less the linear terms.
    let fit_rows = match lin {
        Some(l) => std::borrow::Cow::Owned(residual(rows, l)),
        None => std::borrow::Cow::Borrowed(rows),
    };
    let fit_rows = fit_rows.as_ref();
    // One output with terms: each program gets its own terms from its joint fit; a head reads
    // what the terms left.
    let joint = if k <= 1 { linear.joint() } else { None };
    let model_of = |nodes: &[Node]| member_model(nodes, fit_rows, lin, joint, linear_scaling, k);
    // The terms' numbers count in every member's description.
    let lin_numbers = lin.map_or(0, |l| l.used() + 1);
    // The front, each member scaled on the fitted rows and scored on the validation rows.
    let front = searched.hof.front(|e| e.fitness - parsimony * e.nodes.len() as f64);
    let mut models = Vec::with_capacity(front.len());
    let mut cands = Vec::with_capacity(front.len());
    let primitives = primitives_of(front.iter().map(|(_, e, _)| &e.nodes[..]), rows.n_features);
    for (n, e, loss) in &front {
        let (r, l) = model_of(&e.nodes)?;
        let v = validation.map(|v| scores_with(&e.nodes, v, &r, l.as_ref())).transpose()?;
        // The readout's numbers (the scaling's two, or the head's K + 1; beside joint terms,
        // whose intercept is theirs, the program's weight) are fitted as much as the tree's
        // constants are.
        let fitted = match &r {
            Readout::Scale(..) if joint.is_some() => 1,
            Readout::Scale(..) if linear_scaling => 2,
            Readout::Scale(..) => 0,
            Readout::Head(h) => h.w.len() + 1,
        };
        let params = constants_of(&e.nodes) + fitted + lin_numbers;
        let nll = gaussian_nll(scores_with(&e.nodes, rows, &r, l.as_ref())?.mse, rows.n_rows);
        models.push((r, l));
        cands.push(Candidate {
            size: *n,
            loss: *loss,
            validation: v.map(|s| metric_of(&s, metric)),
            description: Some(description_length(nll, *n, primitives, params, rows.n_rows)),
            cv: searched.cv.as_ref().map(|c| c.mse(*n)),
        });
    }
    let best_at = front.iter().position(|(_, e, _)| e.nodes == outcome.best.nodes);
    let decision = decide(plan, &cands, best_at);
    let best = chosen_program(&front, &decision, outcome);
    let (chosen, chosen_linear) = match decision.member {
        Some(i) => models[i].clone(),
        None => model_of(&best.nodes)?,
    };
    let lin = chosen_linear.as_ref();
    let train_scores = scores_with(&best.nodes, rows, &chosen, lin)?;
    let validation_scores = validation.map(|v| scores_with(&best.nodes, v, &chosen, lin)).transpose()?;
    let test_scores = test.map(|t| scores_with(&best.nodes, t, &chosen, lin)).transpose()?;
    let names = &rows.names;
    let (infix, latex, sympy) = model_texts(&best.nodes, names, &chosen, lin);
    let score_json = |s: &Scores| {
        serde_json::json!({"mse": crate::report::num(s.mse), "rmse": crate::report::num(s.rmse),
                           "mae": crate::report::num(s.mae), "r2": crate::report::num(s.r2)})
    };
    let mut generations = generations_json(&outcome.history, &searched.median_sizes);
    add_island_stats(&mut generations, &outcome.island_history, false);
    let fame = front_rows(&front, &cands, decision.member, |nodes| {
        let (r, l) = model_of(nodes)?;
        Ok(model_texts(nodes, names, &r, l.as_ref()))
    })?;
    let node_evals = searched.node_evaluations;
    let seconds = searched.seconds + searched.cv_seconds + start.elapsed().as_secs_f64();
    let device = &searched.device;
    let mut best_json = serde_json::json!({"infix": infix, "latex": latex, "sympy": sympy,
        "size": best.nodes.len(), "fitness": crate::report::num(best.fitness), "generation": best.generation});
    match &chosen {
        Readout::Scale(a, b) => best_json["scale"] = serde_json::json!([a, b]),
        Readout::Head(h) => {
            best_json["head"] = serde_json::json!(h);
            let slots = crate::program::render::outputs(&best.nodes, k, names, crate::program::render::Style::Infix);
            best_json["outputs"] = serde_json::json!(slots);
        }
    }
    if let Some((genome, text)) = &best.genome {
        best_json["genome"] = serde_json::json!(genome);
        best_json["phenotype"] = serde_json::json!(text);
    }
    let model = super::model::Model {
        kind: super::model::ModelKind::Regression,
        features: names.clone(),
        target: rows.target.clone(),
        nodes: super::model::Model::encode(&best.nodes),
        operators: super::model::Model::operators_of(&best.nodes),
        n_outputs: chosen.n_outputs(),
        classes: None,
        scale: match chosen {
            Readout::Scale(a, b) => Some((a, b)),
            Readout::Head(_) => None,
        },
        head: match &chosen {
            Readout::Scale(..) => None,
            Readout::Head(h) => Some(h.clone()),
        },
        linear: lin.cloned(),
        logit_terms: None,
        class_head: None,
        standardize: None,
    };
    let mut report = serde_json::json!({
        "command": "evolve",
        "settings": settings,
        "generations": generations,
        "ended": searched.ended,
        "best": best_json,
        "selection": selection_json(plan, &decision, rows.n_rows, validation.map_or(0, |v| v.n_rows)),
        "linear_inputs": linear.json(),
        "train": score_json(&train_scores),
        "validation": validation_scores.as_ref().map(score_json),
        "test": test_scores.as_ref().map(score_json),
        "model": model,
        "hall_of_fame": fame,
        "timing": {"seconds": seconds, "node_evaluations": node_evals,
                   "node_evaluations_per_second": node_evals / seconds, "threads": rayon::current_num_threads(),
                   "device": device},
        "transfers": outcome.transfers,
        "version": env!("CARGO_PKG_VERSION"),
    });
    // The user operators the program uses, with the Python that gives them to sympy.
    if let Some(o) = super::model::operators_json(&best.nodes) {
        report["operators"] = o;
    }
    if let Some(c) = &searched.cv {
        report["selection"]["cross_validation"] = serde_json::json!({
            "folds": c.folds, "rows": c.rows,
            "mse_by_size": c.sse.iter().map(|e| crate::report::num(e / c.rows as f64)).collect::<Vec<_>>(),
            "fold_mse_by_size": c.per_fold.iter().map(|(rows, e)| e.iter().map(|e| crate::report::num(e / (*rows).max(1) as f64)).collect::<Vec<_>>()).collect::<Vec<_>>(),
        });
        report["timing"]["cross_validation_seconds"] = serde_json::json!(searched.cv_seconds);
    }
    let mut summary = format!("best program  {infix}\nsize          {} nodes\n", best.nodes.len());
    if let Readout::Head(h) = &chosen {
        let w: Vec<String> = h.w.iter().map(|w| format!("{w:.6e}")).collect();
        summary += &format!("head          {k} outputs under b + Σ w_k·f_k: b {:.6e}, w [{}]\n", h.b, w.join(", "));
    }
    summary += &format!("linear inputs {}\n", linear.why);
    summary += &format!("selected      {}: {}\n", decision.rule.name(), decision.why);
    if let Some(c) = &searched.cv {
        summary += &format!("cross-val     {} folds, the whole fit repeated on each: {:.2} s\n", c.folds, searched.cv_seconds);
    }
    summary += &searched.ended.line(settings.engine.generations).unwrap_or_default();
    let line = |name: &str, s: &Scores| format!("{name:<13} mse {:.6e}  rmse {:.6e}  mae {:.6e}  r2 {:.6}\n", s.mse, s.rmse, s.mae, s.r2);
    summary += &line("train", &train_scores);
    if let Some(s) = &validation_scores {
        summary += &line("validation", s);
    }
    match &test_scores {
        Some(s) => summary += &line("test", s),
        None => summary += "test          (no test data: use --test-fraction)\n",
    }
    if let Some(line) = islands_summary(&settings.islands, settings.engine.pop_size, &outcome.island_history, false) {
        summary += &line;
    }
    let generations: Vec<f64> = outcome.history.iter().map(|s| s.seconds).collect();
    let split = super::search::Split::of(searched.setup_seconds, searched.search_seconds, start.elapsed().as_secs_f64(), &generations, backend.kernel_loads());
    split.add_to(&mut report);
    summary += &split.line("generation");
    summary += &format!("time          {seconds:.2} s on {device}");
    summary += &device_loop_line(outcome);
    Ok(EvolveResult { report, summary })
}
