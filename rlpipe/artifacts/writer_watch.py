"""Bounded waits on the store's writer: warnings while one lasts, a failure at a limit.

The training process waits on the writer process (:mod:`rlpipe.artifacts.writer_process`) for each
store it asks for. A process that never answers — stopped (SIGSTOP, a debugger), swapped out, hung
on a disk — would hold the run forever and say nothing; :class:`Watch` says so by pid and ends it.
The writer thread (object stores, ``store.writer: thread``) cannot be ended from outside: a wait on
it (:func:`wait_warned`, the loop :class:`Watch` runs too) warns the same way and gives up at the
limit, so the run fails in one line instead of hanging.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
import time
from collections.abc import Callable

__all__ = ["WARN_AFTER_S", "Watch", "wait_warned"]

WARN_AFTER_S = 5.0
"""Seconds a wait on the writer lasts before it is warned about (a process: longer after slower writes)."""


class Watch:
    """Bounds one wait on the writer process: warnings while it lasts, the process killed at its limit.

    A stopped (SIGSTOP, swapped out, debugged) or hung writer would hold the run forever. The
    first warning comes after ``warn_s``, then one a minute, each naming the pid, ``what`` is
    waited for and for how long; at ``limit_s`` the process is killed, which ends the wait at once
    (its socket closes, so the blocked send or receive raises) and sets :attr:`expired`.
    """

    def __init__(self, process: subprocess.Popen[bytes], what: str, warn_s: float, limit_s: float) -> None:
        self.expired = False
        self._process, self._what, self._warn_s, self._limit_s = process, what, warn_s, limit_s
        self._began = time.monotonic()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rlpipe-writer-watch", daemon=True)

    def __enter__(self) -> Watch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()

    @property
    def waited_s(self) -> float:
        """Seconds since the wait began."""
        return time.monotonic() - self._began

    def _run(self) -> None:
        stalled = f"writer process (pid {self._process.pid}) has not answered"
        what, warn_s, limit_s = (lambda: self._what), self._warn_s, self._limit_s
        if not wait_warned(self._done.wait, stalled, what, warn_s, limit_s, self._began):
            self.expired = True
            with contextlib.suppress(OSError):
                self._process.kill()


def wait_warned(
    done: Callable[[float], bool],
    stalled: str,
    what: Callable[[], str],
    warn_s: float,
    limit_s: float,
    began: float | None = None,
) -> bool:
    """Call ``done(timeout)`` until it returns ``True`` (then ``True``), or until ``limit_s`` (``False``).

    ``done`` waits up to ``timeout`` seconds for the writer and says whether it finished. Warnings
    go to stderr after ``warn_s`` (at most half the limit), then once a minute:
    ``the rollout store's <stalled> for N s while <what()>``. ``began``: the wait's
    ``time.monotonic()`` start (default now).
    """
    began = time.monotonic() if began is None else began
    next_warning = min(warn_s, limit_s / 2)
    while not done(max(0.0, min(next_warning, limit_s) - (time.monotonic() - began))):
        waited = time.monotonic() - began
        if waited >= limit_s:
            return False
        if waited >= next_warning:
            print(
                f"Warning: the rollout store's {stalled} for {waited:.0f} s while {what()}; the run "
                f"waits up to {limit_s:g} s (store.writer_timeout_s)",
                file=sys.stderr,
                flush=True,
            )
            next_warning = waited + 60.0
    return True
