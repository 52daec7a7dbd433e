"""The :class:`Tracker` the trainer talks to: console row, ``curve.csv`` and MLflow, once per iteration."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlpipe.artifacts.fs import AnyPath, as_path
from rlpipe.tracking import signals
from rlpipe.tracking.background import BackgroundRun
from rlpipe.tracking.console import ConsoleTable, MetricsFiles, flatten_params
from rlpipe.tracking.mlflow_view import run_line

if TYPE_CHECKING:
    from rich.console import Console

    from rlpipe.config import RunConfig

__all__ = ["Tracker", "log_run_files", "log_single_run", "open_tracker", "start_run"]


class Tracker:
    """Console + files + (optionally) MLflow, behind one ``log`` call per iteration.

    The MLflow run (a :class:`BackgroundRun`) is written by the tracking process: ``log`` only
    queues, and ``finish`` flushes. While the tracker is open, SIGTERM unwinds like Ctrl-C so
    the run's queued metrics are written (:mod:`rlpipe.tracking.signals`).
    """

    def __init__(
        self,
        cfg: RunConfig,
        run_dir: Path,
        console: Console | None = None,
        mlflow_run: BackgroundRun | None = None,
        curve_fields: list[str] | None = None,
        silent: bool = False,
        progress: bool = True,
    ) -> None:
        self.cfg = cfg
        self.silent = silent
        """A silent tracker (ranks other than 0) prints no rows and writes no file and no MLflow run."""
        self.table = ConsoleTable(console, total=cfg.trainer.iterations if progress else None)
        """``progress``: a bar of ``trainer.iterations`` on a terminal (training runs only)."""
        self.files = MetricsFiles(run_dir, curve_fields)
        self.mlflow = mlflow_run
        self._link_pending = False
        """:meth:`announce_mlflow` found the run still opening: its line comes before the next row."""
        self._restore_signals = signals.install() if mlflow_run is not None else (lambda: None)

    @property
    def mlflow_run_id(self) -> str | None:
        """The MLflow run id (waits for the run to open); ``None`` without MLflow or when it failed."""
        return self.mlflow.run_id if self.mlflow is not None else None

    @classmethod
    def silent_tracker(cls, cfg: RunConfig, run_dir: Path) -> Tracker:
        """The tracker of a rank other than 0: rank 0 logs for the run."""
        return cls(cfg, run_dir, silent=True)

    def log(self, metrics: dict[str, float], step: int) -> None:
        """Record one iteration's metrics at ``step`` env steps.

        MLflow, then ``curve.csv``, then the screen: a row on screen means the iteration is in
        ``curve.csv`` and queued for MLflow (what a run stopped by SIGTERM keeps).
        """
        if self.silent:
            return
        if self.mlflow is not None:
            self.mlflow.log_metrics(metrics, step)
        self.files.append_curve(metrics)
        if self._link_pending:
            self._say_mlflow_link()
        self.table.row(metrics)

    def announce_mlflow(self) -> None:
        """Say where the MLflow run is, without waiting for it to open.

        Its line (id, ``mlflow ui``, link) when open, else that it is opening: its line then comes
        before the first row after it opened.
        """
        if self.silent or self.mlflow is None:
            return
        if self.mlflow.ready:
            self._say_mlflow_link(opened_late=False)
            return
        self._link_pending = True
        self.table.console.print(
            f"  MLflow  opening a run in experiment {self.cfg.trainer.exp_name} at "
            f"{self.mlflow.uri}; its link follows once it is open"
        )

    def _say_mlflow_link(self, opened_late: bool = True) -> None:
        """The run's line once it is open.

        A run that failed to open was warned about by the tracking process; at the start
        (``opened_late`` false) the line then names where the metrics go instead.
        """
        if self.mlflow is None or not self.mlflow.ready:
            return
        self._link_pending = False
        if (run_id := self.mlflow.run_id) is not None:
            self.table.console.print(
                run_line(self.cfg.trainer.exp_name, run_id, self.mlflow.uri, self.mlflow.experiment_id)
            )
        elif not opened_late:
            self.table.console.print(
                f"  MLflow  not opened (see the warning above); metrics in {self.files.curve_path}"
            )

    def log_artifact(self, path: AnyPath, artifact_path: str | None = None) -> None:
        """Copy file ``path`` into the MLflow run's artifacts under ``artifact_path`` (no-op without one)."""
        if self.mlflow is not None:
            self.mlflow.log_artifact(as_path(path), artifact_path)

    def finish(self, summary: dict[str, Any], status: str = "FINISHED") -> None:
        """Write ``metrics.json`` (with the MLflow run id); log params YAML and checkpoint; end the run.

        ``status``: the MLflow run's end status (``KILLED`` for a run stopped by a signal).
        """
        if self.silent:
            return
        self.table.close()
        self.files.write_summary({**summary, "mlflow_run_id": self.mlflow_run_id})
        if self.mlflow is None:
            return
        try:
            log_run_files(self.mlflow, self.cfg, self.files.metrics_path, summary.get("checkpoint"))
        finally:
            self._end(status)

    def end(self, status: str) -> None:
        """End the MLflow run with ``status`` (``FAILED``, ``KILLED``) without a summary; idempotent."""
        self.table.close()
        if self.mlflow is not None:
            self._end(status)

    def _end(self, status: str) -> None:
        assert self.mlflow is not None
        self.table.close()
        try:
            self.mlflow.end(status)
        finally:
            self._restore_signals()

    def __enter__(self) -> Tracker:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        """End the MLflow run: ``KILLED`` on Ctrl-C/SIGTERM, ``FAILED`` on an error, else ``FINISHED``."""
        self.table.close()
        if self.mlflow is None:
            return
        interrupted = exc_type is not None and issubclass(exc_type, KeyboardInterrupt | SystemExit)
        self._end("KILLED" if interrupted else "FAILED" if exc_type else "FINISHED")


