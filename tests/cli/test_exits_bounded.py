"""Every error line is bounded in length: :func:`rlpipe.cli.exits.bounded` and the CLI's printing path."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from rlpipe.cli import cli
from rlpipe.cli.exits import MAX_LINE, bounded


def test_a_short_line_is_left_as_it_is():
    assert bounded("--out: x already exists") == "--out: x already exists"
    assert bounded("x" * MAX_LINE) == "x" * MAX_LINE


@pytest.mark.parametrize("length", [MAX_LINE + 1, 5_000, 15_000_000])
def test_a_long_line_keeps_head_and_tail_and_counts_what_it_left_out(length):
    line = "H" * 10 + "." * (length - 20) + "T" * 10
    short = bounded(line)
    assert len(short) <= MAX_LINE
    head, _, rest = short.partition(" … (")
    count, _, tail = rest.partition(" characters left out) … ")
    assert head.startswith("H" * 10) and tail.endswith("T" * 10)
    assert len(head) + int(count) + len(tail) == length  # what is kept and what was left out add up
    assert len(head) > len(tail) > 0


def test_a_tiny_limit_still_says_how_much_it_left_out():
    assert bounded("abcdefghij" * 10, limit=5) == " … (100 characters left out) … "


def test_the_cli_prints_an_over_long_message_bounded(tmp_path):
    dataset_id = "a" * 5_000 + "!"
    result = CliRunner().invoke(
        cli,
        ["dataset", str(tmp_path / "run"), "--format", "minari", "--out", str(tmp_path / "out")]
        + ["--dataset-id", dataset_id],
    )
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1, lines
    assert len(lines[0]) <= MAX_LINE
    assert lines[0].startswith("Error: --dataset-id: 'aaaa")
    assert "characters left out" in lines[0]
    assert lines[0].endswith(
        "is not a Minari dataset id; expected (namespace/)name-vN, e.g. rlpipe/cartpole/rollouts-v0"
    )


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["run", "params.yaml", "--" + "x" * 5_000], "No such option '--xxxx"),
        (["y" * 5_000], "No such command 'yyyy"),
        (["inspect", "data", "--env", "z" * 5_000], "Invalid value for '--env': 'zzzz"),
    ],
)
def test_clicks_own_usage_errors_are_bounded(args, says):
    """click prints an unknown option or command, or a bad value, itself: its message is cut too."""
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert all(len(line) <= MAX_LINE for line in lines), [len(line) for line in lines]
    error = [line for line in lines if line.startswith("Error: ")]
    assert len(error) == 1 and says in error[0] and "characters left out" in error[0], error
