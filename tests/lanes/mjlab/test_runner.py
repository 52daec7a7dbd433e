"""The mjlab lane: the drop-in ``rlpipe.rsl_rl.OnPolicyRunner`` trains Go1 with the task's own agent config.

What mjlab's train script does (``ManagerBasedRlEnv`` → ``RslRlVecEnvWrapper`` → the runner with
``asdict`` of the task's agent config), with rlpipe's runner imported instead of rsl_rl's.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from _offline_fixtures import assert_same_learner

from rlpipe.envs.backends.mjlab_env import task_train_cfg
from rlpipe.tracking.mlflow_query import search_runs

ROOT = Path(__file__).resolve().parents[3]
TASK = "Mjlab-Velocity-Flat-Unitree-Go1"
NUM_ENVS, HORIZON, ITERATIONS = 4, 24, 2

pytestmark = pytest.mark.lane


def mjlab_vec_env(num_envs: int):
    """The task's env as mjlab's train script builds it, on the CPU."""
    from mjlab.envs import ManagerBasedRlEnv
    from mjlab.rl import RslRlVecEnvWrapper
    from mjlab.tasks.registry import load_env_cfg, load_rl_cfg

    cfg = load_env_cfg(TASK)
    cfg.scene.num_envs, cfg.seed = num_envs, 7
    return RslRlVecEnvWrapper(ManagerBasedRlEnv(cfg=cfg, device="cpu"), load_rl_cfg(TASK).clip_actions)


def test_the_drop_in_runner_trains_go1_stores_replays_and_tracks(tmp_path: Path, monkeypatch) -> None:
    from rlpipe.rsl_rl import OnPolicyRunner

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    train_cfg = {**task_train_cfg(TASK), "num_steps_per_env": HORIZON, "save_interval": 1}
    env = mjlab_vec_env(NUM_ENVS)
    runner = OnPolicyRunner(env, train_cfg, str(tmp_path / "logs"), device="cpu")
    runner.learn(num_learning_iterations=ITERATIONS, init_at_random_ep_len=True)
    env.close()
    stores = sorted((tmp_path / "logs").rglob("iter-*.zarr"))
    assert [p.name for p in stores] == [f"iter-{k:06d}.zarr" for k in range(1, ITERATIONS + 1)]
    run_dir = stores[0].parent.parent
    out = tmp_path / "replay"
    result = subprocess.run(
        [sys.executable, "-m", "rlpipe", "replay", str(run_dir), "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    name = f"ckpt-{ITERATIONS:06d}.pt"
    assert_same_learner(out / "checkpoints" / name, run_dir / "checkpoints" / name)
    runs = [r for r in search_runs(uri) if r.tags.get("rlpipe.kind") != "replay"]  # replay's own run aside
    assert [(r.experiment, r.status) for r in runs] == [("logs", "FINISHED")]
    assert runs[0].metrics["env_steps"] == ITERATIONS * NUM_ENVS * HORIZON
