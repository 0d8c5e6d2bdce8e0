//! CPU simulator throughput: a batch of environments stepped with `step_batch` under
//! deterministic pseudo-random actions, in f64 and f32, per shipped environment and profile.
//! Prints control (env) steps per second, and a hash of every reward and final state (its bits),
//! equal across builds that step alike. `cargo run --release --example bench_sim [N_ENVS] [STEPS]`

use std::time::Instant;

use grove::sim::dynamics::{r, Real};
use grove::sim::{step_batch, Model, State, StepResult};

/// FNV-1a over the f64 values' bits.
fn mix(h: &mut u64, x: f64) {
    for byte in x.to_bits().to_le_bytes() {
        *h = (*h ^ byte as u64).wrapping_mul(0x100000001b3);
    }
}

fn run<T: Real>(m: &Model, n: usize, steps: usize) -> (f64, u64) {
    let mut hash = 0xcbf29ce484222325u64;
    let mut states: Vec<State<T>> = (0..n).map(|e| State::reset(m, 1, 0, e as u32)).collect();
    let mut out = vec![StepResult { reward: T::zero(), done: false }; n];
    let nu = m.nu();
    let start = Instant::now();
    for t in 0..steps {
        let actions: Vec<T> = (0..n * nu).map(|i| r(((i * 7 + t * 13) as f64 * 0.37).sin())).collect();
        step_batch(m, &mut states, &actions, &mut out);
        out.iter().for_each(|o| mix(&mut hash, o.reward.exact_f64()));
        // Keep every environment busy: a terminated one starts again.
        for (e, s) in states.iter_mut().enumerate() {
            if s.done {
                *s = State::reset(m, 1, t as u32 + 1, e as u32);
            }
        }
    }
    let rate = (n * steps) as f64 / start.elapsed().as_secs_f64();
    states.iter().flat_map(|s| s.q.iter().chain(&s.v)).for_each(|&x| mix(&mut hash, x.exact_f64()));
    (rate, hash)
}

fn main() {
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let n = args.first().copied().unwrap_or(64);
    let steps = args.get(1).copied().unwrap_or(100);
    println!("{n} environments x {steps} control steps, {} threads", rayon::current_num_threads());
    println!("| env | profile | integrator | f64 env steps/s | f32 env steps/s | bits (f64, f32) |");
    println!("|---|---|---|---|---|---|");
    for env in ["swimmer", "hopper", "walker2d", "half_cheetah"] {
        for profile in ["brax", "gymnasium"] {
            let m = Model::load(env, Some(profile)).unwrap();
            let (a, ha) = run::<f64>(&m, n, steps);
            let (b, hb) = run::<f32>(&m, n, steps);
            println!("| {env} | {profile} | {:?} | {a:.0} | {b:.0} | {:04x}, {:04x} |", m.integrator, ha >> 48, hb >> 48);
        }
    }
}
