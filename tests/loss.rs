//! Fitness of the user's own (issue 58): a per-row loss written as an expression of the
//! prediction `p` and the target `y` (`--loss`), compiled like a user operator and scored at
//! each program's linearly scaled prediction on the CPU (here) and the GPU (`grove_loss_sums`:
//! `tests/eval_kernel_host.rs` runs its code, `tests/cuda_evolve.rs` a whole run on a GPU); and a
//! fitness function of the user's own ([`BatchFitness`], the Python package's `fitness=`) over a
//! batch of predictions.

use std::sync::{Arc, Mutex};

use grove::backend::cpu::eval::{evaluate_loss, evaluate_regression, predict_all};
use grove::backend::{Backend, PredictionBatch};
use grove::evolve::Fitness;
use grove::program::fitness::{Loss, LossReduce, scaled_prediction};
use grove::program::tree::Population;
use grove::task::regression::{BatchFitness, EvolveSettings, FitnessFn, Regression, RegressionConfig, TreeSettings};

mod support;
use support::{assert_one_line_error, grove_cpu, read_json, scratch, temp_file, text};

/// `y = 1.5 x0² − x1 + 0.5` on 200 points with a few outliers (every 23rd row off by 40).
fn data() -> grove::data::Dataset {
    let n = 200;
    let mut s = grove::rng::Stream::new(11, 0, 1, grove::rng::Purpose::Bench);
    let x: Vec<f64> = (0..2 * n).map(|_| s.unit_f64() * 4.0 - 2.0).collect();
    let y: Vec<f64> = (0..n).map(|i| 1.5 * x[i] * x[i] - x[n + i] + 0.5 + if i % 23 == 0 { 40.0 } else { 0.0 }).collect();
    grove::data::Dataset::new(vec!["x0".into(), "x1".into()], "y", x, y).unwrap()
}

fn population(n: usize, seed: u64) -> Population {
    let spec = TreeSettings::default().rep("add,sub,mul,div,sin,exp", 2, 40).unwrap().vary.spec;
    let mut pop = grove::program::init_population(&spec, n, seed).unwrap();
    pop.clear(3); // an empty row: invalid
    pop
}

/// Each bad loss is one line that names what is wrong.
#[test]
fn a_bad_loss_is_one_line() {
    for (expr, want) in [
        ("abs(p - q)", "unknown variable `q` (the parameters are p, y)"),
        ("huber(p - y)", "unknown operator `huber`"),
        ("y * y", "does not read the prediction `p`"),
        ("abs(p - y", "expected `,` or `)`"),
        ("p - y $ 2", "unexpected `$`"),
        ("", "the body is empty"),
        ("pow(p - y)", "`pow` takes 2 arguments, given 1"),
    ] {
        let e = Loss::compile(expr, LossReduce::Mean).unwrap_err();
        assert!(e.contains(want) && !e.contains('\n'), "`{expr}`: {e}");
    }
    // On the command line, naming the flag and the field.
    let out = grove_cpu(&["evolve", "--functions", "add,mul", "--loss", "abs(p - z)", "--pop", "10", "--gens", "1"]);
    assert_one_line_error(&out, &["--loss (loss)", "unknown variable `z`"]);
    // Combinations a loss cannot score.
    for (flags, want) in [
        (&["--outputs", "2"][..], "--loss (loss) scores one prediction per row"),
        (&["--linear-inputs", "on"], "--linear-inputs on"),
    ] {
        let mut args = vec!["evolve", "--functions", "add,mul", "--loss", "abs(p - y)", "--pop", "10", "--gens", "1"];
        args.extend_from_slice(flags);
        assert_one_line_error(&grove_cpu(&args), &[want]);
    }
}

/// The loss at a row is its body over the built-ins' f32 operations, `cosh` inlined as
/// `(exp(x) + exp(-x)) / 2`, and an operator defined with `--define` may be called.
#[test]
fn a_loss_computes_its_body() {
    let l = Loss::compile("log(cosh(p - y))", LossReduce::Mean).unwrap();
    for (p, y) in [(0.5f32, 0.25f32), (3.0, -1.0), (-2.0, 2.0), (0.0, 0.0)] {
        let want = ((p - y) as f64).cosh().ln();
        assert!((l.row(p, y) as f64 - want).abs() <= 1e-5 * want.max(1e-3), "({p}, {y}): {} vs {want}", l.row(p, y));
    }
    assert!(!l.row(100.0, 0.0).is_finite(), "cosh overflows past |x| ≈ 89: the row is invalid");
    grove::program::ops::user::register(&["sqerr(a, b) = (a - b) * (a - b)".to_string()]).unwrap();
    let l = Loss::compile("sqerr(p, y) / 2", LossReduce::Sum).unwrap();
    assert_eq!(l.row(3.0, 1.0), 2.0);
    // The loss is no operator a function set or grammar can name.
    assert!(grove::program::ops::parse_function_set("add,loss").is_err());
}

