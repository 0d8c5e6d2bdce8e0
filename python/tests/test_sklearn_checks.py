"""scikit-learn's own estimator checks, on small budgets (a fit takes tens of milliseconds)."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from grove import SymbolicClassifier, SymbolicRegressor

SMALL = dict(population_size=200, generations=8, device="cpu", random_state=0)


@parametrize_with_checks([SymbolicRegressor(**SMALL), SymbolicClassifier(**SMALL)])
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)
