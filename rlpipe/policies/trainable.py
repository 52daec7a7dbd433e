"""``TrainablePolicy``: the ``Policy`` an algorithm trains; ``ActingPolicy``: what a collector steps with.

A trainable policy has an actor network, an action head, and the recurrent steps where
``is_recurrent`` says so. An exported policy (:class:`~rlpipe.policies.exported.ExportedPolicy`)
acts but has no network to train: it is a ``Policy``, not a ``TrainablePolicy``. Shapes: B rows,
L steps of a sequence, S floats of one env's recurrent state.
"""

from __future__ import annotations

from typing import Protocol

import torch
from torch import nn

from rlpipe.policies.base import Policy
from rlpipe.policies.heads import ActionHead

__all__ = ["ActingPolicy", "TrainablePolicy"]


class TrainablePolicy(Policy):
    """A policy with ``actor`` ``[B, actor_in]`` → ``[B, head.out_dim]`` and ``head`` (the distribution).

    The recurrent methods below are implemented by the policies whose ``is_recurrent`` is true; the
    algorithms call them only then.
    """

    actor: nn.Module
    """The actor network: its output is what ``head`` turns into π(·|s) (distillation's label)."""
    head: ActionHead
    """The action head: distribution, mode and the actor's output width ``out_dim``."""

    @property
    def deterministic_policy(self) -> TrainablePolicy:
        """The policy whose deterministic action is the run's (``action_mean``, evaluation): itself."""
        return self

    @property
    def state_size(self) -> int:
        """S: floats of one env's recurrent state (recurrent policies)."""
        raise NotImplementedError(f"{type(self).__name__} has no recurrent state")

    def initial_state(self, batch: int) -> torch.Tensor:
        """The state ``[batch, S]`` at an episode start (recurrent policies)."""
        raise NotImplementedError(f"{type(self).__name__} has no recurrent state")

    def sample_step(
        self, obs: torch.Tensor, state: torch.Tensor, deterministic: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(action [B, *act], log_prob [B], value [B], next_state [B, S])`` (recurrent policies)."""
        raise NotImplementedError(f"{type(self).__name__} has no recurrent state")

    def step_value(self, obs: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """V ``[B]`` of ``obs`` seen with ``state`` ``[B, S]`` (recurrent policies)."""
        raise NotImplementedError(f"{type(self).__name__} has no recurrent state")

    def unroll(
        self, obs_seq: torch.Tensor, start_state: torch.Tensor, done_seq: torch.Tensor
    ) -> torch.Tensor:
        """Core outputs ``[B, L, H]`` of ``obs_seq`` ``[B, L, *obs]`` (recurrent policies)."""
        raise NotImplementedError(f"{type(self).__name__} has no recurrent state")

    def evaluate_sequence(
        self,
        obs_seq: torch.Tensor,
        action_seq: torch.Tensor,
        start_state: torch.Tensor,
        done_seq: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(log_prob, entropy, value)``, each ``[B, L]``, of stored actions (recurrent policies)."""
        raise NotImplementedError(f"{type(self).__name__} has no recurrent state")


class ActingPolicy(Protocol):
    """What a collector steps with: a :class:`TrainablePolicy`, or an algorithm's mix of policies.

    Distillation's student with its teacher is such a mix. Shapes as in :class:`~rlpipe.policies.base.Policy`.
    """

    @property
    def is_recurrent(self) -> bool:
        """Whether it steps with ``sample_step`` and a state ``[B, S]``."""
        ...

    @property
    def has_critic(self) -> bool:
        """Whether ``value`` is worth computing (false: identically zero)."""
        ...

    @property
    def deterministic_policy(self) -> TrainablePolicy:
        """The policy whose deterministic action is the run's (``action_mean``, evaluation)."""
        ...

    @property
    def state_size(self) -> int:
        """S (recurrent policies)."""
        ...

    def sample(self, obs: torch.Tensor, deterministic: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """``(action [B, *act], log_prob [B])``."""
        ...

    def sample_step(
        self, obs: torch.Tensor, state: torch.Tensor, deterministic: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(action, log_prob, value, next_state)`` (recurrent policies)."""
        ...

    def step_value(self, obs: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """V ``[B]`` with ``state`` (recurrent policies)."""
        ...

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """V ``[B]``."""
        ...
