"""The estimators' behaviour beyond scikit-learn's checks: what they learn, the model as text,
sympy and LaTeX, the hall of fame, inputs in every layout (and bad ones), pickling, pipelines,
progress, the CPU fallback warning and Ctrl-C."""

import json
import os
import pickle
import signal
import threading
import time
import warnings

import numpy as np
import pytest
from sklearn.datasets import load_iris
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

import grove
from grove import SymbolicClassifier, SymbolicRegressor

from conftest import interrupt_soon

SMALL = dict(population_size=300, generations=10, device="cpu", random_state=1)


def quadratic(n=200, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, 2))
    return X, X[:, 0] ** 2 + X[:, 1]


def iris_named():
    X, y = load_iris(return_X_y=True)
    return X, np.array(["setosa", "versicolor", "virginica"])[y]


# What they learn, and the model as text.


def test_regressor_finds_a_simple_formula_and_predicts_it():
    X, y = quadratic()
    m = SymbolicRegressor(**SMALL, select="train").fit(X, y)
    assert m.score(X, y) > 0.999
    assert m.n_features_in_ == 2
    assert "x0" in m.program_ and "x1" in m.program_
    # predict applies the reported program: its training MSE is the report's (select="train"
    # holds out no rows, so every row is a training row).
    assert m.selection_["validation_rows"] == 0
    mse = float(np.mean((m.predict(X) - y) ** 2))
    assert mse == pytest.approx(m.report_["train"]["mse"], rel=1e-9, abs=1e-12)



def test_regressor_with_a_fitted_head_predicts_its_whole_model():
    X, y = quadratic()
    m = SymbolicRegressor(**SMALL, select="train", outputs=3).fit(X, y)
    head = m.report_["model"]["head"]
    assert m.report_["model"]["n_outputs"] == 3 and len(head["w"]) == 3
    assert m.get_params()["outputs"] == 3
    # predict applies b + sum_k w_k*f_k: its training MSE is the report's.
    mse = float(np.mean((m.predict(X) - y) ** 2))
    assert mse == pytest.approx(m.report_["train"]["mse"], rel=1e-9, abs=1e-12)
    # sympy's expression of the whole model gives predict's values.
    import sympy

    e = m.sympy()
    x0, x1 = sympy.symbols("x0 x1")
    for row, p in zip(X[:5], m.predict(X[:5])):
        assert float(e.subs({x0: row[0], x1: row[1]})) == pytest.approx(p, rel=1e-4, abs=1e-4)
    with pytest.raises(ValueError, match="outputs"):
        SymbolicRegressor(**SMALL, outputs=9).fit(X, y)

def test_regressor_with_linear_inputs_predicts_its_whole_model():
    rng = np.random.default_rng(5)
    X = rng.uniform(-2, 2, (150, 3))
    y = 3 * X[:, 0] - 2 * X[:, 1] + X[:, 0] * X[:, 2] + rng.normal(0, 0.05, 150)
    m = SymbolicRegressor(**SMALL, select="train").fit(X, y)
    assert m.get_params()["linear_inputs"] == "auto"
    lin = m.report_["model"]["linear"]
    assert m.report_["linear_inputs"]["used"] and len(lin["a"]) == 3
    assert m.score(X, y) > 0.99
    # predict applies the program and the terms: its training MSE is the report's (grove reads
    # y as float32, this as float64: near a fit this close that rounding shows in the 7th digit).
    mse = float(np.mean((m.predict(X) - y) ** 2))
    assert mse == pytest.approx(m.report_["train"]["mse"], rel=1e-5)
    import sympy

    e = m.sympy()
    syms = sympy.symbols("x0 x1 x2")
    for row, p in zip(X[:5], m.predict(X[:5])):
        assert float(e.subs(dict(zip(syms, row)))) == pytest.approx(p, rel=1e-4, abs=1e-4)
    off = SymbolicRegressor(**SMALL, select="train", linear_inputs="off").fit(X, y)
    assert "linear" not in off.report_["model"] and not off.report_["linear_inputs"]["used"]
    with pytest.raises(ValueError, match="linear_inputs"):
        SymbolicRegressor(**SMALL, linear_inputs="sometimes").fit(X, y)


