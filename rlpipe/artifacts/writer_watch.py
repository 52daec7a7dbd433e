"""A bounded wait on the store's writer process: warnings while it lasts, the process killed at a limit.

The training process waits on the writer process (:mod:`rlpipe.artifacts.writer_process`) for each
store it asks for. A process that never answers — stopped (SIGSTOP, a debugger), swapped out, hung
on a disk — would hold the run forever and say nothing; :class:`Watch` says so by pid and ends it.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
import time

__all__ = ["WARN_AFTER_S", "Watch"]

WARN_AFTER_S = 5.0
"""Seconds a wait on the writer process lasts before it is warned about (longer after slower writes)."""


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
        next_warning = min(self._warn_s, self._limit_s / 2)
        while not self._done.wait(min(next_warning, self._limit_s) - self.waited_s):
            if self.waited_s >= self._limit_s:
                self.expired = True
                with contextlib.suppress(OSError):
                    self._process.kill()
                return
            print(
                f"Warning: the rollout store's writer process (pid {self._process.pid}) has not "
                f"answered for {self.waited_s:.0f} s while {self._what}; the run waits up to "
                f"{self._limit_s:g} s (store.writer_timeout_s)",
                file=sys.stderr,
                flush=True,
            )
            next_warning = self.waited_s + 60.0
