"""Observation and action spaces as plain JSON, so a stored run can rebuild its policy without its env."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

__all__ = ["space_from_dict", "space_to_dict"]


def space_to_dict(space: gym.Space) -> dict[str, Any]:
    """``{"type": "box", "shape", "low", "high", "dtype"}``, ``{"type": "discrete", "n"}`` or a dict."""
    if isinstance(space, gym.spaces.Box):
        low, high = space.low, space.high
        uniform = (low == low.flat[0]).all() and (high == high.flat[0]).all()
        if space.dtype == np.uint8 and low.ndim == 3 and uniform:
            low, high = low.flat[0], high.flat[0]  # an image group: one bound for every pixel, not C·H·W
        return {
            "type": "box",
            "shape": list(space.shape),
            "dtype": str(space.dtype),
            "low": low.tolist(),
            "high": high.tolist(),
        }
    if isinstance(space, gym.spaces.Discrete):
        return {"type": "discrete", "n": int(space.n)}
    if isinstance(space, gym.spaces.Dict):
        return {"type": "dict", "spaces": {k: space_to_dict(v) for k, v in space.spaces.items()}}
    raise ValueError(f"cannot describe a {type(space).__name__} space; accepted: Box, Discrete, Dict")


def space_from_dict(data: dict[str, Any]) -> gym.Space:
    """The inverse of :func:`space_to_dict`."""
    kind = data.get("type")
    if kind == "box":
        dtype = np.dtype(data["dtype"])
        shape = tuple(data["shape"])  # a scalar bound (image groups) holds for every element
        return gym.spaces.Box(
            np.broadcast_to(np.asarray(data["low"], dtype), shape),
            np.broadcast_to(np.asarray(data["high"], dtype), shape),
            shape,
            dtype,
        )
    if kind == "discrete":
        return gym.spaces.Discrete(int(data["n"]))
    if kind == "dict":
        return gym.spaces.Dict({k: space_from_dict(v) for k, v in data["spaces"].items()})
    raise ValueError(f"unknown space type {kind!r}; accepted: box, discrete, dict")
