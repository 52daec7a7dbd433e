"""rlpipe.artifacts.removal: a delete stays inside its folder and never goes through a symbolic link."""

from __future__ import annotations

import pytest

from rlpipe.artifacts.checkpoints import Checkpointer
from rlpipe.artifacts.removal import UnsafeRemoval, clean_temporaries, delete, output_folder, set_aside
from rlpipe.artifacts.store import RolloutStore
from rlpipe.config import StoreCfg


@pytest.fixture
def outside(tmp_path):
    """A folder outside the run dir holding someone's file."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "precious").write_text("not rlpipe's")
    return folder


def test_a_link_is_unlinked_never_followed(tmp_path, outside):
    run = tmp_path / "run"
    run.mkdir()
    (run / "eval").symlink_to(outside, target_is_directory=True)
    (run / "metrics.json").symlink_to(outside / "precious")
    delete(run / "eval", within=run)
    delete(run / "metrics.json", within=run)
    assert list(run.iterdir()) == [] and (outside / "precious").read_text() == "not rlpipe's"


def test_a_folder_goes_whole_and_links_inside_it_are_not_followed(tmp_path, outside):
    group = tmp_path / "run" / "rollouts" / "iter-000001.zarr"
    group.mkdir(parents=True)
    (group / "zarr.json").write_text("{}")
    (group / "obs").symlink_to(outside, target_is_directory=True)
    delete(group, within=tmp_path / "run")
    assert list(group.parent.iterdir()) == [] and (outside / "precious").is_file()


def test_a_path_through_a_link_or_outside_its_folder_is_refused(tmp_path, outside):
    run = tmp_path / "run"
    run.mkdir()
    (run / "rollouts").symlink_to(outside, target_is_directory=True)
    with pytest.raises(
        UnsafeRemoval,
        match=r"run/rollouts/precious: reached through the symbolic link .*"
        r"run/rollouts \(→ .*outside\); rlpipe never deletes through a "
        r"link",
    ):
        delete(run / "rollouts" / "precious", within=run)
    for escaping in (run / ".." / "outside" / "precious", run):
        with pytest.raises(UnsafeRemoval, match="not inside"):
            delete(escaping, within=run)
    assert (outside / "precious").is_file()
    with pytest.raises(FileNotFoundError):
        delete(run / "missing", within=run)
    delete(run / "missing", within=run, missing_ok=True)


def test_a_temporary_that_is_a_link_is_unlinked(tmp_path, outside):
    leftover = tmp_path / ".iter-000001.zarr.tmp-999999999-0a0b0c0d"
    leftover.symlink_to(outside, target_is_directory=True)
    assert clean_temporaries(tmp_path) == [leftover]
    assert not leftover.is_symlink() and (outside / "precious").is_file()


def test_retention_through_a_linked_folder_is_refused_before_any_write(tmp_path, outside):
    run = tmp_path / "run"
    run.mkdir()
    for name in ("rollouts", "checkpoints"):
        (run / name).symlink_to(outside, target_is_directory=True)
    with pytest.raises(UnsafeRemoval, match="rollouts/iter-000000.zarr: reached through the symbolic link"):
        RolloutStore(run / "rollouts", StoreCfg(keep_last=2))
    with pytest.raises(UnsafeRemoval, match="checkpoints/ckpt-000000.pt: reached through the symbolic link"):
        Checkpointer(run / "checkpoints", keep_last=2)
    RolloutStore(run / "rollouts", StoreCfg()).close()  # without retention nothing is deleted: allowed
    assert sorted(p.name for p in outside.iterdir()) == ["precious"]


def test_set_aside_moves_never_through_a_link(tmp_path, outside):
    run = tmp_path / "run"
    (run / "rollouts" / "iter-000001.zarr").mkdir(parents=True)
    (run / "rollouts" / "iter-000001.zarr" / "zarr.json").write_text("{}")
    set_aside([run / "rollouts" / "iter-000001.zarr"], run / "rollouts" / "superseded-1", within=run)
    assert (run / "rollouts" / "superseded-1" / "iter-000001.zarr" / "zarr.json").read_text() == "{}"
    (run / "linked").symlink_to(outside, target_is_directory=True)
    with pytest.raises(UnsafeRemoval, match="symbolic link"):
        set_aside([run / "rollouts" / "superseded-1"], run / "linked" / "aside", within=run)
    assert (run / "rollouts" / "superseded-1").is_dir() and list(outside.iterdir()) == [outside / "precious"]


def test_an_output_folder_a_failed_command_left_empty_is_taken_back(tmp_path):
    with pytest.raises(RuntimeError), output_folder(tmp_path / "new" / "out"):
        assert (tmp_path / "new" / "out").is_dir()
        raise RuntimeError("refused")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(RuntimeError), output_folder(tmp_path / "kept" / "out"):
        (tmp_path / "kept" / "out" / "ckpt-000001.pt").write_text("written before the failure")
        raise RuntimeError("failed later")
    assert (tmp_path / "kept" / "out" / "ckpt-000001.pt").is_file()  # output is never taken back
