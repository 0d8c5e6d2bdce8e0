#!/usr/bin/env bash
# gpu_check.sh: issue 18's islands on a GPU machine without a Rust toolchain. Runs binaries
# built elsewhere and copied, stripped, into .device/ (stage them with
#   TESTS="cuda_islands cuda_evolve cuda_vary cuda_kernels backends" tools/ge/stage.sh
# ): the GPU tests (islands on one GPU equal the host loop's islands, the several-GPU test when
# there are two), then the measurements:
#   scaling    weak scaling: 10^6 programs per GPU, one island on one GPU against N islands on
#              N GPUs (N = 2, 4 where there are; and two on one GPU), median seconds per
#              generation and the whole run's mean (target: <= 1.05x one);
#   migration  the time of one migration of 1000 programs of 128 nodes (rows of L = 128) between
#              two islands on one GPU, from the loop profile, at islands of 10^4, 10^5 and 10^6
#              (target: <= 1 ms), and between two GPUs when there are two;
#   quality    W1 (examples/w1-pagie1.ron) with 8 islands of 625 against one population of 5000
#              on one GPU, median train MSE over 10 seeds (target: islands better);
#   shards     one population of ${SHARD_POP:-100000} over ${SHARD_ROWS:-200024449} rows (a Pagie-1
#              grid) split over the GPUs (--shard-rows), on every GPU count from the most down
#              to one (or the counts SHARD_GPUS lists): seconds of generation 0, the first population evaluated (targets: 2 GPUs >= 1.85x, 4 >= 3.6x one).
# Logs go to $OUT (default ./gpu-check); a short table comes last.
#
#   tools/islands/gpu_check.sh [parity|scaling|migration|quality|all] ...   (default all)
set -u
# shellcheck source=tools/gpu_common.sh
source "$(dirname "$0")/../gpu_common.sh"
export NCCL_NVLS_ENABLE=0
gpus=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)
if has parity; then
    for t in cuda_islands cuda_evolve cuda_vary cuda_kernels backends; do
        [ -x "$bin/$t" ] || continue
        (cd "$root" && timeout 600 "$bin/$t" --include-ignored --test-threads 1) >"$out/test-$t.log" 2>&1
        r=$(grep -E '^test result' "$out/test-$t.log" | tail -1)
        summary+=("tests $t: ${r:-no result (see $out/test-$t.log)}")
        while IFS= read -r line; do summary+=("    $line"); done < <(grep -E -A2 "panicked|skipped:" "$out/test-$t.log" | head -8)
    done
fi
# Median seconds per generation of a report (generation 0 left out).
gen_ms() { python3 -c 'import json,sys,statistics as s; g=json.load(open(sys.argv[1]))["generations"][1:]; print("%.2f" % (1e3*s.median(x["seconds"] for x in g)))' "$1" 2>/dev/null || echo "?"; }
# Mean seconds per generation over the whole run (generation 0 left out; migrations included).
run_ms() { python3 -c 'import json,sys; g=json.load(open(sys.argv[1]))["generations"][1:]; print("%.2f" % (1e3*sum(x["seconds"] for x in g)/len(g)))' "$1" 2>/dev/null || echo "?"; }
field() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {}, {"r": r}))' "$1" "$2" 2>/dev/null || echo "?"; }
w2="--data builtin:pagie1:64 --functions add,sub,mul,div,sin,cos,tan --pop 1000000 --gens 10 --no-linear-scaling --device cuda --quiet"
if has scaling; then
    "$bin/grove" evolve $w2 --gpus 1 --report "$out/scale-1x1.json" >"$out/scale-1x1.log" 2>&1
    "$bin/grove" evolve $w2 --gpus 1 --islands 2 --migrate-every 5 --migrants 1000 --report "$out/scale-2x1.json" >"$out/scale-2x1.log" 2>&1
    one=$(gen_ms "$out/scale-1x1.json")
    summary+=("scaling: 1 island of 10^6 on 1 GPU: $one ms/gen")
    summary+=("scaling: 2 islands of 10^6 on 1 GPU: $(gen_ms "$out/scale-2x1.json") ms/gen")
    for g in 2 4; do
        if [ "$gpus" -ge $g ]; then
            "$bin/grove" evolve $w2 --gpus $g --islands $g --migrate-every 5 --migrants 1000 --report "$out/scale-${g}x$g.json" >"$out/scale-${g}x$g.log" 2>&1
            many=$(gen_ms "$out/scale-${g}x$g.json")
            ratio=$(python3 -c "print('%.3f' % ($many / $one))" 2>/dev/null || echo "?")
            summary+=("scaling: $g islands of 10^6 on $g GPUs: $many ms/gen = ${ratio}x one GPU (target <= 1.05)  [$(field "$out/scale-${g}x$g.json" 'r["timing"]["device"]')]")
            summary+=("    whole run per generation (migrations included): $(run_ms "$out/scale-1x1.json") ms on 1 GPU, $(run_ms "$out/scale-${g}x$g.json") ms on $g")
        else
            summary+=("scaling: $g GPUs: not measured, the machine has $gpus")
        fi
    done
