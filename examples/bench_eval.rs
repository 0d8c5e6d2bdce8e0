//! Interpreter throughput on the W3-like regression workload (see `grove::backend::cpu::eval::bench_eval`):
//!
//! ```text
//! cargo run --release --example bench_eval -- [--population 1000] [--rows 100000]
//!     [--min-len 20] [--max-len 60] [--block 256] [--repeats 3] [--seed 1]
//!     [--functions add,sub,mul,div,sin,cos,log,exp] [--threads N]
//! ```

use std::process::ExitCode;

use grove::backend::cpu::eval::{bench_eval, EvalBench};
use grove::program::ops::parse_function_set;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    let mut cfg = EvalBench::default();
    let mut threads = 0usize;
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let (flag, value) = match pair {
            [f, v] => (f.as_str(), v.as_str()),
            [f] => return Err(format!("{f} needs a value")),
            _ => unreachable!(),
        };
        let num = || value.parse::<usize>().map_err(|e| format!("{flag} {value}: {e}"));
        match flag {
            "--population" => cfg.population = num()?,
            "--rows" => cfg.rows = num()?,
            "--min-len" => cfg.min_len = num()?,
            "--max-len" => cfg.max_len = num()?,
            "--block" => cfg.block = num()?,
            "--repeats" => cfg.repeats = num()?,
            "--seed" => cfg.seed = num()? as u64,
            "--threads" => threads = num()?,
            "--functions" => cfg.functions = parse_function_set(value)?,
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    if cfg.min_len == 0 || cfg.min_len > cfg.max_len {
        return Err("need 1 <= --min-len <= --max-len".into());
    }
    if threads > 0 {
        rayon::ThreadPoolBuilder::new().num_threads(threads).build_global().map_err(|e| e.to_string())?;
    }
    let r = bench_eval(&cfg);
    println!(
        "population {} · rows {} · lengths {}..={} (mean {:.1}) · block {} · threads {} · {} invalid",
        cfg.population, cfg.rows, cfg.min_len, cfg.max_len, r.mean_len, r.block, r.threads, r.invalid
    );
    println!(
        "per point: {} nodes, {} of them functions, {} instructions of the linear form",
        r.node_evals / cfg.rows as u64,
        r.function_nodes,
        r.instructions
    );
    println!(
        "{:.3e} node evaluations in {:.4} s (best of {}): {:.3e} node evaluations/s",
        r.node_evals as f64, r.seconds, cfg.repeats, r.node_evals_per_second
    );
    Ok(())
}
