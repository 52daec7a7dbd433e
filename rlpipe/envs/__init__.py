"""Batched envs: the BatchedEnv contract, torch-native envs, the gymnasium adapter, the registry.

Names are imported on first use, so ``rlpipe envs`` and ``rlpipe --help`` never import torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "BatchedEnv": "rlpipe.envs.base",
    "StepResult": "rlpipe.envs.base",
    "control_dt": "rlpipe.envs.base",
    "CartPole": "rlpipe.envs.tasks.cartpole",
    "GymnasiumEnv": "rlpipe.envs.backends.gym_adapter",
    "Pendulum": "rlpipe.envs.tasks.pendulum",
    "PushCube": "rlpipe.envs.tasks.push_cube.env",
    "RepeatFirst": "rlpipe.envs.tasks.memory",
    "TorchEnv": "rlpipe.envs.backends.torch_native",
    "RenderUnavailable": "rlpipe.envs.rendering",
    "build_env": "rlpipe.envs.registry",
    "build_eval_env": "rlpipe.envs.registry",
    "register_env": "rlpipe.envs.registry",
    "registered_env_ids": "rlpipe.envs.registry",
    "space_from_dict": "rlpipe.envs.spaces",
    "space_to_dict": "rlpipe.envs.spaces",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'rlpipe.envs' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
