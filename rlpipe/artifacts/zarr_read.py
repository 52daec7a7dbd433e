"""Reading and verifying a rollout store: every check runs before anything is allocated or returned.

The format is in :mod:`rlpipe.artifacts.zarr_io`. A missing, uncommitted, foreign or damaged store
(a chunk file missing or truncated, a CRC32C mismatch, metadata that declares more than its files
hold) is one :class:`~rlpipe.artifacts.errors.StoreError` naming the path and key; the checks of
the metadata (codecs, recorded spaces, bounds) are :mod:`rlpipe.artifacts.zarr_read_checks`. The
files are untrusted: a rollout read back is checked against the schema of :mod:`rlpipe.rollout` again.
"""

from __future__ import annotations

import asyncio
import itertools
import math
from pathlib import Path
from typing import Any

import numpy as np
import torch
import zarr.api.asynchronous as zarr_async
from tensordict import TensorDict
from zarr import AsyncArray

from rlpipe.artifacts.errors import StoreError
from rlpipe.artifacts.fs import AnyPath, as_path, chunk_sizes, is_object, zarr_store
from rlpipe.artifacts.zarr_io import run_at
from rlpipe.artifacts.zarr_read_checks import SPARSE_PREFIX, check_bounds, check_codecs, check_spaces
from rlpipe.refused import RefusedDataError
from rlpipe.rollout import DIM_NAMES, FINAL_OBS, REQUIRED_KEYS, SCHEMA_VERSION
from rlpipe.rollout_checks import RolloutError, check_schema

__all__ = [
    "ChunkChecksumError",
    "read_arrays",
    "read_attrs",
    "read_rollout",
    "read_rollout_final_obs",
]


def read_rollout(path: AnyPath, device: torch.device | str = "cpu") -> tuple[TensorDict, dict[str, Any]]:
    """Read a store back: the ``[N, T+1]`` rollout (dims ``("env", "time")``) and its attributes.

    Values and dtypes are those written, except the observation groups a store policy narrowed
    (the ``precision`` attribute, e.g. float16), which read back as float32 holding the stored
    values, so the rollout keeps the schema; such a store says ``exact: false``. Raises
    :class:`StoreError` naming the path when it is
    missing, not an rlpipe store, of another schema version, has a missing/truncated chunk, or
    holds a rollout that breaks the schema (:func:`rlpipe.rollout_checks.check_schema`). The sparse final
    observations are not read (:func:`read_rollout_final_obs` reads them too).
    """
    rollout, attrs, _ = _read(as_path(path), device, final_obs=False)
    return rollout, attrs


def read_rollout_final_obs(
    path: AnyPath, device: torch.device | str = "cpu"
) -> tuple[TensorDict, dict[str, Any], TensorDict | None]:
    """:func:`read_rollout` plus the store's sparse final observations ``[K]`` (``None``: it has none).

    ``index`` ``[K, 2]`` int64 ``(env, t)`` and ``obs`` ``[K, *obs]`` (a TensorDict per group), as
    :func:`rlpipe.rollout.gather_final_obs` gives them; a narrowed group reads back as float32. A
    ``StoreError`` names the path when the index is not exactly the rollout's done slots.
    """
    return _read(as_path(path), device, final_obs=True)


def _read(
    path: AnyPath, device: torch.device | str, final_obs: bool
) -> tuple[TensorDict, dict[str, Any], TensorDict | None]:
    listing = _checked_listing(path)
    attrs, arrays = run_at(path, lambda: _read_store(path, listing, final_obs))
    n, t1 = arrays["value"][1].shape[:2]
    rollout = TensorDict({}, batch_size=[n, t1], names=list(DIM_NAMES))
    sparse: dict[str, torch.Tensor] = {}
    narrowed = attrs.get("precision") or {}
    for name, (_, data) in arrays.items():
        tensor = torch.from_numpy(data)
        if name.removeprefix(SPARSE_PREFIX) in narrowed and tensor.dtype == torch.float16:
            tensor = tensor.float()
        if name.startswith(SPARSE_PREFIX):
            sparse[name.removeprefix(SPARSE_PREFIX)] = tensor
        else:
            rollout.set(tuple(name.split("/")), tensor)
    try:
        check_schema(rollout)
    except RolloutError as exc:
        raise StoreError(f"{path}: {exc}") from None
    finals = _final_obs(path, sparse, rollout) if sparse else None
    return rollout.to(device), attrs, None if finals is None else finals.to(device)


