"""The error of refused data (exit code 3), importable without torch (the store's writer process needs it)."""

from __future__ import annotations

__all__ = ["RefusedDataError"]


class RefusedDataError(ValueError):
    """Data refused before it reaches the weights or a file (non-finite, rejected, bad checksum); exit 3."""
