"""Hooks for rlpipe's own fault tests: kill or poison at named points (inert unless asked)."""

__all__: list[str] = []
