#!/usr/bin/env bash
# gpu_check.sh: issue 14 (the one interpreter) on a GPU machine without a Rust toolchain. Runs
# binaries built elsewhere and copied, stripped, into .device/ (tools/ge/stage.sh with
# TESTS="cuda_eval backends cuda_control cuda_evolve cuda_vary cuda_kernels", plus the binary of
# the commit before the change as .device/grove-old): the GPU parity tests, then the old and the
# new interpreter side by side (kernel GPop/s, W1, W2 and W4), then an Nsight Compute profile of
# the W3 launch. Logs go to $OUT (default ./gpu-check); a short table comes last.
#
#   tools/interp/gpu_check.sh [parity|bench|profile|all] ...   (default all)
set -u
# shellcheck source=tools/gpu_common.sh
source "$(dirname "$0")/../gpu_common.sh"
if has parity; then
    for t in cuda_eval backends cuda_control cuda_sim cuda_evolve cuda_vary cuda_kernels; do
        [ -x "$bin/$t" ] || continue
        (cd "$root" && timeout 300 "$bin/$t" --include-ignored --test-threads 2) >"$out/test-$t.log" 2>&1
        r=$(grep -E '^test result' "$out/test-$t.log" | tail -1)
        echo "== $t: $r"
        grep -E "panicked|FAILED|first mismatch" "$out/test-$t.log" | head -5
        summary+=("parity $t: ${r:-no result (see $out/test-$t.log)}")
        while IFS= read -r line; do summary+=("    $line"); done < <(grep -E -A1 "panicked" "$out/test-$t.log" | head -6)
    done
fi
# Per-generation median (s) of a report, generations 1.. (generation 0 includes start-up).
gen_median() { python3 -c 'import json,sys,statistics as s; g=json.load(open(sys.argv[1]))["generations"][1:]; print("%.3f ms/gen" % (1e3*s.median(x["seconds"] for x in g)))' "$1"; }
if has bench; then
    for round in 1 2; do
        for b in grove-old grove; do
            [ -x "$bin/$b" ] || continue
            "$bin/$b" bench --gpu --quick --gpu-part eval >"$out/bench-eval-$b-$round.log" 2>&1
            echo "== $b round $round"; sed -n '/^workload/,$p' "$out/bench-eval-$b-$round.log"
        done
    done
    for b in grove-old grove; do
        [ -x "$bin/$b" ] || continue
        w1="--data builtin:pagie1 --functions add,sub,mul,div,sin,cos,tan --pop 5000 --gens 100 --no-linear-scaling --select train --device cuda --quiet"
        "$bin/$b" evolve $w1 --report "$out/w1-$b.json" >/dev/null 2>&1
        GROVE_LOOP_PROFILE=1 "$bin/$b" evolve $w1 2>&1 | grep -iE "evaluate|breed|device loop" >"$out/w1-profile-$b.log"
        "$bin/$b" evolve --data builtin:pagie1:64 --functions add,sub,mul,div,sin,cos,tan --pop 1000000 --gens 10 \
            --no-linear-scaling --device cuda --quiet --report "$out/w2-$b.json" >/dev/null 2>&1
        GROVE_LOOP_PROFILE=1 "$bin/$b" evolve --data builtin:pagie1:64 --functions add,sub,mul,div,sin,cos,tan --pop 1000000 --gens 10 \
            --no-linear-scaling --device cuda 2>&1 | grep -iE "evaluate|breed|device loop" >"$out/w2-profile-$b.log"
        "$bin/$b" evolve --data builtin:pagie1:16777216 --functions add,sub,mul,div --pop 50 --gens 50 --no-linear-scaling --select train \
            --device cuda --quiet --report "$out/w4-$b.json" >/dev/null 2>&1
        w4=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print("%.2f s" % r["timing"]["seconds"])' "$out/w4-$b.json" 2>/dev/null)
        summary+=("$b: W1 $(gen_median "$out/w1-$b.json" 2>/dev/null) (mse $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["train"]["mse"])' "$out/w1-$b.json" 2>/dev/null)); W2 $(gen_median "$out/w2-$b.json" 2>/dev/null); W4 ${w4}")
    done
    cat "$out"/w1-profile-*.log "$out"/w2-profile-*.log 2>/dev/null
fi
if has profile && command -v ncu >/dev/null; then
    for b in grove-old grove; do
        [ -x "$bin/$b" ] || continue
        timeout 240 ncu --kernel-name regex:grove_eval_regression_k4 --launch-skip 3 --launch-count 1 \
            --metrics smsp__thread_inst_executed.sum,smsp__inst_executed.sum,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__thread_inst_executed_per_inst_executed.ratio,gpu__time_duration.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active \
            "$bin/$b" bench --gpu --quick --gpu-part eval >"$out/ncu-$b.log" 2>&1
        echo "== ncu $b"; grep -E "smsp__|sm__|gpu__|launch__" "$out/ncu-$b.log" | head -12
    done
fi
echo
echo "== summary"
for s in "${summary[@]}"; do echo "$s"; done
python3 - "$out" <<'PY'
import glob, os, sys
out = sys.argv[1]
for f in sorted(glob.glob(f"{out}/bench-eval-*.log")):
    tag = os.path.basename(f)[len("bench-eval-"):-4]
    for line in open(f):
        name, rest = line[:18].strip(), line[18:].split()
        if len(rest) >= 10 and rest[0] == "auto" and rest[1] == "auto":
            print(f"{tag:12} {name:18} kernel GPop/s {rest[8]}  (kern ms {rest[6]})")
PY
