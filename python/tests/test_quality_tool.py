"""tools/quality/quality.py, the quality benchmark: its port of grove's stratified split is
grove's (the classification suite relies on it), and its quick mode runs end to end against the
built binary (with gplearn and pyoperon where they are installed)."""

import importlib.util
import json
import os
import pathlib

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


def load_tool():
    spec = importlib.util.spec_from_file_location("quality", REPO / "tools" / "quality" / "quality.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("seed", [1, 2, 10, 2**40 + 3])
def test_split_port_equals_grove(seed):
    grove = pytest.importorskip("grove")  # the package .ci/run builds
    q = load_tool()
    rng = np.random.default_rng(seed % 1000)
    codes = rng.integers(0, 4, 300)
    for fraction in [0.25, 0.1, 0.5]:
        want = grove._grove.stratified_split(codes.astype(np.uint32).tolist(), 4, fraction, seed)
        got = q.grove_stratified_split(codes, 4, fraction, seed)
        assert [list(map(int, g)) for g in got] == [list(w) for w in want], f"seed {seed}, fraction {fraction}"


def test_class_codes_sort_as_grove():
    q = load_tool()
    assert q.class_codes(["10", "9", "2", "9"])[1] == ["2", "9", "10"]  # integers: numerically
    assert q.class_codes(["b", "a", "B"])[1] == ["B", "a", "b"]  # names: byte order


def test_quick_run(tmp_path):
    pytest.importorskip("sympy")
    pytest.importorskip("sklearn")
    q = load_tool()
    binary = pathlib.Path(os.environ.get("GROVE_BIN", REPO / "target" / "release" / "grove"))
    if not binary.exists():
        pytest.fail(f"{binary} is missing: run `cargo build --release` first (or set GROVE_BIN)")
    systems = ["linear", "grove"] + [s for s, m in [("gplearn", "gplearn"), ("operon", "pyoperon")] if q.have(m)]
    q.main(["--quick", "--suite", "regression,budget,nguyen,classify", "--grove", str(binary), "--out", str(tmp_path),
            "--systems", ",".join(systems), "--datasets", "diabetes,nguyen1,iris"])
    recs = [json.loads(l) for p in tmp_path.glob("runs-*.jsonl") for l in p.read_text().splitlines()]
    assert not [r for r in recs if r.get("error")], [r["error"] for r in recs if r.get("error")]
    got = {(r["suite"], r["dataset"], r["system"]) for r in recs}
    for s in systems:
        assert ("regression", "diabetes", s) in got
    assert {("budget", "diabetes", "grove"), ("budget", "diabetes", "grove-10x"), ("nguyen", "nguyen1", "grove"),
            ("classify", "iris", "grove"), ("classify", "iris", "linear")} <= got
    # The budget suite's 1× run is the regression suite's run: a seed repeats a run exactly.
    r2 = {(r["suite"], r["system"]): r["r2"] for r in recs if r["dataset"] == "diabetes"}
    assert r2[("budget", "grove")] == r2[("regression", "grove")]
    text = (tmp_path / "summary.md").read_text()
    assert "| diabetes |" in text and "| nguyen1 |" in text and "| iris |" in text
