"""benchmarks/_aggregate.py: IQM, stratified-bootstrap intervals, seed shares and profile, worked by hand."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def agg() -> ModuleType:
    spec = importlib.util.spec_from_file_location("zoo_aggregate", ROOT / "benchmarks" / "_aggregate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_iqm_cuts_a_quarter_of_the_seeds_off_each_end(agg: ModuleType):
    assert agg.iqm(np.arange(1, 11)) == pytest.approx(5.5)  # 10 seeds: 2 cut each end, mean of 3..8
    assert agg.iqm([1, 2, 3, 100]) == pytest.approx(2.5)  # 4 seeds: 1 cut each end; the mean would be 26.5
    assert agg.iqm([1, 2, 6]) == pytest.approx(3.0)  # 3 seeds: floor(0.75) = 0 cut, the plain mean
    assert agg.iqm(np.array([[1, 2, 3, 100], [4, 4, 4, 4]])).tolist() == [2.5, 4.0]  # along the last axis


def test_the_bootstrap_interval_is_the_percentile_interval_of_the_resampled_seeds(agg: ModuleType):
    # Seeds [0, 0, 0, 10]: a resample holds k tens, k ~ Binomial(4, 1/4): P(k=0) = 81/256, P(k<=2) = 243/256,
    # P(k<=3) = 255/256. Its mean is 2.5 k: the 2.5th percentile is 0 (P(k=0) > 0.025) and the 97.5th is 7.5
    # (P(k<=2) = 0.949 < 0.975 <= P(k<=3)). Its IQM and median are the mean of the middle two sorted
    # values: 0 for k <= 1, 5 for k = 2, 10 for k >= 3; P(k>=3) = 13/256 = 0.051 > 0.025: upper bound 10.
    estimates = agg.with_intervals([0, 0, 0, 10])
    assert estimates == {"iqm": [0.0, 0.0, 10.0], "mean": [2.5, 0.0, 7.5], "median": [0.0, 0.0, 10.0]}
    assert agg.with_intervals([0, 0, 0, 10]) == estimates  # the generator is seeded: the same JSON again
    assert agg.with_intervals([5.0]) == {name: [5.0, 5.0, 5.0] for name in ("iqm", "mean", "median")}


def test_an_interval_never_reaches_past_the_lowest_or_highest_seed(agg: ModuleType):
    values = [1_794.0, 3_536.0, 3_615.0]
    for point, low, high in agg.with_intervals(values).values():
        assert min(values) <= low <= point <= high <= max(values)


def test_the_ratios_intervals_are_the_returns_divided_by_the_reference(agg: ModuleType):
    returns, reference = [1_407.0, 3_900.0, 4_100.0, 5_200.0], 3_478.8
    ratios = agg.with_intervals([r / reference for r in returns])
    for name, values in agg.scaled(agg.with_intervals(returns), reference).items():
        assert values == pytest.approx(ratios[name])


def test_the_shares_of_seeds_count_a_seed_at_the_threshold(agg: ModuleType):
    assert agg.fractions_at_least([0.4, 0.5, 0.79, 0.8, 1.2]) == {"0.5": 0.8, "0.8": 0.4}
    assert agg.fractions_at_least([0.40, 1.1, 1.2]) == pytest.approx({"0.5": 2 / 3, "0.8": 2 / 3})


def test_the_profile_resamples_within_each_task(agg: ModuleType):
    # Each task's seeds agree, so a bootstrap stratified by task always draws the same data: no band.
    # Pooling the four runs instead would draw four 1s a sixteenth of the time and widen it at tau = 2.
    point, low, high = agg.profile([[1, 1], [3, 3]], taus=np.array([0.5, 2.0, 4.0]))
    assert point.tolist() == low.tolist() == high.tolist() == [1.0, 0.5, 0.0]


def test_the_profile_weighs_each_task_the_same_whatever_its_seeds(agg: ModuleType):
    # tau 0.5: task A 2 of 3 seeds above, task B 2 of 2 -> (2/3 + 1) / 2; tau 0.8: (2/3 + 0) / 2.
    point, low, high = agg.profile([[0.3, 1.2, 0.9], [0.6, 0.7]], taus=np.array([0.5, 0.8]))
    assert point == pytest.approx([5 / 6, 1 / 3])
    assert (low <= point).all() and (point <= high).all() and low[1] == 0.0
