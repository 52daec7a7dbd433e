"""DeepSea: only the always-right path pays; one-hot cells; ``size`` steps; the action mapping; errors."""

from __future__ import annotations

import pytest
import torch

from rlpipe.config import ConfigError
from rlpipe.envs import build_env
from rlpipe.envs.tasks.deep_sea import DeepSea

SIZE = 5


def _episode(env: DeepSea, actions: list[int]) -> tuple[list[float], list[torch.Tensor], list[bool]]:
    """Rewards, observations after each step and terminations of env 0 stepping ``actions``."""
    rewards, observations, ends = [], [], []
    for a in actions:
        step = env.step(torch.full((env.num_envs,), a, dtype=torch.int64))
        rewards.append(float(step.reward[0]))
        observations.append(step.final_obs[0])
        ends.append(bool(step.terminated[0]))
    return rewards, observations, ends


def test_only_the_always_right_path_finds_the_treasure():
    env = build_env("DeepSea", 2, "cpu", {"size": SIZE, "move_cost": 0.1, "randomize_actions": False})
    obs = env.reset(seed=0)
    assert obs.shape == (2, SIZE * SIZE) and torch.equal(obs[0], torch.eye(SIZE * SIZE)[0])
    rewards, observations, ends = _episode(env, [1] * SIZE)
    cost = -0.1 / SIZE
    assert rewards == pytest.approx([cost] * (SIZE - 1) + [1 + cost])  # the treasure: right of the corner
    assert sum(rewards) == pytest.approx(1 - 0.1)
    for t, o in enumerate(observations[:-1], start=1):  # row t, column t: the diagonal
        assert int(o.argmax()) == t * SIZE + t and o.sum() == 1
    assert ends == [False] * (SIZE - 1) + [True] and observations[-1].eq(0).all()
    restarted = env.step(torch.ones(2, dtype=torch.int64))  # auto-reset: from the top-left again
    assert torch.equal(restarted.obs[0], torch.eye(SIZE * SIZE)[1 * SIZE + 1])


@pytest.mark.parametrize("left_at", range(SIZE))
def test_one_move_left_anywhere_loses_the_treasure(left_at):
    env = DeepSea(1, "cpu", size=SIZE, randomize_actions=False)
    env.reset(seed=0)
    actions = [1] * SIZE
    actions[left_at] = 0
    rewards, _, ends = _episode(env, actions)
    assert sum(rewards) == pytest.approx(-(SIZE - 1) * 0.01 / SIZE) and ends[-1] and not any(ends[:-1])


def test_left_stays_in_the_first_column_and_costs_nothing():
    env = DeepSea(1, "cpu", size=SIZE, randomize_actions=False)
    env.reset(seed=0)
    rewards, observations, _ = _episode(env, [0] * SIZE)
    assert rewards == [0.0] * SIZE
    assert [int(o.argmax()) for o in observations[:-1]] == [t * SIZE for t in range(1, SIZE)]


def test_randomized_actions_move_right_where_the_cell_says_so():
    env = DeepSea(1, "cpu", size=SIZE)  # bsuite's default: a random right action per cell
    mapping = env.right_action
    assert mapping.shape == (SIZE, SIZE) and 0 < int(mapping.sum()) < SIZE * SIZE
    assert torch.equal(DeepSea(1, "cpu", size=SIZE).right_action, mapping)  # the same seed, the same map
    assert not torch.equal(DeepSea(1, "cpu", size=SIZE, mapping_seed=1).right_action, mapping)
    env.reset(seed=0)
    path = [int(mapping[t, t]) for t in range(SIZE)]  # the right action of each diagonal cell
    rewards, _, _ = _episode(env, path)
    assert sum(rewards) == pytest.approx(1 - 0.01)
    env.reset(seed=0)
    rewards, observations, _ = _episode(env, [1] * SIZE)  # "always 1" leaves the diagonal somewhere
    assert sum(rewards) < 0.5 and path != [1] * SIZE


@pytest.mark.parametrize(
    ("cfg", "message"),
    [
        ({"randomize_actions": 1}, "env.cfg.randomize_actions: got 1; accepted: true or false"),
        ({"size": 1}, "env.cfg.size: got 1; accepted: an int >= 2"),
        ({"move_cost": -1}, "env.cfg.move_cost: got -1; accepted: a number >= 0"),
    ],
)
def test_arguments_are_checked(cfg, message):
    with pytest.raises(ConfigError, match=f"^{message}$"):
        build_env("DeepSea", 2, "cpu", cfg)
