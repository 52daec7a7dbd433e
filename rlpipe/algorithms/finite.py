"""The gradient half of the non-finite guard: clip, and remember on device whether a norm was NaN/Inf."""

from __future__ import annotations

from collections.abc import Iterable

import torch

from rlpipe import faults

__all__ = ["GradientCheck"]


class GradientCheck:
    """Clips gradients like ``clip_grad_norm_`` and flags, without a host sync, a non-finite norm.

    The driver reads :meth:`take` once per update (``run/guards.py``); an optimizer step with a
    non-finite norm has then already moved the in-memory weights, which the driver discards (stop)
    or restores (skip), so no checkpoint ever holds them.
    """

    def __init__(self) -> None:
        self._bad: torch.Tensor | None = None

    def clip(self, parameters: Iterable[torch.Tensor], max_norm: float,
             scaler_skips_inf: bool = False) -> torch.Tensor:
        """``clip_grad_norm_(parameters, max_norm)``; note a non-finite total norm.

        ``scaler_skips_inf``: an enabled AMP ``GradScaler`` skips such steps itself (fp16 overflow
        is routine there), so they are not counted.
        """
        params = [p for p in parameters if p.grad is not None]
        faults.poison("grad", params[0].grad if params else None)
        faults.point("update.step")
        norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
        if not scaler_skips_inf:
            bad = ~torch.isfinite(norm)
            self._bad = bad if self._bad is None else self._bad | bad
        return norm

    def take(self) -> torch.Tensor:
        """0-dim bool (device): some step since the last ``take`` had a non-finite norm; then reset."""
        bad, self._bad = self._bad, None
        return bad if bad is not None else torch.zeros((), dtype=torch.bool)
