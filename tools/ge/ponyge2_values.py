#!/usr/bin/env python3
"""Makes tests/fixtures/ponyge2_values/*.json: random genomes of PonyGE2's expression grammars,
their phenotypes (from `grove map`, which tests/ponyge2_conformance.rs holds to PonyGE2's own
mapper) and the values Python gives each phenotype *text* on a few data rows, evaluated as
PonyGE2's supervised-learning fitness does: `eval(phenotype)` with `x` a numpy array of rows by
variables, `np`, the protected functions, and `c` the constants. tests/ponyge2_values.rs
checks that grove's program of each genome computes those values.

Each value is computed twice: in float64 (the expected value) and in float32 (the data and the
constants as float32 arrays, numpy keeping float32), whose distance from the float64 value is
what f32 arithmetic itself loses on that program and row; the test allows that much.

Usage: PYTHONPATH=<numpy> python3 tools/ge/ponyge2_values.py [--grove target/release/grove]
numpy is the only package needed (`pip install --target target/pip numpy`).
"""

import argparse
import json
import os
import random
import subprocess
import sys

import numpy as np

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
GRAMMARS = "tests/fixtures/reference/grammars/ponyge2"
OUT = "tests/fixtures/ponyge2_values"

# (grammar file, variables the data has): every PonyGE2 grammar grove evaluates (`grove check`
# says "expressions yes"; the others derive code, regular expressions, bit strings or Boolean
# and comparison expressions grove has no operators for).
CASES = [
    ("Vladislavleva4.bnf", 5),
    ("Keijzer6.bnf", 1),
    ("Dow.bnf", 57),
    ("supervised_learning.bnf", 3),
    ("supervised_learning_consts.bnf", 3),
    ("Banknote.bnf", 4),
]

GENOMES = 300  # per grammar
ROWS = 6
LONGEST = 600  # characters of a phenotype kept


def functions(dtype):
    """PonyGE2's protected functions (utilities/fitness/math_functions.py), written from their
    definitions (division that gives 1 where the divisor is 0, square root and log of |a|, the
    analytic quotient), and numpy's, each computing in `dtype` (a constant argument would
    otherwise make a float64 array, which numpy does not narrow back)."""

    def arr(a):
        return np.asarray(a, dtype=dtype)

    def pdiv(a, b):
        a, b = arr(a), arr(b)
        return np.where(b == 0, np.ones_like(a), a / np.where(b == 0, dtype(1), b))

    fns = {
        "pdiv": pdiv,
        "psqrt": lambda a: np.sqrt(np.abs(arr(a))),
        "plog": lambda a: np.log(dtype(1) + np.abs(arr(a))),
        "aq": lambda a, b: arr(a) / np.sqrt(dtype(1) + arr(b) ** dtype(2)),
    }
    names = ["sin", "cos", "tan", "tanh", "exp", "log", "sqrt", "abs"]
    fns["np"] = type("np", (), {n: staticmethod(lambda a, f=getattr(np, n): f(arr(a))) for n in names})
    return fns


def data(n_vars, dtype):
    """ROWS rows of n_vars variables, values exact in f32 (zeros included, for pdiv)."""
    vals = [0.0, -1.5, 2.25, 0.5, -0.75, 3.0, 1.25, -2.0, 0.125, 4.5, -0.5, 1.0, 0.0]
    return np.array([[vals[(r * 7 + j * 3) % len(vals)] for j in range(n_vars)] for r in range(ROWS)], dtype=dtype)


def constants(n, dtype):
    """The constants c[i] a test sets: 0.5, -1.25, 2.0, 0.75, …"""
    return np.array([[0.5, -1.25, 2.0, 0.75, -0.25][i % 5] * (1 + i // 5) for i in range(n)], dtype=dtype)


def evaluate(phenotype, n_vars, dtype):
    env = functions(dtype) | {"x": data(n_vars, dtype), "c": constants(16, dtype)}
    with np.errstate(all="ignore"):
        y = eval(phenotype, env)
    # A program without x is one number: PonyGE2 compares it with every row.
    return np.broadcast_to(np.asarray(y, dtype=np.float64), (ROWS,))


def number(v):
    """A value for JSON: a float, or the strings nan, inf, -inf."""
    if np.isnan(v):
        return "nan"
    if np.isinf(v):
        return "inf" if v > 0 else "-inf"
    return float(v)


def grove_map(grove, grammar, n_vars, genomes):
    lines = "".join(",".join(map(str, g)) + "\n" for g in genomes)
    args = [grove, "map", "--grammar", grammar, "--format", "jsonl", "--n-vars", str(n_vars)]
    r = subprocess.run(args, input=lines, capture_output=True, text=True)
    recs = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
    if len(recs) != len(genomes):
        sys.exit(f"grove map gave {len(recs)} records for {len(genomes)} genomes: {r.stderr}")
    return recs


def make(grove, name, n_vars, seed):
    rng = random.Random(seed)
    grammar = os.path.join(ROOT, GRAMMARS, name)
    records, seen = [], set()
    while len(records) < GENOMES:
        # PonyGE2's codon size, lengths of a few codons to a few hundred.
        genomes = [[rng.randrange(100000) for _ in range(rng.randrange(4, 300))] for _ in range(400)]
        for g, m in zip(genomes, grove_map(grove, grammar, n_vars, genomes)):
            text = m.get("phenotype")
            if not m["valid"] or text in seen or len(text) > LONGEST:
                continue
            seen.add(text)
            y64, y32 = evaluate(text, n_vars, np.float64), evaluate(text, n_vars, np.float32)
            records.append({"genome": g[: m["used_codons"]], "phenotype": text, "y64": [number(v) for v in y64], "y32": [number(v) for v in y32]})
            if len(records) == GENOMES:
                break
    x = data(n_vars, np.float64)
    return {
        "grammar": f"{GRAMMARS}/{name}",
        "n_vars": n_vars,
        "x": [[float(v) for v in row] for row in x],
        "c": [float(v) for v in constants(16, np.float64)],
        "records": records,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--grove", default=os.path.join(ROOT, "target/release/grove"))
    args = ap.parse_args()
    os.makedirs(os.path.join(ROOT, OUT), exist_ok=True)
    for k, (name, n_vars) in enumerate(CASES):
        fixture = make(args.grove, name, n_vars, seed=58 + k)
        path = os.path.join(ROOT, OUT, name.replace(".bnf", ".json"))
        # One record a line, so diffs stay readable.
        with open(path, "w") as f:
            head = json.dumps({k: v for k, v in fixture.items() if k != "records"})
            f.write(head[:-1] + ', "records": [\n')
            f.write(",\n".join(json.dumps(r) for r in fixture["records"]))
            f.write("\n]}\n")
        print(f"{path}: {len(fixture['records'])} genomes")


if __name__ == "__main__":
    main()
