"""grove for Python: scikit-learn estimators on grove's engine.

``SymbolicRegressor`` and ``SymbolicClassifier`` evolve programs by tree GP (a function set)
or grammatical evolution (a BNF grammar) and follow scikit-learn's conventions; ``control``
evolves a policy for a simulated robot. Every run goes through the same library functions as
the ``grove`` command line, so the same data, settings and seed give the same programs.
"""

from ._grove import __version__
from ._control import Policy, Rollout, control
from ._estimators import SymbolicClassifier, SymbolicRegressor

__all__ = ["SymbolicRegressor", "SymbolicClassifier", "control", "Policy", "Rollout", "__version__"]
