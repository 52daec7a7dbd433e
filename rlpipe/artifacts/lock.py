"""The writer lock of a run directory: ``<dir>/.lock``, created exclusively, naming its pid and host.

Every process that writes a run directory (``rlpipe run``/``--resume``; ``update``, ``replay``,
``collect``, ``advantage`` and ``eval`` into their output folder; the DVC stages, which call them)
holds it for as long as it writes. A second writer is refused with one line naming the holder; a
lock whose process is gone (same host, dead pid) is taken over with a warning. A lock of another
host is never taken over: its process cannot be checked from here.

On an object store (no file locks, no ``O_EXCL``) the lock is a conditional create
(``If-None-Match: *``) of a record naming the holder and a lease (``expires``, epoch seconds). A
heartbeat thread renews it every third of the lease by a conditional overwrite (``If-Match``: its
own last ETag); a lock whose lease has run out — its holder died, on whatever node — is taken over
with a warning, and the old holder loses it: its next renewal or checkpoint-pointer write fails.
``RLPIPE_LOCK_LEASE_S`` sets the lease (default 60 s).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from rlpipe.artifacts.errors import LockedError
from rlpipe.artifacts.fs import AnyPath, as_path, is_object
from rlpipe.artifacts.layout import lock_path
from rlpipe.artifacts.lease import LeaseLock
from rlpipe.artifacts.removal import pid_alive

__all__ = ["RunLock"]


class RunLock:
    """``with RunLock(directory):`` hold ``directory/.lock`` for the body (re-entrant per process)."""

    _held: dict[AnyPath, int] = {}  # lock path → nesting depth in this process

    def __init__(self, directory: AnyPath, command: str = "rlpipe") -> None:
        self.path = lock_path(as_path(directory)).absolute()
        self.command = command

    def acquire(self) -> RunLock:
        """Create the lock file or raise :class:`LockedError`; take over a stale one with a warning."""
        if self.path in self._held:
            self._held[self.path] += 1
            return self
        if is_object(self.path):
            self._lease = LeaseLock(self.path, self._record()).acquire()
            self._held[self.path] = 1
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(3):
            if self._create(self.path):
                self._held[self.path] = 1
                return self
            holder = self._read()
            if holder is None:  # being written right now, or empty: give the writer a moment
                time.sleep(0.05)
                holder = self._read() or {}
            if self._stale(holder):
                print(
                    f"Warning: {self.path}: taking over the lock of pid {holder.get('pid')} on "
                    f"{holder.get('host')}, which is no longer running",
                    file=sys.stderr,
                )
                self.path.unlink(missing_ok=True)
                continue
            raise LockedError(
                f"{self.path.parent}: in use by {holder.get('command', 'another rlpipe')} (pid "
                f"{holder.get('pid', '?')} on {holder.get('host', '?')}, since {holder.get('since', '?')}); "
                f"wait for it to end or stop it, then retry"
            )
        raise LockedError(f"{self.path}: could not take the lock (it keeps changing hands); retry")

    def release(self) -> None:
        """Remove the lock file if this process holds it (after the outermost ``release``)."""
        depth = self._held.get(self.path, 0)
        if depth > 1:
            self._held[self.path] = depth - 1
            return
        self._held.pop(self.path, None)
        lease = getattr(self, "_lease", None)
        if lease is not None:
            self._lease = None
            lease.release()
            return
        holder = self._read()
        if holder is not None and holder.get("pid") == os.getpid() and holder.get("host") == _host():
            self.path.unlink(missing_ok=True)

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()

    def _record(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "host": _host(),
            "command": self.command,
            "since": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }

    def _create(self, path: Path) -> bool:
        record = json.dumps(self._record())
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return False
        try:
            os.write(fd, record.encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        return True

    def _read(self) -> dict[str, Any] | None:
        if is_object(self.path):
            return None
        try:
            data = json.loads(self.path.read_text(errors="replace") or "null")
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    @staticmethod
    def _stale(holder: dict[str, Any]) -> bool:
        pid = holder.get("pid")
        if holder.get("host") != _host() or not isinstance(pid, int):
            return not holder  # an unreadable/empty lock file: its writer died mid-write
        return pid != os.getpid() and not pid_alive(pid)


def _host() -> str:
    return socket.gethostname()
