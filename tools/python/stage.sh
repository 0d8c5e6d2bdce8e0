#!/usr/bin/env bash
# stage.sh: builds, here, what tools/python/gpu_check.sh needs on a GPU machine and puts it in
# .device/ (git-ignored): the Python package's wheel for every CPython from 3.9 (the stable ABI:
# .device/wheels/grove-VERSION-cp39-abi3-linux_x86_64.whl, by `maturin build --release`) and the
# grove binary, stripped (.device/grove), whose runs the GPU tests compare with.
#
#   tools/python/stage.sh        (uses target/venv's maturin, as .ci/run installs it)
set -euo pipefail
cd "$(dirname "$0")/../.."
maturin=${MATURIN:-$PWD/target/venv/bin/maturin}
[ -x "$maturin" ] || { echo "stage.sh: no maturin at $maturin: run .ci/run once, or set MATURIN" >&2; exit 1; }
cargo build --release 2>&1 | tail -1
mkdir -p .device/wheels
rm -f .device/wheels/grove-*.whl
(cd python && "$maturin" build --release --quiet --out ../.device/wheels)
strip -o .device/grove target/release/grove
ls -l .device/wheels/*.whl .device/grove
