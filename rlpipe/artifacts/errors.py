"""The one error type of the artifacts layer."""

from __future__ import annotations

__all__ = ["StoreError"]


class StoreError(ValueError):
    """A rollout store, checkpoint or run-directory problem; the one-line message names the path."""
