#!/usr/bin/env bash
# gpu_variants.sh: fit.cu variants side by side on a GPU machine without a Rust toolchain, one
# grove binary (staged in .device/ by `TESTS="cuda_fit cuda_evolve cuda_kernels"
# tools/ge/stage.sh`), each variant a folder holding its fit.cu (GROVE_KERNEL_DIR; "builtin"
# for the binary's own). For each variant, each run prints the device loop's constants stage,
# the search time and the best program, so that the variants' programs can be compared: a
# variant that fits other bits returns another program.
#
#   VARIANTS="builtin .scratch/fitv/base ..." tools/fit/gpu_variants.sh [parity] [cost] [large] [ncu]
#
# parity: cuda_fit (every variant), cuda_evolve and cuda_kernels (the binary's own kernels).
# cost:   pagie1 at P = 5000 and 10^5 (10 steps every generation on 0.2 of the population),
#         digits at P = 5000 (5 steps), W1 and W2 at the GPU defaults; two rounds.
# large:  W4's shape (50 programs) at 2^20 and 2^24 rows with the GPU's default fitting.
# ncu:    Nsight Compute's summary of the third grove_fit_constants launch at P = 5000, per variant.
set -u
# shellcheck source=tools/gpu_common.sh
source "$(dirname "$0")/../gpu_common.sh"
variants=${VARIANTS:-builtin}
kdir() { if [ "$1" = builtin ] || [ -x "$1/grove" ]; then echo ""; else echo "$PWD/$1"; fi; }
grove() { if [ -x "$1/grove" ]; then echo "$PWD/$1/grove"; else echo "$bin/grove"; fi; }
name() { basename "$1"; }
if has parity; then
    for v in $variants; do
        [ -x "$v/grove" ] && continue  # another commit's binary: its tests are not staged
        for t in cuda_fit cuda_evolve cuda_kernels; do
            [ -x "$bin/$t" ] || continue
            [ "$t" != cuda_fit ] && [ "$v" != builtin ] && continue
            log="$out/test-$t-$(name "$v").log"
            (cd "$root" && GROVE_KERNEL_DIR=$(kdir "$v") timeout 400 "$bin/$t" --include-ignored --test-threads 2) >"$log" 2>&1
            r=$(grep -E '^test result' "$log" | tail -1)
            summary+=("parity $t $(name "$v"): ${r:-no result (see $log)}")
            while IFS= read -r line; do summary+=("    $line"); done < <(grep -E -A2 "panicked" "$log" | head -6)
        done
    done
fi
stage() { grep -E "device loop: $2 " "$1" | awk '{print $(NF-3)}' | head -1; }
search() { grep -E '^split' "$1" | sed -E 's/.*search ([0-9.]+ m?s).*/\1/' | head -1; }
best() { grep -E '^(best program|class |train )' "$1" | md5sum | cut -c1-8; }
if has cost; then
    fit="--optimise-constants 10 --optimise-every 1 --optimise-fraction 0.2"
    runs=(
        "p5k|evolve --data builtin:pagie1 --functions add,sub,mul,div,sin,cos,tan --pop 5000 --gens 10 --select train $fit"
        "p100k|evolve --data builtin:pagie1 --functions add,sub,mul,div,sin,cos,tan --pop 100000 --gens 10 --select train $fit"
        "digits|classify --data builtin:digits --pop 5000 --gens 10 --optimise-constants 5 --optimise-every 1 --optimise-fraction 0.2"
        "W1|evolve --data builtin:pagie1 --functions add,sub,mul,div,sin,cos,tan --pop 5000 --gens 100 --no-linear-scaling --select train"
        "W2|evolve --data builtin:pagie1:64 --functions add,sub,mul,div,sin,cos,tan --pop 1000000 --gens 10 --no-linear-scaling --select train"
    )
    for v in $variants; do  # compile every variant's kernels once
        GROVE_KERNEL_DIR=$(kdir "$v") "$(grove "$v")" evolve --data builtin:pagie1 --pop 200 --gens 1 --device cuda --optimise-constants 2 --quiet >/dev/null 2>&1
        GROVE_KERNEL_DIR=$(kdir "$v") "$(grove "$v")" classify --data builtin:iris --pop 200 --gens 1 --device cuda --optimise-constants 2 --quiet >/dev/null 2>&1
    done
    for round in 1 2; do
        for r in "${runs[@]}"; do
            label=${r%%|*}; args=${r#*|}
            for v in $variants; do
                log="$out/cost-$label-$(name "$v")-$round.log"
                # shellcheck disable=SC2086
                GROVE_KERNEL_DIR=$(kdir "$v") GROVE_LOOP_PROFILE=1 "$(grove "$v")" $args --device cuda --seed 1 >"$log" 2>&1
                summary+=("cost $label $(name "$v") round $round: constants $(stage "$log" constants) ms, search $(search "$log"), best $(best "$log")")
            done
        done
    done
fi
if has large; then
    # Few trees over many rows (the split fit past one part): W4's shape at 2^20 and 2^24 rows,
    # the GPU's default fitting (10 trees every 5 generations); whole runs, each cut at 300 s.
    for rows in 1048576 16777216; do
        for v in $variants; do
            log="$out/large-$rows-$(name "$v").log"
            GROVE_KERNEL_DIR=$(kdir "$v") GROVE_LOOP_PROFILE=1 timeout 300 "$(grove "$v")" evolve --data builtin:pagie1:$rows --functions add,sub,mul,div \
                --pop 50 --gens 50 --no-linear-scaling --select train --device cuda --seed 1 >"$log" 2>&1
            summary+=("large $rows $(name "$v"): $(grep -E '^(split|time) ' "$log" | sed -E 's/ +/ /g' | tr '\n' ';') constants $(stage "$log" constants) ms, best $(best "$log")")
        done
    done
fi
if has ncu && command -v ncu >/dev/null; then
    for v in $variants; do
        log="$out/ncu-$(name "$v").log"
        GROVE_KERNEL_DIR=$(kdir "$v") timeout 300 ncu --kernel-name grove_fit_constants --launch-skip 2 --launch-count 1 \
            --section SpeedOfLight --section LaunchStats --section Occupancy --section InstructionStats --section ComputeWorkloadAnalysis \
            "$(grove "$v")" evolve --data builtin:pagie1 --functions add,sub,mul,div,sin,cos,tan --pop 5000 --gens 4 --select train --device cuda \
            --optimise-constants 10 --optimise-every 1 --optimise-fraction 0.2 --quiet >"$log" 2>&1
        summary+=("ncu $(name "$v"): $(grep -E 'Duration|Executed Instructions  |Achieved Occupancy|Registers Per|Issue Slots Busy|Block Limit (Registers|Shared Mem)' "$log" | awk '{$1=$1};1' | tr '\n' ';')")
    done
fi
printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
# Every log in one file, since a call brings few files back.
tar -czf "$out/logs.tar.gz" -C "$out" --exclude logs.tar.gz . 2>/dev/null
