"""Eval videos on disk: frames of the first few eval envs, tiled side by side, one MP4 per evaluation.

:class:`Mp4Writer` streams RGB frames into H.264 (yuv420p) through imageio-ffmpeg's bundled
ffmpeg — memory stays flat however long the video — under a hidden temporary name beside its
target, renamed into place on close, so a reader (MLflow, a browser) never sees half a video.

:class:`VideoRecorder` is what the evaluator drives: it asks the eval env for frames
(``env.render(env_ids)``, see :mod:`rlpipe.envs.rendering`) after every step. An env that cannot
draw raises ``RenderUnavailable`` (a ``NotImplementedError``; any other render error is treated
alike): the recorder then drops the video, says so in one warning line and stays off; the
evaluation itself goes on unchanged.
"""

from __future__ import annotations

import sys
from collections.abc import Generator
from typing import Any, Protocol

import numpy as np
import torch

from rlpipe.artifacts.atomic import publish_file, temporary_sibling
from rlpipe.artifacts.fs import AnyPath, as_path
from rlpipe.config import EvalCfg
from rlpipe.extras import require

__all__ = ["BLOCK", "Mp4Writer", "VideoRecorder", "pad_to_block", "recorder_for", "video_off"]

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
    """Append ``[H, W, 3]`` uint8 frames of one size; :meth:`close` publishes ``path``, :meth:`abort` not."""

    def __init__(self, path: AnyPath, fps: int) -> None:
        self.path = as_path(path)
        self.fps = int(fps)
        self.frames = 0
        self.size: tuple[int, int] | None = None
        """``(H, W)`` of the frames as given (before padding)."""
        self._tmp = temporary_sibling(self.path)
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
        imageio_ffmpeg = require("imageio_ffmpeg", "eval.video")
        self.size = (int(size[0]), int(size[1]))
        padded = (-(-size[1] // BLOCK) * BLOCK, -(-size[0] // BLOCK) * BLOCK)  # (W, H) for ffmpeg
        self.path.parent.mkdir(parents=True, exist_ok=True)
        ffmpeg: Generator[Any, np.ndarray | None, None] = imageio_ffmpeg.write_frames(
            str(self._tmp),
            padded,
            fps=self.fps,
            codec="libx264",
            pix_fmt_out="yuv420p",
            macro_block_size=1,
            output_params=["-f", "mp4"],
            ffmpeg_log_level="error",
        )
        self._ffmpeg = ffmpeg
        ffmpeg.send(None)  # start the ffmpeg process

    def close(self) -> AnyPath:
        """Finish encoding and rename the file into place; return its path (ValueError if no frame)."""
        if self._ffmpeg is None:
            raise ValueError(f"{self.path}: no frame was recorded")
        try:
            self._ffmpeg.close()
            publish_file(self._tmp, self.path)
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


def video_off(reason: BaseException | str) -> None:
    """Say, in one line on stderr, that eval video is off and why."""
    print(f"Warning: eval video off: {reason}".splitlines()[0], file=sys.stderr)


def recorder_for(cfg: EvalCfg, problem: BaseException | None = None) -> VideoRecorder | None:
    """The recorder ``eval.video`` asks for, or ``None``.

    ``None`` when video is off, or when the eval env could not be built to draw (``problem``, said
    in one warning line).
    """
    if not cfg.video:
        return None
    if problem is not None:
        video_off(problem)
        return None
    return VideoRecorder(cfg.video_envs)


class RenderingEnv(Protocol):
    """What the recorder needs of an eval env (a :class:`~rlpipe.envs.BatchedEnv`)."""

    num_envs: int
    render_fps: int

    def render(self, env_ids: list[int]) -> Any: ...


def _frames(frames: Any, count: int) -> np.ndarray:
    """A ``render`` result as a host ``[k, H, W, 3]`` uint8 array (ValueError when it is not one)."""
    array = frames.detach().cpu().numpy() if isinstance(frames, torch.Tensor) else np.asarray(frames)
    if array.dtype != np.uint8 or array.ndim != 4 or array.shape[0] != count or array.shape[3] != 3:
        raise ValueError(f"render returned {array.dtype} {array.shape}; expected uint8 [{count}, H, W, 3]")
    return array


class VideoRecorder:
    """Streams frames of eval envs ``0 … num_envs-1`` (tiled left to right) into one MP4 per evaluation.

    Each env is filmed from the reset until it has finished its ``num_episodes`` episodes; after
    that its tile holds its last frame, and the video ends when every filmed env is done.
    After a render failure :attr:`enabled` is false and every call is a no-op.
    """

    def __init__(self, num_envs: int) -> None:
        if num_envs < 1:
            raise ValueError(f"eval.video_envs: got {num_envs}; accepted: an int >= 1")
        self.num_envs = num_envs
        self.enabled = True
        self.written: AnyPath | None = None
        """The video of the latest evaluation, once finished."""
        self.written_frames = 0
        self._writer: Mp4Writer | None = None
        self._ids: list[int] = []
        self._last: np.ndarray | None = None

    @property
    def recording(self) -> bool:
        """Whether a video is open."""
        return self._writer is not None

    def start(self, env: RenderingEnv, path: AnyPath) -> None:
        """Open ``path`` (a temporary until :meth:`finish`) and film the envs' reset state."""
        if not self.enabled:
            return
        self._ids = list(range(min(self.num_envs, env.num_envs)))
        self._writer = Mp4Writer(path, env.render_fps)
        self._last, self.written, self.written_frames = None, None, 0
        self.capture(env, torch.zeros(env.num_envs, dtype=torch.int64), 1)

    def capture(self, env: RenderingEnv, count: torch.Tensor, num_episodes: int) -> None:
        """Add one frame: envs whose ``count`` ``[M]`` of finished episodes is below ``num_episodes``.

        Reads ``count`` on the host (one sync per step, in filmed evaluations only). When every
        filmed env is done the video is finished.
        """
        if self._writer is None:
            return
        active = [i for i, n in zip(self._ids, count[: len(self._ids)].tolist()) if n < num_episodes]
        if not active:
            self.finish()
            return
        try:
            frames = _frames(env.render(active), len(active))
        except Exception as exc:  # a video must never end a run: any render failure turns it off
            self.abort()
            self.enabled = False
            video_off(exc if isinstance(exc, NotImplementedError) else f"{type(exc).__name__}: {exc}")
            return
        tiles = (
            self._last
            if self._last is not None
            else np.zeros((len(self._ids), *frames.shape[1:]), dtype=np.uint8)
        )
        tiles[active] = frames
        self._last = tiles
        self._writer.append(np.concatenate(list(tiles), axis=1))  # [H, k·W, 3]

    def finish(self) -> AnyPath | None:
        """Close the open video (if any); return :attr:`written`, the finished video's path."""
        writer, self._writer = self._writer, None
        if writer is not None:
            self.written, self.written_frames = writer.close(), writer.frames
        return self.written

    def abort(self) -> None:
        """Drop the open video, leaving no file."""
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.abort()
