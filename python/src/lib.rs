//! `grove._grove`: the Python face of grove's library. The estimators in `python/grove` call
//! these functions; each one calls the same library function as the command line
//! (`task::regression::fit`, `task::classify::fit`, `task::control::fit`,
//! `task::base::model::Model::outputs_of`, `task::control::replay`), so a run from Python and the
//! same run of `grove evolve` / `grove classify` give the same programs and scores.
//!
//! Settings arrive as JSON fields laid over the command line's defaults (the experiment-file
//! format of `grove run`), data as numpy arrays. A run goes on a worker thread while this
//! thread waits with the GIL released, polling Python's signal handlers; Ctrl-C sets the
//! engine's stop flag, the engine stops between generations, and the call raises
//! `KeyboardInterrupt` (a fit writes nothing, so nothing is left half-written). Progress lines
//! and notes come back to this thread, which writes them to Python's `sys.stderr` (what a
//! notebook shows), never to the process's standard error.
//!
//! A warm-started fit returns, with its report, the engine's state before its last generation
//! (a checkpoint, as `grove run --resume` reads them), which the next one continues; `control` saves
//! checkpoints to a file and resumes from one, as `grove control --checkpoint` and `grove run
//! --resume` do.

mod fitness;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use numpy::{PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::exceptions::{PyKeyboardInterrupt, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use grove::backend::{Backend, DeviceChoice, Gpus};
use grove::data::Dataset;
use grove::data::classes::{Labeled, Standardize};
use grove::task::runner::experiment::Experiment;
use grove::task::base::model::Model;
use grove::report::Log;
use grove::task::runner::checkpoint::{Checkpoint, FileCheckpoints, check_checkpoint_path};
use grove::task::base::options::{Checkpoints, RunOptions};
use grove::task::base::options::Stopped;

/// A bad argument: `ValueError` with the whole error chain.
fn value_error(e: anyhow::Error) -> PyErr {
    PyValueError::new_err(format!("{e:#}"))
}

/// Features as the engine reads them: `x` is `(n_rows, n_features)`, float32 or float64, any
/// memory order; the result is `[n_features][n_rows]`, feature-major, f32 (for a Fortran-order
/// float32 array, a straight copy of its memory), with the row and feature counts.
fn features(x: &Bound<'_, PyAny>) -> PyResult<(Vec<f32>, usize, usize)> {
    if let Ok(a) = x.extract::<PyReadonlyArray2<'_, f32>>() {
        let v = a.as_array();
        let (n, f) = v.dim();
        return Ok((v.t().iter().copied().collect(), n, f));
    }
    if let Ok(a) = x.extract::<PyReadonlyArray2<'_, f64>>() {
        let v = a.as_array();
        let (n, f) = v.dim();
        if let Some(((i, j), &bad)) = v.indexed_iter().find(|(_, v)| v.is_finite() && !(**v as f32).is_finite()) {
            return Err(PyValueError::new_err(format!(
                "X[{i}, {j}] = {bad:e} is outside the float32 range (±3.4e38) the engine computes in"
            )));
        }
        return Ok((v.t().iter().map(|&v| v as f32).collect(), n, f));
    }
    Err(PyValueError::new_err("X must be a 2-D numpy array of float32 or float64 values (rows × features)"))
}

/// A 1-D float32 or float64 array as f32.
fn values(y: &Bound<'_, PyAny>) -> PyResult<Vec<f32>> {
    if let Ok(a) = y.extract::<PyReadonlyArray1<'_, f32>>() {
        return Ok(a.as_array().to_vec());
    }
    if let Ok(a) = y.extract::<PyReadonlyArray1<'_, f64>>() {
        let v = a.as_array();
        if let Some((i, &bad)) = v.indexed_iter().find(|(_, v)| v.is_finite() && !(**v as f32).is_finite()) {
            return Err(PyValueError::new_err(format!(
                "y[{i}] = {bad:e} is outside the float32 range (±3.4e38) the engine computes in"
            )));
        }
        return Ok(v.iter().map(|&v| v as f32).collect());
    }
    Err(PyValueError::new_err("y must be a 1-D numpy array of float32 or float64 values"))
}

/// The settings of `command` from JSON fields laid over the command line's defaults, checked.
fn experiment(command: &str, settings: &str, origin: &str) -> PyResult<Experiment> {
    let given: serde_json::Value =
        serde_json::from_str(settings).map_err(|e| PyValueError::new_err(format!("{origin}: settings are not JSON: {e}")))?;
    Experiment::from_parts(command, given, origin).map_err(value_error)
}

/// What the worker thread sends: a note to warn with (the CPU fallback), a line of progress to
/// show, then the result.
enum Message {
    Note(String),
    Line(String),
    Done(anyhow::Result<Finished>),
}

/// What a run gives back: its JSON report and, for a fit, the engine's state (a checkpoint's
/// bytes) that a warm start continues.
type Finished = (String, Option<Vec<u8>>);

/// A job for the worker thread: gets the run's options (verbosity, the stop flag, the log that
/// sends progress back) and a way to send notes.
type Job = Box<dyn FnOnce(RunOptions, &(dyn Fn(String) + Sync)) -> anyhow::Result<Finished> + Send>;

/// Writes one line to Python's `sys.stderr` (looked up each time: a notebook or pytest's
/// `capsys` may have replaced it); nothing when there is none.
fn write_stderr(py: Python<'_>, line: &str) -> PyResult<()> {
    let stderr = py.import("sys")?.getattr("stderr")?;
    if stderr.is_none() {
        return Ok(());
    }
    stderr.call_method1("write", (format!("{line}\n"),))?;
    stderr.call_method0("flush")?;
    Ok(())
}

