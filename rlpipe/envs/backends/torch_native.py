"""Base of torch-native envs: batched state on the device, one generator, auto-reset done once.

A subclass describes ONE task with three small pure pieces, each batched over the leading dim:

* ``_initial_state(n, generator)`` → ``[n, S]`` fresh start states (physics dtype, on the device);
* ``_dynamics(state, action)`` → ``(next_state [N, S], reward [N] float32, terminated [N] bool)``;
* ``_observe(state)`` → ``[N, *obs_shape]`` float32.

:class:`TorchEnv` turns them into a :class:`~rlpipe.envs.base.BatchedEnv`: time limits, auto-reset,
group resets and bit-exact ``state_dict`` round trips. ``step`` never loops over envs and never
syncs with the host: fresh start states are drawn for all N envs every step and selected with
``torch.where`` where an episode ended.

Constructor arguments follow one convention so the registry can turn mistakes into config errors:
an invalid value raises ``ValueError("<argument>: got X; accepted: …")``.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

import gymnasium as gym
import torch

from rlpipe.envs.base import BatchedEnv, StepResult

__all__ = ["PHYSICS_DTYPES", "TorchEnv", "num_groups"]

PHYSICS_DTYPES: dict[str, torch.dtype] = {"float32": torch.float32, "float64": torch.float64}
"""Accepted ``physics_dtype`` names and the internal state dtype each selects."""

DEFAULT_SEED = 0
"""Seed of the generator at construction, so an env used without ``reset(seed)`` is reproducible."""


class TorchEnv(BatchedEnv):
    """N envs whose physics state ``[N, S]`` lives on ``device``; subclasses give the pure pieces.

    Attributes:
        state: ``[N, S]`` physics state in ``dtype``.
        elapsed: ``[N]`` int64 steps taken in the current episode.
        generator: ``torch.Generator`` on ``device``; the only source of randomness.
        dtype: internal physics dtype (observations are float32 regardless).
    """

    state_dim: int
    """S: size of one env's physics state."""

    def __init__(
        self,
        num_envs: int,
        device: torch.device | str,
        max_episode_steps: int | None,
        physics_dtype: str = "float32",
    ) -> None:
        self.num_envs = _check_num_envs(num_envs)
        self.device = torch.device(device)
        self.max_episode_steps = _check_max_episode_steps(max_episode_steps)
        self.dtype = _check_physics_dtype(physics_dtype)
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(DEFAULT_SEED)
        self.state = self._initial_state(self.num_envs, self.generator)
        self.elapsed = torch.zeros(self.num_envs, dtype=torch.int64, device=self.device)

    # ------------------------------------------------------------------ subclass pieces

    @abstractmethod
    def _initial_state(self, n: int, generator: torch.Generator) -> torch.Tensor:
        """Draw ``n`` start states ``[n, S]`` (``self.dtype``, on the device) from ``generator``."""

    @abstractmethod
    def _dynamics(
        self, state: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Step ``[N, S]`` by ``action`` → ``(next_state [N, S], reward [N], terminated [N])``."""

    @abstractmethod
    def _observe(self, state: torch.Tensor) -> torch.Tensor:
        """Observation of ``state`` ``[N, S]`` → ``[N, *obs_shape]`` float32."""

    # ------------------------------------------------------------------ BatchedEnv API

    def reset(self, seed: int | None = None, group_size: int = 1) -> torch.Tensor:
        """Start a new episode in every env; return ``obs`` ``[N, *obs_shape]`` float32.

        ``seed`` re-seeds the generator (``None`` continues it). With ``group_size=k`` the envs
        ``[g*k, (g+1)*k)`` share one start state; ``k`` must divide ``num_envs`` (else ValueError).
        Auto-resets inside ``step`` draw independent start states per env.
        """
        groups = num_groups(self.num_envs, group_size)
        if seed is not None:
            self.generator.manual_seed(seed)
        starts = self._initial_state(groups, self.generator)
        self.state = starts.repeat_interleave(group_size, dim=0)
        self.elapsed = torch.zeros(self.num_envs, dtype=torch.int64, device=self.device)
        return self._observe(self.state)

    def step(self, action: torch.Tensor) -> StepResult:
        """Advance all envs one step; ``action`` ``[N]`` int64 or ``[N, *act_shape]`` float32.

        ``truncated`` is ``elapsed >= max_episode_steps`` (it may coincide with ``terminated``,
        as with gymnasium's ``TimeLimit``). Done envs restart from a fresh start state;
        ``final_obs`` is the observation of the state the episode ended in.
        """
        action = self._check_action(action)
        next_state, reward, terminated = self._dynamics(self.state, action)
        elapsed = self.elapsed + 1
        truncated = self._time_limit(elapsed)
        done = terminated | truncated
        final_obs = self._observe(next_state)
        fresh = self._initial_state(self.num_envs, self.generator)
        self.state = torch.where(done.unsqueeze(-1), fresh, next_state)
        self.elapsed = elapsed.masked_fill(done, 0)
        return StepResult(self._observe(self.state), reward, terminated, truncated, final_obs)

    def state_dict(self) -> dict[str, Any]:
        """Physics state ``[N, S]``, ``elapsed`` ``[N]`` and the generator state (copies)."""
        return {
            "state": self.state.clone(),
            "elapsed": self.elapsed.clone(),
            "generator": self.generator.get_state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a :meth:`state_dict`; the following steps equal the original run bit for bit."""
        physics = state["state"]
        expected = (self.num_envs, self.state_dim)
        if tuple(physics.shape) != expected or physics.dtype != self.dtype:
            raise ValueError(
                f"state_dict holds a {physics.dtype} state of shape {tuple(physics.shape)}; "
                f"this env needs {self.dtype} {expected}"
            )
        self.state = physics.to(self.device).clone()
        self.elapsed = state["elapsed"].to(self.device, torch.int64).clone()
        self.generator.set_state(state["generator"].cpu())

    # ------------------------------------------------------------------ helpers

    def _uniform(self, n: int, low: torch.Tensor, high: torch.Tensor) -> torch.Tensor:
        """``[n, S]`` uniform in ``[low, high)`` per column; ``low``/``high``: ``[S]``."""
        u = torch.rand(n, self.state_dim, generator=self.generator, device=self.device, dtype=self.dtype)
        return low + (high - low) * u

    def _constant(self, values: list[float]) -> torch.Tensor:
        """Return ``values`` as a ``[len(values)]`` tensor in the physics dtype on the device."""
        return torch.tensor(values, dtype=self.dtype, device=self.device)

    def _time_limit(self, elapsed: torch.Tensor) -> torch.Tensor:
        """``[N]`` bool: episodes that reached ``max_episode_steps``."""
        if self.max_episode_steps is None:
            return torch.zeros_like(elapsed, dtype=torch.bool)
        return elapsed >= self.max_episode_steps

    def _check_action(self, action: torch.Tensor) -> torch.Tensor:
        """Check the action's shape (no host sync) and move it to the device.

        Discrete: ``[N]`` (``[N, 1]`` is accepted and flattened). Box: ``[N, *act_shape]``.
        """
        expected = (self.num_envs, *self.action_shape)
        shape = tuple(action.shape)
        if isinstance(self.action_space, gym.spaces.Discrete) and shape == (self.num_envs, 1):
            action = action.reshape(self.num_envs)
        elif shape != expected:
            raise ValueError(f"action of shape {shape}; {type(self).__name__} needs {expected}")
        return action.to(self.device)


def _check_num_envs(num_envs: int) -> int:
    if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
        raise ValueError(f"num_envs: got {num_envs!r}; accepted: an int >= 1")
    return num_envs


def _check_max_episode_steps(value: int | None) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"max_episode_steps: got {value!r}; accepted: an int >= 1 or null")
    return value


def _check_physics_dtype(name: str) -> torch.dtype:
    if name not in PHYSICS_DTYPES:
        raise ValueError(f"physics_dtype: got {name!r}; accepted: {', '.join(PHYSICS_DTYPES)}")
    return PHYSICS_DTYPES[name]


def num_groups(num_envs: int, group_size: int) -> int:
    """Return ``num_envs // group_size``; ValueError unless ``group_size`` >= 1 divides it."""
    if group_size < 1 or num_envs % group_size:
        raise ValueError(f"group_size {group_size} must be >= 1 and divide num_envs {num_envs}")
    return num_envs // group_size
