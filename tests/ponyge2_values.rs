//! A grammar program means what its phenotype text says (issue 58): for every PonyGE2 grammar
//! grove evaluates, 300 random genomes each (`tests/fixtures/ponyge2_values/*.json`, made by
//! `tools/ge/ponyge2_values.py`), grove's value of each genome's program on a few data rows
//! equals Python's value of its phenotype, evaluated as PonyGE2's supervised-learning fitness
//! evaluates it (`eval` with `x` rows by variables, numpy and PonyGE2's protected functions),
//! within what f32 arithmetic loses on that program and row (the fixture's float32 evaluation
//! of the same text measures it).
//!
//! Genomes are mapped as the loops map them (`map_population`, the text reading) on the CPU,
//! and by `grove_map_trees` on a GPU (`GROVE_TEST_GPU=1`); the programs are evaluated by the
//! backend's own evaluator. The derivation reading is checked to differ from Python where
//! `grove check` says the grammar's readings can differ, and to build the same trees where it
//! says they cannot.

use std::path::Path;

use grove::backend::Backend;
use grove::backend::breed::Grammar;
use grove::backend::cpu::breed::map_population;
use grove::genome::{Genomes, MapConfig, Mapper};
use grove::grammar::template::{DeviceTables, Reading, Templates, Vars, compile, readings_differ};
use grove::grammar::{self, DatasetShape, Loaded};
use grove::program::Op;
use grove::program::tree::Population;
use serde_json::Value;

/// Every fixture: PonyGE2's regression and classification grammars grove evaluates. Its other
/// grammars derive code (progsys, pymax), regular expressions, words, bit strings (moo), or
/// Boolean and comparison expressions (`&`, `|`, `~`, `np.where`, `==`), which grove refuses.
const FIXTURES: &[&str] = &["Vladislavleva4", "Keijzer6", "Dow", "supervised_learning", "supervised_learning_consts", "Banknote"];

/// Longest program row.
const MAX_LEN: usize = 1024;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A fixture's file, read.
struct Fixture {
    loaded: Loaded,
    templates: Templates,
    /// `[n_vars][n_rows]`, feature-major.
    x: Vec<f32>,
    n_rows: usize,
    /// The constants `c[i]` the phenotypes were evaluated with.
    c: Vec<f32>,
    genomes: Genomes,
    phenotypes: Vec<String>,
    /// Python's values, float64 and float32: `[genome][row]`.
    y64: Vec<Vec<f64>>,
    y32: Vec<Vec<f64>>,
}

fn number(v: &Value) -> f64 {
    match v {
        Value::String(s) => match s.as_str() {
            "nan" => f64::NAN,
            "inf" => f64::INFINITY,
            "-inf" => f64::NEG_INFINITY,
            other => panic!("not a number: {other}"),
        },
        v => v.as_f64().unwrap(),
    }
}

fn fixture(name: &str) -> Fixture {
    let path = root().join(format!("tests/fixtures/ponyge2_values/{name}.json"));
    let f: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let n_vars = f["n_vars"].as_u64().unwrap() as usize;
    let shape = DatasetShape { n_vars: Some(n_vars as u32), ..DatasetShape::default() };
    let loaded = grammar::load(&root().join(f["grammar"].as_str().unwrap()), &shape).unwrap();
    let names: Vec<String> = (0..n_vars).map(|i| format!("x{i}")).collect();
    let templates = compile(&loaded.grammar, &loaded.table, &Vars { names, n_outputs: 0 }).unwrap_or_else(|e| panic!("{name}: {e}"));
    let rows = f["x"].as_array().unwrap();
    let n_rows = rows.len();
    let x: Vec<f32> = (0..n_vars).flat_map(|j| rows.iter().map(move |r| r[j].as_f64().unwrap() as f32)).collect();
    let c = f["c"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap() as f32).collect();
    let records = f["records"].as_array().unwrap();
    let mut genomes = Genomes::new(records.len(), 512);
    let (mut phenotypes, mut y64, mut y32) = (Vec::new(), Vec::new(), Vec::new());
    for (i, r) in records.iter().enumerate() {
        let g: Vec<u32> = r["genome"].as_array().unwrap().iter().map(|c| c.as_u64().unwrap() as u32).collect();
        genomes.set(i, &g);
        phenotypes.push(r["phenotype"].as_str().unwrap().to_string());
        y64.push(r["y64"].as_array().unwrap().iter().map(number).collect());
        y32.push(r["y32"].as_array().unwrap().iter().map(number).collect());
    }
    Fixture { loaded, templates, x, n_rows, c, genomes, phenotypes, y64, y32 }
}

