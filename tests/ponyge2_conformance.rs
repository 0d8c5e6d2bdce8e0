//! grove's mapper against PonyGE2's tree mapper (`map_tree_from_genome`), on the records in
//! `tests/fixtures/ponyge2_tree_mapper.jsonl`: every grammar PonyGE2 ships in
//! `shared/reference/grammars/ponyge2`, hand-made grammars for each syntax feature, wraps 0
//! and 2, and small depth limits. How the fixtures were made: `tests/fixtures/PONYGE2_SEMANTICS.md`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use grove::genome::{MapConfig, Mapper};
use grove::grammar::{self, DatasetShape, Loaded};

/// Grammars where grove deliberately differs from PonyGE2 (each is a PonyGE2 bug).
const DIFFERS: &[(&str, &str)] = &[
    // PonyGE2 reads a rule head inside a `#` comment as a rule; grove skips comments.
    ("comment_head.bnf", "rule heads in comments"),
    // PonyGE2 decodes escapes from UTF-8 bytes as Latin-1 (`é` becomes `Ã©`); grove keeps text.
    ("non_ascii.bnf", "non-ASCII mangling"),
];

fn grammar_path(rel: &str) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // PonyGE2's files are copied under tests/fixtures/reference, so a bare checkout has them.
    if let Some(r) = rel.strip_prefix("shared/reference/") {
        return root.join("tests/fixtures/reference").join(r);
    }
    match rel.strip_prefix("main/") {
        Some(own) => root.join(own),
        None => root.join("..").join(rel),
    }
}

#[test]
fn mapper_reproduces_ponyge2_tree_mapper() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ponyge2_tree_mapper.jsonl");
    let text = std::fs::read_to_string(&fixtures).expect("fixture file");
    let shape = DatasetShape { n_vars: Some(5), n_is: Some(5), n_os: Some(3) };
    let mut grammars: HashMap<String, Loaded> = HashMap::new();
    let (mut checked, mut skipped, mut failures) = (0, 0, Vec::new());
    for (k, line) in text.lines().enumerate() {
        let rec: serde_json::Value = serde_json::from_str(line).expect("fixture line is JSON");
        let rel = rec["grammar"].as_str().unwrap();
        if DIFFERS.iter().any(|(name, _)| rel.ends_with(name)) {
            skipped += 1;
            continue;
        }
        let loaded = grammars.entry(rel.to_string()).or_insert_with(|| {
            let path = grammar_path(rel);
            grammar::load(&path, &shape).unwrap_or_else(|e| panic!("{}: {e:#}", path.display()))
        });
        let genome: Vec<u32> = rec["genome"].as_array().unwrap().iter().map(|c| c.as_u64().unwrap() as u32).collect();
        let max_depth = match rec["max_depth"].as_u64() {
            None | Some(0) => u32::MAX,
            Some(d) => d as u32,
        };
        let config = MapConfig { max_wraps: rec["max_wraps"].as_u64().unwrap() as u32, max_depth, ..MapConfig::default() };
        let mut mapper = Mapper::new(&loaded.table, config);
        let m = mapper.map(&genome);
        let mut phenotype = String::new();
        if m.valid() {
            mapper.render(&mut phenotype);
        }
        let want_text = rec.get("python_filter").or(rec.get("phenotype")).and_then(|v| v.as_str());
        let got = (m.valid(), m.valid().then_some(phenotype.as_str()), m.used_codons as u64, m.depth as u64, m.nodes as u64);
        let want = (
            rec["valid"].as_bool().unwrap(),
            want_text,
            rec["used_codons"].as_u64().unwrap(),
            rec["depth"].as_u64().unwrap(),
            rec["nodes"].as_u64().unwrap(),
        );
        if got != want {
            failures.push(format!("record {}: {rel} {genome:?}\n   grove   {got:?}\n   PonyGE2 {want:?}", k + 1));
        }
        checked += 1;
    }
    assert!(failures.is_empty(), "{} of {checked} records differ:\n{}", failures.len(), failures[..failures.len().min(10)].join("\n"));
    assert!(checked > 4000, "only {checked} records checked");
    assert!(skipped <= 420, "{skipped} records skipped");
}

#[test]
fn every_reference_grammar_loads() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reference/grammars/ponyge2");
    let shape = DatasetShape { n_vars: Some(3), n_is: Some(3), n_os: Some(2) };
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).expect("tests/fixtures/reference/grammars/ponyge2") {
        let path = entry.unwrap().path();
        grammar::load(&path, &shape).unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
        n += 1;
    }
    assert!(n >= 7);
}
