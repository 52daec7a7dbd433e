"""lerobot 0.4.4's stats and edit tools on rlpipe's exports of a gray camera.

LeRobot's stats, as its own ``compute_episode_stats`` and ``aggregate_stats`` give them from the
stored values, match ``meta/stats.json``; ``delete_episodes`` and ``split_dataset`` (which check and
re-aggregate every camera's stats as RGB) accept the export and keep every frame exact.
"""

from __future__ import annotations

import numpy as np
import pytest
from _lerobot_lane import as_uint8, episode_bounds, rgb

pytestmark = pytest.mark.lane

IMAGE = "observation.images.pixels"
VECTORS = {"observation.state": "state", "action": "action", "next.reward": "reward"}
"""The export's features beside the camera, with their names in the stored episodes."""


def _lerobot_stats(expected: dict[str, np.ndarray], features: dict) -> dict:
    """The dataset's stats as lerobot computes them: per episode from the stored values, then aggregated.

    Vectors through ``compute_episode_stats``; the camera through the same per-channel reduction it
    applies to images (``get_feature_stats`` over ``(0, 2, 3)``, ÷255) on the stored gray frames as
    R = G = B, given as float: fed the uint8 frames it samples from image files, lerobot 0.4.4's
    running stats give a std of 0 and quantiles near 0 (an integer overflow of its own).
    """
    from lerobot.datasets.compute_stats import aggregate_stats, compute_episode_stats, get_feature_stats

    episodes = []
    for start, end in episode_bounds(expected["lengths"]):
        data = {key: expected[name][start:end] for key, name in VECTORS.items()}
        stats = compute_episode_stats(data, {key: features[key] for key in VECTORS})
        frames = rgb(expected["pixels"][start:end]).astype(np.float64)
        image = get_feature_stats(frames, axis=(0, 2, 3), keepdims=True)
        stats[IMAGE] = {k: v if k == "count" else np.squeeze(v / 255.0, axis=0) for k, v in image.items()}
        episodes.append(stats)
    return aggregate_stats(episodes)


def test_the_stats_are_what_lerobot_computes_from_the_stored_values(load, stored):
    dataset, expected = load("pixels-png"), stored("pixels-png")
    ours = dataset.meta.stats
    theirs = _lerobot_stats(expected, dataset.meta.features)
    for key in (*VECTORS, IMAGE):
        for name in ("min", "max", "mean", "std", "count"):
            mine, lerobots = np.asarray(ours[key][name]), np.asarray(theirs[key][name])
            assert mine.shape == lerobots.shape, (key, name)
            np.testing.assert_allclose(mine, lerobots, rtol=1e-5, atol=1e-6, err_msg=f"{key}/{name}")
    assert np.asarray(ours[IMAGE]["q50"]).shape == (3, 1, 1)


def _frames_of(dataset) -> tuple[np.ndarray, np.ndarray]:
    """``(images uint8 [N, 3, H, W], states [N, D])`` of every item of ``dataset``."""
    items = [dataset[i] for i in range(len(dataset))]
    images = as_uint8(np.stack([np.asarray(item[IMAGE]) for item in items]))
    return images, np.stack([np.asarray(item["observation.state"]) for item in items])


def _episodes(expected: dict[str, np.ndarray], keep: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """The stored ``(images as RGB, states)`` of the episodes ``keep``, in that order."""
    bounds = episode_bounds(expected["lengths"])
    rows = np.concatenate([np.arange(*bounds[e]) for e in keep])
    return rgb(expected["pixels"][rows]), expected["state"][rows]


def test_delete_episodes_keeps_the_other_episodes_exact(load, stored, tmp_path):
    from lerobot.datasets.dataset_tools import delete_episodes

    dataset, expected = load("pixels-png"), stored("pixels-png")
    count = dataset.meta.total_episodes
    edited = delete_episodes(dataset, [0, 2], output_dir=tmp_path / "deleted")
    keep = [e for e in range(count) if e not in (0, 2)]
    assert edited.meta.total_episodes == count - 2
    images, states = _frames_of(edited)
    want_images, want_states = _episodes(expected, keep)
    np.testing.assert_array_equal(images, want_images)
    np.testing.assert_array_equal(states, want_states)
    stats = edited.meta.stats[IMAGE]
    assert np.asarray(stats["mean"]).shape == (3, 1, 1)
    np.testing.assert_allclose(np.asarray(stats["mean"]).ravel(), [want_images.mean() / 255] * 3, rtol=1e-6)


def test_split_dataset_gives_parts_holding_their_episodes_exact(load, stored, tmp_path):
    from lerobot.datasets.dataset_tools import split_dataset

    dataset, expected = load("pixels-png"), stored("pixels-png")
    count = dataset.meta.total_episodes
    parts = {"train": list(range(0, count, 2)), "val": list(range(1, count, 2))}
    split = split_dataset(dataset, parts, output_dir=tmp_path / "split")
    assert set(split) == set(parts)
    for name, episodes in parts.items():
        assert split[name].meta.total_episodes == len(episodes)
        images, states = _frames_of(split[name])
        want_images, want_states = _episodes(expected, episodes)
        np.testing.assert_array_equal(images, want_images)
        np.testing.assert_array_equal(states, want_states)
