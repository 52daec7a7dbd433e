"""The env ids rlpipe ships, by the module that registers each (importing it registers the id).

Kept free of torch so that ``rlpipe envs`` can list them without importing any simulator.
"""

from __future__ import annotations

from importlib.metadata import entry_points

__all__ = ["BUILTIN_ENVS", "ENTRY_POINT_GROUP", "entry_point_ids"]

BUILTIN_ENVS = {
    "CartPole": "rlpipe.envs.tasks.cartpole",
    "Pendulum": "rlpipe.envs.tasks.pendulum",
    "PushCube": "rlpipe.envs.tasks.push_cube.env",
    "RepeatFirst": "rlpipe.envs.tasks.memory",
}
"""``{env id: module}`` of the torch-native envs rlpipe registers."""

ENTRY_POINT_GROUP = "rlpipe.envs"
"""Installed packages add env ids through this entry-point group (``id = module:attr``)."""


def entry_point_ids() -> dict[str, str]:
    """``{id: "module:attr"}`` of every installed ``rlpipe.envs`` entry point (one place reads them)."""
    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}
