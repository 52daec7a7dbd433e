"""rsl_rl-style vector envs (Isaac Lab, mjlab) behind the :class:`~rlpipe.envs.base.BatchedEnv` contract.

rsl_rl's ``VecEnv`` contract: ``get_observations()`` → TensorDict ``[N]`` of observation groups;
``step(actions [N, num_actions])`` → ``(obs, rewards [N], dones [N], extras)`` with
``extras["time_outs"]`` ``[N]`` (done by a time limit) and ``extras["log"]`` (scalars or tensors
to average). The env resets finished envs itself and never exposes the final observation.

``RslRlEnv`` maps the groups to a Dict observation space (``policy.actor.obs_keys`` /
``policy.critic.obs_keys`` pick groups: asymmetric actor-critic), keeps tensors on the env's
device, and marks time-outs as ``truncated`` with ``final_obs`` = the observation the last action
was taken in: the value of that observation is the only bootstrap available (rsl_rl does the
same), so the bootstrap is approximate (:attr:`bootstrap` = ``"approximate"``, recorded in every
rollout's attributes). ``extras["log"]`` values are averaged over a rollout and reported as
``env/<key>`` metrics (:meth:`pop_metrics`).

Resume: the simulator's state lives in the simulator; :meth:`load_state_dict` continues from the
env's current state (``last_obs``), so a resumed run is not bit-identical.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from tensordict import TensorDict

from rlpipe.envs.base import BatchedEnv, StepResult

__all__ = ["RslRlEnv", "is_rsl_rl_env"]

LOG_KEYS = ("log", "episode")
"""``extras`` entries averaged into metrics (``episode`` is older Isaac Lab's name for ``log``)."""


def is_rsl_rl_env(env: Any) -> bool:
    """Duck-typed check of the rsl_rl ``VecEnv`` contract."""
    return all(hasattr(env, name) for name in ("get_observations", "step", "num_envs", "num_actions"))


class RslRlEnv(BatchedEnv):
    """Wraps an rsl_rl ``VecEnv``; observations are a TensorDict ``[N]`` of flat ``[N, dim]`` groups."""

    bootstrap = "approximate"

    def __init__(self, env: Any, device: torch.device | str | None = None) -> None:
        self.env = env
        self.num_envs = int(env.num_envs)
        self.device = torch.device(device if device is not None else env.device)
        obs = self._convert(env.get_observations())
        spaces: dict[str, gym.spaces.Space] = {
            str(key): gym.spaces.Box(-np.inf, np.inf, (int(obs[key].shape[-1]),), np.float32)
            for key in obs.keys()  # flat groups: every key is a str
        }
        self.observation_space = gym.spaces.Dict(spaces)
        self.action_space = gym.spaces.Box(-np.inf, np.inf, (int(env.num_actions),), np.float32)
        length = getattr(env, "max_episode_length", None)
        self.max_episode_steps = int(length) if isinstance(length, int | float) else None
        self._obs = obs
        self.last_obs: TensorDict | None = None
        self._log_sums: dict[str, torch.Tensor] = {}
        self._log_counts: dict[str, int] = {}

    def reset(self, seed: int | None = None, group_size: int = 1) -> TensorDict:
        """Seed (``env.seed(seed)`` when the env has it) and reset (``env.reset()`` when it has it).

        rsl_rl envs reset themselves; without a ``reset`` method the current observations are
        returned. Group resets (``group_size > 1``) are not supported (ValueError).
        """
        if group_size != 1:
            raise ValueError("group_size: rsl_rl-style envs cannot start groups identically; use 1")
        if seed is not None and callable(getattr(self.env, "seed", None)):
            self.env.seed(seed)
        if callable(getattr(self.env, "reset", None)):
            result = self.env.reset()
            obs = result[0] if isinstance(result, tuple) else result
            self._obs = self._convert(obs if obs is not None else self.env.get_observations())
        else:
            self._obs = self._convert(self.env.get_observations())
        return self._obs

    def step(self, action: torch.Tensor) -> StepResult:
        """Step; ``done & time_outs`` → truncated (``final_obs``: the pre-step observation)."""
        obs, reward, dones, extras = self.env.step(action.to(self.env.device))
        obs = self._convert(obs)
        done = dones.to(self.device).bool().reshape(self.num_envs)
        time_outs = extras.get("time_outs")
        timeout = (
            done & time_outs.to(self.device).bool().reshape(self.num_envs)
            if time_outs is not None
            else torch.zeros_like(done)
        )
        keep = done.unsqueeze(-1)
        final = TensorDict(
            {k: torch.where(keep, self._obs[k], obs[k]) for k in obs.keys()},
            batch_size=[self.num_envs],
            device=self.device,
        )
        self._accumulate(extras)
        self._obs = obs
        return StepResult(
            obs=obs,
            reward=reward.to(self.device, torch.float32).reshape(self.num_envs),
            terminated=done & ~timeout,
            truncated=timeout,
            final_obs=final,
            info=self._info(extras),
        )

    def pop_metrics(self) -> dict[str, float]:
        """``{"env/<key>": mean}`` of ``extras["log"]`` since the last call (one host sync per key)."""
        metrics = {
            f"env/{key.strip('/')}": float(total) / self._log_counts[key]
            for key, total in self._log_sums.items()
        }
        self._log_sums, self._log_counts = {}, {}
        return metrics

    def state_dict(self) -> dict[str, Any]:
        """Nothing: the simulator's state cannot be captured through the VecEnv contract."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from the simulator's current state (``last_obs``); see the module docstring."""
        self.last_obs = self._obs = self._convert(self.env.get_observations())

    def close(self) -> None:
        """Close the wrapped env when it has ``close``."""
        if callable(getattr(self.env, "close", None)):
            self.env.close()

    def _convert(self, obs: Any) -> TensorDict:
        """Groups → flat float32 ``[N, dim]`` entries on the device; a bare tensor → group ``policy``."""
        if isinstance(obs, torch.Tensor):
            obs = {"policy": obs}
        fields = {
            key: value.to(self.device, torch.float32).reshape(self.num_envs, -1) for key, value in obs.items()
        }
        return TensorDict(fields, batch_size=[self.num_envs], device=self.device)

    def _accumulate(self, extras: dict[str, Any]) -> None:
        for name in LOG_KEYS:
            for key, value in (extras.get(name) or {}).items():
                mean = value.float().mean() if isinstance(value, torch.Tensor) else torch.tensor(float(value))
                self._log_sums[key] = self._log_sums.get(key, 0.0) + mean.to(self.device)
                self._log_counts[key] = self._log_counts.get(key, 0) + 1

    def _info(self, extras: dict[str, Any]) -> dict[str, torch.Tensor]:
        success = extras.get("success", extras.get("is_success"))
        if isinstance(success, torch.Tensor) and success.numel() == self.num_envs:
            return {"success": success.to(self.device).reshape(self.num_envs) > 0.5}
        return {}
