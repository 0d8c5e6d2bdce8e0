"""Grammatical evolution's operators and unique parents from Python (issue 55): the parameters
reach the same settings as the command line's flags of the same names, tree GP takes only the
two rates, and what a run cannot use is a ValueError."""

import json

import numpy as np
import pytest

import grove
from grove import SymbolicClassifier, SymbolicRegressor

from conftest import REPO

GRAMMAR = str(REPO / "grammars" / "regression.bnf")
TINY = dict(population_size=30, generations=2, device="cpu", random_state=1)
GE = dict(init="pi-grow", init_depth=(2, 5), max_depth=12, wraps=1, crossover="onepoint:0.7", mutation="int-flip:1/used")
FLAGS = ["--init", "pi-grow", "--init-depth", "2,5", "--max-depth", "12", "--wraps", "1", "--crossover", "onepoint:0.7", "--mutation", "int-flip:1/used"]


def data(n=60):
    X = np.random.default_rng(0).uniform(-1, 1, (n, 2))
    return X, X[:, 0] * X[:, 1] + X[:, 0]


def test_ge_parameters_give_the_settings_the_flags_give(tmp_path, grove_cli):
    m = SymbolicRegressor(grammar=GRAMMAR, **TINY, **GE).fit(*data())
    report = tmp_path / "r.json"
    grove_cli("evolve", "-g", "grammars/regression.bnf", "--data", "builtin:koza1", "--pop", 30, "--gens", 2, *FLAGS, "-q", "--report", report)
    cli = json.loads(report.read_text())["settings"]
    for block in ["map", "init", "vary", "genome_capacity"]:
        assert m.report_["settings"][block] == cli[block], block
    assert (cli["init"]["method"], cli["vary"]["crossover_op"], cli["vary"]["mutation_per_used"]) == ("pi_grow", "onepoint", True)
    # Not given, they are the command's defaults, and a probability is int-flip's rate.
    d = SymbolicRegressor(grammar=GRAMMAR, **TINY).fit(*data())
    grove_cli("evolve", "-g", "grammars/regression.bnf", "--data", "builtin:koza1", "--pop", 30, "--gens", 2, "-q", "--report", report)
    cli = json.loads(report.read_text())["settings"]
    assert all(d.report_["settings"][b] == cli[b] for b in ["map", "init", "vary"])
    p = SymbolicRegressor(grammar=GRAMMAR, **TINY, mutation=0.05, crossover=0.6).fit(*data())
    v = p.report_["settings"]["vary"]
    assert (v["mutation_op"], round(v["mutation"], 6), v["mutation_at_least_per_used"], round(v["crossover"], 6)) == ("int_flip", 0.05, False, 0.6)


def test_the_classifier_and_control_take_them_too():
    c = SymbolicClassifier(grammar=str(REPO / "grammars" / "classify-3class.bnf"), **TINY, init="pi-grow", mutation="subtree:0.5")
    X = np.random.default_rng(1).normal(size=(90, 4))
    y = np.repeat([0, 1, 2], 30)
    c.fit(X, y)
    s = c.report_["settings"]
    assert (s["init"]["method"], s["vary"]["mutation_op"], round(s["vary"]["mutation"], 6)) == ("pi_grow", "subtree", 0.5)
    policy = grove.control(
        "swimmer", grammar=str(REPO / "grammars" / "swimmer.bnf"), population_size=10, generations=1, episode_steps=20, device="cpu",
        init="random", crossover="subtree:0.8", validation_episodes=0,
    )
    s = policy.report["settings"]
    assert (s["init"]["method"], round(s["vary"]["crossover"], 6)) == ("random", 0.8)


def test_tree_gp_takes_the_two_rates_and_refuses_the_rest():
    m = SymbolicRegressor(function_set="add,mul", **TINY, crossover=0.5, mutation=0.1).fit(*data())
    trees = m.report_["settings"]["trees"]
    assert (round(trees["p_crossover"], 6), round(trees["p_mutation"], 6)) == (0.5, 0.1)
    for kw, needle in [
        (dict(init="pi-grow"), "init is a setting of grammatical evolution, and this run has no grammar"),
        (dict(max_depth=9, wraps=2), "wraps, max_depth are settings of grammatical evolution"),
        (dict(init_depth=(2, 4)), "init_depth is a setting"),
        (dict(mutation="int-flip:1/used"), "names an operator of grammatical evolution"),
        (dict(crossover="subtree"), "names an operator of grammatical evolution"),
    ]:
        with pytest.raises(ValueError, match=needle):
            SymbolicRegressor(function_set="add", **TINY, **kw).fit(*data())
    with pytest.raises(ValueError, match="names an operator"):
        grove.control("swimmer", population_size=10, generations=1, episode_steps=20, device="cpu", mutation="subtree")


def test_bad_ge_values_are_value_errors():
    X, y = data()
    for kw, needle in [
        (dict(mutation="flip"), "mutation `flip`: expected a probability or int-flip"),
        (dict(crossover="uniform"), "crossover `uniform`: expected"),
        (dict(mutation="subtree:1/used"), "1/used is a rate of int-flip"),
        (dict(crossover=1.5), "crossover"),
        (dict(init="ramped"), "init"),
        (dict(init_depth=(5, 2)), "init-depth 5,2"),
        (dict(init_depth=3), "init_depth"),
        (dict(wraps=500), "wraps"),
    ]:
        with pytest.raises(ValueError, match=needle):
            SymbolicRegressor(grammar=GRAMMAR, **TINY, **kw).fit(X, y)


def test_unique_parents_reach_the_run_where_they_change_it():
    X, y = data(120)
    none = SymbolicRegressor(grammar=GRAMMAR, **{**TINY, "generations": 5}).fit(X, y)
    unique = SymbolicRegressor(grammar=GRAMMAR, **{**TINY, "generations": 5}, diversity="unique").fit(X, y)
    assert unique.report_["settings"]["engine"]["diversity"] == "unique"
    sizes = lambda m: [g["mean_size"] for g in m.report_["generations"]]
    assert sizes(none) != sizes(unique)
    # Tree GP's default bloat control is NSGA-II, which ranks duplicates behind by itself.
    with pytest.raises(ValueError, match="NSGA-II"):
        SymbolicRegressor(function_set="add,mul", **TINY, diversity="unique").fit(X, y)
    t = SymbolicRegressor(function_set="add,mul", **TINY, diversity="unique", bloat="none").fit(X, y)
    assert t.report_["settings"]["engine"]["diversity"] == "unique"
