"""benchmarks/peers/envpool_loop.py at a tiny N: both sides run, the ratios and the breakdown are written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("envpool")

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "peers" / "envpool_loop.py"


def test_the_benchmark_times_both_loops_and_writes_ratios_breakdown_and_profile(tmp_path: Path):
    out = tmp_path / "result.json"
    command = [sys.executable, str(SCRIPT), "--ids", "HalfCheetah-v5", "--num-envs", "4", "--horizon", "8",
               "--epochs", "1", "--minibatches", "2", "--hidden", "16", "--warmup", "1", "--rounds", "2",
               "--iterations", "1", "--profile-top", "5", "--json", str(out)]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "RLPIPE_LOAD_WARNING": "0"})
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(out.read_text())
    assert data["benchmark"] == "envpool_loop"
    assert data["workload"]["hidden"] == [16] and data["workload"]["num_envs"] == 4
    [row] = data["rows"]
    assert (row["id"], row["num_envs"], row["horizon"]) == ("HalfCheetah-v5", 4, 8)
    for side in ("plain", "rlpipe"):
        assert len(row["rounds"][side]) == 2
        assert row[f"{side}_sps_wall"] > 0 and row[f"{side}_sps_cpu"] > 0
        assert row[f"{side}_collect_s"] > 0 and row[f"{side}_update_s"] > 0
    assert all(r["tracking_cpu_s"] >= 0 for r in row["rounds"]["rlpipe"])
    pairs = [p["wall_s"] / r["wall_s"] for p, r in zip(row["rounds"]["plain"], row["rounds"]["rlpipe"])]
    assert row["ratio_wall"] == pytest.approx(sum(pairs) / 2)  # the median of two per-round ratios
    assert row["ratio_cpu"] > 0
    phases = {(r["side"], r["phase"]) for r in row["breakdown"]}
    for side in ("plain", "rlpipe"):
        assert (side, "collect: env step (envpool send, recv, reset)") in phases
        assert (side, "update: optimizer step") in phases
        assert (side, "= the iteration (process)") in phases
    assert ("rlpipe", "store: submit (checks, host copy, attrs)") in phases
    assert ("rlpipe", "tracking (console row, curve.csv, MLflow queue)") in phases
    assert len(row["profile"]) == 5 and all(p["own_ms"] >= 0 and p["calls"] > 0 for p in row["profile"])
    assert "wall ratio" in result.stdout and "CPU ratio" in result.stdout
