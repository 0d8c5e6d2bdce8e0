"""W1 fitted from numpy against the same run of `grove evolve`: the Python package's overhead
over the engine (issue 17's target: at most 5 % longer).

W1 is examples/w1-pagie1.ron: Pagie-1 on 1024 points, functions add,sub,mul,div,sin,cos,tan,
population 5000, 100 generations, tournament 3, elite 1, max_len 128, seed 1. The two are run
alternately (the command line first in odd pairs, Python first in even ones) so that drift in
the machine's load falls on both; each run must find the same best program. Prints every time,
the medians and their ratio.

    python python/benchmarks/w1_overhead.py --pairs 3 --device cpu
"""

import argparse
import json
import pathlib
import statistics
import subprocess
import tempfile
import time

import grove

REPO = pathlib.Path(__file__).resolve().parents[2]
FUNCTIONS = "add,sub,mul,div,sin,cos,tan"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--device", default="cpu", choices=["auto", "cpu", "cuda"])
    ap.add_argument("--grove", default=str(REPO / "target" / "release" / "grove"))
    args = ap.parse_args()

    X, y = grove.load_builtin("pagie1:1024")
    estimator = dict(function_set=FUNCTIONS, population_size=5000, generations=100, tournament_size=3, elitism=1,
                     max_length=128, random_state=1, device=args.device)
    cli = [args.grove, "evolve", "--data", "builtin:pagie1:1024", "--functions", FUNCTIONS, "--pop", "5000",
           "--gens", "100", "--tournament", "3", "--elite", "1", "--max-len", "128", "--seed", "1",
           "--device", args.device, "--quiet"]
    times = {"grove evolve": [], "SymbolicRegressor.fit": []}
    with tempfile.TemporaryDirectory() as tmp:
        report = pathlib.Path(tmp) / "w1.json"

        def run_cli():
            t0 = time.perf_counter()
            subprocess.run([*cli, "--report", str(report)], check=True, stdout=subprocess.DEVNULL)
            times["grove evolve"].append(time.perf_counter() - t0)
            return json.loads(report.read_text())["best"]["infix"]

        def run_python():
            t0 = time.perf_counter()
            m = grove.SymbolicRegressor(**estimator).fit(X, y)
            times["SymbolicRegressor.fit"].append(time.perf_counter() - t0)
            return m.program_

        for k in range(args.pairs):
            first, second = (run_cli, run_python) if k % 2 == 0 else (run_python, run_cli)
            a, b = first(), second()
            if a != b:
                raise SystemExit(f"pair {k + 1}: the runs differ:\n  {a}\n  {b}")
            print(f"pair {k + 1}: grove evolve {times['grove evolve'][-1]:.2f} s, "
                  f"SymbolicRegressor.fit {times['SymbolicRegressor.fit'][-1]:.2f} s", flush=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"median: grove evolve {med['grove evolve']:.2f} s, SymbolicRegressor.fit {med['SymbolicRegressor.fit']:.2f} s, "
          f"ratio {med['SymbolicRegressor.fit'] / med['grove evolve']:.3f}")
    ratios = [p / c for p, c in zip(times["SymbolicRegressor.fit"], times["grove evolve"])]
    print("per-pair ratios " + " ".join(f"{r:.3f}" for r in ratios))


if __name__ == "__main__":
    main()
