"""MP4 files from RGB frames: H.264 (yuv420p) through imageio-ffmpeg's bundled ffmpeg, written atomically.

Frames stream into the ffmpeg process as they come (memory stays flat however long the video);
the file is encoded under a hidden temporary name beside its target and renamed into place on
:meth:`Mp4Writer.close`, so a reader (MLflow, a browser) never sees half a video.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Generator
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["BLOCK", "Mp4Writer", "pad_to_block"]

BLOCK = 16
"""Frame sides are padded (black) to multiples of this: H.264 and most players want them."""


def pad_to_block(frame: np.ndarray, block: int = BLOCK) -> np.ndarray:
    """``[H, W, 3]`` → ``[ceil(H/block)·block, ceil(W/block)·block, 3]``, padded black at bottom/right."""
    h, w = frame.shape[:2]
    pad_h, pad_w = -h % block, -w % block
    if pad_h == 0 and pad_w == 0:
        return np.ascontiguousarray(frame)
    return np.pad(frame, ((0, pad_h), (0, pad_w), (0, 0)))


class Mp4Writer:
    """Append ``[H, W, 3]`` uint8 frames of one size; :meth:`close` publishes ``path``, :meth:`abort` drops it."""

    def __init__(self, path: Path, fps: int) -> None:
        self.path = Path(path)
        self.fps = int(fps)
        self.frames = 0
        self.size: tuple[int, int] | None = None
        """``(H, W)`` of the frames as given (before padding)."""
        self._tmp = self.path.with_name(f".{self.path.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")
        self._ffmpeg: Generator[Any, np.ndarray | None, None] | None = None

    def append(self, frame: np.ndarray) -> None:
        """Encode one frame (the first one fixes the size; later ones must match it)."""
        if frame.dtype != np.uint8 or frame.ndim != 3 or frame.shape[2] != 3:
            raise ValueError(f"frame of {frame.dtype} {frame.shape}; expected uint8 [H, W, 3]")
        if self._ffmpeg is None:
            self._open(frame.shape[:2])
        elif frame.shape[:2] != self.size:
            raise ValueError(f"frame of size {frame.shape[:2]} in a video of size {self.size}")
        assert self._ffmpeg is not None
        self._ffmpeg.send(pad_to_block(frame))
        self.frames += 1

    def _open(self, size: tuple[int, int]) -> None:
        import imageio_ffmpeg

        self.size = (int(size[0]), int(size[1]))
        padded = (-(-size[1] // BLOCK) * BLOCK, -(-size[0] // BLOCK) * BLOCK)  # (W, H) for ffmpeg
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._ffmpeg = imageio_ffmpeg.write_frames(
            str(self._tmp), padded, fps=self.fps, codec="libx264", pix_fmt_out="yuv420p",
            macro_block_size=1, output_params=["-f", "mp4"], ffmpeg_log_level="error",
        )
        self._ffmpeg.send(None)  # start the ffmpeg process

    def close(self) -> Path:
        """Finish encoding and rename the file into place; return its path (ValueError if no frame)."""
        if self._ffmpeg is None:
            raise ValueError(f"{self.path}: no frame was recorded")
        try:
            self._ffmpeg.close()
            os.replace(self._tmp, self.path)
        except BaseException:
            self._tmp.unlink(missing_ok=True)
            raise
        finally:
            self._ffmpeg = None
        return self.path

    def abort(self) -> None:
        """Stop ffmpeg and delete the partial file; nothing appears at ``path``."""
        if self._ffmpeg is not None:
            try:
                self._ffmpeg.close()
            finally:
                self._ffmpeg = None
        self._tmp.unlink(missing_ok=True)
