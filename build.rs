//! Build script: declares the `gpu_tests` cfg and sets it when `GROVE_TEST_GPU=1`, so GPU tests
//! are compiled as ordinary tests on a machine with a GPU and reported as ignored elsewhere.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(gpu_tests)");
    println!("cargo::rerun-if-env-changed=GROVE_TEST_GPU");
    if std::env::var("GROVE_TEST_GPU").as_deref() == Ok("1") {
        println!("cargo::rustc-cfg=gpu_tests");
    }
}
