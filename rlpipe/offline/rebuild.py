"""A stored run's algorithm (rebuilt from params and spaces, loaded from checkpoints) and rollouts."""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDict

from rlpipe.algorithms import BaseAlgorithm
from rlpipe.artifacts.checkpoints import checkpoint_fits, load_checkpoint, save_checkpoint
from rlpipe.artifacts.errors import RefusedStoreError, StoreError
from rlpipe.artifacts.fs import AnyPath, as_path
from rlpipe.artifacts.rejected import refuse_rejected
from rlpipe.artifacts.shards import read_any
from rlpipe.artifacts.store_policy import fidelity_refusal
from rlpipe.build import build_algorithm, learner_state, load_learner_state, set_threads
from rlpipe.config import RunConfig, params_hash, training_hash, training_params
from rlpipe.envs import space_from_dict
from rlpipe.refused import RefusedDataError
from rlpipe.rollout_checks import RolloutError, check_finite
from rlpipe.runtime.allocator import tune_malloc
from rlpipe.runtime.distributed import resolve_device
from rlpipe.runtime.seeding import seed_everything

__all__ = [
    "load_algorithm_state",
    "load_rollout",
    "rebuild_algorithm",
    "refuse_unusable",
    "save_algorithm",
    "spaces_of",
]


def spaces_of(record: dict[str, Any], where: AnyPath) -> tuple[Any, Any]:
    """``(observation_space, action_space)`` recorded in rollout attributes or a checkpoint."""
    spaces = record.get("spaces")
    if not isinstance(spaces, dict) or "observation" not in spaces or "action" not in spaces:
        raise StoreError(f"{where}: records no observation/action spaces (written by an older rlpipe?)")
    return space_from_dict(spaces["observation"]), space_from_dict(spaces["action"])


def rebuild_algorithm(cfg: RunConfig, spaces: tuple[Any, Any]) -> BaseAlgorithm:
    """The algorithm ``cfg`` describes, with the initial weights of the online run (same seed, same draws)."""
    tune_malloc()
    seed_everything(cfg.trainer.seed)
    algo = build_algorithm(cfg, spaces[0], spaces[1], resolve_device(cfg.trainer.device))
    set_threads(cfg, algo)
    return algo


def load_algorithm_state(
    algo: BaseAlgorithm, path: AnyPath, state: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Load checkpoint ``path``'s policy and algorithm state into ``algo``; return the checkpoint."""
    state = load_checkpoint(path) if state is None else state
    missing = [key for key in ("policy", "algo", "iteration") if key not in state]
    if missing:
        raise StoreError(f"{path}: not an rlpipe checkpoint (no {missing[0]!r} entry)")
    with checkpoint_fits(path):
        load_learner_state(algo, state)
    return state


def save_algorithm(
    algo: BaseAlgorithm,
    cfg: RunConfig,
    directory: AnyPath,
    iteration: int,
    env_steps: int,
    origin: dict[str, Any],
    spaces: dict[str, Any] | None,
) -> AnyPath:
    """Write ``directory/ckpt-NNNNNN.pt`` with the algorithm's state (the online format, minus collection).

    ``policy``, ``algo`` (optimizer [+ reference policy]), ``iteration``, ``env_steps``, the params
    hashes and ``origin`` (where its update's data came from); no collector or RNG state (nothing
    was collected).
    """
    state = {
        "iteration": iteration,
        "env_steps": env_steps,
        "wall_s": 0.0,
        "params_hash": params_hash(cfg),
        "training_hash": training_hash(cfg),
        "training_params": training_params(cfg),
        "spaces": spaces,
        **learner_state(algo),
        "origin": origin,
    }
    return save_checkpoint(directory, iteration, state, cfg.checkpoint.keep_last)


def load_rollout(
    path: AnyPath,
    device: torch.device | str = "cpu",
    allow_rejected: bool = False,
    purpose: str | None = "reproducing the online run",
) -> tuple[TensorDict, dict[str, Any]]:
    """Read and validate a stored ``[N, T+1]`` rollout; any problem is a ``StoreError`` naming ``path``.

    A rollout the non-finite guard rejected is refused (``RejectedRolloutError``, exit code 3)
    unless ``allow_rejected``; it must still pass validation (finite values) to be used. With a
    ``purpose`` (what the caller reproduces bit for bit), a store that is not complete (a subset
    of the envs) or not exact (a lower-precision group) is refused too (``RefusedStoreError``,
    exit code 3, one line naming the store); ``None`` accepts them (samples for distillation).
    """
    rollout, attrs = read_any(as_path(path), device)  # a K-rank iteration: its shards, side by side
    refuse_unusable(path, attrs, allow_rejected, purpose)
    try:
        check_finite(rollout, attrs.get("iteration"))
    except RolloutError as exc:
        kind = RefusedStoreError if isinstance(exc, RefusedDataError) else StoreError
        raise kind(f"{path}: {exc}") from None
    return rollout, attrs


def refuse_unusable(
    path: AnyPath, attrs: dict[str, Any], allow_rejected: bool = False, purpose: str | None = None
) -> None:
    """What :func:`load_rollout` refuses from a store's attributes alone: rejected, subset, lower precision.

    Callers check every store they will read with it before they write anything.
    """
    refuse_rejected(as_path(path), attrs, allow_rejected)
    refusal = fidelity_refusal(as_path(path), attrs, purpose) if purpose else None
    if refusal:
        raise RefusedStoreError(refusal)
