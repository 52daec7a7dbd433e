"""The parts of ``store`` that choose what is kept: the budget block and the precision map."""

from __future__ import annotations

import re
from typing import Literal, Self

from pydantic import Field, model_validator

from rlpipe.config.strict import StrictModel

__all__ = ["LOWER_PRECISIONS", "StoreBudgetCfg", "precision_group_problem"]

LOWER_PRECISIONS = ("float16",)
"""Dtypes an observation group may be stored in (numpy has no bfloat16, so Zarr cannot store it)."""

PrecisionName = Literal["float16"]

_GROUP = re.compile(r"obs(/[A-Za-z0-9_.+-]+)*")


def precision_group_problem(group: str) -> str | None:
    """Why ``group`` is not an observation group name (``obs``, ``obs/<key>``), else ``None``."""
    if _GROUP.fullmatch(group):
        return None
    return (
        f"{group!r} is not an observation group; accepted: obs (every observation array) or "
        "obs/<key> (one entry of a dict observation)"
    )


class StoreBudgetCfg(StrictModel):
    """What the store may write: a total for the run, or a rate at a stated speed.

    Exactly one of ``total_tb`` and ``rate_gb_s``; ``rate_gb_s`` needs ``env_steps_per_s``, the
    speed the rate is reckoned at (the budget is derived before the first iteration, from the
    rollout's bytes, so the same params always store the same iterations).
    """

    total_tb: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """Terabytes (10¹² bytes) the whole run may store, all ranks together."""
    rate_gb_s: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """Gigabytes (10⁹ bytes) per second the store may demand, all ranks together."""
    env_steps_per_s: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """The run's expected speed in env steps per second (all ranks), for ``rate_gb_s``."""

    @model_validator(mode="after")
    def _one_budget(self) -> Self:
        if (self.total_tb is None) == (self.rate_gb_s is None):
            raise ValueError(
                "give one of total_tb (a run's total, TB) or rate_gb_s (with env_steps_per_s), "
                "e.g. {total_tb: 2} or {rate_gb_s: 1.5, env_steps_per_s: 2.0e6}"
            )
        if (self.rate_gb_s is None) != (self.env_steps_per_s is None):
            raise ValueError(
                "rate_gb_s and env_steps_per_s go together: the rate is reckoned at "
                "that speed, e.g. {rate_gb_s: 1.5, env_steps_per_s: 2.0e6}"
            )
        return self

    def bytes_per_env_step(self) -> float | None:
        """The rate budget as bytes per env step (``None`` for a total)."""
        if self.rate_gb_s is None or self.env_steps_per_s is None:
            return None
        return self.rate_gb_s * 1e9 / self.env_steps_per_s

    def words(self) -> str:
        """``total_tb 2`` or ``rate_gb_s 1.5 at 2000000 env steps/s``, for the banner."""
        if self.total_tb is not None:
            return f"total_tb {self.total_tb:g}"
        return f"rate_gb_s {self.rate_gb_s:g} at {self.env_steps_per_s:.0f} env steps/s"
