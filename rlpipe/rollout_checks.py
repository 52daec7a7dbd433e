"""Checks of a rollout against the schema of :mod:`rlpipe.rollout`: keys, dtypes, padding, finite values.

:func:`check_schema` checks a rollout's batch size, keys, dtypes, padding and ``done`` (where a
rollout enters the store, and where a stored one is read back), :func:`check_finite` its values,
:func:`validate` both. :func:`all_finite` is the one-sync flag the stage guards ask first and
:func:`first_nonfinite` the slow path that names the key; :func:`image_problem` says why an
observation group cannot be stored. Every error names the key, the first bad ``[env, time]`` index
and the iteration.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import torch
from tensordict import TensorDict

from rlpipe.refused import RefusedDataError
from rlpipe.rollout import IMAGE_DTYPE, IMAGE_RANK, KEY_DTYPES, TRANSITION_KEYS

__all__ = [
    "NonFiniteError",
    "NonFiniteRolloutError",
    "RolloutError",
    "all_finite",
    "check_finite",
    "check_schema",
    "first_nonfinite",
    "image_problem",
    "validate",
]


class RolloutError(ValueError):
    """A rollout that breaks the schema; the message names the key and the first bad index."""


class NonFiniteError(RefusedDataError):
    """A NaN/Inf at a stage boundary; the message names the key, the iteration and the first envs."""

    def __init__(self, message: str, key: str, iteration: int | None = None) -> None:
        super().__init__(message)
        self.key, self.iteration = key, iteration


class NonFiniteRolloutError(RolloutError, NonFiniteError):
    """:func:`validate` found a NaN/Inf (refused data, exit code 3)."""

    def __init__(self, message: str, key: str, iteration: int | None = None) -> None:
        NonFiniteError.__init__(self, message, key, iteration)


def tensor_leaves(td: TensorDict) -> list[tuple[str | tuple[str, ...], torch.Tensor]]:
    """``(key, tensor)`` of every leaf of ``td``; a nested key is a tuple."""
    # tensordict types the values of items() as tensors or collections, also with leaves_only=True
    return cast("list[tuple[str | tuple[str, ...], torch.Tensor]]", list(td.items(True, True)))


def all_finite(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """0-dim bool on the tensors' device: every floating-point element of ``tensors`` is finite.

    One ``isfinite().all()`` per tensor stacked into one flag, so the caller syncs at most once.
    """
    leaves = [
        leaf
        for t in tensors
        for leaf in ([v for _, v in tensor_leaves(t)] if isinstance(t, TensorDict) else (t,))
    ]
    flags = [torch.isfinite(t).all() for t in leaves if t.is_floating_point()]
    if not flags:
        return torch.ones((), dtype=torch.bool)
    return torch.stack([f.to(flags[0].device) for f in flags]).all()


def first_nonfinite(
    rollout: TensorDict, keys: Sequence[str] | None = None, max_envs: int = 5
) -> tuple[str, list[int]] | None:
    """``(key, first env indices)`` of the first key of ``rollout`` holding a NaN/Inf, else ``None``.

    The slow path after :func:`all_finite` said no: syncs once per key. ``keys``: which to look
    at (default: every leaf); env indices are along dim 0 of ``[N, T+1, ...]``, at most ``max_envs``.
    """
    names = keys if keys is not None else [k for k, _ in rollout.items(include_nested=True, leaves_only=True)]
    for key in names:
        value = rollout.get(key)
        if not value.is_floating_point():
            continue
        bad = ~torch.isfinite(value.reshape(value.shape[0], -1)).all(-1)
        if bool(bad.any()):
            name = key if isinstance(key, str) else "/".join(key)
            return name, bad.nonzero()[:max_envs, 0].tolist()
    return None


def image_problem(key: str, shape: Sequence[int], dtype: torch.dtype) -> str | None:
    """Why observation group ``key`` of one env's ``shape`` and ``dtype`` cannot be stored, else ``None``.

    float32 groups of any shape are vectors; a uint8 group is an image and must be ``[C, H, W]``.
    """
    if dtype == torch.float32:
        return None
    if dtype != IMAGE_DTYPE:
        return (
            f"observation group {key!r} has dtype {_dtype_name(dtype)}; accepted: float32 (a vector) "
            "or uint8 (an image [C, H, W])"
        )
    if len(shape) != IMAGE_RANK:
        return (
            f"observation group {key!r} is uint8 of shape {list(shape)}; an image group must be "
            "[C, H, W] (3 dims)"
        )
    return None


def check_schema(rollout: TensorDict, iteration: int | None = None) -> None:
    """Check batch size, keys, dtypes, padding and ``done`` against the schema; raise :class:`RolloutError`.

    Values are not checked otherwise (finiteness is :func:`check_finite`). One host sync when the
    rollout is good; the message names the key, the first bad ``[env, time]`` index and the iteration.
    """
    where = f" (iteration {iteration})" if iteration is not None else ""
    if rollout.batch_dims != 2 or rollout.batch_size[1] < 2:
        raise RolloutError(
            f"rollout{where}: batch_size must be [N, T+1] with T >= 1, got {list(rollout.batch_size)}"
        )
    for key, dtypes in KEY_DTYPES.items():
        if key not in rollout.keys():
            raise RolloutError(f"rollout{where} lacks schema key {key!r}")
        value = rollout.get(key)
        leaves: list[tuple[str | tuple[str, ...], torch.Tensor]] = (
            tensor_leaves(value)
            if isinstance(value, TensorDict)  # dict obs: each
            else [(key, value)]
        )
        wrong = next((leaf.dtype for _, leaf in leaves if leaf.dtype not in dtypes), None)
        if wrong is not None:
            allowed = " or ".join(_dtype_name(d) for d in dtypes)
            raise RolloutError(
                f"rollout{where}: key {key!r} has dtype {_dtype_name(wrong)}, expected {allowed}"
            )
        if key == "obs":
            _check_images(leaves, where)
    mismatch = (rollout["terminated"] | rollout["truncated"]) != rollout["done"]
    pads = [rollout.get(key)[:, -1] for key in TRANSITION_KEYS]
    if not bool(torch.stack([mismatch.any(), *(pad.any() for pad in pads)]).any()):
        return
    if mismatch.any():
        env, t = (int(i) for i in mismatch.nonzero()[0])
        raise RolloutError(f"rollout{where}: key 'done' != terminated | truncated at [{env}, {t}]")
    for key, pad in zip(TRANSITION_KEYS, pads, strict=True):
        if pad.any():
            env = int(pad.reshape(pad.shape[0], -1).any(-1).nonzero()[0, 0])
            raise RolloutError(
                f"rollout{where}: key {key!r} padding slot is not zero at "
                f"[{env}, {rollout.batch_size[1] - 1}]"
            )


def check_finite(rollout: TensorDict, iteration: int | None = None) -> None:
    """Raise :class:`NonFiniteRolloutError` naming the key and first ``[env, time]`` of a NaN/Inf.

    Every floating-point leaf is checked; one host sync when all are finite.
    """
    if bool(all_finite([rollout])):
        return
    where = f" (iteration {iteration})" if iteration is not None else ""
    for key, value in tensor_leaves(rollout):
        if value.is_floating_point():
            bad = ~torch.isfinite(value.reshape(*rollout.batch_size, -1)).all(-1)
            if bad.any():
                env, t = (int(i) for i in bad.nonzero()[0])
                raise NonFiniteRolloutError(
                    f"rollout{where}: key {key!r} is not finite at [{env}, {t}]", str(key), iteration
                )


def validate(rollout: TensorDict, iteration: int | None = None) -> None:
    """:func:`check_schema` and :func:`check_finite`: raise :class:`RolloutError` at the first problem."""
    check_schema(rollout, iteration)
    check_finite(rollout, iteration)


def _check_images(leaves: list[tuple[str | tuple[str, ...], torch.Tensor]], where: str) -> None:
    """:class:`RolloutError` for a uint8 observation that is not ``[N, T+1, C, H, W]``."""
    for name, leaf in leaves:
        if leaf.dtype == IMAGE_DTYPE and leaf.dim() != 2 + IMAGE_RANK:
            key = name if isinstance(name, str) else "/".join(name)
            raise RolloutError(
                f"rollout{where}: image group 'obs/{key}' has shape {list(leaf.shape)}; "
                "uint8 observations must be [N, T+1, C, H, W]"
            )


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
