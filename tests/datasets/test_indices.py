"""``--envs`` as spans: parsed, merged and checked without expanding a range into its indices."""

from __future__ import annotations

import itertools

import pytest

from rlpipe.config import ConfigError
from rlpipe.datasets import Selection
from rlpipe.datasets.indices import EnvIndices


def test_indices_and_ranges_become_merged_spans():
    envs = EnvIndices.parse("9, 0,2,5:7,3:4")
    assert envs.spans == ((0, 0), (2, 7), (9, 9))  # 2 and 3:4 and 5:7 touch: one span
    assert list(envs) == [0, 2, 3, 4, 5, 6, 7, 9]
    assert str(envs) == "0,2:7,9" and envs.last == 9
    assert 4 in envs and 8 not in envs


def test_a_huge_range_stays_two_numbers():
    envs = EnvIndices.parse("0:100000000000")
    assert envs.spans == ((0, 100_000_000_000),) and envs.last == 100_000_000_000
    assert str(envs) == "0:100000000000"
    assert 99_999_999_999 in envs
    assert list(itertools.islice(envs, 3)) == [0, 1, 2]  # iterated lazily


@pytest.mark.parametrize("text", ["3:1", "0,a", "", "-1", "1:", "1:2:3", "1" * 5000])
def test_malformed_envs_are_refused(text):
    with pytest.raises(ValueError, match="expected env indices and ranges A:B"):
        EnvIndices.parse(text)


def test_a_selection_takes_a_tuple_of_indices_as_spans():
    assert Selection(envs=(5, 1, 1)).envs == EnvIndices(((1, 1), (5, 5)))
    with pytest.raises(ConfigError, match="--envs"):
        Selection(envs=(-1,))
    with pytest.raises(ConfigError, match="--envs"):
        Selection(envs=())
