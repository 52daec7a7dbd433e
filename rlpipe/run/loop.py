"""The online loop: collect → advantage → update → (eval) → (checkpoint), iteration after iteration.

:class:`OnlineRun` is one run, started, stepped and finished; ``rlpipe run`` and
:class:`rlpipe.Trainer` both drive it, so a script and the CLI cannot drift apart.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from tensordict import TensorDict

from rlpipe.artifacts.params import write_params
from rlpipe.config import RunConfig, params_hash, training_hash
from rlpipe.run import roles
from rlpipe.run.events import EventContext, Events
from rlpipe.run.experiment import Experiment, build
from rlpipe.run.resume import resume as continue_run
from rlpipe.tracking import Tracker

__all__ = ["OnlineRun", "crossed", "run", "run_iteration"]


def crossed(before: int, after: int, every: int) -> bool:
    """True when the counter passed a multiple of ``every`` going from ``before`` to ``after``."""
    return after // every > before // every


def run(cfg: RunConfig, resume: bool = False, overwrite: bool = False) -> dict[str, Any]:
    """Train to ``trainer.iterations``: params, rollouts, checkpoints, ``metrics.json``; return a summary.

    ``resume`` continues from the last complete checkpoint (bit for bit on CPU); without one it
    starts from iteration 0 and says so on stderr. A fresh run into a run dir that holds an earlier
    run's rollouts or checkpoints is refused unless ``overwrite`` (which deletes that run first).
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

    ``start``, then ``collect``/``learn`` (or ``step``) until ``done``, then ``finish``.
    """

    def __init__(self, exp: Experiment, resume: bool = False, overwrite: bool = False,
                 events: Events | None = None) -> None:
        self.exp, self.resume, self.overwrite = exp, resume, overwrite
        self.events = events or Events()
        if events is None and (exp.cfg.trainer.events.train or exp.cfg.trainer.events.eval):
            self.events.add_config(exp.cfg.trainer.events)
        self.tracker: Tracker | None = None
        self.mlflow_run_id: str | None = None
        """The run's MLflow run id (``None`` without MLflow), known once started."""
        self.metrics: dict[str, float] = {}
        self.summary: dict[str, Any] = {}
        self._collected: tuple[TensorDict, dict[str, float], float, float] | None = None
        if self.events.wants("eval_step") and exp.evaluate is not None:
            exp.evaluate.on_step = self._eval_step

    @property
    def done(self) -> bool:
        """The last iteration ran, or a stop condition or event ended the run."""
        exp = self.exp
        return exp.iteration >= exp.cfg.trainer.iterations or exp.stopper.stopped_by is not None

    def start(self) -> None:
        """Claim the run dir, resume if asked, write ``params.yaml``, open tracking; fire ``run_start``."""
        exp = self.exp
        roles.claim_run_dir(exp.layout, exp.dist, self.resume, self.overwrite)
        if exp.store is not None:
            exp.store.clean_temporaries()
        header = continue_run(exp) if self.resume else None  # refuses other training params first
        if exp.dist.is_main:
            write_params(exp.layout, exp.cfg.to_dict())
        self.tracker = roles.open_run_tracker(exp.cfg, exp.layout, exp.dist, header)
        self.mlflow_run_id = self.tracker.mlflow_run_id
        self._fire("run_start", env=exp.env)

    def __iter__(self) -> Iterator[dict[str, float]]:
        """Start, yield every iteration's metrics, finish (also when the caller stops early)."""
        self.start()
        try:
            while not self.done:
                yield self.step()
        finally:
            self.finish()

    def step(self) -> dict[str, float]:
        """One whole iteration: :meth:`collect` then :meth:`learn`."""
        self.collect()
        return self.learn()

    def collect(self) -> TensorDict:
        """Collect the next rollout ``[N, T+1]`` and hand it to the store; fire ``after_collect``."""
        exp = self.exp
        t0 = time.perf_counter()
        exp.iteration += 1
        rollout, metrics = exp.collect()
        _store_rollout(exp, rollout)
        self._collected = (rollout, metrics, t0, time.perf_counter())
        self._fire("after_collect", env=exp.env, rollout=rollout, metrics=metrics)
        return rollout

    def learn(self, checkpoint: bool = True) -> dict[str, float]:
        """Advantage + update of the collected rollout, eval, stop checks, logging and checkpoint.

        Logging needs :meth:`start` (without it the metrics are only returned); ``checkpoint=False``
        skips the checkpoint stage.
        """
        if self._collected is None:
            raise RuntimeError("learn() needs a rollout: call collect() first")
        exp = self.exp
        rollout, metrics, t0, t1 = self._collected
        self._collected = None
        metrics |= exp.advantage(rollout)
        metrics |= exp.update(rollout, exp.iteration, exp.env_steps, exp.total_env_steps)
        t2 = time.perf_counter()
        before, exp.env_steps = exp.env_steps, exp.env_steps + exp.steps_per_iteration
        metrics |= self._maybe_evaluate(before)
        metrics |= _timing(exp, t0, t1, t2)
        metrics |= self._fire("after_update", env=exp.env, metrics=metrics)
        metrics |= self._check_stop(metrics)
        roles.agree_stop(exp.stopper, exp.dist)
        if self.tracker is not None:
            self.tracker.log(metrics, step=exp.env_steps)
            if exp.evaluate is not None and exp.evaluate.last_video is not None:
                self.tracker.log_artifact(exp.evaluate.last_video, "eval")  # this iteration's eval video
        if exp.evaluate is not None:
            exp.evaluate.last_video = None
        if checkpoint:
            self._maybe_checkpoint(before)
        self.metrics = metrics
        return metrics

    def finish(self) -> dict[str, Any]:
        """Flush the store, write ``metrics.json``, end tracking; fire ``run_end``; return the summary."""
        exp = self.exp
        if exp.store is not None:
            exp.store.close()
        if self.tracker is None:
            return self.summary
        self.summary = _summary(exp, self.metrics)
        self._fire("run_end", env=exp.env, metrics=dict(self.summary))
        self.tracker.finish(self.summary)
        self.tracker = None
        return self.summary

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
            exp.last_eval = exp.evaluate(exp.layout.eval_video(exp.iteration))
            return exp.last_eval | self._fire("after_eval", env=exp.evaluate.env, metrics=dict(exp.last_eval))
        return {}

    def _check_stop(self, metrics: dict[str, float]) -> dict[str, float]:
        """Feed ``trainer.stop_when``; on a stop, evaluate now unless this iteration already did."""
        exp = self.exp
        if exp.stopper.update(metrics) is None or exp.evaluate is None:
            return {}
        if any(key.startswith("eval/") for key in metrics):
            return {}
        exp.last_eval = exp.evaluate(exp.layout.eval_video(exp.iteration))
        return exp.last_eval

    def _maybe_checkpoint(self, before: int) -> None:
        exp = self.exp
        last = (exp.iteration == exp.cfg.trainer.iterations or exp.cfg.checkpoint.every_iteration
                or exp.stopper.stopped_by is not None)
        if last or crossed(before, exp.env_steps, exp.cfg.trainer.save_freq):
            roles.save_on_rank_zero(exp.checkpoint, exp.iteration, exp.state_dict(), exp.store, exp.dist)
            self._fire("after_checkpoint", env=exp.env, checkpoint=exp.checkpoint.last_saved)


def _store_rollout(exp: Experiment, rollout: TensorDict) -> None:
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
        **exp.env_attrs(),
    })


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
