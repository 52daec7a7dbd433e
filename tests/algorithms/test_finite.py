"""The non-finite flag of ``rlpipe.algorithms.finite`` (the clipping itself: tests/test_fast.py)."""

from __future__ import annotations

import pytest
import torch

from rlpipe import fast
from rlpipe.algorithms.finite import GradientCheck


def _params(scale: float, dtypes: tuple[torch.dtype, ...] = (torch.float32,)) -> list[torch.nn.Parameter]:
    torch.manual_seed(0)
    shapes = [(64, 4), (64,), (64, 64), (64,), (2, 64), (2,)]
    params = []
    for i, shape in enumerate(shapes):
        p = torch.nn.Parameter(torch.randn(shape, dtype=dtypes[i % len(dtypes)]))
        p.grad = torch.randn(shape, dtype=p.dtype) * scale
        params.append(p)
    return params


@pytest.mark.parametrize("fast_paths", [True, False])  # RLPIPE_FAST on and off
def test_a_non_finite_gradient_is_flagged_until_taken(monkeypatch, fast_paths):
    monkeypatch.setattr(fast, "ENABLED", fast_paths)
    check = GradientCheck()
    params = _params(1.0)
    check.clip(params, 0.5)
    assert not check.take()
    params[2].grad[0, 0] = float("nan")
    check.clip(params, 0.5)
    check.clip(_params(1.0), 0.5)  # a later finite step does not clear the flag
    assert check.take() and not check.take()
