"""The parts of ``store`` that choose what is kept: the budget block and the precision map."""

from __future__ import annotations

import re
from typing import Literal, Self

from pydantic import Field, model_validator

from rlpipe.config.strict import StrictModel

__all__ = ["BUDGET_BYTES_PER_ENV_STEP", "LOWER_PRECISIONS", "StoreBudgetCfg", "precision_group_problem"]

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


BUDGET_BYTES_PER_ENV_STEP = (1e-6, 1e15)
"""Accepted range of a rate budget's bytes per env step (``rate_gb_s · 10⁹ / env_steps_per_s``)."""


class StoreBudgetCfg(StrictModel):
    """What the store may write: a total for the run, or a rate at a stated speed.

    Exactly one of ``total_tb`` and ``rate_gb_s``; ``rate_gb_s`` needs ``env_steps_per_s``, the
    speed the rate is reckoned at (the budget is derived before the first iteration, from the
    rollout's bytes, so the same params always store the same iterations). Each value, and the
    bytes they derive (:meth:`total_bytes`, :meth:`bytes_per_env_step`), is checked here against
    a bounded range, so the derivation's arithmetic stays finite and positive.
    """

    total_tb: float | None = Field(default=None, gt=0, le=1e9, allow_inf_nan=False)
    """Terabytes (10¹² bytes) the whole run may store, all ranks together (at most 10⁹: a zettabyte)."""
    rate_gb_s: float | None = Field(default=None, gt=0, le=1e9, allow_inf_nan=False)
    """Gigabytes (10⁹ bytes) per second the store may demand, all ranks together (at most 10⁹)."""
    env_steps_per_s: float | None = Field(default=None, gt=0, le=1e12, allow_inf_nan=False)
    """The run's expected speed in env steps per second (all ranks), for ``rate_gb_s`` (at most 10¹²)."""

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

    @model_validator(mode="after")
    def _rate_in_range(self) -> Self:
        """The bytes per env step a rate allows lie in :data:`BUDGET_BYTES_PER_ENV_STEP`."""
        allowed = self.bytes_per_env_step()
        low, high = BUDGET_BYTES_PER_ENV_STEP
        if allowed is not None and not low <= allowed <= high:
            raise ValueError(
                f"rate_gb_s {self.rate_gb_s:g} at env_steps_per_s {self.env_steps_per_s:g} allows "
                f"{allowed:.3g} bytes per env step; accepted: rate_gb_s · 10⁹ / env_steps_per_s "
                f"from {low:g} to {high:g} bytes per env step"
            )
        return self

    def total_bytes(self) -> float | None:
        """The total budget in bytes (``None`` for a rate); at most 10²¹."""
        return None if self.total_tb is None else self.total_tb * 1e12

    def bytes_per_env_step(self) -> float | None:
        """The rate budget as bytes per env step (``None`` for a total)."""
        if self.rate_gb_s is None or self.env_steps_per_s is None:
            return None
        return self.rate_gb_s / self.env_steps_per_s * 1e9

    def words(self) -> str:
        """``total_tb 2`` or ``rate_gb_s 1.5 at 2000000 env steps/s``, for the banner."""
        if self.total_tb is not None:
            return f"total_tb {self.total_tb:g}"
        return f"rate_gb_s {self.rate_gb_s:g} at {self.env_steps_per_s:.0f} env steps/s"
