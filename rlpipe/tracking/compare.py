"""``rlpipe compare``: MLflow runs side by side — the params that differ, final and best metrics, curves.

Runs come from the MLflow store through :mod:`rlpipe.tracking` (this module never imports mlflow);
the table is printed with rich and the learning curves are drawn with matplotlib (Agg, no display).
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table

from rlpipe.tracking import RunRecord, TrackingError, metric_history, search_runs

__all__ = ["DEFAULT_METRICS", "Comparison", "best_value", "compare", "differing_params", "plot_curves",
           "render_table"]

DEFAULT_METRICS = ("eval/return_mean", "train/episode_return_mean")
"""What ``rlpipe compare`` shows without ``--metric``."""
LOWER_IS_BETTER = ("loss", "kl", "time/", "length")
"""A metric whose key contains one of these is best at its minimum; every other one at its maximum."""
TAG_PARAMS = {"rlpipe.kind": "kind", "rlpipe.dvc_exp_name": "dvc_exp"}
"""Tags compared like params (a replay run next to its training run differs in ``kind``)."""
LEGEND_MAX_RUNS = 20
"""Above this many runs the plot has no legend (it would hide the curves)."""


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


def compare(uri: str | None = None, experiments: tuple[str, ...] = (), run_ids: tuple[str, ...] = (),
            metrics: tuple[str, ...] = ()) -> Comparison:
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


def render_table(comparison: Comparison, console: Console | None = None) -> Table:
    """Print one row per run: name, id, status, differing params, final/best metrics, env steps, wall time."""
    table = Table(title=f"{len(comparison.runs)} runs", title_justify="left")
    for header in ("run", "id", "status"):
        table.add_column(header, no_wrap=True)
    for key in comparison.params:
        table.add_column(key, overflow="fold")
    for key in comparison.metrics:
        table.add_column(f"{key}\nfinal", justify="right")
        table.add_column(f"{key}\nbest", justify="right")
    table.add_column("env_steps", justify="right")
    table.add_column("wall_s", justify="right")
    for run in comparison.runs:
        table.add_row(*_row(comparison, run))
    # Piped output keeps the natural width instead of folding every column to 80 characters.
    (console or Console(width=None if sys.stdout.isatty() else 250)).print(table)
    return table


def _row(comparison: Comparison, run: RunRecord) -> list[str]:
    params = run_params(run)
    cells = [run.name, run.run_id[:8], run.status.lower(), *(params.get(k, "-") for k in comparison.params)]
    for key in comparison.metrics:
        cells += [_fmt(comparison.final(run, key)), _fmt(comparison.best(run, key))]
    steps = run.metrics.get("env_steps")
    return [*cells, _fmt(int(steps)) if steps is not None else "-", f"{run.wall_s:.1f}"]


def plot_curves(comparison: Comparison, path: Path) -> Path:
    """Draw one panel per metric, one line per run (x: env steps), and save it as a PNG at ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = comparison.metrics
    fig, axes = plt.subplots(1, len(keys), figsize=(6 * len(keys), 4.2), squeeze=False)
    for ax, key in zip(axes[0], keys):
        for run in comparison.runs:
            points = comparison.history.get(key, {}).get(run.run_id, [])
            if points:
                ax.plot(*zip(*points), label=f"{run.name} ({run.run_id[:6]})", linewidth=1.2)
        ax.set(title=key, xlabel="env steps", ylabel=key)
        ax.grid(alpha=0.3)
        if 0 < len(comparison.runs) <= LEGEND_MAX_RUNS and ax.lines:
            ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
