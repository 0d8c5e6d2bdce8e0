#!/usr/bin/env bash
# Issue 27's linear terms of the inputs under a classifier's outputs, on a GPU machine (staged:
# .device/grove, .device/cuda_eval and .device/cuda_evolve, packed into .scratch/dev.tar.xz):
# classify.cu with offsets against the CPU reference; the device loop equals the host loop with
# the terms; then digits on the GPU at the defaults (auto) against --linear-inputs off, and iris,
# wine and breast cancer at the defaults, 10 seeds each.
set -u
tar -xJf .scratch/dev.tar.xz
export OUT=${OUT:-$PWD/gpu-out}
source tools/gpu_common.sh >/dev/null
(cd "$root" && timeout 200 "$bin/cuda_eval" classify_matches_reference --include-ignored --test-threads 1) >"$OUT/test-cuda_eval.log" 2>&1
(cd "$root" && timeout 300 "$bin/cuda_evolve" the_device_loop_equals_the_host_loop_for_classification --include-ignored --test-threads 1) >"$OUT/test-cuda_evolve.log" 2>&1
g="$bin/grove"
for mode in auto off; do
  for seed in 1 2 3 4 5 6 7 8 9 10; do
    $g classify --data builtin:digits --device cuda --linear-inputs $mode --seed $seed --report "$OUT/digits-$mode-$seed.json" -q >/dev/null 2>"$OUT/digits-$mode-$seed.err"
  done
done
for d in iris wine breast_cancer; do
  for seed in 1 2 3 4 5 6 7 8 9 10; do
    $g classify --data builtin:$d --device cuda --seed $seed --report "$OUT/$d-auto-$seed.json" -q >/dev/null 2>"$OUT/$d-auto-$seed.err"
  done
done
python3 - "$OUT" <<'PY'
import json, sys, statistics as st, glob
o = sys.argv[1]
for name, mode in [("digits", "auto"), ("digits", "off"), ("iris", "auto"), ("wine", "auto"), ("breast_cancer", "auto")]:
    rs = [json.load(open(f)) for f in sorted(glob.glob(f"{o}/{name}-{mode}-*.json"))]
    acc = [r["test"]["accuracy"] for r in rs]
    sec = [r["timing"]["seconds"] for r in rs]
    size = [r["best"]["size"] for r in rs]
    print(f"{name} {mode}: runs {len(rs)} median test accuracy {st.median(acc):.4f} (min {min(acc):.4f}, max {max(acc):.4f}) median size {st.median(size)} median seconds {st.median(sec):.2f} device {rs[0]['timing']['device']} | {rs[0]['linear_inputs']['why'][:90]}")
PY
cat .device/STAGED
for t in cuda_eval cuda_evolve; do echo "$t: $(grep -E '^test result' "$OUT/test-$t.log" | tail -1)"; grep -E "panicked|FAILED" "$OUT/test-$t.log" | head -5; done
