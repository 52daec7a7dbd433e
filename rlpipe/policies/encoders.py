"""Image observations: a CNN per image group, and the encoder that turns a dict observation into one vector.

An image group is a uint8 ``[C, H, W]`` entry of a Dict observation space. A network reading
groups ``obs_keys`` gets an :class:`ObsEncoder`: each image group through its own
:class:`CNNEncoder` (``uint8 [B, C, H, W]`` / 255 → convs → Linear → ``[B, features]``), each vector
group flattened, all concatenated in ``obs_keys`` order → ``[B, in_dim]``, the input of the MLP (or
of the recurrent core). With ``policy.share_encoder`` the critic's encoder holds the actor's CNN
modules, so one CNN per group learns from both losses.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import gymnasium as gym
import numpy as np
import torch
from tensordict import TensorDict
from torch import nn

from rlpipe.config import CNNCfg, ConfigError, NetworkBlock
from rlpipe.policies.mlp import ACTIVATIONS
from rlpipe.policies.obs_keys import space_shape
from rlpipe.rollout_checks import image_problem

__all__ = ["CNNEncoder", "ObsEncoder", "build_obs_encoder", "check_obs_space", "image_keys"]


class CNNEncoder(nn.Module):
    """``uint8 [..., C, H, W]`` → ``float32 [..., features]``: scale to [0, 1], convs, flatten, Linear.

    The leading dims are flattened for the convs and restored after, so ``[B]`` and ``[B, L]``
    batches of images both work.
    """

    def __init__(self, image_shape: Sequence[int], cfg: CNNCfg, where: str) -> None:
        super().__init__()
        channels, height, width = image_shape
        layers: list[nn.Module] = []
        for out, kernel, stride in zip(cfg.channels, cfg.kernel_sizes, cfg.strides, strict=True):
            height, width = (height - kernel) // stride + 1, (width - kernel) // stride + 1
            if height <= 0 or width <= 0:
                raise ConfigError(
                    f"{where}: a {image_shape[1]}x{image_shape[2]} image is reduced to nothing "
                    f"(kernel {kernel}, stride {stride} leaves {max(height, 0)}x{max(width, 0)}); "
                    "use smaller kernel_sizes/strides or fewer layers"
                )
            layers += [nn.Conv2d(channels, out, kernel, stride), ACTIVATIONS[cfg.activation]()]
            channels = out
        self.convs = nn.Sequential(*layers)
        self.image_shape = tuple(image_shape)
        self.out = nn.Sequential(
            nn.Linear(channels * height * width, cfg.features), ACTIVATIONS[cfg.activation]()
        )
        self.features = cfg.features

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """``[..., C, H, W]`` uint8 (or float 0–255) → ``[..., features]`` float32."""
        lead = images.shape[:-3]
        x = images.reshape(-1, *self.image_shape).to(torch.float32).mul_(1.0 / 255.0)
        return self.out(self.convs(x).flatten(1)).reshape(*lead, self.features)


class ObsEncoder(nn.Module):
    """A dict observation ``[B]`` → ``[B, in_dim]``: image groups through their CNN, vectors flattened.

    ``keys``: the groups read, concatenated in this order; ``cnns``: ``{image group: CNNEncoder}``.
    """

    def __init__(
        self, keys: Sequence[str], cnns: Mapping[str, CNNEncoder], vector_dims: Mapping[str, int]
    ) -> None:
        super().__init__()
        self.keys = tuple(keys)
        self.cnns = nn.ModuleDict({_safe(k): m for k, m in cnns.items()})
        self.image_keys = frozenset(cnns)
        self.out_dim = sum(cnns[k].features if k in cnns else vector_dims[k] for k in self.keys)

    def forward(self, obs: TensorDict) -> torch.Tensor:
        """``[B, out_dim]`` float32 from the TensorDict ``obs`` ``[B]``."""
        parts = [
            self.cnns[_safe(k)](obs[k]) if k in self.image_keys else obs[k].flatten(obs.batch_dims)
            for k in self.keys
        ]
        return torch.cat(parts, dim=-1)

    def cnn(self, key: str) -> CNNEncoder:
        """The CNN of image group ``key`` (export copies it)."""
        cnn = self.cnns[_safe(key)]
        assert isinstance(cnn, CNNEncoder)
        return cnn


def image_keys(obs_space: gym.Space) -> tuple[str, ...]:
    """The image groups (uint8 Boxes) of a Dict observation space, in its order (none for a Box)."""
    if not isinstance(obs_space, gym.spaces.Dict):
        return ()
    return tuple(k for k, s in obs_space.spaces.items() if s.dtype == np.uint8)


def check_obs_space(obs_space: gym.Space) -> None:
    """``ConfigError`` naming the group for a uint8 observation group that is not ``[C, H, W]``."""
    if not isinstance(obs_space, gym.spaces.Dict):
        return  # image groups are groups of a Dict
    for key in image_keys(obs_space):
        problem = image_problem(key, space_shape(obs_space.spaces[key]), torch.uint8)
        if problem:
            raise ConfigError(f"env: {problem}")


def build_obs_encoder(
    obs_space: gym.Space,
    keys: tuple[str, ...] | None,
    block: NetworkBlock,
    where: str,
    shared: ObsEncoder | None = None,
) -> tuple[ObsEncoder | None, int]:
    """``(encoder or None, in_dim)`` of a network reading ``keys`` of ``obs_space``.

    ``None`` when the network reads no image group (it then concatenates its keys as before).
    ``where`` names the network block (``policy.actor``) in errors; ``shared``: an encoder whose
    CNNs this one reuses for the groups both read.
    """
    images = image_keys(obs_space)
    for key in block.encoders:
        if key not in images:
            known = isinstance(obs_space, gym.spaces.Dict) and key in obs_space.spaces
            problem = "is not an image group (uint8 [C, H, W])" if known else "names no observation group"
            accepted = ", ".join(images) or "none (the env has no image groups)"
            raise ConfigError(f"{where}.encoders.{key}: {problem}; image groups: {accepted}")
        if keys is not None and key not in keys:
            raise ConfigError(
                f"{where}.encoders.{key}: this network does not read {key!r} (obs_keys: {', '.join(keys)})"
            )
    read = [k for k in (keys or ()) if k in images]
    if not read:
        return None, _flat_dim(obs_space, keys)
    # image groups read: the space is a Dict and ``keys`` are the groups of it this network reads
    assert isinstance(obs_space, gym.spaces.Dict) and keys is not None
    spaces = obs_space.spaces
    cnns = {
        k: shared.cnn(k)
        if shared is not None and k in shared.image_keys
        else CNNEncoder(space_shape(spaces[k]), block.encoders.get(k, CNNCfg()), f"{where}.encoders.{k}")
        for k in read
    }
    vector_dims = {k: math.prod(space_shape(spaces[k])) for k in keys if k not in images}
    encoder = ObsEncoder(keys, cnns, vector_dims)
    return encoder, encoder.out_dim


def _flat_dim(obs_space: gym.Space, keys: tuple[str, ...] | None) -> int:
    if keys is None:
        return math.prod(space_shape(obs_space))
    assert isinstance(obs_space, gym.spaces.Dict)  # keys come from a Dict space (resolve_obs_keys)
    return sum(math.prod(space_shape(obs_space.spaces[k])) for k in keys)


def _safe(key: str) -> str:
    """ModuleDict names may not contain ``.``."""
    return key.replace(".", "__")
