"""grove.control: a policy that acts on observations and plays episodes, and bad arguments."""

import copy
import pickle

import numpy as np
import pytest

import grove

TINY = dict(population_size=16, generations=2, episode_steps=40, test_episodes=1, device="cpu")


@pytest.fixture(scope="module")
def policy():
    return grove.control("swimmer", **TINY)


def test_policy_acts_in_the_action_range(policy):
    assert policy.env == "swimmer"
    assert len(policy.actuators) == len(policy.programs) == 2
    obs = np.linspace(-0.5, 0.5, len(policy.observations))
    a = policy.act(obs)
    assert a.shape == (2,) and a.dtype == np.float32
    assert np.all(np.abs(a) <= 1.0)
    # The same observation gives the same action.
    np.testing.assert_array_equal(policy.act(obs), a)


def test_rollout_is_repeatable_and_matches_the_reported_training_episode(policy):
    r = policy.rollout(steps=40, seed=1)
    assert r == policy.rollout(steps=40, seed=1)
    assert r.steps == 40 and not r.terminated
    # Training episode 0 uses the run's seed (random_state=1): the report's first return.
    assert r.total_return == pytest.approx(policy.report["train"]["returns"][0], rel=1e-9)
    assert policy.rollout(steps=5, seed=None).steps == 5


def test_every_policy_kind_replays_its_reported_test_return():
    for kind in [dict(), dict(policy="linear", generations=2), dict(policy="residual", linear_iterations=2, generations=2, population_size=10)]:
        p = grove.control("hopper", **{**TINY, **kind, "episode_steps": 50, "test_episodes": 3})
        returns = p.test_returns()
        assert list(returns) == p.report["test"]["returns"], kind
        assert returns.mean() == pytest.approx(p.report["test"]["mean"], rel=1e-12), kind
    with pytest.raises(ValueError, match="settings"):
        grove.Policy({**p.report, "settings": {"env": 3}}).test_returns()


def test_lexicase_on_episodes_and_unique_parents_reach_the_control_run():
    base = {**TINY, "generations": 4, "episodes": 3}
    lex = grove.control("swimmer", **base, selection="lexicase", diversity="unique")
    engine = lex.report["settings"]["engine"]
    assert (engine["selection"], engine["diversity"]) == ("lexicase", "unique")
    plain = grove.control("swimmer", **base)
    assert plain.report["settings"]["engine"]["selection"] == "tournament"
    best = lambda p: [(g["best_return"], g["mean_return"]) for g in p.report["generations"]]
    assert best(lex) != best(plain)
    # Lexicase's cases are the episodes: one episode is one case, which it cannot select on.
    with pytest.raises(ValueError, match="episode as a case"):
        grove.control("swimmer", **{**base, "episodes": 1}, selection="lexicase")


def test_policy_pickles(policy):
    back = pickle.loads(pickle.dumps(policy))
    obs = np.zeros(len(policy.observations))
    np.testing.assert_array_equal(back.act(obs), policy.act(obs))


def test_bad_arguments_are_value_errors(policy):
    with pytest.raises(ValueError, match="observation has 3 values"):
        policy.act(np.zeros(3))
    with pytest.raises(ValueError, match="NaN"):
        policy.act(np.full(len(policy.observations), np.nan))
    with pytest.raises(ValueError, match="steps"):
        policy.rollout(steps=0)
    with pytest.raises(ValueError, match="unicycle"):
        grove.control("unicycle", **TINY)
    with pytest.raises(ValueError, match="--pop"):
        grove.control("swimmer", **{**TINY, "population_size": 1})
    with pytest.raises(ValueError, match="device"):
        grove.control("swimmer", **{**TINY, "device": "gpu"})
    with pytest.raises(ValueError, match="validation_episodes"):
        grove.control("swimmer", **{**TINY, "validation_episodes": -1})