def _final_obs(path: AnyPath, sparse: dict[str, torch.Tensor], rollout: TensorDict) -> TensorDict:
    """The sparse final observations as a TensorDict ``[K]``, checked against the done slots."""
    index = sparse.pop("index", None)
    if index is None:
        raise StoreError(f"{path}: {FINAL_OBS} has no 'index' array")
    done = rollout["done"][:, :-1]
    if not torch.equal(index, done.nonzero()):
        raise StoreError(f"{path}: {FINAL_OBS}/index is not the rollout's done slots (damaged store)")
    finals = TensorDict({"index": index}, batch_size=[len(index)])
    for name, tensor in sparse.items():
        finals.set(tuple(name.split("/")), tensor)
    return finals


_Arrays = dict[str, tuple[AsyncArray, np.ndarray]]


def _checked_listing(path: AnyPath) -> dict[str, int]:
    """``{chunk key: size}`` of the store at ``path`` (one listing), once it is a committed group."""
    if not path.exists():
        raise StoreError(f"{path}: no rollout store here")
    if not (path / "zarr.json").is_file():
        if is_object(path):
            raise StoreError(
                f"{path}: uncommitted rollout store (no root zarr.json: its writer did not "
                "finish); it is not read"
            )
        raise StoreError(f"{path}: not an rlpipe rollout store (no zarr.json: not a Zarr v3 group)")
    return chunk_sizes(path)


async def _read_store(
    path: AnyPath, listing: dict[str, int], final_obs: bool = True
) -> tuple[dict[str, Any], _Arrays]:
    """Attributes and ``{name: (array, data)}`` of a checked store; arrays are read concurrently.

    ``final_obs`` false leaves the sparse ``final_obs/…`` arrays unread.
    """
    attrs, arrays = await _open_store(path, listing)
    if not final_obs:
        arrays = {name: arr for name, arr in arrays.items() if not name.startswith(SPARSE_PREFIX)}
    data = await asyncio.gather(*(_read_array(path, name, arr, listing) for name, arr in arrays.items()))
    return attrs, {name: (arr, values) for (name, arr), values in zip(arrays.items(), data)}


async def _open_store(path: AnyPath, listing: dict[str, int]) -> tuple[dict[str, Any], dict[str, AsyncArray]]:
    try:
        group = await zarr_async.open_group(store=zarr_store(path, read_only=True), mode="r", zarr_format=3)
        members = [(name, node) async for name, node in group.members(max_depth=None)]
    except Exception as exc:
        raise StoreError(f"{path}: not an rlpipe rollout store ({_first_line(exc)})") from None
    attrs = dict(group.attrs)
    version = attrs.get("schema_version")
    if version is None:
        raise StoreError(f"{path}: not an rlpipe rollout store (no schema_version attribute)")
    if version != SCHEMA_VERSION:
        raise StoreError(
            f"{path}: rollout schema version {version}, this rlpipe reads version {SCHEMA_VERSION}"
        )
    arrays = {name: node for name, node in sorted(members) if isinstance(node, AsyncArray)}
    missing = [
        key
        for key in REQUIRED_KEYS
        if key not in arrays and not any(name.startswith(f"{key}/") for name in arrays)
    ]
    if missing:
        raise StoreError(f"{path}: not an rlpipe rollout store (no {missing[0]!r} array)")
    for name, arr in arrays.items():
        check_codecs(path, name, arr)
    check_spaces(path, attrs.get("spaces"), arrays)
    for name, arr in arrays.items():
        check_bounds(path, name, arr, listing)
    batch = arrays["value"].shape[:2]
    _check_sparse(path, {name: arr for name, arr in arrays.items() if name.startswith(SPARSE_PREFIX)}, batch)
    for name, arr in arrays.items():
        if not name.startswith(SPARSE_PREFIX) and arr.shape[:2] != batch:
            raise StoreError(
                f"{path}/{name}: shape {list(arr.shape)} does not start with the "
                f"rollout's [N, T+1] = {list(batch)}"
            )
    return attrs, arrays


