"""Frozen copies of networks (GRPO's reference, the off-policy targets) and the targets' Polyak step."""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import TypeVar

import torch
from torch import nn

__all__ = ["frozen_copy", "polyak_update"]

ModuleT = TypeVar("ModuleT", bound=nn.Module)


def frozen_copy(module: ModuleT) -> ModuleT:
    """A copy of ``module`` in eval mode whose parameters take no gradient."""
    frozen = copy.deepcopy(module).eval()
    for param in frozen.parameters():
        param.requires_grad_(False)
    return frozen


def polyak_update(pairs: Iterable[tuple[nn.Module, nn.Module]], tau: float) -> None:
    """Move each ``(online, target)`` pair's target: ``target ← target + tau · (online − target)``."""
    with torch.no_grad():
        for online, target in pairs:
            for p, t in zip(online.parameters(), target.parameters()):
                t.lerp_(p, tau)
