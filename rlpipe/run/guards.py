"""The non-finite guard of the online loop: NaN/Inf never reaches the weights on disk.

Checked at every stage boundary, one fused ``isfinite().all()`` flag and one host sync each:

====================  ======================================================================
after advantage       the collected keys and the advantage keys of ``[N, T+1]`` (before the
                      rollout is stored and before the update)
after the update      the losses (already on the host), every optimizer step's gradient norm
                      (a device flag, :class:`~rlpipe.algorithms.finite.GradientCheck`) and
                      the weights
before checkpoint     the weights
before evaluation     the weights
====================  ======================================================================

On a hit the offending rollout is kept under ``rollouts/rejected/`` (marked ``rejected``), no
checkpoint is written (``latest`` stays on the last good one) and :class:`NonFiniteError` (exit
code 3) names the key, the iteration and the first envs. With ``trainer.on_nonfinite: skip`` the
loop instead drops the iteration (weights restored to before it) and goes on, until
``trainer.max_skipped_in_a_row`` iterations in a row were skipped.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from tensordict import TensorDict

from rlpipe.algorithms.finite import first_nonfinite_tensor, named_weights, weights_finite
from rlpipe.artifacts.layout import shard_name
from rlpipe.artifacts.store import write_rejected
from rlpipe.rollout import NonFiniteError, all_finite, first_nonfinite

if TYPE_CHECKING:
    from rlpipe.run.experiment import Experiment

__all__ = ["NonFiniteGuard"]


class NonFiniteGuard:
    """``trainer.on_nonfinite`` (``stop``/``skip``) and the count of skipped iterations."""

    def __init__(self, mode: str = "stop", max_in_a_row: int = 3) -> None:
        self.mode, self.max_in_a_row = mode, max_in_a_row
        self.skipped = 0
        """Iterations skipped in this process (``guard/skipped_iterations``)."""
        self.in_a_row = 0
        self._snapshot: dict[str, Any] | None = None

    # -------------------------------------------------------------- the boundaries

    def check_rollout(self, exp: Experiment, rollout: TensorDict,
                      attrs: Callable[[], dict[str, Any]]) -> None:
        """After advantage, before the store and the update: collected + advantage keys are finite."""
        keys = [k for k in (*exp.collect.writes, *exp.advantage.writes) if k in rollout.keys()]
        if bool(all_finite([rollout.get(k) for k in keys])):
            return
        key, envs = first_nonfinite(rollout, keys) or ("?", [])
        self._refuse(exp, rollout, attrs, key, f"envs {envs}")

    def before_update(self, exp: Experiment) -> None:
        """In ``skip`` mode keep a copy of the learner's state, to drop an update that went non-finite."""
        if self.mode == "skip":
            self._snapshot = _clone(exp.learner.state_dict())

    def check_update(self, exp: Experiment, rollout: TensorDict, metrics: dict[str, float],
                     attrs: Callable[[], dict[str, Any]]) -> None:
        """After the update: losses, gradient norms and weights are finite (one sync)."""
        grads_bad = exp.algo.gradient_check.take()
        ok = torch.stack([~grads_bad.to(exp.device), weights_finite(exp.policy).to(exp.device)]).all()
        losses = [k for k, v in metrics.items() if k.startswith("update/") and not math.isfinite(v)]
        if bool(ok) and not losses:
            return
        if exp.store is not None:  # the rollout itself was fine: take its store back out of rollouts/
            exp.store.discard_after(exp.iteration - 1)
        if bool(grads_bad):  # the first thing to go: a loss of finite data turns non-finite through it
            key = "gradients"
            where = "an optimizer step's gradient norm" + (f"; then {losses[0]}" if losses else "")
        elif losses:
            key, where = losses[0], "loss"
        else:
            key = first_nonfinite_tensor(named_weights(exp.policy)) or "weights"
            where = "weights after the update"
        self._refuse(exp, rollout, attrs, key, where)

    def check_weights(self, exp: Experiment, before: str) -> None:
        """Before a checkpoint or evaluation: every weight is finite (else ``NonFiniteError``)."""
        if bool(weights_finite(exp.policy)):
            return
        name = first_nonfinite_tensor(named_weights(exp.policy)) or "weights"
        raise NonFiniteError(f"non-finite weight {name!r} at iteration {exp.iteration} before {before}; "
                             f"{self._latest(exp)}", name, exp.iteration)

    # -------------------------------------------------------------- outcomes

    def passed(self) -> None:
        """An iteration went through every check."""
        self.in_a_row = 0
        self._snapshot = None

    def skip(self, exp: Experiment, exc: NonFiniteError) -> None:
        """Drop the iteration ``exc`` refused (``skip``), or re-raise it (``stop``, or too many in a row)."""
        if self.mode != "skip" or self.in_a_row >= self.max_in_a_row:
            if self.mode == "skip":
                raise NonFiniteError(f"{exc} ({self.in_a_row} iterations skipped in a row before it: "
                                     "trainer.max_skipped_in_a_row reached)", exc.key,
                                     exc.iteration) from None
            raise exc
        if self._snapshot is not None:
            exp.learner.load_state_dict(self._snapshot)
        self._snapshot = None
        self.in_a_row += 1
        self.skipped += 1
        exp.env_steps = exp.iteration * exp.steps_per_iteration
        print(f"Warning: {exc}; iteration skipped ({self.in_a_row} in a row, at most "
              f"{self.max_in_a_row})", file=sys.stderr)

    def metrics(self) -> dict[str, float]:
        """``guard/skipped_iterations`` once an iteration was skipped."""
        return {"guard/skipped_iterations": float(self.skipped)} if self.skipped else {}

    def _refuse(self, exp: Experiment, rollout: TensorDict, attrs: Callable[[], dict[str, Any]],
                key: str, where: str) -> None:
        reason = f"non-finite {key!r} at iteration {exp.iteration} ({where})"
        path = exp.layout.rejected_rollout(exp.iteration)
        if exp.dist.active:
            path = path / shard_name(exp.dist.rank)
        write_rejected(path, rollout.exclude(*exp.advantage.writes), attrs(), reason)  # as stored
        raise NonFiniteError(f"{reason}; rollout kept at {path}; {self._latest(exp)}", key, exp.iteration)

    @staticmethod
    def _latest(exp: Experiment) -> str:
        last = exp.checkpoint.last_saved or exp.checkpoint.latest()
        where = f"latest stays {last.name}" if last else "no checkpoint written"
        return f"{where} (fix the cause, then resume with --resume)"


def _clone(state: Any) -> Any:
    if isinstance(state, torch.Tensor):
        return state.detach().clone()
    if isinstance(state, dict):
        return {k: _clone(v) for k, v in state.items()}
    if isinstance(state, list | tuple):
        return type(state)(_clone(v) for v in state)
    return state
