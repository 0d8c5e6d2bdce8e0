"""Fitness of the user's own (issue 58): a loss expression (``loss=``, ``grove evolve --loss``)
and a fitness function over batches of predictions (``fitness_function=``), on the CPU; the
DLPack arrays a GPU run hands over are exercised here on the CPU (``fitness_arrays="dlpack"``),
the GPU itself in ``test_gpu.py``."""

import json

import numpy as np
import pytest

from grove import SymbolicRegressor

SMALL = dict(function_set="add,sub,mul,div", population_size=200, generations=5, device="cpu", random_state=1)


def data(n=150, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (n, 2))
    y = 1.5 * X[:, 0] ** 2 - X[:, 1]
    y[::17] += 30.0  # outliers
    return X, y


def test_a_loss_is_the_command_lines(grove_cli, tmp_path):
    X, y = data()
    sr = SymbolicRegressor(**SMALL, loss="abs(p - y)", loss_reduce="mean").fit(X, y)
    assert sr.report_["settings"]["loss"] == "abs(p - y)"
    assert sr.best_fitness_ == pytest.approx(sr.report_["train"]["loss"], rel=1e-12)
    # The same run from the command line.
    csv = tmp_path / "d.csv"
    np.savetxt(csv, np.column_stack([X, y]), delimiter=",", header="x0,x1,y", comments="")
    out = tmp_path / "r.json"
    grove_cli("evolve", "--data", csv, "--functions", "add,sub,mul,div", "--pop", 200, "--gens", 5, "--seed", 1, "--loss", "abs(p - y)", "-q", "--report", out)
    cli = json.loads(out.read_text())
    assert cli["best"]["infix"] == sr.program_
    with pytest.raises(ValueError, match="unknown variable `q`"):
        SymbolicRegressor(**SMALL, loss="abs(p - q)").fit(X, y)
    with pytest.raises(ValueError, match="loss or fitness_function, not both"):
        SymbolicRegressor(**SMALL, loss="abs(p - y)", fitness_function=lambda p, t: 0).fit(X, y)


def median_error(pred, y):
    return np.median(np.abs(pred - y), axis=1)


def test_a_fitness_function_gets_every_programs_predictions():
    X, y = data()
    seen = []

    def fitness(pred, t):
        seen.append((type(pred), pred.shape, pred.dtype, t.shape))
        return median_error(pred, t)

    sr = SymbolicRegressor(**SMALL, fitness_function=fitness).fit(X, y)
    assert (np.ndarray, (200, 150), np.float32, (150,)) in seen, seen[:3]
    assert sum(s[1][0] == 200 for s in seen) == 6, "a batch each generation"
    assert sr.report_["settings"]["fitness_function"].endswith("fitness")
    # The fitness is the function's score of the returned program on the training rows: its
    # predictions there are a*f(x) + b with the scaling the model has.
    pred = sr.predict(X).astype(np.float32)
    assert sr.report_["train"]["loss"] == pytest.approx(float(np.median(np.abs(pred - y.astype(np.float32)))), rel=1e-5)
    # A function that is not the loss gives another run than the built-in metric.
    assert sr.program_ != SymbolicRegressor(**SMALL).fit(X, y).program_


def test_dlpack_arrays_hand_over_the_same_batch():
    X, y = data()
    shapes = []

    def via_dlpack(pred, t):
        shapes.append((pred.shape, pred.dtype, pred.device, pred.__dlpack_device__()))
        a, b = np.from_dlpack(pred), np.from_dlpack(t)
        return median_error(a, b)

    plain = SymbolicRegressor(**SMALL, fitness_function=median_error).fit(X, y)
    dl = SymbolicRegressor(**SMALL, fitness_function=via_dlpack, fitness_arrays="dlpack").fit(X, y)
    assert shapes[0] == ((200, 150), "float32", "cpu", (1, 0))
    assert dl.program_ == plain.program_ and dl.report_["train"]["loss"] == plain.report_["train"]["loss"]
    # Scores come back through DLPack (a numpy array), as a list, or as float32 or integers.
    for back in [lambda p, t: list(median_error(p, t)), lambda p, t: median_error(p, t).astype(np.float32)[:, None],
                 lambda p, t: (median_error(p, t) * 1000).astype(np.int64)]:
        SymbolicRegressor(**SMALL, fitness_function=back).fit(X, y)


def test_what_a_fitness_function_gets_wrong_stops_the_fit_and_keeps_the_model():
    X, y = data()
    sr = SymbolicRegressor(**SMALL, fitness_function=median_error).fit(X, y)
    before = (sr.program_, sr.model_json_)

    class Mine(Exception):
        pass

    def raises(p, t):
        raise Mine("my fitness failed")

    cases = [
        (raises, Mine, "my fitness failed"),
        (lambda p, t: np.zeros(3), ValueError, r"shape \[3\] for 200 programs"),
        (lambda p, t: np.full(len(p), np.nan), ValueError, "returned NaN for program 0"),
        (lambda p, t: "no", ValueError, "no array of numbers"),
    ]
    for f, kind, message in cases:
        sr.set_params(fitness_function=f)
        with pytest.raises(kind, match=message):
            sr.fit(X, y)
        assert (sr.program_, sr.model_json_) == before, "the fitted model is kept"
    # inf is a score (the worst); NaN for an invalid program is no error.
    sr.set_params(fitness_function=lambda p, t: np.where(np.isfinite(p).all(axis=1), median_error(p, t), np.nan))
    sr.fit(X, y)
    with pytest.raises(ValueError, match="selection"):
        SymbolicRegressor(**SMALL, fitness_function=median_error, selection="lexicase").fit(X, y)
    with pytest.raises(ValueError, match="fitness_arrays"):
        SymbolicRegressor(**SMALL, fitness_function=median_error, fitness_arrays="torch").fit(X, y)
