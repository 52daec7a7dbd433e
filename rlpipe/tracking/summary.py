"""The end of ``rlpipe run``: final metrics, where everything is, and what to type next."""

from __future__ import annotations

import math
import shlex
from typing import Any

from rlpipe.artifacts.layout import RunLayout
from rlpipe.config import RunConfig
from rlpipe.tracking.mlflow_view import ui_command, ui_url

__all__ = ["FINAL_METRICS", "end_summary"]

FINAL_METRICS = (
    "eval/return_mean",
    "eval/success_rate",
    "train/episode_return_mean",
    "train/success_rate",
    "update/value_loss",
    "update/approx_kl",
)
"""Metrics the summary shows when the run has them, in this order."""


def _final(summary: dict[str, Any]) -> str:
    shown = [
        f"{key} {value:.4g}"
        for key in FINAL_METRICS
        if isinstance(value := summary.get(key), int | float) and math.isfinite(value)
    ]
    return " · ".join(shown) if shown else "no finished episode yet"


def _stored(cfg: RunConfig, summary: dict[str, Any], count: int, layout: RunLayout) -> str:
    """Where the rollouts are and how many; why none are, when the run ended before the first kept."""
    if not cfg.store.enabled:
        return "not stored (store.enabled: false)"
    if count:
        return f"{layout.rollouts}/ ({count} stored)"
    ended = f" at iteration {summary['iterations']}" if "iterations" in summary else ""
    return (
        f"none stored: the run ended{ended}, before the first iteration that store.every or "
        "store.budget keeps"
    )


def end_summary(
    cfg: RunConfig,
    summary: dict[str, Any],
    mlflow_run_id: str | None,
    mlflow_uri: str | None = None,
    experiment_id: str | None = None,
) -> str:
    """Lines printed after a run: final metrics, checkpoint, rollouts, curves, the next commands.

    ``mlflow_uri``/``experiment_id``: where the MLflow run is (``None`` without MLflow).
    """
    layout = RunLayout(cfg.run_dir)
    run = shlex.quote(str(layout.root))
    rollouts = layout.rollout_paths() if cfg.store.enabled else {}
    lines = [
        f"  final       {_final(summary)}",
        f"  checkpoint  {summary.get('checkpoint') or 'none written'}",
        f"  rollouts    {_stored(cfg, summary, len(rollouts), layout)}",
        f"  curves      {layout.curve} (one row per iteration), summary {layout.metrics}",
    ]
    if mlflow_run_id and mlflow_uri:
        lines.append(
            f"  MLflow      run {mlflow_run_id}: {ui_command(mlflow_uri)} → "
            f"{ui_url(mlflow_uri, experiment_id)}"
        )
    nexts = [  # replay needs stored rollouts: without them it would only refuse
        *([f"rlpipe replay {run}    # re-optimize the stored rollouts → {run}/reupdate"] if rollouts else []),
        f"rlpipe eval {run}      # fresh deterministic episodes → {run}/eval/metrics.json",
        f"rlpipe export {run}    # the policy as ONNX → {run}/export/policy.onnx",
    ]
    lines += [f"  {'next' if i == 0 else '':12s}{line}" for i, line in enumerate(nexts)]
    if cfg.tracking.backend == "mlflow":
        lines.append(
            f"              rlpipe compare --experiment {shlex.quote(cfg.trainer.exp_name)} "
            f"--plot {run}/curves.png"
        )
    return "\n".join(lines)
