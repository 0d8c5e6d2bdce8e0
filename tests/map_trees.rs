//! Genomes to trees in one kernel (`grove_map_trees`, `kernels/map.cu`) against its CPU twin
//! `backend::cpu::breed::map_population` (the loops' mapper, then `build_tree` and `set_tree`): the same
//! rows bit for bit (opcode, value bits, subtree size, output slot, length, zero padding), the
//! same codons read and the same outcome, for every shipped grammar whose templates compile,
//! PonyGE2's grammars and conformance genomes, and grammars made for each feature (spelled
//! numbers and indices, codon ranges and sets, `out(K, …)` nesting and bad slots, operator
//! rules with unit delegation, `(<e>)` chains, numbers past the spelling limits).
//!
//! `emulated_*` runs the kernel's own source built as host C++ by g++ (CI, no GPU);
//! `gpu_*` runs it on a GPU (`GROVE_TEST_GPU=1`).

#[path = "support/emulator.rs"]
mod emulator;

use std::path::{Path, PathBuf};

use grove::backend::cuda::kernels;
use grove::backend::cuda::params::{MapParams, MapStatus, MapTreesParams};
use grove::evolve::GrammarRep;
use grove::backend::cpu::breed::map_population;
use grove::genome::map::Invalid;
use grove::genome::{Codons, Genomes, InitConfig, MapConfig};
use grove::genome::vary::GeVaryConfig;
use grove::genome::build::build_tree;
use grove::grammar::template::{DeviceTables, Reading, Templates, Vars, compile};
use grove::grammar::{self, DatasetShape, Loaded};
use grove::program::tree::Population;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Grammars made for the builder's features.
const FEATURES: &[(&str, &str)] = &[
    (
        "spelled.bnf",
        "<e> ::= <e>+<e> | <e>*<e> | pdiv(<e>,<e>) | np.sin(<e>) | x[:, <i>] | x<i> | <c><c>.<c><c> | <c>.<c> | <n> | (<e>) | 2.5e-1\n\
         <i> ::= GE_RANGE:dataset_n_vars\n<c> ::= GE_RANGE:10\n<n> ::= <d><n> | <d> | <n><d>.<d>\n<d> ::= 0 | 1 | 7 | 9",
    ),
    (
        "codon_values.bnf",
        "<e> ::= <e>-<e> | <e>*<e> | x0 | <r>.<r> | <s><r> | <GECodonValue[0,99]>\n<r> ::= <GECodonValue[0,99]>\n<s> ::= <GECodonValue{1,22,333}>",
    ),
    (
        "outputs.bnf",
        "<p> ::= out(0, <e>) + out(<k>, out(1, <e>)) | out(<k>, <e>) | <p> + out(<k>, <e>) | out(<k>, out(<k>, <e>))\n\
         <e> ::= <e>*<e> | out(<k>, <e>) | x0 | x1 | <c>\n<k> ::= 0 | 1 | 2 | 7 | 1<z>\n<z> ::= 0 | 00\n<c> ::= -1 | 0.5 | 2",
    ),
    (
        "operators.bnf",
        "<e> ::= <e> <op> <e> | <f>(<e>) | (<op> <e> <e>) | x0 | x1 | (<e>) | ((<e>))\n<op> ::= + | <mulop> | -\n<mulop> ::= * | <div>\n<div> ::= /\n<f> ::= sin | np.exp | <g>\n<g> ::= cos",
    ),
    // Eight operands per expansion: zeros recurse leftmost and overflow the mapper's stack.
    ("wide.bnf", "<e> ::= <e>+<e>+<e>+<e>+<e>+<e>+<e>+<e> | x0 | 1"),
    // Constants c[i]: literal, spelled by a rule, and spelled past the 16 slots (c[16], c[19]).
    ("slots.bnf", "<e> ::= <e>*<e> | <e>+c[<k>] | c[1<d>] | c[3] | x0\n<k> ::= GE_RANGE:4\n<d> ::= 0 | 5 | 6 | 9"),
    (
        "indices.bnf",
        "<e> ::= <e>+<e> | x[<r>] | x[:, <i>] | 1\n<r> ::= 1 | +2 | 3 | 4 | 5 | 6 | 99999999999 | 00 | 4294967296\n<i> ::= GE_RANGE:7",
    ),
];

/// `(name, loaded, templates, PonyGE2 fixture genomes)` of every grammar whose templates
/// compile for 5 variables and 3 outputs.
fn cases() -> Vec<(String, Loaded, Templates, Vec<Vec<u32>>)> {
    let shape = DatasetShape { n_vars: Some(5), n_is: Some(5), n_os: Some(3) };
    // Twenty names: the control grammars index up to the larger robots' observations.
    let names: Vec<String> = (0..20).map(|i| format!("x{i}")).collect();
    let fixtures = std::fs::read_to_string(root().join("tests/fixtures/ponyge2_tree_mapper.jsonl")).unwrap();
    let mut paths: Vec<(String, PathBuf)> = Vec::new();
    for dir in ["grammars", "tests/fixtures/grammars", "tests/fixtures/reference/grammars/ponyge2"] {
        let mut ps: Vec<PathBuf> = std::fs::read_dir(root().join(dir)).unwrap().map(|e| e.unwrap().path()).collect();
        ps.sort();
        paths.extend(ps.into_iter().map(|p| (format!("{dir}/{}", p.file_name().unwrap().to_string_lossy()), p)));
    }
    let mut out = Vec::new();
    let mut add = |name: String, l: Loaded, genomes: Vec<Vec<u32>>| {
        for n_outputs in [0, 3, 6] {
            if let Ok(t) = compile(&l.grammar, &l.table, &Vars { names: names.clone(), n_outputs }) {
                out.push((format!("{name} ({n_outputs} outputs)"), l.clone(), t, genomes.clone()));
            }
        }
    };
    for (name, p) in paths {
        let Ok(l) = grammar::load(&p, &shape) else { continue };
        let file = p.file_name().unwrap().to_string_lossy().to_string();
        let genomes = fixtures
            .lines()
            .filter(|line| line.contains(&format!("/{file}\"")))
            .map(|line| {
                let v: serde_json::Value = serde_json::from_str(line).unwrap();
                v["genome"].as_array().unwrap().iter().map(|c| c.as_u64().unwrap() as u32).collect()
            })
            .collect();
        add(name, l, genomes);
    }
    for (name, text) in FEATURES {
        let g = grammar::parse_str(text, name, false).unwrap();
        let l = grammar::load_parsed(g, &shape).unwrap_or_else(|e| panic!("{name}: {e}"));
        add(name.to_string(), l, Vec::new());
    }
    out
}

