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

The checks return what they found (``None``: all finite); the trainer keeps the offending rollout
under ``rollouts/rejected/`` and raises :class:`NonFiniteError` (exit code 3). With
``trainer.on_nonfinite: skip`` the trainer instead drops the iteration (weights restored to before
it) and goes on, until ``trainer.max_skipped_in_a_row`` iterations in a row were skipped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from tensordict import TensorDict

from rlpipe.algorithms import BaseAlgorithm
from rlpipe.algorithms.finite import first_nonfinite_tensor, named_weights, weights_finite
from rlpipe.build import learner_state
from rlpipe.policies import Policy
from rlpipe.rollout_checks import NonFiniteError, all_finite, first_nonfinite

__all__ = ["NonFiniteGuard", "nonfinite_rollout", "nonfinite_update", "nonfinite_weight"]

Finding = tuple[str, str]
"""``(key, where)``: the first non-finite key and where it was found."""


def nonfinite_rollout(rollout: TensorDict, keys: Sequence[str]) -> Finding | None:
    """The first non-finite key among ``keys`` of ``rollout`` and its first envs (one host sync)."""
    keys = [k for k in keys if k in rollout.keys()]
    if bool(all_finite([rollout.get(k) for k in keys])):
        return None
    key, envs = first_nonfinite(rollout, keys) or ("?", [])
    return key, f"envs {envs}"


def nonfinite_update(algo: BaseAlgorithm, metrics: dict[str, float]) -> Finding | None:
    """After an update: a non-finite gradient norm, loss or weight (one host sync), else ``None``."""
    grads_bad = algo.gradient_check.take()
    ok = torch.stack([~grads_bad.to(algo.device), weights_finite(algo.policy).to(algo.device)]).all()
    losses = [k for k, v in metrics.items() if k.startswith("update/") and not math.isfinite(v)]
    if bool(ok) and not losses:
        return None
    if bool(grads_bad):  # the first thing to go: a loss of finite data turns non-finite through it
        return "gradients", "an optimizer step's gradient norm" + (f"; then {losses[0]}" if losses else "")
    if losses:
        return losses[0], "loss"
    return first_nonfinite_tensor(named_weights(algo.policy)) or "weights", "weights after the update"


def nonfinite_weight(policy: Policy) -> str | None:
    """The name of the first non-finite weight of ``policy`` (``None``: every weight is finite)."""
    if bool(weights_finite(policy)):
        return None
    return first_nonfinite_tensor(named_weights(policy)) or "weights"


class NonFiniteGuard:
    """``trainer.on_nonfinite`` (``stop``/``skip``) and the count of skipped iterations."""

    def __init__(self, mode: str = "stop", max_in_a_row: int = 3) -> None:
        self.mode, self.max_in_a_row = mode, max_in_a_row
        self.skipped = 0
        """Iterations skipped in this process (``guard/skipped_iterations``)."""
        self.in_a_row = 0
        self._snapshot: dict[str, Any] | None = None

    def before_update(self, algo: BaseAlgorithm) -> None:
        """In ``skip`` mode keep a copy of ``algo``'s state, to drop an update gone non-finite."""
        if self.mode == "skip":
            self._snapshot = _clone(learner_state(algo))

    def passed(self) -> None:
        """An iteration went through every check."""
        self.in_a_row = 0
        self._snapshot = None

    def skip(self, exc: NonFiniteError) -> dict[str, Any] | None:
        """Drop the iteration ``exc`` refused (``skip``): the state to restore, or re-raise ``exc``.

        Re-raises in ``stop`` mode, and in ``skip`` mode once ``max_in_a_row`` iterations in a row
        were skipped.
        """
        if self.mode != "skip" or self.in_a_row >= self.max_in_a_row:
            if self.mode == "skip":
                raise NonFiniteError(
                    f"{exc} ({self.in_a_row} iterations skipped in a row before it: "
                    "trainer.max_skipped_in_a_row reached)",
                    exc.key,
                    exc.iteration,
                ) from None
            raise exc
        snapshot, self._snapshot = self._snapshot, None
        self.in_a_row += 1
        self.skipped += 1
        return snapshot

    def metrics(self) -> dict[str, float]:
        """``guard/skipped_iterations`` once an iteration was skipped."""
        return {"guard/skipped_iterations": float(self.skipped)} if self.skipped else {}


def _clone(state: Any) -> Any:
    if isinstance(state, torch.Tensor):
        return state.detach().clone()
    if isinstance(state, dict):
        return {k: _clone(v) for k, v in state.items()}
    if isinstance(state, list | tuple):
        return type(state)(_clone(v) for v in state)
    return state
