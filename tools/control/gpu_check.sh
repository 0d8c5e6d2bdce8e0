#!/usr/bin/env bash
# gpu_check.sh: what the lead runs on a GPU machine for issue 7 (simulator and control on the
# device). Builds the GPU tests and the binary, runs the parity tests (simulator, control
# kernels, backends), the control throughput benchmark, and the W6 runs; each step's output goes
# to $OUT (default ./gpu-check) as a log, and the W6 reports as JSON.
#
#   tools/control/gpu_check.sh [parity|bench|w6|all]   (default all)
#
# Needs CUDA 13's driver and NVRTC (found as the test binaries find them; see README).
set -u
what=${1:-all}
out=${OUT:-gpu-check}
mkdir -p "$out"
export GROVE_TEST_GPU=1
cargo build --release --bins --examples 2>&1 | tail -1
if [[ $what == parity || $what == all ]]; then
    for t in cuda_sim cuda_control backends; do
        cargo test --release --test "$t" -- --include-ignored 2>&1 | tee "$out/test-$t.log" | grep -E "^test |test result"
    done
fi
if [[ $what == bench || $what == all ]]; then
    ./target/release/examples/bench_control_gpu hopper swimmer walker2d half_cheetah hopper:gymnasium 2>&1 | tee "$out/bench_control_gpu.md"
fi
if [[ $what == w6 || $what == all ]]; then
    for run in "swimmer" "hopper" "hopper --healthy-reward 0"; do
        name=$(echo "$run" | tr ' ' '_' | tr -d '-')
        # The summary's `time` line is the run's wall time, and its roll-out rate.
        ./target/release/grove control --env $run --device cuda --pop 5000 --gens 100 \
            --report "$out/w6-$name.json" 2>&1 | tee "$out/w6-$name.log" | grep -v "^gen "
    done
fi
