"""The trainer's side of MLflow: a :class:`BackgroundRun` hands every write to the tracking process.

``BackgroundRun.start`` returns at once: the tracking process (:mod:`rlpipe.tracking.sink`) imports
MLflow and opens the run while the trainer imports torch and runs iteration 1. Writes go, in call
order, through a bounded queue to a feeder thread that pipes them to the process; ``log_metrics``
blocks only when ``QUEUE_SIZE`` messages are waiting (a store that has fallen that far behind).
A store that cannot be opened or written is reported once, in one line, by the tracking process;
training goes on. :meth:`BackgroundRun.end` flushes and waits for the run's terminal status; it
also runs at exit (``FAILED`` after an error, ``KILLED`` after SIGINT/SIGTERM, see
:mod:`rlpipe.tracking.signals`), and a trainer killed outright still gets every message it piped.
"""

from __future__ import annotations

import atexit
import json
import math
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from rlpipe.artifacts.fs import AnyPath, as_path
from rlpipe.tracking import signals

if TYPE_CHECKING:
    from rlpipe.config import RunConfig

__all__ = ["FLUSH_TIMEOUT_S", "PREWARM_ENV", "QUEUE_SIZE", "BackgroundRun", "prewarm", "prewarm_tracking"]

QUEUE_SIZE = 1024
"""Messages (about one per iteration) the tracking process may fall behind before ``log_metrics`` blocks."""
FLUSH_TIMEOUT_S = 120.0
"""How long ``end`` waits for the tracking process to write what is queued and end the run."""


class BackgroundRun:
    """An MLflow run opened and written by the tracking process; same calls as ``MlflowRun``."""

    def __init__(self, open_message: dict[str, Any]) -> None:
        self._proc = _take_prewarmed() or _spawn(prewarm=False)
        self._queue: queue.Queue[str | None] = queue.Queue(maxsize=QUEUE_SIZE)
        self._replies: dict[str, Any] = {}
        self._opened = threading.Event()
        self._ended = threading.Event()
        self._closed = False
        self._uri: str = open_message.get("uri", "")
        self._queue.put(json.dumps({"op": "open", **open_message}))
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._feeder = _thread(self._feed, self._proc.stdin, "rlpipe-mlflow-feed")
        _thread(self._read, self._proc.stdout, "rlpipe-mlflow-reply")
        atexit.register(self._at_exit)

    @classmethod
    def start(
        cls,
        uri: str,
        experiment: str,
        params: dict[str, Any],
        tags: dict[str, str],
        run_name: str | None = None,
        run_id: str | None = None,
    ) -> BackgroundRun:
        """Start the tracking process on run ``run_name`` in ``experiment``; returns at once.

        ``run_id``: reopen that run instead when the store still has it (a resumed run).
        """
        return cls(
            {
                "uri": uri,
                "experiment": experiment,
                "params": params,
                "tags": tags,
                "run_name": run_name,
                "cwd": str(Path.cwd()),
                "run_id": run_id,
            }
        )

    # --- the trainer's calls, in order -------------------------------------------------------------

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        """Queue one batch of the finite numeric ``metrics`` at ``step``, time-stamped now."""
        batch = {k: float(v) for k, v in metrics.items() if isinstance(v, int | float) and math.isfinite(v)}
        if batch:
            self._send({"op": "metrics", "metrics": batch, "step": int(step), "ts": int(time.time() * 1000)})

    def log_artifact(self, path: AnyPath, artifact_path: str | None = None) -> None:
        """Queue the upload of a file or folder (it must stay in place until :meth:`end`)."""
        self._send({"op": "artifact", "path": str(as_path(path).resolve()), "artifact_path": artifact_path})

    def log_text(self, name: str, text: str, artifact_path: str | None = None) -> None:
        """Queue a small text artifact ``name`` with content ``text`` (written by the tracking process)."""
        self._send({"op": "text", "name": name, "text": text, "artifact_path": artifact_path})

    @property
    def ready(self) -> bool:
        """The run is open (or failed to open): :attr:`run_id` answers without waiting."""
        return self._opened.is_set()

    @property
    def run_id(self) -> str | None:
        """The MLflow run id, waiting for the run to open (``None`` when it could not be opened)."""
        self._opened.wait(FLUSH_TIMEOUT_S)
        return self._replies.get("run_id")

    @property
    def experiment_id(self) -> str | None:
        """The run's MLflow experiment id, once the run is open (``None`` before, or without one)."""
        return self._replies.get("experiment_id") if self._opened.is_set() else None

    @property
    def uri(self) -> str:
        """The tracking URI the run is written to."""
        return self._uri

    def end(self, status: str = "FINISHED", timeout: float = FLUSH_TIMEOUT_S) -> str | None:
        """Flush every queued write, end the run with ``status`` and wait for it; idempotent.

        Returns the status the run ended with (``None`` when it never opened or is still writing
        after ``timeout`` seconds: the tracking process then finishes on its own).
        """
        if self._closed:
            return self._replies.get("ended")
        self._closed = True
        atexit.unregister(self._at_exit)
        deadline = time.monotonic() + timeout
        try:
            for item in (json.dumps({"op": "end", "status": status}), None):
                self._queue.put(item, timeout=timeout)
        except queue.Full:
            return self._still_writing(timeout)
        self._feeder.join(timeout)
        # The reply (or the end of its output) wakes this at once; polling for the exit would not.
        self._ended.wait(max(deadline - time.monotonic(), 0.0))
        try:
            self._proc.wait(max(deadline - time.monotonic(), 0.0))
        except subprocess.TimeoutExpired:
            return self._still_writing(timeout)
        return self._replies.get("ended")

    def _still_writing(self, timeout: float) -> None:
        print(
            f"Warning: MLflow is still writing after {timeout:.0f}s; it finishes in the background "
            f"(pid {self._proc.pid})",
            file=sys.stderr,
            flush=True,
        )

    # --- threads ------------------------------------------------------------------------------------

    def _send(self, message: dict[str, Any]) -> None:
        if not self._closed:
            self._queue.put(json.dumps(message))

    def _feed(self, pipe: IO[str]) -> None:
        """Write queued messages to the tracking process in order; after it is gone, drop them."""
        alive = True
        while (line := self._queue.get()) is not None:
            if not alive:
                continue
            try:
                pipe.write(line + "\n")
                if self._queue.empty():
                    pipe.flush()
            except (BrokenPipeError, OSError, ValueError):  # it failed and said so on stderr
                alive = False
        try:
            pipe.close()
        except OSError:
            pass

    def _read(self, pipe: IO[str]) -> None:
        for line in pipe:
            try:
                self._replies.update(json.loads(line))
            except ValueError:
                continue
            if "run_id" in self._replies or "error" in self._replies:
                self._opened.set()
            if "ended" in self._replies:
                self._ended.set()
        self._opened.set()
        self._ended.set()

    def _at_exit(self) -> None:
        """The process is exiting without ``end``: an error or a signal; flush and say which."""
        self.end("KILLED" if signals.received() is not None else "FAILED")


