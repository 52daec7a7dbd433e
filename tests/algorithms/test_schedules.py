import math

import numpy as np
import pytest

from rlpipe.algorithms.schedules import (
    Schedule,
    cosine_decay,
    interp_schedule,
    linear_decay,
    points_error,
    schedule_value,
    step_schedule,
)

POINTS = [(0, 1.0), (100, 0.5), (300, 0.1)]


@pytest.mark.parametrize(
    ("env_steps", "expected"),
    [
        (0, 1.0),
        (99, 1.0),
        (100, 0.5),
        (299, 0.5),
        (300, 0.1),
        (10**9, 0.1),
    ],
)
def test_step_jumps_at_each_point_and_holds(env_steps, expected):
    assert step_schedule(POINTS, env_steps) == expected


def test_step_holds_the_first_value_before_the_first_point():
    # rl8's semantics: nothing before the first point means the first value applies.
    assert step_schedule([(50, 3.0), (100, 2.0)], 0) == 3.0
    assert step_schedule([(50, 3.0), (100, 2.0)], 49) == 3.0
    assert step_schedule([(50, 3.0), (100, 2.0)], 50) == 3.0


@pytest.mark.parametrize(
    ("env_steps", "expected"),
    [
        (0, 1.0),  # before the first point: first value
        (100, 1.0),
        (200, 0.5),  # halfway between (100, 1.0) and (300, 0.0)
        (250, 0.25),
        (300, 0.0),
        (400, 0.0),  # after the last point: last value
    ],
)
def test_interp_by_hand(env_steps, expected):
    assert interp_schedule([(100, 1.0), (300, 0.0)], env_steps) == pytest.approx(expected)


def test_interp_matches_numpy_interp_on_random_points():
    rng = np.random.default_rng(0)
    xs = np.sort(rng.choice(10_000, size=6, replace=False))
    ys = rng.normal(size=6)
    points = list(zip(xs.tolist(), ys.tolist()))
    for step in rng.integers(0, 12_000, size=50).tolist():
        assert interp_schedule(points, step) == pytest.approx(float(np.interp(step, xs, ys)))


def test_linear_and_cosine_decay_by_hand():
    assert linear_decay(1.0, 0.0, 250, 1000) == pytest.approx(0.75)
    assert linear_decay(1.0, 0.2, 500, 1000) == pytest.approx(0.6)
    assert linear_decay(1.0, 0.0, 5000, 1000) == 0.0  # held after the end
    assert cosine_decay(1.0, 0.0, 0, 1000) == pytest.approx(1.0)
    assert cosine_decay(1.0, 0.0, 500, 1000) == pytest.approx(0.5)
    assert cosine_decay(1.0, 0.0, 250, 1000) == pytest.approx(0.5 * (1 + math.cos(math.pi / 4)))
    assert cosine_decay(1.0, 0.1, 500, 1000) == pytest.approx(0.55)
    assert cosine_decay(1.0, 0.0, 2000, 1000) == pytest.approx(0.0)


def test_schedule_value_dispatch_and_constant_without_points():
    assert schedule_value("step", 3e-4, 10**6) == 3e-4
    assert schedule_value("interp", 3e-4, 10**6, points=None) == 3e-4
    assert schedule_value("step", 3e-4, 150, points=POINTS) == 0.5
    assert schedule_value("linear", 1.0, 250, final=0.0, total_env_steps=1000) == pytest.approx(0.75)
    with pytest.raises(RuntimeError, match="set_progress"):
        schedule_value("cosine", 1.0, 250)
    with pytest.raises(ValueError, match="unknown schedule kind"):
        schedule_value("exp", 1.0, 0)


def test_schedule_object():
    sched = Schedule("interp", 1e-3, ((0, 1e-3), (1000, 1e-4)))
    assert sched(500) == pytest.approx(5.5e-4)
    assert Schedule("step", 0.01)(10**9) == 0.01  # no points: constant
    assert Schedule("linear", 1.0, final=0.5)(1000, 1000) == 0.5


@pytest.mark.parametrize("points", [[], [(10, 1.0), (5, 2.0)], [(0, 1.0), (0, 2.0)], [(-1, 1.0)]])
def test_points_error_rejects_unsorted_duplicate_negative_or_empty(points):
    assert points_error(points) is not None


def test_points_error_accepts_sorted_points():
    assert points_error(POINTS) is None
