"""CNN encoders of image groups: shapes at 64 and 84 pixels, sharing, recurrent policies, bad resolutions."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from tensordict import TensorDict

from rlpipe.config import CNNCfg, ConfigError, PolicyCfg
from rlpipe.policies import build_policy
from rlpipe.policies.encoders import CNNEncoder


def _space(size: int = 64, state: bool = True) -> gym.spaces.Dict:
    spaces = {"pixels": gym.spaces.Box(0, 255, (3, size, size), np.uint8)}
    if state:
        spaces["state"] = gym.spaces.Box(-1, 1, (4,), np.float32)
    return gym.spaces.Dict(spaces)


def _obs(space: gym.spaces.Dict, batch: int, seed: int = 0) -> TensorDict:
    g = torch.Generator().manual_seed(seed)
    fields = {
        k: torch.randint(0, 256, (batch, *s.shape), generator=g, dtype=torch.uint8)
        if s.dtype == np.uint8
        else torch.randn(batch, *s.shape, generator=g)
        for k, s in space.spaces.items()
    }
    return TensorDict(fields, batch_size=[batch])


@pytest.mark.parametrize(("size", "cells"), [(64, 4 * 4), (84, 7 * 7)])
def test_the_default_cnn_reduces_64_and_84_pixels(size, cells):
    cnn = CNNEncoder((3, size, size), CNNCfg(), "x")
    assert cnn.out[0].in_features == 32 * cells
    out = cnn(torch.zeros(5, 2, 3, size, size, dtype=torch.uint8))  # leading dims are kept
    assert out.shape == (5, 2, 128) and out.dtype == torch.float32


def test_the_cnn_scales_pixels_by_255():
    cnn = CNNEncoder((1, 16, 16), CNNCfg(channels=[4], kernel_sizes=[4], strides=[4], features=8), "x")
    images = torch.randint(0, 256, (3, 1, 16, 16), dtype=torch.uint8)
    direct = cnn.out(cnn.convs(images.float() / 255).flatten(1))
    assert torch.allclose(cnn(images), direct, atol=1e-6)


def test_images_and_vectors_are_concatenated_before_the_mlp():
    space = _space()
    cfg = PolicyCfg.model_validate(
        {
            "actor": {
                "obs_keys": ["pixels", "state"],
                "encoders": {"pixels": {"features": 32}},
                "network_cfg": {"hidden_sizes": [16]},
            },
            "critic": {"obs_keys": ["state"], "network_cfg": {"hidden_sizes": [16]}},
        }
    )
    policy = build_policy(cfg, space, gym.spaces.Discrete(2), "cpu")
    assert policy.actor[0].in_features == 32 + 4 and policy.critic[0].in_features == 4
    assert policy.critic_encoder is None  # the critic reads no image
    action, log_prob = policy.sample(_obs(space, 6))
    assert action.shape == (6,) and log_prob.shape == (6,)


def test_share_encoder_gives_the_critic_the_actors_cnn():
    space = _space(state=False)
    shared_cfg = PolicyCfg.model_validate({"share_encoder": True})
    shared = build_policy(shared_cfg, space, gym.spaces.Discrete(2), "cpu")
    apart = build_policy(PolicyCfg(), space, gym.spaces.Discrete(2), "cpu")
    assert shared.critic_encoder.cnns["pixels"] is shared.actor_encoder.cnns["pixels"]
    assert apart.critic_encoder.cnns["pixels"] is not apart.actor_encoder.cnns["pixels"]
    count = sum(p.numel() for p in shared.parameters())
    assert count < sum(p.numel() for p in apart.parameters())  # parameters() holds the CNN once
    obs = _obs(space, 4)
    shared.value(obs).sum().backward()
    assert shared.actor_encoder.cnns["pixels"].convs[0].weight.grad is not None


def test_a_recurrent_policy_reads_cnn_features():
    space = _space()
    cfg = PolicyCfg.model_validate(
        {
            "name": "recurrent_actor_critic",
            "recurrent": {"hidden_size": 8},
            "actor": {"encoders": {"pixels": {"features": 16}}},
        }
    )
    policy = build_policy(cfg, space, gym.spaces.Discrete(2), "cpu")
    assert policy.core.rnn.input_size == 16 + 4
    obs = _obs(space, 3)
    action, log_prob, value, state = policy.sample_step(obs, policy.initial_state(3))
    seq = TensorDict(
        {k: v.unsqueeze(1).expand(-1, 2, *v.shape[1:]) for k, v in obs.items()}, batch_size=[3, 2]
    )
    lp, _, values = policy.evaluate_sequence(
        seq, action.unsqueeze(1).expand(-1, 2), policy.initial_state(3), torch.zeros(3, 2, dtype=torch.bool)
    )
    assert torch.allclose(lp[:, 0], log_prob, atol=1e-6) and torch.allclose(values[:, 0], value, atol=1e-6)


def test_obs_normalization_leaves_images_to_the_encoder():
    space = _space()
    policy = build_policy(
        PolicyCfg.model_validate({"obs_normalization": True}), space, gym.spaces.Discrete(2), "cpu"
    )
    obs = _obs(space, 5)
    policy.update_normalization(obs)
    normalized = policy.normalize_obs(obs)
    assert torch.equal(normalized["pixels"], obs["pixels"])
    assert not torch.equal(normalized["state"], obs["state"])


@pytest.mark.parametrize(
    ("block", "match"),
    [
        ({"encoders": {"camera": {}}}, r"policy.actor.encoders.camera: names no observation group"),
        ({"encoders": {"state": {}}}, r"policy.actor.encoders.state: is not an image group"),
        ({"obs_keys": ["state"], "encoders": {"pixels": {}}}, r"does not read 'pixels'"),
    ],
)
def test_encoders_naming_the_wrong_group_are_config_errors(block, match):
    with pytest.raises(ConfigError, match=match):
        build_policy(PolicyCfg.model_validate({"actor": block}), _space(), gym.spaces.Discrete(2), "cpu")


def test_a_resolution_the_cnn_cannot_reduce_is_a_config_error():
    with pytest.raises(ConfigError, match=r"encoders.pixels: a 16x16 image is reduced to nothing"):
        build_policy(PolicyCfg(), _space(16), gym.spaces.Discrete(2), "cpu")


def test_a_uint8_group_that_is_not_an_image_is_a_config_error():
    space = gym.spaces.Dict({"pixels": gym.spaces.Box(0, 255, (64, 64), np.uint8)})
    with pytest.raises(ConfigError, match=r"env: observation group 'pixels' is uint8 of shape \[64, 64\]"):
        build_policy(PolicyCfg(), space, gym.spaces.Discrete(2), "cpu")
