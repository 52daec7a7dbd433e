"""The progress of a run — its counters — and the checkpoint state that resumes it bit for bit."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from rlpipe.build import learner_state, load_learner_state
from rlpipe.config import RunConfig, params_hash, training_hash, training_params
from rlpipe.runtime.float_kernels import float_kernels
from rlpipe.runtime.seeding import restore_rng_state, rng_state
from rlpipe.trainer import ranks
from rlpipe.trainer.parts import Parts

__all__ = ["RunState", "crossed", "rollout_attrs", "run_origin", "timing"]


def crossed(before: int, after: int, every: int) -> bool:
    """True when the counter passed a multiple of ``every`` going from ``before`` to ``after``."""
    return after // every > before // every


@dataclass
class RunState:
    """The run's counters: the one owner of ``iteration`` and ``env_steps`` (every rank's env steps)."""

    cfg: RunConfig
    iteration: int = 0
    env_steps: int = 0
    wall_s: float = 0.0
    """Seconds spent in iterations (resumed runs add to it)."""
    last_eval: dict[str, float] = field(default_factory=dict)
    restored_mlflow_run_id: str | None = None
    """The MLflow run id a resumed checkpoint names (the run to reopen)."""
    nothing_to_do: bool = False
    """A resume found the run already complete."""
    _origin: dict[str, Any] | None = field(default=None, init=False, repr=False)
    """:func:`run_origin` of this run, once computed."""

    def begin_iteration(self) -> None:
        """Count the iteration being collected (``iteration`` is the current one from here on)."""
        self.iteration += 1

    def complete_iteration(self, steps_per_iteration: int) -> None:
        """Count the current iteration's env steps, every rank's (also for an iteration dropped as refused).

        The one writer of ``env_steps`` besides a restored checkpoint: iterations × steps per iteration.
        """
        self.env_steps = self.iteration * steps_per_iteration

    def finished(self, parts: Parts) -> bool:
        """True once the run reached ``trainer.iterations`` or a stop condition fired."""
        return self.iteration >= self.cfg.trainer.iterations or parts.stopper.stopped_by is not None

    def total_env_steps(self, parts: Parts) -> int:
        """The run's length in env steps (what linear/cosine schedules decay over)."""
        return self.cfg.trainer.iterations * parts.steps_per_iteration

    def rollout_attrs(self, parts: Parts) -> dict[str, Any]:
        """Attrs stored with this iteration's rollout: its origin (env, seed, hashes, checkpoint, spaces).

        What a run's rollouts share (the params' hashes, the spaces) is computed on the first call.
        """
        if self._origin is None:
            self._origin = run_origin(self.cfg, parts)
        latest = parts.checkpointer.last_saved
        checkpoint = latest.name if latest else None
        return rollout_attrs(self.cfg, parts, self.iteration, self.env_steps, checkpoint, self._origin)

    def state_dict(self, parts: Parts, mlflow_run_id: str | None) -> dict[str, Any]:
        """Everything a bit-exact resume needs (weights_only-safe); a collective in a distributed run."""
        return {
            "iteration": self.iteration,
            "env_steps": self.env_steps,
            "wall_s": self.wall_s,
            "params_hash": params_hash(self.cfg),
            "training_hash": training_hash(self.cfg),
            "training_params": training_params(self.cfg),
            "spaces": parts.spaces(),
            **learner_state(parts.algo),
            "collector": parts.collector.state_dict(),
            "evaluator_calls": parts.evaluator.calls if parts.evaluator else 0,
            "last_eval": dict(self.last_eval),
            "stopper": parts.stopper.state_dict(),
            "mlflow_run_id": mlflow_run_id,
            "rng": rng_state(),
            "float_kernels": float_kernels(),
            **(ranks.rank_states(parts.collector) if parts.dist.active else {}),
        }

    def load_state_dict(self, parts: Parts, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` (each rank takes its own env and RNG state)."""
        state = ranks.select_rank_state(state, parts.dist)
        load_learner_state(parts.algo, state)
        parts.collector.load_state_dict(state["collector"])
        if parts.evaluator:
            parts.evaluator.calls = int(state["evaluator_calls"])
        self.iteration, self.env_steps = int(state["iteration"]), int(state["env_steps"])
        self.wall_s = float(state["wall_s"])
        self.last_eval = dict(state["last_eval"])
        parts.stopper.load_state_dict(state.get("stopper", {}))
        self.restored_mlflow_run_id = state.get("mlflow_run_id")
        restore_rng_state(state["rng"])


def run_origin(cfg: RunConfig, parts: Parts) -> dict[str, Any]:
    """The rollout attributes every rollout of a run shares: env, seed, the params' hashes, spaces.

    ``float_kernels``: what decided this machine's float rounding (a replay elsewhere says so).
    """
    return {
        "env_id": cfg.env.id,
        "seed": cfg.trainer.seed,
        "params_hash": params_hash(cfg),
        "training_hash": training_hash(cfg),
        "spaces": parts.spaces(),
        "float_kernels": float_kernels(),
    }


def rollout_attrs(
    cfg: RunConfig,
    parts: Parts,
    iteration: int,
    env_steps_before: int,
    checkpoint: str | None,
    origin: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The origin of iteration ``iteration``'s rollout, collected after ``env_steps_before`` env steps.

    ``checkpoint``: the name of the checkpoint whose weights collected it (``None``: initial weights).
    ``origin``: :func:`run_origin` of ``cfg`` and ``parts``, when the caller keeps it.
    """
    shared = origin if origin is not None else run_origin(cfg, parts)
    return {
        "iteration": iteration,
        "env_steps": env_steps_before + parts.steps_per_iteration,
        "env_id": shared["env_id"],
        "seed": shared["seed"],
        "params_hash": shared["params_hash"],
        "training_hash": shared["training_hash"],
        "checkpoint": checkpoint,
        "spaces": shared["spaces"],
        "float_kernels": shared["float_kernels"],
        **parts.env_attrs(),
    }


def timing(state: RunState, parts: Parts, t0: float, t1: float, t2: float) -> dict[str, float]:
    """Counters and ``time/*`` metrics of an iteration: begun ``t0``, collected ``t1``, updated ``t2``."""
    elapsed = time.perf_counter() - t0
    state.wall_s += elapsed
    remaining = state.cfg.trainer.iterations - state.iteration
    return {
        "iteration": float(state.iteration),
        "env_steps": float(state.env_steps),
        "time/sps": parts.steps_per_iteration / elapsed,
        "time/collect_s": t1 - t0,
        "time/update_s": t2 - t1,
        "time/iteration_s": elapsed,
        "time/eta_s": remaining * state.wall_s / max(state.iteration, 1),
    }
