"""The stage contract: built once with its long-lived parts, called per iteration, keys declared."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["Stage", "check_key_flow"]


class Stage:
    """A pipeline stage declares the rollout keys it ``reads`` and ``writes``; it returns metrics."""

    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()


def check_key_flow(stages: Sequence[Stage]) -> None:
    """Raise ``ValueError`` if a stage reads a key no earlier stage writes (checked at build time)."""
    available: set[str] = set()
    for stage in stages:
        missing = [k for k in stage.reads if k not in available]
        if missing:
            raise ValueError(
                f"{type(stage).__name__} reads {missing} but no earlier stage writes them"
            )
        available.update(stage.writes)
