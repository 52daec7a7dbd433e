"""The rollouts of one run: a background writer, listing, temporaries and retention.

Each iteration is one immutable Zarr group in the format of :mod:`rlpipe.artifacts.zarr_io`
(``<root>/iter-000012.zarr``), written off the training thread on a bounded queue; its host copy is
made through reused (for CUDA rollouts pinned) buffers, :mod:`rlpipe.artifacts.staging`. The writes
run in a writer process fed from shared-memory buffers (``store.writer: process``,
:mod:`rlpipe.artifacts.writer_process`), or in a thread of this process (``thread``; always on an
object store); either way a thread of this process hands the rollouts over in order and frees
their slots. A rollout is checked once, where it enters the store
(:func:`rlpipe.artifacts.intake.check_rollout`, in :meth:`RolloutStore.submit` and
:func:`write_rollout`). zarr is imported on the first write (by the writer thread or process), so
its import is not on the way to iteration 1. Reading is :mod:`rlpipe.artifacts.zarr_read`.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from tensordict import TensorDict

from rlpipe.artifacts.errors import StoreError, WriterTimeoutError
from rlpipe.artifacts.fs import AnyPath, as_path, is_object
from rlpipe.artifacts.intake import check_new_store, check_rollout, final_obs_arrays, group_attributes
from rlpipe.artifacts.layout import ROLLOUT_NAME, SHARD_NAME, numbered, rollout_name
from rlpipe.artifacts.removal import check_confined, clean_temporaries, delete
from rlpipe.artifacts.shared_staging import SharedBuffers
from rlpipe.artifacts.staging import HostStaging, Staged
from rlpipe.artifacts.store_policy import StorePolicy, layout_of, stored_bytes
from rlpipe.artifacts.writer_process import WriterDiedError, WriteRequest, WriterProcess, writer_mode
from rlpipe.artifacts.writer_watch import WARN_AFTER_S, wait_warned
from rlpipe.config import StoreCfg
from rlpipe.rollout import DIM_NAMES
from rlpipe.testing import faults

__all__ = ["RolloutStore", "StoreError", "WriterDiedError", "writer_mode", "write_rollout"]


def write_rollout(
    path: AnyPath,
    rollout: TensorDict,
    attrs: dict[str, Any],
    codec: str = "none",
    chunk_envs: int = 1024,
    image_codec: str = "none",
    final_obs: TensorDict | None = None,
) -> None:
    """Check ``rollout`` (``[N, T+1]``, any device) and write it as a new store at ``path``, now.

    ``final_obs``: its sparse final observations ``[K]`` (:func:`rlpipe.rollout.gather_final_obs`),
    stored as the ``final_obs`` group. Raises :class:`StoreError` naming ``path`` when the rollout
    breaks the schema (:func:`~rlpipe.artifacts.intake.check_rollout`), ``path`` exists or the
    write fails; see :func:`rlpipe.artifacts.zarr_write.write_rollout` for ``attrs``, ``codec``,
    ``chunk_envs`` and ``image_codec``.
    """
    path = as_path(path)
    check_rollout(rollout, path, final_obs)
    _write_checked(path, rollout, attrs, codec, chunk_envs, image_codec, final_obs)


def _write_checked(
    path: AnyPath,
    rollout: TensorDict,
    attrs: dict[str, Any],
    codec: str,
    chunk_envs: int,
    image_codec: str = "none",
    final_obs: TensorDict | None = None,
) -> None:
    """Write a rollout that passed ``check_rollout`` (zarr imported on the first call)."""
    from rlpipe.artifacts import zarr_write

    zarr_write.write_rollout(path, rollout, attrs, codec, chunk_envs, image_codec, final_obs)


@dataclass
class _Job:
    path: AnyPath
    staged: Staged
    attrs: dict[str, Any]


class RolloutStore:
    """The rollouts of one run under ``root``: background writes, listing, retention.

    ``submit`` starts the rollout's host copy and returns; a writer thread writes it. The store
    holds at most ``cfg.queue_size`` rollouts, the one being written included: ``submit`` waits for
    a free slot before it copies (back-pressure: it never drops a rollout, and it returns how long
    it waited), so with the default of 1 a run keeps one rollout beyond the collector's buffer and
    the update's working set. Call
    ``flush`` before checkpointing or finishing, so no run goes past a rollout not yet on disk.
    The first write error stops further writes and is raised by ``flush``/``submit``/``close``;
    stores already written are kept. With ``cfg.enabled`` false, ``submit`` writes nothing.

    Deletes (retention, :meth:`discard_after`) stay inside ``root``'s parent (the run directory)
    and never go through a link: with ``cfg.keep_last`` set, a ``root`` that is a symbolic link is
    refused here, before anything is written.

    ``mode`` (``writer_mode(cfg, root)``): ``process`` writes in the writer process from shared
    memory (a writer process that dies, or does not answer within ``cfg.writer_timeout_s``, is a
    :class:`WriterDiedError` naming the store), ``thread``
    in the writer thread. ``policy`` says which iterations, envs and dtypes are stored
    (:class:`~rlpipe.artifacts.store_policy.StorePolicy`; default: what ``cfg`` sets directly, a
    ``cfg.budget`` is applied by :func:`~rlpipe.artifacts.store_policy.derive_policy`).
    """

    def __init__(self, root: AnyPath, cfg: StoreCfg, policy: StorePolicy | None = None) -> None:
        self.root = as_path(root)
        self.cfg = cfg
        self.policy = policy or StorePolicy.of(cfg)
        self.last_write: tuple[int, float] | None = None
        """``(bytes, seconds)`` of the newest rollout written: the rate the writer keeps."""
        self._queue: queue.Queue[_Job | None] = queue.Queue()  # bounded by the slots
        self._slots = threading.BoundedSemaphore(cfg.queue_size)
        """One per rollout the store holds (being copied, queued or being written)."""
        self.mode = writer_mode(cfg, self.root)
        self._shared = SharedBuffers() if self.mode == "process" else None
        self._process = WriterProcess(cfg.writer_timeout_s) if self.mode == "process" else None
        self._staging = (
            HostStaging(cfg.queue_size, self._shared.allocate, self._shared.is_pinned)
            if self._shared is not None
            else HostStaging(cfg.queue_size)
        )
        self._io_lock = threading.Lock()  # one writer/cleaner of ``root`` at a time
        self._thread: threading.Thread | None = None
        self._error: StoreError | WriterDiedError | WriterTimeoutError | None = None
        self._closed = False
        self._writing: AnyPath | None = None
        """The store the writer is writing now (named when a wait on the writer thread lasts)."""
        if cfg.enabled and cfg.keep_last:
            check_confined(self.path_for(0), self.root.parent)
        self.clean_temporaries()

    def path_for(self, iteration: int) -> AnyPath:
        """``root/iter-{iteration:06d}.zarr``."""
        return self.root / rollout_name(iteration)

    def iterations(self) -> list[int]:
        """Return the iterations with a complete store, ascending (never temporaries)."""
        return [k for k, path in numbered(self.root, ROLLOUT_NAME).items() if (path / "zarr.json").is_file()]

    def latest(self) -> int | None:
        """Return the newest complete iteration, or ``None`` when there is none."""
        its = self.iterations()
        return its[-1] if its else None

    def clean_temporaries(self) -> list[Path]:
        """Remove temporaries left by dead processes (and this one); return what was removed.

        Temporaries of another live process (a concurrent writer) are kept.
        """
        with self._io_lock:
            if is_object(self.root):
                return self._clean_uncommitted(numbered(self.root, ROLLOUT_NAME).values())
            return clean_temporaries(self.root, ROLLOUT_NAME)

    def _clean_uncommitted(self, groups: Iterable[AnyPath]) -> list[Path]:
        """Object store: delete the groups without their root ``zarr.json`` (a killed writer's leftovers).

        Safe because the caller holds the run lock (or, for a shard, is the only writer of its rank).
        """
        removed = []
        for path in groups:
            sharded = any(SHARD_NAME.match(p.name) for p in path.iterdir())
            if not sharded and not (path / "zarr.json").is_file():
                delete(path)
                removed.append(path)
        return removed

    def discard_after(self, iteration: int) -> list[int]:
        """Delete the stores newer than ``iteration``; return their iterations.

        For ``--resume`` from the checkpoint of ``iteration``: later stores belong to the abandoned
        run and would block their write-once names.
        """
        self.flush()
        with self._io_lock:
            return self._delete([it for it in self.iterations() if it > iteration])

    def _retain(self) -> list[int]:
        keep = self.cfg.keep_last
        return self._delete(self.iterations()[:-keep] if keep else [])

    def _delete(self, iterations: list[int]) -> list[int]:
        for iteration in iterations:
            faults.point("store.retention")
            delete(self.path_for(iteration), within=self.root.parent)
        return iterations

    def submit(
        self, rollout: TensorDict, attrs: dict[str, Any], final_obs: TensorDict | None = None
    ) -> float:
        """Queue ``rollout`` (``[N, T+1]``, any device) to be written as ``attrs["iteration"]``.

        ``final_obs``: the rollout's sparse final observations ``[K]``
        (:func:`rlpipe.rollout.gather_final_obs`), kept for the stored envs in the stored precision.

        An iteration the policy does not store returns 0.0 at once; a stored one is cut to the
        policy's envs and dtypes on its device first, and its attributes record that
        (:meth:`~rlpipe.artifacts.store_policy.StorePolicy.shape`). The host copy starts before this
        returns (:meth:`~rlpipe.artifacts.staging.HostStaging.stage`:
        a CPU rollout is copied into a reused host buffer, a CUDA one cloned on its device), so the
        caller may refill its buffer right away. Blocks, before copying, while the store holds
        ``cfg.queue_size`` rollouts; returns the seconds it waited for that (0.0 with the store off).
        Raises :class:`StoreError` after an earlier write failed, when the store is closed, when the
        target already exists or when the rollout breaks the schema
        (:func:`~rlpipe.artifacts.intake.check_rollout`, the rollout's one check).
        """
        if not self.cfg.enabled:
            return 0.0
        self._raise_if_failed()
        if self._closed:
            raise StoreError(f"{self.root}: rollout store is closed")
        iteration = attrs.get("iteration")
        if not isinstance(iteration, int):
            raise StoreError(f"{self.root}: submit needs an integer attrs['iteration'], got {iteration!r}")
        if not self.policy.stores(iteration):
            return 0.0
        path = self.path_for(iteration)
        check_new_store(path)  # on the caller's thread, where the error was made
        check_rollout(rollout, path, final_obs)
        num_envs = rollout.batch_size[0]
        rollout, kept = self.policy.shape(rollout)
        if final_obs is not None:
            final_obs = self.policy.shape_final_obs(final_obs, num_envs)
        attrs = {**attrs, **kept}
        start = time.perf_counter()
        self._acquire_slot()  # released by the writer once this rollout is on disk
        waited = time.perf_counter() - start
        try:
            staged = self._staging.stage(rollout, final_obs)
        except OSError as exc:  # shared memory refused (a file-size limit, no space in /dev/shm)
            self._slots.release()
            raise StoreError(f"{path}: staging it for the writer process failed: {exc}") from exc
        except BaseException:
            self._slots.release()
            raise
        self._ensure_thread()
        self._queue.put(_Job(path, staged, dict(attrs)))
        return waited

    def flush(self) -> float:
        """Block until every submitted rollout is on disk; return the seconds that took.

        Raises the first write error. The wait is bounded by ``store.writer_timeout_s``: the writer
        process is stopped past it, a writer thread left to itself (:class:`WriterTimeoutError`).
        """
        start = time.perf_counter()
        if self.mode == "process":
            self._queue.join()  # every wait of the thread on the process is bounded
        else:
            self._wait_for_thread(self._all_written)
        self._raise_if_failed()
        return time.perf_counter() - start

    def close(self) -> None:
        """Flush and stop the writer thread; raise the first write error, if any."""
        self._closed = True
        if self._thread is not None:
            self._queue.put(None)  # a thread given up on ends by itself if its write ever returns
            if not isinstance(self._error, WriterTimeoutError):
                self._thread.join()
            self._thread = None
        if self._process is not None:
            self._process.close()
            self._staging = HostStaging(self.cfg.queue_size)  # the pool lets go of the shared buffers
        if self._shared is not None:
            self._shared.close()
        self._raise_if_failed()

    def __enter__(self) -> RolloutStore:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            self.close()
        except StoreError as store_exc:
            if exc is None:
                raise
            exc.add_note(f"also: {store_exc}")  # keep the body's exception the one raised

    def _acquire_slot(self) -> None:
        if self.mode == "process":
            self._slots.acquire()  # every wait of the thread on the process is bounded
        else:
            self._wait_for_thread(lambda timeout: self._slots.acquire(timeout=timeout))

    def _all_written(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s for the queue to empty (``Queue.join`` with a timeout)."""
        with self._queue.all_tasks_done:
            if self._queue.unfinished_tasks:
                self._queue.all_tasks_done.wait(timeout)
            return not self._queue.unfinished_tasks

    def _wait_for_thread(self, done: Callable[[float], bool]) -> None:
        """Wait on the writer thread (``done(timeout)``), warned about; a ``WriterTimeoutError`` at the limit.

        A thread cannot be stopped from outside: past ``cfg.writer_timeout_s`` the store gives up on
        it (the rollouts it has not started are not written; the one it is writing is published if
        its write ever returns, as any store past the last checkpoint, which resume sets aside):
        :class:`WriterTimeoutError`.
        """
        limit = self.cfg.writer_timeout_s
        if wait_warned(done, "writer thread has not finished", self._doing, WARN_AFTER_S, limit):
            return
        self._error = WriterTimeoutError(
            f"{self._writing or self.root}: the rollout store's writer thread has not finished it for "
            f"{limit:g} s (a disk or an object store that stopped answering) and was given up; "
            "raise store.writer_timeout_s to wait longer"
        )
        self._raise_if_failed()

    def _doing(self) -> str:
        writing = self._writing
        return f"writing {writing}" if writing is not None else f"waiting to write under {self.root}"

    def _ensure_thread(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="rlpipe-store", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            job = self._queue.get()
            try:
                if job is None:  # stop the process from the thread that started it: on Linux it
                    if self._process is not None:  # is bound to that thread's life (PR_SET_PDEATHSIG)
                        self._process.close()
                    return
                if self._error is None:  # after a failure, drain without writing
                    self._write(job)
            finally:
                if job is not None:  # the buffer back to the pool, then the slot frees
                    self._staging.release(job.staged.wait())
                    job = None
                    self._slots.release()
                self._queue.task_done()

    def _write(self, job: _Job) -> None:
        try:
            host = job.staged.wait()  # the device clone goes now
            began = time.perf_counter()
            self._writing = job.path
            with self._io_lock:
                if self._process is None:
                    faults.point("store.write")
                    _write_checked(
                        job.path,
                        host,
                        job.attrs,
                        self.cfg.codec,
                        self.cfg.chunk_envs,
                        self.cfg.image_codec,
                        job.staged.final_obs,
                    )
                else:
                    self._write_in_process(job.path, host, job.attrs, job.staged.final_obs)
                faults.point("store.published")
                self.last_write = (stored_bytes(layout_of(host)), time.perf_counter() - began)
                self._retain()
        except (StoreError, WriterDiedError) as exc:
            self._error = exc
        except OSError as exc:  # disk full, read-only, permission: a runtime failure, not bad input
            self._error = StoreError(f"writing {job.path} failed: {exc}")
            self._error.__cause__ = exc
        except Exception as exc:
            self._error = StoreError(f"writing {job.path} failed: {exc}")
        finally:
            self._writing = None

    def _write_in_process(
        self, path: AnyPath, host: TensorDict, attrs: dict[str, Any], final_obs: TensorDict | None
    ) -> None:
        """Have the writer process write ``host`` (a shared buffer) as the store at ``path``.

        The sparse final observations travel with the request (pickled: a few rows per rollout).
        """
        process, shared = self._process, self._shared
        assert process is not None and shared is not None  # the ``process`` mode made both
        segment = shared.segment_of(host)
        process.share(segment.key, segment.fd, segment.size, str(path))
        cfg, stored = self.cfg, group_attributes(attrs, path)
        extra = {} if final_obs is None else {k: t.numpy() for k, t in final_obs_arrays(final_obs).items()}
        process.write(
            WriteRequest(
                str(path),
                segment.key,
                segment.leaves,
                stored,
                cfg.codec,
                cfg.image_codec,
                cfg.chunk_envs,
                DIM_NAMES,
                extra,
            )
        )

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise type(self._error)(str(self._error)) from (self._error.__cause__ or self._error)
