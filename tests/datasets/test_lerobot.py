"""The LeRobot v3.0 writer against the format: files, schema, index ranges, values, video timing, PNG.

Episodes are made by hand (vector groups, a privileged group, a camera with a 2-frame stack,
success flags); every check reads the files back with pyarrow, PyAV (the ``test`` extra) and PIL,
independently of the writer. The format facts checked (paths, ``info.json`` keys, episode columns,
``timestamp = frame_index / fps`` in float32, the video time of frame ``i`` at
``from_timestamp + i / fps`` within LeRobot's 1e-4 s) are LeRobot v3.0's.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import av
import gymnasium as gym
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from PIL import Image

from rlpipe.datasets import lerobot
from rlpipe.datasets.episode import Episode as Ep
from rlpipe.datasets.episodes import DatasetSource as Src
from rlpipe.datasets.lerobot import check_lerobot_source, write_lerobot

H, W, FPS = 16, 16, 10


def group_source(channels: int = 3, fps: int | None = FPS, height: int = H) -> Src:
    space = gym.spaces.Dict(
        {
            "policy": gym.spaces.Box(-1, 1, (5,), np.float32),
            "camera": gym.spaces.Box(0, 255, (2 * channels, height, W), np.uint8),
            "privileged": gym.spaces.Box(-1, 1, (3,), np.float32),
        }
    )
    return Src(
        "data/push",
        "PushCube",
        None,
        space,
        gym.spaces.Box(-1, 1, (2,), np.float32),
        ("camera",),
        {"camera": channels},
        ("privileged",),
        fps,
        "abc123",
        (3, 4),
        "ckpt-000004.pt",
    )


def _frames(rng, length, channels, height=H):
    """Smooth frames (AV1 keeps them close), a 2-frame stack: older frame first, newest last."""
    y, x = np.mgrid[0:height, 0:W]
    out = np.empty((length, 2 * channels, height, W), np.uint8)
    for t in range(length):
        base = rng.integers(0, 60)
        for c in range(2 * channels):
            out[t, c] = base + 3 * x + 2 * y + 15 * c
    return out


def group_episodes(channels: int = 3, lengths=(4, 7, 5), height: int = H) -> list[Ep]:
    rng = np.random.default_rng(0)
    eps = []
    for i, length in enumerate(lengths):
        obs = {
            "policy": rng.normal(size=(length, 5)).astype(np.float32),
            "camera": _frames(rng, length, channels, height),
            "privileged": rng.normal(size=(length, 3)).astype(np.float32),
        }
        last = np.zeros(length, bool)
        last[-1] = True
        eps.append(
            Ep(
                rank=0,
                env=i % 2,
                index=i,
                observations=obs,
                next_observation={k: v[-1] for k, v in obs.items()},
                actions=rng.normal(size=(length, 2)).astype(np.float32),
                rewards=rng.normal(size=length).astype(np.float32),
                terminated=last & (i != 1),
                truncated=last & (i == 1),
                success=last & (i == 0),
                iterations=np.full(length, 3 + i // 2, np.int64),
                log_probs=rng.normal(size=length).astype(np.float32),
                values=rng.normal(size=length).astype(np.float32),
                cut=False,
            )
        )
    return eps


def read_data(root: Path) -> pd.DataFrame:
    return pq.read_table(sorted((root / "data").glob("*/*.parquet"))).to_pandas()


def read_episodes(root: Path) -> pd.DataFrame:
    return pq.read_table(sorted((root / "meta/episodes").glob("*/*.parquet"))).to_pandas()


def test_video_export_matches_v3_layout_and_episodes(tmp_path):
    eps = group_episodes()
    out = tmp_path / "ds"
    written = write_lerobot(group_source(), iter(eps), out, task="push the cube")
    total = sum(e.length for e in eps)
    assert (written.episodes, written.frames) == (3, total)
    assert written.bytes == sum(p.stat().st_size for p in out.rglob("*") if p.is_file())

    info = json.loads((out / "meta/info.json").read_text())
    assert info["codebase_version"] == "v3.0"
    counts = (info["fps"], info["total_episodes"], info["total_frames"], info["total_tasks"])
    assert counts == (FPS, 3, total, 1)
    assert info["splits"] == {"train": "0:3"}
    assert info["data_path"] == "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
    assert info["video_path"] == "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
    feats = info["features"]
    assert feats["observation.state"] == {
        "dtype": "float32",
        "shape": [5],
        "names": [f"policy/{i}" for i in range(5)],
    }
    assert feats["observation.environment_state"]["shape"] == [3]
    cam = feats["observation.images.camera"]
    assert (cam["dtype"], cam["shape"], cam["names"]) == ("video", [H, W, 3], ["height", "width", "channels"])
    assert cam["info"]["video.codec"] == "av1" and cam["info"]["video.fps"] == FPS
    assert feats["action"]["shape"] == [2] and feats["next.success"]["dtype"] == "bool"
    for key, dtype in [
        ("timestamp", "float32"),
        ("frame_index", "int64"),
        ("episode_index", "int64"),
        ("index", "int64"),
        ("task_index", "int64"),
    ]:
        assert feats[key] == {"dtype": dtype, "shape": [1], "names": None}
    assert not [k for k in feats if k.startswith("action") and k != "action"]

    tasks = pd.read_parquet(out / "meta/tasks.parquet")
    assert list(tasks.index) == ["push the cube"] and tasks.index.name == "task"
    assert list(tasks["task_index"]) == [0]

    rows = read_episodes(out)
    assert list(rows["episode_index"]) == [0, 1, 2]
    assert list(rows["length"]) == [4, 7, 5]
    assert list(rows["dataset_from_index"]) == [0, 4, 11]
    assert list(rows["dataset_to_index"]) == [4, 11, 16]
    assert [list(t) for t in rows["tasks"]] == [["push the cube"]] * 3
    assert list(rows["videos/observation.images.camera/from_timestamp"]) == [0.0, 0.4, 1.1]
    assert list(rows["videos/observation.images.camera/to_timestamp"]) == [0.4, 1.1, 1.6]
    assert list(rows["rl/success"]) == [True, False, False]
    assert list(rows["stats/observation.state/count"].map(list)) == [[4], [7], [5]]

    data = read_data(out)
    assert list(data["index"]) == list(range(total))
    for ep, (_, row) in zip(eps, rows.iterrows()):
        part = data.iloc[row["dataset_from_index"] : row["dataset_to_index"]]
        np.testing.assert_array_equal(np.stack(part["observation.state"]), ep.observations["policy"])
        np.testing.assert_array_equal(
            np.stack(part["observation.environment_state"]), ep.observations["privileged"]
        )
        np.testing.assert_array_equal(np.stack(part["action"]), ep.actions)
        np.testing.assert_array_equal(part["next.reward"], ep.rewards)
        np.testing.assert_array_equal(part["next.done"], ep.terminated | ep.truncated)
        np.testing.assert_array_equal(part["next.truncated"], ep.truncated)
        np.testing.assert_array_equal(part["next.success"], ep.success)
        np.testing.assert_array_equal(part["rl.log_prob"], ep.log_probs)
        np.testing.assert_array_equal(part["rl.iteration"], ep.iterations)
        assert set(part["episode_index"]) == {row["episode_index"]} and set(part["rl.env"]) == {ep.env}
        np.testing.assert_array_equal(part["frame_index"], np.arange(ep.length))
        assert part["timestamp"].dtype == np.float32
        np.testing.assert_array_equal(part["timestamp"], np.float32(np.arange(ep.length) / FPS))
    assert "observation.images.camera" not in data.columns


def test_video_frames_count_timing_and_content(tmp_path):
    eps = group_episodes()
    out = tmp_path / "ds"
    write_lerobot(group_source(), eps, out)
    rows, data = read_episodes(out), read_data(out)
    video = out / "videos/observation.images.camera/chunk-000/file-000.mp4"
    with av.open(str(video)) as container:
        stream = container.streams.video[0]
        assert (
            stream.codec_context.name in ("libdav1d", "libaom-av1", "av1")
            and stream.codec.canonical_name == "av1"
        )
        assert (stream.width, stream.height, stream.pix_fmt) == (W, H, "yuv420p")
        decoded = [
            (float(f.pts * f.time_base), f.to_ndarray(format="rgb24")) for f in container.decode(stream)
        ]
    assert len(decoded) == len(data)
    times = np.array([t for t, _ in decoded])
    for ep, (_, row) in zip(eps, rows.iterrows()):
        lo, hi = row["dataset_from_index"], row["dataset_to_index"]
        wanted = row["videos/observation.images.camera/from_timestamp"] + data["timestamp"][lo:hi].to_numpy()
        assert np.abs(times[lo:hi] - wanted).max() < 1e-4  # LeRobot's default tolerance_s
        newest = ep.observations["camera"][:, -3:].transpose(0, 2, 3, 1).astype(int)
        got = np.stack([f for _, f in decoded[lo:hi]]).astype(int)
        assert np.abs(got - newest).mean() < 6  # lossy AV1 of the newest frame, not the older one
        older = ep.observations["camera"][:, :3].transpose(0, 2, 3, 1).astype(int)
        assert np.abs(got - newest).mean() < np.abs(got - older).mean()


def test_png_export_keeps_frames_exactly(tmp_path):
    eps = group_episodes()
    out = tmp_path / "ds"
    write_lerobot(group_source(), eps, out, images="png")
    info = json.loads((out / "meta/info.json").read_text())
    assert info["video_path"] is None and not (out / "videos").exists()
    assert info["features"]["observation.images.camera"]["dtype"] == "image"
    table = pq.read_table(out / "data/chunk-000/file-000.parquet")
    assert str(table.schema.field("observation.images.camera").type) == "struct<bytes: binary, path: string>"
    hf = json.loads(table.schema.metadata[b"huggingface"])["info"]["features"]
    assert hf["observation.images.camera"] == {"_type": "Image"}
    assert hf["observation.state"] == {
        "feature": {"dtype": "float32", "_type": "Value"},
        "length": 5,
        "_type": "List",
    }
    images = table.column("observation.images.camera").to_pylist()
    frames = np.concatenate([e.observations["camera"][:, -3:].transpose(0, 2, 3, 1) for e in eps])
    for image, frame in zip(images, frames, strict=True):
        np.testing.assert_array_equal(np.asarray(Image.open(io.BytesIO(image["bytes"]))), frame)


@pytest.mark.parametrize("images", ["png", "video"])
def test_a_gray_camera_is_written_as_lerobot_takes_images_three_equal_channels(tmp_path, images):
    """LeRobot's stats and edit tools take every image as RGB: stats ``[3, 1, 1]``, shape ``[H, W, 3]``."""
    eps = group_episodes(channels=1, lengths=(3, 2))
    write_lerobot(group_source(channels=1), eps, tmp_path / "ds", images=images)
    info = json.loads((tmp_path / "ds/meta/info.json").read_text())
    feature = info["features"]["observation.images.camera"]
    assert (feature["shape"], feature["names"]) == ([H, W, 3], ["height", "width", "channels"])
    stats = json.loads((tmp_path / "ds/meta/stats.json").read_text())["observation.images.camera"]
    gray = np.concatenate([e.observations["camera"][:, -1] for e in eps]) / 255.0
    for key in ("min", "max", "mean", "q50"):
        assert np.asarray(stats[key]).shape == (3, 1, 1), key
    np.testing.assert_allclose(np.asarray(stats["mean"]).ravel(), [gray.mean()] * 3)
    rows = pq.read_table(tmp_path / "ds/meta/episodes/chunk-000/file-000.parquet")
    assert np.asarray(rows.column("stats/observation.images.camera/std")[0].as_py()).shape == (3, 1, 1)
    mapping = json.loads((tmp_path / "ds/meta/rlpipe.json").read_text())["mapping"]
    assert "gray" in mapping["observation.images.camera"]["frame"]


