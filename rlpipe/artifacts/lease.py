"""The run lock on an object store: a conditional create holding the holder and a renewed lease."""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from typing import Any

from rlpipe.artifacts.errors import LockedError
from rlpipe.artifacts.fs import ObjectPath, PreconditionFailed, read_versioned, remove_tree, replace_if
from rlpipe.artifacts.removal import pid_alive
from rlpipe.object_store import StorageUnavailable

__all__ = ["LeaseLock", "lease_seconds"]


def lease_seconds() -> float:
    """How long a lock stays valid without renewal (``RLPIPE_LOCK_LEASE_S``, default 60 s)."""
    return float(os.environ.get("RLPIPE_LOCK_LEASE_S", "60"))


class LeaseLock:
    """``path`` created with ``If-None-Match: *``; renewed with ``If-Match`` every third of the lease."""

    def __init__(self, path: ObjectPath, record: dict[str, Any]) -> None:
        self.path, self.record = path, record
        self.lease = lease_seconds()
        self.etag: str | None = None
        self.lost = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _body(self) -> bytes:
        record = {**self.record, "lease_s": self.lease, "expires": time.time() + self.lease}
        return json.dumps(record).encode()

    def acquire(self) -> LeaseLock:
        """Take the lock (a stale one with a warning); ``LockedError`` while another holds a live lease."""
        for _ in range(3):
            current = read_versioned(self.path)
            try:
                if current is None:
                    self.etag = replace_if(self.path, self._body(), None)
                else:
                    holder = _parse(current[0])
                    if not _stale(holder):
                        raise LockedError(
                            f"{self.path.parent}: in use by {holder.get('command', 'another rlpipe')} (pid "
                            f"{holder.get('pid', '?')} on {holder.get('host', '?')}, since "
                            f"{holder.get('since', '?')}, lease renewed until "
                            f"{time.strftime('%H:%M:%S', time.localtime(holder.get('expires', 0)))}); "
                            "wait for it to end or stop it, then retry"
                        )
                    print(
                        f"Warning: {self.path}: taking over the lock of pid {holder.get('pid')} on "
                        f"{holder.get('host')}, whose lease ran out",
                        file=sys.stderr,
                    )
                    self.etag = replace_if(self.path, self._body(), current[1])
            except PreconditionFailed:
                continue  # someone else created or took it in between: look again
            self._thread = threading.Thread(target=self._renew, name="rlpipe-lease", daemon=True)
            self._thread.start()
            return self
        raise LockedError(f"{self.path}: could not take the lock (it keeps changing hands); retry")

    def _renew(self) -> None:
        while not self._stop.wait(self.lease / 3):
            try:
                self.etag = replace_if(self.path, self._body(), self.etag)
            except PreconditionFailed:
                self.lost = True
                print(
                    f"Warning: {self.path}: the lock was taken over by another process; this one no "
                    "longer holds the run",
                    file=sys.stderr,
                )
                return
            except (StorageUnavailable, OSError) as exc:  # keep trying: the lease may still be ours
                print(f"Warning: {self.path}: renewing the lease failed ({exc})", file=sys.stderr)

    def release(self) -> None:
        """Stop renewing; delete the lock if it is still this holder's."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.lost:
            return
        try:
            current = read_versioned(self.path)
            if current is not None and current[1] == self.etag:
                remove_tree(self.path)
        except OSError as exc:  # the store is down: the lease runs out on its own
            print(
                f"Warning: {self.path}: could not remove the lock ({exc}); it expires within "
                f"{self.lease:.0f} s, or a --resume on this host takes it over",
                file=sys.stderr,
            )


def _parse(data: bytes) -> dict[str, Any]:
    try:
        holder = json.loads(data.decode(errors="replace") or "null")
    except ValueError:
        return {}
    return holder if isinstance(holder, dict) else {}


def _stale(holder: dict[str, Any]) -> bool:
    """An unreadable record, a lease that ran out, or a dead process of this host."""
    if not holder or float(holder.get("expires", 0)) < time.time():
        return True
    if holder.get("host") == socket.gethostname() and isinstance(holder.get("pid"), int):
        # this very process: it does not hold the lock (acquire is not re-entered), so it is a leftover
        return holder["pid"] == os.getpid() or not pid_alive(holder["pid"])
    return False
