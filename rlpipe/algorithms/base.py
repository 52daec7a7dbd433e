"""``BaseAlgorithm``: one ``update(rollout)`` over an ``[N, T+1]`` rollout, plus the minibatch helpers."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import Any

import torch
from tensordict import TensorDict

from rlpipe.config import AlgorithmCfg

__all__ = ["BaseAlgorithm", "flatten_transitions", "minibatch_indices"]


class BaseAlgorithm(ABC):
    """Algorithms only update the policy; the trainer collects.

    Subclasses set ``cfg_class`` (their config) and implement ``compute_advantages`` and
    ``update``. ``update`` accepts a raw rollout and computes advantages itself when the
    ``advantage`` key is missing (the seed's API).
    """

    cfg_class: type[AlgorithmCfg] = AlgorithmCfg
    advantage_keys: tuple[str, ...] = ("advantage", "return")
    """Keys ``compute_advantages`` writes (``[N, T+1]``, padding slot zero)."""
    advantage_reads: tuple[str, ...] = ("reward", "done", "value", "truncated", "final_value")
    """Rollout keys ``compute_advantages`` reads."""
    update_reads: tuple[str, ...] = ("obs", "action", "sample_log_prob", "value", "advantage", "return")
    """Rollout keys ``update`` reads (a recurrent policy also reads ``done`` and its state)."""
    device: torch.device

    def __init__(self, cfg: AlgorithmCfg, policy: Any) -> None:
        self.cfg = cfg
        self.policy = policy
        self.device = torch.device(cfg.device)
        self.generator = torch.Generator(device=self.device)
        """Drives the minibatch shuffle only, so collection's sampling never shifts it."""
        self.shards = 1
        """Ranks whose rollouts one update's batch concatenates (``rlpipe replay`` of a K-rank run in
        one process): minibatch i is then every rank's own minibatch i, side by side."""

    @classmethod
    def check_run(
        cls, cfg: AlgorithmCfg, num_envs: int, policy_name: str, horizon: int,
        max_episode_steps: int | None = None,
    ) -> None:
        """Reject impossible combinations with the rest of the run before any env step.

        ``max_episode_steps`` is the env's time limit (``None``: none or unknown). Raise
        ``ConfigError`` naming the key path; the default accepts everything.
        """

    def reseed(self, seed: int) -> None:
        """Reset the shuffle generator (the update stage does this once per iteration)."""
        self.generator.manual_seed(seed)

    def set_progress(self, env_steps: int, total_env_steps: int) -> None:
        """Where the run stands before the next update (schedules read it; the default ignores it).

        ``env_steps``: env steps collected before this update's rollout; ``total_env_steps``: the
        run's length, ``iterations × N × T``.
        """

    @abstractmethod
    def compute_advantages(self, rollout: TensorDict) -> dict[str, float]:
        """Write ``advantage_keys`` into ``rollout``; return cheap diagnostics (no host sync needed)."""

    @abstractmethod
    def update(self, rollout: TensorDict) -> dict[str, float]:
        """Optimize the policy on ``rollout``; return averaged diagnostics."""

    def state_dict(self) -> dict[str, Any]:
        """Optimizer and schedule state for checkpoints."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict``."""


def flatten_transitions(rollout: TensorDict, keys: tuple[str, ...]) -> dict[str, torch.Tensor]:
    """The valid ``[N, T]`` transitions of ``keys`` flattened to ``[N*T, ...]`` (env-major order)."""
    return {key: rollout.get(key)[:, :-1].reshape(-1, *rollout.get(key).shape[2:]) for key in keys}


def minibatch_indices(
    num_samples: int, batch_size: int, device: torch.device, generator: torch.Generator | None = None
) -> Iterator[torch.Tensor]:
    """Shuffled index tensors of ``batch_size`` (the last one may be smaller) covering every sample once."""
    perm = torch.randperm(num_samples, device=device, generator=generator)
    for start in range(0, num_samples, batch_size):
        yield perm[start : start + batch_size]
