"""Run directories on an object store (a moto S3 server on 127.0.0.1): paths, commits, locks, pointers."""

from __future__ import annotations

import json
import time

import boto3
import pytest
import torch
from tensordict import TensorDict

from rlpipe.artifacts.checkpoints import latest_checkpoint, load_checkpoint, save_checkpoint
from rlpipe.artifacts.errors import LockedError, StoreError
from rlpipe.artifacts.fs import PreconditionFailed, create_exclusive, probe, read_versioned, replace_if
from rlpipe.artifacts.lock import RunLock
from rlpipe.artifacts.removal import set_aside
from rlpipe.artifacts.shards import ShardedStore, read_any
from rlpipe.artifacts.store import RolloutStore, write_rollout
from rlpipe.artifacts.zarr_read import read_rollout
from rlpipe.config import StoreCfg
from rlpipe.location import ObjectPath, location
from rlpipe.object_store import StorageUnavailable
from rlpipe.rollout import FLAG_KEYS, TRANSITION_KEYS, allocate_rollout


def rollout(n: int = 4, t: int = 3, seed: int = 0) -> TensorDict:
    """A schema-valid rollout of random values (slot T padding), with a nested key."""
    g = torch.Generator().manual_seed(seed)
    td = allocate_rollout(n, t, (), (), torch.float32, "cpu")
    for key in ("obs", "value"):
        td[key] = torch.randn(n, t + 1, generator=g)
    for key in TRANSITION_KEYS:
        if key not in FLAG_KEYS:
            td[key][:, :t] = torch.randn(n, t, generator=g)
    td["terminated"][:, :t] = torch.rand(n, t, generator=g) < 0.3
    td["truncated"][:, :t] = torch.rand(n, t, generator=g) < 0.3
    td["done"] = td["terminated"] | td["truncated"]
    td["extras", "action_mean"] = torch.randn(n, t + 1, 2, generator=g)
    return td


def client(endpoint: str):
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )


def keys(endpoint: str, url: str) -> list[str]:
    bucket, _, prefix = url.removeprefix("s3://").partition("/")
    listed = client(endpoint).list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])
    return sorted(obj["Key"] for obj in listed)


def test_object_paths_join_and_split_like_paths():
    run = location("s3://bucket/runs/exp")
    assert isinstance(run, ObjectPath) and str(run) == "s3://bucket/runs/exp"
    ckpt = run / "checkpoints" / "ckpt-000002.pt"
    assert (ckpt.name, ckpt.suffix, ckpt.stem) == ("ckpt-000002.pt", ".pt", "ckpt-000002")
    assert ckpt.parent.parent == run and str(ckpt.with_name("latest")).endswith("checkpoints/latest")
    assert str(ckpt.relative_to(run)) == "checkpoints/ckpt-000002.pt" and ckpt.is_relative_to(run)
    assert location("data/exp").__class__.__name__ == "PosixPath"


def test_a_rollout_round_trips_bit_exact_and_is_listed_only_once_committed(s3_server, s3_bucket):
    root = location(f"{s3_bucket}/run/rollouts")
    td = rollout()
    write_rollout(root / "iter-000001.zarr", td, {"iteration": 1})
    back, attrs = read_rollout(root / "iter-000001.zarr")
    assert attrs["iteration"] == 1
    assert all(torch.equal(back[k], td[k]) for k in td.keys(include_nested=True, leaves_only=True))
    # a killed writer: every array there, the root zarr.json (the commit marker) never written
    write_rollout(root / "iter-000002.zarr", rollout(seed=1), {"iteration": 2})
    client(s3_server).delete_object(Bucket=s3_bucket[5:], Key="run/rollouts/iter-000002.zarr/zarr.json")
    assert any("iter-000002.zarr/obs" in k for k in keys(s3_server, f"{s3_bucket}/run"))
    with pytest.raises(StoreError, match="iter-000002.zarr: uncommitted rollout store"):
        read_rollout(root / "iter-000002.zarr")
    store = RolloutStore(root, StoreCfg())  # the resumed writer cleans the leftover at start
    assert store.iterations() == [1]
    assert not any("iter-000002" in k for k in keys(s3_server, f"{s3_bucket}/run"))
    store.submit(rollout(seed=2), {"iteration": 2})
    store.close()
    assert store.iterations() == [1, 2]


@pytest.mark.slow  # two background writers on S3: ~5 s here; the two-node test covers shards too
def test_shards_of_two_ranks_read_back_as_one_rollout(s3_bucket):
    root = location(f"{s3_bucket}/run/rollouts")
    parts = [rollout(seed=r) for r in range(2)]
    for rank, part in enumerate(parts):
        with ShardedStore(root, StoreCfg(), rank, 2) as store:
            store.submit(part, {"iteration": 1})
    joined, attrs = read_any(root / "iter-000001.zarr")
    assert attrs["world_size"] == 2 and torch.equal(joined["obs"], torch.cat([p["obs"] for p in parts]))


