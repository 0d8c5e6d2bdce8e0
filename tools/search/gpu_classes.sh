#!/usr/bin/env bash
# gpu_classes.sh: on a GPU machine with binaries staged by tools/layout/stage.sh (PACK=1), the
# classification target of issue 55 (≥ 0.95 test accuracy without a linear shortcut, at the GPU
# defaults, in ≤ 2 s): tools/search/classes.sh with DEVICE=cuda on the generated sets and the
# built-in ones, once per variant of the defaults. VARIANTS holds one variant a line,
# `label|flags|sets` (sets: default SETS); the default list compares the function set, constant
# fitting and the budget. Prints one table per variant last.
#
#   OUT=dir SEEDS=3 tools/search/gpu_classes.sh
set -u
# shellcheck source=tools/gpu_common.sh
source "$(dirname "$0")/../gpu_common.sh" classes
grove=$bin/grove
sets=${SETS:-"spirals circles moons checker builtin:iris builtin:wine builtin:breast_cancer builtin:digits"}
variants=${VARIANTS:-"defaults|
aq,sin,cos, fitted|--functions add,sub,mul,aq,sin,cos --optimise-constants 10
aq,sin,cos,sqrt, fitted, 20000 x 100|--functions add,sub,mul,aq,sin,cos,sqrt --optimise-constants 10 --pop 20000 --gens 100
aq,sin,cos,sqrt, fitted, 50000 x 100|--functions add,sub,mul,aq,sin,cos,sqrt --optimise-constants 10 --pop 50000 --gens 100
div,sin,cos,sqrt, fitted, 20000 x 100|--functions add,sub,mul,div,sin,cos,sqrt --optimise-constants 10 --pop 20000 --gens 100|spirals checker circles moons
aq,sin,cos,sqrt, fitted, 20000 x 100, binary|--functions add,sub,mul,aq,sin,cos,sqrt --optimise-constants 10 --pop 20000 --gens 100 --binary|spirals checker circles moons
aq,sin,cos,sqrt, fitted, 20000 x 100, lexicase|--functions add,sub,mul,aq,sin,cos,sqrt --optimise-constants 10 --pop 20000 --gens 100 --selection lexicase|spirals checker"}
i=0
while IFS='|' read -r label flags vsets; do
    [ -n "$label" ] || continue
    i=$((i + 1))
    start=$(date +%s)
    table=$(OUT=$out/v$i DEVICE=cuda SEEDS=${SEEDS:-3} SELECTIONS=tournament SETS="${vsets:-$sets}" FLAGS="$flags" bash tools/search/classes.sh "$grove" 2>&1 | grep -E '^\|')
    summary+=("variant $i, $label ($flags), $(( $(date +%s) - start )) s:" "$table")
done <<<"$variants"
echo "== summary =="
printf '%s\n' "${summary[@]}"
