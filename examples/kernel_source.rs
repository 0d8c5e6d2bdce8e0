//! Prints the full source NVRTC compiles for a kernel file (the generated operator header, the
//! math functions, then the `.cu` file), for reading, profiling or compiling by hand:
//! `cargo run --release --example kernel_source -- eval.cu > eval_full.cu`.
//!
//! sim.cu is compiled once per environment model, after a header generated from it
//! (`grove_env.h`): name the model as `sim.cu ENV[:PROFILE]` (default `hopper:brax`), e.g.
//! `cargo run --release --example kernel_source -- sim.cu walker2d:gymnasium > walker2d_gym.cu`.

fn main() {
    let want = std::env::args().nth(1).unwrap_or_else(|| "eval.cu".into());
    if want == "sim.cu" {
        let spec = std::env::args().nth(2).unwrap_or_else(|| "hopper".into());
        let (env, profile) = spec.split_once(':').unwrap_or((&spec, "brax"));
        match grove::sim::Model::load(env, Some(profile)) {
            Ok(m) => print!("{}", grove::backend::cuda::sim::sim_full_source(&m)),
            Err(e) => {
                eprintln!("sim.cu for {spec}: {e:#}");
                std::process::exit(2);
            }
        }
        return;
    }
    let Some(src) = grove::backend::cuda::kernels::SOURCES.iter().find(|s| s.file == want) else {
        let names: Vec<&str> = grove::backend::cuda::kernels::SOURCES.iter().map(|s| s.file).collect();
        eprintln!("no kernel file {want}; known: {}, and sim.cu ENV[:PROFILE]", names.join(", "));
        std::process::exit(2);
    };
    print!("{}", src.full_source());
}
