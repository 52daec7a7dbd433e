"""Image augmentation of update minibatches: random shifts (DrQ), drawn from the update's generator.

Kostrikov, Yarats & Fergus 2020, arXiv:2004.13649: pad each image by 4 pixels with copies of its
edge and crop it back at a random offset, independently per sample. The crop is one gather with
clamped indices (edge padding without a padded copy); the images stay uint8.
"""

from __future__ import annotations

import torch
from tensordict import TensorDict

from rlpipe.rollout import IMAGE_DTYPE, IMAGE_RANK

__all__ = ["SHIFT_PAD", "random_shift", "shift_images"]

SHIFT_PAD = 4
"""Pixels of edge padding: offsets are drawn from ``[-4, 4]`` per axis."""


def random_shift(images: torch.Tensor, generator: torch.Generator, pad: int = SHIFT_PAD) -> torch.Tensor:
    """``[..., C, H, W]`` images, each shifted by its own offset in ``[-pad, pad]`` (edges repeated).

    Two draws per image (rows, then columns offsets, ``[M, 2]`` for the M images) from ``generator``.
    """
    *lead, channels, height, width = images.shape
    flat = images.reshape(-1, channels, height, width)
    count, device = flat.shape[0], flat.device
    offsets = torch.randint(-pad, pad + 1, (count, 2), generator=generator, device=device)
    rows = (offsets[:, :1] + torch.arange(height, device=device)).clamp_(0, height - 1)  # [M, H]
    cols = (offsets[:, 1:] + torch.arange(width, device=device)).clamp_(0, width - 1)  # [M, W]
    index = torch.arange(count, device=device).view(-1, 1, 1, 1)
    shifted = flat[
        index,
        torch.arange(channels, device=device).view(1, -1, 1, 1),
        rows.view(count, 1, height, 1),
        cols.view(count, 1, 1, width),
    ]
    return shifted.reshape(*lead, channels, height, width)


def shift_images(minibatch: TensorDict, generator: torch.Generator) -> TensorDict:
    """``minibatch`` with every image group of ``obs`` (uint8 ``[B, ..., C, H, W]``) randomly shifted.

    The entries are replaced, never written in place (a minibatch may view the update's batch).
    """
    obs = minibatch.get("obs")
    if not isinstance(obs, TensorDict):
        return minibatch
    obs = obs.clone(recurse=False)  # a new TensorDict over the same tensors: the batch's stays as it is
    for key, value in list(obs.items()):
        if isinstance(value, torch.Tensor) and value.dtype == IMAGE_DTYPE and value.dim() > IMAGE_RANK:
            obs.set(key, random_shift(value, generator))
    minibatch.set("obs", obs)
    return minibatch
