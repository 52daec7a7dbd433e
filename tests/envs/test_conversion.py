"""Simulator observations → rlpipe spaces and tensors: flat float32 vectors, uint8 image groups."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from tensordict import TensorDict

from rlpipe.envs.conversion import IMAGE_GROUP, flat_obs_space, is_image_space, obs_to_torch

FRAMES = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
"""Atari's frame stack as envpool gives it: uint8, channels first."""


def test_a_bare_image_space_becomes_the_pixels_group() -> None:
    space = flat_obs_space(FRAMES, "Pong-v5")
    assert isinstance(space, gym.spaces.Dict) and list(space.spaces) == [IMAGE_GROUP]
    image = space[IMAGE_GROUP]
    assert image.shape == (4, 84, 84) and image.dtype == np.uint8
    assert is_image_space(image) and not is_image_space(gym.spaces.Box(0, 255, (84, 84), np.uint8))


def test_images_inside_a_dict_stay_images_and_vectors_are_flattened() -> None:
    space = flat_obs_space(
        gym.spaces.Dict({"camera": FRAMES, "joints": gym.spaces.Box(-1, 1, (2, 3))}), "any"
    )
    assert space["camera"].shape == (4, 84, 84) and space["camera"].dtype == np.uint8
    assert space["joints"].shape == (6,) and space["joints"].dtype == np.float32


def test_image_batches_stay_uint8_and_are_copied() -> None:
    raw = np.random.default_rng(0).integers(0, 256, (3, 4, 84, 84), dtype=np.uint8)
    obs = obs_to_torch(raw, 3, torch.device("cpu"))
    assert isinstance(obs, TensorDict) and obs.batch_size == torch.Size([3])
    pixels = obs[IMAGE_GROUP]
    assert pixels.dtype == torch.uint8 and pixels.shape == (3, 4, 84, 84)
    assert np.array_equal(pixels.numpy(), raw)
    raw[:] = 0  # the simulator reusing its buffer must not change what was collected
    assert int(pixels.sum()) > 0


def test_vector_observations_are_still_flat_float32() -> None:
    raw = np.arange(12, dtype=np.float64).reshape(3, 2, 2)
    obs = obs_to_torch(raw, 3, torch.device("cpu"))
    assert isinstance(obs, torch.Tensor) and obs.dtype == torch.float32 and obs.shape == (3, 4)
    mixed = obs_to_torch({"camera": np.zeros((3, 1, 8, 8), np.uint8), "joints": raw}, 3, torch.device("cpu"))
    assert mixed["camera"].dtype == torch.uint8 and mixed["joints"].shape == (3, 4)
