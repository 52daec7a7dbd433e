"""Non-finite checks of gradients and weights: fused on-device flags, and the slow path naming the tensor."""

from __future__ import annotations

from collections.abc import Iterable

import torch

from rlpipe import fast
from rlpipe.testing import faults

__all__ = ["GradientCheck", "first_nonfinite_tensor", "named_weights", "weights_finite"]


class GradientCheck:
    """Clips gradients like ``clip_grad_norm_`` and flags, without a host sync, a non-finite norm.

    The trainer's non-finite guard reads :meth:`take` once per update; an optimizer step with a
    non-finite norm has then already moved the in-memory weights, which the guard discards (stop)
    or restores (skip), so no checkpoint ever holds them.
    """

    def __init__(self) -> None:
        self._bad: torch.Tensor | None = None

    def clip(
        self, parameters: Iterable[torch.Tensor], max_norm: float, scaler_skips_inf: bool = False
    ) -> torch.Tensor:
        """Clip as ``clip_grad_norm_(parameters, max_norm)`` does; note a non-finite total norm.

        ``scaler_skips_inf``: an enabled AMP ``GradScaler`` skips such steps itself (fp16 overflow
        is routine there), so they are not counted.
        """
        params = [p for p in parameters if p.grad is not None]
        faults.poison("grad", params[0].grad if params else None)
        faults.point("update.step")
        norm = fast.clip_grad_norm(params, max_norm)
        if not scaler_skips_inf:
            bad = ~torch.isfinite(norm)
            self._bad = bad if self._bad is None else self._bad | bad
        return norm

    def take(self) -> torch.Tensor:
        """0-dim bool (device): some step since the last ``take`` had a non-finite norm; then reset."""
        bad, self._bad = self._bad, None
        return bad if bad is not None else torch.zeros((), dtype=torch.bool)


def first_nonfinite_tensor(named: Iterable[tuple[str, torch.Tensor]]) -> str | None:
    """Name of the first floating-point tensor holding a NaN/Inf (one sync per tensor: the slow path)."""
    for name, tensor in named:
        if torch.is_tensor(tensor) and tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            return name
    return None


def weights_finite(module: torch.nn.Module) -> torch.Tensor:
    """0-dim bool on the module's device: every parameter and floating buffer is finite (no sync)."""
    tensors = [t for t in (*module.parameters(), *module.buffers()) if t.is_floating_point()]
    if not tensors:
        return torch.ones((), dtype=torch.bool)
    return torch.stack([torch.isfinite(t).all() for t in tensors]).all()


def named_weights(module: torch.nn.Module) -> Iterable[tuple[str, torch.Tensor]]:
    """``(name, tensor)`` of every parameter and buffer of ``module``."""
    yield from module.named_parameters()
    yield from module.named_buffers()
