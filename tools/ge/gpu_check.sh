#!/usr/bin/env bash
# gpu_check.sh: issue 13 (grammatical evolution on the device) on a GPU machine without a Rust
# toolchain. Runs binaries built elsewhere and copied, stripped, into .device/ (see
# tools/ge/stage.sh): the GPU parity tests, the command line's device and host loops side by
# side, then the benchmarks; each step's log goes to $OUT (default ./gpu-check).
#
#   tools/ge/gpu_check.sh [parity|cli|bench|all] ...   (default all)
set -u
# shellcheck source=tools/gpu_common.sh
source "$(dirname "$0")/../gpu_common.sh"
if has parity; then
    for t in map_trees cuda_evolve cuda_map cuda_vary backends cuda_kernels cuda_control; do
        [ -x "$bin/$t" ] || continue
        (cd "$root" && "$bin/$t" --include-ignored --test-threads 2) >"$out/test-$t.log" 2>&1
        echo "== $t: $(grep -E '^test result' "$out/test-$t.log" | tail -1)"
        grep -E "panicked|FAILED|first mismatch" "$out/test-$t.log" | head -5
    done
fi
if has cli; then
    # The device loop and the host loop from the command line: the same report but for timings.
    for loop in 1 0; do
        GROVE_DEVICE_LOOP=$loop "$bin/grove" evolve --data builtin:pagie1 --grammar grammars/regression.bnf --device cuda \
            --pop 3000 --gens 30 --report "$out/evolve-loop$loop.json" --quiet >"$out/evolve-loop$loop.log" 2>&1
        GROVE_DEVICE_LOOP=$loop "$bin/grove" classify --data builtin:iris --grammar grammars/classify.bnf --device cuda \
            --pop 2000 --gens 30 --report "$out/classify-loop$loop.json" --quiet >"$out/classify-loop$loop.log" 2>&1
        GROVE_DEVICE_LOOP=$loop "$bin/grove" control --env swimmer --grammar grammars/swimmer.bnf --device cuda \
            --pop 1000 --gens 10 --report "$out/control-loop$loop.json" --quiet >"$out/control-loop$loop.log" 2>&1
    done
    python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
for cmd in ["evolve", "classify", "control"]:
    a, b = (json.load(open(f"{out}/{cmd}-loop{l}.json")) for l in (1, 0))
    # The mean fitness is summed in another order on the device: equal to 1e-9, the rest exactly.
    m = "mean_return" if cmd == "control" else "mean"
    strip = lambda h: [{k: v for k, v in g.items() if k not in ("seconds", m)} for g in h]
    means = all(abs(x[m] - y[m]) <= 1e-9 * abs(y[m]) for x, y in zip(a["generations"], b["generations"]))
    same = a["best"] == b["best"] and strip(a["generations"]) == strip(b["generations"]) and means
    print(f"== {cmd} --grammar: device loop {'EQUALS' if same else 'DIFFERS FROM'} host loop; "
          f"best {str(a['best'].get('infix', a['best'].get('fitness')))[:60]!r}; transfers {a.get('transfers', {}).get('population_bytes_between_generations')}; "
          f"time device {a['timing']} host {b['timing']}")
PY
fi
if has w6; then
    # W6 with GE policies: the shipped grammars, GPU defaults (5000 x 100, 4 episodes).
    for env in swimmer hopper; do
        "$bin/grove" control --env $env --grammar grammars/$env.bnf --device cuda --report "$out/w6-ge-$env.json" \
            --quiet 2>&1 | tee "$out/w6-ge-$env.log" | grep -E "return|time|device loop"
    done
fi
if has bench; then
    "$bin/grove" bench --gpu --gpu-part generations 2>&1 | tee "$out/bench-generations.log" | sed -n '/^generation/,$p'
    "$bin/grove" bench --gpu --quick --gpu-part map 2>&1 | tee "$out/bench-map.log" | sed -n '/^workload/,$p'
    for run in "5000 100"; do
        set -- $run
        /usr/bin/time -f "%e s wall" "$bin/grove" evolve --data builtin:pagie1 --grammar grammars/regression.bnf --device cuda \
            --pop "$1" --gens "$2" --report "$out/w1-ge.json" --quiet 2>&1 | tail -3
        GROVE_LOOP_PROFILE=1 "$bin/grove" evolve --data builtin:pagie1 --grammar grammars/regression.bnf --device cuda \
            --pop "$1" --gens "$2" --quiet 2>&1 | grep "device loop" | tee "$out/w1-ge-profile.log"
    done
fi
