"""Hashes of a config: all of it (``params_hash``) and what changes the maths (``training_hash``)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from rlpipe.config.errors import ConfigError
from rlpipe.config.sections import RunConfig

__all__ = [
    "NOT_TRAINING",
    "params_hash",
    "refuse_other_training",
    "training_diff",
    "training_hash",
    "training_params",
]


def params_hash(cfg: RunConfig) -> str:
    """Stable short hash of the resolved params (ties rollouts and runs to their config)."""
    text = json.dumps(cfg.to_dict(), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


NOT_TRAINING = (
    ("trainer", "exp_name"),
    ("trainer", "data_dir"),
    ("trainer", "iterations"),
    ("trainer", "save_freq"),
    ("trainer", "distributed"),
    ("trainer", "num_threads"),
    ("trainer", "enable_eval"),
    ("trainer", "eval_freq"),
    ("trainer", "num_eval_envs"),
    ("trainer", "num_eval_episodes"),
    ("trainer", "on_nonfinite"),
    ("trainer", "max_skipped_in_a_row"),
    ("tracking",),
    ("store",),
    ("checkpoint",),
    ("replay",),
    ("eval",),
)
"""Params that do not change what training computes: where a run lives, how long it goes, what it
keeps, logs and evaluates (online evaluation is deterministic, on its own envs and seeds). A run may
be resumed or replayed across them."""


def training_params(cfg: RunConfig) -> dict[str, Any]:
    """``cfg`` as a dict without :data:`NOT_TRAINING`."""
    data = cfg.to_dict()
    for path in NOT_TRAINING:
        node = data
        for part in path[:-1]:
            node = node[part]
        node.pop(path[-1], None)
    return data


def training_hash(cfg: RunConfig) -> str:
    """Short hash of :func:`training_params`: equal for runs whose updates compute the same thing."""
    return hashlib.sha256(json.dumps(training_params(cfg), sort_keys=True).encode()).hexdigest()[:16]


def training_diff(a: dict[str, Any], b: dict[str, Any], prefix: str = "") -> list[tuple[str, Any, Any]]:
    """``[(key.path, value in a, value in b)]`` where two :func:`training_params` dicts differ."""
    diffs: list[tuple[str, Any, Any]] = []
    for key in sorted(set(a) | set(b)):
        path = f"{prefix}{key}"
        va, vb = a.get(key), b.get(key)
        if isinstance(va, dict) and isinstance(vb, dict):
            diffs += training_diff(va, vb, f"{path}.")
        elif va != vb:
            diffs.append((path, va, vb))
    return diffs


def refuse_other_training(
    where: str, state: dict[str, Any], cfg: RunConfig, length: tuple[tuple[str, ...], ...] = ()
) -> None:
    """``ConfigError`` naming each differing training param (both values) when ``state`` came from others.

    ``state``: a checkpoint's entries (``training_params``, or only ``training_hash`` in older ones);
    ``where``: the checkpoint, named first in the message. ``length``: key paths that count as the
    run's length for this command (a distillation's ``algorithm.cfg.offline_passes``) and may change
    like ``trainer.iterations``.
    """
    written = state.get("training_params")
    if written is None:
        if state.get("training_hash", training_hash(cfg)) != training_hash(cfg):
            raise ConfigError(f"{where}: checkpoint was written with other training params")
        return
    now = training_params(cfg)
    diffs = [
        d
        for d in training_diff(_explicit(written, cfg), _explicit(now, cfg))
        if tuple(d[0].split(".")) not in length
    ]
    if diffs:
        shown = "; ".join(f"{key}: {a!r} in the checkpoint, {b!r} now" for key, a, b in diffs[:5])
        more = f" (+{len(diffs) - 5} more)" if len(diffs) > 5 else ""
        raise ConfigError(
            f"{where}: checkpoint was written with other training params ({shown}{more}); "
            "only where the run lives, its length, storage, tracking and eval may change"
        )


def _explicit(params: dict[str, Any], cfg: RunConfig) -> dict[str, Any]:
    """``params`` with ``algorithm.cfg``'s unset keys at ``cfg``'s algorithm defaults.

    A params file (and so ``training_params``) leaves algorithm defaults implicit: a key set to its
    default value is the same training as the key left out.
    """
    block = params.get("algorithm")
    if not isinstance(block, dict) or not isinstance(block.get("cfg"), dict):
        return params
    defaults = type(cfg.algorithm.cfg).model_construct().model_dump(mode="json")
    return {**params, "algorithm": {**block, "cfg": {**defaults, **block["cfg"]}}}
