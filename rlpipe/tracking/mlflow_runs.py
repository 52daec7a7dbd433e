"""Writing MLflow runs: open one, log params, metrics and artifacts, end it.

:class:`MlflowRun` opens a run (params and tags), writes one metrics batch per iteration at
``step=env_steps``, then artifacts and the terminal status. It runs inside the tracking process
(:mod:`rlpipe.tracking.sink`), never in the training loop's process: the trainer hands its writes
to :class:`rlpipe.tracking.background.BackgroundRun`. Importing this module costs only the
standard library; config, torch and mlflow are loaded by the functions that need them.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlpipe.tracking.mlflow_store import check_server, open_client, sqlite_path
from rlpipe.tracking.store_lock import LockWait, StillLockedError, say

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

    from rlpipe.config import RunConfig

__all__ = [
    "MetricRow",
    "MlflowRun",
    "RunWriter",
    "open_experiment",
    "git_tags",
    "preload",
    "run_tags",
    "source_run_id",
    "store_name",
]

MAX_PARAMS_PER_BATCH = 100
"""MLflow takes at most 100 params per ``log_batch``."""
MAX_METRICS_PER_BATCH = 1000
"""MLflow's limit on metrics per ``log_batch``."""


def open_experiment(client: MlflowClient, name: str, uri: str) -> str:
    """Get or create experiment ``name``; artifacts of a SQLite store go beside the database.

    The experiment is tagged so that the MLflow UI opens on its runs with rlpipe's key columns.
    """
    from mlflow.exceptions import MlflowException

    from rlpipe.tracking.mlflow_view import experiment_tags

    exp = client.get_experiment_by_name(name)
    if exp is None:
        db = sqlite_path(uri)
        location = str(db.parent / "mlartifacts" / name) if db else None
        try:
            return client.create_experiment(name, artifact_location=location, tags=experiment_tags(name))
        except MlflowException:  # created meanwhile by a parallel run (dvc exp run --queue -j N)
            exp = client.get_experiment_by_name(name)
            if exp is None:
                raise
    if exp.lifecycle_stage == "deleted":
        client.restore_experiment(exp.experiment_id)
    _tag_experiment(client, exp.experiment_id, name, exp.tags)
    return exp.experiment_id


def _tag_experiment(client: MlflowClient, experiment_id: str, name: str, tags: dict[str, str]) -> None:
    """Set the tags that open the UI on the runs view with rlpipe's columns (:mod:`.mlflow_view`)."""
    from rlpipe.tracking.mlflow_view import experiment_tags

    for key, value in experiment_tags(name).items():
        if tags.get(key) != value:
            try:
                client.set_experiment_tag(experiment_id, key, value)
            except Exception:  # a view nicety: never a reason to lose the run
                return


def preload() -> None:
    """Import MLflow's client and SQL store now (a tracking process started ahead of its run)."""
    import mlflow.store.tracking.sqlalchemy_store  # noqa: F401
    from mlflow.tracking import MlflowClient  # noqa: F401


MetricRow = tuple[str, float, int, int]
"""``(key, value, timestamp_ms, step)``: one metric value as a run writes it."""


