"""The Evaluator: deterministic scoring, recurrent state carried within an episode, the block tally."""

from __future__ import annotations

import pytest
import torch

from rlpipe.envs import build_env
from rlpipe.evaluation import EpisodeTally, Evaluator
from rlpipe.policies import build_policy


def test_recurrent_policy_is_evaluated_with_its_state_carried_and_reset_on_done():
    torch.manual_seed(0)
    env = build_env("RepeatFirst", 4, "cpu", {"length": 4})
    small = {"network_cfg": {"hidden_sizes": [8]}}
    policy = build_policy(
        {
            "name": "recurrent_actor_critic",
            "actor": small,
            "critic": small,
            "recurrent": {"type": "gru", "hidden_size": 8, "num_layers": 1},
        },
        env.observation_space,
        env.action_space,
        "cpu",
    )
    seen: list[torch.Tensor] = []
    original = policy.sample_step

    def recording(obs, state, deterministic=False):
        seen.append(state.clone())
        return original(obs, state, deterministic)

    policy.sample_step = recording
    policy.sample = None  # the feedforward path must not be used for a recurrent policy
    metrics = Evaluator(env, policy, num_episodes=2, seed=0)()
    assert metrics["eval/episodes"] == 8.0
    assert torch.count_nonzero(seen[0]) == 0  # episode start
    assert torch.count_nonzero(seen[1]) > 0  # carried within the episode
    assert torch.count_nonzero(seen[4]) == 0  # zeroed after the first episode ended


def test_same_checkpoint_scores_the_same_and_training_rng_is_untouched():
    torch.manual_seed(0)
    env = build_env("CartPole", 4, "cpu")
    policy = build_policy({"name": "actor_critic"}, env.observation_space, env.action_space, "cpu")
    first = Evaluator(env, policy, num_episodes=1, seed=5)
    second = Evaluator(env, policy, num_episodes=1, seed=5)
    state = torch.get_rng_state()
    assert first() == second()
    assert torch.equal(state, torch.get_rng_state())


def _per_step_tally(rewards: torch.Tensor, done: torch.Tensor, flags: torch.Tensor, k: int) -> dict:
    """The first ``k`` episodes of each env, tallied one step at a time (the reference)."""
    m = rewards.shape[1]
    out = {name: [[0.0] * k for _ in range(m)] for name in ("returns", "lengths", "success", "at_end")}
    count = [0] * m
    for i in range(m):
        ret, length, any_success = torch.zeros((), dtype=torch.float32), 0, False
        for t in range(rewards.shape[0]):
            ret += rewards[t, i]
            length += 1
            any_success |= bool(flags[t, i])
            if done[t, i]:
                if count[i] < k:
                    out["returns"][i][count[i]], out["lengths"][i][count[i]] = float(ret), float(length)
                    out["success"][i][count[i]], out["at_end"][i][count[i]] = any_success, bool(flags[t, i])
                    count[i] += 1
                ret, length, any_success = torch.zeros((), dtype=torch.float32), 0, False
    return {"count": count, **out}


@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("steps", [31, 32, 77])
def test_episode_tally_by_blocks_equals_a_per_step_tally(k: int, steps: int):
    g = torch.Generator().manual_seed(steps * 10 + k)
    m = 6
    rewards = torch.randn(steps, m, generator=g)
    done = torch.rand(steps, m, generator=g) < 0.12
    done[:, 0] = False  # an env that never finishes
    done[:, 1] = True  # one that finishes every step
    done[40:, 2] = False  # a long last episode spanning block boundaries
    flags = torch.rand(steps, m, generator=g) < 0.3
    tally = EpisodeTally(m, k, torch.device("cpu"))
    for t in range(steps):
        tally.add(rewards[t], done[t], flags[t])
    tally.flush()
    expected = _per_step_tally(rewards, done, flags, k)
    assert tally.count.tolist() == expected["count"]
    assert tally.returns.tolist() == expected["returns"]  # the same float32 sums, bit for bit
    assert tally.lengths.tolist() == expected["lengths"]
    assert tally.success.tolist() == expected["success"]
    assert tally.at_end.tolist() == expected["at_end"]
