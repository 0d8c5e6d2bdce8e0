"""The package's results equal the command line's for the same data, settings and seed: each
test writes the data to a CSV file, runs the built `grove` binary on it, fits the estimator
on the same numbers, and compares the best program (text and size), its fitness and scores,
the hall of fame and the generation statistics."""

import json
import pathlib

import numpy as np
import pytest
from sklearn.datasets import load_wine

import grove
from grove import SymbolicClassifier, SymbolicRegressor

REPO = pathlib.Path(__file__).resolve().parents[2]


def write_csv(path, X, y, names, target):
    """Full-precision CSV (repr of each float64 round-trips), as grove reads it."""
    with open(path, "w") as f:
        f.write(",".join([*names, target]) + "\n")
        for row, t in zip(X, y):
            f.write(",".join(repr(float(v)) for v in row) + f",{t}\n")


def same_run(cli, py):
    """The parts of two reports that the engine decides (not the timing or the data's name)."""
    for key in ["best", "train", "model", "hall_of_fame"]:
        assert py[key] == cli[key], f"{key} differs:\n  cli {cli[key]}\n  py  {py[key]}"
    # (zip's strict= is Python 3.10's; the package supports 3.9.)
    assert len(py["generations"]) == len(cli["generations"])
    for g_cli, g_py in zip(cli["generations"], py["generations"]):
        g_cli, g_py = dict(g_cli), dict(g_py)
        g_cli.pop("seconds"), g_py.pop("seconds")
        assert g_py == g_cli
    s_cli, s_py = dict(cli["settings"]), dict(py["settings"])
    for k in ["data", "test_fraction", "grammar"]:
        s_cli.pop(k, None), s_py.pop(k, None)
    assert s_py == s_cli


@pytest.mark.parametrize("functions", ["add,sub,mul,div,sin,cos", None])
def test_regressor_equals_grove_evolve(tmp_path, grove_cli, functions):
    rng = np.random.default_rng(7)
    X = rng.uniform(-2, 2, (150, 3))
    y = np.sin(X[:, 0]) * X[:, 1] + 0.5 * X[:, 2] ** 2
    names = ["x0", "x1", "x2"]
    write_csv(tmp_path / "d.csv", X, y, names, "y")
    common = ["--pop", 400, "--gens", 12, "--seed", 5, "--parsimony", 0.001, "--tournament", 4, "--max-len", 64,
              "--optimise-constants", 3, "--optimise-every", 4, "--optimise-fraction", 0.05]
    rep = ["--functions", functions] if functions else ["--grammar", "grammars/regression.bnf"]
    grove_cli("evolve", "--data", tmp_path / "d.csv", *rep, *common, "--device", "cpu", "--quiet", "--report", tmp_path / "r.json")
    cli = json.loads((tmp_path / "r.json").read_text())
    est = SymbolicRegressor(
        population_size=400, generations=12, random_state=5, parsimony_coefficient=0.001, tournament_size=4,
        max_length=64, device="cpu", optimise_constants=3, optimise_every=4, optimise_fraction=0.05,
        **(dict(function_set=functions) if functions else dict(grammar=str(REPO / "grammars" / "regression.bnf"))),
    ).fit(X, y)
    same_run(cli, est.report_)
    assert est.report_["settings"]["engine"]["constants"] == {"steps": 3, "every": 4, "fraction": 0.05}
    assert est.program_ == cli["best"]["infix"]
    # Predictions equal `grove predict` on the same rows.
    out = grove_cli("predict", "--model", tmp_path / "r.json", "--data", tmp_path / "d.csv")
    want = np.array([float(v) for v in out.stdout.split()[1:]])
    np.testing.assert_array_equal(est.predict(X), want)


def test_classifier_equals_grove_classify(tmp_path, grove_cli):
    X, y = load_wine(return_X_y=True)
    labels = np.array(["barolo", "grignolino", "barbera"])[y]
    names = [f"f{j}" for j in range(X.shape[1])]
    write_csv(tmp_path / "w.csv", X, labels, names, "cultivar")
    grove_cli(
        "classify", "--data", tmp_path / "w.csv", "--pop", 300, "--gens", 8, "--seed", 3, "--device", "cpu",
        "--optimise-constants", 3, "--optimise-every", 3, "--optimise-fraction", 0.05,
        "--quiet", "--report", tmp_path / "c.json",
    )
    cli = json.loads((tmp_path / "c.json").read_text())
    # grove classify trains on its stratified split of the file; the estimator gets the same rows.
    classes, codes = np.unique(labels, return_inverse=True)
    train, test = grove._grove.stratified_split(codes.astype(np.uint32).tolist(), len(classes), 0.25, 3)
    est = SymbolicClassifier(population_size=300, generations=8, random_state=3, device="cpu",
                             optimise_constants=3, optimise_every=3, optimise_fraction=0.05)
    import pandas as pd

    est.fit(pd.DataFrame(X[train], columns=names), pd.Series(labels[train], name="cultivar"))
    py = est.report_
    assert py["classes"] == cli["classes"] == list(classes)
    same_run(cli, py)
    assert py["settings"]["engine"]["constants"] == {"steps": 3, "every": 3, "fraction": 0.05}
    # The test part: the estimator's accuracy on the held-out rows is the command line's.
    assert est.score(pd.DataFrame(X[test], columns=names), labels[test]) == pytest.approx(cli["test"]["accuracy"])


