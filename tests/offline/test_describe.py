"""Episode statistics of rlpipe/offline/describe.py (the layout/stats part is tested in test_store.py)."""

from __future__ import annotations

import numpy as np
import pytest

from rlpipe.offline.describe import episode_stats


def test_complete_episodes_are_those_between_two_dones_of_one_env():
    # 3 envs × T=8. Env 0 ends episodes at t=1, 4, 6: the ones over t=2..4 and t=5..6 lie wholly
    # inside the window (lengths 3 and 2); the one ending at t=1 began in an earlier rollout.
    # Env 1 never ends one; env 2 ends one at t=0 (began earlier) and one at t=7 (t=1..7, length 7).
    done = np.zeros((3, 8), dtype=bool)
    done[0, [1, 4, 6]] = True
    done[2, [0, 7]] = True
    terminated = done.copy()
    terminated[2, 7] = False
    truncated = done & ~terminated
    reward = np.arange(24, dtype=np.float32).reshape(3, 8)  # reward[e, t] = 8e + t
    stats = episode_stats(done, terminated, truncated, reward)
    returns = [2 + 3 + 4, 5 + 6, sum(16 + t for t in range(1, 8))]
    assert stats["finished"] == 5 and stats["terminated"] == 4 and stats["truncated"] == 1
    assert stats["complete"] == 3
    assert stats["return_mean"] == pytest.approx(np.mean(returns))
    assert (stats["return_min"], stats["return_max"]) == (9.0, float(returns[2]))
    assert (stats["length_min"], stats["length_max"]) == (2, 7)
    assert stats["length_mean"] == pytest.approx(4.0)
    assert stats["mean_reward_per_step"] == pytest.approx(11.5)


def test_no_complete_episode_leaves_the_return_fields_out():
    done = np.zeros((2, 4), dtype=bool)
    done[0, 2] = True
    stats = episode_stats(done, done, np.zeros_like(done), np.ones((2, 4), dtype=np.float32))
    assert stats == {
        "finished": 1,
        "terminated": 1,
        "truncated": 0,
        "complete": 0,
        "mean_reward_per_step": 1.0,
    }
