"""``engine: warp``: the same MJCF stepped by MuJoCo Warp, its arrays shared with torch.

``mujoco_warp.put_data(model, data, nworld=N)`` holds the N copies in Warp arrays ``[N, …]`` on one
device (CUDA when the env runs on CUDA, else Warp's CPU backend); ``wp.to_torch`` exposes
``qpos``/``qvel``/``sensordata`` as zero-copy torch tensors, and resets write into them with
``torch.where`` — no host round trip. On CUDA the ``substeps`` physics steps are captured once in a
CUDA graph and replayed. Warp computes in float32.

Optional: ``pip install 'rlpipe[warp]'`` (``mujoco-warp``); without it ``engine: warp`` is a config
error naming the package.
"""

from __future__ import annotations

from typing import Any

import mujoco
import torch

from rlpipe.envs.tasks.push_cube.physics import PhysicsBatch
from rlpipe.extras import require

__all__ = ["WarpBatch", "import_warp"]

NCONMAX = 32
"""Contacts per world Warp allocates (the default, sized from the initial state, holds none)."""
NJMAX = 160
"""Constraint rows per world (pyramidal friction cones: 4 rows per contact, plus limits)."""


def import_warp() -> tuple[Any, Any]:
    """Return ``(warp, mujoco_warp)``; a one-line ``ConfigError`` naming the extra when missing."""
    mujoco_warp = require("mujoco_warp", "env.cfg.engine: warp")
    return require("warp", "env.cfg.engine: warp"), mujoco_warp


class WarpBatch(PhysicsBatch):
    """N worlds of ``model`` in MuJoCo Warp on ``device`` (``cpu`` or ``cuda:N``)."""

    def __init__(
        self, model: mujoco.MjModel, num_envs: int, substeps: int, device: torch.device | str
    ) -> None:
        wp, mjw = import_warp()
        self._wp, self._mjw = wp, mjw
        self.model, self.num_envs, self.substeps = model, num_envs, substeps
        self.device, self.dtype = torch.device(device), torch.float32
        wp.init()
        self._wp_device = "cpu" if self.device.type == "cpu" else f"cuda:{self.device.index or 0}"
        with wp.ScopedDevice(self._wp_device):
            self._model = mjw.put_model(model)
            self._data = mjw.put_data(
                model, mujoco.MjData(model), nworld=num_envs, nconmax=NCONMAX, njmax=NJMAX
            )
        d = self._data
        self._qpos, self._qvel = wp.to_torch(d.qpos), wp.to_torch(d.qvel)
        self._ctrl, self._time = wp.to_torch(d.ctrl), wp.to_torch(d.time)
        self._sensor, self._warm = wp.to_torch(d.sensordata), wp.to_torch(d.qacc_warmstart)
        self._graph = None

    @property
    def qpos(self) -> torch.Tensor:
        """``[N, nq]`` float32, shared with Warp."""
        return self._qpos

    @property
    def qvel(self) -> torch.Tensor:
        """``[N, nv]`` float32, shared with Warp."""
        return self._qvel

    @property
    def sensordata(self) -> torch.Tensor:
        """``[N, nsensordata]`` float32, shared with Warp."""
        return self._sensor

    def step(self, ctrl: torch.Tensor) -> None:
        """Copy ``ctrl [N, nu]`` into the worlds and run ``substeps`` ``mujoco_warp.step`` calls."""
        self._ctrl.copy_(ctrl.detach().to(self.device, self.dtype))
        wp = self._wp
        with wp.ScopedDevice(self._wp_device):
            if self.device.type != "cuda":
                self._substeps()
                return
            if self._graph is None:
                self._substeps()  # load the kernels outside the capture
                with wp.ScopedCapture() as capture:
                    self._substeps()
                self._graph = capture.graph
            wp.capture_launch(self._graph)

    def _substeps(self) -> None:
        for _ in range(self.substeps):
            self._mjw.step(self._model, self._data)

    def reset_where(self, mask: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        """Overwrite the masked worlds in place (zero warm-start), on the Warp device."""
        rows = mask.to(self.device).unsqueeze(-1)
        self._time.copy_(torch.where(rows.squeeze(-1), 0.0, self._time))
        self._qpos.copy_(torch.where(rows, qpos.to(self.device, self.dtype), self._qpos))
        self._qvel.copy_(torch.where(rows, qvel.to(self.device, self.dtype), self._qvel))
        self._warm.masked_fill_(rows, 0.0)
        self._sensor.masked_fill_(rows, 0.0)

    def get_state(self) -> dict[str, torch.Tensor]:
        """CPU copies of time, qpos, qvel, ctrl, warm-start and sensors."""
        return {name: t.detach().cpu().clone() for name, t in self._fields().items()}

    def set_state(self, state: dict[str, torch.Tensor]) -> None:
        """Restore :meth:`get_state`."""
        for name, tensor in self._fields().items():
            if tuple(state[name].shape) != tuple(tensor.shape):
                raise ValueError(
                    f"warp state {name} of shape {tuple(state[name].shape)}; "
                    f"this batch needs {tuple(tensor.shape)}"
                )
            tensor.copy_(state[name].to(self.device, tensor.dtype))

    def _fields(self) -> dict[str, torch.Tensor]:
        return {
            "time": self._time,
            "qpos": self._qpos,
            "qvel": self._qvel,
            "ctrl": self._ctrl,
            "qacc_warmstart": self._warm,
            "sensordata": self._sensor,
        }
