"""The direct writer of uncompressed stores writes the files zarr's own writer writes, byte for byte."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from rlpipe.artifacts import rollout_schema, zarr_io, zarr_read, zarr_write
from rlpipe.artifacts.zarr_direct import write_store
from rlpipe.rollout import DIM_NAMES, allocate_rollout


def _rollout(n: int, obs: tuple[int, ...] | dict[str, tuple[int, ...]], action: tuple[int, ...]):
    gen = torch.Generator().manual_seed(n)
    dtype = torch.float32 if action else torch.int64
    extras = {"action_mean": ((2,), torch.float32)}
    ro = allocate_rollout(n, 4, obs, action, dtype, "cpu", extras)
    for _, value in ro.items(include_nested=True, leaves_only=True):
        draw = torch.randint(0, 3 if value.is_floating_point() else 2, value.shape, generator=gen)
        value.copy_(draw * 0.5 if value.is_floating_point() else draw)
    ro.set(("extras", "action_mean"), ro.pop("action_mean"))  # a nested key: a subgroup on disk
    return ro


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(("n", "chunk_envs", "obs", "action"), [
    (8, 1024, (4,), ()),                       # W1's shape: one chunk per array
    (5, 2, (3,), (2,)),                        # several env chunks, a padded edge chunk
    (3, 1024, {"state": (3,), "priv": (2,)}, ()),  # dict observations: group obs/
])
def test_direct_store_is_byte_identical_to_zarrs(tmp_path, n, chunk_envs, obs, action):
    rollout = _rollout(n, obs, action)
    arrays = {name: t.numpy() for name, t in rollout_schema.rollout_leaves(rollout, tmp_path).items()}
    attrs = {"schema_version": 1, "iteration": 7, "env_id": "CartPole-v1", "nested": {"a": [1, 2.5, None]}}
    zarr_io.sync(zarr_write._write_group(tmp_path / "zarr", arrays, attrs, zarr_io._CHECKSUM, chunk_envs))
    write_store(tmp_path / "direct", arrays, attrs, chunk_envs, DIM_NAMES)
    expected, written = _files(tmp_path / "zarr"), _files(tmp_path / "direct")
    assert len(expected) > 20 and sorted(written) == sorted(expected)
    assert [name for name in expected if written[name] != expected[name]] == []


def test_write_rollout_without_codec_reads_back_and_detects_damage(tmp_path):
    rollout = _rollout(4, (4,), ())
    zarr_write.write_rollout(tmp_path / "iter-000001.zarr", rollout, {"iteration": 1})
    back, attrs = zarr_read.read_rollout(tmp_path / "iter-000001.zarr")
    assert attrs["iteration"] == 1 and attrs["schema_version"] == 1
    assert all(torch.equal(back.get(k), v) for k, v in rollout.items(include_nested=True, leaves_only=True))
    chunk = tmp_path / "iter-000001.zarr" / "reward" / "c" / "0" / "0"
    data = bytearray(chunk.read_bytes())
    data[3] ^= 0x40
    chunk.write_bytes(bytes(data))
    with pytest.raises(zarr_read.ChunkChecksumError, match="reward"):
        zarr_read.read_rollout(tmp_path / "iter-000001.zarr")
