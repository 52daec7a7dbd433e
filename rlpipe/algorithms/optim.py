"""Optimizer factory (``optimizer: adam | adamw | sgd | rmsprop`` plus validated kwargs) and AMP checks."""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import Any

import torch

from rlpipe.config import ConfigError

__all__ = [
    "AMP_DTYPES", "OPTIMIZERS", "build_optimizer", "check_amp_device", "optimizer_kwarg_names",
]

OPTIMIZERS: dict[str, type[torch.optim.Optimizer]] = {
    "adam": torch.optim.Adam,
    "adamw": torch.optim.AdamW,
    "sgd": torch.optim.SGD,
    "rmsprop": torch.optim.RMSprop,
}
RESERVED = ("params", "lr")
"""Set by the algorithm (``lr`` is ``learning_rate``), never through ``optimizer_kwargs``."""


def optimizer_kwarg_names(name: str) -> tuple[str, ...]:
    """Keyword arguments optimizer ``name`` accepts besides ``params`` and ``lr``."""
    signature = inspect.signature(OPTIMIZERS[name].__init__)
    return tuple(p for p in signature.parameters if p not in ("self", *RESERVED))


def build_optimizer(
    name: str, params: Iterable[torch.nn.Parameter], lr: float, kwargs: dict[str, Any] | None = None
) -> torch.optim.Optimizer:
    """``OPTIMIZERS[name](params, lr=lr, **kwargs)``; keys are expected to be validated already.

    ``foreach`` defaults to on: torch enables it only on CUDA, yet on CPU the per-parameter loop
    costs a small network's update a few percent too.
    """
    return OPTIMIZERS[name](params, lr=lr, **{"foreach": True, **(kwargs or {})})


AMP_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
"""Autocast dtypes of ``algorithm.cfg.amp``."""


def check_amp_device(amp: str, device: torch.device | str) -> None:
    """``ConfigError`` for a precision the device cannot run (fp16 off CUDA, bf16 on old GPUs)."""
    device = torch.device(device)
    if amp == "fp16" and device.type != "cuda":
        raise ConfigError(f"algorithm.cfg.amp: fp16 needs a CUDA device (got {device}); use bf16 or none")
    if amp == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise ConfigError(f"algorithm.cfg.amp: this GPU ({device}) has no bf16; use fp16 or none")