/// The CPU's sums are each row's loss at `scaled_prediction(f, a, b)`, `(a, b)` the fused sums'
/// scaling, added in row order (one chunk here), and invalid programs are invalid.
#[test]
fn loss_sums_are_the_rows_losses_at_the_scaled_predictions() {
    let d = data();
    let loss = Loss::compile("abs(p - y)", LossReduce::Mean).unwrap();
    let pop = population(30, 4);
    let n = d.n_rows;
    let f = predict_all(&pop, &d.x, n).unwrap();
    let sums = evaluate_regression(&pop, &d.x, &d.y, n).unwrap();
    let scale: Vec<(f64, f64)> = sums.iter().map(|s| if s.is_valid() { s.scale() } else { (1.0, 0.0) }).collect();
    let got = evaluate_loss(&pop, &d.x, &d.y, n, loss.op, &scale).unwrap();
    let mut valid = 0;
    for i in 0..pop.size() {
        let fi = &f[i * n..(i + 1) * n];
        let finite = pop.len[i] > 0 && fi.iter().all(|v| v.is_finite());
        assert_eq!(got[i].finite, finite, "program {i}");
        if !finite {
            assert_eq!(loss.value(&got[i]), f64::INFINITY);
            continue;
        }
        valid += 1;
        let (a, b) = scale[i];
        let want: f64 = fi.iter().zip(&d.y).map(|(&f, &y)| (scaled_prediction(f, a, b) - y).abs() as f64).sum();
        assert_eq!(got[i].sum.to_bits(), want.to_bits(), "program {i}");
        // With linear scaling the mean absolute error of the scaled program is the loss.
        let mae = fi.iter().zip(&d.y).map(|(&f, &y)| (a * f as f64 + b - y as f64).abs()).sum::<f64>() / n as f64;
        assert!((loss.value(&got[i]) - mae).abs() <= 1e-5 * mae, "program {i}: {} vs {mae}", loss.value(&got[i]));
    }
    assert!(valid >= 10, "{valid} valid programs");
    // (1, 0): the program's value itself; the sum is n times the mean.
    let plain = evaluate_loss(&pop, &d.x, &d.y, n, loss.op, &vec![(1.0, 0.0); pop.size()]).unwrap();
    let sum = Loss { reduce: LossReduce::Sum, ..loss };
    let i = (0..pop.size()).find(|&i| plain[i].finite).unwrap();
    assert_eq!(sum.value(&plain[i]), plain[i].sum);
    assert!((loss.value(&plain[i]) * n as f64 - sum.value(&plain[i])).abs() <= 1e-9 * sum.value(&plain[i]));
}

