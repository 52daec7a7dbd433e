"""The tracking process: ``python -m rlpipe.tracking.sink`` opens and writes one MLflow run.

The training process (:class:`rlpipe.tracking.background.BackgroundRun`) starts it and sends one
JSON message per line on its stdin, in order:

* ``{"op": "open", "uri", "experiment", "params", "tags", "run_name", "cwd"}`` (first, once);
* ``{"op": "metrics", "metrics": {key: value}, "step": env_steps, "ts": epoch_ms}`` per iteration
  (written together with those that follow within ``COALESCE_S``, in one ``log_batch``);
* ``{"op": "artifact", "path", "artifact_path"}`` and ``{"op": "text", "name", "text"}`` (a small
  file written here, e.g. the resolved ``params.yaml``);
* ``{"op": "end", "status"}``.

It answers on stdout with one JSON line once the run is open (``{"run_id", "experiment_id"}``, or
``{"error": ...}`` when it could not be opened) and one when it ended (``{"ended": status}``).
End of input without an ``end`` message (the trainer was killed) ends the run ``KILLED`` after every
message received so far is written. A problem is said once, in one line on stderr; the process
then keeps reading, so the trainer never blocks on it. SIGINT and SIGTERM are ignored here: the
trainer decides when the run ends (a Ctrl-C reaches the whole process group).

A store locked by another process (a backup, an ``sqlite3`` shell, ``mlflow gc``) is waited out by
the run's :class:`~rlpipe.tracking.store_lock.LockWait`, from the opening to the end: a reader
thread keeps taking the trainer's messages meanwhile (at most ``HELD_MESSAGES``) and starts the
bounded wait after the run's end as soon as the end arrives.

Running in its own process keeps MLflow's import, its SQLite schema checks and every write off the
trainer's interpreter lock, so iteration 1 starts while the run opens. Where
:func:`rlpipe.tracking.mlflow_sqlite.serves` says so (a SQLite store of the installed MLflow's
schema and an existing experiment, ``RLPIPE_FAST`` on), the run is written by
:class:`~rlpipe.tracking.mlflow_sqlite.SqliteRun` and MLflow is never imported here.
"""

from __future__ import annotations

import signal

signal.signal(signal.SIGINT, signal.SIG_IGN)  # first, before the imports below take their time
signal.signal(signal.SIGTERM, signal.SIG_IGN)

import json  # noqa: E402  (after the signal set-up on purpose)
import os  # noqa: E402
import queue  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from functools import partial  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import IO, TYPE_CHECKING, Any  # noqa: E402

from rlpipe import fast  # noqa: E402
from rlpipe.runtime.threads import yield_to_training  # noqa: E402
from rlpipe.tracking.mlflow_runs import store_name  # noqa: E402
from rlpipe.tracking.store_lock import LockWait, StillLockedError, say  # noqa: E402

if TYPE_CHECKING:
    from rlpipe.tracking.mlflow_runs import MlflowRun
    from rlpipe.tracking.mlflow_sqlite import SqliteRun

__all__ = ["main", "serve"]


def _say(out: IO[str], message: dict[str, Any]) -> None:
    out.write(json.dumps(message) + "\n")
    out.flush()


def _open(message: dict[str, Any], wait: LockWait | None = None) -> MlflowRun | SqliteRun:
    """Open (or reopen) the run of the ``open`` message, waiting out a locked store with ``wait``."""
    from rlpipe.tracking.mlflow_runs import MlflowRun, git_tags
    from rlpipe.tracking.mlflow_sqlite import SqliteRun, serves

    wait = wait or LockWait(store_name(message["uri"]))
    # The fast path, where it writes what MLflow would.
    kind = SqliteRun if wait.call(partial(serves, message)) else MlflowRun
    if message.get("run_id") and (run := kind.reopen(message["uri"], message["run_id"], wait)):
        return run  # a resumed run continues its own MLflow run
    tags = {**git_tags(Path(message.get("cwd") or os.getcwd())), **message["tags"]}
    return kind.start(
        message["uri"], message["experiment"], message["params"], tags, message.get("run_name"), wait
    )


def _apply(run: MlflowRun | SqliteRun, message: dict[str, Any], scratch: Path) -> None:
    op = message["op"]
    if op == "metrics":
        run.log_metrics(message["metrics"], message["step"], message.get("ts"))
    elif op == "artifact":
        run.log_artifact(_local_copy(message["path"], scratch), message.get("artifact_path"))
    elif op == "text":
        path = scratch / message["name"]
        path.write_text(message["text"])
        run.log_artifact(path, message.get("artifact_path"))


COALESCE_S = 1.0
"""Metrics wait at most this long to be written together with the iterations that follow them."""
HELD_MESSAGES = 10_000
"""Messages held while a write waits for a locked store; later metrics are not kept (bounded memory)."""


class _Pending:
    """Metrics rows not yet written: one ``log_batch`` for all the iterations of up to ``COALESCE_S``.

    A small run logs many iterations a second; one SQLite transaction per iteration would take the
    CPU the trainer needs, so rows are written together.
    """

    def __init__(self, run: MlflowRun | SqliteRun) -> None:
        self.run, self.rows, self.since = run, [], 0.0

    def add(self, message: dict[str, Any]) -> None:
        if not self.rows:
            self.since = time.monotonic()
        self.rows.append((message["metrics"], message["step"], message.get("ts")))
        if time.monotonic() - self.since >= COALESCE_S:
            self.flush()

    def wait(self) -> float | None:
        """Seconds until the pending rows are due (``None``: nothing pending, wait for input)."""
        return max(0.0, self.since + COALESCE_S - time.monotonic()) if self.rows else None

    def flush(self) -> None:
        if self.rows:
            rows, self.rows = self.rows, []
            self.run.log_metric_rows(rows)


