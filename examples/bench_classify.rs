//! Classification fitness throughput (W5): a random population with one output per class
//! (EvoGP's settings: + − × ÷, constants −1, 0, 1, at most 64 nodes) scored on a built-in
//! data set by the CPU reference and, with `--gpu`, by `kernels/classify.cu`, which must agree
//! with it (the largest differences are printed).
//!
//! ```text
//! cargo run --release --example bench_classify -- [--data digits] [--population 5000]
//!     [--max-len 64] [--repeats 3] [--seed 1] [--gpu]
//! ```

use std::process::ExitCode;
use std::time::Instant;

use grove::data::classes::builtin_classes;
use grove::backend::cpu::classify::evaluate_classification;
use grove::program::fitness::ClassSums;
use grove::program::{Op, TreeSpec, init_population};

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
    let (mut data, mut p, mut max_len, mut repeats, mut seed, mut gpu) = ("digits".to_string(), 5000usize, 64usize, 3usize, 1u64, false);
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "--gpu" {
            gpu = true;
            continue;
        }
        let v = args.next().ok_or(format!("{flag} needs a value"))?;
        let num = |v: &str| v.parse::<usize>().map_err(|_| format!("{flag}: `{v}` is not a whole number"));
        match flag.as_str() {
            "--data" => data = v,
            "--population" => p = num(&v)?,
            "--max-len" => max_len = num(&v)?,
            "--repeats" => repeats = num(&v)?.max(1),
            "--seed" => seed = num(&v)? as u64,
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    let d = builtin_classes(&data).map_err(|e| format!("{e:#}"))?;
    let (n, k, f) = (d.data.n_rows, d.n_classes(), d.data.n_features);
    let spec = TreeSpec::new(vec![Op::Add, Op::Sub, Op::Mul, Op::Div], f as u32, max_len)
        .with_constants(&[-1.0, 0.0, 1.0])
        .with_p_const(0.2)
        .with_outputs(k, 0.05)
        .with_depth(2, 4);
    let pop = init_population(&spec, p, seed)?;
    let nodes: f64 = pop.len.iter().map(|&l| l as f64).sum();
    println!("{data}: {n} rows, {f} features, {k} classes; population {p}, mean length {:.1}", nodes / p as f64);
    let time = |what: &str, run: &mut dyn FnMut() -> Result<Vec<ClassSums>, String>| -> Result<Vec<ClassSums>, String> {
        let mut best = f64::INFINITY;
        let mut out = Vec::new();
        for _ in 0..repeats {
            let t = Instant::now();
            out = run()?;
            best = best.min(t.elapsed().as_secs_f64());
        }
        println!("{what:<5} {:>9.3} ms  {:>8.3} GPop/s (node evaluations × rows per second)", best * 1e3, nodes * n as f64 / best / 1e9);
        Ok(out)
    };
    let cpu = time("cpu", &mut || evaluate_classification(&pop, &d.data.x, &d.labels, n, k).map_err(|e| e.to_string()))?;
    if gpu {
        let e = grove::backend::cuda::CudaEngine::new().map_err(|e| e.to_string())?;
        let dev = e.upload_class_data(&d.data.x, &d.labels, n, f, k).map_err(|e| e.to_string())?;
        e.evaluate_classification(&pop, &dev).map_err(|e| e.to_string())?; // compile and warm up
        let g = time("cuda", &mut || e.evaluate_classification(&pop, &dev).map_err(|e| e.to_string()))?;
        let (mut max_ce, mut max_correct) = (0.0f64, 0u64);
        for (a, b) in g.iter().zip(&cpu) {
            max_ce = max_ce.max((a.ce - b.ce).abs() / b.ce.abs().max(1.0));
            max_correct = max_correct.max(a.correct.iter().zip(&b.correct).map(|(x, y)| x.abs_diff(*y)).sum());
        }
        println!("cuda vs cpu: largest relative cross-entropy difference {max_ce:.2e}, largest correct-count difference {max_correct}");
    }
    Ok(())
}
