"""Evaluate a replayed policy exactly as the online run evaluated its own, and set the two side by side.

The online run's final evaluation used ``trainer.num_eval_envs`` envs, ``trainer.num_eval_episodes``
episodes each, deterministic actions, and reset seed ``trainer.seed + EVAL_SEED_OFFSET + i`` for its
i-th evaluation. The replay's evaluation of its final weights uses the same envs and the seed of that
final online evaluation, so with unchanged params (bit-identical weights) it reproduces the online
metrics exactly, and with changed ``replay.algorithm`` params the difference is the params' alone.
"""

from __future__ import annotations

import csv
import json
from typing import TYPE_CHECKING, Any

from rlpipe.artifacts.layout import RunLayout
from rlpipe.config import RunConfig
from rlpipe.envs import build_eval_env
from rlpipe.evaluation import EVAL_SEED_OFFSET, Evaluator

if TYPE_CHECKING:
    import torch

    from rlpipe.policies import Policy

__all__ = ["evaluate_replayed", "online_eval_count", "online_eval_metrics"]


def online_eval_count(layout: RunLayout) -> int:
    """How many evaluations the online run made: its ``curve.csv`` rows with ``eval/return_mean``."""
    try:
        with layout.curve.open(newline="") as fh:
            return sum(1 for row in csv.DictReader(fh) if row.get("eval/return_mean"))
    except OSError:
        return 0


def online_eval_metrics(layout: RunLayout, iteration: int) -> dict[str, float]:
    """The online run's final ``eval/…`` metrics as ``online/eval/…``, if it ended at ``iteration``.

    Read from its ``metrics.json``; empty when the run went on past ``iteration`` (a replay of part
    of it) or has no summary.
    """
    try:
        summary: dict[str, Any] = json.loads(layout.metrics.read_text())
    except (OSError, ValueError):
        return {}
    if summary.get("iterations") != iteration:
        return {}
    return {
        f"online/{key}": float(value)
        for key, value in summary.items()
        if key.startswith("eval/") and isinstance(value, int | float)
    }


def evaluate_replayed(
    cfg: RunConfig, policy: Policy, device: torch.device, layout: RunLayout
) -> dict[str, float]:
    """``eval/…`` metrics of ``policy`` (the replay's final weights) under the online run's final eval.

    ``layout``: the online run (its ``curve.csv`` says how many evaluations preceded). Empty when
    ``trainer.enable_eval`` is false.
    """
    if not cfg.trainer.enable_eval:
        return {}
    env, _ = build_eval_env(
        cfg.env.id, cfg.trainer.num_eval_envs, device, cfg.env.cfg, False, cfg.env.backend
    )
    try:
        evaluator = Evaluator(
            env, policy, cfg.trainer.num_eval_episodes, seed=cfg.trainer.seed + EVAL_SEED_OFFSET
        )
        evaluator.calls = max(online_eval_count(layout) - 1, 0)  # the seed of the online final eval
        return evaluator()
    finally:
        env.close()
