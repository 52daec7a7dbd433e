"""What the rollout store costs a run: the banner's store line, the demanded rate, the falling-behind warning.

The store line says what is kept and its bytes (per env step, per stored iteration, for the run)
beside the disk's free space, before the first iteration. :class:`StoreRate` watches the
iterations: once the speed is measured it prints the rate the run demands of the disk, and when
``submit`` has to wait for the writer (the disk, or the writer, is slower than training) it prints
one warning saying by how much and which settings lower the demand. Nothing is dropped: the wait
stays in the iteration row (``wait_s``).
"""

from __future__ import annotations

import sys
from typing import TextIO

from rlpipe.artifacts.store_policy import Layout, StorePolicy, stored_bytes

__all__ = ["LOWER_DEMAND", "StoreRate", "human_bytes", "store_line"]

LOWER_DEMAND = "store.every, store.envs, store.precision or store.budget lower it"
"""The settings that lower what the store demands, named by the warning."""

BEHIND_FRACTION = 0.05
"""A wait above this fraction of the iteration is worth one warning."""


def human_bytes(n: float) -> str:
    """Decimal units, three significant digits: ``812 B``, ``13.6 kB``, ``1.70 GB``."""
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.3g} {unit}"
        n /= 1000
    raise AssertionError("unreachable")


def store_line(
    policy: StorePolicy, layout: Layout, world_size: int, iterations: int, free: int | None
) -> str:
    """The banner's store line, e.g.

    ``  store   every iteration, all 4096 envs · 1.02 kB per env step, 102 MB per iteration
    (all ranks), 102 GB for 1000 iterations · disk free 1.8 TB``
    """
    stored = policy.stored_layout(layout)
    n, t1 = stored[0][1][:2]
    per_iteration = stored_bytes(stored) * world_size
    kept = iterations // policy.every
    free_words = "" if free is None else f" · disk free {human_bytes(free)}"
    return (
        f"  store   {policy.words(layout)} · {human_bytes(per_iteration / (world_size * n * (t1 - 1)))} "
        f"per stored env step, {human_bytes(per_iteration)} per stored iteration"
        f"{' (all ranks)' if world_size > 1 else ''}, {human_bytes(per_iteration * kept)} for "
        f"{kept} of {iterations} iterations{free_words}"
    )


class StoreRate:
    """Prints the demanded rate once (at ``report_at``) and one warning when the writer falls behind.

    Waits before ``report_at`` are not warned about: the first writes also start the writer.

    ``per_iteration``: the bytes of one stored iteration (all ranks), ``every``: one iteration in
    ``every`` is stored, ``steps_per_iteration``: env steps of one iteration (all ranks).
    """

    def __init__(
        self,
        per_iteration: int,
        every: int,
        steps_per_iteration: int,
        report_at: int = 3,
        out: TextIO | None = None,
    ) -> None:
        self.per_iteration, self.every = per_iteration, every
        self.steps_per_iteration, self.report_at = steps_per_iteration, report_at
        self.out = out
        self.reported = self.warned = False

    def demand(self, sps: float) -> float:
        """Bytes per second the store demands at ``sps`` env steps per second (averaged over ``every``)."""
        return self.per_iteration / self.every * sps / self.steps_per_iteration

    def observe(
        self,
        iteration: int,
        metrics: dict[str, float],
        last_write: tuple[int, float] | None,
        last: bool = False,
    ) -> list[str]:
        """Print what is due after ``iteration`` (its row's ``metrics``); return the lines printed."""
        lines, sps = [], metrics.get("time/sps")
        if sps and not self.reported and (iteration >= self.report_at or last):
            self.reported = True
            lines.append(
                f"  store   demands {human_bytes(self.demand(sps))}/s at {sps:,.0f} env steps/s "
                f"(measured at iteration {iteration})"
            )
        wait, took = metrics.get("time/store_wait_s", 0.0), metrics.get("time/iteration_s", 0.0)
        warm = iteration >= self.report_at  # the first writes also start the writer and import zarr
        if warm and not self.warned and took > 0 and wait > BEHIND_FRACTION * took:
            self.warned = True
            lines.append(self._behind(iteration, wait, took, sps, last_write))
        for line in lines:
            print(line, file=self.out or sys.stderr, flush=True)
        return lines

    def _behind(
        self,
        iteration: int,
        wait: float,
        took: float,
        sps: float | None,
        last_write: tuple[int, float] | None,
    ) -> str:
        demand = f"; the run demands {human_bytes(self.demand(sps))}/s" if sps else ""
        keeps = (
            f", the writer keeps {human_bytes(last_write[0] / last_write[1])}/s"
            if last_write and last_write[1] > 0
            else ""
        )
        return (
            f"Warning: the rollout store's writer falls behind: iteration {iteration} waited "
            f"{wait:.3g} s for it ({wait / took:.0%} of the iteration){demand}{keeps}; nothing is "
            f"dropped (the wait is the row's wait_s); {LOWER_DEMAND}"
        )
