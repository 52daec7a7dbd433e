"""The composition root: build every part from a ``RunConfig``, then run the iterations in paper order."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rlpipe.algorithms import BaseAlgorithm, algo_class, build_algo, resolve_algo_cfg
from rlpipe.checkpoints import restore_rng_state, rng_state
from rlpipe.config import ConfigError, RunConfig, params_hash
from rlpipe.distributed import resolve_device
from rlpipe.envs import BatchedEnv, build_env
from rlpipe.policies import Policy, build_policy
from rlpipe.stages.advantage import AdvantageStage
from rlpipe.stages.base import check_key_flow
from rlpipe.stages.checkpoint import Checkpointer
from rlpipe.stages.collect import Collector
from rlpipe.stages.evaluate import Evaluator
from rlpipe.stages.update import UpdateStage
from rlpipe.store import RolloutStore
from rlpipe.tracking import open_tracker

__all__ = ["Experiment", "build", "run", "seed_everything"]

EVAL_SEED_OFFSET = 1_000_003
"""Eval envs draw from a seed stream disjoint from the training envs'."""


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch (CPU and CUDA)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def crossed(before: int, after: int, every: int) -> bool:
    """True when the counter passed a multiple of ``every`` going from ``before`` to ``after``."""
    return after // every > before // every


