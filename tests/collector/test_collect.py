"""The collector: the [N, T+1] layout, bootstrap values, and the exact time-limit bootstrap."""

from __future__ import annotations

import copy

import pytest
import torch

from rlpipe.collector import Collector
from rlpipe.envs import build_env
from rlpipe.policies import build_policy
from rlpipe.rollout_checks import validate


def make(env_id="Pendulum", n=4, horizon=7, **env_cfg):
    torch.manual_seed(0)
    env = build_env(env_id, n, "cpu", env_cfg)
    policy = build_policy({"name": "actor_critic"}, env.observation_space, env.action_space, "cpu")
    return env, policy, Collector(env, policy, horizon, seed=3)


def test_rollout_layout_values_and_carry_over():
    env, policy, collector = make()
    rollout, _ = collector()
    validate(rollout)
    with torch.no_grad():
        torch.testing.assert_close(rollout["value"], policy.value(rollout["obs"]))
    last_obs = rollout["obs"][:, -1].clone()
    second, _ = collector()
    torch.testing.assert_close(second["obs"][:, 0], last_obs)  # the last observation carries over


@pytest.mark.parametrize("num_envs", [1, 4])  # one env: the [:, :-1] slice is contiguous
def test_final_value_is_the_value_of_the_true_final_obs_at_truncations_only(num_envs):
    env, policy, collector = make(n=num_envs, max_episode_steps=3)
    collector._reset()
    shadow = copy.deepcopy(env)  # replays the same actions to see the true final observations
    rollout, _ = collector()
    truncated = rollout["truncated"][:, :-1]
    assert truncated.any() and not rollout["terminated"].any()
    for t in range(7):
        step = shadow.step(rollout["action"][:, t])
        with torch.no_grad():
            expected = policy.value(step.final_obs) * truncated[:, t]
        torch.testing.assert_close(rollout["final_value"][:, t], expected)
    assert not rollout["final_value"][:, -1].any()


def test_terminated_steps_get_no_final_value():
    env, policy, collector = make("CartPole", n=16, horizon=40)
    rollout, _ = collector()
    terminated = rollout["terminated"][:, :-1]
    assert terminated.any()
    assert not rollout["final_value"][:, :-1][terminated].any()