def log_run_files(
    run: BackgroundRun, cfg: RunConfig, metrics_path: AnyPath | None, checkpoint: str | AnyPath | None
) -> None:
    """Artifacts of a run: the resolved params (``params.yaml``), ``metrics.json``, the checkpoint."""
    import yaml

    run.log_text("params.yaml", yaml.safe_dump(cfg.to_dict(), sort_keys=False))
    if metrics_path is not None and metrics_path.is_file():
        run.log_artifact(metrics_path)
    if checkpoint and as_path(checkpoint).is_file():
        run.log_artifact(as_path(checkpoint), "checkpoints")


def start_run(
    cfg: RunConfig,
    run_dir: Path,
    kind: str = "train",
    run_name: str | None = None,
    source_run: str | None = None,
    run_id: str | None = None,
) -> BackgroundRun | None:
    """Start the MLflow run ``cfg.tracking`` asks for (``None`` for ``backend: none``); returns at once.

    The URI is checked here (a file store is refused, an http server must answer within seconds);
    the run is opened by the tracking process.
    """
    if cfg.tracking.backend != "mlflow":
        return None
    from rlpipe.tracking.mlflow_runs import run_tags
    from rlpipe.tracking.mlflow_store import check_server, resolve_uri

    uri = resolve_uri(cfg.tracking)
    check_server(uri)
    # Our own default name: MLflow's "adjective-animal-N" is not informative.
    name = run_name or os.environ.get("DVC_EXP_NAME") or f"{kind}-{time.strftime('%Y%m%d-%H%M%S')}"
    return BackgroundRun.start(
        uri,
        cfg.trainer.exp_name,
        flatten_params(cfg.to_dict()),
        run_tags(cfg, run_dir, kind, source_run),
        run_name=name,
        run_id=run_id,
    )


def open_tracker(
    cfg: RunConfig,
    run_dir: Path,
    *,
    run_name: str | None = None,
    parent_run_id: str | None = None,
    kind: str = "train",
    curve_fields: list[str] | None = None,
    run_id: str | None = None,
) -> Tracker:
    """The tracker ``cfg.tracking`` asks for; ``parent_run_id`` tags replay runs with their source.

    ``curve_fields``: the columns of a kept ``curve.csv`` that a resumed run appends to; ``run_id``:
    an MLflow run to reopen (a resumed run continues its own).
    """
    from rich.console import Console

    console = Console(highlight=False, soft_wrap=True, file=sys.stdout)
    return Tracker(
        cfg,
        run_dir,
        console,
        start_run(cfg, run_dir, kind, run_name, parent_run_id, run_id),
        curve_fields,
        progress=kind == "train",
    )


def log_single_run(
    cfg: RunConfig,
    metrics: dict[str, float],
    *,
    run_dir: Path,
    kind: str = "eval",
    run_name: str | None = None,
    parent_run_id: str | None = None,
    step: int = 0,
    checkpoint: Path | None = None,
    artifacts: dict[str, Path] | None = None,
) -> str | None:
    """One-shot MLflow run (e.g. an evaluation): metrics at ``step``, params, tags; returns its id.

    ``artifacts`` maps an artifact folder to a file logged into it (e.g. ``{"eval": video}``).
    """
    run = start_run(cfg, run_dir, kind, run_name, parent_run_id)
    if run is None:
        return None
    try:
        run.log_metrics(metrics, step)
        log_run_files(run, cfg, None, checkpoint)
        for folder, path in (artifacts or {}).items():
            run.log_artifact(as_path(path), folder)
    finally:
        run.end("FINISHED")
    return run.run_id