class RunWriter:
    """What both writers of an open run share: metrics in MLflow's batches, waits on a lock, warnings.

    :class:`MlflowRun` writes through MLflow's client, :class:`rlpipe.tracking.mlflow_sqlite.SqliteRun`
    straight into a SQLite store; each writes one batch of rows (:meth:`_write_metrics`), one
    artifact (:meth:`_write_artifact`) and the terminal status (:meth:`_write_end`). Every write
    goes through the run's :class:`~rlpipe.tracking.store_lock.LockWait`: one that finds the store
    locked by another process is retried, in order, until the lock goes (a bounded time once the
    run has ended; what is then unwritten is said in one line and the run directory keeps it). A
    lock never fails the run. Any other failed write is reported once, in one line on stderr; the
    run then ends ``FAILED``.
    """

    def __init__(self, run_id: str, experiment_id: str | None, wait: LockWait) -> None:
        self.run_id, self.experiment_id = run_id, experiment_id
        self.wait = wait
        self.error: Exception | None = None
        self.ended = False

    def log_metrics(self, metrics: dict[str, float], step: int, timestamp_ms: int | None = None) -> None:
        """Write one batch of the finite numeric ``metrics`` at ``step``."""
        self.log_metric_rows([(metrics, step, timestamp_ms)])

    def log_metric_rows(self, rows: list[tuple[dict[str, float], int, int | None]]) -> None:
        """Write ``(metrics, step, timestamp_ms)`` rows in as few batches as MLflow allows.

        One SQLite transaction per batch is most of a small run's tracking cost; the tracking process
        coalesces the iterations that arrive close together (:mod:`rlpipe.tracking.sink`).
        """
        now = int(time.time() * 1000)
        batch = [
            (k, float(v), now if ts is None else int(ts), int(step))
            for metrics, step, ts in rows
            for k, v in metrics.items()
            if isinstance(v, int | float) and math.isfinite(v)
        ]
        for i in range(0, len(batch), MAX_METRICS_PER_BATCH):
            chunk = batch[i : i + MAX_METRICS_PER_BATCH]
            steps = [row[3] for row in chunk]
            self._attempt(
                "metrics write",
                partial(self._write_metrics, chunk),
                partial(self.wait.unwritten.metrics, len(chunk), min(steps), max(steps)),
            )

    def log_artifact(self, path: Path, artifact_path: str | None = None) -> None:
        """Copy a file or folder into the run's artifacts (a failure is a warning, not a crash)."""
        self._attempt(
            f"artifact upload of {path.name}",
            partial(self._write_artifact, path, artifact_path),
            partial(self.wait.unwritten.artifacts.append, path.name),
        )

    def end(self, status: str = "FINISHED") -> None:
        """Set the terminal status (``FAILED`` after a failed write); idempotent.

        A lock is waited out for a bounded time from here on; what it still keeps out is said in one
        line. ``status`` is kept whatever a lock did: training that finished stays ``FINISHED``.
        """
        if self.ended:
            return
        self.ended = True
        self.wait.ending()
        final = status if self.error is None else "FAILED"
        self._attempt(
            "end of run", partial(self._write_end, final), partial(setattr, self.wait.unwritten, "end", final)
        )
        self.wait.report()

    def _attempt(self, what: str, write: Callable[[], None], unwritten: Callable[[], None]) -> None:
        """``write()`` through the lock wait; a lock outlasting the run calls ``unwritten()``."""
        try:
            self.wait.call(write)
        except StillLockedError:
            unwritten()
        except Exception as exc:  # tracking trouble must not stop training
            self._warn(what, exc)

    def _write_metrics(self, batch: list[MetricRow]) -> None:
        """Write at most ``MAX_METRICS_PER_BATCH`` rows, as one MLflow ``log_batch`` does."""
        raise NotImplementedError

    def _write_artifact(self, path: Path, artifact_path: str | None) -> None:
        """Copy file or folder ``path`` under ``artifact_path`` of the run's artifacts."""
        raise NotImplementedError

    def _write_end(self, status: str) -> None:
        """Write the terminal ``status`` and the end time."""
        raise NotImplementedError

    def _warn(self, what: str, exc: Exception) -> None:
        if self.error is None:
            say(f"Warning: MLflow {what} failed, the run will be marked FAILED: {exc}")
        self.error = exc


def store_name(uri: str) -> str:
    """How warnings name the store of ``uri``: its database file, else the URI."""
    return str(sqlite_path(uri) or uri)


