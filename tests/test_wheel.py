"""The wheel alone: built from this tree, installed into a fresh venv with the core dependencies only.

From a folder outside the repository the installed ``rlpipe run params.yaml`` solves the default
CartPole, and a feature whose extra is missing stops with its one line (exit 2, nothing written).
Pip's cache makes the second run quick; the first downloads the core dependencies once.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
import venv
import zipfile
from pathlib import Path

import pytest

from rlpipe.config.extras import EXTRAS

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("pyproject.toml", "README.md", "rlpipe")
"""What the wheel is built from (copied, so the build writes nothing into the checkout)."""
MISSING = {
    "env.id=HalfCheetah-v5": "env.id: HalfCheetah-v5 needs envpool: pip install 'rlpipe[envpool]'",
    "trainer.data_dir=s3://bucket/runs":
        "params.yaml: trainer.data_dir: s3://bucket/runs needs s3fs: pip install 'rlpipe[s3]'",
}
"""``--set`` of a feature whose extra the core install lacks → the one line it must print."""

pytestmark = [pytest.mark.wheel, pytest.mark.timeout(1800)]


def run(args: list[str | Path], cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "MLFLOW_TRACKING_URI") and not k.startswith("DVC_")}
    result = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True,
                            timeout=1200)
    if check:
        assert result.returncode == 0, f"{args}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def tracked_sources(dest: Path) -> None:
    """Copy the files of :data:`SOURCES` git would commit (tracked, or untracked and not ignored)."""
    listed = run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", *SOURCES], ROOT)
    for rel in filter(None, listed.stdout.split("\0")):
        if (ROOT / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, dest / rel)


def build_wheel(tmp_path: Path) -> Path:
    source, dist = tmp_path / "source", tmp_path / "dist"
    tracked_sources(source)
    isolation = [] if importlib.util.find_spec("setuptools") is None else ["--no-isolation"]
    run([sys.executable, "-m", "build", "--wheel", *isolation, "--outdir", dist, source], tmp_path)
    (wheel,) = dist.glob("rlpipe-*.whl")
    return wheel


def test_the_wheel_alone_trains_cartpole_outside_the_repo_and_names_missing_extras(tmp_path):
    started = time.perf_counter()
    wheel = build_wheel(tmp_path)
    assert "rlpipe/envs/envpool_ids.txt" in zipfile.ZipFile(wheel).namelist()  # package data ships
    built = time.perf_counter()

    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python, rlpipe = env_dir / "bin" / "python", env_dir / "bin" / "rlpipe"
    pip = [python, "-m", "pip", "install", "-q", "--no-compile", "--disable-pip-version-check"]
    run([*pip, "torch==2.13.0"], tmp_path)
    run([*pip, "-c", ROOT / "constraints.txt", wheel], tmp_path)
    installed = time.perf_counter()

    probe = f"import importlib.util as u, rlpipe; print(rlpipe.__file__); " \
            f"print([m for m in {sorted(EXTRAS)!r} if u.find_spec(m)])"
    where, extras = run([python, "-c", probe], tmp_path).stdout.splitlines()
    assert Path(where).is_relative_to(env_dir) and extras == "[]"  # the wheel's rlpipe, no extra installed

    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copy2(ROOT / "params.yaml", outside / "params.yaml")
    run([rlpipe, "run", "params.yaml"], outside)
    metrics = json.loads((outside / "data" / "cartpole_ppo" / "metrics.json").read_text())
    assert metrics["stopped_by"].startswith("eval/return_mean >= 475") and metrics["eval/return_mean"] >= 475
    trained = time.perf_counter()

    before = sorted(p.relative_to(outside) for p in outside.rglob("*"))
    for override, line in MISSING.items():
        result = run([rlpipe, "run", "params.yaml", "--set", override, "--set", "trainer.exp_name=other"],
                     outside, check=False)
        last = result.stderr.strip().splitlines()[-1]
        assert (result.returncode, last) == (2, f"Error: {line}"), result.stderr
    assert sorted(p.relative_to(outside) for p in outside.rglob("*")) == before  # nothing written
    print(f"wheel {built - started:.0f} s, install {installed - built:.0f} s, "
          f"train {trained - installed:.0f} s, missing extras {time.perf_counter() - trained:.0f} s")
