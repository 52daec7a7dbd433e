"""Batched envs: the BatchedEnv contract, torch-native envs, the gymnasium adapter, the registry.

Names are resolved on first use (PEP 562), so ``rlpipe envs`` lists ids without importing torch;
the registry loads the built-in torch envs (CartPole, Pendulum, RepeatFirst) when it is asked.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "space_from_dict": "spaces",
    "space_to_dict": "spaces",
    "BatchedEnv": "base",
    "StepResult": "base",
    "CartPole": "cartpole",
    "GymnasiumEnv": "gym_adapter",
    "Pendulum": "pendulum",
    "RepeatFirst": "memory",
    "TorchEnv": "torch_env",
    "build_env": "registry",
    "register_env": "registry",
    "registered_env_ids": "registry",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rlpipe.envs' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"rlpipe.envs.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
