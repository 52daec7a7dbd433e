"""Rollouts for the store tests: a schema-valid random rollout, equality, attributes."""

from __future__ import annotations

import torch
from tensordict import TensorDict

from rlpipe.rollout import allocate_rollout
from rlpipe.rollout_checks import validate

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


ATTRS = {
    "iteration": 3,
    "env_steps": 90,
    "env_id": "CartPole",
    "seed": 42,
    "params_hash": "abc123",
    "checkpoint": "ckpt-000002.pt",
}
