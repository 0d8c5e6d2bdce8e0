"""grove.control: a policy that acts on observations and plays episodes, and bad arguments."""

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
