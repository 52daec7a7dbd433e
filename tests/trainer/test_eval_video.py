"""Online eval videos: one MP4 per evaluation under eval/, logged to MLflow; training unaffected."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from _offline_fixtures import tiny_cfg

from rlpipe.trainer import Trainer

VIDEO = (
    "trainer.iterations=2",
    "trainer.enable_eval=true",
    "trainer.eval_freq=128",
    "trainer.num_eval_envs=3",
    "trainer.num_eval_episodes=1",
    "eval.video=true",
    "eval.video_envs=2",
)


@pytest.fixture(autouse=True)
def _no_ambient_tracking(monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)


def artifacts(uri: str, experiment: str) -> list[str]:
    """Artifact paths of the experiment's runs, read by another process."""
    script = textwrap.dedent(f"""
        import json, mlflow
        client = mlflow.MlflowClient({uri!r})
        exp = client.get_experiment_by_name({experiment!r})
        runs = client.search_runs([exp.experiment_id])
        print(json.dumps([f.path for r in runs for f in client.list_artifacts(r.info.run_id, "eval")]))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_each_online_eval_writes_a_video_logged_to_mlflow_and_training_is_unchanged(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    filmed = tiny_cfg(tmp_path / "a", *VIDEO, f"tracking.uri={uri}", "tracking.backend=mlflow")
    summary = Trainer(filmed).train()
    videos = sorted(p.name for p in (filmed.run_dir / "eval").glob("*.mp4"))
    assert videos == ["video-iter-000001.mp4", "video-iter-000002.mp4"]  # an eval every 128 steps
    assert sorted(artifacts(uri, filmed.trainer.exp_name)) == [f"eval/{v}" for v in videos]
    plain = Trainer(tiny_cfg(tmp_path / "b", *VIDEO[:-2])).train()
    same = [k for k in summary if k.startswith(("train/", "update/", "eval/return"))]
    assert same and {k: summary[k] for k in same} == {k: plain[k] for k in same}


def test_an_env_that_cannot_draw_runs_on_with_one_warning_line(tmp_path, capsys):
    cfg = tiny_cfg(tmp_path, *VIDEO, "env.id=RepeatFirst")
    summary = Trainer(cfg).train()
    assert summary["iterations"] == 2 and "eval/return_mean" in summary
    assert not (cfg.run_dir / "eval").is_dir() or not list((cfg.run_dir / "eval").iterdir())
    assert capsys.readouterr().err.count("Warning: eval video off:") == 1


def test_video_freq_films_every_kth_eval_and_the_last(tmp_path):
    """Evals every 128 steps, video every 256: iteration 1 only scores, 2 and 3 (the last) are filmed."""
    cfg = tiny_cfg(
        tmp_path, *VIDEO, "trainer.iterations=3", "eval.video_freq=256", "env.cfg.max_episode_steps=16"
    )
    summary = Trainer(cfg).train()
    videos = sorted(p.name for p in (cfg.run_dir / "eval").glob("*.mp4"))
    assert videos == ["video-iter-000002.mp4", "video-iter-000003.mp4"]
    assert "eval/return_mean" in summary
