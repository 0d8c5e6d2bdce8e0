#!/usr/bin/env bash
# gpu_lanes.sh: one episode over several lanes (GROVE_CTRL_LANES, issue 29 part 4) on a GPU
# machine without a Rust toolchain, with the binaries staged in .device/ (tools/ge/stage.sh,
# then target/release/examples/bench_control_gpu copied there). Parts:
#   parity  cuda_control's tests matching $PARITY (default: lanes, the groups of 2-32 lanes
#           against the CPU), and with PARITY=all every suite of $SUITES whole
#   bench   bench_control_gpu for every robot of $ENVS with the lanes of $LANES (default
#           1,2,4,8,16,32), $POP policies (5000) × 4 episodes, falls ending episodes and full
#   runs    `grove control --env ENV --device cuda --seed 1 $RUN_FLAGS` for every robot of
#           $RUN_ENVS (default walker2d half_cheetah), with GROVE_EPISODE_LANES set to each of
#           $RUN_LANES (default `1 auto`; auto leaves it unset: the engine's choice)
# Logs go to $OUT (default ./gpu-lanes); the tables are printed last.
set -u
export OUT=${OUT:-gpu-lanes}
source tools/gpu_common.sh
if has parity; then
    if [ "${PARITY:-lanes}" = all ]; then
        run_suites "${SUITES:-cuda_control cuda_kernels}"
    else
        (cd "$root" && "$bin/cuda_control" "${PARITY:-lanes}" --include-ignored --test-threads 1) >"$out/test-cuda_control-lanes.log" 2>&1
        summary+=("cuda_control ${PARITY:-lanes}: $(grep -E '^test result' "$out/test-cuda_control-lanes.log" | tail -1 | sed -E 's/; 0 measured.*//')")
        while IFS= read -r line; do summary+=("    $line"); done < <(grep -E "panicked|FAILED" "$out/test-cuda_control-lanes.log" | head -4)
    fi
fi
if has bench; then
    GROVE_BENCH_LANES=${LANES:-1,2,4,8,16,32} GROVE_BENCH_POP=${POP:-5000} "$bin/bench_control_gpu" ${ENVS:-walker2d half_cheetah hopper swimmer} >"$out/bench.log" 2>&1
fi
if has runs; then
    for env in ${RUN_ENVS:-walker2d half_cheetah}; do
        for g in ${RUN_LANES:-1 auto}; do
            (if [ "$g" != auto ]; then export GROVE_EPISODE_LANES=$g; fi
             "$bin/grove" control --env "$env" --device cuda --seed 1 ${RUN_FLAGS:-} --report "$out/$env-$g.json" >"$out/$env-$g.log" 2>&1)
        done
    done
fi
printf '%s\n' "${summary[@]}"
[ -f "$out/bench.log" ] && cat "$out/bench.log"
if has runs; then
    echo; echo "| run | lanes | test return | time (s) | env steps/s |"; echo "|---|---|---|---|---|"
    for f in "$out"/*-[0-9]*.log "$out"/*-auto.log; do
        [ -f "$f" ] || continue
        b=$(basename "$f" .log)
        echo "| ${b%-*} | ${b##*-} | $(grep -E '^test return' "$f" | awk '{print $3, $4, $5}') | $(grep -E '^time' "$f" | awk '{print $2}') | $(grep -oE '[0-9.]+e[+0-9]+ steps/s' "$f" | head -1) |"
    done
fi
