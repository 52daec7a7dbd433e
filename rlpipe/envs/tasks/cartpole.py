"""CartPole in torch: gymnasium's CartPole-v1 (euler), batched on the device.

Constants, dynamics, reward (+1 every step including the terminal one), termination (|x| > 2.4,
|theta| > 12°), the 500-step time limit, the start distribution U(-0.05, 0.05)^4 and the spaces
match ``gymnasium/envs/classic_control/cartpole.py``; with ``physics_dtype="float64"`` the
trajectories agree with gymnasium's to float64 rounding.
Barto, Sutton & Anderson 1983, doi:10.1109/TSMC.1983.6313077
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch
from tensordict import TensorDict

from rlpipe.envs.backends.torch_native import PHYSICS_DTYPES, TorchEnv
from rlpipe.envs.registry import register_env
from rlpipe.envs.tasks.raster import Painter

__all__ = ["CartPole"]

GRAVITY = 9.8
MASSCART = 1.0
MASSPOLE = 0.1
TOTAL_MASS = MASSPOLE + MASSCART
LENGTH = 0.5  # half the pole's length
POLEMASS_LENGTH = MASSPOLE * LENGTH
FORCE_MAG = 10.0
TAU = 0.02  # seconds between state updates
THETA_THRESHOLD = 12 * 2 * math.pi / 360
X_THRESHOLD = 2.4
INIT_BOUND = 0.05
OBS_HIGH = np.array([X_THRESHOLD * 2, np.inf, THETA_THRESHOLD * 2, np.inf], dtype=np.float32)
OBS_GROUPS = gym.spaces.Dict(
    {
        "proprio": gym.spaces.Box(-OBS_HIGH[0::2], OBS_HIGH[0::2], dtype=np.float32),
        "privileged": gym.spaces.Box(-OBS_HIGH[1::2], OBS_HIGH[1::2], dtype=np.float32),
    }
)
"""``obs_groups: true``: positions (cart position, pole angle) apart from velocities, which a
teacher may read as privileged observations while its student infers them from memory."""
RENDER_HEIGHT, RENDER_WIDTH = 240, 320
"""Frame size of ``render`` (multiples of 16, as video encoders like them)."""


@dataclass(frozen=True)
class _Constants:
    """The physics constants as 0-dim tensors of the physics dtype on the env's device.

    A Python float in a float32 op is turned into a tensor on every call, a large share of a small
    batch's step; a 0-dim tensor of the same dtype gives the same bits without that.
    """

    force: torch.Tensor
    neg_force: torch.Tensor
    gravity: torch.Tensor
    masspole: torch.Tensor
    total_mass: torch.Tensor
    length: torch.Tensor
    polemass_length: torch.Tensor
    four_thirds: torch.Tensor
    tau: torch.Tensor
    init_bound: torch.Tensor
    init_width: torch.Tensor
    """``bound − (−bound)`` in the physics dtype: ``high − low`` of ``TorchEnv._uniform``."""

    @classmethod
    def on(cls, device: torch.device, dtype: torch.dtype) -> _Constants:
        def const(value: float) -> torch.Tensor:
            return torch.tensor(value, dtype=dtype, device=device)

        bound = const(INIT_BOUND)
        return cls(
            force=const(FORCE_MAG),
            neg_force=const(-FORCE_MAG),
            gravity=const(GRAVITY),
            masspole=const(MASSPOLE),
            total_mass=const(TOTAL_MASS),
            length=const(LENGTH),
            polemass_length=const(POLEMASS_LENGTH),
            four_thirds=const(4.0 / 3.0),
            tau=const(TAU),
            init_bound=bound,
            init_width=bound - -bound,
        )


@register_env("CartPole")
class CartPole(TorchEnv):
    """Balance a pole on a cart by pushing it left (action 0) or right (action 1).

    State and observation ``[N, 4]``: cart position, cart velocity, pole angle, pole angular
    velocity. Action ``[N]`` int64 in {0, 1}. Reward ``[N]`` is 1.0 every step. ``obs_groups``:
    the observation is a TensorDict ``[N]`` of ``proprio`` (position, angle) and ``privileged``
    (their velocities), ``[N, 2]`` each.
    """

    state_dim = 4
    render_fps = round(1 / TAU)
    control_dt = TAU
    action_space = gym.spaces.Discrete(2)
    observation_space = gym.spaces.Box(-OBS_HIGH, OBS_HIGH, dtype=np.float32)

    def __init__(
        self,
        num_envs: int,
        device: torch.device | str,
        max_episode_steps: int | None = 500,
        physics_dtype: str = "float32",
        obs_groups: bool = False,
    ) -> None:
        if not isinstance(obs_groups, bool):
            raise ValueError(f"obs_groups: got {obs_groups!r}; accepted: true, false")
        self.obs_groups = obs_groups
        if obs_groups:
            self.observation_space = OBS_GROUPS
        self._k = _Constants.on(torch.device(device), PHYSICS_DTYPES.get(physics_dtype, torch.float32))
        super().__init__(num_envs, device, max_episode_steps, physics_dtype)

    def _initial_state(self, n: int, generator: torch.Generator) -> torch.Tensor:
        """``[n, 4]`` uniform in ``[-0.05, 0.05)``: ``u · 0.1 − 0.05``, the bits of ``_uniform(n, −b, b)``."""
        u = torch.rand(n, self.state_dim, generator=generator, device=self.device, dtype=self.dtype)
        return u.mul_(self._k.init_width).sub_(self._k.init_bound)

    def _dynamics(
        self, state: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Euler step of ``[N, 4]`` under ``action`` ``[N]``; written in gymnasium's op order.

        The constants are 0-dim tensors in the physics dtype (:attr:`_k`): a Python float would be
        converted to a tensor on every op (a large share of a small batch's step), with the same bits.
        """
        k = self._k
        x, x_dot, theta, theta_dot = state.unbind(-1)
        force = torch.where(action == 1, k.force, k.neg_force)
        costheta, sintheta = torch.cos(theta), torch.sin(theta)
        temp = (force + k.polemass_length * theta_dot.square() * sintheta) / k.total_mass
        thetaacc = (k.gravity * sintheta - costheta * temp) / (
            k.length * (k.four_thirds - k.masspole * costheta.square() / k.total_mass)
        )
        xacc = temp - k.polemass_length * thetaacc * costheta / k.total_mass
        rates = torch.stack((x_dot, xacc, theta_dot, thetaacc), dim=-1)
        next_state = state + rates * k.tau  # two ops (not FMA-fused) for gymnasium's four ``x + TAU * x_dot``
        return next_state, self._reward(state), self._terminated(next_state)

    def _observe(self, state: torch.Tensor) -> torch.Tensor | TensorDict:
        """The state as a float32 copy ``[N, 4]`` (``obs_groups``: a TensorDict ``[N]`` of two ``[N, 2]``)."""
        obs = state.to(torch.float32, copy=True)
        if not self.obs_groups:
            return obs
        return TensorDict(
            {"proprio": obs[:, 0::2], "privileged": obs[:, 1::2]},
            batch_size=[obs.shape[0]],
            device=obs.device,
        )

    def render(self, env_ids: list[int]) -> np.ndarray:
        """``[k, 240, 320, 3]`` uint8: track, cart and pole of envs ``env_ids`` (gymnasium's picture)."""
        x, _, theta, _ = self.state[torch.as_tensor(env_ids, device=self.device)].float().unbind(-1)
        scale = RENDER_WIDTH / (2 * X_THRESHOLD)  # the visible track is ±2.4
        cart_y = 0.65 * RENDER_HEIGHT
        cart = torch.stack((RENDER_WIDTH / 2 + scale * x, torch.full_like(x, cart_y)), -1)
        half = torch.tensor([0.2 * scale, 0.12 * scale], device=self.device)  # a 0.4 × 0.24 cart
        axle = cart - torch.tensor([0.0, 0.06 * scale], device=self.device)
        tip = axle + 2 * LENGTH * scale * torch.stack((torch.sin(theta), -torch.cos(theta)), -1)
        painter = Painter(len(env_ids), RENDER_HEIGHT, RENDER_WIDTH, self.device)
        painter.hline(cart_y, 1.0, (0, 0, 0))
        painter.box(cart - half, cart + half, (0, 0, 0))
        painter.capsule(axle, tip, 0.04 * scale, (202, 152, 101))
        painter.disc(axle, 0.025 * scale, (129, 132, 203))
        return painter.frames

    def _reward(self, state: torch.Tensor) -> torch.Tensor:
        """``[N]`` float32 ones (the terminal step is rewarded too)."""
        return torch.ones(state.shape[0], dtype=torch.float32, device=state.device)

    @staticmethod
    def _terminated(state: torch.Tensor) -> torch.Tensor:
        """``[N]`` bool: cart outside ±2.4 or pole beyond ±12° (``|x| > 2.4`` is ``x < -2.4 or x > 2.4``)."""
        return (state[:, 0].abs() > X_THRESHOLD) | (state[:, 2].abs() > THETA_THRESHOLD)
