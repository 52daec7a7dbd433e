"""Eval videos: the first few eval envs, tiled side by side, one MP4 per evaluation.

Only the eval stage records, on its own eval env (never the training env), so collection and
update never pay for rendering. An env that cannot draw (:class:`RenderUnavailable`, e.g. MuJoCo
without a usable ``MUJOCO_GL``) turns video off with one warning line; the evaluation goes on.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rlpipe.config import EvalCfg
from rlpipe.envs import BatchedEnv, build_env
from rlpipe.envs.rendering import RenderUnavailable, as_frames
from rlpipe.mp4 import Mp4Writer

__all__ = ["VIDEO_PATTERN", "VideoRecorder", "build_eval_env", "video_off", "video_path"]

VIDEO_PATTERN = "video-iter-{iteration:06d}.mp4"
"""Name of the video of the evaluation after iteration ``iteration``, inside ``<run_dir>/eval/``."""


def video_path(run_dir: Path, iteration: int) -> Path:
    """``<run_dir>/eval/video-iter-NNNNNN.mp4``."""
    return Path(run_dir) / "eval" / VIDEO_PATTERN.format(iteration=iteration)


def video_off(reason: BaseException | str) -> None:
    """Say, in one line on stderr, that eval video is off and why."""
    print(f"Warning: eval video off: {reason}".splitlines()[0], file=sys.stderr)


def build_eval_env(env_id: str, num_envs: int, device: torch.device | str, env_cfg: dict[str, Any],
                   eval_cfg: EvalCfg) -> tuple[BatchedEnv, VideoRecorder | None]:
    """The eval env, and a recorder when ``eval.video`` is on and the env can be built to draw."""
    if eval_cfg.video:
        try:
            env = build_env(env_id, num_envs, device, env_cfg, render=True)
            return env, VideoRecorder(eval_cfg.video_envs)
        except RenderUnavailable as exc:
            video_off(exc)
    return build_env(env_id, num_envs, device, env_cfg), None


class VideoRecorder:
    """Streams frames of eval envs ``0 … num_envs-1`` (tiled left to right) into one MP4 per evaluation.

    Each env is filmed from the reset until it has finished its ``num_episodes`` episodes; after
    that its tile holds its last frame, and the video ends when every filmed env is done.
    """

    def __init__(self, num_envs: int) -> None:
        if num_envs < 1:
            raise ValueError(f"eval.video_envs: got {num_envs}; accepted: an int >= 1")
        self.num_envs = num_envs
        self._writer: Mp4Writer | None = None
        self._ids: list[int] = []
        self._last: np.ndarray | None = None
        self.written: Path | None = None
        """The video of the latest evaluation, once finished."""
        self.written_frames = 0

    @property
    def recording(self) -> bool:
        """Whether a video is open."""
        return self._writer is not None

    def start(self, env: BatchedEnv, path: Path) -> None:
        """Open ``path`` (written under a temporary name until :meth:`finish`) and film the reset state."""
        self._ids = list(range(min(self.num_envs, env.num_envs)))
        self._writer = Mp4Writer(path, env.render_fps)
        self._last, self.written, self.written_frames = None, None, 0
        self.capture(env, torch.zeros(env.num_envs, dtype=torch.int64), 1)

    def capture(self, env: BatchedEnv, count: torch.Tensor, num_episodes: int) -> None:
        """Add one frame: envs whose ``count`` ``[M]`` of finished episodes is below ``num_episodes``.

        Reads ``count`` on the host (one sync per step, in video evaluations only). When every
        filmed env is done the video is finished. Raises :class:`RenderUnavailable` from the env.
        """
        if self._writer is None:
            return
        active = [i for i, n in zip(self._ids, count[: len(self._ids)].tolist()) if n < num_episodes]
        if not active:
            self.finish()
            return
        frames = as_frames(env.render(active), len(active))
        tiles = self._last.copy() if self._last is not None else np.zeros(
            (len(self._ids), *frames.shape[1:]), dtype=np.uint8)
        tiles[active] = frames
        self._last = tiles
        self._writer.append(np.concatenate(list(tiles), axis=1))  # [H, k·W, 3]

    def finish(self) -> Path | None:
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
