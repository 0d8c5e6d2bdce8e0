#!/usr/bin/env bash
# train.sh: grove control runs on a GPU machine without a Rust toolchain (issue 15 part 3), with
# the binaries tools/control/stage.sh puts in .device/. ENVS (walker2d half_cheetah), POP (5000),
# GENS (100), LIMIT (seconds per run, 270) and EXTRA (more flags) shape the runs; BENCH adds
# bench_control_gpu runs, e.g. BENCH="walker2d:1x1 walker2d:20000x4" (policies x episodes, both
# modes). RUNS="label=env flags;label=env flags" replaces ENVS and EXTRA with named runs, e.g.
# RUNS="hc1=half_cheetah --episodes 1;w2=walker2d --episodes 2". Reports and logs go to $OUT
# (default ./gpu-train).
set -u
out=${OUT:-gpu-train}; mkdir -p "$out"
bin=$PWD/.device
export GROVE_CACHE_DIR=${GROVE_CACHE_DIR:-/tmp/grove-cache}
nvidia-smi --query-gpu=name --format=csv,noheader
runs=${RUNS:-}
if [ -z "$runs" ]; then
    for env in ${ENVS:-walker2d half_cheetah}; do runs="$runs$env=$env ${EXTRA:-};"; done
fi
summary=()
IFS=';' read -ra items <<<"$runs"
for item in "${items[@]}"; do
    [ -z "${item// }" ] && continue
    label=${item%%=*}; args=${item#*=}; env=${args%% *}; flags=${args#"$env"}
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086
    timeout ${LIMIT:-270} "$bin/grove" control --env $env --device cuda --pop ${POP:-5000} --gens ${GENS:-100} $flags --report "$out/$label.json" >"$out/$label.log" 2>&1
    rc=$?
    wall=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$t0" "$(date +%s.%N)")
    echo "== $label ($env$flags) rc=$rc, $wall s wall"; grep -E "^(size|chosen|train return|test return|time) " "$out/$label.log"; grep "^gen " "$out/$label.log" | awk 'NR%20==1' | cut -c1-120
    summary+=("| $label | $env$flags | $(grep -E '^train return' "$out/$label.log" | awk '{print $3}') | $(grep -E '^test return' "$out/$label.log" | awk '{print $3, $4, $5}') | $(grep -E '^time' "$out/$label.log" | awk '{print $2}') s | $wall s | rc $rc |")
done
for m in ${BENCH:-}; do
    env=${m%%:*}; spec=${m#*:}
    GROVE_BENCH_POP=${spec%%x*} GROVE_BENCH_EPISODES=${spec##*x} GROVE_BENCH_MODES=full,falls timeout 120 "$bin/bench_control_gpu" $env 2>&1 | grep "|" | tail -2
done
echo; echo "| run | command | train return | test return | training time | wall (with validation and test) | |"; echo "|---|---|---|---|---|---|---|"
for l in "${summary[@]}"; do echo "$l"; done
