"""Zarr rollout store: one immutable Zarr v3 group per iteration, written atomically off-thread.

Layout of ``<root>/iter-000012.zarr``::

    zarr.json             group attributes: schema_version, plus what the caller passes (iteration,
                          env_steps, env_id, seed, params_hash, checkpoint)
    obs/, action/, …      one array per rollout key, shape [N, T+1, *feature], chunked
                          (min(chunk_envs, N), T+1, *feature): along envs only, never per step;
                          dimension_names ("env", "time", "feat0", …)
    extras/action_mean/   a nested TensorDict key ("extras", "action_mean") is a nested Zarr group

Nested keys are joined with "/" (so they become Zarr subgroups); key parts may not contain "/".
Codec ``none`` stores raw little-endian bytes (a truncated chunk fails its size check on read);
``blosc-lz4`` chunks also end in a CRC32C checksum (zarr's standard ``crc32c`` codec), because
blosc decodes a truncated chunk into garbage without complaint.
A store is written under a hidden sibling (``.iter-000012.zarr.tmp-<pid>-<token>``) and renamed
into place only when every array is complete: a reader never sees a half-written store and a final
name is written once. Writes are not fsynced; after a power loss :func:`read_rollout` reports a
missing or truncated chunk file by name.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import os
import queue
import re
import secrets
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
import torch
import zarr.api.asynchronous as zarr_async
from tensordict import TensorDict
from zarr import AsyncArray, AsyncGroup
from zarr.codecs import BloscCodec, Crc32cCodec
from zarr.core.sync import sync  # runs a coroutine on zarr's own I/O loop, from any thread
from zarr.storage import LocalStore

from rlpipe.config import StoreCfg
from rlpipe.rollout import DIM_NAMES, SCHEMA_VERSION, TRANSITION_KEYS

__all__ = [
    "CODECS",
    "REQUIRED_KEYS",
    "RolloutStore",
    "StoreError",
    "read_arrays",
    "read_rollout",
    "write_rollout",
]

CODECS = ("none", "blosc-lz4")
REQUIRED_KEYS = ("obs", "value", *TRANSITION_KEYS)
"""Arrays every rollout store holds (the schema keys of :mod:`rlpipe.rollout`)."""
_STORE_NAME = re.compile(r"^iter-(\d{6,})\.zarr$")
_TEMP_NAME = re.compile(r"^\.iter-\d{6,}\.zarr\.(?:tmp|del)-(\d+)-[0-9a-f]+$")


class StoreError(ValueError):
    """A rollout store or checkpoint problem; the one-line message names the path."""


def write_rollout(
    path: Path, rollout: TensorDict, attrs: dict[str, Any], codec: str = "none",
    chunk_envs: int = 1024,
) -> None:
    """Write ``rollout`` (``[N, T+1]``, any device) as a new Zarr group at ``path``, atomically.

    Arrays are written concurrently through zarr's async API. ``attrs`` must be JSON-serializable;
    ``schema_version`` is added. ``codec``: ``"none"`` or ``"blosc-lz4"``. Raises
    :class:`StoreError` if ``path`` exists; on any failure no store and no temporary remain.
    """
    path = Path(path)
    arrays = {name: t.detach().cpu().numpy() for name, t in _leaves(rollout, path).items()}
    group_attrs = _group_attrs(attrs, path)
    compressors = _compressors(codec)
    _check_new(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")
    try:
        sync(_write_group(tmp, arrays, group_attrs, compressors, chunk_envs))
        try:
            os.rename(tmp, path)
        except OSError:
            _check_new(path)  # another writer may have won the race for this name
            raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _check_new(path: Path) -> None:
    if path.exists():
        raise StoreError(f"{path}: already exists; rollout stores are written once")


def _leaves(rollout: TensorDict, path: Path) -> dict[str, torch.Tensor]:
    """Check batch dims, schema keys and dtypes; return ``{"/"-joined key: tensor}``."""
    if rollout.batch_dims != 2:
        batch = list(rollout.batch_size)
        raise StoreError(f"{path}: rollout batch_size must be [N, T+1], got {batch}")
    missing = [key for key in REQUIRED_KEYS if key not in rollout.keys()]
    if missing:
        raise StoreError(f"{path}: rollout lacks schema key {missing[0]!r}")
    leaves = {}
    for key, value in rollout.items(include_nested=True, leaves_only=True):
        name = _array_name(key, path)
        if not isinstance(value, torch.Tensor):
            raise StoreError(f"{path}: key {name!r} is a {type(value).__name__}, not a tensor")
        try:
            torch.empty(0, dtype=value.dtype).numpy()
        except TypeError:  # e.g. bfloat16 has no numpy dtype
            raise StoreError(f"{path}: key {name!r} has dtype {value.dtype}, which Zarr cannot "
                             "store") from None
        leaves[name] = value
    return leaves


def _array_name(key: str | tuple[str, ...], path: Path) -> str:
    parts = (key,) if isinstance(key, str) else key
    for part in parts:
        if "/" in part or part in {"", ".", ".."} or part.startswith("__"):
            raise StoreError(f"{path}: key {key!r} is not a valid Zarr node name")
    return "/".join(parts)


def _group_attrs(attrs: dict[str, Any], path: Path) -> dict[str, Any]:
    if "schema_version" in attrs:
        raise StoreError(f"{path}: attrs may not set 'schema_version' (always {SCHEMA_VERSION})")
    merged = {"schema_version": SCHEMA_VERSION, **attrs}
    try:
        json.dumps(merged)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"{path}: attrs are not JSON-serializable ({exc})") from None
    return merged


_Codecs = tuple[BloscCodec | Crc32cCodec, ...]
_CHECKSUM: _Codecs = (Crc32cCodec(),)


def _compressors(codec: str) -> _Codecs:
    if codec == "none":  # a raw chunk of the wrong size fails to decode: no checksum needed
        return ()
    if codec == "blosc-lz4":  # typesize/shuffle left tunable: zarr picks them from each dtype
        return (BloscCodec(cname="lz4", clevel=5, typesize=None, shuffle=None), *_CHECKSUM)
    raise StoreError(f"store codec {codec!r} is not known; accepted: {', '.join(CODECS)}")


async def _write_group(
    tmp: Path, arrays: dict[str, np.ndarray], attrs: dict[str, Any],
    compressors: _Codecs, chunk_envs: int,
) -> None:
    group = await zarr_async.open_group(
        store=LocalStore(tmp), mode="w-", zarr_format=3, attributes=attrs
    )
    writes = (_write_array(group, name, a, compressors, chunk_envs) for name, a in arrays.items())
    # return_exceptions: wait for every write (their I/O threads cannot be cancelled) before the
    # caller removes the temporary, then raise the first failure.
    results = await asyncio.gather(*writes, return_exceptions=True)
    errors = [r for r in results if isinstance(r, BaseException)]
    if errors:
        raise errors[0]


async def _write_array(
    group: AsyncGroup, name: str, data: np.ndarray, compressors: _Codecs, chunk_envs: int,
) -> None:
    """Create and fill one array ``[N, T+1, *feature]``, chunked along envs only."""
    n, t1, *feature = data.shape
    await group.create_array(
        name, data=data, chunks=(min(chunk_envs, n), t1, *feature), compressors=compressors,
        filters=None, dimension_names=(*DIM_NAMES, *(f"feat{i}" for i in range(len(feature)))),
        config={"write_empty_chunks": True},  # every chunk has a file: a missing one is damage
    )


def read_rollout(
    path: Path, device: torch.device | str = "cpu"
) -> tuple[TensorDict, dict[str, Any]]:
    """Read a store back: the ``[N, T+1]`` rollout (dims ``("env", "time")``) and its attributes.

    Values and dtypes are those written. Raises :class:`StoreError` naming the path when it is
    missing, not an rlpipe store, of another schema version, or has a missing/truncated chunk.
    """
    path = Path(path)
    attrs, arrays = sync(_read_store(path))
    n, t1 = arrays["obs"][1].shape[:2]
    rollout = TensorDict({}, batch_size=[n, t1], names=list(DIM_NAMES))
    for name, (_, data) in arrays.items():
        rollout.set(tuple(name.split("/")), torch.from_numpy(data))
    return rollout.to(device), attrs


_Arrays = dict[str, tuple[AsyncArray, np.ndarray]]


async def _read_store(path: Path) -> tuple[dict[str, Any], _Arrays]:
    """Attributes and ``{name: (array, data)}`` of a checked store; arrays are read concurrently."""
    attrs, arrays = await _open_store(path)
    data = await asyncio.gather(*(_read_array(path, name, arr) for name, arr in arrays.items()))
    return attrs, {name: (arr, values) for (name, arr), values in zip(arrays.items(), data)}


async def _open_store(path: Path) -> tuple[dict[str, Any], dict[str, AsyncArray]]:
    if not path.exists():
        raise StoreError(f"{path}: no rollout store here")
    if not (path / "zarr.json").is_file():
        raise StoreError(f"{path}: not an rlpipe rollout store (no zarr.json: not a Zarr v3 group)")
    try:
        group = await zarr_async.open_group(store=LocalStore(path, read_only=True), mode="r",
                                            zarr_format=3)
        members = [(name, node) async for name, node in group.members(max_depth=None)]
    except Exception as exc:
        raise StoreError(f"{path}: not an rlpipe rollout store ({_first_line(exc)})") from None
    attrs = dict(group.attrs)
    version = attrs.get("schema_version")
    if version is None:
        raise StoreError(f"{path}: not an rlpipe rollout store (no schema_version attribute)")
    if version != SCHEMA_VERSION:
        raise StoreError(f"{path}: rollout schema version {version}, this rlpipe reads version "
                         f"{SCHEMA_VERSION}")
    arrays = {name: node for name, node in sorted(members) if isinstance(node, AsyncArray)}
    missing = [key for key in REQUIRED_KEYS if key not in arrays]
    if missing:
        raise StoreError(f"{path}: not an rlpipe rollout store (no {missing[0]!r} array)")
    batch = arrays["obs"].shape[:2]
    for name, arr in arrays.items():
        if arr.shape[:2] != batch:
            raise StoreError(f"{path}/{name}: shape {list(arr.shape)} does not start with the "
                             f"rollout's [N, T+1] = {list(batch)}")
    return attrs, arrays


async def _read_array(path: Path, name: str, arr: AsyncArray) -> np.ndarray:
    coords = _chunk_coords(arr)
    for coord in coords:
        chunk_file = path / name / arr.metadata.encode_chunk_key(coord)
        if not chunk_file.is_file():
            raise StoreError(f"{chunk_file}: chunk file missing (incomplete or damaged store)")
    try:
        return np.asarray(await arr.getitem(...))
    except Exception as exc:
        bad = await _first_bad_chunk(arr, coords)
        where = path / name / arr.metadata.encode_chunk_key(bad) if bad else path / name
        raise StoreError(f"{where}: truncated or unreadable ({_first_line(exc)})") from None


_Coord = tuple[int, ...]


def _chunk_coords(arr: AsyncArray) -> list[_Coord]:
    grid = [range(math.ceil(s / c)) for s, c in zip(arr.shape, arr.chunks)]
    return list(itertools.product(*grid))


async def _first_bad_chunk(arr: AsyncArray, coords: list[_Coord]) -> _Coord | None:
    for coord in coords:
        selection = tuple(slice(i * c, (i + 1) * c) for i, c in zip(coord, arr.chunks))
        try:
            await arr.getitem(selection)
        except Exception:
            return coord
    return None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def read_arrays(path: Path) -> tuple[dict[str, Any], _Arrays]:
    """Attributes and ``{name: (zarr array, values)}`` of a store, for :mod:`rlpipe.inspect`.

    The same checks and errors as :func:`read_rollout`; the arrays carry their chunk/codec metadata.
    """
    return sync(_read_store(Path(path)))


@dataclass
class _Job:
    path: Path
    rollout: TensorDict
    attrs: dict[str, Any]
    ready: torch.cuda.Event | None


class RolloutStore:
    """The rollouts of one run under ``root``: background writes, listing, retention.

    ``submit`` returns at once; a writer thread copies each rollout to the host and writes it. At
    most ``cfg.queue_size`` rollouts wait (``submit`` blocks beyond that: back-pressure). Call
    ``flush`` before checkpointing or finishing, so no run goes past a rollout not yet on disk.
    The first write error stops further writes and is raised by ``flush``/``submit``/``close``;
    stores already written are kept. With ``cfg.enabled`` false, ``submit`` writes nothing.
    """

    def __init__(self, root: Path, cfg: StoreCfg) -> None:
        self.root = Path(root)
        self.cfg = cfg
        self._queue: queue.Queue[_Job | None] = queue.Queue(maxsize=cfg.queue_size)
        self._io_lock = threading.Lock()  # one writer/cleaner of ``root`` at a time
        self._thread: threading.Thread | None = None
        self._error: StoreError | None = None
        self._closed = False
        self.clean_temporaries()

    def path_for(self, iteration: int) -> Path:
        """``root/iter-{iteration:06d}.zarr``."""
        return self.root / f"iter-{iteration:06d}.zarr"

    def iterations(self) -> list[int]:
        """Return the iterations with a complete store, ascending (never temporaries)."""
        if not self.root.is_dir():
            return []
        found = (_STORE_NAME.match(p.name) for p in self.root.iterdir())
        return sorted(int(m[1]) for m in found if m and (self.root / m[0] / "zarr.json").is_file())

    def latest(self) -> int | None:
        """Return the newest complete iteration, or ``None`` when there is none."""
        its = self.iterations()
        return its[-1] if its else None

    def clean_temporaries(self) -> list[Path]:
        """Remove temporaries left by dead processes (and this one); return what was removed.

        Temporaries of another live process (a concurrent writer) are kept.
        """
        if not self.root.is_dir():
            return []
        removed = []
        with self._io_lock:
            for path in self.root.iterdir():
                match = _TEMP_NAME.match(path.name)
                if match and (int(match[1]) == os.getpid() or not _pid_alive(int(match[1]))):
                    shutil.rmtree(path, ignore_errors=True)
                    removed.append(path)
        return removed

    def apply_retention(self) -> list[int]:
        """Delete all but the newest ``cfg.keep_last`` stores; return the deleted iterations."""
        with self._io_lock:
            return self._retain()

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
        for iteration in iterations:  # rename first: a reader sees the whole store or none of it
            path = self.path_for(iteration)
            trash = path.with_name(f".{path.name}.del-{os.getpid()}-{secrets.token_hex(4)}")
            os.rename(path, trash)
            shutil.rmtree(trash)
        return iterations

    def submit(self, rollout: TensorDict, attrs: dict[str, Any]) -> None:
        """Queue ``rollout`` (``[N, T+1]``, any device) to be written as ``attrs["iteration"]``.

        The rollout is cloned on its device first (cheap on a GPU), so the caller may refill its
        buffer right away. Blocks while ``cfg.queue_size`` rollouts wait. Raises
        :class:`StoreError` after an earlier write failed, when the store is closed, or when the
        target already exists.
        """
        if not self.cfg.enabled:
            return
        self._raise_if_failed()
        if self._closed:
            raise StoreError(f"{self.root}: rollout store is closed")
        iteration = attrs.get("iteration")
        if not isinstance(iteration, int):
            raise StoreError(f"{self.root}: submit needs an integer attrs['iteration'], got "
                             f"{iteration!r}")
        path = self.path_for(iteration)
        _check_new(path)
        _leaves(rollout, path)  # schema errors surface on the caller's thread
        clone = rollout.clone()
        self._ensure_thread()
        self._queue.put(_Job(path, clone, dict(attrs), _ready_event(clone)))

    def flush(self) -> None:
        """Block until every submitted rollout is on disk; raise the first write error."""
        self._queue.join()
        self._raise_if_failed()

    def close(self) -> None:
        """Flush and stop the writer thread; raise the first write error, if any."""
        self._closed = True
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None
        self._raise_if_failed()

    def __enter__(self) -> RolloutStore:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        try:
            self.close()
        except StoreError as store_exc:
            if exc is None:
                raise
            exc.add_note(f"also: {store_exc}")  # keep the body's exception the one raised

    def _ensure_thread(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="rlpipe-store", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            job = self._queue.get()
            try:
                if job is None:
                    return
                if self._error is None:  # after a failure, drain without writing
                    self._write(job)
            finally:
                self._queue.task_done()

    def _write(self, job: _Job) -> None:
        try:
            host = _to_host(job.rollout, job.ready)
            job.rollout = host  # drop the device clone now
            with self._io_lock:
                write_rollout(job.path, host, job.attrs, self.cfg.codec, self.cfg.chunk_envs)
                self._retain()
        except StoreError as exc:
            self._error = exc
        except Exception as exc:
            self._error = StoreError(f"writing {job.path} failed: {exc}")

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise StoreError(str(self._error)) from self._error


def _ready_event(rollout: TensorDict) -> torch.cuda.Event | None:
    """Record a CUDA event after the on-device clone, so the writer's copy waits for it."""
    device = rollout.device
    if device is None or device.type != "cuda":
        return None
    event = torch.cuda.Event()
    event.record(torch.cuda.current_stream(device))
    return event


def _to_host(rollout: TensorDict, ready: torch.cuda.Event | None) -> TensorDict:
    """Copy to CPU; from CUDA into pinned memory with non-blocking copies, then one sync."""
    device = rollout.device
    if device is None or device.type != "cuda":
        return rollout.to("cpu")
    with torch.cuda.device(device):
        stream = torch.cuda.current_stream(device)
        if ready is not None:
            stream.wait_event(ready)
        host = rollout.apply(_pinned_copy, device="cpu")
        stream.synchronize()
    return host


def _pinned_copy(tensor: torch.Tensor) -> torch.Tensor:
    pinned = torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=True)
    return pinned.copy_(tensor, non_blocking=True)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:  # exists, owned by another user
        pass
    return True
