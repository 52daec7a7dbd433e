"""The composition root: build every part from a ``RunConfig``, then run the iterations in paper order."""

from __future__ import annotations

import contextlib
import csv
import hashlib
import json
import os
import random
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict

from rlpipe import roles
from rlpipe.algorithms import BaseAlgorithm, algo_class, build_algo, resolve_algo_cfg
from rlpipe.allocator import tune_malloc
from rlpipe.checkpoints import restore_rng_state, rng_state
from rlpipe.config import ConfigError, RunConfig, params_hash
from rlpipe.distributed import DistContext, broadcast_parameters, init_distributed
from rlpipe.envs import BatchedEnv, build_env
from rlpipe.policies import Policy, build_policy
from rlpipe.stages.advantage import AdvantageStage
from rlpipe.stages.base import check_key_flow
from rlpipe.stages.checkpoint import Checkpointer
from rlpipe.stages.collect import Collector
from rlpipe.stages.evaluate import Evaluator
from rlpipe.stages.stopping import Stopper
from rlpipe.stages.update import UpdateStage
from rlpipe.store import RolloutStore, StoreError
from rlpipe.tracking import Tracker
from rlpipe.tracking.banner import run_banner

__all__ = [
    "Experiment", "apply_checkpoint", "build", "checkpoint_matches", "learn_from", "restore",
    "resume_from_latest", "run", "run_iteration", "seed_everything", "training_hash", "truncate_curve",
]

EVAL_SEED_OFFSET = 1_000_003
"""Eval envs draw from a seed stream disjoint from the training envs'."""


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch (CPU and CUDA)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


RESUME_IGNORES = (
    ("trainer", "iterations"), ("trainer", "save_freq"), ("trainer", "data_dir"), ("trainer", "distributed"),
    ("tracking",),
    ("store",), ("checkpoint",), ("replay",), ("eval",),
)
"""Params that do not change what training computes: a run may be resumed or replayed across them."""


