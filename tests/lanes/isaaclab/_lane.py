"""What the Isaac Lab lane's tests share: running rlpipe in a fresh process, and the checks on a run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from _offline_fixtures import assert_same_learner

ROOT = Path(__file__).resolve().parents[3]
TASK = "Isaac-Cartpole"
NUM_ENVS = 16
TIMEOUT_S = 1800
"""Per process: a cold Warp kernel cache costs minutes on a 2-core machine."""


def run(*args: str | Path | int, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``python args…`` in a fresh process (Isaac Lab: one simulation per process); it must succeed."""
    result = subprocess.run(
        [sys.executable, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        cwd=cwd,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    return result


def assert_every_rollout_stored(run_dir: Path, iterations: int) -> None:
    """One ``iter-NNNNNN.zarr`` per iteration, none missing."""
    stored = sorted(p.name for p in (run_dir / "rollouts").glob("iter-*.zarr"))
    assert stored == [f"iter-{k:06d}.zarr" for k in range(1, iterations + 1)], stored


def assert_replay_bit_exact(run_dir: Path, out: Path) -> None:
    """``rlpipe replay`` of the run: each checkpoint the online run kept is matched bit for bit."""
    run("-m", "rlpipe", "replay", run_dir, "--out", out)
    online = sorted((run_dir / "checkpoints").glob("ckpt-*.pt"))
    assert online, f"the run kept no checkpoint under {run_dir}"
    for checkpoint in online:
        assert_same_learner(out / "checkpoints" / checkpoint.name, checkpoint)


def assert_mlflow_run(uri: str, metric: str = "update/policy_loss") -> None:
    """A finished MLflow run at ``uri`` holding ``metric`` (``rlpipe replay`` adds a run of its own)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    runs = [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])]
    finished = [r for r in runs if r.info.status == "FINISHED" and metric in r.data.metrics]
    assert finished, [(r.info.run_id, r.info.status, sorted(r.data.metrics)) for r in runs]
