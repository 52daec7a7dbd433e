"""The on-disk format of one rollout: a Zarr v3 group, one array per key (write, read, verify).

Layout of ``iter-000012.zarr``::

    zarr.json             group attributes: schema_version, plus what the caller passes (iteration,
                          env_steps, env_id, seed, params_hash, checkpoint)
    obs/, action/, …      one array per rollout key, shape [N, T+1, *feature], chunked
                          (min(chunk_envs, N), T+1, *feature): along envs only, never per step;
                          dimension_names ("env", "time", "feat0", …)
    extras/action_mean/   a nested TensorDict key ("extras", "action_mean") is a nested Zarr group

Nested keys are joined with "/" (so they become Zarr subgroups); key parts may not contain "/".
Codec ``none`` stores raw little-endian bytes, ``blosc-lz4`` compressed ones; every chunk ends in a
CRC32C checksum (zarr's standard ``crc32c`` codec), so a flipped, zeroed or truncated byte is a
one-line error naming the store and key, never different data. Metadata is bounded before anything
is allocated: an array's shape must fit the chunk files on disk (see :func:`check_bounds`).
A store is written under a hidden sibling (``.iter-000012.zarr.tmp-<pid>-<token>``) and renamed
into place only when every array is complete: a reader never sees a half-written store and a final
name is written once. Writes are not fsynced; after a power loss :func:`read_rollout` reports a
missing or truncated chunk file by name.

On an object store (``s3://…``, see :mod:`rlpipe.artifacts.fs`) there is no rename: the arrays are
written under the final name and the group's root ``zarr.json`` goes last, as the commit marker.
Listings and readers treat a group without it as absent; an uncommitted leftover of a killed
writer is removed before its name is written again.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import os
import shutil
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import torch
import zarr.api.asynchronous as zarr_async
from tensordict import TensorDict
from zarr import AsyncArray, AsyncGroup
from zarr.abc.store import ByteRequest
from zarr.codecs import BloscCodec, Crc32cCodec
from zarr.core.buffer import Buffer, BufferPrototype
from zarr.storage import WrapperStore

from rlpipe import faults
from rlpipe.artifacts.atomic import delete_tree, publish_dir, temporary_sibling
from rlpipe.artifacts.errors import StoreError
from rlpipe.artifacts.fs import AnyPath, as_path, chunk_sizes, is_object, run_coroutine, zarr_store
from rlpipe.artifacts.zarr_direct import write_store
from rlpipe.rollout import DIM_NAMES, SCHEMA_VERSION, TRANSITION_KEYS, RefusedDataError

__all__ = [
    "CODECS",
    "ChunkChecksumError",
    "REQUIRED_KEYS",
    "StoreError",
    "check_bounds",
    "check_writable",
    "read_arrays",
    "read_attrs",
    "write_group",
    "read_rollout",
    "write_rollout",
]

CODECS = ("none", "blosc-lz4")
REQUIRED_KEYS = ("obs", "value", *TRANSITION_KEYS)
"""Arrays every rollout store holds (the schema keys of :mod:`rlpipe.rollout`)."""


_RUNNER = ThreadPoolExecutor(max_workers=4, thread_name_prefix="rlpipe-zarr")
"""Runs each store's coroutines on a fresh event loop in its own thread, so reads and writes work
from any thread, including one whose event loop is already running (a notebook)."""


def sync(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run ``coro`` to completion on the runner thread and return its result (or raise its error)."""
    return _RUNNER.submit(asyncio.run, coro).result()


