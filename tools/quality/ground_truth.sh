#!/usr/bin/env bash
# ground_truth.sh: issue 55's ground-truth formulas (the exact-recovery suite of quality.py:
# Nguyen-1…8 and seven Keijzer targets) with grove's own model choice (`select="auto"`, which
# below 20,000 rows cross-validates the whole fit), at several budgets, the targets of a budget
# run side by side. Prints, per target and budget, the runs solved (test R² ≥ 0.999 on 1000
# fresh points), the median returned size and the median seconds a run, and flags a target
# whose rate falls at a larger budget.
#
#   BUDGETS="3000:10 30000:10 300000:10" PAR=8 DEVICE=cuda tools/quality/ground_truth.sh [BIN]
#
# BUDGETS: `population:runs` (seeds 1…runs), 100 generations each; PAR: processes side by side
# (a GPU is shared by them); THREADS: grove's threads a process (2); TARGETS: a subset;
# SECONDS_LIMIT: stop starting runs after this many seconds (the table then shows what ran);
# OUT: where runs.jsonl (every run, tagged by budget) and table.md go; PY: the Python with
# numpy and sympy.
set -uo pipefail
bin=$(realpath "${1:-target/release/grove}")
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
export PY=${PY:-python3} DEVICE=${DEVICE:-cpu} THREADS=${THREADS:-2} BIN=$bin HERE=$here WORK=$out/work
BUDGETS=${BUDGETS:-"3000:10 30000:10"}
PAR=${PAR:-1}
TARGETS=${TARGETS:-"nguyen1 nguyen2 nguyen3 nguyen4 nguyen5 nguyen6 nguyen7 nguyen8 keijzer1 keijzer7 keijzer11 keijzer12 keijzer13 keijzer14 keijzer15"}
mkdir -p "$WORK"
one() { # population runs target
  "$PY" "$HERE/quality.py" --suite nguyen --systems grove --nguyen-variants none \
    --nguyen-grove 'select="auto"' --runs "$2" --grove "$BIN" --grove-device "$DEVICE" --grove-pop "$1" \
    --threads "$THREADS" --datasets "$3" --out "$WORK/$1-$3" > "$WORK/$1-$3.log" 2>&1 ||
    echo "$3 at $1: quality.py failed, see $WORK/$1-$3.log" >&2
}
export -f one
start=$(date +%s)
for b in $BUDGETS; do
  t0=$(date +%s)
  left=$(( ${SECONDS_LIMIT:-1000000} - (t0 - start) ))
  [ "$left" -gt 0 ] || break
  for t in $TARGETS; do echo "${b%%:*} ${b##*:} $t"; done |
    timeout "$left" xargs -P "$PAR" -L 1 bash -c 'one "$0" "$1" "$2"'
  echo "population ${b%%:*}: $(( $(date +%s) - t0 )) s" >&2
done
# Past the limit: stop the runs still going (each target's finished runs are kept).
pkill -f "$HERE/quality.py" 2>/dev/null
for d in "$WORK"/*/; do
  [ -f "$d/runs-nguyen.jsonl" ] || continue
  pop=$(basename "$d"); pop=${pop%%-*}
  sed "s/^{/{\"population\": $pop, /" "$d/runs-nguyen.jsonl"
done > "$out/runs.jsonl"
"$PY" - "$out/runs.jsonl" "$TARGETS" <<'PY' | tee "$out/table.md"
import json, sys
from statistics import median
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
targets = sys.argv[2].split()
pops = sorted({r["population"] for r in rows})
by = {}
for r in rows:
    by.setdefault((r["dataset"], r["population"]), {})[r["seed"]] = r
def solved(r):
    return r.get("test_r2") is not None and r["test_r2"] >= 0.999
print("| target | " + " | ".join(f"pop {p}" for p in pops) + " | falls |")
print("|---|" + "---|" * len(pops) + "---|")
total = {p: [0, 0] for p in pops}
for t in targets:
    cells, rates = [], []
    for p in pops:
        runs = by.get((t, p), {})
        if not runs:
            cells.append("–"); rates.append(None); continue
        k = sum(solved(r) for r in runs.values())
        total[p][0] += k; total[p][1] += len(runs)
        size = median(r.get("size") or 0 for r in runs.values())
        secs = median(r["seconds"] for r in runs.values())
        cells.append(f"{k}/{len(runs)} ({size:g} nodes, {secs:.1f} s)")
        rates.append((k, runs))
    # A fall: on the seeds both budgets ran, fewer solved at the larger one.
    falls = []
    for i in range(len(pops)):
        for j in range(i + 1, len(pops)):
            if rates[i] is None or rates[j] is None:
                continue
            seeds = rates[i][1].keys() & rates[j][1].keys()
            a = sum(solved(rates[i][1][s]) for s in seeds)
            b = sum(solved(rates[j][1][s]) for s in seeds)
            if b < a:
                falls.append(f"{pops[i]}→{pops[j]}: {a}→{b} of {len(seeds)}")
    print(f"| {t} | " + " | ".join(cells) + " | " + ("; ".join(falls) or "none") + " |")
print("| all | " + " | ".join(f"{total[p][0]}/{total[p][1]}" for p in pops) + " | |")
PY
