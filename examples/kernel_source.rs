//! Prints the full source NVRTC compiles for a kernel file (the generated operator header, the
//! math functions, then the `.cu` file), for reading, profiling or compiling by hand:
//! `cargo run --release --example kernel_source -- eval.cu > eval_full.cu`.

fn main() {
    let want = std::env::args().nth(1).unwrap_or_else(|| "eval.cu".into());
    let Some(src) = grove::backend::cuda::kernels::SOURCES.iter().find(|s| s.file == want) else {
        let names: Vec<&str> = grove::backend::cuda::kernels::SOURCES.iter().map(|s| s.file).collect();
        eprintln!("no kernel file {want}; known: {}", names.join(", "));
        std::process::exit(2);
    };
    print!("{}", src.full_source());
}
