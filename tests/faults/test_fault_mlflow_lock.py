"""Another process locking the MLflow SQLite store (a backup, an ``sqlite3`` shell, ``mlflow gc``).

The lock is held from a second process with ``BEGIN EXCLUSIVE`` at the run's opening, in the middle
of its metrics and at its end, for both writers the tracking process uses (the SQLite fast path and
MLflow's own). SQLite's own wait (20 s on both writers) is shortened here to a tenth of a second,
so that a lock of about a second outlasts it as a longer lock outlasts the real one.
"""

from __future__ import annotations

import inspect
import io
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from contextlib import closing
from pathlib import Path

import pytest
import sqlalchemy.sql

from rlpipe import fast
from rlpipe.tracking import mlflow_sqlite, sink
from rlpipe.tracking.mlflow_runs import open_experiment
from rlpipe.tracking.mlflow_store import open_client
from rlpipe.tracking.store_lock import END_WAIT_ENV

EXP = "locked"
ITERATIONS = 8
LOCK_S = 1.2
LOCKER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("COMMIT")
"""
"""Holds the database's lock for the given seconds, as an ``sqlite3`` shell in ``BEGIN EXCLUSIVE`` does."""


class _ShortBusySql:
    """MLflow's ``sqlalchemy.sql`` with the busy timeout its sessions set shortened (see the module doc)."""

    def __getattr__(self, name: str) -> object:
        return getattr(sqlalchemy.sql, name)

    def text(self, statement: str) -> object:
        return sqlalchemy.sql.text(statement.replace("busy_timeout = 20000", "busy_timeout = 100"))


@pytest.fixture(scope="module")
def schema_db(tmp_path_factory):
    """A database MLflow created (its schema costs seconds), copied by each test."""
    uri = f"sqlite:///{tmp_path_factory.mktemp('schema') / 'mlflow.db'}"
    open_client(uri)
    return Path(uri.removeprefix("sqlite:///"))


@pytest.fixture
def store(schema_db, tmp_path, monkeypatch):
    """A store with experiment ``EXP``; SQLite's own wait shortened on both writers; a batch an iteration."""
    from mlflow.store.db import utils

    assert "busy_timeout = 20000" in inspect.getsource(utils._get_managed_session_maker)
    monkeypatch.setattr("mlflow.store.db.utils.sql", _ShortBusySql())
    monkeypatch.setattr(mlflow_sqlite, "BUSY_TIMEOUT_S", 0.1)
    monkeypatch.setattr(sink, "COALESCE_S", 0.0)
    shutil.copy(schema_db, tmp_path / "mlflow.db")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    open_experiment(open_client(uri), EXP, uri)
    return uri


