"""Names of a store's layout that its two writers share, without importing zarr.

The writers are zarr's own (:mod:`rlpipe.artifacts.zarr_arrays`) and the file-by-file fast path
(:func:`rlpipe.fast.write_zarr_store`, run by :mod:`rlpipe.artifacts.zarr_local`); the writer process
imports only the second, so these names live apart from zarr.
"""

from __future__ import annotations

import numpy as np

__all__ = ["CHUNK_SEPARATOR", "FINAL_OBS", "SPARSE_DIMS", "array_dims", "is_image", "uncompressed"]

FINAL_OBS = "final_obs"
"""The sparse group of a store (``rlpipe.rollout.FINAL_OBS``, named here: the writer imports no torch)."""

CHUNK_SEPARATOR = "."
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


def is_image(name: str, array: np.ndarray) -> bool:
    """Whether array ``name`` is an image group: ``obs/<key>`` uint8 ``[N, T+1, C, H, W]``.

    Its sparse final observations ``final_obs/obs/<key>`` ``[K, C, H, W]`` are one too.
    """
    if name.startswith(f"{FINAL_OBS}/obs/"):
        return array.dtype == np.uint8 and array.ndim == 4
    return name.startswith("obs/") and array.dtype == np.uint8 and array.ndim == 5


def uncompressed(arrays: dict[str, np.ndarray], codec: str, image_codec: str) -> bool:
    """Whether every array is stored raw: ``codec`` none, and ``image_codec`` none or no image array."""
    return codec == "none" and (image_codec == "none" or not any(is_image(n, a) for n, a in arrays.items()))