impl Fixture {
    fn config(reading: Reading) -> MapConfig {
        MapConfig { reading, ..MapConfig::default() }
    }

    fn grammar(&self, reading: Reading) -> Grammar<'_> {
        Grammar { table: &self.loaded.table, templates: &self.templates, map: Self::config(reading), max_derivation: 4096 }
    }

    /// The genomes' programs, read as `reading` says, mapped on `backend`: the CPU's
    /// `map_population`, or `grove_map_trees` on a GPU.
    fn programs(&self, backend: &Backend, reading: Reading) -> Population {
        let mut pop = match backend {
            Backend::Cpu => {
                let mut pop = Population::new(self.genomes.size(), MAX_LEN, 0);
                map_population(&self.grammar(reading), &self.genomes, &mut pop);
                pop
            }
            Backend::Cuda(e) => {
                let tables = DeviceTables::new(&self.loaded.table, &self.templates).unwrap();
                e.map_population(&tables, &self.genomes, &Self::config(reading), 4096, MAX_LEN, 0).unwrap().population
            }
        };
        // Every c[i] is the fixture's number (the fit's start, written over as the fit would).
        for i in 0..pop.size() {
            let mut nodes = pop.tree(i).nodes();
            for k in 0..nodes.len() {
                if nodes[k].op == Op::Slot {
                    nodes[k + 1].value = self.c[nodes[k].value as usize];
                }
            }
            pop.set_tree(i, &nodes).unwrap();
        }
        pop
    }
}

/// How genome `i`'s values on `backend` compare with Python's: `Ok(compared rows)`, or the
/// first row that differs. A row is compared where f32 carries its value: Python's float32 and
/// float64 values are finite and within 1e-3 of each other (relative, or absolute below 1);
/// its tolerance is four times their distance plus 2e-5 of the value. Where both are not
/// finite, grove's is not finite either.
fn compare(f: &Fixture, got: &[f32], i: usize) -> Result<usize, String> {
    let mut compared = 0;
    for r in 0..f.n_rows {
        let (g, want, w32) = (got[i * f.n_rows + r] as f64, f.y64[i][r], f.y32[i][r]);
        if !want.is_finite() && !w32.is_finite() {
            if g.is_finite() {
                return Err(format!("row {r}: grove {g}, Python {want}"));
            }
            continue;
        }
        let scale = want.abs().max(1.0);
        if !want.is_finite() || !w32.is_finite() || (w32 - want).abs() > 1e-3 * scale {
            continue;
        }
        let tol = 4.0 * (w32 - want).abs() + 2e-5 * scale;
        if !((g - want).abs() <= tol) {
            return Err(format!("row {r}: grove {g}, Python {want} (float32 {w32}, tolerance {tol:.3e})"));
        }
        compared += 1;
    }
    Ok(compared)
}

grove::test_device!(ponyge2_programs_compute_what_their_text_says_in_python, |backend: &Backend| {
    let (mut rows, mut total) = (0usize, 0usize);
    for name in FIXTURES {
        let f = fixture(name);
        assert!(f.genomes.size() >= 300, "{name}: {} genomes", f.genomes.size());
        // The fixture's phenotypes are the genomes' (grove's mapper is PonyGE2's:
        // tests/ponyge2_conformance.rs).
        let mut mapper = Mapper::new(&f.loaded.table, MapConfig::default());
        for i in 0..f.genomes.size() {
            assert!(mapper.map(f.genomes.get(i)).valid(), "{name}: genome {i} does not map");
            let mut text = String::new();
            mapper.render(&mut text);
            assert_eq!(text, f.phenotypes[i], "{name}: genome {i}'s phenotype");
        }
        let pop = f.programs(backend, Reading::Text);
        let got = backend.predictions(&pop, &f.x, f.n_rows, f.x.len() / f.n_rows).unwrap();
        for i in 0..f.genomes.size() {
            assert!(!pop.tree(i).is_empty(), "{name}: genome {i} ({}) has no program", f.phenotypes[i]);
            match compare(&f, &got, i) {
                Ok(n) => rows += n,
                Err(e) => panic!("{name}: genome {i}, {}: {e}", f.phenotypes[i]),
            }
            total += f.n_rows;
        }
    }
    // Nearly every value is one f32 carries.
    eprintln!("{rows} of {total} values compared");
    assert!(rows * 10 >= total * 9, "only {rows} of {total} values compared");
});