fi
if has migration; then
    # 20 migrations of 1000 rows of L = 128 (every generation): the loop profile's migration
    # step (which waits for the device) divided by the migrations the report counts.
    for p in 10000 100000 1000000; do
        for g in 1 2; do
            [ "$g" -le "$gpus" ] || continue
            tag="mig-$p-g$g"
            GROVE_LOOP_PROFILE=1 "$bin/grove" evolve --data builtin:pagie1:64 --functions add,sub,mul,div --max-len 128 --pop $p --gens 20 \
                --islands 2 --gpus $g --migrate-every 1 --migrants 1000 --no-linear-scaling --device cuda --report "$out/$tag.json" \
                >"$out/$tag.log" 2>&1
            ms=$(grep "device loop: migration" "$out/$tag.log" | awk '{print $4}')
            n=$(field "$out/$tag.json" 'r["transfers"]["migrations"]')
            bytes=$(field "$out/$tag.json" 'r["transfers"]["migration_bytes"] // max(1, r["transfers"]["migrations"])')
            peer=$(field "$out/$tag.json" 'r["transfers"].get("migration_peer_bytes", 0) // max(1, r["transfers"]["migrations"])')
            per=$(python3 -c "print('%.3f' % ($ms / $n))" 2>/dev/null || echo "?")
            summary+=("migration: 2 islands of $p on $g GPU(s), 1000 rows of L = 128: $per ms each ($n migrations; each $bytes bytes through the host, $peer GPU to GPU; target <= 1 ms)")
        done
    done
fi
if has quality; then
    a=() b=()
    for seed in 1 2 3 4 5 6 7 8 9 10; do
        "$bin/grove" run examples/w1-pagie1.ron --seed $seed --device cuda --quiet --report "$out/w1-one-$seed.json" >/dev/null 2>&1
        "$bin/grove" run examples/w1-pagie1.ron --seed $seed --device cuda --quiet --pop 625 --islands 8 --report "$out/w1-islands-$seed.json" >/dev/null 2>&1
        a+=("$(field "$out/w1-one-$seed.json" 'r["train"]["mse"]')")
        b+=("$(field "$out/w1-islands-$seed.json" 'r["train"]["mse"]')")
    done
    med() { python3 -c 'import sys,statistics as s; v=[float(x) for x in sys.argv[1:] if x != "?"]; print("%.4e (%d runs)" % (s.median(v), len(v)) if v else "?")' "$@"; }
    summary+=("quality W1: one population of 5000: median train MSE $(med "${a[@]}")")
    summary+=("quality W1: 8 islands of 625 (default migration: every 5 generations, 20 migrants): median train MSE $(med "${b[@]}")")
    summary+=("    per seed, one: ${a[*]}")
    summary+=("    per seed, islands: ${b[*]}")
fi
if has shards; then
    for g in ${SHARD_GPUS:-$(seq "$gpus" -1 1)}; do
        timeout "${SHARD_TIMEOUT:-400}" "$bin/grove" evolve --data "builtin:pagie1:${SHARD_ROWS:-200024449}" --functions add,sub,mul,div \
            --pop "${SHARD_POP:-100000}" --gens 0 --max-len 16 --optimise-constants 0 --select train --device cuda --seed 5 \
            --shard-rows --gpus "$g" --quiet --report "$out/shards-$g.json" >"$out/shards-$g.log" 2>&1
        rc=$?
        secs=$(python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(' '.join(f\"{g['seconds']:.3f}\" for g in r['generations']), r['best']['fitness'] if 'fitness' in r['best'] else '')" "$out/shards-$g.json" 2>/dev/null)
        summary+=("shards: $g GPU(s), rc $rc, seconds of generation 0 (the initial population evaluated) and best: $secs")
    done
fi
echo
echo "== summary"
for s in "${summary[@]}"; do echo "$s"; done
