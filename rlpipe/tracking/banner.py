"""The run's first console line: what trains where, in which precision, with which allocator."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from rlpipe.algorithms.optim import native_bf16
from rlpipe.config import RunConfig, params_hash
from rlpipe.tracking.mlflow_view import run_line

if TYPE_CHECKING:
    from rlpipe.tracking.background import BackgroundRun

__all__ = ["amp_words", "env_backend", "run_banner", "where_lines"]

BACKENDS = {"EnvpoolEnv": "envpool", "GymnasiumEnv": "gymnasium", "RslRlEnv": "rsl_rl (vector env)",
            "TorchEnv": "torch", "PushCube": "mujoco"}
"""Env classes (or a base class) → the backend named in the banner."""


def amp_words(requested: str, resolved: str, device: torch.device | str) -> str:
    """``amp bf16`` or, for ``auto``, the choice and its reason: ``amp auto → none (CPU without …)``."""
    if requested != "auto":
        return f"amp {resolved}"
    return f"amp auto → {resolved} ({native_bf16(device)[1]})"


def run_banner(cfg: RunConfig, device: torch.device, algo_cfg: Any, malloc_tuned: bool) -> str:
    """One line printed before the first iteration, e.g.

    ``rlpipe run cartpole_ppo: CartPole, 256 envs × 32 steps, ppo on cpu (1 thread), amp auto → none
    (CPU without avx512_bf16/AMX: bf16 would be emulated), allocator glibc (mmap off)``
    """
    trainer = cfg.trainer
    count = torch.get_num_threads()
    threads = f" ({count} thread{'s' * (count != 1)})" if device.type == "cpu" else ""
    parts = [f"rlpipe run {trainer.exp_name}: {cfg.env.id}, {trainer.num_envs} envs × "
             f"{trainer.buffer_size} steps", f"{cfg.algorithm.name} on {device}{threads}"]
    resolved = getattr(algo_cfg, "amp", None)
    if resolved is not None:
        parts.append(amp_words(str(cfg.algorithm.cfg.get("amp", "none")), resolved, device))
    parts.append("allocator glibc (mmap off)" if malloc_tuned else "allocator unchanged")
    return ", ".join(parts)


def env_backend(env: Any) -> str:
    """Who simulates ``env``: ``torch``, ``envpool``, ``gymnasium``, … (else its class name)."""
    for cls in type(env).__mro__:
        if cls.__name__ in BACKENDS:
            return BACKENDS[cls.__name__]
    return type(env).__name__


def where_lines(cfg: RunConfig, run_dir: Path, env: Any, mlflow: BackgroundRun | None) -> str:
    """The banner's second and third lines: where the run writes, and where its MLflow run is, e.g.

    ``  run dir data/cartpole_ppo · env backend torch · params 3f2a9c1e``
    ``  MLflow  run 5e1d0c2a… (experiment cartpole_ppo): mlflow ui --backend-store-uri sqlite:///…
    → http://127.0.0.1:5000/#/experiments/1/runs?viewStateShareKey=rlpipe``

    The banner never waits for the MLflow run to open: while it opens the line names the store, and
    the tracker prints the run's line before the first row after it opened (``Tracker.log``).
    """
    first = f"  run dir {run_dir} · env backend {env_backend(env)} · params {params_hash(cfg)}"
    if mlflow is None:
        return f"{first}\n  MLflow  off (tracking.backend: none); metrics in {run_dir / 'curve.csv'}"
    if not mlflow.ready:
        return (f"{first}\n  MLflow  opening a run in experiment {cfg.trainer.exp_name} at {mlflow.uri}; "
                "its link follows once it is open")
    if mlflow.run_id is None:
        return f"{first}\n  MLflow  not opened (see the warning above); metrics in {run_dir / 'curve.csv'}"
    return f"{first}\n{run_line(cfg.trainer.exp_name, mlflow.run_id, mlflow.uri, mlflow.experiment_id)}"
