"""The zoo's aggregates over seeds: IQM, mean and median with stratified-bootstrap CIs, fractions, profiles.

Not a benchmark itself. The statistics are those of Agarwal et al. 2021 (arXiv:2108.13264, the
``rliable`` library), written with NumPy: the interquartile mean is the 25 % trimmed mean (of 10 seeds,
the mean of the middle 6; of 3 or fewer, the plain mean), and a 95 % confidence interval is the
percentile interval of a bootstrap that resamples seeds with replacement within each task (stratified
by task). A task's interval therefore rests on its own seeds only: with 3 seeds it is wide, and it
cannot reach past the lowest or highest seed. The resamples come from a generator seeded with
``SEED``: the same rows give the same JSON.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

CONFIDENCE = 0.95
REPS = 10_000
"""Bootstrap resamples per estimate."""
SEED = 0
THRESHOLDS = (0.5, 0.8)
"""Ratios to the reference whose share of seeds is reported (at least this many times the reference)."""
PROFILE_TAUS = np.round(np.linspace(0.0, 2.0, 81), 3)
"""Ratios to the reference at which the performance profile is evaluated."""


def iqm(scores: np.ndarray, axis: int = -1) -> np.ndarray:
    """The interquartile mean along ``axis``: the mean after cutting ``floor(n / 4)`` values off each end."""
    ordered = np.sort(np.asarray(scores, dtype=float), axis=axis)
    n = ordered.shape[axis]
    cut = int(0.25 * n)
    return np.take(ordered, range(cut, n - cut), axis=axis).mean(axis=axis)


AGGREGATES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "iqm": iqm,
    "mean": lambda s: s.mean(axis=-1),
    "median": lambda s: np.median(s, axis=-1),
}
"""Each maps ``[..., seeds]`` to ``[...]``."""


def resample(values: np.ndarray, reps: int, rng: np.random.Generator) -> np.ndarray:
    """``reps`` bootstrap resamples of one task's seeds (drawn with replacement). Shape: ``[reps, seeds]``."""
    return values[rng.integers(0, len(values), size=(reps, len(values)))]


def percentile_interval(draws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The central ``CONFIDENCE`` interval of bootstrap ``draws`` ``[reps, ...]``: (lower, upper)."""
    tail = 100 * (1 - CONFIDENCE) / 2
    low, high = np.percentile(draws, [tail, 100 - tail], axis=0)
    return low, high


def with_intervals(values: Sequence[float], reps: int = REPS) -> dict[str, list[float]]:
    """``{"iqm" | "mean" | "median": [point, lower, upper]}`` of one task's per-seed values.

    The interval is the 95 % percentile interval of ``reps`` bootstrap resamples of the seeds.
    Shape: ``values`` is ``[seeds]``, at least one.
    """
    values = np.asarray(values, dtype=float)
    draws = resample(values, reps, np.random.default_rng(SEED))
    estimates = {}
    for name, aggregate in AGGREGATES.items():
        low, high = percentile_interval(aggregate(draws))
        estimates[name] = [float(aggregate(values)), float(low), float(high)]
    return estimates


def scaled(estimates: dict[str, list[float]], by: float) -> dict[str, list[float]]:
    """``estimates`` divided by a positive ``by``: IQM, mean, median and their percentiles scale with it."""
    return {name: [v / by for v in values] for name, values in estimates.items()}


def fractions_at_least(ratios: Sequence[float], thresholds: Sequence[float] = THRESHOLDS) -> dict[str, float]:
    """``{"0.5": share of seeds with ratio ≥ 0.5, …}``."""
    ratios = np.asarray(ratios, dtype=float)
    return {f"{t:g}": float(np.mean(ratios >= t)) for t in thresholds}


def share_above(ratios: np.ndarray, taus: np.ndarray) -> np.ndarray:
    """At each τ, the share of seeds whose ratio exceeds it. Shape: ``[..., seeds]`` → ``[..., taus]``."""
    return np.mean(ratios[..., :, None] > taus, axis=-2)


def profile(
    ratios: Sequence[Sequence[float]], taus: np.ndarray = PROFILE_TAUS, reps: int = 2_000
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The performance profile over tasks: at each τ, the share of runs whose ratio exceeds τ.

    Each task weighs the same whatever its number of seeds (the share within each task, averaged over
    tasks); the band is the 95 % interval of a bootstrap that resamples each task's seeds on their own.
    Shape: ``ratios`` is ``[tasks][seeds of the task]``; returns ``(profile, lower, upper)``, each ``[taus]``.
    """
    tasks = [np.asarray(r, dtype=float) for r in ratios]
    rng = np.random.default_rng(SEED)
    point = np.mean([share_above(t, taus) for t in tasks], axis=0)
    draws = np.mean([share_above(resample(t, reps, rng), taus) for t in tasks], axis=0)  # [reps, taus]
    low, high = percentile_interval(draws)
    return point, low, high
