#!/usr/bin/env bash
# Issue 27: NSGA-II (--bloat nsga2) in the device loop, on a GPU machine. Staged: .device/grove
# (this tree), .device/old/grove (the commit before, whose NSGA-II ranked and bred on the host),
# the test binaries and .device/BUILD_ROOT, packed into .scratch/dev.tar.xz.
#
# Parts (arguments, default all):
#   parity   cuda_vary (pareto_matches_reference: ranks, crowding bits, survivors, tournaments),
#            cuda_evolve (nsga2_on_the_device_equals_the_host_loop and the rest) and cuda_kernels
#   speed    grove evolve --device cuda on pagie1 at populations 10^5 and 10^6: plain
#            tournaments, NSGA-II on the device (this tree) and NSGA-II on the host (old binary):
#            the median generation and the whole search
#   quality  grove evolve --device cuda with each variant of GPU_Q_VARIANTS ("NAME=ARGS;...",
#            default "nsga2=--bloat nsga2;none=--bloat none"; --functions add,sub,mul,div unless
#            ARGS name a set) on the splits staged under .scratch/splits/SET/K/{train,test}.csv:
#            median test R^2, size and seconds per set
# Prints a short table last.
set -u
tar -xJf .scratch/dev.tar.xz
export OUT=${OUT:-$PWD/gpu-out}
source tools/gpu_common.sh
if has parity; then
    for t in cuda_vary cuda_evolve cuda_kernels; do
        [ -x "$bin/$t" ] || continue
        (cd "$root" && timeout 400 "$bin/$t" --include-ignored --test-threads 1) >"$OUT/test-$t.log" 2>&1
        summary+=("$t: $(grep -E '^test result' "$OUT/test-$t.log" | tail -1)")
        grep -E "panicked|FAILED|failed" "$OUT/test-$t.log" | head -5
    done
fi
if has speed; then
    "$bin/grove" evolve --data builtin:pagie1 --functions add,sub,mul,div --device cuda --gens 1 -q >/dev/null 2>&1
    python3 - "$bin" "$OUT" <<'PY'
import json, subprocess, sys, time
bin_, out = sys.argv[1], sys.argv[2]
rows = []
for pop, gens in [(100000, 20), (1000000, 10)]:
    for name, g, extra in [("plain", f"{bin_}/grove", ["--bloat", "none"]), ("nsga2 device", f"{bin_}/grove", ["--bloat", "nsga2"]),
                           ("nsga2 host (old)", f"{bin_}/old/grove", ["--bloat", "nsga2"])]:
        if name.startswith("nsga2 host") and pop > 100000:
            gens = 3
        rep = f"{out}/speed_{pop}_{name.split()[0]}_{len(extra)}_{g.count('old')}.json"
        t = time.perf_counter()
        p = subprocess.run([g, "evolve", "--data", "builtin:pagie1", "--functions", "add,sub,mul,div", "--device", "cuda", "--pop", str(pop),
                            "--gens", str(gens), "--optimise-constants", "0", "--seed", "1", "--report", rep, "-q", *extra],
                           capture_output=True, text=True, timeout=400)
        sec = time.perf_counter() - t
        if p.returncode != 0:
            print(pop, name, "failed:", p.stderr[-400:]); continue
        r = json.load(open(rep))
        gs = [x["seconds"] for x in r["generations"][1:]]
        gs.sort()
        rows.append(dict(pop=pop, run=name, gens=gens, median_ms=1e3 * gs[len(gs) // 2], search_s=r["timing"]["search_seconds"], wall_s=sec,
                         best=r["best"]["fitness"] if "fitness" in r["best"] else None, mean_size=r["generations"][-1]["mean_size"],
                         device_loop="device_loop" in json.dumps(r.get("transfers", {})) or r.get("transfers") is not None))
json.dump(rows, open(f"{out}/nsga2_speed.json", "w"), indent=1)
print("population  run                gens  median gen ms  search s  wall s  last mean size")
for x in rows:
    print(f"{x['pop']:>10}  {x['run']:17s}  {x['gens']:4d}  {x['median_ms']:13.2f}  {x['search_s']:8.2f}  {x['wall_s']:6.2f}  {x['mean_size']:6.1f}")
PY
fi
if has quality; then
    python3 - "$bin" "$OUT" <<'PY'
import csv, json, os, statistics as st, subprocess, sys, time
bin_, out = sys.argv[1], sys.argv[2]
# GPU_Q_VARIANTS="NAME=ARGS;NAME=ARGS" (default: NSGA-II against plain tournaments)
spec = os.environ.get("GPU_Q_VARIANTS", "nsga2=--bloat nsga2;none=--bloat none")
variants = [(v.split("=", 1)[0], v.split("=", 1)[1].split()) for v in spec.split(";") if v.strip()]
rows = []
for s in sorted(os.listdir(".scratch/splits")):
    for k in sorted(os.listdir(f".scratch/splits/{s}"), key=int):
        d = f".scratch/splits/{s}/{k}"
        ys = [float(r["target"]) for r in csv.DictReader(open(f"{d}/test.csv"))]
        for name, extra in variants:
            rep = f"{out}/q_{s}_{k}_{name}.json"
            t = time.perf_counter()
            fs = [] if "--functions" in extra else ["--functions", "add,sub,mul,div"]
            p = subprocess.run([f"{bin_}/grove", "evolve", "--data", f"{d}/train.csv", "--target", "target", *fs,
                                "--device", "cuda", "--seed", str(int(k) + 1), "--report", rep, "-q", *extra], capture_output=True, text=True)
            sec = time.perf_counter() - t
            if p.returncode != 0:
                print(s, k, name, "failed:", p.stderr[-300:]); continue
            pr = subprocess.run([f"{bin_}/grove", "predict", "--model", rep, "--data", f"{d}/test.csv"], capture_output=True, text=True).stdout.split()[1:]
            pred = [float(v) for v in pr[:len(ys)]]
            m = sum(ys) / len(ys)
            r2 = 1 - sum((a - b) ** 2 for a, b in zip(ys, pred)) / sum((a - m) ** 2 for a in ys)
            r = json.load(open(rep))
            rows.append(dict(set=s, split=int(k), run=name, r2=r2, seconds=sec, size=r["best"]["size"]))
json.dump(rows, open(f"{out}/nsga2_quality.json", "w"))
names = [n for n, _ in variants]
print("set          " + "".join(f"{n + ' R2':>14s}" for n in names) + "".join(f"{n + ' size':>14s}" for n in names) + "".join(f"{n + ' s':>12s}" for n in names))
for s in sorted({r["set"] for r in rows}):
    med = lambda run, f: st.median([r[f] for r in rows if r["set"] == s and r["run"] == run] or [float("nan")])
    print(f"{s:12s} " + "".join(f"{med(n, 'r2'):14.4f}" for n in names) + "".join(f"{med(n, 'size'):14.0f}" for n in names)
          + "".join(f"{med(n, 'seconds'):12.2f}" for n in names))
PY
fi
printf '%s\n' "${summary[@]}"
