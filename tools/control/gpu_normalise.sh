#!/usr/bin/env bash
# gpu_normalise.sh: `grove control --normalise` on a GPU machine without a Rust toolchain, with
# the binaries staged in .device/ (tools/ge/stage.sh). Parts:
#   parity   the suites of $SUITES whole (default cuda_control, cuda_kernels), and, unless
#            cuda_evolve is one of them, cuda_evolve's control tests (the device loop against
#            the host loop, two of its cases normalising)
#   compare  `grove control --env ENV --device cuda --seed S` at the defaults, without and with
#            --normalise, for every robot of ENVS and seed of SEEDS (default 1), one after another
# Reports and logs go to $OUT (default ./gpu-normalise); a table is printed last.
set -u
export OUT=${OUT:-gpu-normalise}
source tools/gpu_common.sh
read -ra envs <<<"${ENVS:-swimmer hopper walker2d half_cheetah}"
read -ra seeds <<<"${SEEDS:-1}"
row() { # label log
    echo "| $1 | $(grep -E '^train return' "$2" | awk '{print $3}') | $(grep -E '^test return' "$2" | awk '{print $3, $4, $5}') | $(grep -E '^time' "$2" | awk '{print $2}') | $(grep -oE '[0-9.]+e[+0-9]+ steps/s' "$2" | head -1) | $(grep -E '^size' "$2" | awk '{print $2}') |"
}
if has parity; then
    suites=${SUITES:-cuda_control cuda_kernels}
    run_suites "$suites"
    if [ -x "$bin/cuda_evolve" ] && [[ " $suites " != *" cuda_evolve "* ]]; then
        (cd "$root" && "$bin/cuda_evolve" control --include-ignored --test-threads 1) >"$out/test-cuda_evolve-control.log" 2>&1
        summary+=("cuda_evolve control: $(grep -E '^test result' "$out/test-cuda_evolve-control.log" | tail -1 | sed -E 's/; 0 measured.*//')")
        while IFS= read -r line; do summary+=("    $line"); done < <(grep -E "panicked|FAILED" "$out/test-cuda_evolve-control.log" | head -4)
    fi
fi
if has compare; then
    for env in "${envs[@]}"; do
        for seed in "${seeds[@]}"; do
            "$bin/grove" control --env "$env" --device cuda --seed "$seed" --normalise off --report "$out/$env-$seed-raw.json" >"$out/$env-$seed-raw.log" 2>&1
            "$bin/grove" control --env "$env" --device cuda --seed "$seed" --normalise on --report "$out/$env-$seed-normalised.json" >"$out/$env-$seed-normalised.log" 2>&1
        done
    done
fi
printf '%s\n' "${summary[@]}"
echo; echo "| run | train return | test return | time (s) | env steps/s | size |"; echo "|---|---|---|---|---|---|"
for env in "${envs[@]}"; do
    for seed in "${seeds[@]}"; do
        for kind in raw normalised; do
            [ -f "$out/$env-$seed-$kind.log" ] && row "$env seed $seed $kind" "$out/$env-$seed-$kind.log"
        done
    done
done
