"""rlpipe.artifacts.shards: a sharded iteration reads back with its final observations, env rows offset."""

from __future__ import annotations

import torch
from tensordict import TensorDict

from rlpipe.artifacts.layout import shard_name
from rlpipe.artifacts.shards import read_any, read_any_final_obs
from rlpipe.artifacts.store import write_rollout
from rlpipe.rollout import FLAG_KEYS, TRANSITION_KEYS, allocate_rollout, gather_final_obs


def rollout_with_finals(n: int, t: int, seed: int) -> tuple[TensorDict, TensorDict]:
    """A schema-valid ``[n, t+1]`` rollout with dones, and its sparse final observations ``[K]``."""
    g = torch.Generator().manual_seed(seed)
    td = allocate_rollout(n, t, (3,), (1,), torch.float32, "cpu")
    td["obs"] = torch.randn(n, t + 1, 3, generator=g)
    td["value"] = torch.randn(n, t + 1, generator=g)
    for key in TRANSITION_KEYS:
        if key not in FLAG_KEYS and key != "action":
            td[key][:, :t] = torch.randn(n, t, generator=g)
    td["action"][:, :t] = torch.randn(n, t, 1, generator=g)
    td["truncated"][:, :t] = torch.rand(n, t, generator=g) < 0.4
    td["done"] = td["terminated"] | td["truncated"]
    finals = gather_final_obs(torch.randn(n, t, 3, generator=g), td["done"][:, :t])
    return td, finals


def test_a_sharded_iteration_reads_back_with_its_final_observations_at_the_joined_env_rows(tmp_path):
    iteration = tmp_path / "iter-000001.zarr"
    parts = [rollout_with_finals(4, 5, seed=rank) for rank in range(2)]
    assert all(len(finals) > 0 for _, finals in parts)  # each shard has final observations
    for rank, (td, finals) in enumerate(parts):
        attrs = {"iteration": 1, "rank": rank, "world_size": 2}
        write_rollout(iteration / shard_name(rank), td, attrs, final_obs=finals)
    joined, attrs, finals = read_any_final_obs(iteration)
    assert attrs["world_size"] == 2 and "rank" not in attrs
    assert torch.equal(joined["obs"], read_any(iteration)[0]["obs"])
    assert finals is not None
    # rank 1's env e is row 4 + e of the joined rollout: its final observations point there
    assert torch.equal(finals["index"], joined["done"][:, :-1].nonzero())
    assert torch.equal(finals["obs"], torch.cat([f["obs"] for _, f in parts]))


def test_a_single_store_reads_back_with_its_final_observations(tmp_path):
    td, finals = rollout_with_finals(3, 4, seed=7)
    write_rollout(tmp_path / "iter-000001.zarr", td, {"iteration": 1}, final_obs=finals)
    read, _, got = read_any_final_obs(tmp_path / "iter-000001.zarr")
    assert torch.equal(read["obs"], td["obs"]) and got is not None
    assert torch.equal(got["index"], finals["index"]) and torch.equal(got["obs"], finals["obs"])
