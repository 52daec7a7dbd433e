"""The user-input error every floor may raise (exit code 2), importable without torch or pydantic."""

from __future__ import annotations

__all__ = ["ConfigError"]


class ConfigError(ValueError):
    """A user-facing config problem; its message is one line naming the key path."""
