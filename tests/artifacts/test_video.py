"""Eval videos on disk: the MP4 writer (atomic, padded) and the recorder (tiles, freezing, failures)."""

from __future__ import annotations

from pathlib import Path

import imageio_ffmpeg
import numpy as np
import pytest
import torch

from rlpipe.artifacts.video import Mp4Writer, VideoRecorder, pad_to_block, recorder_for
from rlpipe.config import EvalCfg
from rlpipe.envs import RenderUnavailable


def read_video(path: Path) -> tuple[dict, list[np.ndarray]]:
    reader = imageio_ffmpeg.read_frames(str(path))
    meta = next(reader)
    w, h = meta["size"]
    return meta, [np.frombuffer(f, np.uint8).reshape(h, w, 3) for f in reader]


def test_writer_pads_to_16_and_publishes_only_on_close(tmp_path):
    target = tmp_path / "eval" / "v.mp4"
    writer = Mp4Writer(target, fps=25)
    for i in range(7):
        writer.append(np.full((30, 50, 3), 20 * i, dtype=np.uint8))
    assert not target.exists()  # still a hidden temporary
    assert writer.close() == target
    meta, frames = read_video(target)
    assert meta["size"] == (64, 32) and meta["fps"] == 25 and len(frames) == 7
    assert abs(int(frames[3][10, 10, 0]) - 60) <= 3 and frames[3][31, 63].max() <= 3  # padding is black
    assert [p.name for p in target.parent.iterdir()] == ["v.mp4"]


def test_writer_abort_and_bad_frames_leave_no_file(tmp_path):
    writer = Mp4Writer(tmp_path / "v.mp4", fps=10)
    writer.append(np.zeros((16, 16, 3), np.uint8))
    with pytest.raises(ValueError, match="size"):
        writer.append(np.zeros((16, 32, 3), np.uint8))
    with pytest.raises(ValueError, match="uint8"):
        writer.append(np.zeros((16, 16, 3), np.float32))
    writer.abort()
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match="no frame"):
        Mp4Writer(tmp_path / "w.mp4", fps=10).close()
    assert pad_to_block(np.ones((16, 32, 3), np.uint8)).shape == (16, 32, 3)


class Colours:
    """A fake eval env whose env i renders a 16×16 frame of grey level 40·(i+1)+step·0 (or fails)."""

    num_envs, render_fps = 3, 10

    def __init__(self, fail: bool = False) -> None:
        self.fail, self.calls = fail, []

    def render(self, env_ids: list[int]) -> torch.Tensor:
        self.calls.append(list(env_ids))
        if self.fail:
            raise RenderUnavailable("Colours cannot render (test)")
        levels = torch.tensor([40 * (i + 1) + 10 * len(self.calls) for i in env_ids], dtype=torch.uint8)
        return levels.view(-1, 1, 1, 1).expand(-1, 16, 16, 3).clone()


def test_recorder_tiles_filmed_envs_and_freezes_those_that_are_done(tmp_path):
    env, recorder = Colours(), VideoRecorder(2)  # films envs 0 and 1 of 3
    recorder.start(env, tmp_path / "v.mp4")  # frame 1: the reset state
    recorder.capture(env, torch.tensor([0, 0, 0]), 2)  # frame 2
    recorder.capture(env, torch.tensor([0, 2, 0]), 2)  # frame 3: env 1 done, its tile frozen
    recorder.capture(env, torch.tensor([2, 2, 0]), 2)  # everyone filmed is done → finished
    assert env.calls == [[0, 1], [0, 1], [0]]
    assert recorder.written == tmp_path / "v.mp4" and recorder.written_frames == 3
    _, frames = read_video(recorder.written)
    assert len(frames) == 3 and frames[0].shape == (16, 32, 3)
    left = np.array([f[8, 4, 0] for f in frames], float)
    right = np.array([f[8, 20, 0] for f in frames], float)
    assert np.allclose(left, [50, 60, 70], atol=4) and np.allclose(right, [90, 100, 100], atol=4)


def test_render_failure_turns_video_off_once_with_one_line_and_no_file(tmp_path, capsys):
    env, recorder = Colours(fail=True), VideoRecorder(2)
    recorder.start(env, tmp_path / "v.mp4")
    recorder.capture(env, torch.tensor([0, 0, 0]), 1)
    recorder.start(env, tmp_path / "w.mp4")
    assert not recorder.enabled and not recorder.recording and recorder.written is None
    assert list(tmp_path.iterdir()) == []
    err = capsys.readouterr().err
    assert err == "Warning: eval video off: Colours cannot render (test)\n"


def test_recorder_for_follows_eval_video_and_reports_a_build_problem(capsys):
    assert recorder_for(EvalCfg()) is None
    assert recorder_for(EvalCfg(video=True, video_envs=3)).num_envs == 3
    assert recorder_for(EvalCfg(video=True), RenderUnavailable("no GL here")) is None
    assert capsys.readouterr().err == "Warning: eval video off: no GL here\n"


def test_any_render_error_turns_video_off_instead_of_ending_the_evaluation(tmp_path, capsys):
    class Broken(Colours):
        def render(self, env_ids):
            raise RuntimeError("GL context lost")

    recorder = VideoRecorder(1)
    recorder.start(Broken(), tmp_path / "v.mp4")
    assert not recorder.enabled and list(tmp_path.iterdir()) == []
    assert capsys.readouterr().err == "Warning: eval video off: RuntimeError: GL context lost\n"
