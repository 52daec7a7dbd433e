"""Normalization statistics as LeRobot v3.0 keeps them: per episode, and over the whole dataset.

Each feature gets ``min``, ``max``, ``mean``, ``std`` (population), ``count`` and the quantiles
``q01, q10, q50, q90, q99``:

- a vector feature ``[L, D]`` → arrays of shape ``[D]``; a scalar feature ``[L]`` → shape ``[1]``;
  ``count`` is ``[L]`` (the frames), booleans and integers are counted as floats;
- a camera ``[L, H, W, C]`` uint8 → per channel, shape ``[C, 1, 1]``, scaled to ``[0, 1]`` (÷255),
  over a sample of the episode's frames (the same sample size and downsampling LeRobot uses, so
  stats of long camera episodes stay cheap); ``count`` is the number of sampled frames.

The dataset's ``meta/stats.json`` combines the episodes the way LeRobot aggregates them: min of
mins, max of maxes, count-weighted mean, the pooled variance, and for quantiles an envelope (the
smallest episode value for ``q01…q50``, the largest for ``q90, q99``). Episode quantiles are exact
(``np.quantile``, linear); camera quantiles come from per-channel histograms of the 256 values,
which give the same numbers without sorting millions of pixels.
"""

from __future__ import annotations

import numpy as np

__all__ = ["QUANTILES", "StatsAccumulator", "image_stats", "sample_frame_indices", "vector_stats"]

QUANTILES = (0.01, 0.10, 0.50, 0.90, 0.99)
"""The quantiles LeRobot records, named ``q01, q10, q50, q90, q99``."""
_Q_KEYS = tuple(f"q{round(q * 100):02d}" for q in QUANTILES)

Stats = dict[str, np.ndarray]


def vector_stats(values: np.ndarray) -> Stats:
    """Stats of ``[L]`` (→ shape ``[1]``) or ``[L, D]`` (→ shape ``[D]``) values over the frames."""
    x = np.asarray(values, dtype=np.float64)
    x = x.reshape(len(x), -1)
    stats = {
        "min": x.min(axis=0),
        "max": x.max(axis=0),
        "mean": x.mean(axis=0),
        "std": x.std(axis=0),
        "count": np.array([len(x)], dtype=np.int64),
    }
    for key, q in zip(_Q_KEYS, np.quantile(x, QUANTILES, axis=0)):
        stats[key] = q
    return stats


def sample_frame_indices(length: int) -> np.ndarray:
    """The frames of an episode of ``length`` whose pixels enter its camera stats.

    All frames up to 100, then ``length ** 0.75`` spread evenly (at most 10,000), as LeRobot samples.
    """
    count = length if length < 100 else max(100, min(int(length**0.75), 10_000))
    return np.round(np.linspace(0, length - 1, count)).astype(np.int64)


def _downsampled(frames: np.ndarray) -> np.ndarray:
    """``[N, H, W, C]`` taken every k-th pixel when a side reaches 300 (about 150 pixels a side)."""
    height, width = frames.shape[1:3]
    if max(height, width) < 300:
        return frames
    step = int(width / 150) if width > height else int(height / 150)
    return frames[:, ::step, ::step]


def _histogram_quantiles(counts: np.ndarray) -> np.ndarray:
    """``np.quantile(..., QUANTILES)`` (linear) of values 0…255 given by their ``counts`` ``[256]``."""
    cumulative = np.cumsum(counts)
    positions = np.asarray(QUANTILES) * (cumulative[-1] - 1)
    below = np.floor(positions)
    low = np.searchsorted(cumulative, below, side="right")
    high = np.searchsorted(cumulative, np.ceil(positions), side="right")
    return low + (positions - below) * (high - low)


def image_stats(frames: np.ndarray) -> Stats:
    """Per-channel stats ``[C, 1, 1]`` in ``[0, 1]`` of camera frames ``[L, H, W, C]`` uint8."""
    sample = _downsampled(frames[sample_frame_indices(len(frames))])
    channels = sample.shape[-1]
    pixels = sample.reshape(-1, channels)
    values = np.arange(256, dtype=np.float64)
    counts = np.stack([np.bincount(pixels[:, c], minlength=256) for c in range(channels)])  # [C, 256]
    total = counts.sum(axis=1)
    mean = counts @ values / total
    std = np.sqrt(np.maximum(counts @ values**2 / total - mean**2, 0.0))
    nonzero = counts > 0
    stats = {
        "min": nonzero.argmax(axis=1).astype(np.float64),
        "max": (255 - nonzero[:, ::-1].argmax(axis=1)).astype(np.float64),
        "mean": mean,
        "std": std,
    }
    quantiles = np.stack([_histogram_quantiles(row) for row in counts], axis=1)  # [Q, C]
    stats.update(zip(_Q_KEYS, quantiles))
    stats = {key: (value / 255.0).reshape(channels, 1, 1) for key, value in stats.items()}
    stats["count"] = np.array([len(sample)], dtype=np.int64)
    return stats


class StatsAccumulator:
    """Combines episode stats, one feature at a time, into the dataset's stats (see the module)."""

    def __init__(self) -> None:
        self._totals: dict[str, Stats] = {}

    def add(self, episode: dict[str, Stats]) -> None:
        """Fold one episode's ``{feature: stats}`` in."""
        for key, stats in episode.items():
            total = self._totals.get(key)
            self._totals[key] = (
                {k: v.copy() for k, v in stats.items()} if total is None else _combined(total, stats)
            )

    def result(self) -> dict[str, Stats]:
        """``{feature: stats}`` over every episode added."""
        return self._totals


def _combined(a: Stats, b: Stats) -> Stats:
    """Stats of two disjoint sets of frames from the stats of each (pooled mean and variance)."""
    n_a, n_b = float(a["count"][0]), float(b["count"][0])
    n = n_a + n_b
    mean = (a["mean"] * n_a + b["mean"] * n_b) / n
    variance = (
        (a["std"] ** 2 + (a["mean"] - mean) ** 2) * n_a + (b["std"] ** 2 + (b["mean"] - mean) ** 2) * n_b
    ) / n
    out = {
        "min": np.minimum(a["min"], b["min"]),
        "max": np.maximum(a["max"], b["max"]),
        "mean": mean,
        "std": np.sqrt(variance),
        "count": a["count"] + b["count"],
    }
    for key, q in zip(_Q_KEYS, QUANTILES):
        out[key] = np.minimum(a[key], b[key]) if q <= 0.5 else np.maximum(a[key], b[key])
    return out
