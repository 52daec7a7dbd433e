"""The frames of a stored rollout's image group as pictures (``rlpipe inspect --frames``).

An image group is stored as ``obs/<group>`` uint8 ``[N, T+1, C, H, W]``. One env's ``T+1``
observations become ``T+1`` pictures (slot T, the bootstrap observation, included), each laid out
from the frame's ``C`` channels (:data:`CHANNELS`), written as PNGs or one MP4
(:mod:`rlpipe.artifacts.frames`). A group that does not exist or is not an image, or an env out of
range, is refused before anything is written.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from tensordict import TensorDict

from rlpipe.artifacts.frames import write_mp4, write_pngs
from rlpipe.artifacts.fs import AnyPath
from rlpipe.artifacts.layout import RunLayout, iteration_from_name
from rlpipe.artifacts.shards import read_any
from rlpipe.config import ConfigError
from rlpipe.extras import VIDEO, require_all

__all__ = ["CHANNELS", "FORMATS", "FPS", "FramesResult", "frame_pictures", "stored_frames", "write_frames"]

CHANNELS = ("all", "first", "rgb")
"""How a ``[C, H, W]`` frame is drawn: every channel side by side in gray (a frame stack, oldest
first), the first channel only, or each 3 channels as one colour picture, side by side."""
FORMATS = ("png", "mp4")
FPS = 30
"""Frame rate of the MP4."""
MP4_FEATURE = "rlpipe inspect --format mp4"


@dataclass(frozen=True)
class FramesResult:
    """What :func:`write_frames` wrote: ``paths`` (PNGs in time order, or the one MP4)."""

    rollout: AnyPath
    group: str
    env: int
    frames: int
    paths: list[AnyPath]


def stored_frames(obs: TensorDict | torch.Tensor, group: str, env: int, where: str) -> np.ndarray:
    """``[T+1, C, H, W]`` uint8: env ``env``'s frames of image group ``group`` of a rollout's ``obs``.

    ``where`` names the rollout in errors; a missing or non-image group, or an env out of range, is
    a :class:`~rlpipe.config.ConfigError` naming it and the image groups there are.
    """
    groups = dict(obs.items()) if isinstance(obs, TensorDict) else {"obs": obs}
    images = [k for k, v in groups.items() if _is_image(v)]
    accepted = ", ".join(images) or "none"
    if group not in groups:
        raise ConfigError(
            f"--frames {group}: no observation group {group!r} in {where}; image groups: {accepted}"
        )
    if group not in images:
        value = groups[group]
        raise ConfigError(
            f"--frames {group}: not an image group (uint8 [N, T+1, C, H, W]): it is "
            f"{str(value.dtype).removeprefix('torch.')} {list(value.shape)}; image groups: "
            f"{accepted}"
        )
    data = groups[group]
    assert isinstance(data, torch.Tensor)  # an image group is one tensor
    if not 0 <= env < data.shape[0]:
        raise ConfigError(
            f"--env: got {env}; accepted: 0 to {data.shape[0] - 1} ({where} has {data.shape[0]} envs)"
        )
    return data[env].numpy()


def _is_image(value: object) -> bool:
    """A stored image group: uint8 ``[N, T+1, C, H, W]``."""
    return isinstance(value, torch.Tensor) and value.dtype == torch.uint8 and value.ndim == 5


def frame_pictures(frames: np.ndarray, channels: str = "all") -> np.ndarray:
    """``[T, C, H, W]`` uint8 → ``[T, H, W', 3]`` uint8 pictures laid out as ``channels`` says.

    ``all``: ``W' = C·W``, gray; ``first``: ``W' = W``, gray; ``rgb``: ``W' = (C/3)·W`` (C a multiple
    of 3).
    """
    steps, c, h, w = frames.shape
    if channels == "first":
        return np.repeat(frames[:, 0, :, :, None], 3, axis=-1)
    if channels == "all":
        gray = frames.transpose(0, 2, 1, 3).reshape(steps, h, c * w)
        return np.repeat(gray[..., None], 3, axis=-1)
    if channels == "rgb":
        if c % 3:
            raise ConfigError(
                f"--channels rgb: the frames have {c} channels, not a multiple of 3; "
                "accepted here: all, first"
            )
        colour = frames.reshape(steps, c // 3, 3, h, w).transpose(0, 3, 1, 4, 2)  # [T, H, k, W, 3]
        return np.ascontiguousarray(colour.reshape(steps, h, (c // 3) * w, 3))
    raise ConfigError(f"--channels: got {channels!r}; accepted: {', '.join(CHANNELS)}")


def write_frames(
    rollout: AnyPath,
    group: str,
    env: int = 0,
    fmt: str = "png",
    channels: str = "all",
    out: AnyPath | None = None,
) -> FramesResult:
    """Write env ``env``'s frames of ``group`` from the stored ``rollout`` (a store or sharded iteration).

    PNGs go to ``<out>/iter-NNNNNN-<group>-env-E/t-TTTTTT.png``, an MP4 to
    ``<out>/iter-NNNNNN-<group>-env-E.mp4``; ``out`` defaults to the run's ``frames/``.
    """
    if fmt not in FORMATS:
        raise ConfigError(f"--format: got {fmt!r}; accepted: {', '.join(FORMATS)}")
    if fmt == "mp4":
        require_all(VIDEO, MP4_FEATURE)  # before reading the rollout
    data, attrs = read_any(rollout)
    pictures = frame_pictures(stored_frames(data.get("obs"), group, env, rollout.name), channels)
    iteration = iteration_from_name(rollout)
    iteration = int(attrs.get("iteration", 0)) if iteration is None else iteration
    layout = RunLayout.of_rollouts(rollout.parent)
    if fmt == "mp4":
        path = layout.frames(iteration, group, env, ".mp4", out)
        paths = [write_mp4(pictures, path, FPS, MP4_FEATURE)]
    else:
        paths = write_pngs(pictures, layout.frames(iteration, group, env, directory=out))
    return FramesResult(rollout, group, env, int(pictures.shape[0]), paths)
