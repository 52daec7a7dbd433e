"""One exported episode: host arrays of one env stream's steps, and what it ended with."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Episode", "Obs"]

Obs = np.ndarray | dict[str, np.ndarray]
"""A flat observation array, or ``{group: array}`` for observation groups."""


@dataclass(frozen=True)
class Episode:
    """One episode (or a kept trailing fragment) of one env stream, L steps, host numpy arrays.

    ``observations`` ``[L, *obs]`` are seen before each action; ``next_observation`` ``[*obs]`` is
    the observation after the last action: the true final observation of an ended episode, or
    the bootstrap observation ``obs[:, T]`` of a kept cut fragment (``cut``). ``terminated`` and
    ``truncated`` ``[L]`` can be true at the last step only.
    """

    rank: int
    env: int
    index: int
    observations: Obs
    next_observation: Obs
    actions: np.ndarray
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    success: np.ndarray | None
    iterations: np.ndarray
    log_probs: np.ndarray
    values: np.ndarray
    cut: bool

    @property
    def length(self) -> int:
        """Steps (transitions) of the episode."""
        return len(self.rewards)

    @property
    def episode_return(self) -> float:
        """Sum of the rewards (in float64)."""
        return float(self.rewards.sum(dtype=np.float64))

    @property
    def succeeded(self) -> bool | None:
        """Success at any step; ``None`` when the env does not report it."""
        return None if self.success is None else bool(self.success.any())

    @property
    def iteration(self) -> int:
        """The iteration of its first step."""
        return int(self.iterations[0])
