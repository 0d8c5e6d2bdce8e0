"""``SymbolicRegressor`` and ``SymbolicClassifier``: scikit-learn estimators whose ``fit`` runs
the library function of ``grove evolve`` / ``grove classify`` on the given arrays.

Constructor arguments are stored as given and checked in ``fit`` (scikit-learn's parameter
validation); inputs go through scikit-learn's ``validate_data`` (its messages for NaN, inf,
wrong shapes, too few samples, sparse or complex data), then to the engine as float32 in
feature-major order. A fitted estimator keeps its model as JSON text (``model_json_``), the
run's report as a dict (``report_``) and, fitted with ``warm_start=True``, the engine's state
before its last generation as bytes (a checkpoint, which the next warm fit continues), so it
pickles as plain data.
"""

import json
import os
import re
import warnings
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from . import _grove
from ._run import budget_block, functions_text, ge_fields, grammar_spec, islands_block, merged, on_note, operators_list, seed_of

_DTYPES = [np.float64, np.float32]

# The command line's defaults (grove::task::base::defaults), which the signatures below show.
_EVOLVE = _grove.DEFAULTS["evolve"]
_CLASSIFY = _grove.DEFAULTS["classify"]


def _variable_names(estimator, n_features):
    """The engine's variable names: a DataFrame's column names (made identifiers, distinct),
    else x0, x1, ..."""
    given = getattr(estimator, "feature_names_in_", None)
    if given is None:
        return [f"x{j}" for j in range(n_features)]
    names, seen = [], set()
    for raw in given:
        name = re.sub(r"\W+", "_", str(raw)).strip("_")
        if not name or name[0].isdigit():
            name = "x_" + name
        base, k = name, 2
        while name in seen:
            name, k = f"{base}_{k}", k + 1
        seen.add(name)
        names.append(name)
    return names


def _target_name(names, y, default):
    """The target's name (a named pandas Series' name, else ``default``), made one no feature
    has."""
    given = getattr(y, "name", None)
    name = re.sub(r"\W", "_", str(given)) if given is not None and str(given) else default
    while name in names:
        name += "_"
    return name