def run_at(path: AnyPath, make: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    """Run the coroutine ``make()`` where ``path``'s store serves it (a local folder: :func:`sync`)."""
    return run_coroutine(path, make, sync)


def write_rollout(
    path: Path, rollout: TensorDict, attrs: dict[str, Any], codec: str = "none",
    chunk_envs: int = 1024,
) -> None:
    """Write ``rollout`` (``[N, T+1]``, any device) as a new Zarr group at ``path``, atomically.

    Codec ``none`` is written file by file (:mod:`rlpipe.artifacts.zarr_direct`: the bytes zarr
    writes), compressed stores concurrently through zarr's async API. ``attrs`` must be JSON-serializable;
    ``schema_version`` is added. ``codec``: ``"none"`` or ``"blosc-lz4"``. Raises
    :class:`StoreError` if ``path`` exists; on any failure no store and no temporary remain.
    """
    path = as_path(path)
    arrays = {name: t.detach().cpu().numpy() for name, t in _leaves(rollout, path).items()}
    group_attrs = _group_attrs(attrs, path)
    compressors = _compressors(codec)
    _check_new(path)
    if is_object(path):
        _write_committed(path, arrays, group_attrs, compressors, chunk_envs)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_sibling(path)
    try:
        if codec == "none":  # plain files, the same bytes (zarr_direct); zarr's writer costs ~40 ms a store
            write_store(tmp, arrays, group_attrs, chunk_envs, DIM_NAMES)
        else:
            sync(_write_group(tmp, arrays, group_attrs, compressors, chunk_envs))
        faults.point("store.arrays_written")
        try:
            publish_dir(tmp, path)
        except OSError:
            _check_new(path)  # another writer may have won the race for this name
            raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_group(path: Path, arrays: dict[str, torch.Tensor], attrs: dict[str, Any], chunk_envs: int,
                replace: bool = False) -> None:
    """Write ``[N, T+1, ...]`` tensors as a plain Zarr v3 group (no rollout schema), atomically.

    For derived data such as advantages; ``replace`` swaps an existing group for the new one.
    """
    path = as_path(path)
    data = {name: t.detach().cpu().numpy() for name, t in arrays.items()}
    if is_object(path):
        if (path / "zarr.json").is_file() and not replace:
            raise StoreError(f"{path}: already exists (entries are written once)")
        _write_committed(path, data, attrs, (), chunk_envs)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_sibling(path)
    try:
        sync(_write_group(tmp, data, attrs, (), chunk_envs))
        publish_dir(tmp, path, replace=replace)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _write_committed(path: AnyPath, arrays: dict[str, np.ndarray], attrs: dict[str, Any],
                     compressors: _Codecs, chunk_envs: int) -> None:
    """Object store: clear what is at ``path``, write the arrays there, commit (root ``zarr.json``) last."""
    if path.exists():
        delete_tree(path)  # an uncommitted leftover of a killed writer, or the group ``replace`` swaps
    run_at(path, lambda: _write_group(path, arrays, attrs, compressors, chunk_envs))
    faults.point("store.arrays_written")


class _CommitLast(WrapperStore):
    """Holds back the root ``zarr.json`` until :meth:`commit`: the group exists only once complete."""

    ROOT = "zarr.json"

    def __init__(self, store: Any) -> None:
        super().__init__(store)
        self._root: Buffer | None = None

    async def set(self, key: str, value: Buffer) -> None:
        """Hold the root metadata; write every other key through."""
        if key == self.ROOT:
            self._root = value
            return
        await self._store.set(key, value)

    async def get(self, key: str, prototype: BufferPrototype, byte_range: ByteRequest | None = None
                  ) -> Buffer | None:
        """The held root metadata, or the wrapped store's key."""
        if key == self.ROOT and self._root is not None:
            return self._root
        return await self._store.get(key, prototype, byte_range)

    async def exists(self, key: str) -> bool:
        """Whether ``key`` is held or stored."""
        return (key == self.ROOT and self._root is not None) or await self._store.exists(key)

    async def _set_many(self, values: Iterable[tuple[str, Buffer]]) -> None:
        for key, value in values:
            await self.set(key, value)

    def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        """The wrapped store's keys (the held root is not listed before it is written)."""
        return self._store.list_prefix(prefix)

    async def commit(self) -> None:
        """Write the root ``zarr.json``: from now on the group is visible."""
        if self._root is None:
            raise StoreError("no root metadata to commit")
        await self._store.set(self.ROOT, self._root)


def check_writable(rollout: TensorDict, path: Path) -> None:
    """Raise ``StoreError`` now if ``path`` exists or ``rollout`` breaks the schema (before any I/O)."""
    _check_new(path)
    _leaves(rollout, path)


def _check_new(path: AnyPath) -> None:
    if (path / "zarr.json").is_file() if is_object(path) else path.exists():
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
    if codec == "none":  # raw bytes + CRC32C: a flipped or zeroed byte fails its check on read
        return _CHECKSUM
    if codec == "blosc-lz4":  # typesize/shuffle left tunable: zarr picks them from each dtype
        return (BloscCodec(cname="lz4", clevel=5, typesize=None, shuffle=None), *_CHECKSUM)
    raise StoreError(f"store codec {codec!r} is not known; accepted: {', '.join(CODECS)}")


async def _write_group(
    tmp: AnyPath, arrays: dict[str, np.ndarray], attrs: dict[str, Any],
    compressors: _Codecs, chunk_envs: int,
) -> None:
    """Write the group at ``tmp`` (a local temporary, or the final name on an object store)."""
    store = zarr_store(tmp)
    committed = _CommitLast(store) if is_object(tmp) else None
    group = await zarr_async.open_group(
        store=committed or store, mode="w-", zarr_format=3, attributes=attrs
    )
    writes = (_write_array(group, name, a, compressors, chunk_envs) for name, a in arrays.items())
    # return_exceptions: wait for every write (their I/O threads cannot be cancelled) before the
    # caller removes the temporary, then raise the first failure.
    results = await asyncio.gather(*writes, return_exceptions=True)
    errors = [r for r in results if isinstance(r, BaseException)]
    if errors:
        raise errors[0]
    if committed is not None:
        await committed.commit()


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
    path = as_path(path)
    listing = _checked_listing(path)
    attrs, arrays = run_at(path, lambda: _read_store(path, listing))
    n, t1 = arrays["value"][1].shape[:2]
    rollout = TensorDict({}, batch_size=[n, t1], names=list(DIM_NAMES))
    for name, (_, data) in arrays.items():
        rollout.set(tuple(name.split("/")), torch.from_numpy(data))
    return rollout.to(device), attrs


_Arrays = dict[str, tuple[AsyncArray, np.ndarray]]


def _checked_listing(path: AnyPath) -> dict[str, int]:
    """``{chunk key: size}`` of the store at ``path`` (one listing), once it is a committed group."""
    if not path.exists():
        raise StoreError(f"{path}: no rollout store here")
    if not (path / "zarr.json").is_file():
        if is_object(path):
            raise StoreError(f"{path}: uncommitted rollout store (no root zarr.json: its writer did not "
                             "finish); it is not read")
        raise StoreError(f"{path}: not an rlpipe rollout store (no zarr.json: not a Zarr v3 group)")
    return chunk_sizes(path)


async def _read_store(path: AnyPath, listing: dict[str, int]) -> tuple[dict[str, Any], _Arrays]:
    """Attributes and ``{name: (array, data)}`` of a checked store; arrays are read concurrently."""
    attrs, arrays = await _open_store(path, listing)
    data = await asyncio.gather(*(_read_array(path, name, arr, listing) for name, arr in arrays.items()))
    return attrs, {name: (arr, values) for (name, arr), values in zip(arrays.items(), data)}


async def _open_store(path: AnyPath, listing: dict[str, int]) -> tuple[dict[str, Any], dict[str, AsyncArray]]:
    try:
        group = await zarr_async.open_group(store=zarr_store(path, read_only=True), mode="r",
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
    missing = [key for key in REQUIRED_KEYS
               if key not in arrays and not any(name.startswith(f"{key}/") for name in arrays)]
    if missing:
        raise StoreError(f"{path}: not an rlpipe rollout store (no {missing[0]!r} array)")
    for name, arr in arrays.items():
        check_bounds(path, name, arr, listing)
    batch = arrays["value"].shape[:2]
    for name, arr in arrays.items():
        if arr.shape[:2] != batch:
            raise StoreError(f"{path}/{name}: shape {list(arr.shape)} does not start with the "
                             f"rollout's [N, T+1] = {list(batch)}")
    return attrs, arrays


LZ4_MAX_RATIO = 256
"""LZ4 cannot shrink data more than ~255:1, so a blosc-lz4 array's raw size is bounded by its files."""


def check_bounds(path: AnyPath, name: str, arr: AsyncArray, listing: dict[str, int] | None = None) -> None:
    """``StoreError`` unless ``arr``'s shape fits its chunk files on disk (checked before any allocation).

    A crafted ``zarr.json`` with a huge shape would otherwise make a reader allocate it: the chunk
    count may not exceed the files there by more than 1024 (a few missing chunks get their own
    error), and the raw size may not exceed what those files can hold (raw: 4 times their size, so
    a truncated chunk still gets its own error; blosc-lz4: 256 times it; another codec: the free
    memory), each plus 1 MiB. ``listing``: ``{key: size}`` of the whole store (listed once).
    """
    folder = path / name
    listing = chunk_sizes(path) if listing is None else listing
    files = _own_chunks(listing, name)
    chunks = math.prod(math.ceil(s / c) for s, c in zip(arr.shape, arr.chunks))
    raw = math.prod(arr.shape) * arr.dtype.itemsize
    on_disk = sum(files)
    codecs = {type(c).__name__ for c in arr.metadata.codecs}
    slack = 2**20  # leave truncated chunks to the chunk-level error, which names the file
    if codecs <= {"BytesCodec", "Crc32cCodec", "TransposeCodec"}:
        limit = 4 * on_disk + slack
    elif codecs <= {"BytesCodec", "Crc32cCodec", "TransposeCodec", "BloscCodec"}:
        limit = on_disk * LZ4_MAX_RATIO + slack
    else:
        limit = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    if chunks > len(files) + 1024 or raw > limit:
        raise StoreError(f"{folder}: zarr.json declares shape {list(arr.shape)} ({raw:,} bytes in {chunks:,} "
                         f"chunks) but the store holds {len(files):,} chunk files of {on_disk:,} bytes "
                         "(damaged or crafted metadata); nothing was read")


def _own_chunks(listing: dict[str, int], name: str) -> list[int]:
    """Sizes of the files below array ``name`` (its chunks) but its ``zarr.json``."""
    prefix = f"{name}/"
    return [size for key, size in listing.items() if key.startswith(prefix)]


async def _read_array(path: AnyPath, name: str, arr: AsyncArray, listing: dict[str, int]) -> np.ndarray:
    coords = _chunk_coords(arr)
    for coord in coords:
        chunk_file = path / name / arr.metadata.encode_chunk_key(coord)
        if f"{name}/{arr.metadata.encode_chunk_key(coord)}" not in listing:
            raise StoreError(f"{chunk_file}: chunk file missing (incomplete or damaged store)")
    try:
        return np.asarray(await arr.getitem(...))
    except Exception as exc:
        bad = await _first_bad_chunk(arr, coords)
        where = path / name / arr.metadata.encode_chunk_key(bad) if bad else path / name
        if "checksum" in str(exc).lower():
            chunk = where.relative_to(path)
            raise ChunkChecksumError(f"{path}: key {name!r}: checksum mismatch in chunk {chunk} (the "
                                     "store is damaged)") from None
        raise StoreError(f"{where}: truncated or unreadable ({_first_line(exc)})") from None


_Coord = tuple[int, ...]


class ChunkChecksumError(StoreError, RefusedDataError):
    """A rollout chunk whose CRC32C does not match its bytes (exit code 3)."""


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


def read_attrs(path: Path) -> dict[str, Any]:
    """The group attributes of a store (no array is read); the same checks as :func:`read_rollout`."""
    path = as_path(path)
    listing = _checked_listing(path)
    return run_at(path, lambda: _open_store(path, listing))[0]


def read_arrays(path: Path) -> tuple[dict[str, Any], _Arrays]:
    """Attributes and ``{name: (zarr array, values)}`` of a store, for :mod:`rlpipe.offline.describe`.

    The same checks and errors as :func:`read_rollout`; the arrays carry their chunk/codec metadata.
    """
    path = as_path(path)
    listing = _checked_listing(path)
    return run_at(path, lambda: _read_store(path, listing))
