"""The boundaries around the trainer's loop: start, resume, finish, failure, checkpoints, stop rules.

And the refusal of non-finite data.

Each function is one of the trainer's boundaries, kept apart from ``trainer.py`` so that the
iteration there reads as the order of the stages.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tensordict import TensorDict

from rlpipe.artifacts.atomic import atomic_write_json
from rlpipe.artifacts.checkpoints import checkpoint_fits
from rlpipe.artifacts.curve import truncate_curve
from rlpipe.artifacts.fs import disk_free
from rlpipe.artifacts.layout import CHECKPOINT_NAME, iteration_from_name, shard_name
from rlpipe.artifacts.params import write_params
from rlpipe.artifacts.store import write_rejected
from rlpipe.artifacts.store_policy import layout_of, stored_bytes
from rlpipe.build import load_learner_state, threads_reason
from rlpipe.config import ConfigError
from rlpipe.rollout import NonFiniteError
from rlpipe.runtime.allocator import tune_malloc
from rlpipe.testing import faults
from rlpipe.tracking.banner import run_banner, where_lines
from rlpipe.tracking.store_rate import StoreRate, store_line
from rlpipe.trainer import ranks
from rlpipe.trainer.guards import nonfinite_weight
from rlpipe.trainer.resume import load_online_checkpoint
from rlpipe.trainer.signals import GracefulStop, Interrupted, signal_name

if TYPE_CHECKING:
    from rlpipe.trainer.trainer import Trainer

__all__ = ["agree_flag", "check_stop", "check_weights", "checkpoint", "fail", "finish", "iteration_of",
           "refuse", "resume", "run_summary", "skip_iteration", "start", "watch_store"]

agree_flag = ranks.agree_flag


def start(trainer: Trainer, stop: GracefulStop) -> contextlib.ExitStack:
    """Lock and claim the run dir, resume if asked, write ``params.yaml``, open tracking.

    Returns what the run holds until it ends (the lock, the signal handlers). A resume of a
    finished run says so, changes no file and marks the run ``nothing_to_do``.
    """
    parts, state, cfg = trainer.parts, trainer.state, trainer.cfg
    with contextlib.ExitStack() as held:  # released again unless the start completes
        held.enter_context(ranks.hold_run_dir(parts.layout, parts.dist))
        held.enter_context(stop)
        ranks.claim_run_dir(parts.layout, parts.dist, trainer.resume, trainer.overwrite)
        if parts.store is not None:
            parts.store.clean_temporaries()
        header = resume(trainer) if trainer.resume else None  # refuses other training params first
        if trainer.resume and state.finished(parts):
            state.nothing_to_do, trainer.summary = True, _nothing_to_do(trainer)
            return held.pop_all()
        if parts.dist.is_main:
            write_params(parts.layout, cfg.to_dict())
        trainer.tracker = ranks.open_run_tracker(cfg, parts.layout, parts.dist, header,
                                                 state.restored_mlflow_run_id)
        trainer.mlflow_run = trainer.tracker.mlflow  # its id is read when needed: it may still be opening
        if parts.dist.is_main:
            print(run_banner(cfg, parts.algo.device, parts.algo.cfg, tune_malloc(),
                             threads_reason(cfg, parts.algo)), flush=True)
            print(where_lines(cfg, parts.layout.root, parts.env, trainer.tracker.mlflow), flush=True)
            _announce_store(trainer)
            trainer.tracker.announce_mlflow()
        return held.pop_all()


def _announce_store(trainer: Trainer) -> None:
    """Print the banner's store line and start watching the store's rate (rank 0, with a store)."""
    parts, cfg = trainer.parts, trainer.cfg
    if parts.store is None:
        return
    layout = layout_of(parts.collector.rollout.exclude(*parts.algo.advantage_keys))
    policy, world = parts.store.policy, parts.dist.world_size
    print(store_line(policy, layout, world, cfg.trainer.iterations, disk_free(parts.layout.rollouts)),
          flush=True)
    per_iteration = stored_bytes(policy.stored_layout(layout)) * world
    trainer.store_rate = StoreRate(per_iteration, policy.every, parts.steps_per_iteration,
                                   report_at=trainer.state.iteration + 3)


def watch_store(trainer: Trainer, metrics: dict[str, float]) -> None:
    """After an iteration's timing: the store's demanded rate once, one warning if the writer falls behind."""
    if trainer.store_rate is not None and trainer.parts.store is not None:
        last = trainer.state.iteration == trainer.cfg.trainer.iterations
        trainer.store_rate.observe(trainer.state.iteration, metrics, trainer.parts.store.last_write, last)


def resume(trainer: Trainer) -> list[str] | None:
    """Load the newest complete checkpoint; drop newer stores and curve rows; return the kept curve's header.

    Rollout stores newer than the checkpoint (written by the run that was stopped) are deleted, so
    the continued run writes the same stores as an uninterrupted one. Without a valid checkpoint a
    run that has stores is refused (nothing supersedes them; ``--overwrite`` starts over), and one
    without starts from iteration 0. A checkpoint of other training params is a ``ConfigError``
    naming them.
    """
    parts, state = trainer.parts, trainer.state
    latest = parts.checkpointer.latest()
    if latest is None:
        stored = parts.layout.rollout_paths()
        if stored:
            count = f"{len(stored)} rollout store{'s' if len(stored) > 1 else ''}"
            raise ConfigError(f"{parts.layout.rollouts}: {count} but no valid "
                              f"checkpoint under {parts.checkpointer.directory} to resume from; --resume "
                              "never deletes stores without one: restore a checkpoint, or start over with "
                              "--overwrite (deletes this run)")
        if parts.dist.is_main:
            print(f"resume: no checkpoint under {parts.checkpointer.directory}; starting from iteration 0",
                  file=sys.stderr)
        return None
    saved = load_online_checkpoint(latest, trainer.cfg)  # refuses other training params first
    with checkpoint_fits(latest):
        trainer.load_state_dict(saved)
    parts.checkpointer.last_saved = latest
    if parts.store is not None:
        faults.point("resume.discard")
        parts.store.discard_after(state.iteration)
    if not parts.dist.is_main:
        return None
    print(f"resume: continuing from {latest} (iteration {state.iteration})", file=sys.stderr)
    return truncate_curve(parts.layout.curve, state.iteration)


def finish(trainer: Trainer, signum: int | None) -> dict[str, Any]:
    """Flush the store, write ``metrics.json``, end tracking; fire ``run_end``; return the summary.

    ``signum``: the signal that asked the run to stop (``None``: none); such a run first
    checkpoints its last complete iteration, ends its MLflow run ``KILLED`` and then raises
    :class:`Interrupted`.
    """
    parts, state = trainer.parts, trainer.state
    if state.finished(parts):
        signum = None
    if signum is not None and trainer.tracker is not None:
        checkpoint(trainer)
    if parts.store is not None:
        parts.store.close()
    if trainer.tracker is None:
        return trainer.summary
    trainer.summary = run_summary(trainer, trainer.metrics)
    trainer._fire("run_end", metrics=dict(trainer.summary))
    tracker, trainer.tracker = trainer.tracker, None
    if signum is None:
        tracker.finish(trainer.summary)
        return trainer.summary
    tracker.finish({**trainer.summary, "interrupted_by": signal_name(signum)}, status="KILLED")
    last = parts.checkpointer.last_saved
    raise Interrupted(signum, iteration_of(last), str(last) if last else None)


def fail(trainer: Trainer, exc: BaseException) -> None:
    """End a run an iteration raised ``exc`` in: MLflow run ``FAILED`` (``KILLED`` for a signal).

    No ``metrics.json``, no checkpoint: ``latest`` stays on the last good one. A second signal's
    :class:`Interrupted` is raised again naming that checkpoint.
    """
    parts = trainer.parts
    with contextlib.suppress(Exception):  # the first failure is the one to report
        if parts.store is not None:
            parts.store.close()
    if trainer.tracker is not None:
        trainer.tracker.end("KILLED" if isinstance(exc, Interrupted | KeyboardInterrupt) else "FAILED")
        trainer.tracker = None
    if isinstance(exc, Interrupted):
        last = parts.checkpointer.last_saved
        raise Interrupted(exc.signum, iteration_of(last), str(last) if last else None,
                          at_once=exc.at_once) from None


def checkpoint(trainer: Trainer, force: bool = False) -> None:
    """Checkpoint the last complete iteration unless it already has one (or there is none yet).

    Every rank's rollout is on disk first; rank 0 writes. ``force``: write even when it has one.
    """
    parts, state = trainer.parts, trainer.state
    last = parts.checkpointer.last_saved
    has_one = last is not None and last == parts.layout.checkpoint(state.iteration)
    if not force and (state.iteration == 0 or has_one):
        return
    faults.point("checkpoint.start")
    check_weights(trainer, "the checkpoint")
    ranks.save_on_rank_zero(parts.checkpointer, state.iteration, trainer.state_dict(), parts.store,
                            parts.dist)
    faults.point("checkpoint.end")


def check_stop(trainer: Trainer, metrics: dict[str, float]) -> dict[str, float]:
    """Feed ``trainer.stop_when`` (rank 0 decides for all); at a stop, evaluate unless already done."""
    parts = trainer.parts
    stopped = parts.stopper.update(metrics)
    evaluated: dict[str, float] = {}
    evaluated_now = any(k.startswith("eval/") for k in metrics)
    if stopped is not None and parts.evaluator is not None and not evaluated_now:
        evaluated = trainer.evaluate()
    ranks.agree_stop(parts.stopper, parts.dist)
    return evaluated


def check_weights(trainer: Trainer, before: str) -> None:
    """Before a checkpoint or evaluation: every weight is finite (else ``NonFiniteError``)."""
    name = nonfinite_weight(trainer.parts.algo.policy)
    if name is not None:
        raise NonFiniteError(f"non-finite weight {name!r} at iteration {trainer.state.iteration} before "
                             f"{before}; {_latest(trainer)}", name, trainer.state.iteration)


def refuse(trainer: Trainer, rollout: TensorDict, key: str, where: str, stored: bool = False) -> None:
    """Keep the refused rollout under ``rollouts/rejected/`` and raise ``NonFiniteError`` naming ``key``.

    ``stored``: the rollout itself was fine and already went to the store: take it back out.
    """
    parts, state = trainer.parts, trainer.state
    if stored and parts.store is not None:
        parts.store.discard_after(state.iteration - 1)
    reason = f"non-finite {key!r} at iteration {state.iteration} ({where})"
    path = parts.layout.rejected_rollout(state.iteration)
    if parts.dist.active:
        path = path / shard_name(parts.dist.rank)
    write_rejected(path, rollout.exclude(*parts.algo.advantage_keys), state.rollout_attrs(parts), reason)
    raise NonFiniteError(f"{reason}; rollout kept at {path}; {_latest(trainer)}", key, state.iteration)


def skip_iteration(trainer: Trainer, exc: NonFiniteError) -> dict[str, float]:
    """``trainer.on_nonfinite: skip``: drop the refused iteration (weights as before it); else re-raise."""
    parts, state = trainer.parts, trainer.state
    snapshot = parts.guard.skip(exc)
    if snapshot is not None:
        load_learner_state(parts.algo, snapshot)
    state.env_steps = state.iteration * parts.steps_per_iteration
    print(f"Warning: {exc}; iteration skipped ({parts.guard.in_a_row} in a row, at most "
          f"{parts.guard.max_in_a_row})", file=sys.stderr)
    return {"iteration": float(state.iteration), "env_steps": float(state.env_steps), **parts.guard.metrics()}


def run_summary(trainer: Trainer, metrics: dict[str, float]) -> dict[str, Any]:
    """The run summary (``metrics.json``): counts, wall time, last train/update/eval metrics, checkpoint."""
    parts, state = trainer.parts, trainer.state
    last = parts.checkpointer.last_saved
    return {
        "iterations": state.iteration,
        "env_steps": state.env_steps,
        "wall_s": round(state.wall_s, 3),
        **{k: v for k, v in metrics.items() if k.startswith(("train/", "update/"))},
        **state.last_eval,
        "checkpoint": str(last) if last else None,
        "stopped_by": parts.stopper.stopped_by,
        **({"skipped_iterations": parts.guard.skipped} if parts.guard.skipped else {}),
    }


def iteration_of(checkpoint: Path | None) -> int | None:
    """The iteration a ``ckpt-NNNNNN.pt`` path belongs to (``None`` for no checkpoint)."""
    return iteration_from_name(checkpoint, CHECKPOINT_NAME) if checkpoint else None


def _nothing_to_do(trainer: Trainer) -> dict[str, Any]:
    """A resume of a finished run: say so, write nothing (but a missing summary), return the summary."""
    parts, state = trainer.parts, trainer.state
    summary = run_summary(trainer, {})
    if not parts.dist.is_main:
        return summary
    why = (f"trainer.stop_when stopped it ({parts.stopper.stopped_by})" if parts.stopper.stopped_by
           else f"trainer.iterations is {trainer.cfg.trainer.iterations}")
    print(f"resume: {parts.layout.root} is complete at iteration {state.iteration} ({why}); nothing to "
          "do, no file changed (raise trainer.iterations to train on)", file=sys.stderr)
    if not parts.layout.metrics.is_file():  # killed after its last checkpoint, before its summary
        atomic_write_json(parts.layout.metrics, {**summary, "mlflow_run_id": trainer.mlflow_run_id})
    return summary


def _latest(trainer: Trainer) -> str:
    checkpointer = trainer.parts.checkpointer
    last = checkpointer.last_saved or checkpointer.latest()
    where = f"latest stays {last.name}" if last else "no checkpoint written"
    return f"{where} (fix the cause, then resume with --resume)"
