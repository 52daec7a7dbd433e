"""The on-disk format of one rollout: a Zarr v3 group, one array per key.

Writing is :mod:`rlpipe.artifacts.zarr_write`, reading and verifying :mod:`rlpipe.artifacts.zarr_read`;
this module holds what both share: the layout below, the codecs and the thread that runs zarr's
coroutines. The keys and dtypes a rollout holds are :mod:`rlpipe.rollout`'s schema.

Layout of ``iter-000012.zarr``::

    zarr.json             group attributes: schema_version, plus what the caller passes (iteration,
                          env_steps, env_id, seed, params_hash, checkpoint)
    obs/, action/, …      one array per rollout key, shape [N, T+1, *feature], chunked
                          (min(chunk_envs, N), T+1, *feature): along envs only, never per step;
                          dimension_names ("env", "time", "feat0", …)
    extras/action_mean/   a nested TensorDict key ("extras", "action_mean") is a nested Zarr group

Nested keys are joined with "/" (so they become Zarr subgroups); key parts may not contain "/".
Codec ``none`` stores raw little-endian bytes, ``blosc-lz4``/``blosc-zstd``/``zstd`` compressed ones
(image groups take ``store.image_codec``, every other array ``store.codec``); every chunk ends in a
CRC32C checksum (zarr's standard ``crc32c`` codec), so a flipped, zeroed or truncated byte is a
one-line error naming the store and key, never different data. Metadata is bounded before anything
is allocated: an array's shape must fit the chunk files on disk (see
:func:`~rlpipe.artifacts.zarr_read_checks.check_bounds`).
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
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from zarr.codecs import BloscCodec, Crc32cCodec, ZstdCodec

from rlpipe.artifacts.errors import StoreError
from rlpipe.artifacts.fs import AnyPath, run_coroutine

__all__ = ["CODECS", "Codecs", "StoreError", "compressors", "run_at", "sync"]

CODECS = ("none", "blosc-lz4", "blosc-zstd", "zstd")
"""Accepted ``store.codec`` and ``store.image_codec`` values."""


T = TypeVar("T")

_RUNNER = ThreadPoolExecutor(max_workers=4, thread_name_prefix="rlpipe-zarr")
"""Runs each store's coroutines on a fresh event loop in its own thread, so reads and writes work
from any thread, including one whose event loop is already running (a notebook)."""


def sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion on the runner thread and return its result (or raise its error)."""
    return _RUNNER.submit(asyncio.run, coro).result()


def run_at(path: AnyPath, make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run the coroutine ``make()`` where ``path``'s store serves it (a local folder: :func:`sync`)."""
    return run_coroutine(path, make, sync)


Codecs = tuple[BloscCodec | ZstdCodec | Crc32cCodec, ...]
_CHECKSUM: Codecs = (Crc32cCodec(),)


def compressors(codec: str) -> Codecs:
    """Zarr's codec chain for store ``codec`` (every chunk ends in a CRC32C checksum)."""
    if codec == "none":  # raw bytes + CRC32C: a flipped or zeroed byte fails its check on read
        return _CHECKSUM
    if codec == "blosc-lz4":  # typesize/shuffle left tunable: zarr picks them from each dtype
        return (BloscCodec(cname="lz4", clevel=5, typesize=None, shuffle=None), *_CHECKSUM)
    if codec == "blosc-zstd":  # bit shuffle: uint8 pixels have one byte, which byte shuffle leaves as is
        return (BloscCodec(cname="zstd", clevel=3, typesize=None, shuffle="bitshuffle"), *_CHECKSUM)
    if codec == "zstd":
        return (ZstdCodec(level=3), *_CHECKSUM)
    raise StoreError(f"store codec {codec!r} is not known; accepted: {', '.join(CODECS)}")