def test_ctrl_c_stops_a_control_run():
    import time

    from conftest import interrupt_soon

    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt), interrupt_soon():
        grove.control("swimmer", **{**TINY, "generations": 1_000_000})
    assert time.monotonic() - start < 30


# Checkpoints: grove.control(checkpoint=PATH, resume=True) continues a saved run.


def untimed(report):
    return [{k: v for k, v in g.items() if k != "seconds"} for g in report["generations"]]


def same_run(a, b):
    for key in ["best", "train", "test", "policy", "hall_of_fame"]:
        assert a.report[key] == b.report[key], key
    assert untimed(a.report) == untimed(b.report)


def test_a_resumed_control_run_equals_the_uninterrupted_one(tmp_path, grove_cli):
    path = tmp_path / "run.ckpt"
    whole = grove.control("swimmer", **{**TINY, "generations": 5})
    first = grove.control("swimmer", **{**TINY, "generations": 2}, checkpoint=path)
    assert path.is_file() and len(first.report["generations"]) == 3
    resumed = grove.control("swimmer", **{**TINY, "generations": 5}, checkpoint=path, resume=True)
    same_run(resumed, whole)
    # The checkpoint is the command line's: `grove run --resume` continues the Python run too.
    second = tmp_path / "again.ckpt"
    grove.control("swimmer", **{**TINY, "generations": 2}, checkpoint=second)
    grove_cli("run", "--resume", second, "--gens", 5, "--quiet", "--report", tmp_path / "r.json")
    import json

    cli = json.loads((tmp_path / "r.json").read_text())
    for key in ["best", "train", "test", "policy"]:
        assert cli[key] == whole.report[key], key


def test_resume_without_a_checkpoint_file_starts_afresh(tmp_path):
    path = tmp_path / "new.ckpt"
    a = grove.control("swimmer", **TINY, checkpoint=path, resume=True)
    same_run(a, grove.control("swimmer", **TINY))
    assert path.is_file()


def test_bad_checkpoint_arguments_are_value_errors(tmp_path):
    path = tmp_path / "run.ckpt"
    grove.control("swimmer", **{**TINY, "generations": 3}, checkpoint=path)
    with pytest.raises(ValueError, match="has run 3 generations; generations=2 is fewer"):
        grove.control("swimmer", **TINY, checkpoint=path, resume=True)
    with pytest.raises(ValueError, match=r"settings differ at `engine.pop_size` \(was 16, now 20\)"):
        grove.control("swimmer", **{**TINY, "generations": 4, "population_size": 20}, checkpoint=path, resume=True)
    with pytest.raises(ValueError, match="give checkpoint=PATH"):
        grove.control("swimmer", **TINY, resume=True)
    with pytest.raises(ValueError, match="does not exist"):
        grove.control("swimmer", **TINY, checkpoint=tmp_path / "nowhere" / "run.ckpt")
    with pytest.raises(ValueError, match="checkpoint_every"):
        grove.control("swimmer", **TINY, checkpoint=path, checkpoint_every=0)
    (tmp_path / "bad.ckpt").write_text("{}")
    with pytest.raises(ValueError, match="not a checkpoint"):
        grove.control("swimmer", **TINY, checkpoint=tmp_path / "bad.ckpt", resume=True)


def test_ctrl_c_saves_a_checkpoint_that_resumes_to_the_uninterrupted_run(tmp_path):
    from conftest import interrupt_soon

    path = tmp_path / "run.ckpt"
    settings = {**TINY, "generations": 300}
    with pytest.raises(KeyboardInterrupt, match="resume=True") as stopped, interrupt_soon():
        grove.control("swimmer", **settings, checkpoint=path)
    assert str(path) in str(stopped.value)
    resumed = grove.control("swimmer", **settings, checkpoint=path, resume=True)
    same_run(resumed, grove.control("swimmer", **settings))


