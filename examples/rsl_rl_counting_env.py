"""A tiny rsl_rl-style ``VecEnv`` (the contract Isaac Lab and mjlab hand to trainers), runnable on CPU.

Train it (from the repository root): ``PYTHONPATH=. rlpipe run params.yaml
--set env.id=examples.rsl_rl_counting_env:make
--set policy.actor.obs_keys=[policy] --set policy.critic.obs_keys=[policy,critic]``.

Each env walks a point towards a target on a line: the ``policy`` group sees the position error,
the ``critic`` group also sees the target itself (privileged information). Episodes time out after
``max_episode_length`` steps (``extras["time_outs"]``); ``extras["log"]`` reports the mean error.
Isaac Lab users write the same kind of factory around ``RslRlVecEnvWrapper(gym.make(task, cfg=...))``.
"""

from __future__ import annotations

import torch
from tensordict import TensorDict

__all__ = ["PointVecEnv", "make"]


class PointVecEnv:
    """``num_envs`` points on a line; action ``[N, 1]`` moves each by up to 0.1 per step."""

    num_actions = 1

    def __init__(
        self, num_envs: int, device: str = "cpu", max_episode_length: int = 50, seed: int = 0
    ) -> None:
        self.num_envs, self.device = num_envs, torch.device(device)
        self.max_episode_length, self.cfg = max_episode_length, {}
        self.generator = torch.Generator(device=self.device).manual_seed(seed)
        self.episode_length_buf = torch.zeros(num_envs, dtype=torch.long, device=self.device)
        self.position = torch.zeros(num_envs, device=self.device)
        self.target = self._draw(num_envs)

    def seed(self, seed: int) -> None:
        """Re-seed the target generator (rlpipe calls it on its seeded resets)."""
        self.generator.manual_seed(seed)

    def reset(self) -> tuple[TensorDict, dict]:
        """Restart every env."""
        self._restart(torch.ones(self.num_envs, dtype=torch.bool, device=self.device))
        return self.get_observations(), {}

    def get_observations(self) -> TensorDict:
        """Groups ``policy`` ``[N, 1]`` (position error) and ``critic`` ``[N, 2]`` (+ target)."""
        error = (self.target - self.position).unsqueeze(-1)
        return TensorDict(
            {"policy": error, "critic": torch.cat([error, self.target.unsqueeze(-1)], -1)},
            batch_size=[self.num_envs],
            device=self.device,
        )

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        """Move, reward ``-|error|``, time out and restart finished envs (rsl_rl's contract)."""
        self.position += 0.1 * actions[:, 0].clamp(-1, 1)
        error = (self.target - self.position).abs()
        self.episode_length_buf += 1
        time_outs = self.episode_length_buf >= self.max_episode_length
        reward = -error
        extras = {"time_outs": time_outs, "log": {"/error": error.mean()}}
        self._restart(time_outs)
        return self.get_observations(), reward, time_outs.long(), extras

    def _restart(self, rows: torch.Tensor) -> None:
        self.episode_length_buf[rows] = 0
        self.position[rows] = 0.0
        self.target = torch.where(rows, self._draw(self.num_envs), self.target)

    def _draw(self, n: int) -> torch.Tensor:
        return torch.rand(n, generator=self.generator, device=self.device) * 2 - 1


def make(num_envs: int, device: str = "cpu", max_episode_length: int = 50) -> PointVecEnv:
    """The factory ``env.id: examples.rsl_rl_counting_env:make`` calls."""
    return PointVecEnv(num_envs, device, max_episode_length)
