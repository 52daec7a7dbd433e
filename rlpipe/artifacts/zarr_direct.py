"""Uncompressed rollout stores written directly: the files zarr writes, byte for byte, without its machinery.

zarr's async writer costs about 40 ms of CPU per store whatever its size (an event loop per store,
a thread per file, metadata objects per array): more than collecting a small rollout (W1's 8 envs ×
129 steps, 40 KB), and on the writer thread it holds the GIL the training loop needs. With codec
``none`` a store is simple enough to write with plain file writes:

* ``zarr.json`` of the group (the attributes) and of every intermediate group of a nested key;
* per array a ``zarr.json`` — produced by zarr itself, in memory, once per (shape, dtype, chunks):
  :func:`array_metadata` — and one file per chunk, ``c/<i>/0/…``, holding the chunk's raw
  little-endian bytes followed by their CRC32C (zarr's ``bytes`` + ``crc32c`` codecs); edge chunks
  are padded to the full chunk shape with the fill value, as zarr does.

:mod:`rlpipe.artifacts.zarr_write` uses this for codec ``none`` and zarr's own writer for compressed
stores; ``tests/artifacts/test_zarr_direct.py`` checks every file against zarr's writer.
"""

from __future__ import annotations

import functools
import json
import math
import struct
from pathlib import Path
from typing import Any

import google_crc32c
import numpy as np
import zarr
from zarr.storage import MemoryStore

__all__ = ["array_metadata", "group_metadata", "write_store"]


def group_metadata(attributes: dict[str, Any]) -> bytes:
    """A group's ``zarr.json`` as zarr writes it (indent 2)."""
    return json.dumps({"attributes": attributes, "zarr_format": 3, "node_type": "group"}, indent=2).encode()


@functools.lru_cache(maxsize=512)
def array_metadata(shape: tuple[int, ...], dtype: str, chunks: tuple[int, ...],
                   dimension_names: tuple[str, ...]) -> bytes:
    """The ``zarr.json`` zarr writes for an uncompressed, CRC32C-checked array (made by zarr, cached)."""
    from zarr.codecs import Crc32cCodec

    files: dict[str, Any] = {}
    zarr.create_array(store=MemoryStore(files), shape=shape, dtype=dtype, chunks=chunks,
                      compressors=(Crc32cCodec(),), filters=None, dimension_names=dimension_names,
                      config={"write_empty_chunks": True}, zarr_format=3)
    return files["zarr.json"].to_bytes()


def write_store(root: Path, arrays: dict[str, np.ndarray], attributes: dict[str, Any],
                chunk_envs: int, dimension_names: tuple[str, ...]) -> None:
    """Write a new store at ``root``: group ``attributes`` and every ``[N, T+1, ...]`` array, chunked along N.

    ``arrays`` keys are ``/``-joined paths (nested keys become subgroups); ``dimension_names`` name
    the first two dimensions (further ones are ``feat0``, ``feat1``, …).
    """
    root.mkdir()
    (root / "zarr.json").write_bytes(group_metadata(attributes))
    for name, data in arrays.items():
        _write_parents(root, name)
        _write_array(root / name, data, chunk_envs, dimension_names)


def _write_parents(root: Path, name: str) -> None:
    """Intermediate groups of a nested key (``obs/state`` → group ``obs``), each written once."""
    parts = name.split("/")[:-1]
    for depth in range(1, len(parts) + 1):
        folder = root.joinpath(*parts[:depth])
        if not folder.exists():
            folder.mkdir()
            (folder / "zarr.json").write_bytes(group_metadata({}))


def _write_array(folder: Path, data: np.ndarray, chunk_envs: int, dims: tuple[str, ...]) -> None:
    n, *rest = data.shape
    rows = min(chunk_envs, n)
    chunks = (rows, *rest)
    names = (*dims, *(f"feat{i}" for i in range(len(rest) - 1)))
    folder.mkdir()
    (folder / "zarr.json").write_bytes(array_metadata(data.shape, data.dtype.name, chunks, names))
    little = data.astype(data.dtype.newbyteorder("<"), copy=False)
    tail = "/".join("0" for _ in rest)
    for i in range(math.ceil(n / rows)):
        block = little[i * rows:(i + 1) * rows]
        if block.shape[0] < rows:  # the edge chunk, padded with the fill value (zero / False)
            block = np.concatenate([block, np.zeros((rows - block.shape[0], *rest), block.dtype)])
        raw = np.ascontiguousarray(block).tobytes()
        chunk = folder / "c" / str(i) / tail
        chunk.parent.mkdir(parents=True, exist_ok=True)
        chunk.write_bytes(raw + struct.pack("<I", google_crc32c.value(raw)))
