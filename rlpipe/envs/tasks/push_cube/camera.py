"""Offscreen frames of batched MuJoCo states with ``mujoco.Renderer`` (EGL/OSMesa, no window).

Headless machines need ``MUJOCO_GL=egl`` (software EGL works) or ``MUJOCO_GL=osmesa``; when no GL
context can be made, :class:`StateRenderer` raises a RuntimeError whose one line says which
variable to set. The renderer and its ``MjData`` are created on the first call.
"""

from __future__ import annotations

import os

import mujoco
import numpy as np
import torch

__all__ = ["StateRenderer"]


class StateRenderer:
    """Draw ``qpos``/``mocap_pos`` of some envs with a fixed free camera.

    Args:
        model: the model with visual geoms (same qpos and mocap layout as the physics model).
        width, height: frame size in pixels.
        lookat, distance, azimuth, elevation: the camera (``mjvCamera`` free-camera parameters).
    """

    def __init__(
        self,
        model: mujoco.MjModel,
        width: int = 320,
        height: int = 240,
        lookat: tuple[float, float, float] = (-0.1, 0.0, 0.2),
        distance: float = 1.6,
        azimuth: float = 135.0,
        elevation: float = -25.0,
    ) -> None:
        self.model, self.width, self.height = model, width, height
        self.camera = mujoco.MjvCamera()
        self.camera.type = mujoco.mjtCamera.mjCAMERA_FREE
        self.camera.lookat[:] = lookat
        self.camera.distance, self.camera.azimuth, self.camera.elevation = distance, azimuth, elevation
        self._renderer: mujoco.Renderer | None = None
        self._data = mujoco.MjData(model)
        # Software GL (llvmpipe, what MUJOCO_GL=egl gives on a headless CPU machine) pays for 4x
        # multisampling, shadow and reflection passes on every frame, most of a frame's cost there.
        # Eval videos only need to show the task: multisampling is off here, shadows and
        # reflections when the renderer opens.
        model.vis.quality.offsamples = 0

    def _open(self) -> mujoco.Renderer:
        if self._renderer is None:
            try:
                self._renderer = mujoco.Renderer(self.model, self.height, self.width)
            except Exception as exc:  # noqa: BLE001  # every GL failure becomes one message
                backend = os.environ.get("MUJOCO_GL", "unset")
                raise RuntimeError(
                    f"MuJoCo cannot open an offscreen GL context (MUJOCO_GL={backend}: "
                    f"{str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}); "
                    "set MUJOCO_GL=egl (or osmesa) before starting"
                ) from None
            for flag in (mujoco.mjtRndFlag.mjRND_SHADOW, mujoco.mjtRndFlag.mjRND_REFLECTION):
                self._renderer.scene.flags[flag] = False
        return self._renderer

    def render(self, qpos: torch.Tensor, mocap_pos: torch.Tensor) -> np.ndarray:
        """``qpos [k, nq]``, ``mocap_pos [k, nmocap, 3]`` → ``uint8 [k, height, width, 3]``."""
        renderer = self._open()
        qpos_np = qpos.detach().to("cpu", torch.float64).numpy()
        mocap_np = mocap_pos.detach().to("cpu", torch.float64).numpy()
        frames = np.empty((qpos_np.shape[0], self.height, self.width, 3), dtype=np.uint8)
        for i in range(qpos_np.shape[0]):  # one GL context: frames are drawn one after another
            self._data.qpos[:] = qpos_np[i]
            self._data.mocap_pos[:] = mocap_np[i]
            mujoco.mj_kinematics(self.model, self._data)
            renderer.update_scene(self._data, self.camera)
            frames[i] = renderer.render()
        return frames

    def close(self) -> None:
        """Free the GL context."""
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None
