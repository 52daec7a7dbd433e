"""``RandomStart``: the collector's policy of an off-policy run — uniform actions first, then the policy."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
from tensordict import TensorDict

from rlpipe.policies.squashed import SquashedHead

if TYPE_CHECKING:
    from rlpipe.policies.trainable import TrainablePolicy

__all__ = ["RandomStart"]


class RandomStart:
    """Uniform random actions within the bounds until ``random_steps`` env steps, then ``policy``.

    ``env_steps()`` gives the env steps before the rollout being collected (the algorithm's
    progress, set once per rollout); the draws come from torch's global generator like every
    collection draw, so a resumed run draws alike.
    """

    has_critic = False
    is_recurrent = False

    def __init__(self, policy: TrainablePolicy, random_steps: int, env_steps: Callable[[], int]) -> None:
        self.policy, self.random_steps, self.env_steps = policy, random_steps, env_steps

    @property
    def deterministic_policy(self) -> TrainablePolicy:
        """The trained policy (evaluation and ``action_mean`` read its mode)."""
        return self.policy

    @property
    def state_size(self) -> int:
        """0: a feedforward policy."""
        return 0

    def sample(self, obs: torch.Tensor, deterministic: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """``(action [B, A], log_prob [B])``: uniform before ``random_steps`` env steps (log-prob 0)."""
        policy = self.policy
        if deterministic or self.env_steps() >= self.random_steps:
            return policy.sample(obs, deterministic)
        head = policy.head
        assert isinstance(head, SquashedHead)
        rows = _rows(obs)
        uniform = torch.rand(rows, head.action_dim, device=policy.device) * 2 - 1
        return head.to_bounds(uniform), torch.zeros(rows, device=policy.device)

    def sample_step(
        self, obs: torch.Tensor, state: torch.Tensor, deterministic: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Not used: the off-policy algorithms train feedforward policies."""
        raise NotImplementedError("off-policy algorithms train feedforward policies")

    def step_value(self, obs: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """Zeros ``[B]``."""
        return torch.zeros(state.shape[0], device=state.device)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """Zeros ``[B]``: the collector records no state value for an off-policy learner."""
        return torch.zeros(_rows(obs), device=self.policy.device)


def _rows(obs: torch.Tensor | TensorDict) -> int:
    return obs.shape[0] if isinstance(obs, torch.Tensor) else obs.batch_size[0]
