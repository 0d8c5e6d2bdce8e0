#!/usr/bin/env bash
# gpu_head.sh: issue 29's device normaliser and tuned head on a GPU machine without a Rust
# toolchain, with the binaries staged in .device/ (tools/ge/stage.sh) and, for `linear`, the
# commit before's grove in .scratch/old/grove. Parts:
#   parity   the suites that play the roll-out kernel ($SUITES, default cuda_control, cuda_sim,
#            cuda_kernels, cuda_evolve), on GPU 0
#   linear   `grove control --policy linear` at the defaults (100 iterations) on every robot of
#            ENVS, this commit's binary (observation sums from the perturbed policies' roll-outs,
#            on the device) against the commit before's (the unperturbed policy's, played on the
#            CPU), on the last GPU, side by side with parity
#   head     `grove control --policy residual $HEAD` (default: --head-every 5 --head-iterations 5)
#            then `--policy linear` with a time limit of its whole seconds, the robots spread over
#            the GPUs (one process per GPU)
# Reports and logs go to $OUT (default ./gpu-head); a table is printed last.
set -u
export OUT=${OUT:-gpu-head}
source tools/gpu_common.sh
gpus=${GPUS:-$(nvidia-smi --list-gpus | wc -l)}
last=$((gpus - 1))
read -ra envs <<<"${ENVS:-swimmer hopper walker2d half_cheetah}"
HEAD=${HEAD:---head-every 5 --head-iterations 5}
row() { # label log
    echo "| $1 | $(grep -E '^train return' "$2" | awk '{print $3}') | $(grep -E '^test return' "$2" | awk '{print $3, $4, $5}') | $(grep -E '^time' "$2" | awk '{print $2}') | $(grep -oE '[0-9.]+e[+0-9]+ steps/s' "$2" | head -1) |"
}
# With one GPU the parts run one after another; with more, parity and linear side by side.
bg() { if ((gpus > 1)); then "$@" & else "$@"; fi; }
suites() { (export CUDA_VISIBLE_DEVICES=0; run_suites "${SUITES:-cuda_control cuda_sim cuda_kernels cuda_evolve}"; printf '%s\n' "${summary[@]}" >"$out/parity.txt"); }
linear() {
    (
        export CUDA_VISIBLE_DEVICES=$last
        for env in "${envs[@]}"; do
            "$bin/grove" control --env "$env" --policy linear --device cuda --report "$out/$env-linear-new.json" >"$out/$env-linear-new.log" 2>&1
            [ -x .scratch/old/grove ] && .scratch/old/grove control --env "$env" --policy linear --device cuda --report "$out/$env-linear-old.json" >"$out/$env-linear-old.log" 2>&1
        done
    )
}
has parity && bg suites
has linear && bg linear
wait
[ -f "$out/parity.txt" ] && mapfile -t summary <"$out/parity.txt"
robot() { # env gpu
    local env=$1 limit
    export CUDA_VISIBLE_DEVICES=$2
    # shellcheck disable=SC2086
    "$bin/grove" control --env "$env" --policy residual --device cuda $HEAD --report "$out/$env-head.json" >"$out/$env-head.log" 2>&1
    limit=$(python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))['timing']['seconds'], 1))" "$out/$env-head.json" 2>/dev/null || echo 60)
    "$bin/grove" control --env "$env" --policy linear --device cuda --gens 100000 --time-limit "$limit" --report "$out/$env-same-time.json" >"$out/$env-same-time.log" 2>&1
}
if has head; then
    for ((g = 0; g < gpus; g++)); do
        (for ((i = g; i < ${#envs[@]}; i += gpus)); do robot "${envs[$i]}" "$g"; done) &
    done
    wait
fi
echo; echo "| run | train return | test return | time (s) | env steps/s |"; echo "|---|---|---|---|---|"
for env in "${envs[@]}"; do
    for kind in linear-old linear-new head same-time; do
        [ -f "$out/$env-$kind.log" ] && row "$env $kind" "$out/$env-$kind.log"
    done
done
for l in "${summary[@]}"; do echo "$l"; done
