#!/usr/bin/env bash
# stage.sh: builds here what tools/control/gpu_check.sh runs on a GPU machine that has no Rust
# toolchain, and copies it, stripped, into .device/ (git-ignored):
#
#   .device/grove, .device/bench_control_gpu      this checkout's binary and benchmark
#   .device/cuda_control cuda_sim backends cuda_evolve
#                                                 the GPU tests (built with GROVE_TEST_GPU=1)
#   .device/BUILD_ROOT                            where they were built (they read fixtures there)
#   .device/old/bench_control_gpu                 the benchmark of BASE, the kernel before the
#                                                 queue as it ran then (its own header and host)
#   .device/kv/old/sim.cu                         BASE's kernels/sim.cu   } kernel variants for
#   .device/kv/refill/sim.cu                      REFILL's (the queue,    } GROVE_KERNEL_DIR with
#                                                 before the unrolling)   } this checkout's
#   .device/kv/lb8/sim.cu                         this sim.cu under       } benchmark
#                                                 __launch_bounds__(64, 8) (≤ 128 registers)
#
# Usage, from the repository root (BASE and REFILL are commits; defaults: the commit before the
# queue and the queue's own):
#
#   tools/control/stage.sh
#   BASE=87ca19c REFILL=299ef4c tools/control/stage.sh
#
# BASE's benchmark is built from `git archive` in its own target folder (target/base: the first
# time builds every dependency again, a few minutes); OLD_BIN=0 skips it (then only the kernel
# variants compare, e.g. BASE=HEAD OLD_BIN=0 for uncommitted kernel changes).
set -euo pipefail
cd "$(dirname "$0")/../.."
base=${BASE:-87ca19c}
refill=${REFILL:-299ef4c}
rm -rf .device/old .device/kv
mkdir -p .device/old .device/kv/old .device/kv/refill .device/kv/lb8
# BASE first: its own sources and target folder, so this checkout's artifacts stay as they are.
if [ "${OLD_BIN:-1}" != 0 ]; then
    src=target/base-src
    rm -rf "$src" && mkdir -p "$src"
    git archive "$base" | tar -x -C "$src"
    CARGO_TARGET_DIR=$PWD/target/base cargo build --release --example bench_control_gpu --manifest-path "$src/Cargo.toml" 2>&1 | tail -1
    strip -o .device/old/bench_control_gpu target/base/release/examples/bench_control_gpu
fi
git show "$base:kernels/sim.cu" >.device/kv/old/sim.cu
git show "$refill:kernels/sim.cu" >.device/kv/refill/sim.cu
{ echo '#define GROVE_CTRL_BOUNDS __launch_bounds__(64, 8)'; cat kernels/sim.cu; } >.device/kv/lb8/sim.cu
# This checkout.
cargo build --release --bin grove --example bench_control_gpu 2>&1 | tail -1
strip -o .device/grove target/release/grove
strip -o .device/bench_control_gpu target/release/examples/bench_control_gpu
# A test that does not compile must stop the staging, not leave an older binary in place.
GROVE_TEST_GPU=1 cargo test --release --no-run 2>&1 | grep -E '^error' -A8 && { echo "stage.sh: the GPU tests do not build" >&2; exit 1; }
GROVE_TEST_GPU=1 cargo test --release --no-run --message-format=json 2>/dev/null \
    | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        print(m["target"]["name"], m["executable"])
' >.device.list
while read -r name exe; do
    case " ${TESTS:-cuda_control cuda_sim backends cuda_evolve} " in
        *" $name "*) strip -o ".device/$name" "$exe" ;;
    esac
done <.device.list
rm -f .device.list
pwd >.device/BUILD_ROOT
echo "staged: BASE=$base REFILL=$refill HEAD=$(git rev-parse --short HEAD)$(git diff --quiet || echo ' (with uncommitted changes)')" | tee .device/STAGED
du -sh .device
