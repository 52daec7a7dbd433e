"""Stored rollouts as datasets: episodes from the ``[N, T+1]`` stores, for LeRobot and Minari writers."""

from __future__ import annotations

from rlpipe.datasets.episodes import DatasetSource, Episode, Selection, Summary, open_source, read_episodes

__all__ = ["DatasetSource", "Episode", "Selection", "Summary", "open_source", "read_episodes"]
