"""The run-directory layout and the atomic writers every artifact goes through."""

from __future__ import annotations

import os

from rlpipe.artifacts.atomic import atomic_write_json, publish_dir, temporary_sibling
from rlpipe.artifacts.layout import CHECKPOINT_NAME, RunLayout, iteration_from_name, numbered
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
