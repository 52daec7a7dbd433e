"""The boundaries of an iteration that refuse or drop it: weight checks, non-finite data, stop rules.

And the run's summary. Each function works on the run's parts and counters, so the iteration in
``trainer.py`` reads as the order of its stages.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from tensordict import TensorDict

from rlpipe.artifacts.fs import AnyPath
from rlpipe.artifacts.layout import CHECKPOINT_NAME, iteration_from_name, shard_name
from rlpipe.artifacts.rejected import write_rejected
from rlpipe.build import load_learner_state
from rlpipe.rollout_checks import NonFiniteError
from rlpipe.trainer import ranks
from rlpipe.trainer.guards import nonfinite_weight
from rlpipe.trainer.parts import Parts
from rlpipe.trainer.state import RunState

__all__ = ["check_stop", "check_weights", "iteration_of", "refuse", "run_summary", "skip_iteration"]


def check_stop(
    parts: Parts, metrics: dict[str, float], evaluate: Callable[[], dict[str, float]]
) -> dict[str, float]:
    """Feed ``trainer.stop_when`` (rank 0 decides for all); at a stop, ``evaluate()`` unless already done."""
    stopped = parts.stopper.update(metrics)
    evaluated: dict[str, float] = {}
    evaluated_now = any(k.startswith("eval/") for k in metrics)
    if stopped is not None and parts.evaluator is not None and not evaluated_now:
        evaluated = evaluate()
    ranks.agree_stop(parts.stopper, parts.dist)
    return evaluated


def check_weights(parts: Parts, iteration: int, before: str) -> None:
    """Before a checkpoint or evaluation: every weight is finite (else ``NonFiniteError``)."""
    name = nonfinite_weight(parts.algo.policy)
    if name is not None:
        raise NonFiniteError(
            f"non-finite weight {name!r} at iteration {iteration} before {before}; {_latest(parts)}",
            name,
            iteration,
        )


def refuse(
    parts: Parts, state: RunState, rollout: TensorDict, key: str, where: str, stored: bool = False
) -> None:
    """Keep the refused rollout under ``rollouts/rejected/`` and raise ``NonFiniteError`` naming ``key``.

    ``stored``: the rollout itself was fine and already went to the store: take it back out.
    """
    if stored and parts.store is not None:
        parts.store.discard_after(state.iteration - 1)
    reason = f"non-finite {key!r} at iteration {state.iteration} ({where})"
    path = parts.layout.rejected_rollout(state.iteration)
    if parts.dist.active:
        path = path / shard_name(parts.dist.rank)
    write_rejected(path, rollout.exclude(*parts.algo.advantage_keys), state.rollout_attrs(parts), reason)
    raise NonFiniteError(f"{reason}; rollout kept at {path}; {_latest(parts)}", key, state.iteration)


def skip_iteration(parts: Parts, state: RunState, exc: NonFiniteError) -> dict[str, float]:
    """``trainer.on_nonfinite: skip``: drop the refused iteration (weights as before it); else re-raise."""
    snapshot = parts.guard.skip(exc)
    if snapshot is not None:
        load_learner_state(parts.algo, snapshot)
    state.complete_iteration(parts.steps_per_iteration)
    print(
        f"Warning: {exc}; iteration skipped ({parts.guard.in_a_row} in a row, at most "
        f"{parts.guard.max_in_a_row})",
        file=sys.stderr,
    )
    return {"iteration": float(state.iteration), "env_steps": float(state.env_steps), **parts.guard.metrics()}


def run_summary(parts: Parts, state: RunState, metrics: dict[str, float]) -> dict[str, Any]:
    """The run summary (``metrics.json``): counts, wall time, last train/update/eval metrics, checkpoint."""
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


def iteration_of(checkpoint: AnyPath | None) -> int | None:
    """The iteration a ``ckpt-NNNNNN.pt`` path belongs to (``None`` for no checkpoint)."""
    return iteration_from_name(checkpoint, CHECKPOINT_NAME) if checkpoint else None


def _latest(parts: Parts) -> str:
    checkpointer = parts.checkpointer
    last = checkpointer.last_saved or checkpointer.latest()
    where = f"latest stays {last.name}" if last else "no checkpoint written"
    return f"{where} (fix the cause, then resume with --resume)"
