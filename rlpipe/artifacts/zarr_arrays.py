"""Zarr's writer of a new Zarr v3 group from numpy arrays: codecs, chunking and the commit marker.

Run by :mod:`rlpipe.artifacts.zarr_local` for a local store zarr writes (compressed, or with
``RLPIPE_FAST=0``) and by :mod:`rlpipe.artifacts.zarr_write` for object stores and derived groups.
The format is :mod:`rlpipe.artifacts.zarr_io`'s.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from typing import Any

import numpy as np
import zarr.api.asynchronous as zarr_async
from zarr import AsyncGroup
from zarr.abc.store import ByteRequest
from zarr.core.buffer import Buffer, BufferPrototype
from zarr.core.chunk_key_encodings import ChunkKeyEncodingParams
from zarr.storage import WrapperStore

from rlpipe.artifacts.errors import StoreError
from rlpipe.artifacts.fs import AnyPath, is_object, zarr_store
from rlpipe.artifacts.zarr_io import Codecs, compressors
from rlpipe.artifacts.zarr_names import CHUNK_SEPARATOR, array_dims, is_image

__all__ = ["CHUNK_KEY_ENCODING", "array_codecs", "write_group_async"]


def array_codecs(arrays: dict[str, np.ndarray], codec: str, image_codec: str) -> dict[str, Codecs]:
    """Each array's codec chain: image groups take ``image_codec``, every other array ``codec``."""
    return {name: compressors(image_codec if is_image(name, a) else codec) for name, a in arrays.items()}


CHUNK_KEY_ENCODING: ChunkKeyEncodingParams = {"name": "default", "separator": CHUNK_SEPARATOR}
"""Chunk files ``c.<i>.0…`` in the array folder (:data:`~rlpipe.artifacts.zarr_names.CHUNK_SEPARATOR`)."""


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
