"""The update loop's KL rules: the adaptive learning rate and target-KL early stopping, by hand."""

import pytest

from rlpipe.algorithms.kl_rules import adaptive_lr, kl_exceeds_target


@pytest.mark.parametrize(
    ("kl", "expected"),
    [
        (0.05, 1e-3 / 1.5),  # > 2 × desired: divide
        (0.021, 1e-3 / 1.5),
        (0.02, 1e-3),  # exactly 2 × desired: unchanged
        (0.01, 1e-3),  # on target
        (0.004, 1.5e-3),  # < desired / 2: multiply
        (0.0, 1e-3),  # rsl_rl leaves the lr alone at KL 0
    ],
)
def test_adaptive_lr_rule(kl, expected):
    assert adaptive_lr(1e-3, kl, desired_kl=0.01, min_lr=1e-5, max_lr=1e-2) == pytest.approx(expected)


def test_adaptive_lr_floor_and_ceiling():
    assert adaptive_lr(1.2e-5, 1.0, 0.01, 1e-5, 1e-2) == 1e-5
    assert adaptive_lr(9e-3, 1e-4, 0.01, 1e-5, 1e-2) == 1e-2


def test_early_stop_threshold_is_one_and_a_half_target():
    assert kl_exceeds_target(0.0151, 0.01)
    assert not kl_exceeds_target(0.015, 0.01)
    assert not kl_exceeds_target(0.0149, 0.01)
