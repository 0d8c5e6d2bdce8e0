"""What the estimators and ``control`` share: seeds from ``random_state``, function sets,
grammars, islands and budgets as the engine reads them, and the warning for a device that falls back to
the CPU."""

import json
import numbers
import os
import warnings

import numpy as np
from sklearn.utils import check_random_state

from . import _grove


def seed_of(random_state):
    """The engine's seed: an int is used as it is (``random_state=1`` is ``--seed 1``); None or
    a ``RandomState`` draws one."""
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        return int(random_state)
    return int(check_random_state(random_state).randint(0, 2**31 - 1))


def functions_text(function_set, default):
    """A function set as the engine reads it: ``"add,sub,mul"`` from a string or a sequence of
    names (``None``: ``default``)."""
    if function_set is None:
        return default
    if isinstance(function_set, str):
        names = [f.strip() for f in function_set.split(",")]
    else:
        names = [str(f).strip() for f in function_set]
    if not names or any(not n for n in names):
        raise ValueError(f"function_set must name at least one function, got {function_set!r}")
    return ",".join(names)


def grammar_spec(grammar):
    """A grammar as the engine reads it: its text (anything holding ``::=``) or an absolute
    path to a ``.bnf`` file."""
    if grammar is None:
        return None
    if isinstance(grammar, str) and "::=" in grammar:
        return grammar
    path = os.fspath(grammar)
    if not os.path.isfile(path):
        raise ValueError(f"grammar: {path!r} is neither a grammar file nor grammar text (BNF with ::=)")
    return os.path.abspath(path)


def gpus_text(gpus):
    """The GPUs a run's islands use, as the engine reads them (``--gpus``): ``"all"``, a number
    of GPUs (the first N), or a sequence of device ordinals (``[0, 2]``)."""
    if isinstance(gpus, str):
        if gpus.strip().lower() == "all":
            return "all"
        raise ValueError(f"gpus must be 'all', a number of GPUs or a list of device ordinals, got {gpus!r}")
    if isinstance(gpus, numbers.Integral) and not isinstance(gpus, bool):
        if gpus < 1:
            raise ValueError(f"gpus must be at least 1 (a number of GPUs), got {gpus}")
        return str(int(gpus))
    try:
        ordinals = list(gpus)
    except TypeError:
        raise ValueError(f"gpus must be 'all', a number of GPUs or a list of device ordinals, got {gpus!r}") from None
    if not ordinals or any(not isinstance(d, numbers.Integral) or isinstance(d, bool) or d < 0 for d in ordinals):
        raise ValueError(f"gpus: a list of device ordinals holds whole numbers >= 0, got {gpus!r}")
    if len(set(ordinals)) != len(ordinals):
        raise ValueError(f"gpus: a GPU is listed twice in {gpus!r}")
    # A list has a comma (3, is GPU 3 alone; 3 would be the first three).
    return ",".join(str(int(d)) for d in ordinals) + ("," if len(ordinals) == 1 else "")


def islands_block(islands, migrate_every, migrants, gpus, population_size, gpu_link="peer"):
    """The settings' ``islands`` block (``--islands``, ``--migrate-every``, ``--migrants``,
    ``--gpus``, ``--gpu-link``), checked with the parameters' names."""
    islands, migrate_every, migrants = int(islands), int(migrate_every), int(migrants)
    if islands > 1 and population_size is not None and migrants > int(population_size):
        raise ValueError(
            f"migrants={migrants} must be at most population_size={population_size} (each island sends its best to the next)"
        )
    if gpu_link not in ("peer", "nccl"):
        raise ValueError(f"gpu_link must be 'peer' or 'nccl', got {gpu_link!r}")
    block = {"count": islands, "migrate_every": migrate_every, "migrants": migrants, "gpus": gpus_text(gpus)}
    if gpu_link != "peer":
        block["link"] = gpu_link
    return block


def on_note(note):
    """Shows a note of the engine: the CPU fallback of ``device="auto"``, once per run."""
    warnings.warn(f"grove: {note}", RuntimeWarning, stacklevel=3)


def budget_block(max_time, stop_at):
    """The settings' ``budget`` block (``--time-limit``, ``--stop-at``), checked with the
    parameters' names."""
    block = {}
    if max_time is not None:
        t = float(max_time)
        if not (np.isfinite(t) and t > 0):
            raise ValueError(f"max_time must be a positive number of seconds, got {max_time!r}")
        block["time_limit"] = t
    if stop_at is not None:
        v = float(stop_at)
        if not np.isfinite(v):
            raise ValueError(f"stop_at must be a finite number, got {stop_at!r}")
        block["stop_at"] = v
    return block


def operators_list(operators):
    """The settings' ``operators`` (``--define``): definitions such as ``"softsign(x) = x / (1 +
    abs(x))"``, from a string (one definition, or several separated by ``;``), a sequence of
    strings, or a mapping of a signature (``"softsign(x)"``) to its body."""
    if operators is None:
        return []
    if isinstance(operators, str):
        items = [d for d in operators.split(";")]
    elif isinstance(operators, dict):
        items = [f"{k} = {v}" for k, v in operators.items()]
    else:
        try:
            items = list(operators)
        except TypeError:
            raise ValueError(f"operators must be definitions such as 'cube(x) = x*x*x', got {operators!r}") from None
    out = []
    for d in items:
        if not isinstance(d, str) or not d.strip():
            raise ValueError(f"operators: each definition is a string such as 'cube(x) = x*x*x', got {d!r}")
        out.append(d.strip())
    return out


def ge_fields(grammar, init=None, init_depth=None, max_depth=None, wraps=None, crossover=None, mutation=None):
    """The settings fields of grammatical evolution's parameters (``init``, ``init_depth``,
    ``max_depth``, ``wraps``, ``crossover``, ``mutation``; None: the command's default), as
    ``grove evolve``'s flags of the same names read them: with a grammar the blocks ``map``,
    ``init`` and ``vary``; without one (tree GP) a ``crossover`` or ``mutation`` probability is
    the trees' (``trees.p_crossover``, ``trees.p_mutation``), and any other of them, or an
    operator's name there, is a ``ValueError``."""
    def text(name, value):
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (str, numbers.Real)):
            raise ValueError(f"{name} must be a probability or an operator's name (a string), got {value!r}")
        return value if isinstance(value, str) else repr(float(value))

    def whole(name, value, least):
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < least:
            raise ValueError(f"{name} must be a whole number of at least {least}, got {value!r}")
        return int(value)

    if init_depth is not None:
        try:
            low, high = init_depth
        except (TypeError, ValueError):
            raise ValueError(f"init_depth must be a pair (min, max), got {init_depth!r}") from None
        init_depth = (whole("init_depth's min", low, 1), whole("init_depth's max", high, 1))
    if init is not None and not isinstance(init, str):
        raise ValueError(f"init must be 'random', 'sensible' or 'pi-grow', got {init!r}")
    return json.loads(
        _grove.ge_fields(
            grammar is not None,
            init=init,
            init_depth=init_depth,
            max_depth=whole("max_depth", max_depth, 1),
            wraps=whole("wraps", wraps, 0),
            crossover=text("crossover", crossover),
            mutation=text("mutation", mutation),
        )
    )


def merged(settings, fields):
    """``settings`` with ``fields`` laid over it, block by block (a dict in both is merged)."""
    out = dict(settings)
    for key, value in fields.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = value
    return out
