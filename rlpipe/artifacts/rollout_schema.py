"""What a rollout store must hold, checked without zarr: schema keys, codec names, valid leaves.

The store's caller checks a rollout here, on its own thread and before any I/O, so a schema error
is raised where it was made; zarr itself (0.25 s to import) is first needed by the writer thread.
"""

from __future__ import annotations

from pathlib import Path

import torch
from tensordict import TensorDict

from rlpipe.artifacts.errors import StoreError
from rlpipe.artifacts.fs import AnyPath, is_object
from rlpipe.rollout import TRANSITION_KEYS

__all__ = ["CODECS", "REQUIRED_KEYS", "check_new_store", "check_writable", "rollout_leaves"]

CODECS = ("none", "blosc-lz4")
"""Accepted ``store.codec`` values."""
REQUIRED_KEYS = ("obs", "value", *TRANSITION_KEYS)
"""Arrays every rollout store holds (the schema keys of :mod:`rlpipe.rollout`)."""


def check_writable(rollout: TensorDict, path: Path) -> None:
    """Raise ``StoreError`` now if ``path`` exists or ``rollout`` breaks the schema (before any I/O)."""
    check_new_store(path)
    rollout_leaves(rollout, path)


def check_new_store(path: AnyPath) -> None:
    """``StoreError`` if a store (committed, on an object store) already exists at ``path``."""
    if (path / "zarr.json").is_file() if is_object(path) else path.exists():
        raise StoreError(f"{path}: already exists; rollout stores are written once")


def rollout_leaves(rollout: TensorDict, path: Path) -> dict[str, torch.Tensor]:
    """Check batch dims, schema keys and dtypes; return ``{"/"-joined key: tensor}``."""
    if rollout.batch_dims != 2:
        batch = list(rollout.batch_size)
        raise StoreError(f"{path}: rollout batch_size must be [N, T+1], got {batch}")
    missing = [key for key in REQUIRED_KEYS if key not in rollout.keys()]
    if missing:
        raise StoreError(f"{path}: rollout lacks schema key {missing[0]!r}")
    leaves = {}
    for key, value in rollout.items(include_nested=True, leaves_only=True):
        name = _array_name(key, path)
        if not isinstance(value, torch.Tensor):
            raise StoreError(f"{path}: key {name!r} is a {type(value).__name__}, not a tensor")
        try:
            torch.empty(0, dtype=value.dtype).numpy()
        except TypeError:  # e.g. bfloat16 has no numpy dtype
            raise StoreError(f"{path}: key {name!r} has dtype {value.dtype}, which Zarr cannot "
                             "store") from None
        leaves[name] = value
    return leaves


def _array_name(key: str | tuple[str, ...], path: Path) -> str:
    parts = (key,) if isinstance(key, str) else key
    for part in parts:
        if "/" in part or part in {"", ".", ".."} or part.startswith("__"):
            raise StoreError(f"{path}: key {key!r} is not a valid Zarr node name")
    return "/".join(parts)