/// `n` random genomes (lengths 0..120; codons over all of u32, or 0..12), then `extra`.
fn genomes(n: usize, seed: u64, extra: &[Vec<u32>]) -> Genomes {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut g = Genomes::new(n + extra.len(), 160);
    for i in 0..n {
        let len = rng.random_range(0..120usize);
        let row: Vec<u32> = (0..len)
            .map(|_| match i % 10 {
                9 => 0, // the first production everywhere: deep leftmost recursion
                k if k % 2 == 0 => rng.random::<u32>(),
                _ => rng.random_range(0..12),
            })
            .collect();
        g.set(i, &row);
    }
    for (k, e) in extra.iter().enumerate() {
        g.set(n + k, e);
    }
    g
}

/// The settings each grammar is mapped under: `(map config, L)`; the derivation's reading
/// with two wraps, the text's otherwise.
fn settings() -> Vec<(MapConfig, usize)> {
    let mut v = Vec::new();
    for (wraps, codons, reading) in [(0, Codons::Eager, Reading::Text), (2, Codons::Lazy, Reading::Derivation), (1, Codons::Eager, Reading::Text)] {
        for (max_depth, max_len) in [(u32::MAX, 256), (17, 64), (8, 9)] {
            v.push((MapConfig { max_wraps: wraps, codons, max_depth, max_nodes: u32::MAX, reading }, max_len));
        }
    }
    v
}

fn rep<'a>(l: &'a Loaded, t: &'a Templates, map: MapConfig, capacity: usize) -> GrammarRep<'a> {
    GrammarRep { table: &l.table, templates: t, map, init: InitConfig::default(), vary: GeVaryConfig::default(), genome_capacity: capacity }
}

/// The CPU's outcome code of genome `i` (as the kernel's status) and its row.
fn cpu_status(rep: &GrammarRep, genome: &[u32], max_len: usize) -> u32 {
    let mut m = rep.mapper();
    let r = m.map(genome);
    match r.invalid {
        Some(Invalid::OutOfCodons) => MapStatus::OutOfCodons as u32,
        Some(Invalid::TooDeep) => MapStatus::TooDeep as u32,
        Some(Invalid::TooManyNodes) => MapStatus::TooManyNodes as u32,
        Some(Invalid::DerivationTooLong) => MapStatus::DerivationFull as u32,
        Some(Invalid::StackTooDeep) => MapStatus::StackOverflow as u32,
        None => {
            let (mut nodes, mut scratch) = (Vec::new(), Vec::new());
            match build_tree(rep.table, rep.templates, m.derivation(), rep.map.reading, max_len, &mut nodes, &mut scratch) {
                Ok(()) => MapStatus::Valid as u32,
                Err(grove::genome::build::BuildError::TooLong) => MapStatus::TooLong as u32,
                Err(grove::genome::build::BuildError::BadSpelling) => MapStatus::BadSpelling as u32,
                Err(grove::genome::build::BuildError::TooDeep) => MapStatus::BuildFramesFull as u32,
            }
        }
    }
}

/// The first difference between the device's rows and the CPU's, or `None`; also counts the
/// outcomes seen, by status code.
fn first_mismatch(rep: &GrammarRep, g: &Genomes, dev: &Population, used: &[u32], status: &[u32], seen: &mut [usize; 9]) -> Option<String> {
    let mut cpu = Population::new(g.size(), dev.max_len, dev.n_outputs);
    let cpu_used = map_population(&rep.grammar(), g, &mut cpu);
    for i in 0..g.size() {
        let want = cpu_status(rep, g.get(i), dev.max_len);
        seen[want as usize] += 1;
        if status[i] != want {
            return Some(format!("genome {i} {:?}: status gpu={} cpu={want}", g.get(i), status[i]));
        }
        if used[i] != cpu_used[i] {
            return Some(format!("genome {i}: used codons gpu={} cpu={}", used[i], cpu_used[i]));
        }
        if dev.len[i] != cpu.len[i] {
            return Some(format!("genome {i}: length gpu={} cpu={}", dev.len[i], cpu.len[i]));
        }
        for k in i * dev.max_len..(i + 1) * dev.max_len {
            let (a, b) = ((dev.op[k], dev.value[k].to_bits(), dev.size[k], dev.out[k]), (cpu.op[k], cpu.value[k].to_bits(), cpu.size[k], cpu.out[k]));
            if a != b {
                return Some(format!("genome {i}, node {}: (op, value bits, size, out) gpu={a:?} cpu={b:?}", k - i * dev.max_len));
            }
        }
    }
    None
}

