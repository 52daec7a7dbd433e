"""Every script in examples/ runs (shortened) and does what it says."""

from __future__ import annotations

import csv
import runpy
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One SQLite MLflow store for the module: creating MLflow's schema costs seconds."""
    return f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"


@pytest.fixture
def run_example(tmp_path: Path, store: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture):
    """Run ``examples/NAME args…`` as ``python`` runs a script (``__main__``, its argv), in this process.

    Returns its stdout. The examples folder is on the path (its scripts import ``windy_cartpole``),
    and MLflow writes to :func:`store`.
    """
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    monkeypatch.chdir(ROOT)

    def run(name: str, *args: str) -> str:
        script = ROOT / "examples" / name
        monkeypatch.setattr(sys, "argv", [str(script), "--data-dir", str(tmp_path), *args])
        capsys.readouterr()
        runpy.run_path(str(script), run_name="__main__")
        return capsys.readouterr().out

    return run


def curve(tmp_path: Path, exp: str) -> list[dict[str, str]]:
    return list(csv.DictReader((tmp_path / exp / "curve.csv").open()))


def test_train_from_script_uses_its_own_env(tmp_path, run_example):
    out = run_example("train_from_script.py", "--iterations", "2")
    assert "windy CartPole: eval return" in out
    assert len(curve(tmp_path, "windy_script")) == 2
    assert (tmp_path / "windy_script" / "rollouts" / "iter-000002.zarr").is_dir()


def test_notebook_loop_iterates_metrics(tmp_path, run_example):
    out = run_example("notebook_loop.py", "--iterations", "3")
    assert "3 iterations, last training return" in out


def test_domain_randomization_changes_the_wind_every_k_iterations(tmp_path, run_example):
    run_example("domain_randomization.py", "--iterations", "4", "--every", "2")
    winds = [float(row["dr/wind"]) for row in curve(tmp_path, "windy_dr")]
    assert winds[0] == winds[1] != winds[2] == winds[3]  # a new draw after iterations 1 and 3


def test_custom_metric_reaches_mlflow(run_example, store):
    from rlpipe.tracking import metric_history

    out = run_example("custom_metric.py", "--iterations", "2")
    run_id = out.strip().split("MLflow run ")[-1].rstrip(")")
    history = metric_history(store, [run_id], "custom/pole_angle_std")
    assert len(history[run_id]) == 2 and all(v > 0 for _, v in history[run_id])


def test_step_by_step_loop(tmp_path, run_example):
    out = run_example("step_by_step.py", "--iterations", "2")
    assert out.count("iteration ") == 2 and "ckpt-000002.pt" in out
