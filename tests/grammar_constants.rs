//! A grammar's constants `c[i]`, written as PonyGE2 writes them (`supervised_learning_consts`):
//! every occurrence of `c[i]` is one number, fitted by Levenberg–Marquardt on either device,
//! and shown with its value in the report, the summary and the saved model.

use grove::backend::{Backend, DeviceChoice};
use grove::task::regression::EvolveSettings;
use grove::task::runner::experiment::Experiment;
use serde_json::json;

/// `y = 2.5·x0 + 0.7·x1² − 1.3` on 60 rows of a fixed grid.
fn formula() -> grove::data::Dataset {
    let n = 60;
    let x0: Vec<f64> = (0..n).map(|i| ((i * 7 % 23) as f64) / 11.0 - 1.0).collect();
    let x1: Vec<f64> = (0..n).map(|i| ((i * 11 % 19) as f64) / 6.0 - 1.5).collect();
    let y: Vec<f64> = (0..n).map(|i| 2.5 * x0[i] + 0.7 * x1[i] * x1[i] - 1.3).collect();
    let mut x = x0;
    x.extend(x1);
    grove::data::Dataset::new(vec!["x0".into(), "x1".into()], "y", x, y).unwrap()
}

/// Three terms, each a constant or a constant times `x0` or `x1²`, the constant's slot chosen
/// by the search: the formula is the one exact program whose three slots differ (two terms
/// sharing a slot share its number), so its fitted slots are the formula's numbers.
const GRAMMAR: &str = "<e> ::= <t> + <t> + <t>\n<t> ::= c[<k>]*<v> | c[<k>]\n<v> ::= x[:, 0] | x[:, 1]**2\n<k> ::= GE_RANGE:3";

fn settings(device: DeviceChoice, given: serde_json::Value) -> EvolveSettings {
    let mut fields = json!({
        "data": "memory", "grammar": GRAMMAR, "device": device,
        "engine": {"pop_size": 60, "generations": 8, "seed": 3, "constants": {"steps": 10, "every": 1, "fraction": 1.0}},
        "regression": {"linear_scaling": false}, "linear_inputs": "off", "validation_fraction": 0.0, "select": "train",
    });
    grove::task::base::search::merge(&mut fields, given);
    match Experiment::from_parts("evolve", fields, "test").unwrap() {
        Experiment::Evolve(s) => s,
        _ => unreachable!("an evolve experiment"),
    }
}

grove::test_device!(a_constants_grammar_recovers_the_numbers_of_a_known_formula, |backend: &Backend| {
    let device = if backend.is_gpu() { DeviceChoice::Cuda } else { DeviceChoice::Cpu };
    let data = formula();
    let quiet = grove::task::base::options::RunOptions { quiet: true, ..Default::default() };
    let r = grove::task::regression::fit(&settings(device, json!({})), &data, None, backend, &quiet).unwrap();
    let best = &r.report["best"];
    assert!(r.report["train"]["mse"].as_f64().unwrap() < 1e-8, "{}", r.summary);
    // The three numbers, each a slot of its own, whichever slot the search gave each.
    let constants = best["constants"].as_object().unwrap_or_else(|| panic!("no constants in {best}"));
    let mut values: Vec<f64> = constants.values().map(|v| v.as_f64().unwrap()).collect();
    values.sort_by(f64::total_cmp);
    assert_eq!(values.len(), 3, "{constants:?}");
    for (got, want) in values.iter().zip([-1.3, 0.7, 2.5]) {
        assert!((got - want).abs() < 1e-3, "constants {constants:?}, want 2.5, 0.7 and -1.3");
    }
    // Every output shows the values: the phenotype with them, the formula, the summary.
    let filled = best["fitted_phenotype"].as_str().unwrap();
    assert!(!filled.contains("c["), "{filled}");
    assert!(best["phenotype"].as_str().unwrap().contains("c["), "{best}");
    assert!(!best["infix"].as_str().unwrap().contains("slot") && !best["sympy"].as_str().unwrap().contains("slot"), "{best}");
    assert!(r.summary.contains("constants     c["), "{}", r.summary);
    // The saved model predicts the formula.
    let model = grove::task::base::model::from_json(r.report.to_string().as_bytes(), "report.json").unwrap_or_else(|e| panic!("{e:#}"));
    let pred = model.outputs_of(vec![0.5, 1.0], 1).unwrap();
    assert!((pred[0] as f64 - (2.5 * 0.5 + 0.7 - 1.3)).abs() < 1e-3, "{pred:?}");
});

#[test]
fn constants_without_fitting_are_one_clear_line() {
    let s = settings(DeviceChoice::Cpu, json!({"engine": {"constants": {"steps": 0}}}));
    let quiet = grove::task::base::options::RunOptions { quiet: true, ..Default::default() };
    let Err(e) = grove::task::regression::fit(&s, &formula(), None, &Backend::Cpu, &quiet) else { panic!("a run without fitting") };
    let e = format!("{e:#}");
    assert!(e.contains("writes constants c[i], whose values Levenberg–Marquardt fits: give --optimise-constants N"), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
}
