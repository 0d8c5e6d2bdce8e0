"""What a fitness of one's own costs per generation (issue 58): the same search scored by the
built-in MSE, by a loss expression (`loss="abs(p - y)"`, compiled into the evaluators), and by a
Python fitness function computing the same mean absolute error from the batch of predictions:
numpy on the CPU; on a GPU numpy (the batch copied to the host by the function itself, as a
baseline), torch and CuPy (the batch wrapped by DLPack, no copy).

Each variant runs `--gens` generations of population `--pop` on `--rows` rows (Pagie-1's
formula on uniform points), tournaments, no constant fitting, one island; the median generation
time after the first (the report's `timing.median_generation_seconds`) is printed, with the
time inside the function and the share it takes. A library that is not installed is skipped.

    python python/benchmarks/fitness_cost.py --device cpu --pop 2000 --rows 1000 --gens 20
    python python/benchmarks/fitness_cost.py --device cuda --pop 10000 --rows 10000 --gens 20
"""

import argparse
import time

import numpy as np

import grove


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--pop", type=int, default=2000)
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--gens", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    X = rng.uniform(-5, 5, (a.rows, 2))
    y = 1 / (1 + X[:, 0] ** -4) + 1 / (1 + X[:, 1] ** -4)
    common = dict(function_set="add,sub,mul,div", population_size=a.pop, generations=a.gens, random_state=a.seed, device=a.device,
                  validation_fraction=0.0, optimise_constants=0, bloat="none")

    def timed(f):
        spent = [0.0]

        def wrapper(pred, t):
            t0 = time.perf_counter()
            out = f(pred, t)
            spent[0] += time.perf_counter() - t0
            return out

        return wrapper, spent

    variants = [("built-in mse", {}, None), ("loss abs(p - y)", {"loss": "abs(p - y)"}, None)]
    if a.device == "cpu":
        variants.append(("python numpy", {}, lambda p, t: np.abs(p - t).mean(axis=1)))
    else:
        try:
            import torch

            variants.append(("python torch (DLPack)", {}, lambda p, t: (torch.from_dlpack(p) - torch.from_dlpack(t)).abs().mean(dim=1)))
            variants.append(("python numpy (copied)", {}, lambda p, t: np.abs(torch.from_dlpack(p).cpu().numpy() - torch.from_dlpack(t).cpu().numpy()).mean(axis=1)))
        except ImportError:
            print("torch: not installed, skipped")
        try:
            import cupy

            variants.append(("python cupy (DLPack)", {}, lambda p, t: abs(cupy.from_dlpack(p) - cupy.from_dlpack(t)).mean(axis=1)))
        except ImportError:
            print("cupy: not installed, skipped")
    print(f"{a.device}: population {a.pop} x {a.rows} rows, {a.gens} generations")
    print(f"{'fitness':<24} {'median gen (ms)':>16} {'in function (ms/gen)':>22} {'share':>7}")
    for name, extra, f in variants:
        spent = [0.0]
        if f is not None:
            f, spent = timed(f)
            extra = {**extra, "fitness_function": f}
        sr = grove.SymbolicRegressor(**common, **extra).fit(X, y)
        med = sr.report_["timing"]["median_generation_seconds"]
        per = spent[0] / (a.gens + 1) if f is not None else 0.0
        share = f"{100 * per / med:.0f} %" if f is not None and med > 0 else "-"
        print(f"{name:<24} {1e3 * med:>16.2f} {1e3 * per:>22.2f} {share:>7}")


if __name__ == "__main__":
    main()
