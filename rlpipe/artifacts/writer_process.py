"""The rollout store's writer process: writes stores from shared memory, off the training interpreter.

A writer thread in the training process shares its interpreter lock: every Python call and copy it
makes delays the training thread's next op (on a GPU, its next kernel launch). This process has an
interpreter of its own. The training process stages each rollout into anonymous shared memory
(:mod:`rlpipe.artifacts.shared_staging`) and sends ``(segment, path, attributes)`` here over a
socket; the process maps the segment, writes the store from numpy views of it
(:func:`rlpipe.artifacts.zarr_local.write_arrays`: atomic, copy-free on the fast path) and answers
with ``None`` or the error. It imports numpy and rlpipe's artifacts helpers — no torch, no trainer,
and zarr only for a store zarr writes (compressed, or with ``RLPIPE_FAST=0``).

It is started with ``python -m rlpipe.artifacts.writer_process`` (fork + exec, as multiprocessing's
``spawn``: no Python runs in a forked copy of a process holding CUDA or torch threads, and the
user's ``__main__`` is not imported again). On Linux it dies with the thread that started it
(``PR_SET_PDEATHSIG``), so no write of a killed run completes after it. Segments travel as file
descriptors (``SCM_RIGHTS``): a killed run leaves no shared memory behind.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from multiprocessing import reduction
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlpipe.artifacts.fs import AnyPath, is_object

if TYPE_CHECKING:
    from rlpipe.config import StoreCfg

__all__ = ["Leaf", "WriteRequest", "WriterDiedError", "WriterProcess", "available", "prewarm", "writer_mode"]

Leaf = tuple[str, tuple[int, ...], str, int]
"""``(array name, shape, numpy dtype string, byte offset)`` of one array in a segment."""


@dataclass(frozen=True)
class WriteRequest:
    """One store to write: where, from which segment, with which attributes and codecs."""

    path: str
    segment: int
    leaves: tuple[Leaf, ...]
    attrs: dict[str, Any]
    codec: str
    image_codec: str
    chunk_envs: int
    dims: tuple[str, ...]
    extra: dict[str, Any] = field(default_factory=dict)
    """Arrays written beside the segment's (numpy, sent with the request): the sparse final observations."""


class WriterDiedError(RuntimeError):
    """The writer process ended while it was writing a store; the message names the store (exit code 1)."""


def available() -> bool:
    """Whether this platform has what the writer process needs: ``memfd_create`` and ``SCM_RIGHTS``."""
    return hasattr(os, "memfd_create") and hasattr(socket, "send_fds") and sys.executable != ""


def writer_mode(cfg: StoreCfg, root: AnyPath) -> str:
    """``process`` or ``thread``: who writes the stores under ``root`` for ``cfg.writer``.

    An object store is written by the thread (its uploads go through fsspec in this process);
    ``auto`` takes the process where :func:`available`.
    """
    if is_object(root) or cfg.writer == "thread":
        return "thread"
    if cfg.writer == "process" or available():
        return "process"
    return "thread"


_prewarmed: tuple[subprocess.Popen[bytes], Connection, dict[str, str]] | None = None
"""The waiting process, its socket and the environment it was started with."""


def prewarm(cfg: StoreCfg, root: AnyPath) -> None:
    """Start a writer process now when ``cfg`` stores rollouts under ``root`` through one.

    Its interpreter and writer (numpy, not zarr) then load while this process imports torch and builds,
    not while the first rollout waits to be written; the next :class:`WriterProcess` takes it over
    (one waits at a time) if this process's environment is still the one it was started with. Only
    from the main thread: the process dies with the thread that started it. An unused one exits
    with this process.
    """
    global _prewarmed
    if not cfg.enabled or writer_mode(cfg, root) != "process":
        return
    if threading.current_thread() is not threading.main_thread():
        return
    if _prewarmed is None or _prewarmed[0].poll() is not None:
        _prewarmed = (*_start(), dict(os.environ))


def _take_prewarmed() -> tuple[subprocess.Popen[bytes], Connection] | None:
    """The waiting process, if alive and started with today's environment (which it read at start)."""
    global _prewarmed
    started, _prewarmed = _prewarmed, None
    if started is None:
        return None
    process, conn, environ = started
    if process.poll() is None and environ == os.environ:
        return process, conn
    conn.close()  # its input ends: it exits
    return None


