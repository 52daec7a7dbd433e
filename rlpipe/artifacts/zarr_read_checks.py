"""The metadata checks of a stored rollout, before any chunk is read: codecs, recorded spaces, bounds.

A store's files are untrusted. Each array's ``zarr.json`` is checked before a byte of its chunks is
read or allocated: its codecs are ones rlpipe writes (:func:`check_codecs`), its shape and dtype
fit the spaces the run recorded (:func:`check_spaces`), and its declared size fits the chunk files
on disk (:func:`check_bounds`). Each failure is one :class:`~rlpipe.artifacts.errors.StoreError`
naming the array and saying that nothing was read.
"""

from __future__ import annotations

import math
import os
from typing import Any

from zarr import AsyncArray

from rlpipe.artifacts.errors import StoreError
from rlpipe.artifacts.fs import AnyPath, chunk_sizes
from rlpipe.rollout import FINAL_OBS

__all__ = [
    "LZ4_MAX_RATIO",
    "SCHEMA_DTYPES",
    "SPARSE_PREFIX",
    "WRITTEN_CODECS",
    "check_bounds",
    "check_codecs",
    "check_spaces",
]

SPARSE_PREFIX = f"{FINAL_OBS}/"
"""Names of the sparse final-observation arrays start with it (``final_obs/index``, ``final_obs/…``)."""

WRITTEN_CODECS = {
    "BytesCodec": None,
    "Crc32cCodec": None,
    "TransposeCodec": None,
    "BloscCodec": ("lz4", "zstd"),
    "ZstdCodec": None,
}
"""The codecs of the stores rlpipe writes (``store.codec``/``image_codec``: none, blosc-lz4,
blosc-zstd, zstd), with the compressors accepted inside blosc; any other is refused unread."""
SCHEMA_DTYPES = {
    "sample_log_prob": "f",
    "value": "f",
    "reward": "f",
    "final_value": "f",
    "terminated": "b",
    "truncated": "b",
    "done": "b",
}
"""The ``[N, T+1]`` arrays of every rollout and the dtype kind each holds (numpy's ``dtype.kind``)."""


def check_codecs(path: AnyPath, name: str, arr: AsyncArray) -> None:
    """``StoreError`` if ``arr`` uses a codec rlpipe does not write (checked before any chunk is read).

    A foreign compressor (bz2, gzip, …) has no ratio bound and no reason to be in a run's store.
    """
    for codec in arr.metadata.codecs:
        kind = type(codec).__name__
        inner = getattr(getattr(codec, "cname", None), "value", None)
        if kind not in WRITTEN_CODECS or (WRITTEN_CODECS[kind] and inner not in WRITTEN_CODECS[kind]):
            label = getattr(codec, "codec_name", None) or (f"blosc-{inner}" if inner else kind)
            raise StoreError(
                f"{path / name}: codec {label} is not one rlpipe writes (accepted: bytes, "
                "crc32c, blosc-lz4, blosc-zstd, zstd); nothing was read"
            )


def check_spaces(path: AnyPath, spaces: Any, arrays: dict[str, AsyncArray]) -> None:
    """``StoreError`` unless every array's shape past ``[N, T+1]`` and dtype fit the recorded spaces.

    ``spaces``: the ``{"observation", "action"}`` record of the store's attributes (as
    ``rlpipe.envs.space_to_dict`` writes it; a store without one is checked for the schema arrays
    only). ``obs`` is ``[N, T+1, *shape]`` of a Box (``obs/<key>`` per group of a Dict), uint8 for
    an image group; ``action`` is ``[N, T+1, *shape]`` float of a Box or ``[N, T+1]`` integer of a
    Discrete; the schema arrays are ``[N, T+1]``. Checked on the metadata, before any chunk is read,
    so a declared shape beyond the run's spaces allocates nothing.
    """
    expected: dict[str, tuple[tuple[int, ...], str]] = {
        name: ((), kind) for name, kind in SCHEMA_DTYPES.items()
    }
    expected[f"{SPARSE_PREFIX}index"] = ((2,), "i")
    if isinstance(spaces, dict):
        observed = _space_arrays("obs", spaces.get("observation"), observation=True)
        expected |= observed | {f"{SPARSE_PREFIX}{name}": value for name, value in observed.items()}
        expected |= _space_arrays("action", spaces.get("action"), observation=False)
    for name, arr in arrays.items():
        if name not in expected:
            continue
        shape, kinds = expected[name]
        sparse = name.startswith(SPARSE_PREFIX)
        if tuple(arr.shape[1 if sparse else 2 :]) != shape or arr.dtype.kind not in kinds:
            lead = "K" if sparse else "N, T+1"
            raise StoreError(
                f"{path / name}: stored as {arr.dtype} {list(arr.shape)}, but the run's "
                f"recorded spaces give [{lead}{''.join(f', {d}' for d in shape)}] of "
                f"{_KIND_NAMES[kinds]}; nothing was read"
            )