/// Runs `job` on a worker thread (on `threads` rayon threads, default: all cores) while this
/// thread waits with the GIL released. Progress lines (`verbose`: 0 none, 1 the progress
/// lines, 2 also a line per generation) go to `sys.stderr`, notes to `on_note`, as they come.
/// Every 50 ms it runs Python's signal handlers: when one raises (Ctrl-C: `KeyboardInterrupt`),
/// it sets the stop flag, waits for the engine to stop between generations, and raises that
/// error (saying where the run's checkpoint is when `saved` names one).
fn run_detached(
    py: Python<'_>,
    threads: Option<usize>,
    verbose: u8,
    on_note: Option<&Bound<'_, PyAny>>,
    saved: Option<&Path>,
    job: Job,
) -> PyResult<Finished> {
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel::<Message>();
    let lines = tx.clone();
    let log = Log(Arc::new(move |line: &str| {
        let _ = lines.send(Message::Line(line.to_string()));
    }));
    let (quiet, verbose, stop_flag) = (verbose == 0, verbose >= 2, Some(stop.clone()));
    let opts = RunOptions { quiet, verbose, stop: stop_flag, log: Some(log), ..Default::default() };
    let worker = std::thread::Builder::new()
        .name("grove-run".into())
        .spawn(move || {
            let notes = tx.clone();
            let note = move |s: String| {
                let _ = notes.send(Message::Note(s));
            };
            let result = grove::task::base::options::on_threads(threads, || job(opts, &note));
            let _ = tx.send(Message::Done(result));
        })
        .map_err(|e| PyRuntimeError::new_err(format!("cannot start the run's thread: {e}")))?;
    // The first Python error met while the run goes on (a signal handler's, a note
    // callback's, writing a line): raised once the engine has stopped.
    let mut failed: Option<PyErr> = None;
    let mut rx = rx;
    loop {
        // The receiver goes into the detached closure and back (it is Send, not Sync).
        let (next, back) = py.detach(move || (rx.recv_timeout(Duration::from_millis(50)), rx));
        rx = back;
        let shown = match next {
            Ok(Message::Note(s)) => match (on_note, &failed) {
                (Some(cb), None) => cb.call1((s,)).map(drop),
                _ => Ok(()),
            },
            Ok(Message::Line(s)) if failed.is_none() => write_stderr(py, &s),
            Ok(Message::Line(_)) => Ok(()),
            Ok(Message::Done(result)) => {
                let _ = py.detach(|| worker.join());
                // A Ctrl-C that stopped the run raises the interrupt that says where its
                // checkpoint is; any other Python error raises as it was.
                let stopped = result.as_ref().err().and_then(|e| stopped_error(e, saved));
                return match (failed, stopped) {
                    (Some(e), Some(s)) if e.is_instance_of::<PyKeyboardInterrupt>(py) => Err(s),
                    (Some(e), _) => Err(e),
                    (None, Some(s)) => Err(s),
                    (None, None) => result.map_err(|e| PyRuntimeError::new_err(format!("{e:#}"))),
                };
            }
            Err(mpsc::RecvTimeoutError::Timeout) if failed.is_none() => py.check_signals(),
            Err(mpsc::RecvTimeoutError::Timeout) => Ok(()),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(failed.unwrap_or_else(|| PyRuntimeError::new_err("the run's thread ended without a result")));
            }
        };
        if let Err(e) = shown {
            stop.store(true, Ordering::SeqCst);
            failed.get_or_insert(e);
        }
    }
}

/// `KeyboardInterrupt` for a run that stopped on request (`None` for any other error), saying
/// which checkpoint continues it when `saved` names one.
fn stopped_error(e: &anyhow::Error, saved: Option<&Path>) -> Option<PyErr> {
    let generation = match (e.downcast_ref::<grove::evolve::Interrupted>(), e.downcast_ref::<Stopped>()) {
        (Some(i), _) => i.generation,
        (None, Some(s)) => s.generation,
        (None, None) => return None,
    };
    Some(PyKeyboardInterrupt::new_err(match saved {
        Some(p) => format!(
            "the run was stopped before generation {generation}; its checkpoint {} continues it (the same call with resume=True)",
            p.display()
        ),
        None => "the run was stopped".to_string(),
    }))
}

/// A fresh path in the system's temporary directory for the state a fit keeps (the run writes
/// its checkpoint there; the fit reads it back and removes it).
fn state_path() -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    std::env::temp_dir().join(format!("grove-fit-{}-{}.ckpt", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed)))
}

/// Runs `fit` with `opts` set to continue `warm` (a checkpoint of an earlier fit, checked by
/// [`continuing`]) and, with `keep`, to save the engine's state before the last generation (to
/// a temporary file, read back and removed); returns the report and that state.
fn fit_keeping_state(
    exp: Experiment,
    warm: Option<Checkpoint>,
    keep: bool,
    opts: RunOptions,
    fit: impl FnOnce(&RunOptions) -> anyhow::Result<String>,
) -> anyhow::Result<Finished> {
    if !keep {
        return Ok((fit(&RunOptions { resume: warm.map(|c| c.run), ..opts })?, None));
    }
    let path = state_path();
    // The state file is the fit's own, no checkpoint of the user's: the line saying it was saved
    // is not shown.
    let log = opts.log.clone().map(|log| {
        let own = path.display().to_string();
        Log(Arc::new(move |line: &str| {
            if !line.ends_with(&own) {
                (log.0)(line)
            }
        }))
    });
    // The data is the estimator's, in memory: no input file to record.
    let keeping = FileCheckpoints::of_data_in_memory(path.clone(), 0, exp)?;
    let opts = RunOptions { checkpoint: Some(Arc::new(keeping)), resume: warm.map(|c| c.run), log, ..opts };
    let result = fit(&opts);
    let state = std::fs::read(&path);
    let _ = std::fs::remove_file(&path);
    let report = result?;
    let state = state.map_err(|e| anyhow::anyhow!("cannot read back the fit's state {}: {e}", path.display()))?;
    Ok((report, Some(state)))
}

