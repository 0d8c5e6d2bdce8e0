"""The estimators on ``device="cuda"`` give the command line's results: each test runs the
built ``grove`` binary with ``--device cuda`` and the estimator with the same data, settings and
seed, and compares the best program, scores, hall of fame and generation statistics (as
test_same_as_cli.py does on the CPU); a warm-started fit on the GPU continues to the run of one
longer fit; custom operators and a target equal the command line's. Runs only with
GROVE_TEST_GPU=1 (a machine with a CUDA GPU; then a missing GPU is a failure):
tools/python/gpu_check.sh runs it from a built wheel."""

import json
import os

import numpy as np
import pytest
from sklearn.datasets import load_wine

import grove
from grove import SymbolicClassifier, SymbolicRegressor
from test_same_as_cli import same_run, write_csv

pytestmark = pytest.mark.skipif(os.environ.get("GROVE_TEST_GPU") != "1", reason="needs a CUDA GPU: set GROVE_TEST_GPU=1")


def on_gpu(report):
    assert report["timing"]["device"].startswith("cuda"), report["timing"]["device"]


def regression_data():
    rng = np.random.default_rng(11)
    X = rng.uniform(-2, 2, (400, 3))
    return X, np.sin(X[:, 0]) * X[:, 1] + 0.5 * X[:, 2] ** 2


@pytest.mark.parametrize("islands", [1, 2])
def test_cuda_regressor_equals_grove_evolve_on_cuda(tmp_path, grove_cli, islands):
    X, y = regression_data()
    write_csv(tmp_path / "d.csv", X, y, ["x0", "x1", "x2"], "y")
    grove_cli("evolve", "--data", tmp_path / "d.csv", "--functions", "add,sub,mul,div,sin,cos", "--pop", 2000,
              "--gens", 15, "--seed", 5, "--islands", islands, "--device", "cuda", "--quiet", "--report", tmp_path / "r.json")
    cli = json.loads((tmp_path / "r.json").read_text())
    on_gpu(cli)
    est = SymbolicRegressor(function_set="add,sub,mul,div,sin,cos", population_size=2000, generations=15, random_state=5,
                            islands=islands, device="cuda").fit(X, y)
    on_gpu(est.report_)
    same_run(cli, est.report_)
    # The GPU's defaults fit no constants, as the CPU's and the command line's.
    assert est.report_["settings"]["engine"]["constants"] == cli["settings"]["engine"]["constants"]
    assert est.report_["settings"]["engine"]["constants"]["steps"] == 0
    out = grove_cli("predict", "--model", tmp_path / "r.json", "--data", tmp_path / "d.csv")
    np.testing.assert_array_equal(est.predict(X), np.array([float(v) for v in out.stdout.split()[1:]]))


def test_cuda_classifier_equals_grove_classify_on_cuda(tmp_path, grove_cli):
    X, y = load_wine(return_X_y=True)
    labels = np.array(["barolo", "grignolino", "barbera"])[y]
    names = [f"f{j}" for j in range(X.shape[1])]
    write_csv(tmp_path / "w.csv", X, labels, names, "cultivar")
    grove_cli("classify", "--data", tmp_path / "w.csv", "--pop", 2000, "--gens", 10, "--seed", 3, "--device", "cuda",
              "--quiet", "--report", tmp_path / "c.json")
    cli = json.loads((tmp_path / "c.json").read_text())
    on_gpu(cli)
    classes, codes = np.unique(labels, return_inverse=True)
    train, test = grove._grove.stratified_split(codes.astype(np.uint32).tolist(), len(classes), 0.25, 3)
    import pandas as pd

    est = SymbolicClassifier(population_size=2000, generations=10, random_state=3, device="cuda")
    est.fit(pd.DataFrame(X[train], columns=names), pd.Series(labels[train], name="cultivar"))
    on_gpu(est.report_)
    same_run(cli, est.report_)
    assert est.score(pd.DataFrame(X[test], columns=names), labels[test]) == pytest.approx(cli["test"]["accuracy"])


def test_cuda_warm_start_continues_to_the_run_of_one_longer_fit():
    X, y = regression_data()
    kw = dict(function_set="add,sub,mul,sin", population_size=2000, random_state=8, device="cuda")
    whole = SymbolicRegressor(generations=12, **kw).fit(X, y)
    m = SymbolicRegressor(generations=7, warm_start=True, **kw).fit(X, y)
    m.set_params(generations=12).fit(X, y)
    on_gpu(m.report_)
    same_run(whole.report_, m.report_)
    assert m.program_ == whole.program_


