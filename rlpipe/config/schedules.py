"""Piecewise schedules in config: ``[[env_steps, value], ...]`` points and the schedule kinds.

Used by the learning-rate, entropy and RND-weight schedules of ``algorithm.cfg``; the schedules
themselves (values over env steps) live in :mod:`rlpipe.algorithms.schedules`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import AfterValidator

__all__ = ["Points", "ScheduleKind", "points_error"]

ScheduleKind = Literal["step", "interp", "linear", "cosine"]
"""``step``/``interp``: through the given points; ``linear``/``cosine``: decay to a final value."""


def points_error(points: Sequence[Sequence[float]]) -> str | None:
    """Why ``points`` is not a valid schedule (``None`` when it is): non-empty, env steps >= 0, increasing."""
    steps = [p[0] for p in points]
    if not steps or steps[0] < 0 or any(b <= a for a, b in zip(steps, steps[1:])):
        return f"expected [[env_steps, value], ...] with env_steps >= 0 and strictly increasing (got {steps})"
    return None


def _increasing(points: list[tuple[int, float]]) -> list[tuple[int, float]]:
    error = points_error(points)
    if error:
        raise ValueError(error)
    return points


Points = Annotated[list[tuple[int, float]], AfterValidator(_increasing)]
"""``[[env_steps, value], ...]`` with env steps >= 0 and strictly increasing."""
