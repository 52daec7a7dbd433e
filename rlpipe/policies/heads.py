"""Action heads: turn actor outputs into torch distributions for Discrete and Box spaces.

Besides ``distribution``, every head computes what the torch distribution computes, op for op (same
values, same bits, same random draws), without building a ``Distribution`` object:
:meth:`ActionHead.sample` (collection, once per env step) and :meth:`ActionHead.evaluate` (the
update). On a small network that object's construction and argument handling cost more than the
network itself. The categorical draw is :func:`rlpipe.fast.categorical_draw` (behind the
``RLPIPE_FAST`` switch). ``tests/policies/test_heads.py`` checks these methods bit for bit against
the distributions.
"""

from __future__ import annotations

import math

import gymnasium as gym
import torch
from torch import nn
from torch.distributions import Categorical, Distribution, Independent, Normal

from rlpipe import fast

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

    def sample(self, out: torch.Tensor, deterministic: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """``Categorical(logits=out)``'s sample (or argmax) and its log-probability, without the object."""
        logits = _normalized(out)
        if deterministic:
            action = logits.argmax(-1)
        else:
            action = fast.categorical_draw(torch.softmax(logits, -1))
        return action, _gather(logits, action)

    def act(self, out: torch.Tensor, deterministic: bool = False) -> torch.Tensor:
        """The argmax of the raw logits (as the exported policy acts), or a sample."""
        return out.argmax(-1) if deterministic else self.sample(out)[0]

    def evaluate(self, out: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``Categorical(logits=out)``'s ``log_prob(action)`` and ``entropy()``, without the object."""
        logits = _normalized(out)
        log_prob = _gather(logits, action)  # before the entropy, as PPO calls the distribution: the
        probs = torch.softmax(logits, -1)  # gradients then accumulate in the same order
        return log_prob, -(logits.clamp(min=torch.finfo(logits.dtype).min) * probs).sum(-1)


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

    def sample(self, out: torch.Tensor, deterministic: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """The Gaussian's sample (or mean) and its log-probability summed over action dims, no object."""
        std = self.log_std.exp().expand_as(out)
        if deterministic:
            action = out
        else:
            with torch.no_grad():  # Normal.sample draws without a graph
                action = torch.normal(out, std)
        return action, _normal_log_prob(action, out, std)

    def act(self, out: torch.Tensor, deterministic: bool = False) -> torch.Tensor:
        """The mean, or a sample."""
        return out if deterministic else self.sample(out)[0]

    def evaluate(self, out: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The Gaussian's ``log_prob(action)`` and ``entropy()`` summed over action dims."""
        std = self.log_std.exp().expand_as(out)
        log_prob = _normal_log_prob(action, out, std)  # first, as with the distribution (see above)
        return log_prob, (0.5 + 0.5 * math.log(2 * math.pi) + torch.log(std)).sum(-1)


def _normalized(out: torch.Tensor) -> torch.Tensor:
    """Log-probabilities ``[..., n]`` of logits ``out`` as ``Categorical`` normalizes them."""
    return out - out.logsumexp(dim=-1, keepdim=True)


def _gather(logits: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
    """``logits[..., action]``: the log-probability ``[...]`` of integer actions ``[...]``."""
    return logits.gather(-1, action.long().unsqueeze(-1)).squeeze(-1)


def _normal_log_prob(value: torch.Tensor, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """``Independent(Normal(mean, std), 1).log_prob(value)``: ``[B, A]`` → ``[B]``, the same ops."""
    var = std**2
    log_prob = -((value - mean) ** 2) / (2 * var) - std.log() - math.log(math.sqrt(2 * math.pi))
    return log_prob.sum(-1)


def build_action_head(action_space: gym.Space, log_std_init: float = 0.0) -> ActionHead:
    """Categorical for Discrete, Gaussian for 1-D Box; anything else is a ``ValueError``."""
    if isinstance(action_space, gym.spaces.Discrete):
        return CategoricalHead(int(action_space.n))
    if isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1:
        return GaussianHead(int(action_space.shape[0]), log_std_init)
    raise ValueError(f"unsupported action space {action_space}; accepted: Discrete, 1-D Box")
