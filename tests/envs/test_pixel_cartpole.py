"""PixelCartPole: uint8 frames drawn in batch, a frame stack that carries velocity, exact round trips."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlpipe.envs import build_env
from rlpipe.envs.tasks.cartpole import CartPole


def test_observations_are_uint8_frame_stacks_beside_an_optional_state_group():
    env = build_env("PixelCartPole", 4, "cpu", {"size": 32, "frame_stack": 2, "state_group": True}, "auto")
    obs = env.reset(seed=0)
    assert env.obs_dtypes == {"pixels": torch.uint8}
    assert obs["pixels"].shape == (4, 2, 32, 32) and obs["pixels"].dtype == torch.uint8
    assert obs["state"].dtype == torch.float32 and obs["state"].shape == (4, 4)
    assert int(obs["pixels"].max()) == 255 and int(obs["pixels"].min()) == 0  # a cart on black
    assert torch.equal(obs["pixels"][:, 0], obs["pixels"][:, 1])  # at reset every frame is the start


def test_the_physics_is_cartpoles_and_the_stack_holds_the_previous_frames():
    pixel = build_env("PixelCartPole", 8, "cpu", {"frame_stack": 3}, "auto")
    plain = CartPole(8, "cpu")
    pixel.reset(seed=3), plain.reset(seed=3)
    frames = []
    for _ in range(5):
        action = torch.ones(8, dtype=torch.int64)
        a, b = pixel.step(action), plain.step(action)
        assert torch.equal(pixel.state[:, :4], plain.state) and torch.equal(a.reward, b.reward)
        frames.append(a.obs["pixels"][:, -1])
    latest = a.obs["pixels"]
    assert torch.equal(latest[:, 1], frames[-2]) and torch.equal(latest[:, 0], frames[-3])  # oldest first
    assert not torch.equal(latest[:, 0], latest[:, 2])  # pushing right moves the picture: velocity is visible


def test_state_dict_round_trip_reproduces_the_frames():
    env = build_env("PixelCartPole", 6, "cpu", {}, "auto")
    env.reset(seed=1)
    for _ in range(3):
        env.step(torch.randint(0, 2, (6,)))
    saved = env.state_dict()
    first = [env.step(torch.tensor([0, 1, 0, 1, 1, 0])).obs["pixels"] for _ in range(4)]
    env.load_state_dict(saved)
    again = [env.step(torch.tensor([0, 1, 0, 1, 1, 0])).obs["pixels"] for _ in range(4)]
    assert all(torch.equal(x, y) for x, y in zip(first, again))


def test_render_shows_the_policys_own_camera_upscaled():
    env = build_env("PixelCartPole", 3, "cpu", {"size": 32}, "auto")
    env.reset(seed=0)
    frames = env.render([0, 2])
    assert frames.shape == (2, 128, 128, 3) and frames.dtype == np.uint8
    assert np.array_equal(frames[0, ::4, ::4, 0], env._observe(env.state)["pixels"][0, -1].numpy())


@pytest.mark.parametrize("bad", [{"size": 8}, {"frame_stack": 0}, {"state_group": "yes"}])
def test_bad_options_name_the_argument(bad):
    with pytest.raises(Exception, match=next(iter(bad))):
        build_env("PixelCartPole", 2, "cpu", bad, "auto")
