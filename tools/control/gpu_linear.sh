#!/usr/bin/env bash
# gpu_linear.sh: `grove control --policy linear` on a GPU machine without a Rust toolchain
# (issue 29), with the binaries staged in .device/ (the grove binary and the cuda_control test;
# see docs/benchmarks.md for the staging commands). Parts: `parity` runs the device-equals-host
# test of linear policies; `runs` plays RUNS="label=env flags;..." (default: the four robots at
# the defaults), each with --time-limit ${LIMIT:-60} unless its flags give one and at most ${GENS:-100000} iterations.
# Reports and logs go to $OUT (default ./gpu-linear); a table is printed last.
set -u
export OUT=${OUT:-gpu-linear}
source tools/gpu_common.sh
if has parity; then
    "$bin/cuda_control" --exact linear_policies_play_as_on_the_cpu_and_a_linear_run_equals_the_cpus >"$out/parity.log" 2>&1
    summary+=("parity (cuda_control linear test): rc $? $(grep -E '^test result' "$out/parity.log")")
fi
if has runs; then
    runs=${RUNS:-"swimmer=swimmer;hopper=hopper;walker2d=walker2d;half_cheetah=half_cheetah"}
    IFS=';' read -ra items <<<"$runs"
    for item in "${items[@]}"; do
        [ -z "${item// }" ] && continue
        label=${item%%=*}; args=${item#*=}; env=${args%% *}; flags=${args#"$env"}
        limit="--time-limit ${LIMIT:-60}"; [[ "$flags" == *--time-limit* ]] && limit=""
        # shellcheck disable=SC2086
        "$bin/grove" control --env $env --policy linear --device cuda --gens ${GENS:-100000} $limit $flags --report "$out/$label.json" >"$out/$label.log" 2>&1
        rc=$?
        grep -E "^iteration" "$out/$label.log" | tail -4
        summary+=("| $label | $env$flags | $(grep -E '^train return' "$out/$label.log" | awk '{print $3}') | $(grep -E '^test return' "$out/$label.log" | awk '{print $3, $4, $5}') | $(grep -E '^time' "$out/$label.log" | awk '{print $2, $7}') | rc $rc |")
    done
fi
echo; echo "| run | command | train return | test return | time (s), iterations | |"; echo "|---|---|---|---|---|---|"
for l in "${summary[@]}"; do echo "$l"; done
