"""The training episodes' tally: running returns, lengths and success of N envs, folded in per rollout.

The step loop only copies rewards and flags into the rollout; which episodes ended where, and their
returns and lengths, are worked out once per rollout, vectorised (:func:`episode_sums`).
:class:`RolloutEpisodes` keeps the running sums across rollouts and the window of finished
episodes behind ``train/episode_return_mean``, ``train/episode_length_mean`` and
``train/success_rate``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any

import torch

__all__ = ["EPISODE_WINDOW", "RolloutEpisodes", "SuccessTracker", "episode_sums"]

EPISODE_WINDOW = 200
"""Finished episodes averaged in ``train/episode_return_mean``."""


def episode_sums(
    reward: torch.Tensor, done: torch.Tensor, return0: torch.Tensor, length0: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(return_at, length_at)`` ``[N, T]``: each step's episode return and length so far, step included.

    The vectorized form of stepping ``ret += reward[:, t]; at[:, t] = ret; ret[done[:, t]] = 0`` through
    a rollout (``reward``/``done`` ``[N, T]``), where ``return0``/``length0`` ``[N]`` are the episodes
    running when the rollout began. One pass of a dozen ops per rollout instead of six per env step;
    the sums run in float64, so the float32 returns are exact to rounding.
    """
    n, horizon = reward.shape
    steps = torch.arange(horizon, device=reward.device)
    last_done = torch.where(done, steps, -1).cummax(1).values  # latest done at or before t
    before = torch.cat([last_done.new_full((n, 1), -1), last_done[:, :-1]], 1)
    start = before + 1  # first step of t's episode within the rollout (0: it began earlier)
    carried = start == 0
    cumulative = reward.double().cumsum(1)
    head = cumulative.gather(1, (start - 1).clamp(min=0))  # rewards before the episode's first step
    base = torch.where(carried, -return0.double().unsqueeze(1), head)
    return_at = (cumulative - base).to(reward.dtype)
    length_at = steps + 1 - start + torch.where(carried, length0.unsqueeze(1), 0)
    return return_at, length_at


class SuccessTracker:
    """``train/success_rate``: the fraction of finished episodes with ``info["success"]`` at any step.

    Everything stays on the device during collection; :meth:`stats` syncs once per rollout. Envs
    that never report ``success`` produce no metric.
    """

    def __init__(self, num_envs: int, horizon: int, device: torch.device, window: int) -> None:
        self.running = torch.zeros(num_envs, dtype=torch.bool, device=device)
        """``[N]``: the current episode has succeeded so far."""
        self.at = torch.zeros(num_envs, horizon, dtype=torch.bool, device=device)
        """``[N, T]``: ``running`` after step t (read where the episode finished)."""
        self.step = torch.zeros(num_envs, horizon, dtype=torch.bool, device=device)
        """``[N, T]``: step t's own ``info["success"]`` (the rollout's ``success`` key)."""
        self.seen = False
        self.recent: deque[bool] = deque(maxlen=window)

    def track(self, t: int, info: Mapping[str, torch.Tensor], done: torch.Tensor) -> None:
        """Fold step t's ``info["success"]`` ``[N]`` in; forget it for envs whose episode ended."""
        flag = info.get("success")
        if flag is None:
            return
        self.seen = True
        self.step[:, t] = flag
        self.running |= flag.bool()
        self.at[:, t] = self.running
        self.running &= ~done

    def stats(self, finished: torch.Tensor) -> dict[str, float]:
        """``{"train/success_rate": …}`` over the window of finished episodes (``finished``: ``[N, T]``)."""
        if not self.seen:
            return {}
        self.recent.extend(self.at[finished].tolist())
        return {"train/success_rate": sum(self.recent) / len(self.recent)} if self.recent else {}

    def state_dict(self) -> dict[str, Any]:
        """Running flags and the window (checkpointed with the collector)."""
        return {"running": self.running.clone(), "recent": list(self.recent), "seen": self.seen}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` (an empty dict leaves the tracker fresh)."""
        if state:
            self.running.copy_(state["running"])
            self.recent.clear()
            self.recent.extend(state["recent"])
            self.seen = bool(state["seen"])


class RolloutEpisodes:
    """The episodes of N envs across rollouts: running return and length ``[N]``, the finished ones' window.

    :meth:`fold` takes one rollout's rewards and done flags ``[N, T]`` and returns the
    ``train/…`` statistics of the window of the last :data:`EPISODE_WINDOW` finished episodes.
    """

    def __init__(self, num_envs: int, horizon: int, device: torch.device) -> None:
        self.episode_return = torch.zeros(num_envs, device=device)
        """``[N]``: return so far of each env's running episode."""
        self.episode_length = torch.zeros(num_envs, dtype=torch.int64, device=device)
        """``[N]``: its length so far."""
        self.success = SuccessTracker(num_envs, horizon, device, EPISODE_WINDOW)
        self.recent_returns: deque[float] = deque(maxlen=EPISODE_WINDOW)
        self.recent_lengths: deque[int] = deque(maxlen=EPISODE_WINDOW)
        self._return_at = torch.zeros(num_envs, horizon, device=device)
        self._length_at = torch.zeros(num_envs, horizon, dtype=torch.int64, device=device)

    def fold(self, reward: torch.Tensor, done: torch.Tensor) -> None:
        """Fold one rollout in (``reward``, ``done`` ``[N, T]``), all T steps at once; nothing syncs."""
        return_at, length_at = episode_sums(reward, done, self.episode_return, self.episode_length)
        self._return_at.copy_(return_at)
        self._length_at.copy_(length_at)
        self.episode_return.copy_(return_at[:, -1].masked_fill(done[:, -1], 0.0))
        self.episode_length.copy_(length_at[:, -1].masked_fill(done[:, -1], 0))

    def stats(self, finished: torch.Tensor) -> dict[str, float]:
        """The window's statistics once the folded rollout's ``finished`` ``[N, T]`` episodes joined it."""
        returns = self._return_at[finished].tolist()
        self.recent_returns.extend(returns)
        self.recent_lengths.extend(self._length_at[finished].tolist())
        stats = {"collect/episodes": float(len(returns))}
        if self.recent_returns:
            stats["train/episode_return_mean"] = sum(self.recent_returns) / len(self.recent_returns)
            stats["train/episode_length_mean"] = sum(self.recent_lengths) / len(self.recent_lengths)
        return stats | self.success.stats(finished)

    def restart(self) -> None:
        """Every env begins a new episode: zero the running sums."""
        self.episode_return.zero_()
        self.episode_length.zero_()

    def state_dict(self) -> dict[str, Any]:
        """Running sums, the window and the success tracker (entries of the collector's state)."""
        return {
            "episode_return": self.episode_return.clone(),
            "episode_length": self.episode_length.clone(),
            "recent_returns": list(self.recent_returns),
            "recent_lengths": list(self.recent_lengths),
            "success": self.success.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`'s entries."""
        self.success.load_state_dict(state.get("success", {}))
        self.episode_return.copy_(state["episode_return"])
        self.episode_length.copy_(state["episode_length"])
        self.recent_returns.clear()
        self.recent_returns.extend(state["recent_returns"])
        self.recent_lengths.clear()
        self.recent_lengths.extend(state["recent_lengths"])