/// The derivation reading (`--reading derivation`) computes something else on the grammars
/// whose productions leave operators bare (PonyGE2's Vladislavleva-4, Keijzer-6 and Dow), as
/// `grove check` notes, and the same trees on those that bracket them.
#[test]
fn the_derivation_reading_differs_only_where_grove_check_says() {
    for name in FIXTURES {
        let f = fixture(name);
        let notes = readings_differ(&f.loaded.grammar, &f.loaded.table, &f.templates);
        let (text, derivation) = (f.programs(&Backend::Cpu, Reading::Text), f.programs(&Backend::Cpu, Reading::Derivation));
        let changed = (0..text.size()).filter(|&i| text.tree(i).nodes() != derivation.tree(i).nodes()).count();
        let got = Backend::Cpu.predictions(&derivation, &f.x, f.n_rows, f.x.len() / f.n_rows).unwrap();
        let wrong = (0..text.size()).filter(|&i| compare(&f, &got, i).is_err()).count();
        eprintln!("{name}: {} notes; the derivation reading builds {changed} other trees, {wrong} of them computing other values", notes.len());
        if notes.is_empty() {
            assert_eq!(changed, 0, "{name}: no notes, yet the readings build different trees");
        } else {
            assert!(wrong >= 3, "{name}: {} notes, but the derivation reading computes other values for {wrong} genomes", notes.len());
        }
    }
}

/// The reports' formulas show the program: each program's infix and sympy text, read back
/// with Python's precedence (grove's own expression reader, one production), computes the
/// program's values bit for bit.
#[test]
fn formulas_read_back_as_the_programs() {
    use grove::genome::build::build_tree;
    use grove::program::render::{Style, render};
    let mut read = 0;
    for name in FIXTURES {
        let f = fixture(name);
        let n_vars = f.x.len() / f.n_rows;
        let pop = f.programs(&Backend::Cpu, Reading::Text);
        let want = Backend::Cpu.predictions(&pop, &f.x, f.n_rows, n_vars).unwrap();
        let names: Vec<String> = (0..n_vars).map(|i| format!("x{i}")).collect();
        for style in [Style::Infix, Style::Sympy] {
            let mut again = Population::new(pop.size(), MAX_LEN, 0);
            for i in 0..pop.size() {
                // sympy spells protected division div(a, b), grove's name for it.
                let text = render(&pop.tree(i).nodes(), &[], style);
                let g = grammar::parse_str(&format!("<e> ::= {text}"), "formula.bnf", false).unwrap();
                let l = grammar::load_parsed(g, &DatasetShape::default()).unwrap();
                let t = compile(&l.grammar, &l.table, &Vars { names: names.clone(), n_outputs: 0 }).unwrap_or_else(|e| panic!("{name}: {text}: {e}"));
                let mut m = Mapper::new(&l.table, MapConfig::default());
                assert!(m.map(&[0]).valid());
                let (mut nodes, mut scratch) = (Vec::new(), Vec::new());
                build_tree(&l.table, &t, m.derivation(), Reading::Text, MAX_LEN, &mut nodes, &mut scratch).unwrap();
                again.set_tree(i, &nodes).unwrap();
                read += 1;
            }
            let got = Backend::Cpu.predictions(&again, &f.x, f.n_rows, n_vars).unwrap();
            for (k, (a, b)) in got.iter().zip(&want).enumerate() {
                let i = k / f.n_rows;
                assert!(a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()), "{name}: {style:?} of genome {i} ({}): {} read back gives {a}, the program {b}", f.phenotypes[i], render(&pop.tree(i).nodes(), &[], style));
            }
        }
    }
    assert!(read >= 3600, "{read} formulas read");
}
