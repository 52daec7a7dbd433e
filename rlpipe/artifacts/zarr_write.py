"""Writing a rollout (or a derived group) as a new Zarr v3 group, atomically.

The format is in :mod:`rlpipe.artifacts.zarr_io`. A local store is written under a hidden sibling
and renamed into place once complete, through zarr's async API (with ``RLPIPE_FAST`` on, codec
``none`` file by file instead: :func:`rlpipe.fast.write_zarr_store`, the same bytes); on an object
store the group's root ``zarr.json`` is written last, as the commit marker. A rollout comes here
checked (:func:`rlpipe.artifacts.intake.check_rollout`).
"""

from __future__ import annotations

import shutil
from collections.abc import Coroutine
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict

from rlpipe.artifacts.atomic import publish_dir, temporary_sibling
from rlpipe.artifacts.errors import StoreError
from rlpipe.artifacts.fs import AnyPath, as_path, is_object
from rlpipe.artifacts.intake import check_new_store, final_obs_arrays, group_attributes, rollout_arrays
from rlpipe.artifacts.removal import delete
from rlpipe.artifacts.zarr_arrays import array_codecs, write_group_async
from rlpipe.artifacts.zarr_io import Codecs, run_at, sync
from rlpipe.artifacts.zarr_local import write_arrays
from rlpipe.rollout import DIM_NAMES
from rlpipe.testing import faults

__all__ = ["write_group", "write_rollout"]


def write_rollout(
    path: AnyPath,
    rollout: TensorDict,
    attrs: dict[str, Any],
    codec: str = "none",
    chunk_envs: int = 1024,
    image_codec: str = "none",
    final_obs: TensorDict | None = None,
) -> None:
    """Write ``rollout`` (``[N, T+1]``, any device, checked) as a new Zarr group at ``path``, atomically.

    Every array is written concurrently through zarr's async API (with ``RLPIPE_FAST`` on, codec
    ``none`` file by file: :func:`rlpipe.fast.write_zarr_store`). ``attrs`` must be
    JSON-serializable; ``schema_version`` is added. ``codec`` (every array) and ``image_codec`` (the
    image groups, uint8 ``obs/<key>`` ``[N, T+1, C, H, W]``): a name of
    :data:`~rlpipe.artifacts.zarr_io.CODECS`. ``final_obs``: the sparse final observations
    ``[K]``, written as the ``final_obs`` group (``index`` ``[K, 2]``, ``obs[/<key>]``
    ``[K, *obs]``). Raises :class:`StoreError` if ``path`` exists; on any
    failure no store and no temporary remain.
    """
    path = as_path(path)
    tensors = rollout_arrays(rollout) | ({} if final_obs is None else final_obs_arrays(final_obs))
    arrays = {name: t.detach().cpu().numpy() for name, t in tensors.items()}
    group_attrs = group_attributes(attrs, path)
    check_new_store(path)
    if is_object(path):
        codecs = array_codecs(arrays, codec, image_codec)
        _write_committed(path, arrays, group_attrs, codecs, chunk_envs)
        return
    try:
        write_arrays(path, arrays, group_attrs, codec, image_codec, chunk_envs, DIM_NAMES)
    except OSError:
        check_new_store(path)  # another writer may have won the race for this name
        raise


def write_group(
    path: AnyPath,
    arrays: dict[str, torch.Tensor],
    attrs: dict[str, Any],
    chunk_envs: int,
    replace: bool = False,
) -> None:
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


def _write_committed(
    path: AnyPath,
    arrays: dict[str, np.ndarray],
    attrs: dict[str, Any],
    compressors: Codecs | dict[str, Codecs],
    chunk_envs: int,
) -> None:
    """Object store: clear what is at ``path``, write the arrays there, commit (root ``zarr.json``) last."""
    if path.exists():
        delete(path)  # an uncommitted leftover of a killed writer, or the group ``replace`` swaps
    run_at(path, lambda: _write_group(path, arrays, attrs, compressors, chunk_envs))
    faults.point("store.arrays_written")


def _write_group(
    tmp: AnyPath,
    arrays: dict[str, np.ndarray],
    attrs: dict[str, Any],
    compressors: Codecs | dict[str, Codecs],
    chunk_envs: int,
) -> Coroutine[Any, Any, None]:
    """The group at ``tmp`` through zarr's async API, dimensions named ``DIM_NAMES`` (a coroutine)."""
    return write_group_async(tmp, arrays, attrs, compressors, chunk_envs, DIM_NAMES)
