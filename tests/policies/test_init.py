"""``policy.init: orthogonal``: orthogonal weights with the documented gains, zero biases, seeded."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from rlpipe.config import ConfigError, PolicyCfg
from rlpipe.policies import build_policy

OBS = gym.spaces.Box(-1.0, 1.0, (5,), np.float32)
ACT = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)


def linears(net: nn.Module) -> list[nn.Linear]:
    return [m for m in net.modules() if isinstance(m, nn.Linear)]


def gain_of(layer: nn.Linear) -> float:
    """g for weights W with W Wᵀ = g² I (rows ≤ columns) or Wᵀ W = g² I (rows > columns)."""
    w = layer.weight.detach().double()
    gram = w @ w.T if w.shape[0] <= w.shape[1] else w.T @ w
    g2 = gram.diagonal().mean()
    assert torch.allclose(gram, g2 * torch.eye(gram.shape[0], dtype=gram.dtype), atol=1e-5)
    return float(g2.sqrt())


@pytest.mark.parametrize("name", ["actor_critic", "recurrent_actor_critic"])
def test_orthogonal_weights_with_the_documented_gains_and_zero_biases(name: str) -> None:
    torch.manual_seed(0)
    block = {
        "name": name,
        "init": "orthogonal",
        "actor": {"network_cfg": {"hidden_sizes": [16, 8]}},
        "critic": {"network_cfg": {"hidden_sizes": [16, 8]}},
    }
    policy = build_policy(block, OBS, ACT, "cpu")
    for net, output_gain in ((policy.actor, 0.01), (policy.critic, 1.0)):
        layers = linears(net)
        assert [gain_of(m) for m in layers] == pytest.approx([2**0.5] * 2 + [output_gain], rel=1e-5)
        assert all(torch.count_nonzero(m.bias) == 0 for m in layers)


def test_the_small_actor_output_makes_the_first_means_nearly_zero() -> None:
    torch.manual_seed(0)
    obs = torch.randn(256, 5)
    for init, bound in (("orthogonal", 0.05), ("torch", None)):
        policy = build_policy({"name": "actor_critic", "init": init}, OBS, ACT, "cpu")
        mean = policy.actor(obs)
        if bound is None:  # PyTorch's default leaves biases and observation-dependent means
            assert mean.abs().max() > 0.1
        else:
            assert mean.abs().max() < bound


def test_the_same_seed_gives_the_same_weights_and_torch_leaves_the_defaults() -> None:
    def weights(init: str) -> list[torch.Tensor]:
        torch.manual_seed(3)
        return [
            p.detach().clone()
            for p in build_policy({"name": "actor_critic", "init": init}, OBS, ACT, "cpu").parameters()
        ]

    first, again, default = weights("orthogonal"), weights("orthogonal"), weights("torch")
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert not all(torch.equal(a, b) for a, b in zip(first, default))
    assert any(torch.count_nonzero(p) == p.numel() and p.dim() == 1 and p.numel() > 3 for p in default)


def test_an_unknown_init_is_one_error_naming_the_key_and_the_accepted_values() -> None:
    with pytest.raises(ConfigError) as err:
        PolicyCfg.from_dict({"init": "xavier"}, "policy")
    assert "policy.init" in str(err.value) and "orthogonal" in str(err.value)
