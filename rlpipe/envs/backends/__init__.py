"""Env backends: torch-native, gymnasium (single and vectorized), envpool, rsl_rl VecEnv, and plugins."""

__all__: list[str] = []