/// The kernel as a host function: one genome per call (blocks of one thread).
type MapTreesFn = unsafe extern "C" fn(
    MapTreesParams, *const u32, *const u32, *mut u32, *mut u32, *mut u8, *mut f32, *mut u16, *mut u8, *mut u16, *mut u32, *mut u32,
);

struct Emulated {
    lib: libloading::Library,
}

impl Emulated {
    fn new() -> Option<Self> {
        Self::edited(|s| s)
    }

    /// map.cu passed through `edit` first.
    fn edited(edit: impl Fn(String) -> String) -> Option<Self> {
        // Shared memory is a static here; the table gets a setter.
        let lib = emulator::build(&kernels::MAP, |s| {
            edit(s).replace("extern __shared__ unsigned grove_table_shared[];", "static unsigned grove_table_shared[GROVE_TABLE_BYTES / 4];")
                + "\nextern \"C\" void grove_emu_set_table(const unsigned* w, unsigned n) { for (unsigned k = 0; k < n; ++k) grove_table[k] = w[k]; }\n"
        })?;
        Some(Self { lib })
    }

    fn map_population(&self, tables: &DeviceTables, g: &Genomes, cfg: &MapConfig, max_derivation: usize, max_len: usize, n_outputs: usize) -> (Population, Vec<u32>, Vec<u32>) {
        type SetTable = unsafe extern "C" fn(*const u32, u32);
        type SetThread = unsafe extern "C" fn(u32, u32, u32);
        let words: Vec<u32> = tables.blob.chunks(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect();
        let set_table: SetTable = emulator::get(&self.lib, "grove_emu_set_table");
        let set_thread: SetThread = emulator::get(&self.lib, "grove_emu_set_thread");
        let kernel: MapTreesFn = emulator::get(&self.lib, kernels::MAP_TREES_KERNEL);
        let p = g.size();
        let mut pop = Population::new(p, max_len, n_outputs);
        // Rows hold older trees of many lengths (as a reused population does): the kernel must
        // clear what the old tree left past the new one's length.
        for i in 0..p {
            let m = 1 + (i * 7) % max_len;
            let mut old: Vec<grove::program::Node> = (1..m).map(|_| grove::program::Node::func(grove::program::Op::Sin)).collect();
            old.push(grove::program::Node::constant(0.25 + i as f32));
            old[0].out = (n_outputs > 0) as u8;
            pop.set_tree(i, &old).unwrap();
        }
        let (mut der, mut span) = (vec![0xdead_beefu32; p * max_derivation], vec![0xdead_beefu32; p * max_derivation]);
        let (mut status, mut used) = (vec![u32::MAX; p], vec![u32::MAX; p]);
        let params = MapTreesParams {
            map: MapParams {
                n_genomes: p as u32,
                capacity: g.capacity as u32,
                max_wraps: cfg.max_wraps,
                lazy: (cfg.codons == Codons::Lazy) as u32,
                max_depth: cfg.max_depth,
                max_nodes: cfg.max_nodes,
                max_derivation: max_derivation as u32,
                table_words: 0,
            },
            templates_at: tables.templates_at as u32,
            max_len: max_len as u32,
            build: 1,
            reading: MapTreesParams::reading_code(cfg.reading),
        };
        // SAFETY: the table fits grove_table (checked by DeviceTables::new); the kernel's C
        // signature is MapTreesFn and every buffer has the sizes the kernel indexes (P genomes
        // of capacity codons, P × max_derivation scratch, P × L rows, P statuses).
        unsafe {
            set_table(words.as_ptr(), words.len() as u32);
            for i in 0..p {
                set_thread(i as u32, 1, 0);
                kernel(
                    params,
                    g.codons.as_ptr(),
                    g.len.as_ptr(),
                    der.as_mut_ptr(),
                    span.as_mut_ptr(),
                    pop.op.as_mut_ptr(),
                    pop.value.as_mut_ptr(),
                    pop.size.as_mut_ptr(),
                    pop.out.as_mut_ptr(),
                    pop.len.as_mut_ptr(),
                    status.as_mut_ptr(),
                    used.as_mut_ptr(),
                );
            }
        }
        (pop, used, status)
    }
}

type Mapped = (Population, Vec<u32>, Vec<u32>);
/// A device's mapping of genomes to trees: (tables, genomes, config, max derivation, L, outputs).
type MapDevice<'a> = dyn Fn(&DeviceTables, &Genomes, &MapConfig, usize, usize, usize) -> Mapped + 'a;

/// Runs `device` on every case and setting and compares with the CPU; `n` random genomes each.
fn parity(n: usize, device: &MapDevice<'_>) {
    let mut seen = [0usize; 9];
    let (mut runs, mut regrouped) = (0, 0);
    for (name, l, t, fixture) in cases() {
        let tables = DeviceTables::new(&l.table, &t).unwrap_or_else(|e| panic!("{name}: {e}"));
        for (k, (cfg, max_len)) in settings().into_iter().enumerate() {
            let g = genomes(n, 11 + k as u64, &fixture);
            let rep = rep(&l, &t, cfg, g.capacity);
            let (pop, used, status) = device(&tables, &g, &cfg, rep.max_derivation(), max_len, t.n_outputs);
            pop.validate().unwrap_or_else(|e| panic!("{name}, {cfg:?}, L {max_len}: {e}"));
            if let Some(m) = first_mismatch(&rep, &g, &pop, &used, &status, &mut seen) {
                panic!("first mismatch: {name}, {cfg:?}, L {max_len}: {m}");
            }
            if cfg.reading == Reading::Text {
                // Rows whose text reading is not the derivation's: the parity covers the regrouping.
                let mut by_derivation = rep.grammar();
                by_derivation.map.reading = Reading::Derivation;
                let mut other = Population::new(g.size(), max_len, t.n_outputs);
                map_population(&by_derivation, &g, &mut other);
                regrouped += (0..g.size()).filter(|&i| pop.tree(i).nodes() != other.tree(i).nodes()).count();
            }
            runs += 1;
        }
    }
    eprintln!("{runs} runs; outcomes by status code: {seen:?}; {regrouped} trees the text regroups");
    assert!(regrouped >= 100, "only {regrouped} trees differ between the readings");
    for (code, what) in [(0, "valid"), (1, "out of codons"), (2, "too deep"), (5, "stack overflow"), (6, "too long"), (7, "bad spelling")] {
        assert!(seen[code] > 0, "no genome ended {what}");
    }
}

#[test]
fn emulated_map_trees_match_map_population() {
    let Some(emu) = Emulated::new() else { return };
    parity(150, &|t, g, cfg, d, l, k| emu.map_population(t, g, cfg, d, l, k));
}

#[test]
fn every_shipped_expression_grammar_has_device_tables() {
    let names: Vec<String> = cases().into_iter().map(|c| c.0).collect();
    eprintln!("grammars with device tables: {names:?}");
    let shipped = ["regression", "ge-paper", "pagie1", "vladislavleva4", "classify", "classify-3class", "control", "swimmer", "hopper", "walker2d", "half_cheetah"];
    for g in shipped.iter().map(|g| format!("grammars/{g}.bnf")).chain(["spelled.bnf".into(), "outputs.bnf".into()]) {
        assert!(names.iter().any(|n| n.starts_with(&g)), "{g} has no templates: {names:?}");
    }
}

#[test]
fn oversized_tables_name_both_parts() {
    // A rule table that fits alone, with templates that push the pair past 64 KiB.
    let mut text = String::from("<e> ::= x0");
    for i in 0..2600 {
        text.push_str(&format!(" | {i}.5 + x0 * x0 - x0"));
    }
    let g = grammar::parse_str(&text, "big.bnf", false).unwrap();
    let l = grammar::load_parsed(g, &DatasetShape::default()).unwrap();
    assert!(l.table.device_size_bytes() < grove::grammar::compile::TABLE_LIMIT_BYTES);
    let e = compile(&l.grammar, &l.table, &Vars { names: vec!["x0".into()], n_outputs: 0 }).unwrap_err().to_string();
    assert!(e.contains("rule table") && e.contains("node templates") && e.contains("65536"), "{e}");
}

#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn gpu_map_trees_match_map_population() {
    let engine = grove::backend::cuda::CudaEngine::new().unwrap_or_else(|e| panic!("GROVE_TEST_GPU=1 but {e}"));
    parity(2000, &|t, g, cfg, d, l, k| {
        let m = engine.map_population(t, g, cfg, d, l, k).unwrap();
        (m.population, m.used, m.status)
    });
}