/// The first place where two settings differ (`engine.pop_size`, the earlier value, the new
/// one), leaving out what a continued run may change: the generations, the device, the GPUs.
fn first_difference(old: &Experiment, new: &Experiment) -> Option<(String, serde_json::Value, serde_json::Value)> {
    fn walk(path: &str, a: &serde_json::Value, b: &serde_json::Value) -> Option<(String, serde_json::Value, serde_json::Value)> {
        use serde_json::Value;
        let at = |k: &str| if path.is_empty() { k.to_string() } else { format!("{path}.{k}") };
        if let (Value::Object(x), Value::Object(y)) = (a, b) {
            for (k, v) in x {
                if let Some(d) = walk(&at(k), v, y.get(k).unwrap_or(&Value::Null)) {
                    return Some(d);
                }
            }
            return y.iter().find(|(k, _)| !x.contains_key(*k)).map(|(k, v)| (at(k), Value::Null, v.clone()));
        }
        (a != b).then(|| (path.to_string(), a.clone(), b.clone()))
    }
    let comparable = |e: &Experiment| {
        let mut e = e.clone();
        e.engine_mut().generations = 0;
        *e.device_mut() = Default::default();
        e.islands_mut().gpus = Default::default();
        *e.budget_mut() = Default::default();
        e.settings_json()
    };
    walk("", &comparable(old), &comparable(new))
}

/// Reads the state `bytes` of an earlier run (`origin` names it in errors) and checks that `exp`
/// continues it: the same command and settings but for the generations (no fewer than it has
/// run), the device and the GPUs. Each problem is one `ValueError` line.
fn continuing(bytes: &[u8], exp: &Experiment, origin: &str) -> PyResult<Checkpoint> {
    let c = Checkpoint::from_json(bytes, origin).map_err(value_error)?;
    if c.experiment.command() != exp.command() {
        return Err(PyValueError::new_err(format!("{origin} is a {} run, not a {} one", c.experiment.command(), exp.command())));
    }
    if let Some((path, was, now)) = first_difference(&c.experiment, exp) {
        return Err(PyValueError::new_err(format!(
            "{origin}: the settings differ at `{path}` (was {was}, now {now}); \
             a continued run may change only its generations, budget, device and gpus"
        )));
    }
    let (done, want) = (c.run.state.generation, exp.engine().generations);
    if want < done {
        return Err(PyValueError::new_err(format!(
            "{origin} has run {done} generations; generations={want} is fewer (generations counts the whole run)"
        )));
    }
    Ok(c)
}

/// Opens the device of a run on the first of the GPUs `gpus` chooses, sending the notes of what
/// it left out (the CPU fallback, GPUs that are not there).
fn open(device: DeviceChoice, gpus: &Gpus, note: &(dyn Fn(String) + Sync)) -> anyhow::Result<Backend> {
    let opened = Backend::open(device, gpus)?;
    for n in opened.notes {
        note(n);
    }
    Ok(opened.backend)
}

/// Checks that the function set parses and a grammar given by path or text loads, so that a
/// bad one is a `ValueError` before the run starts.
fn check_representation(functions: Option<&str>, grammar: Option<&str>, n_features: usize, n_outputs: usize) -> PyResult<()> {
    if let Some(f) = functions {
        grove::program::ops::parse_function_set(f).map_err(|e| PyValueError::new_err(format!("function_set: {e}")))?;
    }
    if let Some(g) = grammar {
        let n = n_features as u32;
        let shape = grove::grammar::DatasetShape { n_vars: Some(n), n_is: Some(n), n_os: Some(n_outputs.max(1) as u32) };
        grove::grammar::load_spec(g, &shape).map_err(value_error)?;
    }
    Ok(())
}

/// Checks that the validation split and rule fit `n_rows` rows (the split's sizes; `labels`:
/// per class), so that a bad combination is a `ValueError` before the run starts.
fn check_choice(
    fraction: Option<f64>,
    select: grove::task::base::validation::Select,
    folds: Option<usize>,
    n_rows: usize,
    seed: u64,
    labels: Option<(&[u32], usize)>,
) -> PyResult<()> {
    use grove::data::split::Holdout;
    let auto: grove::task::base::validation::Auto =
        if labels.is_some() { grove::task::base::defaults::CLASSIFY_SMALL_DATA_RULE.into() } else { grove::task::base::defaults::EVOLVE_AUTO };
    let plan = grove::task::base::validation::Plan::new(fraction, select, n_rows, auto).map_err(value_error)?;
    // A fold count past the rows the folds are dealt from.
    if plan.fraction == 0.0 {
        grove::task::base::crossval::fold_count(folds, n_rows).map_err(value_error)?;
    }
    // An automatic split that cannot be made gives way to none (the run says so).
    if plan.fraction > 0.0 && fraction.is_some() {
        let context = "validation_fraction";
        match labels {
            Some((codes, k)) => grove::data::classes::stratified_indices_for(codes, k, plan.fraction, seed, Holdout::VALIDATION)
                .map_err(|e| value_error(e.context(context)))?,
            None => grove::data::split::split_indices_for(n_rows, plan.fraction, seed, Holdout::VALIDATION)
                .map_err(|e| value_error(e.context(context)))?,
        };
    }
    Ok(())
}

