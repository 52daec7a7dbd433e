"""The float kernels a run was made with are recorded, and a replay elsewhere says that they differ."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import torch
from _offline_fixtures import tiny_cfg

from rlpipe.artifacts.shards import read_any_attrs
from rlpipe.runtime.float_kernels import float_kernels, kernel_differences
from rlpipe.trainer import Trainer


def test_the_record_is_plain_strings_a_weights_only_checkpoint_loads():
    kernels = float_kernels()
    assert {"cpu", "cpu_isa", "blas", "torch", "aten_capability", "threads"} <= kernels.keys()
    assert all(type(v) is str for v in kernels.values())
    buffer = io.BytesIO()
    torch.save({"float_kernels": kernels}, buffer)
    buffer.seek(0)
    assert torch.load(buffer, weights_only=True)["float_kernels"] == kernels


def test_differences_name_each_changed_entry_and_nothing_else():
    recorded = {"cpu_isa": "avx2", "torch": "2.13.0", "threads": "1"}
    current = {"cpu_isa": "avx2+avx512+amx", "torch": "2.13.0", "mkl_cbwr": "AVX2"}
    assert kernel_differences(recorded, current) == [
        "cpu_isa: avx2 → avx2+avx512+amx",
        "mkl_cbwr: unset → AVX2",
        "threads: 1 → unset",
    ]
    assert kernel_differences(current, dict(current)) == []


def _replay(run_dir, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rlpipe", "replay", str(run_dir)],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        check=True,
    )


def test_a_replay_with_other_kernels_says_so_and_one_with_the_same_kernels_does_not(tmp_path):
    cfg = tiny_cfg(tmp_path / "data", "trainer.iterations=2")
    Trainer(cfg).train()
    run_dir = tmp_path / "data" / cfg.trainer.exp_name
    recorded = read_any_attrs(run_dir / "rollouts" / "iter-000001.zarr")["float_kernels"]
    assert recorded["aten_capability"] == torch.backends.cpu.get_cpu_capability().lower()

    assert "float kernels" not in _replay(run_dir).stderr
    other = _replay(run_dir, ATEN_CPU_CAPABILITY="default").stderr
    notes = [line for line in other.splitlines() if "float kernels" in line]
    assert len(notes) == 1 and "aten_capability: " in notes[0] and "bit-exact only" in notes[0]
