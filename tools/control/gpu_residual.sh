#!/usr/bin/env bash
# gpu_residual.sh: `grove control --policy residual` against `--policy linear` on the same wall
# time (issue 29), on a GPU machine without a Rust toolchain, with the binaries staged in .device/
# (grove and the cuda_control test; staging as in docs/benchmarks.md). Parts: `parity` runs the
# device-equals-host tests of the linear and residual runs; `runs` plays each robot of
# ENVS (default: the four) with `--policy residual` at the defaults (plus $FLAGS), then
# `--policy linear` with a time limit of the residual run's whole seconds. With two GPUs or more
# the robots are spread over them, one process per GPU (GPUS, default: what nvidia-smi lists).
# Reports and logs go to $OUT (default ./gpu-residual); a table is printed last.
set -u
export OUT=${OUT:-gpu-residual}
source tools/gpu_common.sh
gpus=${GPUS:-$(nvidia-smi --list-gpus | wc -l)}
# One robot: the residual run, then the linear run given the residual's wall time.
robot() {
    local env=$1 gpu=$2
    export CUDA_VISIBLE_DEVICES=$gpu
    # shellcheck disable=SC2086
    "$bin/grove" control --env "$env" --policy residual --device cuda ${FLAGS:-} --report "$out/$env-residual.json" >"$out/$env-residual.log" 2>&1
    local limit
    limit=$(python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))['timing']['seconds'], 1))" "$out/$env-residual.json" 2>/dev/null || echo 60)
    "$bin/grove" control --env "$env" --policy linear --device cuda --gens 100000 --time-limit "$limit" --report "$out/$env-linear.json" >"$out/$env-linear.log" 2>&1
}
if has parity; then
    "$bin/cuda_control" --exact linear_policies_play_as_on_the_cpu_and_a_linear_run_equals_the_cpus a_residual_run_on_the_gpu_equals_the_cpus >"$out/parity.log" 2>&1
    summary+=("parity (cuda_control linear and residual runs): rc $? $(grep -E '^test result' "$out/parity.log")")
fi
if has runs; then
    read -ra envs <<<"${ENVS:-swimmer walker2d hopper half_cheetah}"
    for ((g = 0; g < gpus; g++)); do
        (for ((i = g; i < ${#envs[@]}; i += gpus)); do robot "${envs[$i]}" "$g"; done) &
    done
    wait
    for env in "${envs[@]}"; do
        for kind in residual linear; do
            log="$out/$env-$kind.log"
            summary+=("| $env | $kind | $(grep -E '^train return' "$log" | awk '{print $3}') | $(grep -E '^test return' "$log" | awk '{print $3, $4, $5}') | $(grep -E '^time' "$log" | awk '{print $2}') |")
        done
    done
fi
echo; echo "| env | policy | train return | test return | time (s) |"; echo "|---|---|---|---|---|"
for l in "${summary[@]}"; do echo "$l"; done
