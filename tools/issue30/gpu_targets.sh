#!/usr/bin/env bash
# gpu_targets.sh: issue 30's targets and acceptance, this commit's grove beside the commit
# before's, in one lease, on a GPU machine without a Rust toolchain. Binaries staged by
# tools/ge/stage.sh into .device/; the commit before's grove (stripped) at $OLD (default
# .scratch/old/grove). Parts (default all):
#
#   parity   every GPU parity suite staged (each with --include-ignored)
#   same     W1, W5 (Iris) and a fitted classification run (Digits) from the command line with
#            both binaries: the same best program, fitted constants, fitness bits and history
#   runs     `grove bench --gpu --gpu-part runs` (W1, W2, W4 whole runs and their split), both
#   eval     `grove bench --gpu --quick --gpu-part eval` (W3's kernel GPop/s), both, and this
#            commit's with the K = 8 kernels under a 128-register bound ($K8_DIR, a kernel folder)
#   gens     `grove bench --gpu --gpu-part generations` (GE mapping codons/s, W7), both
#   round    a fitting round against one evaluation of the same programs (GROVE_LOOP_PROFILE=1,
#            constants fitted every generation on a fifth of the population), both
#   fit      `grove bench --gpu --gpu-part fit`: a fitting pass timed against one evaluation of
#            the same trees, directly (this commit's binary)
#   shapes   `grove bench --gpu --gpu-part eval` (every launch shape, 32-thread warps per tree
#            among them, and the small data sets), this commit's binary: kernel ms per shape
#   loop     GROVE_LOOP_PROFILE=1 on W1 and W2 in the device loop without fitting, both: where a
#            generation's time goes between the kernels and the host
#   ncu      Nsight Compute on the fit kernels of W4 (the split fit) and of W1, on W3's
#            evaluation kernel, and on every kernel of one W1 and one W2 generation (device loop,
#            no fitting), summed by kernel
set -u
# shellcheck source=tools/gpu_common.sh
source "$(dirname "$0")/../gpu_common.sh"
old=${OLD:-.scratch/old/grove}
# The other commit's binary finds its fixtures where it was built ($OLD_ROOT, default /tmp/prev,
# the worktree it is built in): point there too.
old_root=${OLD_ROOT:-/tmp/prev}
[ -e "$old_root" ] || ln -s "$PWD" "$old_root"
both() { echo "old:$old new:$bin/grove"; }
if has parity; then
    TEST_THREADS=${TEST_THREADS:-4} run_suites "${SUITES:-map_trees cuda_map cuda_evolve cuda_vary cuda_fit cuda_eval cuda_kernels cuda_control cuda_islands cuda_sim backends}"
