//! `grove bench`: throughput measurements (mapping; the CPU interpreter on W3) printed as a
//! table (or JSON). Timings here are for
//! reporting, never asserted in tests.

use std::process::ExitCode;
use std::time::Instant;

use anyhow::Result;
use rayon::prelude::*;

use crate::genome::{MapConfig, Mapper};
use crate::program::Op;
use crate::grammar::{self, DatasetShape};
use crate::rng::{Purpose, Stream};
use crate::task::base::search::{MAX_GENOME, MAX_WRAPS, check_count};

/// The GPU benchmarks' function sets: W3's, W1's (Pagie-1's runs) and W4's arithmetic.
const W3: &[Op] = &[Op::Add, Op::Sub, Op::Mul, Op::Div, Op::Sin, Op::Cos, Op::Slog, Op::Exp];
const W1: &[Op] = &[Op::Add, Op::Sub, Op::Mul, Op::Div, Op::Sin, Op::Cos, Op::Tan];
const ARITH: &[Op] = &[Op::Add, Op::Sub, Op::Mul, Op::Div];

/// Runs the benchmarks named by `args` and prints their table.
pub fn run(args: &BenchArgs) -> Result<ExitCode> {
    args.check()?;
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
    let eval = crate::backend::cpu::eval::bench_eval(&crate::backend::cpu::eval::EvalBench::default());
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
    if args.gpu {
        gpu(args)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// One GPU benchmark workload: `population` random trees of `min_len..=max_len` nodes over
/// `rows` points of the sextic data set.
struct GpuWorkload {
    name: &'static str,
    population: usize,
    rows: usize,
    min_len: usize,
    max_len: usize,
    functions: &'static [crate::program::Op],
}

/// GPU evaluation throughput: GPop/s (nodes × points / seconds) for the anchors' workloads and
/// several launch shapes. Each figure is the median of 7 timed calls after 2 warm-up calls; a
/// call includes the host-side tree checks and packing and the population's copy to the device,
/// so it is what the evolution loop pays today (populations are not yet device-resident).
/// Beside the end-to-end figure, the medians of each stage of a call
/// ([`crate::backend::cuda::EvalTiming`]: host prep on the host clock, copies and kernels by
/// CUDA events) and the kernel-only GPop/s.
fn gpu(args: &BenchArgs) -> Result<()> {
    use crate::backend::cuda::{CudaEngine, EvalConfig, EvalTiming};
    let engine = CudaEngine::new().map_err(|e| anyhow::anyhow!("--gpu: {e}"))?;
    println!();
    println!("GPU {} (sm_{}{}, {} SMs)", engine.device_name(), engine.compute_capability().0, engine.compute_capability().1, engine.sm_count());
    let w = |name, population, rows, functions| GpuWorkload { name, population, rows, min_len: 20, max_len: 60, functions };
    let mut workloads = vec![
        w("W3 1000 x 100k", 1000, 100_000, W3),
        w("W1 5000 x 1024", 5000, 1024, W1),
        w("100k x 1024", 100_000, 1024, W1),
        w("W1-64 5000 x 64", 5000, 64, W1),
        w("W2 1M x 64", 1_000_000, 64, W1),
    ];
    if !args.quick {
        // Small data sets as real ones come (a few hundred rows), for the default shape there.
        for (name, rows) in [("W1-100 5000 x 100", 100), ("W1-128 5000 x 128", 128), ("W1-256 5000 x 256", 256), ("W1-512 5000 x 512", 512)] {
            workloads.push(w(name, 5000, rows, W1));
        }
        workloads.push(w("100k x 128", 100_000, 128, W1));
    }
    let shapes: Vec<(Option<u32>, Option<u32>)> = if args.quick {
        vec![(None, None), (Some(128), Some(8)), (Some(256), Some(4))]
    } else {
        let mut v = vec![(None, None)];
        // 32 threads: a warp per tree, as for tiny data (W2's 64 rows at K = 2).
        for t in [32, 64, 128, 256] {
            for k in [1, 2, 4, 8] {
                v.push((Some(t), Some(k)));
            }
        }
        v
    };
    println!(
        "{:<18} {:>7} {:>4} {:>10} {:>10} {:>9} {:>9} {:>9} {:>9} {:>11} {:>3}",
        "workload", "threads", "K", "median s", "GPop/s", "prep ms", "h2d ms", "kern ms", "d2h ms", "kern GPop/s", "pin"
    );
    let part = |p: GpuPart| args.gpu_part.is_empty() || args.gpu_part.contains(&p);
    let mut rows = Vec::new();
    for wl in workloads.iter().filter(|_| part(GpuPart::Eval)) {
        let (p, n) = (wl.population, wl.rows);
        let pop = crate::backend::cpu::eval::bench_population(7, p, wl.min_len, wl.max_len, wl.functions);
        let (x, y) = crate::backend::cpu::eval::bench_sextic(3, n);
        let data = engine.upload_dataset(&x, &y, n, 1)?;
        let nodes: f64 = pop.len.iter().map(|&l| l as f64).sum();
        let name = wl.name;
        for &(t, k) in &shapes {
            let cfg = EvalConfig { threads_per_block: t, points_per_thread: k, tile_points: None, poison_outputs: false };
            let mut calls: Vec<(f64, EvalTiming)> = Vec::new();
            let mut failed = None;
            for rep in 0..9 {
                let t0 = Instant::now();
                match engine.evaluate_regression_timed(&pop, &data, &cfg) {
                    Ok((sums, timing)) => {
                        std::hint::black_box(sums);
                        if rep >= 2 {
                            calls.push((t0.elapsed().as_secs_f64(), timing));
                        }
                    }
                    Err(e) => {
                        failed = Some(e.to_string());
                        break;
                    }
                }
            }
            let label = |o: Option<u32>| o.map_or("auto".to_string(), |v| v.to_string());
            if let Some(e) = failed {
                println!("{name:<18} {:>7} {:>4} {:>10} {e}", label(t), label(k), "-");
                continue;
            }
            let median = |f: &dyn Fn(&(f64, EvalTiming)) -> f64| median(calls.iter().map(f).collect());
            let med = median(&|c| c.0);
            let prep = median(&|c| c.1.host_prep_s);
            let h2d = median(&|c| c.1.h2d_s);
            let kern = median(&|c| c.1.kernels_s);
            let d2h = median(&|c| c.1.d2h_s);
            let pinned = calls.iter().all(|c| c.1.pinned);
            let gpops = nodes * n as f64 / med;
            let kern_gpops = nodes * n as f64 / kern;
            println!(
                "{name:<18} {:>7} {:>4} {med:>10.6} {gpops:>10.3e} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {kern_gpops:>11.3e} {:>3}",
                label(t),
                label(k),
                prep * 1e3,
                h2d * 1e3,
                kern * 1e3,
                d2h * 1e3,
                if pinned { "y" } else { "n" }
            );
            rows.push(serde_json::json!({"workload": name, "threads": t, "k": k, "seconds": med, "gpops": gpops,
                "host_prep_s": prep, "h2d_s": h2d, "kernels_s": kern, "d2h_s": d2h, "kernel_gpops": kern_gpops,
                "h2d_bytes": calls[0].1.h2d_bytes, "pinned": pinned}));
        }
    }
    let map_rows = if part(GpuPart::Map) { gpu_map(&engine, args.quick)? } else { Vec::new() };
    let breed_rows = if part(GpuPart::Breed) { gpu_breed(&engine, args.quick)? } else { Vec::new() };
    let generation_rows = if part(GpuPart::Generations) { gpu_generations(args.quick)? } else { Vec::new() };
    let run_rows = if part(GpuPart::Runs) { gpu_runs(args.quick)? } else { Vec::new() };
    let fit_rows = if part(GpuPart::Fit) { gpu_fit(&engine, args.quick)? } else { Vec::new() };
    let episode_rows = if part(GpuPart::Episodes) { gpu_episodes(&engine, args.quick)? } else { Vec::new() };
    if args.json {
        println!(
            "{}",
            serde_json::json!({"gpu": engine.device_name(), "results": rows, "map": map_rows, "breed": breed_rows,
                "generations": generation_rows, "runs": run_rows, "fit": fit_rows, "episodes": episode_rows})
        );
    }
    Ok(())
}

/// Control episodes at small batch (issue 57): Walker2d (Brax profile), 512 linear policies
/// (`--policy linear`'s programs, random weights, unit normaliser) × 4 episodes = 2048 episodes
/// of 1000 control steps, every step played (termination ignored, so a launch lasts 1000 steps of
/// its slowest episode), with the engine's choice of lanes an episode and with each width of
/// [`crate::backend::cuda::control::EPISODE_LANES`]: the median of 3 timed calls after a
/// warm-up (which compiles the width's module), as wall time per control step of the batch
/// (µs) and env steps/s, and a hash of every episode's bits, equal across widths.
fn gpu_episodes(engine: &crate::backend::cuda::CudaEngine, quick: bool) -> Result<Vec<serde_json::Value>> {
    use crate::backend::cpu::control::ControlRun;
    use crate::backend::cuda::control::EPISODE_LANES;
    use crate::task::control::linear::{LinearPolicy, Normaliser};
    let (env, policies, episodes, steps) = ("walker2d", 512usize, 4usize, 1000usize);
    let m = crate::sim::Model::load(env, Some("brax"))?;
    let (nu, n) = (m.nu(), m.obs_size);
    let norm = Normaliser { mean: vec![0.0; n], std: vec![1.0; n] };
    let trees: Vec<_> = crate::evolve::ars::directions(57, 0, policies, nu * n)
        .into_iter()
        .map(|w| LinearPolicy { weights: w.iter().map(|x| 0.1 * x).collect(), norm: norm.clone(), nu }.tree())
        .collect();
    let width = trees.iter().map(Vec::len).max().unwrap_or(1);
    let mut pop = crate::program::Population::new(policies, width, nu);
    for (r, t) in trees.iter().enumerate() {
        pop.set_tree(r, t).map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    let run = ControlRun { episodes, steps, seed: 57, generation: 0, noise: true, ignore_termination: true };
    let warm = ControlRun { steps: 2, ..run };
    println!();
    println!("{env} (brax): {policies} linear policies × {episodes} episodes × {steps} steps, termination ignored");
    println!("{:<8} {:>6} {:>10} {:>10} {:>14} {:>18}", "lanes", "built", "median s", "µs/step", "env steps/s", "bits");
    let widths: Vec<Option<u32>> = std::iter::once(None).chain(EPISODE_LANES.iter().map(|&g| Some(g))).collect();
    let mut rows = Vec::new();
    let mut first_bits = None;
    for g in widths {
        engine.set_episode_lanes(g)?;
        let name = g.map_or("auto".to_string(), |g| g.to_string());
        if let Err(e) = engine.control_returns(&pop, &m, &warm) {
            println!("{name:<8} {e}");
            rows.push(serde_json::json!({"lanes": name, "error": e.to_string()}));
            continue;
        }
        let (mut times, mut last) = (Vec::new(), None);
        for _ in 0..if quick { 1 } else { 3 } {
            let t = Instant::now();
            last = Some(engine.control_returns(&pop, &m, &run)?);
            times.push(t.elapsed().as_secs_f64());
        }
        let Some(out) = last else { continue };
        let secs = median(times);
        let bits = out.episodes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, e| {
            [e.ret.to_bits(), e.steps as u64, e.valid as u64].iter().fold(h, |h, &x| (h ^ x).wrapping_mul(0x0100_0000_01b3))
        });
        let same = *first_bits.get_or_insert(bits) == bits;
        let (us, rate) = (secs * 1e6 / steps as f64, out.env_steps() as f64 / secs);
        println!("{name:<8} {:>6} {secs:>10.4} {us:>10.1} {rate:>14.3e} {bits:>16x}{}", out.lanes, if same { "" } else { " DIFFERS" });
        rows.push(serde_json::json!({"lanes": name, "built": out.lanes, "seconds": secs, "us_per_step": us, "env_steps_per_second": rate,
            "bits": format!("{bits:016x}"), "same_bits": same}));
    }
    engine.set_episode_lanes(None)?;
    Ok(rows)
}

/// GPU selection and breeding: P random trees (ramped half-and-half, depths 2..=6, L = 128,
/// W1's functions, constants in [-1, 1)), a length-based fitness; one generation's tournament
/// (k = 3, 2P slots) and `breed_trees` (crossover 0.9 over both kinds, mutation 0.5 over all
/// eight) on device buffers, and `init_trees`, each the median of 7 synchronised launches;
/// against the CPU's `breed` (rayon, every core) on the same parents and pairs.
fn gpu_breed(engine: &crate::backend::cuda::CudaEngine, quick: bool) -> Result<Vec<serde_json::Value>> {
    use crate::program::{BreedConfig, Crossover, Mutation, Population, TreeSpec, VaryConfig, breed, init_population};
    let spec = TreeSpec::new(W1.to_vec(), 3, 128).with_const_range(-1.0, 1.0).with_depth(2, 6);
    let vary = VaryConfig::new(spec.clone());
    let mix = BreedConfig {
        p_crossover: 0.9,
        crossovers: vec![(Crossover::OnePoint, 1.0), (Crossover::LeafBiased, 1.0)],
        p_mutation: 0.5,
        mutations: Mutation::ALL.iter().map(|m| (*m, 1.0)).collect(),
    };
    let sizes: &[usize] = if quick { &[10_000] } else { &[10_000, 100_000] };
    let sync = || engine.stream().synchronize().map_err(|e| anyhow::anyhow!("synchronising: {e:?}"));
    println!();
    println!(
        "{:<20} {:>8} {:>12} {:>12} {:>12} {:>12} {:>9} {:>10}",
        "workload", "P", "select ms", "breed ms", "init ms", "cpu breed ms", "speedup", "oversized"
    );
    let mut rows = Vec::new();
    for &p in sizes {
        let pop = init_population(&spec, p, 1).map_err(|e| anyhow::anyhow!("{e}"))?;
        let fit: Vec<f64> = pop.len.iter().map(|&l| (l as f64 - 30.0).abs()).collect();
        let parents = engine.upload_population(&pop)?;
        let mut children = engine.alloc_population(p, spec.max_len, 0)?;
        let dfit = engine.upload_fitness(&fit)?;
        let (mut select_s, mut breed_s, mut init_s) = (Vec::new(), Vec::new(), Vec::new());
        let mut last = None;
        for rep in 0..8 {
            sync()?;
            let t = Instant::now();
            let winners = engine.select_tournament(&dfit, None, 2 * p, 3, false, 1, rep + 1)?;
            sync()?;
            let ts = t.elapsed().as_secs_f64();
            let t = Instant::now();
            let bred = engine.breed_trees(&parents, &winners, &mut children, 1, rep + 1, &vary, &mix)?;
            sync()?;
            let tb = t.elapsed().as_secs_f64();
            let t = Instant::now();
            std::hint::black_box(engine.init_trees(&spec, p, rep as u64)?);
            sync()?;
            let ti = t.elapsed().as_secs_f64();
            if rep > 0 {
                select_s.push(ts);
                breed_s.push(tb);
                init_s.push(ti);
            }
            last = Some((winners, bred));
        }
        let (winners, bred) = last.expect("eight repetitions");
        let oversized = engine.bred_counts(&bred)?.oversized();
        let flat = engine.download_indices(&winners)?;
        let pairs: Vec<[u32; 2]> = flat.chunks(2).map(|c| [c[0], c[1]]).collect();
        let mut cpu_s = Vec::new();
        for _ in 0..3 {
            let mut next = Population::new(p, spec.max_len, 0);
            let t = Instant::now();
            breed(&pop, &pairs, &mut next, 1, 8, &vary, &mix).map_err(|e| anyhow::anyhow!("{e}"))?;
            cpu_s.push(t.elapsed().as_secs_f64());
        }
        let (sel, br, ini, cpu) = (median(select_s), median(breed_s), median(init_s), median(cpu_s));
        let name = "breed L128 W1";
        println!(
            "{name:<20} {p:>8} {:>12.3} {:>12.3} {:>12.3} {:>12.3} {:>8.1}x {oversized:>10}",
            sel * 1e3,
            br * 1e3,
            ini * 1e3,
            cpu * 1e3,
            cpu / br
        );
        rows.push(serde_json::json!({"workload": name, "population": p, "select_s": sel, "breed_s": br, "init_s": ini,
            "cpu_breed_s": cpu, "oversized": oversized}));
    }
    Ok(rows)
}

/// GPU mapping throughput (W7): genomes of 128 uniform codons in 0..=255 on
/// `grammars/regression.bnf` and `grammars/ge-paper.bnf`, 10^5 and 10^6 genomes, eager codons,
/// no wraps. Prints codons read per second by the kernel alone (median of 7 launches) and by
/// whole `map_genomes` calls (with the copies); the kernel target is ≥ 1e9 codons/s.
fn gpu_map(engine: &crate::backend::cuda::CudaEngine, quick: bool) -> Result<Vec<serde_json::Value>> {
    use crate::genome::Genomes;
    let shape = DatasetShape { n_vars: Some(5), n_is: Some(5), n_os: Some(3) };
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let sizes: &[usize] = if quick { &[100_000] } else { &[100_000, 1_000_000] };
    println!();
    println!(
        "{:<28} {:>9} {:>8} {:>7} {:>7} {:>12} {:>14} {:>14}",
        "workload", "genomes", "table", "threads", "valid", "kernel s", "codons/s", "with copies/s"
    );
    let mut rows = Vec::new();
    for grammar_file in ["regression.bnf", "ge-paper.bnf"] {
        let loaded = grammar::load(&root.join("grammars").join(grammar_file), &shape)?;
        for &n in sizes {
            let codons = 128;
            let genomes = Genomes { capacity: codons, codons: random_genomes(n, codons, 11), len: vec![codons as u32; n] };
            for (shared, threads) in [(true, 128), (true, 256), (false, 128)] {
                let launch = crate::backend::cuda::MapLaunch { threads_per_block: threads, shared_table: shared };
                let b = crate::backend::cuda::bench_map(engine, &loaded.table, &genomes, &MapConfig::default(), 256, &launch, 7)?;
                let name = format!("map W7 grammar {grammar_file}");
                let where_ = if shared { "shared" } else { "constant" };
                println!(
                    "{name:<28} {n:>9} {where_:>8} {threads:>7} {:>6.1}% {:>12.6} {:>14.3e} {:>14.3e}",
                    100.0 * b.valid_fraction,
                    b.kernel_seconds,
                    b.kernel_codons_per_second(),
                    b.end_to_end_codons_per_second()
                );
                rows.push(serde_json::json!({"workload": name, "genomes": n, "table": where_, "threads": threads,
                    "codons_read": b.codons_read, "valid_fraction": b.valid_fraction,
                    "kernel_seconds": b.kernel_seconds, "codons_per_second": b.kernel_codons_per_second(),
                    "end_to_end_codons_per_second": b.end_to_end_codons_per_second()}));
            }
        }
    }
    Ok(rows)
}

/// Whole generations in the device loop, GE beside tree GP at the same population: W7
/// (`builtin:quartic`, 128 points; `grammars/ge-paper.bnf`, random 128-codon genomes, eager,
/// tournament 3, crossover 0.9, int-flip 5 %, one elite, plain MSE) against tree GP over
/// `add,sub,mul`, populations 10³ to 10⁶; and GE with `grammars/regression.bnf` on Pagie-1 at
/// W1's size (5000, scaled MSE). Each row: the median seconds of the generations after the
/// first, the mean program size, and for GE the mapping kernel alone (`map_trees` of the first
/// population, median of 5 launches) in codons read per second.
fn gpu_generations(quick: bool) -> Result<Vec<serde_json::Value>> {
    use crate::backend::{Backend, DeviceChoice, Gpus};
    use crate::evolve::{EngineConfig, GrammarRep, Representation, device};
    use crate::genome::{InitConfig, InitMethod};
    use crate::grammar::template::{DeviceTables, Vars, compile};
    use crate::task::regression::{Regression, RegressionConfig, TreeSettings};
    let backend = Backend::open(DeviceChoice::Cuda, &Gpus::All)?.backend;
    let Backend::Cuda(engine) = &backend else { anyhow::bail!("--gpu: no CUDA backend") };
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    println!();
    println!(
        "{:<26} {:>8} {:>5} {:>11} {:>9} {:>11} {:>9} {:>8} {:>13}",
        "generation", "P", "gens", "GE ms/gen", "GE size", "tree ms/gen", "tree size", "GE/tree", "map codons/s"
    );
    let sizes: &[usize] = if quick { &[1000, 100_000] } else { &[1000, 10_000, 100_000, 1_000_000] };
    let mut cases: Vec<(&str, &str, usize, bool)> = sizes.iter().map(|&p| ("W7 ge-paper quartic", "ge-paper.bnf", p, false)).collect();
    cases.push(("GE regression.bnf Pagie-1", "regression.bnf", 5000, true));
    let mut rows = Vec::new();
    for (name, file, p, pagie) in cases {
        let problem = crate::data::DataSource::parse(if pagie { "builtin:pagie1" } else { "builtin:quartic" })?.load(None)?;
        let train = &problem.train;
        let shape = DatasetShape { n_vars: Some(train.n_features as u32), n_is: Some(train.n_features as u32), n_os: Some(1) };
        let loaded = grammar::load(&root.join("grammars").join(file), &shape)?;
        let tpl = compile(&loaded.grammar, &loaded.table, &Vars { names: train.names.clone(), n_outputs: 0 })?;
        let gens = if p >= 1_000_000 { 6 } else { 12 };
        let cfg = EngineConfig { pop_size: p, generations: gens, seed: 1, tournament: 3, elite: 1, max_len: 256, ..Default::default() };
        let init = if pagie { InitConfig::default() } else { InitConfig { method: InitMethod::Random, length: 128, ..InitConfig::default() } };
        let map = MapConfig { max_depth: if pagie { 17 } else { u32::MAX }, ..MapConfig::default() };
        let vary = crate::genome::vary::GeVaryConfig { crossover: 0.9, mutation: 0.05, ..Default::default() };
        let rep = GrammarRep { table: &loaded.table, templates: &tpl, map, init, vary, genome_capacity: 256 };
        let config = RegressionConfig { linear_scaling: pagie, ..RegressionConfig::default() };
        let data = backend.regression_data(&train.x, &train.y, train.n_rows, train.n_features)?;
        let task = Regression { backend: &backend, data, config, outputs: 1, joint: None, rows: None, loss: None, fitness_fn: None };
        let d = crate::evolve::Fitness::device_task(&task).ok_or_else(|| anyhow::anyhow!("the data is not on the GPU"))?;
        let steady = |h: &[crate::evolve::GenerationStats]| median(h[1..].iter().map(|s| s.seconds).collect());
        let size = |h: &[crate::evolve::GenerationStats]| h.iter().map(|s| s.mean_size).sum::<f64>() / h.len() as f64;
        let one = crate::evolve::IslandConfig::single();
        let quiet = |_: &crate::evolve::GenerationStats, _: &crate::evolve::Best| {};
        let (ge, _) = device::run(&cfg, &one, Representation::Grammar(&rep), &[d], None, &mut { quiet })?;
        let functions = if pagie { "add,sub,mul,div,sin,cos,tan" } else { "add,sub,mul" };
        let trees = TreeSettings::default().rep(functions, train.n_features, cfg.max_len)?;
        let (tree, _) = device::run(&cfg, &one, Representation::Trees(&trees), &[d], None, &mut { quiet })?;
        // The mapping kernel alone, on the first population's genomes.
        let genomes = crate::genome::init::init_genomes(&loaded.table, &init, map.codons, p, 256, 1);
        let tables = DeviceTables::new(&loaded.table, &tpl).map_err(|m| anyhow::anyhow!("{m}"))?;
        let dev = engine.upload_genomes(&genomes)?;
        let mut scratch = engine.alloc_map_trees(p, rep.max_derivation())?;
        let mut pop = engine.alloc_population(p, cfg.max_len, 0)?;
        let used: u64 = {
            engine.map_trees(&tables, &dev, &map, Some(&mut pop), &mut scratch, &Default::default())?;
            engine.stream().clone_dtoh(scratch.used()).map_err(|e| anyhow::anyhow!("{e:?}"))?.iter().map(|&u| u as u64).sum()
        };
        // The kernel alone under three launch shapes; the row shows the default's.
        let mut rates = Vec::new();
        for (shared, threads) in [(true, 128), (true, 256), (false, 128), (true, 64)] {
            let launch = crate::backend::cuda::MapLaunch { threads_per_block: threads, shared_table: shared };
            let mut times = Vec::new();
            for rep_i in 0..6 {
                engine.stream().synchronize().map_err(|e| anyhow::anyhow!("{e:?}"))?;
                let t = Instant::now();
                engine.map_trees(&tables, &dev, &map, Some(&mut pop), &mut scratch, &launch)?;
                engine.stream().synchronize().map_err(|e| anyhow::anyhow!("{e:?}"))?;
                if rep_i > 0 {
                    times.push(t.elapsed().as_secs_f64());
                }
            }
            rates.push(serde_json::json!({"shared_table": shared, "threads": threads, "codons_per_second": used as f64 / median(times)}));
        }
        let map_rate = rates[0]["codons_per_second"].as_f64().unwrap_or(f64::NAN);
        let shapes: Vec<String> = rates.iter().skip(1).map(|r| format!("{}{}: {:.2e}", if r["shared_table"] == true { "s" } else { "c" }, r["threads"], r["codons_per_second"].as_f64().unwrap_or(f64::NAN))).collect();
        eprintln!("  map_trees launch shapes (s = table in shared memory, c = constant; threads): {}", shapes.join(", "));
        let (g_ms, t_ms) = (steady(&ge.history) * 1e3, steady(&tree.history) * 1e3);
        println!(
            "{name:<26} {p:>8} {gens:>5} {g_ms:>11.3} {:>9.1} {t_ms:>11.3} {:>9.1} {:>7.2}x {map_rate:>13.3e}",
            size(&ge.history),
            size(&tree.history),
            g_ms / t_ms
        );
        rows.push(serde_json::json!({"workload": name, "population": p, "generations": gens, "ge_ms_per_gen": g_ms,
            "ge_mean_size": size(&ge.history), "tree_ms_per_gen": t_ms, "tree_mean_size": size(&tree.history),
            "ge_best": ge.best.fitness, "tree_best": tree.best.fitness, "map_codons_per_second": map_rate, "map_shapes": rates}));
    }
    Ok(rows)
}

/// A constant-fitting pass timed against one evaluation of the same programs (issue 30's
/// "fitting round"): `n` random trees of 20..60 nodes (half their leaves constants in
/// [−2, 2), `x0` the other half) over a built-in data set, the GPU's fit
/// (`fit_constants_on_device`, no linear scaling) with 1 and with 10 Levenberg–Marquardt steps
/// on a fresh copy of the trees each time, and the regression kernels over the same trees.
/// Without linear scaling a fit of `S` steps makes `1 + S` passes over the rows (the start, then
/// one a step; a step whose solve fails makes none), so a pass costs (t₁₀ − t₁) / 9 or more,
/// the fixed costs (decoding the trees, the launch, the results' copy) cancelling. Each time is
/// the median of 5 (fits) or 7 (the evaluation's kernels, CUDA events) calls after a warm-up.
fn gpu_fit(engine: &crate::backend::cuda::CudaEngine, quick: bool) -> Result<Vec<serde_json::Value>> {
    use crate::backend::cpu::fit::FitConfig;
    use crate::backend::cuda::EvalConfig;
    // (name, data, trees: a fifth of the population the workload fits from, functions)
    let mut cases: Vec<(&str, &str, usize, &[Op])> = vec![("W1 (a fifth of 5000)", "builtin:pagie1", 1000, W1)];
    if !quick {
        cases.push(("10^5 (a fifth)", "builtin:pagie1", 20_000, W1));
        cases.push(("W4 (a fifth of 50)", "builtin:pagie1:16777216", 10, ARITH));
    }
    let sync = || engine.stream().synchronize().map_err(|e| anyhow::anyhow!("{e:?}"));
    println!();
    println!(
        "{:<22} {:>6} {:>9} {:>7} {:>11} {:>11} {:>11} {:>11} {:>9} {:>9}",
        "fitting", "trees", "rows", "consts", "eval ms", "fit1 ms", "fit10 ms", "pass ms", "pass/eval", "fit/eval"
    );
    let mut rows = Vec::new();
    for (name, source, n, functions) in cases {
        let problem = crate::data::DataSource::parse(source)?.load(None)?;
        let train = &problem.train;
        let data = engine.upload_dataset(&train.x, &train.y, train.n_rows, train.n_features)?;
        let pop = crate::backend::cpu::eval::bench_population(13, n, 20, 60, functions);
        let idx = engine.upload_indices(&(0..n as u32).collect::<Vec<_>>(), n)?;
        let mut eval = Vec::new();
        for rep in 0..9 {
            let (sums, timing) = engine.evaluate_regression_timed(&pop, &data, &EvalConfig::default())?;
            std::hint::black_box(sums);
            if rep >= 2 {
                eval.push(timing.kernels_s);
            }
        }
        let eval_s = median(eval);
        let fit = |steps: u32| -> Result<(f64, Vec<crate::backend::cpu::fit::FitResult>)> {
            let (mut times, mut last) = (Vec::new(), Vec::new());
            for rep in 0..6 {
                let mut dev = engine.upload_population(&pop)?;
                sync()?;
                let t = Instant::now();
                last = engine.fit_constants_on_device(&mut dev, &idx, &data, FitConfig { steps, linear_scaling: false })?;
                sync()?;
                if rep > 0 {
                    times.push(t.elapsed().as_secs_f64());
                }
            }
            Ok((median(times), last))
        };
        let (fit1, _) = fit(1)?;
        let (fit10, res) = fit(10)?;
        let consts = res.iter().map(|r| r.constants as f64).sum::<f64>() / n as f64;
        let pass = (fit10 - fit1) / 9.0;
        println!(
            "{name:<22} {n:>6} {:>9} {consts:>7.2} {:>11.4} {:>11.4} {:>11.4} {:>11.4} {:>8.2}x {:>8.1}x",
            train.n_rows,
            eval_s * 1e3,
            fit1 * 1e3,
            fit10 * 1e3,
            pass * 1e3,
            pass / eval_s,
            fit10 / eval_s
        );
        rows.push(serde_json::json!({"workload": name, "trees": n, "rows": train.n_rows, "mean_constants": consts,
            "eval_kernels_s": eval_s, "fit1_s": fit1, "fit10_s": fit10, "pass_s": pass,
            "pass_over_eval": pass / eval_s, "fit10_over_eval": fit10 / eval_s}));
    }
    Ok(rows)
}

/// Whole runs on the GPU, as `grove evolve --device cuda` makes them with its defaults (constants
/// fitted every 5 generations): W1 (Pagie-1, 5000 × 100), W2 (64 rows, 10^6 × 10; not with
/// `quick`) and W4 (2^24 rows, 50 × 50), each a table row of [`whole_run`]'s split.
fn gpu_runs(quick: bool) -> Result<Vec<serde_json::Value>> {
    let w = |data: &str, functions: &str, pop: usize, gens: usize| {
        serde_json::json!({"data": data, "functions": functions, "select": "train", "device": "cuda",
            "engine": {"pop_size": pop, "generations": gens, "bloat": "none"}, "regression": {"linear_scaling": false}})
    };
    let mut runs = vec![("W1", w("builtin:pagie1", "add,sub,mul,div,sin,cos,tan", 5000, 100))];
    if !quick {
        runs.push(("W2", w("builtin:pagie1:64", "add,sub,mul,div,sin,cos,tan", 1_000_000, 10)));
    }
    runs.push(("W4", w("builtin:pagie1:16777216", "add,sub,mul,div", 50, 50)));
    println!();
    println!(
        "{:<6} {:>9} {:>9} {:>9} {:>9} {:>13} {:>13} {:>11} {:>9}",
        "run", "wall s", "setup s", "kernels s", "search s", "fitting gens", "other gens", "gen median", "final s"
    );
    let mut rows = Vec::new();
    for (name, given) in runs {
        // A first run compiles (or loads) the kernels, so the one timed shows a warm start.
        whole_run(&given)?;
        let r = whole_run(&given)?;
        let f = |k: &str| r[k].as_f64().unwrap_or(f64::NAN);
        println!(
            "{name:<6} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>6} {:>6.3} {:>6} {:>6.3} {:>11.5} {:>9.3}",
            f("seconds"),
            f("setup_seconds"),
            f("kernel_seconds"),
            f("search_seconds"),
            r["fitting_generations"],
            f("fitting_seconds"),
            r["other_generations"],
            f("other_seconds"),
            f("median_generation_seconds"),
            f("final_seconds")
        );
        let mut row = r;
        row["run"] = serde_json::json!(name);
        rows.push(row);
    }
    Ok(rows)
}

/// One `grove evolve` run of the experiment `given` (its fields over the command's defaults),
/// quietly: the report's wall time and split (`seconds`, `setup_seconds`, `kernel_seconds`,
/// `search_seconds`, `final_seconds`, `median_generation_seconds`), with the generations that
/// fitted constants apart from the others (`fitting_generations` and their `fitting_seconds`,
/// `other_generations`, `other_seconds`), the best training fitness, and the experiment.
pub fn whole_run(given: &serde_json::Value) -> Result<serde_json::Value> {
    let exp = crate::task::runner::experiment::Experiment::from_parts("evolve", given.clone(), "grove bench")?;
    let opts = crate::task::base::options::RunOptions { quiet: true, ..Default::default() };
    let result = crate::task::runner::run_experiment(&exp, &opts, None)?;
    let report = &result.report;
    let timing = &report["timing"];
    let fitting: crate::evolve::ConstantFitting = serde_json::from_value(report["settings"]["engine"]["constants"].clone())?;
    let (mut fit_n, mut fit_s, mut other_n, mut other_s) = (0usize, 0.0f64, 0usize, 0.0f64);
    for g in report["generations"].as_array().map(Vec::as_slice).unwrap_or_default() {
        let (gen, seconds) = (g["generation"].as_u64().unwrap_or(0) as usize, g["seconds"].as_f64().unwrap_or(0.0));
        if fitting.at(gen) {
            (fit_n, fit_s) = (fit_n + 1, fit_s + seconds);
        } else {
            (other_n, other_s) = (other_n + 1, other_s + seconds);
        }
    }
    let keys = ["seconds", "setup_seconds", "kernel_seconds", "search_seconds", "final_seconds", "median_generation_seconds"];
    let mut out = serde_json::json!({"fitting_generations": fit_n, "fitting_seconds": fit_s, "other_generations": other_n,
        "other_seconds": other_s, "best": report["best"]["fitness"].clone(), "experiment": exp.settings_json()});
    for k in keys {
        out[k] = timing[k].clone();
    }
    Ok(out)
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

/// The middle value of `v` (the upper of the two middle ones for an even count).
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
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

/// `grove bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// Grammar for the mapping benchmark.
    #[arg(long, default_value = "grammars/vladislavleva4.bnf")]
    pub grammar: std::path::PathBuf,
    /// Genomes to map.
    #[arg(long, default_value_t = 200_000, help = format!("Genomes to map, 1 to {MAX_BENCH_GENOMES}"))]
    pub genomes: usize,
    /// Codons per genome.
    #[arg(long, default_value_t = 128, help = format!("Codons per genome, 1 to {MAX_GENOME}"))]
    pub codons: usize,
    /// Wraps allowed.
    #[arg(long, default_value_t = 2, help = format!("Wraps allowed, at most {MAX_WRAPS}"))]
    pub wraps: u32,
    /// The most memory the benchmark may use (e.g. 2G, 512M; default: what the machine has
    /// available).
    #[arg(long, value_name = "SIZE", value_parser = crate::task::base::plan::parse_size, env = "GROVE_MAX_MEMORY")]
    pub max_memory: Option<u64>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also benchmark the CUDA evaluator (needs a GPU): GPop/s per workload and launch shape.
    #[arg(long)]
    pub gpu: bool,
    /// With --gpu: only the fastest-looking launch shapes and fewer sizes (quicker).
    #[arg(long)]
    pub quick: bool,
    /// With --gpu: only these parts (evaluation, mapping, breeding, whole generations, runs,
    /// constant fitting, control episodes); all by default.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub gpu_part: Vec<GpuPart>,
}

/// Most genomes `grove bench` maps.
pub const MAX_BENCH_GENOMES: usize = 1 << 24;

impl BenchArgs {
    /// Checks the counts (each message names the flag and its bound) and the memory they need.
    pub fn check(&self) -> Result<()> {
        check_count("--genomes", self.genomes, 1, MAX_BENCH_GENOMES)?;
        check_count("--codons", self.codons, 1, MAX_GENOME)?;
        anyhow::ensure!(self.wraps <= MAX_WRAPS, "--wraps must be at most {MAX_WRAPS}, got {}", self.wraps);
        anyhow::ensure!(self.gpu || self.gpu_part.is_empty(), "--gpu-part chooses parts of --gpu: add --gpu");
        anyhow::ensure!(self.gpu || !self.quick, "--quick shortens --gpu: add --gpu");
        // The genomes, and the CPU interpreter's W3 (100,000 points of 8 features, 1000 trees).
        let genomes = (self.genomes as u64).saturating_mul(self.codons as u64).saturating_mul(4);
        let need = crate::task::base::plan::Need { host: genomes.saturating_add(8 << 20), device: 0 };
        let what = format!("--genomes {} × --codons {}", self.genomes, self.codons);
        crate::task::base::plan::check(&need, &what, "lower --genomes or --codons", self.max_memory, None)
    }
}

/// A part of `grove bench --gpu`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum GpuPart {
    /// The evaluator's GPop/s per workload and launch shape.
    Eval,
    /// Genome mapping throughput (W7).
    Map,
    /// Selection and tree breeding.
    Breed,
    /// Whole device-loop generations, GE beside tree GP.
    Generations,
    /// Whole runs as `grove evolve` makes them (W1, W2, W4 at the GPU's defaults): wall time and
    /// its split.
    Runs,
    /// A constant-fitting pass against one evaluation of the same programs.
    Fit,
    /// Control episodes at small batch: Walker2d, 2048 episodes × 1000 steps at every width of
    /// lanes an episode, µs per step.
    Episodes,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_whole_run_splits_its_time_and_counts_the_fitting_generations() {
        let given = serde_json::json!({"data": "builtin:pagie1", "functions": "add,sub,mul", "select": "train", "device": "cpu",
            "engine": {"pop_size": 60, "generations": 6, "constants": {"steps": 3, "every": 2, "fraction": 0.2}}});
        let r = whole_run(&given).unwrap();
        // Generations 0, 2, 4 and 6 fit constants; 1, 3 and 5 do not.
        assert_eq!((r["fitting_generations"].as_u64(), r["other_generations"].as_u64()), (Some(4), Some(3)));
        let f = |k: &str| r[k].as_f64().unwrap_or_else(|| panic!("{k} missing: {r}"));
        for k in ["seconds", "setup_seconds", "search_seconds", "final_seconds", "fitting_seconds", "other_seconds"] {
            assert!(f(k) >= 0.0 && f(k).is_finite(), "{k}: {}", f(k));
        }
        assert!(f("fitting_seconds") + f("other_seconds") <= f("search_seconds") + 1e-9, "{r}");
        assert!(f("setup_seconds") + f("search_seconds") <= f("seconds") + 1e-9, "{r}");
        assert!(r["best"].as_f64().is_some_and(f64::is_finite), "{r}");
        assert_eq!(r["experiment"]["engine"]["pop_size"], 60);
        // A field the command does not know: the experiment's own error.
        let err = whole_run(&serde_json::json!({"data": "builtin:pagie1", "popsize": 5})).unwrap_err().to_string();
        assert!(err.contains("popsize"), "{err}");
    }
}
