"""The mirror function's contract, checked once on a sample batch before training writes anything.

``function(obs=None, actions=None, env=None)`` returns ``(obs, actions)``: each its input's ``[B, ...]``
rows followed by K−1 mirrored copies (``[K·B, ...]``, the same K for both), ``None`` for a ``None``
input. :class:`~rlpipe.algorithms.symmetry.Symmetry` calls it in three ways — both inputs (data
augmentation), observations alone (the mirror loss), actions alone (the mirrored mean, or the image
of every action index for a categorical policy) — so :func:`check_mirror` calls it those ways on a
few rows drawn from the env's spaces. Every violation is one :class:`ConfigError` line naming
``algorithm.cfg.symmetry.function``, what came back and what is accepted: exit code 2 at build time,
not a shape error in the first update.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from tensordict import TensorDict

from rlpipe.config import ConfigError

__all__ = ["ACCEPTED", "KEY", "call_mirror", "check_mirror", "check_signature", "sample_rows"]

KEY = "algorithm.cfg.symmetry.function"
"""The params key that names the mirror function."""
ACCEPTED = (
    "accepted: a function f(obs=None, actions=None, env=None) returning (obs, actions), each "
    "its input's B rows first, then their mirrored copies ([K·B, ...]), None for None"
)
SAMPLE_ROWS = 3
"""Rows of the sample batch the function is checked on."""
Batch = torch.Tensor | TensorDict


def check_signature(function: Callable[..., Any], spec: str) -> None:
    """``ConfigError`` when ``function`` cannot be called with ``obs=``, ``actions=``, ``env=``."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):  # a builtin without a signature: its call says it
        return
    try:
        signature.bind(obs=None, actions=None, env=None)
    except TypeError:
        raise ConfigError(f"{KEY}: {spec} takes {signature}, not obs=, actions=, env=; {ACCEPTED}") from None


def call_mirror(
    function: Callable[..., Any], spec: str, obs: Batch | None, actions: torch.Tensor | None
) -> tuple[Any, Any]:
    """``function(obs=obs, actions=actions, env=None)``; raising or not returning a pair is a ``ConfigError``.

    Running out of memory stays what it is (exit code 1), not a fault of the function.
    """
    try:
        result = function(obs=obs, actions=actions, env=None)
    except (MemoryError, torch.cuda.OutOfMemoryError):
        raise
    except Exception as exc:
        text = (str(exc).strip().splitlines() or [""])[0]
        raise ConfigError(
            f"{KEY}: {spec} raised {type(exc).__name__}: {text} (called with obs "
            f"{_describe(obs)}, actions {_describe(actions)}); {ACCEPTED}"
        ) from exc
    if not (isinstance(result, tuple | list) and len(result) == 2):
        raise ConfigError(
            f"{KEY}: {spec} returned {_describe(result)}, not a pair (obs, actions); {ACCEPTED}"
        )
    return result[0], result[1]


def check_mirror(
    function: Callable[..., Any],
    spec: str,
    obs_space: gym.Space,
    action_space: gym.Space,
    device: torch.device | str,
) -> None:
    """Call ``function`` as training will, on a few rows of the spaces; a ``ConfigError`` if it breaks.

    A space with no sample form here (neither Box, Dict of Box nor Discrete) is not checked.
    """
    obs, actions = sample_rows(obs_space, device), sample_rows(action_space, device)
    copies: dict[str, int] = {}
    if obs is not None and actions is not None:
        both = call_mirror(function, spec, obs, actions)
        copies["observations"] = _copies(both[0], obs, "observations", spec)
        copies["actions"] = _copies(both[1], actions, "actions", spec)
    if obs is not None:
        copies["observations alone"] = _copies(
            call_mirror(function, spec, obs, None)[0], obs, "observations", spec
        )
    if actions is not None:
        copies["actions alone"] = _copies(
            call_mirror(function, spec, None, actions)[1], actions, "actions", spec
        )
    if isinstance(action_space, gym.spaces.Discrete):
        copies["action indices"] = _index_images(function, spec, int(action_space.n), device)
    if len(set(copies.values())) > 1:
        counts = ", ".join(f"{what} ×{k}" for what, k in copies.items())
        raise ConfigError(f"{KEY}: {spec} returns different numbers of copies ({counts}); {ACCEPTED}")


