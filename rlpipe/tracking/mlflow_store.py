"""The MLflow store: where it is, whether it answers, and a client on it.

One of the three modules of rlpipe that import mlflow, all lazily (``tracking.backend: none`` never
loads it): this one connects, :mod:`rlpipe.tracking.mlflow_runs` writes runs (in the tracking
process, never the training loop's) and :mod:`rlpipe.tracking.mlflow_query` reads them back for
``rlpipe compare``. :mod:`rlpipe.tracking.mlflow_sqlite` writes runs into a SQLite store without
importing mlflow (a fast path, where it writes what MLflow would). Importing this module costs only
the standard library.
"""

from __future__ import annotations

import fcntl
import logging
import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from rlpipe.dvc.runs import project_root  # re-exported: where the default data/mlflow.db lives
from rlpipe.tracking.store_lock import is_locked

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

    from rlpipe.config import TrackingCfg

__all__ = ["TrackingError", "check_server", "open_client", "project_root", "resolve_uri", "sqlite_path"]

PROBE_TIMEOUT_S = 3.0
"""How long an http(s) tracking server may take to answer the start-up probe."""
HTTP_ENV_DEFAULTS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "10",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
}
"""MLflow's defaults retry for minutes; a run should fail or degrade in seconds (the user's env wins)."""


class TrackingError(ValueError):
    """A tracking problem the user can fix (bad URI, server down, unknown run); one line."""


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
        raise TrackingError(
            f"tracking.uri: {uri!r} is an MLflow file store, which MLflow 3 refuses; "
            "use sqlite:///path/to/mlflow.db or an http(s) server"
        )
    return uri


class _LockTracebacks(logging.Filter):
    """Drops MLflow's traceback of a store locked by another process: rlpipe waits, says it in one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and is_locked(record.exc_info[1]))


def sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI; ``None`` for other stores."""
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
        raise TrackingError(
            f"tracking.uri: MLflow server {uri} does not answer "
            f"({type(exc).__name__} after ≤{timeout:.0f}s); start it, fix the URI "
            "or set tracking.backend: none"
        ) from None


def open_client(uri: str) -> MlflowClient:
    """An MLflow client on ``uri``, quiet; a new SQLite database is created (and migrated) under a lock."""
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    from mlflow.tracking import MlflowClient

    for name in ("mlflow", "alembic"):
        logging.getLogger(name).setLevel(logging.WARNING)
    sessions = logging.getLogger("mlflow.store.db.utils")
    if not any(isinstance(f, _LockTracebacks) for f in sessions.filters):
        sessions.addFilter(_LockTracebacks())
    # MLflow's own deprecation chatter (e.g. SQLAlchemy's on its store) is not the user's to fix.
    warnings.filterwarnings("ignore", module=r"mlflow(\.|$)")
    if (db := sqlite_path(uri)) is None:
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
