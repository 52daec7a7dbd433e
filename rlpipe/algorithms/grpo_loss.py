"""The GRPO maths (Shao et al. 2024, arXiv:2402.03300): pure functions of ``[N, T]`` and ``[B]`` tensors.

Step-wise form for dense-reward control: per-step discounted returns and the valid-step mask,
returns normalized per time step within groups of consecutive envs, and the masked clipped
surrogate with the k3 KL estimator.
"""

from __future__ import annotations

import torch

__all__ = [
    "group_advantages",
    "k3_kl",
    "masked_clipped_surrogate",
    "masked_mean",
    "step_returns_and_mask",
]


def step_returns_and_mask(
    rewards: torch.Tensor, dones: torch.Tensor, gamma: float, truncate_at_first_done: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-step discounted returns and the valid-step mask, both ``[N, T]`` float32.

    R_t = r_t + γ·R_{t+1}·(1 − done_t), accumulated backwards from R_T = 0 (no bootstrap past the
    horizon). With ``truncate_at_first_done`` the mask keeps each env's steps up to and including
    its first done and zeroes everything after; otherwise it is all ones.
    """
    rewards = rewards.float()
    not_done = (~dones.bool()).float()
    returns = torch.empty_like(rewards)
    running = torch.zeros_like(rewards[:, 0])
    for t in range(rewards.shape[1] - 1, -1, -1):
        running = rewards[:, t] + gamma * running * not_done[:, t]
        returns[:, t] = running
    if not truncate_at_first_done:
        return returns, torch.ones_like(rewards)
    dones_before = dones.long().cumsum(dim=1) - dones.long()
    return returns, (dones_before == 0).float()


def group_advantages(
    step_returns: torch.Tensor, seq_mask: torch.Tensor, group_size: int, eps: float
) -> torch.Tensor:
    """Advantages ``[N, T]``: returns normalized per time step within each group's valid members.

    Groups are consecutive blocks of ``group_size`` envs. At each step t, mean and population std
    are taken over the members with ``seq_mask = 1`` only; A = (R − mean) / (std + eps) · mask.
    A member alone in its group at a step, or a group of equal returns, gets 0.
    """
    n, t = step_returns.shape
    returns = step_returns.view(n // group_size, group_size, t)
    mask = seq_mask.view(n // group_size, group_size, t)
    count = mask.sum(dim=1, keepdim=True).clamp_min(1.0)
    mean = (returns * mask).sum(dim=1, keepdim=True) / count
    std = (((returns - mean) ** 2 * mask).sum(dim=1, keepdim=True) / count).sqrt()
    return ((returns - mean) / (std + eps)).view(n, t) * seq_mask


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Σ(x·mask) / max(Σ mask, 1) over ``[B]`` tensors."""
    return (x * mask).sum() / mask.sum().clamp_min(1.0)


def masked_clipped_surrogate(
    log_prob: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantage: torch.Tensor,
    mask: torch.Tensor,
    clip_coef: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(loss, log_ratio)``: −masked mean of min(ρA, clip(ρ, 1±ε)A), ρ = π/π_old; ``[B]`` inputs."""
    log_ratio = log_prob - old_log_prob
    ratio = log_ratio.exp()
    surrogate = torch.min(ratio * advantage, ratio.clamp(1.0 - clip_coef, 1.0 + clip_coef) * advantage)
    return -masked_mean(surrogate, mask), log_ratio


def k3_kl(log_ratio: torch.Tensor) -> torch.Tensor:
    """Per-sample k3 estimator exp(Δ) − Δ − 1 ≥ 0 of KL(q‖p), Δ = log p(x) − log q(x), x ~ q.

    Schulman 2020, "Approximating KL divergence" (joschu.net/blog/kl-approx.html).
    """
    return log_ratio.exp() - log_ratio - 1.0
