"""The PPO loss pieces (Schulman et al. 2017, arXiv:1707.06347): pure functions of ``[B]`` tensors.

Each option of ``PPOCfg`` that changes the maths is one function here, tested on its own: the
clipped surrogate with the optional dual clip, the plain and the clipped value loss, advantage
normalization, and the two KL rules (early stopping, adaptive learning rate).
"""

from __future__ import annotations

import torch

__all__ = [
    "adaptive_lr",
    "approx_kl",
    "clip_fraction",
    "clipped_surrogate",
    "clipped_value_loss",
    "dual_clip",
    "explained_variance",
    "kl_exceeds_target",
    "normalize",
    "surrogate",
    "value_mse",
]

EARLY_STOP_FACTOR = 1.5
"""Stop once the KL passes this multiple of ``target_kl`` (SB3's and rl8's margin)."""
ADAPTIVE_LR_FACTOR = 1.5
"""rsl_rl's step of the adaptive learning rate (divide or multiply)."""


def surrogate(ratio: torch.Tensor, advantage: torch.Tensor, clip_coef: float) -> torch.Tensor:
    """Per-sample clipped objective ``[B]``: min(ρA, clip(ρ, 1−ε, 1+ε)A) (to be maximized)."""
    return torch.min(ratio * advantage, ratio.clamp(1.0 - clip_coef, 1.0 + clip_coef) * advantage)


def dual_clip(objective: torch.Tensor, advantage: torch.Tensor, dual_clip_coef: float) -> torch.Tensor:
    """Bound the objective ``[B]`` below by c·A where A < 0 (Ye et al. 2020, arXiv:1912.09729).

    For a negative advantage the plain clip leaves −ρA unbounded as ρ grows; the dual clip caps
    that loss at −c·A (c > 1): max(objective, c·A). Samples with A ≥ 0 are unchanged.
    """
    return torch.where(advantage < 0, torch.max(objective, dual_clip_coef * advantage), objective)


def clipped_surrogate(
    log_prob: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantage: torch.Tensor,
    clip_coef: float,
    dual_clip_coef: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(loss, log_ratio)``: −mean of the clipped (optionally dual-clipped) objective, ρ = π/π_old."""
    log_ratio = log_prob - old_log_prob
    objective = surrogate(log_ratio.exp(), advantage, clip_coef)
    if dual_clip_coef is not None:
        objective = dual_clip(objective, advantage, dual_clip_coef)
    return -objective.mean(), log_ratio


def value_mse(value: torch.Tensor, returns: torch.Tensor) -> torch.Tensor:
    """Mean squared error of the critic against the GAE returns."""
    return (value - returns).pow(2).mean()


def clipped_value_loss(
    value: torch.Tensor, old_value: torch.Tensor, returns: torch.Tensor, clip_coef: float
) -> torch.Tensor:
    """PPO2's clipped value loss: mean(max((V − R)², (V_old + clip(V − V_old, ±c) − R)²)).

    ``old_value`` ``[B]`` is the critic's estimate at collection time; the value may move at most
    ``clip_coef`` from it before the clipped branch stops the gradient (OpenAI baselines, rsl_rl).
    """
    clipped = old_value + (value - old_value).clamp(-clip_coef, clip_coef)
    return torch.max((value - returns).pow(2), (clipped - returns).pow(2)).mean()


def approx_kl(log_ratio: torch.Tensor) -> torch.Tensor:
    """KL(π_old‖π) estimate E[(ρ − 1) − log ρ] (Schulman's k3: unbiased, non-negative)."""
    return (log_ratio.exp() - 1.0 - log_ratio).mean()


def clip_fraction(log_ratio: torch.Tensor, clip_coef: float) -> torch.Tensor:
    """Share of samples whose ratio left the clip range."""
    return ((log_ratio.exp() - 1.0).abs() > clip_coef).float().mean()


def explained_variance(value: torch.Tensor, returns: torch.Tensor) -> torch.Tensor:
    """1 − Var[returns − value] / Var[returns]: 1 is a perfect critic, ≤ 0 no better than a constant."""
    var = returns.var()
    return 1.0 - (returns - value).var() / var.clamp_min(1e-8)


def normalize(x: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """Zero mean, unit std (advantage normalization, over a batch or a minibatch).

    A single sample has no spread: it is only centered (to 0), never divided by a NaN std.
    """
    if x.numel() < 2:
        return x - x.mean()
    return (x - x.mean()) / (x.std() + eps)


def kl_exceeds_target(kl: float, target_kl: float) -> bool:
    """Early stopping: true once the KL passes ``1.5 × target_kl``."""
    return kl > EARLY_STOP_FACTOR * target_kl


def adaptive_lr(lr: float, kl: float, desired_kl: float, min_lr: float, max_lr: float) -> float:
    """rsl_rl's KL-adaptive learning rate: the next lr after a minibatch whose KL was ``kl``.

    KL > 2·desired → lr / 1.5 (not below ``min_lr``); 0 < KL < desired / 2 → lr · 1.5 (not above
    ``max_lr``); otherwise unchanged.
    """
    if kl > 2.0 * desired_kl:
        return max(min_lr, lr / ADAPTIVE_LR_FACTOR)
    if 0.0 < kl < desired_kl / 2.0:
        return min(max_lr, lr * ADAPTIVE_LR_FACTOR)
    return lr
