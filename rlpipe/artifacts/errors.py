"""The one error type of the artifacts layer."""

from __future__ import annotations

from rlpipe.refused import RefusedDataError  # not rlpipe.rollout: the writer process imports no torch

__all__ = ["RefusedStoreError", "StoreError"]


class StoreError(ValueError):
    """A rollout store, checkpoint or run-directory problem; the one-line message names the path."""


class RefusedStoreError(StoreError, RefusedDataError):
    """Stored data refused (damaged, non-finite, rejected): exit code 3; the message names the path."""