PREWARM_ENV = "RLPIPE_SINK_PREWARM"
"""Set for a tracking process started ahead of its run: it imports MLflow before reading its input."""
PREWARM_URI_ENV, PREWARM_EXPERIMENT_ENV = "RLPIPE_SINK_URI", "RLPIPE_SINK_EXPERIMENT"
"""The store and experiment of the run a prewarmed tracking process will write (read by its ``main``)."""
_prewarmed: subprocess.Popen[str] | None = None


def prewarm(uri: str | None = None, experiment: str | None = None) -> None:
    """Start the tracking process now, so it imports MLflow while the trainer imports torch and builds.

    The next :class:`BackgroundRun` takes it over (only one waits at a time). MLflow's import is
    most of the process's CPU time; started with the run it competes with the first
    iterations for the cores and delays the end of short runs, which wait for it to finish. An
    unused one exits when this process does (its input ends). ``uri`` and ``experiment``: the
    run's store and experiment, so that the process skips MLflow's import when the run will be
    written without it (:mod:`rlpipe.tracking.mlflow_sqlite`).
    """
    global _prewarmed
    if _prewarmed is None or _prewarmed.poll() is not None:
        hint = {PREWARM_URI_ENV: uri, PREWARM_EXPERIMENT_ENV: experiment} if uri and experiment else {}
        _prewarmed = _spawn(prewarm=True, hint=hint)


def prewarm_tracking(cfg: RunConfig, main: bool) -> None:
    """:func:`prewarm` when ``cfg`` tracks to MLflow and this is the main process (rank 0: it alone logs)."""
    if main and cfg.tracking.backend == "mlflow":
        from rlpipe.tracking.mlflow_store import TrackingError, resolve_uri

        try:
            uri: str | None = resolve_uri(cfg.tracking)
        except TrackingError:  # said when the run starts
            uri = None
        prewarm(uri, cfg.trainer.exp_name)


def _take_prewarmed() -> subprocess.Popen[str] | None:
    global _prewarmed
    proc, _prewarmed = _prewarmed, None
    return proc if proc is not None and proc.poll() is None else None


def _spawn(prewarm: bool, hint: dict[str, str] | None = None) -> subprocess.Popen[str]:
    env = {
        "MLFLOW_DISABLE_TELEMETRY": "true",
        **os.environ,
        **({PREWARM_ENV: "1", **(hint or {})} if prewarm else {}),
    }
    return subprocess.Popen(
        [sys.executable, "-m", "rlpipe.tracking.sink"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        env=env,
    )


def _thread(target: Callable[[IO[str]], object], pipe: IO[str], name: str) -> threading.Thread:
    thread = threading.Thread(target=target, args=(pipe,), name=name, daemon=True)
    thread.start()
    return thread
