"""The run's first console line: what trains where, in which precision, with which allocator."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from rlpipe.algorithms.optim import native_bf16
from rlpipe.config import RunConfig, params_hash
from rlpipe.location import AnyPath
from rlpipe.runtime.compile import compile_words

if TYPE_CHECKING:
    from rlpipe.config import AlgorithmCfg
    from rlpipe.envs import BatchedEnv
    from rlpipe.tracking.background import BackgroundRun

__all__ = ["amp_words", "env_backend", "run_banner", "where_lines"]

BACKENDS = {
    "EnvpoolEnv": "envpool",
    "GymnasiumEnv": "gymnasium",
    "IsaacLabEnv": "isaaclab",
    "RslRlEnv": "rsl_rl (vector env)",
    "TorchEnv": "torch",
    "PushCube": "mujoco",
}
"""Env classes (or a base class) → the backend named in the banner."""


def amp_words(requested: str, resolved: str, device: torch.device | str) -> str:
    """``amp bf16`` or, for ``auto``, the choice and its reason: ``amp auto → none (CPU without …)``."""
    if requested != "auto":
        return f"amp {resolved}"
    return f"amp auto → {resolved} ({native_bf16(device)[1]})"


def run_banner(
    cfg: RunConfig,
    device: torch.device,
    algo_cfg: AlgorithmCfg,
    malloc_tuned: bool,
    threads_why: str | None = None,
) -> str:
    """One line printed before the first iteration, e.g.

    ``rlpipe run cartpole_ppo: CartPole, 256 envs × 32 steps, ppo on cpu (1 thread; auto: 9.1 M
    forward MACs < 134 M), amp auto → none (CPU without avx512_bf16/AMX: bf16 would be emulated),
    allocator glibc (mmap off)``. ``threads_why``: why the thread count is what it is.
    """
    trainer = cfg.trainer
    count = torch.get_num_threads()
    why = f"; {threads_why}" if threads_why else ""
    threads = f" ({count} thread{'s' * (count != 1)}{why})" if device.type == "cpu" else ""
    parts = [
        f"rlpipe run {trainer.exp_name}: {cfg.env.id}, {trainer.num_envs} envs × {trainer.buffer_size} steps",
        f"{cfg.algorithm.name} on {device}{threads}",
    ]
    resolved = getattr(algo_cfg, "amp", None)
    if resolved is not None:
        parts.append(amp_words(str(getattr(cfg.algorithm.cfg, "amp", "none")), resolved, device))
    compiled = compile_words(trainer.compile, device)
    if compiled is not None:
        parts.append(compiled)
    parts.append("allocator glibc (mmap off)" if malloc_tuned else "allocator unchanged")
    return ", ".join(parts)


def env_backend(env: BatchedEnv) -> str:
    """Who simulates ``env``: ``torch``, ``envpool``, ``gymnasium``, … (else its class name)."""
    for cls in type(env).__mro__:
        if cls.__name__ in BACKENDS:
            return BACKENDS[cls.__name__]
    return type(env).__name__


def where_lines(cfg: RunConfig, run_dir: AnyPath, env: BatchedEnv, mlflow: BackgroundRun | None) -> str:
    """The banner's second line (where the run writes) and, without MLflow, where its metrics go.

    ``  run dir data/cartpole_ppo · env backend torch · params 3f2a9c1e``
    ``  MLflow  off (tracking.backend: none); metrics in data/cartpole_ppo/curve.csv``

    With MLflow the tracker says where the run is (``Tracker.announce_mlflow``): the banner never
    waits for the run to open.
    """
    first = f"  run dir {run_dir} · env backend {env_backend(env)} · params {params_hash(cfg)}"
    if mlflow is None:
        return f"{first}\n  MLflow  off (tracking.backend: none); metrics in {run_dir / 'curve.csv'}"
    return first
