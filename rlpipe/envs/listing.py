"""Every ``env.id`` rlpipe can build, grouped by backend (``rlpipe envs``)."""

from __future__ import annotations

from rlpipe.envs.ids import BUILTIN_ENVS, entry_point_ids

__all__ = ["GROUPS", "env_ids_by_backend"]

GROUPS = ("torch", "plugins", "envpool", "gymnasium")
"""In the order ``backend: auto`` resolves an id (plugins: the ``rlpipe.envs`` entry points), except
that gymnasium's own vectorized classes (CartPole-v0/v1) come before envpool."""


def env_ids_by_backend(groups: tuple[str, ...] = GROUPS) -> dict[str, list[str]]:
    """``{group: sorted ids}``; plugins read ``id = module:attr``; envpool is empty when not installed.

    Imports no torch: the built-in ids are known by name, plugins by their entry points.
    """
    listing: dict[str, list[str]] = {}
    for group in groups:
        if group == "torch":
            listing[group] = sorted(BUILTIN_ENVS)
        elif group == "plugins":
            found = entry_point_ids()
            listing[group] = [f"{name} = {target}" for name, target in sorted(found.items())]
        elif group == "envpool":
            listing[group] = _envpool_ids()
        elif group == "gymnasium":
            import gymnasium

            listing[group] = sorted(gymnasium.envs.registry)
        else:
            raise ValueError(f"--backend: got {group!r}; accepted: {', '.join(GROUPS)}")
    return listing


def _envpool_ids() -> list[str]:
    try:
        import envpool
    except ImportError:
        return []
    return sorted(envpool.list_all_envs())
