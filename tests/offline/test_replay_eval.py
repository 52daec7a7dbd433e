"""rlpipe replay evaluates the replayed policy as the online run evaluated its own, beside its metrics."""

from __future__ import annotations

import csv

from _offline_fixtures import STEPS, tiny_cfg
from click.testing import CliRunner

from rlpipe.artifacts.layout import RunLayout
from rlpipe.cli import cli
from rlpipe.offline.replay import replay
from rlpipe.offline.replay_eval import evaluate_replayed, online_eval_metrics
from rlpipe.trainer import Trainer


def test_replay_reports_eval_metrics_beside_the_online_runs(tmp_path):
    cfg = tiny_cfg(tmp_path, "trainer.enable_eval=true", "trainer.iterations=2", f"trainer.eval_freq={STEPS}")
    online = Trainer(cfg).train()
    summary = replay(cfg, cfg.run_dir / "rollouts", tmp_path / "reupdate")
    # unchanged params: the same weights, the same eval envs and seed → the online final eval exactly
    assert summary["eval/return_mean"] == online["eval/return_mean"]
    assert summary["online/eval/return_mean"] == online["eval/return_mean"]
    rows = list(csv.DictReader((tmp_path / "reupdate" / "curve.csv").open()))
    assert rows[-1]["eval/return_mean"] and not rows[0]["eval/return_mean"]  # the final weights only

    out = CliRunner().invoke(
        cli,
        [
            "replay",
            str(cfg.run_dir),
            "--out",
            str(tmp_path / "clip"),
            "--set",
            "replay.algorithm.cfg.clip_coef=0.05",
        ],
    )
    assert out.exit_code == 0, out.output
    line = next(x for x in out.output.splitlines() if x.startswith("eval/return_mean"))
    assert line.endswith(f"(online run: {online['eval/return_mean']:.6g})")


def test_no_eval_when_the_run_has_eval_off(tmp_path):
    cfg = tiny_cfg(tmp_path)  # trainer.enable_eval=false: nothing is built or evaluated
    assert evaluate_replayed(cfg, policy=None, device="cpu", layout=RunLayout(cfg.run_dir)) == {}


def test_online_metrics_only_for_a_replay_that_ends_where_the_run_ended(tmp_path):
    layout = RunLayout(tmp_path)
    layout.metrics.write_text('{"iterations": 4, "eval/return_mean": 20.5, "update/kl": 0.1}')
    assert online_eval_metrics(layout, 4) == {"online/eval/return_mean": 20.5}
    assert online_eval_metrics(layout, 3) == {}
