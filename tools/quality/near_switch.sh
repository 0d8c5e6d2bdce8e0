#!/usr/bin/env bash
# near_switch.sh: issue 56's model choice on both sides of its switch (EVOLVE_VALIDATION_ROWS,
# 20,000 training rows): `--select cv` against `--select validation --validation-fraction 0.25`
# (what `auto` does from 20,000 rows) on the same 19,500 training rows and 5000 test rows of
# Friedman 1-3 with the quality suite's noise (scikit-learn's make_friedman*, random_state 0-2),
# grove seed 1-3, `grove evolve --device cuda` at its defaults. Prints one table row per fit:
# test R², size, wall seconds and the candidate chosen.
#
# On a GPU machine with scikit-learn, from the repository root, with grove staged in .device/
# (tools/layout/stage.sh): tools/quality/near_switch.sh   (NEAR_SETS="friedman1" for fewer sets)
set -u
cd "$(dirname "$0")/../.."
bin=$PWD/.device
D=${NEAR_DIR:-/tmp/near}
mkdir -p "$D"
NEAR_DIR=$D python3 - <<'PY'
import os
import numpy as np
from sklearn.datasets import make_friedman1, make_friedman2, make_friedman3
d = os.environ["NEAR_DIR"]
for name, f, noise in [("friedman1", make_friedman1, 1.0), ("friedman2", make_friedman2, 125.0), ("friedman3", make_friedman3, 0.1)]:
    for seed in (0, 1, 2):
        kw = dict(n_features=10) if name == "friedman1" else {}
        X, y = f(n_samples=19500 + 5000, noise=noise, random_state=seed, **kw)
        hdr = ",".join([f"x{i}" for i in range(X.shape[1])] + ["y"])
        for part, sl in (("train", slice(0, 19500)), ("test", slice(19500, None))):
            np.savetxt(f"{d}/{name}-{seed}-{part}.csv", np.column_stack([X[sl], y[sl]]), delimiter=",", header=hdr, comments="", fmt="%.7g")
PY
echo "| set | sample | rule | test R² | size | s | pick |"
for name in ${NEAR_SETS:-friedman1 friedman2 friedman3}; do
    for seed in 0 1 2; do
        for rule in cv validation; do
            extra=()
            [ $rule = validation ] && extra=(--validation-fraction 0.25)
            r=$D/$name-$seed-$rule.json
            s0=$(date +%s.%N)
            if ! timeout 120 "$bin/grove" evolve --data "$D/$name-$seed-train.csv" --test-data "$D/$name-$seed-test.csv" --device cuda \
                --seed $((seed + 1)) --select $rule "${extra[@]}" --quiet --report "$r" >/dev/null 2>"$D/err.txt"; then
                echo "| $name | $seed | $rule | failed: $(head -c 200 "$D/err.txt") |"
                continue
            fi
            s1=$(date +%s.%N)
            python3 -c "
import json
r = json.load(open('$r')); sel = r['selection']
pick = [c['candidate'] for c in sel['candidates'] if c.get('chosen')]
print('| $name | $seed | $rule | %.4f | %s | %.1f | %s |' % (r['test']['r2'], r['best']['size'], $s1 - $s0, pick))"
        done
    done
done
