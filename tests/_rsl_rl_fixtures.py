"""A small rsl_rl ``VecEnv`` and the ``train_cfg`` Isaac Lab's ``RslRlOnPolicyRunnerCfg().to_dict()`` gives.

Used by tests/rsl_rl: the drop-in runner against rsl_rl 5.x's own on the same env and config.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from rsl_rl.env import VecEnv
from tensordict import TensorDict

NUM_ENVS, NUM_ACTIONS, LENGTH = 6, 2, 10
DELETE = object()
"""A :func:`train_cfg` change that removes the key."""


class ReachVecEnv(VecEnv):
    """``num_envs`` points in the plane moving towards a target; resets itself, as Isaac Lab's envs do.

    Groups: ``policy`` ``[N, 2]`` (the error to the target), ``critic`` ``[N, 4]`` (+ the target).
    Actions ``[N, 2]`` move a point by up to 0.1; an episode times out after ``LENGTH`` steps and
    terminates when a point leaves the unit box.
    """

    def __init__(self, num_envs: int = NUM_ENVS, device: str = "cpu", seed: int = 0) -> None:
        self.num_envs, self.num_actions, self.device = num_envs, NUM_ACTIONS, device
        self.max_episode_length, self.cfg = LENGTH, {"task": "reach"}
        self.generator = torch.Generator().manual_seed(seed)
        self.episode_length_buf = torch.zeros(num_envs, dtype=torch.long)
        self.position = torch.zeros(num_envs, 2)
        self.target = self._draw(num_envs)

    def get_observations(self) -> TensorDict:
        error = self.target - self.position
        return TensorDict(
            {"policy": error, "critic": torch.cat([error, self.target], -1)}, batch_size=[self.num_envs]
        )

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        self.position += 0.1 * actions.clamp(-1, 1)
        reward = -(self.target - self.position).norm(dim=-1)
        self.episode_length_buf += 1
        time_outs = self.episode_length_buf >= self.max_episode_length
        terminated = (self.position.abs() > 1).any(-1)
        dones = time_outs | terminated
        self.episode_length_buf[dones] = 0
        self.position[dones] = 0.0
        self.target = torch.where(dones.unsqueeze(-1), self._draw(self.num_envs), self.target)
        extras = {"time_outs": time_outs, "log": {"/reward": reward.mean()}}
        return self.get_observations(), reward, dones.long(), extras

    def _draw(self, n: int) -> torch.Tensor:
        return torch.rand(n, 2, generator=self.generator) * 1.6 - 0.8


ISAACLAB_TRAIN_CFG: dict[str, Any] = {
    "seed": 7,
    "device": "cpu",
    "num_steps_per_env": 8,
    "max_iterations": 3,
    "obs_groups": {"actor": ["policy"], "critic": ["policy", "critic"]},
    "clip_actions": None,
    "save_interval": 2,
    "experiment_name": "reach",
    "run_name": "",
    "logger": "tensorboard",
    "neptune_project": "isaaclab",
    "wandb_project": "isaaclab",
    "resume": False,
    "load_run": ".*",
    "load_checkpoint": "model_.*.pt",
    "class_name": "OnPolicyRunner",
    "actor": {
        "class_name": "MLPModel",
        "hidden_dims": [16, 16],
        "activation": "elu",
        "obs_normalization": True,
        "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 0.8, "std_type": "scalar"},
    },
    "critic": {
        "class_name": "MLPModel",
        "hidden_dims": [16, 16],
        "activation": "elu",
        "obs_normalization": True,
        "distribution_cfg": None,
    },
    "algorithm": {
        "class_name": "PPO",
        "num_learning_epochs": 2,
        "num_mini_batches": 2,
        "learning_rate": 1.0e-3,
        "schedule": "adaptive",
        "gamma": 0.99,
        "lam": 0.95,
        "entropy_coef": 0.005,
        "desired_kl": 0.01,
        "max_grad_norm": 1.0,
        "optimizer": "adam",
        "value_loss_coef": 1.0,
        "use_clipped_value_loss": True,
        "clip_param": 0.2,
        "normalize_advantage_per_mini_batch": False,
        "share_cnn_encoders": False,
        "rnd_cfg": None,
        "symmetry_cfg": None,
    },
}
"""Isaac Lab's rsl_rl 5.x runner config, as ``to_dict()`` writes it, sized for a test."""


def train_cfg(**changes: Any) -> dict[str, Any]:
    """A copy of :data:`ISAACLAB_TRAIN_CFG` changed (``algorithm__clip_param=0.1``; ``DELETE`` removes)."""
    cfg = copy.deepcopy(ISAACLAB_TRAIN_CFG)
    for path, value in changes.items():
        *parents, last = path.split("__")
        node = cfg
        for part in parents:
            node = node[part]
        if value is DELETE:
            del node[last]
        else:
            node[last] = value
    return cfg