/// The grammars initialisation is checked on: those of [`cases`] but the eight-operand one
/// (whose full trees grow as 8^depth on the CPU too), and one whose start production has more
/// children than the kernel's stack holds (its rows are left to the host).
fn init_grammars() -> Vec<(String, Loaded, DeviceTables)> {
    let mut out: Vec<(String, Loaded, DeviceTables)> = cases()
        .into_iter()
        .filter(|c| !c.0.starts_with("wide.bnf"))
        .map(|(name, l, t, _)| {
            let tables = DeviceTables::new(&l.table, &t).unwrap();
            (name, l, tables)
        })
        .collect();
    let many = format!("<s> ::= {} | <a>\n<a> ::= x | y | <a>+<a>", vec!["<a>"; 300].join(" "));
    let l = grammar::load_parsed(grammar::parse_str(&many, "many.bnf", false).unwrap(), &DatasetShape::default()).unwrap();
    let tables = DeviceTables::new(&l.table, &Templates::default()).unwrap();
    out.push(("many.bnf".into(), l, tables));
    out
}

/// The settings initialisation is checked under: `(config, codons, capacity)`.
fn init_settings() -> Vec<(InitConfig, Codons, usize)> {
    use grove::genome::InitMethod;
    let sensible = InitConfig::default();
    vec![
        (InitConfig { min_depth: 3, max_depth: 8, ..sensible }, Codons::Eager, 512),
        (InitConfig { min_depth: 1, max_depth: 5, tail_fraction: 0.0, ..sensible }, Codons::Lazy, 512),
        (InitConfig { min_depth: 2, max_depth: 9, tail_fraction: 1.5, codon_size: 7, ..sensible }, Codons::Eager, 24),
        (InitConfig { method: InitMethod::Random, length: 100, ..sensible }, Codons::Eager, 512),
        (InitConfig { method: InitMethod::Random, length: 100, codon_size: 3, ..sensible }, Codons::Lazy, 40),
    ]
}

