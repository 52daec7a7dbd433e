"""The console table and the DVC files: ``metrics.json`` (summary), ``curve.csv`` (one row per iteration)."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, TaskID

from rlpipe.artifacts.atomic import atomic_write_json, atomic_write_text
from rlpipe.artifacts.layout import RunLayout

__all__ = ["COLUMNS", "ConsoleTable", "MetricsFiles", "flatten_params"]

COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("iter", "iteration", "{:>5.0f}"),
    ("env_steps", "env_steps", "{:>10.0f}"),
    ("sps", "time/sps", "{:>8.0f}"),
    ("coll_s", "time/collect_s", "{:>6.2f}"),
    ("upd_s", "time/update_s", "{:>6.2f}"),
    ("wait_s", "time/store_wait_s", "{:>6.2f}"),
    ("pi_loss", "update/policy_loss", "{:>8.4f}"),
    ("v_loss", "update/value_loss", "{:>8.3f}"),
    ("entropy", "update/entropy", "{:>7.3f}"),
    ("kl", "update/approx_kl", "{:>7.4f}"),
    ("clip", "update/clip_fraction", "{:>5.3f}"),
    ("ev", "update/explained_variance", "{:>5.2f}"),
    ("return", "train/episode_return_mean", "{:>8.1f}"),
    ("length", "train/episode_length_mean", "{:>7.1f}"),
    ("eval", "eval/return_mean", "{:>8.1f}"),
    ("eta_s", "time/eta_s", "{:>6.0f}"),
)

CURVE_ALWAYS = ("train/episode_return_mean", "train/episode_length_mean", "eval/return_mean")
"""``curve.csv`` columns even when the first iteration lacks them (no finished episode, no eval yet)."""


def flatten_params(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` → ``{"a.b": 1}``; lists become their JSON text."""
    flat: dict[str, Any] = {}
    for key, value in data.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(flatten_params(value, f"{path}."))
        else:
            flat[path] = json.dumps(value) if isinstance(value, list | dict) else value
    return flat


class ConsoleTable:
    """One compact row per iteration (the header repeats every 25 rows); on a terminal, a progress bar.

    The bar (rich: iterations done of ``total``, elapsed, ETA) sits below the rows and is only drawn
    when the console is a terminal, so logs, pipes and CI output stay plain rows.
    """

    def __init__(self, console: Console | None = None, total: int | None = None) -> None:
        if console is None:
            from rich.console import Console

            console = Console(highlight=False, soft_wrap=True)
        self.console = console
        self.rows = 0
        self.total = total
        self.columns = list(COLUMNS)
        """``(header, metric, format)`` of each column: :data:`COLUMNS`, then those added."""
        self._header_due = True
        self._progress: Progress | None = None
        self._task: TaskID | None = None

    def add_column(self, header: str, key: str) -> None:
        """Show metric ``key`` under ``header`` (before ``eta_s``) from the next row on; once per key."""
        if any(known == key for _, known, _ in self.columns):
            return
        fmt = f"{{:>{max(len(header), 8)}.4g}}"
        self.columns.insert(len(self.columns) - 1, (header, key, fmt))
        self._header_due = True

    def row(self, metrics: dict[str, float]) -> None:
        """Print ``metrics`` as one row (missing values as ``-``) and advance the bar."""
        if self.rows % 25 == 0 or self._header_due:
            self.console.print(" ".join(self._pad(name, fmt) for name, _, fmt in self.columns), style="bold")
            self._header_due = False
        cells = []
        for _, key, fmt in self.columns:
            value = metrics.get(key)
            ok = value is not None and math.isfinite(value)
            cells.append(fmt.format(value) if ok else self._pad("-", fmt))
        self.console.print(" ".join(cells))
        self.rows += 1
        self._advance(int(metrics.get("iteration", self.rows)))

    def _advance(self, iteration: int) -> None:
        if self.total is None or not self.console.is_terminal:
            return
        if self._progress is None:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._progress = Progress(
                TextColumn("iterations"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                console=self.console,
                transient=True,
            )
            self._progress.start()
            self._task = self._progress.add_task("train", total=self.total, completed=iteration - 1)
        if self._task is not None:
            self._progress.update(self._task, completed=iteration)

    def close(self) -> None:
        """Remove the progress bar (the rows stay); idempotent."""
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    @staticmethod
    def _pad(text: str, fmt: str) -> str:
        width = int(fmt.split(">")[1].split(".")[0])
        return text.rjust(width)


class MetricsFiles:
    """``metrics.json`` (final summary) and ``curve.csv`` (one row per iteration) under the run dir."""

    def __init__(self, run_dir: Path, fields: list[str] | None = None) -> None:
        layout = RunLayout(run_dir)
        self.run_dir = layout.root
        self.curve_path = layout.curve
        self.metrics_path = layout.metrics
        self._fields = fields
        """Columns of ``curve.csv``; given when a resumed run appends to a kept curve."""

    def append_curve(self, metrics: dict[str, float]) -> None:
        """Append one iteration; the first row fixes the columns (DVC plots need stable ones).

        A metric first seen later (``eval/success_rate`` when the first eval comes at iteration 2)
        widens the header once: the file is rewritten atomically with empty cells for earlier rows.
        """
        if self._fields is None:
            self._fields = ["iteration", "env_steps", *sorted(_curve_keys(metrics))]
            self._fields += [k for k in CURVE_ALWAYS if k not in self._fields]
            with self.curve_path.open("w", newline="") as fh:
                csv.writer(fh).writerow(self._fields)
        new = sorted(set(_curve_keys(metrics)) - set(self._fields))
        if new:
            self._widen(new)
        with self.curve_path.open("a", newline="") as fh:
            csv.writer(fh).writerow([_csv_value(metrics.get(k)) for k in self._fields])

    def _widen(self, new: list[str]) -> None:
        """Add columns ``new`` to the header (rows so far get empty cells), rewritten atomically."""
        assert self._fields is not None
        try:
            with self.curve_path.open(newline="") as fh:
                rows = list(csv.reader(fh))[1:]
        except OSError:
            rows = []
        self._fields = [*self._fields, *new]
        text = io.StringIO()
        csv.writer(text).writerows([self._fields, *(row + [""] * len(new) for row in rows)])
        atomic_write_text(self.curve_path, text.getvalue())

    def write_summary(self, summary: dict[str, Any]) -> None:
        """Write ``metrics.json`` atomically."""
        atomic_write_json(self.metrics_path, summary)


def _curve_keys(metrics: dict[str, float]) -> list[str]:
    """The ``group/name`` metrics a curve row holds (``advantage/…`` histograms stay out)."""
    return [
        k
        for k in metrics
        if k not in ("iteration", "env_steps") and "/" in k and k.split("/")[0] != "advantage"
    ]


def _csv_value(value: float | None) -> str:
    return "" if value is None else f"{value:.6g}"
