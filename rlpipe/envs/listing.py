"""Every ``env.id`` rlpipe can build, grouped by backend (``rlpipe envs``)."""

from __future__ import annotations

import gymnasium

from rlpipe.envs.plugins import entry_point_ids
from rlpipe.envs.registry import registered_env_ids

__all__ = ["GROUPS", "env_ids_by_backend"]

GROUPS = ("torch", "plugins", "envpool", "gymnasium")
"""In the order ``backend: auto`` resolves an id (plugins: the ``rlpipe.envs`` entry points)."""


def env_ids_by_backend(groups: tuple[str, ...] = GROUPS) -> dict[str, list[str]]:
    """``{group: sorted ids}``; plugins read ``id = module:attr``; envpool is empty when not installed."""
    listing: dict[str, list[str]] = {}
    for group in groups:
        if group == "torch":
            listing[group] = registered_env_ids()
        elif group == "plugins":
            listing[group] = [f"{name} = {target}" for name, target in sorted(entry_point_ids().items())]
        elif group == "envpool":
            listing[group] = _envpool_ids()
        elif group == "gymnasium":
            listing[group] = sorted(gymnasium.envs.registry)
        else:
            raise ValueError(f"--backend: got {group!r}; accepted: {', '.join(GROUPS)}")
    return listing


def _envpool_ids() -> list[str]:
    try:
        from rlpipe.envs.envpool_env import envpool_ids
    except ImportError:
        return []
    try:
        return envpool_ids()
    except ImportError:
        return []