def test_conditional_create_and_overwrite_hold_on_the_server(s3_bucket):
    path = location(f"{s3_bucket}/x/pointer")
    etag = create_exclusive(path, b"one")
    with pytest.raises(PreconditionFailed):
        create_exclusive(path, b"two")
    new = replace_if(path, b"two", etag)
    with pytest.raises(PreconditionFailed):
        replace_if(path, b"three", etag)  # a writer holding the old ETag loses
    assert read_versioned(path) == (b"two", new)


def test_the_latest_pointer_refuses_a_writer_that_lost_the_run(s3_server, s3_bucket):
    ckpts = location(f"{s3_bucket}/run/checkpoints")
    save_checkpoint(ckpts, 1, {"w": torch.ones(2)}, keep_last=None)
    save_checkpoint(ckpts, 2, {"w": torch.full((2,), 2.0)}, keep_last=1)
    assert latest_checkpoint(ckpts) == ckpts / "ckpt-000002.pt"
    assert torch.equal(load_checkpoint(ckpts / "ckpt-000002.pt")["w"], torch.full((2,), 2.0))
    assert [k.rsplit("/", 1)[1] for k in keys(s3_server, str(ckpts))] == [
        "ckpt-000002.pt",
        "ckpt-000002.pt.sha256",
        "latest",
    ]
    client(s3_server).put_object(Bucket=s3_bucket[5:], Key="run/checkpoints/latest", Body=b"ckpt-000009.pt\n")
    with pytest.raises(LockedError, match="latest: moved by another writer"):
        save_checkpoint(ckpts, 3, {"w": torch.zeros(2)}, keep_last=None)


def test_the_run_lock_is_a_conditional_create_with_a_lease(s3_server, s3_bucket, capsys):
    run = location(f"{s3_bucket}/run")
    with RunLock(run, "rlpipe run"):
        holder = json.loads((run / ".lock").read_text())
        assert holder["command"] == "rlpipe run" and holder["expires"] > time.time()
    assert not (run / ".lock").exists()
    bucket = s3_bucket.removeprefix("s3://")
    live = {"pid": 1, "host": "node-7", "command": "rlpipe run", "expires": time.time() + 60}
    client(s3_server).put_object(Bucket=bucket, Key="run/.lock", Body=json.dumps(live).encode())
    with pytest.raises(LockedError, match=r"run: in use by rlpipe run \(pid 1 on node-7, "):
        RunLock(run).acquire()  # another node's holder whose lease still runs
    # the same holder died: its lease ran out, the lock is taken over
    client(s3_server).put_object(
        Bucket=bucket, Key="run/.lock", Body=json.dumps({**live, "expires": time.time() - 1}).encode()
    )
    with RunLock(run, "rlpipe run"):
        assert json.loads((run / ".lock").read_text())["pid"] != 1
    assert "taking over the lock of pid 1 on node-7, whose lease ran out" in capsys.readouterr().err


@pytest.mark.slow  # botocore's own connect retries and backoff: ~5 s
def test_a_store_that_stays_down_is_retried_then_one_line(monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens on the discard port
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("RLPIPE_STORE_RETRIES", "2")
    monkeypatch.setenv("RLPIPE_STORE_BACKOFF_S", "0.01")
    path = location("s3://nowhere/run/params.yaml")
    with pytest.raises(StorageUnavailable, match="object store failed after 2 attempts") as info:
        path.write_text("x: 1\n")
    assert info.value.filename == "s3://nowhere/run/params.yaml"
    with pytest.raises(ValueError, match=r"s3://nowhere/run: cannot reach the object store at http://127"):
        probe(location("s3://nowhere/run"))


def test_stores_set_aside_on_an_object_store_stay_whole_and_leave_the_old_prefix(s3_server, s3_bucket):
    root = location(f"{s3_bucket}/run/rollouts")
    write_rollout(root / "iter-000001.zarr", rollout(), {"iteration": 1})
    set_aside([root / "iter-000001.zarr"], root / "superseded-1", within=location(f"{s3_bucket}/run"))
    moved, _ = read_rollout(root / "superseded-1" / "iter-000001.zarr")
    assert torch.equal(moved["obs"], rollout()["obs"])
    assert not any("rollouts/iter-000001.zarr" in k for k in keys(s3_server, f"{s3_bucket}/run"))
