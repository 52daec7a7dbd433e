"""What the online loop records around each iteration, and the run summary (``metrics.json``).

Rollout attrs and the store hand-off, eval, checkpoints and ``time/*`` metrics.

Kept apart from :mod:`rlpipe.run.loop` so that the loop reads as the order of the stages.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from tensordict import TensorDict

from rlpipe.artifacts.atomic import atomic_write_json
from rlpipe.artifacts.layout import CHECKPOINT_NAME, iteration_from_name
from rlpipe.config import params_hash, training_hash
from rlpipe.run import roles
from rlpipe.run.experiment import Experiment
from rlpipe.testing import faults

__all__ = ["checkpoint_now", "evaluate_now", "finished", "iteration_of", "nothing_to_do", "rollout_attrs",
           "run_summary", "store_rollout", "timing"]


def rollout_attrs(exp: Experiment) -> dict[str, Any]:
    """Attrs stored with the rollout: its origin (env, seed, hashes, checkpoint, spaces)."""
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
        **exp.env_attrs(),
    }


def store_rollout(exp: Experiment, rollout: TensorDict, attrs: dict[str, Any]) -> None:
    """Hand the collected ``[N, T+1]`` rollout to the background store (no-op with the store off)."""
    if exp.store is None:
        return
    # The stored rollout is what was collected: the advantage keys stay out.
    exp.store.submit(rollout.exclude(*exp.advantage.writes), attrs)


def evaluate_now(exp: Experiment, film: bool = True) -> dict[str, float]:
    """Run the eval episodes on finite weights; remember and return their metrics.

    ``film``: also record this eval's video (with ``eval.video``; ``eval.video_freq`` thins them).
    """
    assert exp.evaluate is not None
    faults.point("eval.start")
    exp.guard.check_weights(exp, "evaluation")
    exp.last_eval = exp.evaluate(exp.layout.eval_video(exp.iteration) if film else None)
    return exp.last_eval


def checkpoint_now(exp: Experiment) -> None:
    """Checkpoint the last complete iteration unless it already has one (or there is none yet)."""
    last = exp.checkpoint.last_saved
    if exp.iteration == 0 or (last is not None and last == exp.layout.checkpoint(exp.iteration)):
        return
    faults.point("checkpoint.start")
    exp.guard.check_weights(exp, "the checkpoint")
    roles.save_on_rank_zero(exp.checkpoint, exp.iteration, exp.state_dict(), exp.store, exp.dist)
    faults.point("checkpoint.end")


def iteration_of(checkpoint: Path | None) -> int | None:
    """The iteration a ``ckpt-NNNNNN.pt`` path belongs to (``None`` for no checkpoint)."""
    return iteration_from_name(checkpoint, CHECKPOINT_NAME) if checkpoint else None


def finished(exp: Experiment) -> bool:
    """True once the run reached ``trainer.iterations`` or a stop condition fired."""
    return exp.iteration >= exp.cfg.trainer.iterations or exp.stopper.stopped_by is not None


def nothing_to_do(exp: Experiment) -> dict[str, Any]:
    """A resume of a finished run: say so, write nothing (but a missing summary), return the summary."""
    summary = run_summary(exp, {})
    if not exp.dist.is_main:
        return summary
    why = (f"trainer.stop_when stopped it ({exp.stopper.stopped_by})" if exp.stopper.stopped_by
           else f"trainer.iterations is {exp.cfg.trainer.iterations}")
    print(f"resume: {exp.layout.root} is complete at iteration {exp.iteration} ({why}); nothing to "
          "do, no file changed (raise trainer.iterations to train on)", file=sys.stderr)
    if not exp.layout.metrics.is_file():  # killed after its last checkpoint, before its summary
        atomic_write_json(exp.layout.metrics, {**summary, "mlflow_run_id": exp.mlflow_run_id})
    return summary


def timing(exp: Experiment, t0: float, t1: float, t2: float) -> dict[str, float]:
    """``time/*`` metrics of the iteration started at ``t0`` (collect ended ``t1``, update ``t2``)."""
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


def run_summary(exp: Experiment, metrics: dict[str, float]) -> dict[str, Any]:
    """The run summary (``metrics.json``): counts, wall time, last train/update/eval metrics, checkpoint."""
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
