"""The online loop: collect → advantage → update → (eval) → (checkpoint), iteration after iteration.

:class:`OnlineRun` is one run, started, stepped and finished; ``rlpipe run`` and
:class:`rlpipe.Trainer` both drive it, so a script and the CLI cannot drift apart.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Iterator
from typing import Any

from tensordict import TensorDict

from rlpipe.artifacts.params import write_params
from rlpipe.config import RunConfig
from rlpipe.rollout import NonFiniteError
from rlpipe.run import roles
from rlpipe.run.events import EventContext, Events
from rlpipe.run.experiment import Experiment, build
from rlpipe.run.records import (
    checkpoint_now,
    evaluate_now,
    finished,
    iteration_of,
    nothing_to_do,
    rollout_attrs,
    run_summary,
    store_rollout,
    timing,
)
from rlpipe.run.resume import resume as continue_run
from rlpipe.run.signals import GracefulStop, Interrupted, signal_name
from rlpipe.runtime.allocator import tune_malloc
from rlpipe.testing import faults
from rlpipe.tracking import Tracker
from rlpipe.tracking.banner import run_banner, where_lines

__all__ = ["OnlineRun", "crossed", "run", "run_iteration"]


def crossed(before: int, after: int, every: int) -> bool:
    """True when the counter passed a multiple of ``every`` going from ``before`` to ``after``."""
    return after // every > before // every


def run(cfg: RunConfig, resume: bool = False, overwrite: bool = False) -> dict[str, Any]:
    """Train to ``trainer.iterations``: params, rollouts, checkpoints, ``metrics.json``; return a summary.

    ``resume`` continues from the last complete checkpoint (bit for bit on CPU); without one it
    starts from iteration 0 and says so on stderr. A fresh run into a run dir that holds an earlier
    run's rollouts or checkpoints is refused unless ``overwrite`` (which deletes that run first).
    The run dir is locked while the run writes it; SIGINT/SIGTERM stop at the next iteration
    boundary with a checkpoint and raise :class:`~rlpipe.run.signals.Interrupted`.
    """
    online = OnlineRun(build(cfg), resume=resume, overwrite=overwrite)
    for _ in online:
        pass
    return online.summary


def run_iteration(exp: Experiment, checkpoint: bool = True) -> dict[str, float]:
    """One iteration of ``exp`` without tracking or events (benchmarks and tests drive the loop so)."""
    online = OnlineRun(exp, events=Events())
    online.collect()
    return online.learn(checkpoint=checkpoint)


class OnlineRun:
    """One training run over a built :class:`Experiment`; iterating yields each iteration's metrics.

    ``start``, then ``collect``/``learn`` (or ``step``) until ``done``, then ``finish`` (or ``fail``
    when an iteration raised). Between ``start`` and the end the run dir is locked and SIGINT/SIGTERM
    only ask the run to stop at the next iteration boundary.
    """

    def __init__(self, exp: Experiment, resume: bool = False, overwrite: bool = False,
                 events: Events | None = None) -> None:
        self.exp, self.resume, self.overwrite = exp, resume, overwrite
        self.events = events or Events()
        if events is None and (exp.cfg.trainer.events.train or exp.cfg.trainer.events.eval):
            self.events.add_config(exp.cfg.trainer.events)
        self.tracker: Tracker | None = None
        self.metrics: dict[str, float] = {}
        self.summary: dict[str, Any] = {}
        self._collected: tuple[TensorDict, dict[str, float], float, float] | None = None
        self._held = contextlib.ExitStack()  # the run dir's lock and the signal handlers
        self._stop = GracefulStop()
        self._nothing_to_do = False
        if self.events.wants("eval_step") and exp.evaluate is not None:
            exp.evaluate.on_step = self._eval_step

    @property
    def mlflow_run_id(self) -> str | None:
        """The run's MLflow run id (``None`` without MLflow or before :meth:`start`); waits for it to open."""
        return self.exp.mlflow_run.run_id if self.exp.mlflow_run is not None else None

    @property
    def mlflow_experiment_id(self) -> str | None:
        """Its MLflow experiment id (``None`` without one or while the run is still opening)."""
        return self.exp.mlflow_run.experiment_id if self.exp.mlflow_run is not None else None

    @property
    def done(self) -> bool:
        """The last iteration ran, or a stop condition or event ended the run."""
        return finished(self.exp) or self._nothing_to_do or roles.agree_flag(self._stop.requested,
                                                                               self.exp.dist)

    def start(self) -> None:
        """Lock and claim the run dir, resume if asked, write ``params.yaml``, open tracking; ``run_start``.

        A resume of a finished run says so and changes no file (the run is then ``done``).
        """
        exp = self.exp
        with self._held as held:  # released again unless the start completes
            held.enter_context(roles.hold_run_dir(exp.layout, exp.dist))
            held.enter_context(self._stop)
            roles.claim_run_dir(exp.layout, exp.dist, self.resume, self.overwrite)
            if exp.store is not None:
                exp.store.clean_temporaries()
            header = continue_run(exp) if self.resume else None  # refuses other training params first
            if self.resume and finished(exp):
                self._nothing_to_do, self.summary = True, nothing_to_do(exp)
                self._held = held.pop_all()
                return
            if exp.dist.is_main:
                write_params(exp.layout, exp.cfg.to_dict())
            self.tracker = roles.open_run_tracker(exp.cfg, exp.layout, exp.dist, header,
                                                   exp.restored_mlflow_run_id)
            if exp.dist.is_main:
                print(run_banner(exp.cfg, exp.device, exp.algo.cfg, tune_malloc()), flush=True)
            exp.mlflow_run = self.tracker.mlflow  # its id is read when needed: it may still be opening
            if exp.dist.is_main:
                print(where_lines(exp.cfg, exp.layout.root, exp.env, self.tracker.mlflow), flush=True)
                self.tracker.announce_mlflow()
            self._held = held.pop_all()
        self._fire("run_start", env=exp.env)

    def __iter__(self) -> Iterator[dict[str, float]]:
        """Start, yield every iteration's metrics, finish (also when the caller stops early)."""
        self.start()
        try:
            while not self.done:
                yield self.step()
        except GeneratorExit:
            self.finish()
            raise
        except BaseException as exc:
            self.fail(exc)
            raise
        self.finish()

    def step(self) -> dict[str, float]:
        """One whole iteration: :meth:`collect` then :meth:`learn`.

        With ``trainer.on_nonfinite: skip`` an iteration the non-finite guard refused is dropped
        (weights as before it) and its metrics are the skip count; otherwise ``NonFiniteError``.
        """
        try:
            self.collect()
            return self.learn()
        except NonFiniteError as exc:
            self._collected = None
            self.exp.guard.skip(self.exp, exc)  # re-raised unless trainer.on_nonfinite: skip
            return {"iteration": float(self.exp.iteration), "env_steps": float(self.exp.env_steps),
                    **self.exp.guard.metrics()}

    def collect(self) -> TensorDict:
        """Collect the next rollout ``[N, T+1]``; fire ``after_collect``.

        :meth:`learn` hands it to the store once the non-finite guard passed it.
        """
        exp = self.exp
        t0 = time.perf_counter()
        exp.iteration += 1
        faults.point("collect.start")
        rollout, metrics = exp.collect()
        faults.point("collect.end")
        t1 = time.perf_counter()
        metrics |= self._fire("after_collect", env=exp.env, rollout=rollout, metrics=metrics)
        self._collected = (rollout, metrics, t0, t1)
        return rollout

    def learn(self, checkpoint: bool = True) -> dict[str, float]:
        """Advantage + update of the collected rollout, eval, stop checks, logging and checkpoint.

        Logging needs :meth:`start` (without it the metrics are only returned); ``checkpoint=False``
        skips the checkpoint stage. The non-finite guard checks the rollout and advantages before
        they are stored or learned from, and the update before anything is saved.
        """
        if self._collected is None:
            raise RuntimeError("learn() needs a rollout: call collect() first")
        exp = self.exp
        rollout, metrics, t0, t1 = self._collected
        self._collected = None
        metrics |= exp.advantage(rollout)
        faults.point("advantage.end")
        attrs = functools.partial(rollout_attrs, exp)
        exp.guard.check_rollout(exp, rollout, attrs)
        store_rollout(exp, rollout, attrs())
        exp.guard.before_update(exp)
        faults.point("update.start")
        metrics |= exp.update(rollout, exp.iteration, exp.env_steps, exp.total_env_steps)
        exp.guard.check_update(exp, rollout, metrics, attrs)
        faults.point("update.end")
        t2 = time.perf_counter()
        before, exp.env_steps = exp.env_steps, exp.env_steps + exp.steps_per_iteration
        metrics |= self._maybe_evaluate(before)
        metrics |= timing(exp, t0, t1, t2)
        metrics |= self._fire("after_update", env=exp.env, metrics=metrics)
        metrics |= self._check_stop(metrics)
        roles.agree_stop(exp.stopper, exp.dist)
        metrics |= exp.guard.metrics()
        if self.tracker is not None:
            faults.point("curve.append")
            self.tracker.log(metrics, step=exp.env_steps)
            if exp.evaluate is not None and exp.evaluate.last_video is not None:
                self.tracker.log_artifact(exp.evaluate.last_video, "eval")  # this iteration's eval video
        if exp.evaluate is not None:
            exp.evaluate.last_video = None
        if checkpoint:
            self._maybe_checkpoint(before)
        exp.guard.passed()
        faults.point("iteration.end")
        self.metrics = metrics
        return metrics

    def finish(self) -> dict[str, Any]:
        """Flush the store, write ``metrics.json``, end tracking; fire ``run_end``; return the summary.

        A run stopped by a signal first checkpoints its last complete iteration, ends its MLflow run
        ``KILLED`` and then raises :class:`~rlpipe.run.signals.Interrupted`.
        """
        exp = self.exp
        with self._held:  # the lock and the signal handlers go when this returns or raises
            signum = self._stop.signum if not finished(exp) else None
            if signum is not None and self.tracker is not None:
                checkpoint_now(exp)
            if exp.store is not None:
                exp.store.close()
            if self.tracker is None:
                return self.summary
            self.summary = run_summary(exp, self.metrics)
            self._fire("run_end", env=exp.env, metrics=dict(self.summary))
            if signum is None:
                self.tracker.finish(self.summary)
                self.tracker = None
                return self.summary
            self.tracker.finish({**self.summary, "interrupted_by": signal_name(signum)}, status="KILLED")
            self.tracker = None
            last = exp.checkpoint.last_saved
            raise Interrupted(signum, iteration_of(last), str(last) if last else None)

    def fail(self, exc: BaseException) -> None:
        """End a run an iteration raised ``exc`` in: MLflow run ``FAILED`` (``KILLED`` for a signal).

        No ``metrics.json``, no checkpoint: ``latest`` stays on the last good one. A second signal's
        :class:`~rlpipe.run.signals.Interrupted` is raised again naming that checkpoint.
        """
        exp = self.exp
        with self._held:
            with contextlib.suppress(Exception):  # the first failure is the one to report
                if exp.store is not None:
                    exp.store.close()
            if self.tracker is not None:
                self.tracker.end("KILLED" if isinstance(exc, Interrupted | KeyboardInterrupt) else "FAILED")
                self.tracker = None
        if isinstance(exc, Interrupted):
            last = exp.checkpoint.last_saved
            raise Interrupted(exc.signum, iteration_of(last), str(last) if last else None,
                              at_once=exc.at_once) from None

    def stop(self, reason: str) -> None:
        """End the run after the current iteration (a checkpoint is written as at a normal end)."""
        self.exp.stopper.stopped_by = reason

    def _fire(self, event: str, **fields: Any) -> dict[str, float]:
        """Call ``event``'s handlers (none registered: nothing is built); return what they logged."""
        if not self.events.wants(event):
            return {}
        exp = self.exp
        ctx = EventContext(event, exp.iteration, exp.env_steps, exp.layout.root, **fields)
        if not self.events.fire(ctx):
            self.stop(f"event {event}")
        return ctx.logged

    def _eval_step(self, env: Any, step: int) -> None:
        self._fire("eval_step", env=env, metrics={"eval/step": float(step)})

    def _maybe_evaluate(self, before: int) -> dict[str, float]:
        exp = self.exp
        last = exp.iteration == exp.cfg.trainer.iterations
        if exp.evaluate and (last or crossed(before, exp.env_steps, exp.cfg.trainer.eval_freq)):
            every = exp.cfg.eval.video_freq
            evaluated = evaluate_now(exp, film=last or every is None or crossed(before, exp.env_steps, every))
            return evaluated | self._fire("after_eval", env=exp.evaluate.env, metrics=dict(evaluated))
        return {}

    def _check_stop(self, metrics: dict[str, float]) -> dict[str, float]:
        """Feed ``trainer.stop_when``; on a stop, evaluate now unless this iteration already did."""
        exp = self.exp
        if exp.stopper.update(metrics) is None or exp.evaluate is None:
            return {}
        if any(key.startswith("eval/") for key in metrics):
            return {}
        return evaluate_now(exp)

    def _maybe_checkpoint(self, before: int) -> None:
        exp = self.exp
        last = (exp.iteration == exp.cfg.trainer.iterations or exp.cfg.checkpoint.every_iteration
                or exp.stopper.stopped_by is not None)
        if last or crossed(before, exp.env_steps, exp.cfg.trainer.save_freq):
            checkpoint_now(exp)
            self._fire("after_checkpoint", env=exp.env, checkpoint=exp.checkpoint.last_saved)
