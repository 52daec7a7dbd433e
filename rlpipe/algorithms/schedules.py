"""Schedules of a hyperparameter over the run, indexed by env steps (learning rate, entropy coefficient).

Two families, one function each:

* piecewise schedules from ``[env_steps, value]`` points (rl8's ``lr_schedule``): ``step`` jumps to a
  point's value when its env-step count is reached and holds it; ``interp`` interpolates linearly
  between points. Both hold the first value before the first point and the last value after the
  last point.
* decays over the whole run from an initial value to a final one: ``linear`` and ``cosine``
  (Loshchilov & Hutter 2016, arXiv:1608.03983), which need the run length in env steps.

:func:`schedule_value` picks one by kind; :class:`Schedule` bundles a kind with its parameters;
:class:`Progress` is the position they are read at.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass

from rlpipe.config.schedules import ScheduleKind, points_error

__all__ = [
    "SCHEDULE_KINDS",
    "Progress",
    "Schedule",
    "ScheduleKind",
    "cosine_decay",
    "interp_schedule",
    "linear_decay",
    "points_error",
    "schedule_value",
    "step_schedule",
]

SCHEDULE_KINDS: tuple[str, ...] = ("step", "interp", "linear", "cosine")
Points = Sequence[tuple[int, float]] | Sequence[Sequence[float]]


def step_schedule(points: Points, env_steps: int) -> float:
    """Value of the last point whose env-step count is ``<= env_steps`` (the first before it).

    ``points`` are ``[env_steps, value]`` pairs sorted by strictly increasing env steps.
    """
    steps = [p[0] for p in points]
    index = max(bisect.bisect_right(steps, env_steps) - 1, 0)
    return float(points[index][1])


def interp_schedule(points: Points, env_steps: int) -> float:
    """Linear interpolation between the two points around ``env_steps``; held outside the points."""
    steps = [p[0] for p in points]
    if env_steps <= steps[0]:
        return float(points[0][1])
    if env_steps >= steps[-1]:
        return float(points[-1][1])
    right = bisect.bisect_right(steps, env_steps)
    (x0, y0), (x1, y1) = points[right - 1], points[right]
    return float(y0 + (y1 - y0) * (env_steps - x0) / (x1 - x0))


def _fraction(env_steps: int, total_env_steps: int) -> float:
    """Share of the run done, clamped to ``[0, 1]``."""
    return min(max(env_steps / max(total_env_steps, 1), 0.0), 1.0)


def linear_decay(initial: float, final: float, env_steps: int, total_env_steps: int) -> float:
    """``initial`` at step 0, ``final`` at ``total_env_steps`` and after, a straight line between."""
    return initial + (final - initial) * _fraction(env_steps, total_env_steps)


def cosine_decay(initial: float, final: float, env_steps: int, total_env_steps: int) -> float:
    """Half a cosine from ``initial`` (step 0) down to ``final`` (``total_env_steps`` and after)."""
    return final + (initial - final) * 0.5 * (1.0 + math.cos(math.pi * _fraction(env_steps, total_env_steps)))


def schedule_value(
    kind: str,
    initial: float,
    env_steps: int,
    points: Points | None = None,
    final: float = 0.0,
    total_env_steps: int | None = None,
) -> float:
    """The scheduled value at ``env_steps``.

    ``step``/``interp`` follow ``points`` (``None``: constant ``initial``); ``linear``/``cosine`` decay
    from ``initial`` to ``final`` over ``total_env_steps`` (required for them).
    """
    if kind in ("step", "interp"):
        if not points:
            return initial
        return step_schedule(points, env_steps) if kind == "step" else interp_schedule(points, env_steps)
    if kind not in ("linear", "cosine"):
        raise ValueError(f"unknown schedule kind {kind!r}; accepted: {', '.join(SCHEDULE_KINDS)}")
    if total_env_steps is None:
        raise RuntimeError(
            f"a {kind} schedule needs the run length: call algo.set_progress(env_steps, total_env_steps)"
        )
    decay = linear_decay if kind == "linear" else cosine_decay
    return decay(initial, final, env_steps, total_env_steps)


@dataclass(frozen=True)
class Schedule:
    """One scheduled hyperparameter: ``schedule(env_steps, total_env_steps)`` gives its value."""

    kind: str
    initial: float
    points: tuple[tuple[int, float], ...] | None = None
    final: float = 0.0

    @classmethod
    def of(cls, kind: str, initial: float, points: Points | None, final: float = 0.0) -> Schedule:
        """The schedule of config ``points`` (``[[env_steps, value], ...]``; ``None``: ``initial``)."""
        steps = None if points is None else tuple((int(s), float(v)) for s, v in points)
        return cls(kind, initial, steps, final)

    def __call__(self, env_steps: int, total_env_steps: int | None = None) -> float:
        """The value at ``env_steps`` of a run of ``total_env_steps`` (``None``: unknown)."""
        return schedule_value(self.kind, self.initial, env_steps, self.points, self.final, total_env_steps)


@dataclass(frozen=True)
class Progress:
    """Where the run is, as the algorithm reads it: a copy handed over, never counted by the algorithm.

    ``env_steps``: the env steps every rank collected before the current rollout (the position of
    the schedules, RND's weight and distillation's teacher mix while it is collected, its
    advantages computed and its update run); ``total_env_steps``: the run's length (``None``:
    unknown; linear/cosine schedules need it). The run's counters have one owner, the trainer's
    ``RunState``; it hands them over with ``BaseAlgorithm.set_progress`` before each rollout.
    """

    env_steps: int = 0
    total_env_steps: int | None = None