fi
if has same; then
    declare -A cmds=(
        [w1]="evolve --data builtin:pagie1 --functions add,sub,mul,div,sin,cos,tan --pop 5000 --gens 100 --no-linear-scaling --select train"
        [w5]="classify --data builtin:iris"
        [digits]="classify --data builtin:digits --pop 5000 --gens 10 --optimise-constants 5 --optimise-every 1 --optimise-fraction 0.2"
    )
    for w in w1 w5 digits; do
        for vb in $(both); do
            v=${vb%%:*} b=${vb#*:}
            # shellcheck disable=SC2086
            "$b" ${cmds[$w]} --device cuda --seed 1 --quiet --report "$out/same-$w-$v.json" >/dev/null 2>&1
        done
        python3 - "$out" "$w" <<'PY' >>"$out/same.txt"
import json, sys
out, w = sys.argv[1], sys.argv[2]
a, b = (json.load(open(f"{out}/same-{w}-{v}.json")) for v in ("old", "new"))
strip = lambda h: [{k: v for k, v in g.items() if k != "seconds"} for g in h]
same = a["best"] == b["best"] and strip(a["generations"]) == strip(b["generations"]) and a.get("hall_of_fame") == b.get("hall_of_fame")
best = a["best"]
print(f"same {w}: new {'EQUALS' if same else 'DIFFERS FROM'} old (best, its constants and fitness bits, every generation, hall of fame); "
      f"best fitness {best.get('fitness')!r}, {len(a['generations'])} generations")
PY
    done
    while IFS= read -r line; do summary+=("$line"); done <"$out/same.txt"
fi
if has runs; then
    for round in $(seq "${ROUNDS:-2}"); do
        for vb in $(both); do
            v=${vb%%:*} b=${vb#*:}
            "$b" bench --gpu --gpu-part runs >"$out/runs-$v-$round.log" 2>&1
            while IFS= read -r line; do summary+=("runs $v $round: $line"); done < <(grep -E '^W[0-9]' "$out/runs-$v-$round.log" | sed -E 's/ +/ /g')
        done
    done
fi
if has eval; then
    for vb in $(both) ${K8_DIR:+k8:$bin/grove}; do
        v=${vb%%:*} b=${vb#*:}
        if [ "$v" = k8 ]; then
            GROVE_KERNEL_DIR=$K8_DIR "$b" bench --gpu --quick --gpu-part eval >"$out/eval-$v.log" 2>&1
        else
            "$b" bench --gpu --quick --gpu-part eval >"$out/eval-$v.log" 2>&1
        fi
        while IFS= read -r line; do summary+=("eval $v: $line"); done < <(grep -E '^(W3|100k|W1|W2)' "$out/eval-$v.log" | sed -E 's/ +/ /g')
    done
fi
if has gens; then
    for vb in $(both); do
        v=${vb%%:*} b=${vb#*:}
        "$b" bench --gpu --gpu-part generations >"$out/gens-$v.log" 2>&1
        while IFS= read -r line; do summary+=("gens $v: $line"); done < <(grep -E '^(W7|GE regression)' "$out/gens-$v.log" | sed -E 's/ +/ /g')
    done
fi
if has round; then
    for P in 5000 100000; do
        for vb in $(both); do
            v=${vb%%:*} b=${vb#*:}
            log="$out/round-$P-$v.log"
            GROVE_LOOP_PROFILE=1 "$b" evolve --data builtin:pagie1 --functions add,sub,mul,div,sin,cos,tan --pop $P --gens 10 \
                --no-linear-scaling --select train --optimise-constants 10 --optimise-every 1 --optimise-fraction 0.2 --device cuda \
                --seed 1 >"$log" 2>&1
            summary+=("round P=$P $v: $(grep -E '^device loop: +(evaluate|constants) ' "$log" | sed -E 's/device loop: //; s/ +/ /g; s/ \( *[0-9.]+ %\)//' | tr '\n' ';')")
        done
    done
fi
if has loop; then
    for w in "w1 pagie1 5000 100" "w2 pagie1:64 1000000 10"; do
        read -r name src p g <<<"$w"
        for vb in $(both); do
            v=${vb%%:*} b=${vb#*:}
            GROVE_LOOP_PROFILE=1 "$b" evolve --data "builtin:$src" --functions add,sub,mul,div,sin,cos,tan --pop "$p" --gens "$g" \
                --no-linear-scaling --linear-inputs off --select train --optimise-constants 0 --bloat none --tournament 3 --elite 1 \
                --device cuda --seed 1 --quiet >"$out/loop-$name-$v.log" 2>&1
            summary+=("loop $name $v: $(grep -E '^device loop:' "$out/loop-$name-$v.log" | sed -E 's/device loop: //; s/ +/ /g' | tr '\n' ';')")
        done
    done
fi
if has fit; then
    "$bin/grove" bench --gpu --gpu-part fit >"$out/fit.log" 2>&1
    while IFS= read -r line; do summary+=("fit: $line"); done < <(grep -E '^(fitting|W1|10\^5|W4|error)' "$out/fit.log" | sed -E 's/ +/ /g')
fi
if has shapes; then
    "$bin/grove" bench --gpu --gpu-part eval >"$out/shapes.log" 2>&1
    # Each shape's kernel milliseconds (CUDA events): the table's ninth column from the right.
    while IFS= read -r line; do summary+=("shapes: $line"); done < <(grep -E '^(W2|W1-|W3|100k x 128)' "$out/shapes.log" \
        | awk '{n = NF; printf "%s | %s x %s | kernel %s ms\n", $1" "$2" "$3" "$4, $(n-9), $(n-8), $(n-3)}')
fi
if has ncu && command -v ncu >/dev/null; then
    M=gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__grid_size,launch__block_size,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__thread_inst_executed_per_inst_executed.ratio,sm__cycles_active.avg
    timeout 200 ncu --clock-control none --kernel-name regex:grove_fit --launch-count 6 --csv --metrics $M "$bin/grove" evolve \
        --data builtin:pagie1:16777216 --functions add,sub,mul,div --pop 50 --gens 5 --no-linear-scaling --select train \
        --optimise-every 5 --device cuda --seed 1 --quiet >"$out/ncu-w4.csv" 2>&1
    timeout 200 ncu --clock-control none --kernel-name regex:grove_fit --launch-skip 2 --launch-count 1 --csv --metrics $M "$bin/grove" evolve \
        --data builtin:pagie1 --functions add,sub,mul,div,sin,cos,tan --pop 5000 --gens 10 --no-linear-scaling --select train \
        --device cuda --seed 1 --quiet >"$out/ncu-w1.csv" 2>&1
    M3=$M,smsp__thread_inst_executed.sum,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,smsp__average_warp_latency_issue_stalled_short_scoreboard.ratio
    timeout 200 ncu --clock-control none --kernel-name regex:grove_eval_regression_k4 --launch-skip 3 --launch-count 1 --csv --metrics $M3 \
        "$bin/grove" bench --gpu --quick --gpu-part eval >"$out/ncu-w3.csv" 2>&1
    # One generation's kernels: a run with no fitting, profiled from the fourth generation on
    # (launches counted from the first; the summary adds them up by kernel).
    loop="--no-linear-scaling --linear-inputs off --select train --optimise-constants 0 --bloat none --tournament 3 --elite 1 --device cuda --seed 1 --quiet"
    # shellcheck disable=SC2086
    timeout 200 ncu --clock-control none --print-units base --launch-skip 120 --launch-count 40 --csv --metrics $M "$bin/grove" evolve \
        --data builtin:pagie1 --functions add,sub,mul,div,sin,cos,tan --pop 5000 --gens 12 $loop >"$out/ncu-g1.csv" 2>&1
    # shellcheck disable=SC2086
    timeout 200 ncu --clock-control none --print-units base --launch-skip 120 --launch-count 40 --csv --metrics $M "$bin/grove" evolve \
        --data builtin:pagie1:64 --functions add,sub,mul,div,sin,cos,tan --pop 1000000 --gens 12 $loop >"$out/ncu-g2.csv" 2>&1
    python3 - "$out" <<'PY' >"$out/ncu.txt"
import csv, sys
out = sys.argv[1]
for w in ("g1", "g2"):
    # Every kernel of the launches profiled, summed by name: launches, time, and the
    # time-weighted warps active and issue slots busy.
    by = {}
    for r in csv.reader(open(f"{out}/ncu-{w}.csv")):
        if len(r) > 10 and r[0].isdigit():
            by.setdefault(int(r[0]), {"name": r[4].split("(")[0]})[r[-3].split("__")[-1]] = r[-1]
    agg = {}
    for m in by.values():
        t = float(m.get("time_duration.sum", "0").replace(",", "") or 0)
        a = agg.setdefault(m["name"], [0, 0.0, 0.0, 0.0, m.get("registers_per_thread", "?")])
        a[0] += 1
        a[1] += t
        a[2] += t * float(m.get("warps_active.avg.pct_of_peak_sustained_active", "0").replace(",", "") or 0)
        a[3] += t * float(m.get("issue_active.avg.pct_of_peak_sustained_active", "0").replace(",", "") or 0)
    total = sum(a[1] for a in agg.values()) or 1.0
    for name, a in sorted(agg.items(), key=lambda kv: -kv[1][1]):
        print(f"ncu {w} {name}: launches={a[0]} time={a[1]:.0f} ({100 * a[1] / total:.0f} %) regs={a[4]} "
              f"warps_active={a[2] / max(a[1], 1e-9):.1f} issue_active={a[3] / max(a[1], 1e-9):.1f}")
for w in ("w4", "w1", "w3"):
    by = {}
    for r in csv.reader(open(f"{out}/ncu-{w}.csv")):
        if len(r) > 10 and r[0].isdigit():
            by.setdefault((int(r[0]), r[4].split("(")[0]), {})[r[-3].split("__")[-1]] = r[-1]
    for (i, name), m in sorted(by.items()):
        print(f"ncu {w} {i} {name}: " + " ".join(f"{k}={v}" for k, v in m.items()))
PY
    while IFS= read -r line; do summary+=("$line"); done <"$out/ncu.txt"
fi
printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
tar -czf "$out/logs.tar.gz" -C "$out" --exclude logs.tar.gz --exclude '*.json' . 2>/dev/null
