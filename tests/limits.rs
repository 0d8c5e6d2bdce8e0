//! Hostile counts and sizes (issue 28): every count option refused beyond the bound its meaning
//! allows, before anything is allocated, in one line naming the option (and the experiment
//! file's field) and the bound; the bounds stated in `--help`.


mod support;
use support::{assert_one_line_error, dir, grove_cpu, text};


// `--tournament 4294967295` ran until killed; `--elite 51 --pop 50` returned generation 0's best;
// `--test-episodes 0` silently became 1; `--episode-steps 4000000000` ran until killed.
#[test]
fn counts_beyond_their_meaning_are_refused_on_the_command_line() {
    let cases: &[(&[&str], &[&str])] = &[
        (&["evolve", "--functions", "add", "--tournament", "4294967295"], &["--tournament (engine.tournament)", "--pop 3000", "4294967295"]),
        (&["evolve", "--functions", "add", "--tournament", "0"], &["--tournament", "at least 1"]),
        (&["evolve", "--functions", "add", "--elite", "51", "--pop", "50"], &["--elite (engine.elite)", "less than the population", "51"]),
        (&["evolve", "--functions", "add", "--elite", "50", "--pop", "50"], &["--elite", "less than"]),
        (&["evolve", "--functions", "add", "--gens", "4000000000"], &["--gens (engine.generations)", "at most 1000000"]),
        (&["evolve", "--functions", "add", "--pop", "5000000000"], &["--pop (engine.pop_size)", "at most 4294967295"]),
        (&["evolve", "--functions", "add", "--islands", "70000"], &["--islands (islands.count)", "at most 65536"]),
        (&["evolve", "--functions", "add", "--islands", "65536", "--pop", "70000"], &["--pop × --islands", "at most 4294967295"]),
        (&["evolve", "--grammar", "grammars/regression.bnf", "--wraps", "4000000000"], &["--wraps (map.max_wraps)", "at most 100"]),
        (&["evolve", "--grammar", "grammars/regression.bnf", "--genome-length", "0"], &["--genome-length", "at least 1"]),
        (&["evolve", "--grammar", "grammars/regression.bnf", "--genome-capacity", "100000000"], &["--genome-capacity", "at most 65536"]),
        (&["classify", "--elite", "5000"], &["--elite", "less than the population (--pop 5000)"]),
        (&["control", "--env", "swimmer", "--test-episodes", "0"], &["--test-episodes (test_episodes)", "at least 1, got 0"]),
        (&["control", "--env", "swimmer", "--test-episodes", "4000000000"], &["--test-episodes", "at most 10000"]),
        (&["control", "--env", "swimmer", "--episodes", "4000000000"], &["--episodes (episodes)", "at most 10000"]),
        (&["control", "--env", "swimmer", "--validation-episodes", "20000"], &["--validation-episodes", "at most 10000"]),
        (&["control", "--env", "swimmer", "--episode-steps", "4000000000"], &["--episode-steps (episode_steps)", "at most 1000000"]),
        (&["control", "--env", "swimmer", "--tournament", "201"], &["--tournament", "--pop 200"]),
        (&["bench", "--genomes", "10", "--codons", "0"], &["--codons", "at least 1"]),
        (&["bench", "--genomes", "0"], &["--genomes", "at least 1"]),
        (&["bench", "--wraps", "101"], &["--wraps", "at most 100"]),
        (&["bench", "--gpu-part", "runs"], &["--gpu-part chooses parts of --gpu", "add --gpu"]),
        (&["bench", "--quick"], &["--quick shortens --gpu", "add --gpu"]),
    ];
    for (args, needles) in cases {
        assert_one_line_error(&grove_cpu(args), needles);
    }
}

// `map --wraps 4000000000` hung, and `--wraps 1000000` on an all-zero genome took 2.5 GB.
#[test]
fn map_bounds_wraps_and_genome_length() {
    let out = support::grove_run(&["map", "-g", "grammars/vladislavleva4.bnf", "--wraps", "4000000000"], "", support::Device::Cpu, None);
    assert_one_line_error(&out, &["--wraps", "at most 100"]);
    let long = vec!["0"; 70_000].join(",") + "\n";
    let out = support::grove_run(&["map", "-g", "grammars/vladislavleva4.bnf"], &long, support::Device::Cpu, None);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out.stderr).trim(), "line 1: more than 65536 codons (the longest genome grove maps)");
}

