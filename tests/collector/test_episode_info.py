"""``StepResult.info["success"]`` → ``train/success_rate`` (collector), ``eval/success_rate`` (evaluator)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch

from rlpipe.collector import Collector
from rlpipe.envs import BatchedEnv, StepResult, build_env
from rlpipe.evaluation import Evaluator
from rlpipe.policies import build_policy

LENGTH = 3


class Flagging(BatchedEnv):
    """Episodes of LENGTH steps; even envs report success at their second step, odd envs never."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)
    max_episode_steps = LENGTH

    def __init__(self, num_envs: int, device: str = "cpu") -> None:
        self.num_envs, self.device = num_envs, torch.device(device)
        self.t = torch.zeros(num_envs, dtype=torch.long)

    def reset(self, seed: int | None = None, group_size: int = 1) -> torch.Tensor:
        self.t.zero_()
        return torch.zeros(self.num_envs, 2)

    def step(self, action: torch.Tensor) -> StepResult:
        self.t += 1
        success = (self.t == 2) & (torch.arange(self.num_envs) % 2 == 0)
        truncated = self.t >= LENGTH
        self.t[truncated] = 0
        obs = torch.zeros(self.num_envs, 2)
        return StepResult(
            obs, torch.ones(self.num_envs), torch.zeros_like(truncated), truncated, obs, {"success": success}
        )

    def state_dict(self) -> dict[str, Any]:
        return {"t": self.t.clone()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.t = state["t"].clone()


def small_policy(env: BatchedEnv):
    return build_policy({"name": "actor_critic"}, env.observation_space, env.action_space, "cpu")


def test_collector_reports_the_success_rate_of_finished_episodes() -> None:
    env = Flagging(4)
    collector = Collector(env, small_policy(env), horizon=2 * LENGTH + 1, seed=0)
    _, stats = collector()
    assert stats["collect/episodes"] == 8 and stats["train/success_rate"] == 0.5
    state = collector.state_dict()
    assert state["success"]["recent"] == [True, True, False, False] * 2  # env-major order
    other = Collector(Flagging(4), small_policy(env), horizon=2 * LENGTH + 1, seed=0)
    other.load_state_dict(state)
    assert list(other.episodes.success.recent) == state["success"]["recent"]


class CutShort(Flagging):
    """Flagging until its second reset; after it, one-step episodes that never succeed."""

    def __init__(self, num_envs: int) -> None:
        super().__init__(num_envs)
        self.resets = 0

    def reset(self, seed: int | None = None, group_size: int = 1) -> torch.Tensor:
        self.resets += 1
        return super().reset(seed, group_size)

    def step(self, action: torch.Tensor) -> StepResult:
        result = super().step(action)
        if self.resets >= 2:
            ended = torch.ones(self.num_envs, dtype=torch.bool)
            result = StepResult(
                result.obs, result.reward, result.terminated, ended, result.obs, {"success": ~ended}
            )
        return result


def test_an_episode_cut_by_a_reset_lends_its_success_to_no_later_episode() -> None:
    env = CutShort(4)
    collector = Collector(env, small_policy(env), horizon=2, seed=0, reset_every_rollout=True)
    _, stats = collector()  # steps 1 and 2 of 3: the even envs succeed, no episode ends
    assert stats["collect/episodes"] == 0
    _, stats = collector()  # reset: every episode is new, ends after one step, never succeeds
    assert stats["collect/episodes"] == 8 and stats["train/success_rate"] == 0.0


def test_envs_without_success_report_no_rate() -> None:
    env = build_env("CartPole", 2, "cpu", {"max_episode_steps": 2})
    _, stats = Collector(env, small_policy(env), horizon=4, seed=0)()
    assert "train/success_rate" not in stats and stats["collect/episodes"] == 4


class Holding(Flagging):
    """Like Flagging, but env 0 keeps its success to the episode's end (success at steps 2 and 3)."""

    def step(self, action: torch.Tensor) -> StepResult:
        result = super().step(action)
        result.info["success"] = result.info["success"] | ((self.t == 0) & (torch.arange(self.num_envs) == 0))
        return result


def test_evaluator_reports_the_success_rate() -> None:
    env = Flagging(4)
    metrics = Evaluator(env, small_policy(env), num_episodes=2, seed=0)()
    assert metrics["eval/episodes"] == 8 and metrics["eval/success_rate"] == 0.5
    assert metrics["eval/success_at_end"] == 0.0  # every success was undone before the last step
    held = Holding(4)
    metrics = Evaluator(held, small_policy(held), num_episodes=2, seed=0)()
    assert metrics["eval/success_rate"] == 0.5 and metrics["eval/success_at_end"] == 0.25
    plain = build_env("CartPole", 2, "cpu", {"max_episode_steps": 2})
    assert "eval/success_rate" not in Evaluator(plain, small_policy(plain), num_episodes=1, seed=0)()


def _stepwise_sums(reward, done, return0, length0):
    """The per-step loop the collector ran before ``episode_sums`` (the reference)."""
    ret, length = return0.clone(), length0.clone()
    return_at, length_at = torch.zeros_like(reward), torch.zeros(reward.shape, dtype=torch.int64)
    for t in range(reward.shape[1]):
        ret += reward[:, t]
        length += 1
        return_at[:, t], length_at[:, t] = ret, length
        ret.masked_fill_(done[:, t], 0.0)
        length.masked_fill_(done[:, t], 0)
    return return_at, length_at


def test_episode_sums_equal_the_stepwise_running_sums():
    from rlpipe.episode_tally import episode_sums

    gen = torch.Generator().manual_seed(0)
    reward = torch.randint(-3, 4, (6, 40), generator=gen).float() / 4  # exact in float32
    done = torch.rand(6, 40, generator=gen) < 0.15
    done[0] = False  # an episode running through the whole rollout
    done[1, -1] = True  # one ending on the last step
    return0, length0 = torch.tensor([2.5, 0.0, 1.0, 0.0, 7.25, 3.0]), torch.tensor([3, 0, 1, 0, 9, 4])
    return_at, length_at = episode_sums(reward, done, return0, length0)
    ref_return, ref_length = _stepwise_sums(reward, done, return0, length0)
    assert torch.equal(return_at, ref_return) and torch.equal(length_at, ref_length)
    assert return_at.dtype == torch.float32 and length_at.dtype == torch.int64
