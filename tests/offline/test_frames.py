"""`rlpipe inspect --frames`: a stored image group as PNGs (exact values) or an MP4; bad requests exit 2."""

from __future__ import annotations

import sys

import imageio_ffmpeg
import numpy as np
import pytest
from _pixel_fixtures import tiny_pixel_cfg
from click.testing import CliRunner
from matplotlib.image import imread

from rlpipe.artifacts.zarr_read import read_rollout
from rlpipe.cli import cli
from rlpipe.config import ConfigError
from rlpipe.offline.frames import frame_pictures
from rlpipe.trainer import Trainer


def invoke(*args: object, code: int = 0) -> str:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    assert result.exit_code == code, result.output
    return result.output


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """The tiny pixel run: 2 stored rollouts of 8 envs × 17 observations of 2 stacked 32×32 frames."""
    cfg = tiny_pixel_cfg(tmp_path_factory.mktemp("frames"))
    Trainer(cfg).train()
    return cfg.run_dir


def stored_pixels(run_dir, iteration: int):
    rollout, _ = read_rollout(run_dir / "rollouts" / f"iter-{iteration:06d}.zarr")
    return rollout["obs", "pixels"].numpy()  # [8, 17, 2, 32, 32]


def read_png(path) -> np.ndarray:
    """A PNG as uint8 [H, W, 4] (matplotlib reads 8-bit PNGs as value / 255)."""
    return np.round(imread(path) * 255).astype(np.uint8)


def test_one_png_per_time_step_holds_the_stored_frame_stack_side_by_side(run_dir):
    out = invoke("inspect", run_dir, "--frames", "pixels", "--env", 3, "--iteration", 1)
    folder = run_dir / "frames" / "iter-000001-pixels-env-3"
    assert out.strip() == f"17 frames of pixels (env 3, iter-000001.zarr) → {folder}"
    files = sorted(folder.iterdir())
    assert [f.name for f in files] == [f"t-{t:06d}.png" for t in range(17)]
    frames = stored_pixels(run_dir, 1)[3]
    assert frames.max() == 255 and not np.array_equal(frames[0], frames[-1])  # drawn, and moving
    for t, path in enumerate(files):
        png = read_png(path)
        side_by_side = np.concatenate([frames[t, 0], frames[t, 1]], axis=1)  # oldest frame first
        assert png.shape == (32, 64, 4) and (png[..., 3] == 255).all()
        for colour in range(3):
            np.testing.assert_array_equal(png[..., colour], side_by_side)


def test_the_first_channel_of_the_newest_rollout_and_an_mp4(run_dir, tmp_path):
    invoke("inspect", run_dir, "--frames", "pixels", "--channels", "first", "--out", tmp_path)
    files = sorted((tmp_path / "iter-000002-pixels-env-0").iterdir())
    frames = stored_pixels(run_dir, 2)[0]
    assert len(files) == 17
    np.testing.assert_array_equal(read_png(files[5])[..., 0], frames[5, 0])

    rollout = run_dir / "rollouts" / "iter-000002.zarr"  # a store given directly
    out = invoke("inspect", rollout, "--frames", "pixels", "--format", "mp4", "--out", tmp_path)
    video = tmp_path / "iter-000002-pixels-env-0.mp4"
    assert out.strip().endswith(f"→ {video}")
    reader = imageio_ffmpeg.read_frames(str(video))
    meta = next(reader)
    assert meta["size"] == (64, 32) and sum(1 for _ in reader) == 17


def test_rgb_layout_takes_each_three_channels_as_one_colour_picture():
    frames = np.arange(2 * 6 * 2 * 2, dtype=np.uint8).reshape(2, 6, 2, 2)  # [T, C, H, W]
    pictures = frame_pictures(frames, "rgb")
    assert pictures.shape == (2, 2, 4, 3)
    np.testing.assert_array_equal(pictures[1, :, :2], frames[1, 0:3].transpose(1, 2, 0))
    np.testing.assert_array_equal(pictures[1, :, 2:], frames[1, 3:6].transpose(1, 2, 0))
    with pytest.raises(ConfigError, match="--channels rgb: the frames have 4 channels"):
        frame_pictures(frames[:, :4], "rgb")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--frames", "state"],
            "--frames state: not an image group (uint8 [N, T+1, C, H, W]): it is float32 "
            "[8, 17, 4]; image groups: pixels",
        ),
        (
            ["--frames", "camera"],
            "--frames camera: no observation group 'camera' in iter-000002.zarr; image groups: pixels",
        ),
        (["--frames", "pixels", "--env", "8"], "--env: got 8; accepted: 0 to 7"),
        (["--frames", "pixels", "--iteration", "5"], "--iteration: 5 is not stored; stored: 1 to 2"),
        (["--frames", "pixels", "--channels", "rgb"], "--channels rgb: the frames have 2 channels"),
    ],
)
def test_bad_frame_requests_are_one_line_exit_2_and_write_nothing(run_dir, tmp_path, args, message):
    out = invoke("inspect", run_dir, *args, "--out", tmp_path / "frames", code=2)
    assert len(out.strip().splitlines()) == 1 and message in out, out
    assert not (tmp_path / "frames").exists()


def test_mp4_without_the_video_extra_and_frame_options_without_frames_exit_2(run_dir, tmp_path, monkeypatch):
    assert "--env: only with --frames GROUP" in invoke("inspect", run_dir, "--env", 1, code=2)
    monkeypatch.setitem(sys.modules, "imageio_ffmpeg", None)  # the package is not installed
    out = invoke("inspect", run_dir, "--frames", "pixels", "--format", "mp4", "--out", tmp_path / "f", code=2)
    assert out.strip().splitlines() == [
        "Error: rlpipe inspect --format mp4 needs imageio-ffmpeg: pip install 'rlpipe[video]'"
    ]
    assert not (tmp_path / "f").exists()
