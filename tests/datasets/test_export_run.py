"""``rlpipe dataset --format lerobot`` end to end: a tiny PixelCartPole run through the CLI, files checked.

The run stores its camera (2 stacked gray 32×32 frames), its state group and the policy's
deterministic action (``store.action_mean``); the export is checked against the stores read with
zarr alone, as ``test_lerobot.py`` checks the writer: info.json, episode rows, parquet columns, PNG
frames equal to the newest stored frame, the mp4's frame count and timestamps.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import av
import numpy as np
import pyarrow.parquet as pq
import pytest
import zarr
from _pixel_fixtures import PIXEL_PARAMS, TINY_PIXELS
from click.testing import CliRunner
from PIL import Image

from rlpipe.cli import cli

FPS = 50
"""CartPole's control rate: one step of 0.02 s."""


@pytest.fixture(scope="module")
def pixel_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("pixel")
    args = ["run", str(PIXEL_PARAMS)]
    for item in (*TINY_PIXELS, f"trainer.data_dir={data}", "store.action_mean=true"):
        args += ["--set", item]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    return next(data.iterdir())


def independent_episodes(run: Path) -> list[dict[str, np.ndarray]]:
    """Whole episodes of a single-process run read with zarr alone, in export order (env, then time)."""
    stores = [zarr.open_group(str(p), mode="r") for p in sorted((run / "rollouts").glob("iter-*.zarr"))]
    episodes = []
    for env in range(stores[0]["reward"].shape[0]):
        steps: list[tuple[np.ndarray, ...]] = []
        for store in stores:
            if store.attrs["reset_at_start"]:
                steps = []
            arrays = [store[k][env] for k in ("obs/pixels", "obs/state", "action_mean", "reward", "done")]
            for t in range(arrays[0].shape[0] - 1):
                steps.append(tuple(a[t] for a in arrays))
                if arrays[-1][t]:
                    pixels, state, action, reward, _ = map(np.stack, zip(*steps, strict=True))
                    episodes.append({"pixels": pixels, "state": state, "action": action, "reward": reward})
                    steps = []
    return episodes


def export(run: Path, out: Path, *options: str) -> None:
    result = CliRunner().invoke(
        cli, ["dataset", str(run), "--format", "lerobot", "--out", str(out), "--action", "mean", *options]
    )
    assert result.exit_code == 0, result.output


def test_a_pixel_run_exports_to_lerobot_png_equal_to_its_stores(pixel_run, tmp_path):
    out = tmp_path / "png"
    export(pixel_run, out, "--images", "png")
    expected = independent_episodes(pixel_run)
    lengths = [len(e["reward"]) for e in expected]
    assert len(expected) >= 3

    info = json.loads((out / "meta/info.json").read_text())
    assert (info["codebase_version"], info["fps"]) == ("v3.0", FPS)
    assert (info["total_episodes"], info["total_frames"]) == (len(expected), sum(lengths))
    assert info["features"]["observation.images.pixels"]["shape"] == [32, 32, 3]  # gray as R = G = B
    rows = pq.read_table(out / "meta/episodes/chunk-000/file-000.parquet").to_pandas()
    assert list(rows["length"]) == lengths
    assert list(rows["dataset_from_index"]) == list(np.cumsum([0, *lengths[:-1]]))

    data = pq.read_table(out / "data/chunk-000/file-000.parquet").to_pandas()
    images = data["observation.images.pixels"]
    for episode, (_, row) in zip(expected, rows.iterrows(), strict=True):
        part = slice(row["dataset_from_index"], row["dataset_to_index"])
        np.testing.assert_array_equal(np.stack(data["action"][part]), episode["action"])
        np.testing.assert_array_equal(np.stack(data["observation.state"][part]), episode["state"])
        np.testing.assert_array_equal(data["next.reward"][part], episode["reward"])
        steps = np.arange(len(episode["reward"]))
        np.testing.assert_array_equal(data["timestamp"][part], np.float32(steps / FPS))
        frames = np.stack([np.asarray(Image.open(io.BytesIO(i["bytes"]))) for i in images[part]])
        newest = episode["pixels"][:, -1]  # the newest of 2 stacked gray frames, in each of R, G, B
        np.testing.assert_array_equal(frames, np.repeat(newest[..., None], 3, axis=-1))


def test_a_pixel_run_exports_to_lerobot_video_with_one_frame_per_step(pixel_run, tmp_path):
    out = tmp_path / "video"
    export(pixel_run, out)
    frames = sum(len(e["reward"]) for e in independent_episodes(pixel_run))
    info = json.loads((out / "meta/info.json").read_text())
    assert info["features"]["observation.images.pixels"]["info"]["video.codec"] == "av1"
    with av.open(str(out / "videos/observation.images.pixels/chunk-000/file-000.mp4")) as container:
        stream = container.streams.video[0]
        times = [float(f.pts * f.time_base) for f in container.decode(stream)]
    assert len(times) == frames == info["total_frames"]
    np.testing.assert_allclose(times, np.arange(frames) / FPS, atol=1e-4)  # LeRobot's tolerance_s
