#!/usr/bin/env bash
# gpu_check.sh: issue 16's constant fitting (kernels/fit.cu) on a GPU machine without a Rust
# toolchain. Runs binaries built elsewhere and copied, stripped, into .device/
# (TESTS="cuda_fit cuda_evolve backends cuda_eval" tools/ge/stage.sh): the parity tests, then
# the cost of a fitting round against one generation's evaluation (GROVE_LOOP_PROFILE=1: the
# device loop's "constants" and "evaluate" stages), then Friedman-1 with and without fitting.
# Logs go to $OUT (default ./gpu-check); a short table comes last.
#
#   tools/fit/gpu_check.sh [parity|cost|quality|all] ...   (default all)
set -u
# shellcheck source=tools/gpu_common.sh
source "$(dirname "$0")/../gpu_common.sh"
if has parity; then
    for t in cuda_fit cuda_evolve backends cuda_eval; do
        [ -x "$bin/$t" ] || continue
        (cd "$root" && timeout 300 "$bin/$t" --include-ignored --test-threads 2) >"$out/test-$t.log" 2>&1
        r=$(grep -E '^test result' "$out/test-$t.log" | tail -1)
        summary+=("parity $t: ${r:-no result (see $out/test-$t.log)}")
        while IFS= read -r line; do summary+=("    $line"); done < <(grep -E -A2 "panicked" "$out/test-$t.log" | head -8)
    done
fi
# The device loop's time per stage, summed over the run (ms): stage name -> total.
stage() { grep -E "device loop: $2 " "$1" | awk '{print $(NF-3)}' | head -1; }
if has cost; then
    # W1's data and function set; every generation fitted, on a growing share of the population.
    for p in 5000 100000; do
        for f in 0 0.05 0.2 1; do
            steps=5; frac=$f; if [ "$f" = 0 ]; then steps=0; frac=0.05; fi
            log="$out/cost-$p-$f.log"
            GROVE_LOOP_PROFILE=1 "$bin/grove" evolve --data builtin:pagie1 --functions add,sub,mul,div,sin,cos,tan --pop $p --gens 10 \
                --select train --device cuda --quiet --optimise-constants $steps --optimise-every 1 --optimise-fraction $frac >"$log" 2>&1
            ev=$(stage "$log" evaluate); co=$(stage "$log" constants)
            summary+=("cost pagie1 P=$p fraction=$f steps=$steps: evaluate ${ev:-?} ms, constants ${co:-0} ms over 11 generations")
        done
    done
fi
if has quality; then
    python3 - <<'PY' >"$out/f1.log" 2>&1
from sklearn.datasets import make_friedman1
import numpy as np
x, y = make_friedman1(n_samples=2000, noise=1.0, random_state=0)
np.savetxt("/tmp/f1.csv", np.column_stack([x, y]), delimiter=",", header=",".join([f"x{i}" for i in range(10)] + ["y"]), comments="", fmt="%.6f")
PY
    for cfg in "0 1 0.05" "5 5 0.02" "5 1 0.05" "10 1 0.2"; do
        set -- $cfg
        for budget in "3000 100" "30000 100"; do
            set -- $cfg $budget
            r2s=""; ts=""
            for seed in 1 2 3 4 5; do
                o=$("$bin/grove" evolve --data /tmp/f1.csv --test-fraction 0.75 --seed $seed --functions add,sub,mul,div,sin,cos,exp,log \
                    --pop $4 --gens $5 --device cuda --optimise-constants $1 --optimise-every $2 --optimise-fraction $3 2>&1)
                r2s="$r2s $(echo "$o" | grep '^test' | awk '{print $NF}')"
                ts="$ts $(echo "$o" | grep '^time' | awk '{print $2}')"
            done
            summary+=("friedman1 pop $4 x $5, steps=$1 every=$2 fraction=$3: test r2$r2s; s$ts")
        done
    done
fi
printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
