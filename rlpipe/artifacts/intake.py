"""Where a rollout enters the store: its one check, and the names of its arrays.

:func:`check_rollout` is the rollout's check on the way into a store (``RolloutStore.submit`` on
the caller's thread, ``write_rollout`` before it writes): the schema of :mod:`rlpipe.rollout`, plus
what a Zarr store can hold (node names, dtypes numpy knows). It needs no zarr, so a schema error is
raised where it was made, before zarr is imported by the writer thread. The writer then takes the
checked rollout's arrays (:func:`rollout_arrays`) without checking them again.
"""

from __future__ import annotations

import functools
import json
from typing import Any, cast

import torch
from tensordict import TensorDict

from rlpipe.artifacts.errors import StoreError
from rlpipe.artifacts.fs import AnyPath, is_object
from rlpipe.rollout import FINAL_OBS, SCHEMA_VERSION
from rlpipe.rollout_checks import RolloutError, check_schema

__all__ = ["check_new_store", "check_rollout", "final_obs_arrays", "group_attributes", "rollout_arrays"]


def check_rollout(rollout: TensorDict, path: AnyPath, final_obs: TensorDict | None = None) -> None:
    """``StoreError`` naming ``path`` unless ``rollout`` fits the schema and every leaf can be stored.

    The schema is :func:`rlpipe.rollout_checks.check_schema` (batch size, keys, dtypes, padding, ``done``);
    values are not checked for finiteness here (a refused rollout is stored for post-mortem). Every
    leaf must be a tensor with a numpy dtype and a key that is a valid Zarr node name.
    ``final_obs`` (the sparse final observations ``[K]``) must hold ``index`` ``[K, 2]`` int64 and
    ``obs`` with the keys and feature shapes of the rollout's ``obs``.
    """
    try:
        check_schema(rollout)
    except RolloutError as exc:
        raise StoreError(f"{path}: {exc}") from None
    for key, value in rollout.items(include_nested=True, leaves_only=True):
        name = _array_name(key, path)
        if not isinstance(value, torch.Tensor):
            raise StoreError(f"{path}: key {name!r} is a {type(value).__name__}, not a tensor")
        if not _has_numpy_dtype(value.dtype):
            raise StoreError(f"{path}: key {name!r} has dtype {value.dtype}, which Zarr cannot store")
    if final_obs is not None:
        _check_final_obs(rollout, final_obs, path)


def _check_final_obs(rollout: TensorDict, final_obs: TensorDict, path: AnyPath) -> None:
    index = final_obs.get("index", None)
    if index is None or index.dtype != torch.int64 or index.shape != (final_obs.batch_size[0], 2):
        raise StoreError(f"{path}: {FINAL_OBS}/index must be [K, 2] int64 (env, t)")
    want = {k: (v.shape[2:], v.dtype) for k, v in rollout.select("obs").items(True, True)}
    have = {k: (v.shape[1:], v.dtype) for k, v in final_obs.select("obs").items(True, True)}
    if want != have:
        raise StoreError(
            f"{path}: {FINAL_OBS}/obs does not match the rollout's obs (keys, feature shapes and dtypes)"
        )


def final_obs_arrays(final_obs: TensorDict) -> dict[str, torch.Tensor]:
    """``{"final_obs/index": [K, 2], "final_obs/obs[/<key>]": [K, *obs]}`` of sparse final observations."""
    return {f"{FINAL_OBS}/{name}": value for name, value in rollout_arrays(final_obs).items()}


def check_new_store(path: AnyPath) -> None:
    """``StoreError`` if a store (committed, on an object store) already exists at ``path``."""
    if (path / "zarr.json").is_file() if is_object(path) else path.exists():
        raise StoreError(f"{path}: already exists; rollout stores are written once")


def rollout_arrays(rollout: TensorDict) -> dict[str, torch.Tensor]:
    """``{"/"-joined key: tensor}`` of a rollout (``[N, T+1, ...]``) that passed :func:`check_rollout`."""
    leaves = rollout.items(include_nested=True, leaves_only=True)  # a rollout's leaves are tensors
    return {
        key if isinstance(key, str) else "/".join(key): cast(torch.Tensor, value) for key, value in leaves
    }


def group_attributes(attrs: dict[str, Any], path: AnyPath) -> dict[str, Any]:
    """A rollout group's attributes as stored: ``attrs`` plus ``schema_version``.

    ``StoreError`` naming ``path`` when ``attrs`` set it or are not JSON-serializable.
    """
    if "schema_version" in attrs:
        raise StoreError(f"{path}: attrs may not set 'schema_version' (always {SCHEMA_VERSION})")
    merged = {"schema_version": SCHEMA_VERSION, **attrs}
    try:
        json.dumps(merged)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"{path}: attrs are not JSON-serializable ({exc})") from None
    return merged


@functools.cache
def _has_numpy_dtype(dtype: torch.dtype) -> bool:
    """Whether numpy (and so Zarr) knows ``dtype`` (bfloat16, for one, it does not)."""
    try:
        torch.empty(0, dtype=dtype).numpy()
    except TypeError:
        return False
    return True


def _array_name(key: str | tuple[str, ...], path: AnyPath) -> str:
    parts = (key,) if isinstance(key, str) else key
    for part in parts:
        if "/" in part or part in {"", ".", ".."} or part.startswith("__"):
            raise StoreError(f"{path}: key {key!r} is not a valid Zarr node name")
    return "/".join(parts)