def test_classifier_with_linear_inputs_predicts_its_whole_model():
    rng = np.random.default_rng(6)
    X = rng.uniform(-2, 2, (240, 3))
    # Three classes by the largest of three lines in x0 and x1; one row in 9 moved.
    s = np.stack([np.zeros(240), 2 * X[:, 0] - X[:, 1], -X[:, 0] + 2 * X[:, 1] + 0.5], axis=1)
    y = np.array(["a", "b", "c"])[(s.argmax(axis=1) + (np.arange(240) % 9 == 4)) % 3]
    m = SymbolicClassifier(**SMALL).fit(X, y)
    assert m.get_params()["linear_inputs"] == "auto"
    terms = m.report_["model"]["logit_terms"]
    assert m.report_["linear_inputs"]["used"] and len(terms) == 3 and all(len(t["a"]) == 3 for t in terms)
    assert "*x0" in m.programs_[0]
    # predict is the argmax of the outputs with their terms: the training accuracy the report
    # gives, and the probabilities' argmax.
    assert m.score(X, y) == pytest.approx(m.report_["train"]["accuracy"])
    assert (m.classes_[m.predict_proba(X).argmax(axis=1)] == m.predict(X)).all()
    off = SymbolicClassifier(**SMALL, linear_inputs="off").fit(X, y)
    assert "logit_terms" not in off.report_["model"] and not off.report_["linear_inputs"]["used"]
    with pytest.raises(ValueError, match="linear_inputs"):
        SymbolicClassifier(**SMALL, linear_inputs="sometimes").fit(X, y)


def test_classifier_with_a_head_predicts_its_whole_model():
    rng = np.random.default_rng(7)
    X = rng.uniform(-2, 2, (240, 3))
    # Classes by a radius and a sign: no line in the inputs separates them.
    inner = X[:, 0] ** 2 + X[:, 1] ** 2 < 1.5
    y = np.where(inner, "in", np.where(X[:, 0] * X[:, 2] > 0, "same", "other"))
    m = SymbolicClassifier(**SMALL, outputs=2).fit(X, y)
    head = m.report_["model"]["class_head"]
    assert len(head) == 3 and all(len(h["a"]) == 2 for h in head)
    assert m.report_["model"]["n_outputs"] == 2 and not m.report_["linear_inputs"]["used"]
    # predict is the argmax of the head's logits: the training accuracy the report gives, and
    # the probabilities' argmax; sympy gives one logit per class.
    assert m.score(X, y) == pytest.approx(m.report_["train"]["accuracy"])
    p = m.predict_proba(X)
    assert p.shape == (240, 3) and np.allclose(p.sum(axis=1), 1.0)
    assert (m.classes_[p.argmax(axis=1)] == m.predict(X)).all()
    assert len(m.sympy()) == 3 and len(m.programs_) == 3
    assert SymbolicClassifier().get_params()["outputs"] == 0
    with pytest.raises(ValueError, match="outputs"):
        SymbolicClassifier(**SMALL, outputs=9).fit(X, y)
    with pytest.raises(ValueError, match="--outputs"):
        SymbolicClassifier(**SMALL, outputs=2, linear_inputs="on").fit(X, y)


def test_validation_rows_choose_the_returned_program():
    rng = np.random.default_rng(3)
    X = rng.uniform(-1, 1, (400, 3))
    y = X[:, 0] * X[:, 1] + np.sin(3 * X[:, 2]) + rng.normal(0, 0.3, 400)
    m = SymbolicRegressor(**SMALL, validation_fraction=0.25).fit(X, y)
    sel = m.selection_
    # A quarter held out: the simplest candidate (the mean, the linear terms alone, the ridge on
    # every input, then the front by size) within one standard error of the lowest validation
    # error is returned.
    assert (sel["asked"], sel["rule"], sel["training_rows"], sel["validation_rows"]) == ("auto", "validation", 300, 100)
    cands = sel["candidates"]
    low = min(cands, key=lambda c: c["mse"])
    first = next(c for c in cands if c["mse"] <= low["mse"] + low["se"])
    assert first["chosen"] and sum(c["chosen"] for c in cands) == 1
    assert cands[0]["candidate"] == "mean"
    assert m.report_["validation"]["mse"] == pytest.approx(first["mse"], rel=1e-9)
    eq = m.report_["hall_of_fame"]
    chosen = [r for r in eq if r["selected"]]
    if first["candidate"].startswith("front"):
        assert len(chosen) == 1 and m.program_ == chosen[0]["equation"]
    else:
        assert not chosen and sel["baseline"] == first["candidate"]
    # 400 rows by default: no rows held out (validation rows from 20000), the whole fit
    # cross-validated in 5 folds.
    d = SymbolicRegressor(**SMALL).fit(X, y)
    assert (d.selection_["rule"], d.selection_["validation_rows"], d.selection_["resampling"]["folds"]) == ("cv", 0, 5)
    # The other rules, and bloat control, pass through to the engine.
    p = SymbolicRegressor(**SMALL, select="pareto", validation_fraction=0.5).fit(X, y)
    assert (p.selection_["rule"], p.selection_["validation_rows"]) == ("pareto", 200)
    best = max(range(len(p.report_["hall_of_fame"])), key=lambda i: p.report_["hall_of_fame"][i]["score"])
    assert p.selection_["front_index"] == best
    t = SymbolicRegressor(**SMALL, select="train", bloat="double-tournament", size_pressure=2.0).fit(X, y)
    assert t.report_["settings"]["engine"]["bloat"] == "double-tournament"
    assert t.report_["settings"]["engine"]["size_pressure"] == 2.0
    assert t.selection_["rule"] == "train"
    c = SymbolicClassifier(**SMALL, validation_fraction=0.3, bloat="lexicographic").fit(*iris_named())
    assert c.selection_["rule"] == "validation"
    assert c.report_["validation"]["rows"] == c.selection_["validation_rows"] == 45
    with pytest.raises(ValueError, match="needs validation rows"):
        SymbolicRegressor(**SMALL, select="validation").fit(*quadratic(50))


