#!/usr/bin/env bash
# gpu_search.sh: on a GPU machine, with binaries staged by tools/layout/stage.sh: the cost of a
# generation under each parent selection and GE crossover at large populations (the device
# loop's tournaments against its lexicase, on every case and down-sampled, with pools of 64 to
# 1024), and
# the plain-GE Pagie-1 check at PonyGE2's settings on the GPU. Prints a table last.
#
#   tools/search/gpu_search.sh [tree] [ge] [pagie]     (default: all three parts)
set -u
# shellcheck source=tools/gpu_common.sh
source "$(dirname "$0")/../gpu_common.sh" "$@"
g=$bin/grove
row() { # label, report
    python3 - "$1" "$2" <<'PY'
import json, sys, statistics as st
r = json.load(open(sys.argv[2])); g = r["generations"]
secs = [x["seconds"] for x in g[1:-1]] or [g[0]["seconds"]]
print(f"{sys.argv[1]:58s} gen median {st.median(secs):8.3f} s  best {r['best']['fitness']:.4g}  size {r['best']['size']}  total {r['timing']['seconds']:.1f} s")
PY
}
has tree && for p in 100000 1000000; do
    gens=$([ "$p" = 1000000 ] && echo 4 || echo 6)
    for sel in "tournament --bloat none" "down-sampled" "lexicase" "down-sampled --lexicase-pool 64" "down-sampled --lexicase-pool 1024"; do
        tag=$(echo "$sel" | tr ' ' '_')
        rep="$out/tree-$p-$tag.json"
        # shellcheck disable=SC2086
        timeout 150 "$g" evolve --functions add,sub,mul,aq --data builtin:pagie1 --pop "$p" --gens "$gens" --device cuda --linear-inputs off \
            --selection $sel --quiet --report "$rep" >/dev/null 2>"$out/err-tree-$p-$tag.txt" && summary+=("$(row "tree GP pop $p --selection $sel" "$rep")") \
            || summary+=("tree GP pop $p --selection $sel: no report within 150 s $(tail -1 "$out/err-tree-$p-$tag.txt")")
    done
done
has ge && for x in onepoint subtree; do
    rep="$out/ge-$x.json"
    timeout 240 "$g" evolve -g grammars/regression.bnf --data builtin:pagie1 --pop 100000 --gens 5 --device cuda --crossover "$x" \
        --quiet --report "$rep" >/dev/null 2>"$out/err-ge-$x.txt" && summary+=("$(row "GE pop 100000 --crossover $x" "$rep")") \
        || summary+=("GE --crossover $x: failed $(tail -1 "$out/err-ge-$x.txt")")
done
const=0; n=0
has pagie && for s in 1 2 3 4 5 6 7 8 9 10; do
    rep="$out/pagie-ge-$s.json"
    "$g" evolve -g tests/fixtures/grammars/arith_aq.bnf --data builtin:pagie1 --pop 500 --gens 50 --tournament 2 --no-linear-scaling \
        --linear-inputs off --select train --bloat none --device cuda --seed "$s" --quiet --report "$rep" >/dev/null 2>&1 || continue
    n=$((n + 1)); size=$(python3 -c "import json;print(json.load(open('$rep'))['best']['size'])"); [ "$size" -le 1 ] && const=$((const + 1))
done
has pagie && summary+=("plain GE Pagie-1 at PonyGE2's settings on the GPU, default operators: $const of $n seeds end at a constant")
echo "== summary =="
printf '%s\n' "${summary[@]}"
