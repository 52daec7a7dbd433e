"""Batched envs: the BatchedEnv contract, torch-native envs, the gymnasium adapter, the registry."""

from rlpipe.envs import cartpole, memory, pendulum  # noqa: F401  # imported to register their envs
from rlpipe.envs.base import BatchedEnv, StepResult
from rlpipe.envs.cartpole import CartPole
from rlpipe.envs.gym_adapter import GymnasiumEnv
from rlpipe.envs.memory import RepeatFirst
from rlpipe.envs.pendulum import Pendulum
from rlpipe.envs.registry import build_env, register_env, registered_env_ids
from rlpipe.envs.spaces import space_from_dict, space_to_dict
from rlpipe.envs.torch_env import TorchEnv

__all__ = [
    "space_from_dict",
    "space_to_dict",
    "BatchedEnv",
    "CartPole",
    "GymnasiumEnv",
    "Pendulum",
    "RepeatFirst",
    "StepResult",
    "TorchEnv",
    "build_env",
    "register_env",
    "registered_env_ids",
]