def test_regressor_sympy_latex_and_hall_of_fame():
    sympy = pytest.importorskip("sympy")
    pd = pytest.importorskip("pandas")
    X, y = quadratic()
    m = SymbolicRegressor(**SMALL).fit(X, y)
    e = m.sympy()
    x0, x1 = sympy.symbols("x0 x1")
    for row in X[:5]:
        got = float(e.subs({x0: row[0], x1: row[1]}))
        assert got == pytest.approx(m.predict(row[None, :])[0], rel=1e-4, abs=1e-4)
    assert "\\" in m.latex() or "x_{0}" in m.latex()
    eq = m.equations_
    assert isinstance(eq, pd.DataFrame)
    assert list(eq.columns) == ["complexity", "loss", "validation_loss", "score", "selected", "description_length", "cv_loss", "cv_se", "equation", "latex", "sympy"]
    assert eq["complexity"].is_monotonic_increasing and eq["loss"].is_monotonic_decreasing
    # 200 rows: no validation rows; every member has its cross-validated error.
    assert eq["validation_loss"].isna().all()
    assert eq["cv_loss"].notna().all() and eq["cv_se"].notna().all()


def test_hall_of_fame_without_pandas_is_a_list_of_dicts(monkeypatch):
    import sys

    X, y = quadratic(80)
    m = SymbolicRegressor(**SMALL).fit(X, y)
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas now raises ImportError
    rows = m.equations_
    assert isinstance(rows, list) and rows
    assert set(rows[-1]) == {"complexity", "loss", "validation_loss", "score", "selected", "description_length", "cv_loss", "cv_se", "equation", "latex", "sympy"}
    # 80 rows: no validation rows, so the lowest cross-validated error of the whole fit is
    # returned (a quadratic: a program, not the mean or a line).
    assert m.selection_["rule"] == "cv"
    chosen = [r for r in rows if r["selected"]]
    assert len(chosen) == 1, m.selection_
    assert chosen[0]["cv_loss"] == min(r["cv_loss"] for r in rows)
    assert min(c["mse"] for c in m.selection_["candidates"]) == pytest.approx(chosen[0]["cv_loss"], rel=1e-12)
    assert chosen[0]["loss"] == m.best_fitness_


def test_cross_validated_choice_scores_every_member_at_its_size():
    X, y = quadratic(60)
    m = SymbolicRegressor(**SMALL, select="cv").fit(X, y)
    assert m.selection_["rule"] == "cv"
    assert m.selection_["cross_validation"]["folds"] == 5
    curve = m.selection_["cross_validation"]["mse_by_size"]
    eq = m.equations_
    assert list(eq["cv_loss"]) == pytest.approx([curve[c - 1] for c in eq["complexity"]], rel=1e-12)
    assert eq.loc[eq["selected"], "cv_loss"].iloc[0] == eq["cv_loss"].min()
    with pytest.raises(ValueError, match="select"):
        SymbolicClassifier(**SMALL, select="cv").fit(*iris_named())
    # select="folds": the front cross-validated, the one-standard-error rule; folds past the rows
    # are a ValueError before the run.
    f = SymbolicRegressor(**SMALL, select="folds", folds=3).fit(X, y)
    assert (f.selection_["rule"], f.selection_["resampling"]["folds"]) == ("folds", 3)
    with pytest.raises(ValueError, match="--folds 61 \\(folds\\) is more than the 60 training rows"):
        SymbolicRegressor(**SMALL, folds=61).fit(X, y)
    with pytest.raises(ValueError, match="folds"):
        SymbolicRegressor(**SMALL, folds=1).fit(X, y)
    with pytest.raises(ValueError, match="output_margin"):
        SymbolicRegressor(**SMALL, output_margin=-0.5).fit(X, y)


