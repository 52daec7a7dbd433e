"""``--resume``: load the newest complete checkpoint into an experiment, drop what came after it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from rlpipe.artifacts.checkpoints import checkpoint_fits, load_checkpoint
from rlpipe.artifacts.curve import truncate_curve
from rlpipe.artifacts.errors import StoreError
from rlpipe.config import ConfigError, RunConfig, training_diff, training_hash, training_params
from rlpipe.run.experiment import Experiment
from rlpipe.testing import faults

__all__ = ["refuse_other_params", "restore", "resume", "resume_from_latest"]


def restore(exp: Experiment, path: Path) -> dict[str, Any]:
    """Load online checkpoint ``path`` (learner, collector, RNGs, counters) into ``exp``; return its state."""
    state = load_checkpoint(path)
    missing = [key for key in ("policy", "algo", "iteration", "collector", "rng") if key not in state]
    if missing:
        raise StoreError(f"{path}: not an rlpipe training checkpoint (no {missing[0]!r} entry)")
    with checkpoint_fits(path):
        exp.load_state_dict(state)
    return state


def refuse_other_params(path: Path, state: dict[str, Any], cfg: RunConfig) -> None:
    """``ConfigError`` naming each differing training param (both values) when ``state`` came from others."""
    written = state.get("training_params")
    if written is None:
        if state.get("training_hash", training_hash(cfg)) != training_hash(cfg):
            raise ConfigError(f"{path}: checkpoint was written with other training params")
        return
    diffs = training_diff(written, training_params(cfg))
    if diffs:
        shown = "; ".join(f"{key}: {a!r} in the checkpoint, {b!r} now" for key, a, b in diffs[:5])
        more = f" (+{len(diffs) - 5} more)" if len(diffs) > 5 else ""
        raise ConfigError(f"{path}: checkpoint was written with other training params ({shown}{more}); "
                          "only where the run lives, its length, storage, tracking and eval may change")


def resume_from_latest(exp: Experiment) -> Path | None:
    """Load the newest complete checkpoint into ``exp``; ``None`` when there is none.

    Rollout stores newer than the checkpoint (written by the run that was stopped; all of them
    when there is no checkpoint) are deleted, so the continued run writes the same stores as an
    uninterrupted one. A checkpoint of other training params is a ``ConfigError`` naming them.
    """
    latest = exp.checkpoint.latest()
    if latest is None:
        if exp.store is not None:
            exp.store.discard_after(0)
        return None
    refuse_other_params(latest, load_checkpoint(latest), exp.cfg)
    restore(exp, latest)
    exp.checkpoint.last_saved = latest
    if exp.store is not None:
        faults.point("resume.discard")
        exp.store.discard_after(exp.iteration)
    return latest


def resume(exp: Experiment) -> list[str] | None:
    """Resume ``exp`` and cut ``curve.csv`` back to the checkpoint; return the kept curve's header."""
    latest = resume_from_latest(exp)
    if not exp.dist.is_main:
        return None
    if latest is None:
        print(f"resume: no checkpoint under {exp.checkpoint.directory}; starting from iteration 0",
              file=sys.stderr)
        return None
    print(f"resume: continuing from {latest} (iteration {exp.iteration})", file=sys.stderr)
    return truncate_curve(exp.layout.curve, exp.iteration)
