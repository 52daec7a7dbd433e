"""Reading and verifying a rollout store: every check runs before anything is allocated or returned.

The format is in :mod:`rlpipe.artifacts.zarr_io`. A missing, uncommitted, foreign or damaged store
(a chunk file missing or truncated, a CRC32C mismatch, metadata that declares more than its files
hold) is one :class:`~rlpipe.artifacts.errors.StoreError` naming the path and key. The files are
untrusted: a rollout read back is checked against the schema of :mod:`rlpipe.rollout` again.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import os
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
from rlpipe.refused import RefusedDataError
from rlpipe.rollout import DIM_NAMES, FINAL_OBS, REQUIRED_KEYS, SCHEMA_VERSION
from rlpipe.rollout_checks import RolloutError, check_schema

__all__ = [
    "WRITTEN_CODECS",
    "ChunkChecksumError",
    "check_bounds",
    "check_codecs",
    "check_spaces",
    "read_arrays",
    "read_attrs",
    "read_rollout",
    "read_rollout_final_obs",
]

_SPARSE = f"{FINAL_OBS}/"


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
        if name.removeprefix(_SPARSE) in narrowed and tensor.dtype == torch.float16:
            tensor = tensor.float()
        if name.startswith(_SPARSE):
            sparse[name.removeprefix(_SPARSE)] = tensor
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
        arrays = {name: arr for name, arr in arrays.items() if not name.startswith(_SPARSE)}
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
    _check_sparse(path, {name: arr for name, arr in arrays.items() if name.startswith(_SPARSE)}, batch)
    for name, arr in arrays.items():
        if not name.startswith(_SPARSE) and arr.shape[:2] != batch:
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
    if rows or f"{_SPARSE}index" not in arrays or k > batch[0] * (batch[1] - 1):
        raise StoreError(
            f"{path / FINAL_OBS}: arrays {sorted(arrays)} must share one row count K, at most "
            f"N·T = {batch[0] * (batch[1] - 1)}, with an 'index'; nothing was read"
        )


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
    expected[f"{_SPARSE}index"] = ((2,), "i")
    if isinstance(spaces, dict):
        observed = _space_arrays("obs", spaces.get("observation"), observation=True)
        expected |= observed | {f"{_SPARSE}{name}": value for name, value in observed.items()}
        expected |= _space_arrays("action", spaces.get("action"), observation=False)
    for name, arr in arrays.items():
        if name not in expected:
            continue
        shape, kinds = expected[name]
        sparse = name.startswith(_SPARSE)
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
