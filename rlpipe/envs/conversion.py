"""Simulator observations and actions → rlpipe's flat float32 spaces and torch tensors (all backends).

rlpipe envs speak flat float32 observations: a Box observation becomes ``[N, prod(shape)]``; a
Dict observation becomes a ``TensorDict`` ``[N]`` with one flat ``[N, dim]`` entry per key
(nested dicts are flattened with ``/``-free keys joined by ``.``).

Images stay images: a uint8 Box of rank 3 (``[C, H, W]`` channels first, as envpool's Atari frame
stacks and ``from_pixels`` observations are) is an image group, kept uint8 ``[N, C, H, W]``; a bare
image observation becomes the group ``pixels`` of a ``TensorDict``. Channels-last images are not
guessed at: an image group must have its channels first.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, TypeAlias, TypeGuard

import gymnasium as gym
import numpy as np
import torch
from tensordict import TensorDict

__all__ = [
    "IMAGE_GROUP",
    "HostObs",
    "flat_action_space",
    "flat_obs_space",
    "is_image_space",
    "obs_to_torch",
    "success_of",
]

HostObs: TypeAlias = "np.ndarray | Mapping[str, HostObs]"
"""A simulator's batched observation on the host: an array ``[N, *obs]`` or a (nested) dict of them."""

F32_MAX = float(np.finfo(np.float32).max)
SUCCESS_KEYS = ("success", "is_success")
"""Info keys read as the per-step success flag when the env config names none."""
IMAGE_GROUP = "pixels"
"""The group name of a bare image observation."""


def is_image_space(space: gym.Space) -> TypeGuard[gym.spaces.Box]:
    """A uint8 Box of rank 3: an image ``[C, H, W]``."""
    return isinstance(space, gym.spaces.Box) and space.dtype == np.uint8 and len(space.shape) == 3


def flat_obs_space(space: gym.Space, env_id: str) -> gym.spaces.Box | gym.spaces.Dict:
    """A flat float32 Box, or a Dict of flat float32 Boxes and uint8 images (one per leaf key)."""
    if is_image_space(space):
        return gym.spaces.Dict({IMAGE_GROUP: _image_box(space)})
    if isinstance(space, gym.spaces.Box):
        return _flat_box(space)
    if isinstance(space, gym.spaces.Dict):
        leaves = dict(_dict_leaves(space, env_id))
        return gym.spaces.Dict(
            {key: _image_box(box) if is_image_space(box) else _flat_box(box) for key, box in leaves.items()}
        )
    raise ValueError(
        f"env.id: {env_id} has a {type(space).__name__} observation space; accepted: Box, Dict of Boxes"
    )


def flat_action_space(space: gym.Space, env_id: str) -> gym.spaces.Box | gym.spaces.Discrete:
    """The action space with Box bounds as float32 (envpool reports float64 bounds)."""
    if isinstance(space, gym.spaces.Discrete):
        return gym.spaces.Discrete(int(space.n))
    if isinstance(space, gym.spaces.Box):
        return gym.spaces.Box(space.low.astype(np.float32), space.high.astype(np.float32), dtype=np.float32)
    raise ValueError(f"env.id: {env_id} has a {type(space).__name__} action space; accepted: Box, Discrete")


def obs_to_torch(obs: HostObs, num_envs: int, device: torch.device) -> torch.Tensor | TensorDict:
    """Batched numpy obs (array or nested dict of arrays) → flat float32 tensor(s) on ``device``.

    Images (uint8 ``[N, C, H, W]``) stay uint8 and keep their shape; a bare image batch becomes the
    ``pixels`` entry of a ``TensorDict`` ``[N]``.
    """
    if isinstance(obs, Mapping):
        fields = {key: _flat(value, num_envs, device) for key, value in _leaves(obs)}
        return TensorDict(fields, batch_size=[num_envs], device=device)
    if _is_image_batch(obs):
        return TensorDict({IMAGE_GROUP: _flat(obs, num_envs, device)}, batch_size=[num_envs], device=device)
    return _flat(obs, num_envs, device)


def success_of(info: Mapping[str, Any], key: str | None, device: torch.device) -> dict[str, torch.Tensor]:
    """``{"success": [N] bool}`` from a step's ``info`` (``key`` or the usual names), else ``{}``."""
    names = (key,) if key else SUCCESS_KEYS
    for name in names:
        if name in info:
            flag = np.asarray(info[name]) > 0.5
            return {"success": torch.from_numpy(flag).to(device)}
    return {}


def _is_image_batch(value: object) -> bool:
    return isinstance(value, np.ndarray) and value.dtype == np.uint8 and value.ndim == 4


def _flat(value: np.ndarray, num_envs: int, device: torch.device) -> torch.Tensor:
    if _is_image_batch(value):  # a copy: the simulator may reuse its buffer on the next step
        images = torch.from_numpy(np.array(value, dtype=np.uint8))
        return images if device.type == "cpu" else images.to(device)
    flat = torch.from_numpy(np.asarray(value, dtype=np.float32).reshape(num_envs, -1))
    return flat if device.type == "cpu" else flat.to(device)


def _image_box(space: gym.spaces.Box) -> gym.spaces.Box:
    """The image group's space: uint8 ``[C, H, W]`` in [0, 255]."""
    return gym.spaces.Box(0, 255, tuple(int(d) for d in space.shape), np.uint8)


def _flat_box(space: gym.spaces.Box) -> gym.spaces.Box:
    """Flat float32 Box; bounds that do not fit float32 (dm_control's 2e-308..2e308) are ±inf."""
    size = math.prod(space.shape)
    low, high = np.asarray(space.low).reshape(size), np.asarray(space.high).reshape(size)
    bogus = (np.abs(low) > F32_MAX) | (np.abs(high) > F32_MAX) | (low >= high)
    low = np.where(bogus, -np.inf, low).astype(np.float32)
    high = np.where(bogus, np.inf, high).astype(np.float32)
    return gym.spaces.Box(low, high, (size,), np.float32)


def _dict_leaves(space: gym.spaces.Dict, env_id: str, prefix: str = "") -> list[tuple[str, gym.spaces.Box]]:
    leaves: list[tuple[str, gym.spaces.Box]] = []
    for key, sub in space.spaces.items():
        name = f"{prefix}{key}"
        if isinstance(sub, gym.spaces.Dict):
            leaves.extend(_dict_leaves(sub, env_id, f"{name}."))
        elif isinstance(sub, gym.spaces.Box):
            leaves.append((name, sub))
        else:
            raise ValueError(
                f"env.id: {env_id} observation key {name!r} is a {type(sub).__name__}; accepted: Box"
            )
    return leaves


def _leaves(obs: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    leaves: list[tuple[str, Any]] = []
    for key, value in obs.items():
        if isinstance(value, Mapping):
            leaves.extend(_leaves(value, f"{prefix}{key}."))
        else:
            leaves.append((f"{prefix}{key}", value))
    return leaves
