"""The :class:`Tracker` the pipeline talks to: console row, ``curve.csv`` and MLflow, once per iteration."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console

from rlpipe.config import RunConfig
from rlpipe.tracking.console import ConsoleTable, MetricsFiles
from rlpipe.tracking.mlflow_store import MlflowRun, start_run

__all__ = ["Tracker", "log_run_files", "log_single_run", "open_tracker"]


class Tracker:
    """Console + files + (optionally) MLflow, behind one ``log`` call per iteration."""

    def __init__(self, cfg: RunConfig, run_dir: Path, console: Console | None = None,
                 mlflow_run: MlflowRun | None = None, curve_fields: list[str] | None = None,
                 silent: bool = False) -> None:
        self.cfg = cfg
        self.silent = silent
        """A silent tracker (ranks other than 0) prints no rows and writes no file and no MLflow run."""
        self.table = ConsoleTable(console)
        self.files = MetricsFiles(run_dir, curve_fields)
        self.mlflow = mlflow_run
        self.mlflow_run_id: str | None = mlflow_run.run_id if mlflow_run else None

    @classmethod
    def silent_tracker(cls, cfg: RunConfig, run_dir: Path) -> Tracker:
        """The tracker of a rank other than 0: rank 0 logs for the run."""
        return cls(cfg, run_dir, silent=True)

    def log(self, metrics: dict[str, float], step: int) -> None:
        """Record one iteration's metrics at ``step`` env steps."""
        if self.silent:
            return
        self.table.row(metrics)
        self.files.append_curve(metrics)
        if self.mlflow is not None:
            self.mlflow.log_metrics(metrics, step)

    def finish(self, summary: dict[str, Any]) -> None:
        """Write ``metrics.json`` (with the MLflow run id); log params YAML and checkpoint; end the run."""
        if self.silent:
            return
        self.files.write_summary({**summary, "mlflow_run_id": self.mlflow_run_id})
        if self.mlflow is None:
            return
        try:
            log_run_files(self.mlflow, self.cfg, self.files.metrics_path, summary.get("checkpoint"))
        finally:
            self.mlflow.end("FINISHED")

    def __enter__(self) -> Tracker:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: Any) -> None:
        """Mark the MLflow run ``FAILED`` when the body raised (``finish`` ends it otherwise)."""
        if self.mlflow is not None:
            self.mlflow.end("FAILED" if exc_type else "FINISHED")


def log_run_files(run: MlflowRun, cfg: RunConfig, metrics_path: Path | None,
                  checkpoint: str | Path | None) -> None:
    """Artifacts of a run: the resolved params (``params.yaml``), ``metrics.json``, the checkpoint."""
    with tempfile.TemporaryDirectory() as tmp:
        resolved = Path(tmp) / "params.yaml"
        resolved.write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False))
        run.log_artifact(resolved)
    if metrics_path is not None and metrics_path.is_file():
        run.log_artifact(metrics_path)
    if checkpoint and Path(checkpoint).is_file():
        run.log_artifact(Path(checkpoint), "checkpoints")


def open_tracker(cfg: RunConfig, run_dir: Path, *, run_name: str | None = None,
                 parent_run_id: str | None = None, kind: str = "train",
                 curve_fields: list[str] | None = None) -> Tracker:
    """The tracker ``cfg.tracking`` asks for; ``parent_run_id`` tags replay runs with their source.

    ``curve_fields``: the columns of a kept ``curve.csv`` that a resumed run appends to.
    """
    console = Console(highlight=False, soft_wrap=True, file=sys.stdout)
    return Tracker(cfg, run_dir, console, start_run(cfg, run_dir, kind, run_name, parent_run_id),
                   curve_fields)


def log_single_run(cfg: RunConfig, metrics: dict[str, float], *, run_dir: Path, kind: str = "eval",
                   run_name: str | None = None, parent_run_id: str | None = None, step: int = 0,
                   checkpoint: Path | None = None) -> str | None:
    """One-shot MLflow run (e.g. an evaluation): metrics at ``step``, params, tags; returns its id."""
    run = start_run(cfg, run_dir, kind, run_name, parent_run_id)
    if run is None:
        return None
    try:
        run.log_metrics(metrics, step)
        log_run_files(run, cfg, None, checkpoint)
    finally:
        run.end("FINISHED")
    return run.run_id
