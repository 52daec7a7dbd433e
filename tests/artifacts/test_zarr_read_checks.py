"""Stores checked against the recorded spaces, the codecs and the chunk files before any chunk is read."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import zarr
from _rollouts import N, T, make_rollout
from zarr.codecs import ZstdCodec

from rlpipe.artifacts.store import StoreError, write_rollout
from rlpipe.artifacts.zarr_read import read_attrs, read_rollout
from rlpipe.cli.exits import describe

SPACES = {
    "observation": {"type": "box", "shape": [4], "dtype": "float32", "low": -1.0, "high": 1.0},
    "action": {"type": "discrete", "n": 3},
}


def _store(tmp_path: Path) -> Path:
    path = tmp_path / "iter-000001.zarr"
    write_rollout(path, make_rollout(), {"iteration": 1, "spaces": SPACES})
    return path


def _replace(path: Path, name: str, data: np.ndarray, compressor: object) -> None:
    group = zarr.open_group(path, mode="r+", zarr_format=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numcodecs' codecs warn that they are outside the spec
        group.create_array(name, data=data, compressors=[compressor], overwrite=True)


def _unread(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if any chunk is read (the checks must refuse on the metadata alone)."""

    async def no_read(*args: object, **kwargs: object) -> None:
        raise AssertionError("a chunk was read")

    monkeypatch.setattr(zarr.AsyncArray, "getitem", no_read)


def test_a_foreign_codec_is_refused_before_reading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """bz2 has no ratio bound: a few hundred KB may decompress to gigabytes."""
    from zarr.codecs.numcodecs import BZ2

    path = _store(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numcodecs' codecs warn that they are outside the spec
        bz2 = BZ2(level=9)
    _replace(path, "value", np.zeros((N, T + 1), np.float32), bz2)
    _unread(monkeypatch)
    with pytest.raises(StoreError) as info:
        read_rollout(path)
    assert str(info.value) == (
        f"{path / 'value'}: codec numcodecs.bz2 is not one rlpipe writes (accepted: "
        "bytes, crc32c, blosc-lz4, blosc-zstd, zstd); nothing was read"
    )
    assert describe(info.value)[0] == 2
    with pytest.raises(StoreError, match="codec numcodecs.bz2"):
        read_attrs(path)  # inspect's path: the same checks


def test_a_shape_beyond_the_recorded_spaces_is_refused_before_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Zeros under zstd: a small file declaring an observation 1024 times wider than the run's."""
    path = _store(tmp_path)
    _replace(path, "obs", np.zeros((N, T + 1, 4096), np.float32), ZstdCodec(level=3))
    _unread(monkeypatch)
    with pytest.raises(StoreError) as info:
        read_rollout(path)
    assert str(info.value) == (
        f"{path / 'obs'}: stored as float32 [{N}, {T + 1}, 4096], but the run's "
        "recorded spaces give [N, T+1, 4] of numbers; nothing was read"
    )


@pytest.mark.parametrize(
    ("name", "data", "expected"),
    [
        ("action", np.zeros((N, T + 1, 2), np.int64), "[N, T+1] of integers"),
        ("action", np.zeros((N, T + 1), np.float32), "[N, T+1] of integers"),
        ("done", np.zeros((N, T + 1), np.uint8), "[N, T+1] of booleans"),
        ("reward", np.zeros((N, T + 1, 3), np.float32), "[N, T+1] of floats"),
    ],
)
def test_dtypes_and_schema_shapes_are_checked(
    tmp_path: Path, name: str, data: np.ndarray, expected: str
) -> None:
    path = _store(tmp_path)
    _replace(path, name, data, ZstdCodec(level=3))
    with pytest.raises(StoreError) as info:
        read_rollout(path)
    assert str(info.value).startswith(f"{path / name}: stored as {data.dtype} {list(data.shape)}, but ")
    assert str(info.value).endswith(f"recorded spaces give {expected}; nothing was read")


def test_a_store_that_fits_its_spaces_reads(tmp_path: Path) -> None:
    path = _store(tmp_path)
    _replace(path, "obs", np.ones((N, T + 1, 4), np.float32), ZstdCodec(level=3))
    rollout, attrs = read_rollout(path)
    assert attrs["spaces"] == SPACES and rollout["obs"].shape == (N, T + 1, 4)


def test_metadata_is_bounded_by_the_chunk_files_before_allocation(tmp_path: Path) -> None:
    path = tmp_path / "iter-000001.zarr"
    write_rollout(path, make_rollout(), {"iteration": 1})
    meta_path = path / "obs" / "zarr.json"
    meta = json.loads(meta_path.read_text())
    meta["shape"] = [N, T + 1, 10**9]  # 40 GB declared, a few hundred bytes on disk
    meta["chunk_grid"]["configuration"]["chunk_shape"] = [N, T + 1, 10**9]
    meta_path.write_text(json.dumps(meta))
    declared = rf"^{path / 'obs'}: zarr.json declares shape \[{N}, {T + 1}, 1000000000\] "
    with pytest.raises(StoreError, match=declared + r".* \(damaged or crafted metadata\); nothing was read$"):
        read_rollout(path)
    meta["shape"], meta["chunk_grid"]["configuration"]["chunk_shape"] = [N * 9999, T + 1, 4], [N, T + 1, 4]
    meta_path.write_text(json.dumps(meta))  # 9999 chunks declared, one file
    with pytest.raises(StoreError, match="damaged or crafted metadata"):
        read_rollout(path)