def hold_lock(uri: str, seconds: float) -> subprocess.Popen[str]:
    """Another process holding the store's lock for ``seconds``; returns once it holds it."""
    proc = subprocess.Popen(
        [sys.executable, "-c", LOCKER, uri.removeprefix("sqlite:///"), str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    return proc


def run_tracking(uri: str, lock_at: str, lock_s: float = LOCK_S) -> tuple[str, list[dict], float]:
    """The tracking process's loop (in a thread) fed a run of ``ITERATIONS`` as a trainer feeds it.

    The lock is taken before the message named by ``lock_at`` (``opening``, ``mid-run``: the third
    iteration, ``finish``: the artifact and end). Returns the status, the replies and the seconds
    from the end message to the loop's return.
    """
    read_fd, write_fd = os.pipe()
    lines, feed, out = os.fdopen(read_fd), os.fdopen(write_fd, "w"), io.StringIO()
    result: list[str] = []
    loop = threading.Thread(target=lambda: result.append(sink.serve(lines, out)))
    lockers = []

    def send(message: dict, lock: bool = False) -> None:
        if lock:
            lockers.append(hold_lock(uri, lock_s))
        feed.write(json.dumps(message) + "\n")
        feed.flush()

    send(
        {
            "op": "open",
            "uri": uri,
            "experiment": EXP,
            "params": {"trainer.seed": 1},
            "tags": {"rlpipe.run_dir": "/runs/x"},
            "run_name": "r",
        },
        lock=lock_at == "opening",
    )
    loop.start()
    for i in range(1, ITERATIONS + 1):
        metrics = {"train/x": float(i), "iteration": float(i)}
        send(
            {"op": "metrics", "metrics": metrics, "step": 64 * i, "ts": 1000 + i},
            lock_at == "mid-run" and i == 3,
        )
        time.sleep(0.05)
    if lock_at == "finish":
        wait_for_step(uri, 64 * ITERATIONS)
    send({"op": "text", "name": "params.yaml", "text": "a: 1\n"}, lock=lock_at == "finish")
    send({"op": "end", "status": "FINISHED"})
    ended = time.monotonic()
    feed.close()
    loop.join(60)
    took = time.monotonic() - ended
    for proc in lockers:
        proc.wait(10)
    return result[0], [json.loads(line) for line in out.getvalue().splitlines()], took


def wait_for_step(uri: str, step: int) -> None:
    """Until the store holds a metric at ``step`` (every iteration is written)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with closing(sqlite3.connect(uri.removeprefix("sqlite:///"))) as conn:
            if conn.execute("SELECT 1 FROM metrics WHERE step = ?", (step,)).fetchone():
                return
        time.sleep(0.05)
    raise AssertionError(f"step {step} never written")


def read_back(uri: str, run_id: str) -> tuple[str, list[int], list[str]]:
    """Status, the steps of ``train/x``'s history and the artifacts, as MLflow reads them."""
    client = open_client(uri)
    history = client.get_metric_history(run_id, "train/x")
    artifacts = [a.path for a in client.list_artifacts(run_id)]
    return client.get_run(run_id).info.status, sorted(m.step for m in history), artifacts


@pytest.mark.parametrize("lock_at", ["opening", "mid-run", "finish"])
@pytest.mark.parametrize("path", ["fast", "mlflow"])
def test_a_transient_lock_anywhere_loses_no_metric_and_fails_no_run(store, path, lock_at, monkeypatch, capfd):
    if path == "mlflow":
        monkeypatch.setattr(fast, "ENABLED", False)  # RLPIPE_FAST=0: MLflow's own client writes the run
    status, replies, _ = run_tracking(store, lock_at)
    assert status == "FINISHED" and replies[-1] == {"ended": "FINISHED"}
    assert read_back(store, replies[0]["run_id"]) == (
        "FINISHED",
        [64 * i for i in range(1, ITERATIONS + 1)],
        ["params.yaml"],
    )
    warnings = [line for line in capfd.readouterr().err.splitlines() if line.strip()]
    db = store.removeprefix("sqlite:///")
    assert warnings == [
        f"Warning: MLflow store {db} is locked by another process; waiting for it "
        "(the run's writes are kept and retried in order)"
    ]


@pytest.mark.parametrize("path", ["fast", "mlflow"])
def test_a_lock_outlasting_the_run_waits_a_bounded_time_and_names_what_it_kept_out(
    store, path, monkeypatch, capfd
):
    if path == "mlflow":
        monkeypatch.setattr(fast, "ENABLED", False)
    monkeypatch.setenv(END_WAIT_ENV, "0.5")
    status, replies, took = run_tracking(store, "finish", lock_s=4.0)
    assert took < 3.0  # the lock was still held: the end did not wait for it
    assert status == "FINISHED"
    db = store.removeprefix("sqlite:///")
    warnings = [line for line in capfd.readouterr().err.splitlines() if line.strip()]
    # MLflow's client reads the run before it copies an artifact; the fast path copies it alone.
    artifacts = "artifacts params.yaml, " if path == "mlflow" else ""
    assert warnings[-1] == (
        f"Warning: MLflow store {db} was locked by another process, still 0.5s after the run ended; "
        f"not written to MLflow: {artifacts}the run's end (FINISHED; MLflow shows it RUNNING); "
        "the run directory /runs/x keeps them"
    )
    # Never FAILED: what was written before the lock is there, and the run shows as still running.
    assert read_back(store, replies[0]["run_id"]) == (
        "RUNNING",
        [64 * i for i in range(1, ITERATIONS + 1)],
        [] if artifacts else ["params.yaml"],
    )


def test_while_a_lock_lasts_the_metrics_held_for_it_are_bounded_and_the_rest_named(store, monkeypatch, capfd):
    monkeypatch.setattr(sink, "HELD_MESSAGES", 2)
    status, replies, _ = run_tracking(store, "mid-run")
    _, steps, _ = read_back(store, replies[0]["run_id"])
    kept = len(steps)
    assert status == "FINISHED" and 3 <= kept < ITERATIONS
    assert steps == [64 * i for i in range(1, kept + 1)]  # in order, up to the first not held
    db = store.removeprefix("sqlite:///")
    warnings = [line for line in capfd.readouterr().err.splitlines() if line.strip()]
    assert warnings[1] == (
        f"Warning: MLflow store {db} is still locked; 2 messages wait for it and metrics from env step "
        f"{64 * (kept + 1)} on are not kept for MLflow (the run directory /runs/x keeps them)"
    )
    assert warnings[2:] == [
        f"Warning: MLflow store {db} was locked by another process; not written to MLflow: "
        f"{2 * (ITERATIONS - kept)} metric values (env steps {64 * (kept + 1)}–{64 * ITERATIONS}); "
        "the run directory /runs/x keeps them"
    ]
