"""The mjlab lane (``make test-mjlab``): mjlab 1.6's Go1 velocity task trained by rlpipe on the CPU.

Runs only in the lane's virtualenv (mjlab, its MuJoCo 3.11, rlpipe installed from the checkout),
never in the default suite (marker ``lane``). Two iterations of a few envs: mjlab steps slowly on
Warp's CPU backend, and Warp compiles its kernels on first use (kept in ``WARP_CACHE_PATH``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _offline_fixtures import assert_same_learner

from rlpipe.tracking.mlflow_query import search_runs

ROOT = Path(__file__).resolve().parents[3]
TASK = "Mjlab-Velocity-Flat-Unitree-Go1"
NUM_ENVS, HORIZON, ITERATIONS = 4, 24, 2

pytestmark = pytest.mark.lane


def rlpipe(*args: object) -> subprocess.CompletedProcess[str]:
    """``python -m rlpipe ARGS`` with this venv's Python, from the repository root."""
    env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    return subprocess.run(
        [sys.executable, "-m", "rlpipe", *map(str, args)], capture_output=True, text=True, cwd=ROOT, env=env
    )


def sets(*overrides: str) -> list[str]:
    return [a for o in overrides for a in ("--set", o)]


@pytest.fixture(scope="module")
def go1_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """``rlpipe run`` of the task by ``env.id`` (run dir, MLflow URI): 2 iterations of 4 envs × 24 steps."""
    data = tmp_path_factory.mktemp("go1")
    uri = f"sqlite:///{data}/mlflow.db"
    result = rlpipe(
        "run",
        ROOT / "params.yaml",
        *sets(
            "env.backend=mjlab",
            f"env.id={TASK}",
            "policy.actor.obs_keys=[actor]",
            "policy.critic.obs_keys=[critic]",
            "policy.obs_normalization=true",
            f"trainer.num_envs={NUM_ENVS}",
            f"trainer.buffer_size={HORIZON}",
            f"trainer.iterations={ITERATIONS}",
            "trainer.stop_when=[]",
            "trainer.enable_eval=false",
            "trainer.device=cpu",
            f"trainer.data_dir={data}",
            "trainer.exp_name=go1",
            "checkpoint.every_iteration=true",
            f"tracking.uri={uri}",
        ),
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return data / "go1", uri


def test_env_id_trains_go1_and_stores_every_rollout(go1_run: tuple[Path, str]) -> None:
    run_dir, _ = go1_run
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["env_steps"] == ITERATIONS * NUM_ENVS * HORIZON
    columns = (run_dir / "curve.csv").read_text().splitlines()[0].split(",")
    assert "env/Metrics/slip_velocity_mean" in columns  # mjlab's extras["log"] reached the curves
    stores = sorted(p.name for p in (run_dir / "rollouts").iterdir())
    assert stores == [f"iter-{k:06d}.zarr" for k in range(1, ITERATIONS + 1)]
    attrs = json.loads((run_dir / "rollouts" / stores[-1] / "zarr.json").read_text())["attributes"]
    assert attrs["env_backend"] == "RslRlEnv" and attrs["bootstrap"] == "approximate"
    assert (run_dir / "rollouts" / stores[-1] / "obs" / "actor").is_dir()
    assert (run_dir / "rollouts" / stores[-1] / "obs" / "critic").is_dir()


def test_replay_of_the_go1_run_is_bit_exact(go1_run: tuple[Path, str], tmp_path: Path) -> None:
    run_dir, _ = go1_run
    result = rlpipe("replay", run_dir, "--out", tmp_path)
    assert result.returncode == 0, result.stderr[-4000:]
    for k in range(1, ITERATIONS + 1):
        name = f"ckpt-{k:06d}.pt"
        assert_same_learner(tmp_path / "checkpoints" / name, run_dir / "checkpoints" / name)


def test_the_go1_run_is_in_mlflow(go1_run: tuple[Path, str]) -> None:
    _, uri = go1_run
    runs = [r for r in search_runs(uri) if r.tags.get("rlpipe.kind") != "replay"]  # replay's own run aside
    assert [(r.experiment, r.status) for r in runs] == [("go1", "FINISHED")]
    assert runs[0].metrics["env_steps"] == ITERATIONS * NUM_ENVS * HORIZON
    assert any(key.startswith("env/Metrics/") for key in runs[0].metrics)  # mjlab's extras["log"]


def test_an_unknown_task_is_one_line_naming_the_close_one(tmp_path: Path) -> None:
    task = TASK.replace("Go1", "Go2")
    result = rlpipe(
        "run",
        ROOT / "params.yaml",
        *sets("env.backend=mjlab", f"env.id={task}", f"trainer.data_dir={tmp_path}"),
    )
    assert result.returncode == 2
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .startswith(
            f"Error: env.id: unknown mjlab task {task!r} (did you mean {TASK!r}?); accepted: one of mjlab's"
        )
    )
