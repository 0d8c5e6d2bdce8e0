#!/usr/bin/env bash
# gpu_diversity.sh: on a GPU machine with binaries staged by tools/layout/stage.sh (PACK=1),
# the diversity and GE-operator measurements of issue 55 with `--device cuda`:
#
#   pagie   plain GE at PonyGE2's settings and at grove's default budget on Pagie-1 (PonyGE2's
#           supervised_learning.bnf, staged as .device/supervised_learning.bnf), SEEDS seeds
#           (default 20), --diversity none and unique, and --mutation subtree (the device
#           loop's subtree mutation), and at PonyGE2's budget the old one-point operators with
#           and without unique parents: constants of SEEDS, median best MSE, median seconds
#   classes tools/search/classes.sh with DEVICE=cuda, --diversity none and unique
#
#   OUT=dir tools/search/gpu_diversity.sh [pagie] [classes]      (default: both)
set -u
# shellcheck source=tools/gpu_common.sh
source "$(dirname "$0")/../gpu_common.sh" "$@"
grove=$bin/grove
seeds=${SEEDS:-20}
g=$bin/supervised_learning.bnf
if has pagie; then
    plain=(--tournament 2 --no-linear-scaling --linear-inputs off --select train --bloat none --device cuda --quiet)
    echo "budget variant seed fitness size seconds" >"$out/pagie.txt"
    for budget in ponyge2 default; do
        b=(); [ "$budget" = ponyge2 ] && b=(--pop 500 --gens 50)
        variants="none unique subtree-mutation onepoint-none onepoint-unique"
        [ "$budget" = default ] && variants="none unique subtree-mutation"
        for variant in $variants; do
            case $variant in
                none) v=(--diversity none) ;;
                unique) v=(--diversity unique) ;;
                subtree-mutation) v=(--mutation subtree) ;;
                onepoint-none) v=(--crossover onepoint --mutation 0.02 --diversity none) ;;
                onepoint-unique) v=(--crossover onepoint --mutation 0.02 --diversity unique) ;;
            esac
            for s in $(seq 1 "$seeds"); do
                rep="$out/pagie-$budget-$variant-$s.json"
                "$grove" evolve -g "$g" --data builtin:pagie1 "${b[@]}" "${plain[@]}" "${v[@]}" --seed "$s" --report "$rep" >/dev/null 2>"$out/pagie-$budget-$variant-$s.err" \
                    || { echo "$budget $variant $s failed: $(tail -1 "$out/pagie-$budget-$variant-$s.err")"; continue; }
                python3 -c "import json;r=json.load(open('$rep'));print('$budget', '$variant', $s, r['best']['fitness'], r['best']['size'], r['timing']['seconds'])" >>"$out/pagie.txt"
            done
        done
    done
    summary+=("$(python3 - "$out/pagie.txt" <<'PY'
import sys, statistics as st, collections
rows = [l.split() for l in open(sys.argv[1])][1:]
by = collections.defaultdict(list)
for b, v, s, f, n, sec in rows:
    by[(b, v)].append((float(f), int(n), float(sec)))
print("| budget | variant | constant | median best MSE | median size | median s | runs |")
print("|---|---|---|---|---|---|---|")
for (b, v), r in by.items():
    print(f"| {b} | {v} | {sum(x[1] == 1 for x in r)} | {st.median(x[0] for x in r):.4f} | {st.median(x[1] for x in r)} | {st.median(x[2] for x in r):.2f} | {len(r)} |")
PY
)")
fi
if has classes; then
    for d in none unique; do
        summary+=("classes, --diversity $d:")
        summary+=("$(OUT=$out/classes-$d DEVICE=cuda SEEDS=${CLASS_SEEDS:-3} SELECTIONS="tournament lexicase" FLAGS="--diversity $d" bash tools/search/classes.sh "$grove" 2>&1 | tail -12)")
    done
fi
printf '%s\n' "${summary[@]}"
