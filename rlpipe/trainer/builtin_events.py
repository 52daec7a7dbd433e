"""Event functions a params file may name without a module (``func: record_camera_data_async``)."""

from __future__ import annotations

import atexit
import inspect
import sys
from pathlib import Path
from typing import Any

import numpy as np

from rlpipe.extras import require
from rlpipe.trainer.events import EventContext

__all__ = ["record_camera_data_async"]

_writers: dict[Path, Any] = {}
_warned: set[str] = set()


def record_camera_data_async(
    ctx: EventContext,
    name: str = "main_cam",
    save_path: str = "videos",
    resolution: list[int] | None = None,
    eye: list[float] | None = None,
    target: list[float] | None = None,
    up: list[float] | None = None,
    intrinsics: list[float] | None = None,
    fps: int = 30,
) -> None:
    """Append the eval env 0's current frame to ``<save_path>/<name>-iter-NNNNNN.mp4`` (one video per eval).

    Registered under ``events.eval`` it runs at eval env steps (every ``interval_step``-th). The camera
    (``eye``, ``target``, ``up``, ``resolution``, ``intrinsics``) reaches envs whose ``render`` takes a
    ``camera`` argument (MuJoCo scenes); other envs render their own fixed view. An env that cannot
    render is said once on stderr and the event does nothing.
    """
    render = getattr(ctx.env, "render", None)
    try:
        if render is None:
            raise NotImplementedError(f"{type(ctx.env).__name__} has no render()")
        camera = {
            "name": name,
            "resolution": resolution,
            "eye": eye,
            "target": target,
            "up": up,
            "intrinsics": intrinsics,
        }
        takes_camera = "camera" in inspect.signature(render).parameters
        frame = np.asarray(render([0], camera=camera) if takes_camera else render([0]))[0]
    except Exception as exc:  # rendering is best effort: training goes on
        if name not in _warned:
            _warned.add(name)
            print(
                f"warning: event record_camera_data_async({name}): cannot render ({exc}); "
                "set MUJOCO_GL=egl for MuJoCo envs",
                file=sys.stderr,
            )
        return
    path = Path(save_path) / f"{name}-iter-{ctx.iteration:06d}.mp4"
    _writer(path, fps).append_data(frame.astype(np.uint8))


def _writer(path: Path, fps: int) -> Any:
    """One open MP4 writer per video; the previous video of the same folder is closed first."""
    if path not in _writers:
        for old in [p for p in _writers if p.parent == path.parent]:
            _writers.pop(old).close()
        require("imageio", "event record_camera_data_async")  # one line naming the video extra
        require("imageio_ffmpeg", "event record_camera_data_async")
        import imageio.v2 as imageio  # only when a video is recorded

        path.parent.mkdir(parents=True, exist_ok=True)
        _writers[path] = imageio.get_writer(path, fps=fps, macro_block_size=1)
    return _writers[path]


@atexit.register
def _close_all() -> None:
    for writer in _writers.values():
        writer.close()
    _writers.clear()
