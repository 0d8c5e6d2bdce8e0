#!/usr/bin/env bash
# gpu_blocks.sh: the roll-out's threads per block (issue 57 item 1), on a GPU machine with the
# binaries staged in .device/ (grove, cuda_control, bench_control_gpu and BUILD_ROOT; on the build
# machine: `cargo build --release --example bench_control_gpu`, `GROVE_TEST_GPU=1 cargo test
# --release --no-run --test cuda_control`, strip each into .device/). Parts (default: all):
#   parity  cuda_control (every width of lanes and blocks against the CPU, bit for bit)
#   bench   `grove bench --gpu --gpu-part episodes`: Walker2d, 2048 episodes × 1000 steps, every
#           width of lanes with every block, µs per step and bits
#   ncu     Nsight Compute on the one-lane roll-out of those episodes (200 steps) in blocks of
#           $NCU_BLOCKS (default 64 8): where a step's time goes
# Logs go to $OUT (default ./gpu-blocks); the tables are printed last.
set -u
export OUT=${OUT:-gpu-blocks}
source tools/gpu_common.sh
if has bench; then
    "$bin/grove" bench --genomes 1000 --gpu --gpu-part episodes >"$out/bench.log" 2>&1
fi
if has ncu; then
    for b in ${NCU_BLOCKS:-64 8}; do
        GROVE_EPISODE_BLOCK=$b GROVE_BENCH_LANES=${NCU_LANES:-1} GROVE_BENCH_POP=512 GROVE_BENCH_MODES=full GROVE_BENCH_STEPS=200 \
            timeout 300 ncu --kernel-name grove_control_rollout --launch-skip 1 --launch-count 1 \
            --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy \
            --section LaunchStats --section SchedulerStats --section ComputeWorkloadAnalysis \
            "$bin/bench_control_gpu" walker2d >"$out/ncu-block$b.log" 2>&1
    done
fi
if has parity; then
    run_suites "cuda_control"
fi
printf '%s\n' "${summary[@]}"
for f in bench.log ncu-block*.log; do [ -f "$out/$f" ] && { echo; echo "== $f"; grep -vE '^==PROF==' "$out/$f" | grep -vE '^\s*$' | cut -c1-150; }; done
