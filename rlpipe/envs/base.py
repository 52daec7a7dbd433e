"""The batched env contract every rlpipe env fulfils (torch-native or gymnasium-backed).

A ``BatchedEnv`` steps ``num_envs`` copies of one task at once and speaks torch tensors on its
``device``. Shapes below use N = ``num_envs``.

* ``reset(seed, group_size)`` → ``obs``: ``[N, *obs_shape]`` float32. With ``group_size=k > 1``
  the envs ``[0..k-1]``, ``[k..2k-1]`` … start from the same initial state (GRPO group resets).
* ``step(action)`` with ``action``: ``[N]`` int64 (Discrete) or ``[N, *act_shape]`` float32 (Box)
  → :class:`StepResult`. Envs that finish an episode are reset inside ``step``: ``obs`` is then
  the first observation of the next episode, and ``final_obs`` holds the true last observation.
* Dict observation spaces (envpool's Playground ``state`` / ``privileged_state``, rsl_rl groups):
  ``observation_space`` is a ``gym.spaces.Dict`` of flat Boxes and ``obs`` a ``TensorDict``
  ``[N]`` with one ``[N, dim]`` float32 entry per key (:attr:`BatchedEnv.obs_spec`); an image
  group is a uint8 Box ``[C, H, W]`` and its entry ``[N, C, H, W]`` uint8 (:attr:`BatchedEnv.obs_dtypes`).
* ``state_dict()`` / ``load_state_dict()`` capture everything needed to continue bit for bit
  (physics state, step counters, RNG), so a resumed run equals an uninterrupted one.
* ``render(env_ids)`` → ``[k, H, W, 3]`` uint8 frames of those envs (eval videos only); envs that
  cannot draw raise :class:`~rlpipe.envs.rendering.RenderUnavailable` (see that module).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch
from tensordict import TensorDict

from rlpipe.envs.rendering import RenderUnavailable
from rlpipe.rollout import ObsSpec

__all__ = ["NO_INFO", "BatchedEnv", "Obs", "StepResult", "control_dt"]

Obs = torch.Tensor | TensorDict
"""``[N, *obs_shape]`` float32, or a ``TensorDict`` ``[N]`` of ``[N, dim]`` float32 per key."""
NO_INFO: Mapping[str, torch.Tensor] = MappingProxyType({})
"""The default (empty, read-only) ``StepResult.info``."""


class StepResult(NamedTuple):
    """What ``BatchedEnv.step`` returns; every field is batched over N envs."""

    obs: Obs
    """``[N, *obs_shape]`` float32 (or a TensorDict ``[N]``): next observation (first of a new
    episode where ``done``)."""
    reward: torch.Tensor
    """``[N]`` float32."""
    terminated: torch.Tensor
    """``[N]`` bool: the episode reached a terminal state (no bootstrap)."""
    truncated: torch.Tensor
    """``[N]`` bool: the episode was cut by a time limit (bootstrap from ``final_obs``)."""
    final_obs: Obs
    """``[N, *obs_shape]`` float32: the true last observation where done, else equal to ``obs``."""
    info: Mapping[str, torch.Tensor] = NO_INFO
    """Per-step diagnostics, each ``[N]`` on the env's device, valid for the step that just ran
    (on a done: of the finished episode's last step). ``info["success"]`` (bool or 0/1 float) is
    averaged over finished episodes into ``train/success_rate`` and ``eval/success_rate``."""


class BatchedEnv(ABC):
    """N parallel envs behind one torch interface; see the module docstring for the contract."""

    num_envs: int
    device: torch.device
    observation_space: gym.spaces.Box | gym.spaces.Dict
    """Space of ONE env's observation (a Dict of flat Boxes for dict observations)."""
    action_space: gym.spaces.Discrete | gym.spaces.Box
    """Space of ONE env's action."""
    max_episode_steps: int | None = None
    """Time limit after which an episode is truncated (``None``: none)."""
    render_fps: int = 30
    """Frames per second of real time, for videos of ``render`` frames (one frame per step)."""
    frame_channels: Mapping[str, int] = MappingProxyType({})
    """Channels of ONE frame of each image group that stacks frames (``{"camera": 3}``); stored with
    every rollout, so datasets can take the newest frame of a stack."""
    control_dt: float | None = None
    """Seconds of simulated time per ``step`` (the control period), ``None`` where the env does not
    say; stored with every rollout (datasets take their frame rate from it)."""

    @property
    def obs_shape(self) -> tuple[int, ...]:
        """Shape of one observation (ValueError for dict observations: use :attr:`obs_spec`)."""
        if isinstance(self.observation_space, gym.spaces.Dict):
            raise ValueError(f"{type(self).__name__} has dict observations; use obs_spec")
        return tuple(self.observation_space.shape)

    @property
    def obs_spec(self) -> ObsSpec:
        """Shape of one observation, or ``{key: shape}`` for dict observations."""
        space = self.observation_space
        if isinstance(space, gym.spaces.Dict):
            return {key: tuple(sub.shape or ()) for key, sub in space.spaces.items()}
        return tuple(space.shape)

    @property
    def obs_dtypes(self) -> dict[str, torch.dtype]:
        """``{key: torch.uint8}`` of the image groups of dict observations (every other key is float32)."""
        space = self.observation_space
        if not isinstance(space, gym.spaces.Dict):
            return {}
        return {key: torch.uint8 for key, sub in space.spaces.items() if sub.dtype == np.uint8}

    @property
    def action_shape(self) -> tuple[int, ...]:
        """Shape of one action: ``()`` for Discrete."""
        return tuple(self.action_space.shape or ())

    @property
    def action_dtype(self) -> torch.dtype:
        """int64 for Discrete, float32 for Box."""
        return torch.int64 if isinstance(self.action_space, gym.spaces.Discrete) else torch.float32

    @abstractmethod
    def reset(self, seed: int | None = None, group_size: int = 1) -> Obs:
        """Reset every env; return ``[N, *obs_shape]``. ``seed=None`` continues the env's RNG."""

    @abstractmethod
    def step(self, action: torch.Tensor) -> StepResult:
        """Advance every env one step, auto-resetting finished ones."""

    @abstractmethod
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue exactly from here (tensors, RNG states)."""

    @abstractmethod
    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a ``state_dict``."""

    def render(self, env_ids: list[int]) -> torch.Tensor | np.ndarray:
        """Frames ``[len(env_ids), H, W, 3]`` uint8 of envs ``env_ids`` in their current state.

        The default raises :class:`RenderUnavailable`: this env does not draw itself.
        """
        raise RenderUnavailable(f"{type(self).__name__} cannot render (it has no render method)")

    def close(self) -> None:  # noqa: B027  # optional hook, most envs hold no resources
        """Release resources (subprocesses, simulators)."""


def control_dt(env: object) -> float | None:
    """The control period of ``env`` in seconds (:attr:`BatchedEnv.control_dt`), ``None`` when unknown.

    Plugin envs that are not :class:`BatchedEnv` may set the attribute too; anything but a positive
    number counts as unknown.
    """
    value = getattr(env, "control_dt", None)
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        return None
    return float(value)
