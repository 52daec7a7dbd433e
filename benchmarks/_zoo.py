"""The zoo's figures (``zoo.py``): learning curves read from ``curve.csv``, the per-task summary, the PNGs.

Not a benchmark itself. A row is one finished run as ``zoo.py`` records it; its ``curve`` holds
``env_steps`` / ``train_return`` (one point per kept iteration) and ``eval_env_steps`` / ``eval_return``
(one point per evaluation, plus ``eval_success_rate`` where the env reports success).
"""

from __future__ import annotations

import csv
import math
import statistics
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

MAX_POINTS = 200
"""Training-return points kept per run (evenly spaced, the last one always)."""


def number(cell: str | None) -> float | None:
    """A ``curve.csv`` cell as a float (``None`` for an empty or non-finite cell)."""
    try:
        value = float(cell or "")
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def read_curve(path: Path) -> dict[str, list[float | None]]:
    """The learning curve of ``curve.csv`` (empty lists when the run wrote none)."""
    try:
        with path.open(newline="") as fh:
            rows = list(csv.DictReader(fh))
    except FileNotFoundError:
        rows = []
    train = [(number(r["env_steps"]), number(r.get("train/episode_return_mean"))) for r in rows]
    train = [(s, v) for s, v in train if s is not None and v is not None]
    stride = max(1, math.ceil(len(train) / MAX_POINTS))
    keep = sorted({*range(0, len(train), stride), len(train) - 1} - {-1})
    evals = [r for r in rows if number(r.get("eval/return_mean")) is not None]
    curve = {"env_steps": [train[i][0] for i in keep], "train_return": [train[i][1] for i in keep],
             "eval_env_steps": [number(r["env_steps"]) for r in evals],
             "eval_return": [number(r["eval/return_mean"]) for r in evals]}
    if any(number(r.get("eval/success_rate")) is not None for r in evals):
        curve["eval_success_rate"] = [number(r.get("eval/success_rate")) for r in evals]
    return curve


def mean(values: Iterable[float | None]) -> float | None:
    """The mean of the measured values (``None`` when none was)."""
    measured = [v for v in values if v is not None]
    return statistics.fmean(measured) if measured else None


def summarize(rows: list[dict[str, Any]], reference: Callable[[str, str, str], dict[str, Any]],
              png: Callable[[str], str]) -> dict[str, dict[str, Any]]:
    """Per task: mean ± population std over seeds of the final eval return, the reference and the ratio.

    ``reference(env_id, algorithm, task)`` gives ``{value, budget, by, source}`` (``value``
    ``None``: none); ``png(task)`` names the task's curve file.
    The ratio is left out (``None``) for a reference ≤ 0.
    """
    summary = {}
    for task in dict.fromkeys(r["task"] for r in rows):
        group = sorted((r for r in rows if r["task"] == task), key=lambda r: r["seed"])
        first, evals = group[0], [r["eval_return"] for r in group if r["eval_return"] is not None]
        ref, eval_mean = reference(first["env_id"], first["algorithm"], first["task"]), mean(evals)
        measured = ref["value"] is not None and ref["value"] > 0 and eval_mean is not None
        summary[task] = {
            "task": task, "config": first["config"], "env_id": first["env_id"],
            "algorithm": first["algorithm"], "seeds": [r["seed"] for r in group], "n": len(evals),
            "budget_env_steps": max(r["budget_env_steps"] for r in group),
            "env_steps_mean": mean(r["env_steps"] for r in group),
            "eval_return_mean": eval_mean, "eval_return_std": statistics.pstdev(evals) if evals else None,
            "eval_success_rate_mean": mean(r["eval_success_rate"] for r in group),
            "eval_success_at_end_mean": mean(r["eval_success_at_end"] for r in group),
            "train_return_mean": mean(r["train_return"] for r in group),
            "wall_s_mean": mean(r["wall_s"] for r in group), "cpu_s_mean": mean(r["cpu_s"] for r in group),
            "env_steps_per_s_mean": mean(r["env_steps_per_s"] for r in group),
            "reference": ref["value"], "reference_budget": ref["budget"], "reference_by": ref["by"],
            "reference_source": ref["source"],
            "ratio_to_reference": eval_mean / ref["value"] if measured else None,
            "curve_png": png(task),
        }
    return summary


def by_step(rows: list[dict[str, Any]], steps: str, values: str) -> dict[float, list[float]]:
    """``{env steps: [the value of each seed at that point]}`` over the rows' curves."""
    points: dict[float, list[float]] = {}
    for row in rows:
        for step, value in zip(row["curve"][steps], row["curve"][values]):
            if value is not None:
                points.setdefault(step, []).append(value)
    return dict(sorted(points.items()))


def plot(task: str, rows: list[dict[str, Any]], summary: dict[str, Any], path: Path) -> None:
    """``<task>.png``: eval return (mean, min–max over seeds), training return (mean), reference (dashed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    evals, train = by_step(rows, "eval_env_steps", "eval_return"), by_step(rows, "env_steps", "train_return")
    if train:
        ax.plot(list(train), [statistics.fmean(v) for v in train.values()], ":", color="tab:gray",
                label="training return, mean over seeds")
    if evals:
        ax.fill_between(list(evals), [min(v) for v in evals.values()], [max(v) for v in evals.values()],
                        alpha=0.25, color="tab:blue", label="eval return, min–max over seeds")
        ax.plot(list(evals), [statistics.fmean(v) for v in evals.values()], "-o", color="tab:blue",
                markersize=3, label=f"eval return (deterministic), mean of {summary['n']} seed(s)")
    if summary["reference"] is not None:
        ax.axhline(summary["reference"], ls="--", color="black", lw=1,
                   label=f"reference {summary['reference']:,.0f} ({summary['reference_by']}, "
                         f"{summary['reference_budget']:,} steps)")
    ax.set(xlabel="env steps", ylabel="return", title=f"{task}: {summary['env_id']}, {summary['algorithm']}")
    ax.legend(fontsize="small")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
