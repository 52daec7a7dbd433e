"""Process-level context: the device this process trains on (and, under torchrun, its rank)."""

from __future__ import annotations

import torch

from rlpipe.config import ConfigError

__all__ = ["resolve_device"]


def resolve_device(spec: str) -> torch.device:
    """``auto`` → CUDA when present, else CPU; ``cuda[:N]`` must exist (else a one-line ``ConfigError``)."""
    if spec == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(spec)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(
                f"trainer.device: {spec!r} requested but CUDA is not available; accepted: auto, cpu"
            )
        index = device.index or 0
        if index >= torch.cuda.device_count():
            raise ConfigError(
                f"trainer.device: {spec!r} does not exist ({torch.cuda.device_count()} CUDA devices)"
            )
    return device
