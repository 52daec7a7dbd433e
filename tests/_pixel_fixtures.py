"""A tiny PixelCartPole run for the offline tests of image observations (export, eval, inspect --frames)."""

from __future__ import annotations

from pathlib import Path

from rlpipe import config
from rlpipe.config import RunConfig

ROOT = Path(__file__).resolve().parents[1]
PIXEL_PARAMS = ROOT / "configs" / "pixel_cartpole.yaml"
TINY_PIXELS = (
    "trainer.device=cpu",
    "trainer.num_envs=8",
    "trainer.buffer_size=16",
    "trainer.iterations=2",
    "trainer.enable_eval=false",
    "trainer.save_freq=100000",
    "tracking.backend=none",
    "algorithm.cfg.batch_size=64",
    "algorithm.cfg.n_epochs=1",
    "env.cfg.size=32",
    "env.cfg.frame_stack=2",
    "env.cfg.state_group=true",
    "env.cfg.max_episode_steps=20",
    "policy.obs_normalization=true",
    "policy.actor.obs_keys=[pixels,state]",
    "policy.critic.obs_keys=[pixels,state]",
    "policy.actor.encoders.pixels.channels=[4,8]",
    "policy.actor.encoders.pixels.kernel_sizes=[8,4]",
    "policy.actor.encoders.pixels.strides=[4,2]",
    "policy.actor.encoders.pixels.features=16",
    "policy.actor.network_cfg.hidden_sizes=[16]",
    "policy.critic.network_cfg.hidden_sizes=[16]",
    "eval.num_envs=2",
    "eval.num_episodes=1",
)
"""2 iterations of 8 envs × 16 steps: 32×32 frames (2 stacked) beside the normalized vector group
``state``, read by a small shared CNN; episodes of at most 20 steps."""


def tiny_pixel_cfg(data_dir: Path, *extra: str) -> RunConfig:
    """The tiny pixel run's config under ``data_dir``."""
    return config.load(PIXEL_PARAMS, [*TINY_PIXELS, f"trainer.data_dir={data_dir}", *extra])
