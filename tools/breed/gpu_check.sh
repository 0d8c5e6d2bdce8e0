#!/usr/bin/env bash
# gpu_check.sh: issue 14's breeding (a warp per child) on a GPU machine without a Rust
# toolchain. Runs binaries built elsewhere and copied, stripped, into .device/ (tools/ge/stage.sh
# with TESTS="cuda_vary cuda_evolve backends", plus the binary from before the change as
# .device/grove-old): the GPU parity tests, then the old and new binaries side by side on W1 and
# W2 (per-generation medians and the loop profile, twice each), then Nsight Compute on one
# breeding launch of W1 (time, active threads per warp). Logs go to $OUT (default
# ./gpu-check); a short table comes last.
#
#   tools/breed/gpu_check.sh [parity|bench|profile|all] ...   (default all)
set -u
# shellcheck source=tools/gpu_common.sh
source "$(dirname "$0")/../gpu_common.sh"
if has parity; then
    for t in cuda_vary cuda_evolve backends cuda_eval cuda_control cuda_kernels; do
        [ -x "$bin/$t" ] || continue
        (cd "$root" && timeout 300 "$bin/$t" --include-ignored --test-threads 2) >"$out/test-$t.log" 2>&1
        r=$(grep -E '^test result' "$out/test-$t.log" | tail -1)
        summary+=("parity $t: ${r:-no result (see $out/test-$t.log)}")
        while IFS= read -r line; do summary+=("    $line"); done < <(grep -E -A1 "panicked|first mismatch" "$out/test-$t.log" | head -6)
    done
fi
gen_median() { python3 -c 'import json,sys,statistics as s; g=json.load(open(sys.argv[1]))["generations"][1:]; print("%.3f" % (1e3*s.median(x["seconds"] for x in g)))' "$1" 2>/dev/null; }
w1="--data builtin:pagie1 --functions add,sub,mul,div,sin,cos,tan --pop 5000 --gens 100 --no-linear-scaling --select train --device cuda"
w2="--data builtin:pagie1:64 --functions add,sub,mul,div,sin,cos,tan --pop 1000000 --gens 10 --no-linear-scaling --device cuda"
if has bench; then
    for round in 1 2; do
        for b in grove-old grove; do
            [ -x "$bin/$b" ] || continue
            "$bin/$b" evolve $w1 --quiet --report "$out/w1-$b-$round.json" >/dev/null 2>&1
            "$bin/$b" evolve $w2 --quiet --report "$out/w2-$b-$round.json" >/dev/null 2>&1
            GROVE_LOOP_PROFILE=1 "$bin/$b" evolve $w1 2>&1 | grep "device loop:" | sed "s/device loop: *//" >"$out/w1-profile-$b-$round.log"
            GROVE_LOOP_PROFILE=1 "$bin/$b" evolve $w2 2>&1 | grep "device loop:" | sed "s/device loop: *//" >"$out/w2-profile-$b-$round.log"
            mse=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["train"]["mse"])' "$out/w1-$b-$round.json" 2>/dev/null)
            summary+=("round $round $b: W1 $(gen_median "$out/w1-$b-$round.json") ms/gen (mse $mse); W2 $(gen_median "$out/w2-$b-$round.json") ms/gen")
            while IFS= read -r line; do summary+=("    W1 $line"); done <"$out/w1-profile-$b-$round.log"
            while IFS= read -r line; do summary+=("    W2 $line"); done <"$out/w2-profile-$b-$round.log"
        done
    done
fi
if has profile && command -v ncu >/dev/null; then
    for b in grove-old grove; do
        [ -x "$bin/$b" ] || continue
        timeout 240 ncu --kernel-name grove_breed_trees --launch-skip 50 --launch-count 1 \
            --metrics gpu__time_duration.sum,smsp__thread_inst_executed_per_inst_executed.ratio,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum,smsp__inst_executed.sum \
            "$bin/$b" evolve ${w1/--gens 100/--gens 60} --quiet >"$out/ncu-breed-$b.log" 2>&1
        summary+=("ncu grove_breed_trees (W1, launch 51) $b:")
        while IFS= read -r line; do summary+=("    $line"); done < <(grep -E "gpu__|smsp__|launch__|sm__|dram__|l1tex__" "$out/ncu-breed-$b.log" | sed 's/  */ /g' | head -10)
    done
fi
echo
echo "== summary"
for s in "${summary[@]}"; do echo "$s"; done
