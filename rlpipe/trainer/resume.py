"""``--resume``: the newest complete checkpoint of a run, checked against the params it continues with."""

from __future__ import annotations

from typing import Any

from rlpipe.artifacts.checkpoints import load_checkpoint
from rlpipe.artifacts.errors import StoreError
from rlpipe.artifacts.fs import AnyPath
from rlpipe.config import RunConfig
from rlpipe.config.hashing import refuse_other_training

__all__ = ["ONLINE_ENTRIES", "load_online_checkpoint"]

ONLINE_ENTRIES = ("policy", "algo", "iteration", "collector", "rng")
"""What a checkpoint of an online run holds (replay and update checkpoints hold weights only)."""


def load_online_checkpoint(path: AnyPath, cfg: RunConfig | None = None) -> dict[str, Any]:
    """Checkpoint ``path`` of an online run, refused if ``cfg``'s training params differ from its own."""
    state = load_checkpoint(path)
    missing = [key for key in ONLINE_ENTRIES if key not in state]
    if missing:
        raise StoreError(f"{path}: not an rlpipe training checkpoint (no {missing[0]!r} entry)")
    if cfg is not None:
        refuse_other_training(str(path), state, cfg)
    return state