def training_hash(cfg: RunConfig) -> str:
    """Short hash of the params that shape training (``params_hash`` minus ``RESUME_IGNORES``).

    ``--resume`` needs it unchanged, so a run can be extended (``trainer.iterations``) or moved, and
    replay uses it to pair stored rollouts with checkpoints of the same run.
    """
    data = cfg.to_dict()
    for path in RESUME_IGNORES:
        node = data
        for part in path[:-1]:
            node = node[part]
        node.pop(path[-1], None)
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


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
    stopper: Stopper = field(default_factory=Stopper)
    dist: DistContext = field(default_factory=DistContext)

    @property
    def steps_per_iteration(self) -> int:
        """N × T × world size env steps per rollout (every rank's)."""
        return self.env.num_envs * self.cfg.trainer.buffer_size * self.dist.world_size

    def state_dict(self) -> dict[str, Any]:
        """Everything a bit-exact resume needs (weights_only-safe)."""
        return {
            "iteration": self.iteration,
            "env_steps": self.env_steps,
            "wall_s": self.wall_s,
            "params_hash": params_hash(self.cfg),
            "training_hash": training_hash(self.cfg),
            "policy": self.policy.state_dict(),
            "algo": self.algo.state_dict(),
            "collector": self.collect.state_dict(),
            "evaluator_calls": self.evaluate.calls if self.evaluate else 0,
            "last_eval": dict(self.last_eval),
            "stopper": self.stopper.state_dict(),
            "rng": rng_state(),
            **(roles.rank_states(self.collect) if self.dist.active else {}),
        }

    def load_weights(self, state: dict[str, Any]) -> None:
        """Restore only the learner: policy and algorithm (optimizer, reference policy) state."""
        self.policy.load_state_dict(state["policy"])
        self.algo.load_state_dict(state["algo"])

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict`` (the inverse of the above; each rank takes its own env and RNG state)."""
        state = roles.select_rank_state(state, self.dist)
        self.load_weights(state)
        self.collect.load_state_dict(state["collector"])
        if self.evaluate:
            self.evaluate.calls = int(state["evaluator_calls"])
        self.iteration, self.env_steps = int(state["iteration"]), int(state["env_steps"])
        self.wall_s = float(state["wall_s"])
        self.last_eval = dict(state["last_eval"])
        self.stopper.load_state_dict(state.get("stopper", {}))
        restore_rng_state(state["rng"])


def build(cfg: RunConfig) -> Experiment:
    """Validate and build every part; raises ``ConfigError`` before any env step or file write."""
    trainer = cfg.trainer
    ctx = init_distributed(trainer.device, trainer.distributed)
    device = ctx.device
    algo_cfg = resolve_algo_cfg(cfg.algorithm.name, cfg.algorithm.cfg, device)
    tune_malloc()
    if trainer.num_threads:
        torch.set_num_threads(trainer.num_threads)
    seed_everything(trainer.seed + ctx.rank)
    env = build_env(cfg.env.id, trainer.num_envs, device, cfg.env.cfg)
    algo_class(cfg.algorithm.name).check_run(algo_cfg, trainer.num_envs, cfg.policy.name,
                                             trainer.buffer_size, env.max_episode_steps)
    policy = build_policy(cfg.policy, env.observation_space, env.action_space, device)
    broadcast_parameters(policy)
    algo = build_algo(cfg.algorithm.name, algo_cfg, policy, device)
    collect = Collector(env, policy, trainer.buffer_size, trainer.seed + ctx.rank,
                        reset_every_rollout=bool(getattr(algo_cfg, "reset_every_rollout", False)),
                        group_size=int(getattr(algo_cfg, "reset_group_size", 1)),
                        horizons_per_env_reset=trainer.horizons_per_env_reset,
                        deterministic=trainer.deterministic_collect,
                        seq_len=getattr(algo_cfg, "seq_len", None),
                        seqs_per_state_reset=int(getattr(algo_cfg, "seqs_per_state_reset", -1)))
    advantage, update = AdvantageStage(algo), UpdateStage(algo, trainer.seed)
    check_key_flow([collect, advantage, update])
    evaluate = _build_evaluator(cfg, device, policy) if trainer.enable_eval and ctx.is_main else None
    store = roles.open_run_store(cfg, ctx)
    checkpoint = Checkpointer(cfg.run_dir / "checkpoints", cfg.checkpoint.keep_last)
    return Experiment(cfg, device, env, policy, algo, collect, advantage, update, evaluate,
                      checkpoint, store, stopper=Stopper(trainer.stop_when), dist=ctx)


def _build_evaluator(cfg: RunConfig, device: torch.device, policy: Policy) -> Evaluator:
    eval_env = build_env(cfg.env.id, cfg.trainer.num_eval_envs, device, cfg.env.cfg)
    return Evaluator(eval_env, policy, cfg.trainer.num_eval_episodes,
                     seed=cfg.trainer.seed + EVAL_SEED_OFFSET)


def run_iteration(exp: Experiment, checkpoint: bool = True) -> dict[str, float]:
    """One iteration in paper order: collect → advantage → update → (eval) → (checkpoint).

    ``checkpoint=False`` leaves the checkpoint to the caller (``run`` logs the iteration first, so
    a run killed in between never holds a checkpoint newer than its ``curve.csv``).
    """
    t0 = time.perf_counter()
    exp.iteration += 1
    rollout, metrics = exp.collect()
    _store_rollout(exp, rollout)
    t1 = time.perf_counter()
    metrics |= learn_from(exp, rollout, exp.iteration)
    t2 = time.perf_counter()
    before, exp.env_steps = exp.env_steps, exp.env_steps + exp.steps_per_iteration
    metrics |= _maybe_evaluate(exp, before)
    if checkpoint:
        _maybe_checkpoint(exp, before)
    return metrics | _timing(exp, t0, t1, t2)


def learn_from(exp: Experiment, rollout: TensorDict, iteration: int) -> dict[str, float]:
    """Advantage + update on ``rollout`` as update ``iteration``: the online loop's and replay's step.

    Schedules are positioned at the env steps collected before this rollout.
    """
    per_iteration = rollout.shape[0] * (rollout.shape[1] - 1) * exp.dist.world_size  # every rank's
    exp.algo.set_progress((iteration - 1) * per_iteration, exp.cfg.trainer.iterations * per_iteration)
    return exp.advantage(rollout) | exp.update(rollout, iteration)


def _store_rollout(exp: Experiment, rollout: Any) -> None:
    if exp.store is None:
        return
    latest = exp.checkpoint.last_saved
    # The collector reuses one buffer: the advantage keys in it are still last iteration's.
    collected = rollout.exclude(*exp.advantage.writes)
    exp.store.submit(collected, {
        "iteration": exp.iteration,
        "env_steps": exp.env_steps + exp.steps_per_iteration,
        "env_id": exp.cfg.env.id,
        "seed": exp.cfg.trainer.seed,
        "params_hash": params_hash(exp.cfg),
        "training_hash": training_hash(exp.cfg),
        "checkpoint": latest.name if latest else None,
    })


def _maybe_evaluate(exp: Experiment, before: int) -> dict[str, float]:
    last = exp.iteration == exp.cfg.trainer.iterations
    if exp.evaluate and (last or crossed(before, exp.env_steps, exp.cfg.trainer.eval_freq)):
        exp.last_eval = exp.evaluate()
        return exp.last_eval
    return {}


def _maybe_checkpoint(exp: Experiment, before: int) -> None:
    last = (exp.iteration == exp.cfg.trainer.iterations or exp.cfg.checkpoint.every_iteration
            or exp.stopper.stopped_by is not None)
    if last or crossed(before, exp.env_steps, exp.cfg.trainer.save_freq):
        roles.save_on_rank_zero(exp.checkpoint, exp.iteration, exp.state_dict(), exp.store, exp.dist)


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


@contextlib.contextmanager
def checkpoint_matches(path: Path) -> Iterator[None]:
    """Turn a state that does not fit the built parts into one ``StoreError`` line naming ``path``."""
    try:
        yield
    except (RuntimeError, KeyError, ValueError, TypeError) as exc:
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()] or [repr(exc)]
        detail = lines[1] if len(lines) > 1 and lines[0].startswith("Error(s)") else lines[0]
        raise StoreError(f"{path}: checkpoint does not match the policy/algorithm built from the "
                         f"params ({detail})") from None


def restore(exp: Experiment, path: Path, full: bool | None = True) -> dict[str, Any]:
    """Load checkpoint ``path`` into ``exp``: everything (``full``) or only policy + algorithm.

    ``full=None`` takes whatever the checkpoint holds (an online checkpoint: everything; one written
    by ``rlpipe replay``/``update``: the learner only). Returns the checkpoint's state. Raises
    ``StoreError`` naming the file when it is missing, truncated, not an rlpipe checkpoint, or does
    not match the parts built from ``exp.cfg``.
    """
    state = Checkpointer.load(path)
    if full is None:
        full = "collector" in state and "rng" in state
    apply_checkpoint(exp, state, path, full)
    return state


def apply_checkpoint(exp: Experiment, state: dict[str, Any], path: Path, full: bool) -> None:
    """Load an already-read checkpoint ``state`` (from ``path``, named in errors) into ``exp``."""
    needed = ("policy", "algo", "iteration", *(("collector", "rng") if full else ()))
    missing = [key for key in needed if key not in state]
    if missing:
        raise StoreError(f"{path}: not an rlpipe {'training ' if full else ''}checkpoint "
                         f"(no {missing[0]!r} entry)")
    with checkpoint_matches(path):
        exp.load_state_dict(state) if full else exp.load_weights(state)


def resume_from_latest(exp: Experiment) -> Path | None:
    """Load the newest complete checkpoint into ``exp``; ``None`` when there is none.

    Rollout stores newer than the checkpoint (written by the run that was stopped; all of them
    when there is no checkpoint) are deleted, so the continued run writes the same stores as an
    uninterrupted one (``run`` also cuts ``curve.csv`` back with :func:`truncate_curve`). A
    checkpoint of other params (:func:`training_hash`) is a ``ConfigError``.
    """
    latest = exp.checkpoint.latest()
    if latest is None:
        if exp.store is not None:
            exp.store.discard_after(0)
        return None
    state = Checkpointer.load(latest)
    written = state.get("training_hash", state.get("params_hash"))
    expected = training_hash(exp.cfg) if "training_hash" in state else params_hash(exp.cfg)
    if written != expected:
        raise ConfigError(
            f"{latest}: checkpoint was written with other params; resume needs the same params "
            "(only trainer.iterations/save_freq/data_dir, tracking, store, checkpoint, replay and "
            "eval may change)"
        )
    apply_checkpoint(exp, state, latest, full=True)
    exp.checkpoint.last_saved = latest
    if exp.store is not None:
        exp.store.discard_after(exp.iteration)
    return latest


def truncate_curve(path: Path, iteration: int) -> list[str] | None:
    """Keep the header and the rows of iterations ≤ ``iteration`` of ``curve.csv``; return the header.

    ``None`` when there is no curve to continue. Rewritten atomically.
    """
    try:
        with path.open(newline="") as fh:
            header, *rows = list(csv.reader(fh))
    except (OSError, ValueError):
        return None
    if "iteration" not in header:
        return None
    col = header.index("iteration")
    kept = [row for row in rows if len(row) > col and row[col] and float(row[col]) <= iteration]
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with tmp.open("w", newline="") as fh:
        csv.writer(fh).writerows([header, *kept])
    os.replace(tmp, path)
    return header


def _continue_curve(tracker: Tracker, header: list[str] | None) -> None:
    if header is not None:
        # MetricsFiles fixes its columns from its first row and then truncates the file; give it
        # the kept file's columns instead, so resumed rows append below the kept ones.
        tracker.files._fields = header


def run(cfg: RunConfig, resume: bool = False, overwrite: bool = False) -> dict[str, Any]:
    """Train to ``trainer.iterations``; write rollouts, checkpoints and ``metrics.json``; return the summary.

    ``resume`` continues from the last complete checkpoint (bit for bit on CPU); without one it
    starts from iteration 0 and says so on stderr. A fresh run into a run dir that holds an earlier
    run's rollouts or checkpoints is refused unless ``overwrite`` (which deletes them first).
    """
    exp = build(cfg)
    roles.claim_run_dir(cfg, exp.dist, exp.checkpoint.directory, resume, overwrite)
    if exp.store is not None:
        exp.store.clean_temporaries()
    header = _resume(exp) if resume else None
    tracker = roles.open_run_tracker(cfg, exp.dist)
    _continue_curve(tracker, header)
    if exp.dist.is_main:
        print(run_banner(cfg, exp.device, exp.algo.cfg, tune_malloc()), flush=True)
    metrics: dict[str, float] = {}
    try:
        while exp.iteration < cfg.trainer.iterations and exp.stopper.stopped_by is None:
            metrics = run_iteration(exp, checkpoint=False)
            metrics |= _check_stop(exp, metrics)
            roles.agree_stop(exp.stopper, exp.dist)
            tracker.log(metrics, step=exp.env_steps)
            _maybe_checkpoint(exp, exp.env_steps - exp.steps_per_iteration)
    finally:
        if exp.store is not None:
            exp.store.close()
    summary = _summary(exp, metrics)
    tracker.finish(summary)
    return summary


def _check_stop(exp: Experiment, metrics: dict[str, float]) -> dict[str, float]:
    """Feed ``trainer.stop_when``; on a stop, evaluate now unless this iteration already did."""
    if exp.stopper.update(metrics) is None or exp.evaluate is None:
        return {}
    if any(key.startswith("eval/") for key in metrics):
        return {}
    exp.last_eval = exp.evaluate()
    return exp.last_eval


def _resume(exp: Experiment) -> list[str] | None:
    latest = resume_from_latest(exp)
    if not exp.dist.is_main:
        return None
    if latest is None:
        print(f"resume: no checkpoint under {exp.checkpoint.directory}; starting from iteration 0",
              file=sys.stderr)
        return None
    print(f"resume: continuing from {latest} (iteration {exp.iteration})", file=sys.stderr)
    return truncate_curve(exp.cfg.run_dir / "curve.csv", exp.iteration)


def _summary(exp: Experiment, metrics: dict[str, float]) -> dict[str, Any]:
    keep = {k: v for k, v in metrics.items() if k.startswith(("train/", "update/"))}
    return {
        "iterations": exp.iteration,
        "env_steps": exp.env_steps,
        "wall_s": round(exp.wall_s, 3),
        **keep,
        **exp.last_eval,
        "checkpoint": str(exp.checkpoint.last_saved) if exp.checkpoint.last_saved else None,
        "stopped_by": exp.stopper.stopped_by,
    }
