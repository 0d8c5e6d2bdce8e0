#!/usr/bin/env bash
# gpu_check.sh: the Python package on a GPU machine, from the wheel tools/python/stage.sh built
# elsewhere (.device/wheels/grove-*-cp39-abi3-*.whl: one wheel for whatever CPython >= 3.9 the
# machine has). Installs it into a fresh virtual environment that sees the system's packages
# (--system-site-packages: numpy, scikit-learn, pandas and pytest come from there; nothing is
# downloaded), then runs python/tests/test_gpu.py with GROVE_TEST_GPU=1: SymbolicRegressor,
# SymbolicClassifier and grove.control on device="cuda" equal `grove evolve`, `classify` and
# `control --device cuda` (.device/grove) with the same settings and seed, and a warm start on
# the GPU continues to the run of one longer fit. Then the CPU suite against the same wheel.
# Logs go to $OUT (default ./gpu-check).
#
#   tools/python/gpu_check.sh [gpu|cpu|all] ...   (default all; WHEEL=PATH picks another wheel)
set -u
# shellcheck source=tools/gpu_common.sh
source "$(dirname "$0")/../gpu_common.sh"
wheel=${WHEEL:-$(ls -t "$bin"/wheels/grove-*-abi3-*.whl 2>/dev/null | head -1)}
if [ -z "$wheel" ] || [ ! -f "$wheel" ]; then
    echo "gpu_check.sh: no wheel in $bin/wheels: run tools/python/stage.sh where the package builds" >&2
    exit 1
fi
python=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
venv=$tmp/venv
"$python" -m venv --system-site-packages "$venv" || { echo "gpu_check.sh: $python -m venv failed" >&2; exit 1; }
# When $python is itself a virtual environment (the GPU image's python3 is), --system-site-packages
# reaches only its base installation's packages: a .pth file adds that environment's too (after
# the new one's own, so the wheel installed below is the grove imported).
purelib=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
"$python" -c 'import site; print("\n".join(site.getsitepackages()))' >"$purelib/_outer_site_packages.pth"
"$venv/bin/python" -m pip install --quiet --no-index --no-deps --ignore-installed --disable-pip-version-check "$wheel" || {
    echo "gpu_check.sh: cannot install $wheel into $venv" >&2
    exit 1
}
"$venv/bin/python" -c 'import numpy, sklearn, pandas, pytest' 2>"$out/imports.log" || {
    echo "gpu_check.sh: the system's Python lacks a package the tests need (numpy, scikit-learn, pandas, pytest):" >&2
    cat "$out/imports.log" >&2
    exit 1
}
"$venv/bin/python" -c 'import sys, grove; print(f"grove {grove.__version__} from {grove.__file__} on Python {sys.version.split()[0]}")' \
    | tee "$out/python.txt"
# From the repository root, the tests import the installed package (python/grove is not on the path).
run_tests() {
    local name=$1; shift
    GROVE_BIN="$bin/grove" PYTHONUNBUFFERED=1 timeout 900 "$venv/bin/python" -m pytest "$@" -v -p no:cacheprovider \
        >"$out/pytest-$name.log" 2>&1
    summary+=("pytest $name: $(tail -1 "$out/pytest-$name.log")")
    while IFS= read -r line; do summary+=("    $line"); done < <(grep -E "^(FAILED|ERROR)" "$out/pytest-$name.log" | head -12)
}
has gpu && run_tests gpu python/tests/test_gpu.py
has cpu && GROVE_TEST_GPU=0 run_tests cpu python/tests
printf '%s\n' "${summary[@]}"
