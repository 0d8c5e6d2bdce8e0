#!/usr/bin/env bash
# Issue 27's linear terms on a GPU machine (staged: .device/grove and .device/cuda_evolve, packed into
# .scratch/dev.tar.xz, as tools/layout/stage.sh does): the device suite still passes; auto is off
# on the GPU (the device loop as before); `on` runs the joint fit on the host and finds the CPU's model.
set -u
tar -xJf .scratch/dev.tar.xz
export OUT=${OUT:-$PWD/gpu-out}
source tools/gpu_common.sh >/dev/null
(cd "$root" && timeout 300 "$bin/cuda_evolve" --include-ignored --test-threads 1) >"$OUT/test-cuda_evolve.log" 2>&1
python3 - <<'PY'
import random
random.seed(1)
with open("lin.csv", "w") as f:
    f.write("a,b,c,y\n")
    for i in range(2000):
        a, b, c = [random.uniform(-2, 2) for _ in range(3)]
        f.write(f"{a},{b},{c},{3*a - 2*b + 0.5*c + a*b + random.gauss(0, 0.1)}\n")
PY
g="$bin/grove"
$g evolve --data builtin:pagie1 --functions add,sub,mul,div --device cuda --pop 2000 --gens 20 --report "$OUT/auto-gpu.json" -q >"$OUT/auto-gpu.txt" 2>&1
for d in cpu cuda; do
  $g evolve --data lin.csv --functions add,sub,mul,div --device $d --linear-inputs on --pop 1000 --gens 10 --test-fraction 0.25 --report "$OUT/on-$d.json" >"$OUT/on-$d.txt" 2>&1
done
python3 - "$OUT" <<'PY'
import json, sys
o = sys.argv[1]
a = json.load(open(f"{o}/auto-gpu.json"))
print("auto on the GPU:", a["linear_inputs"]["why"], "| device", a["timing"]["device"], "| r2", a["train"]["r2"])
c, g = json.load(open(f"{o}/on-cpu.json")), json.load(open(f"{o}/on-cuda.json"))
print("on, cpu :", c["best"]["infix"], c["test"]["r2"])
print("on, cuda:", g["best"]["infix"], g["test"]["r2"], "| device", g["timing"]["device"])
print("same model on both:", c["best"]["infix"] == g["best"]["infix"] and c["model"] == g["model"])
PY
grep -h "note:" "$OUT/on-cuda.txt" | head -3
cat .device/STAGED; grep -E "^test result|panicked|FAILED" "$OUT/test-cuda_evolve.log" | head -10
