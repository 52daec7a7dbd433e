"""Parameters with random gradients: a small actor's shapes, for the gradient-clipping tests."""

from __future__ import annotations

import torch


def random_params(
    scale: float, dtypes: tuple[torch.dtype, ...] = (torch.float32,)
) -> list[torch.nn.Parameter]:
    """Six parameters of a 4 → 64 → 64 → 2 MLP (dtypes cycled), each with a gradient ``randn × scale``."""
    torch.manual_seed(0)
    shapes = [(64, 4), (64,), (64, 64), (64,), (2, 64), (2,)]
    params = []
    for i, shape in enumerate(shapes):
        p = torch.nn.Parameter(torch.randn(shape, dtype=dtypes[i % len(dtypes)]))
        p.grad = torch.randn(shape, dtype=p.dtype) * scale
        params.append(p)
    return params