#[test]
fn emulated_init_genomes_match_init_genomes() {
    use grove::backend::cuda::params::InitParams;
    use grove::genome::init::init_genomes;
    type InitFn = unsafe extern "C" fn(InitParams, *mut u32, *mut u32, *mut u32);
    type SetTable = unsafe extern "C" fn(*const u32, u32);
    type SetThread = unsafe extern "C" fn(u32, u32, u32);
    let Some(emu) = Emulated::new() else { return };
    let init: InitFn = emulator::get(&emu.lib, kernels::INIT_GENOMES);
    let set_table: SetTable = emulator::get(&emu.lib, "grove_emu_set_table");
    let set_thread: SetThread = emulator::get(&emu.lib, "grove_emu_set_thread");
    let (mut rows, mut flagged) = (0usize, 0usize);
    for (name, l, tables) in init_grammars() {
        let words: Vec<u32> = tables.blob.chunks(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect();
        for (k, (cfg, codons, capacity)) in init_settings().into_iter().enumerate() {
            let p = 120;
            let seed = 3 + k as u64;
            let want = init_genomes(&l.table, &cfg, codons, p, capacity, seed);
            let mut got = Genomes::new(p, capacity);
            got.codons.fill(0xdead_beef);
            let mut flag = vec![u32::MAX; p];
            let params = InitParams {
                n: p as u32,
                capacity: capacity as u32,
                seed_lo: seed as u32,
                seed_hi: (seed >> 32) as u32,
                sensible: (cfg.method == grove::genome::InitMethod::Sensible) as u32,
                length: cfg.length as u32,
                codon_size: cfg.codon_size,
                min_depth: cfg.min_depth,
                max_depth: cfg.max_depth,
                tail_fraction: cfg.tail_fraction,
                lazy: (codons == Codons::Lazy) as u32,
                table_words: 0,
            };
            // SAFETY: the table fits grove_table; codons hold P × capacity words, len and flag P.
            unsafe {
                set_table(words.as_ptr(), words.len() as u32);
                for i in 0..p {
                    set_thread(i as u32, 1, 0);
                    init(params, got.codons.as_mut_ptr(), got.len.as_mut_ptr(), flag.as_mut_ptr());
                }
            }
            for (i, &f) in flag.iter().enumerate() {
                if f != 0 {
                    flagged += 1; // left to the host: CudaEngine::init_genomes makes it there
                    continue;
                }
                assert_eq!(got.get(i), want.get(i), "{name}, {cfg:?}, {codons:?}, capacity {capacity}: genome {i}");
                assert!(got.codons[i * capacity..(i + 1) * capacity][got.len[i] as usize..].iter().all(|&c| c == 0), "{name}: padding of {i}");
                rows += 1;
            }
        }
    }
    eprintln!("{rows} genomes equal; {flagged} left to the host");
    assert!(flagged > 0, "no sensible derivation outgrew the kernel's stack (many.bnf should)");
}

#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn gpu_init_genomes_match_init_genomes() {
    let engine = grove::backend::cuda::CudaEngine::new().unwrap_or_else(|e| panic!("GROVE_TEST_GPU=1 but {e}"));
    for (name, l, tables) in init_grammars() {
        for (k, (cfg, codons, capacity)) in init_settings().into_iter().enumerate() {
            let want = grove::genome::init::init_genomes(&l.table, &cfg, codons, 3000, capacity, 5 + k as u64);
            let dev = engine.init_genomes(&l.table, &tables, &cfg, codons, 3000, capacity, 5 + k as u64).unwrap();
            assert_eq!(engine.download_genomes(&dev).unwrap(), want, "{name}, {cfg:?}, {codons:?}, capacity {capacity}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// GE subtree crossover (`grove_ge_subtree_crossover`, map.cu) against
// `genome::subtree::subtree_crossover` as the GE loops call it.

/// Grammars for subtree crossover: recursion with an operator rule, a single-production start
/// rule with codon values (lazy codons read none at `<s>`), and PonyGE2's
/// supervised_learning.bnf with nested number rules.
const SUBTREE_GRAMMARS: [&str; 3] = [
    "<e> ::= (<op> <e> <e>) | <v>\n<op> ::= + | - | *\n<v> ::= x0 | 1.0",
    "<s> ::= <e>\n<e> ::= <e>+<e>|<e>*<e>|f(<e>)|x|<c><c>.<c>\n<c> ::= GE_RANGE:10",
    "<e>  ::= (<e>+<e>)|(<e>-<e>)|(<e>*<e>)|aq(<e>,<e>)|x[:, <varidx>]|<c>\n<varidx> ::= GE_RANGE:2\n<c> ::= <d>.<d> | -<d>.<d>\n<d> ::= GE_RANGE:10",
];

/// `(map config, capacity)` for subtree crossover: eager and lazy codons, wraps, a depth limit
/// that rejects children, and a capacity small enough that some children do not fit.
fn subtree_settings() -> Vec<(MapConfig, usize)> {
    vec![
        (MapConfig::default(), 256),
        (MapConfig { codons: Codons::Lazy, ..MapConfig::default() }, 256),
        (MapConfig { max_depth: 8, ..MapConfig::default() }, 256),
        (MapConfig { max_wraps: 1, codons: Codons::Lazy, max_depth: 10, ..MapConfig::default() }, 128),
        (MapConfig { max_depth: 12, ..MapConfig::default() }, 40),
    ]
}

/// `n` parents: PI grow genomes (depths 2 to 8, tails included) with every fifth replaced by
/// random codons (often invalid, or read past its end with wraps).
fn subtree_parents(table: &grove::grammar::compile::RuleTable, codons: Codons, n: usize, capacity: usize, seed: u64) -> Genomes {
    let init = InitConfig { method: grove::genome::InitMethod::PiGrow, min_depth: 2, max_depth: 8, ..InitConfig::default() };
    let mut g = grove::genome::init::init_genomes(table, &init, codons, n, capacity, seed);
    let mut rng = StdRng::seed_from_u64(seed);
    for i in (0..n).step_by(5) {
        let len = rng.random_range(0..capacity.min(60));
        let row: Vec<u32> = (0..len).map(|_| rng.random_range(0..1000)).collect();
        g.set(i, &row);
    }
    g
}

/// The CPU's children of `pairs` (as `backend::cpu::breed`'s crossover places them).
fn subtree_reference(grammar: &grove::backend::breed::Grammar<'_>, parents: &Genomes, pairs: &[u32], first_row: usize, cfg: &GeVaryConfig, seed: u64, generation: u32) -> Genomes {
    use grove::genome::subtree::{SubtreeScratch, subtree_crossover};
    use grove::rng::{Purpose, Stream};
    let mut out = Genomes::new(parents.size(), parents.capacity);
    let (mut mapper, mut scratch, mut c0, mut c1) = (grammar.mapper(), SubtreeScratch::default(), Vec::new(), Vec::new());
    for j in 0..pairs.len() / 2 {
        let (a, b) = (pairs[2 * j] as usize, pairs[2 * j + 1] as usize);
        let mut s = Stream::new(seed, generation, j as u32, Purpose::Crossover);
        subtree_crossover(&mut mapper, parents.get(a), parents.get(b), cfg, parents.capacity, &mut s, &mut scratch, &mut c0, &mut c1);
        for (k, c) in [(first_row + 2 * j, &c0), (first_row + 2 * j + 1, &c1)] {
            if k < out.size() {
                out.set(k, c);
            }
        }
    }
    out
}

/// A device's subtree crossover: (tables, map config, max derivation, parents, pairs, first
/// row, vary config, seed, generation) to the children `[P]`.
type SubtreeDevice<'a> = dyn Fn(&DeviceTables, &MapConfig, usize, &Genomes, &[u32], usize, &GeVaryConfig, u64, u32) -> Genomes + 'a;

/// Runs `device` on every grammar and setting against the CPU, `p` parents each.
fn subtree_parity(p: usize, device: &SubtreeDevice<'_>) {
    let (mut crossed, mut copied, mut rows) = (0usize, 0usize, 0usize);
    for (gi, text) in SUBTREE_GRAMMARS.iter().enumerate() {
        let l = grammar::load_parsed(grammar::parse_str(text, "g", false).unwrap(), &DatasetShape::default()).unwrap();
        let templates = Templates::default();
        let tables = DeviceTables::new(&l.table, &templates).unwrap();
        for (k, (map, capacity)) in subtree_settings().into_iter().enumerate() {
            let seed = 40 + (gi * 10 + k) as u64;
            let parents = subtree_parents(&l.table, map.codons, p, capacity, seed);
            let grammar = grove::backend::breed::Grammar { table: &l.table, templates: &templates, map, max_derivation: grove::evolve::max_derivation(capacity, &map) };
            // An odd number of children after the elite: the last pair's second child has no row.
            let first_row = 3;
            let n_pairs = (p - first_row).div_ceil(2);
            let mut rng = StdRng::seed_from_u64(seed + 1);
            let pairs: Vec<u32> = (0..2 * n_pairs).map(|_| rng.random_range(0..p as u32)).collect();
            let cfg = GeVaryConfig { crossover: 0.9, crossover_op: grove::genome::vary::GeCrossover::Subtree, ..GeVaryConfig::default() };
            let want = subtree_reference(&grammar, &parents, &pairs, first_row, &cfg, seed, 7);
            let got = device(&tables, &map, grammar.max_derivation, &parents, &pairs, first_row, &cfg, seed, 7);
            for r in first_row..p {
                if got.get(r) != want.get(r) {
                    panic!("grammar {gi}, {map:?}, capacity {capacity}: first mismatch at child {r} (pair {}): gpu={:?} cpu={:?}", (r - first_row) / 2, got.get(r), want.get(r));
                }
                let j = (r - first_row) / 2;
                let parent = parents.get(pairs[2 * j + (r - first_row) % 2] as usize);
                if want.get(r) == parent { copied += 1 } else { crossed += 1 }
                rows += 1;
            }
            assert_eq!(got, want, "grammar {gi}, {map:?}: padding and rows before the children");
        }
    }
    eprintln!("{rows} children equal: {crossed} crossed, {copied} copies of a parent");
    assert!(crossed > rows / 3 && copied > rows / 20, "{crossed} crossed and {copied} copied of {rows}");
}

/// The kernel's source built as host C++, one thread per pair; and the same source allowed one
/// try instead of `TRIES`, which must disagree, so the cases reach the retries.
#[test]
fn emulated_subtree_crossover_matches_reference() {
    let Some(emu) = Emulated::new() else { return };
    subtree_parity(301, &|t, m, d, g, pairs, r, c, s, gen| emulated_subtree(&emu.lib, t, m, d, g, pairs, r, c, s, gen));
    let one_try = Emulated::edited(|s| s.replace("#define GROVE_SUBTREE_TRIES 8", "#define GROVE_SUBTREE_TRIES 1")).unwrap();
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        subtree_parity(301, &|t, m, d, g, pairs, r, c, s, gen| emulated_subtree(&one_try.lib, t, m, d, g, pairs, r, c, s, gen))
    }));
    assert!(caught.is_err(), "one try a pair gave the CPU's children: no case needed a second try");
}

/// `grove_ge_subtree_crossover` of `lib` (map.cu built by the emulator), one thread per pair.
#[allow(clippy::too_many_arguments)]
fn emulated_subtree(
    lib: &libloading::Library,
    tables: &DeviceTables,
    map: &MapConfig,
    max_derivation: usize,
    parents: &Genomes,
    pairs: &[u32],
    first_row: usize,
    cfg: &GeVaryConfig,
    seed: u64,
    generation: u32,
) -> Genomes {
    use grove::backend::cuda::params::{SubtreeParams, subtree_scratch_words};
    type SubtreeFn = unsafe extern "C" fn(SubtreeParams, *const u32, *const u32, *const u32, *mut u32, *mut u32, *mut u32);
    type SetTable = unsafe extern "C" fn(*const u32, u32);
    type SetThread = unsafe extern "C" fn(u32, u32, u32);
    let kernel: SubtreeFn = emulator::get(lib, kernels::GE_SUBTREE_CROSSOVER);
    let set_table: SetTable = emulator::get(lib, "grove_emu_set_table");
    let set_thread: SetThread = emulator::get(lib, "grove_emu_set_thread");
    let words: Vec<u32> = tables.blob.chunks(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect();
    let (p, cap) = (parents.size(), parents.capacity);
    let n_pairs = pairs.len() / 2;
    let stride = subtree_scratch_words(max_derivation, cap);
    let mut scratch = vec![0xdead_beefu32; n_pairs * stride];
    let mut out = Genomes::new(p, cap);
    let params = SubtreeParams {
        map: MapParams {
            n_genomes: p as u32,
            capacity: cap as u32,
            max_wraps: map.max_wraps,
            lazy: (map.codons == Codons::Lazy) as u32,
            max_depth: map.max_depth,
            max_nodes: map.max_nodes,
            max_derivation: max_derivation as u32,
            table_words: 0,
        },
        n_pairs: n_pairs as u32,
        first_row: first_row as u32,
        n_rows: p as u32,
        seed_lo: seed as u32,
        seed_hi: (seed >> 32) as u32,
        generation,
        p_crossover: cfg.crossover,
        scratch_stride: stride as u32,
    };
    // SAFETY: the table fits grove_table (DeviceTables::new checked it); the kernel's C
    // signature is SubtreeFn; pairs holds 2 n_pairs indices below P, the genome arrays P
    // rows of cap codons, the scratch n_pairs × stride words.
    unsafe {
        set_table(words.as_ptr(), words.len() as u32);
        for j in 0..n_pairs {
            set_thread(j as u32, 1, 0);
            kernel(params, pairs.as_ptr(), parents.codons.as_ptr(), parents.len.as_ptr(), out.codons.as_mut_ptr(), out.len.as_mut_ptr(), scratch.as_mut_ptr());
        }
    }
    out
}

#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn gpu_subtree_crossover_matches_reference() {
    let engine = grove::backend::cuda::CudaEngine::new().unwrap_or_else(|e| panic!("GROVE_TEST_GPU=1 but {e}"));
    subtree_parity(3001, &|tables, map, max_derivation, parents, pairs, first_row, cfg, seed, generation| {
        let dp = engine.upload_genomes(parents).unwrap();
        let idx = engine.upload_indices(pairs, parents.size()).unwrap();
        let mut dc = engine.alloc_genomes(parents.size(), parents.capacity).unwrap();
        engine.ge_subtree_crossover(tables, map, max_derivation, &dp, &idx, &mut dc, first_row, cfg, seed, generation).unwrap_or_else(|e| panic!("{e}"));
        engine.download_genomes(&dc).unwrap()
    });
}

// ---------------------------------------------------------------------------------------------
// GE subtree mutation (`grove_ge_subtree_mutate`, map.cu) against
// `genome::subtree::subtree_mutate` as the GE loops call it.

/// The CPU's mutation of rows `first_row..` of `genomes` (as `backend::cpu::breed`'s mutate).
fn mutate_reference(grammar: &grove::backend::breed::Grammar<'_>, genomes: &Genomes, first_row: usize, cfg: &GeVaryConfig, seed: u64, generation: u32) -> Genomes {
    use grove::genome::subtree::{SubtreeScratch, subtree_mutate};
    use grove::rng::{Purpose, Stream};
    let mut out = genomes.clone();
    let (mut mapper, mut scratch) = (grammar.mapper(), SubtreeScratch::default());
    for k in first_row..genomes.size() {
        let mut g = genomes.get(k).to_vec();
        subtree_mutate(&mut mapper, &mut g, cfg, genomes.capacity, &mut Stream::new(seed, generation, k as u32, Purpose::Mutate), &mut scratch);
        out.set(k, &g);
    }
    out
}

/// A device's subtree mutation: (tables, map config, max derivation, genomes, first row, vary
/// config, seed, generation) to the mutated genomes.
type MutateDevice<'a> = dyn Fn(&DeviceTables, &MapConfig, usize, &Genomes, usize, &GeVaryConfig, u64, u32) -> Genomes + 'a;

/// Runs `device` on every grammar and setting against the CPU, `p` rows each, the first 3 kept
/// as an elite; counts the rows that changed, and the rows left as they were.
fn mutate_parity(p: usize, device: &MutateDevice<'_>) {
    let (mut changed, mut kept, mut rows) = (0usize, 0usize, 0usize);
    for (gi, text) in SUBTREE_GRAMMARS.iter().enumerate() {
        let l = grammar::load_parsed(grammar::parse_str(text, "g", false).unwrap(), &DatasetShape::default()).unwrap();
        let templates = Templates::default();
        let tables = DeviceTables::new(&l.table, &templates).unwrap();
        for (k, (map, capacity)) in subtree_settings().into_iter().enumerate() {
            let seed = 90 + (gi * 10 + k) as u64;
            let genomes = subtree_parents(&l.table, map.codons, p, capacity, seed);
            let grammar = grove::backend::breed::Grammar { table: &l.table, templates: &templates, map, max_derivation: grove::evolve::max_derivation(capacity, &map) };
            let first_row = 3;
            // A small codon size as well: grow's draws then wrap production choices often.
            let codon_size = if k % 2 == 0 { 1 << 16 } else { 7 };
            let cfg = GeVaryConfig { mutation: 0.9, mutation_op: grove::genome::vary::GeMutation::Subtree, codon_size, ..GeVaryConfig::default() };
            let want = mutate_reference(&grammar, &genomes, first_row, &cfg, seed, 5);
            let got = device(&tables, &map, grammar.max_derivation, &genomes, first_row, &cfg, seed, 5);
            for r in 0..p {
                if got.get(r) != want.get(r) {
                    panic!("grammar {gi}, {map:?}, capacity {capacity}: first mismatch at row {r}: gpu={:?} cpu={:?} (was {:?})", got.get(r), want.get(r), genomes.get(r));
                }
                if r >= first_row {
                    if want.get(r) == genomes.get(r) { kept += 1 } else { changed += 1 }
                    rows += 1;
                }
            }
            assert_eq!(got, want, "grammar {gi}, {map:?}: padding");
            let mut mapper = grammar.mapper();
            for r in first_row..p {
                if want.get(r) != genomes.get(r) {
                    assert!(mapper.map(want.get(r)).valid() && want.get(r).len() <= capacity, "a mutated row maps validly within the capacity");
                }
            }
        }
    }
    eprintln!("{rows} rows equal: {changed} mutated, {kept} left as they were");
    assert!(changed > rows / 2 && kept > rows / 20, "{changed} mutated and {kept} kept of {rows}");
}

/// The kernel's source built as host C++, one thread per row; and the same source allowed one
/// try instead of `TRIES`, which must disagree, so the cases reach the retries.
#[test]
fn emulated_subtree_mutation_matches_reference() {
    let Some(emu) = Emulated::new() else { return };
    mutate_parity(301, &|t, m, d, g, r, c, s, gen| emulated_mutate(&emu.lib, t, m, d, g, r, c, s, gen));
    let one_try = Emulated::edited(|s| s.replace("#define GROVE_SUBTREE_TRIES 8", "#define GROVE_SUBTREE_TRIES 1")).unwrap();
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        mutate_parity(301, &|t, m, d, g, r, c, s, gen| emulated_mutate(&one_try.lib, t, m, d, g, r, c, s, gen))
    }));
    assert!(caught.is_err(), "one try a row gave the CPU's genomes: no case needed a second try");
}

