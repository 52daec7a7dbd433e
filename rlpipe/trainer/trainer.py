"""``Trainer``: one training run — ``train()`` is the pipeline, and the Python face of ``rlpipe run``.

``rlpipe run params.yaml`` builds a ``Trainer`` and calls :meth:`Trainer.train`; a script does the
same, so both write the same run directory, stores, checkpoints and MLflow run, bit for bit::

    trainer = Trainer.from_params("params.yaml", overrides={"algorithm.cfg.clip_coef": 0.1})
    trainer.add_event("after_update", lambda ctx: ctx.log("custom/x", 1.0))
    summary = trainer.train()                # or: for metrics in trainer: ...
    rollout = trainer.collect(); metrics = trainer.update(rollout)   # or one step at a time

One iteration of :meth:`train`: :meth:`collect`, then :meth:`update` — advantage → (guard) →
store → update → (guard) → eval → events, stop rules and tracking → checkpoint. The trainer owns
the env, the collector, the algorithm (which owns the policy and its optimizer), the rollout store,
the checkpoints and the counters ``iteration`` and ``env_steps``.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tensordict import TensorDict

from rlpipe.algorithms import BaseAlgorithm
from rlpipe.algorithms.offpolicy import OffPolicyAlgorithm
from rlpipe.artifacts.layout import RunLayout
from rlpipe.build import update_algorithm
from rlpipe.config import ConfigError, RunConfig
from rlpipe.envs import BatchedEnv
from rlpipe.location import AnyPath
from rlpipe.policies import Policy
from rlpipe.rollout_checks import NonFiniteError
from rlpipe.testing import faults
from rlpipe.trainer import lifecycle, ranks
from rlpipe.trainer.events import Callback, EventContext, Events
from rlpipe.trainer.guards import nonfinite_rollout, nonfinite_update
from rlpipe.trainer.parts import EnvLike, Parts, build_parts, run_config
from rlpipe.trainer.session import RunSession
from rlpipe.trainer.signals import GracefulStop
from rlpipe.trainer.state import RunState, crossed, timing

__all__ = ["EnvLike", "Trainer"]


class Trainer:
    """One training run: build it from params (and optionally your own env), then train or step it.

    Parts are built on first use (:attr:`parts`), so events and ``total_steps`` can be set before.
    ``store``/``evaluate`` false build no rollout store / eval envs (``rlpipe collect`` needs neither).
    """

    def __init__(
        self,
        cfg: RunConfig,
        env: EnvLike | None = None,
        eval_env: EnvLike | None = None,
        *,
        resume: bool = False,
        overwrite: bool = False,
        store: bool = True,
        evaluate: bool = True,
    ) -> None:
        self.cfg = cfg
        self.resume, self.overwrite = resume, overwrite
        self.events = Events()
        self.metrics: dict[str, float] = {}
        """The last iteration's metrics."""
        self.state = RunState(cfg)
        """The counters: ``iteration``, ``env_steps`` (every rank's), wall time, last eval."""
        self._spec = (env, eval_env, store, evaluate)
        self._parts: Parts | None = None
        self._session: RunSession | None = None
        self._collected: tuple[TensorDict, dict[str, float], float, float] | None = None
        self._stop = GracefulStop()
        self._started = False

    @classmethod
    def from_params(
        cls,
        params: str | Path | dict[str, Any],
        overrides: dict[str, Any] | list[str] | tuple[str, ...] | None = None,
        env: EnvLike | None = None,
        eval_env: EnvLike | None = None,
        **kwargs: Any,
    ) -> Trainer:
        """A ``Trainer`` of a params file, a run directory or a dict, with ``{key.path: value}`` overrides."""
        return cls(run_config(params, overrides), env, eval_env, **kwargs)

    @classmethod
    def load(
        cls,
        run_dir: str | Path,
        env: EnvLike | None = None,
        eval_env: EnvLike | None = None,
        overrides: dict[str, Any] | list[str] | None = None,
    ) -> Trainer:
        """A stored run, to continue (``train`` resumes from its newest checkpoint) or evaluate."""
        return cls.from_params(run_dir, overrides, env, eval_env, resume=True)

    # ------------------------------------------------------------------------------------- events

    def add_event(
        self,
        event: str,
        handler: Callable[..., Any],
        every: int = 1,
        *,
        name: str | None = None,
        params: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Call ``handler(ctx, **params)`` at every ``every``-th ``event`` (:mod:`rlpipe.trainer.events`).

        ``name`` names the handler in errors; ``params`` holds its keyword arguments apart from
        these (other keyword arguments are passed to it too).
        """
        params = {**(params or {}), **kwargs}
        self.events.add(event, handler, every=every, name=name, params=params)

    def add_callback(self, callback: Callback) -> None:
        """Register a :class:`~rlpipe.trainer.events.Callback` object's ``on_<event>`` methods."""
        self.events.add_callback(callback)

    # ---------------------------------------------------------------------------------- the loop

    def train(self, total_steps: int | None = None) -> dict[str, Any]:
        """The loop: until ``total_steps`` env steps (default ``trainer.iterations``), collect then update.

        :meth:`update` runs the rest of an iteration: advantage → store → update → eval → log →
        checkpoint. ``resume`` continues from the last complete checkpoint (bit for bit on CPU). The
        run dir is locked while the run writes it; SIGINT/SIGTERM stop at the next iteration
        boundary with a checkpoint and raise :class:`~rlpipe.trainer.signals.Interrupted`. Returns
        the run's summary (``metrics.json``).
        """
        with self._running(total_steps):
            while not self.done:
                with self._refused_skipped():
                    self.update(self.collect())
        return self.finish()

    def iterate(self, total_steps: int | None = None) -> Iterator[dict[str, float]]:
        """:meth:`train` one iteration at a time: yield each iteration's metrics (a notebook's loop)."""
        with self._running(total_steps):
            while not self.done:
                yield self.step()
        self.finish()

    __iter__ = iterate

    def step(self, checkpoint: bool = True) -> dict[str, float]:
        """One iteration of :meth:`train`: :meth:`collect` then :meth:`update`; its metrics.

        With ``trainer.on_nonfinite: skip`` an iteration the non-finite guard refused is dropped
        (weights as before it) and its metrics are the skip count; otherwise ``NonFiniteError``.
        """
        with self._refused_skipped() as skipped:
            return self.update(self.collect(), checkpoint=checkpoint)
        return skipped

    @contextlib.contextmanager
    def _refused_skipped(self) -> Iterator[dict[str, float]]:
        """An iteration's boundary: one the non-finite guard refused is dropped, its metrics in the dict.

        Dropped only with ``trainer.on_nonfinite: skip`` (weights as before it); otherwise the
        ``NonFiniteError`` propagates.
        """
        skipped: dict[str, float] = {}
        try:
            yield skipped
        except NonFiniteError as exc:
            self._collected = None
            skipped |= lifecycle.skip_iteration(self.parts, self.state, exc)

    @contextlib.contextmanager
    def _running(self, total_steps: int | None) -> Iterator[None]:
        """Start the run for the loop's body; an exception in it ends the run as failed, then propagates.

        A notebook that stops iterating early (``GeneratorExit``) finishes the run instead.
        """
        self.start(total_steps)
        try:
            yield
        except GeneratorExit:
            self.finish()
            raise
        except BaseException as exc:
            self.fail(exc)  # MLflow run FAILED/KILLED, no summary; the lock is released
            raise

    def collect(self) -> TensorDict:
        """Collect the next ``[N, T+1]`` rollout (reused buffer); fire ``after_collect``.

        Starts the run if it has not started, and positions the algorithm's schedules at the env
        steps every rank collected before this rollout (its collection, advantage and update read
        them). :meth:`update` hands the rollout to the store once the non-finite guard passed it.
        """
        self.start()
        parts, state, t0 = self.parts, self.state, time.perf_counter()
        state.begin_iteration()
        parts.algo.set_progress(state.env_steps, state.total_env_steps(parts))
        faults.point("collect.start")
        rollout, metrics = parts.collector()
        faults.point("collect.end")
        metrics |= self._fire("after_collect", rollout=rollout, metrics=metrics)
        self._collected = (rollout, metrics, t0, time.perf_counter())
        return rollout

    def update(self, rollout: TensorDict | None = None, checkpoint: bool = True) -> dict[str, float]:
        """The rest of the iteration on the rollout :meth:`collect` returned; return its metrics.

        advantage → guard → store → update → guard → eval → events, stop rules → log → checkpoint.
        Logging needs :meth:`start` (without it the metrics are only returned).
        """
        if self._collected is None:
            raise RuntimeError("update() needs a rollout: call collect() first")
        if rollout is not None and rollout is not self._collected[0]:
            raise ValueError("update(rollout): pass the rollout the last collect() returned")
        (rollout, metrics, t0, t1), self._collected = self._collected, None
        parts, state = self.parts, self.state
        metrics |= {f"advantage/{k}": v for k, v in parts.algo.compute_advantages(rollout).items()}
        faults.point("advantage.end")
        self._refuse_if(nonfinite_rollout(rollout, parts.checked_keys), rollout)
        store_wait = self._store(rollout)
        parts.guard.before_update(parts.algo)
        faults.point("update.start")
        final_obs = parts.collector.final_obs if isinstance(parts.algo, OffPolicyAlgorithm) else None
        updated = update_algorithm(parts.algo, rollout, state.iteration, final_obs)
        metrics |= {f"update/{k}": v for k, v in updated.items()}
        self._refuse_if(nonfinite_update(parts.algo, metrics), rollout, stored=True)
        faults.point("update.end")
        before, t2 = state.env_steps, time.perf_counter()
        state.complete_iteration(parts.steps_per_iteration)
        metrics |= self._evaluate_if_due(before)
        metrics |= timing(state, parts, t0, t1, t2) | store_wait
        self.session.watch_store(metrics)
        metrics |= self._fire("after_update", metrics=metrics)  # events, stop rules, then one row
        metrics |= lifecycle.check_stop(parts, metrics, self.evaluate)
        metrics |= parts.guard.metrics()
        due = checkpoint and self._checkpoint_due(before)
        if due:
            metrics |= self._flush_store(metrics)
        self.session.log(metrics)
        if due:
            self.session.checkpoint()
            self._fire("after_checkpoint", checkpoint=self.parts.checkpointer.last_saved)
        parts.guard.passed()
        faults.point("iteration.end")
        self.metrics = metrics
        return metrics

    # ----------------------------------------------------------------------------- run lifecycle

    @property
    def parts(self) -> Parts:
        """Env, algorithm, collector, evaluator, store and checkpoints: built on first use."""
        if self._parts is None:
            env, eval_env, store, evaluate = self._spec
            self._parts = build_parts(self.cfg, env, eval_env, store=store, evaluate=evaluate)
            if self.cfg.trainer.events.train or self.cfg.trainer.events.eval:
                self.events.add_config(self.cfg.trainer.events)
            if self.events.wants("eval_step") and self._parts.evaluator is not None:
                self._parts.evaluator.on_step = self._eval_step
        return self._parts

    @property
    def session(self) -> RunSession:
        """The run's lock, tracker, MLflow run and summary (:class:`~rlpipe.trainer.session.RunSession`)."""
        if self._session is None:
            self._session = RunSession(self.parts, self.state)
        return self._session

    @property
    def done(self) -> bool:
        """The last iteration ran, or a stop condition or event ended the run."""
        return (
            self.state.finished(self.parts)
            or self.state.nothing_to_do
            or ranks.agree_flag(self._stop.requested, self.parts.dist)
        )

    def start(self, total_steps: int | None = None) -> None:
        """Lock and claim the run dir, resume if asked, write ``params.yaml``, open tracking; ``run_start``.

        A resume of a finished run says so and changes no file (the run is then ``done``).
        """
        if self._started:
            return
        if total_steps is not None:
            self._set_total_steps(total_steps)
        self.session.open(self._stop, self.resume, self.overwrite)
        self._started = True
        if not self.state.nothing_to_do:
            self._fire("run_start")

    def finish(self) -> dict[str, Any]:
        """Flush the store, write ``metrics.json``, end tracking; fire ``run_end``; return the summary.

        A run stopped by a signal first checkpoints its last complete iteration, ends its MLflow run
        ``KILLED`` and then raises :class:`~rlpipe.trainer.signals.Interrupted`.
        """
        return self.session.finish(
            self.metrics, self._stop.signum, lambda summary: self._fire("run_end", metrics=summary)
        )

    def fail(self, exc: BaseException) -> None:
        """End a run an iteration raised ``exc`` in: MLflow run ``FAILED`` (``KILLED`` for a signal)."""
        self.session.fail(exc)

    def stop(self, reason: str) -> None:
        """End the run after the current iteration (a checkpoint is written as at a normal end)."""
        self.parts.stopper.stopped_by = reason

    def close(self) -> dict[str, Any]:
        """Finish the run (flush the store, write ``metrics.json``, end the MLflow run)."""
        return self.finish() if self._started else {}

    # ---------------------------------------------------------------------- stages of an iteration

    def evaluate(self, film: bool = True) -> dict[str, float]:
        """Evaluate the current policy on the eval envs (``eval/…`` metrics), on finite weights.

        ``film``: also record this eval's video (with ``eval.video``; ``eval.video_freq`` thins them).
        """
        parts = self.parts
        if parts.evaluator is None:
            raise ConfigError(
                "trainer.enable_eval: evaluation is off (or a live env was given without eval_env)"
            )
        faults.point("eval.start")
        lifecycle.check_weights(parts, self.state.iteration, "evaluation")
        video = parts.layout.eval_video(self.state.iteration) if film else None
        self.state.last_eval = parts.evaluator(video)
        return self.state.last_eval

    def save_checkpoint(self) -> AnyPath:
        """Write a checkpoint of the current state now (the store flushed first); return its path."""
        self.session.checkpoint(force=True)
        assert self.parts.checkpointer.last_saved is not None
        return self.parts.checkpointer.last_saved

    def state_dict(self) -> dict[str, Any]:
        """Everything a bit-exact resume needs (weights_only-safe)."""
        return self.session.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` (each rank takes its own env and RNG state)."""
        self.state.load_state_dict(self.parts, state)

    def _store(self, rollout: TensorDict) -> dict[str, float]:
        """Hand the collected rollout to the background store (the advantage keys stay out).

        Returns ``{"time/store_wait_s": s}``, the time ``submit`` waited for the writer (back-pressure:
        the disk is slower than training; a checkpoint's wait is added by :meth:`_flush_store`), or
        ``{}`` without a store.
        """
        if self.parts.store is None:
            return {}
        return {
            "time/store_wait_s": self.parts.store.submit(
                rollout.exclude(*self.parts.algo.advantage_keys),
                self.state.rollout_attrs(self.parts),
                self.parts.collector.final_obs,
            )
        }

    def _refuse_if(self, finding: tuple[str, str] | None, rollout: TensorDict, stored: bool = False) -> None:
        if finding is not None:
            lifecycle.refuse(self.parts, self.state, rollout, *finding, stored=stored)

    def _evaluate_if_due(self, before: int) -> dict[str, float]:
        cfg, state = self.cfg, self.state
        last = state.iteration == cfg.trainer.iterations
        due = last or crossed(before, state.env_steps, cfg.trainer.eval_freq)
        if self.parts.evaluator is None or not due:
            return {}
        every = cfg.eval.video_freq
        evaluated = self.evaluate(film=last or every is None or crossed(before, state.env_steps, every))
        return evaluated | self._fire("after_eval", env=self.parts.evaluator.env, metrics=dict(evaluated))

    def _checkpoint_due(self, before: int) -> bool:
        cfg, state = self.cfg, self.state
        last = (
            state.iteration == cfg.trainer.iterations
            or cfg.checkpoint.every_iteration
            or self.parts.stopper.stopped_by is not None
        )
        return last or crossed(before, state.env_steps, cfg.trainer.save_freq)

    def _flush_store(self, metrics: dict[str, float]) -> dict[str, float]:
        """Wait for the store before the checkpoint, in the row: ``time/store_wait_s`` grows by that wait."""
        if self.parts.store is None:
            return {}
        waited = self.parts.store.flush()  # the checkpoint's own flush then finds nothing to wait for
        return {"time/store_wait_s": metrics.get("time/store_wait_s", 0.0) + waited}

    def _fire(self, event: str, **fields: Any) -> dict[str, float]:
        """Call ``event``'s handlers (none registered: nothing is built); return what they logged."""
        if not self.events.wants(event):
            return {}
        env = fields.pop("env", self.parts.env)
        ctx = EventContext(event, self.state.iteration, self.state.env_steps, self.run_dir, env=env, **fields)
        if not self.events.fire(ctx):
            self.stop(f"event {event}")
        self.session.show_columns(ctx.columns)
        return ctx.logged

    def _eval_step(self, env: Any, step: int) -> None:
        self._fire("eval_step", env=env, metrics={"eval/step": float(step)})

    def _set_total_steps(self, total_steps: int) -> None:
        if self._started:
            raise RuntimeError("train(total_steps): the run has started; set it before the first step")
        per_iteration = self.cfg.trainer.num_envs * self.cfg.trainer.buffer_size
        iterations = max(1, math.ceil(total_steps / per_iteration))
        self.cfg = self.cfg.model_copy(update={"trainer": self.cfg.trainer.replace(iterations=iterations)})
        self.state.cfg = self.cfg

    # ------------------------------------------------------------------------------ what it holds

    @property
    def summary(self) -> dict[str, Any]:
        """The run's summary (``metrics.json``) once it finished."""
        return self._session.summary if self._session is not None else {}

    @property
    def run_dir(self) -> AnyPath:
        """Where the run writes."""
        return RunLayout(self.cfg.run_dir).root

    @property
    def mlflow_run_id(self) -> str | None:
        """The MLflow run this run logs to (``None`` without tracking); waits for it to open."""
        if self._session is None:
            return self.state.restored_mlflow_run_id
        return self._session.mlflow_run_id

    @property
    def mlflow_experiment_id(self) -> str | None:
        """The MLflow experiment of that run (``None`` without one)."""
        run = self._session.mlflow_run if self._session is not None else None
        return run.experiment_id if run is not None else None

    @property
    def algo(self) -> BaseAlgorithm:
        """The algorithm (it owns the policy, optimizer, normalizers and schedules)."""
        return self.parts.algo

    @property
    def policy(self) -> Policy:
        """The policy being trained."""
        return self.parts.algo.policy

    @property
    def env(self) -> BatchedEnv:
        """The training env."""
        return self.parts.env

    @property
    def iteration(self) -> int:
        """Iterations done so far."""
        return self.state.iteration

    @property
    def env_steps(self) -> int:
        """Env steps collected so far (every rank's)."""
        return self.state.env_steps
