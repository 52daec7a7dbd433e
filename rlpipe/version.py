"""The version of rlpipe (one place; the package root re-exports it)."""

__version__ = "0.1.0"
