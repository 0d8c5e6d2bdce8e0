#!/usr/bin/env bash
# map_variants.sh: GE's mapping to trees (issue 30 item 3) of this commit's grove beside another
# commit's, in one lease, on a GPU machine without a Rust toolchain. Binaries staged by
# tools/ge/stage.sh into .device/; the other commit's grove (stripped) at $OLD (default
# .scratch/old/grove).
#
#   tools/ge/map_variants.sh [parity] [bench] [loop] [ncu] ...   (default all)
#
# parity: the GPU suites that map genomes (map_trees, cuda_map, cuda_evolve, cuda_vary).
# bench:  `grove bench --gpu --gpu-part generations` per binary, two rounds alternating: W7's GE
#         generation and `map_trees` alone (codons read per second, trees built included).
# loop:   W7 at 10^6 genomes in the device loop (GROVE_LOOP_PROFILE=1): the mapping stage's
#         milliseconds, and the best program (which must not change).
# ncu:    Nsight Compute on the mapping kernels of one W7 generation at 10^6 genomes.
set -u
# shellcheck source=tools/gpu_common.sh
source "$(dirname "$0")/../gpu_common.sh"
old=${OLD:-.scratch/old/grove}
# The other commit's binary finds its fixtures where it was built ($OLD_ROOT, default /tmp/prev).
old_root=${OLD_ROOT:-/tmp/prev}
[ -e "$old_root" ] || ln -s "$PWD" "$old_root"
# W7 in the device loop: the command line's defaults for evolve (linear terms of the inputs, the
# description-length choice, NSGA-II) would keep selection and mapping on the CPU.
w7() {
    # $1 unquoted: a command with its prefix (ncu and its options) may stand there.
    # shellcheck disable=SC2086
    $1 evolve --grammar grammars/ge-paper.bnf --data builtin:quartic --pop "$2" --gens "$3" --init random \
        --genome-length 128 --device cuda --seed 1 --no-linear-scaling --linear-inputs off --select train \
        --optimise-constants 0 --bloat none --tournament 3 --elite 1 --quiet "${@:4}"
}
if has parity; then
    run_suites "${SUITES:-map_trees cuda_map cuda_evolve cuda_vary}"
fi
if has bench; then
    for round in 1 2; do
        for v in old new; do
            g=$bin/grove
            [ $v = old ] && g=$old
            log="$out/bench-$v-$round.log"
            "$g" bench --gpu --gpu-part generations >"$log" 2>&1
            while IFS= read -r line; do summary+=("bench $v $round: $line"); done < <(grep -E '^(W7|GE regression)' "$log" | sed -E 's/ +/ /g')
            summary+=("    $(grep -E 'launch shapes' "$log" | tail -1 | sed -E 's/ +/ /g')")
        done
    done
fi
if has loop; then
    for v in old new; do
        g=$bin/grove
        [ $v = old ] && g=$old
        log="$out/loop-$v.log"
        GROVE_LOOP_PROFILE=1 w7 "$g" 1000000 10 --report "$out/loop-$v.json" >"$log" 2>&1
        summary+=("loop $v: $(grep -E '^device loop: ' "$log" | sed -E 's/device loop: //; s/ +/ /g' | grep -E 'map|breed|total|search' | tr '\n' ';')")
    done
    python3 - "$out" <<'PY' && summary+=("$(cat "$out/loop-same.txt")")
import json, sys
out = sys.argv[1]
a, b = (json.load(open(f"{out}/loop-{v}.json")) for v in ("old", "new"))
strip = lambda h: [{k: v for k, v in g.items() if k != "seconds"} for g in h]
same = a["best"] == b["best"] and strip(a["generations"]) == strip(b["generations"])
open(f"{out}/loop-same.txt", "w").write(f"loop: new {'EQUALS' if same else 'DIFFERS FROM'} old (best and every generation but its time)")
PY
fi
if has ncu && command -v ncu >/dev/null; then
    for v in old new; do
        g=$bin/grove
        [ $v = old ] && g=$old
        log="$out/ncu-$v.log"
        w7 "timeout 300 ncu --clock-control none --kernel-name regex:grove_map_ --launch-count 6 --section SpeedOfLight \
            --section LaunchStats --section Occupancy --section WarpStateStats --section InstructionStats $g" 1000000 1 >"$log" 2>&1
        summary+=("ncu $v: $(grep -E '^  grove_map|Duration|Executed Instructions  |Achieved Occupancy|Registers Per|Avg. Active Threads Per Warp|Issue Slots Busy' "$log" | awk '{$1=$1};1' | tr '\n' ';')")
    done
fi
printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
tar -czf "$out/logs.tar.gz" -C "$out" --exclude logs.tar.gz . 2>/dev/null