def _read_ahead(lines: IO[str], wait: LockWait) -> queue.Queue[dict[str, Any] | None]:
    """Messages of ``lines`` on a queue, read by a thread (``None`` at the end of input).

    It tells ``wait`` when the run has ended (its ``end``, or the end of input), so that a write
    waiting for a locked store waits a bounded time from then on. While one waits, at most
    ``HELD_MESSAGES`` are held; later metrics are left to the run directory (said once).
    """
    messages: queue.Queue[dict[str, Any] | None] = queue.Queue()

    def read() -> None:
        for line in lines:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if message.get("op") == "end":
                wait.ending()
            if message.get("op") == "metrics" and wait.waiting and messages.qsize() >= HELD_MESSAGES:
                wait.drop(len(message["metrics"]), message["step"], HELD_MESSAGES)
                continue
            messages.put(message)
        wait.ending()
        messages.put(None)

    threading.Thread(target=read, name="rlpipe-sink-read", daemon=True).start()
    return messages


def _local_copy(source: str, scratch: Path) -> Path:
    """``source`` itself, or for a file on an object store (``s3://…``) a copy in ``scratch`` to upload.

    MLflow then puts it under the run's artifact root, which may be the same object store
    (``mlflow server --artifacts-destination s3://…``).
    """
    if "://" not in source:
        return Path(source)
    from rlpipe.location import ObjectPath

    remote = ObjectPath(source)
    local = scratch / remote.name
    local.write_bytes(remote.read_bytes())
    return local


def serve(lines: IO[str], out: IO[str]) -> str:
    """Handle the messages of ``lines`` (see the module doc); return the status the run ended with."""
    first = lines.readline()
    if not first:
        return "none"
    opening = json.loads(first)
    wait = LockWait(store_name(opening["uri"]))
    if run_dir := opening.get("tags", {}).get("rlpipe.run_dir"):
        wait.kept_in = f"the run directory {run_dir}"
    messages = _read_ahead(lines, wait)  # from now on: a locked store must not hold up the trainer
    try:
        run = _open(opening, wait)
    except Exception as exc:  # a store that cannot be opened must not stop training
        _not_opened(exc, wait)
        _say(out, {"error": str(exc).splitlines()[0] if str(exc) else type(exc).__name__})
        while messages.get() is not None:  # drain, so the trainer never blocks on a full pipe
            pass
        return "none"
    _say(out, {"run_id": run.run_id, "experiment_id": run.experiment_id})
    status = "KILLED"  # input ended without an end message: the trainer was killed
    pending = _Pending(run)
    with tempfile.TemporaryDirectory(prefix="rlpipe-mlflow-") as scratch:
        while True:
            try:
                message = messages.get(timeout=pending.wait())
            except queue.Empty:  # metrics waited COALESCE_S: write them
                pending.flush()
                continue
            if message is None:
                break
            if message["op"] == "metrics":
                pending.add(message)
                continue
            pending.flush()  # in order: metrics before the artifact or the end that follows them
            if message["op"] == "end":
                status = message["status"]
                break
            _apply(run, message, Path(scratch))
        pending.flush()
    run.end(status)
    final = status if run.error is None else "FAILED"
    _say(out, {"ended": final})
    return final


def _not_opened(exc: Exception, wait: LockWait) -> None:
    """Say in one line why the run was not opened: a lock that outlasted the run, or another error."""
    if isinstance(exc, StillLockedError):
        wait.unwritten.opened = False
        wait.report()
        return
    say(f"Warning: MLflow run not opened, training goes on without it: {exc}")


def _fast_path_ahead() -> bool:
    """Whether the run this process was started ahead of will be written without MLflow.

    ``background.prewarm`` names its store and experiment in ``RLPIPE_SINK_URI`` and
    ``RLPIPE_SINK_EXPERIMENT``; then MLflow is not imported ahead (the ``open`` message decides).
    """
    from rlpipe.tracking.background import PREWARM_EXPERIMENT_ENV, PREWARM_URI_ENV
    from rlpipe.tracking.mlflow_sqlite import can_write

    uri, experiment = os.environ.get(PREWARM_URI_ENV), os.environ.get(PREWARM_EXPERIMENT_ENV)
    if not uri or not experiment:
        return False

    try:
        return can_write(uri, experiment)
    except Exception:  # locked now: the open message decides, waiting for the lock
        return False


def main() -> None:
    """Entry point of the tracking process: protocol on stdin/stdout, stray output to stderr."""
    yield_to_training()  # before MLflow's import: its cost comes from cycles training leaves idle
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # a library's print must not corrupt replies
    try:
        from rlpipe.tracking.background import PREWARM_ENV

        if os.environ.get(PREWARM_ENV) and not _fast_path_ahead():  # started ahead of its run
            from rlpipe.tracking.mlflow_runs import preload

            preload()
        serve(sys.stdin, out)
    except Exception as exc:
        print(f"Warning: MLflow tracking process failed: {exc}".splitlines()[0], file=sys.stderr)
        sys.exit(1)
    # The run is ended and said so. The trainer's end waits for this process to exit: with
    # RLPIPE_FAST on, it exits without tearing down MLflow's and SQLAlchemy's modules.
    out.close()
    sys.stderr.flush()
    fast.exit_process(0)


if __name__ == "__main__":
    main()
