"""The rollout's one check on its way into a store (rlpipe/artifacts/intake.py), and its array names."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from _rollouts import make_rollout

from rlpipe.artifacts.errors import StoreError
from rlpipe.artifacts.intake import check_rollout, rollout_arrays


def test_a_schema_error_names_the_store_and_the_key(tmp_path: Path) -> None:
    rollout = make_rollout()
    rollout["sample_log_prob"][0, -1] = 0.5
    with pytest.raises(
        StoreError,
        match=r"iter-000001\.zarr: rollout: key 'sample_log_prob' padding slot "
        r"is not zero at \[0, 5\]",
    ):
        check_rollout(rollout, tmp_path / "iter-000001.zarr")


def test_a_non_finite_rollout_enters_the_store(tmp_path: Path) -> None:
    rollout = make_rollout()
    rollout["reward"][1, 2] = float("nan")  # refused by the guard, then kept for post-mortem
    check_rollout(rollout, tmp_path / "iter-000001.zarr")


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("bf", "key 'bf' has dtype torch.bfloat16, which Zarr cannot store"),
        ("a/b", "key 'a/b' is not a valid Zarr node name"),
        ("__x", "key '__x' is not a valid Zarr node name"),
    ],
)
def test_every_leaf_must_be_storable(tmp_path: Path, key: str, message: str) -> None:
    rollout = make_rollout()
    dtype = torch.bfloat16 if key == "bf" else torch.float32
    rollout[key] = torch.zeros(rollout.batch_size, dtype=dtype)
    with pytest.raises(StoreError, match=message):
        check_rollout(rollout, tmp_path / "iter-000001.zarr")


def test_arrays_are_named_by_their_slash_joined_keys() -> None:
    rollout = make_rollout(box=True)
    arrays = rollout_arrays(rollout)
    assert sorted(arrays) == sorted(
        [
            "obs",
            "action",
            "action_mean",
            "sample_log_prob",
            "value",
            "reward",
            "final_value",
            "terminated",
            "truncated",
            "done",
            "recurrent/h",
        ]
    )
    assert arrays["recurrent/h"] is rollout["recurrent", "h"]
