#!/usr/bin/env bash
# gpu_lexicase_profile.sh: on a GPU machine, with binaries staged by tools/layout/stage.sh:
# where a device-loop generation's time goes (GROVE_LOOP_PROFILE=1, the loop waiting after each
# step) under tournaments, down-sampled lexicase and lexicase, tree GP on Pagie-1 at
# population P (default 1000000).
set -u
# shellcheck source=tools/gpu_common.sh
source "$(dirname "$0")/../gpu_common.sh" profile
g=$bin/grove
p=${P:-1000000}
for sel in "tournament --bloat none" "down-sampled" "lexicase"; do
    echo "== --selection $sel, pop $p =="
    # shellcheck disable=SC2086
    GROVE_LOOP_PROFILE=1 timeout 120 "$g" evolve --functions add,sub,mul,aq --data builtin:pagie1 --pop "$p" --gens 4 --device cuda \
        --linear-inputs off --selection $sel --quiet --report "$out/profile.json" 2>&1 >/dev/null | grep "device loop" | sort -t'(' -k2 -rn | head -8
done
