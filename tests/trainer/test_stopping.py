"""``trainer.stop_when``: bounds, patience, and a stop that ends the run like its normal end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlpipe import config
from rlpipe.artifacts.checkpoints import load_checkpoint
from rlpipe.config import ConfigError, StopConditionCfg, TrainerCfg
from rlpipe.trainer import Trainer
from rlpipe.trainer.stopping import Stopper

PARAMS = Path(__file__).resolve().parents[2] / "params.yaml"
TINY = (
    "trainer.device=cpu",
    "trainer.num_envs=4",
    "trainer.buffer_size=8",
    "trainer.save_freq=100000",
    "trainer.eval_freq=100000",
    "trainer.num_eval_envs=2",
    "tracking.backend=none",
    "store.enabled=false",
    "policy.actor.network_cfg.hidden_sizes=[8]",
    "policy.critic.network_cfg.hidden_sizes=[8]",
    "algorithm.cfg.batch_size=32",
    "algorithm.cfg.n_epochs=1",
)


def stopper(*conditions: dict) -> Stopper:
    return Stopper([StopConditionCfg(**c) for c in conditions])


def tiny(tmp_path: Path, *extra: str) -> config.RunConfig:
    return config.load(PARAMS, [*TINY, f"trainer.data_dir={tmp_path}", *extra])


def test_a_bound_stops_once_reached_and_missing_metrics_are_skipped():
    stop = stopper({"metric": "eval/return_mean", "min": 475}, {"metric": "loss", "max": 0.1})
    assert stop.update({"eval/return_mean": 474.9, "loss": 0.5}) is None
    assert stop.update({"loss": 0.2}) is None
    assert stop.update({"eval/return_mean": 475.0}) == "eval/return_mean >= 475 (got 475)"
    assert stopper({"metric": "loss", "max": 0.1}).update({"loss": 0.05}).startswith("loss <= 0.1")


def test_patience_counts_reports_without_improvement_by_min_delta():
    stop = stopper({"metric": "r", "patience": 2, "min_delta": 0.5})
    assert stop.update({"r": 1.0}) is None
    assert stop.update({"r": 1.4}) is None  # +0.4 < min_delta: first bad report
    assert stop.update({"other": 9.0}) is None  # no report of r: not counted
    assert stop.update({"r": 2.0}) is None  # +1.0 over the best 1.0: counter reset
    assert stop.update({"r": 2.0}) is None
    assert stop.update({"r": 1.0}) == "r did not improve for 2 reports (best 2)"


def test_patience_in_min_mode_treats_decreases_as_improvement():
    stop = stopper({"metric": "loss", "patience": 1, "mode": "min"})
    assert stop.update({"loss": 3.0}) is None
    assert stop.update({"loss": 2.0}) is None
    assert stop.update({"loss": 2.5}) is not None


def test_stopper_state_round_trips():
    stop = stopper({"metric": "r", "patience": 3})
    for value in (5.0, 4.0, 4.0):
        stop.update({"r": value})
    fresh = stopper({"metric": "r", "patience": 3})
    fresh.load_state_dict(stop.state_dict())
    assert fresh.update({"r": 4.0}) is not None


def test_conditions_need_exactly_one_rule():
    for bad in ({"metric": "r"}, {"metric": "r", "min": 1, "patience": 2}):
        with pytest.raises(ConfigError, match="trainer.stop_when.0: give a bound"):
            TrainerCfg.from_dict({"stop_when": [bad]}, "trainer")


def test_a_stop_writes_the_final_checkpoint_and_eval_and_records_the_reason(tmp_path):
    cfg = tiny(
        tmp_path,
        "trainer.iterations=5",
        "trainer.enable_eval=true",
        "trainer.stop_when=[{metric: iteration, min: 2}]",
    )
    summary = Trainer(cfg).train()
    assert summary["iterations"] == 2 and summary["stopped_by"] == "iteration >= 2 (got 2)"
    assert "eval/return_mean" in summary  # evaluated at the stop although eval_freq was not crossed
    metrics = json.loads((cfg.run_dir / "metrics.json").read_text())
    assert metrics["stopped_by"] == summary["stopped_by"]
    assert load_checkpoint(cfg.run_dir / "checkpoints" / "ckpt-000002.pt")["iteration"] == 2


def test_a_run_without_conditions_records_no_stop(tmp_path):
    summary = Trainer(tiny(tmp_path, "trainer.iterations=2", "trainer.enable_eval=false")).train()
    assert summary["iterations"] == 2 and summary["stopped_by"] is None


def test_resume_keeps_the_patience_counter(tmp_path):
    # "iteration" never decreases: in min mode every report after the first is a bad one, so
    # patience 3 stops at iteration 4 — only if the counter survives the resume after iteration 3.
    rule = "trainer.stop_when=[{metric: iteration, patience: 3, mode: min}]"
    Trainer(tiny(tmp_path, "trainer.iterations=3", "trainer.enable_eval=false", rule)).train()
    cfg = tiny(tmp_path, "trainer.iterations=8", "trainer.enable_eval=false", rule)
    summary = Trainer(cfg, resume=True).train()
    assert summary["iterations"] == 4
    assert summary["stopped_by"] == "iteration did not improve for 3 reports (best 1)"
