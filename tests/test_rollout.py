import torch

from rlpipe.rollout import allocate_rollout, rollout_dims, transition_view
from rlpipe.rollout_checks import validate


def make(n=3, t=4):
    return allocate_rollout(n, t, (2,), (), torch.int64, "cpu")


def test_allocation_shapes_dtypes_names():
    ro = make()
    assert ro.batch_size == (3, 5)
    assert ro.names == ["env", "time"]
    assert ro["obs"].shape == (3, 5, 2)
    assert ro["action"].dtype == torch.int64
    assert ro["done"].dtype == torch.bool
    assert rollout_dims(ro) == (3, 4)
    validate(ro)


def test_transition_view_drops_padding_and_adds_next_value():
    ro = make()
    ro["value"] = torch.arange(15.0).view(3, 5)
    view = transition_view(ro)
    assert view.batch_size == (3, 4)
    torch.testing.assert_close(view["next_value"], ro["value"][:, 1:])
    view["reward"][0, 0] = 7.0  # a view, not a copy
    assert ro["reward"][0, 0] == 7.0