#[test]
fn experiment_files_share_the_bounds() {
    let d = dir("experiment_bounds");
    let cases = [
        ("Evolve(functions: \"add\", engine: (tournament: 4294967295))", vec!["engine.tournament", "4294967295"]),
        ("Evolve(functions: \"add\", engine: (pop_size: 50, elite: 51))", vec!["engine.elite", "less than the population"]),
        ("Control(env: \"swimmer\", test_episodes: 0)", vec!["test_episodes", "at least 1"]),
        ("Control(env: \"swimmer\", episode_steps: 4000000000)", vec!["episode_steps", "at most 1000000"]),
        ("Classify(islands: (count: 65536), engine: (pop_size: 70000))", vec!["islands.count", "at most 4294967295"]),
    ];
    for (k, (body, needles)) in cases.iter().enumerate() {
        let p = d.join(format!("e{k}.ron"));
        std::fs::write(&p, body).unwrap();
        assert_one_line_error(&grove_cpu(&["run", p.to_str().unwrap(), "-q"]), needles);
    }
}

#[test]
fn help_states_the_bounds() {
    for (command, needles) in [
        ("evolve", &["2 to 4294967295", "1 to --pop", "0 to --pop − 1", "at most 1000000", "1 to 65536", "at most 100"][..]),
        ("control", &["1 to 10000", "1 to 1000000", "2 to 4294967295"][..]),
        ("bench", &["1 to 16777216", "1 to 65536"][..]),
        ("map", &["at most 100"][..]),
    ] {
        let out = grove_cpu(&[command, "--help"]);
        let h = text(&out.stdout).split_whitespace().collect::<Vec<_>>().join(" ");
        for n in needles {
            assert!(h.contains(n), "`grove {command} --help` lacks `{n}`: {h}");
        }
    }
}

