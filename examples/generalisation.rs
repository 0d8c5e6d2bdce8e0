//! Does the returned program hold up on unseen data (issue 16)? Friedman-1 with Gaussian noise
//! (generated here, seeded: y = 10 sin(π x₁x₂) + 20 (x₃ − ½)² + 10 x₄ + 5 x₅ + σ·N(0, 1),
//! x ~ U[0, 1]¹⁰, so five features are noise), split 75/25 into training and test rows; for
//! each bloat control and budget and seed, grove evolves on the training rows and the median
//! test R² of the returned program is printed for each way of choosing it:
//!
//! - `train/all`: no validation rows, the training-error minimum (grove before issue 16);
//! - `train`, `validation`, `pareto`: 25 % of the training rows held out (one search, chosen
//!   three ways: [`grove::task::regression::finish`] after one
//!   [`grove::task::regression::search`]).
//!
//! ```text
//! cargo run --release --example generalisation -- [--seeds 1-5] [--budgets 1,10] [--rows 500]
//!     [--noise 1] [--pop 3000] [--gens 100] [--bloat none,penalty:1e-4,double-tournament,lexicographic]
//!     [--functions add,sub,mul,div,sin,cos]
//! ```
//!
//! A budget of B runs B × `--gens` generations. `penalty:C` is the linear parsimony penalty
//! with C × the variance of the training targets per node (so C is unit-free). One line per
//! run goes to standard error as it finishes; the table goes to standard output.

use std::process::ExitCode;

use grove::backend::Backend;
use grove::data::Dataset;
use grove::rng::{Purpose, Stream};
use grove::select::Bloat;
use grove::task::regression::{EvolveSettings, finish, search, validation_split};
use grove::task::base::options::RunOptions;
use grove::task::base::validation::{Plan, Select};

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Friedman-1 with `n` rows and noise `sigma`, from the stream `(seed; 0, 0, Data)`.
fn friedman1(n: usize, sigma: f64, seed: u64) -> anyhow::Result<Dataset> {
    let mut s = Stream::new(seed, 0, 0, Purpose::Data);
    let mut x = vec![0.0; 10 * n];
    let mut y = Vec::with_capacity(n);
    for i in 0..n {
        for j in 0..10 {
            x[j * n + i] = s.unit_f64();
        }
        let v = |j: usize| x[j * n + i];
        // Box–Muller: one standard normal from two uniforms.
        let (u1, u2) = (1.0 - s.unit_f64(), s.unit_f64());
        let noise = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
        let clean = 10.0 * (std::f64::consts::PI * v(0) * v(1)).sin() + 20.0 * (v(2) - 0.5).powi(2) + 10.0 * v(3) + 5.0 * v(4);
        y.push(clean + sigma * noise);
    }
    Dataset::new((0..10).map(|j| format!("x{j}")).collect(), "y", x, y)
}

/// A bloat control to compare: selection-based, or the linear penalty relative to var(y).
#[derive(Clone, Copy, Debug)]
enum Variant {
    Selection(Bloat),
    Penalty(f64),
}

impl Variant {
    fn parse(s: &str) -> anyhow::Result<Variant> {
        Ok(match s {
            "none" => Variant::Selection(Bloat::None),
            "double-tournament" => Variant::Selection(Bloat::DoubleTournament),
            "lexicographic" => Variant::Selection(Bloat::Lexicographic),
            "nsga2" => Variant::Selection(Bloat::Nsga2),
            "auto" => Variant::Selection(Bloat::Auto),
            _ => match s.strip_prefix("penalty:") {
                Some(c) => Variant::Penalty(c.parse()?),
                None => anyhow::bail!("--bloat: `{s}` is none, penalty:C, double-tournament, lexicographic, nsga2 or auto"),
            },
        })
    }

