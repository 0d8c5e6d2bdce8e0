#!/usr/bin/env bash
# train.sh: grove control runs on a GPU machine without a Rust toolchain (issue 15 part 3), with
# the binaries tools/control/stage.sh puts in .device/. ENVS (walker2d half_cheetah), POP (5000),
# GENS (100), LIMIT (seconds per run, 270) and EXTRA (more flags) shape the runs; BENCH adds
# bench_control_gpu runs, e.g. BENCH="walker2d:1x1 walker2d:20000x4" (policies x episodes, both
# modes). Reports and logs go to $OUT (default ./gpu-train).
set -u
out=${OUT:-gpu-train}; mkdir -p "$out"
bin=$PWD/.device
export GROVE_CACHE_DIR=${GROVE_CACHE_DIR:-/tmp/grove-cache}
nvidia-smi --query-gpu=name --format=csv,noheader
for env in ${ENVS:-walker2d half_cheetah}; do
    timeout ${LIMIT:-270} "$bin/grove" control --env $env --device cuda --pop ${POP:-5000} --gens ${GENS:-100} ${EXTRA:-} --report "$out/$env.json" >"$out/$env.log" 2>&1
    echo "== $env rc=$?"; grep -v "^gen " "$out/$env.log" | tail -12; grep "^gen " "$out/$env.log" | awk 'NR%10==1' | cut -c1-160 | tail -12
done
for m in ${BENCH:-}; do
    env=${m%%:*}; spec=${m#*:}
    GROVE_BENCH_POP=${spec%%x*} GROVE_BENCH_EPISODES=${spec##*x} GROVE_BENCH_MODES=full,falls timeout 120 "$bin/bench_control_gpu" $env 2>&1 | grep "|" | tail -2
done
