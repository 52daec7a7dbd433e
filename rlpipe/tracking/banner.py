"""The run's first console line: what trains where, in which precision, with which allocator."""

from __future__ import annotations

from typing import Any

import torch

from rlpipe.algorithms.optim import native_bf16
from rlpipe.config import RunConfig

__all__ = ["amp_words", "run_banner"]


def amp_words(requested: str, resolved: str, device: torch.device | str) -> str:
    """``amp bf16`` or, for ``auto``, the choice and its reason: ``amp auto → none (CPU without …)``."""
    if requested != "auto":
        return f"amp {resolved}"
    return f"amp auto → {resolved} ({native_bf16(device)[1]})"


def run_banner(cfg: RunConfig, device: torch.device, algo_cfg: Any, malloc_tuned: bool) -> str:
    """One line printed before the first iteration, e.g.

    ``rlpipe run cartpole_ppo: CartPole, 256 envs × 32 steps, ppo on cpu (2 threads), amp auto → none
    (CPU without avx512_bf16/AMX: bf16 would be emulated), allocator glibc (mmap off)``
    """
    trainer = cfg.trainer
    threads = f" ({torch.get_num_threads()} threads)" if device.type == "cpu" else ""
    parts = [f"rlpipe run {trainer.exp_name}: {cfg.env.id}, {trainer.num_envs} envs × "
             f"{trainer.buffer_size} steps", f"{cfg.algorithm.name} on {device}{threads}"]
    resolved = getattr(algo_cfg, "amp", None)
    if resolved is not None:
        parts.append(amp_words(str(cfg.algorithm.cfg.get("amp", "none")), resolved, device))
    parts.append("allocator glibc (mmap off)" if malloc_tuned else "allocator unchanged")
    return ", ".join(parts)
