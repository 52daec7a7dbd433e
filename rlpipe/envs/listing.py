"""Every ``env.id`` rlpipe can build, grouped by backend (``rlpipe envs``).

Torch-free: the built-in torch envs are named here (``BUILTIN_TORCH_ENVS``, checked against the
registry by the tests) and envs registered in this process are added when the registry is loaded;
envpool and gymnasium are imported only for their own groups.
"""

from __future__ import annotations

import sys

from rlpipe.envs.plugins import entry_point_ids

__all__ = ["BUILTIN_TORCH_ENVS", "GROUPS", "env_ids_by_backend"]

BUILTIN_TORCH_ENVS = ("CartPole", "Pendulum", "RepeatFirst")
"""The torch envs ``rlpipe.envs.registry.BUILTIN_MODULES`` register."""

GROUPS = ("torch", "plugins", "envpool", "gymnasium")
"""In the order ``backend: auto`` resolves an id (plugins: the ``rlpipe.envs`` entry points)."""


def env_ids_by_backend(groups: tuple[str, ...] = GROUPS) -> dict[str, list[str]]:
    """``{group: sorted ids}``; plugins read ``id = module:attr``; envpool is empty when not installed."""
    listing: dict[str, list[str]] = {}
    for group in groups:
        if group == "torch":
            listing[group] = _torch_ids()
        elif group == "plugins":
            listing[group] = [f"{name} = {target}" for name, target in sorted(entry_point_ids().items())]
        elif group == "envpool":
            listing[group] = _envpool_ids()
        elif group == "gymnasium":
            import gymnasium

            listing[group] = sorted(gymnasium.envs.registry)
        else:
            raise ValueError(f"--backend: got {group!r}; accepted: {', '.join(GROUPS)}")
    return listing


def _torch_ids() -> list[str]:
    """The built-ins, plus any env registered in this process (only when the registry is loaded)."""
    registry = sys.modules.get("rlpipe.envs.registry")
    extra = registry.registered_env_ids() if registry is not None else []
    return sorted({*BUILTIN_TORCH_ENVS, *extra})


def _envpool_ids() -> list[str]:
    try:
        import envpool  # imports no torch
    except ImportError:
        return []
    return sorted(envpool.list_all_envs())
