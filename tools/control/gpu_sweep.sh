#!/usr/bin/env bash
# gpu_sweep.sh: `grove control` runs at a fixed wall time, JOBS at once on one GPU (issue 57
# item 2: the linear policy's step, noise and directions at 60 s), on a GPU machine without a
# Rust toolchain with the grove binary staged in .device/ (`strip -o .device/grove
# target/release/grove`). RUNS="label=env flags;..." (flags after the env name, e.g.
# `walker2d --policy linear --noise 0.01`); each run gets --device cuda and --time-limit ${LIMIT:-60}
# unless its flags give one. Runs that share the GPU slow each other alike: compare a round's
# variants with each other (put the default in every round), not with runs made alone.
# Reports and logs go to $OUT (default ./gpu-sweep); a table is printed last.
set -u
export OUT=${OUT:-gpu-sweep}
source tools/gpu_common.sh
jobs=${JOBS:-4}
IFS=';' read -ra items <<<"${RUNS:?RUNS=\"label=env flags;...\"}"
one() {
    local label=$1 env=$2; shift 2
    local limit="--time-limit ${LIMIT:-60}"
    [[ " $* " == *" --time-limit "* ]] && limit=""
    # shellcheck disable=SC2086
    "$bin/grove" control --env "$env" --device cuda $limit "$@" --seed "${SEED:-1}" --report "$out/$label.json" >"$out/$label.log" 2>&1
    local rc=$?
    echo "| $label | $env $* | $(grep -E '^test return' "$out/$label.log" | awk '{print $3, $4, $5}') | $(grep -E '^time' "$out/$label.log" | awk '{print $2}') s, $(grep -E '^time' "$out/$label.log" | grep -oE '[0-9]+ iterations') | rc $rc |" >"$out/$label.row"
}
n=0
for item in "${items[@]}"; do
    [ -z "${item// }" ] && continue
    label=${item%%=*}
    [[ $label =~ ^[A-Za-z0-9._-]+$ ]] || { echo "gpu_sweep.sh: label '$label' must be letters, digits, . _ -" >&2; exit 2; }
    # shellcheck disable=SC2086
    one "$label" ${item#*=} &
    n=$((n + 1))
    if [ $((n % jobs)) -eq 0 ]; then wait; fi
done
wait
echo; echo "| run | command | test return | time, iterations | |"; echo "|---|---|---|---|---|"
for item in "${items[@]}"; do label=${item%%=*}; [ -f "$out/$label.row" ] && cat "$out/$label.row"; done
