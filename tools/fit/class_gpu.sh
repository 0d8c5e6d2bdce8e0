#!/usr/bin/env bash
# class_gpu.sh: issue 16's constant fitting for classification (grove_fit_class_constants) on a
# GPU machine without a Rust toolchain. Runs binaries built elsewhere and copied, stripped, into
# .device/ (TESTS="cuda_fit cuda_evolve" tools/ge/stage.sh): the parity tests, then the four
# built-in sets with and without fitting (median test accuracy of 5 seeds and time, grove
# classify's defaults otherwise), then the cost of a fitting round (GROVE_LOOP_PROFILE=1).
# Logs go to $OUT (default ./gpu-check); a short table comes last.
#
#   tools/fit/class_gpu.sh [parity|sweep|cost|all] ...   (default all)
set -u
# shellcheck source=tools/gpu_common.sh
source "$(dirname "$0")/../gpu_common.sh"
if has parity; then
    for t in cuda_fit cuda_evolve; do
        [ -x "$bin/$t" ] || continue
        (cd "$root" && timeout 400 "$bin/$t" --include-ignored --test-threads 2) >"$out/test-$t.log" 2>&1
        r=$(grep -E '^test result' "$out/test-$t.log" | tail -1)
        summary+=("parity $t: ${r:-no result (see $out/test-$t.log)}")
        while IFS= read -r line; do summary+=("    $line"); done < <(grep -E -A2 "panicked" "$out/test-$t.log" | head -8)
    done
fi
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]; else print "?"}'; }
if has sweep; then
    "$bin/grove" classify --data builtin:iris --device cuda --pop 100 --gens 1 --quiet >/dev/null 2>&1  # compile the kernels once
    for set in iris wine breast_cancer digits; do
        for cfg in "0 5 0.2" "10 5 0.2" "5 5 0.05" "10 1 0.05"; do
            set -- $cfg
            accs=""; ts=""
            for seed in 1 2 3 4 5; do
                t0=$(date +%s.%N)
                o=$("$bin/grove" classify --data builtin:$set --device cuda --seed $seed --optimise-constants $1 --optimise-every $2 --optimise-fraction $3 2>&1)
                t1=$(date +%s.%N)
                echo "$o" >"$out/sweep-$set-$1-$2-$3-$seed.log"
                accs="$accs $(echo "$o" | grep -E '^test' | awk '{print $3}')"
                ts="$ts $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}')"
            done
            summary+=("sweep $set steps=$1 every=$2 fraction=$3: median test accuracy $(echo $accs | median) [${accs# }], median time $(echo $ts | median) s")
        done
    done
fi
stage() { grep -E "device loop: $2 " "$1" | awk '{print $(NF-3)}' | head -1; }
if has cost; then
    for p in 5000 100000; do
        for f in 0 0.05 0.2; do
            steps=5; frac=$f; if [ "$f" = 0 ]; then steps=0; frac=0.05; fi
            log="$out/cost-$p-$f.log"
            GROVE_LOOP_PROFILE=1 "$bin/grove" classify --data builtin:digits --pop $p --gens 10 --device cuda --quiet \
                --optimise-constants $steps --optimise-every 1 --optimise-fraction $frac >"$log" 2>&1
            ev=$(stage "$log" evaluate); co=$(stage "$log" constants)
            summary+=("cost digits P=$p fraction=$f steps=$steps: evaluate ${ev:-?} ms, constants ${co:-0} ms over 11 generations")
        done
    done
fi
echo
printf '%s\n' "${summary[@]}"
