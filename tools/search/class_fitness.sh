#!/usr/bin/env bash
# class_fitness.sh: `grove classify` under each VARIANTS entry (`label=flags`, separated by `;`)
# on the generated sets of tools/search/classes.sh (spirals, checker, circles, moons, parity)
# and five more written here (seeded, 75/25 splits as there): xor (Gaussian quadrants), rings3
# (three classes by radius), sine (y > sin 2x), disc (a disc in a square, 12 % of the rows) and
# inter5 (sign(a·b + c² − 1) of five Gaussian inputs, two of them noise), or those SETS names,
# plus SETS_EXTRA (e.g. "builtin:wine builtin:digits"), over SEEDS seeds, on DEVICE. Prints a
# table of median test accuracy (balanced accuracy for disc), the worst seed and the median
# wall seconds a run.
#
#   DEVICE=cpu SEEDS=10 VARIANTS="ce=--fitness cross-entropy;bce=--fitness balanced-ce" tools/search/class_fitness.sh [BIN]
set -euo pipefail
bin=${1:-target/release/grove}
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
# The five sets of classes.sh (one quick run writes them all).
OUT=$out SEEDS=1 DEVICE=${DEVICE:-cpu} SELECTIONS=tournament SETS=moons FLAGS="--gens 1" bash "$(dirname "$0")/classes.sh" "$bin" >/dev/null
python3 - "$out" <<'PY'
import math, random, sys
out = sys.argv[1]
rng = random.Random(7)
def write(name, rows, header="x,y,label"):
    with open(f"{out}/{name}.csv", "w") as f:
        f.write(header + "\n")
        for r in rows:
            f.write(",".join(f"{v:.6f}" if isinstance(v, float) else str(v) for v in r) + "\n")
rows = []
for i in range(400):
    x, y = rng.gauss(0, 1), rng.gauss(0, 1)
    rows.append((x, y, int((x > 0) != (y > 0))))
write("xor", rows)
rows = []
for i in range(450):
    l, t = i % 3, rng.uniform(0, 2 * math.pi)
    r = [0.5, 1.2, 1.9][l] + rng.gauss(0, 0.12)
    rows.append((r * math.cos(t), r * math.sin(t), l))
write("rings3", rows)
rows = []
for i in range(400):
    x, y = rng.uniform(-3, 3), rng.uniform(-2, 2)
    rows.append((x, y, int(y > math.sin(2 * x))))
write("sine", rows)
rows = []
for i in range(500):
    x, y = rng.uniform(-1, 1), rng.uniform(-1, 1)
    rows.append((x, y, int(x * x + y * y < 0.15)))
write("disc", rows)
rows = []
for i in range(500):
    v = [rng.gauss(0, 1) for _ in range(5)]
    rows.append(tuple(v) + (int(v[0] * v[1] + v[2] ** 2 - 1 > 0),))
write("inter5", rows, "a,b,c,d,e,label")
PY
rows=$out/rows.txt
: >"$rows"
IFS=';' read -ra variants <<<"${VARIANTS:-ce=--fitness cross-entropy;bce=--fitness balanced-ce}"
for v in "${variants[@]}"; do
    label=${v%%=*} flags=${v#*=}
    for d in ${SETS:-spirals checker circles moons parity xor rings3 sine disc inter5} ${SETS_EXTRA:-}; do
        data=$out/$d.csv
        [[ $d == builtin:* ]] && data=$d
        for s in $(seq 1 "${SEEDS:-5}"); do
            rep="$out/$label-${d#builtin:}-$s.json"
            t0=$(date +%s.%N)
            # shellcheck disable=SC2086
            "$bin" classify --data "$data" --test-fraction 0.25 --seed "$s" --device "${DEVICE:-cpu}" $flags --quiet --report "$rep" >/dev/null 2>>"$out/err.txt" || continue
            t1=$(date +%s.%N)
            python3 -c "import json;r=json.load(open('$rep'));print('$label','${d#builtin:}',$s,r['test']['accuracy'],r['test']['balanced_accuracy'],round($t1-$t0,3))" >>"$rows"
        done
    done
done
python3 - "$rows" <<'PY'
import sys, statistics as st, collections
rows = [l.split() for l in open(sys.argv[1])]
by = collections.defaultdict(list)
for lab, n, s, acc, bal, sec in rows:
    by[(lab, n)].append((float(acc), float(bal), float(sec)))
labs = list(dict.fromkeys(r[0] for r in rows))
sets = list(dict.fromkeys(r[1] for r in rows))
print("| set | " + " | ".join(labs) + " |")
print("|---|" + "---|" * len(labs))
for n in sets:
    cells = []
    for l in labs:
        v = by.get((l, n))
        m = 1 if n == "disc" else 0
        cells.append(f"{st.median(x[m] for x in v):.3f} (worst {min(x[m] for x in v):.2f}, {st.median(x[2] for x in v):.2f} s, {len(v)})" if v else "")
    print(f"| {n} | " + " | ".join(cells) + " |")
PY
echo "runs: $rows"
