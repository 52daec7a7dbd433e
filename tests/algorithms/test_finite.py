"""The non-finite flag of ``rlpipe.algorithms.finite`` (the clipping itself: tests/test_fast.py)."""

from __future__ import annotations

import pytest
from _gradients import random_params

from rlpipe import fast
from rlpipe.algorithms.finite import GradientCheck


@pytest.mark.parametrize("fast_paths", [True, False])  # RLPIPE_FAST on and off
def test_a_non_finite_gradient_is_flagged_until_taken(monkeypatch, fast_paths):
    monkeypatch.setattr(fast, "ENABLED", fast_paths)
    check = GradientCheck()
    params = random_params(1.0)
    check.clip(params, 0.5)
    assert not check.take()
    params[2].grad[0, 0] = float("nan")
    check.clip(params, 0.5)
    check.clip(random_params(1.0), 0.5)  # a later finite step does not clear the flag
    assert check.take() and not check.take()