// `--pop 4000000000` aborted (`memory allocation of … bytes failed`), `--islands 65536 --pop
// 2000` reached 19.8 GB and `--pop 100000000 --gens 1` 13.6 GB before anyone stopped them.
#[test]
fn runs_that_will_not_fit_are_refused_before_they_start() {
    let cases: &[(&[&str], &[&str])] = &[
        (&["evolve", "--functions", "add", "--pop", "4000000000"], &["--pop 4000000000 × --islands 1", "TiB of host memory", "lower --pop"]),
        (&["classify", "--pop", "4000000000"], &["--pop 4000000000", "of host memory"]),
        (&["control", "--env", "swimmer", "--pop", "4000000000"], &["--pop 4000000000", "--episodes"]),
        (
            &["evolve", "--functions", "add", "--islands", "65536", "--pop", "2000", "--max-memory", "16G"],
            &["--pop 2000 × --islands 65536 (programs of up to 128 nodes) needs about", "GiB of host memory, more than the 16.0 GiB --max-memory"],
        ),
        (&["evolve", "--functions", "add", "--pop", "100000000", "--gens", "1", "--max-memory", "16G"], &["--pop 100000000", "16.0 GiB --max-memory"]),
        (&["evolve", "--grammar", "grammars/regression.bnf", "--pop", "300000", "--max-memory", "1G"], &["--genome-capacity"]),
        (&["control", "--env", "swimmer", "--episodes", "10000", "--pop", "100000", "--max-memory", "4G"], &["--episodes", "4.0 GiB --max-memory"]),
        (&["bench", "--genomes", "16777216", "--codons", "65536"], &["--genomes 16777216 × --codons 65536 needs about 4.0 TiB", "lower --genomes"]),
    ];
    for (args, needles) in cases {
        assert_one_line_error(&grove_cpu(args), needles);
    }
    // The same plan for an experiment file, and a run that fits goes ahead under the limit.
    let d = dir("plan");
    let big = d.join("big.ron");
    std::fs::write(&big, "Evolve(functions: \"add\", device: \"cpu\", engine: (pop_size: 100000000, generations: 1))").unwrap();
    assert_one_line_error(&grove_cpu(&["run", big.to_str().unwrap(), "--max-memory", "2G"]), &["--pop 100000000", "2.0 GiB --max-memory"]);
    let out = grove_cpu(&["evolve", "--functions", "add", "--pop", "50", "--gens", "1", "--max-memory", "64M", "-q"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = support::grove_run(&["map", "-g", "grammars/vladislavleva4.bnf", "--max-memory", "1M"], "", support::Device::Cpu, None);
    assert_one_line_error(&out, &["mapping in batches needs about", "--max-memory"]);
}

// A line of a megabyte was read whole whatever its length (`/dev/zero` grew without bound).
#[test]
fn map_refuses_a_line_longer_than_any_genome() {
    let long = dir("long_line").join("genomes.txt");
    std::fs::write(&long, "1".repeat(1 << 20)).unwrap();
    let mut map = support::grove_command(&["map", "-g", "grammars/vladislavleva4.bnf"], support::Device::Cpu, None);
    let out = map.stdin(std::fs::File::open(&long).unwrap()).output().unwrap();
    assert_one_line_error(&out, &["line 1 is longer than 720898 bytes"]);
}

// `--islands 65536` printed every island's best on one line.
#[test]
fn the_summary_shows_a_few_islands_and_counts_the_rest() {
    let out = grove_cpu(&["evolve", "--functions", "add", "--islands", "12", "--pop", "4", "--migrants", "1", "--gens", "1", "-q"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    let line = s.lines().find(|l| l.starts_with("islands ")).unwrap_or_else(|| panic!("no islands line: {s}"));
    let bests = line.split("best ").nth(1).unwrap();
    assert_eq!(bests.split_whitespace().filter(|w| w.parse::<f64>().is_ok()).count(), 8, "{line}");
    assert!(bests.ends_with("… (4 more in the report)"), "{line}");
}

// `rollout --actions` took NaN and inf (the data reader refuses them) and returned `-inf`.
#[test]
fn rollout_refuses_non_finite_actions_as_the_data_reader_does() {
    let d = dir("actions");
    for (body, needle) in [
        ("0.1,nan\n", "a.csv:1: column 2: `nan` is NaN: NaN and infinite values are not allowed"),
        ("left,right\n0,0\ninf,0\n", "a.csv:3: column 1: `inf` is infinite: NaN and infinite values are not allowed"),
        ("0.5,-1e39\n", "a.csv:1: column 2: `-1e39` is outside the f32 range (±3.4e38)"),
    ] {
        let p = d.join("a.csv");
        std::fs::write(&p, body).unwrap();
        assert_one_line_error(&grove_cpu(&["rollout", "--env", "swimmer", "--actions", p.to_str().unwrap()]), &[needle]);
    }
    // The data reader's words for the same cell.
    let data = d.join("d.csv");
    std::fs::write(&data, "x,y\n1,nan\n").unwrap();
    assert_one_line_error(&grove_cpu(&["evolve", "--functions", "add", "--data", data.to_str().unwrap()]), &["`nan` is NaN: NaN and infinite values are not allowed"]);
}

// `check` reported no problem for a grammar that `evolve` refuses as a syntax error.
#[test]
fn check_reads_productions_as_evolve_does() {
    let g = support::temp_file("unclosed.bnf", "<e> ::= <e> + <e> | x[:, 0] | (<e>\n");
    let evolve = grove_cpu(&["evolve", "--grammar", g.to_str().unwrap(), "--pop", "10", "--gens", "1"]);
    assert_eq!(evolve.status.code(), Some(1));
    let refusal = "unclosed.bnf:1:31: error: production of <e> cannot be read as an expression: expected `)`, found end";
    assert!(text(&evolve.stderr).contains(refusal), "{}", text(&evolve.stderr));
    let check = grove_cpu(&["check", g.to_str().unwrap()]);
    let (out, err) = (text(&check.stdout), text(&check.stderr));
    assert!(err.contains(&refusal.replace("error:", "warning:")), "{err}");
    assert!(out.contains("expressions no: 1 problem") && out.contains("warnings    1"), "{out}");
    // A grammar evolve takes, with named variables check cannot know, passes.
    let named = support::temp_file("named.bnf", "<e> ::= <e> * <e> | sin(<e>) | height | x[:, 3] | x2\n");
    let check = grove_cpu(&["check", named.to_str().unwrap()]);
    assert!(text(&check.stdout).contains("expressions yes"), "{}{}", text(&check.stdout), text(&check.stderr));
}

/// `rollout` bounds its steps as `control` bounds an episode's (4e9 steps ran until killed).
#[test]
fn rollout_steps_are_bounded() {
    for n in ["0", "4000000000"] {
        let needle = if n == "0" { "must be at least 1" } else { "must be at most 1000000" };
        assert_one_line_error(&grove_cpu(&["rollout", "--env", "swimmer", "--steps", n]), &["--steps", needle]);
    }
}
