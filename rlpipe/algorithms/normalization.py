"""Running statistics on the device: ``RunningMeanStd`` and the discounted-return reward scaler.

Everything stays a device tensor (no ``.item()``), so updating the statistics never waits for the
host. ``RunningMeanStd`` is generic (any feature shape), for rewards here and observations later.
"""

from __future__ import annotations

from typing import Any

import torch

from rlpipe.runtime.distributed import batch_moments

__all__ = ["RewardNormalizer", "RunningMeanStd", "discounted_returns"]


class RunningMeanStd:
    """Mean and population variance of every sample seen so far, merged batch by batch.

    Each ``update(x)`` with ``x`` ``[B, *shape]`` (any number of leading batch dims) merges the batch
    moments with Chan et al.'s parallel formula — exact, order-independent up to rounding, and the
    same as Welford's one-sample recursion applied to every row. Statistics are float64 ``shape``
    tensors on ``device``; before the first update mean is 0 and var 1.
    """

    def __init__(self, shape: tuple[int, ...] | torch.Size = (), device: torch.device | str = "cpu") -> None:
        self.shape = torch.Size(shape)
        self.mean = torch.zeros(self.shape, dtype=torch.float64, device=device)
        self.var = torch.ones(self.shape, dtype=torch.float64, device=device)
        self.count = torch.zeros((), dtype=torch.float64, device=device)

    @torch.no_grad()
    def update(self, x: torch.Tensor) -> None:
        """Merge the samples of ``x`` ``[..., *shape]`` into the running moments."""
        flat = x.detach().reshape(-1, *self.shape)
        batch_mean, batch_var, count = batch_moments(flat)  # every rank's samples
        self.update_from_moments(batch_mean, batch_var, count)

    @torch.no_grad()
    def update_from_moments(
        self, batch_mean: torch.Tensor, batch_var: torch.Tensor, batch_count: int
    ) -> None:
        """Merge a batch given by its mean, population variance and size (Chan et al. 1979)."""
        batch_mean, batch_var = batch_mean.to(self.mean), batch_var.to(self.var)
        total = self.count + batch_count
        delta = batch_mean - self.mean
        cross = delta.square() * self.count * batch_count / total
        m2 = self.var * self.count + batch_var * batch_count + cross
        self.mean += delta * batch_count / total
        self.var = m2 / total
        self.count = total

    def std(self, eps: float = 1e-8) -> torch.Tensor:
        """``sqrt(var + eps)``, float64 ``shape``."""
        return (self.var + eps).sqrt()

    def normalize(self, x: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
        """``(x − mean) / sqrt(var + eps)`` in ``x``'s dtype."""
        return (x - self.mean.to(x.dtype)) / self.std(eps).to(x.dtype)

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Copies of ``mean``, ``var`` and ``count``."""
        return {"mean": self.mean.clone(), "var": self.var.clone(), "count": self.count.clone()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """Restore ``state_dict`` (moved to this object's device)."""
        device = self.mean.device
        self.mean = state["mean"].to(device, torch.float64).clone()
        self.var = state["var"].to(device, torch.float64).clone()
        self.count = state["count"].to(device, torch.float64).clone()


def discounted_returns(
    reward: torch.Tensor, done: torch.Tensor, gamma: float, running: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Forward discounted returns ``[N, T]`` and the carried return ``[N]`` after the last step.

    R ← γ·R + r_t is recorded at every step, then reset to 0 where ``done_t``; ``running`` ``[N]`` is
    R before step 0 (carried from the previous rollout).
    """
    out = torch.empty_like(reward)
    not_done = (~done).to(reward.dtype)
    for t in range(reward.shape[1]):
        running = gamma * running + reward[:, t]
        out[:, t] = running
        running = running * not_done[:, t]
    return out, running


class RewardNormalizer:
    """Divide rewards by the running std of the discounted return (Engstrom et al. 2020, arXiv:2005.12729).

    Keeps one discounted return per env across rollouts (reset at episode ends) and the running
    variance of every value it took; rewards are scaled, never shifted, so their sign is kept.
    """

    def __init__(self, gamma: float, device: torch.device | str, eps: float = 1e-8) -> None:
        self.gamma, self.eps = gamma, eps
        self.device = torch.device(device)
        self.returns: torch.Tensor | None = None
        """``[N]`` discounted return of each env's current episode (allocated on the first call)."""
        self.stats = RunningMeanStd((), self.device)

    def __call__(self, reward: torch.Tensor, done: torch.Tensor) -> torch.Tensor:
        """Update the statistics with ``reward``/``done`` ``[N, T]``; return the scaled ``[N, T]`` copy."""
        reward = reward.float()
        if self.returns is None or self.returns.shape != reward.shape[:1]:
            self.returns = torch.zeros(reward.shape[0], device=reward.device)
        returns, self.returns = discounted_returns(reward, done, self.gamma, self.returns)
        self.stats.update(returns)
        return reward / self.scale().to(reward.dtype)

    def scale(self) -> torch.Tensor:
        """The divisor ``sqrt(var(R) + eps)`` (0-dim float64 tensor)."""
        return self.stats.std(self.eps)

    def state_dict(self) -> dict[str, Any]:
        """Carried returns and running statistics."""
        returns = None if self.returns is None else self.returns.clone()
        return {"returns": returns, "stats": self.stats.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict``."""
        returns = state["returns"]
        self.returns = None if returns is None else returns.to(self.device).clone()
        self.stats.load_state_dict(state["stats"])
