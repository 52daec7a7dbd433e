"""The online loop: collect → advantage → update → (eval) → (checkpoint), iteration after iteration."""

from __future__ import annotations

import time
from typing import Any

from rlpipe.artifacts.params import write_params
from rlpipe.config import RunConfig, params_hash, training_hash
from rlpipe.run import roles
from rlpipe.run.experiment import Experiment, build
from rlpipe.run.resume import resume as continue_run

__all__ = ["crossed", "run", "run_iteration"]


def crossed(before: int, after: int, every: int) -> bool:
    """True when the counter passed a multiple of ``every`` going from ``before`` to ``after``."""
    return after // every > before // every


def run(cfg: RunConfig, resume: bool = False, overwrite: bool = False) -> dict[str, Any]:
    """Train to ``trainer.iterations``: params, rollouts, checkpoints, ``metrics.json``; return a summary.

    ``resume`` continues from the last complete checkpoint (bit for bit on CPU); without one it
    starts from iteration 0 and says so on stderr. A fresh run into a run dir that holds an earlier
    run's rollouts or checkpoints is refused unless ``overwrite`` (which deletes that run first).
    """
    exp = build(cfg)
    roles.claim_run_dir(exp.layout, exp.dist, resume, overwrite)
    if exp.store is not None:
        exp.store.clean_temporaries()
    header = continue_run(exp) if resume else None  # refuses other training params before any write
    if exp.dist.is_main:
        write_params(exp.layout, cfg.to_dict())
    tracker = roles.open_run_tracker(cfg, exp.layout, exp.dist, header)
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
    metrics |= exp.advantage(rollout)
    metrics |= exp.update(rollout, exp.iteration, exp.env_steps, exp.total_env_steps)
    t2 = time.perf_counter()
    before, exp.env_steps = exp.env_steps, exp.env_steps + exp.steps_per_iteration
    metrics |= _maybe_evaluate(exp, before)
    if checkpoint:
        _maybe_checkpoint(exp, before)
    return metrics | _timing(exp, t0, t1, t2)


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
        "spaces": exp.spaces(),
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


def _check_stop(exp: Experiment, metrics: dict[str, float]) -> dict[str, float]:
    """Feed ``trainer.stop_when``; on a stop, evaluate now unless this iteration already did."""
    if exp.stopper.update(metrics) is None or exp.evaluate is None:
        return {}
    if any(key.startswith("eval/") for key in metrics):
        return {}
    exp.last_eval = exp.evaluate()
    return exp.last_eval


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