def test_an_output_margin_clamps_predictions_and_the_default_function_set_is_the_command_lines(tmp_path, grove_cli):
    # A line on [0, 1]: far outside it, the unlimited model extrapolates; with output_margin=0.1
    # predictions stay within the training target's range widened by a tenth of its width.
    X = np.linspace(0.0, 1.0, 40).reshape(-1, 1)
    y = 2.0 * X[:, 0] + 1.0
    far = np.array([[-10.0], [10.0]])
    free = SymbolicRegressor(**SMALL).fit(X, y)
    held = SymbolicRegressor(**SMALL, output_margin=0.1).fit(X, y)
    lo, hi = y.min() - 0.1 * (y.max() - y.min()), y.max() + 0.1 * (y.max() - y.min())
    assert free.predict(far)[1] > hi + 1.0 and free.predict(far)[0] < lo - 1.0
    p = held.predict(far)
    assert p[0] == pytest.approx(lo, rel=1e-6) and p[1] == pytest.approx(hi, rel=1e-6)
    np.testing.assert_allclose(held.predict(X), free.predict(X), rtol=1e-5, atol=1e-6)
    assert held.report_["settings"]["output_margin"] == 0.1
    # Without function_set, the regressor's function set is grove evolve's without --functions.
    data = tmp_path / "line.csv"
    np.savetxt(data, np.column_stack([X[:, 0], y]), delimiter=",", header="x,y", comments="")
    report = tmp_path / "cli.json"
    grove_cli("evolve", "--data", data, "--pop", "20", "--gens", "1", "--device", "cpu", "-q", "--report", report)
    assert free.report_["settings"]["functions"] == json.loads(report.read_text())["settings"]["functions"]


def test_classifier_with_string_labels_probabilities_and_programs():
    X, y = iris_named()
    c = SymbolicClassifier(**SMALL).fit(X, y)
    assert list(c.classes_) == ["setosa", "versicolor", "virginica"]
    assert c.score(X, y) > 0.9
    proba = c.predict_proba(X)
    assert proba.shape == (150, 3)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-12)
    assert (proba >= 0).all()
    np.testing.assert_array_equal(c.classes_[proba.argmax(axis=1)], c.predict(X))
    assert len(c.programs_) == 3
    assert len(c.latex()) == 3
    # The model's accuracy on its training rows is the report's.
    # 150 rows: too few for the automatic validation split, so every row is a training row.
    assert c.selection_["validation_rows"] == 0
    assert c.score(X, y) == pytest.approx(c.report_["train"]["accuracy"])
    if pytest.importorskip("sympy"):
        assert len(c.sympy()) == 3


def test_classifier_with_integer_labels_that_are_not_0_to_k():
    X, y = load_iris(return_X_y=True)
    labels = np.array([10, -3, 7])[y]
    c = SymbolicClassifier(**SMALL).fit(X, labels)
    assert list(c.classes_) == [-3, 7, 10]
    assert set(c.predict(X)) <= {-3, 7, 10}


def test_grammar_by_path_and_by_text_give_the_same_run():
    X, y = quadratic(100)
    path = os.path.join(os.path.dirname(__file__), "..", "..", "grammars", "regression.bnf")
    with open(path) as f:
        text = f.read()
    a = SymbolicRegressor(grammar=path, **SMALL).fit(X, y)
    b = SymbolicRegressor(grammar=text, **SMALL).fit(X, y)
    assert a.program_ == b.program_
    # The run's best keeps its genome (a program chosen on validation rows may not: the hall
    # of fame keeps trees).
    t = SymbolicRegressor(grammar=path, select="train", **SMALL).fit(X, y)
    assert "genome" in t.report_["best"]


def test_bad_grammar_and_function_set_are_value_errors():
    X, y = quadratic(50)
    with pytest.raises(ValueError, match="not both"):
        SymbolicRegressor(grammar="<e> ::= x0", function_set="add", **SMALL).fit(X, y)
    with pytest.raises(ValueError, match="neither a grammar file nor grammar text"):
        SymbolicRegressor(grammar="no/such/file.bnf", **SMALL).fit(X, y)
    with pytest.raises(ValueError, match="grammar text"):
        SymbolicRegressor(grammar="<e> ::= <f> + 1", **SMALL).fit(X, y)
    with pytest.raises(ValueError, match="frobnicate"):
        SymbolicRegressor(function_set="add,frobnicate", **SMALL).fit(X, y)
    with pytest.raises(ValueError, match="linear"):
        SymbolicRegressor(metric="mae", **SMALL).fit(X, y)


