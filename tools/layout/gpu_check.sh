#!/usr/bin/env bash
# gpu_check.sh: issue 26's check on a GPU machine (binaries staged by tools/layout/stage.sh):
#   tests    every GPU test suite (and the library's tests with the GPU gate on)
#   same     W1 (examples/w1-pagie1.ron), W5 (examples/w5-iris.ron), a grammar W1, fitted
#            classifications (wine, digits), a Swimmer run and a --policy linear Hopper run on
#            the GPU with BASE's binary and this one: the reports must be equal, timings left out
# Logs go to $OUT (default ./gpu-check); a short table comes last.
#
#   tools/layout/gpu_check.sh [tests|same|all] ...   (default all)
set -u
# shellcheck source=tools/gpu_common.sh
source "$(dirname "$0")/../gpu_common.sh"
if has tests; then
    for t in "$bin"/*; do
        name=$(basename "$t")
        case "$name" in grove|old|wheels|STAGED|BUILD_ROOT|SUITES|pack.tar.xz|*.sh|bench_*) continue ;; esac
        # Only the test binaries stage.sh listed, where it listed them.
        if [ -f "$bin/SUITES" ] && ! grep -qx "$name" "$bin/SUITES"; then continue; fi
        [ -f "$t" ] || continue
        start=$(date +%s)
        (cd "$root" && timeout 900 "$t" --include-ignored --test-threads 1) >"$out/test-$name.log" 2>&1
        r=$(grep -E '^test result' "$out/test-$name.log" | tail -1)
        summary+=("tests $name ($(( $(date +%s) - start )) s): ${r:-no result (see $out/test-$name.log)}")
        while IFS= read -r line; do summary+=("    $line"); done < <(grep -E -A2 "panicked" "$out/test-$name.log" | head -6)
    done
fi
# A report without its timings, for comparison.
strip_report() { python3 - "$1" <<'PY'
import json, sys
drop = {"seconds", "timing", "transfers", "time", "version", "ended", "budget"}
def s(v):
    if isinstance(v, dict): return {k: s(x) for k, x in v.items() if k not in drop}
    if isinstance(v, list): return [s(x) for x in v]
    return v
print(json.dumps(s(json.load(open(sys.argv[1]))), indent=1, sort_keys=True))
PY
}
if has same; then
    cases=(
        "w1|run examples/w1-pagie1.ron --device cuda"
        "w1-ge|evolve --data builtin:pagie1 --grammar grammars/regression.bnf --device cuda"
        "w5|run examples/w5-iris.ron --device cuda"
        "w5-fit|classify --data builtin:wine --device cuda --optimise-constants 5"
        "swimmer|control --env swimmer --device cuda"
        "digits-fit|classify --data data/classification/digits.csv --device cuda --optimise-constants 5"
        "hopper-linear|control --env hopper --policy linear --device cuda"
    )
    for c in "${cases[@]}"; do
        tag=${c%%|*}; args=${c#*|}
        "$bin/old/grove" $args --seed 3 --report "$out/$tag-old.json" >"$out/$tag-old.log" 2>&1; ro=$?
        "$bin/grove" $args --seed 3 --report "$out/$tag-new.json" >"$out/$tag-new.log" 2>&1; rn=$?
        if [ $ro -ne 0 ] || [ $rn -ne 0 ]; then
            summary+=("same $tag: exit $ro (old) / $rn (new): $(tail -1 "$out/$tag-new.log")")
        elif diff <(strip_report "$out/$tag-old.json") <(strip_report "$out/$tag-new.json") >"$out/$tag.diff"; then
            summary+=("same $tag: SAME report ($args --seed 3)")
        else
            summary+=("same $tag: DIFF ($(wc -l <"$out/$tag.diff") lines, $out/$tag.diff)")
        fi
    done
fi
printf '%s\n' "" "== summary ==" "${summary[@]}"
