# gpu_common.sh: the setup every GPU check script under tools/ shares, sourced (after `set -u`)
# on a GPU machine from the repository root, with the staged binaries in .device/:
#
#   out      where logs go ($OUT, default ./gpu-check), created
#   bin      .device/, the stripped binaries
#   root     where the test binaries were built (.device/BUILD_ROOT, else /work/main): they read
#            their fixtures there, so it is linked to this checkout when it does not exist
#   has P    true when part P was asked for: the script's arguments, default
#            ${GPU_DEFAULT_PARTS:-all}; `all` asks for every part
#   summary  lines the script prints last
#   REQUIRE_GPU  when set (e.g. H200), a GPU whose name does not contain it stops the script at
#            once, one line and exit 3, before any work (the unpacking too): a call that must
#            count as measured on one kind (an issue's `nvidia-h200`) spends no more than the
#            machine's start on another
#   run_suites NAMES  runs each staged test binary named (--include-ignored, $TEST_THREADS
#            threads, default 2) from $root, its log in $out, its result line and first
#            failures into summary
#
# It exports GROVE_TEST_GPU=1 and a kernel cache, prints what was staged and the GPU.
gpu_name=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader)
echo "$gpu_name"
if [ -n "${REQUIRE_GPU:-}" ] && [[ "$gpu_name" != *"$REQUIRE_GPU"* ]]; then
    echo "REQUIRE_GPU=$REQUIRE_GPU: this machine's GPU is ${gpu_name%%,*}; stopping before any work" >&2
    exit 3
fi
out=${OUT:-gpu-check}
mkdir -p "$out"
bin=$PWD/.device
# Binaries staged with PACK=1 travel as one archive.
if [ -f "$bin/pack.tar.xz" ]; then tar -C "$bin" -xJf "$bin/pack.tar.xz" && rm -f "$bin/pack.tar.xz"; fi
export GROVE_TEST_GPU=1 GROVE_CACHE_DIR=${GROVE_CACHE_DIR:-/tmp/grove-cache}
[ -f "$bin/STAGED" ] && cat "$bin/STAGED"
root=$(cat "$bin/BUILD_ROOT" 2>/dev/null || echo /work/main)
if [ ! -e "$root" ]; then mkdir -p "$(dirname "$root")" && ln -s "$PWD" "$root"; fi
parts=${*:-${GPU_DEFAULT_PARTS:-all}}
has() { [[ " $parts " == *" $1 "* || " $parts " == *" all "* ]]; }
summary=()
run_suites() {
    local t line
    for t in $1; do
        [ -x "$bin/$t" ] || continue
        (cd "$root" && "$bin/$t" --include-ignored --test-threads "${TEST_THREADS:-2}") >"$out/test-$t.log" 2>&1
        summary+=("$t: $(grep -E '^test result' "$out/test-$t.log" | tail -1 | sed -E 's/; 0 measured.*//')")
        while IFS= read -r line; do summary+=("    $line"); done < <(grep -E "panicked|FAILED|first mismatch" "$out/test-$t.log" | head -4)
    done
}
