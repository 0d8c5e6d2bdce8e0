"""``grove.control``: evolve a policy for a simulated robot (the library function of ``grove
control``), with checkpoints to continue it, and get back a ``Policy`` that acts on
observations and plays episodes."""

import json
import os
from collections import namedtuple

import numpy as np

from . import _grove
from ._run import budget_block, functions_text, ge_fields, grammar_spec, islands_block, merged, on_note, operators_list, seed_of

# `grove control`'s defaults (grove::task::base::defaults), which the signature of ``control`` shows.
_CONTROL = _grove.DEFAULTS["control"]

Rollout = namedtuple("Rollout", ["total_return", "steps", "terminated"])
Rollout.__doc__ = "One episode a policy played: the sum of rewards, control steps, and whether it terminated."


def _checked_linear(lin, observations, actuators):
    """A report's ``linear_policy`` (W by actuator, the observations' mean and deviation) when it
    fits the policy's observations and actuators; a ValueError saying what does not."""
    if lin is None:
        return None
    n, m = len(observations), len(actuators)
    try:
        rows, mean, std = lin["weights"], lin["mean"], lin["std"]
        shape = (len(rows), [len(r["weights"]) for r in rows], len(mean), len(std))
        acts = [r["actuator"] for r in rows]
        numbers = [float(v) for r in rows for v in r["weights"]] + [float(v) for v in mean]
        sd = [float(v) for v in std]
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"the report's linear_policy is not W by actuator with a mean and deviation ({e!r})") from None
    if shape[0] != m or any(k != n for k in shape[1]) or shape[2] != n or shape[3] != n:
        raise ValueError(
            f"the report's linear_policy has {shape[0]} rows of {sorted(set(shape[1])) or [0]} weights, {shape[2]} means and "
            f"{shape[3]} deviations; the policy has {m} actuators and {n} observations"
        )
    if "observations" in lin and list(lin["observations"]) != observations:
        raise ValueError(f"the report's linear_policy is over observations {list(lin['observations'])}, not the policy's {observations}")
    if acts != actuators:
        raise ValueError(f"the report's linear_policy is for actuators {acts}, not the policy's {actuators}")
    if not (all(np.isfinite(numbers + sd)) and all(x >= 0 for x in sd)):
        raise ValueError("the report's linear_policy holds a weight, mean or deviation that is not finite, or a negative deviation")
    return lin


class Policy:
    """An evolved control policy: actions = tanh of the program's outputs, one per actuator.

    Attributes: ``env``, ``profile``, ``observations`` (names), ``actuators`` (names),
    ``programs`` (one action formula per actuator), ``linear`` (a linear policy's weights, mean
    and deviation; None for an evolved program), ``report`` (the run's report, as ``grove
    control --report`` writes it; ``grove rollout --policy`` replays a file holding it).
    """

    def __init__(self, report):
        if not isinstance(report, dict) or not isinstance(report.get("policy"), dict):
            raise ValueError("not a report of grove control: it has no 'policy' object")
        self.report = report
        saved = report["policy"]
        try:
            self.env = saved["env"]
            self.profile = saved["profile"]
            self.observations = list(saved["observations"])
            self.actuators = list(saved["actuators"])
            self.programs = [p["action"] for p in report["best"]["programs"]]
        except (KeyError, TypeError) as e:
            raise ValueError(f"a report of grove control without its policy's {e}: write it again with grove control --report") from None
        # A linear policy's W (by actuator), mean and deviation (``policy="linear"``); else None.
        self.linear = _checked_linear(report.get("linear_policy"), self.observations, self.actuators)
        self._policy_json = json.dumps(saved)

    def act(self, obs):
        """The actions (float32, one per actuator) at one observation (``len(observations)``
        values); NaN where the program's output is not finite."""
        obs = np.asarray(obs, dtype=np.float32)
        if obs.ndim != 1:
            raise ValueError(f"act takes one observation, a 1-D array of {len(self.observations)} values; got shape {obs.shape}")
        if not np.all(np.isfinite(obs)):
            raise ValueError("the observation contains NaN or infinity")
        return np.asarray(_grove.policy_act(self._policy_json, obs.tolist()), dtype=np.float32)

    def rollout(self, steps=None, seed=1):
        """Plays one episode in the environment (f32, as ``grove rollout --policy``) from the
        reset noise of ``seed`` (None: the rest pose), ``steps`` control steps at most (None:
        the episode length). Returns a ``Rollout``."""
        if steps is not None and int(steps) < 1:
            raise ValueError(f"steps must be at least 1, got {steps}")
        if seed is not None and int(seed) < 0:
            raise ValueError(f"seed must be >= 0, got {seed}")
        total, n, terminated = _grove.policy_rollout(
            self._policy_json, None if steps is None else int(steps), None if seed is None else int(seed)
        )
        return Rollout(total, n, terminated)

    def test_returns(self):
        """Plays the policy on its run's own test episodes (the report's environment, seed,
        episode length and count, and their reset noise), as the run scored them (``grove
        rollout --policy REPORT --test``): each episode's return, a numpy array whose mean is
        ``report["test"]["mean"]``."""
        return np.asarray(_grove.policy_test_returns(json.dumps(self.report)), dtype=np.float64)

    def __repr__(self):
        lines = [f"Policy({self.env}, {self.profile})"]
        lines += [f"  {a} = {p}" for a, p in zip(self.actuators, self.programs)]
        return "\n".join(lines)


