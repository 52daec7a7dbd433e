"""Fingerprints of a run directory: what is bit-exact on one machine, and what holds on any CPU.

A fingerprint (:func:`run_fingerprint`) is a JSON-able dict: the SHA-256 of every tensor of every
checkpoint (``policy``, ``algo`` and ``collector`` entries, plus the counters), of every array of
every stored rollout, and the non-timing columns of ``curve.csv``. It is bit-exact only between
runs on one machine and torch build (``docs/determinism.md``): tests compare two fingerprints made
in the same test.

The committed fixture holds only what no CPU changes (:func:`machine_independent`): the first
rollout's env-side arrays (collected by the seeded initial weights; the policy's float outputs
differ in the last bits between CPUs), statistics of its policy outputs and the first update's
metrics (compared to a tolerance), the arrays' names, dtypes and shapes, and whether the run is
solved. ``python tests/golden.py record`` rewrites it (only on purpose).

For a refactor that must keep a run bit for bit on your machine: ``python tests/golden.py record
--local`` before the change writes the whole fingerprint to ``.golden/`` (ignored by git), and
``python tests/golden.py check`` after it names the first entry that differs.
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


def _arrays(path: Path, describe: Any) -> dict[str, Any]:
    """``describe(array)`` of every array of a rollout group, keyed ``name`` or ``group/name``."""
    import zarr

    out: dict[str, Any] = {}

    def visit(node: Any, prefix: str) -> None:
        for name, member in sorted(node.members()):
            if isinstance(member, zarr.Group):
                visit(member, f"{prefix}{name}/")
            else:
                out[f"{prefix}{name}"] = describe(member)

    visit(zarr.open_group(str(path), mode="r"), "")
    return out


def rollout_fingerprint(path: Path) -> dict[str, str]:
    """Hashes of every array of one stored rollout group."""
    return _arrays(path, lambda array: _digest(array[...]))


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


POLICY_OUTPUTS = ("sample_log_prob", "value", "final_value")
"""Rollout arrays computed by the policy's float kernels (CPU-dependent in the last bits)."""


def _stats(array: np.ndarray) -> list[float]:
    """``[mean, std, min, max]`` in float64: a policy output compared to a tolerance."""
    a = np.asarray(array, dtype=np.float64)
    return [float(a.mean()), float(a.std()), float(a.min()), float(a.max())]


def _layout(path: Path) -> dict[str, str]:
    """``name: dtype shape`` of every array of a rollout group."""
    return _arrays(path, lambda array: f"{array.dtype} {list(array.shape)}")


def machine_independent(run_dir: Path) -> dict[str, Any]:
    """What a run of the default params gives on any x86-64 CPU (the committed fixture's content)."""
    import zarr

    run_dir = Path(run_dir)
    first = run_dir / "rollouts" / "iter-000001.zarr"
    hashes = rollout_fingerprint(first)
    group = zarr.open_group(str(first), mode="r")
    curve = curve_rows(run_dir / "curve.csv")
    summary = json.loads((run_dir / "metrics.json").read_text())
    checkpoint = sorted((run_dir / "checkpoints").glob("ckpt-*.pt"))[-1]
    return {
        "rollout_1_env": {k: v for k, v in hashes.items() if k not in POLICY_OUTPUTS},
        "rollout_1_policy_stats": {k: _stats(group[k][...]) for k in POLICY_OUTPUTS},
        "first_update": {k: float(v) for k, v in curve[0].items() if k.startswith("update/")},
        "rollout_layout": _layout(first),
        "checkpoint_entries": sorted(checkpoint_fingerprint(checkpoint)),
        "solved": summary.get("stopped_by") is not None and summary["eval/return_mean"] >= 475,
    }


LOCAL = Path(__file__).resolve().parents[1] / ".golden" / "cartpole.json"
"""The whole fingerprint of a run on this machine (``record --local``), for a refactor's ``check``."""


def _record(local: bool) -> None:
    import tempfile

    repo = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = run_default(Path(tmp), repo / "params.yaml")
        if local:
            LOCAL.parent.mkdir(exist_ok=True)
            LOCAL.write_text(json.dumps(run_fingerprint(run_dir), indent=1, sort_keys=True) + "\n")
            print(f"recorded {LOCAL}")
            return
        from rlpipe.runtime.float_kernels import float_kernels

        record = {**machine_independent(run_dir), "recorded_with": float_kernels()}
        FIXTURE.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
        print(f"recorded {FIXTURE}")


def _check() -> int:
    import tempfile

    repo = Path(__file__).resolve().parents[1]
    expected = json.loads(LOCAL.read_text())
    with tempfile.TemporaryDirectory() as tmp:
        got = json.loads(json.dumps(run_fingerprint(run_default(Path(tmp), repo / "params.yaml"))))
    differing = [
        f"{section}/{key}"
        for section in sorted(expected)
        for key in (sorted(expected[section]) if isinstance(expected[section], dict) else [""])
        if (expected[section].get(key) if key else expected[section])
        != (got.get(section, {}).get(key) if key else got.get(section))
    ]
    print("bit for bit as recorded" if not differing else f"differs from {LOCAL}: {differing[:5]}")
    return 1 if differing else 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["record"]:
        _record(local=sys.argv[2:] == ["--local"])
    elif sys.argv[1:] == ["check"]:
        sys.exit(_check())
    else:
        sys.exit("usage: python tests/golden.py record [--local] | check")
