"""The online loop: collect → advantage → update → (eval) → (checkpoint), iteration after iteration."""

from __future__ import annotations

import functools
import sys
import time
from pathlib import Path
from typing import Any

from rlpipe import faults
from rlpipe.artifacts.atomic import atomic_write_json
from rlpipe.artifacts.layout import CHECKPOINT_NAME, iteration_from_name
from rlpipe.artifacts.params import write_params
from rlpipe.config import RunConfig, params_hash, training_hash
from rlpipe.rollout import NonFiniteError
from rlpipe.run import roles
from rlpipe.run.experiment import Experiment, build
from rlpipe.run.resume import resume as continue_run
from rlpipe.run.roles import hold_run_dir
from rlpipe.run.signals import GracefulStop, Interrupted, signal_name
from rlpipe.tracking import Tracker

__all__ = ["crossed", "run", "run_iteration"]


def crossed(before: int, after: int, every: int) -> bool:
    """True when the counter passed a multiple of ``every`` going from ``before`` to ``after``."""
    return after // every > before // every


def run(cfg: RunConfig, resume: bool = False, overwrite: bool = False) -> dict[str, Any]:
    """Train to ``trainer.iterations``: params, rollouts, checkpoints, ``metrics.json``; return a summary.

    ``resume`` continues from the last complete checkpoint (bit for bit on CPU) and the same MLflow
    run; without one it starts from iteration 0 and says so on stderr; with nothing left to do it
    changes no file and says so. A fresh run into a run dir that holds an earlier run's rollouts or
    checkpoints is refused unless ``overwrite`` (which deletes that run first). The run dir is
    locked for the whole call (``LockedError`` when another process writes it). SIGINT/SIGTERM stop
    at the next iteration boundary with a checkpoint and raise :class:`Interrupted`.
    """
    exp = build(cfg)
    with hold_run_dir(exp.layout, exp.dist), GracefulStop() as stop:
        roles.claim_run_dir(exp.layout, exp.dist, resume, overwrite)
        if exp.store is not None:
            exp.store.clean_temporaries()
        header = continue_run(exp) if resume else None  # refuses other training params before any write
        if resume and _finished(exp):
            return _nothing_to_do(exp)
        if exp.dist.is_main:
            write_params(exp.layout, cfg.to_dict())
        tracker = roles.open_run_tracker(cfg, exp.layout, exp.dist, header, exp.mlflow_run_id)
        exp.mlflow_run_id = tracker.mlflow_run_id
        return _train(exp, tracker, stop)


def _train(exp: Experiment, tracker: Tracker, stop: GracefulStop) -> dict[str, Any]:
    """The iterations, then the summary; the MLflow run ends FINISHED, KILLED or FAILED."""
    cfg, metrics = exp.cfg, {}
    try:
        while exp.iteration < cfg.trainer.iterations and exp.stopper.stopped_by is None:
            if roles.agree_flag(stop.requested, exp.dist):
                _checkpoint_now(exp)
                break
            try:
                metrics = run_iteration(exp, checkpoint=False)
            except NonFiniteError as exc:
                exp.guard.skip(exp, exc)  # re-raised unless trainer.on_nonfinite: skip
                continue
            metrics |= _check_stop(exp, metrics)
            roles.agree_stop(exp.stopper, exp.dist)
            faults.point("curve.append")
            tracker.log(metrics, step=exp.env_steps)
            _maybe_checkpoint(exp, exp.env_steps - exp.steps_per_iteration)
            faults.point("iteration.end")
    except Interrupted as exc:  # a second signal: stopped at once, the last checkpoint stands
        tracker.end("KILLED")
        last = exp.checkpoint.last_saved
        at = _iteration_of(last)
        raise Interrupted(exc.signum, at, str(last) if last else None, at_once=True) from None
    except BaseException as exc:
        tracker.end("KILLED" if isinstance(exc, KeyboardInterrupt) else "FAILED")
        raise
    finally:
        if exp.store is not None:
            exp.store.close()
    summary = _summary(exp, metrics)
    if stop.signum is not None and not _finished(exp):
        tracker.finish({**summary, "interrupted_by": signal_name(stop.signum)}, status="KILLED")
        last = exp.checkpoint.last_saved
        raise Interrupted(stop.signum, _iteration_of(last), str(last) if last else None)
    tracker.finish(summary)
    return summary


def _iteration_of(checkpoint: Path | None) -> int | None:
    return iteration_from_name(checkpoint, CHECKPOINT_NAME) if checkpoint else None


def _finished(exp: Experiment) -> bool:
    return exp.iteration >= exp.cfg.trainer.iterations or exp.stopper.stopped_by is not None


