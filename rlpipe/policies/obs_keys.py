"""Dict observations: which keys each network reads (``policy.actor.obs_keys`` / ``critic.obs_keys``).

An env with a Dict observation space hands the policy a ``TensorDict`` ``[B]`` of flat
``[B, dim]`` entries. Each network reads the concatenation of its keys, in the configured order
(``null``: every key, sorted), so an asymmetric actor-critic — the critic sees privileged state —
is one line of params. Flat (Box) observations pass through unchanged and accept no keys.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import gymnasium as gym
import numpy as np
import torch
from tensordict import TensorDict
from torch import nn

from rlpipe.config import ConfigError
from rlpipe.policies.normalizer import ObsNormalizer

__all__ = ["DictObsNormalizer", "resolve_obs_keys", "select_obs", "space_shape"]


def space_shape(space: gym.Space) -> tuple[int, ...]:
    """The shape of a Box (every flat observation and observation group is one) or a Discrete.

    gymnasium types ``Space.shape`` optional for the spaces without one (a ``Dict``): ValueError then.
    """
    if space.shape is None:
        raise ValueError(f"a {type(space).__name__} space has no shape; accepted: a Box")
    return space.shape


def resolve_obs_keys(
    obs_space: gym.Space, keys: Sequence[str] | None, where: str
) -> tuple[tuple[str, ...] | None, int]:
    """``(keys or None for a Box, input dim)`` of one network; ``where`` names the config key.

    Raises ConfigError for keys on a Box space, unknown keys, duplicates or an empty list.
    """
    if not isinstance(obs_space, gym.spaces.Dict):
        if keys is not None:
            raise ConfigError(f"{where}: the env's observations are not a dict; remove obs_keys")
        return None, math.prod(space_shape(obs_space))
    available = sorted(obs_space.spaces)
    chosen = tuple(available if keys is None else keys)
    unknown = [k for k in chosen if k not in obs_space.spaces]
    if unknown or not chosen or len(set(chosen)) != len(chosen):
        problem = f"unknown key {unknown[0]!r}" if unknown else "needs distinct keys"
        raise ConfigError(f"{where}: {problem}; accepted: {', '.join(available)}")
    return chosen, sum(math.prod(space_shape(obs_space.spaces[k])) for k in chosen)


def select_obs(obs: torch.Tensor | TensorDict, keys: tuple[str, ...] | None) -> torch.Tensor:
    """``[B, sum(dims)]``: the entries ``keys`` of ``obs`` concatenated (a tensor passes through)."""
    if keys is None:
        return obs
    assert not isinstance(obs, torch.Tensor), "keys select groups of a dict observation"
    return torch.cat([obs[k].flatten(1) for k in keys], dim=-1)


class DictObsNormalizer(nn.Module):
    """One :class:`~rlpipe.policies.normalizer.ObsNormalizer` per key of a Dict observation space.

    ``forward`` maps a TensorDict ``[B]`` to a normalized TensorDict (only the keys it knows);
    ``update`` merges every key's statistics. Image groups (uint8) pass through unchanged: their
    encoder scales them.
    """

    def __init__(self, obs_space: gym.spaces.Dict) -> None:
        super().__init__()
        self.images = [k for k, s in obs_space.spaces.items() if s.dtype == np.uint8]
        self.keys = [k for k in obs_space.spaces if k not in self.images]
        self.per_key = nn.ModuleDict(
            {_safe(k): ObsNormalizer(space_shape(obs_space.spaces[k])) for k in self.keys}
        )

    def forward(self, obs: TensorDict) -> TensorDict:
        """Normalized and clipped copy of ``obs`` ``[B]`` (image groups as they are)."""
        fields = {k: self.per_key[_safe(k)](obs[k]) for k in self.keys} | {k: obs[k] for k in self.images}
        return TensorDict(fields, batch_size=obs.batch_size, device=obs.device)

    @torch.no_grad()
    def update(self, obs: TensorDict) -> None:
        """Merge every sample of ``obs`` (any batch shape) into each key's statistics."""
        for key in self.keys:
            self.normalizer(key).update(obs[key])

    def normalizer(self, key: str) -> ObsNormalizer:
        """The normalizer of vector group ``key``."""
        normalizer = self.per_key[_safe(key)]
        assert isinstance(normalizer, ObsNormalizer)
        return normalizer


def _safe(key: str) -> str:
    """ModuleDict names may not contain ``.`` (nested observation keys are joined with it)."""
    return key.replace(".", "__")