@pytest.mark.parametrize("fresh", [False, True])
def test_control_equals_grove_control(tmp_path, grove_cli, fresh):
    args = ["--env", "swimmer", "--pop", 24, "--gens", 2, "--episode-steps", 60, "--test-episodes", 2, "--seed", 4]
    args += ["--fresh-starts"] if fresh else []
    grove_cli("control", *args, "--device", "cpu", "--quiet", "--report", tmp_path / "p.json")
    cli = json.loads((tmp_path / "p.json").read_text())
    policy = grove.control(
        "swimmer", population_size=24, generations=2, episode_steps=60, test_episodes=2, random_state=4, device="cpu",
        fresh_starts=fresh,
    )
    assert policy.report["settings"]["fresh_starts"] is fresh
    for key in ["best", "train", "test", "policy", "settings"]:
        assert policy.report[key] == cli[key], key
    untimed = lambda gens: [{k: v for k, v in g.items() if k != "seconds"} for g in gens]  # noqa: E731
    assert untimed(policy.report["generations"]) == untimed(cli["generations"])
    # Replaying the policy from Python equals `grove rollout --policy` on the report.
    out = grove_cli("rollout", "--policy", tmp_path / "p.json", "--steps", 60)
    r = policy.rollout(steps=60, seed=1)
    assert f"return {r.total_return:.6f} over {r.steps} steps" in out.stdout


def test_builtin_data_equals_the_command_lines(grove_cli, tmp_path):
    X, y = grove.load_builtin("pagie1:64")
    assert X.shape == (64, 2) and y.shape == (64,)
    grove_cli("evolve", "--data", "builtin:pagie1:64", "--functions", "add,sub,mul,div", "--pop", 200, "--gens", 5,
              "--device", "cpu", "--quiet", "--report", tmp_path / "b.json")
    cli = json.loads((tmp_path / "b.json").read_text())
    est = SymbolicRegressor(function_set="add,sub,mul,div", population_size=200, generations=5, random_state=1,
                            device="cpu").fit(X, y)
    same_run(cli, est.report_)
    with pytest.raises(ValueError, match="unknown"):
        grove.load_builtin("nosuchproblem")


def test_islands_equal_grove_evolves(tmp_path, grove_cli):
    rng = np.random.default_rng(2)
    X = rng.uniform(-2, 2, (100, 2))
    y = X[:, 0] * X[:, 1] - X[:, 1]
    write_csv(tmp_path / "d.csv", X, y, ["x0", "x1"], "y")
    grove_cli("evolve", "--data", tmp_path / "d.csv", "--functions", "add,sub,mul", "--pop", 150, "--gens", 6, "--seed", 9,
              "--islands", 3, "--migrate-every", 2, "--migrants", 4, "--device", "cpu", "--quiet",
              "--report", tmp_path / "r.json")
    cli = json.loads((tmp_path / "r.json").read_text())
    est = SymbolicRegressor(function_set="add,sub,mul", population_size=150, generations=6, random_state=9, islands=3,
                            migrate_every=2, migrants=4, device="cpu").fit(X, y)
    same_run(cli, est.report_)


def test_custom_operators_equal_grove_evolves_define(tmp_path, grove_cli):
    rng = np.random.default_rng(3)
    X = rng.uniform(-3, 3, (120, 2))
    y = X[:, 0] / (1 + np.abs(X[:, 0])) + X[:, 1] ** 3
    write_csv(tmp_path / "d.csv", X, y, ["x0", "x1"], "y")
    defs = ["softsign(x) = x / (1 + abs(x))", "cube3(x) = x*x*x"]
    grove_cli("evolve", "--data", tmp_path / "d.csv", "--functions", "add,mul,softsign,cube3", "--define", defs[0], "--define", defs[1],
              "--pop", 300, "--gens", 8, "--seed", 4, "--device", "cpu", "--quiet", "--report", tmp_path / "r.json")
    cli = json.loads((tmp_path / "r.json").read_text())
    est = SymbolicRegressor(function_set="add,mul,softsign,cube3", operators=defs, population_size=300, generations=8,
                            random_state=4, device="cpu").fit(X, y)
    same_run(cli, est.report_)
    # A dict of signatures gives the same run.
    again = SymbolicRegressor(function_set="add,mul,softsign,cube3", operators={"softsign(x)": "x / (1 + abs(x))", "cube3(x)": "x*x*x"},
                              population_size=300, generations=8, random_state=4, device="cpu").fit(X, y)
    assert again.program_ == est.program_
    out = grove_cli("predict", "--model", tmp_path / "r.json", "--data", tmp_path / "d.csv")
    np.testing.assert_array_equal(est.predict(X), np.array([float(v) for v in out.stdout.split()[1:]]))
    # sympy knows the operators the program uses by their definitions.
    import sympy

    expr = est.sympy()
    x0, x1 = sympy.symbols("x0 x1")
    f = sympy.lambdify((x0, x1), expr, "numpy")
    np.testing.assert_allclose(f(X[:, 0], X[:, 1]), est.predict(X), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "operators, message",
    [
        (["f(x) = f(x) + 1"], "calls itself"),
        (["f(x) = foo(x)"], "unknown operator"),
        (["f(x) = x + y"], "unknown variable"),
        (["sin(x) = x"], "shadows"),
        ([""], "each definition is a string"),
        (42, "'operators' parameter"),
    ],
)
def test_bad_operator_definitions_are_value_errors(operators, message):
    X = np.random.default_rng(0).uniform(-1, 1, (40, 2))
    with pytest.raises(ValueError, match=message):
        SymbolicRegressor(function_set="add,mul", operators=operators, population_size=50, generations=1, device="cpu").fit(X, X[:, 0])
