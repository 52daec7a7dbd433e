"""Gradient clipping and the non-finite flag of ``rlpipe.algorithms.finite``."""

from __future__ import annotations

import math

import pytest
import torch

from rlpipe.algorithms.finite import GradientCheck, clip_grad_norm


def _params(scale: float, dtypes: tuple[torch.dtype, ...] = (torch.float32,)) -> list[torch.nn.Parameter]:
    torch.manual_seed(0)
    shapes = [(64, 4), (64,), (64, 64), (64,), (2, 64), (2,)]
    params = []
    for i, shape in enumerate(shapes):
        p = torch.nn.Parameter(torch.randn(shape, dtype=dtypes[i % len(dtypes)]))
        p.grad = torch.randn(shape, dtype=p.dtype) * scale
        params.append(p)
    return params


@pytest.mark.parametrize("scale", [0.001, 3.0])  # below and above max_norm
@pytest.mark.parametrize("dtypes", [(torch.float32,), (torch.float32, torch.float64)])
def test_clip_grad_norm_is_torchs_bit_for_bit(scale, dtypes):
    ours, theirs = _params(scale, dtypes), _params(scale, dtypes)
    norm = clip_grad_norm(ours, 0.5)
    expected = torch.nn.utils.clip_grad_norm_(theirs, 0.5)
    assert torch.equal(norm, expected)
    assert all(torch.equal(a.grad, b.grad) for a, b in zip(ours, theirs, strict=True))
    total = math.sqrt(sum(float(p.grad.double().pow(2).sum()) for p in ours))
    assert total == pytest.approx(min(float(norm), 0.5), rel=1e-5)  # clipped to max_norm when above


def test_a_non_finite_gradient_is_flagged_until_taken():
    check = GradientCheck()
    params = _params(1.0)
    check.clip(params, 0.5)
    assert not check.take()
    params[2].grad[0, 0] = float("nan")
    check.clip(params, 0.5)
    check.clip(_params(1.0), 0.5)  # a later finite step does not clear the flag
    assert check.take() and not check.take()