class MlflowRun(RunWriter):
    """One open MLflow run, written synchronously through MLflow's client: metrics, artifacts, status."""

    def __init__(
        self,
        client: MlflowClient,
        run_id: str,
        experiment_id: str | None = None,
        wait: LockWait | None = None,
    ) -> None:
        uri = getattr(client, "tracking_uri", "")  # a stand-in client may have none
        super().__init__(run_id, experiment_id, wait or LockWait(store_name(uri)))
        self.client = client

    @classmethod
    def start(
        cls,
        uri: str,
        experiment: str,
        params: dict[str, Any],
        tags: dict[str, str],
        run_name: str | None = None,
        wait: LockWait | None = None,
    ) -> MlflowRun:
        """Create the run in ``experiment`` (created if missing) and log ``params`` and ``tags``.

        Each store call waits out a lock on its own (``wait``), so none is made twice.
        """
        from mlflow.entities import Param

        wait = wait or LockWait(store_name(uri))
        check_server(uri)
        client = wait.call(partial(open_client, uri))
        experiment_id = wait.call(partial(open_experiment, client, experiment, uri))
        run = wait.call(partial(client.create_run, experiment_id, tags=tags, run_name=run_name))
        items = [Param(k, str(v)[:6000]) for k, v in params.items()]
        for i in range(0, len(items), MAX_PARAMS_PER_BATCH):
            wait.call(partial(client.log_batch, run.info.run_id, params=items[i : i + MAX_PARAMS_PER_BATCH]))
        return cls(client, run.info.run_id, experiment_id, wait)

    @classmethod
    def reopen(cls, uri: str, run_id: str, wait: LockWait | None = None) -> MlflowRun | None:
        """Set an existing run back to RUNNING (a resumed run continues it); ``None`` if it is gone."""
        wait = wait or LockWait(store_name(uri))
        client = wait.call(partial(open_client, uri))
        try:
            info = wait.call(partial(client.get_run, run_id)).info
        except StillLockedError:
            raise
        except Exception:  # deleted, or another store: the resume starts a new run
            return None
        if info.lifecycle_stage == "deleted":
            return None
        wait.call(partial(client.update_run, run_id, status="RUNNING"))
        return cls(client, run_id, info.experiment_id, wait)

    def _write_metrics(self, batch: list[MetricRow]) -> None:
        """One ``log_batch`` of ``batch``."""
        from mlflow.entities import Metric

        self.client.log_batch(self.run_id, metrics=[Metric(k, v, ts, step) for k, v, ts, step in batch])

    def _write_artifact(self, path: Path, artifact_path: str | None) -> None:
        self.client.log_artifact(self.run_id, str(path), artifact_path)

    def _write_end(self, status: str) -> None:
        self.client.set_terminated(self.run_id, status=status)


def git_tags(cwd: Path) -> dict[str, str]:
    """``mlflow.source.git.commit`` and ``rlpipe.git_dirty`` of the repo at ``cwd`` (``{}`` outside one)."""

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(
                ["git", "--no-optional-locks", *args], cwd=cwd, capture_output=True, text=True, timeout=10
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return {}
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return {"mlflow.source.git.commit": commit, "rlpipe.git_dirty": str(bool(dirty)).lower()}


def run_tags(cfg: RunConfig, run_dir: Path, kind: str, source_run: str | None) -> dict[str, str]:
    """Tags of every rlpipe run but the git ones: params hash, rollout store, version, DVC exp.

    The git tags (:func:`git_tags`, two ``git`` calls) are added by the tracking process.
    """
    from rlpipe.config import params_hash
    from rlpipe.version import __version__

    tags = {
        "rlpipe.kind": kind,
        "rlpipe.params_hash": params_hash(cfg),
        "rlpipe.version": __version__,
        "rlpipe.run_dir": str(run_dir.resolve()),
        "rlpipe.rollout_store": str((cfg.run_dir / "rollouts").resolve()) if cfg.store.enabled else "none",
        "rlpipe.world_size": str(_world_size()),
    }
    if os.environ.get("DVC_EXP_NAME"):
        tags["rlpipe.dvc_exp_name"] = os.environ["DVC_EXP_NAME"]
    if source_run:
        tags["rlpipe.source_run_id"] = source_run
    tags |= {f"rlpipe.{key}": value for key, value in cfg.algorithm.cfg.lineage().items()}
    return tags


def _world_size() -> int:
    """torch.distributed's world size when torch is loaded and a group is up, else 1 (no torch import)."""
    if "torch" not in sys.modules:
        return 1
    from rlpipe.runtime.distributed import world_size

    return world_size()


def source_run_id(run_dir: Path) -> str | None:
    """The MLflow run id recorded in ``<run_dir>/metrics.json`` (what replay/eval runs point back to)."""
    try:
        return json.loads((run_dir / "metrics.json").read_text()).get("mlflow_run_id")
    except (OSError, ValueError):
        return None
