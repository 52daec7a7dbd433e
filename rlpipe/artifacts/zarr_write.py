"""Writing a rollout (or a derived group) as a new Zarr v3 group, atomically.

The format is in :mod:`rlpipe.artifacts.zarr_io`. A local store is written under a hidden sibling
and renamed into place once complete, through zarr's async API (with ``RLPIPE_FAST`` on, codec
``none`` file by file instead: :func:`rlpipe.fast.write_zarr_store`, the same bytes); on an object
store the group's root ``zarr.json`` is written last, as the commit marker. A rollout comes here
checked (:func:`rlpipe.artifacts.intake.check_rollout`).
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import torch
import zarr.api.asynchronous as zarr_async
from tensordict import TensorDict
from zarr import AsyncGroup
from zarr.abc.store import ByteRequest
from zarr.core.buffer import Buffer, BufferPrototype
from zarr.storage import WrapperStore

from rlpipe import fast
from rlpipe.artifacts.atomic import delete_tree, publish_dir, temporary_sibling
from rlpipe.artifacts.errors import StoreError
from rlpipe.artifacts.fs import AnyPath, as_path, is_object, zarr_store
from rlpipe.artifacts.intake import check_new_store, rollout_arrays
from rlpipe.artifacts.zarr_io import Codecs, compressors, run_at, sync
from rlpipe.rollout import DIM_NAMES, SCHEMA_VERSION
from rlpipe.testing import faults

__all__ = ["write_group", "write_rollout"]


def write_rollout(
    path: Path, rollout: TensorDict, attrs: dict[str, Any], codec: str = "none",
    chunk_envs: int = 1024, image_codec: str = "none",
) -> None:
    """Write ``rollout`` (``[N, T+1]``, any device, checked) as a new Zarr group at ``path``, atomically.

    Every array is written concurrently through zarr's async API (with ``RLPIPE_FAST`` on, codec
    ``none`` file by file: :func:`rlpipe.fast.write_zarr_store`). ``attrs`` must be
    JSON-serializable; ``schema_version`` is added. ``codec`` (every array) and ``image_codec`` (the
    image groups, uint8 ``obs/<key>`` ``[N, T+1, C, H, W]``): a name of
    :data:`~rlpipe.artifacts.zarr_io.CODECS`. Raises :class:`StoreError` if ``path`` exists; on any
    failure no store and no temporary remain.
    """
    path = as_path(path)
    arrays = {name: t.detach().cpu().numpy() for name, t in rollout_arrays(rollout).items()}
    group_attrs = _group_attrs(attrs, path)
    images = [name for name, a in arrays.items() if _is_image(name, a)]
    codecs = {name: compressors(image_codec if name in images else codec) for name in arrays}
    if image_codec != "none" and images:
        codec = "mixed"  # the fast writer writes raw arrays only
    check_new_store(path)
    if is_object(path):
        _write_committed(path, arrays, group_attrs, codecs, chunk_envs)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_sibling(path)
    try:
        if codec == "none" and fast.ENABLED:  # the files zarr's writer writes, without zarr
            fast.write_zarr_store(tmp, arrays, group_attrs, chunk_envs, DIM_NAMES)
        else:
            sync(_write_group(tmp, arrays, group_attrs, codecs, chunk_envs))
        faults.point("store.arrays_written")
        try:
            publish_dir(tmp, path)
        except OSError:
            check_new_store(path)  # another writer may have won the race for this name
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
                     compressors: Codecs | dict[str, Codecs], chunk_envs: int) -> None:
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


def _group_attrs(attrs: dict[str, Any], path: Path) -> dict[str, Any]:
    if "schema_version" in attrs:
        raise StoreError(f"{path}: attrs may not set 'schema_version' (always {SCHEMA_VERSION})")
    merged = {"schema_version": SCHEMA_VERSION, **attrs}
    try:
        json.dumps(merged)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"{path}: attrs are not JSON-serializable ({exc})") from None
    return merged


def _is_image(name: str, array: np.ndarray) -> bool:
    """Whether array ``name`` is an image group: ``obs/<key>`` uint8 ``[N, T+1, C, H, W]``."""
    return name.startswith("obs/") and array.dtype == np.uint8 and array.ndim == 5


async def _write_group(
    tmp: AnyPath, arrays: dict[str, np.ndarray], attrs: dict[str, Any],
    compressors: Codecs | dict[str, Codecs], chunk_envs: int,
) -> None:
    """Write the group at ``tmp`` (a local temporary, or the final name on an object store)."""
    store = zarr_store(tmp)
    committed = _CommitLast(store) if is_object(tmp) else None
    group = await zarr_async.open_group(
        store=committed or store, mode="w-", zarr_format=3, attributes=attrs
    )
    per_array = compressors if isinstance(compressors, dict) else dict.fromkeys(arrays, compressors)
    writes = (_write_array(group, name, a, per_array[name], chunk_envs) for name, a in arrays.items())
    # return_exceptions: wait for every write (their I/O threads cannot be cancelled) before the
    # caller removes the temporary, then raise the first failure.
    results = await asyncio.gather(*writes, return_exceptions=True)
    errors = [r for r in results if isinstance(r, BaseException)]
    if errors:
        raise errors[0]
    if committed is not None:
        await committed.commit()


async def _write_array(
    group: AsyncGroup, name: str, data: np.ndarray, compressors: Codecs, chunk_envs: int,
) -> None:
    """Create and fill one array ``[N, T+1, *feature]``, chunked along envs only."""
    n, t1, *feature = data.shape
    await group.create_array(
        name, data=data, chunks=(min(chunk_envs, n), t1, *feature), compressors=compressors,
        filters=None, dimension_names=(*DIM_NAMES, *(f"feat{i}" for i in range(len(feature)))),
        config={"write_empty_chunks": True},  # every chunk has a file: a missing one is damage
    )