/// The task: the fitness is the loss (plus parsimony), lexicase's case errors are the rows'
/// losses, and a constant fit (least squares) is kept only where it does not make the loss
/// worse.
#[test]
fn the_task_scores_by_the_loss_and_keeps_only_fits_that_help() {
    let d = data();
    let backend = Backend::Cpu;
    let loss = Loss::compile("abs(p - y)", LossReduce::Mean).unwrap();
    let config = RegressionConfig { parsimony: 1e-3, ..RegressionConfig::default() };
    let rd = backend.regression_data(&d.x, &d.y, d.n_rows, d.n_features).unwrap();
    let task = Regression { backend: &backend, data: rd, config, outputs: 1, joint: None, rows: Some(&d), loss: Some(loss), fitness_fn: None };
    let pop = population(40, 5);
    let fit = task.evaluate(&pop).unwrap();
    let n = d.n_rows;
    let sums = evaluate_regression(&pop, &d.x, &d.y, n).unwrap();
    let scale: Vec<(f64, f64)> = sums.iter().map(|s| if s.is_valid() { s.scale() } else { (1.0, 0.0) }).collect();
    let want = evaluate_loss(&pop, &d.x, &d.y, n, loss.op, &scale).unwrap();
    for i in 0..pop.size() {
        let w = if pop.len[i] == 0 || !want[i].finite { f64::INFINITY } else { loss.value(&want[i]) + 1e-3 * pop.len[i] as f64 };
        assert_eq!(fit[i].to_bits(), w.to_bits(), "program {i}");
    }
    assert!(task.device_task().is_none(), "a loss runs the host loop");
    // Case errors: each row's loss at the scaled prediction.
    let cases: Vec<u32> = vec![0, 5, 23, 199];
    let errors = task.case_errors(&pop, 0, &cases).unwrap();
    let f = predict_all(&pop, &d.x, n).unwrap();
    for i in (0..pop.size()).filter(|&i| fit[i].is_finite()) {
        for (c, &r) in cases.iter().enumerate() {
            let (a, b) = scale[i];
            let e = loss.row(scaled_prediction(f[i * n + r as usize], a, b), d.y[r as usize]) as f64;
            assert_eq!(errors[i * cases.len() + c], e, "program {i}, row {r}");
        }
    }
    // Constant fitting: no row ends worse than it was, and the unfitted rows are unchanged.
    let mut fitted = pop.clone();
    let rows: Vec<usize> = (0..pop.size()).collect();
    let after = task.fit_constants(&mut fitted, &rows, 10).unwrap().unwrap();
    for (k, &r) in rows.iter().enumerate() {
        assert!(after[k] <= fit[r] || !fit[r].is_finite(), "program {r}: {} after the fit, {} before", after[k], fit[r]);
        assert_eq!(after[k].to_bits(), task.evaluate(&fitted.gather(&[r])).unwrap()[0].to_bits(), "program {r}: the fitness is the tree's");
        if after[k] == fit[r] {
            continue;
        }
        assert_ne!(fitted.tree(r).nodes(), pop.tree(r).nodes(), "program {r} changed its fitness, so its tree");
    }
}

