"""MLflow runs written straight into a SQLite tracking store, without importing MLflow.

Library call: :class:`rlpipe.tracking.mlflow_runs.MlflowRun` (MLflow's ``MlflowClient`` on its
``SqlAlchemyStore`` and ``LocalArtifactRepository``). Fast path: :class:`SqliteRun`, the same calls
writing the same rows — ``runs``, ``tags``, ``params``, ``metrics``, ``latest_metrics`` and
rlpipe's experiment tags — and copying artifacts the way MLflow's local artifact repository does
(:mod:`rlpipe.tracking.mlflow_artifacts`).
Importing MLflow, SQLAlchemy and alembic and opening the store cost the tracking process about two
CPU-seconds per run, which a small run's training needs.

:func:`can_write` serves a run only where the result is known to be MLflow's: ``rlpipe.fast`` is on,
the store is an existing ``sqlite:///`` database whose schema is the head of the installed MLflow
version (:data:`SCHEMA_HEADS`), and the experiment exists, is active and keeps its artifacts in a
plain local folder. Anything else (a new database or experiment, a deleted experiment, a server,
another MLflow version) is MLflow's own path. Only the standard library is imported here.
"""

from __future__ import annotations

import importlib.metadata
import os
import posixpath
import re
import sqlite3
import time
import uuid
from collections.abc import Iterator
from contextlib import closing, contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from rlpipe import fast
from rlpipe.tracking.mlflow_artifacts import copy_artifact
from rlpipe.tracking.mlflow_runs import MAX_PARAMS_PER_BATCH, MetricRow, RunWriter
from rlpipe.tracking.mlflow_store import sqlite_path
from rlpipe.tracking.mlflow_view import experiment_tags
from rlpipe.tracking.store_lock import LockWait, is_locked

__all__ = ["BUSY_TIMEOUT_S", "SCHEMA_HEADS", "SqliteRun", "can_write", "serves"]

SCHEMA_HEADS = {"3.17.2": "dc11669786a5"}
"""Installed MLflow version → the head of its database migrations (``alembic_version``)."""
RUN_NAME_TAG, USER_TAG = "mlflow.runName", "mlflow.user"
BUSY_TIMEOUT_S = 20.0
"""How long one statement waits inside SQLite for another process's lock (MLflow's busy timeout).

A lock held longer is waited out by :class:`~rlpipe.tracking.store_lock.LockWait`.
"""
MAX_KEY_LENGTH = 250
"""MLflow's limit on param, metric and tag keys."""
_NAME = re.compile(r"^[/\w.\- :]*$")
"""The characters MLflow allows in param and metric names (POSIX)."""
_WORKSPACE_ENV = (
    "MLFLOW_ENABLE_WORKSPACES",
    "MLFLOW_WORKSPACE",
    "MLFLOW_ACTIVE_MODEL_ID",
    "_MLFLOW_ACTIVE_MODEL_ID",
)
"""MLflow settings that change what a run's writes touch: MLflow's path serves runs under them."""


def _schema_head() -> str | None:
    try:
        return SCHEMA_HEADS.get(importlib.metadata.version("mlflow"))
    except importlib.metadata.PackageNotFoundError:
        return None


