#!/usr/bin/env bash
# gpu_check.sh: control roll-outs on a GPU machine without a Rust toolchain (issue 15 part 1:
# persistent threads refilling from a queue of episodes, and the rigid-body pass in registers).
# Runs binaries built here and copied, stripped, into .device/. Stage them first, on the
# development machine, from the repository root:
#
#   tools/control/stage.sh
#
# then on the GPU machine, from the repository root (each part fits one 10-minute call). The
# device tool sends the session's own checkout, not a helper's worktree: merge, stage in that
# checkout, and name .device in `carry`, e.g. run(command="tools/control/gpu_check.sh parity",
# carry=[".device"]), then the same with bench. .device travels whole (26 MB staged; 64 MiB is
# the limit: clear older stagings out of it first).
#
#   tools/control/gpu_check.sh parity     the GPU parity tests (cuda_control, cuda_sim, backends,
#                                         cuda_evolve): every episode equal to the CPU, bit for bit
#   tools/control/gpu_check.sh bench      bench_control_gpu, falls ending episodes, Hopper,
#                                         Walker2d, HalfCheetah, Swimmer (Brax), 5000 and 20000
#                                         policies × 4 episodes, side by side (below)
#   tools/control/gpu_check.sh w6         grove control, population 5000 × 100 generations
#   tools/control/gpu_check.sh            parity and bench (may take more than 10 minutes)
#
# The bench's variants, each a column of the table printed last:
#   old-bin   .device/old/bench_control_gpu: the commit before the queue, as it ran then
#   old       this benchmark with that commit's sim.cu (GROVE_KERNEL_DIR=.device/kv/old), one
#             thread per episode: the same episodes, so its bits must equal the others'
#   refill    the queue alone (.device/kv/refill: before the unrolling)
#   new       this checkout
#   lb8       this checkout under __launch_bounds__(64, 8): at most 128 registers, spilling
# `bits` hashes every episode's return, length and validity: one value per row means every
# variant played every episode to the same bits. VARIANTS="old new" picks columns; POP, STEPS
# and EPISODES change the shape; TESTS and TEST_TIMEOUT (seconds each, 500) the parity part.
# Logs go to $OUT (default ./gpu-check).
set -u
GPU_DEFAULT_PARTS="parity bench"
# shellcheck source=tools/gpu_common.sh
source "$(dirname "$0")/../gpu_common.sh"
if has parity; then
    for t in ${TESTS:-cuda_control cuda_sim backends cuda_evolve}; do
        [ -x "$bin/$t" ] || { summary+=("parity $t: not staged"); continue; }
        (cd "$root" && timeout "${TEST_TIMEOUT:-500}" "$bin/$t" --include-ignored --test-threads 2) >"$out/test-$t.log" 2>&1
        r=$(grep -E '^test result' "$out/test-$t.log" | tail -1)
        echo "== $t: ${r:-no result}"
        summary+=("parity $t: ${r:-no result (see $out/test-$t.log)}")
        while IFS= read -r line; do summary+=("    $line"); done < <(grep -E -A2 "panicked|differ, the first" "$out/test-$t.log" | head -6)
    done
fi
if has bench; then
    envs="hopper walker2d half_cheetah swimmer"
    export GROVE_BENCH_POP=${POP:-5000,20000} GROVE_BENCH_STEPS=${STEPS:-1000} GROVE_BENCH_EPISODES=${EPISODES:-4}
    for v in ${VARIANTS:-old-bin old refill new lb8}; do
        for env in $envs; do
            log="$out/bench-$v-$env.md"
            case $v in
                # The old benchmark has no mode switch: it plays "full" too (Walker2d's 80M steps
                # at about 1e6/s), so it runs the larger population only.
                old-bin) [ -x "$bin/old/bench_control_gpu" ] && GROVE_BENCH_POP=${POP:-20000} timeout 400 "$bin/old/bench_control_gpu" "$env" >"$log" 2>&1 ;;
                old) GROVE_KERNEL_DIR=$bin/kv/old GROVE_BENCH_GRID=episodes GROVE_BENCH_MODES=falls timeout 400 "$bin/bench_control_gpu" "$env" >"$log" 2>&1 ;;
                new) GROVE_BENCH_MODES=falls timeout 400 "$bin/bench_control_gpu" "$env" >"$log" 2>&1 ;;
                *) GROVE_KERNEL_DIR=$bin/kv/$v GROVE_BENCH_MODES=falls timeout 400 "$bin/bench_control_gpu" "$env" >"$log" 2>&1 ;;
            esac
            echo "== $v $env"; grep -E "falls end|error|Error" "$log" | head -4
        done
    done
fi
if has w6; then
    for run in "swimmer" "hopper" "walker2d"; do
        "$bin/grove" control --env $run --device cuda --pop 5000 --gens 100 --report "$out/w6-$run.json" 2>&1 \
            | tee "$out/w6-$run.log" | grep -v "^gen "
        summary+=("w6 $run: $(grep -E '^time' "$out/w6-$run.log" | head -1)")
    done
fi
echo
echo "== summary"
for s in "${summary[@]}"; do echo "$s"; done
if has bench; then
    python3 - "$out" ${VARIANTS:-old-bin old refill new lb8} <<'PY'
import glob, os, sys
out, variants = sys.argv[1], sys.argv[2:]
rows = {}  # (env, policies) -> {variant: (rate, bits)}
for v in variants:
    for f in glob.glob(f"{out}/bench-{v}-*.md"):
        if "-" in os.path.basename(f)[len(f"bench-{v}-"):]:
            continue  # another variant's (bench-old-bin-* is not old's)
        for line in open(f):
            c = [x.strip() for x in line.strip().strip("|").split("|")]
            if len(c) >= 7 and c[3] == "falls end":
                rows.setdefault((c[0], c[2]), {})[v] = (float(c[6]), c[7] if len(c) > 7 else None)
print("\nenv steps/s with falls ending episodes (Brax profile; bits: one value when every variant agrees)")
print("| env | policies | " + " | ".join(variants) + " | new / old-bin | bits |")
print("|---|---|" + "---|" * (len(variants) + 2))
for (env, pol), r in sorted(rows.items(), key=lambda kv: (kv[0][0], int(kv[0][1].split()[0]))):
    cells = [f"{r[v][0]:.2e}" if v in r else "-" for v in variants]
    ref = r.get("old-bin", r.get("old"))
    gain = f"{r['new'][0] / ref[0]:.1f}x" if "new" in r and ref else "-"
    bits = {b for _, b in r.values() if b}
    print(f"| {env} | {pol} | " + " | ".join(cells) + f" | {gain} | {'=' + next(iter(bits))[:8] if len(bits) == 1 else 'DIFFER ' + ' '.join(sorted(bits))} |")
PY
fi