def sample_rows(space: gym.Space, device: torch.device | str, rows: int = SAMPLE_ROWS) -> Batch | None:
    """``rows`` values of ``space`` as a batch ``[rows, ...]`` (float32, uint8 images, int64 indices).

    Drawn from a seeded copy of the space: the env's own space and every RNG stay untouched.
    """
    if isinstance(space, gym.spaces.Dict):
        groups = {key: sample_rows(sub, device, rows) for key, sub in space.spaces.items()}
        if any(group is None for group in groups.values()):
            return None
        return TensorDict(groups, batch_size=[rows], device=device)
    if isinstance(space, gym.spaces.Discrete):
        return (torch.arange(rows, device=device) % int(space.n)) + int(space.start)
    if not isinstance(space, gym.spaces.Box):
        return None
    draw = copy.deepcopy(space)
    draw.seed(0)
    values = torch.as_tensor(np.stack([draw.sample() for _ in range(rows)]), device=device)
    return values if values.dtype == torch.uint8 else values.float()


def _copies(out: object, given: Batch, what: str, spec: str) -> int:
    """K of ``out`` ``[K·B, ...]`` mirroring ``given`` ``[B, ...]``, originals first; else ``ConfigError``."""
    rows = given.shape[0]
    expected = f"[K·{rows}{_trailing(given)}]"
    if (
        not isinstance(out, type(given))
        or out.ndim == 0
        or out.shape[0] % rows
        or out.shape[0] == 0
        or _trailing(out) != _trailing(given)
    ):
        raise ConfigError(
            f"{KEY}: {spec} returned {_describe(out)} {what} for {_describe(given)}; "
            f"expected {expected} ({ACCEPTED})"
        )
    if not _equal(out[:rows], given):
        raise ConfigError(
            f"{KEY}: {spec} returned {what} whose first {rows} rows are not the ones it was given; {ACCEPTED}"
        )
    return out.shape[0] // rows


def _index_images(function: Callable[..., Any], spec: str, n: int, device: torch.device | str) -> int:
    """K copies of the n action indices; each copy must be a permutation of them (a categorical mirror)."""
    indices = torch.arange(n, device=device)
    images = call_mirror(function, spec, None, indices)[1]
    copies = _copies(images, indices, "actions", spec)
    for image in images.reshape(-1, n):
        if not torch.equal(image.long().sort().values, indices):
            raise ConfigError(
                f"{KEY}: {spec} maps the action indices 0..{n - 1} to {image.tolist()}, "
                f"not to a permutation of them; {ACCEPTED}"
            )
    return copies


def _equal(a: Batch, b: Batch) -> bool:
    if isinstance(a, TensorDict) and isinstance(b, TensorDict):
        return all(torch.equal(a[key].to(b[key].dtype), b[key]) for key in b.keys())
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return torch.equal(a.to(b.dtype), b)
    return False  # a batch and a mirror of another kind (ruled out by the callers' type check)


def _trailing(x: Batch) -> str:
    """``, d1, d2`` of a tensor's row shape; ``, {key: [d…]}`` of a TensorDict's groups."""
    if isinstance(x, TensorDict):
        return ", {" + ", ".join(f"{key}: {list(x[key].shape[1:])}" for key in sorted(x.keys())) + "}"
    return "".join(f", {d}" for d in x.shape[1:])


def _describe(x: object) -> str:
    """A value as the message shows it: ``None``, a shape ``[6, 4]``, or its type."""
    if x is None:
        return "None"
    if isinstance(x, torch.Tensor | TensorDict):
        return f"[{x.shape[0]}{_trailing(x)}]" if x.ndim else "a 0-dim tensor"
    return f"a {type(x).__name__}"
