#!/usr/bin/env bash
# Issue 27: the fitted head over a program's outputs on a GPU (grove_head_sums), on a GPU
# machine. Staged: .device/grove (this tree), .device/old/grove (the commit before, whose head
# summed on the CPU), the test binaries and .device/BUILD_ROOT, and the splits under
# .scratch/splits/SET/K/{train,test}.csv, packed into .scratch/dev.tar.xz.
#
# Parts (arguments, default all):
#   parity   cuda_eval, cuda_evolve and cuda_kernels whole (head_sums_match_the_cpu,
#            a_run_with_a_head_on_the_gpu_returns_the_cpus_model)
#   speed    grove evolve --device cuda --outputs 4 on each staged split, this tree against the
#            old binary: seconds a fit, test R^2, and whether the models agree
# Prints a short table last.
set -u
tar -xJf .scratch/dev.tar.xz
export OUT=${OUT:-$PWD/gpu-out}
source tools/gpu_common.sh
if has parity; then
    for t in cuda_eval cuda_evolve cuda_kernels; do
        [ -x "$bin/$t" ] || continue
        (cd "$root" && timeout 300 "$bin/$t" --include-ignored --test-threads 1) >"$OUT/test-$t.log" 2>&1
        summary+=("$t: $(grep -E '^test result' "$OUT/test-$t.log" | tail -1)")
        grep -E "panicked|FAILED|failed" "$OUT/test-$t.log" | head -5
    done
fi
if has speed; then
    for b in "$bin/grove" "$bin/old/grove"; do $b evolve --data builtin:pagie1 --functions add,sub,mul,div --device cuda --outputs 4 --gens 1 -q >/dev/null 2>&1; done
    python3 - "$bin" "$OUT" <<'PY'
import csv, json, os, statistics as st, subprocess, sys, time
bin_, out = sys.argv[1], sys.argv[2]
rows = []
for s in sorted(os.listdir(".scratch/splits")):
    for k in sorted(os.listdir(f".scratch/splits/{s}"), key=int):
        d = f".scratch/splits/{s}/{k}"
        ys = [float(r["target"]) for r in csv.DictReader(open(f"{d}/test.csv"))]
        res = {}
        for name, g in [("new", f"{bin_}/grove"), ("old", f"{bin_}/old/grove")]:
            rep = f"{out}/{s}_{k}_{name}.json"
            t = time.perf_counter()
            p = subprocess.run([g, "evolve", "--data", f"{d}/train.csv", "--target", "target", "--functions", "add,sub,mul,div",
                                "--device", "cuda", "--outputs", "4", "--seed", str(int(k) + 1), "--report", rep, "-q"], capture_output=True, text=True)
            sec = time.perf_counter() - t
            if p.returncode != 0:
                print(s, k, name, "failed:", p.stderr[-300:]); continue
            pr = subprocess.run([g, "predict", "--model", rep, "--data", f"{d}/test.csv"], capture_output=True, text=True).stdout.split()[1:]
            pred = [float(v) for v in pr[:len(ys)]]
            m = sum(ys) / len(ys)
            r2 = 1 - sum((a - b) ** 2 for a, b in zip(ys, pred)) / sum((a - m) ** 2 for a in ys)
            r = json.load(open(rep))
            res[name] = dict(r2=r2, seconds=sec, model=r["best"]["infix"], search=r["timing"].get("search_seconds"))
        if len(res) == 2:
            rows.append(dict(set=s, split=int(k), **{f"{n}_{f}": v[f] for n, v in res.items() for f in ("r2", "seconds", "search")}, same=res["new"]["model"] == res["old"]["model"]))
json.dump(rows, open(f"{out}/head.json", "w"))
print("set          new R2   old R2  new s  old s  new search  old search  same model")
for s in sorted({r["set"] for r in rows}):
    v = [r for r in rows if r["set"] == s]
    med = lambda f: st.median([r[f] for r in v])
    print(f"{s:12s} {med('new_r2'):7.4f} {med('old_r2'):8.4f} {med('new_seconds'):6.2f} {med('old_seconds'):6.2f} {med('new_search'):10.2f} {med('old_search'):11.2f}  {sum(r['same'] for r in v)}/{len(v)}")
PY
fi
printf '%s\n' "${summary[@]}"