/// Checks that `y` has a value per row of `X` (`(n_rows, n_features)`) and that there is a
/// name per feature.
fn check_shapes((n_rows, n_features): (usize, usize), n_y: usize, n_names: usize) -> PyResult<()> {
    if n_y != n_rows {
        return Err(PyValueError::new_err(format!("X has {n_rows} rows but y has {n_y} values")));
    }
    if n_names != n_features {
        return Err(PyValueError::new_err(format!("{n_names} feature names for {n_features} features")));
    }
    Ok(())
}

/// The state of an earlier fit that a warm start continues, checked against `exp` ([`continuing`]).
fn warm_state(warm: Option<&Bound<'_, PyBytes>>, exp: &Experiment, origin: &str) -> PyResult<Option<Checkpoint>> {
    warm.map(|b| continuing(b.as_bytes(), exp, &format!("{origin} (warm_start)"))).transpose()
}

/// The report and the state of a fit, for Python: `(report JSON, state bytes)`.
fn finished<'py>(py: Python<'py>, (report, state): Finished) -> (String, Option<Bound<'py, PyBytes>>) {
    (report, state.map(|s| PyBytes::new(py, &s)))
}

/// Symbolic regression on `x` (`(n_rows, n_features)`) and `y` (`(n_rows,)`): the settings
/// of `grove evolve` (JSON fields over its defaults), feature names and the target's name.
/// `warm`: the state of an earlier fit to continue (the same settings but for the
/// generations, device and GPUs). `fitness_function`: a callable `f(pred, y)` scoring each
/// program (lower is better) instead of the settings' metric or loss ([`fitness`]), given
/// numpy arrays on the CPU and DLPack arrays on a GPU, or DLPack arrays everywhere with
/// `fitness_arrays="dlpack"`. Returns the run's JSON report, as `grove evolve --report` writes
/// it, and with `keep_state` the engine's state before its last generation (a checkpoint's
/// bytes, which a warm start continues). An exception the function raises is raised again.
#[pyfunction]
#[pyo3(signature = (settings, x, y, names, target, threads=None, verbose=0, on_note=None, warm=None, keep_state=false, fitness_function=None, fitness_arrays="auto"))]
#[allow(clippy::too_many_arguments)]
fn fit_regression<'py>(
    py: Python<'py>,
    settings: &str,
    x: &Bound<'py, PyAny>,
    y: &Bound<'py, PyAny>,
    names: Vec<String>,
    target: String,
    threads: Option<usize>,
    verbose: u8,
    on_note: Option<Bound<'py, PyAny>>,
    warm: Option<Bound<'py, PyBytes>>,
    keep_state: bool,
    fitness_function: Option<Bound<'py, PyAny>>,
    fitness_arrays: &str,
) -> PyResult<(String, Option<Bound<'py, PyBytes>>)> {
    let exp = experiment("evolve", settings, "SymbolicRegressor")?;
    let Experiment::Evolve(mut settings) = exp.clone() else {
        return Err(PyValueError::new_err("expected regression settings"));
    };
    let arrays = match fitness_arrays {
        "auto" => fitness::Arrays::Auto,
        "dlpack" => fitness::Arrays::DlPack,
        other => return Err(PyValueError::new_err(format!("fitness_arrays must be \"auto\" or \"dlpack\", got {other:?}"))),
    };
    let own = fitness_function.as_ref().map(|f| fitness::PyFitness::new(f, arrays)).transpose()?.map(std::sync::Arc::new);
    let exp = match &own {
        Some(f) => {
            use grove::task::regression::BatchFitness;
            settings.fitness_function = Some(f.name());
            settings.fitness_fn = Some(grove::task::regression::FitnessFn(f.clone()));
            let exp = Experiment::Evolve(settings.clone());
            exp.check().map_err(value_error)?;
            exp
        }
        None => exp,
    };
    let warm = warm_state(warm.as_ref(), &exp, "SymbolicRegressor")?;
    let (x, n_rows, n_features) = features(x)?;
    let y = values(y)?;
    check_shapes((n_rows, n_features), y.len(), names.len())?;
    let train = Dataset::from_f32(names, target, x, y).map_err(value_error)?;
    check_representation(settings.functions.as_deref(), settings.grammar.as_deref(), n_features, 1)?;
    check_choice(settings.validation_fraction, settings.select, settings.folds, n_rows, settings.engine.seed, None)?;
    let job: Job = Box::new(move |opts, note| {
        let backend = open(settings.device, &settings.islands.gpus, note)?;
        fit_keeping_state(exp, warm, keep_state, opts, |opts| {
            Ok(grove::task::regression::fit(&settings, &train, None, &backend, opts)?.report.to_string())
        })
    });
    match run_detached(py, threads, verbose, on_note.as_ref(), None, job) {
        Ok(done) => Ok(finished(py, done)),
        // The fitness function's own exception, as it was raised.
        Err(e) => Err(own.and_then(|f| f.take_error()).unwrap_or(e)),
    }
}

