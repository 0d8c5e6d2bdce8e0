#!/usr/bin/env python3
"""sweep.py: constant-fitting settings side by side (issue 16): median test R^2 and run time of
`grove evolve` over seeds, per data set, for each (steps, every, fraction).

    tools/fit/sweep.py --grove .device/grove --device cuda [--seeds 5] [--pop 3000 --gens 100]

Data sets (scikit-learn, no downloads): Friedman 1-3 with noise (2000 rows) and diabetes; each
run holds out 75 % (Friedman) or 25 % (diabetes) of the rows as its test set, seeded by the
run's seed. Prints a markdown table last.
"""
import argparse, os, re, statistics, subprocess, tempfile

import numpy as np
from sklearn.datasets import load_diabetes, make_friedman1, make_friedman2, make_friedman3

CONFIGS = [(0, 1, 0.05), (5, 5, 0.02), (5, 1, 0.05), (10, 1, 0.2), (5, 1, 0.2), (10, 2, 0.2), (10, 5, 0.2), (10, 1, 0.1), (20, 5, 0.2)]


def write(path, x, y):
    names = [f"x{i}" for i in range(x.shape[1])] + ["y"]
    np.savetxt(path, np.column_stack([x, y]), delimiter=",", header=",".join(names), comments="", fmt="%.7g")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--grove", default="target/release/grove")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--pop", type=int, default=3000)
    ap.add_argument("--gens", type=int, default=100)
    ap.add_argument("--configs", default="", help="steps,every,fraction;...")
    a = ap.parse_args()
    configs = [tuple(float(v) if "." in v else int(v) for v in c.split(",")) for c in a.configs.split(";")] if a.configs else CONFIGS
    tmp = tempfile.mkdtemp()
    sets = {}
    for name, (x, y), frac in [
        ("friedman1", make_friedman1(2000, noise=1.0, random_state=0), 0.75),
        ("friedman2", make_friedman2(2000, noise=100.0, random_state=0), 0.75),
        ("friedman3", make_friedman3(2000, noise=0.1, random_state=0), 0.75),
        ("diabetes", load_diabetes(return_X_y=True), 0.25),
    ]:
        path = os.path.join(tmp, name + ".csv")
        write(path, x, y)
        sets[name] = (path, frac)
    rows = []
    for steps, every, fraction in configs:
        for name, (path, frac) in sets.items():
            r2, secs = [], []
            for seed in range(1, a.seeds + 1):
                cmd = [a.grove, "evolve", "--data", path, "--test-fraction", str(frac), "--seed", str(seed),
                       "--functions", "add,sub,mul,div,sin,cos,exp,log", "--pop", str(a.pop), "--gens", str(a.gens),
                       "--device", a.device, "--optimise-constants", str(steps), "--optimise-every", str(every),
                       "--optimise-fraction", str(fraction)]
                out = subprocess.run(cmd, capture_output=True, text=True).stdout
                m = re.search(r"^test .* r2 (\S+)", out, re.M)
                t = re.search(r"^time\s+(\S+) s", out, re.M)
                if m and t:
                    r2.append(float(m.group(1)))
                    secs.append(float(t.group(1)))
            row = (steps, every, fraction, name, statistics.median(r2) if r2 else float("nan"), statistics.median(secs) if secs else float("nan"), r2)
            rows.append(row)
            print(f"steps={steps} every={every} fraction={fraction} {name}: median test r2 {row[4]:.4f}, median {row[5]:.2f} s ({' '.join(f'{v:.3f}' for v in r2)})", flush=True)
    print()
    print("| steps | every | fraction | " + " | ".join(sets) + " | time (s, median over sets) |")
    print("|---|---|---|" + "---|" * len(sets) + "---|")
    for steps, every, fraction in configs:
        mine = [r for r in rows if r[:3] == (steps, every, fraction)]
        print(f"| {steps} | {every} | {fraction} | " + " | ".join(f"{r[4]:.4f}" for r in mine) + f" | {statistics.median(r[5] for r in mine):.2f} |")


if __name__ == "__main__":
    main()
