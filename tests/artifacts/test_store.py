"""Tests of rlpipe/store.py: Zarr round trips, layout, atomicity, background writer, errors."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
import torch
import zarr
from tensordict import TensorDict

import rlpipe.artifacts.store as store_mod
import rlpipe.artifacts.zarr_write as zarr_write
from rlpipe.artifacts import zarr_direct
from rlpipe.artifacts.store import RolloutStore, StoreError, read_rollout, write_rollout
from rlpipe.artifacts.zarr_read import ChunkChecksumError
from rlpipe.config import StoreCfg
from rlpipe.offline.describe import describe_rollout
from rlpipe.rollout import SCHEMA_VERSION, allocate_rollout, validate

N, T = 6, 5


def make_rollout(n: int = N, t: int = T, box: bool = False, seed: int = 0) -> TensorDict:
    """A schema-valid rollout of random contents; int64 or Box float [n, t+1, 2] actions."""
    g = torch.Generator().manual_seed(seed)
    extras = {"action_mean": ((2,), torch.float32)} if box else {}
    action_shape, action_dtype = ((2,), torch.float32) if box else ((), torch.int64)
    r = allocate_rollout(n, t, (4,), action_shape, action_dtype, "cpu", extras=extras)
    r["obs"].copy_(torch.randn(n, t + 1, 4, generator=g))
    r["value"].copy_(torch.randn(n, t + 1, generator=g))
    valid = (slice(None), slice(0, t))
    if box:
        r["action"][valid] = torch.randn(n, t, 2, generator=g)
        r["action_mean"][valid] = torch.randn(n, t, 2, generator=g)
    else:
        r["action"][valid] = torch.randint(0, 3, (n, t), generator=g)
    r["reward"][valid] = torch.rand(n, t, generator=g)
    r["sample_log_prob"][valid] = -torch.rand(n, t, generator=g)
    r["terminated"][valid] = torch.rand(n, t, generator=g) < 0.2
    r["truncated"][valid] = (torch.rand(n, t, generator=g) < 0.1) & ~r["terminated"][valid]
    r["done"][valid] = r["terminated"][valid] | r["truncated"][valid]
    r["final_value"][valid] = torch.where(r["truncated"][valid], 1.5, 0.0)
    r.set(("recurrent", "h"), torch.randn(n, t + 1, 3, generator=g))
    validate(r)
    return r


def assert_same(a: TensorDict, b: TensorDict) -> None:
    assert a.batch_size == b.batch_size
    assert set(a.keys(True, True)) == set(b.keys(True, True))
    for key in a.keys(True, True):
        assert a[key].dtype == b[key].dtype, key
        assert torch.equal(a[key], b[key]), key


ATTRS = {"iteration": 3, "env_steps": 90, "env_id": "CartPole", "seed": 42,
         "params_hash": "abc123", "checkpoint": "ckpt-000002.pt"}


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
    assert sorted(p.name for p in (path / "obs" / "c").iterdir()) == ["0", "1", "2"]


def test_default_chunk_covers_all_envs_and_codec_none(tmp_path: Path) -> None:
    path = tmp_path / "iter-000001.zarr"
    write_rollout(path, make_rollout(), {"iteration": 1})
    group = zarr.open_group(path, mode="r")
    assert group["obs"].chunks == (N, T + 1, 4)
    assert [type(c).__name__ for c in group["obs"].compressors] == ["Crc32cCodec"]
    assert (path / "obs" / "c" / "0" / "0" / "0").stat().st_size == N * (T + 1) * 4 * 4 + 4  # raw + CRC


@pytest.mark.parametrize("codec", ["none", "blosc-lz4"])
@pytest.mark.parametrize("damage", ["flip", "zero"])
def test_a_damaged_chunk_is_a_checksum_error_naming_store_and_key(tmp_path: Path, codec: str,
                                                                  damage: str) -> None:
    path = tmp_path / "iter-000001.zarr"
    write_rollout(path, make_rollout(), {"iteration": 1}, codec=codec)
    chunk = path / "reward" / "c" / "0" / "0"
    data = bytearray(chunk.read_bytes())
    if damage == "flip":
        data[len(data) // 3] ^= 0x10
    else:
        data[: len(data) // 2] = bytes(len(data) // 2)
    chunk.write_bytes(bytes(data))
    with pytest.raises(ChunkChecksumError, match=rf"^{path}: key 'reward': checksum mismatch in chunk "
                                                 r"reward/c/0/0 \(the store is damaged\)$"):
        read_rollout(path)


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


@pytest.mark.parametrize("codec", ["none", "blosc-lz4"])
def test_failure_mid_write_leaves_no_store_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, codec: str
) -> None:
    calls = []
    if codec == "none":  # written file by file (zarr_direct)
        real_direct = zarr_direct._write_array

        def fail_direct(*args: object, **kwargs: object) -> None:
            calls.append(args[0])
            if len(calls) > 1:
                raise OSError(5, "Input/output error")
            real_direct(*args, **kwargs)

        monkeypatch.setattr(zarr_direct, "_write_array", fail_direct)
    else:  # written through zarr's async API
        real = zarr_write._write_array

        async def fail_after_first(*args: object, **kwargs: object) -> None:
            calls.append(args[1])
            if len(calls) > 1:
                raise OSError(5, "Input/output error")
            await real(*args, **kwargs)

        monkeypatch.setattr(zarr_write, "_write_array", fail_after_first)
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


# ---------------------------------------------------------------------------- background writer


def test_submit_flush_writes_everything_and_caller_may_reuse_buffer(tmp_path: Path) -> None:
    buffer = make_rollout(seed=0)
    expected = []
    with RolloutStore(tmp_path, StoreCfg(queue_size=2)) as store:
        for it in range(1, 6):
            buffer.update(make_rollout(seed=it))  # the collector refills its one buffer in place
            expected.append(buffer.clone())
            store.submit(buffer, {"iteration": it, "env_steps": it * N * T})
            buffer.zero_()
        store.flush()
        assert store.iterations() == [1, 2, 3, 4, 5]
    for it, want in enumerate(expected, start=1):
        got, attrs = read_rollout(tmp_path / f"iter-{it:06d}.zarr")
        assert_same(got, want)
        assert attrs["env_steps"] == it * N * T
    assert store._thread is None
    with pytest.raises(StoreError, match="closed"):
        store.submit(make_rollout(), {"iteration": 9})


def test_the_store_holds_at_most_queue_size_rollouts_and_submit_blocks_before_cloning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = StoreCfg(queue_size=2)
    store = RolloutStore(tmp_path, cfg)
    entered, gate = threading.Event(), threading.Event()
    held: list[int] = []  # rollouts the store holds (queued + being written) at each write
    real = store_mod.write_rollout

    def slow_write(*args: object, **kwargs: object) -> None:
        held.append(store._queue.qsize() + 1)
        entered.set()
        gate.wait(timeout=30)
        real(*args, **kwargs)

    monkeypatch.setattr(store_mod, "write_rollout", slow_write)
    store.submit(make_rollout(), {"iteration": 1})
    assert entered.wait(timeout=30)  # the writer holds rollout 1 ...
    store.submit(make_rollout(), {"iteration": 2})  # ... and rollout 2 fills the second slot
    third = make_rollout()
    clones: list[int] = []
    real_clone = type(third).clone

    def counting_clone(self: TensorDict, *args: object, **kwargs: object) -> TensorDict:
        clones.append(1)
        return real_clone(self, *args, **kwargs)

    monkeypatch.setattr(type(third), "clone", counting_clone)
    blocked = threading.Thread(target=store.submit, args=(third, {"iteration": 3}))
    blocked.start()
    blocked.join(timeout=0.5)
    assert blocked.is_alive(), "submit returned although the store held queue_size rollouts"
    assert clones == [], "submit cloned before a slot was free"
    gate.set()
    blocked.join(timeout=30)
    store.close()
    assert clones == [1]
    assert max(held) <= cfg.queue_size
    assert store.iterations() == [1, 2, 3]


def test_the_default_keeps_one_rollout_beyond_the_collectors_buffer() -> None:
    assert StoreCfg().queue_size == 1


def test_write_error_surfaces_on_flush_and_keeps_earlier_stores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = store_mod.write_rollout

    def disk_full_at_3(path: Path, *args: object, **kwargs: object) -> None:
        if path.name == "iter-000003.zarr":
            raise OSError(28, "No space left on device")
        real(path, *args, **kwargs)

    monkeypatch.setattr(store_mod, "write_rollout", disk_full_at_3)
    store = RolloutStore(tmp_path, StoreCfg(queue_size=1))
    for it in (1, 2, 3):
        store.submit(make_rollout(), {"iteration": it})
    message = r"writing .*iter-000003\.zarr failed: \[Errno 28\] No space left on device"
    with pytest.raises(StoreError, match=message):  # on the next submit or, if the write is slower, on flush
        store.submit(make_rollout(), {"iteration": 4})
        store.flush()
    assert store.iterations() == [1, 2]  # earlier stores kept, nothing written after the error
    with pytest.raises(StoreError, match=message):
        store.submit(make_rollout(), {"iteration": 5})
    with pytest.raises(StoreError, match=message):
        store.close()
    assert store.iterations() == [1, 2]


def test_submit_checks_schema_and_write_once_on_callers_thread(tmp_path: Path) -> None:
    with RolloutStore(tmp_path, StoreCfg()) as store:
        with pytest.raises(StoreError, match="lacks schema key 'reward'"):
            store.submit(make_rollout().exclude("reward"), {"iteration": 1})
        with pytest.raises(StoreError, match="integer attrs\\['iteration'\\]"):
            store.submit(make_rollout(), {"env_steps": 3})
        store.submit(make_rollout(), {"iteration": 1})
        store.flush()
        with pytest.raises(StoreError, match="iter-000001.zarr: already exists"):
            store.submit(make_rollout(), {"iteration": 1})


def test_context_exit_keeps_the_body_exception(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store_mod, "write_rollout", broken)
    with pytest.raises(KeyboardInterrupt) as info:
        with RolloutStore(tmp_path, StoreCfg()) as store:
            store.submit(make_rollout(), {"iteration": 1})
            raise KeyboardInterrupt
    assert any("No space left" in note for note in info.value.__notes__)


def test_retention_keeps_the_newest(tmp_path: Path) -> None:
    with RolloutStore(tmp_path, StoreCfg(keep_last=2)) as store:
        for it in range(1, 6):
            store.submit(make_rollout(), {"iteration": it})
        store.flush()
        assert store.iterations() == [4, 5]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["iter-000004.zarr", "iter-000005.zarr"]


def test_discard_after_frees_names_for_a_resumed_run(tmp_path: Path) -> None:
    with RolloutStore(tmp_path, StoreCfg()) as store:
        for it in range(1, 5):
            store.submit(make_rollout(seed=it), {"iteration": it})
        assert store.discard_after(2) == [3, 4]
        assert store.iterations() == [1, 2]
        store.submit(make_rollout(seed=9), {"iteration": 3})  # the resumed run rewrites 3
    assert_same(read_rollout(tmp_path / "iter-000003.zarr")[0], make_rollout(seed=9))
    assert sorted(p.name for p in tmp_path.iterdir())[-1] == "iter-000003.zarr"


def test_disabled_store_writes_nothing(tmp_path: Path) -> None:
    with RolloutStore(tmp_path, StoreCfg(enabled=False)) as store:
        store.submit(make_rollout(), {"iteration": 1})
        store.flush()
    assert store.iterations() == []


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
    with pytest.raises(StoreError, match="other.zarr: not an rlpipe rollout store "
                                         r"\(no schema_version attribute\)"):
        read_rollout(tmp_path / "other.zarr")


def test_group_missing_a_schema_array(tmp_path: Path) -> None:
    path = tmp_path / "iter-000001.zarr"
    write_rollout(path, make_rollout(), {"iteration": 1})
    group = zarr.open_group(path, mode="r+")
    del group["reward"]
    with pytest.raises(StoreError, match=r"not an rlpipe rollout store \(no 'reward' array\)"):
        read_rollout(path)


def test_other_schema_version(tmp_path: Path) -> None:
    path = tmp_path / "iter-000001.zarr"
    write_rollout(path, make_rollout(), {"iteration": 1})
    zarr.open_group(path, mode="r+").attrs["schema_version"] = SCHEMA_VERSION + 1
    with pytest.raises(StoreError, match=f"iter-000001.zarr: rollout schema version "
                                         f"{SCHEMA_VERSION + 1}, this rlpipe reads version "
                                         f"{SCHEMA_VERSION}"):
        read_rollout(path)


@pytest.mark.parametrize("codec", ["none", "blosc-lz4"])
@pytest.mark.parametrize("cut", [0.5, 0.0])
def test_truncated_chunk_names_the_file(tmp_path: Path, codec: str, cut: float) -> None:
    path = tmp_path / "iter-000001.zarr"
    write_rollout(path, make_rollout(n=8), {"iteration": 1}, codec=codec, chunk_envs=4)
    chunk = path / "obs" / "c" / "1" / "0" / "0"
    chunk.write_bytes(chunk.read_bytes()[: int(chunk.stat().st_size * cut)])
    named = (r"iter-000001\.zarr(/obs/c/1/0/0: truncated or unreadable|: key 'obs': checksum mismatch "
             r"in chunk obs/c/1/0/0)")
    with pytest.raises(StoreError, match=named):
        read_rollout(path)
    with pytest.raises(StoreError, match=named):
        describe_rollout(path)


def test_deleted_chunk_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "iter-000001.zarr"
    write_rollout(path, make_rollout(n=8), {"iteration": 1}, chunk_envs=4)
    (path / "done" / "c" / "0" / "0").unlink()  # all-False chunk: zarr would read fill values
    with pytest.raises(StoreError, match=r"iter-000001\.zarr/done/c/0/0: chunk file missing"):
        read_rollout(path)


# ------------------------------------------------------------------------------------- describe


def test_describe_reports_layout_stats_and_episodes(tmp_path: Path) -> None:
    rollout = make_rollout(n=8, box=True)
    path = tmp_path / "iter-000002.zarr"
    write_rollout(path, rollout, {"iteration": 2, "env_id": "Pendulum"}, codec="blosc-lz4",
                  chunk_envs=4)
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
    assert info["keys"]["done"]["stats"] == {"true": int(valid_done.sum()),
                                             "false": int((~valid_done).sum())}
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
