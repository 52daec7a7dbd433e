"""``Trainer``: rlpipe from Python — the same online run as ``rlpipe run``, step by step or whole.

``rlpipe run params.yaml`` builds a ``Trainer`` and calls :meth:`Trainer.train`; a script does the
same, so both write the same run directory, stores, checkpoints and MLflow run, bit for bit::

    trainer = Trainer.from_params("params.yaml", overrides={"algorithm.cfg.clip_coef": 0.1})
    trainer.add_event("after_update", lambda ctx: ctx.log("custom/x", 1.0))
    summary = trainer.train()                # or: for metrics in trainer: ...
    rollout = trainer.collect(); metrics = trainer.update(rollout)   # or one step at a time
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import gymnasium
from tensordict import TensorDict

from rlpipe import config as config_mod
from rlpipe.artifacts.fs import as_path
from rlpipe.artifacts.layout import RunLayout
from rlpipe.artifacts.params import params_file
from rlpipe.config import ConfigError, RunConfig
from rlpipe.envs import BatchedEnv, GymnasiumEnv
from rlpipe.envs.backends.plugins import wrap_env
from rlpipe.envs.backends.rsl_rl_env import is_rsl_rl_env
from rlpipe.learner import Learner
from rlpipe.run import Callback, Events, OnlineRun, build
from rlpipe.runtime.distributed import resolve_device
from rlpipe.tracking.background import prewarm

__all__ = ["Trainer"]

EnvLike = Any
"""A live env — an rlpipe ``BatchedEnv``, a gymnasium vector env (``SAME_STEP`` autoreset) or an
rsl_rl-style ``VecEnv`` — or a factory ``f(num_envs, device)`` returning one."""


class Trainer:
    """One training run: build it from params (and optionally your own env), then train or step it."""

    def __init__(self, cfg: RunConfig, env: EnvLike | None = None, eval_env: EnvLike | None = None, *,
                 resume: bool = False, overwrite: bool = False) -> None:
        self.cfg = cfg
        self._env_spec, self._eval_spec = env, eval_env
        self.resume, self.overwrite = resume, overwrite
        self.events = Events()
        self._run: OnlineRun | None = None

    # ------------------------------------------------------------------------------- construction

    @classmethod
    def from_params(cls, params: str | Path | dict[str, Any],
                    overrides: dict[str, Any] | list[str] | tuple[str, ...] | None = None,
                    env: EnvLike | None = None, eval_env: EnvLike | None = None, **kwargs: Any) -> Trainer:
        """From a params file, a run directory or a dict, with ``{key.path: value}`` overrides."""
        items = _override_items(overrides)
        if isinstance(params, dict):
            data = config_mod.apply_overrides(params, items)
            try:
                cfg = RunConfig.model_validate(data)
            except Exception as exc:
                raise ConfigError(f"params: {config_mod.format_validation_error(exc)}") from None
        else:
            path, layout = params_file(as_path(params))
            where = [] if layout is None else [f"trainer.data_dir={layout.root.parent}",
                                                f"trainer.exp_name={layout.root.name}"]
            cfg = config_mod.load(path, (*where, *items))
        return cls(cfg, env, eval_env, **kwargs)

    @classmethod
    def load(cls, run_dir: str | Path, env: EnvLike | None = None, eval_env: EnvLike | None = None,
             overrides: dict[str, Any] | list[str] | None = None) -> Trainer:
        """A stored run, to continue (``train`` resumes from its newest checkpoint) or evaluate."""
        return cls.from_params(run_dir, overrides, env, eval_env, resume=True)

    # ------------------------------------------------------------------------------------- events

    def add_event(self, event: str, handler: Callable[..., Any], every: int = 1, **params: Any) -> None:
        """Call ``handler(ctx, **params)`` at every ``every``-th ``event`` (see :mod:`rlpipe.run.events`)."""
        self.events.add(event, handler, every=every, params=params)

    def add_callback(self, callback: Callback) -> None:
        """Register a :class:`~rlpipe.run.events.Callback` object's ``on_<event>`` methods."""
        self.events.add_callback(callback)

    # ------------------------------------------------------------------------------------ running

    @property
    def online(self) -> OnlineRun:
        """The run, built and started on first use."""
        if self._run is None:
            if self.cfg.tracking.backend == "mlflow" and os.environ.get("RANK", "0") == "0":
                prewarm()  # MLflow's import overlaps the build instead of the first iterations
            exp = build(self.cfg, env=self._live(self._env_spec, self.cfg.trainer.num_envs),
                        eval_env=self._live(self._eval_spec, self.cfg.trainer.num_eval_envs))
            if self.cfg.trainer.events.train or self.cfg.trainer.events.eval:
                self.events.add_config(self.cfg.trainer.events)
            self._run = OnlineRun(exp, self.resume, self.overwrite, self.events)
            self._run.start()
        return self._run

    def train(self, total_steps: int | None = None) -> dict[str, Any]:
        """Train until ``total_steps`` env steps (default: ``trainer.iterations``); return the summary."""
        for _ in self.iterate(total_steps):
            pass
        return self.online.summary

    def iterate(self, total_steps: int | None = None) -> Iterator[dict[str, float]]:
        """Yield every iteration's metrics (a notebook's loop); the run finishes when it ends."""
        if total_steps is not None:
            self._set_total_steps(total_steps)
        online = self.online
        try:
            while not online.done:
                yield online.step()
        except GeneratorExit:
            online.finish()
            raise
        except BaseException as exc:
            online.fail(exc)  # MLflow run FAILED/KILLED, no summary; the lock is released
            raise
        online.finish()

    __iter__ = iterate

    def collect(self) -> TensorDict:
        """Collect the next ``[N, T+1]`` rollout (stored as online); pass it to :meth:`update`."""
        return self.online.collect()

    def update(self, rollout: TensorDict | None = None) -> dict[str, float]:
        """Advantage + update of the rollout :meth:`collect` returned; eval, logging and checkpoint follow."""
        online = self.online
        if rollout is not None and online._collected is not None and rollout is not online._collected[0]:
            raise ValueError("update(rollout): pass the rollout the last collect() returned")
        return online.learn()

    def evaluate(self) -> dict[str, float]:
        """Evaluate the current policy on the eval envs (``eval/…`` metrics)."""
        evaluator = self.online.exp.evaluate
        if evaluator is None:
            raise ConfigError("trainer.enable_eval: evaluation is off (or a live env was given "
                              "without eval_env)")
        return evaluator()

    def save_checkpoint(self) -> Path:
        """Write a checkpoint of the current state now; return its path."""
        exp = self.online.exp
        if exp.store is not None:
            exp.store.flush()
        return exp.checkpoint.save(exp.iteration, exp.state_dict())

    def close(self) -> dict[str, Any]:
        """Finish the run (flush the store, write ``metrics.json``, end the MLflow run)."""
        return self.online.finish() if self._run is not None else {}

    # ------------------------------------------------------------------------------ what it holds

    @property
    def run_dir(self) -> Path:
        """Where the run writes."""
        return RunLayout(self.cfg.run_dir).root

    @property
    def mlflow_run_id(self) -> str | None:
        """The MLflow run this run logs to (``None`` with ``tracking.backend: none``)."""
        return self.online.mlflow_run_id

    @property
    def mlflow_experiment_id(self) -> str | None:
        """The MLflow experiment of that run (``None`` without one)."""
        return self.online.mlflow_experiment_id

    @property
    def learner(self) -> Learner:
        """The learner (policy, algorithm, optimizer)."""
        return self.online.exp.learner

    @property
    def policy(self) -> Any:
        """The policy being trained."""
        return self.learner.policy

    @property
    def env(self) -> BatchedEnv:
        """The training env."""
        return self.online.exp.env

    @property
    def iteration(self) -> int:
        """Iterations done so far."""
        return self.online.exp.iteration

    @property
    def env_steps(self) -> int:
        """Env steps collected so far (every rank's)."""
        return self.online.exp.env_steps

    def _set_total_steps(self, total_steps: int) -> None:
        if self._run is not None:
            raise RuntimeError("train(total_steps): the run has started; set it before the first step")
        per_iteration = self.cfg.trainer.num_envs * self.cfg.trainer.buffer_size
        iterations = max(1, math.ceil(total_steps / per_iteration))
        self.cfg = self.cfg.model_copy(update={"trainer": self.cfg.trainer.replace(iterations=iterations)})

    def _live(self, spec: Any, num_envs: int) -> BatchedEnv | None:
        """``spec`` as a BatchedEnv: kept, adapted (gymnasium vector env, rsl_rl VecEnv) or built."""
        device = resolve_device(self.cfg.trainer.device)
        if spec is None or isinstance(spec, BatchedEnv):
            return spec
        if isinstance(spec, gymnasium.vector.VectorEnv):
            return GymnasiumEnv.from_vector_env(spec, device)
        if is_rsl_rl_env(spec):
            return wrap_env("env", spec, device)
        if callable(spec):
            return self._live(spec(num_envs=num_envs, device=device), num_envs)
        raise ConfigError(f"env: a {type(spec).__name__} is not an env; accepted: an rlpipe BatchedEnv, a "
                          "gymnasium vector env, an rsl_rl VecEnv, or a factory f(num_envs, device)")


def _override_items(overrides: dict[str, Any] | list[str] | tuple[str, ...] | None) -> list[str]:
    if overrides is None:
        return []
    if isinstance(overrides, dict):
        import json

        return [f"{key}={json.dumps(value)}" for key, value in overrides.items()]
    return list(overrides)