class _SymbolicBase(BaseEstimator):
    """Parameters, settings and fitted attributes both estimators share."""

    _parameter_constraints = {
        "function_set": [str, list, tuple, None],
        "operators": [str, list, tuple, dict, None],
        "grammar": [str, os.PathLike, None],
        "population_size": [Interval(Integral, 2, None, closed="left"), None],
        "generations": [Interval(Integral, 1, None, closed="left"), None],
        "tournament_size": [Interval(Integral, 1, None, closed="left")],
        "elitism": [Interval(Integral, 0, None, closed="left")],
        "max_length": [Interval(Integral, 1, 65535, closed="both")],
        "parsimony_coefficient": [Interval(Real, 0, None, closed="left")],
        "validation_fraction": [Interval(Real, 0, 1, closed="left"), None],
        "select": [StrOptions({"auto", "validation", "pareto", "mdl", "train"})],
        "bloat": [StrOptions({"auto", "none", "double-tournament", "lexicographic", "nsga2"})],
        "size_pressure": [Interval(Real, 1, 2, closed="both")],
        "selection": [StrOptions({"tournament", "lexicase", "down-sampled"})],
        "down_sample": [Interval(Real, 0, None, closed="neither")],
        "lexicase_pool": [Interval(Integral, 0, None, closed="left")],
        "diversity": [StrOptions({"none", "unique"})],
        "init": [StrOptions({"random", "sensible", "pi-grow"}), None],
        "init_depth": [tuple, list, None],
        "max_depth": [Interval(Integral, 1, None, closed="left"), None],
        "wraps": [Interval(Integral, 0, 100, closed="both"), None],
        "crossover": [Interval(Real, 0, 1, closed="both"), str, None],
        "mutation": [Interval(Real, 0, 1, closed="both"), str, None],
        "optimise_constants": [Interval(Integral, 0, 1000, closed="both"), None],
        "optimise_every": [Interval(Integral, 1, None, closed="left"), None],
        "optimise_fraction": [Interval(Real, 0, 1, closed="right"), None],
        "islands": [Interval(Integral, 1, _grove.MAX_ISLANDS, closed="both")],
        "migrate_every": [Interval(Integral, 1, None, closed="left")],
        "migrants": [Interval(Integral, 0, None, closed="left")],
        "gpus": [StrOptions({"all"}), Interval(Integral, 1, None, closed="left"), list, tuple],
        "gpu_link": [StrOptions({"peer", "nccl"})],
        "max_time": [Interval(Real, 0, None, closed="neither"), None],
        "stop_at": [Real, None],
        "device": [StrOptions({"auto", "cpu", "cuda"})],
        "threads": [Interval(Integral, 1, None, closed="left"), None],
        "random_state": ["random_state"],
        "warm_start": ["boolean"],
        "verbose": ["verbose"],
    }

    def _engine(self, seed):
        """The engine's settings; a population or generations left at None take the device's
        defaults (set on the Rust side)."""
        pop = None if self.population_size is None else int(self.population_size)
        engine = {
            "seed": seed,
            "tournament": int(self.tournament_size),
            "elite": int(self.elitism) if pop is None else min(int(self.elitism), pop),
            "max_len": int(self.max_length),
            "bloat": self.bloat,
            "size_pressure": float(self.size_pressure),
            "selection": self.selection,
            "down_sample": float(self.down_sample),
            "lexicase_pool": int(self.lexicase_pool),
            "diversity": self.diversity,
        }
        if pop is not None:
            engine["pop_size"] = pop
        if self.generations is not None:
            engine["generations"] = int(self.generations)
        return engine

    def _engine_with_constants(self, seed):
        """The engine's settings (``seed``: the run's) with the constant fitting asked for;
        fields left at None take the device's defaults (set on the Rust side)."""
        engine = self._engine(seed)
        constants = {
            key: cast(value)
            for key, value, cast in [
                ("steps", self.optimise_constants, int),
                ("every", self.optimise_every, int),
                ("fraction", self.optimise_fraction, float),
            ]
            if value is not None
        }
        if constants:
            engine["constants"] = constants
        return engine

    def _choice(self):
        """The settings that choose the returned program (top-level fields of both commands)."""
        fraction = self.validation_fraction
        return {"validation_fraction": None if fraction is None else float(fraction), "select": self.select}

    def _representation(self, default_functions):
        if self.grammar is not None and self.function_set is not None:
            raise ValueError("give function_set (tree GP) or grammar (grammatical evolution), not both")
        grammar = grammar_spec(self.grammar)
        functions = None if grammar is not None else functions_text(self.function_set, default_functions)
        return {"grammar": grammar, "functions": functions, "operators": operators_list(self.operators)}

    def _ge(self, settings):
        """``settings`` with grammatical evolution's parameters laid over them (``ge_fields``)."""
        return merged(
            settings,
            ge_fields(self.grammar, self.init, self.init_depth, self.max_depth, self.wraps, self.crossover, self.mutation),
        )

    def _islands(self):
        block = islands_block(self.islands, self.migrate_every, self.migrants, self.gpus, self.population_size, self.gpu_link)
        if getattr(self, "shard_rows", False):
            block["shard_rows"] = True
        return block

    def _budget(self):
        return budget_block(self.max_time, self.stop_at)

    def _run_options(self):
        verbose = int(self.verbose)
        return {"threads": self.threads, "verbose": min(max(verbose, 0), 2), "on_note": on_note}

    def _warm(self):
        """The state a warm-started fit continues and the seed it runs with, or ``(None, seed)``
        for a fit afresh. ``generations`` counts the whole run: fewer than the fitted run's is an
        error; as many leaves the model as it is (``None, None``, with a warning)."""
        state = getattr(self, "_warm_state", None) if self.warm_start else None
        if state is None:
            if self.warm_start and hasattr(self, "report_"):
                warnings.warn(
                    "warm_start: the fitted run kept no population (it was fitted with warm_start=False), so this fit "
                    "starts afresh",
                    UserWarning,
                    stacklevel=3,
                )
            return None, seed_of(self.random_state)
        done = self.report_["settings"]["engine"]["generations"]
        # None: the device's default, which the fitted run had on this device.
        wanted = done if self.generations is None else self.generations
        if wanted < done:
            raise ValueError(
                f"generations={self.generations} is fewer than the {done} this estimator has run: with warm_start=True, "
                "generations counts the whole run (set warm_start=False to fit afresh)"
            )
        if wanted == done:
            warnings.warn(
                f"warm_start with generations={done}, as many as the fitted run's: the model is kept (raise generations to "
                "evolve further)",
                UserWarning,
                stacklevel=3,
            )
            return None, None
        return state, self.report_["settings"]["engine"]["seed"]

    def _keep(self, report, state):
        self._warm_state = state
        self.report_ = report
        self.selection_ = report["selection"]
        self.model_json_ = json.dumps(report["model"])
        self.best_fitness_ = report["best"]["fitness"]
        self.n_generations_ = len(report["generations"])

    @property
    def equations_(self):
        """The hall of fame (best program of each size, on the Pareto front of size and loss):
        a pandas DataFrame with columns complexity, loss (training rows), validation_loss (None
        without validation rows), score (PySR's), selected (the returned program),
        description_length, cv_loss (its cross-validated error: ``select="cv"``'s of its size, or
        the front's k-fold cross-validation of the model choice), cv_se (that error's standard
        error, where the front was cross-validated), equation, latex, sympy when pandas is
        installed, else a list of dicts with those keys. ``selection_["candidates"]`` holds every
        candidate of the choice, the mean and the linear terms alone among them."""
        check_is_fitted(self)
        columns = ["complexity", "loss", "validation_loss", "score", "selected", "description_length", "cv_loss", "cv_se", "equation", "latex", "sympy"]
        rows = [{c: r.get(c) for c in columns} for r in self.report_["hall_of_fame"]]
        try:
            import pandas as pd
        except ImportError:
            return rows
        return pd.DataFrame(rows, columns=columns)

    def _sympy(self, text):
        import sympy

        # grove's protected operators (div, plog, ...) as sympy functions, then the variables.
        env = {"sympy": sympy}
        exec(_grove.SYMPY_PRELUDE, env)
        # The run's own operators the program uses (`softsign = lambda a: ...`).
        for op in self.report_.get("operators", []):
            exec(op["sympy"], env)
        env.update({n: sympy.Symbol(n) for n in self.report_["model"]["features"]})
        return sympy.sympify(text, locals=env)


