"""``rlpipe dataset --out``: refused before anything is exported when it cannot be a new folder outside
run directories; temporaries of killed exports are cleaned by the next export, live ones kept."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from _dataset_runs import tiny_run
from click.testing import CliRunner

from rlpipe.cli import cli


def invoke(run: Path | str, out: Path | str) -> tuple[int, list[str]]:
    result = CliRunner().invoke(cli, ["dataset", str(run), "--format", "minari", "--out", str(out)])
    return result.exit_code, result.output.strip().splitlines()


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_run(tmp_path_factory.mktemp("runs"))


def test_a_dangling_link_is_refused_naming_out_before_the_run_is_read(tmp_path):
    folder = tmp_path / "ds"
    folder.mkdir()
    out = folder / "dangling"
    out.symlink_to(tmp_path / "nowhere")
    code, lines = invoke(tmp_path / "no-run-here", out)  # refused before the run is even looked at
    assert (code, lines) == (
        2,
        [
            f"Error: --out: {out} is a symbolic link to {tmp_path / 'nowhere'}, which does not exist; "
            "give a new folder (a dataset is written once)"
        ],
    )
    assert sorted(p.name for p in folder.iterdir()) == ["dangling"] and not (tmp_path / "nowhere").exists()


def test_a_dangling_link_is_refused_with_a_real_run_and_nothing_exported(run, tmp_path):
    out = tmp_path / "dangling"
    out.symlink_to(tmp_path / "nowhere")
    code, lines = invoke(run, out)
    assert code == 2 and lines[0].startswith(f"Error: --out: {out} is a symbolic link"), lines
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling"]


def test_an_out_below_a_file_is_refused_naming_out(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    code, lines = invoke(tmp_path / "run", tmp_path / "notes.txt" / "sub" / "ds")
    assert (code, lines) == (
        2,
        [
            f"Error: --out: {tmp_path / 'notes.txt'} is not a folder (a file, or a link to none); give a "
            "new folder (a dataset is written once)"
        ],
    )


@pytest.mark.parametrize("inside", ["export/ds", "datasets/ds", "rollouts/ds"])
def test_an_out_inside_a_run_directory_is_refused(run, inside):
    out = run / inside
    parent_existed = out.parent.exists()
    code, lines = invoke(run, out)
    assert (code, lines) == (
        2,
        [
            f"Error: --out: {out} is inside the run directory {run}, where it can go with the run "
            "(--overwrite, rlpipe gc); give a folder outside run directories"
        ],
    )
    assert not out.exists() and out.parent.exists() == parent_existed


def test_an_out_reaching_a_run_directory_through_a_link_is_refused(run, tmp_path):
    (tmp_path / "link").symlink_to(run)
    code, lines = invoke(run, tmp_path / "link" / "ds")
    assert code == 2 and f"is inside the run directory {run}," in lines[0], lines
    assert not (run / "ds").exists()


@pytest.fixture
def pids() -> Iterator[tuple[int, int]]:
    """``(dead, live)``: the pid of a process that has exited, and of one still running."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    live = subprocess.Popen(["sleep", "60"])
    try:
        yield dead.pid, live.pid
    finally:
        live.kill()
        live.wait()


def temporary(folder: Path, name: str, pid: int) -> Path:
    """A hidden temporary of ``name`` as an export of process ``pid`` leaves it, holding one file."""
    path = folder / f".{name}.tmp-{pid}-0badf00d"
    (path / "rlpipe" / "data").mkdir(parents=True)
    (path / "rlpipe" / "data" / "main_data.hdf5").write_bytes(os.urandom(1024))
    return path


def test_the_next_export_cleans_a_killed_exports_temporary_and_keeps_a_live_ones(run, tmp_path, pids):
    dead, live = pids
    killed = temporary(tmp_path, "out", dead)
    running = temporary(tmp_path, "out", live)
    another = temporary(tmp_path, "other", dead)  # not a temporary of this --out: not this export's to judge
    code, lines = invoke(run, tmp_path / "out")
    assert code == 0, lines
    assert not killed.exists()
    assert running.exists() and another.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([running.name, another.name, "out"])
