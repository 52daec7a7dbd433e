"""``rlpipe envs``: every id, grouped by backend."""

from __future__ import annotations

import json
import subprocess
import sys

from click.testing import CliRunner

from rlpipe.cli import cli


def test_envs_lists_each_group_as_json_and_text() -> None:
    result = CliRunner().invoke(cli, ["envs", "--backend", "torch", "--backend", "envpool", "--json"])
    assert result.exit_code == 0, result.output
    listing = json.loads(result.output)
    assert list(listing) == ["torch", "envpool"]
    assert {"CartPole", "Pendulum"} <= set(listing["torch"])
    assert {"HalfCheetah-v5", "CheetahRun-v1", "PandaPickCube-v1"} <= set(listing["envpool"])
    text = CliRunner().invoke(cli, ["envs", "--backend", "gymnasium"]).output
    assert text.startswith("gymnasium (") and "\n  CartPole-v1\n" in text


def test_unknown_group_is_a_usage_error() -> None:
    result = CliRunner().invoke(cli, ["envs", "--backend", "isaac"])
    assert result.exit_code == 2 and "'isaac' is not one of" in result.output


def test_importing_the_cli_loads_no_simulator() -> None:
    code = "import sys, rlpipe.cli; print('envpool' in sys.modules, 'rlpipe.envs' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
