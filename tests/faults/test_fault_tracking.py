"""MLflow under faults: a signal ends a run KILLED, a resume reopens it, a broken store never stops it."""

from __future__ import annotations

import json

import pytest
from _fault_harness import EXP, FAST, rlpipe, run_command, run_dir, snapshot
from _offline_fixtures import PARAMS

from rlpipe import config
from rlpipe.testing import faults
from rlpipe.trainer import Trainer
from rlpipe.trainer.signals import Interrupted


@pytest.fixture
def sigterm_after_iteration_2(monkeypatch):
    monkeypatch.setattr(faults, "_SIGNAL", ("iteration.end", 2, "SIGTERM"))
    monkeypatch.setattr(faults, "_seen", {})


def test_killed_run_ends_killed_and_its_resume_continues_the_same_mlflow_run(
    tmp_path, monkeypatch, sigterm_after_iteration_2, capsys
):
    from mlflow.tracking import MlflowClient

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    cfg = config.load(
        PARAMS,
        [
            *FAST,
            f"trainer.data_dir={tmp_path}",
            f"trainer.exp_name={EXP}",
            "tracking.backend=mlflow",
            f"tracking.uri={uri}",
        ],
    )
    with pytest.raises(
        Interrupted,
        match=r"stopped by SIGTERM at the iteration boundary; checkpoint .*"
        r"ckpt-000002\.pt \(iteration 2\)",
    ):
        Trainer(cfg).train()
    root = run_dir(tmp_path)
    run_id = json.loads((root / "metrics.json").read_text())["mlflow_run_id"]
    client = MlflowClient(uri)
    assert client.get_run(run_id).info.status == "KILLED"

    monkeypatch.setattr(faults, "_SIGNAL", None)
    summary = Trainer(cfg, resume=True).train()
    assert summary["iterations"] == 4
    assert json.loads((root / "metrics.json").read_text())["mlflow_run_id"] == run_id  # the same run
    assert client.get_run(run_id).info.status == "FINISHED"
    steps = sorted({m.step for m in client.get_metric_history(run_id, "iteration")})
    assert steps == [32, 64, 96, 128]  # metrics continue on the same steps
    assert len(client.search_runs([client.get_run(run_id).info.experiment_id])) == 1

    before = snapshot(root)
    capsys.readouterr()
    again = Trainer(cfg, resume=True).train()  # nothing left to do
    assert again["iterations"] == 4 and snapshot(root) == before
    assert "is complete at iteration 4 (trainer.iterations is 4); nothing to do, no file changed" in (
        capsys.readouterr().err
    )


def test_a_broken_mlflow_store_never_stops_training(tmp_path):
    db = tmp_path / "mlflow.db"
    db.write_bytes(b"this is not an SQLite database\x00" * 64)
    result = rlpipe(
        *run_command(tmp_path, "tracking.backend=mlflow"), env={"MLFLOW_TRACKING_URI": f"sqlite:///{db}"}
    )
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if "MLflow" in line]
    assert len(warnings) == 1 and warnings[0].startswith("Warning: MLflow run not opened, training goes on")
    assert "Traceback" not in result.stderr and len(result.stderr.splitlines()) < 5
    root = run_dir(tmp_path)
    assert json.loads((root / "metrics.json").read_text())["iterations"] == 4
    assert len((root / "curve.csv").read_text().splitlines()) == 5  # header + 4 iterations