def test_lexicase_selection_reaches_the_engine_and_bad_values_are_refused():
    X, y = quadratic(120)
    m = SymbolicRegressor(**SMALL, selection="lexicase", bloat="none").fit(X, y)
    assert m.report_["settings"]["engine"]["selection"] == "lexicase"
    d = SymbolicRegressor(**SMALL, selection="down-sampled", down_sample=8).fit(X, y)
    assert (d.report_["settings"]["engine"]["selection"], d.report_["settings"]["engine"]["down_sample"]) == ("down-sampled", 8.0)
    c = SymbolicClassifier(**SMALL, selection="lexicase").fit(*iris_named())
    assert c.report_["settings"]["engine"]["selection"] == "lexicase"
    assert c.score(*iris_named()) > 0.8
    # A drawn pool reaches the run, and changes it; a negative one is refused.
    assert m.report_["settings"]["engine"]["lexicase_pool"] == 256
    small = SymbolicRegressor(**SMALL, selection="lexicase", bloat="none", lexicase_pool=8).fit(X, y)
    assert small.report_["settings"]["engine"]["lexicase_pool"] == 8
    with pytest.raises(ValueError, match="lexicase_pool"):
        SymbolicRegressor(**SMALL, selection="lexicase", lexicase_pool=-1).fit(X, y)
    with pytest.raises(ValueError, match="selection"):
        SymbolicRegressor(selection="roulette").fit(X, y)
    with pytest.raises(ValueError, match="down_sample"):
        SymbolicRegressor(**SMALL, selection="down-sampled", down_sample=1.5).fit(X, y)
    with pytest.raises(ValueError, match="replaces the parent tournament"):
        SymbolicRegressor(**SMALL, selection="lexicase", bloat="nsga2").fit(X, y)


def test_parameters_are_validated_with_scikit_learns_messages():
    X, y = quadratic(50)
    with pytest.raises(ValueError, match="population_size"):
        SymbolicRegressor(population_size=1).fit(X, y)
    with pytest.raises(ValueError, match="device"):
        SymbolicRegressor(device="tpu").fit(X, y)
    with pytest.raises(ValueError, match="fitness"):
        SymbolicClassifier(fitness="hinge").fit(*iris_named())
    with pytest.raises(ValueError, match="validation_fraction"):
        SymbolicRegressor(validation_fraction=1.0).fit(X, y)
    with pytest.raises(ValueError, match="select"):
        SymbolicRegressor(select="best").fit(X, y)
    with pytest.raises(ValueError, match="bloat"):
        SymbolicClassifier(bloat="penalty").fit(*iris_named())
    with pytest.raises(ValueError, match="size_pressure"):
        SymbolicRegressor(size_pressure=3).fit(X, y)
    with pytest.raises(ValueError, match="warm_start"):
        SymbolicRegressor(warm_start="yes").fit(X, y)


@pytest.mark.parametrize(
    "params, message",
    [
        (dict(islands=0), "'islands' parameter"),
        (dict(islands=70000), "'islands' parameter"),
        (dict(migrate_every=0), "'migrate_every' parameter"),
        (dict(migrants=-1), "'migrants' parameter"),
        (dict(islands=2, migrants=400), "migrants=400 must be at most population_size=300"),
        (dict(gpus=0), "'gpus' parameter"),
        (dict(gpus="some"), "'gpus' parameter"),
        (dict(gpus=[]), "a list of device ordinals"),
        (dict(gpus=[0, -1]), "a list of device ordinals"),
        (dict(gpus=[1, 1]), "listed twice"),
        (dict(gpu_link="tcp"), "'gpu_link' parameter"),
        (dict(islands=2, population_size=2**31), "--pop × --islands"),
    ],
)
def test_island_and_gpu_parameters_are_checked(params, message):
    X, y = quadratic(50)
    with pytest.raises(ValueError, match=message):
        SymbolicRegressor(**{**SMALL, **params}).fit(X, y)


def test_islands_run_side_by_side_and_the_gpus_do_not_change_a_cpu_run():
    X, y = quadratic(80)
    kw = dict(SMALL, generations=4, islands=3, migrate_every=2, migrants=5)
    m = SymbolicRegressor(**kw).fit(X, y)
    assert m.report_["settings"]["islands"] == {"count": 3, "migrate_every": 2, "migrants": 5, "gpus": "all"}
    # Each generation reports every island's statistics.
    assert all(len(g["islands"]) == 3 for g in m.report_["generations"]), m.report_["generations"][0]
    other = SymbolicRegressor(**kw, gpus=[1, 0]).fit(X, y)
    assert other.report_["settings"]["islands"]["gpus"] == "1,0"
    assert other.program_ == m.program_
    assert SymbolicRegressor(**kw, gpus=[2]).fit(X, y).report_["settings"]["islands"]["gpus"] == "2,"
    assert SymbolicClassifier(**{**kw, "gpus": 2}).fit(*iris_named()).report_["settings"]["islands"]["gpus"] == "2"
    # How GPUs exchange data is reported, and changes no result.
    nccl = SymbolicRegressor(**kw, gpu_link="nccl").fit(X, y)
    assert nccl.report_["settings"]["islands"]["link"] == "nccl"
    assert nccl.program_ == m.program_


