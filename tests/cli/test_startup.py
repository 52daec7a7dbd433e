"""Start-up: ``rlpipe --help``, each command's ``--help`` and a params error load no heavy module.

Each case runs the real console entry point in a fresh interpreter and dumps ``sys.modules`` at
exit, so an import anywhere on the path (the CLI, config, the package ``__init__`` files) fails
the test, whatever the machine's speed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rlpipe.cli import cli

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "tensordict", "zarr", "mlflow", "dvc", "numpy", "gymnasium")
"""Modules a CLI answer that trains nothing must not import (numpy/gymnasium: torch's company)."""
COMMANDS = sorted(cli.commands)


def run_cli(args: list[str], tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """``rlpipe ARGS`` in a fresh interpreter; returns the result and the modules it imported."""
    dump = tmp_path / "modules.json"
    script = textwrap.dedent(f"""
        import atexit, json, sys
        atexit.register(lambda: open({str(dump)!r}, "w").write(json.dumps(sorted(sys.modules))))
        sys.argv = ["rlpipe", *{args!r}]
        from rlpipe.cli import main
        main()
    """)
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    return result, set(json.loads(dump.read_text()))


def heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in HEAVY)


def test_help_imports_nothing_heavy(tmp_path):
    result, modules = run_cli(["--help"], tmp_path)
    assert result.returncode == 0 and "Commands:" in result.stdout, result.stderr
    assert heavy(modules) == []
    assert "pydantic" not in modules and "rlpipe.config" not in modules  # not even config


@pytest.mark.parametrize("command", COMMANDS)
def test_command_help_imports_nothing_heavy(tmp_path, command):
    result, modules = run_cli([command, "--help"], tmp_path)
    assert result.returncode == 0 and "Usage:" in result.stdout, result.stderr
    assert heavy(modules) == []


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("trainer.num_envs=0", "trainer.num_envs: Input should be greater than or equal to 1"),
        ("tracking.backend=wandb", "tracking.backend: Input should be 'mlflow' or 'none'"),
        ("trainer.stop_when=[{metric: eval/return_mean}]", "trainer.stop_when.0: give a bound"),
        ("algorithm.cfg.clip_coef=-1", "algorithm.cfg.clip_coef: Input should be greater than 0"),
        ("algorithm.cfg.schedule=adaptive", "algorithm.cfg.desired_kl: required when schedule is adaptive"),
        ("algorithm.cfg.no_such_key=1", "algorithm.cfg.no_such_key: unknown key"),
    ],
)
def test_params_error_is_one_line_exit_2_and_imports_nothing_heavy(tmp_path, override, message):
    result, modules = run_cli(
        ["run", "params.yaml", "--set", f"trainer.data_dir={tmp_path / 'data'}", "--set", override], tmp_path
    )
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr
    assert heavy(modules) == []
    assert not (tmp_path / "data").exists()


def test_envs_lists_without_torch(tmp_path):
    result, modules = run_cli(["envs"], tmp_path)
    assert result.returncode == 0 and "CartPole" in result.stdout, result.stderr
    # listing gymnasium's ids needs gymnasium's registry (and numpy under it), never the training stack
    assert [m for m in heavy(modules) if m.split(".")[0] not in ("gymnasium", "numpy")] == []


def test_grpo_params_are_checked_at_load_too(tmp_path):
    result, modules = run_cli(
        ["run", "configs/grpo_cartpole.yaml", "--set", "algorithm.cfg.group_size=1"], tmp_path
    )
    assert result.returncode == 2 and "algorithm.cfg.group_size: must be >= 2" in result.stderr, result.stderr
    assert heavy(modules) == []


def test_a_run_reaches_its_first_iteration_without_zarr(tmp_path):
    """zarr (0.25 s) is first imported by the rollout writer, after iteration 1's rollout is collected."""
    script = textwrap.dedent(f"""
        import json, sys
        from rlpipe.config import load
        from rlpipe.trainer import Trainer
        cfg = load({str(ROOT / "params.yaml")!r}, ["trainer.data_dir={tmp_path}", "tracking.backend=none"])
        exp = Trainer(cfg).parts
        print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] == "zarr")))
    """)
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []
