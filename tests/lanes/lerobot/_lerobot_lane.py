"""What the LeRobot lane's tests share: the exports' rate and how LeRobot's tensors map to the stores'."""

from __future__ import annotations

from typing import Any

import numpy as np

FPS = 50
"""CartPole's control rate (the exports' ``fps``)."""


def rgb(gray: np.ndarray) -> np.ndarray:
    """``[..., H, W]`` gray frames as LeRobot returns images: ``[..., 3, H, W]``, R = G = B."""
    return np.repeat(gray[..., None, :, :], 3, axis=-3)


def as_uint8(images: Any) -> np.ndarray:
    """LeRobot's float images in ``[0, 1]`` back to the uint8 values they were decoded from."""
    return np.round(np.asarray(images, dtype=np.float64) * 255).astype(np.uint8)


def episode_bounds(lengths: np.ndarray) -> list[tuple[int, int]]:
    """``[(from, to)]`` of each episode in the concatenated frames."""
    ends = np.cumsum(lengths)
    return [(int(end - n), int(end)) for n, end in zip(lengths, ends, strict=True)]