def test_cuda_control_equals_grove_control_on_cuda(tmp_path, grove_cli):
    args = ["--env", "swimmer", "--pop", 256, "--gens", 3, "--episodes", 2, "--episode-steps", 100, "--seed", 4]
    grove_cli("control", *args, "--device", "cuda", "--quiet", "--report", tmp_path / "p.json")
    cli = json.loads((tmp_path / "p.json").read_text())
    policy = grove.control("swimmer", population_size=256, generations=3, episodes=2, episode_steps=100, random_state=4,
                           device="cuda")
    for key in ["best", "train", "test", "policy", "settings"]:
        assert policy.report[key] == cli[key], key


def test_cuda_custom_operators_and_budget_equal_the_command_lines(tmp_path, grove_cli):
    X, y = regression_data()
    write_csv(tmp_path / "d.csv", X, y, ["x0", "x1", "x2"], "y")
    defs = ["softsign(x) = x / (1 + abs(x))", "hyp(a, b) = sqrt(a*a + b*b)"]
    grove_cli("evolve", "--data", tmp_path / "d.csv", "--functions", "add,mul,sin,softsign,hyp", "--define", defs[0],
              "--define", defs[1], "--pop", 2000, "--gens", 40, "--seed", 2, "--stop-at", 0.05, "--device", "cuda", "--quiet",
              "--report", tmp_path / "r.json")
    cli = json.loads((tmp_path / "r.json").read_text())
    on_gpu(cli)
    est = SymbolicRegressor(function_set="add,mul,sin,softsign,hyp", operators=defs, population_size=2000, generations=40,
                            random_state=2, stop_at=0.05, device="cuda").fit(X, y)
    on_gpu(est.report_)
    same_run(cli, est.report_)
    assert est.report_["ended"] == cli["ended"]
    out = grove_cli("predict", "--model", tmp_path / "r.json", "--data", tmp_path / "d.csv")
    np.testing.assert_array_equal(est.predict(X), np.array([float(v) for v in out.stdout.split()[1:]]))


def test_cuda_loss_equals_grove_evolve_on_cuda(tmp_path, grove_cli):
    """Issue 58: a loss of one's own on the GPU is the command line's run there."""
    X, y = regression_data()
    write_csv(tmp_path / "d.csv", X, y, ["x0", "x1", "x2"], "y")
    grove_cli("evolve", "--data", tmp_path / "d.csv", "--functions", "add,sub,mul,div", "--pop", 1000, "--gens", 8, "--seed", 3,
              "--loss", "log(cosh(p - y))", "--device", "cuda", "--quiet", "--report", tmp_path / "r.json")
    cli = json.loads((tmp_path / "r.json").read_text())
    on_gpu(cli)
    est = SymbolicRegressor(function_set="add,sub,mul,div", population_size=1000, generations=8, random_state=3, loss="log(cosh(p - y))",
                            device="cuda").fit(X, y)
    on_gpu(est.report_)
    same_run(cli, est.report_)


@pytest.mark.parametrize("library", ["torch", "cupy"])
def test_cuda_fitness_function_reads_the_batch_on_the_device(library):
    """Issue 58: on device="cuda" a fitness function gets DLPack arrays on the GPU, which torch or
    CuPy wrap without a copy; its CUDA scores come back, and the report's training loss is the
    function's score of the returned model's predictions."""
    lib = pytest.importorskip(library)
    X, y = regression_data()
    seen = []

    def fitness(pred, t):
        seen.append((pred.__dlpack_device__(), pred.shape))
        p, tt = lib.from_dlpack(pred), lib.from_dlpack(t)
        return abs(p - tt).mean(axis=1) if library == "cupy" else (p - tt).abs().mean(dim=1)

    gpu = SymbolicRegressor(function_set="add,sub,mul,div", population_size=1000, generations=6, random_state=2, device="cuda", validation_fraction=0.0,
                            fitness_function=fitness).fit(X, y)
    on_gpu(gpu.report_)
    assert seen[0][0][0] == 2 and seen[0][1] == (1000, 400), seen[0]
    pred = gpu.predict(X).astype(np.float32)
    assert gpu.report_["train"]["loss"] == pytest.approx(float(np.abs(pred - y.astype(np.float32)).mean()), rel=1e-4)
