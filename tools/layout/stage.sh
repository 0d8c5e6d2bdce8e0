#!/usr/bin/env bash
# stage.sh: builds here what tools/layout/gpu_check.sh runs on a GPU machine that has no Rust
# toolchain, and copies it, stripped, into .device/ (git-ignored):
#
#   .device/grove          this checkout's binary
#   .device/old/grove      BASE's binary (the commit before a change that must keep every report)
#   .device/<test>         every test binary that has GPU tests (gated tests or test_device!),
#                          built with GROVE_TEST_GPU=1, and the library's tests
#   .device/BUILD_ROOT     where they were built (they read fixtures there)
#   .device/SUITES         the names of those test binaries, one a line (tools/layout/gpu_suites.sh
#                          runs these, not whatever else a call stages beside them)
#
# Usage, from the repository root: tools/layout/stage.sh           (BASE defaults to 092ab21)
#   PACK=1 tools/layout/stage.sh: the same, packed into .device/pack.tar.xz for the device call
#   BASE=abc1234 tools/layout/stage.sh;  OLD_GROVE=path/to/grove tools/layout/stage.sh
# BASE's binary is built from `git archive` in its own target folder (target/base: the first
# time builds every dependency again, a few minutes) unless OLD_GROVE names one already built.
set -euo pipefail
cd "$(dirname "$0")/../.."
base=${BASE:-092ab21}
rm -rf .device && mkdir -p .device/old
if [ -n "${OLD_GROVE:-}" ]; then
    strip -o .device/old/grove "$OLD_GROVE"
else
    src=target/base-src
    rm -rf "$src" && mkdir -p "$src"
    git archive "$base" | tar -x -C "$src"
    CARGO_TARGET_DIR=$PWD/target/base cargo build --release --bin grove --manifest-path "$src/Cargo.toml" 2>&1 | tail -1
    strip -o .device/old/grove target/base/release/grove
fi
cargo build --release --bin grove 2>&1 | tail -1
strip -o .device/grove target/release/grove
# A test that does not compile must stop the staging, not leave an older binary in place.
GROVE_TEST_GPU=1 cargo test --release --no-run 2>&1 | grep -E '^error' -A8 && { echo "stage.sh: the GPU tests do not build" >&2; exit 1; }
GROVE_TEST_GPU=1 cargo test --release --no-run --message-format=json 2>/dev/null \
    | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] in (["test"], ["lib"]):
        print(m["target"]["name"], m["target"]["kind"][0], m["executable"])
' >.device.list
# The test binaries whose sources name the GPU gate (and the library's own tests).
while read -r name kind exe; do
    if [ "$kind" = lib ]; then
        strip -o .device/lib "$exe"
        echo lib >>.device/SUITES
    elif grep -qE "gpu_tests|test_device!" "tests/$name.rs" 2>/dev/null; then
        strip -o ".device/$name" "$exe"
        echo "$name" >>.device/SUITES
    fi
done <.device.list
rm -f .device.list
pwd >.device/BUILD_ROOT
echo "staged: BASE=$base HEAD=$(git rev-parse --short HEAD)$(git diff --quiet || echo ' (with uncommitted changes)')" | tee .device/STAGED
# PACK=1: the binaries travel as one xz archive (a device call carries at most 64 MiB);
# tools/gpu_common.sh unpacks it there.
if [ "${PACK:-0}" = 1 ]; then
    tar -C .device -cf - . | xz -T2 -9 >.device.tar.xz
    rm -rf .device && mkdir -p .device && mv .device.tar.xz .device/pack.tar.xz
fi
du -sh .device
