"""A short PixelCartPole run trains from uint8 frames, replays and resumes bit for bit; bad input exits 2."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from _offline_fixtures import ROOT, assert_same_learner, learner
from click.testing import CliRunner

from rlpipe import config
from rlpipe.artifacts.zarr_read import read_rollout
from rlpipe.cli import cli
from rlpipe.envs.tasks.pixel_cartpole import PixelCartPole
from rlpipe.offline.replay import replay
from rlpipe.trainer import Trainer

PIXEL_PARAMS = ROOT / "configs" / "pixel_cartpole.yaml"
SMALL = (
    "trainer.device=cpu",
    "trainer.num_envs=8",
    "trainer.buffer_size=16",
    "trainer.enable_eval=false",
    "trainer.save_freq=256",
    "algorithm.cfg.batch_size=64",
    "algorithm.cfg.n_epochs=2",
    "algorithm.cfg.image_augmentation=shift",
    "env.cfg.size=48",
    "env.cfg.frame_stack=2",
    "policy.actor.encoders.pixels.channels=[8,16,16]",
    "policy.actor.encoders.pixels.features=32",
    "policy.actor.network_cfg.hidden_sizes=[16]",
    "policy.critic.network_cfg.hidden_sizes=[16]",
)
"""8 envs × 16 steps of 48×48 frames, 2 stacked; a small shared CNN; DrQ shifts in the update."""


def pixel_cfg(data_dir: Path, *extra: str) -> config.RunConfig:
    return config.load(PIXEL_PARAMS, [*SMALL, f"trainer.data_dir={data_dir}", *extra])


def test_a_pixel_run_trains_stores_uint8_frames_and_replays_bit_for_bit(tmp_path):
    cfg = pixel_cfg(tmp_path, "trainer.iterations=3", "checkpoint.every_iteration=true")
    Trainer(cfg).train()
    ckpts = cfg.run_dir / "checkpoints"
    first, last = learner(ckpts / "ckpt-000001.pt"), learner(ckpts / "ckpt-000003.pt")
    cnn = "/policy/actor_encoder.cnns.pixels.convs.0.weight"
    assert not torch.equal(first[cnn], last[cnn])  # the CNN learns
    assert "/policy/critic_encoder.cnns.pixels.convs.0.weight" in last  # shared: the same tensor twice
    rollout, attrs = read_rollout(cfg.run_dir / "rollouts" / "iter-000002.zarr")
    pixels = rollout["obs", "pixels"]
    assert pixels.dtype == torch.uint8 and pixels.shape == (8, 17, 2, 48, 48)
    assert attrs["actor_obs_keys"] == ["pixels"]
    replay(cfg, cfg.run_dir / "rollouts", tmp_path / "replayed")
    for k in (2, 3):
        name = f"ckpt-{k:06d}.pt"
        assert_same_learner(ckpts / name, tmp_path / "replayed" / "checkpoints" / name)


def test_a_resumed_pixel_run_equals_the_uninterrupted_one(tmp_path):
    whole = pixel_cfg(tmp_path / "whole", "trainer.iterations=4")
    Trainer(whole).train()
    Trainer(pixel_cfg(tmp_path / "split", "trainer.iterations=2")).train()
    split = pixel_cfg(tmp_path / "split", "trainer.iterations=4")
    Trainer(split, resume=True).train()
    assert_same_learner(
        whole.run_dir / "checkpoints" / "ckpt-000004.pt", split.run_dir / "checkpoints" / "ckpt-000004.pt"
    )
    a, _ = read_rollout(whole.run_dir / "rollouts" / "iter-000004.zarr")
    b, _ = read_rollout(split.run_dir / "rollouts" / "iter-000004.zarr")
    assert torch.equal(a["obs", "pixels"], b["obs", "pixels"])


class FlatFramePixelCartPole(PixelCartPole):
    """A user env whose image group lacks its channel dim (uint8 ``[H, W]``)."""

    def __init__(self, num_envs: int, device: torch.device | str) -> None:
        super().__init__(num_envs, device)
        self.observation_space = gym.spaces.Dict({"pixels": gym.spaces.Box(0, 255, (64, 64), np.uint8)})


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (["policy.actor.encoders.camera={}"], "policy.actor.encoders.camera: names no observation group"),
        (
            ["env.cfg.state_group=true", "policy.actor.encoders.state={}"],
            "policy.actor.encoders.state: is not an image group (uint8 [C, H, W])",
        ),
        (["env.cfg.size=16"], "policy.actor.encoders.pixels: a 16x16 image is reduced to nothing"),
        (
            [f"env.id={__name__}:FlatFramePixelCartPole", "env.cfg={}"],
            "env: observation group 'pixels' is uint8 of shape [64, 64]",
        ),
    ],
)
def test_bad_image_input_is_one_line_exit_2_and_nothing_written(tmp_path, sets, message):
    data = tmp_path / "data"
    args = ["run", str(PIXEL_PARAMS), "--set", f"trainer.data_dir={data}", "--set", "trainer.device=cpu"]
    result = CliRunner().invoke(cli, [*args, *(a for s in sets for a in ("--set", s))])
    assert result.exit_code == 2, result.output
    assert message in result.output and len(result.output.strip().splitlines()) == 1
    assert not data.exists()