/// Classification of `x` (`(n_rows, n_features)`) into `classes` by `codes` (`(n_rows,)`,
/// each row's class index): the settings of `grove classify` (JSON fields over its
/// defaults; `standardize` decides whether features are standardised, as there). `warm` and
/// `keep_state` as for [`fit_regression`]. Returns the run's JSON report, as `grove classify
/// --report` writes it (with no test part), and the state kept.
#[pyfunction]
#[pyo3(signature = (settings, x, codes, classes, names, target, threads=None, verbose=0, on_note=None, warm=None, keep_state=false))]
#[allow(clippy::too_many_arguments)]
fn fit_classification<'py>(
    py: Python<'py>,
    settings: &str,
    x: &Bound<'py, PyAny>,
    codes: PyReadonlyArray1<'py, u32>,
    classes: Vec<String>,
    names: Vec<String>,
    target: String,
    threads: Option<usize>,
    verbose: u8,
    on_note: Option<Bound<'py, PyAny>>,
    warm: Option<Bound<'py, PyBytes>>,
    keep_state: bool,
) -> PyResult<(String, Option<Bound<'py, PyBytes>>)> {
    let exp = experiment("classify", settings, "SymbolicClassifier")?;
    let Experiment::Classify(settings) = exp.clone() else {
        return Err(PyValueError::new_err("expected classification settings"));
    };
    let warm = warm_state(warm.as_ref(), &exp, "SymbolicClassifier")?;
    let (x, n_rows, n_features) = features(x)?;
    let codes = codes.as_array().to_vec();
    check_shapes((n_rows, n_features), codes.len(), names.len())?;
    let n_outputs = if settings.binary { 0 } else { classes.len() };
    let n_classes = classes.len();
    let mut train = Labeled::from_codes(names, &target, x, codes, classes).map_err(value_error)?;
    check_choice(settings.validation_fraction, settings.select, None, n_rows, settings.engine.seed, Some((&train.labels, n_classes)))?;
    let standardize = settings.standardize.then(|| Standardize::fit(&train.data.x, n_rows));
    if let Some(s) = &standardize {
        s.apply_to(&mut train.data);
    }
    check_representation(settings.functions.as_deref(), settings.grammar.as_deref(), n_features, n_outputs)?;
    let job: Job = Box::new(move |opts, note| {
        let backend = open(settings.device, &settings.islands.gpus, note)?;
        fit_keeping_state(exp, warm, keep_state, opts, |opts| {
            let result = grove::task::classify::fit(&settings, &train, None, standardize.as_ref(), &backend, opts)?;
            Ok(result.report.to_string())
        })
    });
    Ok(finished(py, run_detached(py, threads, verbose, on_note.as_ref(), None, job)?))
}

/// A control policy for an environment: the settings of `grove control` (JSON fields over
/// its defaults, which depend on the device). With `checkpoint`, the run saves its state there
/// every `checkpoint_every` generations, before the last one and on Ctrl-C (`grove control
/// --checkpoint`); with `resume` too and a checkpoint at that path, it continues that run (the
/// same settings but for the generations, device and GPUs), as `grove run --resume` does.
/// Returns the run's JSON report (its `policy` is what `grove rollout --policy` replays).
#[pyfunction]
#[pyo3(signature = (settings, threads=None, verbose=0, on_note=None, checkpoint=None, checkpoint_every=10, resume=false))]
#[allow(clippy::too_many_arguments)]
fn control(
    py: Python<'_>,
    settings: &str,
    threads: Option<usize>,
    verbose: u8,
    on_note: Option<Bound<'_, PyAny>>,
    checkpoint: Option<PathBuf>,
    checkpoint_every: usize,
    resume: bool,
) -> PyResult<String> {
    let given: serde_json::Value =
        serde_json::from_str(settings).map_err(|e| PyValueError::new_err(format!("control: settings are not JSON: {e}")))?;
    let device: DeviceChoice = match given.get("device") {
        Some(d) => serde_json::from_value(d.clone()).map_err(|e| PyValueError::new_err(format!("device: {e}")))?,
        None => Default::default(),
    };
    // Checked once on the CPU's defaults so that bad settings fail before the run starts.
    let checked = grove::task::control::ControlSettings::from_json(given.clone(), false).map_err(value_error)?;
    grove::sim::Model::load(&checked.env, checked.profile.as_deref()).map_err(value_error)?;
    if checkpoint_every == 0 {
        return Err(PyValueError::new_err("checkpoint_every must be at least 1"));
    }
    if resume && checkpoint.is_none() {
        return Err(PyValueError::new_err("resume=True continues the run saved at checkpoint: give checkpoint=PATH"));
    }
    if let Some(path) = &checkpoint {
        check_checkpoint_path(path).map_err(value_error)?;
    }
    // The saved run to continue: read now, checked against the settings once the device is known.
    let saved = match &checkpoint {
        Some(path) if resume && path.exists() => {
            Some(std::fs::read(path).map_err(|e| PyValueError::new_err(format!("cannot read the checkpoint {}: {e}", path.display())))?)
        }
        _ => None,
    };
    let on_gpu = device.has_gpu();
    let expected = grove::task::control::ControlSettings::from_json(given.clone(), on_gpu).map_err(value_error)?;
    let origin = checkpoint.as_ref().map(|p| p.display().to_string()).unwrap_or_default();
    let resumed = saved.map(|b| continuing(&b, &Experiment::Control(expected), &origin)).transpose()?;
    let gpus = checked.islands.gpus.clone();
    let path = checkpoint.clone();
    let job: Job = Box::new(move |opts, note| {
        let backend = open(device, &gpus, note)?;
        let settings = grove::task::control::ControlSettings::from_json(given, backend.is_gpu())?;
        let checkpoint: Option<Arc<dyn Checkpoints>> = match path {
            Some(p) => Some(Arc::new(FileCheckpoints::new(p, checkpoint_every, Experiment::Control(settings.clone()), &Default::default())?)),
            None => None,
        };
        let opts = RunOptions { checkpoint, resume: resumed.map(|c| c.run), ..opts };
        let result = grove::task::control::fit(&settings, &backend, &opts)?;
        Ok((result.report.to_string(), None))
    });
    Ok(run_detached(py, threads, verbose, on_note.as_ref(), checkpoint.as_deref(), job)?.0)
}

