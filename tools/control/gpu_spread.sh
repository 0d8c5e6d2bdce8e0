#!/usr/bin/env bash
# gpu_spread.sh: one episode's step spread over a group of lanes (issue 57 item 1) on a GPU
# machine without a Rust toolchain, with the binaries staged in .device/ (on the build machine:
# `OLD_GROVE=target/release/grove PACK=1 tools/layout/stage.sh`, which stages grove, the GPU
# test binaries and .device/BUILD_ROOT, then part `old`'s kernel as below; for part `robots`
# `cargo build --release --example bench_control_gpu` with target/release/examples/bench_control_gpu
# copied into .device/). Parts (default: parity bench prev old):
#   parity  cuda_control's groups of 2-32 lanes on every shipped env and profile against the CPU
#           (control_with_lanes_per_episode_matches_reference), the kernel's NVRTC build for
#           every env with one lane and with 8 (cuda_kernels), and the rest of cuda_control
#   bench   `grove bench --gpu --gpu-part episodes`: Walker2d, 2048 linear-policy episodes ×
#           1000 steps, the engine's choice (auto) and every width 1-32, µs per step and bits;
#           then the `auto` row again with GROVE_LANES_SHARE set to each of $SHARES (default
#           `1 2`; the default share is 4): which share picks the fastest width
#   old     the `bench` part's episodes with sim.cu from before issue 57 (only the constraint
#           rows shared out), staged in $OLD_KERNELS (default .device/old-kernels) by
#           `mkdir -p .device/old-kernels && git show 771801e:kernels/sim.cu >.device/old-kernels/sim.cu`
#           and read through GROVE_KERNEL_DIR (its header is this checkout's, which it ignores
#           the new table of; its groups need no more shared words than this host gives them)
#   prev    the same with sim.cu from before the factor, the free acceleration, Jᵀλ and the
#           kinematics were shared out (831f22c: kinematics and the factor repeated in every
#           lane), staged in $PREV_KERNELS (default .device/prev-kernels) by
#           `mkdir -p .device/prev-kernels && git show 831f22c:kernels/sim.cu >.device/prev-kernels/sim.cu`
#   robots  bench_control_gpu for $ENVS (default: hopper half_cheetah swimmer walker2d) at
#           $POP (default 64,512) policies × 4 episodes, `full` mode, lanes $LANES
#           (default auto,1,2,4,8,16,32), with each sim.cu of $ROBOT_KERNELS (default cur; prev
#           and old as staged for those parts)
# Logs go to $OUT (default ./gpu-spread); the tables are printed last.
set -u
export OUT=${OUT:-gpu-spread}
GPU_DEFAULT_PARTS=${GPU_DEFAULT_PARTS:-parity bench prev old}
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
    for s in ${SHARES:-1 2}; do
        echo "GROVE_LANES_SHARE=$s:" >>"$out/bench-share.log"
        # The auto row only: the other widths are the same launches as above.
        GROVE_LANES_SHARE=$s "$bin/grove" bench --genomes 1000 --gpu --gpu-part episodes --quick 2>&1 | grep -E '^(lanes|auto) ' >>"$out/bench-share.log"
    done
fi
if has old; then
    GROVE_KERNEL_DIR=${OLD_KERNELS:-$PWD/.device/old-kernels} "$bin/grove" bench --genomes 1000 --gpu --gpu-part episodes >"$out/bench-old.log" 2>&1
fi
if has prev; then
    GROVE_KERNEL_DIR=${PREV_KERNELS:-$PWD/.device/prev-kernels} "$bin/grove" bench --genomes 1000 --gpu --gpu-part episodes >"$out/bench-prev.log" 2>&1
fi
if has robots; then
    # ROBOT_KERNELS: which sim.cu plays (cur: this checkout's; prev and old: the staged ones above).
    for k in ${ROBOT_KERNELS:-cur}; do
        case $k in cur) dir= ;; prev) dir=${PREV_KERNELS:-$PWD/.device/prev-kernels} ;; old) dir=${OLD_KERNELS:-$PWD/.device/old-kernels} ;; esac
        echo "== sim.cu: $k" >>"$out/robots.log"
        env ${dir:+GROVE_KERNEL_DIR=$dir} GROVE_BENCH_LANES=${LANES:-auto,1,2,4,8,16,32} GROVE_BENCH_POP=${POP:-64,512} GROVE_BENCH_MODES=full \
            "$bin/bench_control_gpu" ${ENVS:-hopper half_cheetah swimmer walker2d} >>"$out/robots.log" 2>&1
    done
fi
printf '%s\n' "${summary[@]}"
for f in bench.log bench-share.log bench-prev.log bench-old.log robots.log; do [ -f "$out/$f" ] && { echo; echo "== $f"; cat "$out/$f"; }; done
