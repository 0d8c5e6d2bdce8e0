//! Shipped grammars load and compile for evaluation; no input text makes the grammar front end
//! panic or hang; whole runs do not depend on the thread count.

use std::path::Path;

use grove::grammar::template::{self, Vars};
use grove::grammar::{self, DatasetShape};
use grove::rng::{Purpose, Stream};

#[test]
fn every_shipped_grammar_loads_and_compiles_for_evaluation() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("grammars");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if !path.to_string_lossy().ends_with("bnf") {
            continue;
        }
        // Six outputs: the most any shipped grammar writes (walker2d's and half_cheetah's
        // policies); tests/control.rs runs each control grammar with its own environment.
        let shape = DatasetShape { n_vars: Some(5), n_is: Some(5), n_os: Some(6) };
        let l = grammar::load(&path, &shape).unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
        let vars = Vars { names: (0..5).map(|i| format!("x{i}")).collect(), n_outputs: 6 };
        template::compile(&l.grammar, &l.table, &vars).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        n += 1;
    }
    assert!(n >= 4, "only {n} grammars found");
}

/// Random texts over the characters grammars are made of: the front end returns an error or a
/// grammar, and a loaded grammar maps and compiles templates (or says why not), never panics.
#[test]
fn garbage_grammars_never_panic() {
    const PIECES: &[&str] = &[
        "<e>", "<a>", "<b-c>", " ::= ", "::=", "|", " | ", "\n", "'", "\"", "x", "+", "(", ")", "#", "\\", "\\n",
        "GE_RANGE:", "3", "dataset_n_vars", "<", ">", "<GECodonValue[", "0,9]>", "{", "}", ",", "pdiv(", "out(", " ",
    ];
    let shape = DatasetShape { n_vars: Some(2), n_is: Some(2), n_os: Some(2) };
    let vars = Vars { names: vec!["x".into(), "y".into()], n_outputs: 2 };
    for case in 0..3000u32 {
        let mut s = Stream::new(99, 0, case, Purpose::Bench);
        let len = 1 + s.below(40);
        let text: String = (0..len).map(|_| PIECES[s.below(PIECES.len() as u32) as usize]).collect();
        let text = format!("<e> ::= {text}");
        let Ok(g) = grammar::parse_str(&text, "fuzz.bnf", case % 7 == 0) else { continue };
        let Ok(l) = grammar::load_parsed(g, &shape) else { continue };
        let mut m = grove::genome::Mapper::new(&l.table, grove::genome::MapConfig { max_wraps: 2, ..Default::default() });
        let mut out = String::new();
        for k in 0..5u32 {
            let genome: Vec<u32> = (0..16).map(|_| s.next_u32() >> (k * 4)).collect();
            if m.map(&genome).valid() {
                out.clear();
                m.render(&mut out);
            }
        }
        let _ = template::compile(&l.grammar, &l.table, &vars);
    }
}

#[test]
fn runs_do_not_depend_on_the_thread_count() {
    use grove::task::regression::{EvolveSettings, run};
    let settings = |grammar: Option<&str>, functions: Option<&str>| EvolveSettings {
        data: "builtin:koza1".into(),
        grammar: grammar.map(|g| format!("{}/grammars/{g}", env!("CARGO_MANIFEST_DIR"))),
        functions: functions.map(String::from),
        engine: grove::evolve::EngineConfig { pop_size: 200, generations: 8, seed: 11, ..Default::default() },
        genome_capacity: 256,
        device: grove::backend::DeviceChoice::Cpu,
        ..Default::default()
    };
    for s in [settings(Some("regression.bnf"), None), settings(None, Some("add,sub,mul,div,sin"))] {
        let run = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            let r = pool.install(|| run(&s, &grove::task::base::options::RunOptions { quiet: true, ..Default::default() })).unwrap();
            (r.report["best"]["infix"].clone(), r.report["train"].clone(), r.report["generations"].as_array().unwrap().iter().map(|g| g["best"].clone()).collect::<Vec<_>>())
        };
        assert_eq!(run(1), run(3));
    }
}