@dataclass
class Experiment:
    """Every long-lived part of one run, built once; ``iteration``/``env_steps`` count progress."""

    cfg: RunConfig
    device: torch.device
    env: BatchedEnv
    policy: Policy
    algo: BaseAlgorithm
    collect: Collector
    advantage: AdvantageStage
    update: UpdateStage
    evaluate: Evaluator | None
    checkpoint: Checkpointer
    store: RolloutStore | None
    iteration: int = 0
    env_steps: int = 0
    wall_s: float = 0.0
    last_eval: dict[str, float] = field(default_factory=dict)

    @property
    def steps_per_iteration(self) -> int:
        """N × T env steps per rollout."""
        return self.env.num_envs * self.cfg.trainer.buffer_size

    def state_dict(self) -> dict[str, Any]:
        """Everything a bit-exact resume needs (weights_only-safe)."""
        return {
            "iteration": self.iteration,
            "env_steps": self.env_steps,
            "wall_s": self.wall_s,
            "params_hash": params_hash(self.cfg),
            "policy": self.policy.state_dict(),
            "algo": self.algo.state_dict(),
            "collector": self.collect.state_dict(),
            "evaluator_calls": self.evaluate.calls if self.evaluate else 0,
            "last_eval": dict(self.last_eval),
            "rng": rng_state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict`` (the inverse of the above)."""
        self.policy.load_state_dict(state["policy"])
        self.algo.load_state_dict(state["algo"])
        self.collect.load_state_dict(state["collector"])
        if self.evaluate:
            self.evaluate.calls = int(state["evaluator_calls"])
        self.iteration, self.env_steps = int(state["iteration"]), int(state["env_steps"])
        self.wall_s = float(state["wall_s"])
        self.last_eval = dict(state["last_eval"])
        restore_rng_state(state["rng"])


def build(cfg: RunConfig) -> Experiment:
    """Validate and build every part; raises ``ConfigError`` before any env step or file write."""
    trainer = cfg.trainer
    device = resolve_device(trainer.device)
    algo_cfg = resolve_algo_cfg(cfg.algorithm.name, cfg.algorithm.cfg, device)
    algo_class(cfg.algorithm.name).check_run(algo_cfg, trainer.num_envs, cfg.policy.name,
                                             trainer.buffer_size)
    seed_everything(trainer.seed)
    env = build_env(cfg.env.id, trainer.num_envs, device, cfg.env.cfg)
    policy = build_policy(cfg.policy, env.observation_space, env.action_space, device)
    algo = build_algo(cfg.algorithm.name, algo_cfg, policy, device)
    collect = Collector(env, policy, trainer.buffer_size, trainer.seed,
                        reset_every_rollout=bool(getattr(algo_cfg, "reset_every_rollout", False)),
                        group_size=int(getattr(algo_cfg, "group_size", 1)))
    advantage, update = AdvantageStage(algo), UpdateStage(algo, trainer.seed)
    check_key_flow([collect, advantage, update])
    evaluate = _build_evaluator(cfg, device, policy) if trainer.enable_eval else None
    store = RolloutStore(cfg.run_dir / "rollouts", cfg.store) if cfg.store.enabled else None
    checkpoint = Checkpointer(cfg.run_dir / "checkpoints", cfg.checkpoint.keep_last)
    return Experiment(cfg, device, env, policy, algo, collect, advantage, update, evaluate,
                      checkpoint, store)


def _build_evaluator(cfg: RunConfig, device: torch.device, policy: Policy) -> Evaluator:
    eval_env = build_env(cfg.env.id, cfg.trainer.num_eval_envs, device, cfg.env.cfg)
    return Evaluator(eval_env, policy, cfg.trainer.num_eval_episodes,
                     seed=cfg.trainer.seed + EVAL_SEED_OFFSET)


def run_iteration(exp: Experiment) -> dict[str, float]:
    """One iteration in paper order: collect → advantage → update → (eval) → (checkpoint)."""
    t0 = time.perf_counter()
    exp.iteration += 1
    rollout, metrics = exp.collect()
    _store_rollout(exp, rollout)
    t1 = time.perf_counter()
    metrics |= exp.advantage(rollout)
    metrics |= exp.update(rollout, exp.iteration)
    t2 = time.perf_counter()
    before, exp.env_steps = exp.env_steps, exp.env_steps + exp.steps_per_iteration
    metrics |= _maybe_evaluate(exp, before)
    _maybe_checkpoint(exp, before)
    return metrics | _timing(exp, t0, t1, t2)


def _store_rollout(exp: Experiment, rollout: Any) -> None:
    if exp.store is None:
        return
    latest = exp.checkpoint.last_saved
    exp.store.submit(rollout, {
        "iteration": exp.iteration,
        "env_steps": exp.env_steps + exp.steps_per_iteration,
        "env_id": exp.cfg.env.id,
        "seed": exp.cfg.trainer.seed,
        "params_hash": params_hash(exp.cfg),
        "checkpoint": latest.name if latest else None,
    })


def _maybe_evaluate(exp: Experiment, before: int) -> dict[str, float]:
    last = exp.iteration == exp.cfg.trainer.iterations
    if exp.evaluate and (last or crossed(before, exp.env_steps, exp.cfg.trainer.eval_freq)):
        exp.last_eval = exp.evaluate()
        return exp.last_eval
    return {}


def _maybe_checkpoint(exp: Experiment, before: int) -> None:
    last = exp.iteration == exp.cfg.trainer.iterations
    if last or crossed(before, exp.env_steps, exp.cfg.trainer.save_freq):
        if exp.store is not None:
            exp.store.flush()  # never checkpoint past a rollout that is not on disk yet
        exp.checkpoint.save(exp.iteration, exp.state_dict())


def _timing(exp: Experiment, t0: float, t1: float, t2: float) -> dict[str, float]:
    elapsed = time.perf_counter() - t0
    exp.wall_s += elapsed
    remaining = exp.cfg.trainer.iterations - exp.iteration
    return {
        "iteration": float(exp.iteration),
        "env_steps": float(exp.env_steps),
        "time/sps": exp.steps_per_iteration / elapsed,
        "time/collect_s": t1 - t0,
        "time/update_s": t2 - t1,
        "time/iteration_s": elapsed,
        "time/eta_s": remaining * exp.wall_s / max(exp.iteration, 1),
    }


def resume_from_latest(exp: Experiment) -> Path | None:
    """Load the newest complete checkpoint into ``exp``; ``None`` when there is none."""
    latest = exp.checkpoint.latest()
    if latest is None:
        return None
    state = Checkpointer.load(latest)
    if state.get("params_hash") != params_hash(exp.cfg):
        raise ConfigError(
            f"{latest}: checkpoint was written with other params; resume needs the same params"
        )
    exp.load_state_dict(state)
    return latest


def run(cfg: RunConfig, resume: bool = False) -> dict[str, Any]:
    """Train for ``trainer.iterations``; write rollouts, checkpoints and ``metrics.json``; return the summary."""
    exp = build(cfg)
    cfg.run_dir.mkdir(parents=True, exist_ok=True)
    if exp.store is not None:
        exp.store.clean_temporaries()
    if resume:
        resume_from_latest(exp)
    tracker = open_tracker(cfg, cfg.run_dir)
    metrics: dict[str, float] = {}
    try:
        while exp.iteration < cfg.trainer.iterations:
            metrics = run_iteration(exp)
            tracker.log(metrics, step=exp.env_steps)
    finally:
        if exp.store is not None:
            exp.store.close()
    summary = _summary(exp, metrics)
    tracker.finish(summary)
    return summary


def _summary(exp: Experiment, metrics: dict[str, float]) -> dict[str, Any]:
    keep = {k: v for k, v in metrics.items() if k.startswith(("train/", "update/"))}
    return {
        "iterations": exp.iteration,
        "env_steps": exp.env_steps,
        "wall_s": round(exp.wall_s, 3),
        **keep,
        **exp.last_eval,
        "checkpoint": str(exp.checkpoint.last_saved) if exp.checkpoint.last_saved else None,
    }
