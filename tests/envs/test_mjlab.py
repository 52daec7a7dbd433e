"""mjlab on CPU (slow): ``rlpipe run`` trains mjlab's Go1 velocity task for a few iterations.

mjlab pins ``mujoco~=3.11`` (the project runs MuJoCo 4), so it lives in its own virtualenv with
rlpipe installed there too (README, "rsl_rl-style vector envs"); ``RLPIPE_MJLAB_PYTHON`` names that
venv's Python. The run goes through ``examples/mjlab_env.py`` and rlpipe's rsl_rl adapter: Warp's
CPU backend steps the simulation (about 0.1 s per step of 4 envs here).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PYTHON = os.environ.get("RLPIPE_MJLAB_PYTHON")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not PYTHON, reason="set RLPIPE_MJLAB_PYTHON to a venv's python with mjlab and rlpipe"),
]


def test_rlpipe_trains_mjlab_go1_on_cpu(tmp_path: Path) -> None:
    args = [
        PYTHON,
        "-m",
        "rlpipe",
        "run",
        str(ROOT / "params.yaml"),
        "--set",
        "env.id=examples.mjlab_env:make",
        "--set",
        "env.cfg.task=Mjlab-Velocity-Flat-Unitree-Go1",
        "--set",
        "policy.actor.obs_keys=[actor]",
        "--set",
        "policy.critic.obs_keys=[critic]",
        "--set",
        "policy.obs_normalization=true",
        "--set",
        "trainer.num_envs=4",
        "--set",
        "trainer.buffer_size=24",
        "--set",
        "trainer.iterations=3",
        "--set",
        "trainer.enable_eval=false",
        "--set",
        "trainer.device=cpu",
        "--set",
        "tracking.backend=none",
        "--set",
        f"trainer.data_dir={tmp_path}",
        "--set",
        "trainer.exp_name=mjlab_go1",
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MUJOCO_GL": "egl"}
    result = subprocess.run(args, capture_output=True, text=True, env=env, cwd=ROOT, timeout=1800)
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.loads((tmp_path / "mjlab_go1" / "metrics.json").read_text())
    assert metrics["env_steps"] == 3 * 4 * 24 and math.isfinite(metrics["update/value_loss"])
    columns = (tmp_path / "mjlab_go1" / "curve.csv").read_text().splitlines()[0].split(",")
    assert "env/Episode_Reward/track_linear_velocity" in columns  # mjlab's extras["log"] reached the curves
    rollout = tmp_path / "mjlab_go1" / "rollouts" / "iter-000003.zarr"
    attrs = json.loads((rollout / "zarr.json").read_text())["attributes"]
    assert attrs["env_backend"] == "RslRlEnv" and attrs["bootstrap"] == "approximate"
    assert (rollout / "obs" / "actor").is_dir() and (rollout / "obs" / "critic").is_dir()
