"""``rlpipe exps``: DVC's experiments as one narrow table of the changed params and the metrics."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from rlpipe.cli import cli
from rlpipe.dvc.table import changed_params, experiment_rows, render, short_names

SHOWN = Path(__file__).resolve().parents[1] / "fixtures" / "exp_show.json"
"""``dvc exp show --json`` of a project with experiments e1 (clip_coef 0.1) and e2 (then lr 0.003)."""


def test_rows_follow_dvc_commits_then_their_experiments():
    rows = experiment_rows(json.loads(SHOWN.read_text()))
    assert [row.name for row in rows] == ["workspace", "master", "  e2", "  e1"]
    assert rows[1].params["algorithm.cfg.clip_coef"] == 0.2 and rows[1].metrics == {}
    assert rows[2].metrics["eval/return_mean"] == 10.0  # the first metrics file that has it
    assert changed_params(rows) == ["algorithm.cfg.clip_coef", "algorithm.cfg.learning_rate"]


def test_short_names_stay_unique():
    names = short_names(["algorithm.cfg.lr", "replay.algorithm.cfg.lr", "trainer.seed"])
    # the first path ends the second: both keep their whole names
    assert names == {
        "algorithm.cfg.lr": "algorithm.cfg.lr",
        "replay.algorithm.cfg.lr": "replay.algorithm.cfg.lr",
        "trainer.seed": "seed",
    }
    assert short_names(["a.x", "b.y"]) == {"a.x": "x", "b.y": "y"}


def test_the_table_fits_120_columns_and_shows_both_params_and_the_return():
    rows = experiment_rows(json.loads(SHOWN.read_text()))
    lines = render(rows, ("eval/return_mean",)).splitlines()
    assert max(len(line) for line in lines) <= 120
    assert lines[0].split() == ["Experiment", "clip_coef", "learning_rate", "eval/return_mean"]
    assert lines[1].split() == ["workspace", "0.1", "0.003", "10"]
    assert lines[2].split() == ["master", "0.2", "0.001", "-"]


def test_outside_a_dvc_project_it_is_one_line_and_exit_2(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["exps"])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "Error: rlpipe exps: dvc exp show failed: you are not inside of a DVC repository"
    )
