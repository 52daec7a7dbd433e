"""The run-directory layout and the atomic writers every artifact goes through."""

from __future__ import annotations

import os

from rlpipe.artifacts.atomic import atomic_write_json, publish_dir, temporary_sibling, unpublishable
from rlpipe.artifacts.layout import (
    CHECKPOINT_NAME,
    RunLayout,
    enclosing_run_dir,
    iteration_from_name,
    numbered,
)
from rlpipe.artifacts.removal import clean_temporaries


def test_layout_names_and_listing(tmp_path):
    layout = RunLayout(tmp_path / "exp")
    assert layout.rollout(12).name == "iter-000012.zarr" and layout.checkpoint(3).name == "ckpt-000003.pt"
    layout.checkpoints.mkdir(parents=True)
    for k in (10, 2):
        layout.checkpoint(k).write_bytes(b"x")
    (layout.checkpoints / "latest").write_text("ckpt-000010.pt")
    assert list(layout.checkpoint_paths()) == [2, 10]
    assert numbered(layout.checkpoints, CHECKPOINT_NAME)[10] == layout.checkpoint(10)
    assert iteration_from_name("iter-000007.zarr") == 7 and iteration_from_name("other") is None
    assert layout.holds_run() and not RunLayout(tmp_path / "none").holds_run()


def test_atomic_json_leaves_no_temporary_and_dead_temporaries_are_cleaned(tmp_path):
    atomic_write_json(tmp_path / "m.json", {"a": 1})
    assert (tmp_path / "m.json").read_text() == '{\n  "a": 1\n}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["m.json"]
    dead = tmp_path / ".ckpt-000001.pt.tmp-999999999-abcd1234"
    dead.write_bytes(b"partial")
    live = tmp_path / f".ckpt-000002.pt.tmp-{os.getppid()}-abcd1234"
    live.write_bytes(b"being written")
    assert clean_temporaries(tmp_path) == [dead]
    assert live.exists()


def test_publish_dir_never_overwrites_unless_asked(tmp_path):
    final = tmp_path / "group"
    for content in ("first", "second"):
        tmp = temporary_sibling(final)
        tmp.mkdir()
        (tmp / "f").write_text(content)
        publish_dir(tmp, final, replace=content == "second")
    assert (final / "f").read_text() == "second"
    tmp = temporary_sibling(final)
    tmp.mkdir()
    try:
        publish_dir(tmp, final)
    except FileExistsError as exc:
        assert "written once" in str(exc)
    else:
        raise AssertionError("publish_dir replaced an existing folder")


def test_the_run_directory_a_path_lies_in_is_found_through_links(tmp_path):
    project = tmp_path / "project"
    run = project / "data" / "exp"
    (project / "checkpoints").mkdir(parents=True)  # a project's own folder of that name: no run
    (project / "params.yaml").write_text("{}")
    assert enclosing_run_dir(project / "data" / "datasets" / "ds") is None
    (run / "checkpoints").mkdir(parents=True)
    (run / "params.yaml").write_text("{}")
    assert enclosing_run_dir(run / "export" / "ds") is None  # no checkpoint yet
    (run / "checkpoints" / "ckpt-000001.pt").write_bytes(b"x")
    assert enclosing_run_dir(run / "export" / "ds") == run
    (tmp_path / "link").symlink_to(run)
    assert enclosing_run_dir(tmp_path / "link" / "ds") == run
    assert enclosing_run_dir(run) is None  # the run dir itself is not inside one


def test_unpublishable_says_why_a_new_folder_cannot_be_put_there(tmp_path):
    assert unpublishable(tmp_path / "a" / "b") is None
    (tmp_path / "file").write_text("x")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    assert unpublishable(tmp_path / "file") == f"{tmp_path / 'file'} already exists"
    assert unpublishable(tmp_path / "dangling") == (
        f"{tmp_path / 'dangling'} is a symbolic link to {tmp_path / 'nowhere'}, which does not exist"
    )
    assert unpublishable(tmp_path / "file" / "x" / "y") == (
        f"{tmp_path / 'file'} is not a folder (a file, or a link to none)"
    )
    assert unpublishable(tmp_path / "dangling" / "x") == (
        f"{tmp_path / 'dangling'} is not a folder (a file, or a link to none)"
    )
