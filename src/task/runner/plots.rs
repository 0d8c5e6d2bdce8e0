//! The plots of a run, drawn from its report alone (`--plots DIR` at the end of a run, `grove
//! plot REPORT.json` afterwards): fitness over generations for every task (best and mean;
//! mean and median program size), the hall of fame's
//! Pareto front, predicted against actual for regression (the data is reloaded from the
//! report's settings and the saved model applied), the test confusion matrix for
//! classification. A new task gets the fitness curve by writing `generations` in its report;
//! `fitness_label` names its axis and `fitness_sign: -1` turns a minimised −return back into a
//! return; generations holding `best_return` / `mean_return` (control's reports) plot as returns,
//! and so does their hall of fame (whose loss is minus the training return).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::Value;

use crate::report::plot::{Chart, Figure, Series, save};

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

/// The name of the fitness a report's generations hold.
fn fitness_label(report: &Value) -> String {
    if let Some(l) = report.get("fitness_label").and_then(Value::as_str) {
        return l.to_string();
    }
    let s = &report["settings"];
    match report["command"].as_str() {
        Some("evolve") if s["loss"].is_string() => format!("loss {}", s["loss"].as_str().unwrap_or_default()),
        Some("evolve") if s["fitness_function"].is_string() => format!("fitness {}", s["fitness_function"].as_str().unwrap_or_default()),
        Some("evolve") => {
            let m = s["regression"]["metric"].as_str().unwrap_or("error");
            let m = if m == "r2" { "1 - r2" } else { m };
            if s["regression"]["linear_scaling"].as_bool() == Some(true) { format!("{m} (linearly scaled)") } else { m.to_string() }
        }
        Some("classify") => match s["fitness"].as_str() {
            Some("accuracy") => "1 - accuracy".into(),
            Some("balanced-accuracy") => "1 - balanced accuracy".into(),
            Some("weighted-f1") => "1 - weighted F1".into(),
            Some("balanced-ce") => "1 - balanced accuracy + ce / (1 + ce)".into(),
            _ => "cross-entropy".into(),
        },
        _ => "fitness".into(),
    }
}

/// Writes every plot the report supports into `dir`; returns the files.
pub fn write_all(report: &Value, dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let gens = report["generations"].as_array().context("the report has no `generations`")?;
    // Control reports hold returns (higher is better) as `best_return` and `mean_return`.
    let returns = gens.first().is_some_and(|g| g.get("best_return").is_some());
    let (best_key, mean_key) = if returns { ("best_return", "mean_return") } else { ("best", "mean") };
    let sign = if returns { 1.0 } else { report.get("fitness_sign").and_then(Value::as_f64).unwrap_or(1.0) };
    let label = if returns { "return".to_string() } else { fitness_label(report) };
    let curve = |key: &str| -> Vec<(f64, f64)> { gens.iter().map(|g| (f(&g["generation"]), sign * f(&g[key]))).collect() };
    let command = report["command"].as_str().unwrap_or(if report.get("policy").is_some() { "control" } else { "run" });
    let what = report["settings"]["data"].as_str().or(report["settings"]["env"].as_str()).unwrap_or("");
    let title = format!("{command} · {what}");
    let mut series = vec![
        Series { name: "best".into(), points: curve(best_key), dots: false },
        Series { name: "mean".into(), points: curve(mean_key), dots: false },
    ];
    // A linear policy's run (`--policy linear`) also has the unperturbed policy's `return`.
    if returns && gens.first().is_some_and(|g| g.get("return").is_some()) {
        series.push(Series { name: "policy".into(), points: curve("return"), dots: false });
    }
    let fitness = Chart {
        title: format!("{title}: {label} over generations"),
        x: "generation".into(),
        y: label.clone(),
        series,
        log_y: !returns && sign > 0.0,
        diagonal: false,
        legend_low: false,
    };
    // Sizes, where the generations have them (a linear policy's size does not change).
    let sized = gens.first().is_some_and(|g| g.get("mean_size").is_some());
    out.extend(save(
        &dir.join("fitness"),
        &Figure::Stack(if !sized { vec![fitness] } else { vec![
            fitness,
            Chart {
                title: "program size".into(),
                x: "generation".into(),
                y: "nodes".into(),
                series: vec![
                    Series { name: "mean size".into(), points: curve("mean_size").into_iter().map(|(x, y)| (x, sign * y)).collect(), dots: false },
                    Series { name: "median size".into(), points: curve("median_size").into_iter().map(|(x, y)| (x, sign * y)).collect(), dots: false },
                ],
                log_y: false,
                diagonal: false,
                legend_low: true,
            },
        ] }),
    )?);
    if let Some(rows) = report.get("hall_of_fame").and_then(Value::as_array).filter(|r| !r.is_empty()) {
        // A control run's loss is minus its (training) return: drawn as the return.
        let loss_sign = if returns { -1.0 } else { 1.0 };
        let pts: Vec<(f64, f64)> = rows.iter().map(|r| (f(&r["complexity"]), loss_sign * f(&r["loss"]))).collect();
        out.extend(save(
            &dir.join("pareto"),
            &Figure::Chart(Chart {
                title: format!("{title}: Pareto front (best {label} of each size)"),
                x: "complexity (nodes)".into(),
                y: label.clone(),
                series: vec![
                    Series { name: "front".into(), points: pts.clone(), dots: false },
                    Series { name: "programs".into(), points: pts, dots: true },
                ],
                log_y: !returns,
                diagonal: false,
                // A front of returns rises to the right: the legend goes below it.
                legend_low: returns,
            }),
        )?);
    }
    match report["command"].as_str() {
        // The data may have moved since the run: the other plots are still worth having.
        Some("evolve") => match predicted_vs_actual(report, dir, &title) {
            Ok(p) => out.extend(p),
            Err(e) => eprintln!("note: no predicted-against-actual plot: {e:#}"),
        },
        Some("classify") => {
            let counts: Vec<Vec<u64>> = serde_json::from_value(report["test"]["confusion"].clone()).context("the report's test confusion matrix")?;
            let classes: Vec<String> = serde_json::from_value(report["classes"].clone()).unwrap_or_default();
            out.extend(save(&dir.join("confusion"), &Figure::Confusion(format!("{title}: test rows"), counts, classes))?);
        }
        _ => {}
    }
    Ok(out)
}

/// Regression: the best program's predictions against the targets, training and test rows.
fn predicted_vs_actual(report: &Value, dir: &Path, title: &str) -> Result<Vec<PathBuf>> {
    let settings: crate::task::regression::EvolveSettings =
        serde_json::from_value(report["settings"].clone()).context("the report's settings cannot be read")?;
    let model: crate::task::base::model::Model = serde_json::from_value(report["model"].clone()).context("the report's model cannot be read")?;
    let (train, test) = crate::task::regression::load_data(&settings).context("reloading the run's data for the plot")?;
    let mut series = Vec::new();
    for (name, d) in [("train", Some(&train)), ("test", test.as_ref())] {
        let Some(d) = d else { continue };
        let p = model.regression_predictions(d.x.clone(), d.n_rows)?;
        let pts = d.y.iter().zip(&p).map(|(&y, &p)| (y as f64, p)).collect();
        series.push(Series { name: name.into(), points: pts, dots: true });
    }
    save(
        &dir.join("predicted"),
        &Figure::Chart(Chart {
            title: format!("{title}: predicted against actual"),
            x: format!("actual {}", model.target),
            y: "predicted".into(),
            series,
            log_y: false,
            diagonal: true,
            legend_low: true,
        }),
    )
}
