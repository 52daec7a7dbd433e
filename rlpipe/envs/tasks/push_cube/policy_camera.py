"""PushCube's policy camera: small uint8 frames of the physics state, cheap enough for every step.

The eval-video renderer (:mod:`.camera`) draws menagerie's visual meshes; this one draws the
physics model's collision geoms (geom group 3: a few convex hulls and primitives per link) in
flat, distinct colours — robot light grey, fingers dark grey, cube red, table brown — plus a green
disc on the goal (a non-colliding geom on the goal's mocap body, in a model used for drawing
only), lit by the headlight and one light from above, seen by one fixed camera, with no shadows,
reflections, haze, skybox or multisampling. The camera model has the physics model's ``qpos`` and
``mocap`` layout, so one state vector drives either. Frames are a pure function of (``qpos``,
goal): the same state gives the same pixels.

Headless machines need ``MUJOCO_GL=egl`` (software EGL works) or ``MUJOCO_GL=osmesa``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import mujoco
import numpy as np
import torch

from rlpipe.envs.rendering import GL_HINT, gl_errors
from rlpipe.envs.tasks.push_cube.scene import GOAL_RADIUS, PREFIX, ROBOT_BASE, scene_spec

__all__ = ["CameraCfg", "PolicyCamera", "camera_model"]

ROBOT_RGBA = (0.82, 0.82, 0.84, 1.0)
FINGER_RGBA = (0.3, 0.3, 0.33, 1.0)
CUBE_RGBA = (0.9, 0.1, 0.05, 1.0)
TABLE_RGBA = (0.55, 0.4, 0.25, 1.0)
GOAL_RGBA = (0.1, 0.75, 0.2, 1.0)
GOAL_HALF_HEIGHT = 2e-3
"""Half thickness of the drawn goal disc (its centre is 1 mm above the table top)."""
SIZE_RANGE = (16, 256)
MAX_FRAME_STACK = 8


@dataclass(frozen=True)
class CameraCfg:
    """``env.cfg.camera`` of PushCube: frame size, frame history and the fixed viewpoint."""

    size: tuple[int, int] = (64, 64)
    """``[height, width]`` in pixels."""
    frame_stack: int = 1
    """Frames per observation, oldest first: the group is ``uint8 [3 · frame_stack, H, W]``."""
    eye: tuple[float, float, float] = (0.75, 0.0, 0.6)
    """Camera position in the world (metres); the table top is z = 0, the cube spawns near x = y = 0."""
    target: tuple[float, float, float] = (0.05, 0.0, 0.05)
    """Point the camera looks at (metres)."""
    fovy: float = 45.0
    """Vertical field of view in degrees."""

    @property
    def channels(self) -> int:
        """RGB channels of the stacked frames: ``3 · frame_stack``."""
        return 3 * self.frame_stack

    @classmethod
    def parse(cls, value: object) -> CameraCfg | None:
        """``env.cfg.camera`` (null or a mapping) → :class:`CameraCfg`; ValueError ``camera.<key>: …``."""
        if value is None:
            return None
        keys = ", ".join(cls.__dataclass_fields__)
        if not isinstance(value, Mapping):
            raise ValueError(f"camera: got {value!r}; accepted: null or a mapping of {keys}")
        unknown = [key for key in value if key not in cls.__dataclass_fields__]
        if unknown:
            raise ValueError(f"camera.{unknown[0]}: unknown key; accepted: {keys}")
        fields: dict[str, Any] = {key: tuple(v) if isinstance(v, list) else v for key, v in value.items()}
        cfg = cls(**fields)  # unchecked values from the config: _check names a wrong one
        cfg._check()
        return cfg

    def _check(self) -> None:
        low, high = SIZE_RANGE
        checks = (
            (
                "size",
                self.size,
                isinstance(self.size, tuple)
                and len(self.size) == 2
                and all(_is_int(v) and low <= v <= high for v in self.size),
                f"[height, width], ints from {low} to {high}",
            ),
            (
                "frame_stack",
                self.frame_stack,
                _is_int(self.frame_stack) and 1 <= self.frame_stack <= MAX_FRAME_STACK,
                f"an int from 1 to {MAX_FRAME_STACK}",
            ),
            ("eye", self.eye, _is_point(self.eye), "[x, y, z] in metres"),
            (
                "target",
                self.target,
                _is_point(self.target) and self.target != self.eye,
                "[x, y, z] in metres, not the eye",
            ),
            (
                "fovy",
                self.fovy,
                isinstance(self.fovy, float | int)
                and not isinstance(self.fovy, bool)
                and 10 <= self.fovy <= 120,
                "degrees from 10 to 120",
            ),
        )
        for name, value, ok, accepted in checks:
            if not ok:
                shown = list(value) if isinstance(value, tuple) else value
                raise ValueError(f"camera.{name}: got {shown!r}; accepted: {accepted}")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_point(value: object) -> bool:
    return (
        isinstance(value, tuple)
        and len(value) == 3
        and all(isinstance(v, float | int) and not isinstance(v, bool) for v in value)
    )


def camera_model(timestep: float, cfg: CameraCfg, robot_base_x: float = ROBOT_BASE[0]) -> mujoco.MjModel:
    """The physics model recoloured, with the goal disc, lights and the ``policy`` camera."""
    spec = scene_spec(timestep, visual=False, robot_base_x=robot_base_x)
    for geom in spec.geoms:
        body = geom.parent.name
        if geom.name == "table":
            geom.rgba = TABLE_RGBA
        elif geom.name == "cube":
            geom.rgba = CUBE_RGBA
        elif body.startswith(PREFIX):
            geom.rgba = FINGER_RGBA if body.endswith("finger") else ROBOT_RGBA
    spec.body("goal").add_geom(
        type=mujoco.mjtGeom.mjGEOM_CYLINDER,
        rgba=GOAL_RGBA,
        contype=0,
        conaffinity=0,
        size=[GOAL_RADIUS, GOAL_HALF_HEIGHT, 0],
    )
    for light in list(spec.lights):
        spec.delete(light)
    spec.worldbody.add_light(
        pos=[0, 0, 2],
        dir=[0, 0, -1],
        type=mujoco.mjtLightType.mjLIGHT_DIRECTIONAL,
        diffuse=[0.45] * 3,
        specular=[0] * 3,
        castshadow=False,
    )
    spec.visual.headlight.ambient = [0.35] * 3
    spec.visual.headlight.diffuse = [0.45] * 3
    spec.visual.headlight.specular = [0] * 3
    spec.visual.quality.offsamples = 0
    height, width = cfg.size
    spec.visual.global_.offheight, spec.visual.global_.offwidth = height, width
    eye, target = np.asarray(cfg.eye, dtype=np.float64), np.asarray(cfg.target, dtype=np.float64)
    spec.worldbody.add_camera(name="policy", pos=eye, xyaxes=_look_at(eye, target), fovy=cfg.fovy)
    return spec.compile()


def _look_at(eye: np.ndarray, target: np.ndarray) -> np.ndarray:
    """``xyaxes [6]`` of a camera at ``eye`` looking at ``target`` (MuJoCo cameras look along −z)."""
    forward = (target - eye) / np.linalg.norm(target - eye)
    up = np.array([0.0, 0.0, 1.0]) if abs(forward[2]) < 0.999 else np.array([1.0, 0.0, 0.0])
    right = np.cross(forward, up)
    right /= np.linalg.norm(right)
    return np.concatenate((right, np.cross(right, forward)))


class PolicyCamera:
    """Render ``uint8 [k, 3, H, W]`` frames of (``qpos [k, nq]``, goal ``[k, 3]``) one after another.

    One GL context (created here: RuntimeError naming ``MUJOCO_GL`` when none can be made), one
    ``MjData``; each frame is kinematics → scene update → draw → read back into a preallocated array.
    """

    def __init__(self, timestep: float, cfg: CameraCfg, robot_base_x: float = ROBOT_BASE[0]) -> None:
        self.cfg = cfg
        self.height, self.width = cfg.size
        self.model = model = camera_model(timestep, cfg, robot_base_x)
        self._data = mujoco.MjData(model)
        self._option = mujoco.MjvOption()
        self._option.geomgroup[:] = 1  # the robot's collision geoms are in group 3
        self._option.sitegroup[:] = 0
        self._camera = mujoco.MjvCamera()
        self._camera.type = mujoco.mjtCamera.mjCAMERA_FIXED
        self._camera.fixedcamid = model.camera("policy").id
        self._perturb = mujoco.MjvPerturb()
        self._scene = mujoco.MjvScene(model, maxgeom=model.ngeom + 8)
        for flag in (
            mujoco.mjtRndFlag.mjRND_SHADOW,
            mujoco.mjtRndFlag.mjRND_REFLECTION,
            mujoco.mjtRndFlag.mjRND_SKYBOX,
            mujoco.mjtRndFlag.mjRND_HAZE,
        ):
            self._scene.flags[flag] = False
        self._rect = mujoco.MjrRect(0, 0, self.width, self.height)
        self._gl, self._context = _open_gl(model, self.width, self.height)

    def render(self, qpos: torch.Tensor, goal: torch.Tensor) -> torch.Tensor:
        """``qpos [k, nq]``, goal ``[k, 3]`` → ``uint8 [k, 3, H, W]`` (CPU), rows top to bottom."""
        qpos_np = qpos.detach().to("cpu", torch.float64).numpy()
        goal_np = goal.detach().to("cpu", torch.float64).numpy()
        frames = np.empty((qpos_np.shape[0], self.height, self.width, 3), dtype=np.uint8)
        model, data, scene, context = self.model, self._data, self._scene, self._context
        if context is None:
            raise RuntimeError("PolicyCamera.render after close()")
        self._gl.make_current()
        for i in range(qpos_np.shape[0]):
            data.qpos[:] = qpos_np[i]
            data.mocap_pos[0] = goal_np[i]
            mujoco.mj_kinematics(model, data)
            mujoco.mj_camlight(model, data)
            mujoco.mjv_updateScene(
                model,
                data,
                self._option,
                self._perturb,
                self._camera,
                mujoco.mjtCatBit.mjCAT_ALL.value,
                scene,
            )
            mujoco.mjr_render(self._rect, scene, context)
            mujoco.mjr_readPixels(frames[i], None, self._rect, context)
        # OpenGL reads rows bottom-up
        return torch.from_numpy(frames).flip(1).permute(0, 3, 1, 2).contiguous()

    def close(self) -> None:
        """Free MuJoCo's GL objects (in this context: GL names are per context), then the context."""
        context = getattr(self, "_context", None)  # None once closed, or when __init__ failed before
        if context is not None:
            with self._gl.as_current():
                context.free()
            self._gl.free()
            self._context = None

    def __del__(self) -> None:
        self.close()


def _open_gl(model: mujoco.MjModel, width: int, height: int) -> tuple[Any, mujoco.MjrContext]:
    """An offscreen GL context and MuJoCo's render context on it; RuntimeError naming MUJOCO_GL."""
    try:
        from mujoco import gl_context

        gl = _owned(gl_context.GLContext)(width, height)
        gl.make_current()
        context = mujoco.MjrContext(model, mujoco.mjtFontScale.mjFONTSCALE_100.value)
    except gl_errors() as exc:
        detail = (str(exc).strip().splitlines() or [type(exc).__name__])[-1]
        backend = os.environ.get("MUJOCO_GL", "unset")
        raise RuntimeError(f"camera: no working OpenGL (MUJOCO_GL={backend}: {detail}); {GL_HINT}") from None
    mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN.value, context)
    return gl, context


def _owned(cls: type) -> type:
    """``cls`` without its own ``__del__``: the :class:`PolicyCamera` owning it frees it.

    Garbage collection could otherwise free the GL context before its owner has freed MuJoCo's GL
    objects in it (``mujoco.Renderer`` does the same).
    """
    return type(f"_Owned{cls.__name__}", (cls,), {"__del__": lambda self: None})