def _connect(db: Path) -> sqlite3.Connection:
    """A connection that waits for other writers as MLflow's does; transactions are explicit."""
    conn = sqlite3.connect(db, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


@contextmanager
def _transaction(db: Path) -> Iterator[sqlite3.Connection]:
    """One write transaction (taken at once, so parallel runs wait instead of failing)."""
    with closing(_connect(db)) as conn:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")


def _local_folder(location: str | None) -> bool:
    """An absolute local path MLflow would use as it is (no URI scheme, nothing it would unquote)."""
    return location is not None and location.startswith("/") and not any(c in location for c in "%?#\\")


def can_write(uri: str, experiment: str) -> bool:
    """Whether :class:`SqliteRun` writes a run of ``experiment`` on ``uri`` exactly as MLflow would.

    A store locked by another process raises SQLite's error (the caller waits it out) rather than
    answering no: the answer must not depend on when a backup runs.
    """
    db = sqlite_path(uri)
    head = _schema_head()
    if not fast.ENABLED or db is None or head is None or not db.is_file():
        return False
    if any(os.environ.get(name) for name in _WORKSPACE_ENV):
        return False
    try:
        with closing(
            sqlite3.connect(f"{db.absolute().as_uri()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S)
        ) as conn:
            if conn.execute("SELECT version_num FROM alembic_version").fetchall() != [(head,)]:
                return False
            if conn.execute("SELECT 1 FROM experiments WHERE workspace != 'default'").fetchone():
                return False  # MLflow refuses such a store without workspaces
            if not conn.execute("SELECT 1 FROM experiments WHERE experiment_id = 0").fetchone():
                return False  # MLflow would create its Default experiment first
            row = conn.execute(
                "SELECT lifecycle_stage, artifact_location FROM experiments WHERE name = ?", (experiment,)
            ).fetchone()
    except sqlite3.Error as exc:
        if is_locked(exc):
            raise
        return False
    return row is not None and row[0] == "active" and _local_folder(row[1])


def serves(message: dict[str, Any]) -> bool:
    """Whether the tracking process's ``open`` message is served by :class:`SqliteRun`.

    Besides :func:`can_write`: the run is named (MLflow would draw a random name), and a run to
    reopen is gone or keeps its artifacts in a plain local folder. A locked store raises, as there.
    """
    uri, run_name = message["uri"], message.get("run_name") or message.get("tags", {}).get(RUN_NAME_TAG)
    if not run_name or not can_write(uri, message["experiment"]):
        return False
    if not message.get("run_id"):
        return True
    db = sqlite_path(uri)
    assert db is not None
    try:
        with closing(_connect(db)) as conn:
            row = conn.execute(
                "SELECT artifact_uri FROM runs WHERE run_uuid = ?", (message["run_id"],)
            ).fetchone()
    except sqlite3.Error as exc:
        if is_locked(exc):
            raise
        return False
    return row is None or _local_folder(row[0])


def _check_name(kind: str, name: str) -> None:
    """MLflow's checks on a param or metric key (characters, path-like uniqueness, length)."""
    norm = posixpath.normpath(name)
    if not _NAME.match(name):
        raise ValueError(
            f"Invalid {kind} name {name!r}: names may only contain alphanumerics, _ - . : / and spaces"
        )
    if norm != name or norm == "." or norm.startswith(("..", "/")):
        raise ValueError(f"Invalid {kind} name {name!r}: it would resolve to {norm!r} as a path")
    if len(name) > MAX_KEY_LENGTH:
        raise ValueError(f"{kind} name {name[:40]!r}… exceeds the maximum length of {MAX_KEY_LENGTH}")


def _active_run(conn: sqlite3.Connection, run_id: str) -> tuple[str, str]:
    """``(experiment_id, artifact_uri)`` of run ``run_id``; an error when it is missing or deleted."""
    row = conn.execute(
        "SELECT lifecycle_stage, experiment_id, artifact_uri FROM runs WHERE run_uuid = ?", (run_id,)
    ).fetchone()
    if row is None:
        raise ValueError(f"Run with id={run_id} not found")
    if row[0] != "active":
        raise ValueError(f"The run {run_id} must be in the 'active' state. Current state is {row[0]}.")
    return str(row[1]), row[2]


def _now_ms() -> int:
    return int(time.time() * 1000)


class SqliteRun(RunWriter):
    """One open MLflow run in a SQLite store, written synchronously: :class:`MlflowRun`'s calls.

    A lock is waited out and any other failed write reported once, as :class:`RunWriter` says.
    """

    def __init__(
        self,
        db: Path,
        run_id: str,
        experiment_id: str | None,
        artifact_uri: str,
        wait: LockWait | None = None,
    ) -> None:
        super().__init__(run_id, experiment_id, wait or LockWait(str(db)))
        self.db, self.artifact_uri = db, artifact_uri

    @classmethod
    def start(
        cls,
        uri: str,
        experiment: str,
        params: dict[str, Any],
        tags: dict[str, str],
        run_name: str | None = None,
        wait: LockWait | None = None,
    ) -> SqliteRun:
        """Create the run in ``experiment`` (which :func:`can_write` found) with ``params`` and ``tags``.

        Each transaction waits out a lock on its own (``wait``), so none is made twice.
        """
        db = sqlite_path(uri)
        assert db is not None
        wait = wait or LockWait(str(db))
        experiment_id, run_id, artifact_uri = wait.call(
            partial(cls._open_run, db, experiment, tags, run_name)
        )
        items = [(k, str(v)[:6000]) for k, v in params.items()]
        for i in range(0, len(items), MAX_PARAMS_PER_BATCH):  # one transaction each, as log_batch
            wait.call(partial(cls._log_params, db, run_id, items[i : i + MAX_PARAMS_PER_BATCH]))
        return cls(db, run_id, experiment_id, artifact_uri, wait)

    @classmethod
    def _open_run(
        cls, db: Path, experiment: str, tags: dict[str, str], run_name: str | None
    ) -> tuple[str, str, str]:
        """One transaction: the experiment's view tags, the run and its tags; ids and artifact URI."""
        with _transaction(db) as conn:
            experiment_id, location = cls._open_experiment(conn, experiment)
            run_id, artifact_uri = cls._create_run(conn, experiment_id, location, tags, run_name)
        return experiment_id, run_id, artifact_uri

    @staticmethod
    def _log_params(db: Path, run_id: str, batch: list[tuple[str, str]]) -> None:
        """One transaction of at most ``MAX_PARAMS_PER_BATCH`` params, as MLflow's ``log_batch``."""
        for key, _ in batch:
            _check_name("param", key)
        with _transaction(db) as conn:
            _active_run(conn, run_id)
            existing = dict(conn.execute("SELECT key, value FROM params WHERE run_uuid = ?", (run_id,)))
            if changed := [k for k, v in batch if k in existing and existing[k] != v]:
                raise ValueError(f"Changing param values is not allowed: {changed} of run {run_id}")
            conn.executemany(
                "INSERT INTO params (key, value, run_uuid) VALUES (?, ?, ?)",
                [(k, v, run_id) for k, v in batch if k not in existing],
            )

    @staticmethod
    def _open_experiment(conn: sqlite3.Connection, name: str) -> tuple[str, str]:
        """``(experiment_id, artifact_location)`` of active ``name``; rlpipe's view tags set where missing."""
        row = conn.execute(
            "SELECT experiment_id, lifecycle_stage, artifact_location FROM experiments WHERE name = ?",
            (name,),
        ).fetchone()
        if row is None or row[1] != "active" or not _local_folder(row[2]):
            raise ValueError(f"experiment {name!r} is not an active one with local artifacts")
        experiment_id = row[0]
        current = dict(
            conn.execute("SELECT key, value FROM experiment_tags WHERE experiment_id = ?", (experiment_id,))
        )
        conn.executemany(  # what open_experiment's set_experiment_tag calls write (a merge)
            "INSERT OR REPLACE INTO experiment_tags (key, value, experiment_id) VALUES (?, ?, ?)",
            [(k, v, experiment_id) for k, v in experiment_tags(name).items() if current.get(k) != v],
        )
        return str(experiment_id), row[2]

    @staticmethod
    def _create_run(
        conn: sqlite3.Connection,
        experiment_id: str,
        location: str,
        tags: dict[str, str],
        run_name: str | None,
    ) -> tuple[str, str]:
        """Insert the run row and its tags as MLflow's ``create_run`` does; returns id and artifact URI."""
        run_id = uuid.uuid4().hex
        artifact_uri = posixpath.join(location, run_id, "artifacts")
        tag_name = tags.get(RUN_NAME_TAG)
        if run_name and tag_name and run_name != tag_name:
            raise ValueError(f"Both run_name {run_name!r} and tag {RUN_NAME_TAG} {tag_name!r} are given")
        name = run_name or tag_name
        if not name:
            raise ValueError("a run name is needed (MLflow would draw a random one)")
        rows = list(tags.items()) if tag_name else [*tags.items(), (RUN_NAME_TAG, name)]
        conn.execute(
            "INSERT INTO runs (run_uuid, name, source_type, source_name, entry_point_name, user_id,"
            " status, start_time, end_time, source_version, lifecycle_stage, artifact_uri, experiment_id,"
            " deleted_time)"
            " VALUES (?, ?, 'UNKNOWN', '', '', ?, 'RUNNING', ?, NULL, '', 'active', ?, ?, NULL)",
            (run_id, name, tags.get(USER_TAG, "unknown"), _now_ms(), artifact_uri, int(experiment_id)),
        )
        conn.executemany(
            "INSERT INTO tags (key, value, run_uuid) VALUES (?, ?, ?)", [(k, v, run_id) for k, v in rows]
        )
        return run_id, artifact_uri

    @classmethod
    def reopen(cls, uri: str, run_id: str, wait: LockWait | None = None) -> SqliteRun | None:
        """Set an existing run back to RUNNING (a resumed run continues it); ``None`` if it is gone."""
        db = sqlite_path(uri)
        assert db is not None
        wait = wait or LockWait(str(db))
        row = wait.call(partial(cls._set_running, db, run_id))
        return None if row is None else cls(db, run_id, str(row[0]), row[1], wait)

    @staticmethod
    def _set_running(db: Path, run_id: str) -> tuple[Any, str] | None:
        """One transaction: run ``run_id`` back to RUNNING; its experiment id and artifact URI."""
        with _transaction(db) as conn:
            row = conn.execute(
                "SELECT lifecycle_stage, experiment_id, artifact_uri FROM runs WHERE run_uuid = ?", (run_id,)
            ).fetchone()
            if row is None or row[0] == "deleted":
                return None
            conn.execute("UPDATE runs SET status = 'RUNNING' WHERE run_uuid = ?", (run_id,))
        return row[1], row[2]

    def _write_metrics(self, metrics: list[MetricRow]) -> None:
        """MLflow's ``_log_metrics``: identical rows once, the rest inserted, ``latest_metrics`` updated."""
        for key, _, timestamp, _ in metrics:
            _check_name("metric", key)
            if timestamp < 0:
                raise ValueError(f"metric {key!r}: timestamp must be a nonnegative long")
        unique = list(dict.fromkeys(metrics))
        with _transaction(self.db) as conn:
            _active_run(conn, self.run_id)
            conn.executemany(
                "INSERT OR IGNORE INTO metrics (key, value, timestamp, run_uuid, step, is_nan)"
                " VALUES (?, ?, ?, ?, ?, 0)",
                [(k, v, ts, self.run_id, step) for k, v, ts, step in unique],
            )
            self._update_latest(conn, unique)

    def _update_latest(self, conn: sqlite3.Connection, metrics: list[MetricRow]) -> None:
        """Per key, the row strictly newest by ``(step, timestamp, value)`` replaces the latest one."""
        keys = sorted({m[0] for m in metrics})
        latest: dict[str, tuple[int, int, float]] = {}
        for i in range(0, len(keys), 500):
            chunk = keys[i : i + 500]
            marks = ",".join("?" * len(chunk))
            for key, step, ts, value in conn.execute(
                "SELECT key, step, timestamp, value FROM latest_metrics"
                f" WHERE run_uuid = ? AND key IN ({marks})",
                (self.run_id, *chunk),
            ):
                latest[key] = (step, ts, value)
        stored = set(latest)
        changed: set[str] = set()
        for key, value, ts, step in metrics:
            if key not in latest or (step, ts, value) > latest[key]:
                latest[key] = (step, ts, value)
                changed.add(key)
        conn.executemany(
            "UPDATE latest_metrics SET value = ?, timestamp = ?, step = ?, is_nan = 0"
            " WHERE key = ? AND run_uuid = ?",
            [(latest[k][2], latest[k][1], latest[k][0], k, self.run_id) for k in sorted(changed & stored)],
        )
        conn.executemany(
            "INSERT INTO latest_metrics (key, value, timestamp, step, is_nan, run_uuid)"
            " VALUES (?, ?, ?, ?, 0, ?)",
            [(k, latest[k][2], latest[k][1], latest[k][0], self.run_id) for k in sorted(changed - stored)],
        )

    def _write_artifact(self, path: Path, artifact_path: str | None) -> None:
        copy_artifact(self.artifact_uri, path, artifact_path)

    def _write_end(self, status: str) -> None:
        with _transaction(self.db) as conn:
            _active_run(conn, self.run_id)
            conn.execute(
                "UPDATE runs SET status = ?, end_time = ? WHERE run_uuid = ?",
                (status, _now_ms(), self.run_id),
            )
