"""Tanh-squashed action heads of the off-policy algorithms: SAC's Gaussian, TD3's deterministic actor.

Both map the actor's output through ``tanh`` onto a Box's finite bounds, ``low + (high − low) ·
(tanh(u) + 1) / 2``, so every action is inside the bounds without clipping.

* :class:`TanhGaussianHead` (``policy.distribution: tanh_gaussian``): the actor outputs the mean and
  the log-std ``[B, 2A]`` of a Gaussian over ``u``; the action is the squashed sample. Its
  log-probability carries the change of variables; ``distribution`` is torch's
  ``TransformedDistribution`` of the same maths, and the fast paths compute what it computes.
  :meth:`TanhGaussianHead.rsample` draws with the reparameterization gradient (SAC's actor loss).
* :class:`TanhDeterministicHead` (``tanh_deterministic``): the actor outputs ``u`` ``[B, A]``; the action
  is ``tanh(u)`` mapped, plus Gaussian exploration noise of std ``noise_std`` (in [-1, 1] units)
  while collecting; its log-probability is not defined and reads as zero.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch.distributions import (
    AffineTransform,
    Distribution,
    Independent,
    Normal,
    TanhTransform,
    TransformedDistribution,
)

from rlpipe.policies.action_head import ActionHead

__all__ = ["SQUASHED_LOG_STD_RANGE", "SquashedHead", "TanhDeterministicHead", "TanhGaussianHead"]

SQUASHED_LOG_STD_RANGE = (-5.0, 2.0)
"""The log-std of :class:`TanhGaussianHead` is ``tanh(out)`` scaled onto this range (CleanRL's SAC)."""
EDGE = 1e-6
"""Keeps ``1 − tanh²`` and ``atanh`` away from the bounds where they are 0 or infinite."""


class SquashedHead(ActionHead):
    """A head whose actions are ``tanh`` outputs mapped onto finite bounds ``[low, high]`` ``[A]``."""

    action_center: torch.Tensor
    """``(low + high) / 2`` ``[A]``."""
    action_half: torch.Tensor
    """``(high − low) / 2`` ``[A]``."""
    action_low: torch.Tensor
    """``low`` ``[A]``: the actions are clamped into the bounds (float32 rounding may step past them)."""
    action_high: torch.Tensor
    """``high`` ``[A]``."""

    def __init__(self, low: np.ndarray | torch.Tensor, high: np.ndarray | torch.Tensor) -> None:
        super().__init__()
        low_t, high_t = torch.as_tensor(low, dtype=torch.float32), torch.as_tensor(high, dtype=torch.float32)
        self.action_dim = int(low_t.numel())
        self.register_buffer("action_center", (high_t + low_t) / 2, persistent=False)
        self.register_buffer("action_half", (high_t - low_t) / 2, persistent=False)
        self.register_buffer("action_low", low_t, persistent=False)
        self.register_buffer("action_high", high_t, persistent=False)

    def to_bounds(self, squashed: torch.Tensor) -> torch.Tensor:
        """``[B, A]`` in [-1, 1] → the env's action units, never past ``[low, high]``.

        ``center ± half`` can round one ulp past a bound (e.g. [0.1, 0.7] in float32): clamped.
        """
        action = self.action_center + self.action_half * squashed
        return torch.minimum(torch.maximum(action, self.action_low), self.action_high)

    def from_bounds(self, action: torch.Tensor) -> torch.Tensor:
        """The env's action units → [-1, 1]."""
        return (action - self.action_center) / self.action_half

    def squash(self, out: torch.Tensor) -> torch.Tensor:
        """The deterministic action ``[B, A]`` of actor outputs ``out``, differentiable (TD3's actor loss)."""
        return self.to_bounds(torch.tanh(out[..., : self.action_dim]))

    def mode(self, dist: Distribution) -> torch.Tensor:
        """The squashed mean of ``dist``'s base Gaussian."""
        base = dist.base_dist if isinstance(dist, Independent) else dist
        assert isinstance(base, TransformedDistribution)
        return self.to_bounds(torch.tanh(base.base_dist.mean))

    def act(self, out: torch.Tensor, deterministic: bool = False) -> torch.Tensor:
        """The deterministic action, or a sample."""
        return self.squash(out) if deterministic else self.sample(out)[0]


class TanhGaussianHead(SquashedHead):
    """Box with finite bounds: the actor outputs ``[B, 2A]``, the mean then the (pre-scaled) log-std of u."""

    def __init__(self, low: np.ndarray | torch.Tensor, high: np.ndarray | torch.Tensor) -> None:
        super().__init__(low, high)
        self.out_dim = 2 * self.action_dim

    def _mean_std(self, out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean, raw = out.chunk(2, dim=-1)
        low, high = SQUASHED_LOG_STD_RANGE
        log_std = low + 0.5 * (high - low) * (torch.tanh(raw) + 1)
        return mean, log_std.exp()

    def distribution(self, out: torch.Tensor) -> Distribution:
        """π(·|s): the Gaussian over u pushed through tanh and the affine map onto the bounds."""
        mean, std = self._mean_std(out)
        transforms = [TanhTransform(cache_size=1), AffineTransform(self.action_center, self.action_half)]
        squashed = TransformedDistribution(
            Normal(mean, std, validate_args=False), transforms, validate_args=False
        )
        return Independent(squashed, 1, validate_args=False)

    def _log_prob(self, u: torch.Tensor, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
        """Log π of the action ``tanh(u)`` mapped, summed over action dims ``[B]``.

        ``log N(u) − log|d action / d u|`` with ``log(1 − tanh²u) = 2·(log 2 − u − softplus(−2u))``
        (the stable form torch's ``TanhTransform`` uses) and ``log half``.
        """
        normal = -((u - mean) ** 2) / (2 * std**2) - std.log() - math.log(math.sqrt(2 * math.pi))
        log_det = 2.0 * (math.log(2.0) - u - torch.nn.functional.softplus(-2.0 * u)) + self.action_half.log()
        return (normal - log_det).sum(-1)

    def rsample(
        self, out: torch.Tensor, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(action [B, A], log_prob [B])`` drawn with the reparameterization gradient.

        ``generator``: where the noise is drawn from (the update's own, so a replay draws alike).
        """
        mean, std = self._mean_std(out)
        noise = torch.randn(mean.shape, generator=generator, device=mean.device, dtype=mean.dtype)
        u = mean + std * noise
        return self.to_bounds(torch.tanh(u)), self._log_prob(u, mean, std)

    def sample(self, out: torch.Tensor, deterministic: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """A squashed sample (or the squashed mean) and its log-probability, no distribution object."""
        mean, std = self._mean_std(out)
        if deterministic:
            u = mean
        else:
            with torch.no_grad():
                u = torch.normal(mean, std)
        return self.to_bounds(torch.tanh(u)), self._log_prob(u, mean, std)

    def evaluate(self, out: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``log_prob(action)`` and a one-sample entropy estimate ``−log_prob`` (no closed form exists)."""
        mean, std = self._mean_std(out)
        u = torch.atanh(self.from_bounds(action).clamp(-1 + EDGE, 1 - EDGE))
        log_prob = self._log_prob(u, mean, std)
        return log_prob, -log_prob


class TanhDeterministicHead(SquashedHead):
    """Box with finite bounds: the actor outputs u ``[B, A]``; the action is ``tanh(u)`` mapped, plus noise.

    ``noise_std`` (set by TD3 from ``algorithm.cfg.exploration_noise``) is the std of the Gaussian
    added to ``tanh(u)`` while collecting, clipped back to [-1, 1]; a deterministic action has none.
    """

    def __init__(self, low: np.ndarray | torch.Tensor, high: np.ndarray | torch.Tensor) -> None:
        super().__init__(low, high)
        self.out_dim = self.action_dim
        self.noise_std = 0.0

    def distribution(self, out: torch.Tensor) -> Distribution:
        """The exploration distribution: a Gaussian of std ``noise_std`` around the squashed action.

        Without noise it is a point mass, which torch cannot express: a ``ValueError`` says so.
        """
        if self.noise_std <= 0:
            raise ValueError("tanh_deterministic: with no exploration noise the policy has no density")
        scale = (self.action_half * self.noise_std).expand_as(out)
        return Independent(Normal(self.squash(out), scale, validate_args=False), 1, validate_args=False)

    def mode(self, dist: Distribution) -> torch.Tensor:
        """The noise-free action."""
        return dist.mean

    def sample(self, out: torch.Tensor, deterministic: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """The squashed action with exploration noise (clipped to the bounds), log-probability zero."""
        squashed = torch.tanh(out)
        if not deterministic and self.noise_std > 0:
            with torch.no_grad():
                squashed = (squashed + self.noise_std * torch.randn_like(squashed)).clamp(-1.0, 1.0)
        return self.to_bounds(squashed), torch.zeros(out.shape[0], device=out.device)

    def evaluate(self, out: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Zeros ``[B]`` twice: a deterministic actor has no log-probability or entropy."""
        zeros = torch.zeros(out.shape[0], device=out.device)
        return zeros, zeros
