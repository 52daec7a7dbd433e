"""benchmarks/peers/envpool_loop.py at a tiny N: both sides run, the ratios and the breakdown are written.

The timed run is the script's ``main`` in this process (torch and rlpipe already loaded) with
``--no-mlflow``: no tracking process to start and wait for; that the benchmark's default keeps
MLflow on is checked on the overrides it builds.
"""

from __future__ import annotations

import importlib.util
import json
import statistics
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

pytest.importorskip("envpool")

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "peers" / "envpool_loop.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("envpool_loop", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_benchmark_times_both_loops_and_writes_ratios_breakdown_and_profile(
    bench: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
):
    out = tmp_path / "result.json"
    argv = [
        str(SCRIPT),
        "--ids",
        "HalfCheetah-v5",
        "--num-envs",
        "4",
        "--horizon",
        "8",
        "--epochs",
        "1",
        "--minibatches",
        "2",
        "--hidden",
        "16",
        "--warmup",
        "1",
        "--rounds",
        "2",
        "--iterations",
        "1",
        "--profile-top",
        "5",
        "--no-mlflow",
        "--json",
        str(out),
    ]
    monkeypatch.setattr(sys, "argv", argv)
    wrapped = (bench.store_module, "_write_checked"), (bench.envpool_module, "obs_to_torch")
    originals = [getattr(owner, name) for owner, name in wrapped]
    threads = torch.get_num_threads()
    try:
        bench.main()
    finally:
        torch.set_num_threads(threads)
    assert [getattr(owner, name) for owner, name in wrapped] == originals  # the breakdown put them back
    stdout = capsys.readouterr().out
    data = json.loads(out.read_text())
    assert data["benchmark"] == "envpool_loop" and data["args"]["no_mlflow"] == "True"
    assert data["workload"]["hidden"] == [16] and data["workload"]["num_envs"] == 4
    [row] = data["rows"]
    assert (row["id"], row["num_envs"], row["horizon"]) == ("HalfCheetah-v5", 4, 8)
    for side in ("plain", "rlpipe"):
        assert len(row["rounds"][side]) == 2
        assert row[f"{side}_sps_wall"] > 0 and row[f"{side}_sps_cpu"] > 0
        assert row[f"{side}_sps_wall"] == pytest.approx(
            statistics.median(4 * 8 / r["wall_s"] for r in row["rounds"][side])
        )  # env steps of one iteration per round
        assert row[f"{side}_collect_s"] > 0 and row[f"{side}_update_s"] > 0
    assert all(r["tracking_cpu_s"] == 0 for r in row["rounds"]["rlpipe"])  # no MLflow process to charge
    plain, rlpipe = row["rounds"]["plain"], row["rounds"]["rlpipe"]
    for unit in ("wall", "cpu"):  # env steps/s of rlpipe over plain: the median of two per-round ratios
        pairs = [p[f"{unit}_s"] / r[f"{unit}_s"] for p, r in zip(plain, rlpipe)]
        assert row[f"ratio_{unit}"] == pytest.approx(sum(pairs) / 2)
    phases = {(r["side"], r["phase"]) for r in row["breakdown"]}
    for side in ("plain", "rlpipe"):
        assert (side, "collect: env step (envpool send, recv, reset)") in phases
        assert (side, "update: optimizer step") in phases
        assert (side, "= the iteration (process)") in phases
    assert ("rlpipe", "store: submit (checks, host copy, attrs)") in phases
    assert ("rlpipe", "tracking (console row, curve.csv, MLflow queue)") in phases
    writer = "+ the store writer process (Zarr write; wall: the hand-over's wait)"  # store.writer: auto
    assert ("rlpipe", writer) in phases
    [written] = [r for r in row["breakdown"] if r["phase"] == writer]
    assert written["cpu_ms"] >= 0 and written["wall_ms"] > 0  # its CPU: read by pid, in clock ticks
    assert not any("MLflow tracking process" in phase for _, phase in phases)  # there is none
    timed = [r for r in row["breakdown"] if r["phase"].startswith(("collect", "update", "advantage"))]
    assert all(r["cpu_ms"] >= 0 and r["wall_ms"] >= 0 for r in timed)  # exclusive: nested calls subtracted
    assert len(row["profile"]) == 5 and all(p["own_ms"] >= 0 and p["calls"] > 0 for p in row["profile"])
    assert "wall ratio" in stdout and "CPU ratio" in stdout and "MLflow off" in stdout


def test_the_benchmark_keeps_mlflow_on_unless_told(
    bench: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    monkeypatch.setattr(sys, "argv", [str(SCRIPT)])
    assert bench.parse_args().no_mlflow is False
    w = bench.Workload(num_envs=4, horizon=8, epochs=1, minibatches=2, hidden=(16,))
    on = bench.load_cfg(
        bench.DEFAULT_PARAMS, bench.rlpipe_overrides("HalfCheetah-v5", w, str(tmp_path), None)
    )
    assert on.tracking.backend == "mlflow" and on.tracking.uri == f"sqlite:///{tmp_path}/mlflow.db"
    assert on.store.enabled and on.env.backend == "envpool" and on.trainer.num_envs == 4
    off = bench.load_cfg(
        bench.DEFAULT_PARAMS, bench.rlpipe_overrides("HalfCheetah-v5", w, str(tmp_path), None, mlflow=False)
    )
    assert off.tracking.backend == "none" and off.store.enabled
    assert on.model_dump(exclude={"tracking"}) == off.model_dump(exclude={"tracking"})  # only MLflow differs
