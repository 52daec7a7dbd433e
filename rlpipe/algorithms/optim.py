"""Optimizer factory (``optimizer: adam | adamw | sgd | rmsprop`` plus validated kwargs), lr, AMP checks."""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeAlias

import torch

from rlpipe import fast
from rlpipe.config import ConfigError

__all__ = [
    "AMP_DTYPES",
    "OPTIMIZERS",
    "build_optimizer",
    "check_amp_device",
    "learning_rate",
    "native_bf16",
    "optimizer_kwarg_names",
    "resolve_amp",
    "set_learning_rate",
]

OptimizerClass: TypeAlias = (
    type[torch.optim.Adam] | type[torch.optim.AdamW] | type[torch.optim.SGD] | type[torch.optim.RMSprop]
)
"""The optimizers ``algorithm.cfg.optimizer`` names (each takes ``params`` and ``lr``)."""
OPTIMIZERS: dict[str, OptimizerClass] = {
    "adam": torch.optim.Adam,
    "adamw": torch.optim.AdamW,
    "sgd": torch.optim.SGD,
    "rmsprop": torch.optim.RMSprop,
}
FUSED = ("adam", "adamw")
"""Optimizers built ``fused`` by default (torch has a fused kernel for them on CPU and CUDA)."""
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

    Adam and AdamW default to ``fused``: one kernel steps every parameter, where ``foreach`` runs
    one multi-tensor op per term of the update rule, and on a small network those ops' overhead is
    most of the optimizer step (the ``update`` phase of ``benchmarks/profile/w1_profile.py``). The
    others default to ``foreach``: torch turns it on only on CUDA, yet on CPU too a per-parameter
    loop costs a small network's update more than one batched op. ``optimizer_kwargs`` naming
    either keeps the user's choice. A checkpoint's optimizer state carries the flags it was trained
    with, so a resumed or replayed run steps as the original did.
    """
    kwargs = dict(kwargs or {})
    if "fused" not in kwargs and "foreach" not in kwargs:
        kwargs["fused" if name in FUSED else "foreach"] = True
    fast.defer_dynamo_disables(torch.optim.Optimizer)
    return OPTIMIZERS[name](params, lr=lr, **kwargs)


def learning_rate(optimizer: torch.optim.Optimizer) -> float:
    """The optimizer's current learning rate (every parameter group has the same one)."""
    return float(optimizer.param_groups[0]["lr"])


def set_learning_rate(optimizer: torch.optim.Optimizer, lr: float) -> None:
    """Set the learning rate of every parameter group."""
    for group in optimizer.param_groups:
        group["lr"] = lr


AMP_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
"""Autocast dtypes of ``algorithm.cfg.amp``."""


def check_amp_device(amp: str, device: torch.device | str) -> None:
    """``ConfigError`` for a precision the device cannot run (fp16 off CUDA, bf16 on old GPUs)."""
    device = torch.device(device)
    if amp == "fp16" and device.type != "cuda":
        raise ConfigError(f"algorithm.cfg.amp: fp16 needs a CUDA device (got {device}); use bf16 or none")
    if amp == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise ConfigError(f"algorithm.cfg.amp: this GPU ({device}) has no bf16; use fp16 or none")


def native_bf16(device: torch.device | str) -> tuple[bool, str]:
    """Whether ``device`` runs bf16 matmuls in hardware, and the reason in words (for the run banner).

    CUDA: ``torch.cuda.is_bf16_supported`` without emulation (Ampere and newer). CPU: the
    avx512_bf16 or AMX instructions; elsewhere bf16 is emulated, many times slower than fp32.
    """
    device = torch.device(device)
    if device.type == "cuda":
        try:
            native = torch.cuda.is_bf16_supported(including_emulation=False)
        except TypeError:  # a torch without ``including_emulation``: no emulation to exclude
            native = torch.cuda.is_bf16_supported()
        return native, "GPU runs bf16 natively" if native else "GPU has no native bf16"
    if device.type == "cpu":
        present = cpu_flags()
        flags = [
            name for name, flag in (("avx512_bf16", "avx512_bf16"), ("AMX", "amx_tile")) if flag in present
        ]
        if flags:
            return True, f"CPU has {' and '.join(flags)}"
        return False, "CPU without avx512_bf16/AMX: bf16 would be emulated"
    return False, f"no native bf16 known for {device.type}"


def cpu_flags() -> set[str]:
    """The CPU's feature flags as the kernel lists them (``/proc/cpuinfo``; empty where there is none)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    lines = (line for line in text.splitlines() if line.startswith(("flags", "Features")))
    return {flag for line in lines for flag in line.split(":", 1)[1].split()}


def resolve_amp(amp: str, device: torch.device | str) -> str:
    """``auto`` → ``bf16`` where ``device`` runs it natively, else ``none``; other values unchanged."""
    if amp != "auto":
        return amp
    return "bf16" if native_bf16(device)[0] else "none"
