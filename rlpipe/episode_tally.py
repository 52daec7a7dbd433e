"""The episode tally: running returns, lengths and success of N envs, folded a block of steps at a time.

One :class:`EpisodeTally` serves the collector and evaluation. Their step loops only record each
step's rewards and done flags (the collector in its rollout, evaluation in a block of
:data:`SYNC_EVERY` steps); :meth:`EpisodeTally.fold` then works out every step's episode return
and length for the whole block at once (:func:`episode_sums`: a dozen vectorised ops per block
instead of several per step, nothing synced), and success goes through one :class:`SuccessTracker`.
What each side keeps of the episodes that ended is all that differs: the collector a window of
the latest ones (:meth:`EpisodeTally.stats`, behind ``train/episode_return_mean``,
``train/episode_length_mean`` and ``train/success_rate``), evaluation the first ``k`` of each env
(:class:`FirstEpisodes`, behind ``eval/return_mean`` and the other ``eval/…`` figures).

Precision, the same on both sides: within a block, returns are summed in float64 and each step's
return is rounded to float32 once; the running return carried from block to block is float32, the
dtype the collector checkpoints, so a resumed run continues from the very bits it saved. An
episode's return is therefore rounded once per block it spans, not once per step as a float32
running sum would be: closer to the exact sum, and the same bits wherever every partial sum is
exact in float32 (integer rewards such as CartPole's, the golden run's).
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
    "FirstEpisodes",
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


class EpisodeTally:
    """The episodes of N envs across blocks of steps: running return and length ``[N]``, success, a window.

    :meth:`fold` takes one block's rewards and done flags ``[N, n]`` (n ≤ ``horizon``: the
    collector's rollout, evaluation's block of steps) and leaves each step's episode return and
    length so far in :attr:`return_at` and :attr:`length_at`; step loops fold success in through
    :attr:`success`. :meth:`stats` adds the episodes that ended to the window of the last
    ``window`` ones (:data:`EPISODE_WINDOW` for the collector).
    """

    def __init__(
        self, num_envs: int, horizon: int, device: torch.device, window: int = EPISODE_WINDOW
    ) -> None:
        self.episode_return = torch.zeros(num_envs, device=device)
        """``[N]``: return so far of each env's running episode (float32: the checkpointed bits)."""
        self.episode_length = torch.zeros(num_envs, dtype=torch.int64, device=device)
        """``[N]``: its length so far."""
        self.success = SuccessTracker(num_envs, horizon, device, window)
        self.recent_returns: deque[float] = deque(maxlen=window)
        self.recent_lengths: deque[int] = deque(maxlen=window)
        self.return_at = torch.zeros(num_envs, horizon, device=device)
        """``[N, horizon]``: after a fold of n steps, its first n columns hold each step's episode return."""
        self.length_at = torch.zeros(num_envs, horizon, dtype=torch.int64, device=device)
        """``[N, horizon]``: the same for episode lengths."""

    def fold(self, reward: torch.Tensor, done: torch.Tensor) -> None:
        """Fold one block in (``reward``, ``done`` ``[N, n]``), all n steps at once; nothing syncs."""
        n = reward.shape[1]
        return_at, length_at = episode_sums(reward, done, self.episode_return, self.episode_length)
        self.return_at[:, :n].copy_(return_at)
        self.length_at[:, :n].copy_(length_at)
        self.episode_return.copy_(return_at[:, -1].masked_fill(done[:, -1], 0.0))
        self.episode_length.copy_(length_at[:, -1].masked_fill(done[:, -1], 0))

    def stats(self, finished: torch.Tensor) -> dict[str, float]:
        """The window's statistics once the folded block's ``finished`` ``[N, n]`` episodes joined it."""
        n = finished.shape[1]
        returns = self.return_at[:, :n][finished].tolist()
        self.recent_returns.extend(returns)
        self.recent_lengths.extend(self.length_at[:, :n][finished].tolist())
        stats = {"collect/episodes": float(len(returns))}
        if self.recent_returns:
            stats["train/episode_return_mean"] = sum(self.recent_returns) / len(self.recent_returns)
            stats["train/episode_length_mean"] = sum(self.recent_lengths) / len(self.recent_lengths)
        return stats | self.success.stats(finished)

    def restart(self) -> None:
        """Every env begins a new episode: zero the running sums and the running success flags."""
        self.episode_return.zero_()
        self.episode_length.zero_()
        self.success.running.zero_()

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
"""Env steps per block of :class:`FirstEpisodes`, and between host checks of "every env is done"."""


class FirstEpisodes:
    """The first ``k`` episodes of each of M envs (evaluation): returns, lengths, success flags ``[M, k]``.

    Per step :meth:`add` copies the step's rewards and done flags into a block ``[M, L]``
    (L = :data:`SYNC_EVERY`): two small ops. Every L steps :meth:`flush` folds the block through
    an :class:`EpisodeTally` and writes the episodes that ended to their env's next free slot,
    vectorised, instead of a dozen ops on every step, which would be a large share of a small
    eval's step.
    """

    def __init__(self, num_envs: int, num_episodes: int, device: torch.device) -> None:
        m, k = num_envs, num_episodes
        self.k = k
        self.tally = EpisodeTally(m, SYNC_EVERY, device, window=0)
        self.count = torch.zeros(m, dtype=torch.int64, device=device)
        """Episodes finished per env ``[M]``, at most ``k`` (up to date after each flush)."""
        self.slots = torch.arange(k, device=device).unsqueeze(0)
        self._slot_base = torch.arange(m, device=device).unsqueeze(1) * k  # [M, 1]: row of env i
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
        self._reward = torch.zeros(m, SYNC_EVERY, device=device)
        self._done = torch.zeros(m, SYNC_EVERY, dtype=torch.bool, device=device)
        self.pending = 0
        """Steps added since the last flush."""

    @property
    def reports_success(self) -> bool:
        """Some step reported success (the envs have ``info["success"]``)."""
        return self.tally.success.seen

    def add(self, reward: torch.Tensor, finished: torch.Tensor, success: torch.Tensor | None = None) -> None:
        """One env step: ``reward`` ``[M]``, ``finished`` ``[M]`` bool, optional ``success`` ``[M]`` bool."""
        i = self.pending
        self._reward[:, i] = reward
        self._done[:, i] = finished
        if success is not None:  # success at any step of the episode, and at its last step
            self.tally.success.track_flag(i, success, finished)
        self.pending += 1
        if self.pending == SYNC_EVERY:
            self.flush()

    def flush(self) -> None:
        """Record the episodes that ended in the pending block ``[M, n]`` and start a new block."""
        n, tally = self.pending, self.tally
        if n == 0:
            return
        done = self._done[:, :n]
        tally.fold(self._reward[:, :n], done)
        slot = (
            self.count.unsqueeze(1) + done.long().cumsum(1) - 1
        )  # [M, n]: which episode of its env ended there
        spare = self._returns.numel() - 1
        target = torch.where(done & (slot < self.k), self._slot_base + slot, spare).flatten()
        self._returns.scatter_(0, target, tally.return_at[:, :n].flatten())
        self._lengths.scatter_(0, target, tally.length_at[:, :n].flatten().to(self._lengths.dtype))
        if self.reports_success:
            self._success.scatter_(0, target, tally.success.at[:, :n].flatten())
            self._at_end.scatter_(0, target, tally.success.step[:, :n].flatten())
        self.count = (self.count + done.sum(1)).clamp_max(self.k)
        self.pending = 0
