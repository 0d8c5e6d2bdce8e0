"""What the estimators and ``control`` share: seeds from ``random_state``, function sets and
grammars as the engine reads them, and the warning for a device that falls back to the CPU."""

import numbers
import os
import warnings

import numpy as np
from sklearn.utils import check_random_state


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


def on_note(note):
    """Shows a note of the engine: the CPU fallback of ``device="auto"``, once per run."""
    warnings.warn(f"grove: {note}", RuntimeWarning, stacklevel=3)
