"""``curve.csv``: columns fixed by the first row, widened once for a metric first seen later."""

from __future__ import annotations

import csv

from rlpipe.tracking.console import MetricsFiles


def rows(path):
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def test_a_metric_first_logged_later_widens_the_curve_with_empty_earlier_cells(tmp_path):
    files = MetricsFiles(tmp_path)
    files.append_curve({"iteration": 1, "env_steps": 8, "train/return": 1.0})
    files.append_curve({"iteration": 2, "env_steps": 16, "train/return": 2.0, "eval/success_rate": 0.5})
    files.append_curve({"iteration": 3, "env_steps": 24, "train/return": 3.0})
    got = rows(files.curve_path)
    assert [r["iteration"] for r in got] == ["1", "2", "3"]
    assert [r["eval/success_rate"] for r in got] == ["", "0.5", ""]
    assert [r["train/return"] for r in got] == ["1", "2", "3"]
    assert not list(tmp_path.glob(".*tmp*"))  # the rewrite left no temporary behind


def test_columns_of_a_resumed_curve_are_kept_and_widened(tmp_path):
    first = MetricsFiles(tmp_path)
    first.append_curve({"iteration": 1, "env_steps": 8, "train/return": 1.0})
    resumed = MetricsFiles(tmp_path, fields=["iteration", "env_steps", "train/return"])
    resumed.append_curve({"iteration": 2, "env_steps": 16, "train/return": 2.0, "eval/return_mean": 7.0})
    with resumed.curve_path.open(newline="") as fh:
        assert next(csv.reader(fh)) == ["iteration", "env_steps", "train/return", "eval/return_mean"]
    assert [r["eval/return_mean"] for r in rows(resumed.curve_path)] == ["", "7"]