def test_a_gray_png_frame_holds_the_stored_gray_in_each_channel_exactly(tmp_path):
    eps = group_episodes(channels=1, lengths=(3, 2))
    write_lerobot(group_source(channels=1), eps, tmp_path / "png", images="png")
    table = pq.read_table(tmp_path / "png/data/chunk-000/file-000.parquet")
    images = table.column("observation.images.camera").to_pylist()
    gray = np.concatenate([e.observations["camera"][:, -1] for e in eps])
    for image, frame in zip(images, gray, strict=True):
        decoded = Image.open(io.BytesIO(image["bytes"]))
        assert decoded.mode == "RGB"
        np.testing.assert_array_equal(np.asarray(decoded), np.repeat(frame[..., None], 3, axis=-1))


def test_stats_per_feature_and_images_per_channel(tmp_path):
    eps = group_episodes()
    write_lerobot(group_source(), eps, tmp_path / "ds")
    stats = json.loads((tmp_path / "ds/meta/stats.json").read_text())
    info = json.loads((tmp_path / "ds/meta/info.json").read_text())
    assert set(stats) == set(info["features"])
    state = np.concatenate([e.observations["policy"] for e in eps]).astype(np.float64)
    s = stats["observation.state"]
    assert set(s) == {"min", "max", "mean", "std", "count", "q01", "q10", "q50", "q90", "q99"}
    np.testing.assert_allclose(s["mean"], state.mean(0), rtol=1e-12)
    np.testing.assert_allclose(s["std"], state.std(0), rtol=1e-9)
    np.testing.assert_array_equal(s["min"], state.min(0))
    assert s["count"] == [16] and stats["timestamp"]["max"] == [pytest.approx(0.6)]
    cam = np.asarray(stats["observation.images.camera"]["mean"])
    assert cam.shape == (3, 1, 1) and stats["observation.images.camera"]["count"] == [16]
    assert 0 <= cam.min() and cam.max() <= 1


