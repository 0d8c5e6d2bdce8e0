#!/usr/bin/env bash
# gpu_budget.sh: issue 55's ground-truth formulas at 1×, 10× and 100× grove's default budget on a
# GPU (binaries staged by tools/layout/stage.sh): tools/quality/quality.py's exact-recovery suite
# (Nguyen-1…8 and seven Keijzer targets, grove's default variant only) with --grove-device cuda,
# the population scaled (3000, 30 000, 300 000; 100 generations). A run is solved when its R² at
# 1000 fresh points is at least 0.999 (`test_r2`); `numeric` and `exact` are stricter.
#
#   RUNS=5 BUDGETS="1 10 100" LIMIT_100=240 OUT=dir tools/search/gpu_budget.sh
set -u
# shellcheck source=tools/gpu_common.sh
source "$(dirname "$0")/../gpu_common.sh" "$@"
runs=${RUNS:-5}
for k in ${BUDGETS:-1 10 100}; do
    start=$(date +%s)
    # Each budget stops after LIMIT_<k> seconds (default 180) with the runs it has.
    limit_var=LIMIT_$k
    timeout "${!limit_var:-180}" python3 tools/quality/quality.py --suite nguyen --systems grove --nguyen-variants grove --runs "$runs" \
        --grove "$bin/grove" --grove-device cuda --grove-pop $((3000 * k)) --out "/tmp/nguyen-${k}x" >"$out/nguyen-${k}x.log" 2>&1
    echo "budget ${k}x: exit $?, $(( $(date +%s) - start )) s"
    mkdir -p "$out/nguyen-${k}x" && cp /tmp/nguyen-${k}x/runs-nguyen.jsonl "$out/nguyen-${k}x/"
done
python3 - "$out" ${BUDGETS:-1 10 100} <<'PY'
import json, sys, statistics as st, collections
out, budgets = sys.argv[1], sys.argv[2:]
print("| budget | solved (R² ≥ 0.999) | numeric | exact | median s | runs |")
print("|---|---|---|---|---|---|")
per = {}
for k in budgets:
    rows = [json.loads(l) for l in open(f"{out}/nguyen-{k}x/runs-nguyen.jsonl")]
    rows = [r for r in rows if r["system"] == "grove"]
    solved = [r for r in rows if (r.get("test_r2") or -1) >= 0.999]
    per[k] = collections.Counter(r["dataset"] for r in solved)
    print(f"| {k}x | {len(solved)}/{len(rows)} | {sum(bool(r.get('numeric')) for r in rows)} | {sum(bool(r.get('exact')) for r in rows)} | {st.median(r['seconds'] for r in rows):.2f} | {len(rows)} |")
names = sorted({d for c in per.values() for d in c} | {json.loads(l)["dataset"] for l in open(f"{out}/nguyen-{budgets[0]}x/runs-nguyen.jsonl")})
print("solved per target: " + "; ".join(f"{n} " + "/".join(str(per[k][n]) for k in budgets) for n in names))
PY
