#!/usr/bin/env bash
# ponyge2_problems.sh: plain grammatical evolution on PonyGE2's regression problems, with their
# grammars and Train/Test files, at PonyGE2's settings (population 500, 50 generations,
# tournaments of 2, its elite of 1 % of the population; no linear scaling, no linear input
# terms, no bloat control, the training minimum returned): one line per (problem, variant,
# seed) with the best program's training and test MSE (the test file scored by `grove
# predict`), then a table of medians.
#
#   PONYGE2=/path/to/PonyGE2 SEEDS=10 tools/search/ponyge2_problems.sh [BIN]
#
# POP and GENS replace PonyGE2's budget (500 and 50), e.g. for grove at equal wall time; the
# elite follows the population as PonyGE2's ELITE_SIZE does (1 % of it, at least 1; rounded
# half up where PonyGE2 rounds half to even, so 250 gives 3 here and 2 there).
# FIRST_SEED (default 1) starts the seeds elsewhere, e.g. to confirm a choice on fresh seeds.
# DEVICE (default cpu) is grove's --device.
#
# VARIANTS (default below) lists the grove flags compared, one variant per line.
set -euo pipefail
bin=${1:-target/release/grove}
root=${PONYGE2:?set PONYGE2 to a PonyGE2 checkout (its datasets/ and grammars/)}
seeds=${SEEDS:-10}
first=${FIRST_SEED:-1}
pop=${POP:-500}
elite=$(( (pop + 50) / 100 )); [ "$elite" -ge 1 ] || elite=1
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
problems=${PROBLEMS:-"Paige1:supervised_learning.bnf Vladislavleva4:Vladislavleva4.bnf Keijzer6:Keijzer6.bnf"}
variants=${VARIANTS:-"default:
subtree:--crossover subtree
per-used:--mutation int-flip:1/used
pi-grow+per-used:--init pi-grow --mutation int-flip:1/used
ponyge2-ops:--init pi-grow --crossover onepoint:0.75 --mutation int-flip:1/used
lexicase:--selection lexicase
subtree+lexicase:--crossover subtree --selection lexicase"}
mse() { # predictions file, test file: the MSE of the last column
    python3 - "$1" "$2" <<'PY'
import sys, csv
pred = [float(r[-1]) for r in list(csv.reader(open(sys.argv[1])))[1:]]
rows = [l.split() for l in open(sys.argv[2])][1:]
y = [float(r[-1]) for r in rows]
print(sum((p - t) ** 2 for p, t in zip(pred, y)) / len(y) if len(pred) == len(y) else float("nan"))
PY
}
echo "problem variant seed train_mse test_mse size seconds" >"$out/runs.txt"
for pg in $problems; do
    prob=${pg%%:*}; gram=${pg#*:}
    while IFS= read -r v; do
        name=${v%%:*}; flags=${v#*:}
        # runs.txt is split on whitespace: a label must be one word.
        [[ "$name" =~ [[:space:]] ]] && { echo "ponyge2_problems.sh: variant label '$name' has a space; use one word" >&2; exit 2; }
        for s in $(seq "$first" $((first + seeds - 1))); do
            rep="$out/$prob-$name-$s.json"
            t0=$(date +%s.%N)
            # shellcheck disable=SC2086
            "$bin" evolve -g "$root/grammars/supervised_learning/$gram" --data "$root/datasets/$prob/Train.txt" \
                --pop "$pop" --gens "${GENS:-50}" --tournament 2 --elite "$elite" --no-linear-scaling --linear-inputs off --select train --bloat none \
                --device "${DEVICE:-cpu}" --seed "$s" --quiet --report "$rep" $flags >/dev/null
            t1=$(date +%s.%N)
            "$bin" predict --model "$rep" --data "$root/datasets/$prob/Test.txt" >"$out/pred.csv"
            read -r train size < <(python3 -c "import json;r=json.load(open('$rep'));print(r['train']['mse'], r['best']['size'])")
            echo "$prob $name $s $train $(mse "$out/pred.csv" "$root/datasets/$prob/Test.txt") $size $(awk "BEGIN { print $t1 - $t0 }")" >>"$out/runs.txt"
        done
    done <<<"$variants"
done
python3 - "$out/runs.txt" <<'PY'
import sys, math, statistics as st, collections
rows = [l.split() for l in open(sys.argv[1])][1:]
by = collections.defaultdict(list)
# A test MSE that is NaN (a prediction that overflowed on the test rows) counts as the worst.
worst = lambda x: math.inf if math.isnan(x) else x
for p, v, s, tr, te, size, sec in rows:
    by[(p, v)].append((worst(float(tr)), worst(float(te)), int(size), float(sec)))
print("| problem | variant | median train MSE | median test MSE | test not finite | constant | median size | s / run |")
print("|---|---|---|---|---|---|---|---|")
for (p, v), r in by.items():
    print(f"| {p} | {v} | {st.median(x[0] for x in r):.4g} | {st.median(x[1] for x in r):.4g} | {sum(math.isinf(x[1]) for x in r)} | {sum(x[2] <= 1 for x in r)}/{len(r)} | {st.median(x[2] for x in r):g} | {st.median(x[3] for x in r):.2f} |")
PY
echo "runs: $out/runs.txt"
