"""Rollouts the non-finite guard refused: kept for post-mortem, marked ``rejected``, refused on reading.

A rollout refused at a stage boundary is written beside the others (:func:`write_rejected`, with
the reason in its :data:`REJECTED_ATTR` attribute); replay and the offline update refuse such a
store (:func:`refuse_rejected`, :class:`RejectedRolloutError`, exit code 3) unless asked to use it.
"""

from __future__ import annotations

from typing import Any

from tensordict import TensorDict

from rlpipe.artifacts.errors import StoreError
from rlpipe.artifacts.fs import AnyPath, as_path
from rlpipe.artifacts.removal import delete
from rlpipe.artifacts.store import write_rollout
from rlpipe.refused import RefusedDataError

__all__ = ["REJECTED_ATTR", "RejectedRolloutError", "refuse_rejected", "write_rejected"]


REJECTED_ATTR = "rejected"
"""Attribute of a rollout the non-finite guard refused: why (replay and update refuse it unless asked)."""


def write_rejected(path: AnyPath, rollout: TensorDict, attrs: dict[str, Any], reason: str) -> AnyPath:
    """Keep a refused rollout (``[N, T+1]``, any device) at ``path`` for post-mortem, marked ``rejected``.

    An earlier rejected store of the same iteration (a resumed run that hit it again) is replaced.
    """
    path = as_path(path)
    if path.exists() or path.is_symlink():
        delete(path)
    write_rollout(path, rollout.to("cpu"), {**attrs, REJECTED_ATTR: reason})
    return path


def refuse_rejected(path: AnyPath, attrs: dict[str, Any], allow: bool = False) -> None:
    """``RefusedDataError`` when ``attrs`` mark the rollout at ``path`` rejected and ``allow`` is false."""
    reason = attrs.get(REJECTED_ATTR)
    if reason and not allow:
        raise RejectedRolloutError(
            f"{path}: rollout was rejected by the non-finite guard ({reason}); "
            "pass --allow-rejected to use it anyway"
        )


class RejectedRolloutError(StoreError, RefusedDataError):
    """A rejected rollout given to replay/update without ``--allow-rejected`` (exit code 3)."""
