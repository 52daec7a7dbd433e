"""Image frames on disk: one PNG per time step in a folder, or one MP4 (``rlpipe inspect --frames``).

Both take ``frames`` ``[T, H, W, 3]`` uint8 and appear whole or not at all: the PNGs are written in a
hidden folder and renamed into place together (:func:`~rlpipe.artifacts.atomic.staged_files`), the
MP4 through :class:`~rlpipe.artifacts.video.Mp4Writer`. PNGs are lossless (matplotlib's ``imsave``,
a core dependency: RGBA with the frame's values and alpha 255); the MP4 is H.264 and needs the
video extra.
"""

from __future__ import annotations

import numpy as np

from rlpipe.artifacts.atomic import naming_the_file, staged_files
from rlpipe.artifacts.fs import AnyPath, as_path
from rlpipe.artifacts.layout import RunLayout
from rlpipe.artifacts.video import Mp4Writer
from rlpipe.extras import VIDEO, require_all

__all__ = ["write_mp4", "write_pngs"]


def _check(frames: np.ndarray) -> None:
    if frames.dtype != np.uint8 or frames.ndim != 4 or frames.shape[3] != 3 or frames.shape[0] == 0:
        raise ValueError(f"frames of {frames.dtype} {frames.shape}; expected uint8 [T >= 1, H, W, 3]")


def write_pngs(frames: np.ndarray, folder: AnyPath) -> list[AnyPath]:
    """``folder/t-NNNNNN.png`` for each of ``frames`` ``[T, H, W, 3]`` uint8; the paths, in time order."""
    from matplotlib.image import imsave  # matplotlib on first use (import cost)

    _check(frames)
    folder = as_path(folder)
    with staged_files(folder, "frames") as tmp:
        for step, frame in enumerate(frames):
            with naming_the_file(RunLayout.frame_file(folder, step)):
                imsave(str(RunLayout.frame_file(tmp, step)), frame, format="png")  # tmp: a local folder
    return [RunLayout.frame_file(folder, step) for step in range(frames.shape[0])]


def write_mp4(frames: np.ndarray, path: AnyPath, fps: int, feature: str) -> AnyPath:
    """``path``: ``frames`` ``[T, H, W, 3]`` uint8 as an H.264 MP4; ``feature`` names the option in errors."""
    _check(frames)
    require_all(VIDEO, feature)
    writer = Mp4Writer(path, fps)
    try:
        with naming_the_file(path):
            for frame in frames:
                writer.append(frame)
    except BaseException:
        writer.abort()
        raise
    with naming_the_file(path):
        return writer.close()
