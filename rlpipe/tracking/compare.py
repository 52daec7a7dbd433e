"""``rlpipe compare``: MLflow runs side by side — the params that differ, final and best metrics, curves.

Runs come from the MLflow store through :mod:`rlpipe.tracking` (this module never imports mlflow);
the table is printed with rich and the learning curves are drawn with matplotlib (Agg, no display).
"""

from __future__ import annotations

import math
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table

from rlpipe.tracking import RunRecord, TrackingError, metric_history, search_runs

__all__ = [
    "DEFAULT_METRICS",
    "Comparison",
    "best_value",
    "compare",
    "differing_params",
    "plot_curves",
    "render_table",
    "run_labels",
]

DEFAULT_METRICS = ("eval/return_mean", "train/episode_return_mean")
"""What ``rlpipe compare`` shows without ``--metric``."""
LOWER_IS_BETTER = ("loss", "kl", "time/", "length")
"""A metric whose key contains one of these is best at its minimum; every other one at its maximum."""
TAG_PARAMS = {"rlpipe.kind": "kind", "rlpipe.dvc_exp_name": "dvc_exp"}
"""Tags compared like params (a replay run next to its training run differs in ``kind``)."""
LEGEND_MAX_RUNS = 20
"""Above this many runs the plot has no legend (it would hide the curves)."""
TABLE_WIDTH = 120
"""Columns the table fits in without ``--wide``."""
LABEL_PARAMS = 4
"""Differing params named in a run's label; more are counted (``+N``)."""


@dataclass
class Comparison:
    """Everything ``rlpipe compare`` shows: runs (oldest first), the params that differ, histories."""

    runs: list[RunRecord]
    metrics: tuple[str, ...]
    params: list[str]
    history: dict[str, dict[str, list[tuple[int, float]]]] = field(default_factory=dict)
    """``{metric: {run_id: [(env_steps, value), ...]}}``."""

    def final(self, run: RunRecord, key: str) -> float | None:
        """The value of ``key`` at the run's last logged step."""
        points = self.history.get(key, {}).get(run.run_id)
        return points[-1][1] if points else run.metrics.get(key)

    def best(self, run: RunRecord, key: str) -> float | None:
        """The best value of ``key`` over the run (see :data:`LOWER_IS_BETTER`)."""
        return best_value(key, [v for _, v in self.history.get(key, {}).get(run.run_id, [])])


def best_value(key: str, values: list[float]) -> float | None:
    """Max of the finite ``values`` (min for losses, KL, times, lengths); ``None`` when there are none."""
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return None
    return min(finite) if any(word in key for word in LOWER_IS_BETTER) else max(finite)


def run_params(run: RunRecord) -> dict[str, str]:
    """The run's params plus the tags that are compared like params."""
    tags = {name: run.tags[tag] for tag, name in TAG_PARAMS.items() if tag in run.tags}
    return {**run.params, **tags}


def differing_params(runs: list[RunRecord]) -> list[str]:
    """Param keys whose value is not the same in every run (a missing key counts as a value)."""
    all_params = [run_params(run) for run in runs]
    keys = sorted(set().union(*all_params)) if all_params else []
    return [k for k in keys if len({p.get(k) for p in all_params}) > 1]


def compare(
    uri: str | None = None,
    experiments: tuple[str, ...] = (),
    run_ids: tuple[str, ...] = (),
    metrics: tuple[str, ...] = (),
) -> Comparison:
    """Load the runs and the history of every chosen metric; raise ``TrackingError`` when there are none."""
    runs = search_runs(uri, experiments, run_ids)
    if not runs:
        where = f"experiment {', '.join(experiments)}" if experiments else "the MLflow store"
        raise TrackingError(f"no runs in {where}; train first (rlpipe run)")
    keys = metrics or DEFAULT_METRICS
    ids = [run.run_id for run in runs]
    history = {key: metric_history(uri, ids, key) for key in keys}
    return Comparison(runs, keys, differing_params(runs), history)


def _fmt(value: float | str | None) -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    return f"{value:.4g}"


