"""Waiting out another process's lock on the tracking store: retry with back-off, say so once.

A SQLite store is locked whole while another process writes it: a backup, an ``sqlite3`` shell in
``BEGIN EXCLUSIVE``, ``mlflow gc``, a parallel run. SQLite itself waits first (the busy timeout of
the connection, 20 s on both writers); a write still locked after that is retried here with
back-off for as long as the run lasts, so that a transient lock costs nothing but time. Once the
run has ended (:meth:`LockWait.ending`) a lock is waited out for at most :func:`end_wait_s` more;
what is then still unwritten is named in one line (:class:`Unwritten`): the run directory keeps it.
Only the standard library is imported here.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import threading
import time
from collections.abc import Callable
from typing import TypeVar

__all__ = [
    "END_WAIT_ENV",
    "END_WAIT_S",
    "LockWait",
    "StillLockedError",
    "Unwritten",
    "end_wait_s",
    "is_locked",
]

END_WAIT_S = 60.0
"""How long the end of a run waits for a locked store by default.

Less than the trainer waits for the tracking process to end (``background.FLUSH_TIMEOUT_S``).
"""
END_WAIT_ENV = "RLPIPE_MLFLOW_LOCK_WAIT_S"
"""Environment variable overriding :data:`END_WAIT_S` (seconds, a non-negative number)."""
FIRST_DELAY_S, MAX_DELAY_S = 0.25, 5.0
"""Back-off between two tries of a locked write: doubling from the first to the largest."""
_SQLITE_BUSY, _SQLITE_LOCKED = 5, 6

T = TypeVar("T")


def end_wait_s() -> float:
    """Seconds the end of a run waits for a locked store: ``$RLPIPE_MLFLOW_LOCK_WAIT_S`` or the default."""
    try:
        value = float(os.environ.get(END_WAIT_ENV, END_WAIT_S))
    except ValueError:
        return END_WAIT_S
    return value if value >= 0 else END_WAIT_S


def is_locked(exc: BaseException | None) -> bool:
    """Whether ``exc`` (or an error it wraps: SQLAlchemy's, MLflow's) is SQLite's busy or locked."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, sqlite3.OperationalError) and getattr(exc, "sqlite_errorcode", None) is not None:
            return exc.sqlite_errorcode & 0xFF in (_SQLITE_BUSY, _SQLITE_LOCKED)
        if "database is locked" in str(exc):  # also a server's SQLite, said through its REST answer
            return True
        exc = getattr(exc, "orig", None) or exc.__cause__ or exc.__context__
    return False


class StillLockedError(RuntimeError):
    """The store was still locked when the wait after the end of the run ran out."""


class Unwritten:
    """What a lock kept out of the store: metric values, artifacts, the run's end; said in one line."""

    def __init__(self) -> None:
        self.values, self.steps = 0, (0, 0)
        self.artifacts: list[str] = []
        self.end: str | None = None
        self.opened = True
        self._lock = threading.Lock()

    def metrics(self, values: int, first_step: int, last_step: int) -> None:
        """Count ``values`` metric values at env steps ``first_step``…``last_step`` as not written."""
        with self._lock:
            low, high = (first_step, last_step) if not self.values else self.steps
            self.steps = (min(low, first_step), max(high, last_step))
            self.values += values

    def __bool__(self) -> bool:
        return bool(self.values or self.artifacts or self.end or not self.opened)

    def describe(self) -> str:
        """The parts not written, e.g. ``120 metric values (env steps 64–448), the run's end (FINISHED)``."""
        if not self.opened:
            return "the run itself (it was never opened)"
        parts = []
        if self.values:
            parts.append(f"{self.values} metric values (env steps {self.steps[0]}–{self.steps[1]})")
        if self.artifacts:
            parts.append(f"artifacts {', '.join(self.artifacts)}")
        if self.end:
            parts.append(f"the run's end ({self.end}; MLflow shows it RUNNING)")
        return ", ".join(parts)


class LockWait:
    """Retries writes that found ``store`` locked, with back-off; unbounded until the run ends.

    One per run, shared by its opening and every write, and told by the tracking process's reader
    when the run has ended (:meth:`ending`, from another thread). After that a lock is waited out
    for ``end_wait`` seconds; then every write left raises :class:`StillLockedError` at once, and the
    caller records it in :attr:`unwritten`.
    """

    def __init__(self, store: str, end_wait: float | None = None) -> None:
        self.store = store
        self.end_wait = end_wait_s() if end_wait is None else end_wait
        self.unwritten = Unwritten()
        self.kept_in = "the run directory"
        """Where the run's metrics and files stay when the store does not get them (its run dir)."""
        self.waiting = False
        """A write is waiting for the lock now (read by the tracking process's reader)."""
        self._deadline: float | None = None
        self._gave_up = self._warned = False

    def ending(self) -> None:
        """The run has ended: from now on a lock is waited out for at most ``end_wait`` seconds."""
        if self._deadline is None:
            self._deadline = time.monotonic() + self.end_wait

    def call(self, write: Callable[[], T]) -> T:
        """``write()``, tried again with back-off while it finds the store locked (see the class)."""
        delay = FIRST_DELAY_S
        while True:
            if self._gave_up:
                raise StillLockedError(self.store)
            try:
                result = write()
            except Exception as exc:
                if not is_locked(exc):
                    self.waiting = False
                    raise
                left = self._left()
                if left <= 0:
                    self._gave_up, self.waiting = True, False
                    raise StillLockedError(self.store) from exc
                self._warn_waiting()
                self.waiting = True
                time.sleep(min(delay, left))
                delay = min(2 * delay, MAX_DELAY_S)
            else:
                self.waiting = False
                return result

    def _left(self) -> float:
        return float("inf") if self._deadline is None else self._deadline - time.monotonic()

    def _warn_waiting(self) -> None:
        if not self._warned:
            self._warned = True
            say(
                f"Warning: MLflow store {self.store} is locked by another process; waiting for it "
                "(the run's writes are kept and retried in order)"
            )

    def drop(self, values: int, step: int, held: int) -> None:
        """Leave ``values`` metric values at ``step`` to the run directory: ``held`` messages wait already."""
        if not self.unwritten.values:
            say(
                f"Warning: MLflow store {self.store} is still locked; {held} messages wait for it and "
                f"metrics from env step {step} on are not kept for MLflow ({self.kept_in} keeps them)"
            )
        self.unwritten.metrics(values, step, step)

    def report(self) -> None:
        """Say in one line what a lock kept out of the store (at the end of the run), if anything."""
        if self.unwritten:
            ran_out = f", still {self.end_wait:g}s after the run ended" if self._gave_up else ""
            say(
                f"Warning: MLflow store {self.store} was locked by another process{ran_out}; not written "
                f"to MLflow: {self.unwritten.describe()}; {self.kept_in} keeps them"
            )


def say(line: str) -> None:
    """One warning line on stderr."""
    print(line.splitlines()[0] if line else line, file=sys.stderr, flush=True)
