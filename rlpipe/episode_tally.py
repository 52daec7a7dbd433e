"""The episode tally: running returns, lengths and success of N envs, worked out a block of steps at a time.

Step loops only add the step's rewards and flags; which episode ended where, and its length, is worked
out once per block, vectorised (:func:`latest_done`), and success through one :class:`SuccessTracker`.

* :class:`RolloutEpisodes` (the collector) folds a whole rollout ``[N, T]`` at once
  (:func:`episode_sums`, float64 sums: nothing per step) and keeps the running sums across rollouts
  and the window of finished episodes behind ``train/episode_return_mean``,
  ``train/episode_length_mean`` and ``train/success_rate``.
* :class:`EpisodeTally` (evaluation) keeps the first ``k`` episodes of each env, its returns
  accumulated step by step in float32 (the same bits as a plain per-step tally).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any

import torch

__all__ = [
    "EPISODE_WINDOW",
    "SYNC_EVERY",
    "EpisodeTally",
    "RolloutEpisodes",
    "SuccessTracker",
    "episode_sums",
    "latest_done",
]

EPISODE_WINDOW = 200
"""Finished episodes averaged in ``train/episode_return_mean``."""


def latest_done(done: torch.Tensor, steps: torch.Tensor, dim: int) -> torch.Tensor:
    """The step index of the latest done at or before each step along ``dim`` (-1: none yet).

    ``steps`` holds each position's step index, broadcastable to ``done``.
    """
    return torch.where(done, steps, -1).cummax(dim).values


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
    last_done = latest_done(done, steps, 1)
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

    def __init__(self, num_envs: int, horizon: int, device: torch.device, window: int = 0) -> None:
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
        if flag is not None:
            self.track_flag(t, flag, done)

    def track_flag(self, t: int, flag: torch.Tensor, done: torch.Tensor) -> None:
        """Fold step t's success flag ``[N]`` in; forget it for envs whose episode ended."""
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


SYNC_EVERY = 32
"""Env steps per block of :class:`EpisodeTally`, and between host checks of "every env is done"."""


class EpisodeTally:
    """The first ``k`` episodes of each of M envs: returns, lengths, success flags ``[M, k]``.

    Per step the loop adds the reward to each env's running return and copies ``[M]`` rows into
    block buffers ``[L, M]`` (L = ``SYNC_EVERY``): three small ops. Which episode ended where is
    worked out once per block, vectorized, in :meth:`flush`, instead of a dozen ops on every step,
    which would be a large share of a small eval's step. Returns are accumulated in the same order
    as a per-step tally (the same float32 bits); lengths come from the steps between episode ends.
    """

    def __init__(self, num_envs: int, num_episodes: int, device: torch.device) -> None:
        m, k, L = num_envs, num_episodes, SYNC_EVERY
        self.k, self.device = k, device
        self.count = torch.zeros(m, dtype=torch.int64, device=device)
        """Episodes finished per env ``[M]``, at most ``k`` (up to date after each flush)."""
        self.slots = torch.arange(k, device=device).unsqueeze(0)
        self.reports_success = False
        self._slot_base = torch.arange(m, device=device).unsqueeze(0) * k  # [1, M]: row of env i
        flat = m * k + 1  # a spare last cell takes the writes of episodes past the k-th
        self._returns = torch.zeros(flat, device=device)
        self._lengths = torch.zeros(flat, device=device)
        self._success = torch.zeros(flat, dtype=torch.bool, device=device)
        self._at_end = torch.zeros(flat, dtype=torch.bool, device=device)
        self.returns = self._returns[:-1].view(m, k)
        """``[M, k]`` episode returns (views of the flat buffers: slots past ``count`` are zero)."""
        self.lengths = self._lengths[:-1].view(m, k)
        """``[M, k]`` episode lengths."""
        self.success = self._success[:-1].view(m, k)
        """``[M, k]``: success at any step of the episode."""
        self.at_end = self._at_end[:-1].view(m, k)
        """``[M, k]``: success on the episode's last step."""
        self._running_return = torch.zeros(m, device=device)
        self._last_end = torch.full((m,), -1, dtype=torch.int64, device=device)  # step of the last end
        self._block_return = torch.zeros(L, m, device=device)
        self._block_done = torch.zeros(L, m, dtype=torch.bool, device=device)
        self._success_block = SuccessTracker(m, L, device)
        """Success at any step of the episode so far (``at``) and at each step (``step``), ``[M, L]``."""
        self._block_start = 0
        self.pending = 0
        """Steps added since the last flush."""

    def add(self, reward: torch.Tensor, finished: torch.Tensor, success: torch.Tensor | None = None) -> None:
        """One env step: ``reward`` ``[M]``, ``finished`` ``[M]`` bool, optional ``success`` ``[M]`` bool."""
        i = self.pending
        self._running_return += reward
        self._block_return[i] = self._running_return
        self._block_done[i] = finished
        self._running_return.masked_fill_(finished, 0.0)
        if success is not None:  # success at any step of the episode, and at its last step
            self.reports_success = True
            self._success_block.track_flag(i, success, finished)
        self.pending += 1
        if self.pending == SYNC_EVERY:
            self.flush()

    def flush(self) -> None:
        """Record the episodes that ended in the pending block ``[n, M]`` and start a new block."""
        n = self.pending
        if n == 0:
            return
        done = self._block_done[:n]
        step = torch.arange(self._block_start, self._block_start + n, device=self.device).unsqueeze(1)
        ends = latest_done(done, step, 0)  # [n, M]: the last end at or before each step
        before = torch.cat((self._last_end.unsqueeze(0), ends[:-1])).maximum(self._last_end)
        slot = self.count + done.long().cumsum(0) - 1  # [n, M]: which episode of its env ended there
        target = torch.where(done & (slot < self.k), self._slot_base + slot, self._returns.numel() - 1)
        target = target.flatten()
        self._returns.scatter_(0, target, self._block_return[:n].flatten())
        self._lengths.scatter_(0, target, (step - before).flatten().to(self._lengths.dtype))
        if self.reports_success:
            self._success.scatter_(0, target, self._success_block.at[:, :n].T.flatten())
            self._at_end.scatter_(0, target, self._success_block.step[:, :n].T.flatten())
        self.count = (self.count + done.sum(0)).clamp_max(self.k)
        self._last_end = self._last_end.maximum(ends[-1])
        self._block_start += n
        self.pending = 0
