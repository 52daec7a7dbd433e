"""``ObsNormalizer``: running mean/std of observations kept as buffers, so checkpoints carry it.

Empirical normalization: ``(obs − mean) / sqrt(var + eps)`` clipped to ``±clip``. The
statistics change only in :meth:`ObsNormalizer.update` (``BaseAlgorithm.update`` calls it, through
``Policy.update_normalization``, after each update with that rollout's observations); ``forward``
never changes them, so evaluation and collection see frozen statistics.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from rlpipe.runtime.distributed import batch_moments

__all__ = ["ObsNormalizer"]

CLIP = 10.0
"""Normalized observations are clipped to ``±CLIP``: one outlier cannot saturate the network."""
EPS = 1e-8


class ObsNormalizer(nn.Module):
    """Normalizes ``[B, *obs_shape]`` observations with running statistics of shape ``obs_shape``.

    Buffers (in ``state_dict``): ``count`` ``[]``, ``mean`` and ``var`` ``obs_shape``, float64.
    Before the first update mean is 0 and var 1, so the normalizer only clips.
    """

    count: torch.Tensor
    mean: torch.Tensor
    var: torch.Tensor

    def __init__(self, obs_shape: Sequence[int], clip: float = CLIP) -> None:
        super().__init__()
        self.clip = clip
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))
        self.register_buffer("mean", torch.zeros(tuple(obs_shape), dtype=torch.float64))
        self.register_buffer("var", torch.ones(tuple(obs_shape), dtype=torch.float64))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """``[..., *obs_shape]`` → normalized and clipped, same shape and dtype as ``obs``."""
        std = (self.var + EPS).sqrt()
        out = (obs - self.mean.to(obs.dtype)) / std.to(obs.dtype)
        return out.clamp(-self.clip, self.clip)

    @torch.no_grad()
    def update(self, obs: torch.Tensor) -> None:
        """Merge every sample of ``obs`` ``[..., *obs_shape]`` (Chan et al.'s parallel formula)."""
        flat = obs.detach().reshape(-1, *self.mean.shape).to(torch.float64)
        if flat.shape[0] == 0:
            return
        batch_mean, batch_var, count = batch_moments(flat)  # every rank's observations
        n = torch.tensor(float(count), dtype=torch.float64, device=flat.device)
        total = self.count + n
        delta = batch_mean - self.mean
        m2 = self.var * self.count + batch_var * n + delta.square() * self.count * n / total
        self.mean.add_(delta * n / total)
        self.var.copy_(m2 / total)
        self.count.copy_(total)
