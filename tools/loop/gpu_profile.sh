#!/usr/bin/env bash
# gpu_profile.sh: where whole runs spend their time, on a GPU machine without a Rust toolchain
# (the grove binary staged in .device/ by tools/ge/stage.sh; another commit's binary as
# .device/grove-old is run beside it). Each workload runs twice per binary with
# GROVE_LOOP_PROFILE=1: the device loop's stages (the islands' setup and the final population's
# read included) and the report's split line. Logs go to $OUT (default ./gpu-check), tarred
# into logs.tar.gz; a short table comes last.
#
#   tools/loop/gpu_profile.sh [w1] [w2] [w4] [w7] ...   (default all)
set -u
# shellcheck source=tools/gpu_common.sh
source "$(dirname "$0")/../gpu_common.sh"
declare -A runs=(
    [w1]="evolve --data builtin:pagie1 --functions add,sub,mul,div,sin,cos,tan --pop 5000 --gens 100 --no-linear-scaling --select train"
    [w2]="evolve --data builtin:pagie1:64 --functions add,sub,mul,div,sin,cos,tan --pop 1000000 --gens 10 --no-linear-scaling --select train"
    [w4]="evolve --data builtin:pagie1:16777216 --functions add,sub,mul,div --pop 50 --gens 50 --no-linear-scaling --select train"
    [w7]="evolve --grammar grammars/ge-paper.bnf --data builtin:quartic --pop 1000000 --gens 10 --init random --genome-length 128 --select train"
)
for w in w1 w2 w4 w7; do
    has "$w" || continue
    for b in grove-old grove; do
        [ -x "$bin/$b" ] || continue
        "$bin/$b" ${runs[$w]} --device cuda --quiet >/dev/null 2>&1  # kernels compiled and cached
        for round in 1 2; do
            log="$out/$w-$b-$round.log"
            # shellcheck disable=SC2086
            GROVE_LOOP_PROFILE=1 "$bin/$b" ${runs[$w]} --device cuda --seed 1 >"$log" 2>&1
            summary+=("$w $b round $round: $(grep -E '^(split|time) ' "$log" | sed -E 's/ +/ /g' | tr '\n' ';')")
            summary+=("    $(grep -E '^device loop: ' "$log" | sed -E 's/device loop: //; s/ +/ /g; s/ \( *[0-9.]+ %\)//' | tr '\n' ';')")
        done
    done
done
printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
tar -czf "$out/logs.tar.gz" -C "$out" --exclude logs.tar.gz . 2>/dev/null
