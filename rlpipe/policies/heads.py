"""Action heads: turn actor outputs into torch distributions for Discrete and Box spaces."""

from __future__ import annotations

import gymnasium as gym
import torch
from torch import nn
from torch.distributions import Categorical, Distribution, Independent, Normal

__all__ = ["ActionHead", "CategoricalHead", "GaussianHead", "build_action_head"]


class ActionHead(nn.Module):
    """Maps actor outputs ``[B, out_dim]`` to a distribution whose ``log_prob`` is ``[B]``."""

    out_dim: int

    def distribution(self, out: torch.Tensor) -> Distribution:
        """π(·|s) from the actor's raw output."""
        raise NotImplementedError

    def mode(self, dist: Distribution) -> torch.Tensor:
        """The deterministic action of ``dist``."""
        raise NotImplementedError


class CategoricalHead(ActionHead):
    """Discrete(n): the actor outputs logits ``[B, n]``; actions are int64 ``[B]``."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.out_dim = n

    def distribution(self, out: torch.Tensor) -> Distribution:
        """Categorical over the logits."""
        return Categorical(logits=out, validate_args=False)

    def mode(self, dist: Distribution) -> torch.Tensor:
        """Argmax action."""
        return dist.logits.argmax(-1)


class GaussianHead(ActionHead):
    """Box(shape=(A,)): the actor outputs the mean ``[B, A]``; log-std is a learned ``[A]`` parameter.

    The log-std is state-independent (one learnable vector); log_prob and entropy are
    summed over action dims (``Independent``).
    """

    def __init__(self, action_dim: int, log_std_init: float = 0.0) -> None:
        super().__init__()
        self.out_dim = action_dim
        self.log_std = nn.Parameter(torch.full((action_dim,), float(log_std_init)))

    def distribution(self, out: torch.Tensor) -> Distribution:
        """Diagonal Gaussian with the learned std."""
        std = self.log_std.exp().expand_as(out)
        return Independent(Normal(out, std, validate_args=False), 1, validate_args=False)

    def mode(self, dist: Distribution) -> torch.Tensor:
        """The mean action."""
        return dist.mean


def build_action_head(action_space: gym.Space, log_std_init: float = 0.0) -> ActionHead:
    """Categorical for Discrete, Gaussian for 1-D Box; anything else is a ``ValueError``."""
    if isinstance(action_space, gym.spaces.Discrete):
        return CategoricalHead(int(action_space.n))
    if isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1:
        return GaussianHead(int(action_space.shape[0]), log_std_init)
    raise ValueError(f"unsupported action space {action_space}; accepted: Discrete, 1-D Box")
