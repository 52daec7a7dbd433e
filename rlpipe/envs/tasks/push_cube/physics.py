"""N copies of one MuJoCo model stepped together, behind one small interface per engine.

:class:`PhysicsBatch` is what a MuJoCo-based env talks to: ``qpos [N, nq]``, ``qvel [N, nv]``,
``sensordata [N, nsensordata]`` as torch tensors, ``step(ctrl [N, nu])`` advancing every copy by
``substeps`` physics steps under a constant control, ``reset_where(mask, qpos, qvel)`` restarting
some copies without a host sync, and ``get_state``/``set_state`` for bit-exact resumes.

:class:`MujocoBatch` is the C engine: the N physics states live in one float64 array
``[N, nstate]`` (``mjSTATE_FULLPHYSICS``: time, qpos, qvel, act, …) shared with torch, and
``step`` hands it to ``mujoco.rollout`` — a persistent C++ thread pool that steps chunks of the
batch with the GIL released, one ``MjData`` per thread — so there is no Python loop over envs.
Every step starts from a zero constraint warm-start, which makes a step a pure function of
(state, control): results do not depend on which thread ran which env, and a restored state
continues exactly. Sensor values are those MuJoCo computed during the last substep (i.e. before
its integration).

``engine: warp`` (:mod:`.warp_physics`) implements the same interface on MuJoCo Warp.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod

import mujoco
import mujoco.rollout
import numpy as np
import torch

__all__ = ["MujocoBatch", "PhysicsBatch", "default_threads"]

STATE_SPEC = mujoco.mjtState.mjSTATE_FULLPHYSICS


def default_threads() -> int:
    """Threads of the rollout pool when not configured: the usable CPU cores (at least 1)."""
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


class PhysicsBatch(ABC):
    """N copies of ``model`` stepped together; see the module docstring for the contract."""

    model: mujoco.MjModel
    num_envs: int
    substeps: int
    device: torch.device
    """Where :attr:`qpos` & co. live (CPU for the C engine, the Warp device for Warp)."""
    dtype: torch.dtype
    """float64 for the C engine, float32 for Warp."""

    @property
    @abstractmethod
    def qpos(self) -> torch.Tensor:
        """``[N, nq]`` joint positions (a view: valid until the next ``step``/``reset_where``)."""

    @property
    @abstractmethod
    def qvel(self) -> torch.Tensor:
        """``[N, nv]`` joint velocities (a view)."""

    @property
    @abstractmethod
    def sensordata(self) -> torch.Tensor:
        """``[N, nsensordata]`` sensor values of the last substep (a view)."""

    @abstractmethod
    def step(self, ctrl: torch.Tensor) -> None:
        """Advance every copy ``substeps`` physics steps holding ``ctrl [N, nu]``."""

    @abstractmethod
    def reset_where(self, mask: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        """Where ``mask [N]`` is set: time 0, ``qpos [N, nq]``, ``qvel [N, nv]``, no warm-start."""

    @abstractmethod
    def get_state(self) -> dict[str, torch.Tensor]:
        """A copy of everything that determines the next steps (CPU tensors)."""

    @abstractmethod
    def set_state(self, state: dict[str, torch.Tensor]) -> None:
        """Restore :meth:`get_state`."""

    def close(self) -> None:  # noqa: B027  # optional hook
        """Release threads or device memory."""


class MujocoBatch(PhysicsBatch):
    """The C engine over ``mujoco.rollout`` with ``nthread`` threads (see the module docstring)."""

    def __init__(
        self, model: mujoco.MjModel, num_envs: int, substeps: int, nthread: int | None = None
    ) -> None:
        self.model, self.num_envs, self.substeps = model, num_envs, substeps
        self.device, self.dtype = torch.device("cpu"), torch.float64
        self.nthread = nthread or default_threads()
        nstate = mujoco.mj_stateSize(model, STATE_SPEC)
        data = mujoco.MjData(model)
        template = np.empty(nstate)
        mujoco.mj_getState(model, data, template, STATE_SPEC)
        self._state = np.tile(template, (num_envs, 1))
        self._ctrl = np.zeros((num_envs, substeps, model.nu))
        self._models = [model] * num_envs
        self._warmstart = np.zeros((num_envs, model.nv))
        self._out_state = np.empty((num_envs, substeps, nstate))
        self._out_sensor = np.empty((num_envs, substeps, model.nsensordata))
        self._sensor = np.zeros((num_envs, model.nsensordata))
        self._datas = [mujoco.MjData(model) for _ in range(self.nthread)]
        # nthread=0: the pool runs rollouts on the calling thread (no thread hop for one thread)
        self._pool = mujoco.rollout.Rollout(nthread=self.nthread if self.nthread > 1 else 0)
        self._state_t = torch.from_numpy(self._state)
        self._sensor_t = torch.from_numpy(self._sensor)
        self._time = _field_slice(model, mujoco.mjtState.mjSTATE_TIME)
        self._qpos = _field_slice(model, mujoco.mjtState.mjSTATE_QPOS)
        self._qvel = _field_slice(model, mujoco.mjtState.mjSTATE_QVEL)

    @property
    def qpos(self) -> torch.Tensor:
        """``[N, nq]`` float64 view of the states."""
        return self._state_t[:, self._qpos]

    @property
    def qvel(self) -> torch.Tensor:
        """``[N, nv]`` float64 view of the states."""
        return self._state_t[:, self._qvel]

    @property
    def sensordata(self) -> torch.Tensor:
        """``[N, nsensordata]`` float64 of the last substep."""
        return self._sensor_t

    def step(self, ctrl: torch.Tensor) -> None:
        """One ``rollout`` call: N trajectories of ``substeps`` steps from the current states."""
        self._ctrl[:] = ctrl.detach().to("cpu", torch.float64).numpy()[:, None, :]
        self._pool.rollout(
            self._models,
            self._datas,
            self._state,
            self._ctrl,
            initial_warmstart=self._warmstart,
            nstep=self.substeps,
            state=self._out_state,
            sensordata=self._out_sensor,
            skip_checks=True,
        )
        self._state[:] = self._out_state[:, -1]
        self._sensor[:] = self._out_sensor[:, -1]

    def reset_where(self, mask: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        """Overwrite time, qpos and qvel of the masked rows (``torch.where``, no loop)."""
        rows = mask.to("cpu").unsqueeze(-1)
        state = self._state_t
        state[:, self._time] = torch.where(rows, 0.0, state[:, self._time])
        state[:, self._qpos] = torch.where(rows, qpos.to("cpu", torch.float64), state[:, self._qpos])
        state[:, self._qvel] = torch.where(rows, qvel.to("cpu", torch.float64), state[:, self._qvel])
        self._sensor_t.masked_fill_(rows, 0.0)

    def get_state(self) -> dict[str, torch.Tensor]:
        """Copies of the states ``[N, nstate]``, sensors and the last controls."""
        return {
            "physics": self._state_t.clone(),
            "sensordata": self._sensor_t.clone(),
            "ctrl": torch.from_numpy(self._ctrl[:, 0].copy()),
        }

    def set_state(self, state: dict[str, torch.Tensor]) -> None:
        """Restore :meth:`get_state` (ValueError for another model or N)."""
        physics = state["physics"]
        if tuple(physics.shape) != tuple(self._state.shape):
            raise ValueError(
                f"physics state of shape {tuple(physics.shape)}; this batch needs "
                f"{tuple(self._state.shape)} (same model and num_envs)"
            )
        self._state[:] = physics.to(torch.float64).numpy()
        self._sensor[:] = state["sensordata"].to(torch.float64).numpy()
        self._ctrl[:] = state["ctrl"].to(torch.float64).numpy()[:, None, :]

    def close(self) -> None:
        """Stop the rollout threads."""
        if self._pool.rollout_ is not None:
            self._pool.close()


def _field_slice(model: mujoco.MjModel, field: mujoco.mjtState) -> slice:
    """Columns of ``field`` inside a ``STATE_SPEC`` state vector (fields are stored in bit order)."""
    start = 0
    for bit in range(mujoco.mjtState.mjNSTATE.value):
        flag = 1 << bit
        if not STATE_SPEC.value & flag:
            continue
        size = mujoco.mj_stateSize(model, mujoco.mjtState(flag))
        if flag == field.value:
            return slice(start, start + size)
        start += size
    raise ValueError(f"{field} is not part of {STATE_SPEC}")
