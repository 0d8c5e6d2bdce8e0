#!/usr/bin/env bash
# classes.sh: classification with no linear shortcut, generated: two spirals (194 points,
# Lang & Witbrock), circles, moons, a 4×4 checkerboard and 3-bit parity (the class is the parity
# of x, y, z > 1/2 each, uniform in the unit cube; 400 points each, seeded), 75/25
# splits; `grove classify` at the device's defaults with each --selection, over SEEDS seeds:
# one line per run (test accuracy, seconds of the run, wall seconds of the command), then a
# table of medians.
#
#   SEEDS=3 DEVICE=cpu SELECTIONS="tournament down-sampled lexicase" tools/search/classes.sh [BIN]
#
# FLAGS adds flags to every run (e.g. FLAGS="--functions add,sub,mul,div,sin,cos"). SETS may
# name built-in sets too (SETS="spirals builtin:wine").
set -euo pipefail
bin=${1:-target/release/grove}
seeds=${SEEDS:-3}
device=${DEVICE:-cpu}
selections=${SELECTIONS:-"tournament down-sampled lexicase"}
sets=${SETS:-"spirals circles moons checker parity"}
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
python3 - "$out" <<'PY'
import math, random, sys
out = sys.argv[1]
def write(name, pts):
    with open(f"{out}/{name}.csv", "w") as f:
        f.write("x,y,label\n")
        for x, y, l in pts:
            f.write(f"{x:.6f},{y:.6f},{l}\n")
pts = []
for i in range(97):
    phi, r = i / 16 * math.pi, 6.5 * (104 - i) / 104
    pts += [(r * math.cos(phi), r * math.sin(phi), 0), (-r * math.cos(phi), -r * math.sin(phi), 1)]
write("spirals", pts)
rng = random.Random(1)
pts = []
for i in range(400):
    l, t = i % 2, rng.uniform(0, 2 * math.pi)
    r = 1.0 if l else 0.5
    pts.append((r * math.cos(t) + rng.gauss(0, 0.08), r * math.sin(t) + rng.gauss(0, 0.08), l))
write("circles", pts)
pts = []
for i in range(400):
    l, t = i % 2, rng.uniform(0, math.pi)
    x, y = (math.cos(t), math.sin(t)) if l == 0 else (1 - math.cos(t), 0.5 - math.sin(t))
    pts.append((x + rng.gauss(0, 0.1), y + rng.gauss(0, 0.1), l))
write("moons", pts)
pts = []
for i in range(400):
    x, y = rng.uniform(-2, 2), rng.uniform(-2, 2)
    pts.append((x, y, (math.floor(x) + math.floor(y)) % 2))
write("checker", pts)
with open(f"{out}/parity.csv", "w") as f:
    f.write("x,y,z,label\n")
    for i in range(400):
        p = [rng.uniform(0, 1) for _ in range(3)]
        f.write(",".join(f"{v:.6f}" for v in p) + f",{sum(v > 0.5 for v in p) % 2}\n")
PY
echo "set selection seed test_accuracy train_accuracy seconds wall" >"$out/runs.txt"
for d in $sets; do
    for sel in $selections; do
        for s in $(seq 1 "$seeds"); do
            rep="$out/${d#builtin:}-$sel-$s.json"
            data="$out/$d.csv"
            [[ $d == builtin:* ]] && data=$d
            t0=$(date +%s.%N)
            # shellcheck disable=SC2086
            "$bin" classify --data "$data" --test-fraction 0.25 --seed "$s" --device "$device" --selection "$sel" ${FLAGS:-} --quiet --report "$rep" >/dev/null
            t1=$(date +%s.%N)
            python3 -c "import json;r=json.load(open('$rep'));print('$d', '$sel', $s, r['test']['accuracy'], r['train']['accuracy'], r['timing']['seconds'], round($t1 - $t0, 3))" >>"$out/runs.txt"
        done
    done
done
python3 - "$out/runs.txt" <<'PY'
import sys, statistics as st, collections
rows = [l.split() for l in open(sys.argv[1])][1:]
by = collections.defaultdict(list)
for d, sel, s, te, tr, sec, wall in rows:
    by[(d, sel)].append((float(te), float(tr), float(sec), float(wall)))
print("| set | selection | median test accuracy | min test accuracy | median train accuracy | median seconds | median wall s | runs |")
print("|---|---|---|---|---|---|---|---|")
for (d, sel), r in by.items():
    print(f"| {d} | {sel} | {st.median(x[0] for x in r):.3f} | {min(x[0] for x in r):.3f} | {st.median(x[1] for x in r):.3f} | {st.median(x[2] for x in r):.2f} | {st.median(x[3] for x in r):.2f} | {len(r)} |")
PY
echo "runs: $out/runs.txt"
