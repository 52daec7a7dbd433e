"""Writing rollout stores (rlpipe/artifacts/zarr_write.py): round trips, layout, codecs, atomicity."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
import zarr
from _rollouts import ATTRS, N, T, assert_same, make_rollout

import rlpipe.artifacts.zarr_arrays as zarr_arrays
from rlpipe import fast
from rlpipe.artifacts.store import RolloutStore, StoreError, write_rollout
from rlpipe.artifacts.zarr_read import read_rollout
from rlpipe.config import StoreCfg
from rlpipe.rollout import SCHEMA_VERSION

# ------------------------------------------------------------------------------ round trip, layout


@pytest.mark.parametrize("codec", ["none", "blosc-lz4"])
@pytest.mark.parametrize("box", [False, True])
def test_round_trip_values_dtypes_names_attrs(tmp_path: Path, codec: str, box: bool) -> None:
    rollout = make_rollout(box=box)
    path = tmp_path / "iter-000003.zarr"
    write_rollout(path, rollout, ATTRS, codec=codec)
    back, attrs = read_rollout(path)
    assert_same(back, rollout)
    assert back["done"].dtype == torch.bool
    assert back["action"].dtype == (torch.float32 if box else torch.int64)
    assert back.names == ["env", "time"]
    assert attrs == {"schema_version": SCHEMA_VERSION, **ATTRS}


def test_arrays_chunked_along_envs_only_with_dim_names(tmp_path: Path) -> None:
    rollout = make_rollout(n=10, box=True)
    path = tmp_path / "iter-000001.zarr"
    write_rollout(path, rollout, {"iteration": 1}, codec="blosc-lz4", chunk_envs=4)
    group = zarr.open_group(path, mode="r")
    assert group["obs"].chunks == (4, T + 1, 4)
    assert group["action"].chunks == (4, T + 1, 2)
    assert group["done"].chunks == (4, T + 1)
    assert group["recurrent/h"].chunks == (4, T + 1, 3)
    assert group["obs"].metadata.dimension_names == ("env", "time", "feat0")
    assert group["reward"].metadata.dimension_names == ("env", "time")
    assert [c.to_dict()["name"] for c in group["obs"].compressors] == ["blosc", "crc32c"]
    assert group["obs"].compressors[0].cname.value == "lz4"
    assert group.metadata.consolidated_metadata is None
    assert "consolidated_metadata" not in json.loads((path / "zarr.json").read_text())
    assert sorted(p.name for p in (path / "obs").glob("c.*")) == ["c.0.0.0", "c.1.0.0", "c.2.0.0"]


def test_default_chunk_covers_all_envs_and_codec_none(tmp_path: Path) -> None:
    path = tmp_path / "iter-000001.zarr"
    write_rollout(path, make_rollout(), {"iteration": 1})
    group = zarr.open_group(path, mode="r")
    assert group["obs"].chunks == (N, T + 1, 4)
    assert [type(c).__name__ for c in group["obs"].compressors] == ["Crc32cCodec"]
    assert (path / "obs" / "c.0.0.0").stat().st_size == N * (T + 1) * 4 * 4 + 4  # raw + CRC


def test_unknown_codec_and_bad_attrs_are_store_errors(tmp_path: Path) -> None:
    path = tmp_path / "iter-000001.zarr"
    with pytest.raises(StoreError, match="codec 'gzip' is not known; accepted: none, blosc-lz4"):
        write_rollout(path, make_rollout(), {}, codec="gzip")
    with pytest.raises(StoreError, match="not JSON-serializable"):
        write_rollout(path, make_rollout(), {"checkpoint": Path("x")})
    with pytest.raises(StoreError, match="lacks schema key 'obs'"):
        write_rollout(path, make_rollout().exclude("obs"), {})
    assert not path.exists()


# ---------------------------------------------------------------------------------- atomicity


@pytest.mark.parametrize(("codec", "fast_paths"), [("none", True), ("none", False), ("blosc-lz4", True)])
def test_failure_mid_write_leaves_no_store_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, codec: str, fast_paths: bool
) -> None:
    monkeypatch.setattr(fast, "ENABLED", fast_paths)
    calls = []
    if codec == "none" and fast_paths:  # written file by file (rlpipe.fast.write_zarr_store)
        real_direct = fast._write_zarr_array

        def fail_direct(*args: object, **kwargs: object) -> None:
            calls.append(args[0])
            if len(calls) > 1:
                raise OSError(5, "Input/output error")
            real_direct(*args, **kwargs)

        monkeypatch.setattr(fast, "_write_zarr_array", fail_direct)
    else:  # written through zarr's async API
        real = zarr_arrays._write_array

        async def fail_after_first(*args: object, **kwargs: object) -> None:
            calls.append(args[1])
            if len(calls) > 1:
                raise OSError(5, "Input/output error")
            await real(*args, **kwargs)

        monkeypatch.setattr(zarr_arrays, "_write_array", fail_after_first)
    path = tmp_path / "iter-000001.zarr"
    with pytest.raises(OSError, match="Input/output error"):
        write_rollout(path, make_rollout(), {"iteration": 1}, codec=codec)
    assert len(calls) > 1
    assert not path.exists()
    assert list(tmp_path.iterdir()) == []


def test_store_is_write_once(tmp_path: Path) -> None:
    path = tmp_path / "iter-000001.zarr"
    write_rollout(path, make_rollout(seed=1), {"iteration": 1})
    with pytest.raises(StoreError, match="iter-000001.zarr: already exists"):
        write_rollout(path, make_rollout(seed=2), {"iteration": 1})
    assert_same(read_rollout(path)[0], make_rollout(seed=1))


def test_leftover_temporaries_are_cleaned(tmp_path: Path) -> None:
    write_rollout(tmp_path / "iter-000001.zarr", make_rollout(), {"iteration": 1})
    dead = tmp_path / ".iter-000002.zarr.tmp-999999999-00ff00ff"  # no such pid
    mine = tmp_path / f".iter-000003.zarr.tmp-{os.getpid()}-0a0b0c0d"
    deleting = tmp_path / ".iter-000004.zarr.del-999999999-12345678"
    live = tmp_path / ".iter-000005.zarr.tmp-1-deadbeef"  # pid 1 is alive: a concurrent writer
    for leftover in (dead, mine, deleting, live):
        (leftover / "obs").mkdir(parents=True)
    store = RolloutStore(tmp_path, StoreCfg())
    assert not dead.exists() and not mine.exists() and not deleting.exists()
    assert live.exists()
    assert store.iterations() == [1]
    assert store.latest() == 1


# ------------------------------------------------------------------------------ sparse final observations


def _final_obs(rollout, seed: int = 1):
    """The sparse final observations of ``rollout``'s done slots: random observations."""
    from tensordict import TensorDict

    index = rollout["done"][:, :-1].nonzero()
    obs = torch.randn(len(index), *rollout["obs"].shape[2:], generator=torch.Generator().manual_seed(seed))
    return TensorDict({"index": index, "obs": obs}, batch_size=[len(index)])


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("done_rate", [0.3, 0.0])  # some dones; none (K = 0: empty arrays)
def test_every_writer_writes_the_sparse_final_obs_byte_identically_to_zarr(tmp_path, monkeypatch, done_rate):
    from rlpipe.artifacts.zarr_read import read_rollout_final_obs

    rollout = make_rollout()
    if done_rate == 0.0:
        for key in ("terminated", "truncated", "done"):
            rollout[key].zero_()
        rollout["final_value"].zero_()
    final = _final_obs(rollout)
    for name, writer, fast_on in (
        ("zarr", "thread", False),
        ("thread", "thread", True),
        ("process", "process", True),
    ):
        monkeypatch.setattr(fast, "ENABLED", fast_on)
        with RolloutStore(tmp_path / name, StoreCfg(writer=writer, chunk_envs=4)) as store:
            store.submit(rollout, dict(ATTRS), final)
    expected = _files(tmp_path / "zarr")
    assert any(name.startswith("iter-000003.zarr/final_obs/obs/") for name in expected) or done_rate == 0.0
    for name in ("thread", "process"):
        written = _files(tmp_path / name)
        assert sorted(written) == sorted(expected)
        assert [f for f in expected if written[f] != expected[f]] == []
    back, attrs, back_final = read_rollout_final_obs(tmp_path / "process" / "iter-000003.zarr")
    assert_same(back, rollout)
    assert torch.equal(back_final["index"], final["index"]) and torch.equal(back_final["obs"], final["obs"])
    assert read_rollout(tmp_path / "process" / "iter-000003.zarr")[0].keys() == back.keys()


