"""Reading rollout stores (rlpipe/artifacts/zarr_read.py): checksums, one-line errors;
and `rlpipe inspect`'s description of a store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import zarr
from _rollouts import T, make_rollout

from rlpipe.artifacts.store import StoreError, write_rollout
from rlpipe.artifacts.zarr_read import ChunkChecksumError, read_rollout
from rlpipe.offline.describe import describe_rollout
from rlpipe.rollout import SCHEMA_VERSION

# ------------------------------------------------------------------------------------- damage


@pytest.mark.parametrize("codec", ["none", "blosc-lz4"])
@pytest.mark.parametrize("damage", ["flip", "zero"])
def test_a_damaged_chunk_is_a_checksum_error_naming_store_and_key(
    tmp_path: Path, codec: str, damage: str
) -> None:
    path = tmp_path / "iter-000001.zarr"
    write_rollout(path, make_rollout(), {"iteration": 1}, codec=codec)
    chunk = path / "reward" / "c.0.0"
    data = bytearray(chunk.read_bytes())
    if damage == "flip":
        data[len(data) // 3] ^= 0x10
    else:
        data[: len(data) // 2] = bytes(len(data) // 2)
    chunk.write_bytes(bytes(data))
    with pytest.raises(
        ChunkChecksumError,
        match=rf"^{path}: key 'reward': checksum mismatch in chunk "
        r"reward/c\.0\.0 \(the store is damaged\)$",
    ):
        read_rollout(path)


# ----------------------------------------------------------------------------------- read errors


def test_missing_path(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match=r"iter-000001\.zarr: no rollout store here"):
        read_rollout(tmp_path / "iter-000001.zarr")


def test_directory_that_is_not_zarr(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(StoreError, match=f"{tmp_path}: not an rlpipe rollout store"):
        read_rollout(tmp_path)


def test_zarr_array_is_not_a_store(tmp_path: Path) -> None:
    zarr.create_array(tmp_path / "a.zarr", shape=(2,), dtype="f4")
    with pytest.raises(StoreError, match=r"a\.zarr: not an rlpipe rollout store \("):
        read_rollout(tmp_path / "a.zarr")


def test_foreign_zarr_group(tmp_path: Path) -> None:
    group = zarr.open_group(tmp_path / "other.zarr", mode="w", attributes={"owner": "someone"})
    group.create_array("obs", shape=(2, 3), dtype="f4")
    with pytest.raises(
        StoreError,
        match="other.zarr: not an rlpipe rollout store "
        r"\(no schema_version attribute\)",
    ):
        read_rollout(tmp_path / "other.zarr")


def test_group_missing_a_schema_array(tmp_path: Path) -> None:
    path = tmp_path / "iter-000001.zarr"
    write_rollout(path, make_rollout(), {"iteration": 1})
    group = zarr.open_group(path, mode="r+")
    del group["reward"]
    with pytest.raises(StoreError, match=r"not an rlpipe rollout store \(no 'reward' array\)"):
        read_rollout(path)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (
            "reward",
            lambda r: r.__setitem__((2, T), 1.0),
            rf"key 'reward' padding slot is not zero at \[2, {T}\]",
        ),
        (
            "done",
            lambda r: r.__setitem__((1, 0), ~r[1, 0]),
            r"key 'done' != terminated \| truncated at \[1, 0\]",
        ),
        ("value", lambda r: r.astype("float64"), "key 'value' has dtype float64, expected float32"),
    ],
)
def test_a_stored_rollout_that_breaks_the_schema_is_refused_on_read(
    tmp_path: Path, key, value, message
) -> None:
    path = tmp_path / "iter-000001.zarr"
    write_rollout(path, make_rollout(), {"iteration": 1})
    group = zarr.open_group(path, mode="r+")
    data = group[key][...]
    changed = value(data)
    data = data if changed is None else changed
    del group[key]
    group.create_array(key, data=data, chunks=data.shape, dimension_names=("env", "time"))
    with pytest.raises(StoreError, match=r"iter-000001\.zarr: rollout: " + message):
        read_rollout(path)


def test_other_schema_version(tmp_path: Path) -> None:
    path = tmp_path / "iter-000001.zarr"
    write_rollout(path, make_rollout(), {"iteration": 1})
    zarr.open_group(path, mode="r+").attrs["schema_version"] = SCHEMA_VERSION + 1
    with pytest.raises(
        StoreError,
        match=f"iter-000001.zarr: rollout schema version "
        f"{SCHEMA_VERSION + 1}, this rlpipe reads version "
        f"{SCHEMA_VERSION}",
    ):
        read_rollout(path)


@pytest.mark.parametrize("codec", ["none", "blosc-lz4"])
@pytest.mark.parametrize("cut", [0.5, 0.0])
def test_truncated_chunk_names_the_file(tmp_path: Path, codec: str, cut: float) -> None:
    path = tmp_path / "iter-000001.zarr"
    write_rollout(path, make_rollout(n=8), {"iteration": 1}, codec=codec, chunk_envs=4)
    chunk = path / "obs" / "c.1.0.0"
    chunk.write_bytes(chunk.read_bytes()[: int(chunk.stat().st_size * cut)])
    named = (
        r"iter-000001\.zarr(/obs/c\.1\.0\.0: truncated or unreadable|: key 'obs': checksum mismatch "
        r"in chunk obs/c\.1\.0\.0)"
    )
    with pytest.raises(StoreError, match=named):
        read_rollout(path)
    with pytest.raises(StoreError, match=named):
        describe_rollout(path)


def test_deleted_chunk_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "iter-000001.zarr"
    write_rollout(path, make_rollout(n=8), {"iteration": 1}, chunk_envs=4)
    (path / "done" / "c.0.0").unlink()  # all-False chunk: zarr would read fill values
    with pytest.raises(StoreError, match=r"iter-000001\.zarr/done/c\.0\.0: chunk file missing"):
        read_rollout(path)


# ------------------------------------------------------------------------------------- describe


def test_describe_reports_layout_stats_and_episodes(tmp_path: Path) -> None:
    rollout = make_rollout(n=8, box=True)
    path = tmp_path / "iter-000002.zarr"
    write_rollout(path, rollout, {"iteration": 2, "env_id": "Pendulum"}, codec="blosc-lz4", chunk_envs=4)
    info = describe_rollout(path)
    assert info["schema_version"] == SCHEMA_VERSION
    assert info["attrs"]["env_id"] == "Pendulum"
    assert (info["num_envs"], info["horizon"], info["transitions"]) == (8, T, 8 * T)
    obs = info["keys"]["obs"]
    assert obs["shape"] == [8, T + 1, 4] and obs["dtype"] == "float32"
    assert obs["chunks"] == [4, T + 1, 4] and obs["codec"] == "blosc-lz4"
    assert obs["checksum"] == "crc32c"
    assert obs["stats"]["max"] == pytest.approx(float(rollout["obs"].max()))
    assert obs["stats"]["std"] == pytest.approx(float(rollout["obs"].double().std(unbiased=False)))
    valid_done = rollout["done"][:, :-1]
    assert info["keys"]["done"]["stats"] == {"true": int(valid_done.sum()), "false": int((~valid_done).sum())}
    assert info["episodes"]["finished"] == int(valid_done.sum()) > 0
    assert info["episodes"]["terminated"] == int(rollout["terminated"].sum())
    mean_reward = float(rollout["reward"][:, :-1].double().mean())
    assert info["episodes"]["mean_reward_per_step"] == pytest.approx(mean_reward)
    assert "recurrent/h" in info["keys"]
    assert 0 < info["keys"]["obs"]["bytes_on_disk"] < info["bytes_on_disk"]
    json.dumps(info)  # printable as JSON by `rlpipe inspect`


def test_describe_counts_small_integer_actions(tmp_path: Path) -> None:
    rollout = make_rollout()
    path = tmp_path / "iter-000001.zarr"
    write_rollout(path, rollout, {"iteration": 1})
    stats = describe_rollout(path)["keys"]["action"]["stats"]
    counts = torch.bincount(rollout["action"][:, :-1].flatten())
    assert stats["counts"] == {i: int(c) for i, c in enumerate(counts) if c}
    assert describe_rollout(path)["keys"]["action"]["codec"] == "none"


# ------------------------------------------------------------------------------- chunk keys


def _nest_chunk_keys(store: Path) -> int:
    """Lay ``store`` out as zarr's default ``/`` chunk-key separator does (``c/0/0``); the arrays changed."""
    changed = 0
    for meta_file in store.rglob("zarr.json"):
        meta = json.loads(meta_file.read_text())
        if meta["node_type"] != "array":
            continue
        meta["chunk_key_encoding"]["configuration"]["separator"] = "/"
        meta_file.write_text(json.dumps(meta, indent=2))
        for chunk in meta_file.parent.glob("c.*"):
            nested = chunk.parent.joinpath(*chunk.name.split("."))
            nested.parent.mkdir(parents=True, exist_ok=True)
            chunk.rename(nested)
        changed += 1
    return changed


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_stores_with_nested_chunk_keys_read_as_before(tmp_path: Path, codec: str) -> None:
    path = tmp_path / "iter-000001.zarr"
    rollout = make_rollout()
    write_rollout(path, rollout, {"iteration": 1}, codec=codec)
    written, attrs = read_rollout(path)
    assert sorted(p.name for p in (path / "obs").iterdir()) == ["c.0.0.0", "zarr.json"]  # no folder per index
    assert _nest_chunk_keys(path) >= 8
    assert (path / "obs" / "c" / "0" / "0" / "0").is_file()
    nested, nested_attrs = read_rollout(path)
    assert nested_attrs == attrs
    assert set(nested.keys(True, True)) == set(written.keys(True, True))
    for key in written.keys(True, True):
        assert torch.equal(nested[key], written[key]), key
