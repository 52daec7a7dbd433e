"""End-to-end learning: the default params.yaml solves the torch CartPole and stops there.

The default run is the showcase of ``make run``: PPO with every rollout stored, evaluated often,
stopped by ``trainer.stop_when`` once the deterministic eval return is >= 475 (that eval, at the
final weights, is the confirmation written to ``metrics.json``). The seed sweep is slow-marked.
"""

import json

import pytest

from rlpipe.config import load
from rlpipe.trainer import Trainer

SOLVED = 475.0


def test_default_cartpole_run_is_solved_and_stops_there(tmp_path):
    cfg = load("params.yaml", [f"trainer.data_dir={tmp_path}", "tracking.backend=none"])
    summary = Trainer(cfg).train()
    metrics = json.loads((cfg.run_dir / "metrics.json").read_text())
    assert metrics["eval/return_mean"] >= SOLVED, metrics
    assert metrics["stopped_by"] == f"eval/return_mean >= 475 (got {metrics['eval/return_mean']:g})"
    assert summary["iterations"] < cfg.trainer.iterations  # stopped early, not at the cap
    steps = cfg.trainer.num_envs * cfg.trainer.buffer_size
    assert summary["env_steps"] == summary["iterations"] * steps
    stored = sorted(p.name for p in (cfg.run_dir / "rollouts").iterdir())
    assert len(stored) == summary["iterations"]  # every rollout stored


@pytest.mark.slow
def test_default_cartpole_solves_at_least_4_of_5_seeds(tmp_path):
    solved = {}
    for seed in range(5):
        cfg = load(
            "params.yaml",
            [
                f"trainer.data_dir={tmp_path / str(seed)}",
                "tracking.backend=none",
                f"trainer.seed={seed}",
                "store.enabled=false",
            ],
        )
        solved[seed] = Trainer(cfg).train().get("eval/return_mean", 0.0) >= SOLVED
    assert sum(solved.values()) >= 4, solved