    fn name(&self) -> String {
        match self {
            Variant::Selection(Bloat::None) => "none".into(),
            Variant::Selection(Bloat::DoubleTournament) => "double-tournament".into(),
            Variant::Selection(Bloat::Lexicographic) => "lexicographic".into(),
            Variant::Selection(Bloat::Nsga2) => "nsga2".into(),
            Variant::Selection(Bloat::Auto) => "auto".into(),
            Variant::Penalty(c) => format!("penalty {c:e}·var(y)"),
        }
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn range(s: &str) -> anyhow::Result<Vec<u64>> {
    Ok(match s.split_once('-') {
        Some((a, b)) => (a.parse()?..=b.parse()?).collect(),
        None => s.split(',').map(str::parse).collect::<Result<_, _>>()?,
    })
}

fn run() -> anyhow::Result<()> {
    let (mut seeds, mut budgets, mut rows, mut noise, mut pop, mut gens) = (vec![1, 2, 3, 4, 5], vec![1, 10], 500, 1.0, 3000, 100);
    let mut variants = "none,penalty:1e-4,double-tournament,lexicographic".to_string();
    let mut functions = "add,sub,mul,div,sin,cos".to_string();
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let v = args.next().ok_or_else(|| anyhow::anyhow!("{flag} needs a value"))?;
        match flag.as_str() {
            "--seeds" => seeds = range(&v)?,
            "--budgets" => budgets = range(&v)?.into_iter().map(|b| b as usize).collect(),
            "--rows" => rows = v.parse()?,
            "--noise" => noise = v.parse()?,
            "--pop" => pop = v.parse()?,
            "--gens" => gens = v.parse()?,
            "--bloat" => variants = v,
            "--functions" => functions = v,
            _ => anyhow::bail!("unknown option {flag}"),
        }
    }
    let variants: Vec<Variant> = variants.split(',').map(Variant::parse).collect::<anyhow::Result<_>>()?;
    let backend = Backend::Cpu;
    let quiet = RunOptions { quiet: true, ..Default::default() };
    println!("Friedman-1, {rows} rows, noise {noise}, test 25 %; pop {pop}; seeds {seeds:?}; functions {functions}");
    println!();
    println!("| bloat control | budget | train/all | train | validation | pareto | size (validation) | seconds |");
    println!("|---|---|---|---|---|---|---|---|");
    for &budget in &budgets {
        for variant in &variants {
            let mut r2: [Vec<f64>; 4] = Default::default();
            let (mut sizes, mut secs) = (Vec::new(), Vec::new());
            for &seed in &seeds {
                let all = friedman1(rows, noise, seed)?;
                let (train, test) = grove::data::split(&all, 0.25, seed)?;
                let mean = train.y.iter().map(|&y| y as f64).sum::<f64>() / train.n_rows as f64;
                let var = train.y.iter().map(|&y| (y as f64 - mean).powi(2)).sum::<f64>() / train.n_rows as f64;
                let mut s = EvolveSettings::cli_default();
                s.functions = Some(functions.clone());
                s.engine.pop_size = pop;
                s.engine.generations = gens * budget;
                s.engine.seed = seed;
                // The program alone: this example compares bloat controls and choice rules.
                s.linear_inputs = grove::task::regression::LinearInputs::Off;
                match variant {
                    Variant::Selection(b) => s.engine.bloat = *b,
                    Variant::Penalty(c) => s.regression.parsimony = c * var,
                }
                let t0 = std::time::Instant::now();
                // Today's run: every training row for fitness, the training-error minimum.
                let mut base = s.clone();
                base.validation_fraction = Some(0.0);
                base.select = Select::Train;
                let report = grove::task::regression::fit(&base, &train, Some(&test), &backend, &quiet)?.report;
                r2[0].push(report["test"]["r2"].as_f64().unwrap_or(f64::NAN));
                // One search with validation rows, chosen three ways.
                s.validation_fraction = Some(0.25);
                let plan = Plan::new(s.validation_fraction, Select::Validation, train.n_rows, grove::task::base::defaults::EVOLVE_AUTO)?;
                let (fit_rows, validation) = validation_split(&train, &plan, seed)?;
                let linear = grove::task::regression::LinearChoice::none("off (this comparison of choice rules)");
                let searched = search(&s, &fit_rows, &backend, &quiet)?;
                let mut line = format!("{} budget {budget} seed {seed}: train/all {:.4}", variant.name(), r2[0].last().unwrap());
                for (k, rule) in [(1, Select::Train), (2, Select::Validation), (3, Select::Pareto)] {
                    let plan = Plan::new(s.validation_fraction, rule, train.n_rows, grove::task::base::defaults::EVOLVE_AUTO)?;
                    let s = EvolveSettings { select: rule, ..s.clone() };
                    let report = finish(&s, &plan, &searched, &fit_rows, validation.as_ref(), Some(&test), &backend, &linear)?.report;
                    let v = report["test"]["r2"].as_f64().unwrap_or(f64::NAN);
                    r2[k].push(v);
                    line += &format!(", {} {v:.4} ({} nodes)", rule.name(), report["best"]["size"]);
                    if rule == Select::Validation {
                        sizes.push(report["best"]["size"].as_f64().unwrap_or(f64::NAN));
                    }
                }
                secs.push(t0.elapsed().as_secs_f64());
                eprintln!("{line}; {:.1} s", t0.elapsed().as_secs_f64());
            }
            let [a, b, c, d] = &mut r2;
            println!(
                "| {} | {budget}× | {:.4} | {:.4} | {:.4} | {:.4} | {} | {:.0} |",
                variant.name(),
                median(a),
                median(b),
                median(c),
                median(d),
                median(&mut sizes),
                median(&mut secs)
            );
        }
    }
    Ok(())
}