def test_islands_reach_the_control_run():
    p = grove.control("swimmer", **{**TINY, "islands": 2, "migrants": 3, "migrate_every": 1, "gpus": [0, 1]})
    assert p.report["settings"]["islands"] == {"count": 2, "migrate_every": 1, "migrants": 3, "gpus": "0,1"}
    with pytest.raises(ValueError, match="islands"):
        grove.control("swimmer", **{**TINY, "islands": 0})
    with pytest.raises(ValueError, match="migrants=20 must be at most population_size=16"):
        grove.control("swimmer", **{**TINY, "islands": 2})
    with pytest.raises(ValueError, match="gpus"):
        grove.control("swimmer", **{**TINY, "gpus": "first"})
    with pytest.raises(ValueError, match="gpu_link must be 'peer' or 'nccl'"):
        grove.control("swimmer", **{**TINY, "gpu_link": "tcp"})
    linked = grove.control("swimmer", **{**TINY, "islands": 2, "migrants": 3, "migrate_every": 1, "gpu_link": "nccl"})
    assert linked.report["settings"]["islands"]["link"] == "nccl"


def test_a_control_run_stops_at_a_return_and_refuses_a_bad_time_limit():
    policy = grove.control("swimmer", **{**TINY, "generations": 5}, stop_at=-1e9)
    assert policy.report["ended"]["reason"] == "stop-at"
    assert policy.report["ended"]["measure"] == "return"
    assert len(policy.report["generations"]) == 1
    with pytest.raises(ValueError, match="max_time must be a positive number of seconds"):
        grove.control("swimmer", **TINY, max_time=-1)


def test_a_linear_policy_is_trained_played_and_explained():
    small = dict(generations=6, episode_steps=60, test_episodes=2, device="cpu", directions=4)
    p = grove.control("swimmer", policy="linear", **small)
    assert p.report["settings"]["policy"] == "linear"
    assert p.report["settings"]["linear"]["top"] == 2, "the default's share of the directions"
    lin = p.linear
    assert [w["actuator"] for w in lin["weights"]] == p.actuators
    assert all(len(w["weights"]) == len(p.observations) for w in lin["weights"])
    # act() is tanh(W (o - mean) / std), up to the f32 rounding of the program's constants.
    obs = np.linspace(-0.3, 0.4, len(p.observations))
    mean, std = np.array(lin["mean"]), np.array(lin["std"])
    scale = np.where(std >= 1e-7, 1.0 / (std + 1e-8), 0.0)
    w = np.array([r["weights"] for r in lin["weights"]])
    np.testing.assert_allclose(p.act(obs), np.tanh(w @ ((obs - mean) * scale)), rtol=1e-4, atol=1e-5)
    # Training episode 0 replays.
    assert p.rollout(steps=60, seed=1).total_return == pytest.approx(p.report["train"]["returns"][0], rel=1e-9)
    # A program's policy has no weights.
    assert grove.control("swimmer", **TINY).linear is None
    with pytest.raises(ValueError, match="policy must be"):
        grove.control("swimmer", policy="tabular", **TINY)
    with pytest.raises(ValueError, match="top_directions must be at least 1"):
        grove.control("swimmer", policy="linear", top_directions=0, **small)
    with pytest.raises(ValueError, match=r"--top-directions \(linear.top\)"):
        grove.control("swimmer", policy="linear", top_directions=9, **small)
    with pytest.raises(ValueError, match=r"--noise \(linear.noise\)"):
        grove.control("swimmer", policy="linear", noise=-1, **small)


def test_linear_searches_side_by_side_return_the_one_that_validates_best():
    small = dict(generations=3, episode_steps=40, test_episodes=2, device="cpu", directions=2, validation_episodes=2)
    p = grove.control("swimmer", policy="linear", searches=3, **small)
    block = p.report["searches"]
    assert block["count"] == 3 and p.report["settings"]["searches"] == 3
    v = [c["validation_return"] for c in block["candidates"]]
    assert v[block["chosen"] - 1] == max(v)
    assert "searches" not in grove.control("swimmer", policy="linear", **small).report
    with pytest.raises(ValueError, match=r"--searches \(searches\) must be 1 to 1024, got 0"):
        grove.control("swimmer", policy="linear", searches=0, **small)
    with pytest.raises(ValueError, match=r"this run's policy is program"):
        grove.control("swimmer", searches=2, **TINY)


