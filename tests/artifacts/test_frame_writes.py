"""Frames on disk: a write that fails for lack of space names the file it was writing."""

from __future__ import annotations

import errno

import matplotlib.image
import numpy as np
import pytest

from rlpipe.artifacts.frames import write_pngs
from rlpipe.cli.exits import describe


def test_a_full_disk_names_the_frame_file_and_leaves_nothing(tmp_path, monkeypatch):
    """PIL's failed ``write(2)`` names no file (as a full disk or ``ulimit -f`` give it)."""
    written = []

    def full_after_one(path, frame, format):  # noqa: A002  # imsave's keyword
        if written:
            raise OSError(errno.ENOSPC, "No space left on device")
        written.append(path)

    monkeypatch.setattr(matplotlib.image, "imsave", full_after_one)
    frames = np.zeros((3, 8, 8, 3), dtype=np.uint8)
    with pytest.raises(OSError) as info:
        write_pngs(frames, tmp_path / "frames")
    code, line = describe(info.value)
    assert code == 1
    assert line == (
        f"{tmp_path / 'frames' / 't-000001.png'}: No space left on device — the disk is full: "
        "free space, then retry"
    )
    assert list((tmp_path / "frames").iterdir()) == []
