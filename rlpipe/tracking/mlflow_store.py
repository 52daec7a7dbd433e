"""MLflow, the only module of rlpipe that imports it (lazily: ``tracking.backend: none`` never loads it).

Writing: :class:`MlflowRun` opens a run (params and tags), writes one metrics batch per iteration at
``step=env_steps``, then artifacts and the terminal status. It runs inside the tracking process
(:mod:`rlpipe.tracking.sink`), never in the training loop's process: the trainer hands its writes
to :class:`rlpipe.tracking.background.BackgroundRun`. Reading: :func:`search_runs` and
:func:`metric_history` for ``rlpipe compare``.

Importing this module costs only the standard library; config, torch and mlflow are loaded by the
functions that need them.
"""

from __future__ import annotations

import fcntl
import json
import logging
import math
import os
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlpipe.dvc.runs import project_root  # re-exported: where the default data/mlflow.db lives

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

    from rlpipe.config import RunConfig, TrackingCfg

__all__ = [
    "MlflowRun", "RunRecord", "TrackingError", "check_server", "git_tags", "metric_history",
    "preload", "project_root", "resolve_uri", "run_tags", "search_runs", "source_run_id",
]

PROBE_TIMEOUT_S = 3.0
"""How long an http(s) tracking server may take to answer the start-up probe."""
HTTP_ENV_DEFAULTS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_TIMEOUT": "10",
                     "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1"}
"""MLflow's defaults retry for minutes; a run should fail or degrade in seconds (the user's env wins)."""
MAX_PARAMS_PER_BATCH = 100
"""MLflow takes at most 100 params per ``log_batch``."""
MAX_METRICS_PER_BATCH = 1000
"""MLflow's limit on metrics per ``log_batch``."""


class TrackingError(ValueError):
    """A tracking problem the user can fix (bad URI, server down, unknown run); one line."""


# --- where the MLflow store is --------------------------------------------------------------------


def resolve_uri(cfg: TrackingCfg | None = None, root: Path | None = None) -> str:
    """``$MLFLOW_TRACKING_URI``, else ``tracking.uri``, else ``sqlite:///<project>/data/mlflow.db``.

    A relative SQLite path is made absolute against the project root; MLflow's file store
    (``file:``/a bare path) is refused by MLflow 3, so it is refused here with a clear message.
    """
    uri = os.environ.get("MLFLOW_TRACKING_URI") or (cfg.uri if cfg else None)
    root = root or project_root()
    if not uri:
        return f"sqlite:///{root / 'data' / 'mlflow.db'}"
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        return f"sqlite:///{root / uri.removeprefix('sqlite:///')}"
    if uri.startswith("file:") or ("://" not in uri and not uri.startswith("databricks")):
        raise TrackingError(f"tracking.uri: {uri!r} is an MLflow file store, which MLflow 3 refuses; "
                            "use sqlite:///path/to/mlflow.db or an http(s) server")
    return uri


def _sqlite_path(uri: str) -> Path | None:
    return Path(uri.removeprefix("sqlite:///")) if uri.startswith("sqlite:///") else None


def check_server(uri: str, timeout: float = PROBE_TIMEOUT_S) -> None:
    """Fail in seconds when an http(s) tracking server does not answer; other URIs pass."""
    if not uri.startswith(("http://", "https://")):
        return
    import requests

    for key, value in HTTP_ENV_DEFAULTS.items():
        os.environ.setdefault(key, value)
    try:
        requests.get(uri.rstrip("/") + "/health", timeout=timeout)
    except requests.RequestException as exc:
        raise TrackingError(f"tracking.uri: MLflow server {uri} does not answer "
                            f"({type(exc).__name__} after ≤{timeout:.0f}s); start it, fix the URI "
                            "or set tracking.backend: none") from None