class WriterProcess:
    """The training process's handle on the writer process: started on first use, one write at a time.

    :meth:`share` hands a segment (a file descriptor and its size) to the process once;
    :meth:`write` asks for one store and blocks until it is written (the socket wait releases the
    interpreter lock), raising the ``StoreError`` the write raised there, or :class:`WriterDiedError`.
    """

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        self._conn: Connection | None = None
        self._shared: set[int] = set()

    def share(self, key: int, fd: int, size: int) -> None:
        """Make segment ``key`` (anonymous shared memory: file ``fd``, ``size`` bytes) known there."""
        if key in self._shared:
            return
        conn = self._connection()
        conn.send(("segment", key, size))
        reduction.send_handle(conn, fd, self._process.pid if self._process else 0)
        self._shared.add(key)

    def write(self, request: WriteRequest) -> None:
        """Write one store in the process; raise its error (``StoreError``) or :class:`WriterDiedError`."""
        try:
            conn = self._connection()
            conn.send(("write", request))
            reply = conn.recv()
        except (EOFError, OSError) as exc:
            raise WriterDiedError(
                f"{request.path}: the rollout store's writer process died "
                f"({self._how_it_ended()}) while writing it"
            ) from exc
        if reply is not None:
            raise _rebuilt(reply, request.path)

    def close(self) -> None:
        """Stop the process (it has finished every write it was given) and wait for it."""
        process, conn = self._process, self._conn
        if process is None or conn is None:  # never started (the two are set together)
            return
        with contextlib.suppress(OSError):
            conn.send(None)
        with contextlib.suppress(OSError, EOFError):
            conn.poll(30)  # wakes when the process closes its end, as it exits; a timed wait polls
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        conn.close()
        self._process = self._conn = None
        self._shared.clear()

    def _connection(self) -> Connection:
        if self._conn is None:
            self._process, self._conn = _take_prewarmed() or _start()
        return self._conn

    def _how_it_ended(self) -> str:
        code = self._process.wait(timeout=10) if self._process is not None else None
        if code is None:
            return "no answer"
        if code < 0:
            return f"killed by {signal.Signals(-code).name}"
        return f"exit code {code}"


def _start() -> tuple[subprocess.Popen[bytes], Connection]:
    """Start ``python -m rlpipe.artifacts.writer_process FD PID``; return it and our end of its socket."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with theirs:
        process = subprocess.Popen(
            [sys.executable, "-m", "rlpipe.artifacts.writer_process", str(theirs.fileno()), str(os.getpid())],
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
            close_fds=True,
        )
    return process, Connection(ours.detach())


def _rebuilt(reply: tuple[str, str, int | None, str | None, str | None], path: str) -> Exception:
    """The training process's ``StoreError`` for an error the writer process reported."""
    from rlpipe.artifacts.errors import StoreError

    kind, message, errno, strerror, filename = reply
    if errno is not None:  # disk full, read-only, permission: a runtime failure, not bad input
        cause = OSError(errno, strerror, filename) if filename else OSError(errno, strerror)
        error = StoreError(f"writing {path} failed: {cause}")
        error.__cause__ = cause
        return error
    if kind == "StoreError":
        return StoreError(message)
    return StoreError(f"writing {path} failed: {message}")


# ------------------------------------------------------------------------------ in the writer process


def serve(conn: Connection) -> None:
    """Answer requests until ``None`` or the training process's end of the socket closes."""
    segments: dict[int, mmap.mmap] = {}
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        if message[0] == "segment":
            _, key, size = message
            fd = reduction.recv_handle(conn)
            with contextlib.closing(os.fdopen(fd, "rb", buffering=0)) as file:
                segments[key] = mmap.mmap(file.fileno(), size, prot=mmap.PROT_READ)
            continue
        conn.send(_write(message[1], segments))


def _write(
    request: WriteRequest, segments: dict[int, mmap.mmap]
) -> tuple[str, str, int | None, str | None, str | None] | None:
    """Write one store from its segment; ``None``, or ``(kind, message, errno, strerror, filename)``."""
    from rlpipe.artifacts.errors import StoreError
    from rlpipe.artifacts.zarr_local import write_arrays
    from rlpipe.testing import faults

    path = Path(request.path)
    try:
        arrays = _views(segments[request.segment], request.leaves) | request.extra
        faults.point("store.write")
        write_arrays(
            path, arrays, request.attrs, request.codec, request.image_codec, request.chunk_envs, request.dims
        )
    except StoreError as exc:
        return ("StoreError", str(exc), None, None, None)
    except OSError as exc:
        if path.exists():  # another writer won the race for this name
            message = f"{path}: already exists; rollout stores are written once"
            return ("StoreError", message, None, None, None)
        return (type(exc).__name__, str(exc), exc.errno, exc.strerror, exc.filename)
    except Exception as exc:  # the training process reports it as this store's write failure
        return (type(exc).__name__, str(exc), None, None, None)
    return None


def _views(segment: mmap.mmap, leaves: tuple[Leaf, ...]) -> dict[str, Any]:
    """Read-only numpy views of the arrays in ``segment`` (no copy)."""
    import numpy as np

    arrays = {}
    for name, shape, dtype, offset in leaves:
        count = int(np.prod(shape, dtype=np.int64))
        arrays[name] = np.frombuffer(segment, dtype=dtype, count=count, offset=offset).reshape(shape)
    return arrays


def _die_with_parent(parent: int) -> None:
    """Linux: be killed when the thread that started this process ends; elsewhere a no-op."""
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # it ended before the line above took effect
        os._exit(1)


def main(argv: list[str]) -> None:
    """``python -m rlpipe.artifacts.writer_process FD PARENT_PID``: serve on socket ``FD``."""
    from rlpipe.runtime.threads import yield_to_training

    fd, parent = int(argv[0]), int(argv[1])
    _die_with_parent(parent)
    yield_to_training()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the trainer, which then stops this
    import rlpipe.artifacts.zarr_local  # noqa: F401  (its imports now, not on the first write's way)

    conn = Connection(fd)
    try:
        serve(conn)
    finally:
        conn.close()


if __name__ == "__main__":
    main(sys.argv[1:])
