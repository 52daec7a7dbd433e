"""The one episode tally: evaluation's first episodes per env, the collector's rollouts, their precision."""

from __future__ import annotations

import pytest
import torch

from rlpipe.episode_tally import SYNC_EVERY, EpisodeTally, FirstEpisodes


def _per_step_tally(rewards: torch.Tensor, done: torch.Tensor, flags: torch.Tensor, k: int) -> dict:
    """The first ``k`` episodes of each env, tallied one step at a time (the reference).

    Returns are summed both in float64 (``exact``) and as a float32 running sum (``float32``);
    ``one_block`` marks the episodes that began and ended within one block of ``SYNC_EVERY`` steps.
    """
    m = rewards.shape[1]
    names = ("exact", "float32", "lengths", "success", "at_end", "one_block")
    out = {name: [[0.0] * k for _ in range(m)] for name in names}
    count = [0] * m
    for i in range(m):
        exact, single, length, any_success, start = 0.0, torch.zeros(()), 0, False, 0
        for t in range(rewards.shape[0]):
            exact += float(rewards[t, i])
            single += rewards[t, i]
            length += 1
            any_success |= bool(flags[t, i])
            if done[t, i]:
                if count[i] < k:
                    row, c = i, count[i]
                    out["exact"][row][c], out["float32"][row][c] = exact, float(single)
                    out["lengths"][row][c], out["success"][row][c] = float(length), any_success
                    out["at_end"][row][c] = bool(flags[t, i])
                    out["one_block"][row][c] = start // SYNC_EVERY == t // SYNC_EVERY
                    count[i] += 1
                exact, single, length, any_success, start = 0.0, torch.zeros(()), 0, False, t + 1
    return {"count": count, **out}


@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("steps", [31, 32, 77])
def test_first_episodes_equal_a_per_step_tally_and_sum_closer_to_the_exact_returns(k: int, steps: int):
    g = torch.Generator().manual_seed(steps * 10 + k)
    m = 6
    rewards = torch.randn(steps, m, generator=g)
    done = torch.rand(steps, m, generator=g) < 0.12
    done[:, 0] = False  # an env that never finishes
    done[:, 1] = True  # one that finishes every step
    done[40:, 2] = False  # a long last episode spanning block boundaries
    done[-1, 3] = True  # one ending on the last step
    flags = torch.rand(steps, m, generator=g) < 0.3
    first = FirstEpisodes(m, k, torch.device("cpu"))
    for t in range(steps):
        first.add(rewards[t], done[t], flags[t])
    first.flush()
    expected = _per_step_tally(rewards, done, flags, k)
    assert first.count.tolist() == expected["count"]
    assert first.lengths.tolist() == expected["lengths"]
    assert first.success.tolist() == expected["success"]
    assert first.at_end.tolist() == expected["at_end"]
    exact = torch.tensor(expected["exact"], dtype=torch.float64)
    one_block = torch.tensor(expected["one_block"], dtype=torch.bool)
    # Within a block the sum runs in float64 and is rounded once: the float32 of the exact return.
    assert torch.equal(first.returns[one_block], exact.float()[one_block])
    # Across blocks it is rounded once per block, never once per step like a float32 running sum.
    tally_error = (first.returns.double() - exact).abs().sum()
    running_error = (torch.tensor(expected["float32"]).double() - exact).abs().sum()
    assert tally_error <= running_error


def test_collector_and_evaluation_tally_the_same_episodes():
    """One rollout folded at once (the collector) and step by step in blocks (evaluation) agree."""
    g = torch.Generator().manual_seed(3)
    n, horizon = 5, 3 * SYNC_EVERY + 7
    reward = torch.randint(-8, 9, (n, horizon), generator=g).float() / 4  # partial sums exact in float32
    done = torch.rand(n, horizon, generator=g) < 0.1
    done[0] = False
    tally = EpisodeTally(n, horizon, torch.device("cpu"))
    tally.fold(reward, done)
    stats = tally.stats(done)
    first = FirstEpisodes(n, horizon, torch.device("cpu"))
    for t in range(horizon):
        first.add(reward[:, t], done[:, t])
    first.flush()
    kept = first.slots < first.count.unsqueeze(1)
    assert first.returns[kept].tolist() == list(tally.recent_returns)  # env-major: the same order
    assert first.lengths[kept].tolist() == list(tally.recent_lengths)
    assert stats["collect/episodes"] == float(done.sum())
    assert torch.equal(first.tally.episode_return, tally.episode_return)  # the running episodes too
