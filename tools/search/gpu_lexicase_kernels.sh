#!/usr/bin/env bash
# gpu_lexicase_kernels.sh: on a GPU machine with binaries staged by tools/layout/stage.sh: the
# time of each kernel of a device-loop generation (Nsight Compute's gpu__time_duration, every
# launch of every grove_ kernel), tree GP on Pagie-1 at population P (default 1000000), under
# each SELECTIONS entry (default: tournaments, down-sampled lexicase and lexicase). Prints, per
# selection, each kernel's milliseconds a generation (the launches over GENS generations, the
# first generation's evaluation included, divided by GENS), largest first.
set -u
# shellcheck source=tools/gpu_common.sh
source "$(dirname "$0")/../gpu_common.sh" kernels
g=$bin/grove
p=${P:-1000000}
gens=${GENS:-4}
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -n "$ncu" ] || { echo "no ncu"; exit 1; }
while IFS= read -r sel; do
    [ -n "$sel" ] || continue
    tag=$(echo "$sel" | tr ' ' '_')
    # shellcheck disable=SC2086
    timeout 300 "$ncu" --metrics gpu__time_duration.sum --csv --print-units base -k regex:grove_ \
        "$g" evolve --functions add,sub,mul,aq --data builtin:pagie1 --pop "$p" --gens "$gens" --device cuda \
        --linear-inputs off --selection $sel --quiet --report "$out/k-$tag.json" >"$out/ncu-$tag.csv" 2>"$out/ncu-$tag.err"
    echo "== --selection $sel, pop $p, ms a generation over $gens generations (exit $?) =="
    python3 - "$out/ncu-$tag.csv" "$gens" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
head, body = rows[0], rows[1:]
ki, vi = head.index("Kernel Name"), head.index("Metric Value")
tot, n = collections.Counter(), collections.Counter()
for r in body:
    name = r[ki].split("(")[0]
    tot[name] += float(r[vi].replace(",", "")) / 1e6
    n[name] += 1
gens = int(sys.argv[2])
for name, ms in tot.most_common(12):
    print(f"{name:40s} {ms / gens:9.3f} ms  ({n[name]} launches)")
print(f"{'all grove_ kernels':40s} {sum(tot.values()) / gens:9.3f} ms")
PY
done <<<"${SELECTIONS:-"tournament --bloat none
down-sampled
lexicase"}"
