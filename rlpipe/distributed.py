"""Process-level context: the device this process trains on (and, under torchrun, its rank)."""

from __future__ import annotations

import ctypes
import functools
import sys

import torch

from rlpipe.config import ConfigError

__all__ = ["resolve_device", "tune_malloc"]

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD = 32 * 2**20
"""glibc's largest dynamic mmap threshold: smaller blocks are reused from the heap, not re-mapped."""
TRIM_THRESHOLD = 2**30
"""Freed heap memory below this stays mapped for the next minibatch instead of going back to the OS."""


@functools.cache
def tune_malloc() -> bool:
    """Stop glibc from returning and re-faulting the update's large temporaries every minibatch.

    With the defaults, each minibatch of a large update maps fresh pages and page-faults on them
    (≈1.3 M faults per iteration on the massive-batch workload, ~20% of its time on CPU). Keeping
    freed memory mapped removes that. A no-op (``False``) outside Linux/glibc.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    return bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )


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
