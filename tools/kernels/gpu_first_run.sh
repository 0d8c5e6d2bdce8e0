#!/usr/bin/env bash
# gpu_first_run.sh: on a GPU machine, what a run's first kernel compiles cost, for the binaries
# staged in .device/ (grove, and old/grove to compare against), side by side and in alternating
# order (A B B A per command). Every run gets an empty grove cache (GROVE_CACHE_DIR) and kernel
# texts of its own (each kernels/*.cu with a nonce comment, through GROVE_KERNEL_DIR), so that
# no cache answers, neither grove's nor one outside it (most likely NVRTC's own, CUDA 12.9 and
# later), which answered the second of two binaries compiling the same texts
# (docs/benchmarks.md, 2026-12-07). Prints
# each run's wall seconds, the modules compiled, the seconds the run waited for them
# (timing.kernel_seconds) and its first generation's seconds. COMMANDS (one per line) replaces
# the default commands; `--device cuda` (or $DEVICE), `--quiet` and `--report` are added.
#
#   OUT=$OUT bash tools/kernels/gpu_first_run.sh
#   DEVICE=cpu COMMANDS="evolve --data builtin:pagie1 --gens 2" bash tools/kernels/gpu_first_run.sh   # checks the script
set -u
# shellcheck source=tools/gpu_common.sh
source "$(dirname "$0")/../gpu_common.sh"
commands=${COMMANDS:-"control --env hopper --gens 3
control --env walker2d --policy linear --gens 4
evolve --data builtin:pagie1 --functions add,sub,mul,aq --gens 5
classify --data builtin:wine --gens 5"}
n=0
while IFS= read -r cmd; do
    [ -n "$cmd" ] || continue
    for b in new old old new; do
        exe=$bin/grove
        [ "$b" = old ] && exe=$bin/old/grove
        [ -x "$exe" ] || continue
        n=$((n + 1))
        cache=$(mktemp -d) texts=$(mktemp -d)
        for f in kernels/*.cu; do { cat "$f"; echo "// nonce $n $RANDOM$RANDOM"; } >"$texts/$(basename "$f")"; done
        rep=$out/first-$n.json
        s=$(date +%s.%N)
        # shellcheck disable=SC2086
        GROVE_CACHE_DIR=$cache GROVE_KERNEL_DIR=$texts timeout 300 "$exe" $cmd --device "${DEVICE:-cuda}" --quiet --report "$rep" >/dev/null 2>"$rep.err"
        e=$(date +%s.%N)
        python3 - "$rep" "$b $cmd" "$s" "$e" <<'PY'
import json, sys
rep, label, s, e = sys.argv[1:]
try:
    t = json.load(open(rep))["timing"]
    print(f"{label[:60]:60s} wall {float(e) - float(s):5.1f} s  compiled {t.get('kernels_compiled')}  waited {t.get('kernel_seconds') or 0:5.1f} s  first generation {t.get('first_generation_seconds') or 0:5.1f} s")
except Exception as err:
    print(f"{label[:60]:60s} FAILED: {err}; {open(rep + '.err').read()[-300:]}")
PY
        rm -rf "$cache" "$texts"
    done
done <<<"$commands"
printf '%s\n' "${summary[@]}"
