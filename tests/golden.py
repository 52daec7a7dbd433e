"""Fingerprints of a run directory, to check that a refactor reproduces a recorded run bit for bit.

A fingerprint is a JSON-able dict: the SHA-256 of every tensor of every checkpoint (``policy``,
``algo`` and ``collector`` entries, plus the counters), of every array of every stored rollout, and
the non-timing columns of ``curve.csv``. Wall-clock values (``wall_s``, ``time/…``) are left out.

Record the fixture with ``python tests/golden.py record`` (only on purpose: it replaces the
reference every later change is held to).
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch

FIXTURE = Path(__file__).parent / "fixtures" / "golden_cartpole.json"
CHECKPOINT_ENTRIES = ("iteration", "env_steps", "policy", "algo", "collector")


def _digest(array: np.ndarray) -> str:
    array = np.ascontiguousarray(array)
    return hashlib.sha256(f"{array.dtype}{array.shape}".encode() + array.tobytes()).hexdigest()[:24]


def _flatten(value: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(value, torch.Tensor):
        out[prefix] = _digest(value.detach().cpu().numpy())
    elif isinstance(value, dict):
        for key in sorted(value, key=str):
            _flatten(value[key], f"{prefix}/{key}", out)
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _flatten(item, f"{prefix}/{i}", out)
    elif isinstance(value, float | int | bool | str) or value is None:
        out[prefix] = value


def checkpoint_fingerprint(path: Path) -> dict[str, Any]:
    """Hashes of a checkpoint's training state (weights, optimizer, collector, counters)."""
    state = torch.load(path, weights_only=True, map_location="cpu")
    out: dict[str, Any] = {}
    for entry in CHECKPOINT_ENTRIES:
        if entry in state:  # replay checkpoints hold no collector
            _flatten(state[entry], entry, out)
    return out


def rollout_fingerprint(path: Path) -> dict[str, str]:
    """Hashes of every array of one stored rollout group."""
    import zarr

    group = zarr.open_group(str(path), mode="r")
    out: dict[str, str] = {}

    def visit(node: Any, prefix: str) -> None:
        for name, member in sorted(node.members()):
            if isinstance(member, zarr.Group):
                visit(member, f"{prefix}{name}/")
            else:
                out[f"{prefix}{name}"] = _digest(member[...])

    visit(group, "")
    return out


def curve_rows(path: Path) -> list[dict[str, str]]:
    """``curve.csv`` without its wall-clock columns."""
    with open(path, newline="") as f:
        return [{k: v for k, v in row.items() if not k.startswith("time/")} for row in csv.DictReader(f)]


def run_fingerprint(run_dir: Path) -> dict[str, Any]:
    """The fingerprint of a run dir after ``rlpipe run`` and ``rlpipe replay``."""
    run_dir = Path(run_dir)
    return {
        "checkpoints": {
            p.name: checkpoint_fingerprint(p) for p in sorted((run_dir / "checkpoints").glob("ckpt-*.pt"))
        },
        "rollouts": {
            p.name: rollout_fingerprint(p) for p in sorted((run_dir / "rollouts").glob("iter-*.zarr"))
        },
        "curve": curve_rows(run_dir / "curve.csv"),
        "replay_checkpoints": {
            p.name: checkpoint_fingerprint(p)
            for p in sorted((run_dir / "reupdate" / "checkpoints").glob("ckpt-*.pt"))
        },
        "replay_curve": curve_rows(run_dir / "reupdate" / "curve.csv"),
    }


def run_default(workdir: Path, params: Path, env: dict[str, str] | None = None) -> Path:
    """``rlpipe run params.yaml`` then ``rlpipe replay`` of it in ``workdir`` (tracking off); the run dir.

    ``env``: environment variables set for both commands, on top of this process's environment.
    """
    rlpipe = [sys.executable, "-m", "rlpipe"]
    for args in (
        ["run", str(params), "--set", "tracking.backend=none", "--set", "trainer.data_dir=data"],
        ["replay", "data/cartpole_ppo"],
    ):
        subprocess.run(
            [*rlpipe, *args],
            cwd=workdir,
            check=True,
            capture_output=True,
            text=True,
            env={**os.environ, **(env or {})},
        )
    return workdir / "data" / "cartpole_ppo"


if __name__ == "__main__" and sys.argv[1:] == ["record"]:
    import tempfile

    repo = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = run_default(Path(tmp), repo / "params.yaml")
        FIXTURE.parent.mkdir(exist_ok=True)
        FIXTURE.write_text(json.dumps(run_fingerprint(run_dir), indent=1, sort_keys=True) + "\n")
    print(f"recorded {FIXTURE}")
