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

Every wait on the process is bounded (:class:`~rlpipe.artifacts.writer_watch.Watch`): a process
that does not answer (stopped, swapped out, hung on a disk) is warned about by pid, and after
``store.writer_timeout_s`` it is killed and the wait fails with :class:`WriterStalledError`, so a
run never hangs on its writer.
"""

from __future__ import annotations

import atexit
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
from rlpipe.artifacts.writer_watch import WARN_AFTER_S, Watch

if TYPE_CHECKING:
    from rlpipe.config import StoreCfg

__all__ = [
    "Leaf",
    "WriteRequest",
    "WriterDiedError",
    "WriterProcess",
    "WriterStalledError",
    "available",
    "prewarm",
    "writer_mode",
]

_WRITER_ENV = ("RLPIPE_", "PYTHON", "ZARR_", "NUMCODECS_", "BLOSC_")
"""Prefixes of the environment variables the writer process reads as it starts (fault points,
``RLPIPE_FAST``, the interpreter's path, zarr's and its codecs' settings); the others (a cache
folder torch sets on import, say) do not change what it writes."""

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
    """The writer process ended before a store was written; the message names the store and how (exit 1)."""


class WriterStalledError(WriterDiedError):
    """The writer process did not answer within ``store.writer_timeout_s`` and was stopped (exit 1)."""


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
"""The waiting process, its socket and the variables of :data:`_WRITER_ENV` it was started with."""


def prewarm(cfg: StoreCfg, root: AnyPath) -> None:
    """Start a writer process now when ``cfg`` stores rollouts under ``root`` through one.

    Its interpreter and writer (numpy, not zarr) then load while this process imports torch and builds,
    not while the first rollout waits to be written; the next :class:`WriterProcess` takes it over
    (one waits at a time) if the variables it read at start (:data:`_WRITER_ENV`) are still this
    process's. Only from the main thread: the process dies with the thread that started it. One
    not taken over is stopped and reaped (when another is needed, or at exit).
    """
    global _prewarmed
    if not cfg.enabled or writer_mode(cfg, root) != "process":
        return
    if threading.current_thread() is not threading.main_thread():
        return
    if _prewarmed is None or _prewarmed[0].poll() is not None:
        _prewarmed = (*_start(), _writer_environment())
        atexit.unregister(_discard_prewarmed)  # once, however many runs this process starts
        atexit.register(_discard_prewarmed)


def _writer_environment() -> dict[str, str]:
    """The variables of this process that the writer process reads as it starts (:data:`_WRITER_ENV`)."""
    return {name: value for name, value in os.environ.items() if name.startswith(_WRITER_ENV)}


def _take_prewarmed() -> tuple[subprocess.Popen[bytes], Connection] | None:
    """The waiting process, if alive and started with today's :data:`_WRITER_ENV` variables.

    One started under other variables is stopped and reaped (never left a zombie).
    """
    global _prewarmed
    started, _prewarmed = _prewarmed, None
    if started is None:
        return None
    process, conn, environ = started
    if process.poll() is None and environ == _writer_environment():
        return process, conn
    _stop(process, conn)
    return None


def _discard_prewarmed() -> None:
    """Stop and reap a prewarmed process nobody took over (at exit)."""
    global _prewarmed
    started, _prewarmed = _prewarmed, None
    if started is not None:
        _stop(*started[:2])


def _stop(process: subprocess.Popen[bytes], conn: Connection, wait_s: float = 10.0) -> None:
    """Close the process's input (it exits by itself when idle) and reap it; kill it after ``wait_s``."""
    conn.close()
    try:
        process.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


class WriterProcess:
    """The training process's handle on the writer process: started on first use, one write at a time.

    :meth:`share` hands a segment (a file descriptor and its size) to the process once;
    :meth:`write` asks for one store and blocks until it is written (the socket wait releases the
    interpreter lock), raising the ``StoreError`` the write raised there, or :class:`WriterDiedError`.
    Every wait is bounded by ``limit_s`` (``store.writer_timeout_s``): past it the process is
    killed and the wait raises :class:`WriterStalledError`.
    """

    def __init__(self, limit_s: float = 600.0) -> None:
        self.limit_s = limit_s
        self._process: subprocess.Popen[bytes] | None = None
        self._conn: Connection | None = None
        self._shared: set[int] = set()
        self._slowest_s = 0.0
        """The longest write so far: a wait is warned about only once it is well beyond it."""

    def share(self, key: int, fd: int, size: int, path: str = "") -> None:
        """Make segment ``key`` (anonymous shared memory: file ``fd``, ``size`` bytes) known there.

        ``path``: the store the segment is shared for, named if the process has died.
        """
        if key in self._shared:
            return
        conn = self._connection()
        with self._watch(f"taking the buffer of {path}") as watch:
            try:
                conn.send(("segment", key, size))
                reduction.send_handle(conn, fd, self._process.pid if self._process else 0)
            except OSError as exc:
                raise self._ended(path, "before writing it", watch) from exc
        self._shared.add(key)

    def write(self, request: WriteRequest) -> None:
        """Write one store in the process; raise its error (``StoreError``) or :class:`WriterDiedError`."""
        conn = self._connection()
        with self._watch(f"writing {request.path}") as watch:
            try:
                conn.send(("write", request))
            except OSError as exc:
                raise self._ended(request.path, "before writing it", watch) from exc
            try:
                reply = conn.recv()
            except (EOFError, OSError) as exc:
                raise self._ended(request.path, "while writing it", watch) from exc
        self._slowest_s = max(self._slowest_s, watch.waited_s)
        if reply is not None:
            raise _rebuilt(reply, request.path)

    def close(self) -> None:
        """Stop the process (it has finished every write it was given) and wait for it (bounded)."""
        process, conn = self._process, self._conn
        if process is None or conn is None:  # never started (the two are set together)
            return
        with self._watch("finishing"):
            with contextlib.suppress(OSError):
                conn.send(None)
            with contextlib.suppress(OSError, EOFError):
                conn.poll(None)  # wakes when the process closes its end, as it exits (or is killed)
        _stop(process, conn)
        self._process = self._conn = None
        self._shared.clear()

    def _connection(self) -> Connection:
        if self._conn is None:
            self._process, self._conn = _take_prewarmed() or _start()
        return self._conn

    def _watch(self, what: str) -> Watch:
        assert self._process is not None  # started by ``_connection``
        return Watch(self._process, what, max(WARN_AFTER_S, 3 * self._slowest_s), self.limit_s)

    def _ended(self, path: str, when: str, watch: Watch) -> WriterDiedError:
        """The error for a process that stopped answering: stalled (killed here) or died on its own."""
        pid = self._process.pid if self._process is not None else None
        if watch.expired:
            self._how_it_ended()  # reaped
            return WriterStalledError(
                f"{path}: the rollout store's writer process (pid {pid}) did not answer for "
                f"{self.limit_s:g} s (stopped or hung) and was stopped; raise "
                "store.writer_timeout_s to wait longer"
            )
        return WriterDiedError(
            f"{path}: the rollout store's writer process died ({self._how_it_ended()}) {when}"
        )

    def _how_it_ended(self) -> str:
        try:
            code = self._process.wait(timeout=10) if self._process is not None else None
        except subprocess.TimeoutExpired:
            code = None
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