def test_the_sparse_final_obs_follow_the_env_subset_and_precision(tmp_path):
    from rlpipe.artifacts.zarr_read import read_rollout_final_obs

    rollout = make_rollout(n=6)
    final = _final_obs(rollout)
    with RolloutStore(tmp_path, StoreCfg(writer="thread", envs=3, precision={"obs": "float16"})) as store:
        store.submit(rollout, dict(ATTRS), final)
    group = zarr.open_group(str(tmp_path / "iter-000003.zarr"), mode="r")
    assert group["final_obs/obs"].dtype == "float16"
    _, attrs, back = read_rollout_final_obs(tmp_path / "iter-000003.zarr")
    kept = final["index"][:, 0] < 3
    assert attrs["precision"] == {"obs": "float16"}
    assert torch.equal(back["index"], final["index"][kept])
    assert torch.equal(back["obs"], final["obs"][kept].half().float())


def test_a_sparse_index_that_is_not_the_done_slots_is_refused(tmp_path):
    from rlpipe.artifacts.zarr_read import read_rollout_final_obs

    rollout = make_rollout()
    final = _final_obs(rollout)
    final["index"][0, 1] = T  # the padding slot: never a done
    write_rollout(tmp_path / "s.zarr", rollout, dict(ATTRS), final_obs=final)
    with pytest.raises(StoreError, match="final_obs/index is not the rollout's done slots"):
        read_rollout_final_obs(tmp_path / "s.zarr")


def test_action_mean_is_written_by_every_writer_and_follows_the_env_subset(tmp_path, monkeypatch):
    rollout = make_rollout(box=True)  # holds action_mean [N, T+1, 2]
    for name, writer, fast_on, envs in (
        ("zarr", "thread", False, None),
        ("thread", "thread", True, None),
        ("process", "process", True, None),
        ("subset", "process", True, 2),
    ):
        monkeypatch.setattr(fast, "ENABLED", fast_on)
        with RolloutStore(tmp_path / name, StoreCfg(writer=writer, chunk_envs=4, envs=envs)) as store:
            store.submit(rollout, dict(ATTRS), _final_obs(rollout))
        back = read_rollout(tmp_path / name / "iter-000003.zarr")[0]
        assert torch.equal(back["action_mean"], rollout["action_mean"][:envs]), name
    files = {name: _files(tmp_path / name) for name in ("zarr", "thread", "process")}
    mean_files = [f for f in files["zarr"] if "/action_mean/" in f]
    assert mean_files
    assert all(files[n][f] == files["zarr"][f] for n in ("thread", "process") for f in mean_files)