def _nothing_to_do(exp: Experiment) -> dict[str, Any]:
    """A resume of a finished run: say so, write nothing, return the run's summary."""
    if exp.dist.is_main:
        why = (f"trainer.stop_when stopped it ({exp.stopper.stopped_by})" if exp.stopper.stopped_by
               else f"trainer.iterations is {exp.cfg.trainer.iterations}")
        print(f"resume: {exp.layout.root} is complete at iteration {exp.iteration} ({why}); nothing to "
              "do, no file changed (raise trainer.iterations to train on)", file=sys.stderr)
    summary = _summary(exp, {})
    if exp.dist.is_main and not exp.layout.metrics.is_file():  # killed after its last checkpoint
        atomic_write_json(exp.layout.metrics, {**summary, "mlflow_run_id": exp.mlflow_run_id})
    return summary


def run_iteration(exp: Experiment, checkpoint: bool = True) -> dict[str, float]:
    """One iteration in paper order: collect → advantage → update → (eval) → (checkpoint).

    ``checkpoint=False`` leaves the checkpoint to the caller (``run`` logs the iteration first, so
    a run killed in between never holds a checkpoint newer than its ``curve.csv``). The non-finite
    guard checks the rollout before it is stored or learned from, and the update before anything
    is saved (``NonFiniteError``).
    """
    t0 = time.perf_counter()
    exp.iteration += 1
    faults.point("collect.start")
    rollout, metrics = exp.collect()
    faults.point("collect.end")
    t1 = time.perf_counter()
    metrics |= exp.advantage(rollout)
    faults.point("advantage.end")
    attrs = functools.partial(_rollout_attrs, exp)
    exp.guard.check_rollout(exp, rollout, attrs)
    _store_rollout(exp, rollout, attrs())
    exp.guard.before_update(exp)
    faults.point("update.start")
    metrics |= exp.update(rollout, exp.iteration, exp.env_steps, exp.total_env_steps)
    exp.guard.check_update(exp, rollout, metrics, attrs)
    faults.point("update.end")
    t2 = time.perf_counter()
    before, exp.env_steps = exp.env_steps, exp.env_steps + exp.steps_per_iteration
    metrics |= _maybe_evaluate(exp, before)
    if checkpoint:
        _maybe_checkpoint(exp, before)
    exp.guard.passed()
    return metrics | exp.guard.metrics() | _timing(exp, t0, t1, t2)


def _rollout_attrs(exp: Experiment) -> dict[str, Any]:
    latest = exp.checkpoint.last_saved
    return {
        "iteration": exp.iteration,
        "env_steps": exp.env_steps + exp.steps_per_iteration,
        "env_id": exp.cfg.env.id,
        "seed": exp.cfg.trainer.seed,
        "params_hash": params_hash(exp.cfg),
        "training_hash": training_hash(exp.cfg),
        "checkpoint": latest.name if latest else None,
        "spaces": exp.spaces(),
    }


def _store_rollout(exp: Experiment, rollout: Any, attrs: dict[str, Any]) -> None:
    if exp.store is None:
        return
    # The collector reuses one buffer: the advantage keys in it are this iteration's, not stored.
    exp.store.submit(rollout.exclude(*exp.advantage.writes), attrs)


def _maybe_evaluate(exp: Experiment, before: int) -> dict[str, float]:
    last = exp.iteration == exp.cfg.trainer.iterations
    if exp.evaluate and (last or crossed(before, exp.env_steps, exp.cfg.trainer.eval_freq)):
        return _evaluate(exp)
    return {}


def _evaluate(exp: Experiment) -> dict[str, float]:
    assert exp.evaluate is not None
    faults.point("eval.start")
    exp.guard.check_weights(exp, "evaluation")
    exp.last_eval = exp.evaluate()
    return exp.last_eval


def _maybe_checkpoint(exp: Experiment, before: int) -> None:
    last = (exp.iteration == exp.cfg.trainer.iterations or exp.cfg.checkpoint.every_iteration
            or exp.stopper.stopped_by is not None)
    if last or crossed(before, exp.env_steps, exp.cfg.trainer.save_freq):
        _checkpoint_now(exp)


def _checkpoint_now(exp: Experiment) -> None:
    """Checkpoint the last complete iteration unless it already has one (or there is none yet)."""
    last = exp.checkpoint.last_saved
    if exp.iteration == 0 or (last is not None and last == exp.layout.checkpoint(exp.iteration)):
        return
    faults.point("checkpoint.start")
    exp.guard.check_weights(exp, "the checkpoint")
    roles.save_on_rank_zero(exp.checkpoint, exp.iteration, exp.state_dict(), exp.store, exp.dist)
    faults.point("checkpoint.end")


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
    return _evaluate(exp)


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
        **({"skipped_iterations": exp.guard.skipped} if exp.guard.skipped else {}),
    }