/// Reads a model (`model` of a report) from JSON.
fn model(json: &str) -> PyResult<Model> {
    serde_json::from_str(json).map_err(|e| PyValueError::new_err(format!("not a grove model: {e}")))
}

/// `x` (`(n_rows, n_features)`) as the model reads it, `[features][n_rows]` f32, and its row
/// count; an error unless it has the model's features.
fn model_features(m: &Model, x: &Bound<'_, PyAny>) -> PyResult<(Vec<f32>, usize)> {
    let (x, n_rows, n_features) = features(x)?;
    if n_features != m.features.len() {
        return Err(PyValueError::new_err(format!(
            "X has {n_features} features, but the model reads {} ({})",
            m.features.len(),
            m.features.join(", ")
        )));
    }
    Ok((x, n_rows))
}

/// The model's outputs on `x`, `[max(1, n_outputs)][n_rows]`, computed with the GIL released.
fn model_outputs(py: Python<'_>, m: &Model, x: &Bound<'_, PyAny>) -> PyResult<(Vec<f32>, usize)> {
    let (x, n_rows) = model_features(m, x)?;
    let out = py.detach(|| m.outputs_of(x, n_rows)).map_err(value_error)?;
    Ok((out, n_rows))
}

/// A regression model's predictions on `x` (`(n_rows, n_features)`), f64, as `grove predict`
/// computes them: the readout of the program's outputs (`a·f(x) + b` or the head) plus the
/// model's linear terms of the inputs.
#[pyfunction]
fn predict_regression<'py>(py: Python<'py>, model_json: &str, x: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let m = model(model_json)?;
    let (x, n_rows) = model_features(&m, x)?;
    let p = py.detach(|| m.regression_predictions(x, n_rows)).map_err(value_error)?;
    Ok(PyArray1::from_vec(py, p))
}

/// A classification model's predicted class indices `(n_rows,)` and class probabilities
/// `(n_rows, n_classes)` (softmax of the outputs; `None` for a one-output binary model) on
/// `x`.
#[pyfunction]
#[allow(clippy::type_complexity)]
fn predict_classes<'py>(
    py: Python<'py>,
    model_json: &str,
    x: &Bound<'py, PyAny>,
) -> PyResult<(Bound<'py, PyArray1<u32>>, Option<Bound<'py, PyArray2<f64>>>)> {
    let m = model(model_json)?;
    let k = m.classes.as_ref().map_or(0, Vec::len);
    if k < 2 {
        return Err(PyValueError::new_err("not a classification model"));
    }
    let (out, n) = model_outputs(py, &m, x)?;
    let codes = grove::task::base::model::classify_outputs(&out, n, m.class_outputs(), k);
    let proba = if m.class_outputs() == k {
        let p = grove::task::base::model::class_probabilities(&out, n, k);
        Some(PyArray1::from_vec(py, p).reshape([n, k])?)
    } else {
        None
    };
    Ok((PyArray1::from_vec(py, codes), proba))
}

/// A model's program in `style` (`infix`, `latex`, `sympy`): one text per output (one for a
/// single-output program, without a regression model's scaling); for a classifier with a head,
/// one per class, its logit over the outputs.
#[pyfunction]
fn render(model_json: &str, style: &str) -> PyResult<Vec<String>> {
    use grove::program::render::{Style, outputs, render};
    let m = model(model_json)?;
    let style = match style {
        "infix" => Style::Infix,
        "latex" => Style::Latex,
        "sympy" => Style::Sympy,
        other => return Err(PyValueError::new_err(format!("unknown style `{other}`: infix, latex or sympy"))),
    };
    let nodes = m.tree().map_err(value_error)?;
    let progs = if m.n_outputs == 0 { vec![render(&nodes, &m.features, style)] } else { outputs(&nodes, m.n_outputs, &m.features, style) };
    // A classifier's head: each class's logit over the program's outputs.
    Ok(match &m.class_head {
        Some(h) => h.iter().map(|h| grove::task::base::model::head_text(h, &progs, style)).collect(),
        None => progs,
    })
}

/// Reads a saved policy (`policy` of a control report) from JSON.
fn policy(json: &str) -> PyResult<grove::task::control::SavedPolicy> {
    serde_json::from_str(json).map_err(|e| PyValueError::new_err(format!("not a grove policy: {e}")))
}

/// A policy's actions `tanh(outputs)` at one observation (f32, as in training); NaN actions
/// where an output is not finite.
#[pyfunction]
fn policy_act(policy_json: &str, obs: Vec<f32>) -> PyResult<Vec<f32>> {
    let saved = policy(policy_json)?;
    if obs.len() != saved.observations.len() {
        return Err(PyValueError::new_err(format!(
            "the observation has {} values; the policy reads {} ({})",
            obs.len(),
            saved.observations.len(),
            saved.observations.join(", ")
        )));
    }
    let mut p = saved.compile().map_err(value_error)?;
    let mut actions = vec![0.0f32; saved.actuators.len()];
    if !p.act(&obs, &mut actions) {
        actions.fill(f32::NAN);
    }
    Ok(actions)
}

