"""Writing numpy arrays as a new Zarr v3 group: the half of the writer that needs no torch.

:func:`write_arrays` is what a rollout store's writer runs, in the training process's writer thread
or in the writer process (:mod:`rlpipe.artifacts.writer_process`), which imports this module and
not torch: the arrays arrive as numpy views of shared memory. The format is
:mod:`rlpipe.artifacts.zarr_io`'s; :mod:`rlpipe.artifacts.zarr_write` is the torch face (rollouts,
derived groups, object stores).
"""

from __future__ import annotations

import asyncio
import functools
import shutil
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import zarr
import zarr.api.asynchronous as zarr_async
from zarr import AsyncGroup
from zarr.abc.store import ByteRequest
from zarr.codecs import Crc32cCodec
from zarr.core.buffer import Buffer, BufferPrototype
from zarr.core.chunk_key_encodings import ChunkKeyEncodingParams
from zarr.storage import MemoryStore, WrapperStore

from rlpipe import fast
from rlpipe.artifacts.atomic import publish_dir, temporary_sibling
from rlpipe.artifacts.errors import StoreError
from rlpipe.artifacts.fs import AnyPath, is_object, zarr_store
from rlpipe.artifacts.zarr_io import Codecs, compressors, sync
from rlpipe.testing import faults

__all__ = [
    "CHUNK_KEY_ENCODING",
    "CHUNK_SEPARATOR",
    "SPARSE_DIMS",
    "array_codecs",
    "array_dims",
    "array_metadata",
    "write_arrays",
    "write_group_async",
]

FINAL_OBS = "final_obs"
"""The sparse group of a store (``rlpipe.rollout.FINAL_OBS``, named here: this module imports no torch)."""


