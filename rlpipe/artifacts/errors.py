"""The errors of the artifacts layer: store problems and a run directory locked by another process."""

from __future__ import annotations

from rlpipe.refused import RefusedDataError  # not rlpipe.rollout: the writer process imports no torch

__all__ = ["LockedError", "RefusedStoreError", "StoreError", "WriterTimeoutError"]


class StoreError(ValueError):
    """A rollout store, checkpoint or run-directory problem; the one-line message names the path."""


class RefusedStoreError(StoreError, RefusedDataError):
    """Stored data refused (damaged, non-finite, rejected): exit code 3; the message names the path."""


class LockedError(RuntimeError):
    """Another live process holds the lock; the one-line message names its pid and host."""


class WriterTimeoutError(RuntimeError):
    """The writer thread did not finish a store within ``store.writer_timeout_s`` (exit 1, resumable)."""
