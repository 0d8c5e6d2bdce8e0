"""grove for Python: scikit-learn estimators on grove's engine.

``SymbolicRegressor`` and ``SymbolicClassifier`` evolve programs by tree GP (a function set)
or grammatical evolution (a BNF grammar) and follow scikit-learn's conventions; ``control``
evolves a policy for a simulated robot. Every run goes through the same library functions as
the ``grove`` command line, so the same data, settings and seed give the same programs.
"""

from ._grove import __version__
from ._grove import load_builtin as _load_builtin
from ._control import Policy, Rollout, control
from ._estimators import SymbolicClassifier, SymbolicRegressor



def load_builtin(name):
    """A built-in regression problem (``pagie1``, ``sextic``, ``quartic``, ``koza1``,
    ``nguyen7``, ``keijzer6``, ``vladislavleva4``; ``NAME:N`` for N points where the problem
    allows it) as ``grove evolve --data builtin:NAME`` loads it: ``(X, y)``, float64."""
    X, y, _ = _load_builtin(str(name))
    return X, y


__all__ = ["SymbolicRegressor", "SymbolicClassifier", "control", "load_builtin", "Policy", "Rollout", "__version__"]