/// Plays a policy for one episode in its environment (f32, as `grove rollout --policy`):
/// returns `(return, control steps, terminated)`.
#[pyfunction]
#[pyo3(signature = (policy_json, steps=None, seed=None))]
fn policy_rollout(py: Python<'_>, policy_json: &str, steps: Option<usize>, seed: Option<u64>) -> PyResult<(f64, usize, bool)> {
    let saved = policy(policy_json)?;
    let s = py.detach(|| grove::task::control::replay(&saved, steps, seed)).map_err(value_error)?;
    Ok((s.total, s.steps, s.terminated))
}

/// Plays a `grove control` report's policy on its run's own test episodes, as the run scored
/// them (`grove rollout --policy REPORT --test`): returns each episode's return.
#[pyfunction]
fn policy_test_returns(py: Python<'_>, report_json: &str) -> PyResult<Vec<f64>> {
    let report: serde_json::Value = serde_json::from_str(report_json).map_err(|e| PyValueError::new_err(format!("not a grove control report: {e}")))?;
    let (scores, _) = py.detach(|| grove::task::control::replay_test(&report, "the report")).map_err(value_error)?;
    Ok(scores.episodes.iter().map(|e| e.ret).collect())
}

/// The stratified train/test split `grove classify` makes of rows with class indices `codes`
/// (`n_classes` classes) for `seed`: `(train rows, test rows)`, each in increasing order.
#[pyfunction]
fn stratified_split(codes: Vec<u32>, n_classes: usize, test_fraction: f64, seed: u64) -> PyResult<(Vec<usize>, Vec<usize>)> {
    grove::data::classes::stratified_indices(&codes, n_classes, test_fraction, seed).map_err(value_error)
}

/// A built-in regression problem's training data, as `grove evolve --data builtin:NAME[:N]`
/// loads it (`name` is `NAME[:N]`, e.g. `pagie1:1024`): `X` `(n_rows, n_features)` and `y`
/// `(n_rows,)` as float64 (the values the engine rounds to float32), and the feature names.
#[pyfunction]
#[allow(clippy::type_complexity)]
fn load_builtin<'py>(py: Python<'py>, name: &str) -> PyResult<(Bound<'py, PyArray2<f64>>, Bound<'py, PyArray1<f64>>, Vec<String>)> {
    let problem = grove::data::DataSource::parse(&format!("builtin:{name}")).and_then(|s| s.load(None)).map_err(value_error)?;
    let d = problem.train;
    let x = d.x64.unwrap_or_else(|| d.x.iter().map(|&v| v as f64).collect());
    let y = d.y64.unwrap_or_else(|| d.y.iter().map(|&v| v as f64).collect());
    // Feature-major to row-major.
    let (n, f) = (d.n_rows, d.n_features);
    let rows: Vec<f64> = (0..n * f).map(|k| x[(k % f) * n + k / f]).collect();
    Ok((PyArray1::from_vec(py, rows).reshape([n, f])?, PyArray1::from_vec(py, y), d.names))
}

/// An f32 setting as the f64 Python shows, spelled as in Rust (`0.05`, not `0.0500000007…`).
fn shortest(x: f32) -> f64 {
    x.to_string().parse().unwrap_or(x as f64)
}

/// The engine's defaults of one command and its default function set, by the Python parameters' names.
fn engine_defaults<'py>(py: Python<'py>, e: &grove::task::base::defaults::EngineDefaults, functions: &str) -> PyResult<Bound<'py, PyDict>> {
    use grove::task::base::defaults as d;
    let x = PyDict::new(py);
    x.set_item("population_size", e.pop)?;
    x.set_item("generations", e.gens)?;
    x.set_item("random_state", e.seed)?;
    x.set_item("tournament_size", e.tournament)?;
    x.set_item("elitism", e.elite)?;
    x.set_item("max_length", e.max_len)?;
    x.set_item("parsimony_coefficient", d::PARSIMONY)?;
    x.set_item("size_pressure", grove::evolve::DEFAULT_SIZE_PRESSURE)?;
    let selection = serde_json::to_value(grove::select::Selection::default()).map_err(|err| PyValueError::new_err(err.to_string()))?;
    x.set_item("selection", selection.as_str().unwrap_or("tournament"))?;
    x.set_item("down_sample", grove::select::DEFAULT_DOWN_SAMPLE)?;
    x.set_item("lexicase_pool", grove::select::DEFAULT_LEXICASE_POOL)?;
    let diversity = serde_json::to_value(grove::select::Diversity::default()).map_err(|err| PyValueError::new_err(err.to_string()))?;
    x.set_item("diversity", diversity.as_str().unwrap_or("none"))?;
    let bloat = serde_json::to_value(e.bloat).map_err(|err| PyValueError::new_err(err.to_string()))?;
    x.set_item("bloat", bloat.as_str().unwrap_or("none"))?;
    x.set_item("function_set", functions)?;
    let islands = grove::evolve::IslandConfig::default();
    x.set_item("islands", islands.count)?;
    x.set_item("migrate_every", islands.migrate_every)?;
    x.set_item("migrants", islands.migrants)?;
    x.set_item("gpus", islands.gpus.to_string())?;
    let link = serde_json::to_value(islands.link).map_err(|err| PyValueError::new_err(err.to_string()))?;
    x.set_item("gpu_link", link.as_str().unwrap_or("peer"))?;
    Ok(x)
}

