#!/usr/bin/env bash
# gpu_spread.sh: one episode's step spread over a group of lanes (issue 57 item 1) on a GPU
# machine without a Rust toolchain, with the binaries staged in .device/ (on the build machine:
# `TESTS="cuda_control cuda_kernels" tools/ge/stage.sh`, and for part `robots`
# `cargo build --release --example bench_control_gpu` with target/release/examples/bench_control_gpu
# copied into .device/). Parts (default: parity bench):
#   parity  cuda_control's groups of 2-32 lanes on every shipped env and profile against the CPU
#           (control_with_lanes_per_episode_matches_reference), the kernel's NVRTC build for
#           every env with one lane and with 8 (cuda_kernels), and the rest of cuda_control
#   bench   `grove bench --gpu --gpu-part episodes`: Walker2d, 2048 linear-policy episodes ×
#           1000 steps, the engine's choice (auto) and every width 1-32, µs per step and bits;
#           then the `auto` row again with GROVE_LANES_SHARE set to each of $SHARES (default
#           `1 4`; the default share is 2): which share picks the fastest width
#   robots  bench_control_gpu for $ENVS (default: hopper half_cheetah swimmer walker2d) at
#           $POP (default 64,512) policies × 4 episodes, `full` mode, lanes $LANES
#           (default auto,1,2,4,8,16,32)
# Logs go to $OUT (default ./gpu-spread); the tables are printed last.
set -u
export OUT=${OUT:-gpu-spread}
GPU_DEFAULT_PARTS=${GPU_DEFAULT_PARTS:-parity bench}
source tools/gpu_common.sh
if has parity; then
    for t in "cuda_control lanes lanes_per_episode" "cuda_kernels sim the_simulator_kernel_compiles" "cuda_control rest --skip lanes_per_episode"; do
        set -- $t
        name=$1 tag=$2
        shift 2
        log="$out/test-$name-$tag.log"
        (cd "$root" && "$bin/$name" "$@" --include-ignored --test-threads 1) >"$log" 2>&1
        summary+=("$name $tag: $(grep -E '^test result' "$log" | tail -1 | sed -E 's/; 0 measured.*//')")
        while IFS= read -r line; do summary+=("    $line"); done < <(grep -E "panicked|FAILED|differ" "$log" | head -4)
    done
fi
if has bench; then
    "$bin/grove" bench --genomes 1000 --gpu --gpu-part episodes >"$out/bench.log" 2>&1
    for s in ${SHARES:-1 4}; do
        echo "GROVE_LANES_SHARE=$s:" >>"$out/bench-share.log"
        # The auto row only: the other widths are the same launches as above.
        GROVE_LANES_SHARE=$s "$bin/grove" bench --genomes 1000 --gpu --gpu-part episodes --quick 2>&1 | grep -E '^(lanes|auto) ' >>"$out/bench-share.log"
    done
fi
if has robots; then
    GROVE_BENCH_LANES=${LANES:-auto,1,2,4,8,16,32} GROVE_BENCH_POP=${POP:-64,512} GROVE_BENCH_MODES=full \
        "$bin/bench_control_gpu" ${ENVS:-hopper half_cheetah swimmer walker2d} >"$out/robots.log" 2>&1
fi
printf '%s\n' "${summary[@]}"
for f in bench.log bench-share.log robots.log; do [ -f "$out/$f" ] && { echo; echo "== $f"; cat "$out/$f"; }; done
