"""What is in a run directory: params, stored rollouts, checkpoints, last metrics (``rlpipe inspect``)."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from rlpipe.artifacts.checkpoints import latest_checkpoint
from rlpipe.artifacts.fs import AnyPath, tree_bytes
from rlpipe.artifacts.layout import RunLayout
from rlpipe.artifacts.shards import is_sharded, read_any_attrs, shard_paths
from rlpipe.config import describing, load, params_hash, training_hash
from rlpipe.config.registry import code_of

__all__ = ["describe_run"]


def describe_run(run_dir: Path) -> dict[str, Any]:
    """A JSON-serializable summary of the run in ``run_dir``.

    ``iterations`` and ``env_steps`` are those of the newest stored rollout (or of ``metrics.json``
    when rollouts were not kept); ``rollouts`` lists the stored iterations and bytes on disk;
    ``checkpoints`` the checkpoint files and the one ``latest`` resolves to; ``metrics`` is
    ``metrics.json`` and ``last_row`` the last row of ``curve.csv``; ``code`` the ``module:Class`` of
    an algorithm or policy that is not rlpipe's own, which the commands that run it import. Nothing
    of it is imported here: describing a run runs none of its code.
    """
    layout = RunLayout(run_dir)
    with describing():
        cfg = load(layout.params)
    stores = layout.rollout_paths()
    newest = read_any_attrs(stores[max(stores)]) if stores else {}
    shards = shard_paths(stores[max(stores)]) if stores and is_sharded(stores[max(stores)]) else []
    metrics = _json(layout.metrics)
    checkpoints = layout.checkpoint_paths()
    latest = latest_checkpoint(layout.checkpoints) if checkpoints else None
    return {
        "run_dir": str(layout.root),
        "exp_name": cfg.trainer.exp_name,
        "env_id": cfg.env.id,
        "algorithm": cfg.algorithm.name,
        "policy": cfg.policy.name,
        "code": code_of(cfg.algorithm.name, cfg.policy.name),
        "params_hash": params_hash(cfg),
        "training_hash": training_hash(cfg),
        "iterations": newest.get("iteration", metrics.get("iterations", 0)),
        "env_steps": newest.get("env_steps", metrics.get("env_steps", 0)),
        "rollouts": {
            "count": len(stores),
            "first": min(stores, default=None),
            "last": max(stores, default=None),
            "sharded": bool(shards),
            "world_size": max(len(shards), 1),
            "bytes_on_disk": sum(_bytes(p) for p in stores.values()),
        },
        "checkpoints": {
            "count": len(checkpoints),
            "iterations": list(checkpoints),
            "latest": latest.name if latest else None,
        },
        "metrics": metrics,
        "last_row": _last_row(layout.curve),
    }


def _json(path: AnyPath) -> dict[str, Any]:
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return {}


def _bytes(path: AnyPath) -> int:
    return tree_bytes(path)


def _last_row(path: AnyPath) -> dict[str, str]:
    try:
        with path.open(newline="") as fh:
            rows = list(csv.DictReader(fh))
    except OSError:
        return {}
    return dict(rows[-1]) if rows else {}
