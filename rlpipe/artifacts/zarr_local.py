"""Writing numpy arrays as a new local Zarr v3 group, atomically; zarr is imported only when it writes.

:func:`write_arrays` is what a rollout store's writer runs for a local store, in the training
process's writer thread or in the writer process (:mod:`rlpipe.artifacts.writer_process`), which
imports this module and neither torch nor zarr: the arrays arrive as numpy views of shared memory.
Uncompressed arrays with ``RLPIPE_FAST`` on are written file by file
(:func:`rlpipe.fast.write_zarr_store`: the bytes zarr writes); anything else by zarr's async writer
(:mod:`rlpipe.artifacts.zarr_arrays`). The format is :mod:`rlpipe.artifacts.zarr_io`'s.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np

from rlpipe import fast
from rlpipe.artifacts.atomic import publish_dir, temporary_sibling
from rlpipe.artifacts.zarr_names import CHUNK_SEPARATOR, array_dims, uncompressed
from rlpipe.testing import faults

__all__ = ["write_arrays"]


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
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_sibling(path)
    try:
        if _file_by_file(arrays, codec, image_codec):  # the files zarr's writer writes, without zarr
            named = {name: array_dims(name, dims) for name in arrays}
            fast.write_zarr_store(tmp, arrays, group_attrs, chunk_envs, named, CHUNK_SEPARATOR)
        else:  # zarr's async writer, imported here: the fast path needs no zarr
            from rlpipe.artifacts.zarr_arrays import array_codecs, write_group_async
            from rlpipe.artifacts.zarr_io import sync

            codecs = array_codecs(arrays, codec, image_codec)
            sync(write_group_async(tmp, arrays, group_attrs, codecs, chunk_envs, dims))
        faults.point("store.arrays_written")
        publish_dir(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _file_by_file(arrays: dict[str, np.ndarray], codec: str, image_codec: str) -> bool:
    """Whether the fast path writes these arrays: on, all uncompressed, every dtype one it writes."""
    return (
        fast.ENABLED
        and uncompressed(arrays, codec, image_codec)
        and all(a.dtype.name in fast.ZARR_DTYPES for a in arrays.values())
    )