def write_arrays(
    path: Path,
    arrays: dict[str, np.ndarray],
    group_attrs: dict[str, Any],
    codec: str,
    image_codec: str,
    chunk_envs: int,
    dims: tuple[str, ...],
) -> None:
    """Write ``arrays`` (``{"/"-joined key: [N, T+1, ...]}``) as a new local group at ``path``, atomically.

    Written under a hidden temporary sibling and renamed into place once complete; with codec
    ``none`` everywhere and ``RLPIPE_FAST`` on, file by file (:func:`rlpipe.fast.write_zarr_store`),
    else through zarr's async API. ``group_attrs`` are the group's attributes as stored; ``dims``
    name the first two dimensions. On any failure no store and no temporary remain; an existing
    ``path`` is a ``FileExistsError``.
    """
    codecs, raw = array_codecs(arrays, codec, image_codec)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_sibling(path)
    try:
        if raw and fast.ENABLED:  # the files zarr's writer writes, without zarr
            fast.write_zarr_store(
                tmp,
                arrays,
                group_attrs,
                chunk_envs,
                {name: array_dims(name, dims) for name in arrays},
                array_metadata,
                CHUNK_SEPARATOR,
            )
        else:
            sync(write_group_async(tmp, arrays, group_attrs, codecs, chunk_envs, dims))
        faults.point("store.arrays_written")
        publish_dir(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


@functools.lru_cache(maxsize=512)
def array_metadata(
    shape: tuple[int, ...], dtype: str, chunks: tuple[int, ...], dimension_names: tuple[str, ...]
) -> bytes:
    """The ``zarr.json`` zarr writes for an uncompressed, CRC32C-checked array (made by zarr, cached)."""
    files: dict[str, Any] = {}
    zarr.create_array(
        store=MemoryStore(files),
        shape=shape,
        dtype=dtype,
        chunks=chunks,
        compressors=(Crc32cCodec(),),
        filters=None,
        dimension_names=dimension_names,
        chunk_key_encoding=CHUNK_KEY_ENCODING,
        config={"write_empty_chunks": True},
        zarr_format=3,
    )
    return files["zarr.json"].to_bytes()


def array_codecs(
    arrays: dict[str, np.ndarray], codec: str, image_codec: str
) -> tuple[dict[str, Codecs], bool]:
    """Each array's codec chain (image groups take ``image_codec``), and whether all are uncompressed."""
    images = {name for name, a in arrays.items() if _is_image(name, a)}
    codecs = {name: compressors(image_codec if name in images else codec) for name in arrays}
    return codecs, codec == "none" and (image_codec == "none" or not images)


def _is_image(name: str, array: np.ndarray) -> bool:
    """Whether array ``name`` is an image group: ``obs/<key>`` uint8 ``[N, T+1, C, H, W]``.

    Its sparse final observations ``final_obs/obs/<key>`` ``[K, C, H, W]`` are one too.
    """
    if name.startswith(f"{FINAL_OBS}/obs/"):
        return array.dtype == np.uint8 and array.ndim == 4
    return name.startswith("obs/") and array.dtype == np.uint8 and array.ndim == 5


CHUNK_SEPARATOR = "."
CHUNK_KEY_ENCODING: ChunkKeyEncodingParams = {"name": "default", "separator": CHUNK_SEPARATOR}
"""Chunk files named ``c.<i>.0…`` inside the array's folder: one folder per array, none per chunk index.

Zarr's default (``/``) nests a folder per index; on file systems where creating a folder is costly
that is most of a small rollout's write. Readers follow each array's ``zarr.json``, so stores
written with either separator read alike.
"""

SPARSE_DIMS = ("done",)
"""The dimension name of the sparse arrays' first dim (one row per done slot)."""


def array_dims(name: str, dims: tuple[str, ...]) -> tuple[str, ...]:
    """The named leading dims of array ``name``: ``dims``, or one row dim for a sparse ``final_obs/…``."""
    return SPARSE_DIMS if name.startswith(f"{FINAL_OBS}/") else dims


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

    async def get(
        self, key: str, prototype: BufferPrototype, byte_range: ByteRequest | None = None
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


async def write_group_async(
    tmp: AnyPath,
    arrays: dict[str, np.ndarray],
    attrs: dict[str, Any],
    compressors: Codecs | dict[str, Codecs],
    chunk_envs: int,
    dims: tuple[str, ...],
) -> None:
    """Write the group at ``tmp`` (a local temporary, or the final name on an object store)."""
    store = zarr_store(tmp)
    committed = _CommitLast(store) if is_object(tmp) else None
    group = await zarr_async.open_group(store=committed or store, mode="w-", zarr_format=3, attributes=attrs)
    per_array = compressors if isinstance(compressors, dict) else dict.fromkeys(arrays, compressors)
    writes = (_write_array(group, name, a, per_array[name], chunk_envs, dims) for name, a in arrays.items())
    # return_exceptions: wait for every write (their I/O threads cannot be cancelled) before the
    # caller removes the temporary, then raise the first failure.
    results = await asyncio.gather(*writes, return_exceptions=True)
    errors = [r for r in results if isinstance(r, BaseException)]
    if errors:
        raise errors[0]
    if committed is not None:
        await committed.commit()


async def _write_array(
    group: AsyncGroup,
    name: str,
    data: np.ndarray,
    compressors: Codecs,
    chunk_envs: int,
    dims: tuple[str, ...],
) -> None:
    """Create and fill one array ``[N, T+1, *feature]``, chunked along envs only (sparse ``[K, …]``: rows)."""
    n, *rest = data.shape
    named = array_dims(name, dims)
    await group.create_array(
        name,
        data=data,
        chunks=(max(1, min(chunk_envs, n)), *rest),
        compressors=compressors,
        filters=None,
        dimension_names=(*named, *(f"feat{i}" for i in range(data.ndim - len(named)))),
        chunk_key_encoding=CHUNK_KEY_ENCODING,
        config={"write_empty_chunks": True},  # every chunk has a file: a missing one is damage
    )
