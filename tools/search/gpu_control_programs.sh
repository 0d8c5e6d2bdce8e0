#!/usr/bin/env bash
# gpu_control_programs.sh: issue 55's search benchmark for control programs, on a GPU machine
# with the grove binary staged in .device/ (`strip -o .device/grove target/release/grove`):
# `grove control --device cuda` at the GPU's defaults (program policy, tree GP) and at BUDGETS
# times the default generations, with each --selection (lexicase: each of the defaults' 4
# training episodes a case), one run at a time so that the seconds are the run's own. One row
# per run (test return over 10 fresh episodes, its spread, the run's seconds, the returned
# program's size), then the table.
#
#   ENVS="swimmer hopper" BUDGETS="1 10" SELECTIONS="tournament lexicase" SEEDS="1" \
#       tools/search/gpu_control_programs.sh
set -u
export OUT=${OUT:-gpu-control-programs}
source tools/gpu_common.sh
gens_default=100
echo "| env | budget | selection | seed | test return | ± | seconds | size |" >"$out/table.md"
echo "|---|---|---|---|---|---|---|---|" >>"$out/table.md"
for env in ${ENVS:-swimmer hopper}; do
    for b in ${BUDGETS:-1 10}; do
        for sel in ${SELECTIONS:-tournament lexicase}; do
            for s in ${SEEDS:-1}; do
                label="$env-$b-$sel-$s"
                "$bin/grove" control --env "$env" --device cuda --gens $((gens_default * b)) --selection "$sel" --seed "$s" \
                    --quiet --report "$out/$label.json" >"$out/$label.log" 2>&1
                python3 - "$out/$label.json" "$env" "$b" "$sel" "$s" >>"$out/table.md" <<'PY' || echo "| $env | ${b}× | $sel | $s | failed: $(tail -1 "$out/$label.log") |" >>"$out/table.md"
import json, sys
r = json.load(open(sys.argv[1]))
t = r["test"]
print(f"| {sys.argv[2]} | {sys.argv[3]}× | {sys.argv[4]} | {sys.argv[5]} | {t['mean']:.1f} | {t['std']:.1f} | {r['timing']['seconds']:.1f} | {r['best']['size']} |")
PY
            done
        done
    done
done
cat "$out/table.md"