def test_flat_observation_and_discrete_action(tmp_path):
    source = Src(
        "data/cp",
        "CartPole",
        "CartPole-v1",
        gym.spaces.Box(-5, 5, (4,), np.float32),
        gym.spaces.Discrete(2),
        (),
        {},
        (),
        50,
        "h",
        (1,),
        None,
    )
    obs = np.arange(12, dtype=np.float32).reshape(3, 4)
    flags = np.array([False, False, True])
    ep = Ep(
        0,
        0,
        0,
        obs,
        obs[-1],
        np.array([1, 0, 1]),
        np.ones(3, np.float32),
        flags,
        ~flags & False,
        None,
        np.ones(3, np.int64),
        np.zeros(3, np.float32),
        np.zeros(3, np.float32),
        False,
    )
    write_lerobot(source, [ep], tmp_path / "ds")
    info = json.loads((tmp_path / "ds/meta/info.json").read_text())
    assert info["features"]["observation.state"]["shape"] == [4]
    assert info["features"]["action"] == {"dtype": "int64", "shape": [1], "names": None}
    assert "next.success" not in info["features"]
    data = read_data(tmp_path / "ds")
    np.testing.assert_array_equal(np.stack(data["observation.state"]), obs)
    assert list(data["action"]) == [1, 0, 1]
    prov = json.loads((tmp_path / "ds/meta/rlpipe.json").read_text())
    assert (prov["env_id"], prov["gym_id"], prov["iterations"]) == ("CartPole", "CartPole-v1", [1])


