import pytest
from _rollouts import ATTRS, assert_same, make_rollout

from rlpipe.artifacts.rejected import REJECTED_ATTR, RejectedRolloutError, refuse_rejected, write_rejected
from rlpipe.artifacts.zarr_read import read_rollout
from rlpipe.refused import RefusedDataError


def test_a_rejected_rollout_is_kept_with_its_reason_and_replaces_an_earlier_one(tmp_path):
    path = tmp_path / "rejected" / "iter-000003.zarr"
    path.parent.mkdir()
    write_rejected(path, make_rollout(seed=1), dict(ATTRS), "first")
    rollout = make_rollout(seed=2)
    assert write_rejected(path, rollout, dict(ATTRS), "obs not finite") == path
    stored, attrs = read_rollout(path)
    assert attrs[REJECTED_ATTR] == "obs not finite"
    assert_same(stored, rollout)


def test_a_rejected_store_is_refused_unless_allowed(tmp_path):
    attrs = {REJECTED_ATTR: "value not finite"}
    with pytest.raises(
        RejectedRolloutError, match=r"rejected by the non-finite guard \(value not finite\)"
    ) as info:
        refuse_rejected(tmp_path, attrs)
    assert isinstance(info.value, RefusedDataError)  # exit code 3
    refuse_rejected(tmp_path, attrs, allow=True)
    refuse_rejected(tmp_path, {})