class SymbolicRegressor(RegressorMixin, _SymbolicBase):
    """Symbolic regression by tree GP (``function_set``) or grammatical evolution
    (``grammar``), on grove's engine; ``fit(X, y)`` is ``grove evolve`` on the same data.

    Parameters
    ----------
    function_set : str or sequence of str, default=None
        Functions for tree GP, e.g. ``"add,sub,mul,div,sin"`` or ``["add", "sub"]``;
        None means ``"add,sub,mul,aq"`` (unless ``grammar`` is given): ``aq(a, b) = a / sqrt(1 + b**2)``,
        the analytic quotient, has no pole where fitted constants could put one near unseen points.
    operators : str, sequence of str or dict, default=None
        Operators of your own, as expressions over grove's (``grove evolve --define``):
        ``["cube(x) = x*x*x", "softsign(x) = x / (1 + abs(x))"]``, or a dict
        ``{"softsign(x)": "x / (1 + abs(x))"}``. ``function_set`` and ``grammar`` may name them;
        the model, ``sympy()`` and exports show them by name, and both devices compute them with
        the same bits.
    grammar : str or path-like, default=None
        A BNF grammar for grammatical evolution: a path to a ``.bnf`` file or the grammar's
        text.
    metric : {"mse", "rmse", "mae", "r2"}, default="mse"
        The error evolution minimises.
    loss : str, default=None
        A per-row loss of your own to minimise instead of ``metric`` (``grove evolve --loss``):
        an expression of the prediction ``p`` and the target ``y``, e.g. ``"abs(p - y)"`` or
        ``"log(cosh(p - y))"``, over grove's operators (any of their names), numbers, the
        ``operators`` above, ``cosh`` and ``sinh``. Both devices compute it with the same bits, at
        the prediction ``a*f(x) + b`` when ``linear_scaling`` (a and b by least squares).
    loss_reduce : {"mean", "sum"}, default="mean"
        How the rows' losses become the fitness.
    fitness_function : callable, default=None
        A fitness of your own, ``f(pred, y)``, minimised instead of ``metric``: ``pred`` holds
        every program's predictions, shape ``(programs, rows)`` (each program's ``a*f(x) + b``
        when ``linear_scaling``), and ``y`` the rows' targets, ``(rows,)``, both float32; it
        returns one score per program, lower is better (``inf`` the worst). On the CPU they are
        numpy arrays; with ``device="cuda"`` they stay on the GPU as DLPack arrays
        (``torch.from_dlpack(pred)``, ``cupy.from_dlpack(pred)``, no copy), and the scores may be
        a CUDA array. A program with a non-finite prediction scores ``inf`` whatever the function
        says. An exception it raises stops ``fit`` and is raised again; a wrong shape, or NaN for
        a program whose predictions are finite, is a ``ValueError``. Not with ``outputs`` > 1,
        ``selection`` other than "tournament", or ``linear_inputs="on"``.
    fitness_arrays : {"auto", "dlpack"}, default="auto"
        What ``fitness_function`` receives: numpy arrays on the CPU and DLPack arrays on a GPU,
        or DLPack arrays on both ("dlpack": ``torch.from_dlpack`` takes them without a copy on
        the CPU too).
    linear_scaling : bool, default=True
        Score each program after fitting ``a*f(x) + b`` by least squares.
    outputs : int in [1, 8], default=1
        Program outputs under a fitted linear head ``b + sum_k w_k*f_k(x)`` (least squares;
        ``grove evolve --outputs``): 1 is the program's value; 2 to 8 are output slots (tree
        GP's output nodes, a grammar's ``out(K, ...)``).
    linear_inputs : {"auto", "on", "off"}, default="auto"
        Linear terms of the inputs beside the program, ``c + sum_j a_j*x_j`` (ridge least
        squares; ``grove evolve --linear-inputs``); the program is evolved on what they leave.
        "auto" keeps them where they predict unseen rows better than the mean (generalised
        cross-validation) and pay for their numbers (description length), never with
        ``linear_scaling=False`` or ``metric="mae"``.
    population_size, generations : int, default=3000, 100
    tournament_size, elitism, max_length : int, default=3, 1, 128
    parsimony_coefficient : float, default=0.0
        Fitness penalty per program node.
    validation_fraction : float in [0, 1) or None, default=None
        Fraction of the rows held out (seeded) to choose the returned program; never used for
        fitness. None: 0.25 with at least 20000 rows (unless ``select`` is "train", "mdl", "cv"
        or "folds"), else none.
    select : {"auto", "validation", "pareto", "mdl", "cv", "folds", "train"}, default="auto"
        How the returned program is chosen from the hall of fame's Pareto front: "validation"
        and "folds" compare the mean, the linear terms alone and every program on the front by
        their error on rows their numbers were not fitted to (the validation rows, or k-fold
        cross-validation of the front with each candidate's numbers refitted without each
        fold) and return the simplest within one standard error of the lowest; "cv" repeats
        the whole fit (terms, search, fitted numbers) without each of 5 folds, scores the
        mean, the linear terms, the ridge on every input and each size of the front on the
        held-out fold, and returns the lowest (a simple model gives way to a simpler one
        within one standard error), at five more searches ("auto" is "cv" below 20000 rows,
        "validation" from there on); PySR's score (steepest drop of log error per node), the
        smallest description length on the training rows (guarded by the front's folds), or
        the lowest training error.
    output_margin : float >= 0 or None, default=None
        ``grove evolve --output-margin``: predictions clamped to the training target's range
        widened by this many times its width on each side; None: no limits.
    folds : int >= 2 or None, default=None
        Folds of ``select="cv"`` (and so of "auto" below 20000 rows) and of ``select="folds"``
        (None: 5, or one row a fold on fewer rows); more than the rows is a ``ValueError``.
    bloat : {"auto", "none", "double-tournament", "lexicographic", "nsga2"}, default="auto"
        Bloat control by selection (the linear penalty is ``parsimony_coefficient``);
        "nsga2" ranks error and size as two objectives (NSGA-II); "auto" is "nsga2" where
        constants are not fitted (the default on either device) and "none" where they are. The
        classifier's default is "none".
    size_pressure : float in [1, 2], default=1.4
        Double tournament: the smaller parent wins with probability ``size_pressure / 2``.
    selection : {"tournament", "lexicase", "down-sampled"}, default="tournament"
        Parent selection (``grove evolve --selection``): tournaments on the aggregate error, or
        epsilon-lexicase on the training rows as cases (each parent survives a random order of
        rows, kept within the median absolute deviation of the best on each), on all of them
        or on a fresh random ``down_sample`` of them each generation.
    down_sample : float, default=0.1
        Down-sampled lexicase: the rows read per generation, a share in (0, 1) or a count of
        at least 2.
    lexicase_pool : int, default=256
        Lexicase: the programs each selection starts from, drawn from the valid ones where
        there are more (``--lexicase-pool``; 0: always all of them), so that a generation's
        selections cost population × pool, not population².
    diversity : {"none", "unique"}, default="none"
        What keeps the population diverse (``--diversity``): with "unique", programs of equal
        error enter parent selection once (the smallest of them), so that copies of one
        program cannot fill the tournaments; a ``ValueError`` where NSGA-II runs (``bloat``
        "nsga2", or "auto" for tree GP without constant fitting), which ranks duplicates
        behind by itself.
    init : {"random", "sensible", "pi-grow"}, default=None
        Grammatical evolution's initialisation (``--init``; None: "sensible", PonyGE2's ramped
        half-and-half; "pi-grow": PonyGE2's position-independent grow).
    init_depth : (int, int), default=None
        The smallest and largest depth of the initial ramp (``--init-depth``; None: (3, 8)).
    max_depth, wraps : int, default=None
        Grammatical evolution's largest derivation depth and extra passes over the genome
        (``--max-depth``, ``--wraps``; None: 17 and 0).
    crossover : float or str, default=None
        With a grammar, the probability of crossing two parents or an operator with its rate
        (``--crossover``): "subtree[:P]" (the default, at 0.9: subtrees of one non-terminal swapped
        between the parents' derivation trees) or "onepoint[:P]"; tree GP takes a probability
        only (None: 0.9).
    mutation : float or str, default=None
        With a grammar, int-flip's per-codon rate or an operator with its rate (``--mutation``):
        "int-flip[:P|:1/used|:max(P,1/used)]" (the default is "int-flip:max(0.02,1/used)") or
        "subtree[:P]"; tree GP takes the probability that a child is mutated only (None: 0.3).
        Any of these six but ``crossover`` and ``mutation`` as probabilities, given without a
        grammar, is a ``ValueError``, as on the command line.
    optimise_constants, optimise_every, optimise_fraction : int, int, float, default=None
        Levenberg-Marquardt steps fitting the numeric constants (and the linear scaling) of
        the best ``optimise_fraction`` of the population every ``optimise_every`` generations
        (``grove evolve --optimise-constants``). None: the default, no fitting on either
        device; steps alone fit every 5 generations on the best 0.2.
    islands : int, default=1
        Populations of ``population_size`` each that evolve side by side and send their best
        programs to the next on a ring (``grove evolve --islands``; 1: one population).
    migrate_every, migrants : int, default=5, 20
        With islands: generations between migrations, and programs each island sends to the
        next, replacing its worst (0: none) (``--migrate-every``, ``--migrants``).
    gpus : "all", int or list of int, default="all"
        The GPUs the islands are spread over on a CUDA run: all the driver sees, the first N,
        or these device ordinals (``--gpus``); results do not depend on it.
    gpu_link : {"peer", "nccl"}, default="peer"
        How those GPUs exchange migrants and row shards' data (``--gpu-link``): the CUDA
        driver's peer copies, or NCCL's send and receive (loaded at run time; one error line
        where it is missing). Results do not depend on it.
    shard_rows : bool, default=False
        One population whose training rows are split over the GPUs ``gpus`` names (data
        parallel, for data larger than one GPU: ``--shard-rows``); results depend on the
        number of GPUs, and on the CPU ``gpus=N`` computes what N GPUs would. Constant fitting
        is off with it.
    max_time : float, default=None
        Seconds of search: the run ends after the generation past which one more would cross
        it (``--time-limit``), with the model, report and equations of a finished run.
    stop_at : float, default=None
        The run ends after the first generation whose best program's training loss (the
        fitness, ``metric``) is at or below it (``--stop-at``). ``report_["ended"]`` says why a
        run ended. A warm start may change both.
    device : {"auto", "cpu", "cuda"}, default="auto"
        Where populations are evaluated; "auto" uses a CUDA GPU when one is usable, else the
        CPU with one warning.
    threads : int, default=None
        Worker threads (None: all cores). Results do not depend on it.
    random_state : int, RandomState or None, default=None
        An int is the engine's seed (``random_state=1`` repeats ``grove evolve --seed 1``).
    warm_start : bool, default=False
        ``fit`` keeps the last population (about 400 bytes a program), and when fitted so
        already, continues it up to ``generations`` in all (the settings but ``generations``,
        ``max_time``, ``stop_at``, ``device`` and ``gpus`` unchanged): a fit of G generations then one to G + H equals one
        fit of G + H on the same data. Fewer generations than the fitted run's is an error; as
        many keeps the model.
    verbose : int, default=0
        0 quiet, 1 progress lines, 2 also a line per generation, written to ``sys.stderr``
        (which a notebook shows).

    Attributes
    ----------
    program_ : str
        The returned program (see ``select``), scaling included, as infix text.
    report_ : dict
        The run's report (as ``grove evolve --report`` writes it).
    selection_ : dict
        How the returned program was chosen: the rule asked and applied, why, the rows used
        for fitness and for validation, its row in ``equations_``.
    model_json_ : str
        The model ``predict`` applies, as JSON.
    n_features_in_, feature_names_in_, best_fitness_, n_generations_
    """

    _parameter_constraints = {
        **_SymbolicBase._parameter_constraints,
        "metric": [StrOptions({"mse", "rmse", "mae", "r2"})],
        "loss": [str, None],
        "loss_reduce": [StrOptions({"mean", "sum"})],
        "fitness_function": [callable, None],
        "fitness_arrays": [StrOptions({"auto", "dlpack"})],
        "linear_scaling": ["boolean"],
        "outputs": [Interval(Integral, 1, 8, closed="both")],
        "linear_inputs": [StrOptions({"auto", "on", "off"})],
        "shard_rows": ["boolean"],
        "select": [StrOptions({"auto", "validation", "pareto", "mdl", "cv", "folds", "train"})],
        "folds": [Interval(Integral, 2, None, closed="left"), None],
        "output_margin": [Interval(Real, 0, None, closed="left"), None],
    }

    def __init__(
        self,
        *,
        function_set=None,
        operators=None,
        grammar=None,
        metric="mse",
        loss=None,
        loss_reduce="mean",
        fitness_function=None,
        fitness_arrays="auto",
        linear_scaling=True,
        outputs=_EVOLVE["outputs"],
        linear_inputs=_EVOLVE["linear_inputs"],
        population_size=_EVOLVE["population_size"],
        generations=_EVOLVE["generations"],
        tournament_size=_EVOLVE["tournament_size"],
        elitism=_EVOLVE["elitism"],
        max_length=_EVOLVE["max_length"],
        parsimony_coefficient=_EVOLVE["parsimony_coefficient"],
        validation_fraction=None,
        select="auto",
        folds=None,
        output_margin=None,
        bloat=_EVOLVE["bloat"],
        size_pressure=_EVOLVE["size_pressure"],
        selection=_EVOLVE["selection"],
        down_sample=_EVOLVE["down_sample"],
        lexicase_pool=_EVOLVE["lexicase_pool"],
        diversity=_EVOLVE["diversity"],
        init=None,
        init_depth=None,
        max_depth=None,
        wraps=None,
        crossover=None,
        mutation=None,
        optimise_constants=None,
        optimise_every=None,
        optimise_fraction=None,
        islands=_EVOLVE["islands"],
        migrate_every=_EVOLVE["migrate_every"],
        migrants=_EVOLVE["migrants"],
        gpus=_EVOLVE["gpus"],
        gpu_link=_EVOLVE["gpu_link"],
        shard_rows=False,
        max_time=None,
        stop_at=None,
        device="auto",
        threads=None,
        random_state=None,
        warm_start=False,
        verbose=0,
    ):
        self.function_set = function_set
        self.operators = operators
        self.grammar = grammar
        self.metric = metric
        self.loss = loss
        self.loss_reduce = loss_reduce
        self.fitness_function = fitness_function
        self.fitness_arrays = fitness_arrays
        self.optimise_constants = optimise_constants
        self.optimise_every = optimise_every
        self.optimise_fraction = optimise_fraction
        self.linear_scaling = linear_scaling
        self.outputs = outputs
        self.linear_inputs = linear_inputs
        self.population_size = population_size
        self.generations = generations
        self.tournament_size = tournament_size
        self.elitism = elitism
        self.max_length = max_length
        self.parsimony_coefficient = parsimony_coefficient
        self.validation_fraction = validation_fraction
        self.select = select
        self.folds = folds
        self.output_margin = output_margin
        self.bloat = bloat
        self.size_pressure = size_pressure
        self.selection = selection
        self.down_sample = down_sample
        self.lexicase_pool = lexicase_pool
        self.diversity = diversity
        self.init = init
        self.init_depth = init_depth
        self.max_depth = max_depth
        self.wraps = wraps
        self.crossover = crossover
        self.mutation = mutation
        self.islands = islands
        self.migrate_every = migrate_every
        self.migrants = migrants
        self.gpus = gpus
        self.gpu_link = gpu_link
        self.shard_rows = shard_rows
        self.max_time = max_time
        self.stop_at = stop_at
        self.device = device
        self.threads = threads
        self.random_state = random_state
        self.warm_start = warm_start
        self.verbose = verbose

    def _settings(self, seed):
        if self.metric == "mae" and self.linear_scaling:
            raise ValueError("metric='mae' cannot be used with linear scaling (a least-squares fit): set linear_scaling=False")
        if self.loss is not None and self.fitness_function is not None:
            raise ValueError("give loss or fitness_function, not both")
        engine = self._engine_with_constants(seed)
        own = {"loss": self.loss, "loss_reduce": self.loss_reduce} if self.loss is not None else {}
        return self._ge({
            **own,
            "data": "python",
            **self._representation(_EVOLVE["function_set"]),
            "engine": engine,
            **self._choice(),
            **({} if self.folds is None else {"folds": int(self.folds)}),
            **({} if self.output_margin is None else {"output_margin": float(self.output_margin)}),
            "regression": {
                "metric": self.metric,
                "linear_scaling": bool(self.linear_scaling),
                "parsimony": float(self.parsimony_coefficient),
            },
            "outputs": int(self.outputs),
            "linear_inputs": self.linear_inputs,
            "islands": self._islands(),
            "budget": self._budget(),
            "device": self.device,
        })

    def fit(self, X, y):
        """Evolves a formula for ``y`` from ``X`` (``(n_samples, n_features)``); with
        ``warm_start`` and a fitted run, continues it to ``generations``."""
        self._validate_params()
        state, seed = self._warm()
        target = _target_name([], y, "y")
        fresh = state is None and seed is not None
        X, y = validate_data(self, X, y, dtype=_DTYPES, y_numeric=True, ensure_min_samples=2, reset=fresh)
        if seed is None:
            return self
        y = np.asarray(y, dtype=np.float64)
        settings = self._settings(seed)
        names = _variable_names(self, X.shape[1])
        report, state = _grove.fit_regression(
            json.dumps(settings),
            X,
            y,
            names,
            _target_name(names, None, target),
            **self._run_options(),
            warm=state,
            keep_state=self.warm_start,
            fitness_function=self.fitness_function,
            fitness_arrays=self.fitness_arrays,
        )
        report = json.loads(report)
        self._keep(report, state)
        self.program_ = report["best"]["infix"]
        return self

    def predict(self, X):
        """``a*f(X) + b`` of the best program (with ``outputs`` > 1, its head's
        ``b + sum_k w_k*f_k(X)``), plus the linear terms ``c + sum_j a_j*X_j`` where the model
        has them; float64."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=_DTYPES)
        return _grove.predict_regression(self.model_json_, X)

    def sympy(self):
        """The best program, scaling included, as a sympy expression."""
        check_is_fitted(self)
        return self._sympy(self.report_["best"]["sympy"])

    def latex(self):
        """The best program, scaling included, as LaTeX."""
        check_is_fitted(self)
        return self.report_["best"]["latex"]


class SymbolicClassifier(ClassifierMixin, _SymbolicBase):
    """Classification by programs with one output per class (the predicted class is the
    largest output; probabilities are their softmax), by tree GP with random output nodes
    (``function_set``) or a grammar with ``out(K, EXPR)`` nodes (``grammar``); ``fit(X, y)``
    is ``grove classify`` trained on all of ``X``.

    Parameters
    ----------
    function_set, operators, grammar, tournament_size, elitism, max_length (64),
    parsimony_coefficient, validation_fraction, select, bloat, size_pressure, selection,
    down_sample, lexicase_pool, diversity, init, init_depth, max_depth, wraps, crossover,
    mutation, islands, migrate_every, migrants, gpus, max_time, device, threads, random_state,
    warm_start, verbose :
        as for ``SymbolicRegressor`` (defaults of ``grove classify`` in brackets); validation
        rows are held out per class, and their error is the one ``fitness`` names (under
        "balanced-ce", balanced accuracy first and the cross-entropy only between programs
        right on the same rows).
    population_size, generations : int, default=None
        The population and generations (``grove classify --pop``, ``--gens``); None: the
        device's defaults, 5000 × 40 on the CPU and 20000 × 100 on a GPU.
    stop_at : float in [0, 1], default=None
        The run ends after the first generation whose best program reaches this training
        accuracy (``grove classify --stop-at``).
    fitness : {"balanced-ce", "cross-entropy", "accuracy", "balanced-accuracy", "weighted-f1"}, default="balanced-ce"
        What evolution minimises: 1 - balanced accuracy plus the mean softmax cross-entropy
        ``c`` as ``c / (1 + c)`` (``grove classify``'s default), the mean softmax cross-entropy
        alone (what ``predict_proba``'s probabilities are fitted to), 1 - accuracy, 1 -
        balanced accuracy, or 1 - weighted F1 (each class's F1 weighted by its share of the
        rows, PonyGE2's).
    standardize : bool, default=True
        Standardise features with the training rows' mean and deviation (the model repeats it).
    p_out : float, default=0.05
        Tree GP: probability that a new node is an extra output node.
    linear_inputs : {"auto", "on", "off"}, default="auto"
        Linear terms of the (standardised) inputs added to each output, fitted by
        multinomial logistic regression before the search (``grove classify
        --linear-inputs``), so the programs add what a linear classifier cannot say. "auto"
        keeps them where their 5-fold cross-validated cross-entropy beats the class
        frequencies', never with ``optimise_constants``.
    outputs : int in [0, 8], default=0
        A head over the program's ``outputs`` outputs (``grove classify --outputs``): each
        class's logit is ``c + sum_k a_k*f_k(x)``, fitted by least squares on one-hot targets
        during the search and by multinomial logistic regression for the returned model (so
        ``predict_proba`` is calibrated); 1 is the program's value. 0: one output per class, no
        head. Not with ``optimise_constants`` or ``linear_inputs="on"``.
    optimise_constants, optimise_every, optimise_fraction : int, int, float, default=None
        Levenberg-Marquardt steps fitting the numeric constants of the best
        ``optimise_fraction`` of the population to the softmax cross-entropy every
        ``optimise_every`` generations (``grove classify --optimise-constants``). None: the
        default, no fitting (it did not raise test accuracy on the built-in sets); with only
        ``optimise_constants`` given, every 5 generations on the best 0.2.

    Attributes
    ----------
    classes_ : ndarray
        The class labels (any labels, strings too), sorted.
    programs_ : list of str
        One program per class, infix.
    report_, selection_, model_json_, n_features_in_, feature_names_in_, best_fitness_,
    n_generations_
    """

    _parameter_constraints = {
        **_SymbolicBase._parameter_constraints,
        "fitness": [StrOptions({"cross-entropy", "accuracy", "balanced-accuracy", "weighted-f1", "balanced-ce"})],
        "standardize": ["boolean"],
        "p_out": [Interval(Real, 0, 1, closed="both")],
        "linear_inputs": [StrOptions({"auto", "on", "off"})],
        "outputs": [Interval(Integral, 0, 8, closed="both")],
    }

    def __init__(
        self,
        *,
        function_set=None,
        operators=None,
        grammar=None,
        fitness="balanced-ce",
        standardize=True,
        p_out=_CLASSIFY["p_out"],
        linear_inputs=_CLASSIFY["linear_inputs"],
        outputs=_CLASSIFY["outputs"],
        population_size=None,
        generations=None,
        tournament_size=_CLASSIFY["tournament_size"],
        elitism=_CLASSIFY["elitism"],
        max_length=_CLASSIFY["max_length"],
        parsimony_coefficient=_CLASSIFY["parsimony_coefficient"],
        validation_fraction=None,
        select="auto",
        bloat=_CLASSIFY["bloat"],
        size_pressure=_CLASSIFY["size_pressure"],
        selection=_CLASSIFY["selection"],
        down_sample=_CLASSIFY["down_sample"],
        lexicase_pool=_CLASSIFY["lexicase_pool"],
        diversity=_CLASSIFY["diversity"],
        init=None,
        init_depth=None,
        max_depth=None,
        wraps=None,
        crossover=None,
        mutation=None,
        optimise_constants=None,
        optimise_every=None,
        optimise_fraction=None,
        islands=_CLASSIFY["islands"],
        migrate_every=_CLASSIFY["migrate_every"],
        migrants=_CLASSIFY["migrants"],
        gpus=_CLASSIFY["gpus"],
        gpu_link=_CLASSIFY["gpu_link"],
        max_time=None,
        stop_at=None,
        device="auto",
        threads=None,
        random_state=None,
        warm_start=False,
        verbose=0,
    ):
        self.function_set = function_set
        self.operators = operators
        self.grammar = grammar
        self.fitness = fitness
        self.optimise_constants = optimise_constants
        self.optimise_every = optimise_every
        self.optimise_fraction = optimise_fraction
        self.standardize = standardize
        self.p_out = p_out
        self.linear_inputs = linear_inputs
        self.outputs = outputs
        self.population_size = population_size
        self.generations = generations
        self.tournament_size = tournament_size
        self.elitism = elitism
        self.max_length = max_length
        self.parsimony_coefficient = parsimony_coefficient
        self.validation_fraction = validation_fraction
        self.select = select
        self.bloat = bloat
        self.size_pressure = size_pressure
        self.selection = selection
        self.down_sample = down_sample
        self.lexicase_pool = lexicase_pool
        self.diversity = diversity
        self.init = init
        self.init_depth = init_depth
        self.max_depth = max_depth
        self.wraps = wraps
        self.crossover = crossover
        self.mutation = mutation
        self.islands = islands
        self.migrate_every = migrate_every
        self.migrants = migrants
        self.gpus = gpus
        self.gpu_link = gpu_link
        self.max_time = max_time
        self.stop_at = stop_at
        self.device = device
        self.threads = threads
        self.random_state = random_state
        self.warm_start = warm_start
        self.verbose = verbose

    def _settings(self, seed):
        return self._ge({
            "outputs": int(self.outputs),
            "data": "python",
            **self._representation(_CLASSIFY["function_set"]),
            "engine": self._engine_with_constants(seed),
            **self._choice(),
            "fitness": self.fitness,
            "linear_inputs": self.linear_inputs,
            "standardize": bool(self.standardize),
            "parsimony": float(self.parsimony_coefficient),
            "trees": {"p_out": float(self.p_out)},
            "islands": self._islands(),
            "budget": self._budget(),
            "device": self.device,
        })

    def fit(self, X, y):
        """Evolves a classifier of ``X`` (``(n_samples, n_features)``) into the labels ``y``;
        with ``warm_start`` and a fitted run, continues it to ``generations``."""
        self._validate_params()
        state, seed = self._warm()
        target = _target_name([], y, "class")
        fresh = state is None and seed is not None
        X, y = validate_data(self, X, y, dtype=_DTYPES, ensure_min_samples=2, reset=fresh)
        if seed is None:
            return self
        check_classification_targets(y)
        classes, codes = np.unique(y, return_inverse=True)
        if len(classes) < 2:
            raise ValueError(
                f"SymbolicClassifier needs samples of at least 2 classes in the data, but the data contains only one class: {classes[0]!r}"
            )
        if state is not None and not np.array_equal(classes, self.classes_):
            raise ValueError(
                f"warm_start continues a classifier of the classes {list(self.classes_)!r}; y has {list(classes)!r}"
            )
        names = [str(c) for c in classes]
        if len(set(names)) != len(names):
            raise ValueError(f"the class labels {list(classes)!r} do not have distinct names")
        settings = self._settings(seed)
        variables = _variable_names(self, X.shape[1])
        report, state = _grove.fit_classification(
            json.dumps(settings),
            X,
            np.ascontiguousarray(codes, dtype=np.uint32),
            names,
            variables,
            _target_name(variables, None, target),
            **self._run_options(),
            warm=state,
            keep_state=self.warm_start,
        )
        report = json.loads(report)
        self.classes_ = classes
        self._keep(report, state)
        self.programs_ = list(report["best"]["programs"])
        return self

    def _predict(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=_DTYPES)
        return _grove.predict_classes(self.model_json_, X)

    def predict(self, X):
        """The class of each row: the one whose output is largest."""
        codes, _ = self._predict(X)
        return self.classes_[codes]

    def predict_proba(self, X):
        """Class probabilities ``(n_samples, n_classes)``: the softmax of the outputs, in the
        order of ``classes_``; the largest is the predicted class."""
        _, proba = self._predict(X)
        return proba

    def sympy(self):
        """One sympy expression per class (the class's output, or its logit under the head)."""
        check_is_fitted(self)
        return [self._sympy(t) for t in _grove.render(self.model_json_, "sympy")]

    def latex(self):
        """One LaTeX formula per class."""
        check_is_fitted(self)
        return _grove.render(self.model_json_, "latex")
