"""``policy.obs_normalization``: running statistics in buffers, frozen outside the update stage."""

from __future__ import annotations

import io

import gymnasium as gym
import torch

from rlpipe.algorithms import build_algo
from rlpipe.build import learn
from rlpipe.collector import Collector
from rlpipe.envs import build_env
from rlpipe.evaluation import Evaluator
from rlpipe.policies import ObsNormalizer, build_policy

OBS = gym.spaces.Box(-1, 1, (4,))


def normalized_policy(enabled: bool = True):
    torch.manual_seed(0)
    return build_policy(
        {"name": "actor_critic", "obs_normalization": enabled}, OBS, gym.spaces.Discrete(2), "cpu"
    )


def test_running_moments_equal_the_moments_of_all_samples_seen():
    norm = ObsNormalizer((3,))
    batches = [torch.randn(n, 3) * 4 + 7 for n in (5, 1, 12)]
    for batch in batches:
        norm.update(batch)
    every = torch.cat(batches).double()
    torch.testing.assert_close(norm.mean, every.mean(0))
    torch.testing.assert_close(norm.var, every.var(0, unbiased=False))
    assert float(norm.count) == 18
    out = norm(every.float())
    torch.testing.assert_close(out.mean(0), torch.zeros(3), atol=1e-5, rtol=0)


def test_normalized_values_are_clipped_to_ten():
    norm = ObsNormalizer((2,))
    norm.update(torch.tensor([[0.0, 0.0], [2.0, 2.0]]))  # mean 1, std 1
    assert norm(torch.tensor([[100.0, -100.0]])).tolist() == [[10.0, -10.0]]


def test_policy_acts_on_normalized_obs_and_saves_statistics_in_its_state_dict():
    policy = normalized_policy()
    policy.update_normalization(torch.randn(64, 4) * 3 + 5)
    obs = torch.randn(6, 4) * 3 + 5
    expected = (obs - policy.obs_normalizer.mean.float()) / (policy.obs_normalizer.var.float() + 1e-8).sqrt()
    torch.testing.assert_close(policy.distribution(obs).logits, torch.log_softmax(policy.actor(expected), -1))
    buffer = io.BytesIO()
    torch.save(policy.state_dict(), buffer)
    buffer.seek(0)
    restored = normalized_policy()
    assert float(restored.obs_normalizer.count) == 0
    restored.load_state_dict(torch.load(buffer, weights_only=True))
    assert float(restored.obs_normalizer.count) == 64
    torch.testing.assert_close(restored.value(obs), policy.value(obs))


def test_disabled_normalization_adds_nothing_and_update_is_a_no_op():
    policy = normalized_policy(enabled=False)
    before = policy.state_dict()
    policy.update_normalization(torch.randn(8, 4) * 100)
    assert policy.obs_normalizer is None
    assert not any("normalizer" in key for key in policy.state_dict())
    assert all(torch.equal(before[k], v) for k, v in policy.state_dict().items())


def test_collect_and_eval_leave_the_statistics_frozen_and_the_update_stage_merges_the_rollout():
    env = build_env("CartPole", 4, "cpu")
    policy = build_policy(
        {"name": "actor_critic", "obs_normalization": True}, env.observation_space, env.action_space, "cpu"
    )
    policy.update_normalization(torch.randn(10, 4))
    frozen = {k: v.clone() for k, v in policy.obs_normalizer.state_dict().items()}
    Evaluator(build_env("CartPole", 2, "cpu"), policy, num_episodes=1, seed=1)()
    rollout, _ = Collector(env, policy, horizon=8, seed=0)()
    for key, value in policy.obs_normalizer.state_dict().items():
        assert torch.equal(value, frozen[key]), key
    algo = build_algo("ppo", {"batch_size": 16, "n_epochs": 1}, policy, "cpu")
    learn(algo, rollout, iteration=1, env_steps_before=0, total_env_steps=32)
    assert float(policy.obs_normalizer.count) == 10 + 4 * 8
    reference = ObsNormalizer((4,))
    reference.load_state_dict(frozen)
    reference.update(rollout["obs"][:, :-1])
    torch.testing.assert_close(policy.obs_normalizer.mean, reference.mean)
