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

from _aggregate import PROFILE_TAUS, THRESHOLDS, fractions_at_least, profile, scaled, with_intervals

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
    curve = {
        "env_steps": [train[i][0] for i in keep],
        "train_return": [train[i][1] for i in keep],
        "eval_env_steps": [number(r["env_steps"]) for r in evals],
        "eval_return": [number(r["eval/return_mean"]) for r in evals],
    }
    if any(number(r.get("eval/success_rate")) is not None for r in evals):
        curve["eval_success_rate"] = [number(r.get("eval/success_rate")) for r in evals]
    return curve


def mean(values: Iterable[float | None]) -> float | None:
    """The mean of the measured values (``None`` when none was)."""
    measured = [v for v in values if v is not None]
    return statistics.fmean(measured) if measured else None


def summarize(
    rows: list[dict[str, Any]],
    reference: Callable[[str, str, str], dict[str, Any]],
    png: Callable[[str], str],
) -> dict[str, dict[str, Any]]:
    """Per task: the final eval return over seeds, the reference and the ratio to it.

    The return as mean ± population std, and as IQM, mean and median each with its 95 %
    stratified-bootstrap interval (``eval_return_ci``: ``{"iqm": [point, lower, upper], …}``); the
    same of the ratio to the reference (``ratio_ci``), each seed's ratio (``ratios``) and the share of
    seeds at least 0.5× and 0.8× the reference (``seeds_at_least``); ``stopped_early``: the seeds a
    ``trainer.stop_when`` rule ended before the budget (a config that stops at its goal: solved in it).
    ``reference(env_id, algorithm, task)`` gives ``{value, budget, by, source}`` (``value``
    ``None``: none); ``png(task)`` names the task's curve file.
    The ratios are left out (``None``) for a reference ≤ 0.
    """
    summary = {}
    for task in dict.fromkeys(r["task"] for r in rows):
        group = sorted((r for r in rows if r["task"] == task), key=lambda r: r["seed"])
        first, evals = group[0], [r["eval_return"] for r in group if r["eval_return"] is not None]
        ref, eval_mean = reference(first["env_id"], first["algorithm"], first["task"]), mean(evals)
        measured = ref["value"] is not None and ref["value"] > 0 and eval_mean is not None
        estimates = with_intervals(evals) if evals else None
        ratios = [v / ref["value"] for v in evals] if measured else None
        summary[task] = {
            "task": task,
            "config": first["config"],
            "env_id": first["env_id"],
            "algorithm": first["algorithm"],
            "seeds": [r["seed"] for r in group],
            "n": len(evals),
            "budget_env_steps": max(r["budget_env_steps"] for r in group),
            "env_steps_mean": mean(r["env_steps"] for r in group),
            "stopped_early": sum(1 for r in group if r.get("stopped_by")),
            "eval_return_mean": eval_mean,
            "eval_return_std": statistics.pstdev(evals) if evals else None,
            "eval_success_rate_mean": mean(r["eval_success_rate"] for r in group),
            "eval_success_at_end_mean": mean(r["eval_success_at_end"] for r in group),
            "train_return_mean": mean(r["train_return"] for r in group),
            "wall_s_mean": mean(r["wall_s"] for r in group),
            "cpu_s_mean": mean(r["cpu_s"] for r in group),
            "env_steps_per_s_mean": mean(r["env_steps_per_s"] for r in group),
            "reference": ref["value"],
            "reference_budget": ref["budget"],
            "reference_by": ref["by"],
            "reference_source": ref["source"],
            "ratio_to_reference": eval_mean / ref["value"] if measured else None,
            "eval_return_ci": estimates,
            "ratio_ci": scaled(estimates, ref["value"]) if measured else None,
            "ratios": ratios,
            "seeds_at_least": fractions_at_least(ratios) if ratios else None,
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


def pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend (files only, no display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot(task: str, rows: list[dict[str, Any]], summary: dict[str, Any], path: Path) -> None:
    """``<task>.png``: eval return (mean, min–max over seeds), training return (mean), reference (dashed)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    evals, train = by_step(rows, "eval_env_steps", "eval_return"), by_step(rows, "env_steps", "train_return")
    if train:
        ax.plot(
            list(train),
            [statistics.fmean(v) for v in train.values()],
            ":",
            color="tab:gray",
            label="training return, mean over seeds",
        )
    if evals:
        ax.fill_between(
            list(evals),
            [min(v) for v in evals.values()],
            [max(v) for v in evals.values()],
            alpha=0.25,
            color="tab:blue",
            label="eval return, min–max over seeds",
        )
        ax.plot(
            list(evals),
            [statistics.fmean(v) for v in evals.values()],
            "-o",
            color="tab:blue",
            markersize=3,
            label=f"eval return (deterministic), mean of {summary['n']} seed(s)",
        )
    if summary["reference"] is not None:
        ax.axhline(
            summary["reference"],
            ls="--",
            color="black",
            lw=1,
            label=f"reference {summary['reference']:,.0f} ({summary['reference_by']}, "
            f"{summary['reference_budget']:,} steps)",
        )
    ax.set(xlabel="env steps", ylabel="return", title=f"{task}: {summary['env_id']}, {summary['algorithm']}")
    ax.legend(fontsize="small")
    save(fig, path)


def with_ratios(summary: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The tasks of ``summary`` compared with a positive reference, in its order."""
    return [t for t in summary.values() if t.get("ratios")]


def plot_ratios(summary: dict[str, dict[str, Any]], path: Path) -> None:
    """The ratio to the reference per task: IQM with its 95 % interval, each seed a dot, 0.5× / 0.8× / 1×."""
    plt, tasks = pyplot(), with_ratios(summary)
    fig, ax = plt.subplots(figsize=(7.2, 1.6 + 0.32 * len(tasks)))
    for y, task in enumerate(reversed(tasks)):
        point, low, high = task["ratio_ci"]["iqm"]
        ax.errorbar(
            point,
            y,
            xerr=[[point - low], [high - point]],
            fmt="s",
            color="tab:blue",
            capsize=3,
            label="IQM over seeds, 95 % CI" if y == 0 else None,
        )
        ax.plot(
            task["ratios"],
            [y] * len(task["ratios"]),
            "o",
            mfc="none",
            color="tab:gray",
            ms=4,
            label="one seed" if y == 0 else None,
        )
    for x in (*THRESHOLDS, 1.0):
        ax.axvline(x, ls="--" if x == 1.0 else ":", color="black", lw=0.8)
    ax.set_yticks(range(len(tasks)), [f"{t['task']} ({t['n']} seeds)" for t in reversed(tasks)], fontsize=8)
    ax.set(
        xlabel="final eval return / reference",
        xlim=(0, max([2.0] + [max(t["ratios"]) for t in tasks])),
        title="Ratio to the published reference (dotted: 0.5× and 0.8×)",
    )
    if tasks:  # below the axes: no task's interval hidden behind it
        ax.legend(
            fontsize="small",
            loc="upper center",
            ncol=2,
            bbox_to_anchor=(0.5, -0.55 / (0.6 + 0.32 * len(tasks))),
        )
    save(fig, path, tight=True)


def plot_profile(summary: dict[str, dict[str, Any]], path: Path) -> None:
    """The performance profile over the tasks with a reference: share of runs above τ × reference."""
    plt, tasks = pyplot(), with_ratios(summary)
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    if tasks:
        point, low, high = profile([t["ratios"] for t in tasks])
        ax.fill_between(PROFILE_TAUS, low, high, alpha=0.25, color="tab:blue", label="95 % CI")
        ax.plot(
            PROFILE_TAUS,
            point,
            color="tab:blue",
            label=f"{len(tasks)} tasks, {sum(t['n'] for t in tasks)} runs",
        )
    for x in (*THRESHOLDS, 1.0):
        ax.axvline(x, ls="--" if x == 1.0 else ":", color="black", lw=0.8)
    ax.set(
        xlabel="τ (final eval return / reference)",
        ylabel="share of runs with ratio > τ",
        ylim=(0, 1.02),
        title="Performance profile (each task weighs the same)",
    )
    if tasks:
        ax.legend(fontsize="small")
    save(fig, path)


def save(fig: Any, path: Path, tight: bool = False) -> None:
    """Write ``fig`` as a PNG at ``path`` and close it (``tight``: cropped to all it draws, legends too)."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100, bbox_inches="tight" if tight else None)
    plt.close(fig)