def _short_keys(keys: list[str]) -> dict[str, str]:
    """The shortest dotted suffix of each key that no other key ends with (``clip_coef``, not the path)."""
    short = {}
    for key in keys:
        parts = key.split(".")
        for n in range(1, len(parts) + 1):
            suffix = ".".join(parts[-n:])
            if not any(o != key and (o == suffix or o.endswith(f".{suffix}")) for o in keys):
                break
        short[key] = suffix
    return short


def run_labels(comparison: Comparison, max_params: int = LABEL_PARAMS) -> dict[str, str]:
    """A unique label per run id, made of the params that differ (``clip_coef=0.1 seed=2``).

    Without differing params the run name; beyond ``max_params`` params ``+N``; runs that would
    share a label (same params, or the same name) get ``#2``, ``#3`` … in start order.
    """
    short = _short_keys(comparison.params)
    labels: dict[str, str] = {}
    for run in comparison.runs:
        params = run_params(run)
        words = [f"{short[key]}={params.get(key, '-')}" for key in comparison.params[:max_params]]
        extra = len(comparison.params) - max_params
        labels[run.run_id] = " ".join(words) + (f" +{extra}" if extra > 0 else "") if words else run.name
    seen: dict[str, int] = {}
    for run in comparison.runs:
        label = labels[run.run_id]
        seen[label] = seen.get(label, 0) + 1
        if seen[label] > 1:
            labels[run.run_id] = f"{label} #{seen[label]}"
    return labels


def render_table(comparison: Comparison, console: Console | None = None, wide: bool = False) -> Table:
    """Print one row per run, at most :data:`TABLE_WIDTH` columns wide unless ``wide``.

    Narrow: the run's label (what differs, see :func:`run_labels`), status, each metric's
    final / best, env steps, wall time. ``wide``: also the run name and id and one column per
    differing param, at the table's natural width.
    """
    labels = run_labels(comparison)
    what = f"{len(comparison.runs)} runs" + (
        f", labelled by what differs ({len(comparison.params)} params)"
        if comparison.params and not wide
        else ""
    )
    table = Table(title=what, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    table.add_column("run", overflow="fold")
    if wide:
        for header in ("name", "id"):
            table.add_column(header, no_wrap=True)
    table.add_column("status", no_wrap=True)
    if wide:
        for key in comparison.params:
            table.add_column(key, overflow="fold")
    for key in comparison.metrics:
        table.add_column(f"{key}\nfinal / best", justify="right", no_wrap=True)
    table.add_column("env_steps", justify="right", no_wrap=True)
    table.add_column("wall_s", justify="right", no_wrap=True)
    for run in comparison.runs:
        table.add_row(*_row(comparison, run, labels[run.run_id], wide))
    if console is None:
        term = shutil.get_terminal_size((TABLE_WIDTH, 24)).columns if sys.stdout.isatty() else None
        console = Console(width=(term or 250) if wide else min(TABLE_WIDTH, term or TABLE_WIDTH))
    console.print(table)
    return table


def _row(comparison: Comparison, run: RunRecord, label: str, wide: bool) -> list[str]:
    params = run_params(run)
    cells = [label, *([run.name, run.run_id[:8]] if wide else []), run.status.lower()[:8]]
    if wide:
        cells += [params.get(k, "-") for k in comparison.params]
    for key in comparison.metrics:
        cells.append(f"{_fmt(comparison.final(run, key))} / {_fmt(comparison.best(run, key))}")
    steps = run.metrics.get("env_steps")
    return [*cells, f"{int(steps):,}" if steps is not None else "-", f"{run.wall_s:.1f}"]


def plot_curves(comparison: Comparison, path: Path) -> Path:
    """Draw one panel per metric, one line per run (x: env steps), and save it as a PNG at ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = comparison.metrics
    labels = run_labels(comparison)
    fig, axes = plt.subplots(1, len(keys), figsize=(6 * len(keys), 4.2), squeeze=False)
    for ax, key in zip(axes[0], keys):
        for run in comparison.runs:
            points = comparison.history.get(key, {}).get(run.run_id, [])
            if points:
                ax.plot(*zip(*points), label=labels[run.run_id], linewidth=1.2)
        ax.set(title=key, xlabel="env steps", ylabel=key)
        ax.grid(alpha=0.3)
        if 0 < len(comparison.runs) <= LEGEND_MAX_RUNS and ax.lines:
            ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
