"""The run's session: what a started run holds until it ends — the run dir's lock, tracking, its summary.

:class:`RunSession` opens (lock and claim the run dir, resume, ``params.yaml``, the tracker and its
MLflow run), logs one row per iteration, checkpoints, and ends the run (``metrics.json`` and the
MLflow run ``FINISHED``, or ``FAILED``/``KILLED``). It works on the run's parts and counters and
never sees the ``Trainer``, which drives it.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from typing import Any

from rlpipe.artifacts.atomic import atomic_write_json
from rlpipe.artifacts.checkpoints import checkpoint_fits
from rlpipe.artifacts.curve import truncate_curve
from rlpipe.artifacts.fs import disk_free
from rlpipe.artifacts.params import write_params
from rlpipe.artifacts.removal import set_aside
from rlpipe.artifacts.store_policy import layout_of, stored_bytes
from rlpipe.build import threads_reason
from rlpipe.config import RunConfig
from rlpipe.runtime.allocator import tune_malloc
from rlpipe.runtime.distributed import barrier
from rlpipe.testing import faults
from rlpipe.tracking import Tracker
from rlpipe.tracking.banner import run_banner, where_lines
from rlpipe.tracking.store_rate import StoreRate, store_line
from rlpipe.trainer import ranks
from rlpipe.trainer.lifecycle import check_weights, iteration_of, run_summary
from rlpipe.trainer.parts import Parts
from rlpipe.trainer.replay_memory import refill_ring
from rlpipe.trainer.resume import load_online_checkpoint
from rlpipe.trainer.signals import GracefulStop, Interrupted, signal_name
from rlpipe.trainer.state import RunState

__all__ = ["RunSession"]


class RunSession:
    """The lock, tracker, MLflow run, store watch and summary of one run, from :meth:`open` to the end."""

    def __init__(self, parts: Parts, state: RunState) -> None:
        self.parts, self.state = parts, state
        self.tracker: Tracker | None = None
        """The open tracker (console row, ``curve.csv``, MLflow) between :meth:`open` and the end."""
        self.mlflow_run: Any = None
        """The open MLflow run (rank 0 with tracking on); it may still be opening."""
        self.store_rate: StoreRate | None = None
        """Rank 0's watch on the store's write rate (with a store)."""
        self.summary: dict[str, Any] = {}
        """The run's summary (``metrics.json``) once it finished."""
        self.held = contextlib.ExitStack()
        """The run dir's lock and the signal handlers, released when the run ends."""

    @property
    def cfg(self) -> RunConfig:
        """The run's config (the counters' own: ``total_steps`` may have set its iterations)."""
        return self.state.cfg

    @property
    def mlflow_run_id(self) -> str | None:
        """The MLflow run this run logs to (``None`` without tracking); waits for it to open."""
        run = self.mlflow_run
        return run.run_id if run is not None else self.state.restored_mlflow_run_id

    # ---------------------------------------------------------------------------------- opening

    def open(self, stop: GracefulStop, resume: bool, overwrite: bool) -> None:
        """Lock and claim the run dir, resume if asked, write ``params.yaml``, open tracking.

        Holds the lock and the signal handlers (:attr:`held`) until the run ends. A resume of a
        finished run says so, changes no file and marks the run ``nothing_to_do``.
        """
        parts, state, cfg = self.parts, self.state, self.cfg
        with contextlib.ExitStack() as held:  # released again unless the start completes
            held.enter_context(ranks.hold_run_dir(parts.layout, parts.dist))
            held.enter_context(stop)
            ranks.claim_run_dir(parts.layout, parts.dist, resume, overwrite)
            if parts.store is not None:
                parts.store.clean_temporaries()
            header = self._resume() if resume else None  # refuses other training params first
            if resume and state.finished(parts):
                state.nothing_to_do, self.summary = True, self._nothing_to_do()
                self.held = held.pop_all()
                return
            if parts.dist.is_main:
                write_params(parts.layout, cfg.to_dict())
            tracker = ranks.open_run_tracker(
                cfg, parts.layout, parts.dist, header, state.restored_mlflow_run_id
            )
            self.tracker, self.mlflow_run = tracker, tracker.mlflow  # the run's id is read when needed
            if parts.dist.is_main:
                print(
                    run_banner(
                        cfg, parts.algo.device, parts.algo.cfg, tune_malloc(), threads_reason(cfg, parts.algo)
                    ),
                    flush=True,
                )
                print(where_lines(cfg, parts.layout.root, parts.env, tracker.mlflow), flush=True)
                self._announce_store()
                tracker.announce_mlflow()
            self.held = held.pop_all()

    def _resume(self) -> list[str] | None:
        """Load the newest complete checkpoint; drop newer stores and curve rows; the kept curve's header.

        Rollout stores newer than the checkpoint (written by the run that was stopped) are deleted,
        so the continued run writes the same stores as an uninterrupted one. Without a valid
        checkpoint the run starts over (:meth:`_start_over`). A checkpoint of other training params
        is a ``ConfigError`` naming them.
        """
        parts, state = self.parts, self.state
        latest = parts.checkpointer.latest()
        if latest is None:
            self._start_over()
            return None
        saved = load_online_checkpoint(latest, self.cfg)  # refuses other training params first
        with checkpoint_fits(latest):
            state.load_state_dict(parts, saved)
        parts.checkpointer.last_saved = latest
        if parts.store is not None:
            faults.point("resume.discard")
            parts.store.discard_after(state.iteration)
        refill_ring(parts, state.iteration)
        if not parts.dist.is_main:
            return None
        print(f"resume: continuing from {latest} (iteration {state.iteration})", file=sys.stderr)
        return truncate_curve(parts.layout.curve, state.iteration)

    def _start_over(self) -> None:
        """``--resume`` without a valid checkpoint: start from iteration 0, earlier stores set aside.

        Nothing can continue the stopped run's stores (the weights that collected them are gone),
        and their write-once names would block the new run's: rank 0 moves them, never deletes
        them, to ``rollouts/superseded-K/`` and says so; the other ranks wait for it.
        """
        parts = self.parts
        said = f"resume: no checkpoint under {parts.checkpointer.directory}"
        stored = parts.layout.rollout_paths() if parts.dist.is_main else {}
        if stored:
            aside = parts.layout.superseded()
            set_aside(stored.values(), aside, within=parts.layout.root)
            plural = "s" if len(stored) > 1 else ""
            said += (
                f"; the {len(stored)} rollout store{plural} of the stopped run (iteration{plural} "
                f"{_span(list(stored))}) moved to {aside} (kept: delete it when not needed)"
            )
        barrier()
        if parts.dist.is_main:
            print(f"{said}; starting from iteration 0", file=sys.stderr)

    def _nothing_to_do(self) -> dict[str, Any]:
        """A resume of a finished run: say so, write nothing (but a missing summary), return the summary."""
        parts, state = self.parts, self.state
        summary = run_summary(parts, state, {})
        if not parts.dist.is_main:
            return summary
        why = (
            f"trainer.stop_when stopped it ({parts.stopper.stopped_by})"
            if parts.stopper.stopped_by
            else f"trainer.iterations is {self.cfg.trainer.iterations}"
        )
        print(
            f"resume: {parts.layout.root} is complete at iteration {state.iteration} ({why}); nothing to "
            "do, no file changed (raise trainer.iterations to train on)",
            file=sys.stderr,
        )
        if not parts.layout.metrics.is_file():  # killed after its last checkpoint, before its summary
            atomic_write_json(parts.layout.metrics, {**summary, "mlflow_run_id": self.mlflow_run_id})
        return summary

    def _announce_store(self) -> None:
        """Print the banner's store line and start watching the store's rate (rank 0, with a store)."""
        parts = self.parts
        if parts.store is None:
            return
        layout = layout_of(parts.collector.rollout.exclude(*parts.algo.advantage_keys))
        policy, world = parts.store.policy, parts.dist.world_size
        iterations = self.cfg.trainer.iterations
        print(store_line(policy, layout, world, iterations, disk_free(parts.layout.rollouts)), flush=True)
        per_iteration = stored_bytes(policy.stored_layout(layout)) * world
        self.store_rate = StoreRate(
            per_iteration, policy.every, parts.steps_per_iteration, report_at=self.state.iteration + 3
        )

    # ------------------------------------------------------------------------------- iterations

    def watch_store(self, metrics: dict[str, float]) -> None:
        """After an iteration's timing: the store's demanded rate once, a warning if its writer lags."""
        if self.store_rate is not None and self.parts.store is not None:
            last = self.state.iteration == self.cfg.trainer.iterations
            self.store_rate.observe(self.state.iteration, metrics, self.parts.store.last_write, last)

    def show_columns(self, columns: dict[str, str]) -> None:
        """Give each metric of ``{metric: header}`` a console column (rank 0's table, once open)."""
        if self.tracker is not None:
            for key, header in columns.items():
                self.tracker.table.add_column(header, key)

    def log(self, metrics: dict[str, float]) -> None:
        """One row: console, ``curve.csv`` and MLflow (rank 0, once open), and the eval video."""
        evaluator = self.parts.evaluator
        if self.tracker is not None:
            faults.point("curve.append")
            self.tracker.log(metrics, step=self.state.env_steps)
            if evaluator is not None and evaluator.last_video is not None:
                self.tracker.log_artifact(evaluator.last_video, "eval")
        if evaluator is not None:
            evaluator.last_video = None

    def state_dict(self) -> dict[str, Any]:
        """Everything a bit-exact resume needs (weights_only-safe), naming this run's MLflow run."""
        return self.state.state_dict(self.parts, self.mlflow_run_id)

    def checkpoint(self, force: bool = False) -> None:
        """Checkpoint the last complete iteration unless it already has one (or there is none yet).

        Every rank's rollout is on disk first; rank 0 writes. ``force``: write even when it has one.
        """
        parts, state = self.parts, self.state
        last = parts.checkpointer.last_saved
        has_one = last is not None and last == parts.layout.checkpoint(state.iteration)
        if not force and (state.iteration == 0 or has_one):
            return
        faults.point("checkpoint.start")
        check_weights(parts, state.iteration, "the checkpoint")
        ranks.save_on_rank_zero(
            parts.checkpointer, state.iteration, self.state_dict(), parts.store, parts.dist
        )
        faults.point("checkpoint.end")

    # ---------------------------------------------------------------------------------- the end

    def finish(
        self, metrics: dict[str, float], signum: int | None, on_end: Callable[[dict[str, Any]], object]
    ) -> dict[str, Any]:
        """Flush the store, write ``metrics.json``, call ``on_end(summary)``, end tracking; the summary.

        ``metrics``: the last iteration's; ``signum``: the signal that asked the run to stop
        (``None``: none). Such a run first checkpoints its last complete iteration, ends its MLflow
        run ``KILLED`` and then raises :class:`Interrupted`. The lock goes when this returns or raises.
        """
        with self.held:
            parts, state = self.parts, self.state
            if state.finished(parts):
                signum = None
            if signum is not None and self.tracker is not None:
                self.checkpoint()
            if parts.store is not None:
                parts.store.close()
            if self.tracker is None:
                return self.summary
            self.summary = run_summary(parts, state, metrics)
            on_end(dict(self.summary))
            tracker, self.tracker = self.tracker, None
            if signum is None:
                tracker.finish(self.summary)
                return self.summary
            tracker.finish({**self.summary, "interrupted_by": signal_name(signum)}, status="KILLED")
            raise self._interrupted(signum)

    def fail(self, exc: BaseException) -> None:
        """End a run an iteration raised ``exc`` in: MLflow run ``FAILED`` (``KILLED`` for a signal).

        No ``metrics.json``, no checkpoint: ``latest`` stays on the last good one. A second signal's
        :class:`Interrupted` is raised again naming that checkpoint. The lock goes.
        """
        with self.held:
            with contextlib.suppress(Exception):  # the first failure is the one to report
                if self.parts.store is not None:
                    self.parts.store.close()
            if self.tracker is not None:
                self.tracker.end("KILLED" if isinstance(exc, Interrupted | KeyboardInterrupt) else "FAILED")
                self.tracker = None
            if isinstance(exc, Interrupted):
                raise self._interrupted(exc.signum, exc.at_once) from None

    def _interrupted(self, signum: int, at_once: bool = False) -> Interrupted:
        last = self.parts.checkpointer.last_saved
        return Interrupted(signum, iteration_of(last), str(last) if last else None, at_once=at_once)


def _span(iterations: list[int]) -> str:
    """``3`` for one iteration, ``1–3`` for several (ascending)."""
    return f"{iterations[0]}" if len(iterations) == 1 else f"{iterations[0]}–{iterations[-1]}"
