"""``ActionHead``: what every action head computes from the actor's output (:mod:`~rlpipe.policies.heads`)."""

from __future__ import annotations

import torch
from torch import nn
from torch.distributions import Distribution

__all__ = ["ActionHead"]


class ActionHead(nn.Module):
    """Maps actor outputs ``[B, out_dim]`` to a distribution whose ``log_prob`` is ``[B]``."""

    out_dim: int
    """Units of the actor's output layer."""
    action_dim: int
    """Action dims A of a Box (``n`` for Discrete)."""

    def distribution(self, out: torch.Tensor) -> Distribution:
        """π(·|s) from the actor's raw output."""
        raise NotImplementedError

    def mode(self, dist: Distribution) -> torch.Tensor:
        """The deterministic action of ``dist``."""
        raise NotImplementedError

    def sample(self, out: torch.Tensor, deterministic: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """``(action [B, *act], log_prob [B])`` of actor outputs ``[B, out_dim]``; mode if deterministic."""
        dist = self.distribution(out)
        action = self.mode(dist) if deterministic else dist.sample()
        return action, dist.log_prob(action)

    def act(self, out: torch.Tensor, deterministic: bool = False) -> torch.Tensor:
        """The action of ``sample`` without its log-probability."""
        return self.sample(out, deterministic)[0]

    def evaluate(self, out: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(log_prob [B], entropy [B])`` of ``action`` under the distribution of ``out``."""
        dist = self.distribution(out)
        return dist.log_prob(action), dist.entropy()
