"""The Beta of bounded Box actions: a Beta on ``[0, 1]`` per action dim, mapped onto ``[low, high]``.

An action is ``a = low + scale · x`` with ``x ~ Beta(α, β)`` per dim and ``scale = high − low``; its
density carries the map's Jacobian, so ``log π(a) = Σ_d log Beta(x_d; α_d, β_d) − Σ_d log scale_d``
and the entropy is the Beta's plus ``Σ_d log scale_d``. The Jacobian is a constant of the action
space: it cancels in PPO's ratio but keeps the log-probabilities and entropies those of the actions
the env receives. With ``α, β > 1`` the Beta is unimodal and its mode ``(α − 1) / (α + β − 2)`` is
inside ``(0, 1)``: the deterministic (evaluated, exported) action.

Actions are mapped back to ``x`` and clamped into ``[BETA_EPS, 1 − BETA_EPS]`` before their
log-probability: a float32 draw can round to exactly 0 or 1 (and ``low + scale · x`` back to a
bound), where ``log x`` or ``log(1 − x)`` is −inf and PPO's ratio would be NaN. Only actions within
``BETA_EPS · scale`` of a bound are moved, where the density with ``α, β > 1`` is near zero.

The functions below compute the same values as ``torch.distributions.Beta`` with an
``AffineTransform`` (``tests/policies/test_distributions.py``) in closed form, without the objects;
:class:`ScaledBeta` is the ``Distribution`` built from them that recurrent policies and GRPO use.
"""

from __future__ import annotations

import torch
from torch.distributions import Beta, Distribution, constraints
from torch.nn import functional

__all__ = [
    "BETA_EPS",
    "ScaledBeta",
    "beta_concentrations",
    "beta_entropy",
    "beta_log_prob",
    "beta_mode",
    "draw_beta",
]

BETA_EPS = 1e-6
"""Clamp of ``x = (a − low) / scale`` into ``[BETA_EPS, 1 − BETA_EPS]`` before ``log_prob`` (float32 keeps
``1 − BETA_EPS`` below 1)."""
ONE_DRAW = torch.Size()
"""The default ``sample_shape``: one draw per row."""


def beta_concentrations(out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(α, β)``, each ``[B, A]`` and > 1, of actor outputs ``[B, 2A]``: ``softplus(out) + 1`` by halves.

    Always float32 (a bf16 actor under ``amp`` included): ``lgamma(α + β)`` of a peaked Beta is tens
    of nats, which bf16's 8 bits would round by a tenth of a nat, more than PPO's clip range.
    """
    alpha, beta = out.float().chunk(2, dim=-1)
    return functional.softplus(alpha) + 1.0, functional.softplus(beta) + 1.0


def draw_beta(alpha: torch.Tensor, beta: torch.Tensor, sample_shape: torch.Size = ONE_DRAW) -> torch.Tensor:
    """A draw ``[*sample_shape, B, A]`` in ``[0, 1]`` of ``Beta(α, β)`` with torch's generator (no graph)."""
    return Beta(alpha, beta, validate_args=False).sample(sample_shape)


def beta_log_prob(
    action: torch.Tensor,
    alpha: torch.Tensor,
    beta: torch.Tensor,
    low: torch.Tensor,
    scale: torch.Tensor,
    log_scale: torch.Tensor,
) -> torch.Tensor:
    """``log π(action)`` ``[B]`` of actions ``[B, A]`` in ``[low, high]``, summed over dims, Jacobian in.

    ``low``, ``scale`` ``[A]``; ``log_scale``: the scalar ``Σ_d log scale_d``.
    """
    x = ((action - low) / scale).clamp(BETA_EPS, 1.0 - BETA_EPS)
    log_norm = torch.lgamma(alpha + beta) - torch.lgamma(alpha) - torch.lgamma(beta)
    per_dim = torch.xlogy(alpha - 1.0, x) + torch.xlogy(beta - 1.0, 1.0 - x) + log_norm
    return per_dim.sum(-1) - log_scale


def beta_entropy(alpha: torch.Tensor, beta: torch.Tensor, log_scale: torch.Tensor) -> torch.Tensor:
    """Differential entropy ``[B]`` of the mapped Beta (the Beta's, summed over dims, plus ``log_scale``)."""
    total = alpha + beta
    per_dim = (
        torch.lgamma(alpha)
        + torch.lgamma(beta)
        - torch.lgamma(total)
        - (alpha - 1.0) * torch.digamma(alpha)
        - (beta - 1.0) * torch.digamma(beta)
        + (total - 2.0) * torch.digamma(total)
    )
    return per_dim.sum(-1) + log_scale


def beta_mode(
    alpha: torch.Tensor, beta: torch.Tensor, low: torch.Tensor, scale: torch.Tensor
) -> torch.Tensor:
    """The deterministic action ``[B, A]``: ``low + scale · (α − 1) / (α + β − 2)``."""
    return low + scale * ((alpha - 1.0) / (alpha + beta - 2.0))


class ScaledBeta(Distribution):
    """Independent Betas over ``[B, A]`` mapped onto ``[low, high]``; ``log_prob``/``entropy`` are ``[B]``.

    ``alpha``, ``beta`` ``[B, A]`` (> 1); ``low``, ``scale`` ``[A]``; ``log_scale`` the scalar
    ``Σ_d log scale_d``. Sampling draws ``Beta(α, β)`` with torch's generator, as the head does.
    """

    arg_constraints: dict[str, constraints.Constraint] = {}
    has_rsample = False

    def __init__(
        self,
        alpha: torch.Tensor,
        beta: torch.Tensor,
        low: torch.Tensor,
        scale: torch.Tensor,
        log_scale: torch.Tensor,
    ) -> None:
        self.alpha, self.beta, self.low, self.scale, self.log_scale = alpha, beta, low, scale, log_scale
        super().__init__(alpha.shape[:-1], alpha.shape[-1:], validate_args=False)

    def sample(self, sample_shape: torch.Size = ONE_DRAW) -> torch.Tensor:
        """Actions ``[*sample_shape, B, A]`` in ``[low, high]``."""
        return self.low + self.scale * draw_beta(self.alpha, self.beta, sample_shape)

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        """``log π(value)`` ``[B]`` (see :func:`beta_log_prob`)."""
        return beta_log_prob(value, self.alpha, self.beta, self.low, self.scale, self.log_scale)

    def entropy(self) -> torch.Tensor:
        """``[B]`` (see :func:`beta_entropy`)."""
        return beta_entropy(self.alpha, self.beta, self.log_scale)

    @property
    def mode(self) -> torch.Tensor:
        """``[B, A]`` (see :func:`beta_mode`)."""
        return beta_mode(self.alpha, self.beta, self.low, self.scale)

    @property
    def mean(self) -> torch.Tensor:
        """``low + scale · α / (α + β)`` ``[B, A]``."""
        return self.low + self.scale * (self.alpha / (self.alpha + self.beta))

    @property
    def variance(self) -> torch.Tensor:
        """``scale² · αβ / ((α + β)² (α + β + 1))`` ``[B, A]``."""
        total = self.alpha + self.beta
        return self.scale**2 * (self.alpha * self.beta / (total**2 * (total + 1.0)))