def control(
    env="swimmer",
    *,
    profile=None,
    function_set=None,
    operators=None,
    grammar=None,
    population_size=None,
    generations=None,
    episodes=None,
    episode_steps=None,
    test_episodes=_CONTROL["test_episodes"],
    parsimony_coefficient=_CONTROL["parsimony_coefficient"],
    healthy_reward=None,
    fresh_starts=False,
    validation_episodes=_CONTROL["validation_episodes"],
    policy="program",
    directions=None,
    top_directions=None,
    step_size=None,
    noise=None,
    searches=None,
    exploit_every=None,
    linear_iterations=None,
    head_every=0,
    head_iterations=_CONTROL["head_iterations"],
    normalise=None,
    tournament_size=_CONTROL["tournament_size"],
    selection=_CONTROL["selection"],
    down_sample=_CONTROL["down_sample"],
    lexicase_pool=_CONTROL["lexicase_pool"],
    diversity=_CONTROL["diversity"],
    init=None,
    init_depth=None,
    max_depth=None,
    wraps=None,
    crossover=None,
    mutation=None,
    elitism=_CONTROL["elitism"],
    max_length=_CONTROL["max_length"],
    p_out=_CONTROL["p_out"],
    islands=_CONTROL["islands"],
    migrate_every=_CONTROL["migrate_every"],
    migrants=_CONTROL["migrants"],
    gpus=_CONTROL["gpus"],
    gpu_link=_CONTROL["gpu_link"],
    max_time=None,
    stop_at=None,
    device="auto",
    threads=None,
    random_state=_CONTROL["random_state"],
    checkpoint=None,
    checkpoint_every=10,
    resume=False,
    verbose=0,
):
    """Evolves a policy for ``env`` (swimmer, hopper, walker2d, half_cheetah, or a path to an
    environment ``.ron`` file), as ``grove control`` does with the same settings, and returns
    it as a ``Policy``. ``population_size``, ``generations`` and ``episodes`` default to the
    device's (CPU 200, 20, 1; GPU 5000, 100, 4). ``fresh_starts`` plays new reset noise every
    generation (``--fresh-starts``); ``validation_episodes`` chooses the returned policy among
    the run's best and the last population's fittest programs by their return on that many
    episodes, the mean less one standard deviation (``--validation-episodes``; 0: the run's
    best).

    ``policy="linear"`` trains no program but a linear map of the normalised observations
    (``--policy linear``): actions = tanh(W (o - mean) / std), with the running mean and
    deviation of the states seen, W tuned by augmented random search (Mania et al. 2018) for
    ``generations`` iterations of ``directions`` random directions, stepping along the best
    ``top_directions`` by ``step_size``, playing changes of W of deviation ``noise``
    (``--directions``, ``--top-directions``, ``--step-size``, ``--noise``; None: the device's
    defaults, and ``top_directions`` the defaults' share of ``directions``). The returned
    ``Policy`` is played as any other; ``Policy.linear`` holds W, the mean and the deviation.
    ``searches`` > 1 runs that many random searches side by side, each drawing its own
    directions, their policies played together in one roll-out call an iteration, and returns
    the one whose last policy has the highest mean return over ``validation_episodes`` fresh
    episodes (``--searches``; ``report["searches"]`` holds every search's returns). None: one
    search on the CPU, and on a GPU 8 searches of 128 directions unless ``directions`` or
    ``top_directions`` is given (2 or more ``searches`` on a GPU: each of 128 directions unless
    those are given; 1: one search of 1024). ``exploit_every`` E > 0 (``--exploit-every``): after every E
    iterations the worse half of the searches take the better half's W and statistics, ranked
    by their last 3 iterations' returns (None or 0: never).
    ``policy="residual"`` tunes that linear policy for ``linear_iterations`` iterations
    (``--linear-iterations``; None: the device's default, 20 on the CPU, 100 on a GPU) and then
    evolves programs over the normalised observations for ``generations`` generations, added
    to it: actions = tanh(W n + f(n)) (``--policy residual``). With ``head_every`` > 0 the linear
    policy is tuned again after every ``head_every`` generations, ``head_iterations`` iterations
    of the same search with the generation's best program on top (``--head-every``,
    ``--head-iterations``); 0 keeps it as the first search left it.

    ``normalise`` (``--normalise on|off``; None: on with one island, off with several): the
    programs read each observation normalised, (o - mean) / std, by the running mean and
    deviation of every state the population's policies have visited; ``report["normaliser"]``
    holds the last generation's, which the returned ``Policy`` has written into its program.
    ``False`` reads the raw observations; linear and residual policies always normalise.

    ``islands``, ``migrate_every``, ``migrants``, ``gpus`` and ``gpu_link`` are the island
    model's settings (``--islands``, ``--migrate-every``, ``--migrants``, ``--gpus``,
    ``--gpu-link``: populations side by side exchanging their best programs on a ring, spread
    over these GPUs on a CUDA run, which exchange them by peer copies or by NCCL).

    ``operators``: operators of your own for ``function_set`` or ``grammar`` (``--define``), as
    for ``SymbolicRegressor``.

    ``selection`` (``--selection``): "tournament", or epsilon-lexicase with each training
    episode a case, on all of them ("lexicase") or on a fresh ``down_sample`` of them each
    generation ("down-sampled"); lexicase needs ``episodes`` of 2 or more. ``lexicase_pool``:
    the policies each selection starts from, drawn where there are more (0: all of them).
    ``diversity`` (``--diversity``): "none", or "unique", where policies of equal training
    return enter parent selection once (the smallest of them).

    ``init``, ``init_depth``, ``max_depth``, ``wraps``, ``crossover`` and ``mutation``: grammatical
    evolution's settings, as for ``SymbolicRegressor`` (``--init``, ``--init-depth``,
    ``--max-depth``, ``--wraps``, ``--crossover``, ``--mutation``); without a grammar only
    ``crossover`` and ``mutation`` as probabilities (the trees' rates).

    ``max_time`` and ``stop_at``: the run ends after the generation past which one more would
    cross ``max_time`` seconds of search, or after the first whose best policy's training return
    is at or above ``stop_at`` (``--time-limit``, ``--stop-at``); ``report["ended"]`` says why.

    ``checkpoint``: a file the run saves its state to every ``checkpoint_every`` generations,
    before the last generation and on Ctrl-C (``grove control --checkpoint``; ``grove run
    --resume`` continues it too). With ``resume=True`` and a checkpoint at that path, the run
    continues the saved one (the same settings but ``generations``, ``max_time``, ``stop_at``,
    ``device`` and ``gpus``; no fewer generations than it has run) and ends as the uninterrupted run would; without a file
    there it starts afresh. ``verbose``: 0 quiet, 1 progress lines, 2 also a line per
    generation, written to ``sys.stderr`` (which a notebook shows)."""
    if grammar is not None and function_set is not None:
        raise ValueError("give function_set (tree GP) or grammar (grammatical evolution), not both")
    if device not in ("auto", "cpu", "cuda"):
        raise ValueError(f"device must be 'auto', 'cpu' or 'cuda', got {device!r}")
    if int(validation_episodes) < 0:
        raise ValueError(f"validation_episodes must be >= 0 (0: the run's best), got {validation_episodes}")
    if not 1 <= int(islands) <= _grove.MAX_ISLANDS:
        raise ValueError(f"islands must be 1 to {_grove.MAX_ISLANDS}, got {islands}")
    if int(migrate_every) < 1:
        raise ValueError(f"migrate_every must be at least 1, got {migrate_every}")
    if int(migrants) < 0:
        raise ValueError(f"migrants must be >= 0 (0: none), got {migrants}")
    if int(checkpoint_every) < 1:
        raise ValueError(f"checkpoint_every must be at least 1, got {checkpoint_every}")
    if resume and checkpoint is None:
        raise ValueError("resume=True continues the run saved at checkpoint: give checkpoint=PATH")
    if selection not in ("tournament", "lexicase", "down-sampled"):
        raise ValueError(f"selection must be 'tournament', 'lexicase' or 'down-sampled', got {selection!r}")
    if policy not in ("program", "linear", "residual"):
        raise ValueError(f"policy must be 'program', 'linear' or 'residual', got {policy!r}")
    if linear_iterations is not None and int(linear_iterations) < 1:
        raise ValueError(f"linear_iterations must be at least 1, got {linear_iterations}")
    if int(head_every) < 0:
        raise ValueError(f"head_every must be >= 0 (0: the linear policy stays as its search left it), got {head_every}")
    if int(head_every) > 0 and policy != "residual":
        raise ValueError(f"head_every tunes the linear policy under the programs of policy='residual', not policy={policy!r}")
    if int(head_iterations) < 1:
        raise ValueError(f"head_iterations must be at least 1, got {head_iterations}")
    if normalise is False and policy != "program":
        raise ValueError(f"normalise=False is for policy='program'; a {policy} policy always reads normalised observations")
    if normalise and int(islands) > 1:
        raise ValueError(f"normalise learns one normaliser for one population: with islands={islands} leave it None or False")
    grammar = grammar_spec(grammar)
    engine = {
        "seed": seed_of(random_state),
        "tournament": int(tournament_size),
        "max_len": int(max_length),
        "selection": str(selection),
        "down_sample": float(down_sample),
        "lexicase_pool": int(lexicase_pool),
        "diversity": str(diversity),
    }
    settings = {
        "env": str(env),
        "profile": profile,
        "grammar": grammar,
        "functions": None if grammar is not None else functions_text(function_set, _CONTROL["function_set"]),
        "operators": operators_list(operators),
        "engine": engine,
        "test_episodes": max(int(test_episodes), 1),
        "episode_steps": None if episode_steps is None else int(episode_steps),
        "parsimony": float(parsimony_coefficient),
        "healthy_reward": None if healthy_reward is None else float(healthy_reward),
        "fresh_starts": bool(fresh_starts),
        "validation_episodes": int(validation_episodes),
        "trees": {"p_out": float(p_out)},
        "islands": islands_block(islands, migrate_every, migrants, gpus, population_size, gpu_link),
        "budget": budget_block(max_time, stop_at),
        "device": device,
        "policy": policy,
        "head_every": int(head_every),
        "head_iterations": int(head_iterations),
    }
    if normalise is not None:
        settings["normalise"] = bool(normalise)
    linear = {k: v for k, v in (("directions", directions), ("top", top_directions)) if v is not None}
    linear.update({k: float(v) for k, v in (("step_size", step_size), ("noise", noise)) if v is not None})
    for k in ("directions", "top"):
        if k in linear:
            linear[k] = int(linear[k])
            if linear[k] < 1:
                raise ValueError(f"{'top_directions' if k == 'top' else k} must be at least 1, got {linear[k]}")
    if linear:
        settings["linear"] = linear
    settings = merged(settings, ge_fields(grammar, init, init_depth, max_depth, wraps, crossover, mutation))
    if searches is not None:
        settings["searches"] = int(searches)
    if exploit_every is not None:
        if int(exploit_every) < 0:
            raise ValueError(f"exploit_every must be at least 0, got {exploit_every}")
        settings["exploit_every"] = int(exploit_every)
    if linear_iterations is not None:
        settings["linear_iterations"] = int(linear_iterations)
    if population_size is not None:
        engine["pop_size"] = int(population_size)
    if generations is not None:
        engine["generations"] = int(generations)
    if episodes is not None:
        settings["episodes"] = int(episodes)
    pop = engine.get("pop_size")
    engine["elite"] = int(elitism) if pop is None else min(int(elitism), pop)
    report = _grove.control(
        json.dumps(settings),
        threads=threads,
        verbose=min(max(int(verbose), 0), 2),
        on_note=on_note,
        checkpoint=None if checkpoint is None else os.fspath(checkpoint),
        checkpoint_every=int(checkpoint_every),
        resume=bool(resume),
    )
    report = json.loads(report)
    return Policy(report)
