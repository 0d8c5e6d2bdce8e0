#!/usr/bin/env bash
# compare.sh NEW_GROVE OLD_GROVE: runs a fixed set of CPU commands with both binaries (from the
# repository root given by $ROOT, default the current directory) and compares their reports,
# ignoring timings ("seconds", "timing", "transfers", "time", "version" keys). Prints SAME/DIFF per case.
set -u
NEW=$(realpath "$1"); OLD=$(realpath "${2:?give the old binary, e.g. one built from the commit before}")
ROOT=${ROOT:-$PWD}
W=$(mktemp -d)
cd "$ROOT"
strip() { python3 - "$1" <<'PY'
import json,sys
def s(v):
    if isinstance(v,dict): return {k:s(x) for k,x in v.items() if k not in ("seconds","timing","transfers","time","version","wall_seconds","elapsed")}
    if isinstance(v,list): return [s(x) for x in v]
    return v
print(json.dumps(s(json.load(open(sys.argv[1]))),indent=1,sort_keys=True))
PY
}
cases=(
 "evolve --data builtin:pagie1 --grammar grammars/regression.bnf --device cpu --gens 15 --pop 500"
 "evolve --data builtin:pagie1 --functions add,sub,mul,div,sin --device cpu --gens 15 --pop 500"
 "evolve --data builtin:pagie1 --grammar grammars/regression.bnf --device cpu --gens 8 --pop 300 --optimise-constants 2"
 "predict --model $W/old0.json --data builtin:pagie1"
 "evolve --data builtin:pagie1 --functions add,sub,mul,div --device cpu --gens 10 --pop 400 --islands 2 --migrate-every 3"
 "evolve --data builtin:pagie1 --functions add,sub,mul,div,sin --device cpu --gens 8 --pop 300 --optimise-constants 2"
 "classify --data builtin:iris --device cpu --gens 10 --pop 500"
 "classify --data builtin:wine --grammar grammars/classify.bnf --device cpu --gens 5 --pop 300"
 "control --env swimmer --device cpu --gens 3 --pop 60"
 "control --env hopper --device cpu --gens 3 --pop 60"
 "run examples/w1-pagie1.ron --device cpu --gens 5"
 "run examples/w5-iris.ron --device cpu --gens 5"
 "control --env hopper --policy linear --device cpu --gens 4"
 "control --env swimmer --policy residual --device cpu --gens 2 --pop 40 --linear-iterations 3 --head-every 1"
 "classify --data data/classification/digits.csv --device cpu --gens 3 --pop 200 --optimise-constants 2"
)
status=0
for i in "${!cases[@]}"; do
  c=${cases[$i]}
  "$OLD" $c --report $W/old$i.json >$W/old$i.out 2>&1; ro=$?
  "$NEW" $c --report $W/new$i.json >$W/new$i.out 2>&1; rn=$?
  if [ $ro -ne $rn ]; then echo "DIFF(exit $ro vs $rn): $c"; status=1; tail -3 $W/new$i.out; continue; fi
  if [ -f $W/old$i.json ]; then
    if diff <(strip $W/old$i.json) <(strip $W/new$i.json) >$W/d$i; then echo "SAME: $c"; else echo "DIFF(report): $c"; head -20 $W/d$i; status=1; fi
  else
    if diff <(grep -v "^time" $W/old$i.out) <(grep -v "^time" $W/new$i.out) >/dev/null; then echo "SAME(out, no report): $c"; else echo "DIFF(out): $c"; status=1; fi
  fi
done
rm -rf $W
exit $status
