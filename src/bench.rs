//! `grove bench`: throughput measurements (mapping; the CPU interpreter on W3) printed as a
//! table (or JSON). Timings here are for
//! reporting, never asserted in tests.

use std::process::ExitCode;
use std::time::Instant;

use anyhow::Result;
use rayon::prelude::*;

use crate::cli::BenchArgs;
use crate::genome::{MapConfig, Mapper};
use crate::grammar::{self, DatasetShape};
use crate::rng::{Purpose, Stream};

/// Runs the benchmarks named by `args` and prints their table.
pub fn run(args: &BenchArgs) -> Result<ExitCode> {
    let shape = DatasetShape { n_vars: Some(5), n_is: Some(5), n_os: Some(3) };
    let loaded = grammar::load(&args.grammar, &shape)?;
    let genomes = random_genomes(args.genomes, args.codons, 1);
    let config = MapConfig { max_wraps: args.wraps, ..MapConfig::default() };

    // One thread, then all threads; each best of three.
    let single = best_of(3, || {
        let mut mapper = Mapper::new(&loaded.table, config);
        genomes.chunks(args.codons).map(|g| mapper.map(g).used_codons as u64).sum::<u64>()
    });
    let threads = rayon::current_num_threads();
    let multi = best_of(3, || {
        genomes
            .par_chunks(args.codons)
            .with_min_len(256)
            .map_init(|| Mapper::new(&loaded.table, config), |m, g| m.map(g).used_codons as u64)
            .sum::<u64>()
    });
    let valid = {
        let mut mapper = Mapper::new(&loaded.table, config);
        genomes.chunks(args.codons).filter(|g| mapper.map(g).valid()).count()
    };
    let eval = crate::program::eval::bench_eval(&crate::program::eval::EvalBench::default());
    let rows = [("map, 1 thread", 1, single), ("map, all threads", threads, multi)];
    if args.json {
        let items: Vec<_> = rows
            .iter()
            .map(|(name, t, (codons, secs))| {
                serde_json::json!({"name": name, "threads": t, "codons": codons, "seconds": secs,
                                   "codons_per_second": *codons as f64 / secs})
            })
            .collect();
        println!("{}", serde_json::json!({"grammar": args.grammar, "genomes": args.genomes,
            "valid": valid, "results": items,
            "cpu_eval_w3": {"node_evaluations": eval.node_evals, "seconds": eval.seconds,
                            "node_evaluations_per_second": eval.node_evals_per_second, "threads": eval.threads}}));
    } else {
        println!(
            "grammar {} · {} genomes of {} codons · {} wraps · {:.1}% valid",
            args.grammar.display(),
            args.genomes,
            args.codons,
            args.wraps,
            100.0 * valid as f64 / args.genomes as f64
        );
        println!("{:<18} {:>7} {:>14} {:>10} {:>16}", "what", "threads", "codons read", "seconds", "codons/s");
        for (name, t, (codons, secs)) in rows {
            println!("{name:<18} {t:>7} {codons:>14} {secs:>10.4} {:>16.3e}", codons as f64 / secs);
        }
        println!();
        println!("CPU interpreter, W3 (1000 trees of 20..60 nodes, 100,000 points, + - * / sin cos log exp)");
        println!("{:<18} {:>7} {:>14} {:>10} {:>16}", "what", "threads", "node evals", "seconds", "node evals/s");
        println!(
            "{:<18} {:>7} {:>14} {:>10.4} {:>16.3e}",
            "evaluate", eval.threads, eval.node_evals, eval.seconds, eval.node_evals_per_second
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `n` genomes of `len` uniform codons in 0..=255, flattened `[n × len]`.
pub fn random_genomes(n: usize, len: usize, seed: u64) -> Vec<u32> {
    let mut out = Vec::with_capacity(n * len);
    for i in 0..n {
        let mut s = Stream::new(seed, 0, i as u32, Purpose::Bench);
        out.extend((0..len).map(|_| s.next_u32() & 0xff));
    }
    out
}

fn best_of(k: usize, mut f: impl FnMut() -> u64) -> (u64, f64) {
    let mut best = (0, f64::INFINITY);
    for _ in 0..k {
        let t = Instant::now();
        let work = std::hint::black_box(f());
        let secs = t.elapsed().as_secs_f64();
        if secs < best.1 {
            best = (work, secs);
        }
    }
    best
}
