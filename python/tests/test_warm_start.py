"""warm_start: a fit continues the previous run's population, so that G generations and then a
warm refit to G + H give the run of one fit of G + H generations (its history, hall of fame,
best program and model), for both estimators, through pickling, and with bad refits refused."""

import pickle
import warnings

import numpy as np
import pytest
from sklearn.datasets import load_iris

from grove import SymbolicClassifier, SymbolicRegressor

SMALL = dict(population_size=200, device="cpu", random_state=4)


def data(n=120, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (n, 3))
    return X, X[:, 0] * X[:, 1] + np.sin(X[:, 2])


def untimed(report):
    return [{k: v for k, v in g.items() if k != "seconds"} for g in report["generations"]]


def same_run(a, b):
    assert untimed(a) == untimed(b)
    for key in ["best", "hall_of_fame", "model", "train", "selection"]:
        assert a[key] == b[key], key


@pytest.mark.parametrize(
    "extra",
    [
        dict(function_set="add,sub,mul,sin"),
        # Constant fitting every 3 generations and islands that migrate every 2: the schedule of
        # both carries over the break.
        dict(function_set="add,sub,mul,sin", optimise_constants=2, optimise_every=3, islands=2, migrate_every=2, migrants=4),
    ],
)
def test_a_warm_refit_continues_to_the_run_of_one_longer_fit(extra):
    X, y = data()
    whole = SymbolicRegressor(generations=9, **SMALL, **extra).fit(X, y)
    m = SymbolicRegressor(generations=5, warm_start=True, **SMALL, **extra).fit(X, y)
    first = m.report_
    assert len(first["generations"]) == 6
    # The run so far is the longer run's start.
    assert untimed(first) == untimed(whole.report_)[:6]
    m.set_params(generations=9).fit(X, y)
    assert len(m.report_["generations"]) == 10
    # Its first new generation (6) is what the uninterrupted run computed next.
    assert untimed(m.report_)[6] == untimed(whole.report_)[6]
    same_run(m.report_, whole.report_)
    assert m.program_ == whole.program_
    np.testing.assert_array_equal(m.predict(X), whole.predict(X))


def test_a_warm_refit_after_pickling_continues_the_same_run():
    X, y = data()
    whole = SymbolicRegressor(generations=7, function_set="add,sub,mul", **SMALL).fit(X, y)
    m = SymbolicRegressor(generations=3, warm_start=True, function_set="add,sub,mul", **SMALL).fit(X, y)
    back = pickle.loads(pickle.dumps(m))
    back.set_params(generations=7).fit(X, y)
    same_run(back.report_, whole.report_)


def test_a_warm_classifier_continues_to_the_run_of_one_longer_fit():
    X, y = load_iris(return_X_y=True)
    labels = np.array(["setosa", "versicolor", "virginica"])[y]
    whole = SymbolicClassifier(generations=6, **SMALL).fit(X, labels)
    m = SymbolicClassifier(generations=2, warm_start=True, **SMALL).fit(X, labels)
    m.set_params(generations=4).fit(X, labels)
    m.set_params(generations=6).fit(X, labels)
    same_run(m.report_, whole.report_)
    assert m.programs_ == whole.programs_
    np.testing.assert_array_equal(m.predict_proba(X), whole.predict_proba(X))
    # Other classes cannot continue this classifier.
    with pytest.raises(ValueError, match="classes"):
        m.set_params(generations=8).fit(X[:100], labels[:100])


def test_a_seed_drawn_by_the_first_fit_is_kept_by_the_warm_refit():
    X, y = data(80)
    kw = dict(population_size=150, device="cpu", function_set="add,sub,mul")
    m = SymbolicRegressor(generations=2, warm_start=True, random_state=np.random.RandomState(0), **kw).fit(X, y)
    seed = m.report_["settings"]["engine"]["seed"]
    m.set_params(generations=4).fit(X, y)
    whole = SymbolicRegressor(generations=4, random_state=seed, **kw).fit(X, y)
    same_run(m.report_, whole.report_)


def test_fewer_generations_are_an_error_and_as_many_keep_the_model():
    X, y = data(80)
    m = SymbolicRegressor(generations=4, warm_start=True, **SMALL).fit(X, y)
    report = m.report_
    with pytest.raises(ValueError, match="generations=3 is fewer than the 4"):
        m.set_params(generations=3).fit(X, y)
    with pytest.warns(UserWarning, match="model is kept"):
        m.set_params(generations=4).fit(X, y)
    assert m.report_ is report
    # Without warm_start a fit starts afresh, whatever ran before.
    m.set_params(warm_start=False, generations=2).fit(X, y)
    assert len(m.report_["generations"]) == 3


def test_only_a_warm_fit_keeps_the_population_and_a_cold_one_is_refit_afresh():
    X, y = data(80)
    m = SymbolicRegressor(generations=2, **SMALL).fit(X, y)
    assert m._warm_state is None
    with pytest.warns(UserWarning, match="kept no population"):
        m.set_params(warm_start=True, generations=4).fit(X, y)
    assert len(m.report_["generations"]) == 5 and m._warm_state is not None
    same_run(m.report_, SymbolicRegressor(generations=4, **SMALL).fit(X, y).report_)


def test_a_warm_refit_with_other_settings_or_features_is_refused():
    X, y = data(80)
    m = SymbolicRegressor(generations=2, warm_start=True, **SMALL).fit(X, y)
    with pytest.raises(ValueError, match=r"engine.pop_size.*was 200, now 300"):
        m.set_params(population_size=300, generations=4).fit(X, y)
    with pytest.raises(ValueError, match="3 features"):
        m.set_params(population_size=200).fit(X[:, :2], y)
    # The device may change (here: to the same CPU, spelled otherwise) and the run goes on.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m.set_params(generations=4, gpus=[0]).fit(X, y)
    assert len(m.report_["generations"]) == 5
