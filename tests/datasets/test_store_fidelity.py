"""A dataset says in its own metadata what the stores kept: a ``store.envs`` subset, float16 observations.

Read back with Minari itself (``minari.load_dataset(...).storage.metadata``) and from LeRobot's
``meta/info.json``, so a reader learns it without rlpipe.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _dataset_runs import tiny_run
from click.testing import CliRunner

from rlpipe.cli import cli

minari = pytest.importorskip("minari")

SUBSET_FLOAT16 = {
    "complete": False,
    "stored_envs": 2,
    "num_envs": 4,
    "exact": False,
    "precision": {"obs": "float16"},
}
WHOLE = {"complete": True, "stored_envs": 4, "num_envs": 4, "exact": True, "precision": {}}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny run storing envs 0–1 of 4 with float16 observations, and one storing everything exactly."""
    base = tmp_path_factory.mktemp("fidelity")
    return {
        "low": tiny_run(base / "low", "store.envs=2", "store.precision={obs: float16}"),
        "whole": tiny_run(base / "whole"),
    }


def export(run: Path, fmt: str, out: Path) -> None:
    result = CliRunner().invoke(cli, ["dataset", str(run), "--format", fmt, "--out", str(out)])
    assert result.exit_code == 0, result.output


def minari_metadata(out: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(out))
    return minari.load_dataset("rlpipe/cartpole_ppo/rollouts-v0").storage.metadata


def test_minari_metadata_says_a_subset_in_float16(runs, tmp_path, monkeypatch):
    export(runs["low"], "minari", tmp_path / "ds")
    metadata = minari_metadata(tmp_path / "ds", monkeypatch)
    assert metadata["rlpipe_store"] == SUBSET_FLOAT16
    assert "only envs 0–1 of the 4 of each rank (store.envs)" in metadata["description"]
    assert "observations stored lower: obs as float16 (store.precision)" in metadata["description"]


def test_minari_metadata_says_whole_exact_stores_are_so(runs, tmp_path, monkeypatch):
    export(runs["whole"], "minari", tmp_path / "ds")
    metadata = minari_metadata(tmp_path / "ds", monkeypatch)
    assert metadata["rlpipe_store"] == WHOLE
    assert "store.envs" not in metadata["description"] and "float16" not in metadata["description"]


@pytest.mark.parametrize(("run", "expected"), [("low", SUBSET_FLOAT16), ("whole", WHOLE)])
def test_lerobot_info_says_what_the_stores_kept(runs, tmp_path, run, expected):
    export(runs[run], "lerobot", tmp_path / "ds")
    info = json.loads((tmp_path / "ds/meta/info.json").read_text())
    assert info["rlpipe_store"] == expected
