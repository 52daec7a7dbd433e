"""Every script in examples/ runs (shortened) and does what it says."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_example(name: str, tmp_path: Path, *args: str) -> str:
    path = os.pathsep.join([str(ROOT / "examples"), str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path}/mlflow.db", "PYTHONPATH": path}
    command = [sys.executable, str(ROOT / "examples" / name), "--data-dir", str(tmp_path), *args]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def curve(tmp_path: Path, exp: str) -> list[dict[str, str]]:
    return list(csv.DictReader((tmp_path / exp / "curve.csv").open()))


def test_train_from_script_uses_its_own_env(tmp_path):
    out = run_example("train_from_script.py", tmp_path, "--iterations", "2")
    assert "windy CartPole: eval return" in out
    assert len(curve(tmp_path, "windy_script")) == 2
    assert (tmp_path / "windy_script" / "rollouts" / "iter-000002.zarr").is_dir()


def test_notebook_loop_iterates_metrics(tmp_path):
    out = run_example("notebook_loop.py", tmp_path, "--iterations", "3")
    assert "3 iterations, last training return" in out


def test_domain_randomization_changes_the_wind_every_k_iterations(tmp_path):
    run_example("domain_randomization.py", tmp_path, "--iterations", "4", "--every", "2")
    winds = [float(row["dr/wind"]) for row in curve(tmp_path, "windy_dr")]
    assert winds[0] == winds[1] != winds[2] == winds[3]  # a new draw after iterations 1 and 3


def test_custom_metric_reaches_mlflow(tmp_path):
    from rlpipe.tracking import metric_history

    out = run_example("custom_metric.py", tmp_path, "--iterations", "2")
    run_id = out.strip().split("MLflow run ")[-1].rstrip(")")
    history = metric_history(f"sqlite:///{tmp_path}/mlflow.db", [run_id], "custom/pole_angle_std")
    assert len(history[run_id]) == 2 and all(v > 0 for _, v in history[run_id])


def test_step_by_step_loop(tmp_path):
    out = run_example("step_by_step.py", tmp_path, "--iterations", "2")
    assert out.count("iteration ") == 2 and "ckpt-000002.pt" in out
