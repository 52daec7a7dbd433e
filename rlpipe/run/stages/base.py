"""The stage contract: built once with its long-lived parts, called per iteration, keys declared."""

from __future__ import annotations

from collections.abc import Sequence

from rlpipe.config import ConfigError

__all__ = ["Stage", "check_key_flow"]


class Stage:
    """A pipeline stage declares every rollout key it ``reads`` and ``writes``; it returns metrics."""

    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()


def check_key_flow(stages: Sequence[Stage]) -> None:
    """Raise ``ConfigError`` if a stage reads a key no earlier stage writes (checked at build time)."""
    available: set[str] = set()
    for stage in stages:
        missing = [k for k in stage.reads if k not in available]
        if missing:
            raise ConfigError(f"pipeline: stage {type(stage).__name__} reads {missing[0]!r}, which no "
                              f"earlier stage writes (available: {', '.join(sorted(available)) or 'none'})")
        available.update(stage.writes)