/// The settings fields that grammatical evolution's parameters give, as JSON to lay over the
/// settings (`{"map": ..., "init": ..., "vary": ..., "genome_capacity": ...}`), the CLI's words
/// and checks (`grove::task::base::ge_names`): `init` is "random", "sensible" or "pi-grow";
/// `crossover` a probability or "onepoint[:P]" or "subtree[:P]"; `mutation` a probability or
/// "int-flip[:P|:1/used|:max(P,1/used)]" or "subtree[:P]". Without a grammar (tree GP) a
/// crossover or mutation probability is the trees' (`{"trees": {"p_crossover": ...}}`) and any
/// other of them a `ValueError`, as on the command line.
#[pyfunction]
#[pyo3(signature = (grammar, init=None, init_depth=None, max_depth=None, wraps=None, crossover=None, mutation=None))]
fn ge_fields(
    grammar: bool,
    init: Option<&str>,
    init_depth: Option<(u32, u32)>,
    max_depth: Option<u32>,
    wraps: Option<u32>,
    crossover: Option<String>,
    mutation: Option<String>,
) -> PyResult<String> {
    use grove::task::base::ge_names::GeChoices;
    let init = init
        .map(|name| {
            serde_json::from_value::<grove::genome::InitMethod>(serde_json::Value::String(name.replace('-', "_")))
                .map_err(|_| PyValueError::new_err(format!("init must be \"random\", \"sensible\" or \"pi-grow\", got {name:?}")))
        })
        .transpose()?;
    let choices = GeChoices { init, init_depth, max_depth, wraps, crossover, mutation, ..Default::default() };
    let fields = if grammar {
        let ge = choices.configs("").map_err(value_error)?;
        serde_json::json!({"map": ge.map, "init": ge.init, "vary": ge.vary, "genome_capacity": ge.genome_capacity})
    } else {
        let rates = choices.tree_rates("", "setting").map_err(value_error)?;
        let mut trees = serde_json::Map::new();
        for (field, p) in [("p_crossover", rates.crossover), ("p_mutation", rates.mutation)] {
            if let Some(p) = p {
                trees.insert(field.into(), serde_json::json!(p));
            }
        }
        if trees.is_empty() { serde_json::json!({}) } else { serde_json::json!({"trees": trees}) }
    };
    Ok(fields.to_string())
}

/// Every command's defaults (`grove::task::base::defaults`), by the Python parameters' names, so that
/// the estimators' signatures show the command line's defaults: `{"evolve": {...},
/// "classify": {...}, "control": {...}}`. Classify's population and generations, and
/// control's and its episodes, depend on the device and are left to the run.
fn defaults(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    use grove::task::base::defaults as d;
    let all = PyDict::new(py);
    let evolve = engine_defaults(py, &d::EVOLVE, d::EVOLVE_FUNCTIONS)?;
    evolve.set_item("outputs", d::EVOLVE_OUTPUTS)?;
    use grove::task::base::model::LinearInputs;
    let linear = |l: LinearInputs| match l {
        LinearInputs::Auto => "auto",
        LinearInputs::On => "on",
        LinearInputs::Off => "off",
    };
    evolve.set_item("linear_inputs", linear(d::EVOLVE_LINEAR_INPUTS))?;
    all.set_item("evolve", evolve)?;
    let classify = engine_defaults(py, &d::CLASSIFY, d::FUNCTIONS)?;
    // Population and generations follow the device (`defaults::CLASSIFY_GPU`): the run sets them.
    for key in ["population_size", "generations"] {
        classify.del_item(key)?;
    }
    classify.set_item("p_out", shortest(d::CLASSIFY_P_OUT))?;
    classify.set_item("linear_inputs", linear(d::CLASSIFY_LINEAR_INPUTS))?;
    classify.set_item("outputs", d::CLASSIFY_OUTPUTS)?;
    all.set_item("classify", classify)?;
    let control = engine_defaults(py, &d::CONTROL_CPU, d::FUNCTIONS)?;
    for key in ["population_size", "generations"] {
        control.del_item(key)?;
    }
    control.set_item("p_out", shortest(d::CONTROL_P_OUT))?;
    control.set_item("test_episodes", d::CONTROL_TEST_EPISODES)?;
    control.set_item("validation_episodes", d::CONTROL_VALIDATION_EPISODES)?;
    control.set_item("head_iterations", d::HEAD_ITERATIONS)?;
    all.set_item("control", control)?;
    Ok(all)
}

/// The module.
#[pymodule]
fn _grove(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    // Python that defines grove's protected operators for sympy (`div`, `plog`, ...).
    m.add("SYMPY_PRELUDE", grove::program::render::SYMPY_PRELUDE)?;
    // Every command's defaults, which the estimators' signatures show.
    m.add("DEFAULTS", defaults(m.py())?)?;
    // The most islands a run may have (`--islands`).
    m.add("MAX_ISLANDS", grove::evolve::islands::MAX_ISLANDS)?;
    m.add_function(wrap_pyfunction!(fit_regression, m)?)?;
    m.add_function(wrap_pyfunction!(fit_classification, m)?)?;
    m.add_function(wrap_pyfunction!(control, m)?)?;
    m.add_function(wrap_pyfunction!(predict_regression, m)?)?;
    m.add_function(wrap_pyfunction!(predict_classes, m)?)?;
    m.add_function(wrap_pyfunction!(render, m)?)?;
    m.add_function(wrap_pyfunction!(policy_act, m)?)?;
    m.add_function(wrap_pyfunction!(policy_rollout, m)?)?;
    m.add_function(wrap_pyfunction!(policy_test_returns, m)?)?;
    m.add_function(wrap_pyfunction!(stratified_split, m)?)?;
    m.add_function(wrap_pyfunction!(load_builtin, m)?)?;
    m.add_function(wrap_pyfunction!(ge_fields, m)?)?;
    m.add_class::<fitness::DlArray>()?;
    Ok(())
}
