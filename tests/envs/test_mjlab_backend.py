"""``env.backend: mjlab`` without mjlab: its env-config overrides and device names (the lane runs mjlab)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
import torch

from rlpipe.config import ConfigError
from rlpipe.envs.backends.mjlab_env import apply_overrides, mjlab_device


@dataclass
class Scene:
    num_envs: int = 1
    env_spacing: float = 2.0


@dataclass
class EnvCfg:  # the shape of mjlab's ManagerBasedRlEnvCfg, the fields the tests touch
    scene: Scene = field(default_factory=Scene)
    episode_length_s: float = 20.0
    seed: int | None = None


def test_overrides_set_top_level_and_nested_fields():
    cfg = EnvCfg()
    apply_overrides(cfg, {"episode_length_s": 10.0, "scene": {"env_spacing": 3.5}}, "env.cfg")
    assert (cfg.episode_length_s, cfg.scene.env_spacing, cfg.scene.num_envs) == (10.0, 3.5, 1)


@pytest.mark.parametrize(
    ("overrides", "line"),
    [
        (
            {"episode_length": 10},
            "env.cfg.episode_length: not a field of mjlab's EnvCfg (did you mean 'episode_length_s'?); "
            "accepted: clip_actions, play, episode_length_s, scene, seed",
        ),
        (
            {"scene": {"spacing": 1.0}},
            "env.cfg.scene.spacing: not a field of mjlab's Scene (did you mean 'env_spacing'?); "
            "accepted: env_spacing, num_envs",
        ),
        ({"scene": {"num_envs": 8}}, "env.cfg.scene.num_envs: set by trainer.num_envs, not env.cfg"),
        ({"seed": 3}, "env.cfg.seed: set by trainer.seed, not env.cfg"),
    ],
)
def test_a_field_mjlab_lacks_or_rlpipe_sets_is_one_line(overrides, line):
    cfg = EnvCfg()
    with pytest.raises(ConfigError) as info:
        apply_overrides(cfg, overrides, "env.cfg")
    assert str(info.value) == line
    assert cfg == EnvCfg()  # nothing set before the refusal


def test_devices_are_named_as_warp_names_them():
    assert mjlab_device("cpu") == "cpu"
    assert mjlab_device(torch.device("cuda", 1)) == "cuda:1"


def test_building_the_env_leaves_the_global_generators_as_they_were():
    import random

    import numpy as np

    from rlpipe.envs.backends.mjlab_env import global_rngs_kept

    torch.manual_seed(5), np.random.seed(5), random.seed(5)
    expected = (torch.rand(3), np.random.rand(3), random.random())
    torch.manual_seed(5), np.random.seed(5), random.seed(5)
    with global_rngs_kept(torch.device("cpu")):  # what mjlab does while it builds an env
        torch.manual_seed(0), np.random.seed(0), random.seed(0)
        torch.rand(10), np.random.rand(10), random.random()
    after = (torch.rand(3), np.random.rand(3), random.random())
    assert torch.equal(after[0], expected[0]) and (after[1] == expected[1]).all() and after[2] == expected[2]