def test_exploiting_searches_copy_and_are_checked():
    small = dict(generations=4, episode_steps=40, test_episodes=2, device="cpu", directions=2, validation_episodes=2)
    p = grove.control("hopper", policy="linear", searches=4, exploit_every=2, **small)
    assert p.report["settings"]["exploit_every"] == 2
    plain = grove.control("hopper", policy="linear", searches=4, **small)
    returns = lambda r: [c["validation_return"] for c in r.report["searches"]["candidates"]]
    assert returns(p) != returns(plain)
    with pytest.raises(ValueError, match=r"--exploit-every \(exploit_every\)"):
        grove.control("hopper", policy="linear", exploit_every=2, **small)
    with pytest.raises(ValueError, match=r"exploit_every must be at least 0"):
        grove.control("hopper", policy="linear", searches=2, exploit_every=-1, **small)


def test_a_policy_from_a_report_with_a_bad_linear_head_is_a_value_error():
    small = dict(generations=2, episode_steps=20, test_episodes=1, device="cpu", directions=2)
    report = grove.control("swimmer", policy="linear", **small).report
    # The report as saved gives the policy back, and a deviation of zero (a constant
    # observation, which the policy ignores) is accepted.
    again = grove.Policy(copy.deepcopy(report))
    assert again.linear == report["linear_policy"]
    zero = copy.deepcopy(report)
    zero["linear_policy"]["std"][0] = 0.0
    assert grove.Policy(zero).linear["std"][0] == 0.0

    def bad(edit, match):
        r = copy.deepcopy(report)
        edit(r["linear_policy"])
        with pytest.raises(ValueError, match=match):
            grove.Policy(r)

    bad(lambda lin: lin["weights"].pop(), "1 rows of .* the policy has 2 actuators")
    bad(lambda lin: lin["weights"][0]["weights"].pop(), "the policy has 2 actuators and 8 observations")
    bad(lambda lin: lin["mean"].append(0.0), "9 means")
    bad(lambda lin: lin.pop("std"), "not W by actuator")
    bad(lambda lin: lin["weights"][0].update(weights="abc"), "not W by actuator")
    bad(lambda lin: lin["weights"].reverse(), "for actuators")
    bad(lambda lin: lin["observations"].reverse(), "over observations")
    bad(lambda lin: lin["std"].__setitem__(1, -1.0), "negative deviation")
    bad(lambda lin: lin["mean"].__setitem__(1, float("nan")), "not finite")
    with pytest.raises(ValueError, match="no 'policy'"):
        grove.Policy({"best": report["best"]})
    with pytest.raises(ValueError, match="no 'policy'"):
        grove.Policy([1, 2])
    no_env = copy.deepcopy(report)
    del no_env["policy"]["env"]
    with pytest.raises(ValueError, match="without its policy's 'env'"):
        grove.Policy(no_env)


def test_a_linear_run_continues_from_its_checkpoint(tmp_path):
    small = dict(episode_steps=40, test_episodes=2, device="cpu", policy="linear", random_state=2)
    whole = grove.control("hopper", generations=6, **small)
    ck = tmp_path / "lin.ckpt"
    grove.control("hopper", generations=3, checkpoint=ck, **small)
    again = grove.control("hopper", generations=6, checkpoint=ck, resume=True, **small)
    assert again.report["train"] == whole.report["train"]
    assert again.linear == whole.linear
    assert [g["return"] for g in again.report["generations"]] == [g["return"] for g in whole.report["generations"]]


