"""End-to-end learning: the default params.yaml solves the torch CartPole (kept in the default suite)."""

import json

import pytest

from rlpipe.config import load
from rlpipe.run import run


def test_default_cartpole_run_is_solved(tmp_path):
    cfg = load("params.yaml", [f"trainer.data_dir={tmp_path}", "tracking.backend=none"])
    summary = run(cfg)
    metrics = json.loads((cfg.run_dir / "metrics.json").read_text())
    assert metrics["train/episode_return_mean"] >= 475, metrics
    assert metrics["eval/return_mean"] >= 475, metrics
    assert summary["env_steps"] == cfg.trainer.iterations * cfg.trainer.num_envs * cfg.trainer.buffer_size


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_default_cartpole_solves_other_seeds(tmp_path, seed):
    cfg = load("params.yaml", [f"trainer.data_dir={tmp_path}", "tracking.backend=none",
                               f"trainer.seed={seed}", "store.enabled=false"])
    assert run(cfg)["train/episode_return_mean"] >= 475
