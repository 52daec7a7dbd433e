"""Non-finite checks of gradients and weights: fused on-device flags, and the slow path naming the tensor."""

from __future__ import annotations

from collections.abc import Iterable

import torch

from rlpipe.testing import faults

__all__ = ["GradientCheck", "clip_grad_norm", "first_nonfinite_tensor", "named_weights", "weights_finite"]


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
        norm = clip_grad_norm(params, max_norm)
        if not scaler_skips_inf:
            bad = ~torch.isfinite(norm)
            self._bad = bad if self._bad is None else self._bad | bad
        return norm

    def take(self) -> torch.Tensor:
        """0-dim bool (device): some step since the last ``take`` had a non-finite norm; then reset."""
        bad, self._bad = self._bad, None
        return bad if bad is not None else torch.zeros((), dtype=torch.bool)


@torch.no_grad()
def clip_grad_norm(params: list[torch.Tensor], max_norm: float) -> torch.Tensor:
    """``torch.nn.utils.clip_grad_norm_(params, max_norm)``, the same ops and bits, without its grouping.

    ``clip_grad_norm_`` groups the gradients by device and dtype in Python before and after its two
    foreach kernels; with one device and dtype (every fp32 policy) that bookkeeping cost as much as
    the maths on W1's 64×64 networks (270 against 130 µs a call). Mixed gradients take the library
    path. ``params`` all have a ``grad``.
    """
    grads = [p.grad for p in params]
    kinds = {(g.device, g.dtype, g.is_sparse) for g in grads}
    if len(kinds) != 1 or next(iter(kinds))[2]:  # none, mixed or sparse: the library's grouping
        return torch.nn.utils.clip_grad_norm_(params, max_norm)
    total = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads, 2.0)), 2.0)
    torch._foreach_mul_(grads, torch.clamp(float(max_norm) / (total + 1e-6), max=1.0))
    return total


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
