#!/usr/bin/env bash
# gpu_lexicase_ab.sh: on a GPU machine, with binaries staged in .device/ (grove, and the
# binary to compare against as old/grove; cuda_vary built with GROVE_TEST_GPU=1 if present):
# lexicase's parity on the device, then a generation's median milliseconds of both binaries
# side by side in one call: tree GP on Pagie-1's 676-point grid (68 down-sampled cases) and its
# 1024 rows (103), at populations $POPS (default 100000 1000000), under tournaments and
# down-sampled lexicase with each of $POOLS (default: the default pool). The table's last
# column is each lexicase row over the same binary's tournament row. DEVICE=cpu with small POPS
# checks the script itself on a machine without a GPU.
set -u
# shellcheck source=tools/gpu_common.sh
source "$(dirname "$0")/../gpu_common.sh"
if [ -x "$bin/cuda_vary" ]; then
    (cd "$root" && timeout 240 "$bin/cuda_vary" --include-ignored --test-threads 8 lexicase) >"$out/vary.log" 2>&1
    summary+=("cuda_vary lexicase: $(grep -E '^test result' "$out/vary.log" | tail -1 | sed -E 's/; 0 measured.*//')")
fi
med() {
    python3 -c "
import json, sys, statistics as st
g = json.load(open(sys.argv[1]))['generations']
s = [x['seconds'] for x in g[1:-1]] or [g[0]['seconds']]
print(f'{st.median(s) * 1000:.1f}')" "$1"
}
run() { # binary data pop gens selection... -> median ms, or FAIL
    local exe=$1 data=$2 p=$3 gens=$4 rep
    shift 4
    rep=$out/ab-$RANDOM.json
    # shellcheck disable=SC2068
    if timeout 120 "$exe" evolve --functions add,sub,mul,aq --data "$data" --pop "$p" --gens "$gens" --device "${DEVICE:-cuda}" \
        --linear-inputs off --select train --selection $@ --quiet --report "$rep" >/dev/null 2>"$out/ab-err.txt"; then
        med "$rep"
    else
        echo FAIL
    fi
}
for b in "$bin/grove" "$bin/old/grove"; do # the kernels compiled before the timings
    [ -x "$b" ] && run "$b" builtin:pagie1 1000 2 down-sampled >/dev/null
done
printf '%-20s %-8s %-6s %-32s %9s %5s\n' data pop binary selection "ms/gen" "×"
for p in ${POPS:-100000 1000000}; do
    gens=$([ "$p" -ge 1000000 ] && echo 6 || echo 10)
    for data in builtin:pagie1:676 builtin:pagie1; do
        for b in new old; do
            exe=$bin/grove
            [ "$b" = old ] && exe=$bin/old/grove
            [ -x "$exe" ] || continue
            t=$(run "$exe" "$data" "$p" "$gens" tournament --bloat none)
            printf '%-20s %-8s %-6s %-32s %9s %5s\n' "$data" "$p" "$b" "tournament" "$t" 1
            for pool in ${POOLS:-default}; do
                flags=down-sampled
                [ "$pool" = default ] || flags="down-sampled --lexicase-pool $pool"
                l=$(run "$exe" "$data" "$p" "$gens" $flags)
                r=$(python3 -c "import sys; a, b = sys.argv[1:]; print(f'{float(a) / float(b):.2f}' if 'FAIL' not in (a, b) else '-')" "$l" "$t")
                printf '%-20s %-8s %-6s %-32s %9s %5s\n' "$data" "$p" "$b" "$flags" "$l" "$r"
            done
        done
    done
done
printf '%s\n' "${summary[@]}"
