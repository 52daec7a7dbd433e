"""Pendulum in torch: gymnasium's Pendulum-v1 (swing up and hold), batched on the device.

Constants (g=10, m=l=1, dt=0.05, max speed 8, max torque 2), the cost
``angle_normalize(th)^2 + 0.1 thdot^2 + 0.001 u^2`` (u clipped to ±2), the start distribution
th ~ U(-pi, pi), thdot ~ U(-1, 1), the 200-step time limit and the spaces match
``gymnasium/envs/classic_control/pendulum.py``. The episode never terminates.
"""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import torch

from rlpipe.envs.backends.torch_native import TorchEnv
from rlpipe.envs.registry import register_env
from rlpipe.envs.tasks.raster import Painter

__all__ = ["Pendulum", "angle_normalize"]

MAX_SPEED = 8.0
MAX_TORQUE = 2.0
DT = 0.05
MASS = 1.0
LENGTH = 1.0
INIT_HIGH = [math.pi, 1.0]  # th, thdot
OBS_HIGH = np.array([1.0, 1.0, MAX_SPEED], dtype=np.float32)
RENDER_SIZE = 240
"""Frames of ``render`` are ``RENDER_SIZE`` pixels square."""


def angle_normalize(x: torch.Tensor) -> torch.Tensor:
    """Wrap angles to ``[-pi, pi)`` (same shape as ``x``)."""
    return ((x + math.pi) % (2 * math.pi)) - math.pi


@register_env("Pendulum")
class Pendulum(TorchEnv):
    """Apply a torque ``[N, 1]`` in ``[-2, 2]`` to swing a pendulum up and keep it upright.

    State ``[N, 2]``: angle ``th`` (unwrapped) and angular velocity ``thdot``.
    Observation ``[N, 3]`` float32: ``cos th, sin th, thdot``. Reward ``[N]`` float32, <= 0.
    """

    state_dim = 2
    render_fps = round(1 / DT)
    control_dt = DT
    action_space = gym.spaces.Box(-MAX_TORQUE, MAX_TORQUE, shape=(1,), dtype=np.float32)
    observation_space = gym.spaces.Box(-OBS_HIGH, OBS_HIGH, dtype=np.float32)

    def __init__(
        self,
        num_envs: int,
        device: torch.device | str,
        max_episode_steps: int | None = 200,
        physics_dtype: str = "float32",
        g: float = 10.0,
    ) -> None:
        if isinstance(g, bool) or not isinstance(g, int | float):
            raise ValueError(f"g: got {g!r}; accepted: a number (gravity, m/s^2)")
        self.g = float(g)
        super().__init__(num_envs, device, max_episode_steps, physics_dtype)

    def _initial_state(self, n: int, generator: torch.Generator) -> torch.Tensor:
        """``[n, 2]``: th ~ U(-pi, pi), thdot ~ U(-1, 1)."""
        high = self._constant(INIT_HIGH)
        return self._uniform(n, -high, high)

    def _dynamics(
        self, state: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Semi-implicit step of ``[N, 2]`` under torque ``[N, 1]``; gymnasium's op order."""
        th, thdot = state.unbind(-1)
        u = action[:, 0].clamp(-MAX_TORQUE, MAX_TORQUE).to(self.dtype)
        costs = angle_normalize(th).square() + 0.1 * thdot.square() + 0.001 * u.square()
        gravity_term = 3 * self.g / (2 * LENGTH)
        torque_term = 3.0 / (MASS * LENGTH**2)
        newthdot = thdot + (gravity_term * torch.sin(th) + torque_term * u) * DT
        newthdot = newthdot.clamp(-MAX_SPEED, MAX_SPEED)
        newth = th + newthdot * DT
        terminated = torch.zeros(state.shape[0], dtype=torch.bool, device=state.device)
        return torch.stack((newth, newthdot), dim=-1), (-costs).to(torch.float32), terminated

    def render(self, env_ids: list[int]) -> np.ndarray:
        """``[k, 240, 240, 3]`` uint8: the rod of envs ``env_ids`` (upright at th = 0), as gymnasium draws."""
        th = self.state[torch.as_tensor(env_ids, device=self.device), 0].float()
        scale = RENDER_SIZE / (2 * 2.2)  # gymnasium shows ±2.2 world units
        pivot = torch.full((len(env_ids), 2), RENDER_SIZE / 2, device=self.device)
        tip = pivot + LENGTH * scale * torch.stack((-torch.sin(th), -torch.cos(th)), -1)
        painter = Painter(len(env_ids), RENDER_SIZE, RENDER_SIZE, self.device)
        painter.capsule(pivot, tip, 0.1 * scale, (204, 77, 77))
        painter.disc(pivot, 0.05 * scale, (0, 0, 0))
        return painter.frames

    def _observe(self, state: torch.Tensor) -> torch.Tensor:
        """``[N, 3]`` float32: ``cos th, sin th, thdot``."""
        th, thdot = state.unbind(-1)
        return torch.stack((torch.cos(th), torch.sin(th), thdot), dim=-1).to(torch.float32)