def test_programs_are_evolved_on_top_of_a_linear_policy():
    small = dict(episode_steps=60, test_episodes=2, device="cpu", random_state=3, directions=4)
    p = grove.control("hopper", policy="residual", linear_iterations=5, **{**TINY, **small})
    lin = grove.control("hopper", policy="linear", generations=5, **small)
    assert p.report["settings"]["policy"] == "residual"
    assert p.report["settings"]["linear_iterations"] == 5
    # The first stage is the linear search; its policy is frozen under the programs.
    assert p.linear == lin.linear
    assert p.report["linear_search"]["returns"] == [g["return"] for g in lin.report["generations"]]
    assert all(a.startswith("tanh(lin_") for a in p.programs)
    # The whole policy acts and replays as any other.
    assert p.act(np.zeros(len(p.observations))).shape == (3,)
    assert p.rollout(steps=60, seed=3).total_return == pytest.approx(p.report["train"]["returns"][0], rel=1e-9)
    with pytest.raises(ValueError, match="linear_iterations must be at least 1"):
        grove.control("hopper", policy="residual", linear_iterations=0, **TINY)


def test_the_linear_policy_under_the_programs_is_tuned_again_when_asked():
    small = dict(episode_steps=60, test_episodes=2, device="cpu", random_state=3, directions=4)
    frozen = grove.control("hopper", policy="residual", linear_iterations=3, **{**TINY, **small})
    tuned = grove.control("hopper", policy="residual", linear_iterations=3, head_every=1, head_iterations=2, **{**TINY, **small})
    assert frozen.report["settings"]["head_every"] == 0
    gens = len(tuned.report["generations"])
    # Tuned after every generation, two iterations each, after the 3 before the programs.
    assert tuned.report["linear_search"]["iterations"] == 3 + 2 * gens
    assert tuned.report["linear_search"]["returns"][:3] == frozen.report["linear_search"]["returns"]
    assert tuned.linear["weights"] != frozen.linear["weights"]
    assert tuned.rollout(steps=60, seed=3).total_return == pytest.approx(tuned.report["train"]["returns"][0], rel=1e-9)
    for bad, match in [
        (dict(policy="residual", head_every=-1), "head_every must be >= 0"),
        (dict(policy="residual", head_every=2, head_iterations=0), "head_iterations must be at least 1"),
        (dict(policy="program", head_every=2), "head_every tunes the linear policy under the programs of policy='residual'"),
    ]:
        with pytest.raises(ValueError, match=match):
            grove.control("hopper", **bad, **TINY)


def test_programs_read_normalised_observations_unless_turned_off():
    small = dict(episode_steps=60, test_episodes=2, device="cpu", random_state=5)
    raw = grove.control("hopper", normalise=False, **{**TINY, **small})
    p = grove.control("hopper", **{**TINY, **small})
    assert p.report["settings"]["normalise"] is True and raw.report["settings"]["normalise"] is False
    assert "normaliser" not in raw.report
    norm = p.report["normaliser"]
    assert len(norm["mean"]) == len(norm["std"]) == len(p.observations) == 11
    assert norm["states"] > 0
    # Generation 0 reads the raw observations; the policy has the last normaliser written in.
    assert p.report["generations"][0]["best_return"] == raw.report["generations"][0]["best_return"]
    assert p.act(np.zeros(len(p.observations))).shape == (3,)
    assert p.rollout(steps=60, seed=5).total_return == pytest.approx(p.report["train"]["returns"][0], rel=1e-9)
    for bad, match in [
        (dict(policy="linear", normalise=False), "normalise=False is for policy='program'"),
        (dict(normalise=True, islands=2), "normalise learns one normaliser for one population"),
    ]:
        with pytest.raises(ValueError, match=match):
            grove.control("hopper", **bad, **TINY)
    # With islands it is off unless asked.
    two = grove.control("hopper", islands=2, migrants=2, **TINY)
    assert two.report["settings"]["normalise"] is False and "normaliser" not in two.report