/// `grove_ge_subtree_mutate` of `lib` (map.cu built by the emulator), one thread per row.
#[allow(clippy::too_many_arguments)]
fn emulated_mutate(
    lib: &libloading::Library,
    tables: &DeviceTables,
    map: &MapConfig,
    max_derivation: usize,
    genomes: &Genomes,
    first_row: usize,
    cfg: &GeVaryConfig,
    seed: u64,
    generation: u32,
) -> Genomes {
    use grove::backend::cuda::params::{SubtreeMutateParams, subtree_mutate_scratch_words};
    type MutateFn = unsafe extern "C" fn(SubtreeMutateParams, *mut u32, *mut u32, *mut u32);
    type SetTable = unsafe extern "C" fn(*const u32, u32);
    type SetThread = unsafe extern "C" fn(u32, u32, u32);
    let kernel: MutateFn = emulator::get(lib, kernels::GE_SUBTREE_MUTATE);
    let set_table: SetTable = emulator::get(lib, "grove_emu_set_table");
    let set_thread: SetThread = emulator::get(lib, "grove_emu_set_thread");
    let words: Vec<u32> = tables.blob.chunks(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect();
    let (p, cap) = (genomes.size(), genomes.capacity);
    let n = p - first_row;
    let stride = subtree_mutate_scratch_words(max_derivation, cap);
    let mut scratch = vec![0xdead_beefu32; n * stride];
    let mut out = genomes.clone();
    let params = SubtreeMutateParams {
        map: MapParams {
            n_genomes: p as u32,
            capacity: cap as u32,
            max_wraps: map.max_wraps,
            lazy: (map.codons == Codons::Lazy) as u32,
            max_depth: map.max_depth,
            max_nodes: map.max_nodes,
            max_derivation: max_derivation as u32,
            table_words: 0,
        },
        first_row: first_row as u32,
        n_rows: p as u32,
        seed_lo: seed as u32,
        seed_hi: (seed >> 32) as u32,
        generation,
        p_mutation: cfg.mutation,
        codon_size: cfg.codon_size,
        scratch_stride: stride as u32,
    };
    // SAFETY: the table fits grove_table (DeviceTables::new checked it); the kernel's C
    // signature is MutateFn; the genome arrays hold P rows of cap codons, the scratch
    // n × stride words.
    unsafe {
        set_table(words.as_ptr(), words.len() as u32);
        for t in 0..n {
            set_thread(t as u32, 1, 0);
            kernel(params, out.codons.as_mut_ptr(), out.len.as_mut_ptr(), scratch.as_mut_ptr());
        }
    }
    out
}

#[test]
#[cfg_attr(not(gpu_tests), ignore = "needs a CUDA GPU: set GROVE_TEST_GPU=1")]
fn gpu_subtree_mutation_matches_reference() {
    let engine = grove::backend::cuda::CudaEngine::new().unwrap_or_else(|e| panic!("GROVE_TEST_GPU=1 but {e}"));
    mutate_parity(3001, &|tables, map, max_derivation, genomes, first_row, cfg, seed, generation| {
        let mut dg = engine.upload_genomes(genomes).unwrap();
        engine.ge_subtree_mutate(tables, map, max_derivation, &mut dg, first_row, cfg, seed, generation).unwrap_or_else(|e| panic!("{e}"));
        engine.download_genomes(&dg).unwrap()
    });
}