/// A run with `--loss`: the summary and the report show the loss beside the standard scores,
/// the best program's fitness is its training loss, `--loss-reduce sum` multiplies it by the
/// rows, and `grove run --from` repeats the run.
#[test]
fn a_run_minimises_the_loss_and_reports_it() {
    let dir = scratch();
    let report = dir.join("loss.json");
    let args = [
        "evolve", "--data", "builtin:koza1", "--functions", "add,sub,mul,div", "--pop", "200", "--gens", "6", "--select", "train",
        "--loss", "log(cosh(p - y))", "-q", "--report", report.to_str().unwrap(),
    ];
    let out = grove_cpu(&args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(s.contains("loss          mean of log(cosh(p - y)) over the rows, at the prediction a·f + b"), "{s}");
    assert!(s.contains("\ntrain         loss "), "{s}");
    assert!(s.contains("linear inputs off: --loss"), "{s}");
    let r = read_json(&report);
    assert_eq!(r["settings"]["loss"], "log(cosh(p - y))");
    let (fitness, train) = (r["best"]["fitness"].as_f64().unwrap(), r["train"]["loss"].as_f64().unwrap());
    assert!((fitness - train).abs() <= 1e-12 * train.max(1e-30), "fitness {fitness} vs train loss {train}");
    let again = grove_cpu(&["run", "--from", report.to_str().unwrap(), "-q"]);
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert_eq!(text(&again.stdout).lines().find(|l| l.starts_with("train")), s.lines().find(|l| l.starts_with("train")));
    // The sum: the same run (the sum is the mean times the rows, a constant factor), its fitness
    // the rows times the mean.
    let mut summed = args.to_vec();
    summed.extend(["--loss-reduce", "sum"]);
    let out = grove_cpu(&summed);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let r2 = read_json(&report);
    let rows = r2["selection"]["training_rows"].as_f64().unwrap();
    assert!((r2["best"]["fitness"].as_f64().unwrap() - rows * train).abs() <= 1e-6 * rows * train);
    // In an experiment file.
    let ron = temp_file("loss.ron", "Evolve(data: \"builtin:koza1\", functions: \"add,sub,mul,div\", loss: \"abs(p - y)\", loss_reduce: \"sum\", engine: (pop_size: 50, generations: 2))");
    let out = grove_cpu(&["run", ron.to_str().unwrap(), "-q"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("loss          sum of abs(p - y)"), "{}", text(&out.stdout));
}

/// A fitness function of the user's own in Rust (what the Python package wraps): it sees each
/// program's scaled predictions and the targets, its scores become the fitness, and what it
/// gets wrong stops the run with one line.
struct Recorder {
    calls: Mutex<Vec<(usize, usize)>>,
    fail: Option<&'static str>,
}

impl BatchFitness for Recorder {
    fn name(&self) -> String {
        "recorder".into()
    }
    fn score(&self, batch: PredictionBatch) -> anyhow::Result<Vec<f64>> {
        let PredictionBatch::Host { pred, y, programs, rows } = batch else { anyhow::bail!("a host batch expected") };
        self.calls.lock().unwrap().push((programs, rows));
        match self.fail {
            Some("raise") => anyhow::bail!("ValueError: my fitness failed"),
            Some("shape") => return Ok(vec![0.0; programs + 1]),
            Some("nan") => return Ok(vec![f64::NAN; programs]),
            _ => {}
        }
        // The median absolute error, which no built-in metric is.
        Ok(pred
            .chunks(rows)
            .map(|p| {
                let mut e: Vec<f64> = p.iter().zip(&y).map(|(p, y)| (p - y).abs() as f64).collect();
                e.sort_by(|a, b| a.partial_cmp(b).unwrap());
                e[rows / 2]
            })
            .collect())
    }
}

#[test]
fn a_fitness_function_scores_batches_of_predictions() {
    let d = data();
    let quiet = grove::task::base::options::RunOptions { quiet: true, ..Default::default() };
    let rec = Arc::new(Recorder { calls: Mutex::new(Vec::new()), fail: None });
    let mut settings = EvolveSettings::cli_default();
    settings.functions = Some("add,sub,mul".into());
    settings.engine.pop_size = 60;
    settings.engine.generations = 3;
    settings.validation_fraction = Some(0.0);
    settings.select = grove::task::base::validation::Select::Train;
    settings.fitness_function = Some("recorder".into());
    settings.fitness_fn = Some(FitnessFn(rec.clone()));
    let r = grove::task::regression::fit(&settings, &d, Some(&d), &Backend::Cpu, &quiet).unwrap().report;
    let calls = rec.calls.lock().unwrap().clone();
    assert!(calls.iter().filter(|c| **c == (60, 200)).count() >= 4, "a batch of the population each generation: {calls:?}");
    assert!(calls.contains(&(1, 200)), "the returned program scored for the report: {calls:?}");
    let (fitness, train) = (r["best"]["fitness"].as_f64().unwrap(), r["train"]["loss"].as_f64().unwrap());
    assert_eq!(fitness, train, "the fitness is the function's score of the training rows");
    assert_eq!(r["settings"]["fitness_function"], "recorder");
    assert!(r["linear_inputs"]["why"].as_str().unwrap().contains("fitness function"), "{}", r["linear_inputs"]);
    // Its report names the function, which the command line does not have: one line.
    let saved = temp_file("recorder.json", &r.to_string());
    assert_one_line_error(&grove_cpu(&["run", "--from", saved.to_str().unwrap()]), &["the function `recorder` of a Python session", "runs from Python only"]);
    // What a function gets wrong stops the run, naming it.
    for (fail, want) in [("raise", "ValueError: my fitness failed"), ("shape", "returned 61 scores for 60 programs"), ("nan", "returned NaN for program")] {
        settings.fitness_fn = Some(FitnessFn(Arc::new(Recorder { calls: Mutex::new(Vec::new()), fail: Some(fail) })));
        let e = format!("{:#}", grove::task::regression::fit(&settings, &d, None, &Backend::Cpu, &quiet).err().expect("the run fails"));
        assert!(e.contains(want), "{fail}: {e}");
    }
    // The settings name the function; without it the run refuses, in one line.
    settings.fitness_fn = None;
    let e = format!("{:#}", grove::task::regression::fit(&settings, &d, None, &Backend::Cpu, &quiet).err().expect("the run fails"));
    assert!(e.contains("the function `recorder` of a Python session") && !e.contains('\n'), "{e}");
    settings.engine.selection = grove::select::Selection::Lexicase;
    assert!(format!("{:#}", settings.check().unwrap_err()).contains("--selection tournament"));
}