def _client(uri: str) -> MlflowClient:
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    from mlflow.tracking import MlflowClient

    for name in ("mlflow", "alembic"):
        logging.getLogger(name).setLevel(logging.WARNING)
    # MLflow's own deprecation chatter (e.g. SQLAlchemy's on its store) is not the user's to fix.
    warnings.filterwarnings("ignore", module=r"mlflow(\.|$)")
    if (db := _sqlite_path(uri)) is None:
        return MlflowClient(tracking_uri=uri)
    db.parent.mkdir(parents=True, exist_ok=True)
    # Two processes opening a new database at once (`dvc queue start --jobs 2`) would both run
    # MLflow's schema migrations and one would fail; the first store access runs them, so hold a
    # lock beside the database for it. Later writes need nothing: SQLite waits (busy_timeout 20 s).
    with open(db.with_name(f"{db.name}.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        client = MlflowClient(tracking_uri=uri)
        client.search_experiments(max_results=1)
    return client


def _experiment_id(client: MlflowClient, name: str, uri: str) -> str:
    """Get or create experiment ``name``; artifacts of a SQLite store go beside the database.

    The experiment is tagged so that the MLflow UI opens on its runs with rlpipe's key columns.
    """
    from mlflow.exceptions import MlflowException

    from rlpipe.tracking.mlflow_view import experiment_tags

    exp = client.get_experiment_by_name(name)
    if exp is None:
        db = _sqlite_path(uri)
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


# --- one MLflow run ---------------------------------------------------------------------------------


def preload() -> None:
    """Import MLflow's client and SQL store now (a tracking process started ahead of its run)."""
    import mlflow.store.tracking.sqlalchemy_store  # noqa: F401
    from mlflow.tracking import MlflowClient  # noqa: F401


class MlflowRun:
    """One open MLflow run, written synchronously: metric batches, artifacts, terminal status.

    A failed write is reported once, in one line on stderr; the run then ends ``FAILED``.
    """

    def __init__(self, client: MlflowClient, run_id: str, experiment_id: str | None = None) -> None:
        self.client, self.run_id, self.experiment_id = client, run_id, experiment_id
        self.error: Exception | None = None
        self.ended = False

    @classmethod
    def start(cls, uri: str, experiment: str, params: dict[str, Any], tags: dict[str, str],
              run_name: str | None = None) -> MlflowRun:
        """Create the run in ``experiment`` (created if missing) and log ``params`` and ``tags``."""
        from mlflow.entities import Param

        check_server(uri)
        client = _client(uri)
        experiment_id = _experiment_id(client, experiment, uri)
        run = client.create_run(experiment_id, tags=tags, run_name=run_name)
        items = [Param(k, str(v)[:6000]) for k, v in params.items()]
        for i in range(0, len(items), MAX_PARAMS_PER_BATCH):
            client.log_batch(run.info.run_id, params=items[i:i + MAX_PARAMS_PER_BATCH])
        return cls(client, run.info.run_id, experiment_id)

    @classmethod
    def reopen(cls, uri: str, run_id: str) -> MlflowRun | None:
        """Set an existing run back to RUNNING (a resumed run continues it); ``None`` if it is gone."""
        client = _client(uri)
        try:
            info = client.get_run(run_id).info
        except Exception:  # deleted, or another store: the resume starts a new run
            return None
        if info.lifecycle_stage == "deleted":
            return None
        client.update_run(run_id, status="RUNNING")
        return cls(client, run_id, info.experiment_id)

    def log_metrics(self, metrics: dict[str, float], step: int, timestamp_ms: int | None = None) -> None:
        """Write one batch of the finite numeric ``metrics`` at ``step`` (one ``log_batch``)."""
        self.log_metric_rows([(metrics, step, timestamp_ms)])

    def log_metric_rows(self, rows: list[tuple[dict[str, float], int, int | None]]) -> None:
        """Write ``(metrics, step, timestamp_ms)`` rows in as few ``log_batch`` calls as MLflow allows.

        One SQLite transaction per call is most of a small run's tracking cost; the tracking process
        coalesces the iterations that arrive close together (:mod:`rlpipe.tracking.sink`).
        """
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        batch = [Metric(k, float(v), now if ts is None else int(ts), int(step))
                 for metrics, step, ts in rows for k, v in metrics.items()
                 if isinstance(v, int | float) and math.isfinite(v)]
        try:
            for i in range(0, len(batch), MAX_METRICS_PER_BATCH):
                self.client.log_batch(self.run_id, metrics=batch[i:i + MAX_METRICS_PER_BATCH])
        except Exception as exc:  # tracking trouble must not stop training
            self._warn("metrics write", exc)

    def _warn(self, what: str, exc: Exception) -> None:
        if self.error is None:
            print(f"Warning: MLflow {what} failed, the run will be marked FAILED: {exc}".splitlines()[0],
                  file=sys.stderr, flush=True)
        self.error = exc

    def log_artifact(self, path: Path, artifact_path: str | None = None) -> None:
        """Copy a file or folder into the run's artifacts (a failure is a warning, not a crash)."""
        try:
            self.client.log_artifact(self.run_id, str(path), artifact_path)
        except Exception as exc:
            self._warn(f"artifact upload of {path.name}", exc)

    def end(self, status: str = "FINISHED") -> None:
        """Set the terminal status (``FAILED`` after a failed write); idempotent."""
        if self.ended:
            return
        self.ended = True
        try:
            self.client.set_terminated(self.run_id, status=status if self.error is None else "FAILED")
        except Exception as exc:
            self._warn("end of run", exc)


def git_tags(cwd: Path) -> dict[str, str]:
    """``mlflow.source.git.commit`` and ``rlpipe.git_dirty`` of the repo at ``cwd`` (``{}`` outside one)."""
    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", "--no-optional-locks", *args], cwd=cwd, capture_output=True,
                                 text=True, timeout=10)
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


# --- reading runs back (rlpipe compare) -----------------------------------------------------------


@dataclass(frozen=True)
class RunRecord:
    """One MLflow run as ``rlpipe compare`` sees it (latest metric values, params, tags)."""

    run_id: str
    name: str
    experiment: str
    status: str
    start_ms: int
    end_ms: int | None
    params: dict[str, str]
    metrics: dict[str, float]
    tags: dict[str, str]

    @property
    def wall_s(self) -> float:
        """Seconds from start to end (to now while the run is still running)."""
        end = self.end_ms if self.end_ms else int(time.time() * 1000)
        return max(end - self.start_ms, 0) / 1000


def _open_store(uri: str | None) -> tuple[MlflowClient, str]:
    uri = uri or resolve_uri()
    db = _sqlite_path(uri)
    if db is not None and not db.is_file():
        raise TrackingError(f"no MLflow store at {db}; train first (rlpipe run) or set MLFLOW_TRACKING_URI")
    check_server(uri)
    return _client(uri), uri


def search_runs(uri: str | None = None, experiments: tuple[str, ...] = (),
                run_ids: tuple[str, ...] = ()) -> list[RunRecord]:
    """Runs of ``experiments`` (default: all) or exactly ``run_ids``, oldest first."""
    from mlflow.exceptions import MlflowException

    client, uri = _open_store(uri)
    names = {e.experiment_id: e.name for e in client.search_experiments()}
    if run_ids:
        try:
            runs = [client.get_run(run_id) for run_id in run_ids]
        except MlflowException as exc:
            raise TrackingError(f"--runs: {str(exc).splitlines()[0]}") from None
    else:
        runs = _all_runs(client, _experiment_ids(names, experiments))
    records = [_record(run, names) for run in runs]
    return sorted(records, key=lambda r: r.start_ms)


def _experiment_ids(names: dict[str, str], wanted: tuple[str, ...]) -> list[str]:
    if not wanted:
        return list(names)
    ids = {name: exp_id for exp_id, name in names.items()}
    for name in wanted:
        if name not in ids:
            raise TrackingError(f"--experiment: no experiment {name!r}; accepted: {', '.join(sorted(ids))}")
    return [ids[name] for name in wanted]


def _all_runs(client: MlflowClient, experiment_ids: list[str]) -> list[Any]:
    runs: list[Any] = []
    token: str | None = None
    while True:
        page = client.search_runs(experiment_ids, max_results=1000, page_token=token)
        runs.extend(page)
        token = page.token
        if not token:
            return runs


def _record(run: Any, names: dict[str, str]) -> RunRecord:
    info, data = run.info, run.data
    return RunRecord(info.run_id, info.run_name or info.run_id[:8], names.get(info.experiment_id, "?"),
                     info.status, int(info.start_time or 0), info.end_time, dict(data.params),
                     dict(data.metrics), dict(data.tags))


def metric_history(uri: str | None, run_ids: list[str], key: str) -> dict[str, list[tuple[int, float]]]:
    """``{run_id: [(step, value), ...]}`` of one metric, by step (step = env steps for training runs)."""
    client, _ = _open_store(uri)
    return {run_id: sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))
            for run_id in run_ids}