def test_data_files_rotate_by_size_without_splitting_episodes(tmp_path, monkeypatch):
    monkeypatch.setattr(lerobot, "DATA_FILE_SIZE_MB", 1e-6)
    eps = group_episodes()
    write_lerobot(group_source(), eps, tmp_path / "ds", images="png")
    rows = read_episodes(tmp_path / "ds")
    assert list(rows["data/file_index"]) == [0, 1, 2]
    for _, row in rows.iterrows():
        path = tmp_path / "ds" / f"data/chunk-000/file-{row['data/file_index']:03d}.parquet"
        assert list(pq.read_table(path, columns=["index"]).column("index").to_pylist()) == list(
            range(row["dataset_from_index"], row["dataset_to_index"])
        )


def test_provenance_records_run_and_one_frame_episodes_write(tmp_path):
    write_lerobot(group_source(), group_episodes(lengths=(1, 1)), tmp_path / "ds")
    rows = read_episodes(tmp_path / "ds")
    assert list(rows["videos/observation.images.camera/to_timestamp"]) == [0.1, 0.2]
    prov = json.loads((tmp_path / "ds/meta/rlpipe.json").read_text())
    assert prov["run_dir"] == "data/push" and prov["params_hash"] == "abc123"
    assert prov["checkpoint"] == "ckpt-000004.pt" and prov["iterations"] == [3, 4]
    assert prov["mapping"]["observation.environment_state"] == ["privileged"]


@pytest.mark.parametrize(
    "source, images, words",
    [
        (group_source(fps=None), "video", "env PushCube has no control rate"),
        (group_source(channels=2), "png", "2-channel"),
        (group_source(height=15), "video", "even sides"),
        (group_source(), "gif", "--images"),
    ],
)
def test_bad_sources_refused_before_writing(tmp_path, source, images, words):
    with pytest.raises(ValueError, match=words) as err:
        write_lerobot(source, group_episodes(), tmp_path / "ds", images=images)
    assert "\n" not in str(err.value)
    assert not (tmp_path / "ds").exists()
    with pytest.raises(ValueError, match=words):
        check_lerobot_source(source, images=images)


def test_no_episodes_and_nonempty_out_refused(tmp_path):
    with pytest.raises(ValueError, match="no episodes"):
        write_lerobot(group_source(), [], tmp_path / "ds")
    (tmp_path / "full").mkdir()
    (tmp_path / "full/x").write_text("x")
    with pytest.raises(ValueError, match="not empty"):
        write_lerobot(group_source(), group_episodes(), tmp_path / "full")


def test_per_million():
    written = lerobot.LeRobotWritten(episodes=2, frames=500_000, bytes=10_000_000, seconds=3.0)
    assert written.per_million() == (20.0, 6.0)


def test_an_encoder_failure_is_one_line_and_stops_the_export(tmp_path, monkeypatch):
    from rlpipe.datasets import lerobot_video

    exe = lerobot_video._ffmpeg()[0]
    monkeypatch.setattr(lerobot_video, "_ffmpeg", lambda: (exe, "no_such_encoder"))
    with pytest.raises(RuntimeError, match="ffmpeg failed writing .*file-000.mp4") as err:
        write_lerobot(group_source(), group_episodes(), tmp_path / "ds")
    assert "\n" not in str(err.value)
    assert not (tmp_path / "ds/meta/info.json").exists()
