#!/usr/bin/env bash
# Issue 27: the joint fit with linear terms of the inputs on a GPU (grove_joint_sums), on a GPU
# machine. Staged: .device/grove and the test binaries (.device/<test>, .device/BUILD_ROOT) and
# the data splits under .scratch/splits/SET/K/{train,test}.csv (tools/quality/quality.py's
# splits, written by its loaders), packed into .scratch/dev.tar.xz.
#
# Parts (arguments, default all):
#   parity   cuda_eval's joint_sums_match_the_cpu and cuda_evolve's whole-run test, then both
#            suites whole (the prediction kernels were refactored under them)
#   quality  grove evolve --device cuda at its defaults (terms `auto`, now on a GPU) against
#            --linear-inputs off on each staged split: median test R^2 and seconds a fit
# Prints a short table last.
set -u
tar -xJf .scratch/dev.tar.xz
export OUT=${OUT:-$PWD/gpu-out}
source tools/gpu_common.sh
if has parity; then
    for t in cuda_eval cuda_evolve; do
        (cd "$root" && timeout 400 "$bin/$t" --include-ignored --test-threads 1) >"$OUT/test-$t.log" 2>&1
        summary+=("$t: $(grep -E '^test result' "$OUT/test-$t.log" | tail -1)")
        grep -E "panicked|FAILED|failed" "$OUT/test-$t.log" | head -5
    done
fi
if has quality; then
    g="$bin/grove"
    $g evolve --data builtin:pagie1 --functions add,sub,mul,div --device cuda --gens 1 -q >/dev/null 2>&1  # warm the kernel cache
    python3 - "$g" "$OUT" <<'PY'
import csv, json, os, statistics as st, subprocess, sys, time
g, out = sys.argv[1], sys.argv[2]
rows = []
for s in sorted(os.listdir(".scratch/splits")):
    for k in sorted(os.listdir(f".scratch/splits/{s}"), key=int):
        d = f".scratch/splits/{s}/{k}"
        ys = [float(r["target"]) for r in csv.DictReader(open(f"{d}/test.csv"))]
        for name, extra in [("auto", []), ("off", ["--linear-inputs", "off"])]:
            rep = f"{out}/{s}_{k}_{name}.json"
            t = time.perf_counter()
            p = subprocess.run([g, "evolve", "--data", f"{d}/train.csv", "--target", "target", "--functions", "add,sub,mul,div",
                                "--device", "cuda", "--seed", str(int(k) + 1), "--report", rep, "-q", *extra], capture_output=True, text=True)
            sec = time.perf_counter() - t
            if p.returncode != 0:
                print(s, k, name, "failed:", p.stderr[-300:]); continue
            pr = subprocess.run([g, "predict", "--model", rep, "--data", f"{d}/test.csv"], capture_output=True, text=True).stdout.split()[1:]
            pred = [float(v) for v in pr[:len(ys)]]
            m = sum(ys) / len(ys)
            r2 = 1 - sum((a - b) ** 2 for a, b in zip(ys, pred)) / sum((a - m) ** 2 for a in ys)
            r = json.load(open(rep))
            rows.append(dict(set=s, split=int(k), variant=name, r2=r2, seconds=sec, size=r["best"]["size"],
                             used=r["linear_inputs"]["used"], device=r["timing"]["device"]))
json.dump(rows, open(f"{out}/quality.json", "w"))
print("set          auto R2   off R2  auto s  off s  terms kept")
for s in sorted({r["set"] for r in rows}):
    a = [r for r in rows if r["set"] == s and r["variant"] == "auto"]
    o = [r for r in rows if r["set"] == s and r["variant"] == "off"]
    med = lambda v, f: st.median([r[f] for r in v]) if v else float("nan")
    print(f"{s:12s} {med(a, 'r2'):7.4f} {med(o, 'r2'):8.4f} {med(a, 'seconds'):6.2f} {med(o, 'seconds'):6.2f}  {sum(r['used'] for r in a)}/{len(a)}")
print("device:", rows[0]["device"] if rows else "-")
PY
fi
printf '%s\n' "${summary[@]}"
