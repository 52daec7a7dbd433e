"""Early stopping (``trainer.stop_when``): pure conditions over each iteration's metrics.

A :class:`Stopper` holds one condition per config entry; ``update(metrics)`` is called after every
iteration with that iteration's metrics and returns the reason of the first condition that holds
(``None``: keep going). A condition whose metric is absent from an iteration (e.g. ``eval/…`` on an
iteration without evaluation) ignores that iteration, so patience counts reports of its metric.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from rlpipe.config import StopConditionCfg

__all__ = ["BoundCondition", "PatienceCondition", "StopCondition", "Stopper"]


class StopCondition:
    """Checks one metric; subclasses implement :meth:`check`."""

    def __init__(self, cfg: StopConditionCfg) -> None:
        self.cfg = cfg

    def check(self, value: float) -> str | None:
        """Reason to stop after seeing ``value``, else ``None``."""
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        """Counters to carry across a resume."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""


class BoundCondition(StopCondition):
    """Stop once the metric is ``>= min`` or ``<= max``."""

    def check(self, value: float) -> str | None:
        """Name the bound reached, if any."""
        metric, low, high = self.cfg.metric, self.cfg.min, self.cfg.max
        if low is not None and value >= low:
            return f"{metric} >= {low:g} (got {value:g})"
        if high is not None and value <= high:
            return f"{metric} <= {high:g} (got {value:g})"
        return None


class PatienceCondition(StopCondition):
    """Stop after ``patience`` consecutive reports that do not beat the best by ``min_delta``."""

    def __init__(self, cfg: StopConditionCfg) -> None:
        super().__init__(cfg)
        self.best: float | None = None
        self.bad_reports = 0

    def check(self, value: float) -> str | None:
        """Update the best value and the counter; name the rule once patience is exhausted."""
        sign = 1.0 if self.cfg.mode == "max" else -1.0
        if self.best is None or sign * (value - self.best) > self.cfg.min_delta:
            self.best, self.bad_reports = value, 0
            return None
        self.bad_reports += 1
        assert self.cfg.patience is not None  # guaranteed by StopConditionCfg
        if self.bad_reports >= self.cfg.patience:
            return f"{self.cfg.metric} did not improve for {self.bad_reports} reports (best {self.best:g})"
        return None

    def state_dict(self) -> dict[str, Any]:
        """Best value so far and the count of reports without improvement."""
        return {"best": self.best, "bad_reports": self.bad_reports}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self.best = None if state["best"] is None else float(state["best"])
        self.bad_reports = int(state["bad_reports"])


def build_condition(cfg: StopConditionCfg) -> StopCondition:
    """A patience rule when ``patience`` is set, else a bound."""
    return PatienceCondition(cfg) if cfg.patience is not None else BoundCondition(cfg)


class Stopper:
    """All ``trainer.stop_when`` conditions; remembers the reason once one has held."""

    def __init__(self, conditions: Sequence[StopConditionCfg] = ()) -> None:
        self.conditions = [build_condition(cfg) for cfg in conditions]
        self.stopped_by: str | None = None

    def update(self, metrics: dict[str, float]) -> str | None:
        """Feed one iteration's metrics to every condition; the first reason to stop, else ``None``.

        Every condition sees the iteration (so patience counters stay in step); non-finite values
        are ignored.
        """
        reasons = []
        for condition in self.conditions:
            value = metrics.get(condition.cfg.metric)
            if value is None or not math.isfinite(value):
                continue
            reason = condition.check(float(value))
            if reason is not None:
                reasons.append(reason)
        if reasons and self.stopped_by is None:
            self.stopped_by = reasons[0]
        return self.stopped_by

    def state_dict(self) -> dict[str, Any]:
        """Per-condition counters and the stop reason (weights_only-safe)."""
        return {
            "stopped_by": self.stopped_by,
            "conditions": [condition.state_dict() for condition in self.conditions],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`; a checkpoint without one leaves a fresh stopper."""
        if not state:
            return
        self.stopped_by = state["stopped_by"]
        for condition, saved in zip(self.conditions, state["conditions"], strict=True):
            condition.load_state_dict(saved)