def _check_sparse(path: AnyPath, arrays: dict[str, AsyncArray], batch: tuple[int, ...]) -> None:
    """``StoreError`` unless the sparse arrays have one row count K <= N·T (checked on the metadata)."""
    if not arrays:
        return
    rows = {arr.shape[0] for arr in arrays.values()}
    k = rows.pop()
    if rows or f"{SPARSE_PREFIX}index" not in arrays or k > batch[0] * (batch[1] - 1):
        raise StoreError(
            f"{path / FINAL_OBS}: arrays {sorted(arrays)} must share one row count K, at most "
            f"N·T = {batch[0] * (batch[1] - 1)}, with an 'index'; nothing was read"
        )


async def _read_array(path: AnyPath, name: str, arr: AsyncArray, listing: dict[str, int]) -> np.ndarray:
    coords = _chunk_coords(arr)
    for coord in coords:
        chunk_file = path / name / arr.metadata.encode_chunk_key(coord)
        if f"{name}/{arr.metadata.encode_chunk_key(coord)}" not in listing:
            raise StoreError(f"{chunk_file}: chunk file missing (incomplete or damaged store)")
    try:
        return np.asarray(await arr.getitem(...))
    except Exception as exc:
        bad = await _first_bad_chunk(arr, coords)
        chunk = Path(name, arr.metadata.encode_chunk_key(bad)) if bad else Path(name)
        where = path / chunk
        if "checksum" in str(exc).lower():
            raise ChunkChecksumError(
                f"{path}: key {name!r}: checksum mismatch in chunk {chunk} (the store is damaged)"
            ) from None
        raise StoreError(f"{where}: truncated or unreadable ({_first_line(exc)})") from None


_Coord = tuple[int, ...]


class ChunkChecksumError(StoreError, RefusedDataError):
    """A rollout chunk whose CRC32C does not match its bytes (exit code 3)."""


def _chunk_coords(arr: AsyncArray) -> list[_Coord]:
    grid = [range(math.ceil(s / c)) for s, c in zip(arr.shape, arr.chunks)]
    return list(itertools.product(*grid))


async def _first_bad_chunk(arr: AsyncArray, coords: list[_Coord]) -> _Coord | None:
    for coord in coords:
        selection = tuple(slice(i * c, (i + 1) * c) for i, c in zip(coord, arr.chunks))
        try:
            await arr.getitem(selection)
        except Exception:
            return coord
    return None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def read_attrs(path: AnyPath) -> dict[str, Any]:
    """The group attributes of a store (no array is read); the same checks as :func:`read_rollout`."""
    path = as_path(path)
    listing = _checked_listing(path)
    return run_at(path, lambda: _open_store(path, listing))[0]


def read_arrays(path: AnyPath) -> tuple[dict[str, Any], _Arrays]:
    """Attributes and ``{name: (zarr array, values)}`` of a store, for :mod:`rlpipe.offline.describe`.

    The same checks and errors as :func:`read_rollout`; the arrays carry their chunk/codec metadata.
    """
    path = as_path(path)
    listing = _checked_listing(path)
    return run_at(path, lambda: _read_store(path, listing))
