"""RobotProxy: a legged-robot-sized torch task whose physics costs little, to measure trainers.

The sizes of a quadruped locomotion task (12 joint targets; 48 policy and 205 privileged
observation floats) with dynamics that are a handful of elementwise ops and two small matmuls per
step, so a benchmark at 4,096–65,536 envs measures the trainer, not the simulator.

The model, per env, with ``dt = 0.02`` s:

* 12 joints (4 legs × abduction, hip, knee) under PD control towards ``q0 + 0.5·a``, ``a`` the
  action clipped to ``[-1, 1]``: ``qdd = kp·k(q0 + 0.5·a − q) − kd·qd`` (``k`` a per-episode
  stiffness scale), semi-implicit Euler, joints limited to ``q0 ± 1`` rad;
* the base's roll and pitch, an unstable pair (``tilt_dd = 1.5·tilt + D·(q − q0) + push``): the
  posture balances the body, a constant per-episode ``push`` disturbs it, and a tilt beyond
  0.5 rad is a fall (``terminated``);
* the base velocity ``(vx, vy, yaw rate)`` relaxes at 5/s towards ``f·B·(q − q0)`` (``f`` a
  per-episode friction scale): the posture also drives the robot;
* a command ``(vx, vy, yaw rate)`` drawn at the start of each episode, to be tracked.

``B`` [3, 12] and ``D`` [2, 12] are fixed linear maps drawn once from seed :data:`MAP_SEED` (the
same on every device). Reward ``[N]``: ``exp(−|v_xy − c_xy|²/0.25) + 0.5·exp(−(ω − c_ω)²/0.25)``
minus small penalties on the tilt rate, the action rate and the joint torques. Episodes end by a
fall or at ``max_episode_steps`` (default 1,000 steps, 20 s).

Observations are a TensorDict ``[N]`` of two groups (select them by key, as rsl_rl's
``obs_groups``): ``policy`` ``[N, 48]`` — base velocity (2), angular velocity (3), projected
gravity (3), command (3), base height (1), joint positions − q0 (12), joint velocities × 0.05 (12),
last action (12); ``privileged`` ``[N, 205]`` — the heights above the ground of a 17 × 11 grid of
points under the tilted body (187), the tilt (2), the push (2), the stiffness and friction scales
(2) and the joint torques / kp (12).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from tensordict import TensorDict

from rlpipe.envs.backends.torch_native import PHYSICS_DTYPES, TorchEnv
from rlpipe.envs.registry import register_env

__all__ = ["POLICY_DIM", "PRIVILEGED_DIM", "RobotProxy"]

NUM_JOINTS = 12
DT = 0.02
KP, KD = 20.0, 1.0
ACTION_SCALE = 0.5
JOINT_RANGE = 1.0
TILT_GAIN = 1.5
FALL_TILT = 0.5
VEL_RATE = 5.0
BASE_HEIGHT = 0.3
DEFAULT_POSE = [0.0, 0.8, -1.5] * 4
"""q0: abduction, hip, knee of each leg (rad)."""
MAP_SEED = 20240917
"""Seed of the fixed maps ``B`` and ``D`` (a CPU generator, so every device gets the same numbers)."""
SCAN_X, SCAN_Y = torch.linspace(-0.8, 0.8, 17), torch.linspace(-0.5, 0.5, 11)
"""Grid of the privileged height scan under the base (m, body frame)."""
POLICY_DIM = 48
PRIVILEGED_DIM = SCAN_X.numel() * SCAN_Y.numel() + 2 + 2 + 2 + NUM_JOINTS

# The physics state [N, 50], by column range.
Q, QD, LAST = slice(0, 12), slice(12, 24), slice(24, 36)
TILT, TILT_RATE, VEL, CMD = slice(36, 38), slice(38, 40), slice(40, 43), slice(43, 46)
PUSH, STIFFNESS, FRICTION = slice(46, 48), slice(48, 49), slice(49, 50)
STATE_DIM = 50

START_LOW = [
    *(q - 0.1 for q in DEFAULT_POSE),
    *[0.0] * 24,
    -0.05,
    -0.05,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    -1.0,
    -0.5,
    -1.0,
    -0.2,
    -0.2,
    0.8,
    0.5,
]
START_HIGH = [
    *(q + 0.1 for q in DEFAULT_POSE),
    *[0.0] * 24,
    0.05,
    0.05,
    0.0,
    0.0,
    0.0,
    0.0,
    0.0,
    1.0,
    0.5,
    1.0,
    0.2,
    0.2,
    1.2,
    1.25,
]
"""Start distribution per state column: joints near q0 at rest, a small tilt, the command
(vx, vy, yaw rate), the push, the stiffness and friction scales; uniform in ``[low, high)``."""


def _space(dim: int) -> gym.spaces.Box:
    return gym.spaces.Box(-np.inf, np.inf, (dim,), np.float32)


@register_env("RobotProxy")
class RobotProxy(TorchEnv):
    """Track a velocity command with 12 PD-controlled joints while keeping an unstable body upright.

    State ``[N, 50]`` (see the module docstring), action ``[N, 12]`` float32 in ``[-1, 1]`` (clipped),
    observation a TensorDict ``[N]`` of ``policy`` ``[N, 48]`` and ``privileged`` ``[N, 205]``,
    reward ``[N]`` float32.
    """

    state_dim = STATE_DIM
    render_fps = round(1 / DT)
    control_dt = DT
    action_space = gym.spaces.Box(-1.0, 1.0, (NUM_JOINTS,), np.float32)
    observation_space = gym.spaces.Dict({"policy": _space(POLICY_DIM), "privileged": _space(PRIVILEGED_DIM)})

    def __init__(
        self,
        num_envs: int,
        device: torch.device | str,
        max_episode_steps: int | None = 1000,
        physics_dtype: str = "float32",
    ) -> None:
        # constants first: TorchEnv.__init__ draws the first start states
        on = {"device": torch.device(device), "dtype": PHYSICS_DTYPES.get(physics_dtype, torch.float32)}
        maps = torch.Generator().manual_seed(MAP_SEED)
        self._b = (torch.randn(3, NUM_JOINTS, generator=maps) / NUM_JOINTS**0.5).to(**on)
        self._d = (torch.randn(2, NUM_JOINTS, generator=maps) / NUM_JOINTS**0.5).to(**on)
        grid_x, grid_y = torch.meshgrid(SCAN_X, SCAN_Y, indexing="ij")
        self._scan = torch.stack((-grid_x.flatten(), grid_y.flatten())).to(**on)  # [2, 187]
        self._q0 = torch.tensor(DEFAULT_POSE, **on)
        self._low, self._high = torch.tensor(START_LOW, **on), torch.tensor(START_HIGH, **on)
        super().__init__(num_envs, device, max_episode_steps, physics_dtype)

    def _initial_state(self, n: int, generator: torch.Generator) -> torch.Tensor:
        """``[n, 50]`` uniform in ``[START_LOW, START_HIGH)`` per column (one draw of ``n × 50``)."""
        u = torch.rand(n, STATE_DIM, generator=generator, device=self.device, dtype=self.dtype)
        return torch.addcmul(self._low, self._high - self._low, u)

    def _torque(self, state: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """``[N, 12]``: the PD torque towards ``q0 + 0.5·action`` in ``state``."""
        target = self._q0 + ACTION_SCALE * action
        return KP * state[:, STIFFNESS] * (target - state[:, Q]) - KD * state[:, QD]

    def _dynamics(
        self, state: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One ``dt`` of ``[N, 50]`` under ``action`` ``[N, 12]``; reward ``[N]``, fell ``[N]``."""
        action = action.to(self.dtype).clamp(-1.0, 1.0)
        torque = self._torque(state, action)
        qd = state[:, QD] + DT * torque
        q = torch.clamp(state[:, Q] + DT * qd, self._q0 - JOINT_RANGE, self._q0 + JOINT_RANGE)
        posture = q - self._q0
        tilt = state[:, TILT]
        tilt_rate = state[:, TILT_RATE] + DT * (TILT_GAIN * tilt + posture @ self._d.T + state[:, PUSH])
        tilt = tilt + DT * tilt_rate
        vel = state[:, VEL] + DT * VEL_RATE * (state[:, FRICTION] * (posture @ self._b.T) - state[:, VEL])
        cmd = state[:, CMD]
        reward = (
            torch.exp(-(vel[:, :2] - cmd[:, :2]).square().sum(-1) / 0.25)
            + 0.5 * torch.exp(-(vel[:, 2] - cmd[:, 2]).square() / 0.25)
            - 0.05 * tilt_rate.square().sum(-1)
            - 0.01 * (action - state[:, LAST]).square().sum(-1)
            - 1e-4 * torque.square().sum(-1)
        )
        next_state = torch.cat((q, qd, action, tilt, tilt_rate, vel, state[:, CMD.start :]), dim=-1)
        fell = (tilt.abs() > FALL_TILT).any(-1)
        return next_state, reward.to(torch.float32), fell

    def _observe(self, state: torch.Tensor) -> TensorDict:
        """The TensorDict ``[N]`` of ``policy`` ``[N, 48]`` and ``privileged`` ``[N, 205]`` float32."""
        roll, pitch = state[:, TILT].unbind(-1)
        cos_roll, sin_roll, cos_pitch, sin_pitch = roll.cos(), roll.sin(), pitch.cos(), pitch.sin()
        gravity = torch.stack((-sin_pitch, sin_roll * cos_pitch, -cos_roll * cos_pitch), -1)
        posture = state[:, Q] - self._q0
        height = BASE_HEIGHT * cos_roll * cos_pitch + 0.05 * posture.mean(-1)
        vel, tilt_rate = state[:, VEL], state[:, TILT_RATE]
        policy = torch.cat(
            (
                vel[:, :2],
                tilt_rate,
                vel[:, 2:],
                gravity,
                state[:, CMD],
                height[:, None],
                posture,
                0.05 * state[:, QD],
                state[:, LAST],
            ),
            dim=-1,
        )
        slope = torch.stack((sin_pitch, sin_roll * cos_pitch), -1)
        scan = height[:, None] + slope @ self._scan
        privileged = torch.cat(
            (
                scan,
                state[:, TILT],
                state[:, PUSH],
                state[:, STIFFNESS],
                state[:, FRICTION],
                self._torque(state, state[:, LAST]) / KP,
            ),
            dim=-1,
        )
        n = state.shape[0]
        return TensorDict(
            {"policy": policy.to(torch.float32), "privileged": privileged.to(torch.float32)},
            batch_size=[n],
            device=state.device,
        )
