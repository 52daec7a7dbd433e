"""Offscreen frames of MuJoCo states for ``BatchedEnv.render``: ``mujoco.Renderer`` under ``MUJOCO_GL``.

MuJoCo draws with OpenGL; on a headless machine that means ``MUJOCO_GL=egl`` (GPU or software
EGL, ~40–90 ms per 320×240 frame on CPU) or ``MUJOCO_GL=osmesa``, set before the process starts.
The renderer is made on the first frame asked for, so envs that are never filmed never touch
OpenGL; when no context can be made, the failure is a one-line
:class:`~rlpipe.envs.rendering.RenderUnavailable` naming the variable to set.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rlpipe.envs.rendering import gl_errors, gl_unavailable

__all__ = ["MujocoFrames"]


class MujocoFrames:
    """Frames ``[k, H, W, 3]`` uint8 of ``k`` ``MjData`` states of one ``MjModel``, from ``camera``.

    ``camera``: a camera name or id of the model; ``None`` (or -1) is MuJoCo's free camera.
    """

    def __init__(self, model: Any, height: int = 240, width: int = 320,
                 camera: str | int | None = None) -> None:
        self.model, self.height, self.width = model, height, width
        self.camera = -1 if camera is None else camera
        self._renderer: Any = None

    def _make(self) -> Any:
        try:
            import mujoco

            return mujoco.Renderer(self.model, self.height, self.width)
        except gl_errors() as exc:
            raise gl_unavailable("MuJoCo renderer", exc) from None

    def render(self, datas: Sequence[Any]) -> np.ndarray:
        """Draw each ``MjData`` of ``datas`` (kinematics must be current, e.g. after ``mj_step``)."""
        if self._renderer is None:
            self._renderer = self._make()
        frames = np.empty((len(datas), self.height, self.width, 3), dtype=np.uint8)
        try:
            for i, data in enumerate(datas):
                self._renderer.update_scene(data, camera=self.camera)
                frames[i] = self._renderer.render()
        except gl_errors() as exc:
            raise gl_unavailable("MuJoCo rendering", exc) from None
        return frames

    def close(self) -> None:
        """Free the OpenGL context (if one was made)."""
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None
