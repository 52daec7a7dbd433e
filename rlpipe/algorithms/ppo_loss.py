"""The PPO loss pieces (Schulman et al. 2017, arXiv:1707.06347): pure functions of ``[B]`` tensors."""

from __future__ import annotations

import torch

__all__ = ["approx_kl", "clip_fraction", "clipped_surrogate", "explained_variance", "normalize", "value_mse"]


def clipped_surrogate(
    log_prob: torch.Tensor, old_log_prob: torch.Tensor, advantage: torch.Tensor, clip_coef: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(loss, log_ratio)``: −mean(min(ρA, clip(ρ, 1±ε)A)) with ρ = π/π_old."""
    log_ratio = log_prob - old_log_prob
    ratio = log_ratio.exp()
    surrogate = torch.min(ratio * advantage, ratio.clamp(1.0 - clip_coef, 1.0 + clip_coef) * advantage)
    return -surrogate.mean(), log_ratio


def value_mse(value: torch.Tensor, returns: torch.Tensor) -> torch.Tensor:
    """Mean squared error of the critic against the GAE returns (the seed's ``mse_loss``)."""
    return (value - returns).pow(2).mean()


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
    """Zero mean, unit std (advantage normalization)."""
    return (x - x.mean()) / (x.std() + eps)
