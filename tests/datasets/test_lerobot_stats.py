"""LeRobot-style stats: camera quantiles from histograms equal numpy's, pooled episodes equal the whole."""

from __future__ import annotations

import numpy as np
import pytest

from rlpipe.datasets.lerobot_stats import StatsAccumulator, image_stats, sample_frame_indices, vector_stats


def test_image_stats_quantiles_equal_numpy():
    frames = np.random.default_rng(1).integers(0, 256, (9, 8, 6, 3), dtype=np.uint8)
    stats = image_stats(frames)
    pixels = frames.reshape(-1, 3).astype(np.float64)
    for key, q in [("q01", 0.01), ("q10", 0.1), ("q50", 0.5), ("q90", 0.9), ("q99", 0.99)]:
        np.testing.assert_allclose(stats[key].ravel(), np.quantile(pixels, q, axis=0) / 255, rtol=1e-12)
    np.testing.assert_allclose(stats["std"].ravel(), pixels.std(0) / 255, rtol=1e-9)
    assert vector_stats(np.array([True, False, True]))["mean"] == pytest.approx([2 / 3])


def test_pooled_episodes_equal_the_whole_for_mean_std_min_max():
    rng = np.random.default_rng(2)
    parts = [rng.normal(size=(n, 3)) for n in (5, 1, 9)]
    acc = StatsAccumulator()
    for part in parts:
        acc.add({"x": vector_stats(part)})
    whole, pooled = np.concatenate(parts), acc.result()["x"]
    np.testing.assert_allclose(pooled["mean"], whole.mean(0), rtol=1e-12)
    np.testing.assert_allclose(pooled["std"], whole.std(0), rtol=1e-9)
    np.testing.assert_array_equal(pooled["min"], whole.min(0))
    assert pooled["count"].tolist() == [15]
    lows = np.min([vector_stats(p)["q01"] for p in parts], axis=0)
    np.testing.assert_array_equal(pooled["q01"], lows)  # LeRobot's envelope of episode quantiles


def test_camera_stats_sample_long_episodes():
    assert len(sample_frame_indices(50)) == 50
    assert len(sample_frame_indices(1000)) == 177 and sample_frame_indices(1000)[-1] == 999
