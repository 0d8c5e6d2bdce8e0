#!/usr/bin/env bash
# gpu_ge_mutation.sh: on a GPU machine with binaries staged by tools/layout/stage.sh (PACK=1,
# OLD_GROVE = the build before the change) and PonyGE2's three regression problems copied to
# .device/ponyge2 (datasets/NAME/{Train,Test}.txt, grammars/supervised_learning/*.bnf): GE's
# int-flip default on the GPU. Parts: `parity` (cuda_vary first, cuda_evolve last), `ponyge2`
# (tools/search/ponyge2_problems.sh with DEVICE=cuda: this build's default against
# `--mutation 0.02`), `pagie` (plain GE on Pagie-1 with PonyGE2's grammar, 20 seeds, at
# PonyGE2's settings and at grove's default budget: how many end at a constant). Prints a
# table last.
#
#   OUT=dir SEEDS=10 tools/search/gpu_ge_mutation.sh [parity] [ponyge2] [pagie]
set -u
# shellcheck source=tools/gpu_common.sh
source "$(dirname "$0")/../gpu_common.sh" "$@"
g=$bin/grove
pony=${PONYGE2:-$PWD/.device/ponyge2}
has parity && run_suites cuda_vary
if has ponyge2; then
    t0=$(date +%s)
    table=$(PONYGE2=$pony SEEDS=${SEEDS:-10} DEVICE=cuda OUT=$out/ponyge2 VARIANTS="default:
int-flip-0.02:--mutation 0.02" bash tools/search/ponyge2_problems.sh "$g" 2>&1 | grep -E '^\|')
    summary+=("PonyGE2's problems at its settings on the GPU, $(( $(date +%s) - t0 )) s:" "$table")
fi
if has pagie; then
    for budget in ponyge2 default; do
        const=0; n=0; sizes=()
        for s in $(seq 1 20); do
            rep="$out/pagie-$budget-$s.json"
            if [ "$budget" = ponyge2 ]; then
                flags="--pop 500 --gens 50 --tournament 2 --elite 5 --no-linear-scaling --linear-inputs off --select train --bloat none"
            else
                flags=""
            fi
            # shellcheck disable=SC2086
            "$g" evolve -g "$pony/grammars/supervised_learning/supervised_learning.bnf" --data "$pony/datasets/Paige1/Train.txt" \
                --device cuda --seed "$s" $flags --quiet --report "$rep" >/dev/null 2>"$out/pagie-$budget-$s.err" || continue
            n=$((n + 1)); size=$(python3 -c "import json;print(json.load(open('$rep'))['best']['size'])"); sizes+=("$size")
            [ "$size" -le 1 ] && const=$((const + 1))
        done
        summary+=("plain GE Pagie-1 ($budget budget) on the GPU, this build's default: $const of $n seeds end at a constant; sizes ${sizes[*]}")
    done
fi
has parity && run_suites cuda_evolve
echo "== summary =="
printf '%s\n' "${summary[@]}"