def test_rows_split_over_gpus_run_on_the_cpu_as_the_command_line():
    # shard_rows=True with gpus=N on the CPU computes what N GPUs compute: the rows in N
    # blocks, each block's sums added in order. Repeatable, and reported.
    X, y = quadratic(90)
    kw = dict(SMALL, generations=4, shard_rows=True, gpus=3)
    a = SymbolicRegressor(**kw).fit(X, y)
    b = SymbolicRegressor(**kw).fit(X, y)
    assert a.report_["settings"]["islands"]["shard_rows"] is True
    assert "3 row shards" in a.report_["timing"]["device"]
    assert a.program_ == b.program_
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    assert "shard_rows" not in SymbolicRegressor(**SMALL).fit(X, y).report_["settings"]["islands"]
    with pytest.raises(ValueError, match="--gpus N"):
        SymbolicRegressor(**dict(SMALL, shard_rows=True)).fit(X, y)
    with pytest.raises(ValueError, match="one island"):
        SymbolicRegressor(**dict(kw, islands=2)).fit(X, y)


# Budgets: max_time and stop_at.


def test_stop_at_ends_at_the_first_generation_that_reaches_it():
    X, y = quadratic(120)
    kw = dict(SMALL, generations=15)
    whole = SymbolicRegressor(**kw).fit(X, y)
    assert whole.report_["ended"] == {"reason": "generations"}
    bests = [g["best"] for g in whole.report_["generations"]]
    target = bests[len(bests) // 2]
    first = next(i for i, b in enumerate(bests) if b <= target)
    m = SymbolicRegressor(**kw, stop_at=target).fit(X, y)
    assert m.report_["ended"]["reason"] == "stop-at"
    assert m.report_["ended"]["generation"] == first
    assert [g["best"] for g in m.report_["generations"]] == bests[: first + 1]
    c = SymbolicClassifier(**SMALL, stop_at=0.5).fit(*iris_named())
    assert c.report_["ended"]["measure"] == "accuracy" and c.report_["ended"]["value"] >= 0.5


def test_max_time_ends_a_long_run_with_a_complete_model():
    X, y = quadratic(120)
    start = time.monotonic()
    m = SymbolicRegressor(population_size=2000, generations=100000, device="cpu", random_state=1, max_time=1.5).fit(X, y)
    assert time.monotonic() - start < 30
    ended = m.report_["ended"]
    assert ended["reason"] == "time-limit" and ended["time_limit"] == 1.5
    assert m.n_generations_ == ended["generation"] + 1
    assert np.isfinite(m.predict(X)).all()


def test_a_warm_start_may_change_the_budget():
    X, y = quadratic(100)
    m = SymbolicRegressor(**{**SMALL, "generations": 6}, warm_start=True, stop_at=-1.0).fit(X, y)
    m.set_params(generations=9, stop_at=None, max_time=60)
    m.fit(X, y)
    assert m.n_generations_ == 10
    assert m.report_["ended"]["reason"] == "generations"


def test_the_classifiers_population_and_generations_default_to_the_devices():
    X, y = load_iris(return_X_y=True)
    assert SymbolicClassifier().get_params()["population_size"] is None
    assert SymbolicClassifier().get_params()["generations"] is None
    m = SymbolicClassifier(device="cpu", generations=2, random_state=1).fit(X, y)
    engine = m.report_["settings"]["engine"]
    assert (engine["pop_size"], engine["generations"]) == (5000, 2), "the CPU's population, the generations given"
    # A warm start with generations left at None continues to the device's default, which the
    # fitted run had: the model is kept.
    m = SymbolicClassifier(device="cpu", population_size=40, warm_start=True, random_state=1).fit(X, y)
    assert m.report_["settings"]["engine"]["generations"] == 40
    programs = list(m.programs_)
    with pytest.warns(UserWarning, match="as many as the fitted run's"):
        m.fit(X, y)
    assert list(m.programs_) == programs


@pytest.mark.parametrize(
    "params, message",
    [
        (dict(max_time=0), "'max_time' parameter"),
        (dict(max_time=-2.0), "'max_time' parameter"),
        (dict(stop_at="low"), "'stop_at' parameter"),
        (dict(stop_at=float("nan")), "stop_at must be a finite number"),
        (dict(max_time=float("inf")), "'max_time' parameter"),
    ],
)
def test_bad_budgets_are_value_errors(params, message):
    X, y = quadratic(50)
    with pytest.raises(ValueError, match=message):
        SymbolicRegressor(**{**SMALL, **params}).fit(X, y)


# Data in: layouts, dtypes, DataFrames; bad input.


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("order", ["C", "F"])
def test_every_layout_gives_the_same_run(dtype, order):
    X, y = quadratic(120)
    ref = SymbolicRegressor(**SMALL).fit(X.astype(np.float32), y)
    Xl = np.asarray(X.astype(dtype), order=order)
    m = SymbolicRegressor(**SMALL).fit(Xl, y)
    assert m.program_ == ref.program_
    np.testing.assert_array_equal(m.predict(Xl), ref.predict(X.astype(np.float32)))


def test_dataframe_column_names_become_variable_names():
    pd = pytest.importorskip("pandas")
    X, y = quadratic(150)
    df = pd.DataFrame(X, columns=["speed", "load factor"])
    m = SymbolicRegressor(**SMALL).fit(df, y)
    assert list(m.feature_names_in_) == ["speed", "load factor"]
    assert m.report_["model"]["features"] == ["speed", "load_factor"]
    assert "speed" in m.program_
    # Columns are matched by name: a reordered frame is refused, as scikit-learn does.
    with pytest.raises(ValueError, match="feature names"):
        m.predict(df[["load factor", "speed"]])
    np.testing.assert_array_equal(m.predict(df), m.predict(df.to_numpy()))


@pytest.mark.parametrize(
    "X, y, message",
    [
        (np.array([[0.0, np.nan], [1.0, 2.0], [3.0, 4.0]]), np.array([1.0, 2.0, 3.0]), "NaN"),
        (np.array([[0.0, np.inf], [1.0, 2.0], [3.0, 4.0]]), np.array([1.0, 2.0, 3.0]), "infinity"),
        (np.array([[0.0, 1.0], [1.0, 2.0], [3.0, 4.0]]), np.array([1.0, np.nan, 3.0]), "NaN"),
        (np.array([0.0, 1.0, 2.0]), np.array([1.0, 2.0, 3.0]), "2D array"),
        (np.zeros((3, 2)), np.zeros(4), "inconsistent numbers of samples"),
        (np.zeros((1, 2)), np.zeros(1), "minimum of 2"),
        (np.array([[0.0, 1e300], [1.0, 2.0]]), np.array([1.0, 2.0]), r"X\[0, 1\] = 1e300 is outside the float32 range"),
        (np.array([[0.0, 1.0], [1.0, 2.0]]), np.array([1.0, -1e39]), r"y\[1\] = -1e39 is outside the float32 range"),
    ],
)
def test_bad_regression_input_is_a_value_error(X, y, message):
    with pytest.raises(ValueError, match=message):
        SymbolicRegressor(**SMALL).fit(X, y)


def test_bad_prediction_input_is_a_value_error():
    X, y = quadratic(60)
    m = SymbolicRegressor(**SMALL).fit(X, y)
    with pytest.raises(ValueError, match="3 features"):
        m.predict(np.zeros((4, 3)))
    with pytest.raises(ValueError, match="NaN"):
        m.predict(np.array([[np.nan, 0.0]]))


def test_bad_classification_labels_are_value_errors():
    X, _ = iris_named()
    with pytest.raises(ValueError, match="class"):
        SymbolicClassifier(**SMALL).fit(X, np.zeros(150))
    with pytest.raises(ValueError, match="Unknown label type"):
        SymbolicClassifier(**SMALL).fit(X, np.linspace(0, 1, 150))
    with pytest.raises(ValueError, match="at most 254"):
        SymbolicClassifier(**SMALL).fit(np.tile(X, (2, 1)), np.arange(300))


# Runs behave in Python.


def test_pickle_round_trip_gives_the_same_predictions():
    X, y = iris_named()
    for est, data in [(SymbolicRegressor(**SMALL), quadratic()), (SymbolicClassifier(**SMALL), (X, y))]:
        est.fit(*data)
        back = pickle.loads(pickle.dumps(est))
        np.testing.assert_array_equal(back.predict(data[0]), est.predict(data[0]))
        assert back.program_ if hasattr(back, "program_") else back.programs_
    np.testing.assert_array_equal(back.predict_proba(X), est.predict_proba(X))


def test_same_seed_same_program_whatever_the_thread_count():
    X, y = quadratic(100)
    a = SymbolicRegressor(threads=1, **SMALL).fit(X, y)
    b = SymbolicRegressor(threads=2, **SMALL).fit(X, y)
    assert a.program_ == b.program_
    c = SymbolicRegressor(**{**SMALL, "random_state": 2}).fit(X, y)
    assert c.report_["settings"]["engine"]["seed"] == 2


def test_pipeline_with_a_scaler_inside_a_grid_search():
    X, y = quadratic(150)
    pipe = Pipeline([("scale", StandardScaler()), ("sr", SymbolicRegressor(**SMALL))])
    search = GridSearchCV(pipe, {"sr__parsimony_coefficient": [0.0, 0.01]}, cv=2)
    search.fit(X, y)
    assert search.best_params_["sr__parsimony_coefficient"] in (0.0, 0.01)
    assert search.score(X, y) > 0.9
    X, y = iris_named()
    pipe = Pipeline([("scale", StandardScaler()), ("sc", SymbolicClassifier(**SMALL))])
    search = GridSearchCV(pipe, {"sc__max_length": [32, 64]}, cv=3).fit(X, y)
    assert search.score(X, y) > 0.8


class fd2_to_file:
    """Points the process's file descriptor 2 at a temporary file while the block runs, so that
    what the engine might write there past Python's ``sys.stderr`` can be read back."""

    def __enter__(self):
        import tempfile

        self.file = tempfile.TemporaryFile()
        self._saved = os.dup(2)
        os.dup2(self.file.fileno(), 2)
        return self

    def __exit__(self, *exc):
        os.dup2(self._saved, 2)
        os.close(self._saved)
        return False

    def text(self):
        self.file.seek(0)
        return self.file.read().decode()


def test_verbose_shows_progress_through_sys_stderr_and_quiet_shows_nothing(capsys):
    # capsys replaces sys.stderr and leaves file descriptor 2 alone: what it captures went
    # through Python's stream, which a notebook shows.
    X, y = quadratic(60)
    with fd2_to_file() as fd2:
        SymbolicRegressor(**{**SMALL, "generations": 3}).fit(X, y)
        assert capsys.readouterr().err == ""
        # (warm_start: the fit saves its state, a checkpoint of its own, which it does not mention)
        SymbolicRegressor(verbose=2, warm_start=True, **{**SMALL, "generations": 3}).fit(X, y)
        err = capsys.readouterr().err
        SymbolicClassifier(verbose=1, **{**SMALL, "generations": 2}).fit(*iris_named())
        progress = capsys.readouterr().err
    assert fd2.text() == ""
    # One line per generation (0 to 3) and the progress lines; the fit's own state file is
    # not mentioned.
    assert sum(line.startswith("gen ") for line in err.splitlines()) >= 4, err
    assert "checkpoint" not in err
    assert "gen    0/2" in progress and "gen    2/2" in progress, progress
    assert "gen    1 ·" not in progress


def test_auto_device_without_a_gpu_warns_once_and_runs_on_the_cpu():
    X, y = quadratic(60)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = SymbolicRegressor(**{**SMALL, "device": "auto"}).fit(X, y)
    if m.report_["timing"]["device"].startswith("cuda"):
        pytest.skip("a CUDA GPU is usable here: nothing falls back")
    notes = [w for w in caught if "running on the CPU" in str(w.message)]
    assert len(notes) == 1, [str(w.message) for w in caught]
    assert issubclass(notes[0].category, RuntimeWarning)
    assert m.report_["timing"]["device"].startswith("cpu")


def test_cuda_without_a_gpu_is_an_error_not_a_crash():
    X, y = quadratic(60)
    m = SymbolicRegressor(**{**SMALL, "device": "auto"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if m.fit(X, y).report_["timing"]["device"].startswith("cuda"):
            pytest.skip("a CUDA GPU is usable here")
    with pytest.raises(RuntimeError, match="--device cuda"):
        SymbolicRegressor(**{**SMALL, "device": "cuda"}).fit(X, y)


def test_ctrl_c_raises_keyboard_interrupt_and_leaves_the_estimator_unfitted():
    X, y = quadratic(500)
    m = SymbolicRegressor(population_size=2000, generations=100000, device="cpu", random_state=1)
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt), interrupt_soon():
        m.fit(X, y)
    assert time.monotonic() - start < 30
    assert not hasattr(m, "program_") and not hasattr(m, "model_json_")
    # The estimator still works afterwards.
    m.set_params(population_size=200, generations=3).fit(X, y)
    assert m.program_


def test_the_gil_is_released_while_the_engine_runs():
    X, y = quadratic(300)
    ticks, done = [0], threading.Event()

    def count():
        while not done.is_set():
            ticks[0] += 1
            time.sleep(0.001)

    t = threading.Thread(target=count)
    t.start()
    start = time.monotonic()
    try:
        SymbolicRegressor(population_size=1000, generations=20, device="cpu", random_state=1).fit(X, y)
    finally:
        done.set()
        t.join()
    seconds = time.monotonic() - start
    # A thread that holds the GIL for the whole fit would leave the counter near 0; released,
    # it ticks about once a millisecond (less under load).
    assert ticks[0] > 20 * seconds, (ticks[0], seconds)


def test_version_is_the_crates():
    assert grove.__version__.count(".") == 2