_KIND_NAMES = {
    "i": "signed integers",
    "f": "floats",
    "b": "booleans",
    "u": "uint8",
    "iu": "integers",
    "fiu": "numbers",
}


def _space_arrays(name: str, space: Any, observation: bool) -> dict[str, tuple[tuple[int, ...], str]]:
    """``{array name: (shape past [N, T+1], dtype kinds)}`` that a recorded space fixes."""
    if not isinstance(space, dict):
        return {}
    kind = space.get("type")
    if kind == "dict" and isinstance(space.get("spaces"), dict):
        return {
            key: value
            for group, sub in space["spaces"].items()
            for key, value in _space_arrays(f"{name}/{group}", sub, observation).items()
        }
    if kind == "box" and isinstance(space.get("shape"), list):
        image = observation and space.get("dtype") == "uint8"
        kinds = "u" if image else "fiu" if observation else "f"
        return {name: (tuple(int(d) for d in space["shape"]), kinds)}
    if kind == "discrete" and not observation:
        return {name: ((), "iu")}
    return {}


LZ4_MAX_RATIO = 256
"""LZ4 cannot shrink data more than ~255:1, so a blosc-lz4 array's raw size is bounded by its files."""


def check_bounds(path: AnyPath, name: str, arr: AsyncArray, listing: dict[str, int] | None = None) -> None:
    """``StoreError`` unless ``arr``'s shape fits its chunk files on disk (checked before any allocation).

    A crafted ``zarr.json`` with a huge shape would otherwise make a reader allocate it: the chunk
    count may not exceed the files there by more than 1024 (a few missing chunks get their own
    error), and the raw size may not exceed what those files can hold (raw: 4 times their size, so
    a truncated chunk still gets its own error; blosc-lz4: 256 times it; another codec: the free
    memory; blosc-zstd too), each plus 1 MiB. ``listing``: ``{key: size}`` of the whole store (listed once).
    """
    folder = path / name
    listing = chunk_sizes(path) if listing is None else listing
    files = _own_chunks(listing, name)
    chunks = math.prod(math.ceil(s / c) for s, c in zip(arr.shape, arr.chunks))
    raw = math.prod(arr.shape) * arr.dtype.itemsize
    on_disk = sum(files)
    codecs = {type(c).__name__ for c in arr.metadata.codecs}
    if any(getattr(getattr(c, "cname", None), "value", "lz4") != "lz4" for c in arr.metadata.codecs):
        codecs.add("BloscZstd")  # zstd inside blosc: no 256:1 bound
    slack = 2**20  # leave truncated chunks to the chunk-level error, which names the file
    if codecs <= {"BytesCodec", "Crc32cCodec", "TransposeCodec"}:
        limit = 4 * on_disk + slack
    elif codecs <= {"BytesCodec", "Crc32cCodec", "TransposeCodec", "BloscCodec"}:
        limit = on_disk * LZ4_MAX_RATIO + slack
    else:
        limit = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    if chunks > len(files) + 1024 or raw > limit:
        raise StoreError(
            f"{folder}: zarr.json declares shape {list(arr.shape)} ({raw:,} bytes in {chunks:,} "
            f"chunks) but the store holds {len(files):,} chunk files of {on_disk:,} bytes "
            "(damaged or crafted metadata); nothing was read"
        )


def _own_chunks(listing: dict[str, int], name: str) -> list[int]:
    """Sizes of the files below array ``name`` (its chunks) but its ``zarr.json``."""
    prefix = f"{name}/"
    return [size for key, size in listing.items() if key.startswith(prefix)]
