#!/usr/bin/env bash
# gpu_suites.sh: every staged GPU test suite (tools/layout/stage.sh) on one GPU machine, in
# LANES parallel lanes (default 3), each suite cut off after DEADLINE seconds (default 500),
# so that the whole check fits one device call. Logs in $OUT; the suites' result lines last.
#
#   tools/layout/gpu_suites.sh [SUITE ...]    (default: every staged test binary)
set -u
# shellcheck source=tools/gpu_common.sh
source "$(dirname "$0")/../gpu_common.sh" tests
suites=("$@")
if [ ${#suites[@]} -eq 0 ] && [ -f "$bin/SUITES" ]; then
    # The test binaries stage.sh staged, not the scripts or benchmarks a call adds beside them.
    while read -r name; do [ -x "$bin/$name" ] && suites+=("$name"); done <"$bin/SUITES"
fi
if [ ${#suites[@]} -eq 0 ]; then
    for t in "$bin"/*; do
        name=$(basename "$t")
        case "$name" in grove|old|STAGED|BUILD_ROOT|SUITES|pack.tar.xz|*.sh|bench_*) continue ;; esac
        [ -f "$t" ] && suites+=("$name")
    done
fi
lanes=${LANES:-3}
deadline=${DEADLINE:-500}
run_one() {
    local name=$1 start=$(date +%s)
    (cd "$root" && timeout "$deadline" "$bin/$name" --include-ignored --test-threads "${TEST_THREADS:-2}") >"$out/test-$name.log" 2>&1
    local rc=$? line
    line=$(grep -E '^test result' "$out/test-$name.log" | tail -1 | sed -E 's/; 0 measured.*//')
    echo "$name ($(( $(date +%s) - start )) s, exit $rc): ${line:-no result}" >"$out/result-$name"
    grep -E "panicked|FAILED|first mismatch" "$out/test-$name.log" | head -4 | sed 's/^/    /' >>"$out/result-$name"
}
for s in "${suites[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$lanes" ]; do wait -n; done
    run_one "$s" &
done
wait
echo "== suites =="
cat "$out"/result-* 2>/dev/null
