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


def test_exported_splits_on_the_gpu_script_score_as_quality_py(tmp_path):
    """`--export` writes the regression splits that `tools/quality/gpu_quality.sh` runs on a GPU
    machine; the script, run here with DEVICE=cpu, must score a split as quality.py does."""
    import shutil
    import subprocess
    import tarfile

    pytest.importorskip("sklearn")
    q = load_tool()
    binary = pathlib.Path(os.environ.get("GROVE_BIN", REPO / "target" / "release" / "grove"))
    if not binary.exists():
        pytest.fail(f"{binary} is missing: run `cargo build --release` first (or set GROVE_BIN)")
    if shutil.which("bash") is None or shutil.which("xz") is None:
        pytest.skip("the GPU script needs bash and xz")
    out = tmp_path / "q"
    assert q.main(["--suite", "regression", "--datasets", "diabetes", "--splits", "2", "--export", str(tmp_path / "exp"),
                   "--out", str(out)]) == 0
    d = tmp_path / "exp" / "regression" / "diabetes"
    assert sorted(p.name for p in d.iterdir()) == ["0", "1"]
    X, y = q.REAL_SETS["diabetes"][0]()
    for k in (0, 1):
        tr, te = q.split_indices(len(y), k)
        train = (d / str(k) / "train.csv").read_text().splitlines()
        test = (d / str(k) / "test.csv").read_text().splitlines()
        assert train[0].split(",")[-1] == "target" and test[0] == train[0]
        assert (len(train) - 1, len(test) - 1) == (len(tr), len(te))
        assert float(train[1].split(",")[-1]) == float(y.to_numpy()[tr[0]])
    # quality.py's own run of split 0 at a small budget ...
    q.main(["--suite", "regression", "--datasets", "diabetes", "--splits", "1", "--systems", "grove", "--grove", str(binary),
            "--grove-pop", "300", "--grove-gens", "5", "--out", str(out)])
    want = [json.loads(l) for l in (out / "runs-regression.jsonl").read_text().splitlines()][0]
    # ... and the GPU script's, from the exported split, with the same arguments.
    work = tmp_path / "device"
    (work / ".device").mkdir(parents=True)
    (work / "tools" / "quality").mkdir(parents=True)
    shutil.copy(REPO / "tools" / "gpu_common.sh", work / "tools")
    shutil.copy(REPO / "tools" / "quality" / "gpu_quality.sh", work / "tools" / "quality")
    shutil.copy(binary, work / ".device" / "grove")
    with tarfile.open(work / ".device" / "splits.tar.xz", "w:xz") as t:
        t.add(tmp_path / "exp" / "regression" / "diabetes" / "0", arcname="regression/diabetes/0")
    env = dict(os.environ, DEVICE="cpu", SPLITS="1", JOBS="1", QUALITY_VARIANTS="cpu=--pop 300 --gens 5",
               OUT=str(work / "out"), WORK=str(work / "work"), PATH=os.environ.get("PATH", ""))
    p = subprocess.run(["bash", "tools/quality/gpu_quality.sh"], cwd=work, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    got = [json.loads(l) for l in (work / "out" / "runs-gpu.jsonl").read_text().splitlines()]
    assert len(got) == 1 and "error" not in got[0], got
    got = got[0]
    assert (got["dataset"], got["split"], got["system"], got["n_train"]) == ("diabetes", 0, "grove-cpu", want["n_train"])
    assert got["model"] == want["model"] and got["size"] == want["size"]
    assert abs(got["r2"] - want["r2"]) < 1e-9 and abs(got["terms_r2"] - want["terms_r2"]) < 1e-9
    # A DEADLINE already past starts no fit: the records stay empty, and the summary says why
    # instead of the call's time limit cutting the script before it prints.
    p = subprocess.run(["bash", "tools/quality/gpu_quality.sh"], cwd=work, env=dict(env, DEADLINE="0"), capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert (work / "out" / "runs-gpu.jsonl").read_text() == ""
    assert "0 fits in" in p.stdout and "1 not started before DEADLINE=0 s" in p.stdout, p.stdout
    # A DEADLINE that is no number of seconds is one line and a failure, before any fit.
    p = subprocess.run(["bash", "tools/quality/gpu_quality.sh"], cwd=work, env=dict(env, DEADLINE="soon"), capture_output=True,
                       text=True, timeout=300)
    assert p.returncode != 0 and "DEADLINE must be a number of seconds, at least 0, got 'soon'" in p.stderr, p.stderr[-2000:]
    # REQUIRE_GPU: another kind of GPU stops the script before any work, in one line, exit 3;
    # the named kind goes on. A stand-in nvidia-smi names the machine's GPU.
    fake = tmp_path / "fakebin"
    fake.mkdir()
    (fake / "nvidia-smi").write_text("#!/bin/sh\necho 'NVIDIA H100 80GB HBM3, 81559 MiB, 580.159.04'\n")
    (fake / "nvidia-smi").chmod(0o755)
    gated = dict(env, PATH=f"{fake}:{env['PATH']}", OUT=str(work / "gated"))
    p = subprocess.run(["bash", "tools/quality/gpu_quality.sh"], cwd=work, env=dict(gated, REQUIRE_GPU="H200"),
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 3, (p.returncode, p.stderr[-2000:])
    assert p.stderr.strip().splitlines() == ["REQUIRE_GPU=H200: this machine's GPU is NVIDIA H100 80GB HBM3; stopping before any work"]
    assert not (work / "gated").exists()
    p = subprocess.run(["bash", "tools/quality/gpu_quality.sh"], cwd=work, env=dict(gated, REQUIRE_GPU="H100"),
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert len((work / "gated" / "runs-gpu.jsonl").read_text().splitlines()) == 1
